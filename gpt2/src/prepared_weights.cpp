#include "gpt2/src/prepared_weights.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <system_error>
#include <thread>
#include <vector>

#include "core/support/cache_folder.h"
#include "core/support/file_io.h"
#include "core/support/fnv.h"
#include "gpt2/src/safetensors.h"

namespace tinymlir::gpt2 {
namespace {

constexpr char kMagic[8] = {'T', 'M', 'W', 'G', 'H', 'T', 'S', '1'};
constexpr uint64_t kFormat = 1;
constexpr uint64_t kAlign = 4096;  // each tensor starts on a page of the file
// The weights folder keeps at most this much; the least recently used files go first.
constexpr uint64_t kFolderLimit = uint64_t{8} << 30;

const char *DtypeName(tm_dtype d) {
  switch (d) {
    case TM_F32: return "f32";
    case TM_F16: return "f16";
    case TM_BF16: return "bf16";
    case TM_Q8_0: return "q8_0";
    default: return "other";
  }
}

// Every tensor of a model, in the file's order.
template <typename W>
auto AllWeights(W *w) {
  using T = std::conditional_t<std::is_const_v<W>, const Weight *, Weight *>;
  std::vector<T> all = {&w->wte, &w->wpe, &w->ln_f_g, &w->ln_f_b};
  for (auto &l : w->layers)
    for (auto *t : {&l.ln_1_g, &l.ln_1_b, &l.attn_w, &l.attn_b, &l.attn_proj_w, &l.attn_proj_b,
                    &l.ln_2_g, &l.ln_2_b, &l.fc_w, &l.fc_b, &l.mlp_proj_w, &l.mlp_proj_b})
      all.push_back(t);
  return all;
}

// A checksum of a tensor's bytes, at memory speed: four independent multiply-xor lanes over
// 8-byte words (catches truncation, zeroed pages and flipped bits; not tampering).
uint64_t Checksum(const void *data, size_t bytes) {
  constexpr uint64_t kMul = 0x9E3779B97F4A7C15ull;
  const auto *p = static_cast<const unsigned char *>(data);
  uint64_t h[4] = {1, 2, 3, 4};
  size_t i = 0;
  for (; i + 32 <= bytes; i += 32)
    for (int l = 0; l < 4; ++l) {
      uint64_t w;
      std::memcpy(&w, p + i + 8 * l, 8);
      h[l] = (h[l] ^ w) * kMul;
    }
  uint64_t tail = 0;
  for (; i < bytes; ++i) tail = (tail << 8 | p[i]) * kMul;
  uint64_t r = bytes;
  for (uint64_t x : h) r = (r ^ x ^ (x >> 29)) * kMul;
  return (r ^ tail) * kMul;
}

struct Entry {
  uint64_t dtype, rank, dims[2], offset, bytes, checksum;
};

bool ReadAt(int fd, void *dst, size_t bytes, uint64_t offset) {
  auto *p = static_cast<unsigned char *>(dst);
  while (bytes > 0) {
    const ssize_t n = pread(fd, p, std::min<size_t>(bytes, size_t{64} << 20), static_cast<off_t>(offset));
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    p += n;
    offset += static_cast<uint64_t>(n);
    bytes -= static_cast<size_t>(n);
  }
  return true;
}

// The head: magic, format, key, count, entries, then a checksum of all of it.
std::string EncodeHead(const std::string &key, const std::vector<Entry> &entries) {
  std::string head(kMagic, sizeof kMagic);
  auto u64 = [&](uint64_t v) { head.append(reinterpret_cast<const char *>(&v), 8); };
  u64(kFormat);
  u64(key.size());
  head += key;
  u64(entries.size());
  for (const Entry &e : entries) {
    for (uint64_t v : {e.dtype, e.rank, e.dims[0], e.dims[1], e.offset, e.bytes, e.checksum}) u64(v);
  }
  u64(Fnv1a64(head));
  return head;
}

// Removes the least recently used files of the weights folder until `incoming` more bytes fit
// the folder's limit.
void MakeRoom(const std::string &folder, uint64_t incoming) {
  DIR *dir = opendir(folder.c_str());
  if (!dir) return;
  std::vector<std::pair<timespec, std::pair<std::string, uint64_t>>> files;
  uint64_t total = 0;
  while (const dirent *e = readdir(dir)) {
    const std::string name = e->d_name;
    if (name.size() < 10 || name.compare(name.size() - 10, 10, ".tmweights") != 0) continue;
    struct stat st;
    const std::string path = folder + "/" + name;
    if (stat(path.c_str(), &st) != 0) continue;
    files.push_back({st.st_mtim, {path, static_cast<uint64_t>(st.st_size)}});
    total += static_cast<uint64_t>(st.st_size);
  }
  closedir(dir);
  std::sort(files.begin(), files.end(), [](const auto &a, const auto &b) {
    return a.first.tv_sec != b.first.tv_sec ? a.first.tv_sec < b.first.tv_sec
                                            : a.first.tv_nsec < b.first.tv_nsec;
  });
  for (const auto &f : files) {
    if (total + incoming <= kFolderLimit) break;
    if (unlink(f.second.first.c_str()) == 0) total -= f.second.second;
  }
}

}  // namespace

PreparedKey KeyFor(const std::string &dir, const SafetensorsFile &file, const Gpt2Config &config,
                   std::string_view config_text, std::string *why_none) {
  PreparedKey key;
  const std::string checkpoint = dir + "/model.safetensors";
  char real[PATH_MAX];
  if (!realpath(checkpoint.c_str(), real)) {
    *why_none = checkpoint + ": cannot resolve its path";
    return key;
  }
  key.text = "tinymlir prepared weights, format " + std::to_string(kFormat) + "\ncheckpoint " +
             real + "\nsize " + std::to_string(file.file_size()) + " mtime " +
             std::to_string(file.modified().tv_sec) + "." +
             std::to_string(file.modified().tv_nsec) +
             "\nheader " + Hex64(Fnv1a64(std::string(file.header()))) + "\nconfig " +
             Hex64(Fnv1a64(config_text.data(), config_text.size())) + "\nmatrices " +
             DtypeName(config.matrices) + "\nlayout " + (config.projections_out_major ? "projections out-major" : "as stored") +
             "\n";
  const std::string root = CacheFolderFromEnvironment();
  if (root.empty()) {
    *why_none = "no cache folder (TINYMLIR_CACHE_DIR is off)";
    return key;
  }
  const std::string folder = root + "/weights";
  if (Status s = PrepareCacheFolder(folder); !s.ok()) {
    *why_none = s.message();
    return key;
  }
  key.path = folder + "/" + Hex64(Fnv1a64(key.text)) + ".tmweights";
  return key;
}

Status ReadPreparedWeights(const PreparedKey &key, const Gpt2Config &config,
                           Gpt2Weights *weights, bool *used, std::string *why) {
  *used = false;
  if (key.path.empty()) return Status::Ok();
  const int fd = open(key.path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *why = errno == ENOENT ? "none yet" : key.path + ": " + std::strerror(errno);
    return Status::Ok();
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  // Anything wrong with the file from here on: it is removed and rebuilt, never used.
  // What was read so far is dropped at once: the conversion that follows must not run with
  // a second copy of the weights held.
  auto bad = [&](const std::string &what) {
    *weights = Gpt2Weights();
    *why = key.path + " " + what + ": rebuilt from the checkpoint";
    unlink(key.path.c_str());
    return Status::Ok();
  };
  struct stat st;
  if (fstat(fd, &st) != 0) return bad("cannot be read");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  std::string head(std::min<uint64_t>(size, 1 << 20), '\0');
  if (!ReadAt(fd, head.data(), head.size(), 0)) return bad("cannot be read");
  size_t at = 0;
  auto u64 = [&](uint64_t *v) {
    if (head.size() - at < 8) return false;
    std::memcpy(v, head.data() + at, 8);
    at += 8;
    return true;
  };
  uint64_t format = 0, key_len = 0, count = 0;
  if (head.size() < 8 || std::memcmp(head.data(), kMagic, 8) != 0) return bad("is not a prepared-weights file");
  at = 8;
  if (!u64(&format) || format != kFormat) return bad("has another format");
  if (!u64(&key_len) || key_len > head.size() - at) return bad("is truncated");
  const std::string file_key = head.substr(at, key_len);
  at += key_len;
  if (file_key != key.text) return bad("is stale (its checkpoint or the model's choices changed)");
  weights->layers.resize(static_cast<size_t>(config.n_layer));
  const std::vector<Weight *> all = AllWeights(weights);
  const auto expected = HeldTensorShapes(config);  // in AllWeights' order
  if (!u64(&count) || count != all.size()) return bad("does not hold this model's tensors");
  std::vector<Entry> entries(count);
  for (Entry &e : entries)
    for (uint64_t *v : {&e.dtype, &e.rank, &e.dims[0], &e.dims[1], &e.offset, &e.bytes, &e.checksum})
      if (!u64(v)) return bad("is truncated");
  const uint64_t head_sum = Fnv1a64(head.substr(0, at));
  uint64_t stored_sum = 0;
  if (!u64(&stored_sum) || stored_sum != head_sum) return bad("is corrupt (its head's checksum)");
  // The structure must be the config's: tensors of the right dtype and shape, inside the file.
  for (size_t i = 0; i < count; ++i) {
    const Entry &e = entries[i];
    const auto &[shape, dtype] = expected[i];
    uint64_t n = 1;
    for (int64_t d : shape) n *= static_cast<uint64_t>(d);
    const bool same = e.dtype == static_cast<uint64_t>(dtype) && e.rank == shape.size() &&
                      e.dims[0] == static_cast<uint64_t>(shape[0]) &&
                      (shape.size() < 2 || e.dims[1] == static_cast<uint64_t>(shape[1])) &&
                      e.bytes == TensorBytes(dtype, n);
    if (!same) return bad("is corrupt (tensor " + std::to_string(i) + " is not the config's)");
    if (e.offset > size || e.bytes > size - e.offset) return bad("is truncated");
  }
  // All the tensors in one arena (weight_memory.h), in the file's order; a mapping that
  // cannot be made is out of memory, not a bad file.
  HostArena arena;
  size_t space = 0;
  for (const Entry &e : entries) space += HostArena::Space(e.bytes);
  if (Status s = arena.Allocate(space); !s.ok()) {
    *weights = Gpt2Weights();
    return OutOfMemory("cannot allocate the model's weights: " + s.message());
  }
  for (size_t i = 0; i < count; ++i) TM_RETURN_IF_ERROR(arena.Take(entries[i].bytes, &all[i]->host));
  // The tensors, largest first, by as many threads as the machine has (two here: the page
  // cache copies at memory speed, a little faster with both).
  std::vector<size_t> order(count);
  for (size_t i = 0; i < count; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return entries[a].bytes > entries[b].bytes; });
  std::atomic<size_t> next{0};
  std::atomic<int> failed{-1};  // a tensor that could not be read (or allocated)
  std::atomic<int> corrupt{-1};  // one whose checksum differs
  auto work = [&] {
    for (size_t k; (k = next.fetch_add(1)) < count && failed < 0 && corrupt < 0;) {
      const size_t i = order[k];
      const Entry &e = entries[i];
      Weight *w = all[i];
      if (!ReadAt(fd, w->host.data(), e.bytes, e.offset)) {
        failed = static_cast<int>(i);
        return;
      }
      if (Checksum(w->host.data(), e.bytes) != e.checksum) corrupt = static_cast<int>(i);
    }
  };
  const unsigned threads = std::max(1u, std::min(4u, std::thread::hardware_concurrency()));
  std::vector<std::thread> pool;
  for (unsigned t = 1; t < threads; ++t) {
    // Under a process or thread limit a helper may not start: the threads there are (this
    // one at least) read every tensor anyway.
    try {
      pool.emplace_back(work);
    } catch (const std::system_error &) {
      break;
    }
  }
  work();
  for (std::thread &t : pool) t.join();
  if (failed >= 0) return bad("cannot be read (tensor " + std::to_string(failed.load()) + ")");
  if (corrupt >= 0) return bad("is corrupt (tensor " + std::to_string(corrupt.load()) + "'s checksum)");
  for (size_t i = 0; i < count; ++i) {
    all[i]->shape = expected[i].first;
    all[i]->dtype = expected[i].second;
  }
  // Recently used: the folder's eviction keeps it.
  futimens(fd, nullptr);
  *used = true;
  return Status::Ok();
}

Status WritePreparedWeights(const PreparedKey &key, const Gpt2Weights &weights) {
  if (key.path.empty()) return Status::Ok();
  const std::vector<const Weight *> all = AllWeights(&weights);
  std::vector<Entry> entries(all.size());
  uint64_t total = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const Weight *w = all[i];
    Entry &e = entries[i];
    e.dtype = static_cast<uint64_t>(w->dtype);
    e.rank = w->shape.size();
    e.dims[0] = w->shape.empty() ? 0 : static_cast<uint64_t>(w->shape[0]);
    e.dims[1] = w->shape.size() > 1 ? static_cast<uint64_t>(w->shape[1]) : 0;
    e.bytes = w->bytes();
    e.checksum = Checksum(w->host.data(), w->bytes());
    total += e.bytes + kAlign;
  }
  // Offsets depend on the head's size, which does not depend on them.
  uint64_t offset = (EncodeHead(key.text, entries).size() + kAlign - 1) / kAlign * kAlign;
  for (Entry &e : entries) {
    e.offset = offset;
    offset = (offset + e.bytes + kAlign - 1) / kAlign * kAlign;
  }
  const std::string head = EncodeHead(key.text, entries);
  const std::string folder = key.path.substr(0, key.path.rfind('/'));
  MakeRoom(folder, total);
  // The head, then each tensor at its aligned offset (zeros between).
  const std::vector<char> zeros(kAlign, 0);
  std::vector<FilePiece> pieces{{head.data(), head.size()}};
  uint64_t at = head.size();
  for (size_t i = 0; i < all.size(); ++i) {
    pieces.push_back({zeros.data(), static_cast<size_t>(entries[i].offset - at)});
    pieces.push_back({all[i]->host.data(), static_cast<size_t>(entries[i].bytes)});
    at = entries[i].offset + entries[i].bytes;
  }
  return WriteFileAtomically(key.path, pieces, 0600);
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
