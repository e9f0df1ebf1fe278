#include "core/engine/program.h"

namespace tinymlir {

Status Program::StageText(Stage stage, std::string *out) {
  const int index = static_cast<int>(stage);
  if (index < 0 || index >= kNumStages)
    return InvalidArgument("unknown stage " + std::to_string(index));
  if (stage == Stage::kAssembly) {
    std::lock_guard<std::mutex> lock(assembly_mutex_);
    if (stages[index].empty())
      return Unsupported("a linked program keeps no assembly (only libtinymlir.so's compiler "
                         "prints it, from the LLVM IR stage, which shows the code it runs)");
    *out = stages[index];
    return Status::Ok();
  }
  if (stages[index].empty())
    return Unsupported("stage " + std::to_string(index) + " was not produced for this program");
  *out = stages[index];
  return Status::Ok();
}

void Program::KeepAssembly(const std::string &text) {
  std::lock_guard<std::mutex> lock(assembly_mutex_);
  std::string &kept = stages[static_cast<int>(Stage::kAssembly)];
  if (kept.empty()) kept = text;
}

}  // namespace tinymlir
