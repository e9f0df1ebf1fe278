// tm-approximate-math: f32 tanh, exp and erf become MLIR's polynomial approximations
// (the ones IREE uses on CPU), so the loops around them vectorise instead of calling libm's
// scalar tanhf/expf/erff per element. Their error is a few ulp (the op tests compare with
// double-precision references at 1e-5 relative); f64 keeps libm.
#pragma once

namespace tinymlir {

// Registers the pass under its pipeline name; idempotent.
void RegisterApproximateMathPass();

}  // namespace tinymlir
