// The caches' key, option by option: every compile option (walked from the tables: the
// common fields and each target's schema) and every environment variable that changes
// compiled code (AllEnvironmentVariables) must make a program that differs only in it miss the memory cache
// and the disk cache, cold (nothing cached) and warm (the other program cached); a warm disk
// must give each program back as itself; and a variable that does not change the code must
// not cost a compile. A field added to a table is covered here at once.
//
// The program cache is used directly (core/driver), with the compiler library and the
// compiler process beside this executable (it is built into their folder). Environment
// variables are read once per process, so those cases run this executable again as a child
// with the variable set (main below).
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "core/driver/program_cache.h"
#include "core/contract/compile_options.h"
#include "core/engine/targets.h"
#include "core/support/environment.h"
#include "core/support/host_cpu.h"
#include "cuda_toolkit.h"

extern char **environ;

namespace tinymlir {
namespace {

// A small program whose code every option can change: a product (BLAS or loops, GPU
// kernels and their tiles) and a transcendental (approximated, fused). Without the CUDA
// toolkit's libdevice, GPU kernels cannot call tanh (the compile is refused, naming it), so
// there the transcendental is a negation: the keys are what this file tests, and every
// option still enters them.
Trace SmallProgram() {
  static const bool has_libdevice = [] {
    const std::string missing = tmtest::MissingCudaToolkit({tmtest::CudaToolkitPart::kLibdevice});
    if (!missing.empty())
      std::printf("note: %s: the small program negates instead of taking tanh\n", missing.c_str());
    return missing.empty();
  }();
  Trace t("cache_key");
  ValueId a = 0, b = 0, p = 0, y = 0;
  EXPECT_TRUE(t.Input("in", DType::kF32, {8, 8}, &a).ok());
  EXPECT_TRUE(t.Input("in", DType::kF32, {8, 8}, &b).ok());
  EXPECT_TRUE(t.Matmul("matmul", a, b, &p).ok());
  EXPECT_TRUE(t.Unary(has_libdevice ? OpKind::kTanh : OpKind::kNeg, "tanh", p, &y).ok());
  EXPECT_TRUE(t.End("end", {y}).ok());
  return t;
}

std::string FreshDirectory(const std::string &name) {
  std::string dir = ::testing::TempDir() + "cache_key_" + name + "_XXXXXX";
  if (!mkdtemp(dir.data())) ADD_FAILURE() << "mkdtemp " << dir;
  return dir;
}

struct Lookup {
  bool memory_hit = false;
  bool from_disk = false;
  std::string options;  // the options line of the program's manifest
};

Lookup Get(ProgramCache &cache, const Trace &trace, const CompileOptions &options) {
  Lookup l;
  std::shared_ptr<Program> program;
  const Status s = cache.GetOrCompile(trace, options, &program, &l.memory_hit);
  EXPECT_TRUE(s.ok()) << s.message();
  if (!program) return l;
  l.from_disk = program->read_from_disk;
  const size_t at = program->manifest.find("\noptions ");
  if (at != std::string::npos)
    l.options = program->manifest.substr(at + 9, program->manifest.find('\n', at + 1) - at - 9);
  return l;
}

// Every option a caller sets, with another valid value: the common ones, and each
// target's own (its target chosen), as (name, base, variant).
struct OptionVariant {
  std::string name;
  CompileOptions base, variant;
};
std::vector<OptionVariant> OptionVariants() {
  std::vector<OptionVariant> out;
  const CompileOptions defaults;
  for (const CommonOptionField &f : CommonOptionFields()) {
    EXPECT_NE(f.field.other, f.get(defaults)) << f.field.name << ": other is the default";
    CompileOptions variant = defaults;
    f.set(&variant, f.field.other);
    out.push_back({f.field.name, defaults, variant});
  }
  for (const Target *target : AllTargets())
    for (const OptionField &f : target->options()) {
      if (f.environment) continue;  // set from a variable: the environment test below
      EXPECT_NE(f.other, f.default_value) << f.name << ": other is the default";
      CompileOptions base;
      base.target = target->kind();
      CompileOptions variant = base;
      variant.SetOption(f.name, f.other);
      out.push_back({f.name, base, variant});
    }
  return out;
}

TEST(CacheKey, EveryCompileOptionReachesTheMemoryAndDiskCaches) {
  const Trace trace = SmallProgram();
  int fields = 0;
  for (OptionVariant &v : OptionVariants()) {
    ++fields;
    SCOPED_TRACE(v.name);
    ASSERT_TRUE(CompleteCompileOptions(&v.base).ok());
    ASSERT_TRUE(CompleteCompileOptions(&v.variant).ok());
    const CompileOptions &base = v.base, &variant = v.variant;
    const std::string encoded = EncodeCompileOptions(variant);
    ASSERT_NE(encoded, EncodeCompileOptions(base));
    const std::string both = FreshDirectory(v.name);
    {  // Cold: nothing cached; then the base cached, in memory and on disk.
      ProgramCache cache;
      cache.ConfigureDisk(both, 0);
      Lookup first = Get(cache, trace, base);
      EXPECT_FALSE(first.memory_hit || first.from_disk);
      Lookup l = Get(cache, trace, variant);
      EXPECT_FALSE(l.memory_hit) << "the memory cache gave the base's program";
      EXPECT_FALSE(l.from_disk) << "the disk cache gave the base's entry";
      EXPECT_EQ(l.options, encoded);
      EXPECT_TRUE(Get(cache, trace, variant).memory_hit) << "the key is not stable";
    }
    {  // Warm: a new memory cache over a disk holding both; each comes back as itself.
      ProgramCache cache;
      cache.ConfigureDisk(both, 0);
      Lookup l = Get(cache, trace, variant);
      EXPECT_TRUE(!l.memory_hit && l.from_disk);
      EXPECT_EQ(l.options, encoded);
      Lookup b = Get(cache, trace, base);
      EXPECT_TRUE(!b.memory_hit && b.from_disk);
      EXPECT_EQ(b.options, EncodeCompileOptions(base));
    }
    const std::string base_only = FreshDirectory(v.name + "_base");
    {  // Warm with only the base's entry on disk: the variant is compiled, not served it.
      ProgramCache cache;
      cache.ConfigureDisk(base_only, 0);
      Get(cache, trace, base);
    }
    {
      ProgramCache cache;
      cache.ConfigureDisk(base_only, 0);
      Lookup l = Get(cache, trace, variant);
      EXPECT_FALSE(l.memory_hit || l.from_disk) << "a disk entry of other options was used";
    }
  }
  EXPECT_GE(fields, 7) << "the option tables lost fields";
}

// ---- environment variables: each case in a child process -----------------------------

std::string self_path;

// Runs this executable as a child that looks the small program up for `target` in the disk
// cache `dir`, with `variable`=`value` (unset: value NULL) and every other variable of the
// table unset. Returns whether the child's program came from the disk cache.
bool ChildReadFromDisk(const std::string &dir, const char *target, const char *variable,
                       const char *value) {
  std::vector<std::string> env;
  for (char **e = environ; *e; ++e) {
    bool ours = false;
    for (const EnvironmentVariable &v : AllEnvironmentVariables())
      ours |= std::strncmp(*e, v.name, std::strlen(v.name)) == 0 && (*e)[std::strlen(v.name)] == '=';
    if (!ours) env.emplace_back(*e);
  }
  env.push_back("TINYMLIR_CACHE_DIR=off");  // the child configures its own folder
  if (variable && value) env.push_back(std::string(variable) + "=" + value);
  std::vector<char *> envp;
  for (std::string &e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::string out_path = ::testing::TempDir() + "cache_key_child_XXXXXX";
  const int out = mkstemp(out_path.data());
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out, STDOUT_FILENO);
  const char *argv[] = {self_path.c_str(), "--cache-key-child", dir.c_str(), target, nullptr};
  pid_t pid = 0;
  EXPECT_EQ(posix_spawn(&pid, self_path.c_str(), &actions, nullptr, const_cast<char **>(argv),
                        envp.data()),
            0);
  posix_spawn_file_actions_destroy(&actions);
  int status = 0;
  waitpid(pid, &status, 0);
  // With TINYMLIR_PERF_MAP=1 the child named its programs for perf (perf_map.h).
  unlink(("/tmp/perf-" + std::to_string(pid) + ".map").c_str());
  char text[256] = {};
  const ssize_t n = pread(out, text, sizeof text - 1, 0);
  close(out);
  unlink(out_path.c_str());
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0)
      << "child " << target << " " << (variable ? variable : "") << ": " << text;
  EXPECT_GT(n, 0);
  return std::strstr(text, "from_disk=1") != nullptr;
}

// The target whose option `variable` sets, or NULL (a variable of the whole library).
const Target *TargetOfVariable(const char *variable) {
  for (const Target *t : AllTargets())
    for (const OptionField &f : t->options())
      if (f.environment && std::strcmp(f.environment, variable) == 0) return t;
  return nullptr;
}

TEST(CacheKey, EveryVariableThatChangesCodeReachesTheDiskCacheAndNoOtherDoes) {
  int checked = 0;
  for (const EnvironmentVariable &v : AllEnvironmentVariables()) {
    if (v.effect == EnvironmentVariable::kCacheFolder) continue;  // it picks the folder
    if (std::strcmp(v.name, "TINYMLIR_CPU_EXCLUDE") == 0 && !CpuHas("avx2")) {
      std::printf("note: %s not checked: this CPU lacks avx2, which its example excludes\n", v.name);
      continue;
    }
    for (const Target *each : AllTargets()) {
      const char *target = each->name();
      SCOPED_TRACE(std::string(v.name) + " " + target);
      const std::string dir = FreshDirectory(std::string(v.name) + "_" + target);
      EXPECT_FALSE(ChildReadFromDisk(dir, target, nullptr, nullptr)) << "cold";
      EXPECT_TRUE(ChildReadFromDisk(dir, target, nullptr, nullptr)) << "warm";
      const bool hit = ChildReadFromDisk(dir, target, v.name, v.example);
      // A target's variable changes that target's code only.
      const Target *owner = TargetOfVariable(v.name);
      const bool changes =
          v.effect == EnvironmentVariable::kChangesCode && (!owner || owner == each);
      if (changes) {
        EXPECT_FALSE(hit) << v.name << "=" << v.example << " was served the other code";
        EXPECT_TRUE(ChildReadFromDisk(dir, target, v.name, v.example)) << "warm, with it set";
      } else {
        EXPECT_TRUE(hit) << v.name << "=" << v.example << " changed the key of the same code";
      }
      ++checked;
    }
  }
  EXPECT_GE(checked, 8);
}

// The child: one lookup in `dir` for `target`, printing where the program came from.
int ChildLookup(const char *dir, const char *target) {
  ProgramCache cache;
  cache.ConfigureDisk(dir, 0);
  CompileOptions options;
  options.target = FindTarget(target)->kind();
  std::shared_ptr<Program> program;
  bool hit = false;
  const Status s = cache.GetOrCompile(SmallProgram(), options, &program, &hit);
  if (!s.ok()) {
    std::printf("error: %s\n", s.message().c_str());
    return 1;
  }
  std::printf("from_disk=%d\n", program->read_from_disk ? 1 : 0);
  return 0;
}

}  // namespace
}  // namespace tinymlir

int main(int argc, char **argv) {
  if (argc == 4 && std::strcmp(argv[1], "--cache-key-child") == 0)
    return tinymlir::ChildLookup(argv[2], argv[3]);
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) tinymlir::self_path.assign(path, static_cast<size_t>(n));
  ::testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
