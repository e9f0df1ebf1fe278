#include "core/compiler/passes/target_lowering.h"

namespace tinymlir {

// Each target's compile side (core/targets/<name>/compile) defines <Name>Lowering().
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) const TargetLowering &Name##Lowering();
#include "core/contract/targets.def"
#undef TM_TARGET

const TargetLowering &LoweringFor(TargetKind kind) {
  switch (kind) {
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) \
    case TargetKind::k##Name: return Name##Lowering();
#include "core/contract/targets.def"
#undef TM_TARGET
  }
  return CpuLowering();
}

}  // namespace tinymlir
