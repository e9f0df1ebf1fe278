// GPT-2 bundles: one exported program file per (kind, T, L) and a manifest.txt naming the
// model dimensions the programs are specialised to. Loading uses only tm_program_load, so
// this file is part of libtinymlir_runtime.so as well.
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpt2/src/program_source.h"

namespace tinymlir::gpt2 {
namespace {

// Format 2: the weights line (the matrices' dtype).
constexpr const char *kBundleHeader = "tinymlir gpt2 bundle 2\n";

std::string BundleFileName(const ProgramKey &key) {
  const auto &[kind, t, l] = key;
  return std::string(ProgramName(static_cast<ProgramKind>(kind))) + "_t" + std::to_string(t) +
         "_l" + std::to_string(l) + ".tmp";
}

const char *DtypeText(tm_dtype d) { return d == TM_F16 ? "f16" : d == TM_BF16 ? "bf16" : "f32"; }

// The dimensions (and the weight matrices' dtype) a bundle's programs are specialised to,
// as manifest.txt lines.
std::string BundleDimensions(const Gpt2Config &c) {
  char eps[64];
  std::snprintf(eps, sizeof eps, "%.9g", c.layer_norm_epsilon);
  return "n_embd " + std::to_string(c.n_embd) + "\nn_head " + std::to_string(c.n_head) +
         "\nn_inner " + std::to_string(c.n_inner) + "\nvocab_size " +
         std::to_string(c.vocab_size) + "\nn_ctx " + std::to_string(c.n_ctx) +
         "\nlayer_norm_epsilon " + eps + "\nweights " + DtypeText(c.matrices) +
         (c.projections_out_major ? " out-major" : "") + "\n";
}

// manifest.txt of the bundle in `dir` (at most 1 MiB of it).
Status ReadManifest(const std::string &dir, std::string *text) {
  const std::string path = dir + "/manifest.txt";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f) return IoError(path + ": cannot open (is " + dir + " a bundle?)");
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0 && text->size() < (1 << 20);)
    text->append(buf, n);
  std::fclose(f);
  return Status::Ok();
}

tm_target ManifestTarget(const std::string &text) {
  return text.find("\ntarget gpu\n") != std::string::npos ? TM_TARGET_GPU : TM_TARGET_CPU;
}

class BundleSource : public ProgramSource {
 public:
  BundleSource(std::string dir, tm_target target) : dir_(std::move(dir)), target_(target) {}

  Status Make(const std::vector<ProgramKey> &keys, tm_progress_callback progress, void *user,
              std::vector<ProgramHandle> *out, tm_model_stats *stats) override {
    out->clear();
    out->resize(keys.size());
    const int32_t total = static_cast<int32_t>(keys.size());
    for (int32_t i = 0; i < total; ++i) {  // loading is quick: no threads
      TM_RETURN_IF_ERROR(Load(keys[i], &(*out)[i]));
      stats->programs_from_disk += 1;
      if (progress) progress(user, i + 1, total);
    }
    return Status::Ok();
  }

  bool is_bundle() const override { return true; }
  tm_target target() const override { return target_; }

 private:
  Status Load(const ProgramKey &key, ProgramHandle *out) const {
    const std::string path = dir_ + "/" + BundleFileName(key);
    tm_status s = tm_program_load(path.c_str(), out->out());
    if (s == TM_ERROR_IO && access(path.c_str(), F_OK) != 0)
      return IoError("the bundle " + dir_ + " has no " + BundleFileName(key) +
                     " (compile the bundle again with tm_model_compile_bundle)");
    return FromC(s);
  }

  std::string dir_;
  tm_target target_;
};

}  // namespace

Status BundleChoices(const std::string &dir, tm_target *target, tm_dtype *weights) {
  std::string text;
  TM_RETURN_IF_ERROR(ReadManifest(dir, &text));
  *target = ManifestTarget(text);
  if (*weights == 0) {
    for (tm_dtype d : {TM_F32, TM_F16, TM_BF16})
      if (text.find(std::string("\nweights ") + DtypeText(d)) != std::string::npos) *weights = d;
  }
  return Status::Ok();
}

Status OpenBundle(const std::string &dir, const Gpt2Config &config,
                  std::unique_ptr<ProgramSource> *out) {
  std::string text;
  TM_RETURN_IF_ERROR(ReadManifest(dir, &text));
  const std::string want = kBundleHeader + BundleDimensions(config);
  if (text.compare(0, want.size(), want) != 0)
    return IoError(dir + "/manifest.txt: the bundle was compiled for another model, weight "
                   "dtype (options.weights) or format; this model needs:\n" + want +
                   "and the bundle is for:\n" + text.substr(0, std::min(text.find("target "), want.size() + 256)));
  *out = std::make_unique<BundleSource>(dir, ManifestTarget(text));
  return Status::Ok();
}

Status WriteBundle(const std::string &dir, const Gpt2Config &config, tm_target target,
                   const std::vector<ProgramKey> &keys,
                   const std::map<ProgramKey, ProgramHandle> &programs) {
  if (mkdir(dir.c_str(), 0755) != 0 && errno != EEXIST)
    return IoError(dir + ": cannot create: " + std::strerror(errno));
  std::string manifest = kBundleHeader + BundleDimensions(config) + "target " +
                         (target == TM_TARGET_GPU ? "gpu" : "cpu") + "\nprograms\n";
  for (const ProgramKey &key : keys) {
    const std::string name = BundleFileName(key);
    if (manifest.find("\n" + name + "\n") != std::string::npos) continue;
    TM_RETURN_IF_ERROR(FromC(tm_program_export(programs.at(key), (dir + "/" + name).c_str())));
    manifest += name + "\n";
  }
  const std::string path = dir + "/manifest.txt";
  FILE *f = std::fopen(path.c_str(), "wb");
  const bool written = f && std::fwrite(manifest.data(), 1, manifest.size(), f) == manifest.size();
  if (f && std::fclose(f) != 0) return IoError(path + ": cannot write");
  if (!written) return IoError(path + ": cannot write");
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
