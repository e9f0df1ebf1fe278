#include "core/contract/compile_options.h"

#include <cstdlib>
#include <sstream>

namespace tinymlir {
namespace {

int Bit(bool b) { return b ? 1 : 0; }

constexpr CommonOptionField kCommonFields[] = {
    {{"target", 0, kNumTargetKinds - 1, 0, 1, "a target of this library (0: cpu)"},
     [](const CompileOptions &o) { return static_cast<int>(o.target); },
     [](CompileOptions *o, int v) { o->target = static_cast<TargetKind>(v); }},
    {{"optimize", 0, 1, 1, 0, "0 or 1"},
     [](const CompileOptions &o) { return Bit(o.optimize); },
     [](CompileOptions *o, int v) { o->optimize = v != 0; }},
    {{"opt_level", 0, 3, 3, 1, "0..3"},
     [](const CompileOptions &o) { return o.opt_level; },
     [](CompileOptions *o, int v) { o->opt_level = v; }},
};

}  // namespace

const char *TargetKindName(TargetKind kind) {
  switch (kind) {
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) \
    case TargetKind::k##Name: return name;
#include "core/contract/targets.def"
#undef TM_TARGET
  }
  return nullptr;
}

int CompileOptions::Option(const std::string &name, int fallback) const {
  for (const auto &[key, value] : target_options)
    if (key == name) return value;
  return fallback;
}

bool CompileOptions::HasOption(const std::string &name) const {
  for (const auto &entry : target_options)
    if (entry.first == name) return true;
  return false;
}

void CompileOptions::SetOption(const std::string &name, int value) {
  for (auto &[key, current] : target_options)
    if (key == name) {
      current = value;
      return;
    }
  target_options.emplace_back(name, value);
}

CommonOptionFieldList CommonOptionFields() {
  return {kCommonFields, sizeof kCommonFields / sizeof kCommonFields[0]};
}

Status CheckOptionValue(const OptionField &field, int value) {
  if (value < field.min || value > field.max)
    return InvalidArgument(std::string(field.name) + " must be " + field.range + ", got " +
                           std::to_string(value));
  return Status::Ok();
}

std::string EncodeCompileOptions(const CompileOptions &options) {
  std::string text;
  for (const CommonOptionField &f : CommonOptionFields())
    text += (text.empty() ? "" : " ") + std::string(f.field.name) + "=" +
            std::to_string(f.get(options));
  for (const auto &[name, value] : options.target_options)
    text += " " + name + "=" + std::to_string(value);
  return text;
}

Status DecodeCompileOptions(const std::string &text, CompileOptions *options) {
  std::istringstream words(text);
  CompileOptions decoded;
  auto read = [&text](const std::string &word, std::string *name, int *value) {
    const size_t eq = word.find('=');
    if (eq == std::string::npos || eq == 0)
      return InvalidArgument("compile options '" + text + "': " + word + " is not name=value");
    *name = word.substr(0, eq);
    char *end = nullptr;
    const long v = std::strtol(word.c_str() + eq + 1, &end, 10);
    if (*end != '\0' || end == word.c_str() + eq + 1 || v < -(1l << 30) || v > (1l << 30))
      return InvalidArgument("compile options '" + text + "': " + word + " is not a number");
    *value = static_cast<int>(v);
    return Status::Ok();
  };
  std::string word, name;
  int value = 0;
  for (const CommonOptionField &f : CommonOptionFields()) {
    if (!(words >> word)) return InvalidArgument("compile options '" + text + "' lack " + f.field.name);
    TM_RETURN_IF_ERROR(read(word, &name, &value));
    if (name != f.field.name)
      return InvalidArgument("compile options '" + text + "' lack " + f.field.name);
    TM_RETURN_IF_ERROR(CheckOptionValue(f.field, value));
    f.set(&decoded, value);
  }
  while (words >> word) {
    TM_RETURN_IF_ERROR(read(word, &name, &value));
    if (decoded.HasOption(name))
      return InvalidArgument("compile options '" + text + "': " + name + " twice");
    decoded.target_options.emplace_back(name, value);
  }
  *options = decoded;
  return Status::Ok();
}

}  // namespace tinymlir
