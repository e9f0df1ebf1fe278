#include "core/engine/program.h"

namespace tinymlir {

Status Program::StageText(Stage stage, std::string *out) {
  const int index = static_cast<int>(stage);
  if (index < 0 || index >= kNumStages)
    return InvalidArgument("unknown stage " + std::to_string(index));
  if (stage == Stage::kAssembly && stages[index].empty()) {
    std::lock_guard<std::mutex> lock(assembly_mutex_);
    if (printed_assembly_.empty())
      return Unsupported("a linked program keeps no assembly (only libtinymlir.so's compiler "
                         "prints it, from the LLVM IR stage, which shows the code it runs)");
    *out = printed_assembly_;
    return Status::Ok();
  }
  if (stages[index].empty())
    return Unsupported("stage " + std::to_string(index) + " was not produced for this program");
  *out = stages[index];
  return Status::Ok();
}

void Program::KeepAssembly(const std::string &text) {
  std::lock_guard<std::mutex> lock(assembly_mutex_);
  if (printed_assembly_.empty()) printed_assembly_ = text;
}

}  // namespace tinymlir
