#!/usr/bin/env bash
# The layers of docs/ARCHITECTURE.md, checked on the sources: each folder includes only
# what the layer below it publishes. Prints every violation; fails if there is one.
set -u
cd "$(dirname "$0")/../.."
status=0

# violations PATTERN DESCRIPTION PATHS...: project includes matching PATTERN in PATHS.
violations() {
  local pattern=$1 what=$2
  shift 2
  local found
  found=$(grep -rnE --include='*.h' --include='*.hpp' --include='*.cpp' --include='*.c' \
    --include='*.i' "^\s*#\s*include\s*[\"<]($pattern)" "$@" 2>/dev/null)
  if [ -n "$found" ]; then
    echo "layering: $what:"
    echo "$found" | sed 's/^/  /'
    status=1
  fi
}

# core is the compiler library: no C API, no application.
violations 'tinymlir/|capi/|gpt2/' "core/ includes the C API or the GPT-2 application" core
# The engine half of core (tinymlir_engine, all of libtinymlir_runtime.so) has no LLVM or
# MLIR, and nothing of the compiler half.
engine="core/trace core/engine core/cache/program_file.h core/cache/program_file.cpp
  core/target/cpu/gemv_kernels.h core/target/cpu/gemv_kernels.cpp core/target/cpu/worker_pool.h
  core/target/cpu/half_convert.h core/target/cpu/half_convert.cpp core/target/cpu/half_matmul.h
  core/target/cpu/half_matmul.cpp core/target/cpu/kernel_times.h core/target/cpu/kernel_times.cpp
  core/target/cpu/parallel_for.h core/target/cpu/parallel_for.cpp
  core/target/cpu/worker_pool.cpp core/target/cpu/runtime_symbols.h
  core/target/cpu/runtime_symbols.cpp core/support/status.h core/support/build_id.h
  core/support/build_id.cpp core/support/host_cpu.h core/support/host_cpu.cpp
  core/support/file_io.h core/support/file_io.cpp core/support/fork_safe_mutex.h
  core/support/fork_safe_mutex.cpp core/support/fnv.h core/support/byte_io.h
  core/target/gpu/cuda_driver.h core/target/gpu/cuda_driver.cpp core/target/gpu/gpu_runtime.h
  core/target/gpu/gpu_runtime.cpp core/target/gpu/gpu_symbols.h core/target/gpu/gpu_symbols.cpp
  core/target/gpu/emulation_runtime.h core/target/gpu/emulation_runtime.cpp"
# shellcheck disable=SC2086
violations 'llvm/|mlir/|core/builder|core/passes|core/target/compile|core/target/native_compiler|core/target/gpu/gpu_lowering|core/target/cpu/native_object|core/cache/(program_cache|disk_cache)' \
  "the engine (libtinymlir_runtime.so) includes LLVM, MLIR or the compiler" $engine
violations 'capi/src/handles|core/target/compile\.h|core/cache/program_cache' \
  "capi/src/program_run.cpp (in the runtime library) includes the compiler" capi/src/program_run.cpp
# libtinymlir.so links no LLVM: its compile driver (caches, option checks, the compiler
# process and its messages, loading the compiler library), the compiler process's own
# executable and the C boundary include nothing of the compiler library's half.
compiler_half='llvm/|mlir/|core/builder|core/passes|core/target/native_compiler|core/target/gpu/gpu_lowering|core/target/cpu/native_object'
driver="core/cache/program_cache.h core/cache/program_cache.cpp core/cache/disk_cache.h
  core/cache/disk_cache.cpp core/target/compile.h core/target/compile.cpp
  core/target/compiler_library.h core/target/compiler_library.cpp
  core/target/compiler_process.h core/target/compiler_process.cpp
  core/target/compiler_protocol.h core/target/compiler_protocol.cpp
  core/target/compiler_process_main.cpp"
# shellcheck disable=SC2086
violations "$compiler_half" "the compile driver (libtinymlir.so, no LLVM) includes the compiler" $driver
violations "$compiler_half" "capi/ (libtinymlir.so, no LLVM) includes the compiler" capi
# The GPT-2 application stands on the public headers only.
violations 'core/|capi/' "gpt2/ reaches past the public headers" gpt2
# The C boundary converts to core; it does not know the application.
violations 'gpt2/' "capi/ includes the GPT-2 application" capi
# Programs and bindings use the public headers (the profiler also uses the application's
# own program definitions, gpt2/src/programs.h, so that there is one GPT-2).
violations 'core/|capi/src' "a program or binding includes library internals" cli bench examples bindings
violations 'gpt2/' "a program or binding includes the application's internals" cli examples bindings

[ $status -eq 0 ] && echo "layering: ok (core <- capi; public headers <- gpt2, cli, bench, examples, bindings)"
exit $status
