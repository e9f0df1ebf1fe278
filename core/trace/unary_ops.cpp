#include "core/trace/unary_ops.h"

namespace tinymlir {
namespace {

constexpr UnaryOp kUnaryOps[] = {
#define TM_UNARY_OP(Name, C_ENUMERATOR, c_value, name, rule, ulps_f32, ulps_f64, domain, \
                    reference, lowering)                                                 \
  {OpKind::k##Name, c_value, name, UnaryRule::rule},
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
};

// C values are the table's positions: tm_unary_op_count() bounds them, append only.
constexpr bool ValuesArePositions() {
  for (size_t i = 0; i < sizeof kUnaryOps / sizeof kUnaryOps[0]; ++i)
    if (kUnaryOps[i].c_value != static_cast<int>(i)) return false;
  return true;
}
static_assert(ValuesArePositions(), "unary_ops.def: C values must be 0, 1, 2, ... in order");

}  // namespace

UnaryOpList UnaryOps() { return {kUnaryOps, sizeof kUnaryOps / sizeof kUnaryOps[0]}; }

const UnaryOp *FindUnaryOp(OpKind kind) {
  for (const UnaryOp &op : UnaryOps())
    if (op.kind == kind) return &op;
  return nullptr;
}

const UnaryOp *FindUnaryOpByC(int c_value) {
  if (c_value < 0 || static_cast<size_t>(c_value) >= UnaryOps().size()) return nullptr;
  return &kUnaryOps[c_value];
}

}  // namespace tinymlir
