#include "core/graph/dtype.h"

namespace tinymlir {
namespace {
// Kinds in NumPy's order: bool < integer < float.
int Kind(tm_dtype d) { return d == TM_BOOL ? 0 : IsInteger(d) ? 1 : 2; }
}  // namespace

bool IsValidDtype(int d) { return d >= TM_F32 && d <= TM_BOOL; }
bool IsFloat(tm_dtype d) { return d == TM_F32 || d == TM_F64; }
bool IsInteger(tm_dtype d) { return d == TM_I32 || d == TM_I64; }

size_t DtypeSize(tm_dtype d) {
  switch (d) {
    case TM_F32: case TM_I32: return 4;
    case TM_F64: case TM_I64: return 8;
    case TM_BOOL: return 1;
  }
  return 0;
}

const char *DtypeName(tm_dtype d) {
  switch (d) {
    case TM_F32: return "f32";
    case TM_F64: return "f64";
    case TM_I32: return "i32";
    case TM_I64: return "i64";
    case TM_BOOL: return "bool";
  }
  return "invalid";
}

tm_dtype PromoteTypes(tm_dtype a, tm_dtype b) {
  if (a == b) return a;
  if (Kind(a) != Kind(b)) {
    tm_dtype lo = Kind(a) < Kind(b) ? a : b, hi = Kind(a) < Kind(b) ? b : a;
    // f32 cannot hold every i32/i64, so NumPy widens to f64.
    if (IsInteger(lo) && hi == TM_F32) return TM_F64;
    return hi;
  }
  return DtypeSize(a) >= DtypeSize(b) ? a : b;  // same kind: the wider one
}

tm_dtype PromoteWithWeakScalar(tm_dtype tensor, tm_dtype scalar) {
  if (Kind(scalar) <= Kind(tensor)) return tensor;
  return Kind(scalar) == 2 ? TM_F64 : TM_I64;  // Python float/int default types
}

}  // namespace tinymlir
