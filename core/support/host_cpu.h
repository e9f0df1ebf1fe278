// The host CPU as the engine sees it, without LLVM: which instruction set extensions it has
// (by LLVM's feature names, the ones program files list), and a description that identifies
// it for the disk cache. Native code is compiled for the host it runs on, so cached code is
// only reused where this description is equal, and a program file only loads on a CPU with
// every extension its compiling host had.
#pragma once

#include <string>
#include <vector>

#include "core/support/status.h"

namespace tinymlir {

// TINYMLIR_CPU_EXCLUDE (read once, at the first question about the CPU) lists extensions,
// comma-separated, to treat as absent ("avx2,fma,f16c": a CPU of 2011), with those that
// need them (AVX-512 goes with AVX2): compiled code does without them, the runtime's
// kernels run their portable variants, the disk cache keys on the CPU so described, and a
// program file needing them is refused. For testing the paths other CPUs take, and for
// compiling program files that load on older CPUs.

// Whether this CPU has `feature` (LLVM's name, e.g. "avx2"), for the extensions compiled
// code may use, as TINYMLIR_CPU_EXCLUDE leaves them. Unknown names count as present: LLVM
// lists many that decide nothing about what runs.
bool CpuHas(const std::string &feature);

// The extensions this CPU has that TINYMLIR_CPU_EXCLUDE takes away (for the code
// generator: "-name" each).
std::vector<std::string> CpuExcludedFeatures();

// TINYMLIR_CPU_EXCLUDE as this process read it (a compiler process is given this value).
const std::string &CpuExclusionSetting();

// Empty, or why TINYMLIR_CPU_EXCLUDE cannot be honoured (a name that is not one of the
// extensions CpuHas knows): compiling then fails with this message.
const std::string &CpuExclusionError();

// "<triple> <cpu> <features>", as program files record their target: the architecture, the
// CPU's vendor, family, model and stepping, and "+name"/"-name" for each extension
// CpuHas knows, then a hash of the raw CPUID feature words, so that two CPUs reported equal
// here would make LLVM generate the same code.
const std::string &HostDescription();

// Whether code compiled on a host HostDescription() described as `description` runs on
// this one: the same architecture, and every extension it had (as TINYMLIR_CPU_EXCLUDE
// leaves them here). A refusal names what differs.
Status CheckHostDescription(const std::string &description);

}  // namespace tinymlir
