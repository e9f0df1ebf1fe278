// Element types: sizes, names and NumPy's promotion rules. The enumerator values equal
// the C API's tm_dtype, so capi/ converts with a range check and a cast.
#pragma once

#include <cstddef>
#include <string>

namespace tinymlir {

// kF16 (IEEE binary16) and kBF16 (bfloat16) are storage types: programs take, move, gather
// and cast them, and a matmul with an f32 operand widens them, but arithmetic on them is
// refused (Trace::CheckArithmetic): cast to f32 first.
enum class DType : int { kF32 = 1, kF64 = 2, kI32 = 3, kI64 = 4, kBool = 5, kF16 = 6, kBF16 = 7 };

// Largest tensor rank a trace accepts.
inline constexpr int kMaxRank = 8;

bool IsValidDtype(int dtype);
inline bool IsValidDtype(DType d) { return IsValidDtype(static_cast<int>(d)); }
bool IsFloat(DType d);  // f16, bf16, f32, f64
bool IsHalf(DType d);   // f16, bf16: the storage types
bool IsInteger(DType d);  // i32/i64 (not bool)
size_t DtypeSize(DType d);
const char *DtypeName(DType d);  // "f32", "i64", "bool", ...

// NumPy's result type for two tensors (f32+f64 -> f64, i32+f32 -> f64, bool+i32 -> i32);
// f16 and bf16 together give f32, as in JAX (NumPy has no bf16).
DType PromoteTypes(DType a, DType b);

// NumPy's result type when one side is a Python scalar ("weak"): the tensor keeps its
// dtype unless the scalar is of a higher kind (a float scalar with an int tensor gives f64).
DType PromoteWithWeakScalar(DType tensor, DType scalar);

}  // namespace tinymlir
