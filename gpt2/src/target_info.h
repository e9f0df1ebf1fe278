// The target a model's programs run on, as the C API describes it (tm_target_info): the
// model lays its weights out by it, and never asks which target it is.
#pragma once

#include <string>

#include "gpt2/src/status.h"
#include "tinymlir/tinymlir.h"

namespace tinymlir::gpt2 {

// `target`'s description, or TM_ERROR_INVALID_ARGUMENT naming the targets there are.
inline Status GetTargetInfo(tm_target target, tm_target_info *info) {
  info->struct_size = sizeof *info;
  return FromC(tm_target_get_info(target, info));
}

// "cpu", "gpu"; "target N" for a value that is none.
inline std::string TargetName(tm_target target) {
  tm_target_info info;
  if (GetTargetInfo(target, &info).ok()) return info.name;
  return "target " + std::to_string(static_cast<int>(target));
}

}  // namespace tinymlir::gpt2
