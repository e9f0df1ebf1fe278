// The traced program: a list of typed values, each produced by one op record.
//
// Every op is validated when it is recorded (shapes, dtypes, axes), so a Trace that
// exists is well-formed and the builder never has to report a user error. Promotion and
// broadcasting are made explicit here: binary ops receive operands of one dtype (Cast
// nodes are inserted) and matmuls are normalised to 2-D or 3-D, which keeps the builder a
// direct translation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/trace/dtype.h"
#include "core/support/status.h"

namespace tinymlir {

using ValueId = uint32_t;
using Shape = std::vector<int64_t>;

// The most values one trace may hold (a front end may use the bits above for its own tag).
inline constexpr ValueId kMaxTraceValues = 1u << 20;
// What a front end passes for a value that is not from this trace: always refused.
inline constexpr ValueId kForeignValue = 0xffffffffu;

struct TensorType {
  DType dtype = DType::kF32;
  Shape shape;

  int rank() const { return static_cast<int>(shape.size()); }
  int64_t NumElements() const;
  // False for a q8_0 type its blocks cannot hold: rank 0, rank kMaxRank (stored as rank + 1
  // dimensions), or a last dimension that is not a multiple of the block. Every other type
  // is true. Checked where a program's tensor type enters: Trace::Input and a program file
  // (a transposed q8_0 view inside a trace need not hold whole blocks along its last axis).
  bool StoresWholeBlocks() const {
    // Stored as rank + 1 dimensions (the blocks, then their bytes): one rank less.
    return !IsQuantized(dtype) || (!shape.empty() && shape.size() < static_cast<size_t>(kMaxRank) &&
                                   shape.back() % kQ8BlockElements == 0);
  }
  bool operator==(const TensorType &o) const { return dtype == o.dtype && shape == o.shape; }
  std::string ToString() const;  // "f32[2,3]"
};

std::string ShapeToString(const Shape &shape);  // "(2,3)"

// Every kind of node: the data a program starts from, the ops of ops.def's rows (each
// recorded through its rule, ops.h; a composite's kind is never a node's) and the
// elementwise unary ops of unary_ops.def.
enum class OpKind : uint8_t {
  kInput, kScalar, kConstant,
#define TM_OP(Name, ...) k##Name,
#include "core/trace/ops.def"
#undef TM_OP
#define TM_UNARY_OP(Name, ...) k##Name,
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
};
inline constexpr int kNumOpKinds = 3
#define TM_OP(Name, ...) +1
#include "core/trace/ops.def"
#undef TM_OP
#define TM_UNARY_OP(Name, ...) +1
#include "core/trace/unary_ops.def"
#undef TM_UNARY_OP
    ;

// "add", "reduce_sum", "exp", ...: the op's name (its row's, or its unary op's).
const char *OpKindName(OpKind kind);
// Whether each element of the result is computed from the operands' elements at its index
// alone (what the builder lowers to one linalg.generic).
bool IsElementwise(OpKind kind);

// The dtype rules of the binary elementwise ops (ops.def's rule column): NumPy's
// promotion, then
enum class BinaryRule {
  kArithmetic,        // refused for bools (sub, pow)
  kNumberArithmetic,  // bools too, as or/and (add, mul, maximum, minimum)
  kDivision,          // integers and bools divide in f64 (true division)
  kComparison,        // a bool result
};

struct Node {
  OpKind kind;
  TensorType type;
  std::vector<ValueId> operands;
  std::vector<int64_t> ints;
  double scalar = 0.0;         // kScalar
  bool weak = false;           // a Python-like scalar (promotes to the other side's dtype)
  int32_t input_index = -1;    // kInput: position among the program inputs
  std::vector<uint8_t> data;   // kConstant: C-contiguous bytes
};

class Trace {
 public:
  explicit Trace(std::string name) : name_(std::move(name)) {}

  const std::string &name() const { return name_; }
  bool ended() const { return ended_; }
  size_t size() const { return nodes_.size(); }
  bool Has(ValueId v) const { return v < nodes_.size(); }
  const Node &node(ValueId v) const { return nodes_[v]; }
  const std::vector<ValueId> &inputs() const { return inputs_; }
  const std::vector<ValueId> &outputs() const { return outputs_; }

  // Recording (the rules of ops.def's rows call these; RecordOp, ops.h, records any row).
  // `op` is the operation's name as the caller knows it (the C API passes its function
  // name); a failed Status names it and the offending shapes/dtypes.
  Status Input(const char *op, DType dtype, const Shape &shape, ValueId *out);
  Status Scalar(const char *op, DType dtype, double value, ValueId *out);
  Status Constant(const char *op, DType dtype, const Shape &shape, std::vector<uint8_t> data,
                  ValueId *out);
  Status Binary(OpKind kind, BinaryRule rule, const char *op, ValueId a, ValueId b,
                ValueId *out);
  Status Where(const char *op, ValueId cond, ValueId a, ValueId b, ValueId *out);
  Status Unary(OpKind kind, const char *op, ValueId x, ValueId *out);
  Status Cast(const char *op, ValueId x, DType dtype, ValueId *out);
  Status Matmul(const char *op, ValueId a, ValueId b, ValueId *out);
  Status Reduce(OpKind kind, const char *op, ValueId x, int32_t axis, bool keepdims,
                ValueId *out);
  Status Reshape(const char *op, ValueId x, const Shape &shape, ValueId *out);
  Status Transpose(const char *op, ValueId x, const std::vector<int64_t> &perm, ValueId *out);
  Status Slice(const char *op, ValueId x, const Shape &begin, const Shape &end, ValueId *out);
  Status Concat(const char *op, const std::vector<ValueId> &xs, int32_t axis, ValueId *out);
  Status Gather(const char *op, ValueId table, ValueId indices, ValueId *out);
  // A (rows, cols) additive mask of a float dtype: 0 where col <= row + offset, the dtype's
  // lowest finite value elsewhere.
  Status TriangularMask(OpKind kind, const char *op, int64_t rows, int64_t cols,
                        int64_t offset, DType dtype, ValueId *out);
  Status End(const char *op, const std::vector<ValueId> &outputs);
  // Records a node a rule has checked (op_rules.cpp): the trace must be open, its operands
  // values of this trace and its shape of a countable size.
  Status Record(const char *op, Node node, ValueId *out);

  // Fails when the trace has ended (composites call it before recording anything).
  Status CheckOpen(const char *op) const;
  // Fails when a shape's byte size (elements x 8) would not fit int64.
  static Status CheckSize(const char *op, const Shape &shape);
  // Whether `dtype` can hold a constant: a known dtype with a size per element (q8_0,
  // stored in blocks, cannot). Callers gathering a constant's elements ask first.
  static Status CheckConstantDtype(const char *op, DType dtype);
  // Checks that a value id belongs to this trace.
  Status CheckValue(const char *op, ValueId v) const;
  // An argument with one entry per dimension of x (a permutation, slice bounds; `what`
  // names it, "perm has" / "begin and end have"): `n` must be x's rank. The C API checks
  // this before it reads a caller's array, so a count larger than the rank is never read.
  Status CheckEntryCount(const char *op, ValueId x, const char *what, int64_t n) const;
  // Resolves a negative axis; fails with OutOfRange naming op and rank.
  static Status NormalizeAxis(const char *op, int32_t axis, int rank, int *out);

  // A canonical byte string of everything that determines the compiled code (ops, types,
  // constants, inputs, outputs; not the name). Equal programs have equal fingerprints.
  std::string Fingerprint() const;

  // The whole ended trace as bytes (name, every node with its constant data, inputs,
  // outputs) and back: how a trace travels to the compiler process
  // (core/driver/compiler_protocol.h). Deserialize checks the structure (op kinds, dtypes,
  // ranks, every operand defined before its use, inputs and outputs in range), not what
  // recording checks: it reads only what Serialize wrote, in the same build.
  std::string Serialize() const;
  static Status Deserialize(const std::string &bytes, Trace *out);

  // live[v]: value v contributes to an output (promotion can leave unused casts behind).
  std::vector<bool> Live() const;

  // f16 and bf16 are storage types: an op that would compute in one is refused (the
  // composites check it themselves: an empty operand makes none of their ops).
  static Status CheckArithmetic(const char *op, DType dtype);

  // q8_0 values (dtype.h) go only into tm_op_cast, tm_op_gather, tm_op_matmul and a 2-D
  // tm_op_transpose that feeds a matmul: every other op refuses them with a message naming
  // what it can do instead.
  Status CheckNotQuantized(const char *op, ValueId v) const;
  // A q8_0 value that is a transposed view (its blocks run along its first axis): only a
  // matmul's right operand may be one.
  bool IsTransposedQuantized(ValueId v) const;
  Status CheckQuantizedMatmul(const char *op, ValueId a, ValueId b) const;

 private:
  ValueId Add(Node node);
  // Casts v to dtype (a new Scalar for weak scalars, a Cast node otherwise).
  ValueId Convert(ValueId v, DType dtype);
  // A weak scalar about to become an integer dtype must fit it (NumPy raises too).
  Status CheckScalarFits(const char *op, ValueId v, DType dtype) const;
  Status BroadcastShapes(const char *op, const Shape &a, const Shape &b, Shape *out) const;

  std::string name_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  bool ended_ = false;
};

}  // namespace tinymlir
