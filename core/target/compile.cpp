#include "core/target/compile.h"

#include <algorithm>
#include <chrono>

#include "core/engine/program_loader.h"
#include "core/support/elapsed.h"
#include "core/support/host_cpu.h"
#include "core/target/compiler_library.h"
#include "core/target/compiler_process.h"
#include "core/target/cpu/runtime_symbols.h"
#include "core/target/gpu/gpu_symbols.h"

namespace tinymlir {
namespace {

bool CanLink(const char *symbol, bool gpu) {
  return (gpu ? GpuRuntimeSymbols() : RuntimeSymbols()).count(symbol) > 0;
}

}  // namespace

Status CheckCompileOptions(const CompileOptions &options) {
  if (options.target != Target::kCpu && options.target != Target::kGpu)
    return InvalidArgument("unknown target " + std::to_string(static_cast<int>(options.target)));
  if (options.opt_level < 0 || options.opt_level > 3)
    return InvalidArgument("opt_level must be 0..3, got " + std::to_string(options.opt_level));
  if (options.gpu_sm < 50 || options.gpu_sm > 199)
    return InvalidArgument("gpu_sm must name a compute capability from 50 (sm_50) to 199, got " +
                           std::to_string(options.gpu_sm));
  if (options.gpu_matmul_tile < 1 || options.gpu_matmul_tile > 32)
    return InvalidArgument("gpu_matmul_tile must be 1..32 (tile * tile threads per block), got " +
                           std::to_string(options.gpu_matmul_tile));
  return Status::Ok();
}

Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!trace.ended()) return InvalidArgument("trace '" + trace.name() + "' has not ended");
  TM_RETURN_IF_ERROR(CheckCompileOptions(options));
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
  TM_RETURN_IF_ERROR(LinkProgramObject(compiled.get()));
  compiled->seconds(CompilePhase::kLink) += SecondsSince(link_start);
  *program = std::move(compiled);
  return Status::Ok();
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

Status AssemblyOfLlvmIr(const std::string &llvm_ir, int opt_level, std::string *out) {
  if (!CompileInThisProcess()) return AssemblyInCompilerProcess(llvm_ir, opt_level, out);
  const CompilerEntryPoints *compiler = nullptr;
  TM_RETURN_IF_ERROR(LoadCompiler(&compiler));
  return compiler->assembly(llvm_ir, opt_level, out);
}

Status LinkCompiled(const CompileOptions &options, Program *program) {
  if (program->gpu != RunsOnGpu(options))
    return IoError("the disk cache entry is for another target");
  return LinkProgramObject(program);
}

}  // namespace tinymlir
