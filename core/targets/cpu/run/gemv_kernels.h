// Matrix-vector kernels: the products of a decode step (one row, or one column), and, with
// half-precision weights, those of a short prompt (a few rows, each summed as it is alone),
// with f32 vectors and an f32, f16 or bf16 matrix. They are memory-bound: each streams its matrix once, split
// into contiguous chunks across the worker pool. Their summation order depends on the shapes
// alone, never on the number of threads, so results are bit-identical for any
// TINYMLIR_NUM_THREADS; they read GPT-2's shapes faster than OpenBLAS's sgemv
// (docs/PERFORMANCE.md). The CPU target calls them from
// generated code, so they have C linkage and are in the runtime symbol table by address.
#pragma once

#include <cstdint>

#include "core/targets/cpu/run/cpu_kernels.h"

// The matrix's dtype, `dtype`: the C API's values, TM_F32 (1), TM_F16 (6) or TM_BF16 (7).
// A half matrix is widened inside the kernel: the results are bit for bit those of its f32
// widening, at half the bytes streamed.

// Y[i, :] += X[i, :] @ W for the m rows of X (row stride ldx) and Y (ldy), W k x n row-major
// (row stride ldw). Each row of Y is summed exactly as it is when m = 1, so the rows of a
// short prompt get the bits of the decode steps that produce them one at a time.
// tm_rt_gemv_rows: declared in cpu_kernels.h (kernels.def).

// Y[v * ldy + i * incy] += sum_j A[i * lda + j] * X[v * ldx + j * incx], for the m rows i of
// A (row-major), the nx rows v of X, j in [0, k): dot products of A's rows (a weight stored
// output-major, such as GPT-2's tied LM head) with one row of X (decode) or a few (a short
// prompt; each output summed exactly as with one).
// tm_rt_gemv_dots: declared in cpu_kernels.h (kernels.def).

// `batch` products of the two kinds above, element b's operands at x + b * stride_x, w (or
// a) + b * stride_w (stride_a) elements and y + b * stride_y: attention's per-head products
// in decode, where each head's is too small for the pool. Every output is summed exactly as
// the single call sums it (the bits of a loop over the batch); the kernels read a row (the
// dot products) or a group of rows (the rows kernel) for every element before the next, so
// a batch lying side by side in its rows (the heads of a K or V cache) streams in order,
// and split the work over the pool.
// tm_rt_gemv_rows_batched: declared in cpu_kernels.h (kernels.def).
// tm_rt_gemv_dots_batched: declared in cpu_kernels.h (kernels.def).

