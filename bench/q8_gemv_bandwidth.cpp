// q8_gemv_bandwidth: how close the decode GEMV kernels come to the machine's read bandwidth,
// on GPT-2 124M's decode shapes (m x k: 2304 x 768 QKV, 768 x 768 attention out, 3072 x 768
// MLP up, 768 x 3072 MLP down, 50257 x 768 LM head), one row of x (nx = 1):
//   f32  tm_rt_gemv_dots, dtype 1 (4 bytes per weight)
//   f16  tm_rt_gemv_dots, dtype 6 (2 bytes)
//   q8_0 tm_rt_gemv_dots_q8_0    (34 bytes per 32 weights)
// Each kernel call reads a copy of its matrix that is not in the cache (the copies are
// used in turn, and together are several times the L3 cache). The ceiling is a plain read
// loop (read_ceiling.h's ReadStreams, gpt2_bench's too, on the same worker pool, 1 MB chunks
// from a shared counter) over the same copies, run just before each timing, for as many
// bytes: the VM's bandwidth moves between seconds, so a kernel is compared with the ceiling
// next to it. Buffers are read_ceiling.h's HugeBuffers (2 MB pages, as the weights are
// held). Prints, per shape and kernel, the medians over the repetitions of the kernel's
// GB/s, the ceiling's GB/s and the kernel / ceiling ratio (the median of the per-repetition
// ratios).
//
//   q8_gemv_bandwidth [--reps 15] [--footprint-mb 256]
// --attention: instead, attention's batched products (tm_rt_gemv_{dots,rows}_batched) on
// 12-head caches of 32-512 rows, with the time per call.
// Threads: TINYMLIR_NUM_THREADS (the worker pool's); variant: TINYMLIR_CPU_EXCLUDE
// (avx512f: the AVX2 kernels; avx2: the portable ones).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "core/targets/cpu/run/gemv_kernels.h"
#include "core/targets/cpu/run/q8_0.h"
#include "core/runtime/worker_pool.h"
#include "read_ceiling.h"

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

[[noreturn]] void Die(const char *what) {
  std::fprintf(stderr, "q8_gemv_bandwidth: %s\n", what);
  std::exit(1);
}

using tm_bench::HugeBuffer;
using tm_bench::ReadStreams;
using tm_bench::V16;

std::atomic<float> g_sink{0};

// Reads [p, p + bytes) on the worker pool: 1 MB chunks from a shared counter.
void ReadOnPool(const void *p, size_t bytes) {
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t count = bytes / sizeof(V16), per_chunk = kChunk / sizeof(V16);
  const size_t chunks = (count + per_chunk - 1) / per_chunk;
  std::atomic<size_t> next{0};
  tinymlir::WorkerPool::Get().ParallelFor([&](int) {
    float sum = 0;
    for (size_t c; (c = next.fetch_add(1, std::memory_order_relaxed)) < chunks;)
      sum += ReadStreams(static_cast<const V16 *>(p) + c * per_chunk,
                         std::min(per_chunk, count - c * per_chunk));
    g_sink.store(g_sink.load(std::memory_order_relaxed) + sum, std::memory_order_relaxed);
  });
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

enum class Kind { kF32, kF16, kQ8 };
const char *Name(Kind kind) { return kind == Kind::kF32 ? "f32" : kind == Kind::kF16 ? "f16" : "q8_0"; }

struct Matrices {
  Kind kind;
  int64_t m, k;
  size_t bytes;  // one copy
  std::vector<std::unique_ptr<HugeBuffer>> copies;
  size_t next = 0;

  static std::unique_ptr<HugeBuffer> Alloc(size_t bytes) {
    auto b = std::make_unique<HugeBuffer>(bytes, 0.0f);
    if (!b->ok()) Die("out of memory");
    return b;
  }

  Matrices(Kind kind_, int64_t m_, int64_t k_, size_t footprint)
      : kind(kind_), m(m_), k(k_) {
    bytes = kind == Kind::kQ8 ? static_cast<size_t>(m * tinymlir::Q8RowBytes(k))
                              : static_cast<size_t>(m * k) * (kind == Kind::kF32 ? 4 : 2);
    const size_t n = std::max<size_t>(3, (footprint + bytes - 1) / bytes);
    // One copy filled with random weights, the others copied from it.
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> u(-1, 1);
    copies.push_back(Alloc(bytes));
    void *first = copies[0]->data();
    if (kind == Kind::kQ8) {
      std::vector<float> row(static_cast<size_t>(k));
      for (int64_t i = 0; i < m; ++i) {
        for (float &v : row) v = u(rng);
        tinymlir::QuantizeRowQ8_0(row.data(), k,
                                  static_cast<uint8_t *>(first) + i * tinymlir::Q8RowBytes(k));
      }
    } else if (kind == Kind::kF16) {
      auto *h = static_cast<uint16_t *>(first);
      for (size_t i = 0; i < bytes / 2; ++i) {
        const _Float16 v = static_cast<_Float16>(u(rng));
        std::memcpy(h + i, &v, 2);
      }
    } else {
      auto *f = static_cast<float *>(first);
      for (size_t i = 0; i < bytes / 4; ++i) f[i] = u(rng);
    }
    for (size_t c = 1; c < n; ++c) {
      copies.push_back(Alloc(bytes));
      std::memcpy(copies.back()->data(), first, bytes);
    }
  }
  const void *Next() {
    const void *p = copies[next]->data();
    next = (next + 1) % copies.size();
    return p;
  }
};

void Product(Kind kind, const Matrices &a, const void *w, const float *x, float *y) {
  if (kind == Kind::kQ8)
    tm_rt_gemv_dots_q8_0(a.m, a.k, w, tinymlir::Q8RowBytes(a.k), 1, x, a.k, 1, y, a.m, 1);
  else
    tm_rt_gemv_dots(kind == Kind::kF32 ? 1 : 6, a.m, a.k, w, a.k, 1, x, a.k, 1, y, a.m, 1);
}

// Attention's two products in a decode step of GPT-2 124M, over 12 heads of 64 with a
// cache of `rows` rows (768 floats each, the heads side by side): the scores (K's rows
// against each head's query) and the values (the probabilities times V's rows). Each call
// reads the K or V cache of the next of many layers' copies, so it comes from memory, as
// it does in decode, where the weights push the caches out of the L3.
void AttentionProducts(int rows, int reps, size_t footprint) {
  const int64_t heads = 12, dh = 64, width = heads * dh;
  const size_t bytes = static_cast<size_t>(rows * width) * 4;
  const size_t n = std::max<size_t>(3, footprint / bytes);
  std::vector<std::unique_ptr<HugeBuffer>> caches;
  for (size_t c = 0; c < n; ++c) {
    caches.push_back(std::make_unique<HugeBuffer>(bytes, 0.25f));
    if (!caches.back()->ok()) Die("out of memory");
  }
  std::vector<float> q(static_cast<size_t>(width), 0.5f), p(static_cast<size_t>(heads * rows), 0.1f);
  std::vector<float> scores(static_cast<size_t>(heads * rows)), out(static_cast<size_t>(width));
  size_t next = 0;
  auto cache = [&] { const void *c = caches[next]->data(); next = (next + 1) % n; return c; };
  auto scores_product = [&] {
    tm_rt_gemv_dots_batched(1, heads, rows, dh, cache(), width, dh, 1, q.data(), dh, 1, dh,
                            scores.data(), rows, 1, rows);
  };
  auto values_product = [&] {
    std::fill(out.begin(), out.end(), 0.0f);
    tm_rt_gemv_rows_batched(1, heads, 1, rows, dh, p.data(), rows, rows, cache(), width, dh,
                            out.data(), dh, dh);
  };
  const int calls = static_cast<int>(std::max<size_t>(8, (size_t{32} << 20) / bytes));
  for (int kind = 0; kind < 2; ++kind) {
    auto product = [&] { kind == 0 ? scores_product() : values_product(); };
    for (int c = 0; c < calls; ++c) product();
    std::vector<double> gbs, ceiling, ratio, us;
    for (int r = 0; r < reps; ++r) {
      double t0 = Now();
      for (int c = 0; c < calls; ++c) ReadOnPool(cache(), bytes);
      const double read_s = Now() - t0;
      t0 = Now();
      for (int c = 0; c < calls; ++c) product();
      const double kernel_s = Now() - t0;
      const double total = static_cast<double>(bytes) * calls;
      gbs.push_back(total / kernel_s * 1e-9);
      ceiling.push_back(total / read_s * 1e-9);
      ratio.push_back(read_s / kernel_s);
      us.push_back(kernel_s / calls * 1e6);
    }
    char name[32];
    std::snprintf(name, sizeof name, "%s %d", kind == 0 ? "scores" : "values", rows);
    std::printf("%-12s %-5s %9.2f %9.2f %9.2f %6.0f%% %7.2f us\n", name, "f32", bytes / 1048576.0,
                Median(gbs), Median(ceiling), 100 * Median(ratio), Median(us));
    std::fflush(stdout);
  }
}

}  // namespace

int main(int argc, char **argv) {
  int reps = 15;
  size_t footprint = size_t{256} << 20;
  bool attention = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--reps" && i + 1 < argc) reps = std::atoi(argv[++i]);
    else if (a == "--footprint-mb" && i + 1 < argc) footprint = size_t(std::atoi(argv[++i])) << 20;
    else if (a == "--attention") attention = true;
    else Die("usage: q8_gemv_bandwidth [--reps N] [--footprint-mb MB] [--attention]");
  }
  const char *exclude = std::getenv("TINYMLIR_CPU_EXCLUDE");
  const char *variants[] = {"portable", "avx2", "avx512"};
  std::printf("threads %d, q8_0 variant %s (TINYMLIR_CPU_EXCLUDE=%s), %d reps, %zu MB of copies\n",
              tinymlir::WorkerPool::Get().size(),
              variants[static_cast<int>(tinymlir::q8_0_internal::DefaultVariant())],
              exclude ? exclude : "", reps, footprint >> 20);
  std::printf("%-12s %-5s %9s %9s %9s %7s\n", "m x k", "kind", "MB", "GB/s", "ceil GB/s", "ratio");
  if (attention) {
    for (int rows : {32, 64, 128, 512}) AttentionProducts(rows, reps, footprint);
    return 0;
  }
  const int64_t shapes[][2] = {{2304, 768}, {768, 768}, {3072, 768}, {768, 3072}, {50257, 768}};
  for (const auto &shape : shapes) {
    const int64_t m = shape[0], k = shape[1];
    std::vector<float> x(static_cast<size_t>(k), 0.5f), y(static_cast<size_t>(m), 0.0f);
    for (Kind kind : {Kind::kF32, Kind::kF16, Kind::kQ8}) {
      Matrices a(kind, m, k, footprint);
      // Calls per timing: at least 32 MB read (a small matrix's call is tens of
      // microseconds), each on the next copy.
      const int calls = static_cast<int>(std::max<size_t>(1, (size_t{32} << 20) / a.bytes));
      for (int c = 0; c < calls; ++c) Product(kind, a, a.Next(), x.data(), y.data());  // warm-up
      std::vector<double> gbs, ceiling, ratio;
      for (int r = 0; r < reps; ++r) {
        double t0 = Now();
        for (int c = 0; c < calls; ++c) ReadOnPool(a.Next(), a.bytes);
        const double read_s = Now() - t0;
        t0 = Now();
        for (int c = 0; c < calls; ++c) Product(kind, a, a.Next(), x.data(), y.data());
        const double kernel_s = Now() - t0;
        const double total = static_cast<double>(a.bytes) * calls;
        gbs.push_back(total / kernel_s * 1e-9);
        ceiling.push_back(total / read_s * 1e-9);
        ratio.push_back(read_s / kernel_s);
      }
      char name[32];
      std::snprintf(name, sizeof name, "%lldx%lld", static_cast<long long>(m),
                    static_cast<long long>(k));
      std::printf("%-12s %-5s %9.2f %9.2f %9.2f %6.0f%%\n", name, Name(kind), a.bytes / 1048576.0,
                  Median(gbs), Median(ceiling), 100 * Median(ratio));
      std::fflush(stdout);
    }
  }
  if (g_sink.load() == 42.5f) std::printf(" ");  // keeps the read loop's sums alive
  return 0;
}
