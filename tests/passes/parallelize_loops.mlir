// tm-parallelize-loops: an scf.parallel of at least 2^15 iterations becomes a function over
// a range of its first dimension, run by tm_rt_parallel_for, its captures passed as i64
// words. Checks the call and the outlined loop, and that a small loop stays serial.
// RUN: tinymlir-opt %s --tm-parallelize-loops | FileCheck %s

// CHECK:       func.func private @tm_rt_parallel_for(i64, i64, (i64, i64, !llvm.ptr) -> (), !llvm.ptr)

// CHECK-LABEL: func.func @program
// CHECK-SAME:      (%[[A:.*]]: memref<256x256xf32>, %[[B:.*]]: memref<256x256xf32>, %[[S:.*]]: f32, %[[X:.*]]: memref<8xf32>)
// The three captures (A, the scalar, B) as words in a stack array.
// CHECK:         %[[N:.*]] = llvm.mlir.constant(3 : i64) : i64
// CHECK-NEXT:    %[[WORDS:.*]] = llvm.alloca %[[N]] x i64
// CHECK:         memref.extract_aligned_pointer_as_index %[[A]]
// CHECK:         arith.bitcast %[[S]] : f32 to i32
// CHECK:         memref.extract_aligned_pointer_as_index %[[B]]
// CHECK:         %[[BODY:.*]] = constant @__tm_parallel_0 : (i64, i64, !llvm.ptr) -> ()
// CHECK:         call @tm_rt_parallel_for(%{{.*}}, %{{.*}}, %[[BODY]], %[[WORDS]])
// CHECK-NOT:     scf.parallel (%{{.*}}, %{{.*}})
// 8 iterations: not worth handing out, it stays on the calling thread.
// CHECK:         scf.parallel (%{{.*}}) = (%{{.*}}) to (%{{.*}}) step (%{{.*}}) {
// CHECK-NEXT:      memref.load %[[X]]
// CHECK:         return

// Large, but it calls a function: it stays serial (only loops that compute and access
// memory run on other threads).
// CHECK-LABEL: func.func @calls_inside
// CHECK-NOT:     tm_rt_parallel_for
// CHECK:         scf.parallel
// CHECK:           call @opaque
// CHECK-NOT:     tm_rt_parallel_for
// CHECK:         return

// The outlined loop: its first dimension over [begin, end), the buffers rebuilt from words.
// CHECK-LABEL: func.func private @__tm_parallel_0
// CHECK-SAME:      (%[[BEGIN:.*]]: i64, %[[END:.*]]: i64, %{{.*}}: !llvm.ptr)
// CHECK:         %[[A2:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256x256xf32>
// CHECK:         %[[S2:.*]] = arith.bitcast %{{.*}} : i32 to f32
// CHECK:         %[[B2:.*]] = builtin.unrealized_conversion_cast %{{.*}} to memref<256x256xf32>
// CHECK:         %[[LO:.*]] = arith.index_cast %[[BEGIN]] : i64 to index
// CHECK:         %[[HI:.*]] = arith.index_cast %[[END]] : i64 to index
// CHECK:         scf.parallel (%[[I:.*]], %[[J:.*]]) = (%[[LO]], %{{.*}}) to (%[[HI]], %{{.*}})
// CHECK-NEXT:      %[[V:.*]] = memref.load %[[A2]][%[[I]], %[[J]]]
// CHECK-NEXT:      %[[W:.*]] = arith.mulf %[[V]], %[[S2]] : f32
// CHECK-NEXT:      memref.store %[[W]], %[[B2]][%[[I]], %[[J]]]
func.func @program(%a: memref<256x256xf32>, %b: memref<256x256xf32>, %s: f32,
                   %x: memref<8xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c8 = arith.constant 8 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c256, %c256) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<256x256xf32>
    %w = arith.mulf %v, %s : f32
    memref.store %w, %b[%i, %j] : memref<256x256xf32>
  }
  scf.parallel (%i) = (%c0) to (%c8) step (%c1) {
    %v = memref.load %x[%i] : memref<8xf32>
    %w = arith.addf %v, %v : f32
    memref.store %w, %x[%i] : memref<8xf32>
  }
  return
}

func.func private @opaque(f32) -> f32

func.func @calls_inside(%a: memref<256x256xf32>) {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c256 = arith.constant 256 : index
  scf.parallel (%i, %j) = (%c0, %c0) to (%c256, %c256) step (%c1, %c1) {
    %v = memref.load %a[%i, %j] : memref<256x256xf32>
    %w = func.call @opaque(%v) : (f32) -> f32
    memref.store %w, %a[%i, %j] : memref<256x256xf32>
  }
  return
}
