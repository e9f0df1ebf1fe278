// tm-copies-to-linalg: every memref.copy becomes a linalg.copy (a loop nest lowered like any
// other linalg op, instead of the generic runtime memrefCopy). Checks a plain copy, a copy
// from a strided view, and a copy nested in a loop.
// RUN: tinymlir-opt %s --tm-copies-to-linalg | FileCheck %s

// CHECK-LABEL: func.func @plain
// CHECK-SAME:      (%[[SRC:.*]]: memref<4x8xf32>, %[[DST:.*]]: memref<4x8xf32>)
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy ins(%[[SRC]] : memref<4x8xf32>) outs(%[[DST]] : memref<4x8xf32>)
// CHECK-NEXT:    return
func.func @plain(%src: memref<4x8xf32>, %dst: memref<4x8xf32>) {
  memref.copy %src, %dst : memref<4x8xf32> to memref<4x8xf32>
  return
}

// CHECK-LABEL: func.func @strided_source
// CHECK:         %[[VIEW:.*]] = memref.subview
// CHECK-NOT:     memref.copy
// CHECK:         linalg.copy ins(%[[VIEW]] : memref<4x2xf32, strided<[8, 1], offset: 2>>)
// CHECK-SAME:      outs(%{{.*}} : memref<4x2xf32>)
func.func @strided_source(%src: memref<4x8xf32>, %dst: memref<4x2xf32>) {
  %v = memref.subview %src[0, 2] [4, 2] [1, 1]
      : memref<4x8xf32> to memref<4x2xf32, strided<[8, 1], offset: 2>>
  memref.copy %v, %dst : memref<4x2xf32, strided<[8, 1], offset: 2>> to memref<4x2xf32>
  return
}

// Copies inside other operations' regions are rewritten too.
// CHECK-LABEL: func.func @in_loop
// CHECK:         scf.for
// CHECK-NEXT:      linalg.copy ins(%{{.*}} : memref<8xf32>) outs(%{{.*}} : memref<8xf32>)
// CHECK-NOT:     memref.copy
func.func @in_loop(%src: memref<8xf32>, %dst: memref<8xf32>, %n: index) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  scf.for %i = %c0 to %n step %c1 {
    memref.copy %src, %dst : memref<8xf32> to memref<8xf32>
  }
  return
}
