// tm-blas-rewrite (CPU, on bufferized memrefs): matmuls become calls of tm_rt_gemm (OpenBLAS),
// or of the GEMV kernels for one row or one column; a transposed copy of a read-only argument
// becomes a view. Checks each, and that matmuls it cannot express are left alone.
// RUN: tinymlir-opt %s -split-input-file --tm-blas-rewrite | FileCheck %s

// C(8x32) += A(8x16) B(16x32): one tm_rt_gemm call on the operands' base pointers.
// CHECK:       func.func private @tm_rt_gemm(i32, i64, i32, i32, i64, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64, !llvm.ptr, i64, i64)
// CHECK-LABEL: func.func @gemm
// CHECK-SAME:      (%[[A:.*]]: memref<8x16xf32>, %[[B:.*]]: memref<16x32xf32>, %[[C:.*]]: memref<8x32xf32>)
// CHECK-NOT:     linalg.matmul
// CHECK:         memref.extract_strided_metadata %[[A]]
// CHECK:         %[[PA:.*]] = llvm.getelementptr
// CHECK:         memref.extract_strided_metadata %[[B]]
// CHECK:         %[[PB:.*]] = llvm.getelementptr
// CHECK:         memref.extract_strided_metadata %[[C]]
// CHECK:         %[[PC:.*]] = llvm.getelementptr
// CHECK-DAG:     %[[M:.*]] = arith.constant 8 : i64
// CHECK-DAG:     %[[N:.*]] = arith.constant 32 : i64
// CHECK-DAG:     %[[K:.*]] = arith.constant 16 : i64
// CHECK:         call @tm_rt_gemm(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[M]], %[[N]], %[[K]], %[[PA]], %{{.*}}, %{{.*}}, %[[PB]], %{{.*}}, %{{.*}}, %[[PC]], %{{.*}}, %{{.*}})
// CHECK-NOT:     linalg.matmul
// CHECK:         return
func.func @gemm(%a: memref<8x16xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x32xf32>)
                outs(%c : memref<8x32xf32>)
  return
}

// -----

// One row of A (a decode step): the GEMV kernel over B's rows.
// CHECK-LABEL: func.func @one_row
// CHECK-NOT:     linalg.matmul
// CHECK:         call @tm_rt_gemv_rows(
// CHECK-NOT:     tm_rt_gemm
// CHECK:         return
func.func @one_row(%a: memref<1x16xf32>, %b: memref<16x32xf32>, %c: memref<1x32xf32>) {
  linalg.matmul ins(%a, %b : memref<1x16xf32>, memref<16x32xf32>)
                outs(%c : memref<1x32xf32>)
  return
}

// -----

// One column of B (the logits): a dot product per row of A.
// CHECK-LABEL: func.func @one_column
// CHECK-NOT:     linalg.matmul
// CHECK:         call @tm_rt_gemv_dots(
// CHECK-NOT:     tm_rt_gemm
// CHECK:         return
func.func @one_column(%a: memref<8x16xf32>, %b: memref<16x1xf32>, %c: memref<8x1xf32>) {
  linalg.matmul ins(%a, %b : memref<8x16xf32>, memref<16x1xf32>)
                outs(%c : memref<8x1xf32>)
  return
}

// -----

// A batch matmul: one tm_rt_gemm call for the whole batch of 4.
// CHECK-LABEL: func.func @batch
// CHECK:         %[[BATCH:.*]] = arith.constant 4 : i64
// CHECK:         call @tm_rt_gemm(%{{.*}}, %[[BATCH]],
// CHECK-NOT:     linalg.batch_matmul
// CHECK-NOT:     scf.for
// CHECK:         return
func.func @batch(%a: memref<4x8x16xf32>, %b: memref<4x16x32xf32>, %c: memref<4x8x32xf32>) {
  linalg.batch_matmul ins(%a, %b : memref<4x8x16xf32>, memref<4x16x32xf32>)
                      outs(%c : memref<4x8x32xf32>)
  return
}

// -----

// Attention's per-head products in decode (12 heads, one row each): one call of the batched
// row kernel for the whole batch, each head's operands a batch stride apart, no loop.
// CHECK-LABEL: func.func @heads_times_values
// CHECK-NOT:     linalg.batch_matmul
// CHECK:         %[[HEADS:.*]] = arith.constant 12 : i64
// CHECK:         call @tm_rt_gemv_rows_batched(%{{.*}}, %[[HEADS]],
// CHECK-NOT:     scf.for
// CHECK-NOT:     tm_rt_gemm
// CHECK:         return
func.func @heads_times_values(%p: memref<12x1x32xf32>, %v: memref<12x32x64xf32>, %c: memref<12x1x64xf32>) {
  linalg.batch_matmul ins(%p, %v : memref<12x1x32xf32>, memref<12x32x64xf32>)
                      outs(%c : memref<12x1x64xf32>)
  return
}

// -----

// The scores q . K^T per head, K a transposed view of the cache (heads side by side in a
// row): one call of the batched dot-product kernel.
// CHECK-LABEL: func.func @heads_times_keys
// CHECK-NOT:     linalg.batch_matmul
// CHECK:         %[[HEADS:.*]] = arith.constant 12 : i64
// CHECK:         call @tm_rt_gemv_dots_batched(%{{.*}}, %[[HEADS]],
// CHECK-NOT:     scf.for
// CHECK-NOT:     tm_rt_gemm
// CHECK:         return
func.func @heads_times_keys(%q: memref<12x1x64xf32>, %k: memref<12x32x64xf32>, %c: memref<12x1x32xf32>) {
  %kt = memref.transpose %k (d0, d1, d2) -> (d0, d2, d1) : memref<12x32x64xf32> to memref<12x64x32xf32, strided<[2048, 1, 64]>>
  linalg.batch_matmul ins(%q, %kt : memref<12x1x64xf32>, memref<12x64x32xf32, strided<[2048, 1, 64]>>)
                      outs(%c : memref<12x1x32xf32>)
  return
}

// -----

// A transposed copy of a read-only argument that only a matmul reads: BLAS reads the
// argument in place through a memref.transpose view and its transpose flag (112); the copy
// and its buffer go.
// CHECK-LABEL: func.func @transposed_argument
// CHECK-SAME:      (%{{.*}}: memref<24x16xf32>, %[[K:.*]]: memref<32x16xf32>, %{{.*}}: memref<24x32xf32>)
// CHECK-NOT:     memref.alloc
// CHECK-NOT:     linalg.transpose
// CHECK:         %[[VIEW:.*]] = memref.transpose %[[K]] (d0, d1) -> (d1, d0)
// CHECK:         memref.extract_strided_metadata %[[VIEW]]
// CHECK-DAG:     %[[TRANS:.*]] = arith.constant 112 : i32
// CHECK:         call @tm_rt_gemm(%{{.*}}, %{{.*}}, %{{.*}}, %[[TRANS]],
// CHECK-NOT:     memref.dealloc
// CHECK:         return
func.func @transposed_argument(%a: memref<24x16xf32>, %k: memref<32x16xf32>,
                               %c: memref<24x32xf32>) {
  %t = memref.alloc() : memref<16x32xf32>
  linalg.transpose ins(%k : memref<32x16xf32>) outs(%t : memref<16x32xf32>) permutation = [1, 0]
  linalg.matmul ins(%a, %t : memref<24x16xf32>, memref<16x32xf32>)
                outs(%c : memref<24x32xf32>)
  memref.dealloc %t : memref<16x32xf32>
  return
}

// -----

// Up to 16 rows against a transposed f32 weight (stored output-major, as a batch's decode
// step multiplies it): the GEMV kernels' dot products, 8 rows of x against the weight's 32
// rows, each output summed as it is for one row.
// CHECK-LABEL: func.func @few_rows_times_a_transposed_weight
// CHECK-DAG:     %[[ROWS:.*]] = arith.constant 8 : i64
// CHECK:         call @tm_rt_gemv_dots(%{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %{{.*}}, %[[ROWS]],
// CHECK-NOT:     tm_rt_gemm
// CHECK:         return
func.func @few_rows_times_a_transposed_weight(%a: memref<8x16xf32>, %w: memref<32x16xf32>,
                                              %c: memref<8x32xf32>) {
  %wt = memref.transpose %w (d0, d1) -> (d1, d0) : memref<32x16xf32> to memref<16x32xf32, strided<[1, 16]>>
  linalg.matmul ins(%a, %wt : memref<8x16xf32>, memref<16x32xf32, strided<[1, 16]>>)
                outs(%c : memref<8x32xf32>)
  return
}

// -----

// What it cannot express is left alone (lowered to loops later): integer elements, and an
// operand with no unit stride (every other column).
// CHECK-LABEL: func.func @left_alone
// CHECK-NOT:     call
// CHECK:         linalg.matmul ins(%{{.*}}, %{{.*}} : memref<8x16xi32>, memref<16x32xi32>)
// CHECK:         %[[V:.*]] = memref.subview
// CHECK-NEXT:    linalg.matmul ins(%[[V]], %{{.*}} : memref<8x16xf32, strided<[32, 2]>>, memref<16x32xf32>)
// CHECK-NOT:     call
// CHECK:         return
func.func @left_alone(%ai: memref<8x16xi32>, %bi: memref<16x32xi32>, %ci: memref<8x32xi32>,
                      %a: memref<8x32xf32>, %b: memref<16x32xf32>, %c: memref<8x32xf32>) {
  linalg.matmul ins(%ai, %bi : memref<8x16xi32>, memref<16x32xi32>)
                outs(%ci : memref<8x32xi32>)
  %v = memref.subview %a[0, 0] [8, 16] [1, 2]
      : memref<8x32xf32> to memref<8x16xf32, strided<[32, 2]>>
  linalg.matmul ins(%v, %b : memref<8x16xf32, strided<[32, 2]>>, memref<16x32xf32>)
                outs(%c : memref<8x32xf32>)
  return
}
