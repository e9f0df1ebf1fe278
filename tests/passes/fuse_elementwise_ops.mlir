// tm-fuse-elementwise-ops: upstream's elementwise fusion, except that reshapes are never
// folded into (or out of) an op with reduction loops, so matmuls stay named linalg.matmul.
// Checks a chain of elementwise ops fusing into one, and a matmul kept named between reshapes.
// RUN: tinymlir-opt %s -split-input-file --tm-fuse-elementwise-ops | FileCheck %s

#id = affine_map<(d0, d1) -> (d0, d1)>

// CHECK-LABEL: func.func @elementwise_chain
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK-NEXT:    ^bb0(%[[A:.*]]: f32, %[[B:.*]]: f32, %{{.*}}: f32):
// CHECK-NEXT:      %[[S:.*]] = arith.addf %[[A]], %[[B]] : f32
// CHECK-NEXT:      %[[M:.*]] = arith.mulf %[[S]], %[[S]] : f32
// CHECK-NEXT:      linalg.yield %[[M]] : f32
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @elementwise_chain(%x: tensor<4x8xf32>, %y: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %e = tensor.empty() : tensor<4x8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %y : tensor<4x8xf32>, tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<4x8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%0 : tensor<4x8xf32>) outs(%e : tensor<4x8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<4x8xf32>
  return %1 : tensor<4x8xf32>
}

// -----

#id3 = affine_map<(d0, d1, d2) -> (d0, d1, d2)>

// A (2x3)x8 input collapsed for a matmul, its result expanded back, then a bias and a tanh.
// Upstream folds the reshapes into the matmul, which becomes a 4-loop linalg.generic; here
// the matmul stays named with its reshapes around it, and only the two elementwise ops fuse.
// CHECK-LABEL: func.func @matmul_between_reshapes
// CHECK:         %[[C:.*]] = tensor.collapse_shape %{{.*}} {{\[\[}}0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
// CHECK:         %[[F:.*]] = linalg.fill
// CHECK-NEXT:    %[[M:.*]] = linalg.matmul ins(%[[C]], %{{.*}} : tensor<6x8xf32>, tensor<8x16xf32>) outs(%[[F]] : tensor<6x16xf32>)
// CHECK-NEXT:    %[[X:.*]] = tensor.expand_shape %[[M]] {{\[\[}}0, 1], [2]]
// CHECK:         %[[R:.*]] = linalg.generic {{.*}} ins(%[[X]], %{{.*}} : tensor<2x3x16xf32>, tensor<2x3x16xf32>)
// CHECK:           arith.addf
// CHECK-NEXT:      math.tanh
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]]
func.func @matmul_between_reshapes(%x: tensor<2x3x8xf32>, %w: tensor<8x16xf32>,
                                   %bias: tensor<2x3x16xf32>) -> tensor<2x3x16xf32> {
  %c = tensor.collapse_shape %x [[0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<6x16xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<6x16xf32>) -> tensor<6x16xf32>
  %m = linalg.matmul ins(%c, %w : tensor<6x8xf32>, tensor<8x16xf32>)
                     outs(%f : tensor<6x16xf32>) -> tensor<6x16xf32>
  %r = tensor.expand_shape %m [[0, 1], [2]] output_shape [2, 3, 16]
      : tensor<6x16xf32> into tensor<2x3x16xf32>
  %e3 = tensor.empty() : tensor<2x3x16xf32>
  %0 = linalg.generic {indexing_maps = [#id3, #id3, #id3],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%r, %bias : tensor<2x3x16xf32>, tensor<2x3x16xf32>) outs(%e3 : tensor<2x3x16xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %s = arith.addf %a, %b : f32
    linalg.yield %s : f32
  } -> tensor<2x3x16xf32>
  %1 = linalg.generic {indexing_maps = [#id3, #id3],
                       iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%0 : tensor<2x3x16xf32>) outs(%e3 : tensor<2x3x16xf32>) {
  ^bb0(%a: f32, %o: f32):
    %t = math.tanh %a : f32
    linalg.yield %t : f32
  } -> tensor<2x3x16xf32>
  return %1 : tensor<2x3x16xf32>
}
