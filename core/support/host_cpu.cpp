#include "core/support/host_cpu.h"

#include <cpuid.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "core/support/fnv.h"

namespace tinymlir {
namespace {

struct Feature {
  const char *name;  // LLVM's, which is also GCC's for these
  bool present;
};

// The extensions compiled code may use that program files check, probed once.
// __builtin_cpu_supports takes a string literal only, hence one call per name.
const std::vector<Feature> &Features() {
  static const std::vector<Feature> features = [] {
    __builtin_cpu_init();
#define TM_FEATURE(name) Feature{name, __builtin_cpu_supports(name) != 0}
    return std::vector<Feature>{
        TM_FEATURE("sse3"),     TM_FEATURE("ssse3"),      TM_FEATURE("sse4.1"),
        TM_FEATURE("sse4.2"),   TM_FEATURE("popcnt"),     TM_FEATURE("avx"),
        TM_FEATURE("avx2"),     TM_FEATURE("fma"),        TM_FEATURE("bmi"),
        TM_FEATURE("bmi2"),     TM_FEATURE("f16c"),       TM_FEATURE("avx512f"),
        TM_FEATURE("avx512bw"), TM_FEATURE("avx512dq"),   TM_FEATURE("avx512vl"),
        TM_FEATURE("avx512cd"), TM_FEATURE("avx512vnni"), TM_FEATURE("avx512bf16"),
    };
#undef TM_FEATURE
  }();
  return features;
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

bool CpuHas(const std::string &feature) {
  for (const Feature &f : Features())
    if (feature == f.name) return f.present;
  return true;
}

const std::string &HostDescription() {
  static const std::string description = [] {
    uint64_t hash = 0;
    std::string text = "x86_64-linux-gnu " + CpuIdentity(&hash) + " ";
    for (const Feature &f : Features())
      text += std::string(&f == &Features().front() ? "" : ",") + (f.present ? "+" : "-") + f.name;
    return text + " cpuid " + Hex64(hash);
  }();
  return description;
}

}  // namespace tinymlir
