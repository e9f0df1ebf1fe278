// tm-gpu-matmul (GPU, on bufferized memrefs): matmuls become gpu.launch kernels: tiled with
// shared-memory tiles, or a dot-product kernel for up to 16 rows of A or one column of B; a fill
// before and an elementwise op after join the kernel. Checks each, and what is left alone.
// RUN: tinymlir-opt %s -split-input-file --tm-gpu-matmul | FileCheck %s
// RUN: tinymlir-opt %s -split-input-file --tm-gpu-matmul=tile=8 | FileCheck %s --check-prefix=TILE8

// C(48x32) += A(48x16) B(16x32): a grid of 2 x 3 blocks of 16 x 16 threads, each staging
// 16 x 16 tiles of A and B in workgroup memory between barriers, then adding to C.
// CHECK-LABEL: func.func @tiled
// CHECK-SAME:      (%[[A:.*]]: memref<48x16xf32>, %[[B:.*]]: memref<16x32xf32>, %[[C:.*]]: memref<48x32xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK-DAG:     %[[T:.*]] = arith.constant 16 : index
// CHECK-DAG:     %[[GX:.*]] = arith.constant 2 : index
// CHECK-DAG:     %[[GY:.*]] = arith.constant 3 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[GX]], {{.*}} = %[[GY]],
// CHECK-SAME:        threads({{.*}}) in ({{.*}} = %[[T]], {{.*}} = %[[T]],
// CHECK-SAME:        workgroup(%[[TA:.*]] : memref<16x16xf32, #gpu.address_space<workgroup>>, %[[TB:.*]] : memref<16x16xf32, #gpu.address_space<workgroup>>)
// CHECK:           scf.for
// CHECK:             memref.load %[[A]]
// CHECK:             memref.store %{{.*}}, %[[TA]]
// CHECK:             memref.load %[[B]]
// CHECK:             memref.store %{{.*}}, %[[TB]]
// CHECK:             gpu.barrier
// CHECK:             scf.for
// CHECK:               memref.load %[[TA]]
// CHECK:               memref.load %[[TB]]
// CHECK:             gpu.barrier
// CHECK:           scf.if %{{[0-9]+}} {
// CHECK-NEXT:        %[[OLD:.*]] = memref.load %[[C]]
// CHECK-NEXT:        %[[NEW:.*]] = arith.addf %[[OLD]], %{{.*}} : f32
// CHECK-NEXT:        memref.store %[[NEW]], %[[C]]
// CHECK:           gpu.terminator
// CHECK-NOT:     linalg.matmul
// CHECK:         return
// TILE8-LABEL: func.func @tiled
// TILE8:         gpu.launch
// TILE8-SAME:        workgroup(%{{.*}} : memref<8x8xf32, #gpu.address_space<workgroup>>, %{{.*}} : memref<8x8xf32, #gpu.address_space<workgroup>>)
func.func @tiled(%a: memref<48x16xf32>, %b: memref<16x32xf32>, %c: memref<48x32xf32>) {
  linalg.matmul ins(%a, %b : memref<48x16xf32>, memref<16x32xf32>)
                outs(%c : memref<48x32xf32>)
  return
}

// -----

#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>

// The zero fill of a fresh C and a bias added after the product: one launch. The kernel
// starts from the fill's value and stores sum + bias into the output; C itself, read by
// nothing else, is never written.
// CHECK-LABEL: func.func @fill_and_epilogue
// CHECK-SAME:      (%{{.*}}: memref<32x16xf32>, %{{.*}}: memref<16x32xf32>, %[[BIAS:.*]]: memref<32xf32>, %[[OUT:.*]]: memref<32x32xf32>)
// CHECK:         %[[ZERO:.*]] = arith.constant 0.0
// CHECK:         %[[C:.*]] = memref.alloc() : memref<32x32xf32>
// CHECK-NOT:     linalg.fill
// CHECK:         gpu.launch
// CHECK:           scf.if %{{[0-9]+}} {
// CHECK-NEXT:        %[[SUM:.*]] = arith.addf %[[ZERO]], %{{.*}} : f32
// CHECK-NEXT:        %[[B:.*]] = memref.load %[[BIAS]]
// CHECK-NEXT:        %[[R:.*]] = arith.addf %[[SUM]], %[[B]] : f32
// CHECK-NEXT:        memref.store %[[R]], %[[OUT]]
// CHECK-NEXT:      }
// CHECK-NEXT:      gpu.terminator
// CHECK-NOT:     linalg.generic
// CHECK-NOT:     linalg.matmul
// CHECK:         memref.dealloc %[[C]]
func.func @fill_and_epilogue(%a: memref<32x16xf32>, %b: memref<16x32xf32>,
                             %bias: memref<32xf32>, %out: memref<32x32xf32>) {
  %zero = arith.constant 0.0 : f32
  %c = memref.alloc() : memref<32x32xf32>
  linalg.fill ins(%zero : f32) outs(%c : memref<32x32xf32>)
  linalg.matmul ins(%a, %b : memref<32x16xf32>, memref<16x32xf32>)
                outs(%c : memref<32x32xf32>)
  linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%c, %bias : memref<32x32xf32>, memref<32xf32>) outs(%out : memref<32x32xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  }
  memref.dealloc %c : memref<32x32xf32>
  return
}

// -----

// One row of A (a decode step): not the tiled kernel (15 of each block's 16 rows of threads
// would idle) but 32 outputs per block, each dot product split over 32 threads whose
// partial sums meet in a 32 x 32 workgroup buffer; 96 columns make 3 blocks.
// CHECK-LABEL: func.func @one_row
// CHECK-SAME:      (%[[A:.*]]: memref<1x64xf32>, %[[B:.*]]: memref<64x96xf32>, %[[C:.*]]: memref<1x96xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[G:.*]] = arith.constant 3 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[G]],
// CHECK-SAME:        workgroup(%[[P:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>>)
// CHECK-NOT:       memref<16x16xf32
// CHECK:           memref.load %[[A]]
// CHECK:           memref.load %[[B]]
// CHECK:           memref.store %{{.*}}, %[[P]]
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.load %[[P]]
// CHECK:           memref.store %{{.*}}, %[[C]]
// CHECK:         return
func.func @one_row(%a: memref<1x64xf32>, %b: memref<64x96xf32>, %c: memref<1x96xf32>) {
  linalg.matmul ins(%a, %b : memref<1x64xf32>, memref<64x96xf32>)
                outs(%c : memref<1x96xf32>)
  return
}

// -----

// A few rows of A (a batch's decode step, a short prompt; up to 16): the one-row kernel with
// a block row per row of A (3 x 4 blocks), so that each row is summed as it is alone.
// CHECK-LABEL: func.func @few_rows
// CHECK-SAME:      (%[[A:.*]]: memref<4x64xf32>, %[[B:.*]]: memref<64x96xf32>, %[[C:.*]]: memref<4x96xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK-DAG:     %[[G:.*]] = arith.constant 3 : index
// CHECK-DAG:     %[[R:.*]] = arith.constant 4 : index
// CHECK:         gpu.launch blocks(%{{.*}}, %[[ROW:.*]], %{{.*}}) in ({{.*}} = %[[G]], {{.*}} = %[[R]],
// CHECK-SAME:        workgroup(%[[P:.*]] : memref<32x32xf32, #gpu.address_space<workgroup>>)
// CHECK:           memref.load %[[A]][%[[ROW]],
// CHECK:           memref.store %{{.*}}, %[[P]]
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.store %{{.*}}, %[[C]][%[[ROW]],
// CHECK:         return
func.func @few_rows(%a: memref<4x64xf32>, %b: memref<64x96xf32>, %c: memref<4x96xf32>) {
  linalg.matmul ins(%a, %b : memref<4x64xf32>, memref<64x96xf32>)
                outs(%c : memref<4x96xf32>)
  return
}

// -----

// One column of B (the logits): a warp per row of A, 8 rows per block (48 rows: 6 blocks),
// the lanes' partial sums in an 8 x 32 workgroup buffer.
// CHECK-LABEL: func.func @one_column
// CHECK-SAME:      (%[[A:.*]]: memref<48x64xf32>, %[[B:.*]]: memref<64x1xf32>, %[[C:.*]]: memref<48x1xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         %[[G:.*]] = arith.constant 6 : index
// CHECK:         gpu.launch blocks({{.*}}) in ({{.*}} = %[[G]],
// CHECK-SAME:        workgroup(%[[P:.*]] : memref<8x32xf32, #gpu.address_space<workgroup>>)
// CHECK:           memref.store %{{.*}}, %[[P]]
// CHECK-NEXT:      gpu.barrier
// CHECK:           memref.store %{{.*}}, %[[C]]
// CHECK:         return
func.func @one_column(%a: memref<48x64xf32>, %b: memref<64x1xf32>, %c: memref<48x1xf32>) {
  linalg.matmul ins(%a, %b : memref<48x64xf32>, memref<64x1xf32>)
                outs(%c : memref<48x1xf32>)
  return
}

// -----

// Other element types are left alone (they become plain parallel loops later).
// CHECK-LABEL: func.func @integers
// CHECK-NOT:     gpu.launch
// CHECK:         linalg.matmul
// CHECK-NOT:     gpu.launch
// CHECK:         return
func.func @integers(%a: memref<8x16xi32>, %b: memref<16x32xi32>, %c: memref<8x32xi32>) {
  linalg.matmul ins(%a, %b : memref<8x16xi32>, memref<16x32xi32>)
                outs(%c : memref<8x32xi32>)
  return
}
