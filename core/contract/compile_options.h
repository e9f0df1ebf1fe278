// What a program is compiled for: the target and the options of one tm_compile. The driver
// checks and completes them (core/engine/targets.h: CompleteCompileOptions), keys the caches
// on their encoding, and sends them to the compiler, whose target lowering reads them.
//
// Options are of two kinds: the ones every target has (target, optimize, opt_level:
// CommonOptionFields) and a target's own, declared by its schema (Target::options(),
// core/contract/target.h) and held here by name.
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "core/support/status.h"

namespace tinymlir {

// The targets of core/contract/targets.def (values equal the C API's tm_target).
enum class TargetKind : int {
#define TM_TARGET(Name, C_ENUMERATOR, c_value, name) k##Name = c_value,
#include "core/contract/targets.def"
#undef TM_TARGET
};
inline constexpr int kNumTargetKinds = 0
#define TM_TARGET(Name, ...) +1
#include "core/contract/targets.def"
#undef TM_TARGET
    ;
// The target's name ("cpu", ...), or NULL for a value that is none.
const char *TargetKindName(TargetKind kind);

// One compile option: its name (in cache keys, manifests, the compiler process's messages
// and error messages), its valid range as integers, its default, a second valid value
// (which compiles: for tests), and, for an option the environment sets rather than callers,
// the variable and its reader.
struct OptionField {
  const char *name;
  int min, max;
  int default_value;
  int other;
  const char *range;  // the range in words, for messages
  // Set from this environment variable, never by callers (NULL: callers set it).
  const char *environment = nullptr;
  // The variable's value as the option's (read once per process); a value it cannot take
  // sets *error to a message naming the variable, the value and what it takes.
  int (*read_environment)(std::string *error) = nullptr;
  const char *environment_example = nullptr;  // a valid value other than the default
};
struct OptionFieldList {
  const OptionField *first;
  size_t count;
  const OptionField *begin() const { return first; }
  const OptionField *end() const { return first + count; }
  size_t size() const { return count; }
};

struct CompileOptions {
  TargetKind target = TargetKind::kCpu;
  bool optimize = true;
  int opt_level = 3;
  // The target's own options, by name, in its schema's order once completed.
  std::vector<std::pair<std::string, int>> target_options;

  // The value of target option `name`; `fallback` when it is not set (completed options
  // have every field of their target's schema).
  int Option(const std::string &name, int fallback = 0) const;
  bool HasOption(const std::string &name) const;
  void SetOption(const std::string &name, int value);
};

// The options every target has, in the order they are encoded: target, optimize, opt_level.
struct CommonOptionField {
  OptionField field;
  int (*get)(const CompileOptions &);
  void (*set)(CompileOptions *, int);
};
struct CommonOptionFieldList {
  const CommonOptionField *first;
  size_t count;
  const CommonOptionField *begin() const { return first; }
  const CommonOptionField *end() const { return first + count; }
};
CommonOptionFieldList CommonOptionFields();

// `value` checked against `field`'s range; a failure names the field and its range.
Status CheckOptionValue(const OptionField &field, int value);

// Every field as "name=value", space-separated: the common ones, then the target's in its
// schema's order. The options' one encoding, in memory cache keys, disk cache keys and
// manifests, and compile requests.
std::string EncodeCompileOptions(const CompileOptions &options);
// The inverse: the common fields required and range-checked, every other word a target
// option (checked against its target's schema by CompleteCompileOptions).
Status DecodeCompileOptions(const std::string &text, CompileOptions *options);

}  // namespace tinymlir
