// The CPU target's run side: its description for the registry, and its one device, a host
// device (core/runtime/host_device.h) whose programs call the kernels of kernels.def.
#include <string>

#include "core/contract/target.h"
#include "core/runtime/host_device.h"
#include "core/runtime/host_symbols.h"
#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"
#include "core/targets/cpu/run/cpu_kernels.h"
#include "core/trace/dtype.h"

namespace tinymlir {
namespace {

// The host's functions and the kernels of kernels.def, by address.
ForkSafeOnce<const Device::SymbolTable *> cpu_symbols;

const Device::SymbolTable &CpuSymbols() {
  return *cpu_symbols.Get([] {
    auto *table = new Device::SymbolTable(HostSymbols());
#define TM_RUNTIME_FUNCTION(name, parameters) (*table)[#name] = reinterpret_cast<void *>(&name);
#include "core/targets/cpu/run/kernels.def"
#undef TM_RUNTIME_FUNCTION
    return table;
  });
}

class CpuDevice final : public HostDevice {
 public:
  constexpr CpuDevice() = default;
  const char *name() const override { return "cpu"; }
  const SymbolTable &symbols() const override { return CpuSymbols(); }
};

const CpuDevice kCpuDevice;
const Device *const kCpuDevices[] = {&kCpuDevice};

// The CPU target's own compile option: whether matmuls go to the runtime's products
// (core/targets/cpu/compile/blas_rewrite.h) or stay loops.
constexpr OptionField kCpuOptions[] = {
    {"use_blas", 0, 1, 1, 0, "0 or 1"},
};

constexpr uint32_t Bit(DType d) { return 1u << static_cast<int>(d); }

class CpuTargetInfo final : public Target {
 public:
  constexpr CpuTargetInfo() = default;
  TargetKind kind() const override { return TargetKind::kCpu; }
  OptionFieldList options() const override {
    return {kCpuOptions, sizeof kCpuOptions / sizeof kCpuOptions[0]};
  }
  Status Supports(const Trace &, const CompileOptions &) const override { return Status::Ok(); }
  std::string Describe(const CompileOptions &) const override {
    return std::string(name()) + " " + HostDescription();
  }
  Status CheckRunsHere(const std::string &description) const override {
    const std::string prefix = std::string(name()) + " ";
    if (description.compare(0, prefix.size(), prefix) != 0)
      return Unsupported("the program is for another target ('" + description + "')");
    return CheckHostDescription(description.substr(prefix.size()));
  }
  Status CheckAvailable() const override { return Status::Ok(); }
  TargetTraits traits() const override {
    return {/*host_memory=*/true,
            Bit(DType::kF32) | Bit(DType::kF16) | Bit(DType::kBF16) | Bit(DType::kQ8_0),
            /*weights_transposed=*/true};
  }
  DeviceList devices() const override { return {kCpuDevices, 1}; }
};

const CpuTargetInfo kCpuTarget;

}  // namespace

const Target &CpuTarget() { return kCpuTarget; }

}  // namespace tinymlir
