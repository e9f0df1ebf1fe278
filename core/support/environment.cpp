#include "core/support/environment.h"

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>

#include "core/support/fork_safe_once.h"
#include "core/support/host_cpu.h"

namespace tinymlir {
namespace {

struct Settings {
  int threads = 0;
  bool compile_in_process = false;
  bool perf_map = false;
  std::string error;
};

ForkSafeOnce<Settings> settings;
ForkSafeOnce<std::string> environment_error;

// A 0/1 switch: 1 turns it on; 0 or empty leaves it off; anything else is refused, with what
// the two values mean (the first bad variable's message is the one kept).
void ReadSwitch(const char *name, const char *meaning, bool *on, std::string *error) {
  const char *value = std::getenv(name);
  if (!value) return;
  if (std::strcmp(value, "1") == 0)
    *on = true;
  else if (std::strcmp(value, "0") != 0 && *value != '\0' && error->empty())
    *error = std::string(name) + " is '" + value + "': it takes " + meaning;
}

const Settings &Read() {
  return settings.Get([] {
    Settings s;
    if (const char *value = std::getenv("TINYMLIR_NUM_THREADS")) {
      char *end = nullptr;
      errno = 0;
      const long n = std::strtol(value, &end, 10);
      const bool digits = *value >= '0' && *value <= '9';
      if (digits && end != value && *end == '\0' && errno == 0 && n >= 1 && n <= INT_MAX)
        s.threads = static_cast<int>(n);
      else if (s.error.empty())
        s.error = "TINYMLIR_NUM_THREADS is '" + std::string(value) +
                  "': it takes a whole number of threads, 1 or more (unset it for one per CPU "
                  "this process may run on)";
    }
    ReadSwitch("TINYMLIR_COMPILE_IN_PROCESS",
               "1 (compile in this process) or 0 (in a compiler process, the default)",
               &s.compile_in_process, &s.error);
    ReadSwitch("TINYMLIR_PERF_MAP",
               "1 (name the programs' functions in /tmp/perf-PID.map for perf) or 0 (do not, "
               "the default)",
               &s.perf_map, &s.error);
    return s;
  });
}

constexpr EnvironmentVariable kVariables[] = {
    {"TINYMLIR_NUM_THREADS", EnvironmentVariable::kSameCode, "1"},
    {"TINYMLIR_COMPILE_IN_PROCESS", EnvironmentVariable::kSameCode, "1"},
    {"TINYMLIR_CPU_EXCLUDE", EnvironmentVariable::kChangesCode, "avx2,fma,f16c"},
    {"TINYMLIR_EXPLAIN_CACHE", EnvironmentVariable::kSameCode, "1"},
    {"TINYMLIR_PERF_MAP", EnvironmentVariable::kSameCode, "1"},
    {"TINYMLIR_CACHE_DIR", EnvironmentVariable::kCacheFolder, "off"},
    {"TINYMLIR_SOFTWARE_GPU_MEMORY", EnvironmentVariable::kSameCode, "64M"},
    {"TINYMLIR_GPU_MEMORY_BUDGET", EnvironmentVariable::kSameCode, "2G"},
};

}  // namespace

EnvironmentVariableList EnvironmentVariables() {
  return {kVariables, sizeof kVariables / sizeof kVariables[0]};
}

const std::string &EnvironmentError() {
  return environment_error.Get(
      [] { return !CpuExclusionError().empty() ? CpuExclusionError() : Read().error; });
}

int ThreadCountSetting() { return Read().threads; }

bool CompileInProcessSetting() { return Read().compile_in_process; }

bool PerfMapSetting() { return Read().perf_map; }

}  // namespace tinymlir
