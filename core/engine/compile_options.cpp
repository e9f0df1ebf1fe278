#include "core/engine/compile_options.h"

#include <cstdlib>
#include <sstream>

#include "core/support/host_cpu.h"

namespace tinymlir {
namespace {

int Bit(bool b) { return b ? 1 : 0; }

// The table. Ranges: what the compiler can do (a GPU chip from sm_50, tiles of at most
// 32 x 32 = 1,024 threads, a block's limit).
constexpr CompileOptionField kFields[] = {
    {"target", 0, 1, "0 (cpu) or 1 (gpu)", false, 1,
     [](const CompileOptions &o) { return static_cast<int>(o.target); },
     [](CompileOptions *o, int v) { o->target = static_cast<Target>(v); }},
    {"optimize", 0, 1, "0 or 1", false, 0,
     [](const CompileOptions &o) { return Bit(o.optimize); },
     [](CompileOptions *o, int v) { o->optimize = v != 0; }},
    {"use_blas", 0, 1, "0 or 1", false, 0,
     [](const CompileOptions &o) { return Bit(o.use_blas); },
     [](CompileOptions *o, int v) { o->use_blas = v != 0; }},
    {"opt_level", 0, 3, "0..3", false, 1,
     [](const CompileOptions &o) { return o.opt_level; },
     [](CompileOptions *o, int v) { o->opt_level = v; }},
    {"gpu_sm", 50, 199, "a compute capability from 50 (sm_50) to 199", false, 80,
     [](const CompileOptions &o) { return o.gpu_sm; },
     [](CompileOptions *o, int v) { o->gpu_sm = v; }},
    {"gpu_matmul_tile", 1, 32, "1..32 (tile * tile threads per block)", false, 8,
     [](const CompileOptions &o) { return o.gpu_matmul_tile; },
     [](CompileOptions *o, int v) { o->gpu_matmul_tile = v; }},
    {"gpu_cubin", 0, 1, "0 or 1", false, 1,
     [](const CompileOptions &o) { return Bit(o.gpu_cubin); },
     [](CompileOptions *o, int v) { o->gpu_cubin = v != 0; }},
    {"gpu_emulate", 0, 2, "0 (off), 1 (race-checked) or 2 (unchecked)", true, 1,
     [](const CompileOptions &o) { return static_cast<int>(o.gpu_emulate); },
     [](CompileOptions *o, int v) { o->gpu_emulate = static_cast<GpuEmulation>(v); }},
};

}  // namespace

CompileOptionFieldList CompileOptionFields() {
  return {kFields, sizeof kFields / sizeof kFields[0]};
}

Status CheckCompileOptions(const CompileOptions &options) {
  for (const CompileOptionField &f : CompileOptionFields()) {
    const int v = f.get(options);
    if (v < f.min || v > f.max)
      return InvalidArgument(std::string(f.name) + " must be " + f.range + ", got " +
                             std::to_string(v));
  }
  return Status::Ok();
}

std::string EncodeCompileOptions(const CompileOptions &options) {
  std::string text;
  for (const CompileOptionField &f : CompileOptionFields())
    text += (text.empty() ? "" : " ") + std::string(f.name) + "=" + std::to_string(f.get(options));
  return text;
}

Status DecodeCompileOptions(const std::string &text, CompileOptions *options) {
  std::istringstream words(text);
  CompileOptions decoded;
  for (const CompileOptionField &f : CompileOptionFields()) {
    std::string word;
    const std::string prefix = std::string(f.name) + "=";
    if (!(words >> word) || word.compare(0, prefix.size(), prefix) != 0)
      return InvalidArgument("compile options '" + text + "' lack " + f.name);
    char *end = nullptr;
    const long v = std::strtol(word.c_str() + prefix.size(), &end, 10);
    if (*end != '\0' || end == word.c_str() + prefix.size())
      return InvalidArgument("compile options '" + text + "': " + word + " is not a number");
    if (v < f.min || v > f.max)
      return InvalidArgument(std::string(f.name) + " must be " + f.range + ", got " + word);
    f.set(&decoded, static_cast<int>(v));
  }
  std::string extra;
  if (words >> extra)
    return InvalidArgument("compile options '" + text + "': unknown field " + extra);
  *options = decoded;
  return Status::Ok();
}

CompileOptions WithEnvironment(CompileOptions options) {
  options.gpu_emulate =
      options.target == Target::kGpu ? GpuEmulateSetting() : GpuEmulation::kOff;
  return options;
}

namespace {

const char *EmulationDescription(GpuEmulation emulation) {
  switch (emulation) {
    case GpuEmulation::kOff: return "";
    case GpuEmulation::kCheckRaces: return " emulated race-checked";
    case GpuEmulation::kUnchecked: return " emulated";
  }
  return "";
}

}  // namespace

std::string TargetDescription(const CompileOptions &options) {
  switch (options.target) {
    case Target::kCpu: return "cpu " + HostDescription();
    case Target::kGpu:
      return "gpu sm_" + std::to_string(options.gpu_sm) + " tile " +
             std::to_string(options.gpu_matmul_tile) + (options.gpu_cubin ? " cubin" : " ptx") +
             EmulationDescription(options.gpu_emulate) + " host " + HostDescription();
  }
  return "unknown";
}

}  // namespace tinymlir
