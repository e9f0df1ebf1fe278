#include "core/targets/cpu/run/half_matmul.h"

#include <cblas.h>

#include <algorithm>

#include "core/targets/cpu/run/half_convert.h"
#include "core/targets/cpu/run/strip_products.h"

extern "C" void tm_rt_sgemm_half(int32_t dtype, int32_t half_operand, int32_t trans_a,
                                 int32_t trans_b, int64_t m, int64_t n, int64_t k,
                                 const void *a, int64_t lda, const void *b, int64_t ldb,
                                 float *c, int64_t ldc) {
  const auto kind = static_cast<tinymlir::HalfKind>(dtype);
  const auto *half = static_cast<const uint16_t *>(half_operand == 1 ? b : a);
  const int64_t ld = half_operand == 1 ? ldb : lda;
  // op(A)'s rows and op(B)'s columns are stored rows where A is as stored or B transposed,
  // stored columns otherwise (a block k rows high).
  const bool stored_rows = half_operand == 1 ? trans_b == CblasTrans : trans_a != CblasTrans;
  tinymlir::ProductByStrips(
      half_operand, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc,
      [&](int64_t first, int64_t count, float *strip) {
        const int64_t rows = stored_rows ? count : k, cols = stored_rows ? k : count;
        tinymlir::WidenRows(kind, half + (stored_rows ? first * ld : first), ld, rows, cols,
                            strip, cols);
      });
}
