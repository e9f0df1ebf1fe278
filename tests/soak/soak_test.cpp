// Soak: the library's memory stays flat under long use.
//   1. 100,000 invokes of one program;
//   2. 2,000 compile/release cycles of distinct programs under a small cache budget.
// Each phase measures resident memory after a warm-up and at its end; growth beyond 5% is
// a failure. Prints the figures (docs/RELIABILITY.md quotes them) and "N passed, N failed".
// Usage: soak_test [invokes] [compiles]
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "tinymlir/tinymlir.hpp"

namespace {

int passed = 0, failed = 0;

double ResidentMb() {
  long pages = 0, resident = 0;
  if (FILE *f = std::fopen("/proc/self/statm", "r")) {
    if (std::fscanf(f, "%ld %ld", &pages, &resident) != 2) resident = 0;
    std::fclose(f);
  }
  return resident * 4096.0 / (1 << 20);
}

void Check(bool ok, const std::string &what) {
  ok ? ++passed : ++failed;
  std::printf("%s: %s\n", ok ? "ok" : "FAILED", what.c_str());
}

bool Ok(tm_status s, const char *what) {
  if (s == TM_OK) return true;
  std::printf("FAILED: %s: %s\n", what, tm_last_error());
  ++failed;
  return false;
}

// y = tanh(x * w + 1) over n elements: elementwise work, a fused loop.
bool Compile(tm_context *ctx, int64_t n, tinymlir::ProgramHandle *out) {
  tinymlir::Tracer tr(ctx, "soak");
  tm_value x = tr.input(TM_F32, {n}), w = tr.input(TM_F32, {n});
  tr.end({tr.tanh(tr.add(tr.mul(x, w), tr.scalar(1.0)))});
  return Ok(tr.compile(ctx, nullptr, out), "compile");
}

void Invokes(tm_context *ctx, long count) {
  const int64_t n = 4096;
  tinymlir::ProgramHandle p;
  if (!Compile(ctx, n, &p)) return;
  std::vector<float> x(n, 0.5f), w(n, 0.25f), y(n);
  tm_tensor in[] = {{x.data(), TM_F32, 1, &n, nullptr}, {w.data(), TM_F32, 1, &n, nullptr}};
  tm_tensor out = {y.data(), TM_F32, 1, &n, nullptr};
  const long warmup = count / 100;
  double before = 0;
  for (long i = 0; i < count; ++i) {
    if (i == warmup) before = ResidentMb();
    if (!Ok(tm_invoke(p, in, 2, &out, 1), "invoke")) return;
  }
  double after = ResidentMb();
  char line[160];
  std::snprintf(line, sizeof line, "%ld invokes: resident %.1f MB after %ld, %.1f MB at the end",
                count, before, warmup, after);
  Check(after <= before * 1.05, line);
}

void Compiles(tm_context *ctx, long count) {
  tm_cache_set_budget(ctx, 16u << 20);
  const long warmup = count / 10;
  double before = 0;
  for (long i = 0; i < count; ++i) {
    if (i == warmup) before = ResidentMb();
    tinymlir::ProgramHandle p;
    if (!Compile(ctx, 16 + i, &p)) return;  // a new shape: a new program every time
  }
  double after = ResidentMb();
  tm_cache_info info;
  info.struct_size = sizeof info;
  tm_cache_get_info(ctx, &info);
  char line[224];
  std::snprintf(line, sizeof line,
                "%ld distinct compiles (cache: %llu entries, %llu evictions, %.1f MB): resident "
                "%.1f MB after %ld, %.1f MB at the end",
                count, static_cast<unsigned long long>(info.entries),
                static_cast<unsigned long long>(info.evictions), info.bytes / 1048576.0, before,
                warmup, after);
  Check(after <= before * 1.05, line);
}

}  // namespace

int main(int argc, char **argv) {
  long invokes = argc > 1 ? std::atol(argv[1]) : 100000;
  long compiles = argc > 2 ? std::atol(argv[2]) : 2000;
  tinymlir::ContextHandle ctx;
  if (!Ok(tm_context_create(ctx.out()), "context")) return 1;
  Invokes(ctx, invokes);
  Compiles(ctx, compiles);
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
