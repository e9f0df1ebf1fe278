// Large temporaries of program calls, handed from one call to the next instead of back to
// the C library.
//
// Generated code allocates its temporaries for every call and frees them before it returns
// (tm_rt_malloc / tm_rt_free, guarded_call.h), and a model's calls repeat the same sizes.
// From glibc, a block above its mmap threshold is a fresh mapping each time: every page of
// it faults and is zeroed again. Where the threshold sits depends on what the process freed
// before (glibc raises it after a large free), so the same program could be 20% slower in
// one process than in another: GPT-2 124M's 128-token prompt took 135-140 ms with 490 k page
// faults where the threshold had stayed low, 107 ms with 37 k where it had risen. Recycled,
// a block keeps its pages.
//
// Blocks of kMinRecycledBytes and more are matched by exact size and alignment (a call's
// sizes repeat exactly); at most kMaxIdleBytes stay idle, past that a block goes back to the
// C library. Smaller blocks are the C library's own. Any thread may take any idle block.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tinymlir {

inline constexpr size_t kMinRecycledBytes = size_t{1} << 17;  // glibc's default threshold
inline constexpr size_t kMaxIdleBytes = size_t{64} << 20;

// `bytes` aligned to `alignment` (a power of two; at least malloc's 16), zeroed when `zeroed`:
// an idle block of that size, or a new one (the idle blocks are given back first when the C
// library has none). NULL when memory runs out.
void *AllocateTemporary(size_t alignment, size_t bytes, bool zeroed);

// Makes a block from AllocateTemporary idle for the next allocation of its size, or frees it;
// any other block (the C library's) is freed. NULL is a no-op.
void FreeTemporary(void *block);

// Bytes in idle blocks (for tests and reports).
size_t IdleTemporaryBytes();

}  // namespace tinymlir
