// The GPU target's run side as the registry sees it (NVIDIA, through the CUDA driver found
// at run time): its options (gpu_options.def), what its compiler refuses, the description
// its programs are keyed on, whether it can run here, and its two devices: the GPU
// (gpu_device.cpp) and, when TINYMLIR_GPU_EMULATE is set, the host running the kernels
// (emulation_device.cpp).
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <string>

#include "core/contract/target.h"
#include "core/runtime/device.h"
#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"
#include "core/targets/gpu/run/cuda_driver.h"
#include "core/targets/gpu/run/engine_counters.h"
#include "core/trace/dtype.h"

namespace tinymlir {

// The GPU and the emulation on the host (gpu_device.cpp).
DeviceList GpuDevices();

namespace {

// TINYMLIR_GPU_EMULATE as the gpu_emulate option: 0 (unset, empty or "0"), 1 ("1": the
// kernels run on the host, checked for races) or 2 ("fast": unchecked). Read once.
struct EmulateSetting {
  int value = 0;
  std::string error;
};
ForkSafeOnce<EmulateSetting> emulate_setting;

const EmulateSetting &Emulate() {
  return emulate_setting.Get([] {
    EmulateSetting s;
    const char *value = std::getenv("TINYMLIR_GPU_EMULATE");
    if (!value || *value == '\0' || std::strcmp(value, "0") == 0) return s;
    if (std::strcmp(value, "1") == 0)
      s.value = 1;
    else if (std::strcmp(value, "fast") == 0)
      s.value = 2;
    else
      s.error = "TINYMLIR_GPU_EMULATE is '" + std::string(value) +
                "': it takes 1 (GPU programs run their kernels on the CPU, checked for "
                "races), fast (on the CPU, unchecked) or 0 (on the GPU, the default)";
    return s;
  });
}

int ReadEmulate(std::string *error) {
  *error = Emulate().error;
  return Emulate().value;
}

// TINYMLIR_CUDA_DRIVER as the gpu_cpu_bodies option: 1 when it is "software" (any other value
// is the driver's to judge when it is loaded: cuda_driver.h).
int ReadCpuBodies(std::string *error) {
  error->clear();
  const char *value = std::getenv("TINYMLIR_CUDA_DRIVER");
  return value && std::strcmp(value, "software") == 0 ? 1 : 0;
}

constexpr OptionField kGpuOptions[] = {
#define TM_GPU_OPTION(Id, name, min, max, default_value, other, range) \
  {name, min, max, default_value, other, range},
#define TM_GPU_ENVIRONMENT_OPTION(Id, name, min, max, default_value, other, range, variable, \
                                  example)                                                  \
  {name, min, max, default_value, other, range, variable, &Read##Id, example},
#include "core/targets/gpu/run/gpu_options.def"
#undef TM_GPU_OPTION
};

const char *EmulationWords(int emulate) {
  return emulate == 1 ? " emulated race-checked" : emulate == 2 ? " emulated" : "";
}

class GpuTargetInfo final : public Target {
 public:
  constexpr GpuTargetInfo() = default;
  TargetKind kind() const override { return TargetKind::kGpu; }
  OptionFieldList options() const override {
    return {kGpuOptions, sizeof kGpuOptions / sizeof kGpuOptions[0]};
  }

  // q8_0 products run on the CPU target's kernels; this target has none (a dequantized f32
  // copy of every weight per call would defeat the point of 8 bits).
  Status Supports(const Trace &trace, const CompileOptions &) const override {
    for (size_t i = 0; i < trace.inputs().size(); ++i) {
      const TensorType &t = trace.node(trace.inputs()[i]).type;
      if (IsQuantized(t.dtype))
        return Unsupported("trace '" + trace.name() + "': input " + std::to_string(i) + " is " +
                           t.ToString() + "; q8_0 runs on the CPU target only (on the GPU, "
                           "use f16 or bf16 weights)");
    }
    return Status::Ok();
  }

  // "gpu sm_90 tile 16 ptx [emulated] host <the host's triple, cpu, features>": the host
  // runs the launching code (and, emulated, the kernels).
  std::string Describe(const CompileOptions &o) const override {
    return std::string(name()) + " sm_" + std::to_string(o.Option("gpu_sm")) + " tile " +
           std::to_string(o.Option("gpu_matmul_tile")) + (o.Option("gpu_cubin") ? " cubin" : " ptx") +
           EmulationWords(o.Option("gpu_emulate")) + " host " + HostDescription();
  }

  Status CheckRunsHere(const std::string &description) const override {
    std::istringstream words(description);
    std::string word;
    if (!(words >> word) || word != name())
      return Unsupported("the program is for another target ('" + description + "')");
    while (words >> word && word != "host") {
    }
    std::string host;
    std::getline(words >> std::ws, host);
    return CheckHostDescription(host);
  }

  Status CheckAvailable() const override {
    if (Emulate().value != 0) return Status::Ok();  // the kernels run on the host
    return gpu::MakeContextCurrent();
  }

  TargetTraits traits() const override {
    // Half weights are read as stored and widened to f32 in the product kernels.
    return {/*host_memory=*/false,
            (1u << static_cast<int>(DType::kF32)) | (1u << static_cast<int>(DType::kF16)) |
                (1u << static_cast<int>(DType::kBF16)),
            /*weights_transposed=*/false};
  }

  DeviceList devices() const override { return GpuDevices(); }

  // Emulated kernels run on the host, and read host memory.
  const Device &BufferDevice() const override {
    return *GpuDevices().first[Emulate().value != 0 ? 1 : 0];
  }

  DeviceCounters Counters() const override { return gpu::EngineCountersNow(); }
};

const GpuTargetInfo kGpuTarget;

}  // namespace

const Target &GpuTarget() { return kGpuTarget; }

}  // namespace tinymlir
