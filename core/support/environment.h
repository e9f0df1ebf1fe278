// The environment variables libtinymlir reads, checked: a value the library cannot take
// fails every compile and program load with a message naming the variable, rather than
// being ignored (a setting that silently does nothing is an afternoon lost).
//
//   TINYMLIR_NUM_THREADS         a whole number >= 1: the CPU kernels' threads, at most
//                                the CPUs the process may run on (worker_pool.h)
//   TINYMLIR_COMPILE_IN_PROCESS  0 or 1: compile in the calling process (compile.h)
//   TINYMLIR_CPU_EXCLUDE         extension names, comma-separated (host_cpu.h)
//   TINYMLIR_PERF_MAP            0 or 1: name every loaded program's functions for Linux
//                                perf in /tmp/perf-PID.map (core/engine/perf_map.h)
//
// TINYMLIR_SOFTWARE_GPU_MEMORY (the software CUDA device's capacity) is read when the GPU's
// driver is first loaded; a value it cannot take is that load's error
// (core/targets/gpu/run/cuda_driver.h, which also reads the GPU target's TINYMLIR_CUDA_DRIVER).
// TINYMLIR_GPU_MEMORY_BUDGET (a size) is read by the GPU's first allocation or call; a value
// it cannot take is their error (core/targets/gpu/run/device_buffers.h).
// TINYMLIR_CACHE_DIR takes any path or "off"; a folder the disk cache cannot use turns it
// off, and tm_cache_disk_message says why. Each variable is read once per process. A
// target may read variables of its own, for options it takes from the environment
// (OptionField::environment: TINYMLIR_GPU_EMULATE); core/engine/targets.h lists them all.
#pragma once

#include <cstddef>
#include <string>

namespace tinymlir {

// Every variable the library reads, once (the list above as data): what tests walk to show
// that each one that changes compiled code reaches the caches' keys, and that no other does.
struct EnvironmentVariable {
  enum Effect {
    kChangesCode,  // part of every program's key (the CPU compiled for)
    kSameCode,     // how the work is done, never what is compiled
    kCacheFolder,  // where the disk cache is (its key is per folder)
  };
  const char *name;
  Effect effect;
  const char *example;  // a valid value other than the default, for tests
};
struct EnvironmentVariableList {
  const EnvironmentVariable *first;
  size_t count;
  const EnvironmentVariable *begin() const { return first; }
  const EnvironmentVariable *end() const { return first + count; }
};
EnvironmentVariableList EnvironmentVariables();

// The first variable above whose value the library cannot take, as a message naming the
// variable, the value and what it takes; empty when all are fine.
const std::string &EnvironmentError();

// TINYMLIR_NUM_THREADS; 0 when it is unset (or not a count: EnvironmentError says so).
int ThreadCountSetting();

// TINYMLIR_COMPILE_IN_PROCESS is 1.
bool CompileInProcessSetting();

// TINYMLIR_PERF_MAP is 1.
bool PerfMapSetting();

}  // namespace tinymlir
