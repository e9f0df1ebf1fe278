#include "core/trace/dtype.h"

#include <algorithm>
#include <cmath>

namespace tinymlir {
namespace {
// Kinds in NumPy's order: bool < integer < float.
int Kind(DType d) { return d == DType::kBool ? 0 : IsInteger(d) ? 1 : 2; }
}  // namespace

bool IsValidDtype(int d) { return d >= static_cast<int>(DType::kF32) && d <= static_cast<int>(DType::kQ8_0); }
bool IsFloat(DType d) { return d == DType::kF32 || d == DType::kF64 || IsHalf(d); }
bool IsHalf(DType d) { return d == DType::kF16 || d == DType::kBF16; }
bool IsInteger(DType d) { return d == DType::kI32 || d == DType::kI64; }
bool IsQuantized(DType d) { return d == DType::kQ8_0; }

size_t DtypeSize(DType d) {
  switch (d) {
    case DType::kF32: case DType::kI32: return 4;
    case DType::kF64: case DType::kI64: return 8;
    case DType::kBool: return 1;
    case DType::kF16: case DType::kBF16: return 2;
    case DType::kQ8_0: return 0;
  }
  return 0;
}

int64_t StorageBytes(DType d, int64_t elements) {
  if (d == DType::kQ8_0) return elements / kQ8BlockElements * kQ8BlockBytes;
  return elements * static_cast<int64_t>(DtypeSize(d));
}

const char *DtypeName(DType d) {
  switch (d) {
    case DType::kF32: return "f32";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kI64: return "i64";
    case DType::kBool: return "bool";
    case DType::kF16: return "f16";
    case DType::kBF16: return "bf16";
    case DType::kQ8_0: return "q8_0";
  }
  return "invalid";
}

DType PromoteTypes(DType a, DType b) {
  if (a == b) return a;
  if (Kind(a) != Kind(b)) {
    DType lo = Kind(a) < Kind(b) ? a : b, hi = Kind(a) < Kind(b) ? b : a;
    // f16/f32 cannot hold every i32/i64, so NumPy widens to f64.
    if (IsInteger(lo) && (hi == DType::kF32 || IsHalf(hi))) return DType::kF64;
    return hi;
  }
  if (IsHalf(a) && IsHalf(b)) return DType::kF32;  // f16 and bf16: neither holds the other
  return DtypeSize(a) >= DtypeSize(b) ? a : b;  // same kind: the wider one
}

DType PromoteWithWeakScalar(DType tensor, DType scalar) {
  if (Kind(scalar) <= Kind(tensor)) return tensor;
  return Kind(scalar) == 2 ? DType::kF64 : DType::kI64;  // Python float/int default types
}

double RoundToFloatDtype(double value, DType d) {
  // Significand bits (the leading one included), smallest normal exponent, largest finite.
  int bits, min_exponent;
  double largest;
  switch (d) {
    case DType::kF32: bits = 24, min_exponent = -126, largest = 0x1.fffffep127; break;
    case DType::kF16: bits = 11, min_exponent = -14, largest = 65504.0; break;
    case DType::kBF16: bits = 8, min_exponent = -126, largest = 0x1.fep127; break;
    default: return value;  // f64 is a double; integers and bool are not rounded here
  }
  if (d != DType::kF32) value = static_cast<float>(value);  // halves round through f32
  if (!std::isfinite(value) || value == 0.0) return value;
  int exponent;
  std::frexp(value, &exponent);  // |value| in [2^(exponent-1), 2^exponent)
  const int step = std::max(exponent - 1, min_exponent) - (bits - 1);
  // value / 2^step is exact (a power of two), nearbyint rounds ties to even.
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(value, -step)), step);
  return std::fabs(rounded) > largest ? std::copysign(INFINITY, value) : rounded;
}

}  // namespace tinymlir
