// tm-unshare-tensors: before bufferization, a linalg.fill with several users is cloned (with
// its tensor.empty) before each user after the first, and a tensor.empty serves at most 16
// users. Checks both; each user of a fill then writes into a fill of its own, without a copy.
// RUN: tinymlir-opt %s -split-input-file --tm-unshare-tensors | FileCheck %s

// Two matmuls accumulating into one (CSE'd) zero fill: each gets its own fill and empty.
// CHECK-LABEL: func.func @shared_fill
// CHECK:         %[[ZERO:.*]] = arith.constant 0.0
// CHECK-NEXT:    %[[E0:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[F0:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E0]] : tensor<4x4xf32>)
// CHECK-NEXT:    %[[E1:.*]] = tensor.empty() : tensor<4x4xf32>
// CHECK-NEXT:    %[[F1:.*]] = linalg.fill ins(%[[ZERO]] : f32) outs(%[[E1]] : tensor<4x4xf32>)
// CHECK-DAG:     linalg.matmul {{.*}} outs(%[[F0]] : tensor<4x4xf32>)
// CHECK-DAG:     linalg.matmul {{.*}} outs(%[[F1]] : tensor<4x4xf32>)
// CHECK-NOT:     linalg.fill
// CHECK:         return
func.func @shared_fill(%a: tensor<4x8xf32>, %b: tensor<8x4xf32>)
    -> (tensor<4x4xf32>, tensor<4x4xf32>) {
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<4x4xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m0 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>)
                      outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  %m1 = linalg.matmul ins(%a, %b : tensor<4x8xf32>, tensor<8x4xf32>)
                      outs(%f : tensor<4x4xf32>) -> tensor<4x4xf32>
  return %m0, %m1 : tensor<4x4xf32>, tensor<4x4xf32>
}

// -----

// One tensor.empty with 17 users: the first 16 keep it, the 17th gets a clone just before it.
// CHECK-LABEL: func.func @shared_empty
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-COUNT-16: linalg.copy ins(%{{.*}} : tensor<4xf32>) outs(%[[E]] : tensor<4xf32>)
// CHECK-NEXT:    %[[E2:.*]] = tensor.empty() : tensor<4xf32>
// CHECK-NEXT:    linalg.copy ins(%{{.*}} : tensor<4xf32>) outs(%[[E2]] : tensor<4xf32>)
// CHECK-NEXT:    return
func.func @shared_empty(%x: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) {
  %e = tensor.empty() : tensor<4xf32>
  %r0 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r1 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r2 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r3 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r4 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r5 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r6 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r7 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r8 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r9 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r10 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r11 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r12 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r13 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r14 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r15 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  %r16 = linalg.copy ins(%x : tensor<4xf32>) outs(%e : tensor<4xf32>) -> tensor<4xf32>
  return %r0, %r1, %r2, %r3, %r4, %r5, %r6, %r7, %r8, %r9, %r10, %r11, %r12, %r13, %r14, %r15, %r16
      : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>,
        tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}
