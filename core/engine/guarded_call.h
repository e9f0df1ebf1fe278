// Running native code so that a failed allocation is a status, not a signal.
//
// Generated code allocates its temporaries with malloc/aligned_alloc and never checks the
// result. The CPU target resolves those calls to tm_rt_malloc / tm_rt_aligned_alloc /
// tm_rt_free below. Inside CallGuarded they record every live block; when one cannot be
// had, they unwind to CallGuarded (longjmp over the generated code's frames, which hold
// nothing to destroy), which frees what that call had allocated and returns
// OutOfMemory naming the size.
#pragma once

#include <cstddef>

#include "core/support/status.h"

extern "C" {
void *tm_rt_malloc(size_t bytes);
void *tm_rt_aligned_alloc(size_t alignment, size_t bytes);
void tm_rt_free(void *block);
}

namespace tinymlir {

// Calls entry(args) under the allocation guard.
Status CallGuarded(void (*entry)(void **), void **args);

// This machine's physical memory in bytes (a program whose temporaries exceed it cannot run).
uint64_t PhysicalMemoryBytes();

}  // namespace tinymlir
