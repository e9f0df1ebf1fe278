// The `tinymlir` command: GPT-2 text generation on the public C API.
//
// Built twice from this file: `tinymlir`, linked to libtinymlir.so (compiles), and
// `tinymlir-run` (TINYMLIR_CLI_RUNTIME_ONLY), linked only to libtinymlir_runtime.so: no LLVM
// in the process, so it runs where there is none, from a bundle `tinymlir compile` wrote.
//
//   tinymlir generate [options] [--] "prompt"     (or -p TEXT, or -f FILE, -f - for stdin)
//   tinymlir generate [options] --batch FILE      a prompt per line, generated together
//   tinymlir perplexity [options] -f FILE         the perplexity of a text (FILE, - for stdin)
//   tinymlir compile [--model DIR] [--target T] [--weights f32|f16|bf16|q8_0] --out DIR
//                    [--emit-ir IRDIR]
//                                                every program of the model, as a bundle;
//                                                --emit-ir writes each one's stages as text
//
// Options follow getopt_long's conventions: --opt value or --opt=value, the short forms of
// Usage() (-m DIR, -n4), options before or after the prompt, -- before a prompt that starts
// with -. The prompt and its continuation stream to stdout as tokens are produced; a short
// report (load, compile, prefill, decode speed) goes to stderr. Arguments are checked
// strictly (whole numbers in digits, no empty values, options written in full, no option of
// the other subcommand, no conflicting options), and a failed write to stdout is an error
// (exit status 1). Messages are the command's own: the library's function names are left
// out of what it reports (CliMessage). Without --model the embedded default model
// (share/tinymlir/models/kjv-tiny next to the binary, in the build tree or an install) runs.
// An empty prompt starts the text from <|endoftext|>, as Hugging Face and llama.cpp do.
//
// The command samples by default (temperature 0.8, top-k 40, top-p 0.95, seed 42: a small
// model decoded greedily repeats itself), as llama.cpp does, but with a fixed seed so a run
// can be repeated; --greedy is the exact mode the golden tests use. The library's own
// default (tm_generate_options_init) stays greedy.
#include <getopt.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "tinymlir/gpt2.h"
#include "tinymlir/gpt2.hpp"

namespace {

#ifdef TINYMLIR_CLI_RUNTIME_ONLY
constexpr bool kHasCompiler = false;
constexpr const char *kCommand = "tinymlir-run";
#else
constexpr bool kHasCompiler = true;
constexpr const char *kCommand = "tinymlir";
#endif

// The command's sampling defaults (see above).
constexpr float kDefaultTemperature = 0.8f;
constexpr int32_t kDefaultTopK = 40;
constexpr float kDefaultTopP = 0.95f;
constexpr uint64_t kDefaultSeed = 42;

// The usage text; %d is the library's default token count (tm_generate_options_init).
const char kUsageGenerate[] =
    "usage: %s generate [options] [--] \"prompt\"\n"
    "       %s generate [options] -f FILE       (the prompt from FILE; - for standard input)\n"
    "       %s generate [options] --batch FILE  (a prompt per line, generated together)\n";
const char kUsagePerplexity[] =
    "       %s perplexity [options] -f FILE     (FILE's text, - for standard input; or a\n"
    "                        text as the last argument)\n";
const char kUsageCompile[] =
    "       tinymlir compile [--model DIR] [--target T] [--weights W] --out DIR\n"
    "                        [--emit-ir IRDIR]\n";
const char kUsageOptions[] =
    "       %s --help | --version\n"
    "Options take their value as --opt VALUE or --opt=VALUE (-n 4 or -n4 for short ones).\n"
    "  -m, --model DIR        Hugging Face GPT-2 folder (default: the embedded kjv-tiny)\n"
    "      --bundle DIR       (generate) run the programs of a bundle (tinymlir compile)\n"
    "                         instead of compiling; it runs on the target it was compiled for\n"
    "      --target T         where the programs run: %s (default cpu)\n"
    "      --weights f32|f16|bf16|q8_0  the dtype the weight matrices are held in (default:\n"
    "                         as the checkpoint stores them, or as the --bundle was compiled;\n"
    "                         f16/bf16 halve memory and decode traffic; q8_0, 8-bit blocks\n"
    "                         quantized at load, CPU only, cut them to 27%%)\n"
    "  -t, --threads N        threads for the CPU kernels (default: one per CPU this process\n"
    "                         may run on; TINYMLIR_NUM_THREADS, which this sets)\n"
    "      --verbose          where the compile time went, the disk cache's state, what a\n"
    "                         decode token asked of the GPU, where the weights came from (and\n"
    "                         their huge pages), and the process's peak resident memory\n";
const char kUsageCompileOptions[] =
    "      --out DIR          (compile) where to write the bundle\n"
    "      --emit-ir IRDIR    (compile) also write every stage of every program, as text\n";
const char kUsageGenerateOptions[] =
    "  -p, --prompt TEXT      (generate) the prompt (instead of the last argument)\n"
    "  -f, --file FILE        the prompt (perplexity: the text) is FILE's text (- reads\n"
    "                         standard input),\n"
    "                         less one final newline\n"
    "                         An empty prompt starts the text from <|endoftext|>.\n"
    "      --batch FILE       (generate) FILE's lines (- reads standard input) are prompts,\n"
    "                         generated together, each as it would be alone (the same\n"
    "                         options and seed); prints a line per prompt, in order (a\n"
    "                         newline of the text as \\n, a backslash as \\\\); with --ids the\n"
    "                         lines are ids. Up to %d prompts decode at once; a longer file\n"
    "                         runs in batches of that many\n"
    "  -n, --tokens N         (generate) tokens to generate (default %d)\n"
    "      --greedy           always the most likely token (exact; what the golden tests use)\n"
    "      --temperature T    sampling temperature (default 0.8; 0 = greedy)\n"
    "      --top-k K          sample among the K most likely tokens (default 40; 0 = all)\n"
    "      --top-p P          sample among the smallest set with probability >= P\n"
    "                         (default 0.95)\n"
    "  -s, --seed S           random seed for sampling, 0 to 2^64-1 (default 42)\n"
    "      --no-kv-cache      recompute the whole prefix for every token\n"
    "      --stop-at-eos      stop after the end-of-text token\n"
    "      --ids              the prompt (or perplexity's text) is token ids (\"1 2 3\");\n"
    "                         generate prints ids, not text\n"
    "      --stride N         (perplexity) tokens from one window's start to the next's, for\n"
    "                         a text longer than the context (default: half the context)\n"
    "      --                 the next argument is the prompt, even if it starts with -\n"
    "  -h, --help             this text\n"
    "  -V, --version          the version\n";

// The model's load report (tm_model_load_report), a "[tinymlir] " line each.
void PrintLoadReport(const tm_model *model) {
  size_t n = 0;
  if (tm_model_load_report(model, nullptr, 0, &n) != TM_OK) return;
  std::string text(n + 1, '\0');
  if (tm_model_load_report(model, &text[0], text.size(), &n) != TM_OK) return;
  text.resize(n);
  for (size_t at = 0; at < text.size();) {
    const size_t end = text.find('\n', at);
    std::fprintf(stderr, "[tinymlir] %s\n", text.substr(at, end - at).c_str());
    at = end == std::string::npos ? text.size() : end + 1;
  }
}

// The subcommands, as bits: an option goes with a set of them.
enum Command : unsigned { kGenerate = 1, kCompile = 2, kPerplexity = 4 };
const char *CommandName(unsigned command) {
  return command == kCompile ? "compile" : command == kPerplexity ? "perplexity" : "generate";
}

struct Args {
  Command command = kGenerate;
  bool compile = false;     // `tinymlir compile`
  bool perplexity = false;  // `tinymlir perplexity`
  int64_t stride = 0;       // perplexity's window stride; 0: half the context
  std::string model;
  std::string bundle;
  std::string out;
  std::string emit_ir;
  tm_target target = TM_TARGET_CPU;
  bool target_given = false;
  tm_dtype weights = static_cast<tm_dtype>(0);  // as stored
  int threads = 0;                               // 0: the library's choice
  std::string prompt;
  std::string prompt_from;  // how the prompt was given ("the prompt argument", "-p", "-f")
  std::string batch;        // --batch: the file of prompts, a line each
  tm_generate_options options;
  bool greedy = false;
  std::string sampling_flag;  // the last of --temperature, --top-k, --top-p, --seed given
  bool ids = false;
  bool verbose = false;
};

[[noreturn]] void Die(const std::string &message) {
  std::fprintf(stderr, "%s: %s\n", kCommand, message.c_str());
  std::exit(1);
}

// The library's message in the command's words. The library names the C function that
// failed ("tm_invoke: ...") and, in hints, C functions to call; a user of the command calls
// none of them. Function prefixes are dropped, the hints the command can act on become its
// own options, a name in parentheses is dropped, and any other name loses its tm_ prefix.
std::string CliMessage(std::string message) {
  static const std::regex kPrefix("\\btm_[a-z0-9_]+: ");
  static const std::regex kAside(" ?\\((see )?tm_[a-z0-9_.]+\\)");
  static const std::regex kName("\\btm_([a-z0-9_]+)");
  static const struct {
    const char *api;
    const char *cli;
  } kWords[] = {
      {"tm_model_compile_bundle", "`tinymlir compile --out DIR`"},
      {"tm_generate callback", "generation's output"},
      {"sizeof(tm_model_stats)", "the statistics' size"},
      {"options.bundle_dir", "--bundle"},
      {"options.weights", "--weights"},
      {"options.target", "--target"},
  };
  message = std::regex_replace(message, kPrefix, "");
  for (const auto &w : kWords)
    for (size_t at; (at = message.find(w.api)) != std::string::npos;)
      message.replace(at, std::strlen(w.api), w.cli);
  message = std::regex_replace(message, kAside, "");
  return std::regex_replace(message, kName, "$1");
}

void Check(tm_status s, const char *what) {
  if (s != TM_OK) Die(std::string(what) + ": " + CliMessage(tm_last_error()));
}

std::string TargetName(tm_target target) {
  tm_target_info info;
  info.struct_size = sizeof info;
  return tm_target_get_info(target, &info) == TM_OK ? info.name : "?";
}

// The library's targets by name (tm_target_get_info), joined by `separator`.
std::string TargetNames(const char *separator) {
  std::string names;
  for (int32_t t = 0; t < tm_target_count(); ++t) {
    tm_target_info info;
    info.struct_size = sizeof info;
    if (tm_target_get_info(static_cast<tm_target>(t), &info) != TM_OK) continue;
    names += (names.empty() ? "" : separator) + std::string(info.name);
  }
  return names;
}

// A whole number in [lo, hi] written in decimal digits only: no sign, fraction, exponent,
// hex prefix or spaces (strtod would take "1.5", "nan" and "0x3" and round them silently).
uint64_t ParseInteger(const char *flag, const char *text, uint64_t lo, uint64_t hi) {
  uint64_t v = 0;
  bool ok = *text != '\0';
  for (const char *p = text; ok && *p; ++p) {
    ok = *p >= '0' && *p <= '9';
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    ok = ok && v <= (UINT64_MAX - digit) / 10;
    if (ok) v = v * 10 + digit;
  }
  if (!ok || v < lo || v > hi)
    Die(std::string(flag) + " expects a whole number from " + std::to_string(lo) + " to " +
        std::to_string(hi) + ", got '" + text + "'");
  return v;
}

// A finite decimal number in [lo, hi] (NaN and infinities are refused: NaN passes every
// range comparison).
double ParseReal(const char *flag, const char *text, double lo, double hi) {
  char *end = nullptr;
  errno = 0;
  const double v = std::strtod(text, &end);
  const bool hex = std::strpbrk(text, "xX") != nullptr;
  if (errno || end == text || *end || hex || !std::isfinite(v) || v < lo || v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "from %.10g to %.10g", lo, hi);
    Die(std::string(flag) + " expects a number " + range + ", got '" + text + "'");
  }
  return v;
}

std::string Usage() {
  tm_generate_options defaults;
  tm_generate_options_init(&defaults);
  std::string text;
  char line[2048];
  std::snprintf(line, sizeof line, kUsageGenerate, kCommand, kCommand, kCommand);
  text += line;
  std::snprintf(line, sizeof line, kUsagePerplexity, kCommand);
  text += line;
  if (kHasCompiler) text += kUsageCompile;
  std::snprintf(line, sizeof line, kUsageOptions, kCommand, TargetNames(" or ").c_str());
  text += line;
  if (kHasCompiler) text += kUsageCompileOptions;
  std::snprintf(line, sizeof line, kUsageGenerateOptions, TM_MAX_BATCH_SEQUENCES,
                defaults.max_new_tokens);
  text += line;
  if (!kHasCompiler)
    text += "tinymlir-run has no compiler: it runs bundles that `tinymlir compile` wrote.\n";
  return text;
}

[[noreturn]] void Exit0(const std::string &text) {
  std::fputs(text.c_str(), stdout);
  std::exit(std::fflush(stdout) == 0 ? 0 : 1);
}

// The options, as getopt_long takes them. Values above 255 are long options without a
// short form.
enum OptionId {
  kOptModel = 'm', kOptPrompt = 'p', kOptFile = 'f', kOptTokens = 'n', kOptThreads = 't',
  kOptSeed = 's', kOptHelp = 'h', kOptVersion = 'V',
  kOptBundle = 256, kOptOut, kOptEmitIr, kOptTarget, kOptWeights, kOptGreedy, kOptTemperature,
  kOptTopK, kOptTopP, kOptNoKvCache, kOptStopAtEos, kOptIds, kOptVerbose, kOptStride, kOptBatch,
};
const char kShortOptions[] = ":m:p:f:n:t:s:hV";  // ':' first: a missing value returns ':'
const option kLongOptions[] = {
    {"model", required_argument, nullptr, kOptModel},
    {"prompt", required_argument, nullptr, kOptPrompt},
    {"file", required_argument, nullptr, kOptFile},
    {"tokens", required_argument, nullptr, kOptTokens},
    {"threads", required_argument, nullptr, kOptThreads},
    {"seed", required_argument, nullptr, kOptSeed},
    {"help", no_argument, nullptr, kOptHelp},
    {"version", no_argument, nullptr, kOptVersion},
    {"bundle", required_argument, nullptr, kOptBundle},
    {"out", required_argument, nullptr, kOptOut},
    {"emit-ir", required_argument, nullptr, kOptEmitIr},
    {"target", required_argument, nullptr, kOptTarget},
    {"weights", required_argument, nullptr, kOptWeights},
    {"greedy", no_argument, nullptr, kOptGreedy},
    {"temperature", required_argument, nullptr, kOptTemperature},
    {"top-k", required_argument, nullptr, kOptTopK},
    {"top-p", required_argument, nullptr, kOptTopP},
    {"no-kv-cache", no_argument, nullptr, kOptNoKvCache},
    {"stop-at-eos", no_argument, nullptr, kOptStopAtEos},
    {"ids", no_argument, nullptr, kOptIds},
    {"verbose", no_argument, nullptr, kOptVerbose},
    {"stride", required_argument, nullptr, kOptStride},
    {"batch", required_argument, nullptr, kOptBatch},
    {nullptr, 0, nullptr, 0},
};

// The subcommands option `id` goes with.
unsigned OptionCommands(int id) {
  switch (id) {
    case kOptOut: case kOptEmitIr: return kCompile;
    case kOptModel: case kOptTarget: case kOptWeights: case kOptThreads: case kOptVerbose:
    case kOptHelp: case kOptVersion: return kGenerate | kCompile | kPerplexity;
    case kOptBundle: case kOptPrompt: case kOptFile: case kOptIds:
      return kGenerate | kPerplexity;
    case kOptStride: return kPerplexity;
    default: return kGenerate;
  }
}

// "generate", "generate or perplexity": the subcommands of `commands`, in words.
std::string CommandNames(unsigned commands) {
  std::string names;
  for (unsigned c : {kGenerate, kCompile, kPerplexity})
    if (commands & c) names += (names.empty() ? "" : " or ") + std::string(CommandName(c));
  return names;
}

// The long name of option `id`, as "--name".
std::string LongName(int id) {
  for (const option *o = kLongOptions; o->name; ++o)
    if (o->val == id) return std::string("--") + o->name;
  return std::string("-") + static_cast<char>(id);
}

// The whole of `path` (standard input for "-"); `flag` names the option in an error.
std::string ReadWholeFile(const char *flag, const std::string &path) {
  std::FILE *f = path == "-" ? stdin : std::fopen(path.c_str(), "rb");
  if (!f) Die(std::string(flag) + ": cannot open " + path + ": " + std::strerror(errno));
  std::string text;
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) text.append(buf, n);
  const bool failed = std::ferror(f) != 0;
  const int error = errno;
  if (f != stdin) std::fclose(f);
  if (failed)
    Die(std::string(flag) + ": cannot read " +
        (path == "-" ? std::string("standard input") : path) + ": " + std::strerror(error));
  return text;
}

// The whole of `path` (standard input for "-"), less one final newline ("\n" or "\r\n"):
// a file written by an editor or `echo` ends with one that is no part of the prompt.
std::string ReadPromptFile(const std::string &path) {
  std::string text = ReadWholeFile("-f", path);
  if (!text.empty() && text.back() == '\n') text.pop_back();
  if (!text.empty() && text.back() == '\r') text.pop_back();
  return text;
}

Args ParseArgs(int argc, char **argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "--help" || command == "-h") Exit0(Usage());
  if (command == "--version" || command == "-V")
    Exit0(std::string(kCommand) + " " + tm_version() + "\n");
  if (command != "generate" && command != "compile" && command != "perplexity")
    Die((command.empty() ? "no command given" : "unknown command '" + command + "'") +
        " (generate, " + (kHasCompiler ? "compile " : "") + "or perplexity)\n" + Usage());
  Args a;
  a.command = command == "compile" ? kCompile : command == "perplexity" ? kPerplexity : kGenerate;
  a.compile = a.command == kCompile;
  a.perplexity = a.command == kPerplexity;
  if (!kHasCompiler && a.compile)
    Die("this command has no compiler; write the bundle with `tinymlir compile --out DIR`");
  tm_generate_options_init(&a.options);
  a.options.temperature = kDefaultTemperature;
  a.options.top_k = kDefaultTopK;
  a.options.top_p = kDefaultTopP;
  a.options.seed = kDefaultSeed;

  // The prompt, from one place only.
  const auto set_prompt = [&](const std::string &from, const std::string &text) {
    if (!a.prompt_from.empty())
      Die(a.prompt_from == from
              ? "more than one prompt given (quote the prompt)"
              : "more than one prompt given: " + a.prompt_from + " and " + from);
    a.prompt_from = from;
    a.prompt = text;
  };

  // getopt_long sees the subcommand as its program name. It takes options before and after
  // the prompt, and stops at "--".
  int sub_argc = argc - 1;
  char **sub_argv = argv + 1;
  opterr = 0;
  optind = 1;
  for (;;) {
    int index = -1;
    const int id = getopt_long(sub_argc, sub_argv, kShortOptions, kLongOptions, &index);
    if (id == -1) break;
    // The argument as typed: the option, or the option and its value when they came apart.
    const char *typed = optarg && optind >= 2 && optarg == sub_argv[optind - 1]
                            ? sub_argv[optind - 2]
                            : sub_argv[optind - 1];
    const std::string name = std::string(typed).substr(0, std::string(typed).find('='));
    if (id == '?') {
      if (optopt == 0 || (optopt < 256 && !std::strchr(kShortOptions, optopt)))
        Die("unknown option " + (optopt == 0 ? name : std::string("-") +
                                                           static_cast<char>(optopt)) +
            "\n" + Usage());
      Die(LongName(optopt) + " takes no value, got '" + typed + "'");
    }
    if (id == ':') Die(std::string(sub_argv[optind - 1]) + " needs a value");
    // An abbreviation (--tok for --tokens) is refused: it would change meaning when an
    // option that starts the same way is added.
    if (index >= 0 && name != std::string("--") + kLongOptions[index].name)
      Die(name + ": write the option in full (" + LongName(id) + ")");
    const std::string option = LongName(id);
    // An option of another subcommand is an error, not silently ignored.
    if (!(OptionCommands(id) & a.command))
      Die(option + " goes with " + CommandNames(OptionCommands(id)) + ", not " +
          CommandName(a.command));
    // A value is not empty (an unset shell variable must not quietly mean the default),
    // except a prompt's: an empty prompt starts from <|endoftext|>.
    if (optarg && *optarg == '\0' && id != kOptPrompt)
      Die(option + " needs a value, got an empty string");
    switch (id) {
      case kOptHelp: Exit0(Usage());
      case kOptVersion: Exit0(std::string(kCommand) + " " + tm_version() + "\n");
      case kOptModel: a.model = optarg; break;
      case kOptBundle: a.bundle = optarg; break;
      case kOptOut: a.out = optarg; break;
      case kOptEmitIr: a.emit_ir = optarg; break;
      case kOptPrompt: set_prompt("-p", optarg); break;
      case kOptFile: set_prompt("-f", ReadPromptFile(optarg)); break;
      case kOptTarget:
        if (tm_target_from_name(optarg, &a.target) != TM_OK)
          Die("--target expects " + TargetNames(" or ") + ", got '" + optarg + "'");
        a.target_given = true;
        break;
      case kOptWeights: {
        const std::string w = optarg;
        if (w != "f32" && w != "f16" && w != "bf16" && w != "q8_0")
          Die("--weights expects f32, f16, bf16 or q8_0, got '" + w + "'");
        a.weights = w == "f16"    ? TM_F16
                    : w == "bf16" ? TM_BF16
                    : w == "q8_0" ? TM_Q8_0
                                  : TM_F32;
        break;
      }
      case kOptThreads:
        a.threads = static_cast<int>(ParseInteger("--threads", optarg, 1, 4096));
        break;
      case kOptTokens:
        a.options.max_new_tokens =
            static_cast<int32_t>(ParseInteger("--tokens", optarg, 0, INT32_MAX));
        break;
      case kOptTemperature:
        a.options.temperature = static_cast<float>(ParseReal("--temperature", optarg, 0, 1e6));
        a.sampling_flag = "--temperature";
        break;
      case kOptTopK:
        a.options.top_k = static_cast<int32_t>(ParseInteger("--top-k", optarg, 0, INT32_MAX));
        a.sampling_flag = "--top-k";
        break;
      case kOptTopP:
        // At least the smallest normal float: a smaller value would round to 0 in the option.
        a.options.top_p = static_cast<float>(ParseReal("--top-p", optarg, 1.1754944e-38, 1));
        a.sampling_flag = "--top-p";
        break;
      case kOptSeed:
        a.options.seed = ParseInteger("--seed", optarg, 0, UINT64_MAX);
        a.sampling_flag = "--seed";
        break;
      case kOptNoKvCache: a.options.use_kv_cache = 0; break;
      case kOptStopAtEos: a.options.stop_at_eos = 1; break;
      case kOptIds: a.ids = true; break;
      case kOptGreedy: a.greedy = true; break;
      case kOptVerbose: a.verbose = true; break;
      case kOptStride: a.stride = ParseInteger("--stride", optarg, 1, INT32_MAX); break;
      case kOptBatch: a.batch = optarg; break;
      default: Die("unknown option " + name + "\n" + Usage());
    }
  }
  for (int i = optind; i < sub_argc; ++i) set_prompt("the prompt argument", sub_argv[i]);
  if (a.greedy && !a.sampling_flag.empty())
    Die("--greedy does not sample: it cannot go with " + a.sampling_flag);
  if (a.greedy) a.options.temperature = 0.0f;
  if (a.target_given && !a.bundle.empty())
    Die("--target cannot go with --bundle: a bundle runs on the target it was compiled for");
  if (!kHasCompiler && a.bundle.empty())
    Die("this command has no compiler and runs bundles only: pass --bundle DIR (written by "
        "`tinymlir compile --out DIR`)");
  if (a.compile) {
    if (a.out.empty()) Die("compile needs --out DIR\n" + Usage());
    if (!a.prompt_from.empty()) Die("compile takes no prompt");
    return a;
  }
  if (a.perplexity) {
    if (a.prompt_from.empty()) Die("perplexity needs a text: -f FILE (- for standard input)");
    return a;
  }
  if (!a.batch.empty()) {
    if (!a.prompt_from.empty())
      Die("--batch takes its prompts from its file: it cannot go with " + a.prompt_from);
    if (!a.options.use_kv_cache) Die("--batch decodes with the KV cache: drop --no-kv-cache");
    return a;
  }
  if (a.prompt_from.empty())
    Die("no prompt given (\"\" starts the text from <|endoftext|>)\n" + Usage());
  return a;
}

// The embedded model: <dir of this binary>/../share/tinymlir/models/kjv-tiny. The build tree
// links share/ to the source's models/, an install copies them, so both find it.
std::string DefaultModelDir() {
  char exe[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  if (n <= 0) Die("cannot locate the tinymlir binary to find the default model; use --model");
  exe[n] = '\0';
  std::string dir(exe);
  dir = dir.substr(0, dir.rfind('/'));
  std::string model = dir + "/../share/tinymlir/models/kjv-tiny";
  if (access((model + "/config.json").c_str(), R_OK) != 0)
    Die("the default model is not at " + model + "; pass --model DIR");
  return model;
}

// <|endoftext|>, GPT-2's one special token (id 50256): where a text without a prompt
// starts, as in Hugging Face's and llama.cpp's generation. The library generates after a
// prompt of one token at least, and has no call that names the token: the command checks
// that the model's vocabulary has it at that id.
constexpr int32_t kEndOfText = 50256;

std::vector<int32_t> EndOfTextPrompt(tm_model *model) {
  const std::string expected = "<|endoftext|>";
  char text[32];
  size_t len = 0;
  const tm_status s = tm_detokenize(model, &kEndOfText, 1, text, sizeof text, &len);
  if (s == TM_ERROR_UNSUPPORTED)
    Die("the prompt is empty, and this model has no tokenizer to name <|endoftext|> (the "
        "token to start from): give token ids");
  Check(s, "the prompt is empty: reading <|endoftext|>, the token to start from");
  if (std::string(text, std::min(len, sizeof text)) != expected)
    Die("the prompt is empty, and this model's vocabulary has no <|endoftext|> at id " +
        std::to_string(kEndOfText) + " to start from; give a prompt");
  return {kEndOfText};
}

// Token ids: decimal digits separated by spaces, tabs, newlines or commas.
std::vector<int32_t> ParseIds(const std::string &text) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < text.size()) {
    if (std::strchr(" ,\t\n", text[i])) {
      ++i;
      continue;
    }
    const size_t end = text.find_first_of(" ,\t\n", i);
    const std::string id = text.substr(i, end == std::string::npos ? end : end - i);
    bool digits = id.size() <= 10;
    for (char c : id) digits = digits && c >= '0' && c <= '9';
    if (!digits || std::stoull(id) > INT32_MAX)
      Die("--ids: '" + id +
          "' is not a token id (ids are whole numbers from 0, separated by "
          "spaces or commas)");
    ids.push_back(static_cast<int32_t>(std::stoull(id)));
    i = end == std::string::npos ? text.size() : end;
  }
  return ids;
}

// Streams decoded text, holding back an incomplete UTF-8 sequence at the end so a
// character split across tokens is printed whole. The prompt is printed with the first
// token, not before the generation starts: an error found on the way (a bad option, a
// missing program) leaves nothing on stdout, and on a terminal the compile progress line
// does not write over it.
struct Streamer {
  tm_model *model;
  bool ids;
  std::string prompt;
  bool prompt_shown = false;
  std::string pending;
  int write_error = 0;  // errno of the first failed write to stdout

  static size_t CompletePrefix(const std::string &s) {
    size_t i = s.size(), back = 0;
    while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) { --i; ++back; }
    if (i == 0) return s.size();
    unsigned char lead = static_cast<unsigned char>(s[i - 1]);
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return (back + 1 >= need) ? s.size() : i - 1;
  }

  // Writes `n` bytes to stdout, remembering the first failure (a full disk, a closed stdout).
  void Write(const char *data, size_t n) {
    if (write_error == 0 && n > 0 && std::fwrite(data, 1, n, stdout) != n)
      write_error = errno ? errno : EIO;
  }

  void ShowPrompt() {
    if (prompt_shown) return;
    prompt_shown = true;
    Write(prompt.data(), prompt.size());
  }

  // Flushes stdout; false once a write has failed.
  bool Flush() {
    if (write_error == 0 && std::fflush(stdout) != 0) write_error = errno ? errno : EIO;
    return write_error == 0;
  }

  static int OnToken(void *user, int32_t token) {
    auto *s = static_cast<Streamer *>(user);
    s->ShowPrompt();
    if (s->ids) {
      const std::string text = " " + std::to_string(token);
      s->Write(text.data(), text.size());
    } else {
      char piece[64];
      size_t len = 0;
      Check(tm_detokenize(s->model, &token, 1, piece, sizeof piece, &len), "decoding a token");
      if (len <= sizeof piece) {
        s->pending.append(piece, len);
      } else {  // a token longer than the buffer: the call said how long
        std::string whole(len, '\0');
        Check(tm_detokenize(s->model, &token, 1, &whole[0], whole.size(), &len),
              "decoding a token");
        s->pending += whole;
      }
      size_t n = CompletePrefix(s->pending);
      s->Write(s->pending.data(), n);
      s->pending.erase(0, n);
    }
    return s->Flush() ? 0 : 1;  // nobody reads what comes next: stop generating
  }
};

// Shows "compiling k/n programs" on stderr while a generation's programs are prepared, once
// that takes longer than a moment, and only on a terminal (logs get the final report).
struct Progress {
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  bool shown = false;

  static void OnProgress(void *user, int32_t done, int32_t total) {
    auto *p = static_cast<Progress *>(user);
    const double waited =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - p->start).count();
    if (!isatty(STDERR_FILENO) || (!p->shown && waited < 0.3 && done < total)) return;
    std::fprintf(stderr, "\r[tinymlir] compiling: %d/%d programs ready", done, total);
    if (done == total) std::fputs("\n", stderr);
    p->shown = done < total;
  }
};

// Creates the folder `dir` for `flag`, or checks that the existing one is a folder this
// process may write to: before compiling, so that a bad path fails at once.
void PrepareFolder(const char *flag, const std::string &dir) {
  if (mkdir(dir.c_str(), 0755) == 0) return;
  if (errno != EEXIST)
    Die(std::string(flag) + ": cannot create " + dir + ": " + std::strerror(errno));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
    Die(std::string(flag) + ": " + dir + " exists and is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    Die(std::string(flag) + ": cannot write into " + dir + ": " + std::strerror(errno));
}

// Writes every stage of every program in the bundle `bundle` (as its manifest lists them)
// to `dir`: <program>.<n>-<stage>.{mlir,ll,s}. The stage texts travel in the program
// files, so this reads the bundle back rather than asking the compiler again.
void EmitIr(const std::string &bundle, const std::string &dir) {
  static const struct { tm_stage stage; const char *name; } kStages[] = {
      {TM_STAGE_TRACED, "0-traced.mlir"},       {TM_STAGE_OPTIMIZED, "1-optimized.mlir"},
      {TM_STAGE_BUFFERIZED, "2-bufferized.mlir"}, {TM_STAGE_LOWERED, "3-lowered.mlir"},
      {TM_STAGE_LLVM_IR, "4-llvm.ll"},          {TM_STAGE_ASSEMBLY, "5-assembly.s"}};
  FILE *manifest = std::fopen((bundle + "/manifest.txt").c_str(), "r");
  if (!manifest) Die("--emit-ir: cannot read " + bundle + "/manifest.txt");
  char line[512];
  bool listed = false;
  size_t files = 0;
  while (std::fgets(line, sizeof line, manifest)) {
    std::string name(line);
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    if (!listed) { listed = name == "programs"; continue; }
    tinymlir::ProgramHandle program;
    Check(tm_program_load((bundle + "/" + name).c_str(), program.out()), "--emit-ir");
    const std::string base = dir + "/" + name.substr(0, name.rfind('.')) + ".";
    for (const auto &s : kStages) {
      std::string text;
      if (tinymlir::ProgramIr(program, s.stage, &text) != TM_OK) continue;  // not kept
      const std::string path = base + s.name;
      FILE *f = std::fopen(path.c_str(), "wb");
      const bool ok = f && std::fwrite(text.data(), 1, text.size(), f) == text.size();
      const int error = errno;
      if (!f || std::fclose(f) != 0 || !ok)
        Die("--emit-ir: cannot write " + path + ": " + std::strerror(ok ? errno : error));
      ++files;
    }
  }
  std::fclose(manifest);
  std::fprintf(stderr, "[tinymlir] wrote %zu stage files to %s\n", files, dir.c_str());
}

// This process's peak resident memory (VmHWM), in MB; 0 where /proc is not there.
double PeakResidentMb() {
  std::FILE *f = std::fopen("/proc/self/status", "r");
  if (!f) return 0.0;
  char line[256];
  double mb = 0.0;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) mb = std::atof(line + 6) / 1024.0;
  std::fclose(f);
  return mb;
}

// "[tinymlir] disk cache: <where it is, or why it is off>".
void PrintDiskCacheState(tm_context *ctx) {
#ifndef TINYMLIR_CLI_RUNTIME_ONLY
  size_t len = 0;
  if (ctx && tm_cache_disk_message(ctx, nullptr, 0, &len) == TM_OK) {
    std::string text(len + 1, '\0');
    if (tm_cache_disk_message(ctx, &text[0], text.size(), &len) == TM_OK) {
      text.resize(len);
      std::fprintf(stderr, "[tinymlir] disk cache: %s\n", text.c_str());
    }
  }
#else
  (void)ctx;
#endif
}

// The disk cache's state when it is off though nobody asked (TINYMLIR_CACHE_DIR=off): a
// folder it cannot use (not a folder, others may write to it) costs every later run its
// compile, and the user would otherwise learn why only with --verbose.
void PrintDiskCacheProblem(tm_context *ctx) {
#ifndef TINYMLIR_CLI_RUNTIME_ONLY
  const char *setting = std::getenv("TINYMLIR_CACHE_DIR");
  if (!ctx || (setting && std::strcmp(setting, "off") == 0)) return;
  tm_cache_info info;
  info.struct_size = sizeof info;
  if (tm_cache_get_info(ctx, &info) == TM_OK && info.disk_limit_bytes == 0)
    PrintDiskCacheState(ctx);
#else
  (void)ctx;
#endif
}

void PrintCompileBreakdown(const tm_model_stats &st, tm_context *ctx) {
  static const char *const kPhases[TM_NUM_COMPILE_PHASES] = {
      "build", "optimize", "bufferize", "lower", "llvm-opt", "codegen", "link", "disk-read"};
  double sum = 0;
  for (double s : st.phase_seconds) sum += s;
  std::fprintf(stderr, "[tinymlir] compile phases, summed over %llu programs (%.0f ms of CPU "
               "time in %.0f ms):",
               static_cast<unsigned long long>(st.programs_compiled + st.programs_from_disk),
               sum * 1e3, st.compile_seconds * 1e3);
  for (int i = 0; i < TM_NUM_COMPILE_PHASES; ++i)
    if (st.phase_seconds[i] > 0)
      std::fprintf(stderr, " %s %.0f ms (%.0f%%)", kPhases[i], st.phase_seconds[i] * 1e3,
                   sum > 0 ? 100.0 * st.phase_seconds[i] / sum : 0.0);
  std::fputc('\n', stderr);
  PrintDiskCacheState(ctx);
}

// The token ids of `text`; `what` (the prompt, the text) names it in errors.
std::vector<int32_t> Tokenize(tm_model *model, const std::string &text, const char *what) {
  const std::string doing = std::string("tokenizing ") + what;
  size_t n = 0;  // first ask for the size, then fill
  tm_status s = tm_tokenize(model, text.data(), text.size(), nullptr, 0, &n);
  if (s == TM_ERROR_UNSUPPORTED) Die(CliMessage(tm_last_error()) + " (pass --ids)");
  Check(s, doing.c_str());
  std::vector<int32_t> ids(n);
  Check(tm_tokenize(model, text.data(), text.size(), ids.data(), n, &n), doing.c_str());
  return ids;
}

// `tinymlir perplexity`: the exponential of the mean negative log-likelihood of every token
// after the first, each given the tokens before it. A text longer than the model's context
// is scored in windows of n_ctx tokens, each starting `stride` tokens after the last one
// began and scoring only the tokens the windows before it did not (Hugging Face's
// "perplexity of fixed-length models"): every token but the first n_ctx has at least
// n_ctx - stride tokens of context.
int Perplexity(tm_model *model, const Args &args, const std::vector<int32_t> &ids) {
  const size_t n = ids.size();
  if (n < 2)
    Die("perplexity needs a text of 2 tokens at least (the first token is never scored: "
        "nothing comes before it), got " + std::to_string(n));
  int32_t n_ctx = 0;
  Check(tm_model_info(model, nullptr, &n_ctx, nullptr, nullptr), "reading the model");
  const size_t context = static_cast<size_t>(n_ctx);
  const size_t stride = args.stride > 0 ? static_cast<size_t>(args.stride)
                                        : std::max<size_t>(1, context / 2);
  if (stride >= context)
    Die("--stride must be less than the model's context of " + std::to_string(context) +
        " tokens, got " + std::to_string(stride));
  const size_t windows = n <= context ? 1 : 1 + (n - context + stride - 1) / stride;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  std::vector<double> logprobs(context);
  double nll = 0;
  size_t scored = 0, done_end = 0, window = 0;
  for (size_t begin = 0;; begin += stride) {
    const size_t end = std::min(begin + context, n);
    if (terminal) std::fprintf(stderr, "\r[tinymlir] scoring window %zu of %zu", ++window, windows);
    Check(tm_model_score(model, &ids[begin], end - begin, logprobs.data(), logprobs.size(),
                         nullptr, 0),
          "scoring");
    for (size_t k = std::max(done_end, begin + 1); k < end; ++k, ++scored)
      nll -= logprobs[k - begin - 1];
    done_end = end;
    if (end == n) break;
  }
  if (terminal) std::fputs("\n", stderr);
  std::printf("perplexity %.6f\ntokens %zu (%zu scored, in %zu window%s of up to %zu tokens, "
              "stride %zu)\n",
              std::exp(nll / static_cast<double>(scored)), n, scored, windows,
              windows == 1 ? "" : "s", context, stride);
  if (std::fflush(stdout) != 0)
    Die(std::string("cannot write the output: ") + std::strerror(errno));
  return 0;
}


// The lines of `path` (standard input for "-"), for --batch: each a prompt, less its "\r"
// when the file has Windows line ends. An empty line is an error (it would be a prompt of
// no tokens, which a file of prompts means by mistake), and so is a file of none.
std::vector<std::string> ReadBatchFile(const std::string &path) {
  const std::string text = ReadWholeFile("--batch", path);
  const std::string name = path == "-" ? std::string("standard input") : path;
  std::vector<std::string> lines;
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos) end = text.size();
    std::string line = text.substr(at, end - at);
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty())
      Die("--batch: line " + std::to_string(lines.size() + 1) + " of " + name +
          " is empty; each line is a prompt");
    lines.push_back(std::move(line));
    at = end + 1;
  }
  if (lines.empty()) Die("--batch: " + name + " has no prompts");
  return lines;
}

// A generated text on one line: a newline as \n, a carriage return as \r, a backslash as \\.
std::string OneLine(const std::string &text) {
  std::string line;
  for (char c : text) {
    if (c == '\n') line += "\\n";
    else if (c == '\r') line += "\\r";
    else if (c == '\\') line += "\\\\";
    else line += c;
  }
  return line;
}

// The text of ids (tm_detokenize).
std::string Detokenize(tm_model *model, const std::vector<int32_t> &ids) {
  size_t len = 0;
  Check(tm_detokenize(model, ids.data(), ids.size(), nullptr, 0, &len), "decoding tokens");
  std::string text(len, '\0');
  Check(tm_detokenize(model, ids.data(), ids.size(), &text[0], text.size(), &len),
        "decoding tokens");
  return text;
}

// `tinymlir generate --batch FILE`: every line's prompt and continuation on a line of its
// own, in order; TM_MAX_BATCH_SEQUENCES lines at a time decode together. Returns the
// statistics summed over the batches.
tm_model_stats GenerateBatch(tm_model *model, Args &args) {
  const std::vector<std::string> lines = ReadBatchFile(args.batch);
  int32_t vocab = 0, n_ctx = 0;
  Check(tm_model_info(model, &vocab, &n_ctx, nullptr, nullptr), "reading the model");
  std::vector<std::vector<int32_t>> prompts;
  size_t shortest = SIZE_MAX, longest = 0;
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string what = "--batch line " + std::to_string(i + 1);
    std::vector<int32_t> ids = args.ids ? ParseIds(lines[i]) : Tokenize(model, lines[i], what.c_str());
    if (ids.empty()) Die(what + " has no tokens");
    for (int32_t id : ids)
      if (id >= vocab)
        Die(what + ": token id " + std::to_string(id) + " is outside the vocabulary (" +
            std::to_string(vocab) + " tokens)");
    if (ids.size() + static_cast<size_t>(args.options.max_new_tokens) > static_cast<size_t>(n_ctx))
      Die(what + ": the prompt (" + std::to_string(ids.size()) + " tokens) plus --tokens " +
          std::to_string(args.options.max_new_tokens) + " exceed the model's context of " +
          std::to_string(n_ctx) + " tokens");
    shortest = std::min(shortest, ids.size());
    longest = std::max(longest, ids.size());
    prompts.push_back(std::move(ids));
  }
  std::fprintf(stderr, "[tinymlir] batch: %zu prompts of %zu to %zu tokens\n", prompts.size(),
               shortest, longest);
  Progress progress;
  args.options.progress = Progress::OnProgress;
  args.options.progress_user = &progress;
  tm_model_stats total{};
  const size_t width = TM_MAX_BATCH_SEQUENCES;
  for (size_t first = 0; first < prompts.size(); first += width) {
    const size_t n = std::min(width, prompts.size() - first);
    std::vector<std::vector<int32_t>> outputs(n);
    std::vector<tm_batch_sequence> batch(n);
    for (size_t i = 0; i < n; ++i) {
      outputs[i].resize(static_cast<size_t>(args.options.max_new_tokens));
      batch[i] = {prompts[first + i].data(), prompts[first + i].size(), &args.options,
                  outputs[i].data(), outputs[i].size(), 0};
    }
    Check(tm_generate_batch(model, batch.data(), n, nullptr, nullptr), "generating");
    std::string text;
    for (size_t i = 0; i < n; ++i) {
      outputs[i].resize(batch[i].n_out);
      if (args.ids) {
        std::string line;
        for (int32_t id : prompts[first + i]) line += (line.empty() ? "" : " ") + std::to_string(id);
        for (int32_t id : outputs[i]) line += " " + std::to_string(id);
        text += line + "\n";
      } else {
        text += OneLine(lines[first + i] + Detokenize(model, outputs[i])) + "\n";
      }
    }
    if (std::fwrite(text.data(), 1, text.size(), stdout) != text.size() || std::fflush(stdout) != 0)
      Die(std::string("cannot write the output: ") + std::strerror(errno));
    // The model's totals (load, compile), and the sum of every batch's prefill and decode.
    tm_model_stats st;
    st.struct_size = sizeof st;
    Check(tm_model_get_stats(model, &st), "reading statistics");
    const tm_model_stats sums = total;
    total = st;
    total.prefill_seconds += sums.prefill_seconds;
    total.decode_seconds += sums.decode_seconds;
    total.decode_tokens += sums.decode_tokens;
  }
  return total;
}
// `tinymlir generate` with one prompt: the prompt and its continuation, streamed to stdout.
void GenerateOne(tm_model *model, Args &args, std::vector<int32_t> prompt) {
  if (!args.ids) prompt = Tokenize(model, args.prompt, "the prompt");
  // An empty prompt starts from <|endoftext|>. Token ids are printed from the start of the
  // sequence, the starting id included; text shows nothing for it (the prompt was empty).
  if (prompt.empty()) {
    prompt = EndOfTextPrompt(model);
    if (args.ids) args.prompt = std::to_string(prompt[0]);
  }
  int32_t n_ctx = 0;
  Check(tm_model_info(model, nullptr, &n_ctx, nullptr, nullptr), "reading the model");
  if (prompt.size() + static_cast<size_t>(args.options.max_new_tokens) > static_cast<size_t>(n_ctx))
    Die("the prompt (" + std::to_string(prompt.size()) + " tokens) plus --tokens " +
        std::to_string(args.options.max_new_tokens) + " exceed the model's context of " +
        std::to_string(n_ctx) + " tokens");
  std::fprintf(stderr, "[tinymlir] prompt: %zu tokens\n", prompt.size());
  Progress progress;
  args.options.progress = Progress::OnProgress;
  args.options.progress_user = &progress;

  Streamer streamer{model, args.ids, args.prompt, false, {}, 0};
  size_t produced = 0;
  Check(tm_generate(model, prompt.data(), prompt.size(), &args.options, Streamer::OnToken, &streamer,
                    nullptr, 0, &produced),
        "generating");
  streamer.ShowPrompt();  // no token was asked for
  streamer.Write(streamer.pending.data(), streamer.pending.size());
  streamer.Write("\n", 1);
  if (!streamer.Flush())
    Die(std::string("cannot write the output: ") + std::strerror(streamer.write_error));
}

// `total` over `tokens` with its noun: "48 kernels", "1 host sync", "0.25 allocations".
std::string PerToken(uint64_t total, uint64_t tokens, const char *one, const char *many) {
  char text[64];
  if (total % tokens == 0) {
    const uint64_t n = total / tokens;
    std::snprintf(text, sizeof text, "%llu %s", static_cast<unsigned long long>(n),
                  n == 1 ? one : many);
  } else {
    std::snprintf(text, sizeof text, "%.2f %s", static_cast<double>(total) / tokens, many);
  }
  return text;
}

// What a decode token asked of a GPU (the engine's counters, tm_model_stats V4).
void PrintDevicePerToken(const tm_model_stats &st) {
  if (st.decode_tokens == 0) return;
  const uint64_t n = st.decode_tokens;
  std::fprintf(stderr, "[tinymlir] device per decode token: %s, %s, %s, %s, %s, %s\n",
               PerToken(st.decode_graph_launches, n, "graph launch", "graph launches").c_str(),
               PerToken(st.decode_kernel_launches, n, "kernel", "kernels").c_str(),
               PerToken(st.decode_host_syncs, n, "host sync", "host syncs").c_str(),
               PerToken(st.decode_allocations, n, "allocation", "allocations").c_str(),
               PerToken(st.decode_bytes_to_device, n, "B to device", "B to device").c_str(),
               PerToken(st.decode_bytes_from_device, n, "B from device", "B from device").c_str());
}

// The report on stderr after a generation: load, compile, prefill and decode speed (of every
// sequence of a batch), and with --verbose where the compile time went, what a decode token
// asked of a GPU, the load report and the peak resident memory.
void PrintReport(const tm_model_stats &st, const Args &args, tm_context *ctx, tm_model *model) {
  std::fprintf(stderr,
               "[tinymlir] load %.0f ms | compile %.0f ms (%llu programs compiled, %llu %s) | "
               "prefill %.1f ms | decode %.1f tokens/s (%llu tokens)\n",
               st.load_seconds * 1e3, st.compile_seconds * 1e3,
               static_cast<unsigned long long>(st.programs_compiled),
               static_cast<unsigned long long>(st.programs_from_disk),
               args.bundle.empty() ? "read from the disk cache" : "loaded from the bundle",
               st.prefill_seconds * 1e3,
               st.decode_seconds > 0 ? st.decode_tokens / st.decode_seconds : 0.0,
               static_cast<unsigned long long>(st.decode_tokens));
  if (args.verbose) {
    PrintCompileBreakdown(st, ctx);
    if (args.target == TM_TARGET_GPU || st.decode_kernel_launches > 0) PrintDevicePerToken(st);
    PrintLoadReport(model);
    std::fprintf(stderr, "[tinymlir] peak resident memory: %.1f MB\n", PeakResidentMb());
  } else if (args.bundle.empty()) {
    PrintDiskCacheProblem(ctx);
  }
}

}  // namespace

int main(int argc, char **argv) {
  // A file size limit (ulimit -f) makes a write fail with a message, not end the command.
  signal(SIGXFSZ, SIG_IGN);
  Args args = ParseArgs(argc, argv);
  // The library reads its thread count from the environment once, when it first needs it:
  // set here, before any call that could.
  if (args.threads > 0 &&
      setenv("TINYMLIR_NUM_THREADS", std::to_string(args.threads).c_str(), 1) != 0)
    Die(std::string("--threads: cannot set TINYMLIR_NUM_THREADS: ") + std::strerror(errno));
  // A target this process cannot run (no driver, no device) fails before anything compiles.
  if (!args.compile && args.bundle.empty() && tm_target_check(args.target) != TM_OK)
    Die("--target " + TargetName(args.target) + ": " + CliMessage(tm_last_error()));
  std::vector<int32_t> prompt;  // token ids are checked before anything is loaded
  if (args.ids) prompt = ParseIds(args.prompt);
  std::string dir = args.model.empty() ? DefaultModelDir() : args.model;

#ifdef TINYMLIR_CLI_RUNTIME_ONLY
  tm_context *ctx = nullptr;  // no compiler: a model from a bundle needs no context
#else
  tinymlir::ContextHandle ctx;
  Check(tm_context_create(ctx.out()), "creating a context");
#endif
  tinymlir::ModelHandle model;
  std::fprintf(stderr, "[tinymlir] loading %s%s%s\n", dir.c_str(),
               args.bundle.empty() ? "" : " with the bundle ", args.bundle.c_str());
  tm_model_options model_options;
  tm_model_options_init(&model_options);
  if (!args.bundle.empty()) model_options.bundle_dir = args.bundle.c_str();
  model_options.target = args.target;
  model_options.weights = args.weights;
  Check(tm_model_load(ctx, dir.c_str(), &model_options, model.out()), "loading the model");

  if (args.compile) {
    if (!args.emit_ir.empty()) PrepareFolder("--emit-ir", args.emit_ir);
    Progress progress;
    const auto start = std::chrono::steady_clock::now();
    Check(tm_model_compile_bundle(model, args.out.c_str(), Progress::OnProgress, &progress),
          "compiling the bundle");
    tm_model_stats st;
    st.struct_size = sizeof st;
    Check(tm_model_get_stats(model, &st), "reading statistics");
    std::fprintf(stderr, "[tinymlir] wrote %s: %llu programs (%llu compiled, %llu read from the "
                 "disk cache) in %.1f s\n", args.out.c_str(),
                 static_cast<unsigned long long>(st.programs_compiled + st.programs_from_disk +
                                                 st.programs_cached),
                 static_cast<unsigned long long>(st.programs_compiled),
                 static_cast<unsigned long long>(st.programs_from_disk),
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    if (args.verbose) PrintCompileBreakdown(st, ctx);
    else PrintDiskCacheProblem(ctx);
    if (!args.emit_ir.empty()) EmitIr(args.out, args.emit_ir);
    return 0;
  }

  if (args.perplexity)
    return Perplexity(model, args, args.ids ? prompt : Tokenize(model, args.prompt, "the text"));
  tm_model_stats st;
  st.struct_size = sizeof st;
  if (!args.batch.empty()) {
    st = GenerateBatch(model, args);
  } else {
    GenerateOne(model, args, prompt);
    Check(tm_model_get_stats(model, &st), "reading statistics");
  }
  PrintReport(st, args, ctx, model);
  return 0;
}
