#include "core/engine/program.h"

namespace tinymlir {

Status Program::StageText(tm_stage stage, std::string *out) {
  if (stage < TM_STAGE_TRACED || stage > TM_STAGE_ASSEMBLY)
    return InvalidArgument("tm_program_ir: unknown stage " +
                           std::to_string(static_cast<int>(stage)));
  if (stage == TM_STAGE_ASSEMBLY) {
    std::lock_guard<std::mutex> lock(assembly_mutex_);
    if (stages[stage].empty()) {
      if (!code) return Unsupported("tm_program_ir: this program has no native code");
      TM_RETURN_IF_ERROR(code->Assembly(&stages[stage]));
    }
  }
  if (stages[stage].empty())
    return Unsupported("tm_program_ir: stage " + std::to_string(static_cast<int>(stage)) +
                       " was not produced for this program");
  *out = stages[stage];
  return Status::Ok();
}

}  // namespace tinymlir
