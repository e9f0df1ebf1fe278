// tm-cse: upstream CSE with a hash of each op's regions attached while it runs. Checks that
// ops with the same body merge, ops whose bodies differ do not, and that the hash attribute
// (tm.region_hash) is never left in the IR (--implicit-check-not).
// RUN: tinymlir-opt %s --tm-cse | FileCheck %s --implicit-check-not=tm.region_hash

#id = affine_map<(d0) -> (d0)>

// Same inputs, same body (capturing the same scalar from outside): one generic is left.
// CHECK-LABEL: func.func @same_bodies
// CHECK-SAME:      (%{{.*}}: tensor<8xf32>, %[[S:.*]]: f32)
// CHECK:         %[[R:.*]] = linalg.generic
// CHECK:           arith.mulf %{{.*}}, %[[S]] : f32
// CHECK-NOT:     linalg.generic
// CHECK:         return %[[R]], %[[R]] : tensor<8xf32>, tensor<8xf32>
func.func @same_bodies(%x: tensor<8xf32>, %s: f32) -> (tensor<8xf32>, tensor<8xf32>) {
  %e = tensor.empty() : tensor<8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %s : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  return %0, %1 : tensor<8xf32>, tensor<8xf32>
}

// Same operands, bodies that differ in a constant (y = x * c_i): both stay. The duplicate
// tensor.empty and the scalar additions are merged as by upstream CSE.
// CHECK-LABEL: func.func @different_bodies
// CHECK-DAG:     %[[C2:.*]] = arith.constant 2.0{{.*}} : f32
// CHECK-DAG:     %[[C3:.*]] = arith.constant 3.0{{.*}} : f32
// CHECK:         %[[E:.*]] = tensor.empty() : tensor<8xf32>
// CHECK-NOT:     tensor.empty
// CHECK:         %[[R0:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<8xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[C2]] : f32
// CHECK:         %[[R1:.*]] = linalg.generic {{.*}} outs(%[[E]] : tensor<8xf32>)
// CHECK:           arith.mulf %{{.*}}, %[[C3]] : f32
// CHECK:         %[[A:.*]] = arith.addf
// CHECK-NOT:     arith.addf
// CHECK:         return %[[R0]], %[[R1]], %[[A]], %[[A]]
func.func @different_bodies(%x: tensor<8xf32>, %s: f32)
    -> (tensor<8xf32>, tensor<8xf32>, f32, f32) {
  %c2 = arith.constant 2.0 : f32
  %c3 = arith.constant 3.0 : f32
  %e0 = tensor.empty() : tensor<8xf32>
  %e1 = tensor.empty() : tensor<8xf32>
  %0 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e0 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %c2 : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e1 : tensor<8xf32>) {
  ^bb0(%in: f32, %out: f32):
    %m = arith.mulf %in, %c3 : f32
    linalg.yield %m : f32
  } -> tensor<8xf32>
  %a = arith.addf %s, %s : f32
  %b = arith.addf %s, %s : f32
  return %0, %1, %a, %b : tensor<8xf32>, tensor<8xf32>, f32, f32
}
