// tm-approximate-math: f32 math.tanh, math.exp and math.erf become MLIR's polynomial
// approximations (arith ops and math.fma), so the loops around them vectorise; f64 keeps
// the library call. Checks each f32 op is expanded and an f64 tanh is left alone.
// RUN: tinymlir-opt %s -split-input-file --tm-approximate-math | FileCheck %s

// CHECK-LABEL: func.func @tanh_f32
// CHECK-NOT:     math.tanh
// CHECK:         math.fma
// CHECK-NOT:     math.tanh
// CHECK:         return
func.func @tanh_f32(%x: f32) -> f32 {
  %0 = math.tanh %x : f32
  return %0 : f32
}

// -----

// CHECK-LABEL: func.func @exp_f32
// CHECK-NOT:     math.exp
// CHECK:         math.fma
// CHECK-NOT:     math.exp
// CHECK:         return
func.func @exp_f32(%x: f32) -> f32 {
  %0 = math.exp %x : f32
  return %0 : f32
}

// -----

// CHECK-LABEL: func.func @erf_f32
// CHECK-NOT:     math.erf
// CHECK:         math.fma
// CHECK-NOT:     math.erf
// CHECK:         return
func.func @erf_f32(%x: f32) -> f32 {
  %0 = math.erf %x : f32
  return %0 : f32
}

// -----

// f64 is not approximated: it stays a math.tanh (libm's tanh after lowering).
// CHECK-LABEL: func.func @tanh_f64
// CHECK-NOT:     math.fma
// CHECK:         %[[T:.*]] = math.tanh %{{.*}} : f64
// CHECK-NEXT:    return %[[T]] : f64
func.func @tanh_f64(%x: f64) -> f64 {
  %0 = math.tanh %x : f64
  return %0 : f64
}
