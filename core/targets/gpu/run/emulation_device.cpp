#include "core/targets/gpu/run/emulation_device.h"

#include "core/runtime/host_symbols.h"
#include "core/support/fork_safe_once.h"
#include "core/targets/gpu/run/emulation_runtime.h"

namespace tinymlir {
namespace {

ForkSafeOnce<const Device::SymbolTable *> emulation_symbols;

}  // namespace

const GpuEmulationDevice kGpuEmulationDevice;

const Device::SymbolTable &GpuEmulationDevice::symbols() const {
  return *emulation_symbols.Get([] {
    auto *table = new SymbolTable(HostSymbols());
#define TM_RUNTIME_FUNCTION(name, parameters) (*table)[#name] = reinterpret_cast<void *>(&name);
#include "core/targets/gpu/run/emulation_functions.def"
#undef TM_RUNTIME_FUNCTION
    return table;
  });
}

}  // namespace tinymlir
