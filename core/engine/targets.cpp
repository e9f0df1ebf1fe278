#include "core/engine/targets.h"

#include <cstring>

#include "core/runtime/device.h"
#include "core/runtime/kernel_times.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {

// Each target's run side (core/targets/<name>/run) defines <Name>Target().
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) const Target &Name##Target();
#include "core/contract/targets.def"
#undef TM_TARGET

namespace {

ForkSafeOnce<const Target *const *> targets;

const Target *const *Targets() {
  return targets.Get([] {
    auto *list = new const Target *[kNumTargetKinds];
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) list[c_value] = &Name##Target();
#include "core/contract/targets.def"
#undef TM_TARGET
    return list;
  });
}

// The first error of an environment-set target option, read once.
ForkSafeOnce<std::string> settings_error;

}  // namespace

TargetList AllTargets() { return {Targets(), static_cast<size_t>(kNumTargetKinds)}; }

bool IsTargetKind(int value) { return value >= 0 && value < kNumTargetKinds; }

const Target &TargetOf(TargetKind kind) { return *Targets()[static_cast<int>(kind)]; }

const Target *FindTarget(const std::string &name) {
  for (const Target *t : AllTargets())
    if (name == t->name()) return t;
  return nullptr;
}

const Device *FindDevice(const std::string &name) {
  for (const Target *t : AllTargets())
    for (const Device *d : t->devices())
      if (name == d->name()) return d;
  return nullptr;
}

std::vector<std::string> AllDeviceNames() {
  std::vector<std::string> names;
  for (const Target *t : AllTargets())
    for (const Device *d : t->devices()) names.push_back(d->name());
  return names;
}

std::vector<std::string> DeviceNamesOf(TargetKind target) {
  std::vector<std::string> names;
  for (const Device *d : TargetOf(target).devices()) names.push_back(d->name());
  return names;
}

std::vector<std::string> DeviceSymbolNames(const std::string &device) {
  std::vector<std::string> names;
  if (const Device *d = FindDevice(device))
    for (const auto &entry : d->symbols()) names.push_back(entry.first);
  return names;
}

bool DeviceLinks(const char *symbol, const char *device) {
  const Device *d = FindDevice(device);
  return d && d->symbols().count(symbol) > 0;
}

const std::string &SettingsError() {
  return settings_error.Get([] {
    if (!EnvironmentError().empty()) return EnvironmentError();
    for (const Target *t : AllTargets())
      for (const OptionField &f : t->options()) {
        if (!f.read_environment) continue;
        std::string error;
        f.read_environment(&error);
        if (!error.empty()) return error;
      }
    return std::string();
  });
}

std::vector<EnvironmentVariable> AllEnvironmentVariables() {
  std::vector<EnvironmentVariable> all(EnvironmentVariables().begin(), EnvironmentVariables().end());
  for (const Target *t : AllTargets())
    for (const OptionField &f : t->options())
      if (f.environment)
        all.push_back({f.environment, EnvironmentVariable::kChangesCode, f.environment_example});
  return all;
}

Status CompleteCompileOptions(CompileOptions *options) {
  for (const CommonOptionField &f : CommonOptionFields())
    TM_RETURN_IF_ERROR(CheckOptionValue(f.field, f.get(*options)));
  const Target &target = TargetOf(options->target);
  for (const auto &[name, value] : options->target_options) {
    const OptionField *field = nullptr;
    for (const OptionField &f : target.options())
      if (name == f.name) field = &f;
    if (!field)
      return InvalidArgument(name + " is not an option of the " + target.name() + " target");
    TM_RETURN_IF_ERROR(CheckOptionValue(*field, value));
  }
  CompileOptions completed = *options;
  completed.target_options.clear();
  for (const OptionField &f : target.options()) {
    int value = options->Option(f.name, f.default_value);
    if (f.read_environment) {
      std::string error;
      value = f.read_environment(&error);
      if (!error.empty()) return InvalidArgument(error);
    }
    completed.target_options.emplace_back(f.name, value);
  }
  *options = std::move(completed);
  return Status::Ok();
}

Status AllocateOnDevice(TargetKind target, uint64_t bytes, void **out) {
  return (*TargetOf(target).devices().begin())->Allocate(bytes, out);
}

void FreeOnDevice(TargetKind target, void *block) {
  (*TargetOf(target).devices().begin())->Free(block);
}

Status PrefetchOnDevice(TargetKind target, const void *block, uint64_t bytes) {
  return (*TargetOf(target).devices().begin())->Prefetch(block, bytes);
}

void EnableKernelTiming(bool on) { SetKernelTiming(on); }

KernelTimeTotals ReadKernelTimeTotals() {
  const KernelTimes k = ReadKernelTimes();
  auto at = [](KernelClass c) { return static_cast<int>(c); };
  KernelTimeTotals t;
  t.gemv_calls = k.calls[at(KernelClass::kGemv)];
  t.gemv_seconds = k.seconds[at(KernelClass::kGemv)];
  t.blas_calls = k.calls[at(KernelClass::kBlas)];
  t.blas_seconds = k.seconds[at(KernelClass::kBlas)];
  t.pool_waits = k.calls[at(KernelClass::kPoolWait)];
  t.pool_wait_seconds = k.seconds[at(KernelClass::kPoolWait)];
  return t;
}

}  // namespace tinymlir
