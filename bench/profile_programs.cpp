// profile_programs: where tinymlir's GPT-2 time goes, per program kind.
//
// Traces the programs the GPT-2 model runs (embed, qkv, attn_mlp, head) with the model's
// own definition (gpt2/src/compile/programs.cpp) for GPT-2 124M shapes, compiles them, and times
// tm_invoke on random data. Prints one line per program: compile ms, median invoke ms, and
// the per-token cost implied for a 12-layer step.
//
//   profile_programs [--t 1] [--l 128] [--reps 10] [--real-mask] [--mask-half] [--ir KIND]
//                    [--stage N] [--opt N] [--weights f32|f16|bf16|q8_0]
//   --opt: tm_compile_options.opt_level (default: the library's default)
//   --ir KIND: print the IR of KIND (embed, qkv, attn_mlp or head) at stage N, a tm_stage
//   (default 3, the lowered MLIR).
// Each line also gives the compile phases (tm_program_phase_seconds).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "gpt2/src/programs.h"
#include "tinymlir/tinymlir.hpp"

namespace {

using tinymlir::gpt2::ProgramKind;

bool g_real_mask = false;
bool g_mask_half = false;
int g_opt_level = -1;  // --opt; -1 = the default
std::string g_weights = "f32";  // --weights: the weight matrices' dtype (f32, f16, bf16, q8_0)
// Cache rows visible to row 0: all but the last t - 1 rows, or half of them (--mask-half).
int64_t g_mask_offset(int64_t rows, int64_t cols) { return g_mask_half ? cols / 2 - rows : cols - rows; }

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

void Check(tm_status s, const char *what) {
  if (s != TM_OK) {
    std::fprintf(stderr, "%s: %s: %s\n", what, tm_status_string(s), tm_last_error());
    std::exit(1);
  }
}

struct Kernel {
  const char *name;
  ProgramKind kind;
  int per_token;  // how many times a decode/prefill step runs it (12 per layer-program)
};

// A buffer of random data, or zeros for integer inputs, for one tensor of the program.
struct Buffer {
  std::vector<int64_t> shape;
  std::vector<char> bytes;
  tm_dtype dtype;
  tm_tensor view() { return {bytes.data(), dtype, (int32_t)shape.size(), shape.data(), nullptr}; }
};

Buffer MakeBuffer(const tm_program *p, bool input, int32_t i, std::mt19937 &rng) {
  Buffer b;
  int32_t rank = 0;
  b.shape.resize(TM_MAX_RANK);
  Check((input ? tm_program_input_type : tm_program_output_type)(p, i, &b.dtype, &rank,
                                                                  b.shape.data()),
        "tensor type");
  b.shape.resize(rank);
  int64_t n = 1;
  for (int64_t d : b.shape) n *= d;
  const bool half = b.dtype == TM_F16 || b.dtype == TM_BF16;
  if (b.dtype == TM_Q8_0) {  // quantized from the f32 values below
    std::vector<float> values(n);
    std::normal_distribution<float> nd(0.f, 0.02f);
    for (float &v : values) v = nd(rng);
    b.bytes.assign(n / 32 * 34, 0);
    Check(tm_quantize_q8_0(values.data(), n / b.shape.back(), b.shape.back(), b.bytes.data(),
                           b.bytes.size()),
          "quantize");
    return b;
  }
  b.bytes.assign(n * (half ? 2 : 4), 0);  // f32 or i32 (ids 0), or half bits
  if (input && half) {  // small normal values of either half format (timing only)
    uint16_t *h = reinterpret_cast<uint16_t *>(b.bytes.data());
    for (int64_t k = 0; k < n; ++k) h[k] = static_cast<uint16_t>((rng() & 0x8000u) | 0x2000u | (rng() & 0x0fffu));
  }
  if (input && b.dtype == TM_F32) {
    std::normal_distribution<float> nd(0.f, 0.02f);
    float *f = reinterpret_cast<float *>(b.bytes.data());
    for (int64_t k = 0; k < n; ++k) f[k] = nd(rng);
  }
  return b;
}

void Profile(tm_context *ctx, const tinymlir::gpt2::Gpt2Config &config, const Kernel &k,
             int64_t t, int64_t l, int reps, const std::string &ir_kind, int stage) {
  tinymlir::Tracer tracer(ctx, k.name);
  TraceProgram(config, k.kind, t, l, &tracer);
  double t0 = Now();
  tinymlir::ProgramHandle p;
  tm_compile_options options;
  tm_compile_options_init(&options);
  if (g_opt_level >= 0) options.opt_level = g_opt_level;
  if (tracer.compile(ctx, &options, &p) != TM_OK) {
    std::fprintf(stderr, "%s: %s\n", k.name, tracer.error().c_str());
    std::exit(1);
  }
  double compile_ms = 1e3 * (Now() - t0);
  if (ir_kind == k.name) {
    std::string text;
    Check(tinymlir::ProgramIr(p, static_cast<tm_stage>(stage), &text), "ir");
    std::printf("%s\n", text.c_str());
  }
  // A program that runs once per layer gets one copy of its inputs per layer, used in turn,
  // so that (as in the model) its weights come from DRAM, not from the cache.
  std::mt19937 rng(1);
  std::vector<std::vector<Buffer>> inputs(k.per_token);
  std::vector<std::vector<tm_tensor>> sets(k.per_token);
  for (int c = 0; c < k.per_token; ++c) {
    for (int32_t i = 0; i < tm_program_num_inputs(p); ++i) {
      inputs[c].push_back(MakeBuffer(p, true, i, rng));
      if (k.kind == ProgramKind::kAttnMlp && i == tinymlir::gpt2::kAttnMlpMaskInput &&
          g_real_mask) {
        // As the model builds it after a t-token step ending at cache row l - 1 or, for
        // --mask-half, with only the first half of the rows visible (a partly filled cache).
        Buffer &m = inputs[c].back();
        float *f = reinterpret_cast<float *>(m.bytes.data());
        int64_t rows = m.shape[0], cols = m.shape[1];
        for (int64_t r = 0; r < rows; ++r)
          for (int64_t j = 0; j < cols; ++j)
            f[r * cols + j] = j <= r + g_mask_offset(rows, cols) ? 0.0f
                                                                 : std::numeric_limits<float>::lowest();
      }
    }
    for (Buffer &b : inputs[c]) sets[c].push_back(b.view());
  }
  std::vector<Buffer> outputs;
  std::vector<tm_tensor> out;
  for (int32_t i = 0; i < tm_program_num_outputs(p); ++i) outputs.push_back(MakeBuffer(p, false, i, rng));
  for (Buffer &b : outputs) out.push_back(b.view());
  std::vector<double> ms;  // per invoke, averaged over the copies
  for (int r = 0; r < reps + 1; ++r) {
    double s = Now();
    for (int c = 0; c < k.per_token; ++c)
      Check(tm_invoke(p, sets[c].data(), (int32_t)sets[c].size(), out.data(), (int32_t)out.size()),
            "invoke");
    if (r > 0) ms.push_back(1e3 * (Now() - s) / k.per_token);  // the first round is a warm-up
  }
  std::sort(ms.begin(), ms.end());
  double med = ms[ms.size() / 2];
  std::printf("%-22s compile %8.1f ms   invoke median %9.3f ms  min %9.3f ms   x%-2d = %9.2f ms\n",
              k.name, compile_ms, med, ms.front(), k.per_token, med * k.per_token);
  static const char *const kPhases[TM_NUM_COMPILE_PHASES] = {
      "build", "optimize", "bufferize", "lower", "llvm-opt", "codegen", "link", "disk-read"};
  std::printf("%-22s phases:", "");
  for (int i = 0; i < TM_NUM_COMPILE_PHASES; ++i)
    std::printf(" %s %.1f", kPhases[i], 1e3 * tm_program_phase_seconds(p, static_cast<tm_compile_phase>(i)));
  std::printf(" ms\n");
}

}  // namespace

int main(int argc, char **argv) {
  int64_t t = 1, l = 128;
  int reps = 10;
  std::string ir;
  int stage = TM_STAGE_LOWERED;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--real-mask") { g_real_mask = true; continue; }
    if (a == "--mask-half") { g_real_mask = g_mask_half = true; continue; }
    if (i + 1 >= argc) break;
    if (a == "--t") t = std::atoll(argv[i + 1]);
    else if (a == "--l") l = std::atoll(argv[i + 1]);
    else if (a == "--reps") reps = std::atoi(argv[i + 1]);
    else if (a == "--ir") ir = argv[i + 1];
    else if (a == "--stage") stage = std::atoi(argv[i + 1]);
    else if (a == "--opt") g_opt_level = std::atoi(argv[i + 1]);
    else if (a == "--weights") g_weights = argv[i + 1];
    ++i;
  }
  std::printf("GPT-2 124M program timings: t = %lld rows, l = %lld cache rows\n", (long long)t,
              (long long)l);
  tinymlir::gpt2::Gpt2Config config;  // GPT-2 124M
  config.vocab_size = 50257;
  config.n_ctx = 1024;
  config.n_embd = 768;
  config.n_layer = 12;
  config.n_head = 12;
  config.n_inner = 3072;
  config.projections_out_major = true;  // as the model holds them on the CPU target
  config.matrices = g_weights == "f16"    ? TM_F16
                    : g_weights == "bf16" ? TM_BF16
                    : g_weights == "q8_0" ? TM_Q8_0
                                          : TM_F32;
  tinymlir::ContextHandle ctx;
  Check(tm_context_create(ctx.out()), "context");
  const Kernel kernels[] = {{"embed", ProgramKind::kEmbed, 1},
                            {"qkv", ProgramKind::kQkv, config.n_layer},
                            {"attn_mlp", ProgramKind::kAttnMlp, config.n_layer},
                            {"head", ProgramKind::kHead, 1}};
  for (const Kernel &k : kernels) Profile(ctx, config, k, t, l, reps, ir, stage);
  return 0;
}
