// Tracing: the tm_trace_* and tm_op_* shims. Each checks the C-level arguments (null
// handles and pointers, counts) and hands the rest to tinymlir::Trace, which validates shapes
// and dtypes with messages that name the op.
#include <cstring>

#include "capi/src/run/errors.h"
#include "capi/src/compile/handles.h"
#include "core/support/fork_safe_once.h"
#include "core/trace/ops.h"
#include "core/trace/unary_ops.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

// A tm_value carries its trace's tag above the value's index, so a value from another
// trace is recognised instead of silently naming some value of this one.
constexpr int kIndexBits = 20;
static_assert((1u << kIndexBits) >= tinymlir::kMaxTraceValues);

tinymlir::ValueId In(const tm_trace *trace, tm_value v) {
  if ((v >> kIndexBits) != trace->tag) return tinymlir::kForeignValue;
  return v & ((1u << kIndexBits) - 1);
}
tm_value Out(const tm_trace *trace, tinymlir::ValueId v) { return (trace->tag << kIndexBits) | v; }

// Checks trace/out, runs `record(trace, &value)` and writes *out on success.
template <typename F>
tm_status Record(tm_trace *trace, const char *op, tm_value *out, F &&record) {
  if (!trace) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(op) + ": trace is NULL");
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, std::string(op) + ": out is NULL");
  return Guard(nullptr, [&] {  // the core's messages already name `op`
    tinymlir::ValueId v = 0;
    tinymlir::Status s = record(trace->trace, &v);
    if (s.ok()) *out = Out(trace, v);
    return s;
  });
}

tinymlir::Status ReadShape(const char *op, int32_t rank, const int64_t *shape, tinymlir::Shape *out) {
  static_assert(TM_MAX_RANK == tinymlir::kMaxRank);
  if (rank < 0 || rank > TM_MAX_RANK)
    return tinymlir::ShapeError(std::string(op) + ": rank " + std::to_string(rank) +
                          " is outside 0.." + std::to_string(TM_MAX_RANK));
  if (rank > 0 && !shape)
    return tinymlir::InvalidArgument(std::string(op) + ": shape is NULL for rank " +
                               std::to_string(rank));
  out->assign(shape, shape + rank);
  return tinymlir::Status::Ok();
}

// Records `kind` with `values` and `ints` (and `real`) through the table (ops.h), writing
// the new value to *out.
tm_status Op(tm_trace *t, tinymlir::OpKind kind, const char *op, std::vector<tm_value> values,
             std::vector<int64_t> ints, double real, tm_value *out) {
  return Record(t, op, out, [&](tinymlir::Trace &g, tinymlir::ValueId *v) {
    tinymlir::OpCall call{kind, op, {}, std::move(ints), real};
    for (tm_value value : values) call.values.push_back(In(t, value));
    return tinymlir::RecordOp(g, call, v);
  });
}

tm_status Unary(tm_trace *t, tinymlir::OpKind kind, const char *op, tm_value x, tm_value *out) {
  return Record(t, op, out, [&](tinymlir::Trace &g, tinymlir::ValueId *v) { return g.Unary(kind, op, In(t, x), v); });
}

// The names tm_op gives its ops in messages: "tm_op(reduce_sum)", one per row.
tinymlir::ForkSafeOnce<std::vector<std::string>> generic_names;

const std::vector<std::string> &GenericNames() {
  return generic_names.Get([] {
    std::vector<std::string> names;
    for (const tinymlir::OpRow &row : tinymlir::OpRows()) names.push_back("tm_op(" + row.name + ")");
    return names;
  });
}

// Reads n entries of a caller's array of an op over x after checking n is x's rank, so that
// a wrong count is refused without reading past a rank's worth (`what`: "perm has").
template <typename T>
tinymlir::Status ReadRankEntries(tm_trace *t, const char *fn, tm_value x, const char *what,
                                 const T *entries, int32_t n, std::vector<int64_t> *out) {
  if (!t) return tinymlir::InvalidArgument(std::string(fn) + ": trace is NULL");
  TM_RETURN_IF_ERROR(t->trace.CheckEntryCount(fn, In(t, x), what, n));
  out->insert(out->end(), entries, entries + n);
  return tinymlir::Status::Ok();
}

}  // namespace

extern "C" {

TM_API tm_status tm_trace_begin(tm_context *ctx, const char *name, tm_trace **out) {
  if (!ctx) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_trace_begin: ctx is NULL");
  if (!out) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_trace_begin: out is NULL");
  return Guard("tm_trace_begin", [&] {
    *out = new tm_trace(name ? name : "kernel");
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_trace_end(tm_trace *trace, const tm_value *outputs, int32_t n_outputs) {
  if (!trace) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_trace_end: trace is NULL");
  if (n_outputs < 1 || !outputs)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_trace_end: needs n_outputs >= 1 and a non-NULL outputs array (got " +
                    std::to_string(n_outputs) + ")");
  return Guard(nullptr, [&] {
    std::vector<tinymlir::ValueId> values;
    for (int32_t i = 0; i < n_outputs; ++i) values.push_back(In(trace, outputs[i]));
    return trace->trace.End("tm_trace_end", values);
  });
}

TM_API void tm_trace_destroy(tm_trace *trace) { delete trace; }

TM_API tm_status tm_value_type(tm_trace *trace, tm_value value, tm_dtype *dtype, int32_t *rank,
                               int64_t *shape) {
  if (!trace) return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_value_type: trace is NULL");
  return Guard(nullptr, [&] {
    const tinymlir::ValueId id = In(trace, value);
    TM_RETURN_IF_ERROR(trace->trace.CheckValue("tm_value_type", id));
    const tinymlir::TensorType &t = trace->trace.node(id).type;
    if (dtype) *dtype = tm_capi::ToC(t.dtype);
    if (rank) *rank = t.rank();
    if (shape) std::copy(t.shape.begin(), t.shape.end(), shape);
    return tinymlir::Status::Ok();
  });
}

TM_API tm_status tm_op_input(tm_trace *t, tm_dtype dtype, int32_t rank, const int64_t *shape,
                             tm_value *out) {
  return Record(t, "tm_op_input", out, [&](tinymlir::Trace &g, tinymlir::ValueId *v) {
    tinymlir::Shape s;
    TM_RETURN_IF_ERROR(ReadShape("tm_op_input", rank, shape, &s));
    return g.Input("tm_op_input", tm_capi::ToCore(dtype), s, v);
  });
}

TM_API tm_status tm_op_scalar(tm_trace *t, tm_dtype dtype, double value, tm_value *out) {
  return Record(t, "tm_op_scalar", out,
                [&](tinymlir::Trace &g, tinymlir::ValueId *v) {
                  return g.Scalar("tm_op_scalar", tm_capi::ToCore(dtype), value, v);
                });
}

TM_API tm_status tm_op_constant(tm_trace *t, const tm_tensor *data, tm_value *out) {
  return Record(t, "tm_op_constant", out, [&](tinymlir::Trace &g, tinymlir::ValueId *v) {
    if (!data) return tinymlir::InvalidArgument("tm_op_constant: data is NULL");
    // Before the elements are gathered: a q8_0 tensor has no per-element size to gather by.
    TM_RETURN_IF_ERROR(tinymlir::Trace::CheckConstantDtype(
        "tm_op_constant", tm_capi::ToCore(data->dtype)));
    tinymlir::Shape shape;
    TM_RETURN_IF_ERROR(ReadShape("tm_op_constant", data->rank, data->shape, &shape));
    for (int64_t d : shape)
      if (d < 0) return tinymlir::ShapeError("tm_op_constant: negative dimension");
    TM_RETURN_IF_ERROR(tinymlir::Trace::CheckSize("tm_op_constant", shape));
    const tinymlir::DType dtype = tm_capi::ToCore(data->dtype);
    size_t elem = tinymlir::DtypeSize(dtype);
    int64_t n = tinymlir::TensorType{dtype, shape}.NumElements();
    if (n > 0 && !data->data) return tinymlir::InvalidArgument("tm_op_constant: data->data is NULL");
    std::vector<uint8_t> bytes(static_cast<size_t>(n) * elem);
    // Gather the elements in C order, honouring strides.
    std::vector<int64_t> index(shape.size(), 0);
    const auto *src = static_cast<const uint8_t *>(data->data);
    for (int64_t i = 0; i < n; ++i) {
      int64_t offset = 0, step = 1;
      for (size_t d = shape.size(); d-- > 0;) {
        offset += index[d] * (data->strides ? data->strides[d] : step);
        step *= shape[d];
      }
      std::memcpy(&bytes[static_cast<size_t>(i) * elem], src + offset * static_cast<int64_t>(elem),
                  elem);
      for (size_t d = shape.size(); d-- > 0;) {
        if (++index[d] < shape[d]) break;
        index[d] = 0;
      }
    }
    return g.Constant("tm_op_constant", dtype, shape, std::move(bytes), v);
  });
}

TM_API tm_status tm_op(tm_trace *t, tm_op_kind op, const tm_value *operands, int32_t n_operands,
                       const int64_t *ints, int32_t n_ints, double real, tm_value *out) {
  const tinymlir::OpRow *row = tinymlir::FindOpByC(op);
  if (!row)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_op: unknown op " + std::to_string(static_cast<int>(op)) +
                    " (this library knows 0.." + std::to_string(tinymlir::OpRows().size() - 1) +
                    ")");
  const char *fn = GenericNames()[op].c_str();
  if (n_operands < 0 || n_ints < 0 || (n_operands > 0 && !operands) || (n_ints > 0 && !ints))
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                std::string(fn) + ": operands or ints is NULL, or a count is negative (" +
                    std::to_string(n_operands) + " operands, " + std::to_string(n_ints) +
                    " ints)");
  return Op(t, row->kind, fn, std::vector<tm_value>(operands, operands + n_operands),
            std::vector<int64_t>(ints, ints + n_ints), real, out);
}

TM_API int32_t tm_op_count(void) { return static_cast<int32_t>(tinymlir::OpRows().size()); }

TM_API const char *tm_op_signature(tm_op_kind op) {
  const tinymlir::OpRow *row = tinymlir::FindOpByC(op);
  return row ? row->signature : nullptr;
}

// The op table's C values are tinymlir.h's (its ops.h, generated from the table).
#define TM_OP(Name, C_ENUMERATOR, c_value, ...) \
  static_assert(C_ENUMERATOR == c_value, "ops.h's " #C_ENUMERATOR " differs from ops.def");
#include "core/trace/ops.def"
#undef TM_OP

// The ops' own C functions (kept for the ABI): each the same op as tm_op's kind.
#define TM_BINARY(fn, kind)                                                         \
  TM_API tm_status fn(tm_trace *t, tm_value a, tm_value b, tm_value *out) {         \
    return Op(t, tinymlir::OpKind::kind, #fn, {a, b}, {}, 0, out);                  \
  }
TM_BINARY(tm_op_add, kAdd)
TM_BINARY(tm_op_sub, kSub)
TM_BINARY(tm_op_mul, kMul)
TM_BINARY(tm_op_div, kDiv)
TM_BINARY(tm_op_pow, kPow)
TM_BINARY(tm_op_maximum, kMaximum)
TM_BINARY(tm_op_minimum, kMinimum)
TM_BINARY(tm_op_less, kLess)
TM_BINARY(tm_op_greater, kGreater)
TM_BINARY(tm_op_equal, kEqual)
TM_BINARY(tm_op_matmul, kMatmul)
TM_BINARY(tm_op_gather, kGather)
#undef TM_BINARY

TM_API tm_status tm_op_where(tm_trace *t, tm_value cond, tm_value a, tm_value b,
                             tm_value *out) {
  return Op(t, tinymlir::OpKind::kWhere, "tm_op_where", {cond, a, b}, {}, 0, out);
}

#define TM_UNARY(fn, kind) \
  TM_API tm_status fn(tm_trace *t, tm_value x, tm_value *out) { \
    return Unary(t, tinymlir::OpKind::kind, #fn, x, out);             \
  }
TM_UNARY(tm_op_neg, kNeg)
TM_UNARY(tm_op_exp, kExp)
TM_UNARY(tm_op_log, kLog)
TM_UNARY(tm_op_tanh, kTanh)
TM_UNARY(tm_op_sqrt, kSqrt)
TM_UNARY(tm_op_rsqrt, kRsqrt)
TM_UNARY(tm_op_erf, kErf)
TM_UNARY(tm_op_abs, kAbs)
#undef TM_UNARY

// The op table's C values are tinymlir.h's: an op added to core/trace/unary_ops.def but not
// to the header's tm_unary_op (or with another value) does not compile.
#define TM_UNARY_OP(Name, C_ENUMERATOR, c_value, name, ...) \
  static_assert(C_ENUMERATOR == c_value, "tinymlir.h's " #C_ENUMERATOR " differs from unary_ops.def");
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP

TM_API tm_status tm_op_unary(tm_trace *t, tm_unary_op op, tm_value x, tm_value *out) {
  const tinymlir::UnaryOp *unary = tinymlir::FindUnaryOpByC(op);
  if (!unary)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_op_unary: unknown op " + std::to_string(static_cast<int>(op)) +
                    " (this library knows 0.." +
                    std::to_string(tinymlir::UnaryOps().size() - 1) + ")");
  return Unary(t, unary->kind, "tm_op_unary", x, out);
}

TM_API int32_t tm_unary_op_count(void) {
  return static_cast<int32_t>(tinymlir::UnaryOps().size());
}

TM_API const char *tm_unary_op_name(tm_unary_op op) {
  const tinymlir::UnaryOp *unary = tinymlir::FindUnaryOpByC(op);
  return unary ? unary->name : nullptr;
}

#define TM_REDUCE(fn, kind)                                                                   \
  TM_API tm_status fn(tm_trace *t, tm_value x, int32_t axis, int32_t keepdims, tm_value *out) { \
    return Op(t, tinymlir::OpKind::kind, #fn, {x}, {axis, keepdims != 0}, 0, out);             \
  }
TM_REDUCE(tm_op_reduce_sum, kReduceSum)
TM_REDUCE(tm_op_reduce_max, kReduceMax)
TM_REDUCE(tm_op_reduce_mean, kReduceMean)
TM_REDUCE(tm_op_reduce_var, kReduceVar)
#undef TM_REDUCE

TM_API tm_status tm_op_reshape(tm_trace *t, tm_value x, int32_t rank, const int64_t *shape,
                               tm_value *out) {
  tinymlir::Shape s;
  if (tm_status status = tm_capi::Report(ReadShape("tm_op_reshape", rank, shape, &s));
      status != TM_OK)
    return status;
  return Op(t, tinymlir::OpKind::kReshape, "tm_op_reshape", {x}, s, 0, out);
}

TM_API tm_status tm_op_transpose(tm_trace *t, tm_value x, const int32_t *perm, int32_t n_perm,
                                 tm_value *out) {
  constexpr const char *fn = "tm_op_transpose";
  if (n_perm < 0 || (n_perm > 0 && !perm))
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_op_transpose: perm is NULL or n_perm is negative");
  std::vector<int64_t> p;  // none: the axes reversed
  if (perm) {
    if (tm_status s = tm_capi::Report(ReadRankEntries(t, fn, x, "perm has", perm, n_perm, &p));
        s != TM_OK)
      return s;
  }
  return Op(t, tinymlir::OpKind::kTranspose, fn, {x}, p, 0, out);
}

TM_API tm_status tm_op_slice(tm_trace *t, tm_value x, int32_t rank, const int64_t *begin,
                             const int64_t *end, tm_value *out) {
  constexpr const char *fn = "tm_op_slice";
  if (rank < 0 || (rank > 0 && (!begin || !end)))
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                "tm_op_slice: begin or end is NULL, or rank is negative");
  std::vector<int64_t> bounds;
  if (tm_status s = tm_capi::Report(
          ReadRankEntries(t, fn, x, "begin and end have", begin, rank, &bounds));
      s != TM_OK)
    return s;
  bounds.insert(bounds.end(), end, end + rank);
  return Op(t, tinymlir::OpKind::kSlice, fn, {x}, bounds, 0, out);
}

TM_API tm_status tm_op_concat(tm_trace *t, const tm_value *xs, int32_t n, int32_t axis,
                              tm_value *out) {
  if (n < 1 || !xs)
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_op_concat: needs n >= 1 values and a non-NULL array");
  return Op(t, tinymlir::OpKind::kConcat, "tm_op_concat", std::vector<tm_value>(xs, xs + n),
            {axis}, 0, out);
}

TM_API tm_status tm_op_cast(tm_trace *t, tm_value x, tm_dtype dtype, tm_value *out) {
  return Op(t, tinymlir::OpKind::kCast, "tm_op_cast", {x}, {dtype}, 0, out);
}

TM_API tm_status tm_op_softmax(tm_trace *t, tm_value x, int32_t axis, tm_value *out) {
  return Op(t, tinymlir::OpKind::kSoftmax, "tm_op_softmax", {x}, {axis}, 0, out);
}

TM_API tm_status tm_op_layer_norm(tm_trace *t, tm_value x, tm_value gamma, tm_value beta,
                                  double eps, tm_value *out) {
  return Op(t, tinymlir::OpKind::kLayerNorm, "tm_op_layer_norm", {x, gamma, beta}, {}, eps, out);
}

TM_API tm_status tm_op_gelu_tanh(tm_trace *t, tm_value x, tm_value *out) {
  return Op(t, tinymlir::OpKind::kGeluTanh, "tm_op_gelu_tanh", {x}, {}, 0, out);
}

TM_API tm_status tm_op_causal_mask(tm_trace *t, int64_t rows, int64_t cols, int64_t offset,
                                   tm_dtype dtype, tm_value *out) {
  return Op(t, tinymlir::OpKind::kCausalMask, "tm_op_causal_mask", {}, {rows, cols, offset, dtype},
            0, out);
}

}  // extern "C"
