#include "core/targets/cpu/run/half_matmul.h"

#include <cblas.h>

#include <algorithm>

#include "core/targets/cpu/run/half_convert.h"
#include "core/targets/cpu/run/panel_products.h"

namespace tinymlir {
namespace {

// Scratch per panel: 2 MB of f32, a fraction of the L3 cache, so a panel is read back
// from the cache by sgemm right after it is widened.
constexpr int64_t kPanelFloats = int64_t{1} << 19;

// A panel's width (rows or columns of the half operand widened at a time) for a summed
// dimension of k: a multiple of 16 within kPanelFloats, at least 16.
int64_t PanelWidth(int64_t k) {
  return std::max<int64_t>(16, (kPanelFloats / std::max<int64_t>(k, 1)) / 16 * 16);
}

}  // namespace
}  // namespace tinymlir

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
  tinymlir::ProductByPanels(
      half_operand, trans_a, trans_b, m, n, k, a, lda, b, ldb, c, ldc, tinymlir::PanelWidth(k),
      [&](int64_t first, int64_t count, float *panel) {
        const int64_t rows = stored_rows ? count : k, cols = stored_rows ? k : count;
        const uint16_t *src = half + (stored_rows ? first * ld : first);
        tinymlir::ConvertRowsOnPool(rows, cols, [&](int64_t r, int64_t n_rows) {
          tinymlir::WidenRows(kind, src + r * ld, ld, n_rows, cols, panel + r * cols, cols);
        });
      });
}
