// libtinymlir.so prints a CPU program's assembly with the compiler library, in its process
// or in this one, from the program's LLVM IR at the codegen level its manifest names.
#include "capi/src/run/assembly.h"

#include "core/driver/compiler_library.h"

namespace tm_capi {

tinymlir::Status PrintAssembly(tinymlir::Program &program, const tinymlir::Status &,
                               std::string *out) {
  std::string llvm_ir;
  if (!program.StageText(tinymlir::Stage::kLlvmIr, &llvm_ir).ok())
    return tinymlir::Unsupported("the program's LLVM IR was not kept (more than 1 MB of "
                                 "constants), so its assembly cannot be printed");
  const size_t at = program.manifest.find("opt_level=");
  const char level = at == std::string::npos ? '3' : program.manifest[at + 10];
  TM_RETURN_IF_ERROR(tinymlir::AssemblyOfLlvmIr(
      llvm_ir, level >= '0' && level <= '3' ? level - '0' : 3, out));
  program.KeepAssembly(*out);
  return tinymlir::Status::Ok();
}

}  // namespace tm_capi
