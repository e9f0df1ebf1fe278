// tm-argument-block: a function with arguments gets an entry block that only branches
// (llvm.br) to its old entry. Checks the split, and that functions without arguments, or
// whose entry block is only a terminator, are left alone.
// RUN: tinymlir-opt %s --tm-argument-block | FileCheck %s

// CHECK-LABEL: func.func @with_arguments
// CHECK-SAME:      (%[[A:.*]]: memref<4xf32>, %[[I:.*]]: index)
// CHECK-NEXT:    llvm.br ^[[BODY:bb[0-9]+]]
// CHECK-NEXT:  ^[[BODY]]:
// CHECK-NEXT:    %[[V:.*]] = memref.load %[[A]][%[[I]]] : memref<4xf32>
// CHECK-NEXT:    return %[[V]] : f32
func.func @with_arguments(%a: memref<4xf32>, %i: index) -> f32 {
  %0 = memref.load %a[%i] : memref<4xf32>
  return %0 : f32
}

// No arguments: nothing to convert, no new block.
// CHECK-LABEL: func.func @no_arguments
// CHECK-NOT:     llvm.br
// CHECK:         arith.constant
// CHECK-NEXT:    return
func.func @no_arguments() -> index {
  %c = arith.constant 0 : index
  return %c : index
}

// An entry block of one op (its terminator) has nothing to renumber.
// CHECK-LABEL: func.func @only_return
// CHECK-NEXT:    return
func.func @only_return(%a: f32) -> f32 {
  return %a : f32
}

// Declarations have no body.
// CHECK-LABEL: func.func private @declaration(f32)
func.func private @declaration(f32)
