// tm-outline-loop-nests: each top-level scf.parallel / scf.for without results of a public
// function becomes a private noinline, internal function called once; what it uses from
// outside is passed in, constants cloned. Checks that, and the loops it leaves in place.
// RUN: tinymlir-opt %s --tm-outline-loop-nests | FileCheck %s

// CHECK-LABEL: func.func @program
// CHECK-SAME:      (%[[A:.*]]: memref<8xf32>, %[[B:.*]]: memref<8xf32>, %[[S:.*]]: f32)
// CHECK:         call @__tm_loop_nest_0(%[[A]], %[[S]], %[[B]]) : (memref<8xf32>, f32, memref<8xf32>) -> ()
// CHECK-NEXT:    call @__tm_loop_nest_1(%[[B]], %[[A]]) : (memref<8xf32>, memref<8xf32>) -> ()
// A loop with results stays where it is.
// CHECK:         %[[SUM:.*]] = scf.for {{.*}} -> (f32)
// CHECK:         memref.store %[[SUM]]
func.func @program(%a: memref<8xf32>, %b: memref<8xf32>, %s: f32) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %a[%i] : memref<8xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %b[%i] : memref<8xf32>
  }
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %b[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  }
  %z = arith.constant 0.0 : f32
  %sum = scf.for %i = %c0 to %c8 step %c1 iter_args(%acc = %z) -> f32 {
    %v = memref.load %b[%i] : memref<8xf32>
    %n = arith.addf %acc, %v : f32
    scf.yield %n : f32
  }
  memref.store %sum, %a[%c0] : memref<8xf32>
  return
}

// Private functions (such as the outlined ones themselves) are not looked into.
// CHECK-LABEL: func.func private @helper
// CHECK-NOT:     call
// CHECK:         scf.for
func.func private @helper(%a: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  scf.for %i = %c0 to %c8 step %c1 {
    %v = memref.load %a[%i] : memref<8xf32>
    memref.store %v, %a[%i] : memref<8xf32>
  }
  return
}

// The bounds are constants cloned into the function (so LLVM can vectorise the loop).
// CHECK-LABEL: func.func private @__tm_loop_nest_0
// CHECK-SAME:      (%[[X:.*]]: memref<8xf32>, %[[F:.*]]: f32, %[[Y:.*]]: memref<8xf32>)
// CHECK-SAME:      attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK-DAG:     %[[C0:.*]] = arith.constant 0 : index
// CHECK-DAG:     %[[C1:.*]] = arith.constant 1 : index
// CHECK-DAG:     %[[C8:.*]] = arith.constant 8 : index
// CHECK:         scf.parallel (%[[I:.*]]) = (%[[C0]]) to (%[[C8]]) step (%[[C1]])
// CHECK-NEXT:      %[[V:.*]] = memref.load %[[X]][%[[I]]]
// CHECK-NEXT:      %[[W:.*]] = arith.mulf %[[V]], %[[F]] : f32
// CHECK-NEXT:      memref.store %[[W]], %[[Y]][%[[I]]]
// CHECK:         return
// CHECK-LABEL: func.func private @__tm_loop_nest_1
// CHECK-SAME:      attributes {llvm.linkage = #llvm.linkage<internal>, passthrough = ["noinline"]}
// CHECK:         scf.for
