// Element types: sizes, names and NumPy's promotion rules.
#pragma once

#include <cstddef>
#include <string>

#include "tinymlir/tinymlir.h"

namespace tinymlir {

bool IsValidDtype(int dtype);
bool IsFloat(tm_dtype d);
bool IsInteger(tm_dtype d);  // i32/i64 (not bool)
size_t DtypeSize(tm_dtype d);
const char *DtypeName(tm_dtype d);  // "f32", "i64", "bool", ...

// NumPy's result type for two tensors (f32+f64 -> f64, i32+f32 -> f64, bool+i32 -> i32).
tm_dtype PromoteTypes(tm_dtype a, tm_dtype b);

// NumPy's result type when one side is a Python scalar ("weak"): the tensor keeps its
// dtype unless the scalar is of a higher kind (a float scalar with an int tensor gives f64).
tm_dtype PromoteWithWeakScalar(tm_dtype tensor, tm_dtype scalar);

}  // namespace tinymlir
