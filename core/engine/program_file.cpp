#include "core/engine/program_file.h"

#include <cstring>

#include "core/trace/byte_io.h"
#include "core/support/fnv.h"

namespace tinymlir {
namespace {

constexpr uint64_t kFormat = 4;
constexpr char kMagic[8] = {'T', 'M', 'C', 'A', 'C', 'H', 'E', '1'};

constexpr uint64_t kMaxTensors = 1 << 20;

}  // namespace

std::string SerializeProgram(const CompiledProgram &program) {
  ByteWriter w;
  w.U64(kFormat);
  w.Text(program.device);
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
  // Every stage as compiled (a printed assembly is not one: Program::KeepAssembly).
  for (int s = 0; s < kNumStages; ++s) w.Text(program.stages[s]);
  w.Text(program.object_code);
  return w.Take();
}

std::string EncodeEntry(const std::string &manifest, const std::string &key,
                        const std::string &payload) {
  ByteWriter w;
  w.Text(manifest);
  w.Text(key);
  w.Text(payload);
  std::string bytes = std::string(kMagic, sizeof kMagic) + w.Take();
  ByteWriter sum;
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
  ByteReader r(body);
  if (!r.Text(manifest) || !r.Text(key) || !r.Text(payload) || !r.AtEnd())
    return IoError("malformed (its parts do not add up)");
  return Status::Ok();
}

Status DeserializeProgram(const std::string &bytes, CompiledProgram *program) {
  ByteReader r(bytes);
  uint64_t format, n;
  bool ok = r.U64(&format) && format == kFormat && r.Text(&program->device) &&
            !program->device.empty();
  ok = ok && r.Count(kMaxTensors, &n);
  if (ok) program->inputs.resize(n);
  // A program's tensors are what invoke reads and writes: a q8_0 one must hold whole blocks
  // (invoke describes its bytes by them). Inside a trace, a transposed q8_0 view need not.
  for (size_t i = 0; ok && i < program->inputs.size(); ++i)
    ok = r.Type(&program->inputs[i]) && program->inputs[i].StoresWholeBlocks();
  ok = ok && r.Count(kMaxTensors, &n);
  if (ok) program->outputs.resize(n);
  for (size_t i = 0; ok && i < program->outputs.size(); ++i)
    ok = r.Type(&program->outputs[i]) && program->outputs[i].StoresWholeBlocks();
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
