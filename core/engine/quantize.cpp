#include "core/engine/quantize.h"

#include "core/targets/cpu/run/q8_0.h"

namespace tinymlir {

int QuantizeQ8_0(const float *src, int64_t rows, int64_t k, void *dst) {
  return tm_rt_quantize_q8_0(src, rows, k, dst);
}

}  // namespace tinymlir
