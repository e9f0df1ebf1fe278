// Shared by the fuzz targets: a check that aborts (libFuzzer then saves the input as a
// crash), and an independent UTF-8 validator to hold the readers to their contracts.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <string_view>

#define FUZZ_CHECK(cond, detail)                                                        \
  do {                                                                                  \
    if (!(cond)) {                                                                      \
      std::fprintf(stderr, "%s:%d: check failed: %s\n  %s\n", __FILE__, __LINE__, #cond, \
                   std::string(detail).c_str());                                        \
      std::abort();                                                                     \
    }                                                                                   \
  } while (0)

namespace tinymlir::fuzz {

// Well-formed UTF-8 as Unicode's table 3-7 defines it (no overlong forms, no surrogates,
// nothing above U+10FFFF), written from the table, not from the reader under test.
inline bool IsValidUtf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto at = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
    const uint8_t c = at(i);
    uint32_t cp;
    size_t len;
    if (c < 0x80) {
      cp = c;
      len = 1;
    } else if ((c & 0xE0) == 0xC0) {
      cp = c & 0x1F;
      len = 2;
    } else if ((c & 0xF0) == 0xE0) {
      cp = c & 0x0F;
      len = 3;
    } else if ((c & 0xF8) == 0xF0) {
      cp = c & 0x07;
      len = 4;
    } else {
      return false;
    }
    if (i + len > s.size()) return false;
    for (size_t k = 1; k < len; ++k) {
      if ((at(i + k) & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (at(i + k) & 0x3F);
    }
    static constexpr uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

// Error messages quote files through an excerpt: they stay short and valid UTF-8.
inline void CheckMessage(const std::string &message) {
  FUZZ_CHECK(!message.empty(), "an error without a message");
  FUZZ_CHECK(message.size() < 2048, message.substr(0, 300) + "... (" +
                                        std::to_string(message.size()) + " bytes)");
  FUZZ_CHECK(IsValidUtf8(message), message.substr(0, 300));
}

}  // namespace tinymlir::fuzz
