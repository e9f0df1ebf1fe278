// libtinymlir_runtime.so's stand-in for compiler_source.cpp: the runtime library has no
// compiler, so a model there runs from a bundle or not at all.
#include "gpt2/src/program_source.h"

namespace tinymlir::gpt2 {

Status NewCompilerSource(tm_context *, const Gpt2Config &, tm_target,
                         std::unique_ptr<ProgramSource> *) {
  return Unsupported(
      "tm_model_load: libtinymlir_runtime.so runs compiled bundles only; set "
      "options.bundle_dir to a bundle (written by `tinymlir compile --out DIR` or "
      "tm_model_compile_bundle), or link libtinymlir.so to compile");
}

}  // namespace tinymlir::gpt2
