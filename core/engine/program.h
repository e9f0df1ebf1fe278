// A compiled program: its specialisation (input/output types), the text of every stage,
// its relocatable object and the entry point of that object as linked into this process
// (owned by `code`), bound to the device it runs on. Immutable after compilation, so
// invocations may run concurrently. Shared (std::shared_ptr) between the context's cache
// and callers.
#pragma once

#include <array>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/contract/compiled_program.h"
#include "core/support/status.h"
#include "core/trace/trace.h"

namespace tinymlir {

class Device;  // core/runtime/device.h

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

// The compiler's output (core/contract/compiled_program.h: signature, stages, object, the
// device's name) linked into this process.
class Program : public CompiledProgram {
 public:
  using Entry = void (*)(void **);  // see kPackedEntryName

  Program() = default;
  explicit Program(CompiledProgram compiled) : CompiledProgram(std::move(compiled)) {}

  Entry entry = nullptr;
  std::unique_ptr<CompiledCode> code;
  bool read_from_disk = false;  // linked from a disk cache entry rather than compiled
  // The device named by `device`, bound when the engine's linker links the program
  // (program_loader.h). Invoke goes through it only (core/runtime/device.h).
  const Device *bound_device = nullptr;
  // The cache key and its readable manifest (core/driver/program_cache.cpp); a program file
  // (tm_program_export) carries both.
  std::string cache_key;
  std::string manifest;

  // Runs the program on caller buffers: checks every view against the specialisation,
  // copies strided or overlapping inputs, range-checks gather indices, then calls the
  // native code. Inputs are only read; nothing is kept after the call.
  Status Invoke(const TensorView *in, int32_t n_in, const TensorView *out, int32_t n_out) const;
  // Whether n_in inputs and n_out outputs are what the program takes (Invoke checks it;
  // the C API first, before it reads the caller's arrays).
  Status CheckCounts(int32_t n_in, int32_t n_out) const;

  // Stage text. The compiler keeps the assembly of a program with device code (that code);
  // a host program's is printed from its LLVM IR on request, by libtinymlir.so's compiler
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
