#include "core/driver/compile.h"

#include <algorithm>
#include <chrono>

#include "core/engine/program_loader.h"
#include "core/engine/targets.h"
#include "core/support/elapsed.h"
#include "core/driver/compiler_library.h"
#include "core/driver/compiler_process.h"

namespace tinymlir {

Status Compile(const Trace &trace, const CompileOptions &options,
               std::unique_ptr<Program> *program) {
  if (!trace.ended()) return InvalidArgument("trace '" + trace.name() + "' has not ended");
  TM_RETURN_IF_ERROR(TargetOf(options.target).Supports(trace, options));
  const auto start = std::chrono::steady_clock::now();
  std::unique_ptr<Program> compiled;
  if (CompileInThisProcess()) {
    const CompilerEntryPoints *compiler = nullptr;
    TM_RETURN_IF_ERROR(LoadCompiler(&compiler));
    std::unique_ptr<CompiledProgram> unlinked;
    TM_RETURN_IF_ERROR(compiler->compile(trace, options, &DeviceLinks, &unlinked));
    compiled = std::make_unique<Program>(std::move(*unlinked));
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
  bool ours = false;
  for (const std::string &device : DeviceNamesOf(options.target)) ours |= device == program->device;
  if (!ours) return IoError("the disk cache entry is for another target");
  return LinkProgramObject(program, name);
}

}  // namespace tinymlir
