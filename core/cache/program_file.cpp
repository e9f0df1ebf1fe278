#include "core/cache/program_file.h"

#include "core/support/fnv.h"

#include <cstring>

namespace tinymlir {
namespace {

class Writer {
 public:
  void U64(uint64_t v) { bytes_.append(reinterpret_cast<const char *>(&v), sizeof v); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void Text(const std::string &s) {
    U64(s.size());
    bytes_ += s;
  }
  void Type(const TensorType &t) {
    I64(static_cast<int64_t>(t.dtype));
    U64(t.shape.size());
    for (int64_t d : t.shape) I64(d);
  }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class Reader {
 public:
  explicit Reader(const std::string &bytes) : bytes_(bytes) {}
  bool U64(uint64_t *v) {
    if (bytes_.size() - pos_ < sizeof *v) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof *v);
    pos_ += sizeof *v;
    return true;
  }
  bool I64(int64_t *v) {
    uint64_t u;
    if (!U64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool Count(uint64_t limit, uint64_t *n) { return U64(n) && *n <= limit; }
  bool Text(std::string *s) {
    uint64_t n;
    if (!U64(&n) || n > bytes_.size() - pos_) return false;
    s->assign(bytes_, pos_, n);
    pos_ += n;
    return true;
  }
  bool Type(TensorType *t) {
    int64_t dtype;
    uint64_t rank;
    if (!I64(&dtype) || !IsValidDtype(static_cast<DType>(dtype)) ||
        !Count(static_cast<uint64_t>(kMaxRank), &rank))
      return false;
    t->dtype = static_cast<DType>(dtype);
    t->shape.resize(rank);
    for (int64_t &d : t->shape)
      if (!I64(&d) || d < 0) return false;
    return true;
  }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  const std::string &bytes_;
  size_t pos_ = 0;
};

constexpr uint64_t kFormat = 2;  // 2: the device flag (GPU programs)
constexpr char kMagic[8] = {'T', 'M', 'C', 'A', 'C', 'H', 'E', '1'};

constexpr uint64_t kMaxTensors = 1 << 20;

}  // namespace

std::string SerializeProgram(const Program &program) {
  Writer w;
  w.U64(kFormat);
  w.U64(program.gpu ? 1 : 0);
  w.U64(program.inputs.size());
  for (const TensorType &t : program.inputs) w.Type(t);
  w.U64(program.outputs.size());
  for (const TensorType &t : program.outputs) w.Type(t);
  w.U64(program.gather_checks.size());
  for (const GatherCheck &g : program.gather_checks) {
    w.I64(g.input);
    w.I64(g.table_rows);
  }
  w.U64(program.temporary_bytes);
  // Every stage but the CPU's assembly, which is printed on request (a GPU program's is its
  // device code, kept as compiled).
  for (int s = 0; s < kNumStages; ++s)
    w.Text(s == static_cast<int>(Stage::kAssembly) && !program.gpu ? std::string()
                                                                    : program.stages[s]);
  w.Text(program.object_code);
  return w.Take();
}

std::string EncodeEntry(const std::string &manifest, const std::string &key,
                        const std::string &payload) {
  Writer w;
  w.Text(manifest);
  w.Text(key);
  w.Text(payload);
  std::string bytes = std::string(kMagic, sizeof kMagic) + w.Take();
  Writer sum;
  sum.U64(Fnv1a64(bytes));
  return bytes + sum.Take();
}

bool ManifestLength(const std::string &head, uint64_t *length) {
  if (head.size() < kEntryHeadBytes || std::memcmp(head.data(), kMagic, sizeof kMagic) != 0)
    return false;
  std::memcpy(length, head.data() + sizeof kMagic, 8);
  return true;
}

Status DecodeEntry(const std::string &bytes, std::string *manifest, std::string *key,
                   std::string *payload) {
  if (bytes.size() < sizeof kMagic + 8 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    return IoError("not a tinymlir program file (no magic number)");
  uint64_t checksum;
  std::memcpy(&checksum, bytes.data() + bytes.size() - 8, 8);
  if (Fnv1a64(bytes.data(), bytes.size() - 8) != checksum)
    return IoError("checksum mismatch (truncated or corrupted)");
  const std::string body = bytes.substr(sizeof kMagic, bytes.size() - sizeof kMagic - 8);
  Reader r(body);
  if (!r.Text(manifest) || !r.Text(key) || !r.Text(payload) || !r.AtEnd())
    return IoError("malformed (its parts do not add up)");
  return Status::Ok();
}

Status DeserializeProgram(const std::string &bytes, Program *program) {
  Reader r(bytes);
  uint64_t format, n, gpu = 0;
  bool ok = r.U64(&format) && format == kFormat && r.U64(&gpu) && gpu <= 1;
  program->gpu = gpu == 1;
  ok = ok && r.Count(kMaxTensors, &n);
  if (ok) program->inputs.resize(n);
  for (size_t i = 0; ok && i < program->inputs.size(); ++i) ok = r.Type(&program->inputs[i]);
  ok = ok && r.Count(kMaxTensors, &n);
  if (ok) program->outputs.resize(n);
  for (size_t i = 0; ok && i < program->outputs.size(); ++i) ok = r.Type(&program->outputs[i]);
  ok = ok && r.Count(kMaxTensors, &n);
  if (ok) program->gather_checks.resize(n);
  for (GatherCheck &g : program->gather_checks) {
    int64_t input = 0;
    ok = ok && r.I64(&input) && input >= 0 &&
         input < static_cast<int64_t>(program->inputs.size()) && r.I64(&g.table_rows);
    g.input = static_cast<int>(input);
  }
  ok = ok && r.U64(&program->temporary_bytes);
  for (int s = 0; ok && s < kNumStages; ++s) ok = r.Text(&program->stages[s]);
  ok = ok && r.Text(&program->object_code) && !program->object_code.empty() && r.AtEnd();
  if (!ok) return IoError("the cached program's bytes are malformed");
  return Status::Ok();
}

}  // namespace tinymlir
