#include "core/driver/compile.h"

#include <algorithm>
#include <chrono>

#include "core/engine/program_loader.h"
#include "core/support/elapsed.h"
#include "core/driver/compiler_library.h"
#include "core/driver/compiler_process.h"

namespace tinymlir {
namespace {

bool CanLink(const char *symbol, DeviceKind kind) {
  return DeviceOf(kind).symbols().count(symbol) > 0;
}

// q8_0 products run on the CPU target's kernels; the GPU target has none yet (a
// dequantized f32 copy of every weight per call would defeat the point of 8 bits).
Status CheckTargetTakesDtypes(const Trace &trace, const CompileOptions &options) {
  if (RunsOn(options) != DeviceKind::kGpu) return Status::Ok();
  for (size_t i = 0; i < trace.inputs().size(); ++i) {
    const TensorType &t = trace.node(trace.inputs()[i]).type;
    if (IsQuantized(t.dtype))
      return Unsupported("trace '" + trace.name() + "': input " + std::to_string(i) + " is " +
                         t.ToString() + "; q8_0 runs on the CPU target only (on the GPU, "
                         "use f16 or bf16 weights)");
  }
  return Status::Ok();
}

}  // namespace

Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!trace.ended()) return InvalidArgument("trace '" + trace.name() + "' has not ended");
  TM_RETURN_IF_ERROR(CheckTargetTakesDtypes(trace, options));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Program> compiled;
  if (CompileInThisProcess()) {
    const CompilerEntryPoints *compiler = nullptr;
    TM_RETURN_IF_ERROR(LoadCompiler(&compiler));
    TM_RETURN_IF_ERROR(compiler->compile(trace, options, &CanLink, &compiled));
  } else {
    TM_RETURN_IF_ERROR(CompileInCompilerProcess(trace, options, &compiled));
  }
  // What the compiler's phases do not account for (loading the compiler library, starting
  // its process: 50-70 ms the first time; the messages) counts as building.
  double phases = 0;
  for (double seconds : compiled->phase_seconds) phases += seconds;
  compiled->seconds(CompilePhase::kBuild) += std::max(0.0, SecondsSince(start) - phases);
  // The engine's linker runs the object's constructors (a GPU program's device module
  // loading), and is what links the same object from a program file or the disk cache.
  const auto link_start = std::chrono::steady_clock::now();
  TM_RETURN_IF_ERROR(LinkProgramObject(compiled.get(), trace.name()));
  compiled->seconds(CompilePhase::kLink) += SecondsSince(link_start);
  *program = std::move(compiled);
  return Status::Ok();
}

Status AssemblyOfLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out) {
  if (!CompileInThisProcess()) return AssemblyInCompilerProcess(llvm_ir, opt_level, out);
  const CompilerEntryPoints *compiler = nullptr;
  TM_RETURN_IF_ERROR(LoadCompiler(&compiler));
  return compiler->assembly(llvm_ir, opt_level, out);
}

Status LinkCompiled(const CompileOptions &options, const std::string &name, Program *program) {
  if (program->device_kind != RunsOn(options))
    return IoError("the disk cache entry is for another target");
  return LinkProgramObject(program, name);
}

}  // namespace tinymlir
