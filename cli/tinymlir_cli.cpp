// The `tinymlir` command: GPT-2 text generation on the public C API.
//
// Built twice from this file: `tinymlir`, linked to libtinymlir.so (compiles), and
// `tinymlir-run` (TINYMLIR_CLI_RUNTIME_ONLY), linked only to libtinymlir_runtime.so: no LLVM
// in the process, so it runs where there is none, from a bundle `tinymlir compile` wrote.
//
//   tinymlir generate [--model DIR] [--bundle DIR] [--weights f32|f16|bf16] [--tokens N]
//                     [--greedy | --temperature T
//                     --top-k K --top-p P --seed S] [--no-kv-cache] [--stop-at-eos] [--ids]
//                     [--verbose] "prompt"
//   tinymlir compile [--model DIR] [--weights f32|f16|bf16] --out DIR [--emit-ir IRDIR]
//                                                every program of the model, as a bundle;
//                                                --emit-ir writes each one's stages as text
//
// The continuation streams to stdout as tokens are produced; a short report (load, compile,
// prefill, decode speed) goes to stderr. Without --model the embedded default model
// (share/tinymlir/models/kjv-tiny next to the binary, in the build tree or an install) runs.
//
// The command samples by default (temperature 0.8, top-k 40, top-p 0.95, seed 42: a small
// model decoded greedily repeats itself), as llama.cpp does, but with a fixed seed so a run
// can be repeated; --greedy is the exact mode the golden tests use. The library's own
// default (tm_generate_options_init) stays greedy.
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "tinymlir/gpt2.h"
#include "tinymlir/tinymlir.hpp"

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
const char kUsage[] =
    "usage: %s generate [options] \"prompt\"\n"
    "       tinymlir compile [--model DIR] [--weights W] --out DIR [--emit-ir IRDIR]\n"
    "  (tinymlir-run has no compiler and needs --bundle; tinymlir compiles as needed)\n"
    "  --model DIR        Hugging Face GPT-2 folder (default: the embedded kjv-tiny)\n"
    "  --bundle DIR       run the programs of a bundle (tinymlir compile) instead of compiling\n"
    "  --target cpu|gpu   where the programs run (default cpu; gpu: NVIDIA, CUDA driver)\n"
    "  --weights f32|f16|bf16  the dtype the weight matrices are held in (default: as the\n"
    "                     checkpoint stores them, or as the --bundle was compiled; f16/bf16\n"
    "                     halve memory and decode traffic)\n"
    "  --out DIR          (compile) where to write the bundle\n"
    "  --emit-ir IRDIR    (compile) also write every stage of every program, as text\n"
    "  --tokens N         tokens to generate (default %d)\n"
    "  --greedy           always the most likely token (exact; what the golden tests use)\n"
    "  --temperature T    sampling temperature (default 0.8; 0 = greedy)\n"
    "  --top-k K          sample among the K most likely tokens (default 40; 0 = all)\n"
    "  --top-p P          sample among the smallest set with probability >= P (default 0.95)\n"
    "  --seed S           random seed for sampling (default 42)\n"
    "  --no-kv-cache      recompute the whole prefix for every token\n"
    "  --stop-at-eos      stop after the end-of-text token\n"
    "  --ids              the prompt is token ids (\"1 2 3\"); print ids, not text\n"
    "  --verbose          where the compile time went, the disk cache's state, and the\n"
    "                     process's peak resident memory\n";

struct Args {
  bool compile = false;  // `tinymlir compile`
  std::string model;
  std::string bundle;
  std::string out;
  std::string emit_ir;
  tm_target target = TM_TARGET_CPU;
  tm_dtype weights = static_cast<tm_dtype>(0);  // as stored
  std::string prompt;
  bool have_prompt = false;
  tm_generate_options options;
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

double ParseNumber(const char *flag, const char *text, double lo, double hi) {
  char *end = nullptr;
  errno = 0;
  double v = std::strtod(text, &end);
  if (errno || end == text || *end || v < lo || v > hi) {
    char range[96];
    std::snprintf(range, sizeof range, "[%.10g, %.10g]", lo, hi);
    Die(std::string(flag) + " expects a number in " + range + ", got '" + text + "'");
  }
  return v;
}

std::string Usage() {
  tm_generate_options defaults;
  tm_generate_options_init(&defaults);
  char text[sizeof kUsage + 32];
  std::snprintf(text, sizeof text, kUsage, kCommand, defaults.max_new_tokens);
  return text;
}

Args ParseArgs(int argc, char **argv) {
  if (argc < 2 || (std::strcmp(argv[1], "generate") != 0 && std::strcmp(argv[1], "compile") != 0)) {
    std::fputs(Usage().c_str(), stderr);
    std::exit(argc < 2 ? 1 : (std::strcmp(argv[1], "--help") == 0 ? 0 : 1));
  }
  Args a;
  a.compile = std::strcmp(argv[1], "compile") == 0;
  tm_generate_options_init(&a.options);
  a.options.temperature = kDefaultTemperature;
  a.options.top_k = kDefaultTopK;
  a.options.top_p = kDefaultTopP;
  a.options.seed = kDefaultSeed;
  for (int i = 2; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> const char * {
      if (i + 1 >= argc) Die(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--model") a.model = value();
    else if (arg == "--bundle") a.bundle = value();
    else if (arg == "--out") a.out = value();
    else if (arg == "--emit-ir") a.emit_ir = value();
    else if (arg == "--target") {
      const std::string t = value();
      if (t != "cpu" && t != "gpu") Die("--target expects cpu or gpu, got '" + t + "'");
      a.target = t == "gpu" ? TM_TARGET_GPU : TM_TARGET_CPU;
    }
    else if (arg == "--weights") {
      const std::string w = value();
      if (w != "f32" && w != "f16" && w != "bf16")
        Die("--weights expects f32, f16 or bf16, got '" + w + "'");
      a.weights = w == "f16" ? TM_F16 : w == "bf16" ? TM_BF16 : TM_F32;
    }
    else if (arg == "--tokens") a.options.max_new_tokens = static_cast<int32_t>(ParseNumber("--tokens", value(), 0, INT32_MAX));
    else if (arg == "--temperature") a.options.temperature = static_cast<float>(ParseNumber("--temperature", value(), 0, 1e6));
    else if (arg == "--top-k") a.options.top_k = static_cast<int32_t>(ParseNumber("--top-k", value(), 0, INT32_MAX));
    else if (arg == "--top-p") a.options.top_p = static_cast<float>(ParseNumber("--top-p", value(), 1e-9, 1));
    else if (arg == "--seed") a.options.seed = static_cast<uint64_t>(ParseNumber("--seed", value(), 0, 9007199254740992.0));
    else if (arg == "--no-kv-cache") a.options.use_kv_cache = 0;
    else if (arg == "--stop-at-eos") a.options.stop_at_eos = 1;
    else if (arg == "--ids") a.ids = true;
    else if (arg == "--greedy") a.options.temperature = 0.0f;
    else if (arg == "--verbose") a.verbose = true;
    else if (arg == "--help" || arg == "-h") { std::fputs(Usage().c_str(), stdout); std::exit(0); }
    else if (arg.size() > 1 && arg[0] == '-' && arg[1] == '-') Die("unknown option " + arg + "\n" + Usage());
    else if (a.have_prompt) Die("more than one prompt given (quote the prompt)");
    else { a.prompt = arg; a.have_prompt = true; }
  }
  if (!kHasCompiler && a.compile)
    Die("this command has no compiler; write the bundle with `tinymlir compile --out DIR`");
  if (!kHasCompiler && a.bundle.empty())
    Die("this command has no compiler and runs bundles only: pass --bundle DIR (written by "
        "`tinymlir compile --out DIR`)");
  if (a.compile) {
    if (a.out.empty()) Die("compile needs --out DIR\n" + Usage());
    if (a.have_prompt) Die("compile takes no prompt");
    return a;
  }
  if (!a.emit_ir.empty()) Die("--emit-ir goes with compile");
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

std::vector<int32_t> ParseIds(const std::string &text) {
  std::vector<int32_t> ids;
  const char *p = text.c_str();
  while (*p) {
    if (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') { ++p; continue; }
    char *end = nullptr;
    errno = 0;
    long v = std::strtol(p, &end, 10);
    if (end == p || errno || v < INT32_MIN || v > INT32_MAX) Die("--ids: cannot read an id at '" + std::string(p) + "'");
    ids.push_back(static_cast<int32_t>(v));
    p = end;
  }
  return ids;
}

// Streams decoded text, holding back an incomplete UTF-8 sequence at the end so a
// character split across tokens is printed whole.
struct Streamer {
  tm_model *model;
  bool ids;
  std::string pending;

  static size_t CompletePrefix(const std::string &s) {
    size_t i = s.size(), back = 0;
    while (i > 0 && back < 4 && (static_cast<unsigned char>(s[i - 1]) & 0xC0) == 0x80) { --i; ++back; }
    if (i == 0) return s.size();
    unsigned char lead = static_cast<unsigned char>(s[i - 1]);
    size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : lead >= 0xC0 ? 2 : 1;
    return (back + 1 >= need) ? s.size() : i - 1;
  }

  static int OnToken(void *user, int32_t token) {
    auto *s = static_cast<Streamer *>(user);
    if (s->ids) {
      std::printf(" %d", token);
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
      std::fwrite(s->pending.data(), 1, n, stdout);
      s->pending.erase(0, n);
    }
    std::fflush(stdout);
    return 0;
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

// Writes every stage of every program in the bundle `bundle` (as its manifest lists them)
// to `dir`: <program>.<n>-<stage>.{mlir,ll,s}. The stage texts travel in the program
// files, so this reads the bundle back rather than asking the compiler again.
void EmitIr(const std::string &bundle, const std::string &dir) {
  static const struct { tm_stage stage; const char *name; } kStages[] = {
      {TM_STAGE_TRACED, "0-traced.mlir"},       {TM_STAGE_OPTIMIZED, "1-optimized.mlir"},
      {TM_STAGE_BUFFERIZED, "2-bufferized.mlir"}, {TM_STAGE_LOWERED, "3-lowered.mlir"},
      {TM_STAGE_LLVM_IR, "4-llvm.ll"},          {TM_STAGE_ASSEMBLY, "5-assembly.s"}};
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    Die("--emit-ir: cannot create " + dir + ": " + std::strerror(errno));
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
      char *text = nullptr;
      if (tm_program_ir(program, s.stage, &text) != TM_OK) continue;  // not kept
      const std::string path = base + s.name;
      FILE *f = std::fopen(path.c_str(), "wb");
      const size_t n = std::strlen(text);
      const bool ok = f && std::fwrite(text, 1, n, f) == n;
      tm_free(text);
      if (!f || std::fclose(f) != 0 || !ok) Die("--emit-ir: cannot write " + path);
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

}  // namespace

int main(int argc, char **argv) {
  Args args = ParseArgs(argc, argv);
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
    if (!args.emit_ir.empty()) EmitIr(args.out, args.emit_ir);
    return 0;
  }

  std::vector<int32_t> prompt;
  if (args.ids) {
    prompt = ParseIds(args.prompt);
  } else {
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

  Streamer streamer{model, args.ids, {}};
  std::fputs(args.prompt.c_str(), stdout);
  std::fflush(stdout);
  size_t produced = 0;
  Check(tm_generate(model, prompt.data(), prompt.size(), &args.options, Streamer::OnToken, &streamer,
                    nullptr, 0, &produced),
        "generating");
  std::fwrite(streamer.pending.data(), 1, streamer.pending.size(), stdout);
  std::fputc('\n', stdout);

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
    std::fprintf(stderr, "[tinymlir] peak resident memory: %.1f MB\n", PeakResidentMb());
  }
  return 0;
}
