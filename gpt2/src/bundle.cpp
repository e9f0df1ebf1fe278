// GPT-2 bundles: one exported program file per (kind, T, L) and a manifest.txt naming the
// model dimensions the programs are specialised to. Loading uses only tm_program_load, so
// this file is part of libtinymlir_runtime.so as well.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>

#include "gpt2/src/bounded_input.h"
#include "gpt2/src/program_source.h"
#include "gpt2/src/target_info.h"

namespace tinymlir::gpt2 {
namespace {

// Format 2: the weights line (the matrices' dtype).
constexpr const char *kBundleHeader = "tinymlir gpt2 bundle 2\n";
constexpr const char *kBundleHeaderStart = "tinymlir gpt2 bundle ";  // of every format

std::string BundleFileName(const ProgramKey &key) {
  const auto &[kind, t, l] = key;
  return std::string(ProgramName(static_cast<ProgramKind>(kind))) + "_t" + std::to_string(t) +
         "_l" + std::to_string(l) + ".tmp";
}

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

// manifest.txt of the bundle in `dir`: a regular file of at most 1 MiB (a FIFO or a device
// is refused without blocking, as every file a model reads).
Status ReadManifest(const std::string &dir, std::string *text) {
  const std::string path = dir + "/manifest.txt";
  if (access(dir.c_str(), F_OK) != 0)
    return IoError("the bundle " + dir + " cannot be opened: " + std::strerror(errno));
  TM_RETURN_IF_ERROR(ReadRegularFile(path + ": ", path, 1 << 20, text));
  if (text->compare(0, std::strlen(kBundleHeaderStart), kBundleHeaderStart) != 0)
    return IoError(path + ": not the manifest of a tinymlir GPT-2 bundle (its first line is '" +
                   Excerpt(text->substr(0, text->find('\n')), 60) + "')");
  return Status::Ok();
}

// The first line of `text` that is not the same line of `want`, and that line of `want`;
// false when `text` begins with all of `want`.
bool FirstDifferentLine(const std::string &text, const std::string &want, std::string *got_line,
                        std::string *want_line) {
  size_t at = 0;
  while (at < want.size()) {
    const size_t end = want.find('\n', at);
    *want_line = want.substr(at, end - at);
    const size_t text_end = std::min(text.find('\n', at), text.size());
    *got_line = text.substr(at, text_end - at);
    if (*got_line != *want_line) return true;
    at = end + 1;
  }
  return false;
}

// The target a manifest's "target NAME" line names.
Status ManifestTarget(const std::string &dir, const std::string &text, tm_target *target) {
  const size_t at = text.find("\ntarget ");
  if (at == std::string::npos)
    return IoError(dir + "/manifest.txt: names no target (compile the bundle again with "
                   "tm_model_compile_bundle)");
  const std::string name = text.substr(at + 8, text.find('\n', at + 8) - at - 8);
  if (tm_target_from_name(name.c_str(), target) != TM_OK)
    return Unsupported(dir + "/manifest.txt: the bundle is for the target '" + name +
                       "', which this library does not have");
  return Status::Ok();
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
  bool Has(const ProgramKey &key) const override {
    return access((dir_ + "/" + BundleFileName(key)).c_str(), F_OK) == 0;
  }
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
  // The default target (0, the CPU) takes the bundle's; another request must match it. A
  // manifest without one is refused by OpenBundle, with the rest of what it lacks.
  tm_target compiled_for;
  if (!ManifestTarget(dir, text, &compiled_for).ok()) return Status::Ok();
  if (*target != 0 && *target != compiled_for)
    return InvalidArgument("options.target is " + TargetName(*target) + ", but the bundle " +
                           dir + " was compiled for " + TargetName(compiled_for));
  *target = compiled_for;
  if (*weights == 0) {
    for (tm_dtype d : {TM_F32, TM_F16, TM_BF16, TM_Q8_0})
      if (text.find(std::string("\nweights ") + DtypeText(d)) != std::string::npos) *weights = d;
  }
  return Status::Ok();
}

Status OpenBundle(const std::string &dir, const Gpt2Config &config,
                  std::unique_ptr<ProgramSource> *out) {
  std::string text;
  TM_RETURN_IF_ERROR(ReadManifest(dir, &text));
  const std::string want = kBundleHeader + BundleDimensions(config);
  const std::string path = dir + "/manifest.txt";
  std::string got_line, want_line;
  if (FirstDifferentLine(text, want, &got_line, &want_line)) {
    if (want_line.compare(0, std::strlen(kBundleHeaderStart), kBundleHeaderStart) == 0)
      return IoError(path + ": a bundle of another format ('" + Excerpt(got_line, 60) +
                     "'; this library reads '" + want_line +
                     "'): compile it again with tm_model_compile_bundle");
    return IoError(path +
                   ": the bundle was compiled for another model or weight dtype "
                   "(options.weights): its manifest says '" +
                   Excerpt(got_line, 60) + "' where this model needs '" + want_line + "'");
  }
  tm_target target;
  TM_RETURN_IF_ERROR(ManifestTarget(dir, text, &target));
  *out = std::make_unique<BundleSource>(dir, target);
  return Status::Ok();
}

Status PrepareBundleFolder(const std::string &dir) {
  if (dir.empty()) return InvalidArgument("the bundle folder is an empty path");
  if (mkdir(dir.c_str(), 0755) == 0) return Status::Ok();
  if (errno != EEXIST)
    return IoError(dir + ": cannot create the bundle folder: " + std::strerror(errno));
  struct stat st;
  if (stat(dir.c_str(), &st) != 0)
    return IoError(dir + ": cannot use as the bundle folder: " + std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) return IoError(dir + ": cannot use as the bundle folder: not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    return IoError(dir + ": cannot write into the bundle folder: " + std::strerror(errno));
  return Status::Ok();
}

namespace {

// Writes the manifest as tm_program_export writes a program: into a new file beside it,
// renamed over it, so that a reader sees a whole manifest or none, and a symlink at its
// path is replaced, never followed. (The programs, written before it and far larger, met
// any file size limit first.)
Status WriteManifest(const std::string &path, const std::string &text) {
  static std::atomic<unsigned> counter{0};  // with the pid: a name no other writer uses
  const std::string temp =
      path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return IoError(path + ": cannot write: " + std::strerror(errno));
  size_t done = 0;
  int error = 0;
  while (done < text.size() && !error) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n > 0)
      done += static_cast<size_t>(n);
    else if (n == 0 || errno != EINTR)
      error = n == 0 ? ENOSPC : errno;
  }
  if (close(fd) != 0 && !error) error = errno;
  if (!error && rename(temp.c_str(), path.c_str()) != 0) error = errno;
  if (error) {
    unlink(temp.c_str());
    return IoError(path + ": cannot write: " + std::strerror(error));
  }
  return Status::Ok();
}

}  // namespace

Status WriteBundle(const std::string &dir, const Gpt2Config &config, tm_target target,
                   const std::vector<ProgramKey> &keys,
                   const std::map<ProgramKey, ProgramHandle> &programs) {
  // The manifest is what makes a folder a bundle: an old one goes first and the new one is
  // written last, so that a write that fails half-way (a full disk) leaves a folder that
  // fails to load as a bundle, never old manifest beside new programs.
  const std::string path = dir + "/manifest.txt";
  if (unlink(path.c_str()) != 0 && errno != ENOENT)
    return IoError(path + ": cannot replace: " + std::strerror(errno));
  std::string manifest = kBundleHeader + BundleDimensions(config) + "target " +
                         TargetName(target) + "\nprograms\n";
  for (const ProgramKey &key : keys) {
    const std::string name = BundleFileName(key);
    if (manifest.find("\n" + name + "\n") != std::string::npos) continue;
    TM_RETURN_IF_ERROR(FromC(tm_program_export(programs.at(key), (dir + "/" + name).c_str())));
    manifest += name + "\n";
  }
  return WriteManifest(path, manifest);
}

}  // namespace tinymlir::gpt2
