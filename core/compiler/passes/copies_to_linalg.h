// tm-copies-to-linalg: every memref.copy becomes a linalg.copy, which the lowering then
// treats as any other loop nest (parallel loops, outlined into a function of its own,
// merged with identical ones, split over the worker pool when large; on the GPU, mapped to
// the device).
//
// Left as memref.copy, a copy whose source is strided (a slice, a column block) is lowered
// to a call of the generic runtime function memrefCopy, with both descriptors built on the
// stack in the program's function: a loop over elements through their strides at run time,
// and code in the program's one function whose optimisation grew faster than the number of
// copies (40 slices: 0.99 s of LLVM's optimisation, 10 slices: 0.04 s).
#pragma once

#include <memory>

namespace mlir {
class ModuleOp;
class Pass;
}  // namespace mlir

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kCopiesToLinalgPassName = "tm-copies-to-linalg";

// The rewrite itself, for the GPU lowering, which runs it between steps of its own.
void CopiesToLinalg(mlir::ModuleOp module);

// The pass is not put in MLIR's global pass registry: that registry lives in libMLIR and
// outlives this library, so after an unload it would keep a pointer into code that is gone
// (and a reload would abort on the second registration). pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateCopiesToLinalgPass();

}  // namespace tinymlir
