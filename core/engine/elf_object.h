// A small linker for the relocatable ELF objects the CPU target emits (x86-64, position-
// independent, in the large code model LLVM's JIT target machines use): it maps the
// object's sections, resolves its external symbols through a caller's table, applies its
// relocations and makes the code executable. No LLVM: this is what lets the runtime
// library (libtinymlir_runtime.so) run exported programs.
//
// External functions are reached through GOT slots or 14-byte jump stubs, both inside the
// mapping, so the object may call any address in the process.
// Objects with thread-local storage, common symbols or relocations other than the ones
// position-independent x86-64 code uses are refused with a message naming what was found.
// Constructors (.init_array: a GPU program's host code loads its device modules there) run
// once the code is executable; destructors (.fini_array) run before it is unmapped.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/support/status.h"

namespace tinymlir {

class ElfImage {
 public:
  ElfImage(const ElfImage &) = delete;
  ElfImage &operator=(const ElfImage &) = delete;
  ~ElfImage();

  // The address of a global symbol the object defines; nullptr when it defines none.
  void *Symbol(const std::string &name) const;
  size_t mapped_bytes() const { return size_; }

  // Every function the object defines, local ones included, where it was placed (what a
  // profiler needs to name the code: perf_map.h).
  struct Function {
    std::string name;
    const void *address;
    size_t bytes;
  };
  const std::vector<Function> &functions() const { return functions_; }

 private:
  friend Status LoadElfObject(const std::string &, const std::function<void *(const std::string &)> &,
                              std::unique_ptr<ElfImage> *);
  ElfImage() = default;
  std::vector<void (*)()> finalizers_;  // in the order to run them
  void *base_ = nullptr;
  size_t size_ = 0;
  std::unordered_map<std::string, void *> symbols_;
  std::vector<Function> functions_;
};

// Links `object` into this process. `resolve` gives the address of an external symbol, or
// nullptr when there is none (then the load fails naming the symbol).
Status LoadElfObject(const std::string &object,
                     const std::function<void *(const std::string &)> &resolve,
                     std::unique_ptr<ElfImage> *out);

}  // namespace tinymlir
