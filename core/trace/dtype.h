// Element types: sizes, names and NumPy's promotion rules. The enumerator values equal
// the C API's tm_dtype, so capi/ converts with a range check and a cast.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/support/q8_0_format.h"  // kQ8BlockElements, kQ8BlockBytes

namespace tinymlir {

// kF16 (IEEE binary16) and kBF16 (bfloat16) are storage types: programs take, move, gather
// and cast them, and a matmul with an f32 operand widens them, but arithmetic on them is
// refused (Trace::CheckArithmetic): cast to f32 first.
//
// kQ8_0 is 8-bit block-quantized storage (llama.cpp's Q8_0): the last axis in blocks of 32
// elements, each block a binary16 scale d then 32 int8 values q (element = d * q), 34 bytes.
// Programs take it as an input, gather its rows, cast it to a float type (dequantize), and
// multiply by it (tm_op_matmul, the blocks along the contraction axis); everything else is
// refused (Trace::CheckNotQuantized). It has no size per element: see StorageBytes.
enum class DType : int {
  kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4, kBool = 5, kF16 = 6, kBF16 = 7, kQ8_0 = 8
};


// Largest tensor rank a trace accepts.
inline constexpr int kMaxRank = 8;

bool IsValidDtype(int dtype);
inline bool IsValidDtype(DType d) { return IsValidDtype(static_cast<int>(d)); }
bool IsFloat(DType d);  // f16, bf16, f32, f64
bool IsHalf(DType d);   // f16, bf16: the storage types
bool IsInteger(DType d);  // i32/i64 (not bool)
bool IsQuantized(DType d);  // q8_0
// Bytes per element; 0 for q8_0, whose elements are stored in blocks (StorageBytes).
size_t DtypeSize(DType d);
// Bytes of `elements` elements stored densely (for q8_0, whole blocks: `elements` a
// multiple of kQ8BlockElements).
int64_t StorageBytes(DType d, int64_t elements);
const char *DtypeName(DType d);  // "f32", "i64", "bool", ...

// `value` converted to float type `d` as tm_op_cast converts it: to the nearest value (ties
// to even; beyond the largest finite value, an infinity), through f32 for f16 and bf16;
// other types unchanged.
double RoundToFloatDtype(double value, DType d);

// NumPy's result type for two tensors (f32+f64 -> f64, i32+f32 -> f64, bool+i32 -> i32);
// f16 and bf16 together give f32, as in JAX (NumPy has no bf16).
DType PromoteTypes(DType a, DType b);

// NumPy's result type when one side is a Python scalar ("weak"): the tensor keeps its
// dtype unless the scalar is of a higher kind (a float scalar with an int tensor gives f64).
DType PromoteWithWeakScalar(DType tensor, DType scalar);

}  // namespace tinymlir
