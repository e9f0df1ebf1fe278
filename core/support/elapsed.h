// Wall time for the compile phase figures (tm_program_compile_seconds).
#pragma once

#include <chrono>

namespace tinymlir {

inline double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace tinymlir
