// FNV-1a, 64-bit: the one non-cryptographic hash of the caches and program files (entry
// names, checksums, the manifest's program line). It catches corruption, not tampering.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace tinymlir {

inline constexpr uint64_t kFnvOffset = 0xcbf29ce484222325ull;

inline uint64_t Fnv1a64(const char *data, size_t n, uint64_t seed = kFnvOffset) {
  uint64_t h = seed;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ull;
  return h;
}

inline uint64_t Fnv1a64(const std::string &bytes, uint64_t seed = kFnvOffset) {
  return Fnv1a64(bytes.data(), bytes.size(), seed);
}

// 16 lowercase hex digits.
inline std::string Hex64(uint64_t v) {
  static const char kHex[] = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<size_t>(i)] = kHex[v & 15];
  return s;
}

}  // namespace tinymlir
