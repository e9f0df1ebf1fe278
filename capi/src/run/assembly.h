// A CPU program's assembly, printed on request from its LLVM IR stage. Both C libraries
// run programs, but only libtinymlir.so has a compiler to print with: each links its own
// definition (capi/src/compile/assembly.cpp, capi/src/no_compile/assembly.cpp).
#pragma once

#include <string>

#include "core/engine/program.h"
#include "core/support/status.h"

namespace tm_capi {

// Prints `program`'s assembly into *out and keeps it with the program, or returns
// `not_kept` (the program's own answer: no assembly kept) where it cannot.
tinymlir::Status PrintAssembly(tinymlir::Program &program, const tinymlir::Status &not_kept,
                               std::string *out);

}  // namespace tm_capi
