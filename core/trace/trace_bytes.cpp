// Trace::Serialize and Trace::Deserialize (trace.h): the trace as bytes for the compiler
// process. Unlike the fingerprint, constants travel whole.
#include "core/trace/byte_io.h"
#include "core/trace/trace.h"

namespace tinymlir {
namespace {

constexpr uint64_t kTraceFormat = 1;
constexpr uint64_t kMaxInts = 1 << 16;
constexpr uint64_t kMaxConstantBytes = uint64_t{1} << 40;

}  // namespace

std::string Trace::Serialize() const {
  ByteWriter w;
  w.U64(kTraceFormat);
  w.Text(name_);
  w.U64(nodes_.size());
  for (const Node &n : nodes_) {
    w.U64(static_cast<uint64_t>(n.kind));
    w.Type(n.type);
    w.U64(n.operands.size());
    for (ValueId v : n.operands) w.U64(v);
    w.U64(n.ints.size());
    for (int64_t v : n.ints) w.I64(v);
    w.F64(n.scalar);
    w.U64(n.weak ? 1 : 0);
    w.I64(n.input_index);
    w.Text(std::string(n.data.begin(), n.data.end()));
  }
  w.U64(inputs_.size());
  for (ValueId v : inputs_) w.U64(v);
  w.U64(outputs_.size());
  for (ValueId v : outputs_) w.U64(v);
  return w.Take();
}

Status Trace::Deserialize(const std::string &bytes, Trace *out) {
  ByteReader r(bytes);
  uint64_t format = 0, count = 0;
  std::string name;
  bool ok = r.U64(&format) && format == kTraceFormat && r.Text(&name) &&
            r.Count(kMaxTraceValues, &count);
  Trace trace(name);
  // A value id read at node `limit` must name an earlier node.
  auto read_id = [&r](uint64_t limit, ValueId *v) {
    uint64_t id;
    if (!r.U64(&id) || id >= limit) return false;
    *v = static_cast<ValueId>(id);
    return true;
  };
  for (uint64_t i = 0; ok && i < count; ++i) {
    Node n;
    uint64_t kind = 0, operands = 0, ints = 0, weak = 0;
    int64_t input_index = 0;
    std::string data;
    ok = r.U64(&kind) && kind < static_cast<uint64_t>(kNumOpKinds) &&
         r.Type(&n.type) && r.Count(kMaxTraceValues, &operands);
    n.kind = static_cast<OpKind>(kind);
    n.operands.resize(ok ? operands : 0);
    for (ValueId &v : n.operands) ok = ok && read_id(i, &v);
    ok = ok && r.Count(kMaxInts, &ints);
    n.ints.resize(ok ? ints : 0);
    for (int64_t &v : n.ints) ok = ok && r.I64(&v);
    ok = ok && r.F64(&n.scalar) && r.Count(1, &weak) && r.I64(&input_index) &&
         input_index >= -1 && input_index < static_cast<int64_t>(count) && r.Text(&data) &&
         data.size() <= kMaxConstantBytes;
    n.weak = weak == 1;
    n.input_index = static_cast<int32_t>(input_index);
    n.data.assign(data.begin(), data.end());
    if (ok) trace.nodes_.push_back(std::move(n));
  }
  uint64_t n_inputs = 0, n_outputs = 0;
  ok = ok && r.Count(count, &n_inputs);
  trace.inputs_.resize(ok ? n_inputs : 0);
  for (ValueId &v : trace.inputs_) ok = ok && read_id(count, &v);
  ok = ok && r.Count(kMaxTraceValues, &n_outputs) && n_outputs > 0;  // may repeat a value
  trace.outputs_.resize(ok ? n_outputs : 0);
  for (ValueId &v : trace.outputs_) ok = ok && read_id(count, &v);
  if (!ok || !r.AtEnd()) return InvalidArgument("the serialized trace is malformed");
  trace.ended_ = true;
  *out = std::move(trace);
  return Status::Ok();
}

}  // namespace tinymlir
