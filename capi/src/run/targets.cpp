// The targets: tm_target_count, tm_target_get_info, tm_target_get_device_counters,
// tm_target_from_name, tm_target_check, answered by the target registry
// (core/engine/targets.h). Built into both libtinymlir.so and libtinymlir_runtime.so.
#include <string>

#include "capi/src/run/errors.h"
#include "core/engine/targets.h"

using tm_capi::Fail;
using tm_capi::Guard;

namespace {

// The targets there are, for messages: "0 (cpu), 1 (gpu)".
std::string TargetList() {
  std::string list;
  for (const tinymlir::Target *t : tinymlir::AllTargets())
    list += (list.empty() ? "" : ", ") + std::to_string(static_cast<int>(t->kind())) + " (" +
            t->name() + ")";
  return list;
}

tinymlir::Status CheckTarget(const char *fn, tm_target target) {
  if (tinymlir::IsTargetKind(target)) return tinymlir::Status::Ok();
  return tinymlir::InvalidArgument(std::string(fn) + ": no target " +
                                   std::to_string(static_cast<int>(target)) +
                                   " in this library (it has " + TargetList() + ")");
}

}  // namespace

extern "C" {

TM_API int32_t tm_target_count(void) { return static_cast<int32_t>(tinymlir::AllTargets().size()); }

TM_API tm_status tm_target_get_info(tm_target target, tm_target_info *info) {
  constexpr const char *fn = "tm_target_get_info";
  return Guard(nullptr, [&] {
    TM_RETURN_IF_ERROR(CheckTarget(fn, target));
    const tinymlir::Target &t = tinymlir::TargetOf(static_cast<tinymlir::TargetKind>(target));
    const tinymlir::TargetTraits traits = t.traits();
    tm_target_info value = {};
    value.struct_size = sizeof value;
    value.name = t.name();
    value.host_memory = traits.host_memory ? 1 : 0;
    value.weight_dtypes = traits.weight_dtypes;
    value.weights_transposed = traits.weights_transposed ? 1 : 0;
    return tinymlir::WriteVersionedStruct(fn, "info", value, TM_TARGET_INFO_SIZE_V1, info);
  });
}

TM_API tm_status tm_target_get_device_counters(tm_target target, tm_device_counters *counters) {
  constexpr const char *fn = "tm_target_get_device_counters";
  return Guard(nullptr, [&] {
    TM_RETURN_IF_ERROR(CheckTarget(fn, target));
    const tinymlir::DeviceCounters c =
        tinymlir::TargetOf(static_cast<tinymlir::TargetKind>(target)).Counters();
    tm_device_counters value = {};
    value.struct_size = sizeof value;
    value.graph_launches = c.graph_launches;
    value.kernel_launches = c.kernel_launches;
    value.host_syncs = c.host_syncs;
    value.allocations = c.allocations;
    value.bytes_to_device = c.bytes_to_device;
    value.bytes_from_device = c.bytes_from_device;
    return tinymlir::WriteVersionedStruct(fn, "counters", value, TM_DEVICE_COUNTERS_SIZE_V1,
                                          counters);
  });
}

TM_API tm_status tm_target_from_name(const char *name, tm_target *out) {
  if (!name || !out)
    return Fail(TM_ERROR_INVALID_ARGUMENT,
                std::string("tm_target_from_name: ") + (name ? "out" : "name") + " is NULL");
  const tinymlir::Target *t = tinymlir::FindTarget(name);
  if (!t) {
    std::string names;
    for (const tinymlir::Target *each : tinymlir::AllTargets())
      names += (names.empty() ? "'" : ", '") + std::string(each->name()) + "'";
    return Fail(TM_ERROR_INVALID_ARGUMENT, "tm_target_from_name: no target named '" +
                                               std::string(name) + "' (there are " + names + ")");
  }
  *out = static_cast<tm_target>(t->kind());
  return TM_OK;
}

TM_API tm_status tm_target_check(tm_target target) {
  return Guard(nullptr, [&] {
    TM_RETURN_IF_ERROR(CheckTarget("tm_target_check", target));
    return tinymlir::TargetOf(static_cast<tinymlir::TargetKind>(target)).CheckAvailable();
  });
}

}  // extern "C"
