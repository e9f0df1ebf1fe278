// tm_quantize_q8_0: f32 rows to TM_Q8_0 blocks, for callers preparing weights (and the
// GPT-2 loader's --weights q8_0). Built into both libtinymlir.so and libtinymlir_runtime.so.
#include <string>

#include "capi/src/run/errors.h"
#include "core/engine/quantize.h"
#include "core/support/q8_0_format.h"

using tm_capi::Fail;

TM_API tm_status tm_quantize_q8_0(const float *src, int64_t rows, int64_t k, void *dst,
                                  size_t dst_bytes) {
  constexpr const char *fn = "tm_quantize_q8_0";
  auto fail = [&](const std::string &why) {
    return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(fn) + ": " + why);
  };
  if (rows < 0 || k < 0)
    return fail("negative size (rows " + std::to_string(rows) + ", k " + std::to_string(k) + ")");
  if (k % tinymlir::kQ8BlockElements != 0)
    return fail("k = " + std::to_string(k) + " is not a multiple of the block length " +
                std::to_string(tinymlir::kQ8BlockElements));
  int64_t need = 0;
  if (__builtin_mul_overflow(rows, tinymlir::Q8RowBytes(k), &need))
    return fail(std::to_string(rows) + " rows of " + std::to_string(k) + " elements are too many");
  if (static_cast<uint64_t>(need) > dst_bytes)
    return fail("dst holds " + std::to_string(dst_bytes) + " bytes; " + std::to_string(rows) +
                " rows of " + std::to_string(k) + " elements need " + std::to_string(need));
  if (need > 0 && (!src || !dst)) return fail(src ? "dst is NULL" : "src is NULL");
  const int result = tinymlir::QuantizeQ8_0(src, rows, k, dst);
  if (result == 0) return TM_OK;
  if (result > 0) return fail("invalid arguments");  // excluded above
  const int64_t i = -static_cast<int64_t>(result) - 1;
  const float x = src[i];
  return fail("element " + std::to_string(i) + " (row " + std::to_string(i / k) + ", column " +
              std::to_string(i % k) + ") is " + std::to_string(x) +
              (x == x && x - x == 0 ? ", beyond what a binary16 block scale can hold (|x| <= "
                                      "8321039)"
                                    : ", which q8_0 cannot hold (not finite)"));
}
