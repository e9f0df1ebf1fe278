#include "core/driver/program_cache.h"

#include <chrono>

#include "core/engine/program_file.h"
#include "core/engine/targets.h"
#include "core/support/build_id.h"
#include "core/support/elapsed.h"
#include "core/support/environment.h"
#include "core/support/fnv.h"
#include "core/driver/compiler_library.h"

#if !defined(TINYMLIR_VERSION_STRING) || !defined(TINYMLIR_LLVM_VERSION)
#error "TINYMLIR_VERSION_STRING and TINYMLIR_LLVM_VERSION must be defined by the build"
#endif

namespace tinymlir {
namespace {

// The disk key's readable parts: everything besides the program that native code depends
// on. The build IDs (this library's, and the compiler library's as recorded when this one
// was linked, so that a hit needs no compiler) change with any change to the code, so a
// development build never reuses another build's entries; the LLVM version is the one
// built against.
std::string KeyHeader(const CompileOptions &options) {
  return std::string("tinymlir ") + TINYMLIR_VERSION_STRING + " build " + LibraryBuildId() +
         " compiler " + kCompilerBuildId + "\nllvm " TINYMLIR_LLVM_VERSION "\ntarget " +
         TargetOf(options.target).Describe(options) + "\noptions " +
         EncodeCompileOptions(options) + "\n";
}

std::string Signature(const std::vector<TensorType> &types) {
  std::string s;
  for (const TensorType &t : types) s += (s.empty() ? "" : " ") + t.ToString();
  return s;
}

uint64_t EstimatedBytes(const Program &program) {
  uint64_t bytes = ProgramCache::kProgramOverhead;
  for (const std::string &text : program.stages) bytes += text.size();
  bytes += program.object_code.size() + program.cache_key.size() + program.manifest.size();
  if (program.code) bytes += program.code->mapped_bytes();
  return bytes;
}

}  // namespace

Status ProgramCache::GetOrCompile(const Trace &trace, const CompileOptions &caller_options,
                                  std::shared_ptr<Program> *out, bool *hit) {
  // A CPU described wrongly must not find code compiled for another description, and no
  // other setting may be silently ignored.
  if (!SettingsError().empty()) return InvalidArgument(SettingsError());
  // The one place options are checked and completed: a bad option is no lookup.
  CompileOptions options = caller_options;
  TM_RETURN_IF_ERROR(CompleteCompileOptions(&options));
  const std::string fingerprint = trace.Fingerprint();
  const std::string key = fingerprint + '\0' + EncodeCompileOptions(options);

  std::promise<Result> promise;
  std::shared_future<Result> pending;
  {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    if (auto it = programs_.find(key); it != programs_.end()) {
      ++hits_;
      lru_.splice(lru_.begin(), lru_, it->second.lru);
      *out = it->second.program;
      *hit = true;
      return Status::Ok();
    }
    auto it = in_flight_.find(key);
    if (it != in_flight_.end() && it->second.process != ForkGeneration()) {
      in_flight_.erase(it);  // the parent's, before a fork: no thread here finishes it
      it = in_flight_.end();
    }
    if (it != in_flight_.end()) {
      ++hits_;
      pending = it->second.result;
    } else {
      ++misses_;
      in_flight_.emplace(key, InFlight{promise.get_future().share(), ForkGeneration()});
    }
  }
  if (pending.valid()) {  // another thread is compiling this program: wait for it
    const Result &result = pending.get();
    if (!result.first.ok()) return result.first;
    *out = result.second;
    *hit = true;
    return Status::Ok();
  }

  std::unique_ptr<Program> compiled;
  Status status;
  try {
    status = LoadOrCompile(trace, fingerprint, options, &compiled);
  } catch (...) {
    // Waiters must not wait forever: hand them the failure, then let it propagate.
    promise.set_value({RuntimeError("compilation failed with an exception"), nullptr});
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    in_flight_.erase(key);
    throw;
  }
  std::shared_ptr<Program> program(std::move(compiled));
  {
    std::lock_guard<ForkSafeMutex> lock(mutex_);
    in_flight_.erase(key);
    if (status.ok()) InsertLocked(key, program);
  }
  promise.set_value({status, program});
  if (!status.ok()) return status;
  *out = std::move(program);
  *hit = false;
  return Status::Ok();
}

Status ProgramCache::LoadOrCompile(const Trace &trace, const std::string &fingerprint,
                                   const CompileOptions &options,
                                   std::unique_ptr<Program> *out) {
  const std::string header = KeyHeader(options);
  const std::string key = header + "trace " + fingerprint;
  std::vector<TensorType> inputs, outputs;
  for (ValueId v : trace.inputs()) inputs.push_back(trace.node(v).type);
  for (ValueId v : trace.outputs()) outputs.push_back(trace.node(v).type);
  // For people (and TINYMLIR_EXPLAIN_CACHE): the key's parts, one per line.
  const std::string manifest = header + "trace " + trace.name() + "\nprogram " +
                               Hex64(Fnv1a64(fingerprint)) + "\ninputs " + Signature(inputs) +
                               "\noutputs " + Signature(outputs) + "\n";
  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  std::string payload;
  if (disk_.Load(key, manifest, &payload)) {
    auto program = std::make_unique<Program>();
    Status status = DeserializeProgram(payload, program.get());
    program->seconds(CompilePhase::kDiskRead) = SecondsSince(start);
    const auto link_start = Clock::now();
    if (status.ok() && (program->inputs != inputs || program->outputs != outputs))
      status = IoError("its signature differs from the trace's");
    if (status.ok()) status = LinkCompiled(options, trace.name(), program.get());
    program->seconds(CompilePhase::kLink) = SecondsSince(link_start);
    if (status.ok()) {
      disk_.Accept();
      program->read_from_disk = true;
      program->cache_key = key;
      program->manifest = manifest;
      *out = std::move(program);
      return Status::Ok();
    }
    disk_.Discard(key, status.message());
  }
  TM_RETURN_IF_ERROR(Compile(trace, options, out));
  (*out)->cache_key = key;
  (*out)->manifest = manifest;
  disk_.Store(key, manifest, SerializeProgram(**out));
  return Status::Ok();
}

void ProgramCache::ConfigureDisk(const std::string &directory, uint64_t limit) {
  disk_.Configure(directory, limit);
}

void ProgramCache::InsertLocked(const std::string &key, std::shared_ptr<Program> program) {
  const uint64_t bytes = EstimatedBytes(*program);
  lru_.push_front(key);
  programs_.emplace(key, Entry{std::move(program), bytes, lru_.begin()});
  bytes_ += bytes;
  EvictLocked();
}

void ProgramCache::EvictLocked() {
  // The most recent program stays even when it alone exceeds the budget: the caller is
  // about to use it.
  while (bytes_ > budget_ && programs_.size() > 1) {
    auto it = programs_.find(lru_.back());
    bytes_ -= it->second.bytes;
    programs_.erase(it);
    lru_.pop_back();
    ++evictions_;
  }
}

void ProgramCache::SetBudget(uint64_t bytes) {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  budget_ = bytes;
  EvictLocked();
}

CacheStats ProgramCache::Stats() {
  std::lock_guard<ForkSafeMutex> lock(mutex_);
  return {hits_, misses_, programs_.size(), evictions_, bytes_, budget_, disk_.Stats()};
}

}  // namespace tinymlir
