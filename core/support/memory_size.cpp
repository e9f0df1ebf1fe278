#include "core/support/memory_size.h"

#include <cerrno>
#include <cstdlib>

namespace tinymlir {

bool ParseMemorySize(const char *text, uint64_t *bytes) {
  *bytes = 0;
  if (!text || *text < '0' || *text > '9') return false;
  char *end = nullptr;
  errno = 0;
  const unsigned long long n = std::strtoull(text, &end, 10);
  if (errno != 0 || n == 0) return false;
  int shift = 0;
  switch (*end) {
    case '\0': break;
    case 'K': shift = 10; break;
    case 'M': shift = 20; break;
    case 'G': shift = 30; break;
    case 'T': shift = 40; break;
    default: return false;
  }
  if (*end && end[1] != '\0') return false;
  if (n > (UINT64_MAX >> shift)) return false;
  *bytes = static_cast<uint64_t>(n) << shift;
  return true;
}

}  // namespace tinymlir
