#include "core/targets/gpu/run/gpu_symbols.h"

#include "core/support/fork_safe_once.h"
#include "core/runtime/host_symbols.h"
#include "core/targets/gpu/run/gpu_runtime.h"
#include "core/targets/gpu/run/software_device/software_driver.h"

namespace tinymlir {

static ForkSafeOnce<const std::unordered_map<std::string, void *> *> gpu_runtime_symbols;

const std::unordered_map<std::string, void *> &GpuRuntimeSymbols() {
  return *gpu_runtime_symbols.Get([] {
    auto *table = new std::unordered_map<std::string, void *>(HostSymbols());
    // The host code's temporaries may be handed to a kernel: managed memory, under the same
    // guard as the CPU allocator (a failure unwinds the call with a status).
    (*table)["malloc"] = reinterpret_cast<void *>(&tm_rt_gpu_malloc);
    (*table)["aligned_alloc"] = reinterpret_cast<void *>(&tm_rt_gpu_aligned_alloc);
    (*table)["calloc"] = reinterpret_cast<void *>(&tm_rt_gpu_calloc);
    (*table)["free"] = reinterpret_cast<void *>(&tm_rt_gpu_free);
#define TM_GPU(name) (*table)[#name] = reinterpret_cast<void *>(&name)
    TM_GPU(tm_rt_gpu_malloc);  // also by their own names, for code that calls them directly
    TM_GPU(tm_rt_gpu_aligned_alloc);
    TM_GPU(tm_rt_gpu_calloc);
    TM_GPU(tm_rt_gpu_free);
#undef TM_GPU
#define TM_GPU(name) (*table)[#name] = reinterpret_cast<void *>(&name)
    TM_GPU(mgpuModuleLoad);
    TM_GPU(mgpuModuleLoadJIT);
    TM_GPU(mgpuModuleUnload);
    TM_GPU(mgpuModuleGetFunction);
    TM_GPU(mgpuStreamCreate);
    TM_GPU(mgpuStreamDestroy);
    TM_GPU(mgpuStreamSynchronize);
    TM_GPU(mgpuStreamWaitEvent);
    TM_GPU(mgpuEventCreate);
    TM_GPU(mgpuEventDestroy);
    TM_GPU(mgpuEventSynchronize);
    TM_GPU(mgpuEventRecord);
    TM_GPU(mgpuLaunchKernel);
    TM_GPU(mgpuMemAlloc);
    TM_GPU(mgpuMemFree);
    TM_GPU(mgpuMemcpy);
    TM_GPU(mgpuMemset32);
    TM_GPU(mgpuMemset16);
    TM_GPU(mgpuSetDefaultDevice);
    TM_GPU(tm_rt_gpu_software_register_kernel);
    TM_GPU(tm_rt_gpu_software_withdraw_kernel);
#undef TM_GPU
    return table;
  });
}

}  // namespace tinymlir
