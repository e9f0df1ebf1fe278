// tm-gpu-emulation: each gpu.launch becomes host loops over its blocks and, per phase between
// barriers, over its threads; values used across a barrier are kept per thread, workgroup
// memory is a host buffer. Checks that, and the race check's runtime calls (check-races).
// RUN: tinymlir-opt %s --tm-gpu-emulation=check-races=0 | FileCheck %s
// RUN: tinymlir-opt %s --tm-gpu-emulation | FileCheck %s --check-prefix=RACES

// 2 blocks of 32 threads, each block reversing its 32 elements through workgroup memory.
// CHECK-LABEL: func.func @reverse_in_blocks
// CHECK-SAME:      (%[[M:.*]]: memref<60xf32>)
// CHECK:         %[[GX:.*]] = arith.constant 2 : index
// CHECK:         %[[TX:.*]] = arith.constant 32 : index
// CHECK-NOT:     gpu.launch
// CHECK-NOT:     call
// The workgroup buffer, and per-thread buffers (z, y, x) for the values used after the
// barrier: the element's index and the guard.
// CHECK:         %[[SHARED:.*]] = memref.alloc() : memref<32xf32>
// CHECK-NEXT:    %[[KEPT_I:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %[[TX]]) : memref<?x?x?xindex>
// CHECK-NEXT:    %[[KEPT_IF:.*]] = memref.alloc(%{{.*}}, %{{.*}}, %[[TX]]) : memref<?x?x?xi1>
// The blocks, z, y, x.
// CHECK-NEXT:    scf.for
// CHECK-NEXT:      scf.for
// CHECK-NEXT:        scf.for %[[BX:.*]] = %{{.*}} to %[[GX]] step
// Up to the barrier, for every thread.
// CHECK:               scf.for
// CHECK-NEXT:            scf.for
// CHECK-NEXT:              scf.for %[[T:.*]] = %{{.*}} to %[[TX]] step
// CHECK:                     %[[B:.*]] = arith.muli %[[BX]], %{{.*}} : index
// CHECK-NEXT:                %[[I:.*]] = arith.addi %[[B]], %[[T]] : index
// CHECK-NEXT:                memref.store %[[I]], %[[KEPT_I]]
// CHECK:                     scf.if
// CHECK-NEXT:                  %[[V:.*]] = memref.load %[[M]][%[[I]]]
// CHECK-NEXT:                  memref.store %[[V]], %[[SHARED]][%[[T]]]
// After the barrier, for every thread again.
// CHECK:               scf.for
// CHECK-NEXT:            scf.for
// CHECK-NEXT:              scf.for %[[T2:.*]] = %{{.*}} to %[[TX]] step
// CHECK:                     %[[J:.*]] = arith.subi %{{.*}}, %[[T2]] : index
// CHECK-NEXT:                %[[U:.*]] = memref.load %[[SHARED]][%[[J]]]
// CHECK:                     %[[I2:.*]] = memref.load %[[KEPT_I]]
// CHECK-NEXT:                scf.if
// CHECK-NEXT:                  memref.store %[[U]], %[[M]][%[[I2]]]
// CHECK:         memref.dealloc %[[SHARED]]
// CHECK-NOT:     gpu.
// CHECK:         return

// With the race check, every access to the launch's buffers and workgroup memory is
// reported first (kind: 1 for a write, 2 for workgroup memory), and so is the barrier.
// RACES-DAG:   func.func private @tm_rt_gpu_emulation_launch_begin(i64, i64, i64, i64, i64, i64)
// RACES-DAG:   func.func private @tm_rt_gpu_emulation_access(i64, i64, i64, i32)
// RACES-DAG:   func.func private @tm_rt_gpu_emulation_barrier()
// RACES-DAG:   func.func private @tm_rt_gpu_emulation_launch_end()
// RACES-LABEL: func.func @reverse_in_blocks
// RACES-SAME:      (%[[M:.*]]: memref<60xf32>)
// RACES:         call @tm_rt_gpu_emulation_launch_begin(
// RACES:         %[[GLOBAL_READ:.*]] = arith.constant 0 : i32
// RACES:         func.call @tm_rt_gpu_emulation_access(%{{.*}}, %{{.*}}, %{{.*}}, %[[GLOBAL_READ]])
// RACES-NEXT:    memref.load %[[M]]
// RACES:         %[[SHARED_WRITE:.*]] = arith.constant 3 : i32
// RACES:         func.call @tm_rt_gpu_emulation_access(%{{.*}}, %{{.*}}, %{{.*}}, %[[SHARED_WRITE]])
// RACES-NEXT:    memref.store
// RACES:         func.call @tm_rt_gpu_emulation_barrier()
// RACES:         %[[SHARED_READ:.*]] = arith.constant 2 : i32
// RACES:         func.call @tm_rt_gpu_emulation_access(%{{.*}}, %{{.*}}, %{{.*}}, %[[SHARED_READ]])
// RACES:         %[[GLOBAL_WRITE:.*]] = arith.constant 1 : i32
// RACES:         func.call @tm_rt_gpu_emulation_access(%{{.*}}, %{{.*}}, %{{.*}}, %[[GLOBAL_WRITE]])
// RACES-NEXT:    memref.store %{{.*}}, %[[M]]
// RACES:         call @tm_rt_gpu_emulation_launch_end()
// RACES-NOT:     gpu.
// RACES:         return
func.func @reverse_in_blocks(%m: memref<60xf32>) {
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c31 = arith.constant 31 : index
  %c32 = arith.constant 32 : index
  %c60 = arith.constant 60 : index
  gpu.launch blocks(%bx, %by, %bz) in (%gx = %c2, %gy = %c1, %gz = %c1)
             threads(%tx, %ty, %tz) in (%sx = %c32, %sy = %c1, %sz = %c1)
             workgroup(%w : memref<32xf32, #gpu.address_space<workgroup>>) {
    %base = arith.muli %bx, %c32 : index
    %i = arith.addi %base, %tx : index
    %inside = arith.cmpi ult, %i, %c60 : index
    scf.if %inside {
      %v = memref.load %m[%i] : memref<60xf32>
      memref.store %v, %w[%tx] : memref<32xf32, #gpu.address_space<workgroup>>
    }
    gpu.barrier
    %j = arith.subi %c31, %tx : index
    %u = memref.load %w[%j] : memref<32xf32, #gpu.address_space<workgroup>>
    scf.if %inside {
      memref.store %u, %m[%i] : memref<60xf32>
    }
    gpu.terminator
  }
  return
}
