// What the compiler hands back for one trace: the program's signature (input and output
// types, gather checks, temporary memory), the text of every stage, the relocatable object
// and the device it runs on. Nothing here is linked: the engine's Program
// (core/engine/program.h) is this plus the code linked into the process.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/trace.h"

namespace tinymlir {

// The stages of compilation whose text a program keeps (values equal the C API's tm_stage).
enum class Stage : int {
  kTraced = 0,      // as built from the trace, before any pass
  kOptimized = 1,   // after canonicalize, cse and elementwise fusion
  kBufferized = 2,  // after one-shot bufferization and deallocation
  kLowered = 3,     // after the target step and LLVM lowering
  kLlvmIr = 4,      // the optimised LLVM IR the native object is generated from
  kAssembly = 5,    // native assembly (a target with device code: that code)
};
inline constexpr int kNumStages = static_cast<int>(Stage::kAssembly) + 1;

// Where a program's compile time went (values equal the C API's tm_compile_phase).
enum class CompilePhase : int {
  kBuild = 0,         // trace -> MLIR module, verified
  kOptimize = 1,      // canonicalize, cse, fusion
  kBufferize = 2,     // one-shot bufferization, deallocation
  kLower = 3,         // the target step and lowering to the LLVM dialect
  kLlvmOptimize = 4,  // translation to LLVM IR and LLVM's optimisation pipeline
  kCodegen = 5,       // instruction selection, register allocation: the object file
  kLink = 6,          // linking the object into the process
  kDiskRead = 7,      // reading and checking a disk cache entry
};
inline constexpr int kNumCompilePhases = static_cast<int>(CompilePhase::kDiskRead) + 1;

// A gather whose indices are a program input: Invoke checks them against the table.
struct GatherCheck {
  int input;          // index of the indices input
  int64_t table_rows; // valid indices are [0, table_rows)
};

// The symbol every program's object exports: void entry(void **args), args[i] pointing
// at the i-th argument of the kernel's C interface.
inline constexpr const char *kPackedEntryName = "tm_packed_entry";

struct CompiledProgram {
  std::vector<TensorType> inputs;
  std::vector<TensorType> outputs;
  std::vector<GatherCheck> gather_checks;
  // Bytes of temporary memory the native code allocates at most during one call (the sum
  // of its buffers' sizes after bufferization: an upper bound on the peak).
  uint64_t temporary_bytes = 0;
  std::array<std::string, kNumStages> stages;  // empty = not produced
  std::string &stage(Stage s) { return stages[static_cast<int>(s)]; }
  // The relocatable object the engine links.
  std::string object_code;
  // The name of the device it runs on (a device of its target's run side, Device::name()):
  // what the engine's linker resolves its calls against, kept in program files and disk
  // cache entries.
  std::string device;
  std::array<double, kNumCompilePhases> phase_seconds{};  // wall time of each phase
  double &seconds(CompilePhase p) { return phase_seconds[static_cast<int>(p)]; }
};

}  // namespace tinymlir
