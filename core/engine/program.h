// A compiled program: its specialisation (input/output types), the text of every stage,
// and the JIT'd entry point, owned together with the MLIR context, module and execution
// engine that produced it. Immutable after compilation, so invocations may run
// concurrently. Reference-counted because the context's cache shares it with callers.
#pragma once

#include <array>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/graph/graph.h"
#include "core/support/status.h"

namespace tinymlir {

inline constexpr int kNumStages = TM_STAGE_ASSEMBLY + 1;

// Owns whatever keeps the entry point alive (MLIR context, module, ExecutionEngine).
class CompiledCode {
 public:
  virtual ~CompiledCode() = default;
  // Native assembly (CPU) or device code, produced on demand because few callers ask.
  virtual Status Assembly(std::string *out) const = 0;
};

// A gather whose indices are a program input: tm_invoke checks them against the table.
struct GatherCheck {
  int input;          // index of the indices input
  int64_t table_rows; // valid indices are [0, table_rows)
};

class Program {
 public:
  using Entry = void (*)(void **);  // the packed _mlir_ciface_kernel wrapper

  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  std::vector<GatherCheck> gather_checks;
  std::array<std::string, kNumStages> stages;  // empty = not produced
  Entry entry = nullptr;
  std::unique_ptr<CompiledCode> code;

  // Runs the program on caller buffers; see tm_invoke in tinymlir.h for the contract.
  Status Invoke(const tm_tensor *in, int32_t n_in, const tm_tensor *out, int32_t n_out) const;

  // Stage text; the assembly is produced on first request and kept.
  Status StageText(tm_stage stage, std::string *out);

  void Retain() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this dropped the last reference (the caller then deletes).
  bool Release() { return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1; }

 private:
  std::atomic<int> refs_{1};
  std::mutex assembly_mutex_;
};

}  // namespace tinymlir
