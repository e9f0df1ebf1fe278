// tm-gpu-row-kernels (GPU, on bufferized memrefs): a reduction along the last axis and the
// row-wise ops around it become one gpu.launch, a block per row, barriers between the ops.
// Checks a fill + sum + divide (4 rows of 64), and a reduction it cannot split left alone.
// RUN: tinymlir-opt %s -split-input-file --tm-gpu-row-kernels | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// 4 blocks of 64 threads (the row's length, a power of two); the fill on thread 0, each
// thread's partial sum over columns t, t + 64, ..., a tree in workgroup memory (32, 16, ...,
// 1 adding), thread 0 adding the total to the output, then the division over the row.
// CHECK-LABEL: func.func @normalize
// CHECK-SAME:      (%[[X:.*]]: memref<4x64xf32>, %[[Y:.*]]: memref<4x64xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.0
// CHECK:         %[[SUM:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NOT:     linalg.
// CHECK-DAG:     %[[ROWS:.*]] = arith.constant 4 : index
// CHECK-DAG:     %[[THREADS:.*]] = arith.constant 64 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[ROWS]],
// CHECK-SAME:        threads(%[[T:[^,]*]], {{.*}}) in ({{.*}} = %[[THREADS]],
// CHECK-SAME:        workgroup(%[[P:.*]] : memref<64xf32, #gpu.address_space<workgroup>>)
// The fill, on thread 0.
// CHECK:           arith.cmpi eq, %[[T]], %{{.*}} : index
// CHECK:           memref.store %[[ZERO]], %[[SUM]]
// CHECK:           gpu.barrier
// The sum: the thread's partial, from -0.0 (addf's identity), then the tree.
// CHECK:           %[[NEG0:.*]] = arith.constant -0.0
// CHECK:           %[[PART:.*]] = scf.for %{{.*}} = %[[T]] to {{.*}} iter_args(%{{.*}} = %[[NEG0]]) -> (f32)
// CHECK:             memref.load %[[X]]
// CHECK:             arith.addf
// CHECK:           memref.store %[[PART]], %[[P]][%[[T]]]
// CHECK-NEXT:      gpu.barrier
// CHECK-COUNT-6:   arith.addf %{{.*}}, %{{.*}} : f32
// CHECK:           memref.load %[[P]]
// CHECK:           %[[OLD:.*]] = memref.load %[[SUM]]
// CHECK:           %[[TOTAL:.*]] = arith.addf %{{.*}}, %[[OLD]] : f32
// CHECK:           memref.store %[[TOTAL]], %[[SUM]]
// CHECK:           gpu.barrier
// The division, over the row.
// CHECK:           scf.for %{{.*}} = %[[T]] to
// CHECK:             memref.load %[[SUM]]
// CHECK:             arith.divf
// CHECK:             memref.store %{{.*}}, %[[Y]]
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.
// CHECK:         memref.dealloc %[[SUM]]
func.func @normalize(%x: memref<4x64xf32>, %y: memref<4x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %sum = memref.alloc() : memref<4xf32>
  linalg.fill ins(%zero : f32) outs(%sum : memref<4xf32>)
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%sum : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.addf %a, %acc : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %sum : memref<4x64xf32>, memref<4xf32>) outs(%y : memref<4x64xf32>) {
  ^bb0(%a: f32, %s: f32, %o: f32):
    %d = arith.divf %a, %s : f32
    linalg.yield %d : f32
  }
  memref.dealloc %sum : memref<4xf32>
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>

// A product along the row: only sums and maxima are split into partials; it stays a
// linalg.generic (a thread per row, later).
// CHECK-LABEL: func.func @product
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.generic
// CHECK:           arith.mulf
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @product(%x: memref<4x64xf32>, %p: memref<4xf32>) {
  linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<4x64xf32>) outs(%p : memref<4xf32>) {
  ^bb0(%a: f32, %acc: f32):
    %s = arith.mulf %a, %acc : f32
    linalg.yield %s : f32
  }
  return
}
