// tm-free-buffers: each buffer is freed right after the last op that uses it or a value
// derived from it (a view); one of 64 KiB or more at the end of the function. Checks both,
// and that a buffer escaping the function's straight-line code is an error, not a leak.
// RUN: tinymlir-opt %s -split-input-file -verify-diagnostics --tm-free-buffers | FileCheck %s

// CHECK-LABEL: func.func @small_buffers_freed_after_last_use
// CHECK:         %[[A:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%[[A]] : memref<4xf32>)
// CHECK-NEXT:    %[[B:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    linalg.copy ins(%[[A]] : memref<4xf32>) outs(%[[B]] : memref<4xf32>)
// CHECK-NEXT:    memref.dealloc %[[A]] : memref<4xf32>
// CHECK-NEXT:    %[[V:.*]] = memref.subview %[[B]]
// CHECK-NEXT:    linalg.copy ins(%[[V]] : {{.*}}) outs(%{{.*}} : memref<2xf32>)
// CHECK-NEXT:    memref.dealloc %[[B]] : memref<4xf32>
// CHECK-NEXT:    linalg.copy
// CHECK-NEXT:    return
func.func @small_buffers_freed_after_last_use(%in: memref<4xf32>, %out: memref<2xf32>,
                                               %other: memref<2xf32>) {
  %a = memref.alloc() : memref<4xf32>
  linalg.copy ins(%in : memref<4xf32>) outs(%a : memref<4xf32>)
  %b = memref.alloc() : memref<4xf32>
  linalg.copy ins(%a : memref<4xf32>) outs(%b : memref<4xf32>)
  // %b's last use is through a view of it.
  %v = memref.subview %b[0] [2] [1] : memref<4xf32> to memref<2xf32, strided<[1]>>
  linalg.copy ins(%v : memref<2xf32, strided<[1]>>) outs(%out : memref<2xf32>)
  linalg.copy ins(%out : memref<2xf32>) outs(%other : memref<2xf32>)
  return
}

// -----

// 128 x 128 f32 is 64 KiB: freed at the end, not after its last use (glibc would give the
// pages back and the next call would fault them in again).
// CHECK-LABEL: func.func @large_buffer_freed_at_end
// CHECK:         %[[BIG:.*]] = memref.alloc() : memref<128x128xf32>
// CHECK:         %[[SMALL:.*]] = memref.alloc() : memref<4xf32>
// CHECK-NEXT:    linalg.copy ins(%[[BIG]] : memref<128x128xf32>)
// CHECK-NEXT:    linalg.copy ins(%{{.*}} : memref<4xf32>) outs(%[[SMALL]] : memref<4xf32>)
// CHECK-NEXT:    linalg.copy ins(%[[SMALL]] : memref<4xf32>)
// CHECK-NEXT:    memref.dealloc %[[SMALL]] : memref<4xf32>
// CHECK-NEXT:    linalg.copy
// CHECK-NEXT:    memref.dealloc %[[BIG]] : memref<128x128xf32>
// CHECK-NEXT:    return
func.func @large_buffer_freed_at_end(%x: memref<128x128xf32>, %y: memref<128x128xf32>,
                                     %in: memref<4xf32>, %out: memref<4xf32>) {
  %big = memref.alloc() : memref<128x128xf32>
  linalg.copy ins(%x : memref<128x128xf32>) outs(%big : memref<128x128xf32>)
  %small = memref.alloc() : memref<4xf32>
  linalg.copy ins(%big : memref<128x128xf32>) outs(%y : memref<128x128xf32>)
  linalg.copy ins(%in : memref<4xf32>) outs(%small : memref<4xf32>)
  linalg.copy ins(%small : memref<4xf32>) outs(%out : memref<4xf32>)
  linalg.copy ins(%out : memref<4xf32>) outs(%in : memref<4xf32>)
  return
}

// -----

// A buffer that reaches the terminator escapes: a compile error naming the operation.
func.func @escaping_buffer() -> memref<4xf32> {
  %a = memref.alloc() : memref<4xf32>
  // expected-error @+1 {{tm-free-buffers: a buffer the program allocates reaches this operation}}
  return %a : memref<4xf32>
}
