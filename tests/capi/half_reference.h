// Binary16 by its definition, in double precision: the references the half-precision and
// q8_0 tests compare the library's conversions against.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

namespace tmtest {

inline double F16ToDouble(uint16_t h) {
  const int sign = h >> 15, exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  double magnitude = exponent == 0    ? std::ldexp(mantissa, -24)
                     : exponent == 31 ? (mantissa ? NAN : INFINITY)
                                      : std::ldexp(1024 + mantissa, exponent - 25);
  return sign ? -magnitude : magnitude;
}

inline double BF16ToDouble(uint16_t h) {
  uint32_t bits = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

// x rounded to the nearest binary16 (ties to even), from its definition: 10 fraction bits,
// exponents -14..15, subnormals in steps of 2^-24, infinity from 65520 up.
inline uint16_t DoubleToF16(double x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  if (std::isnan(x)) return sign | 0x7e00;
  const double a = std::fabs(x);
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < std::ldexp(1.0, -14))  // subnormal (1024 steps round up to the smallest normal)
    return sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(a, 24)));
  int e;
  std::frexp(a, &e);  // a = f 2^e, f in [0.5, 1)
  double steps = std::nearbyint(std::ldexp(a, 11 - e));  // in [1024, 2048]
  int exponent = e - 1;
  if (steps == 2048) steps = 1024, ++exponent;
  return sign | static_cast<uint16_t>(((exponent + 15) << 10) | (static_cast<int>(steps) - 1024));
}

}  // namespace tmtest
