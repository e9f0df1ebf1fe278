// Running native code so that a failure inside it is a status, not a signal or an abort.
//
// Generated code allocates its temporaries with malloc/aligned_alloc and never checks the
// result. The CPU target resolves those calls to tm_rt_malloc / tm_rt_aligned_alloc /
// tm_rt_free below. Inside CallGuarded they record every live block; when one cannot be
// had, they unwind to CallGuarded (longjmp over the generated code's frames, which hold
// nothing to destroy), which frees what that call had allocated and returns
// OutOfMemory naming the size.
//
// The same unwind serves runtimes whose calls the generated code does not check either
// (the GPU target's mgpu* functions, core/targets/gpu/run/gpu_runtime.h): they record what they
// hand out with TrackGuardedResource, each with its release function, and end the call with
// FailGuardedCall(status) when something fails.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/support/status.h"

extern "C" {
void *tm_rt_malloc(size_t bytes);
void *tm_rt_aligned_alloc(size_t alignment, size_t bytes);
// LLVM turns malloc followed by a zero fill into calloc.
void *tm_rt_calloc(size_t count, size_t size);
void tm_rt_free(void *block);
}

namespace tinymlir {

// Calls entry(args) under the guard. Returns OK when entry returns, OutOfMemory when a
// tm_rt_* allocation failed, or the status a runtime passed to FailGuardedCall; in the last
// two cases every block and resource the call still held has been released.
Status CallGuarded(void (*entry)(void **), void **args);

// Whether this thread is inside CallGuarded (a runtime function decides with it whether a
// failure can unwind or must be reported some other way).
bool InGuardedCall();

// Ends the current CallGuarded now: releases what the call holds and makes CallGuarded return
// `status` (an OK status becomes a RuntimeError, so a failure is never reported as success).
// Only inside CallGuarded (check InGuardedCall()); outside there is nothing to return to and
// the process aborts, as for any broken precondition.
//
// longjmp runs no destructors: between CallGuarded and this call only generated code and
// frames that own nothing may be on the stack. `status` itself is moved into the guard, so the
// caller's temporary owns nothing when its frame is skipped; build the message in a function
// that returns the Status, and hold no strings, vectors or locks in the calling frame.
[[noreturn]] void FailGuardedCall(Status status);

// Inside CallGuarded: records `resource` (a block of GPU memory, a stream), which `release`
// frees if the call unwinds before the program releases it itself. Outside: does nothing.
// If the record cannot be kept, releases the resource and unwinds with OutOfMemory.
void TrackGuardedResource(void *resource, void (*release)(void *));

// Forgets a resource the program is about to release itself (no-op when not recorded or
// outside CallGuarded).
void UntrackGuardedResource(void *resource);

// This machine's physical memory in bytes (a program whose temporaries exceed it cannot run).
uint64_t PhysicalMemoryBytes();

}  // namespace tinymlir
