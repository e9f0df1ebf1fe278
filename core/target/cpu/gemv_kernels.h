// Matrix-vector kernels for single-row and single-column f32 products (f32 vectors; the
// matrix f32, f16 or bf16), the shape of every
// product in a decode step. They are memory-bound: each streams its matrix once, split into
// contiguous chunks across the worker pool, and reaches the machine's read bandwidth. Their
// summation order depends on the shapes alone, never on the number of threads, so results
// are bit-identical for any TINYMLIR_NUM_THREADS
// (measured on the 2-vCPU Zen 4 machine: ~35 GB/s with 2 threads, where OpenBLAS's sgemv
// managed 21-29 GB/s on GPT-2's shapes). The CPU target calls them from JIT'd code, so they
// have C linkage and are registered with the JIT by address.
#pragma once

#include <cstdint>

extern "C" {

// y[0..n) += x[0..k) @ W, with W k x n row-major (row stride ldw).
void tm_rt_sgemv_row(int64_t k, int64_t n, const float *x, const float *w, int64_t ldw,
                     float *y);

// y[i * incy] += sum_j A[i * lda + j] * x[j * incx], i in [0, m), j in [0, k): A row-major.
void tm_rt_sgemv_col(int64_t m, int64_t k, const float *a, int64_t lda, const float *x,
                     int64_t incx, float *y, int64_t incy);

// The same with W, or A, in half precision (dtype: TM_F16 = 6 or TM_BF16 = 7, the C API's
// values), widened inside the kernel: the results are bit for bit those of the f32 kernels
// on the widened matrix, at half the bytes streamed.
void tm_rt_hgemv_row(int32_t dtype, int64_t k, int64_t n, const float *x, const uint16_t *w,
                     int64_t ldw, float *y);
void tm_rt_hgemv_col(int32_t dtype, int64_t m, int64_t k, const uint16_t *a, int64_t lda,
                     const float *x, int64_t incx, float *y, int64_t incy);

}  // extern "C"
