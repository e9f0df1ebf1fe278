// The model's programs from the compiler: traced (programs.cpp) and compiled through the
// context's memory and disk caches, the programs of one request in parallel. Only in
// libtinymlir.so; libtinymlir_runtime.so links no_compiler.cpp instead.
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#include "gpt2/src/program_source.h"
#include "gpt2/src/target_info.h"

namespace tinymlir::gpt2 {
namespace {

// CPUs this process may run on (its affinity mask), at least 1.
size_t UsableCpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) return std::max(1, CPU_COUNT(&set));
  return std::max(1u, std::thread::hardware_concurrency());
}

class CompilerSource : public ProgramSource {
 public:
  CompilerSource(tm_context *ctx, const Gpt2Config &config, tm_target target)
      : config_(config), target_(target) {
    tm_context_retain(ctx);
    ctx_ = ContextHandle(ctx);
  }

  // The programs are independent: they compile on one thread per usable CPU (the context
  // is thread-safe, and each compile has its own MLIR context). Workers take the next
  // index; the calling thread collects results and reports progress.
  Status Make(const std::vector<ProgramKey> &keys, tm_progress_callback progress, void *user,
              std::vector<ProgramHandle> *out, tm_model_stats *stats) override {
    out->clear();
    out->resize(keys.size());
    std::vector<Status> results(keys.size());
    std::atomic<size_t> next{0};
    std::mutex mutex;
    std::condition_variable ready;
    size_t done = 0;
    auto work = [&] {
      for (size_t i; (i = next.fetch_add(1)) < keys.size();) {
        const auto &[kind, t, l] = keys[i];
        Status s = CompileProgram(ctx_, config_, target_, static_cast<ProgramKind>(kind), t, l,
                                  &(*out)[i]);
        std::lock_guard<std::mutex> lock(mutex);
        results[i] = std::move(s);
        ++done;
        ready.notify_one();
      }
    };
    const int32_t total = static_cast<int32_t>(keys.size());
    const size_t n_threads = std::min<size_t>(keys.size(), UsableCpus());
    std::vector<std::thread> threads;
    // Where the system refuses a thread (a process limit, RLIMIT_NPROC; no memory), the
    // compile goes on with the threads that started, or on this one. The vector has its
    // room first, so that only the thread's creation can fail.
    threads.reserve(n_threads > 1 ? n_threads : 0);
    for (size_t i = 0; n_threads > 1 && i < n_threads; ++i) {
      try {
        threads.emplace_back(work);
      } catch (...) {
        break;
      }
    }
    if (threads.empty()) {
      work();
      if (progress) progress(user, total, total);
    } else {
      std::unique_lock<std::mutex> lock(mutex);
      size_t reported = 0;
      while (reported < keys.size()) {
        ready.wait(lock, [&] { return done > reported; });
        reported = done;
        if (progress) {
          lock.unlock();
          progress(user, static_cast<int32_t>(reported), total);
          lock.lock();
        }
      }
    }
    for (std::thread &thread : threads) thread.join();
    for (size_t i = 0; i < keys.size(); ++i) {
      TM_RETURN_IF_ERROR(results[i]);
      Count((*out)[i], stats);
    }
    return Status::Ok();
  }

  bool is_bundle() const override { return false; }
  tm_target target() const override { return target_; }

 private:
  // Adds a program's origin and compile phases to the stats.
  static void Count(tm_program *program, tm_model_stats *stats) {
    if (tm_program_cache_hit(program)) {
      stats->programs_cached += 1;
      return;
    }
    (tm_program_from_disk_cache(program) ? stats->programs_from_disk
                                         : stats->programs_compiled) += 1;
    for (int phase = 0; phase < TM_NUM_COMPILE_PHASES; ++phase)
      stats->phase_seconds[phase] +=
          tm_program_phase_seconds(program, static_cast<tm_compile_phase>(phase));
  }

  ContextHandle ctx_;  // one reference
  Gpt2Config config_;
  tm_target target_;
};

}  // namespace

Status NewCompilerSource(tm_context *ctx, const Gpt2Config &config, tm_target target,
                         std::unique_ptr<ProgramSource> *out) {
  if (!ctx)
    return InvalidArgument("tm_model_load: ctx is NULL (a model compiles its programs "
                           "through a context unless options.bundle_dir names a bundle)");
  tm_target_info info;
  TM_RETURN_IF_ERROR(GetTargetInfo(target, &info));
  *out = std::make_unique<CompilerSource>(ctx, config, target);
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
