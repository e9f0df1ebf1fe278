// A compiled program: its specialisation (input/output types), the text of every stage,
// its relocatable object and the entry point of that object as linked into this process
// (owned by `code`). Immutable after compilation, so invocations may run concurrently.
// Shared (std::shared_ptr) between the context's cache and callers.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/engine/device.h"
#include "core/support/status.h"
#include "core/trace/trace.h"

namespace tinymlir {

// The stages of compilation whose text a program keeps (values equal the C API's tm_stage).
enum class Stage : int {
  kTraced = 0,      // as built from the trace, before any pass
  kOptimized = 1,   // after canonicalize, cse and elementwise fusion
  kBufferized = 2,  // after one-shot bufferization and deallocation
  kLowered = 3,     // after the target step and LLVM lowering
  kLlvmIr = 4,      // the optimised LLVM IR the native object is generated from
  kAssembly = 5,    // native assembly
};
inline constexpr int kNumStages = static_cast<int>(Stage::kAssembly) + 1;

// Where a program's compile time went (values equal the C API's tm_compile_phase).
enum class CompilePhase : int {
  kBuild = 0,         // trace -> MLIR module, verified
  kOptimize = 1,      // canonicalize, cse, fusion
  kBufferize = 2,     // one-shot bufferization, deallocation
  kLower = 3,         // target step (BLAS rewrite) and lowering to the LLVM dialect
  kLlvmOptimize = 4,  // translation to LLVM IR and LLVM's optimisation pipeline
  kCodegen = 5,       // instruction selection, register allocation: the object file
  kLink = 6,          // linking the object into the process
  kDiskRead = 7,      // reading and checking a disk cache entry
};
inline constexpr int kNumCompilePhases = static_cast<int>(CompilePhase::kDiskRead) + 1;

// A caller's tensor as the engine sees it: `rank` dims in `shape`, element `strides`
// (NULL = C-contiguous). Nothing here is owned.
struct TensorView {
  void *data;
  DType dtype;
  int32_t rank;
  const int64_t *shape;
  const int64_t *strides;
};

// Owns whatever keeps the entry point alive (the linked native code).
class CompiledCode {
 public:
  virtual ~CompiledCode() = default;
  // Bytes of memory mapped for the code and its data (what the program cache counts).
  virtual uint64_t mapped_bytes() const = 0;
};

// A gather whose indices are a program input: Invoke checks them against the table.
struct GatherCheck {
  int input;          // index of the indices input
  int64_t table_rows; // valid indices are [0, table_rows)
};

// The symbol every CPU program's object exports: void entry(void **args), args[i] pointing
// at the i-th argument of the kernel's C interface (see Program::Entry).
inline constexpr const char *kPackedEntryName = "tm_packed_entry";

class Program {
 public:
  using Entry = void (*)(void **);  // see kPackedEntryName

  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  std::vector<GatherCheck> gather_checks;
  // Bytes of temporary memory the native code allocates at most during one call (the sum
  // of its buffers' sizes after bufferization: an upper bound on the peak).
  uint64_t temporary_bytes = 0;
  std::array<std::string, kNumStages> stages;  // empty = not produced
  std::string &stage(Stage s) { return stages[static_cast<int>(s)]; }
  Entry entry = nullptr;
  std::unique_ptr<CompiledCode> code;
  // The relocatable object `entry` was linked from (what the disk cache stores).
  std::string object_code;
  bool read_from_disk = false;  // linked from a disk cache entry rather than compiled
  // Where the code runs: the kind the compiler recorded (kept in program files and disk
  // cache entries), and the device it is bound to when the engine's linker links it
  // (program_loader.h). Invoke goes through `device` only (device.h).
  DeviceKind device_kind = DeviceKind::kCpu;
  const Device *device = nullptr;
  // The cache key and its readable manifest (core/driver/program_cache.cpp); a program file
  // (tm_program_export) carries both.
  std::string cache_key;
  std::string manifest;
  std::array<double, kNumCompilePhases> phase_seconds{};  // wall time of each phase
  double &seconds(CompilePhase p) { return phase_seconds[static_cast<int>(p)]; }

  // Runs the program on caller buffers: checks every view against the specialisation,
  // copies strided or overlapping inputs, range-checks gather indices, then calls the
  // native code. Inputs are only read; nothing is kept after the call.
  Status Invoke(const TensorView *in, int32_t n_in, const TensorView *out, int32_t n_out) const;
  // Whether n_in inputs and n_out outputs are what the program takes (Invoke checks it;
  // the C API first, before it reads the caller's arrays).
  Status CheckCounts(int32_t n_in, int32_t n_out) const;

  // Stage text. The compiler keeps a GPU program's assembly (its PTX); a CPU program's is
  // printed from its LLVM IR on request, by libtinymlir.so's compiler
  // (capi/src/run/assembly.h), and kept with KeepAssembly.
  Status StageText(Stage stage, std::string *out);

  // Keeps `text` as the printed assembly, unless one is kept already (two threads may both
  // have printed it). Program files do not store it.
  void KeepAssembly(const std::string &text);

 private:
  std::mutex assembly_mutex_;
  std::string printed_assembly_;  // guarded by assembly_mutex_
};

}  // namespace tinymlir
