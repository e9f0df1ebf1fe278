// The host CPU as the engine sees it, without LLVM: which instruction set extensions it has
// (by LLVM's feature names, the ones program files list), and a description that identifies
// it for the disk cache. Native code is compiled for the host it runs on, so cached code is
// only reused where this description is equal, and a program file only loads on a CPU with
// every extension its compiling host had.
#pragma once

#include <string>

namespace tinymlir {

// Whether this CPU has `feature` (LLVM's name, e.g. "avx2"), for the extensions compiled
// code may use. Unknown names count as present: LLVM lists many that decide nothing about
// what runs.
bool CpuHas(const std::string &feature);

// "<triple> <cpu> <features>", as program files record their target: the architecture, the
// CPU's vendor, family, model and stepping, and "+name"/"-name" for each extension
// CpuHas knows, then a hash of the raw CPUID feature words, so that two CPUs reported equal
// here would make LLVM generate the same code.
const std::string &HostDescription();

}  // namespace tinymlir
