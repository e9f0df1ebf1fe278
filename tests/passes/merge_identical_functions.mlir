// tm-merge-identical-functions: private functions (and gpu.modules) with the same type,
// attributes and body become one, and every reference to the erased one names the kept one.
// Checks that, and that functions differing in a constant, and public ones, are kept.
// RUN: tinymlir-opt %s -split-input-file --tm-merge-identical-functions | FileCheck %s

// CHECK-LABEL: func.func private @times_two_a
// CHECK-NOT:   func.func private @times_two_b
// CHECK-LABEL: func.func private @times_three
// CHECK:       func.func @public_a
// CHECK:       func.func @public_b
// CHECK-LABEL: func.func @caller
// CHECK:         call @times_two_a(
// CHECK-NEXT:    call @times_two_a(
// CHECK-NEXT:    call @times_three(
// CHECK-NEXT:    constant @times_two_a : (f32) -> f32
// CHECK-NEXT:    call @public_a(
// CHECK-NEXT:    call @public_b(
func.func private @times_two_a(%x: f32) -> f32 {
  %c = arith.constant 2.0 : f32
  %0 = arith.mulf %x, %c : f32
  return %0 : f32
}
func.func private @times_two_b(%x: f32) -> f32 {
  %c = arith.constant 2.0 : f32
  %0 = arith.mulf %x, %c : f32
  return %0 : f32
}
// The same but for a constant: a different function.
func.func private @times_three(%x: f32) -> f32 {
  %c = arith.constant 3.0 : f32
  %0 = arith.mulf %x, %c : f32
  return %0 : f32
}
// Public functions are left alone, identical or not.
func.func @public_a(%x: f32) -> f32 {
  return %x : f32
}
func.func @public_b(%x: f32) -> f32 {
  return %x : f32
}
func.func @caller(%x: f32) -> (f32, f32, f32, f32, f32, (f32) -> f32) {
  %0 = func.call @times_two_a(%x) : (f32) -> f32
  %1 = func.call @times_two_b(%x) : (f32) -> f32
  %2 = func.call @times_three(%x) : (f32) -> f32
  %f = func.constant @times_two_b : (f32) -> f32
  %3 = func.call @public_a(%x) : (f32) -> f32
  %4 = func.call @public_b(%x) : (f32) -> f32
  return %0, %1, %2, %3, %4, %f : f32, f32, f32, f32, f32, (f32) -> f32
}

// -----

// Identical kernel modules: one is kept, and its launches keep the nested @kernel part.
// CHECK-LABEL: gpu.module @kernels_0
// CHECK-NOT:   gpu.module @kernels_1
// CHECK-LABEL: func.func @launches
// CHECK:         gpu.launch_func @kernels_0::@kernel
// CHECK-NEXT:    gpu.launch_func @kernels_0::@kernel
module attributes {gpu.container_module} {
  gpu.module @kernels_0 {
    gpu.func @kernel(%m: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %m[%t] : memref<4xf32>
      %s = arith.addf %v, %v : f32
      memref.store %s, %m[%t] : memref<4xf32>
      gpu.return
    }
  }
  gpu.module @kernels_1 {
    gpu.func @kernel(%m: memref<4xf32>) kernel {
      %t = gpu.thread_id x
      %v = memref.load %m[%t] : memref<4xf32>
      %s = arith.addf %v, %v : f32
      memref.store %s, %m[%t] : memref<4xf32>
      gpu.return
    }
  }
  func.func @launches(%m: memref<4xf32>) {
    %one = arith.constant 1 : index
    %four = arith.constant 4 : index
    gpu.launch_func @kernels_0::@kernel blocks in (%one, %one, %one)
        threads in (%four, %one, %one) args(%m : memref<4xf32>)
    gpu.launch_func @kernels_1::@kernel blocks in (%one, %one, %one)
        threads in (%four, %one, %one) args(%m : memref<4xf32>)
    return
  }
}
