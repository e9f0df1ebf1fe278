// The `tinymlir` command: GPT-2 text generation on the public C API.
//
// Built twice from this file: `tinymlir`, linked to libtinymlir.so (compiles), and
// `tinymlir-run` (TINYMLIR_CLI_RUNTIME_ONLY), linked only to libtinymlir_runtime.so: no LLVM
// in the process, so it runs where there is none, from a bundle `tinymlir compile` wrote.
//
//   tinymlir generate [--model DIR] [--bundle DIR] [--weights f32|f16|bf16|q8_0] [--tokens N]
//                     [--greedy | --temperature T
//                     --top-k K --top-p P --seed S] [--no-kv-cache] [--stop-at-eos] [--ids]
//                     [--verbose] [--] "prompt"
//   tinymlir compile [--model DIR] [--target cpu|gpu] [--weights f32|f16|bf16|q8_0] --out DIR
//                    [--emit-ir IRDIR]
//                                                every program of the model, as a bundle;
//                                                --emit-ir writes each one's stages as text
//
// The prompt and its continuation stream to stdout as tokens are produced; a short report
// (load, compile, prefill, decode speed) goes to stderr. Arguments are checked strictly
// (whole numbers in digits, no empty values, no option of the other subcommand, no
// conflicting options), and a failed write to stdout is an error (exit status 1). Without --model the embedded default model
// (share/tinymlir/models/kjv-tiny next to the binary, in the build tree or an install) runs.
//
// The command samples by default (temperature 0.8, top-k 40, top-p 0.95, seed 42: a small
// model decoded greedily repeats itself), as llama.cpp does, but with a fixed seed so a run
// can be repeated; --greedy is the exact mode the golden tests use. The library's own
// default (tm_generate_options_init) stays greedy.
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
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
const char kUsageGenerate[] = "usage: %s generate [options] [--] \"prompt\"\n";
const char kUsageCompile[] =
    "       tinymlir compile [--model DIR] [--target T] [--weights W] --out DIR\n"
    "                        [--emit-ir IRDIR]\n";
const char kUsageOptions[] =
    "       %s --help | --version\n"
    "  --model DIR        Hugging Face GPT-2 folder (default: the embedded kjv-tiny)\n"
    "  --bundle DIR       (generate) run the programs of a bundle (tinymlir compile) instead\n"
    "                     of compiling; it runs on the target it was compiled for\n"
    "  --target cpu|gpu   where the programs run (default cpu; gpu: NVIDIA, CUDA driver)\n"
    "  --weights f32|f16|bf16|q8_0  the dtype the weight matrices are held in (default:\n"
    "                     as the checkpoint stores them, or as the --bundle was compiled;\n"
    "                     f16/bf16 halve memory and decode traffic; q8_0, 8-bit blocks\n"
    "                     quantized at load, CPU only, cut them to 27%%)\n";
const char kUsageCompileOptions[] =
    "  --out DIR          (compile) where to write the bundle\n"
    "  --emit-ir IRDIR    (compile) also write every stage of every program, as text\n";
const char kUsageGenerateOptions[] =
    "  --tokens N         (generate) tokens to generate (default %d)\n"
    "  --greedy           always the most likely token (exact; what the golden tests use)\n"
    "  --temperature T    sampling temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K          sample among the K most likely tokens (default 40; 0 = all)\n"
    "  --top-p P          sample among the smallest set with probability >= P (default 0.95)\n"
    "  --seed S           random seed for sampling, 0 to 2^64-1 (default 42)\n"
    "  --no-kv-cache      recompute the whole prefix for every token\n"
    "  --stop-at-eos      stop after the end-of-text token\n"
    "  --ids              the prompt is token ids (\"1 2 3\"); print ids, not text\n"
    "  --                 the next argument is the prompt, even if it starts with --\n"
    "  --verbose          where the compile time went, the disk cache's state, where the\n"
    "                     weights came from (and their huge pages), and the process's peak\n"
    "                     resident memory\n";

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

// Which subcommand an option belongs to.
enum class For { kBoth, kGenerate, kCompile };

struct Args {
  bool compile = false;  // `tinymlir compile`
  std::string model;
  std::string bundle;
  std::string out;
  std::string emit_ir;
  tm_target target = TM_TARGET_CPU;
  bool target_given = false;
  tm_dtype weights = static_cast<tm_dtype>(0);  // as stored
  std::string prompt;
  bool have_prompt = false;
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

void Check(tm_status s, const char *what) {
  if (s != TM_OK) Die(std::string(what) + ": " + tm_last_error());
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
  std::snprintf(line, sizeof line, kUsageGenerate, kCommand);
  text += line;
  if (kHasCompiler) text += kUsageCompile;
  std::snprintf(line, sizeof line, kUsageOptions, kCommand);
  text += line;
  if (kHasCompiler) text += kUsageCompileOptions;
  std::snprintf(line, sizeof line, kUsageGenerateOptions, defaults.max_new_tokens);
  text += line;
  if (!kHasCompiler)
    text += "tinymlir-run has no compiler: it runs bundles that `tinymlir compile` wrote.\n";
  return text;
}

[[noreturn]] void Exit0(const std::string &text) {
  std::fputs(text.c_str(), stdout);
  std::exit(std::fflush(stdout) == 0 ? 0 : 1);
}

Args ParseArgs(int argc, char **argv) {
  const std::string command = argc >= 2 ? argv[1] : "";
  if (command == "--help" || command == "-h") Exit0(Usage());
  if (command == "--version") Exit0(std::string(kCommand) + " " + tm_version() + "\n");
  if (command != "generate" && command != "compile")
    Die((command.empty() ? "no command given" : "unknown command '" + command + "'") +
        " (generate" + (kHasCompiler ? " or compile" : "") + ")\n" + Usage());
  Args a;
  a.compile = command == "compile";
  if (!kHasCompiler && a.compile)
    Die("this command has no compiler; write the bundle with `tinymlir compile --out DIR`");
  tm_generate_options_init(&a.options);
  a.options.temperature = kDefaultTemperature;
  a.options.top_k = kDefaultTopK;
  a.options.top_p = kDefaultTopP;
  a.options.seed = kDefaultSeed;
  bool options_end = false;
  for (int i = 2; i < argc; ++i) {
    const std::string arg = argv[i];
    if (options_end || arg.empty() || arg[0] != '-' || arg == "-") {
      if (a.have_prompt) Die("more than one prompt given (quote the prompt)");
      a.prompt = arg;
      a.have_prompt = true;
      continue;
    }
    if (arg == "--") {
      options_end = true;
      continue;
    }
    if (arg == "--help" || arg == "-h") Exit0(Usage());
    // An option of the other subcommand is an error, not silently ignored.
    const auto only = [&](For which) {
      if (which == For::kCompile && !a.compile) Die(arg + " goes with compile, not generate");
      if (which == For::kGenerate && a.compile) Die(arg + " goes with generate, not compile");
    };
    // The option's value: present and not empty (an unset shell variable must not quietly
    // mean the default).
    const auto value = [&]() -> const char * {
      if (i + 1 >= argc) Die(arg + " needs a value");
      if (argv[i + 1][0] == '\0') Die(arg + " needs a value, got an empty string");
      return argv[++i];
    };
    if (arg == "--model") {
      a.model = value();
    } else if (arg == "--bundle") {
      only(For::kGenerate);
      a.bundle = value();
    } else if (arg == "--out") {
      only(For::kCompile);
      a.out = value();
    } else if (arg == "--emit-ir") {
      only(For::kCompile);
      a.emit_ir = value();
    } else if (arg == "--target") {
      const std::string t = value();
      if (t != "cpu" && t != "gpu") Die("--target expects cpu or gpu, got '" + t + "'");
      a.target = t == "gpu" ? TM_TARGET_GPU : TM_TARGET_CPU;
      a.target_given = true;
    } else if (arg == "--weights") {
      const std::string w = value();
      if (w != "f32" && w != "f16" && w != "bf16" && w != "q8_0")
        Die("--weights expects f32, f16, bf16 or q8_0, got '" + w + "'");
      a.weights = w == "f16" ? TM_F16 : w == "bf16" ? TM_BF16 : w == "q8_0" ? TM_Q8_0 : TM_F32;
    } else if (arg == "--tokens") {
      only(For::kGenerate);
      a.options.max_new_tokens =
          static_cast<int32_t>(ParseInteger("--tokens", value(), 0, INT32_MAX));
    } else if (arg == "--temperature") {
      only(For::kGenerate);
      a.options.temperature = static_cast<float>(ParseReal("--temperature", value(), 0, 1e6));
      a.sampling_flag = arg;
    } else if (arg == "--top-k") {
      only(For::kGenerate);
      a.options.top_k = static_cast<int32_t>(ParseInteger("--top-k", value(), 0, INT32_MAX));
      a.sampling_flag = arg;
    } else if (arg == "--top-p") {
      only(For::kGenerate);
      // At least the smallest normal float: a smaller value would round to 0 in the option.
      a.options.top_p = static_cast<float>(ParseReal("--top-p", value(), 1.1754944e-38, 1));
      a.sampling_flag = arg;
    } else if (arg == "--seed") {
      only(For::kGenerate);
      a.options.seed = ParseInteger("--seed", value(), 0, UINT64_MAX);
      a.sampling_flag = arg;
    } else if (arg == "--no-kv-cache") {
      only(For::kGenerate);
      a.options.use_kv_cache = 0;
    } else if (arg == "--stop-at-eos") {
      only(For::kGenerate);
      a.options.stop_at_eos = 1;
    } else if (arg == "--ids") {
      only(For::kGenerate);
      a.ids = true;
    } else if (arg == "--greedy") {
      only(For::kGenerate);
      a.greedy = true;
    } else if (arg == "--verbose") {
      a.verbose = true;
    } else {
      Die("unknown option " + arg + "\n" + Usage());
    }
  }
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
    if (a.have_prompt) Die("compile takes no prompt");
    return a;
  }
  if (!a.have_prompt) Die("no prompt given\n" + Usage());
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

}  // namespace

int main(int argc, char **argv) {
  // A file size limit (ulimit -f) makes a write fail with a message, not end the command.
  signal(SIGXFSZ, SIG_IGN);
  Args args = ParseArgs(argc, argv);
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

  if (!args.ids) {
    size_t n = 0;  // first ask for the size, then fill
    tm_status s = tm_tokenize(model, args.prompt.data(), args.prompt.size(), nullptr, 0, &n);
    if (s == TM_ERROR_UNSUPPORTED) Die(std::string(tm_last_error()) + " (pass --ids)");
    Check(s, "tokenizing the prompt");
    prompt.resize(n);
    Check(tm_tokenize(model, args.prompt.data(), args.prompt.size(), prompt.data(), n, &n),
          "tokenizing the prompt");
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

  tm_model_stats st;
  st.struct_size = sizeof st;
  Check(tm_model_get_stats(model, &st), "reading statistics");
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
    PrintLoadReport(model);
    std::fprintf(stderr, "[tinymlir] peak resident memory: %.1f MB\n", PeakResidentMb());
  } else if (args.bundle.empty()) {
    PrintDiskCacheProblem(ctx);
  }
  return 0;
}
