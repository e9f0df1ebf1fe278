// gpt2_bench: measures tinymlir on a GPT-2 checkpoint through the public C API only.
//
//   gpt2_bench --model DIR --prompts FILE [--decode-tokens 64] [--reps 5] [--logits-out F]
//              [--weights f32|f16|bf16|q8_0] [--core-only]
//   gpt2_bench --bandwidth-mb 512 [--threads 2] [--reps 5]
//   gpt2_bench --side-by-side ROUNDS --model DIR [--small DIR] --prompts FILE
//              [--decode-tokens 64] [--bandwidth-mb 512] [--threads 2]
//
// FILE holds two lines of whitespace-separated token ids: the 16-token prompt (prefill-16,
// decode prompt, logits cross-check) and the 128-token prompt (prefill-128).
// --weights: the dtype the model holds its weight matrices in (tm_model_options.weights;
// default as stored; q8_0: 8-bit blocks quantized at load). --side-by-side: decode of DIR in
// F32, F16, BF16 and Q8_0 and of the small model, in interleaved rounds, each decode next to
// a read-bandwidth sample of its own (SideBySide). --core-only: prefill, decode and its
// breakdown, logits and memory, not the no-cache decode, the invoke overhead, the
// GEMV-vs-GEMM row or the disk cache.
// Prints one JSON object on stdout. Threads: the BLAS calls use OpenBLAS's threads, so the
// caller sets OPENBLAS_NUM_THREADS; the bandwidth mode uses --threads std::threads, reading
// with read_ceiling.h's kernel over buffers in huge pages.
#include <tinymlir/gpt2.h>
#include <tinymlir/tinymlir.h>
#include <tinymlir/tinymlir.hpp>

#include "read_ceiling.h"

#include <dirent.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Now() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

[[noreturn]] void Die(const std::string &what) {
  std::fprintf(stderr, "gpt2_bench: %s\n", what.c_str());
  std::exit(1);
}

void Check(tm_status s, const char *what) {
  if (s != TM_OK) Die(std::string(what) + ": " + tm_status_string(s) + ": " + tm_last_error());
}

double Median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

std::string JsonList(const std::vector<double> &v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  return o.str() + "]";
}

std::string JsonIds(const std::vector<int32_t> &v) {
  std::ostringstream o;
  o << "[";
  for (size_t i = 0; i < v.size(); ++i) o << (i ? ", " : "") << v[i];
  return o.str() + "]";
}

// A line of a process's status file ("VmRSS:", "VmHWM:"), in MB.
double StatusMb(const char *field, const std::string &status = "/proc/self/status") {
  std::ifstream in(status);
  std::string line;
  const size_t n = std::strlen(field);
  while (std::getline(in, line))
    if (line.compare(0, n, field) == 0) return std::atof(line.c_str() + n) / 1024.0;
  return 0.0;
}

// Resident set size now, in MB.
double CurrentRssMb() { return StatusMb("VmRSS:"); }

// Peak resident set size of this process's memory, in MB: VmHWM, not getrusage's
// ru_maxrss, which also counts the parent's memory when the parent (Python's subprocess)
// started this process through vfork.
double PeakRssMb() { return StatusMb("VmHWM:"); }

// The largest peak resident set size among this process's children, in MB: libtinymlir.so
// compiles in compiler processes (tinymlir-compiler), which stay until they have been idle
// for a few seconds. Their memory is not this process's, but it is memory a compile costs.
double CompilerProcessPeakMb() {
  double peak = 0;
  DIR *proc = opendir("/proc");
  while (dirent *entry = proc ? readdir(proc) : nullptr) {
    if (entry->d_name[0] < '1' || entry->d_name[0] > '9') continue;
    std::ifstream stat(std::string("/proc/") + entry->d_name + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    const size_t paren = text.rfind(')');  // the command name may hold spaces
    int parent = 0;
    char state = 0;
    if (paren == std::string::npos ||
        std::sscanf(text.c_str() + paren + 1, " %c %d", &state, &parent) != 2 ||
        parent != getpid())
      continue;
    peak = std::max(peak, StatusMb("VmHWM:", std::string("/proc/") + entry->d_name + "/status"));
  }
  if (proc) closedir(proc);
  return peak;
}

std::vector<std::vector<int32_t>> ReadPrompts(const std::string &path) {
  std::ifstream in(path);
  if (!in) Die("cannot open prompts file " + path);
  std::vector<std::vector<int32_t>> out;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream s(line);
    std::vector<int32_t> ids;
    for (long id; s >> id;) ids.push_back(static_cast<int32_t>(id));
    if (!ids.empty()) out.push_back(ids);
  }
  if (out.size() != 2) Die("prompts file needs two lines of token ids");
  return out;
}


tm_model_stats GetStats(tm_model *m) {
  tm_model_stats s;
  std::memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  Check(tm_model_get_stats(m, &s), "tm_model_get_stats");
  return s;
}

std::vector<int32_t> Generate(tm_model *m, const std::vector<int32_t> &prompt, int new_tokens) {
  tm_generate_options o;
  tm_generate_options_init(&o);
  o.max_new_tokens = new_tokens;  // greedy, KV cache on (the defaults)
  std::vector<int32_t> out(new_tokens);
  size_t n = 0;
  Check(tm_generate(m, prompt.data(), prompt.size(), &o, nullptr, nullptr, out.data(), out.size(),
                    &n),
        "tm_generate");
  out.resize(n);
  return out;
}

using tm_bench::HugeBuffer;
using tm_bench::V16;

// STREAM's triad, a[i] = b[i] + s * c[i]: the cross-check of the read figure.
__attribute__((target_clones("avx512f", "avx2", "default")))
void Triad(V16 *a, const V16 *b, const V16 *c, size_t n) {
  const V16 s = V16{} + 3.0f;
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// A buffer of `mb` MB in 2 MB pages, every float `value` (read_ceiling.h).
std::unique_ptr<HugeBuffer> Buffer(int mb, float value) {
  auto b = std::make_unique<HugeBuffer>(static_cast<size_t>(mb) << 20, value);
  if (!b->ok()) Die("cannot allocate the bandwidth buffers");
  return b;
}

// Seconds for `threads` std::threads to run `work(lo, hi)` over their shares of [0, n).
template <typename Work>
double TimeShares(size_t n, int threads, const Work &work) {
  double t0 = Now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      work(n / threads * t, t == threads - 1 ? n : n / threads * (t + 1), t);
    });
  for (auto &th : pool) th.join();
  return Now() - t0;
}

// The read bandwidth of the ceiling: the best of `passes` passes of read_ceiling.h's
// ReadStreams over the buffer, each of `threads` threads over its half, in bytes per second.
double ReadBytesPerSecond(const HugeBuffer &buf, int threads, int passes) {
  std::vector<float> sums(threads);
  double best = 1e30;
  for (int r = 0; r < passes; ++r)
    best = std::min(best, TimeShares(buf.count(), threads, [&](size_t lo, size_t hi, int t) {
                      sums[t] += tm_bench::ReadStreams(buf.data() + lo, hi - lo);
                    }));
  float keep = 0;
  for (float s : sums) keep += s;
  if (keep == 42.5f) std::fprintf(stderr, " ");  // keeps the read loop alive
  return buf.bytes() / best;
}

// Memory bandwidth with `threads` std::threads, each working on its share of `mb` MB
// buffers in 2 MB pages; the best of `reps` passes of each kind:
//   read:  ReadStreams over one buffer (bytes = the buffer): the decode ceiling, since a
//          decode step reads its weights and writes almost nothing;
//   copy:  memcpy (bytes = read + written, STREAM's convention);
//   triad: STREAM's triad over three buffers (bytes = 2 read + 1 written).
void Bandwidth(int mb, int threads, int reps) {
  auto a = Buffer(mb, 1.0f), b = Buffer(mb, 2.0f), c = Buffer(mb, 0.5f);
  const double read_bps = ReadBytesPerSecond(*a, threads, reps);
  double copy = 1e30, triad = 1e30;
  for (int r = 0; r < reps; ++r)
    copy = std::min(copy, TimeShares(a->count(), threads, [&](size_t lo, size_t hi, int) {
                      std::memcpy(b->data() + lo, a->data() + lo, (hi - lo) * sizeof(V16));
                    }));
  for (int r = 0; r < reps; ++r)
    triad = std::min(triad, TimeShares(a->count(), threads, [&](size_t lo, size_t hi, int) {
                       Triad(c->data() + lo, a->data() + lo, b->data() + lo, hi - lo);
                     }));
  std::printf("{\"threads\": %d, \"buffer_mb\": %d, \"reps\": %d, \"read_bytes_per_s\": %.6g, "
              "\"copy_bytes_per_s\": %.6g, \"triad_bytes_per_s\": %.6g, "
              "\"read_buffer_huge_page_fraction\": %.3g}\n",
              threads, mb, reps, read_bps, 2.0 * a->bytes() / copy, 3.0 * a->bytes() / triad,
              static_cast<double>(a->HugePageBytes()) / a->bytes());
}

// Decode side by side: the same checkpoint held in F32, F16, BF16 and Q8_0, and the small
// model, all loaded in this process, decoded in `rounds` rounds, once per model and round, in
// alternating order (forward in even rounds, backward in odd ones, so that a drift within a
// round favours none). Just before each decode, a read-bandwidth sample (the best of three
// passes of ReadStreams over a `mb` MB buffer in huge pages, about a tenth of a second):
// this VM's bandwidth moves by a factor of two within minutes and by a third between
// seconds, so each decode is compared with the bandwidth measured next to it, and the
// ratios between models with decodes a second apart. Every model's tokens must be the
// same in every round. Prints one JSON object: per model, its decodes' tokens/s and the
// read samples taken just before them (bytes/s), round by round.
void SideBySide(tm_context *ctx, const std::string &model_dir, const std::string &small_dir,
                const std::vector<int32_t> &prompt, int decode_tokens, int rounds, int mb,
                int threads) {
  struct Entry {
    std::string name;
    tm_model *model = nullptr;
    std::vector<double> tokens_per_s, read_bytes_per_s;
    std::vector<int32_t> ids;
  };
  std::vector<Entry> entries;
  auto load = [&](const std::string &name, const std::string &dir, tm_dtype weights) {
    tm_model_options o;
    tm_model_options_init(&o);
    o.weights = weights;
    Entry e;
    e.name = name;
    Check(tm_model_load(ctx, dir.c_str(), &o, &e.model), "tm_model_load");
    e.ids = Generate(e.model, prompt, decode_tokens + 1);  // compiles; the warm-up
    entries.push_back(std::move(e));
  };
  load("f32", model_dir, TM_F32);
  load("f16", model_dir, TM_F16);
  load("bf16", model_dir, TM_BF16);
  load("q8_0", model_dir, TM_Q8_0);
  if (!small_dir.empty()) load("small", small_dir, static_cast<tm_dtype>(0));  // as stored (F16)
  auto buf = Buffer(mb, 1.0f);
  for (int r = 0; r < rounds; ++r) {
    for (size_t i = 0; i < entries.size(); ++i) {
      Entry &e = entries[r % 2 == 0 ? i : entries.size() - 1 - i];
      e.read_bytes_per_s.push_back(ReadBytesPerSecond(*buf, threads, 3));
      std::vector<int32_t> ids = Generate(e.model, prompt, decode_tokens + 1);
      if (ids != e.ids) Die("side by side: " + e.name + "'s tokens changed between rounds");
      tm_model_stats s = GetStats(e.model);
      e.tokens_per_s.push_back(s.decode_tokens / s.decode_seconds);
    }
  }
  std::printf("{\"rounds\": %d, \"decode_tokens\": %d, \"threads\": %d, \"buffer_mb\": %d, "
              "\"read_buffer_huge_page_fraction\": %.3g,\n",
              rounds, decode_tokens, threads, mb,
              static_cast<double>(buf->HugePageBytes()) / buf->bytes());
  for (size_t i = 0; i < entries.size(); ++i)
    std::printf("  \"%s\": {\"decode_tokens_per_s\": %s,\n    \"read_bytes_per_s\": %s,\n"
                "    \"generated_ids\": %s}%s\n",
                entries[i].name.c_str(), JsonList(entries[i].tokens_per_s).c_str(),
                JsonList(entries[i].read_bytes_per_s).c_str(), JsonIds(entries[i].ids).c_str(),
                i + 1 < entries.size() ? "," : "");
  std::printf("}\n");
  for (Entry &e : entries) tm_model_destroy(e.model);
}

tm_kernel_times KernelTimes() {
  tm_kernel_times t;
  std::memset(&t, 0, sizeof t);
  t.struct_size = sizeof t;
  Check(tm_process_kernel_times(&t), "tm_process_kernel_times");
  return t;
}

// Milliseconds per decode token, by part (names as printed in the JSON).
using DecodeBreakdown = std::vector<std::pair<std::string, double>>;

DecodeBreakdown Breakdown(const tm_model_stats &s, const tm_kernel_times &k) {
  const double per_token = 1e3 / static_cast<double>(s.decode_tokens);
  double in_programs = 0;
  for (double x : s.decode_invoke_seconds) in_programs += x;
  const double gemv = k.gemv_seconds, blas = k.blas_seconds, wait = k.pool_wait_seconds;
  return {
      {"total", s.decode_seconds * per_token},
      {"embed", s.decode_invoke_seconds[TM_MODEL_PROGRAM_EMBED] * per_token},
      {"qkv", s.decode_invoke_seconds[TM_MODEL_PROGRAM_QKV] * per_token},
      {"attn_mlp", s.decode_invoke_seconds[TM_MODEL_PROGRAM_ATTN_MLP] * per_token},
      {"head", s.decode_invoke_seconds[TM_MODEL_PROGRAM_HEAD] * per_token},
      {"host", (s.decode_seconds - in_programs) * per_token},
      {"gemv", gemv * per_token},
      {"gemv_pool_wait", wait * per_token},
      {"blas", blas * per_token},
      {"other_in_programs", (in_programs - gemv - blas) * per_token},
      {"invokes", static_cast<double>(s.decode_invokes) / static_cast<double>(s.decode_tokens)},
  };
}

DecodeBreakdown MedianBreakdown(const std::vector<DecodeBreakdown> &runs) {
  DecodeBreakdown out = runs.at(0);
  for (size_t i = 0; i < out.size(); ++i) {
    std::vector<double> v;
    for (const DecodeBreakdown &r : runs) v.push_back(r[i].second);
    out[i].second = Median(v);
  }
  return out;
}

// A program of one binary op on two f32 inputs, traced with the public C++ header's Tracer.
// f32 -> f16 bits, rounded to nearest even (the values here are normal and in range).
uint16_t HalfBits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x < 0x38800000u) return sign;  // below f16's normals: not produced here
  x -= 0x38000000u;
  uint32_t q = x >> 13, rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (q & 1u))) ++q;
  return sign | static_cast<uint16_t>(q);
}

tinymlir::ProgramHandle CompileBinary(tm_context *ctx, const char *name,
                                      const std::vector<int64_t> &a_shape,
                                      const std::vector<int64_t> &b_shape,
                                      tm_status (*op)(tm_trace *, tm_value, tm_value, tm_value *),
                                      tm_dtype b_dtype = TM_F32) {
  tinymlir::Tracer tr(ctx, name);
  tm_value a = tr.input(TM_F32, a_shape), b = tr.input(b_dtype, b_shape), y = 0;
  if (tr.ok()) Check(op(tr.get(), a, b, &y), name);
  tr.end({y});
  tinymlir::ProgramHandle p;
  if (tr.compile(ctx, nullptr, &p) != TM_OK) Die(std::string(name) + ": " + tr.error());
  return p;
}

// The fixed cost of one tm_invoke: a program adding two 4-element f32 vectors, called in
// batches of 1000; the median batch's time per call, in microseconds.
double InvokeOverheadMicroseconds(tm_context *ctx) {
  const int64_t shape[] = {4};
  tinymlir::ProgramHandle p = CompileBinary(ctx, "tiny_add", {4}, {4}, tm_op_add);
  float x[4] = {1, 2, 3, 4}, y[4] = {5, 6, 7, 8}, z[4];
  const int64_t strides[] = {1};
  tm_tensor in[2] = {{x, TM_F32, 1, shape, strides}, {y, TM_F32, 1, shape, strides}};
  tm_tensor out[1] = {{z, TM_F32, 1, shape, strides}};
  std::vector<double> per_call;
  for (int batch = 0; batch < 21; ++batch) {
    double t0 = Now();
    for (int i = 0; i < 1000; ++i) Check(tm_invoke(p, in, 2, out, 1), "tm_invoke");
    per_call.push_back((Now() - t0) / 1000 * 1e6);
  }
  if (z[3] != 12.0f) Die("tiny_add computed the wrong sum");
  return Median(per_call);
}

// Do the KV-cache and recompute paths agree bit for bit? A decode step computes a new row's
// products with the GEMV kernels (M = 1); recomputing puts the same row in a product with
// the other `rows` rows: through the GEMV kernels too with a half-precision weight and up
// to 16 rows, through OpenBLAS's GEMM otherwise. Both products of GPT-2's c_attn shape
// (768 x 2304, the weight in `dtype`, TM_F32 or TM_F16) on the same row of random inputs;
// returns {fraction of outputs that differ, largest |difference|, largest |output|}.
std::vector<double> GemvAgainstPromptRow(tm_context *ctx, int64_t rows, tm_dtype dtype) {
  const int64_t k = 768, n = 2304;
  auto compile = [&](int64_t m) {
    return CompileBinary(ctx, "product", {m, k}, {k, n}, tm_op_matmul, dtype);
  };
  std::vector<float> x(rows * k), w(k * n), all(rows * n), one(n);
  uint32_t state = 12345;
  auto next = [&] {
    state = state * 1664525u + 1013904223u;
    return static_cast<float>(state >> 8) / 16777216.0f * 2.0f - 1.0f;
  };
  for (float &v : x) v = next();
  for (float &v : w) v = next();
  // An f16 weight: the same values' f16 bits (F16C converts; exact for what it keeps).
  std::vector<uint16_t> w16(w.size());
  for (size_t i = 0; i < w.size(); ++i) w16[i] = HalfBits(w[i]);
  void *weight = dtype == TM_F16 ? static_cast<void *>(w16.data()) : static_cast<void *>(w.data());
  const int64_t x_all[] = {rows, k}, x_one[] = {1, k}, w_shape[] = {k, n};
  const int64_t y_all[] = {rows, n}, y_one[] = {1, n}, s_row[] = {k, 1}, s_w[] = {n, 1};
  const int64_t s_all[] = {n, 1};
  tinymlir::ProgramHandle prompt = compile(rows), gemv = compile(1);
  tm_tensor in_all[2] = {{x.data(), TM_F32, 2, x_all, s_row}, {weight, dtype, 2, w_shape, s_w}};
  tm_tensor out_all = {all.data(), TM_F32, 2, y_all, s_all};
  tm_tensor in_one[2] = {{x.data() + (rows - 1) * k, TM_F32, 2, x_one, s_row},
                         {weight, dtype, 2, w_shape, s_w}};
  tm_tensor out_one = {one.data(), TM_F32, 2, y_one, s_all};
  Check(tm_invoke(prompt, in_all, 2, &out_all, 1), "tm_invoke");
  Check(tm_invoke(gemv, in_one, 2, &out_one, 1), "tm_invoke");
  double differ = 0, max_diff = 0, max_abs = 0;
  for (int64_t j = 0; j < n; ++j) {
    const float a = all[(rows - 1) * n + j], b = one[j];
    differ += std::memcmp(&a, &b, sizeof a) != 0;
    max_diff = std::max(max_diff, static_cast<double>(std::fabs(a - b)));
    max_abs = std::max(max_abs, static_cast<double>(std::fabs(a)));
  }
  return {differ / static_cast<double>(n), max_diff, max_abs};
}

}  // namespace

int main(int argc, char **argv) {
  std::string model_dir, prompts_path, logits_out;
  int decode_tokens = 64, reps = 5, bandwidth_mb = 0, threads = 2;
  int side_by_side_rounds = 0;
  std::string small_dir;
  bool core_only = false;
  tm_model_options model_options;
  tm_model_options_init(&model_options);
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) Die("missing value after " + a);
      return argv[++i];
    };
    if (a == "--model") model_dir = next();
    else if (a == "--prompts") prompts_path = next();
    else if (a == "--logits-out") logits_out = next();
    else if (a == "--decode-tokens") decode_tokens = std::atoi(next().c_str());
    else if (a == "--reps") reps = std::max(1, std::atoi(next().c_str()));
    else if (a == "--bandwidth-mb") bandwidth_mb = std::atoi(next().c_str());
    else if (a == "--threads") threads = std::max(1, std::atoi(next().c_str()));
    else if (a == "--core-only") core_only = true;
    else if (a == "--side-by-side") side_by_side_rounds = std::max(1, std::atoi(next().c_str()));
    else if (a == "--small") small_dir = next();
    else if (a == "--weights") {
      const std::string w = next();
      if (w != "f32" && w != "f16" && w != "bf16" && w != "q8_0")
        Die("--weights expects f32, f16, bf16 or q8_0");
      model_options.weights = w == "f16"    ? TM_F16
                              : w == "bf16" ? TM_BF16
                              : w == "q8_0" ? TM_Q8_0
                                            : TM_F32;
    }
    else Die("unknown argument " + a);
  }
  if (bandwidth_mb > 0 && model_dir.empty()) {
    Bandwidth(bandwidth_mb, threads, reps);
    return 0;
  }
  if (model_dir.empty() || prompts_path.empty()) Die("--model and --prompts are required");
  auto prompts = ReadPrompts(prompts_path);
  const std::vector<int32_t> &p16 = prompts[0], &p128 = prompts[1];

  if (side_by_side_rounds > 0) {
    tm_context *ctx = nullptr;
    Check(tm_context_create(&ctx), "tm_context_create");
    SideBySide(ctx, model_dir, small_dir, p16, decode_tokens, side_by_side_rounds,
               bandwidth_mb > 0 ? bandwidth_mb : 512, threads);
    tm_context_release(ctx);
    return 0;
  }

  // Cold: a fresh context compiles every program the prefill-16 + decode run needs.
  tm_context *ctx = nullptr;
  Check(tm_context_create(&ctx), "tm_context_create");
  double t0 = Now();
  tm_model *m = nullptr;
  Check(tm_model_load(ctx, model_dir.c_str(), &model_options, &m), "tm_model_load");
  double load_wall = Now() - t0;
  int32_t vocab = 0;
  Check(tm_model_info(m, &vocab, nullptr, nullptr, nullptr), "tm_model_info");
  double rss_after_load = CurrentRssMb(), peak_after_load = PeakRssMb();

  t0 = Now();
  Generate(m, p16, decode_tokens + 1);  // prefill + decode_tokens decode steps
  double first_generate_wall = Now() - t0;
  tm_model_stats cold = GetStats(m);
  double compiler_peak = CompilerProcessPeakMb();

  // Logits of the 16-token prompt for the cross-check (full recompute, no cache).
  std::vector<float> logits(vocab);
  Check(tm_model_logits(m, p16.data(), p16.size(), logits.data(), logits.size()), "tm_model_logits");
  if (!logits_out.empty()) {
    FILE *f = std::fopen(logits_out.c_str(), "wb");
    if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size())
      Die("cannot write " + logits_out);
    std::fclose(f);
  }

  // Prefill: tm_generate with one new token; prefill_seconds excludes compilation.
  auto prefill = [&](const std::vector<int32_t> &prompt, double *compile_s) {
    double before = GetStats(m).compile_seconds;
    Generate(m, prompt, 1);  // warm-up (compiles prefill-128's programs the first time)
    *compile_s = GetStats(m).compile_seconds - before;
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) {
      Generate(m, prompt, 1);
      ms.push_back(1e3 * GetStats(m).prefill_seconds);
    }
    return ms;
  };
  double compile16 = 0, compile128 = 0;
  std::vector<double> prefill16 = prefill(p16, &compile16);
  std::vector<double> prefill128 = prefill(p128, &compile128);
  compiler_peak = std::max(compiler_peak, CompilerProcessPeakMb());
  // Where prefill-128's time goes: BLAS (its GEMMs) against the rest of its programs.
  std::vector<double> prefill128_blas_ms, prefill128_other_ms;
  for (int r = 0; r < reps; ++r) {
    tm_process_kernel_timing(1);
    Generate(m, p128, 1);
    tm_kernel_times k = KernelTimes();
    tm_process_kernel_timing(0);
    const double total = 1e3 * GetStats(m).prefill_seconds;
    const double matrix = 1e3 * (k.blas_seconds + k.gemv_seconds);
    prefill128_blas_ms.push_back(matrix);
    prefill128_other_ms.push_back(total - matrix);
  }

  // Decode: decode_tokens steps with the KV cache after the 16-token prompt.
  std::vector<double> tps;
  std::vector<int32_t> tokens;
  Generate(m, p16, decode_tokens + 1);  // warm-up
  for (int r = 0; r < reps; ++r) {
    tokens = Generate(m, p16, decode_tokens + 1);
    tm_model_stats s = GetStats(m);
    if (s.decode_tokens != static_cast<uint64_t>(decode_tokens)) Die("unexpected decode_tokens");
    tps.push_back(s.decode_tokens / s.decode_seconds);
  }
  tm_model_stats end = GetStats(m);

  // Decode without the KV cache (the simplest loop: every step recomputes the whole sequence),
  // min(decode_tokens, 16) steps after the 16-token prompt, as numpy_gpt2.py does.
  const int no_cache_tokens = std::min(decode_tokens, 16);
  std::vector<double> no_cache_tps;
  for (int r = 0; !core_only && r <= reps; ++r) {  // the first run is the warm-up (compiles)
    tm_generate_options o;
    tm_generate_options_init(&o);
    o.max_new_tokens = no_cache_tokens + 1;
    o.use_kv_cache = 0;
    std::vector<int32_t> ids(no_cache_tokens + 1);
    size_t n = 0;
    Check(tm_generate(m, p16.data(), p16.size(), &o, nullptr, nullptr, ids.data(), ids.size(), &n),
          "tm_generate");
    tm_model_stats s = GetStats(m);
    if (r > 0) no_cache_tps.push_back(s.decode_tokens / s.decode_seconds);
  }

  // Where a decode step's time goes, from separate timed runs (kernel timing costs two clock
  // reads per kernel call, so the runs above are untimed): the model's time inside each
  // program's tm_invoke (tm_model_stats) and the runtime kernels' time (tm_kernel_times),
  // counted from the first token's callback on, so the prompt's step is left out.
  std::vector<DecodeBreakdown> parts;
  for (int r = 0; r < reps; ++r) {
    tm_generate_options o;
    tm_generate_options_init(&o);
    o.max_new_tokens = decode_tokens + 1;
    std::vector<int32_t> ids(decode_tokens + 1);
    size_t n = 0;
    auto start_timing_once = [](void *started, int32_t) {
      if (!*static_cast<bool *>(started)) tm_process_kernel_timing(1);
      *static_cast<bool *>(started) = true;
      return 0;
    };
    bool started = false;
    Check(tm_generate(m, p16.data(), p16.size(), &o, start_timing_once, &started, ids.data(),
                      ids.size(), &n),
          "tm_generate");
    tm_kernel_times decode_kernels = KernelTimes();
    tm_process_kernel_timing(0);
    parts.push_back(Breakdown(GetStats(m), decode_kernels));
  }
  const double invoke_overhead_us = core_only ? 0.0 : InvokeOverheadMicroseconds(ctx);
  // The last row of a prompt's product against the same row alone (a decode step): a
  // 16-row prompt with an f16 weight (the GEMV kernels) and with an f32 one (GEMM).
  const std::vector<double> kv_vs_prompt16 =
      core_only ? std::vector<double>{0, 0, 0} : GemvAgainstPromptRow(ctx, 16, TM_F16);
  const std::vector<double> kv_vs_recompute =
      core_only ? std::vector<double>{0, 0, 0} : GemvAgainstPromptRow(ctx, 16, TM_F32);
  double rss_end = CurrentRssMb(), peak = PeakRssMb();

  // The disk cache: a second context starts with an empty memory cache, as a new process
  // does, and reads the programs the cold run wrote (the caller points TINYMLIR_CACHE_DIR
  // at an empty directory, so the cold run above really compiled).
  double warm_generate_wall = 0;
  tm_model_stats warm = {};
  if (!core_only) {
    tm_context *ctx2 = nullptr;
    Check(tm_context_create(&ctx2), "tm_context_create");
    tm_model *m2 = nullptr;
    Check(tm_model_load(ctx2, model_dir.c_str(), &model_options, &m2), "tm_model_load");
    t0 = Now();
    Generate(m2, p16, decode_tokens + 1);
    warm_generate_wall = Now() - t0;
    warm = GetStats(m2);
    tm_model_destroy(m2);
    tm_context_release(ctx2);
  }

  std::printf("{\n");
  std::printf("  \"implementation\": \"tinymlir %s\",\n", tm_version());
  std::printf("  \"load_seconds\": %.6g, \"load_wall_seconds\": %.6g,\n", cold.load_seconds,
              load_wall);
  std::printf("  \"cold_compile_seconds\": %.6g, \"cold_programs_compiled\": %llu,\n",
              cold.compile_seconds, (unsigned long long)cold.programs_compiled);
  std::printf("  \"first_generate_wall_seconds\": %.6g,\n", first_generate_wall);
  std::printf("  \"disk_cache_compile_seconds\": %.6g, \"disk_cache_programs_read\": %llu, "
              "\"disk_cache_programs_compiled\": %llu, \"disk_cache_generate_wall_seconds\": %.6g,\n",
              warm.compile_seconds, (unsigned long long)warm.programs_from_disk,
              (unsigned long long)warm.programs_compiled, warm_generate_wall);
  std::printf("  \"compile_prefill16_extra_seconds\": %.6g, "
              "\"compile_prefill128_seconds\": %.6g,\n", compile16, compile128);
  std::printf("  \"total_compile_seconds\": %.6g, \"total_programs_compiled\": %llu,\n",
              end.compile_seconds, (unsigned long long)end.programs_compiled);
  std::printf("  \"prefill16_ms\": %s, \"prefill16_ms_median\": %.6g,\n",
              JsonList(prefill16).c_str(), Median(prefill16));
  std::printf("  \"prefill128_ms\": %s, \"prefill128_ms_median\": %.6g,\n",
              JsonList(prefill128).c_str(), Median(prefill128));
  std::printf("  \"prefill128_matrix_ms_median\": %.6g, \"prefill128_other_ms_median\": %.6g,\n",
              Median(prefill128_blas_ms), Median(prefill128_other_ms));
  std::printf("  \"decode_tokens\": %d, \"decode_tokens_per_s\": %s, "
              "\"decode_tokens_per_s_median\": %.6g,\n",
              decode_tokens, JsonList(tps).c_str(), Median(tps));
  std::printf("  \"no_cache_decode_tokens\": %d, \"no_cache_decode_tokens_per_s\": %s, "
              "\"no_cache_decode_tokens_per_s_median\": %.6g,\n",
              no_cache_tokens, JsonList(no_cache_tps).c_str(), Median(no_cache_tps));
  std::printf("  \"generated_ids\": %s,\n", JsonIds(tokens).c_str());
  std::printf("  \"decode_ms_per_token\": {");
  const char *sep = "";
  for (const auto &[name, value] : MedianBreakdown(parts)) {
    std::printf("%s\"%s\": %.6g", sep, name.c_str(), value);
    sep = ", ";
  }
  std::printf("},\n");
  std::printf("  \"invoke_overhead_us\": %.6g,\n", invoke_overhead_us);
  std::printf("  \"gemv_vs_gemm_row\": {\"fraction_differing\": %.6g, \"max_abs_diff\": %.6g, "
              "\"max_abs\": %.6g},\n",
              kv_vs_recompute[0], kv_vs_recompute[1], kv_vs_recompute[2]);
  std::printf("  \"gemv_vs_prompt16_row\": {\"fraction_differing\": %.6g, \"max_abs_diff\": %.6g, "
              "\"max_abs\": %.6g},\n",
              kv_vs_prompt16[0], kv_vs_prompt16[1], kv_vs_prompt16[2]);
  std::printf("  \"rss_after_load_mb\": %.1f, \"peak_rss_after_load_mb\": %.1f,\n",
              rss_after_load, peak_after_load);
  std::printf("  \"compiler_process_peak_rss_mb\": %.1f,\n", compiler_peak);
  std::printf("  \"rss_end_mb\": %.1f, \"peak_rss_mb\": %.1f\n", rss_end, peak);
  std::printf("}\n");
  tm_model_destroy(m);
  tm_context_release(ctx);
  return 0;
}
