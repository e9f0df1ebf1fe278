// Reader for the safetensors checkpoint format (Hugging Face): an 8-byte little-endian
// header length, a JSON header mapping tensor names to {dtype, shape, data_offsets}, then
// the raw tensor bytes. The file is mmapped read-only and every header field is validated
// at Open, so later lookups cannot run off the mapping. The file must be a regular file
// (a FIFO or device is refused without blocking) and its header at most
// kMaxSafetensorsHeaderBytes, within kSafetensorsJsonLimits (gpt2/src/bounded_input.h:
// at most 8 levels, 2^16 tensors, rank 64).
//
// Thread-safety: after Open the object is immutable; all const methods may be called
// concurrently. The host is assumed little-endian (as is the format).
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

// The format's own bound on the JSON header (as in the reference implementation): a larger
// length field is a corrupt file, not a real checkpoint.
inline constexpr uint64_t kMaxSafetensorsHeaderBytes = 100'000'000;

// Element types accepted in a checkpoint. Everything is upcast to F32 for computation.
enum class SafetensorsDtype { kF32, kF16, kBF16 };

// Bytes per element (4 or 2).
size_t SafetensorsDtypeSize(SafetensorsDtype dtype);
// The header spelling: "F32", "F16", "BF16".
const char *SafetensorsDtypeName(SafetensorsDtype dtype);

// Exact conversions (every half/bfloat value is representable as a float): F16 keeps
// subnormals, signed zeros, infinities and NaN payloads; BF16 is the upper half of an F32.
float F16BitsToF32(uint16_t bits);
float BF16BitsToF32(uint16_t bits);
// Rounding to nearest even: values past F16's largest become infinities, NaNs stay quiet
// NaNs of their sign.
uint16_t F32ToF16Bits(float f);
uint16_t F32ToBF16Bits(float f);

struct TensorInfo {
  std::string name;
  SafetensorsDtype dtype = SafetensorsDtype::kF32;
  std::vector<int64_t> shape;
  // Points into the mapping; valid while the SafetensorsFile lives. Not necessarily
  // aligned to the element size: copy with memcpy.
  const uint8_t *data = nullptr;
  size_t nbytes = 0;
  // Offset of the span within the data section (after the header).
  uint64_t data_begin = 0;

  int64_t num_elements() const;
};

class SafetensorsFile {
 public:
  // Maps and validates `path`. On failure `*out` is left untouched and the status is
  // TM_ERROR_IO (missing file, truncated file, bad header, bad entry) or
  // TM_ERROR_INVALID_ARGUMENT (null `out`).
  static Status Open(const std::string &path, std::unique_ptr<SafetensorsFile> *out);

  // The same validation on a checkpoint held in memory: bytes[0..size) are copied, and
  // `name` stands for the file in messages and path(). For tests and fuzzing.
  static Status FromBytes(const std::string &name, const void *bytes, size_t size,
                          std::unique_ptr<SafetensorsFile> *out);

  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile &) = delete;
  SafetensorsFile &operator=(const SafetensorsFile &) = delete;

  const std::string &path() const { return path_; }
  // Tensor names in lexicographic order (`__metadata__` excluded).
  const std::vector<std::string> &names() const { return names_; }
  // nullptr when the file has no tensor called `name`.
  const TensorInfo *Find(const std::string &name) const;
  // The length field and the JSON header: what names every tensor, its dtype, shape and
  // place (prepared_weights.h keys on it).
  std::string_view header() const;
  // The size and modification time of the file as it was opened (fstat on the descriptor
  // that was mapped: what was read, even if the path names another file by now). A
  // checkpoint made from bytes has their size and a time of zero.
  uint64_t file_size() const { return size_; }
  const struct timespec &modified() const { return modified_; }

  // Copies tensor `name` into `*out` as F32 (resized to num_elements), then releases the
  // tensor's mapped pages (reading it again faults them back in). TM_ERROR_INVALID_ARGUMENT
  // when the tensor does not exist or `out` is null.
  Status ReadAsF32(const std::string &name, std::vector<float> *out) const;
  // The same into F16 or BF16 bits (`dtype` kF16 or kBF16): copied when the tensor is
  // stored so, else rounded from its F32 value.
  Status ReadAsHalf(const std::string &name, SafetensorsDtype dtype,
                    std::vector<uint16_t> *out) const;
  // The same into caller memory of exactly the tensor's element count `n`.
  Status ReadAsF32(const std::string &name, float *out, size_t n) const;
  Status ReadAsHalf(const std::string &name, SafetensorsDtype dtype, uint16_t *out,
                    size_t n) const;

 private:
  SafetensorsFile() = default;
  // Validates the header of base_[0..size_) and fills the tensor table.
  Status Parse();
  void DropPages(const TensorInfo &info) const;

  std::string path_;
  void *map_ = nullptr;  // the mapping, when opened from a file
  size_t map_size_ = 0;
  std::vector<uint8_t> owned_;  // the copy, when made from bytes
  const uint8_t *base_ = nullptr;
  size_t size_ = 0;
  struct timespec modified_ = {};
  std::vector<std::string> names_;
  std::map<std::string, TensorInfo> tensors_;
};

}  // namespace tinymlir::gpt2
