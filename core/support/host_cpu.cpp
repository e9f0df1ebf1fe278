#include "core/support/host_cpu.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "core/support/fnv.h"
#include "core/support/fork_safe_once.h"

namespace tinymlir {
namespace {

struct Feature {
  const char *name;      // LLVM's, which is also GCC's for these
  const char *needs;     // earlier entries this one cannot be used without, space-separated
  bool present;          // on this CPU, and not excluded by TINYMLIR_CPU_EXCLUDE
};

// TINYMLIR_CPU_EXCLUDE, read once: the extensions named there, comma-separated, and the
// first name that is not one of Features(), if any.
struct Exclusion {
  std::string setting;  // the variable's value
  std::vector<std::string> names;
  std::string unknown;
};

bool Known(const std::string &name);

ForkSafeOnce<Exclusion> exclusion;

const Exclusion &ReadExclusion() {
  return exclusion.Get([] {
    Exclusion e;
    const char *value = std::getenv("TINYMLIR_CPU_EXCLUDE");
    e.setting = value ? value : "";
    const std::string &list = e.setting;
    size_t start = 0;
    while (start <= list.size()) {
      size_t end = list.find(',', start);
      if (end == std::string::npos) end = list.size();
      std::string name = list.substr(start, end - start);
      name.erase(0, name.find_first_not_of(' '));
      name.erase(name.find_last_not_of(' ') + 1);
      if (!name.empty()) {
        if (!Known(name) && e.unknown.empty()) e.unknown = name;
        e.names.push_back(name);
      }
      start = end + 1;
    }
    return e;
  });
}

ForkSafeOnce<std::vector<Feature>> probed;

// The instruction-set extensions LLVM may use in generated code (x86-64's baseline, SSE2,
// aside), probed once: what program files record and check, and what TINYMLIR_CPU_EXCLUDE
// may take away. Each entry comes after those it needs (`needs`, space-separated, as LLVM's
// implications: excluding avx2 excludes vaes, avxvnni and AVX-512 too). An extension LLVM
// would use that this table lacked would make program files load where their code cannot
// run (LLVM emitted GFNI's VGF2P8AFFINEQB for one of the C API fuzzer's programs on a Zen 5:
// a program file of it would have faulted on an AVX-512 CPU without GFNI), so it lists
// every extension of this family GCC's __builtin_cpu_supports knows (which takes a string
// literal only, hence one call per name). Probed once; Features() applies the exclusion.
const std::vector<Feature> &Probed() {
  return probed.Get([] {
    __builtin_cpu_init();
#define TM_FEATURE(name, needs) Feature{name, needs, __builtin_cpu_supports(name) != 0}
    return std::vector<Feature>{
        TM_FEATURE("sse3", ""),
        TM_FEATURE("ssse3", "sse3"),
        TM_FEATURE("sse4.1", "ssse3"),
        TM_FEATURE("sse4.2", "sse4.1"),
        TM_FEATURE("sse4a", "sse3"),
        TM_FEATURE("popcnt", ""),
        TM_FEATURE("lzcnt", ""),
        TM_FEATURE("movbe", ""),
        TM_FEATURE("bmi", ""),
        TM_FEATURE("bmi2", ""),
        TM_FEATURE("adx", ""),
        TM_FEATURE("aes", ""),
        TM_FEATURE("pclmul", ""),
        TM_FEATURE("sha", ""),
        TM_FEATURE("gfni", ""),
        TM_FEATURE("avx", "sse4.2"),
        TM_FEATURE("fma", "avx"),
        TM_FEATURE("f16c", "avx"),
        TM_FEATURE("fma4", "avx sse4a"),
        TM_FEATURE("xop", "fma4"),
        TM_FEATURE("avx2", "avx"),
        TM_FEATURE("vaes", "avx2 aes"),
        TM_FEATURE("vpclmulqdq", "avx pclmul"),
        TM_FEATURE("avxvnni", "avx2"),
        TM_FEATURE("avx512f", "avx2 fma f16c"),
        TM_FEATURE("avx512bw", "avx512f"),
        TM_FEATURE("avx512dq", "avx512f"),
        TM_FEATURE("avx512vl", "avx512f"),
        TM_FEATURE("avx512cd", "avx512f"),
        TM_FEATURE("avx512vnni", "avx512f"),
        TM_FEATURE("avx512ifma", "avx512f"),
        TM_FEATURE("avx512vpopcntdq", "avx512f"),
        TM_FEATURE("avx512vp2intersect", "avx512f"),
        TM_FEATURE("avx512bf16", "avx512bw"),
        TM_FEATURE("avx512vbmi", "avx512bw"),
        TM_FEATURE("avx512vbmi2", "avx512bw"),
        TM_FEATURE("avx512bitalg", "avx512bw"),
        TM_FEATURE("avx512fp16", "avx512bw"),
    };
#undef TM_FEATURE
  });
}

bool Known(const std::string &name) {
  for (const Feature &f : Probed())
    if (name == f.name) return true;
  return false;
}

ForkSafeOnce<std::vector<Feature>> features;

const std::vector<Feature> &Features() {
  return features.Get([] {
    std::vector<Feature> fs = Probed();
    const Exclusion &excluded = ReadExclusion();
    auto present = [&fs](const char *name) {
      for (const Feature &f : fs)
        if (std::string(name) == f.name) return f.present;
      return false;
    };
    for (Feature &f : fs) {
      for (const std::string &name : excluded.names)
        if (name == f.name) f.present = false;
      std::istringstream needs(f.needs);
      for (std::string need; needs >> need;)
        if (!present(need.c_str())) f.present = false;
    }
    return fs;
  });
}

// Vendor, family, model and stepping ("AuthenticAMD-25-1-1"), and the FNV hash of every
// CPUID word LLVM reads to choose the CPU name and features (leaves 1, 7.0, 7.1, 0xd.1,
// 0x80000001, 0x80000008 and XCR0, which says what state the OS saves).
std::string CpuIdentity(uint64_t *feature_hash) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  std::string words;
  auto add = [&words](unsigned w) { words.append(reinterpret_cast<const char *>(&w), sizeof w); };
  if (!__get_cpuid(0, &a, &b, &c, &d)) {
    *feature_hash = 0;
    return "unknown-cpu";
  }
  const unsigned max_leaf = a;
  char vendor[13] = {};
  std::memcpy(vendor, &b, 4);
  std::memcpy(vendor + 4, &d, 4);
  std::memcpy(vendor + 8, &c, 4);
  __get_cpuid(1, &a, &b, &c, &d);
  const unsigned base_family = (a >> 8) & 0xf, stepping = a & 0xf;
  const unsigned family = base_family == 0xf ? base_family + ((a >> 20) & 0xff) : base_family;
  const unsigned model = base_family >= 0x6 ? ((a >> 4) & 0xf) | (((a >> 16) & 0xf) << 4)
                                            : (a >> 4) & 0xf;
  const bool osxsave = (c >> 27) & 1;  // XCR0 is readable
  add(c), add(d);
  for (unsigned sub : {0u, 1u})
    if (max_leaf >= 7 && __get_cpuid_count(7, sub, &a, &b, &c, &d)) add(a), add(b), add(c), add(d);
  if (max_leaf >= 0xd && __get_cpuid_count(0xd, 1, &a, &b, &c, &d)) add(a);
  for (unsigned leaf : {0x80000001u, 0x80000008u})
    if (__get_cpuid(leaf, &a, &b, &c, &d)) add(b), add(c), add(d);
  if (osxsave) {
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    add(lo), add(hi);
  }
  *feature_hash = Fnv1a64(words);
  return std::string(vendor) + "-" + std::to_string(family) + "-" + std::to_string(model) + "-" +
         std::to_string(stepping);
}

}  // namespace

const std::string &CpuExclusionSetting() { return ReadExclusion().setting; }

static ForkSafeOnce<std::string> exclusion_error;

const std::string &CpuExclusionError() {
  return exclusion_error.Get([] {
    const std::string &unknown = ReadExclusion().unknown;
    if (unknown.empty()) return std::string();
    std::string names;
    for (const Feature &f : Features()) names += std::string(names.empty() ? "" : ", ") + f.name;
    return "TINYMLIR_CPU_EXCLUDE names '" + unknown + "', which is not an extension tinymlir " +
           "knows (" + names + ")";
  });
}

std::vector<std::string> CpuExcludedFeatures() {
  std::vector<std::string> out;
  const std::vector<Feature> &probed = Probed(), &features = Features();
  for (size_t i = 0; i < features.size(); ++i)
    if (probed[i].present && !features[i].present) out.push_back(features[i].name);
  return out;
}

bool CpuHas(const std::string &feature) {
  for (const Feature &f : Features())
    if (feature == f.name) return f.present;
  return true;
}

static ForkSafeOnce<std::string> host_description;

const std::string &HostDescription() {
  return host_description.Get([] {
    uint64_t hash = 0;
    std::string text = "x86_64-linux-gnu " + CpuIdentity(&hash) + " ";
    for (const Feature &f : Features())
      text += std::string(&f == &Features().front() ? "" : ",") + (f.present ? "+" : "-") + f.name;
    return text + " cpuid " + Hex64(hash);
  });
}

Status CheckHostDescription(const std::string &description) {
  std::istringstream words(description);
  std::string triple, cpu, features;
  words >> triple >> cpu >> features;
  if (triple.compare(0, 7, "x86_64-") != 0)
    return Unsupported("the program was compiled for " + triple + "; this is x86-64");
  std::string missing;
  std::istringstream list(features);
  for (std::string f; std::getline(list, f, ',');)
    if (f.size() > 1 && f[0] == '+' && !CpuHas(f.substr(1)))
      missing += (missing.empty() ? "" : ", ") + f.substr(1);
  if (missing.empty()) return Status::Ok();
  const std::string &excluded = CpuExclusionSetting();
  return Unsupported("the program was compiled for a CPU (" + cpu + ") with " + missing +
                     ", which this CPU lacks" +
                     (excluded.empty() ? "" : " (TINYMLIR_CPU_EXCLUDE=" + excluded + ")"));
}

}  // namespace tinymlir
