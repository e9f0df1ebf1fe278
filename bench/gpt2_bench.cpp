// gpt2_bench: measures tinymlir on a GPT-2 checkpoint through the public C API only.
//
//   gpt2_bench --model DIR --prompts FILE [--decode-tokens 64] [--reps 5] [--logits-out F]
//   gpt2_bench --bandwidth-mb 512 [--threads 2] [--reps 5]
//
// FILE holds two lines of whitespace-separated token ids: the 16-token prompt (prefill-16,
// decode prompt, logits cross-check) and the 128-token prompt (prefill-128).
// Prints one JSON object on stdout. Threads: the BLAS calls use OpenBLAS's threads, so the
// caller sets OPENBLAS_NUM_THREADS; the bandwidth mode uses --threads std::threads.
#include <tinymlir/gpt2.h>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
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

// Resident set size now (VmRSS), in MB; peak is getrusage's ru_maxrss.
double CurrentRssMb() {
  std::ifstream in("/proc/self/status");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atof(line.c_str() + 6) / 1024.0;
  return 0.0;
}

double PeakRssMb() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_maxrss / 1024.0;  // KiB on Linux
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

typedef float V8 __attribute__((vector_size(32)));  // GCC/Clang vector extension

// Copy bandwidth with `threads` std::threads, each copying its share of a `mb` MB buffer;
// bytes moved = read + written (STREAM's convention). Also a read-only pass (a sum).
void Bandwidth(int mb, int threads, int reps) {
  const size_t nv = (static_cast<size_t>(mb) << 20) / sizeof(V8), n = nv * sizeof(V8);
  std::vector<V8> a(nv, V8{} + 1.0f), b(nv);  // aligned; touched before timing
  auto run = [&](bool copy) {
    double best = 1e30;
    std::vector<float> sums(threads);
    for (int r = 0; r < reps; ++r) {
      double t0 = Now();
      std::vector<std::thread> pool;
      for (int t = 0; t < threads; ++t)
        pool.emplace_back([&, t] {
          size_t lo = nv / threads * t, hi = t == threads - 1 ? nv : nv / threads * (t + 1);
          if (copy) {
            std::memcpy(&b[lo], &a[lo], (hi - lo) * sizeof(V8));
          } else {  // four accumulators: one dependency chain does not reach the bandwidth
            V8 s0 = {}, s1 = {}, s2 = {}, s3 = {};
            size_t i = lo;
            for (; i + 4 <= hi; i += 4) {
              s0 += a[i];
              s1 += a[i + 1];
              s2 += a[i + 2];
              s3 += a[i + 3];
            }
            for (; i < hi; ++i) s0 += a[i];
            V8 s = (s0 + s1) + (s2 + s3);
            sums[t] = s[0] + s[7];
          }
        });
      for (auto &th : pool) th.join();
      best = std::min(best, Now() - t0);
    }
    float keep = 0;
    for (float s : sums) keep += s;
    if (keep == 42.5f) std::fprintf(stderr, " ");  // keeps the read loop alive
    return (copy ? 2.0 : 1.0) * n / best;
  };
  double copy_bps = run(true), read_bps = run(false);
  std::printf("{\"threads\": %d, \"buffer_mb\": %d, \"reps\": %d, \"copy_bytes_per_s\": %.6g, "
              "\"read_bytes_per_s\": %.6g}\n",
              threads, mb, reps, copy_bps, read_bps);
}

}  // namespace

int main(int argc, char **argv) {
  std::string model_dir, prompts_path, logits_out;
  int decode_tokens = 64, reps = 5, bandwidth_mb = 0, threads = 2;
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
    else Die("unknown argument " + a);
  }
  if (bandwidth_mb > 0) {
    Bandwidth(bandwidth_mb, threads, reps);
    return 0;
  }
  if (model_dir.empty() || prompts_path.empty()) Die("--model and --prompts are required");
  auto prompts = ReadPrompts(prompts_path);
  const std::vector<int32_t> &p16 = prompts[0], &p128 = prompts[1];

  // Cold: a fresh context compiles every program the prefill-16 + decode run needs.
  tm_context *ctx = nullptr;
  Check(tm_context_create(&ctx), "tm_context_create");
  double t0 = Now();
  tm_model *m = nullptr;
  Check(tm_model_load(ctx, model_dir.c_str(), nullptr, &m), "tm_model_load");
  double load_wall = Now() - t0;
  int32_t vocab = 0;
  Check(tm_model_info(m, &vocab, nullptr, nullptr, nullptr), "tm_model_info");
  double rss_after_load = CurrentRssMb(), peak_after_load = PeakRssMb();

  t0 = Now();
  Generate(m, p16, decode_tokens + 1);  // prefill + decode_tokens decode steps
  double first_generate_wall = Now() - t0;
  tm_model_stats cold = GetStats(m);

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
  double rss_end = CurrentRssMb(), peak = PeakRssMb();

  // The disk cache: a second context starts with an empty memory cache, as a new process
  // does, and reads the programs the cold run wrote (the caller points TINYMLIR_CACHE_DIR
  // at an empty directory, so the cold run above really compiled).
  tm_context *ctx2 = nullptr;
  Check(tm_context_create(&ctx2), "tm_context_create");
  tm_model *m2 = nullptr;
  Check(tm_model_load(ctx2, model_dir.c_str(), nullptr, &m2), "tm_model_load");
  t0 = Now();
  Generate(m2, p16, decode_tokens + 1);
  double warm_generate_wall = Now() - t0;
  tm_model_stats warm = GetStats(m2);
  tm_model_destroy(m2);
  tm_context_destroy(ctx2);

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
  std::printf("  \"decode_tokens\": %d, \"decode_tokens_per_s\": %s, "
              "\"decode_tokens_per_s_median\": %.6g,\n",
              decode_tokens, JsonList(tps).c_str(), Median(tps));
  std::printf("  \"generated_ids\": %s,\n", JsonIds(tokens).c_str());
  std::printf("  \"rss_after_load_mb\": %.1f, \"peak_rss_after_load_mb\": %.1f,\n",
              rss_after_load, peak_after_load);
  std::printf("  \"rss_end_mb\": %.1f, \"peak_rss_mb\": %.1f\n", rss_end, peak);
  std::printf("}\n");
  tm_model_destroy(m);
  tm_context_destroy(ctx);
  return 0;
}
