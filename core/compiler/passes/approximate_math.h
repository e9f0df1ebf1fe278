// tm-approximate-math: f32 tanh, exp and erf become MLIR's polynomial approximations
// (the ones IREE uses on CPU), so the loops around them vectorise instead of calling libm's
// scalar tanhf/expf/erff per element. Their error is a few ulp (the op tests compare with
// double-precision references at 1e-5 relative); f64 keeps libm.
#pragma once

#include <memory>

namespace mlir {
class Pass;
}

namespace tinymlir {

// Its name in the pipeline strings of pipelines.h.
inline constexpr const char *kApproximateMathPassName = "tm-approximate-math";

// The pass is not put in MLIR's global pass registry: that registry lives in libMLIR and
// outlives this library, so after an unload it would keep a pointer into code that is gone
// (and a reload would abort on the second registration). pipelines.cpp adds it by name.
std::unique_ptr<mlir::Pass> CreateApproximateMathPass();

}  // namespace tinymlir
