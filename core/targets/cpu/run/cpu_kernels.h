// The CPU target's kernels, declared once from kernels.def (C linkage: generated code calls
// them by name). Their definitions must have these exact parameters: a C function defined
// with others does not compile. What each computes: the header kernels.def names beside it.
#pragma once

#include <cstdint>

extern "C" {
#define TM_RUNTIME_FUNCTION(name, parameters) void name parameters;
#include "core/targets/cpu/run/kernels.def"
#undef TM_RUNTIME_FUNCTION
}
