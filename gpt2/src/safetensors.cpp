#include "gpt2/src/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <tuple>

#include <nlohmann/json.hpp>

#include "gpt2/src/bounded_input.h"

namespace tinymlir::gpt2 {
namespace {

std::string ErrnoText() { return std::strerror(errno); }

bool ParseDtype(const std::string &s, SafetensorsDtype *dtype) {
  if (s == "F32") *dtype = SafetensorsDtype::kF32;
  else if (s == "F16") *dtype = SafetensorsDtype::kF16;
  else if (s == "BF16") *dtype = SafetensorsDtype::kBF16;
  else return false;
  return true;
}

// Validates one header entry against a data section of `data_size` bytes.
Status ParseEntry(const std::string &prefix, const std::string &name,
                  const nlohmann::json &entry, uint64_t data_size, TensorInfo *info) {
  const std::string where = prefix + "tensor '" + Excerpt(name) + "': ";
  if (!entry.is_object()) return IoError(where + "entry is not a JSON object");

  auto dtype_it = entry.find("dtype");
  if (dtype_it == entry.end()) return IoError(where + "missing 'dtype'");
  if (!dtype_it->is_string()) return IoError(where + "'dtype' is not a string");
  const std::string dtype_name = dtype_it->get<std::string>();
  if (!ParseDtype(dtype_name, &info->dtype)) {
    return IoError(where + "unsupported dtype '" + Excerpt(dtype_name) +
                   "' (expected F32, F16 or BF16)");
  }

  auto shape_it = entry.find("shape");
  if (shape_it == entry.end()) return IoError(where + "missing 'shape'");
  if (!shape_it->is_array()) return IoError(where + "'shape' is not an array");
  uint64_t elements = 1;
  bool overflow = false;
  for (size_t i = 0; i < shape_it->size(); ++i) {
    const nlohmann::json &dim = (*shape_it)[i];
    if (dim.is_number_integer() && !dim.is_number_unsigned()) {
      return IoError(where + "shape[" + std::to_string(i) + "] is negative (" + JsonExcerpt(dim) +
                     ")");
    }
    if (!dim.is_number_unsigned()) {
      return IoError(where + "shape[" + std::to_string(i) + "] is not a non-negative integer (" +
                     JsonExcerpt(dim) + ")");
    }
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX)) {
      return IoError(where + "shape[" + std::to_string(i) + "] = " + std::to_string(d) +
                     " is too large");
    }
    info->shape.push_back(static_cast<int64_t>(d));
    overflow = overflow || __builtin_mul_overflow(elements, d, &elements);
  }
  uint64_t expected_bytes = 0;
  overflow = overflow ||
             __builtin_mul_overflow(elements, SafetensorsDtypeSize(info->dtype), &expected_bytes);

  auto off_it = entry.find("data_offsets");
  if (off_it == entry.end()) return IoError(where + "missing 'data_offsets'");
  if (!off_it->is_array() || off_it->size() != 2 || !(*off_it)[0].is_number_unsigned() ||
      !(*off_it)[1].is_number_unsigned()) {
    return IoError(where + "'data_offsets' must be [begin, end] of non-negative integers, got " +
                   JsonExcerpt(*off_it));
  }
  const uint64_t begin = (*off_it)[0].get<uint64_t>();
  const uint64_t end = (*off_it)[1].get<uint64_t>();
  if (begin > end) {
    return IoError(where + "data_offsets begin " + std::to_string(begin) + " > end " +
                   std::to_string(end));
  }
  if (end > data_size) {
    return IoError(where + "data_offsets [" + std::to_string(begin) + ", " +
                   std::to_string(end) + "] lie outside the data section of " +
                   std::to_string(data_size) + " bytes");
  }
  if (overflow || expected_bytes != end - begin) {
    return IoError(where + "shape " + JsonExcerpt(*shape_it) + " x " + dtype_name + " needs " +
                   (overflow ? std::string("more than 2^64") : std::to_string(expected_bytes)) +
                   " bytes but data_offsets span " + std::to_string(end - begin) + " bytes");
  }
  info->name = name;
  info->data_begin = begin;
  info->nbytes = static_cast<size_t>(end - begin);
  return Status::Ok();
}

}  // namespace

size_t SafetensorsDtypeSize(SafetensorsDtype dtype) {
  return dtype == SafetensorsDtype::kF32 ? 4 : 2;
}

const char *SafetensorsDtypeName(SafetensorsDtype dtype) {
  switch (dtype) {
    case SafetensorsDtype::kF32: return "F32";
    case SafetensorsDtype::kF16: return "F16";
    case SafetensorsDtype::kBF16: return "BF16";
  }
  return "?";
}

float F16BitsToF32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);  // inf, or NaN with its payload kept
  } else if (exp != 0) {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  } else if (mant == 0) {
    bits = sign;  // signed zero
  } else {
    // Subnormal half: normalize, since every one is a normal float.
    exp = 127 - 15 + 1;
    while ((mant & 0x400u) == 0) {
      mant <<= 1;
      --exp;
    }
    bits = sign | (exp << 23) | ((mant & 0x3ffu) << 13);
  }
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

float BF16BitsToF32(uint16_t b) {
  const uint32_t bits = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &bits, sizeof f);
  return f;
}

uint16_t F32ToF16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  const uint16_t sign = static_cast<uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x > 0x7f800000u) return sign | 0x7e00u | static_cast<uint16_t>((x >> 13) & 0x3ffu);
  if (x >= 0x477ff000u) return sign | 0x7c00u;  // from 65520 (and infinity): infinity
  // Rounds q + rem / 2^shift to nearest even.
  auto round = [](uint32_t q, uint32_t rem, uint32_t half) {
    return rem > half || (rem == half && (q & 1u)) ? q + 1 : q;
  };
  if (x < 0x38800000u) {  // below 2^-14: an F16 subnormal (or zero), in steps of 2^-24
    const uint32_t e = x >> 23;
    if (e < 102) return sign;  // below 2^-25: rounds to zero
    const uint32_t m = (x & 0x7fffffu) | 0x800000u, shift = 126 - e;
    return sign | static_cast<uint16_t>(round(m >> shift, m & ((1u << shift) - 1), 1u << (shift - 1)));
  }
  x -= 0x38000000u;  // re-bias the exponent (127 -> 15); a carry from rounding moves it up
  return sign | static_cast<uint16_t>(round(x >> 13, x & 0x1fffu, 0x1000u));
}

uint16_t F32ToBF16Bits(float f) {
  uint32_t x;
  std::memcpy(&x, &f, sizeof x);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x0040u);
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

int64_t TensorInfo::num_elements() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsFile::~SafetensorsFile() {
  if (map_ != nullptr) munmap(map_, map_size_);
}

Status SafetensorsFile::Open(const std::string &path, std::unique_ptr<SafetensorsFile> *out) {
  if (out == nullptr) return InvalidArgument("SafetensorsFile::Open: out is null");
  const std::string prefix = "safetensors file '" + path + "': ";

  // No cap on the file: the data is mapped, and the header is bounded in Parse.
  int fd = -1;
  uint64_t file_size = 0;
  TM_RETURN_IF_ERROR(OpenRegularFile(prefix, path, UINT64_MAX, &fd, &file_size));
  if (file_size < 8) {
    ::close(fd);
    return IoError(prefix + "truncated: " + std::to_string(file_size) +
                   " bytes, need at least 8 for the header length");
  }
  if (file_size > SIZE_MAX) {
    ::close(fd);
    return IoError(prefix + "is too large to map");
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const std::string error = ErrnoText();
    ::close(fd);
    return IoError(prefix + "cannot stat: " + error);
  }
  void *map = mmap(nullptr, file_size, PROT_READ, MAP_PRIVATE, fd, 0);
  const std::string mmap_error = map == MAP_FAILED ? ErrnoText() : std::string();
  ::close(fd);  // the mapping keeps the file alive
  if (map == MAP_FAILED) return IoError(prefix + "mmap failed: " + mmap_error);

  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = path;
  file->map_ = map;
  file->map_size_ = file_size;
  file->base_ = static_cast<const uint8_t *>(map);
  file->size_ = file_size;
  file->modified_ = st.st_mtim;
  TM_RETURN_IF_ERROR(file->Parse());
  *out = std::move(file);
  return Status::Ok();
}

Status SafetensorsFile::FromBytes(const std::string &name, const void *bytes, size_t size,
                                  std::unique_ptr<SafetensorsFile> *out) {
  if (out == nullptr) return InvalidArgument("SafetensorsFile::FromBytes: out is null");
  if (bytes == nullptr && size > 0)
    return InvalidArgument("SafetensorsFile::FromBytes: bytes is null");
  const std::string prefix = "safetensors file '" + name + "': ";
  if (size < 8) {
    return IoError(prefix + "truncated: " + std::to_string(size) +
                   " bytes, need at least 8 for the header length");
  }
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile());
  file->path_ = name;
  const auto *begin = static_cast<const uint8_t *>(bytes);
  file->owned_.assign(begin, begin + size);
  file->base_ = file->owned_.data();
  file->size_ = size;
  TM_RETURN_IF_ERROR(file->Parse());
  *out = std::move(file);
  return Status::Ok();
}

Status SafetensorsFile::Parse() {
  const std::string prefix = "safetensors file '" + path_ + "': ";
  const uint64_t file_size = size_;
  const uint8_t *bytes = base_;

  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | bytes[i];
  if (header_len > file_size - 8) {
    return IoError(prefix + "truncated: header length " + std::to_string(header_len) +
                   " exceeds the " + std::to_string(file_size - 8) +
                   " bytes after the length field");
  }
  if (header_len < 2 || header_len > kMaxSafetensorsHeaderBytes) {
    return IoError(prefix + "bad header length " + std::to_string(header_len) +
                   " (must be between 2 and " + std::to_string(kMaxSafetensorsHeaderBytes) +
                   ")");
  }
  const char *header = reinterpret_cast<const char *>(bytes + 8);
  const uint8_t *data = bytes + 8 + header_len;
  const uint64_t data_size = file_size - 8 - header_len;

  try {
    nlohmann::json root;
    TM_RETURN_IF_ERROR(ParseJsonWithLimits(prefix + "header is ",
                                           std::string_view(header, header_len),
                                           kSafetensorsJsonLimits, &root));
    if (!root.is_object()) return IoError(prefix + "header is not a JSON object");

    std::vector<std::tuple<uint64_t, uint64_t, const TensorInfo *>> spans;
    for (auto it = root.begin(); it != root.end(); ++it) {
      if (it.key() == "__metadata__") continue;  // free-form strings; nothing we need
      TensorInfo info;
      TM_RETURN_IF_ERROR(ParseEntry(prefix, it.key(), it.value(), data_size, &info));
      info.data = data + info.data_begin;
      const TensorInfo &stored = tensors_.emplace(it.key(), std::move(info)).first->second;
      names_.push_back(it.key());
      if (stored.nbytes > 0) {
        spans.emplace_back(stored.data_begin, stored.data_begin + stored.nbytes, &stored);
      }
    }
    // Overlapping spans mean a corrupt or hostile header: two tensors would alias.
    std::sort(spans.begin(), spans.end());
    for (size_t i = 1; i < spans.size(); ++i) {
      const auto &[pb, pe, prev] = spans[i - 1];
      const auto &[cb, ce, cur] = spans[i];
      if (cb < pe) {
        return IoError(prefix + "tensor '" + Excerpt(cur->name) + "' data_offsets [" +
                       std::to_string(cb) + ", " + std::to_string(ce) + "] overlap tensor '" +
                       Excerpt(prev->name) + "' data_offsets [" + std::to_string(pb) + ", " +
                       std::to_string(pe) + "]");
      }
    }
  } catch (const std::bad_alloc &) {
    throw;  // the C boundary reports TM_ERROR_OUT_OF_MEMORY
  } catch (const std::exception &e) {
    return IoError(prefix + "malformed header: " + Excerpt(e.what(), 200));
  }
  std::sort(names_.begin(), names_.end());
  return Status::Ok();
}

const TensorInfo *SafetensorsFile::Find(const std::string &name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

Status SafetensorsFile::ReadAsF32(const std::string &name, std::vector<float> *out) const {
  if (out == nullptr) return InvalidArgument("ReadAsF32: out is null");
  const TensorInfo *info = Find(name);
  if (info == nullptr) {
    return InvalidArgument("safetensors file '" + path_ + "': no tensor named '" + name + "'");
  }
  out->resize(info->nbytes / SafetensorsDtypeSize(info->dtype));
  return ReadAsF32(name, out->data(), out->size());
}

Status SafetensorsFile::ReadAsHalf(const std::string &name, SafetensorsDtype dtype,
                                   std::vector<uint16_t> *out) const {
  if (out == nullptr) return InvalidArgument("ReadAsHalf: out is null");
  const TensorInfo *info = Find(name);
  if (info == nullptr) {
    return InvalidArgument("safetensors file '" + path_ + "': no tensor named '" + name + "'");
  }
  out->resize(info->nbytes / SafetensorsDtypeSize(info->dtype));
  return ReadAsHalf(name, dtype, out->data(), out->size());
}

Status SafetensorsFile::ReadAsF32(const std::string &name, float *out, size_t count) const {
  const TensorInfo *info = Find(name);
  if (info == nullptr) {
    return InvalidArgument("safetensors file '" + path_ + "': no tensor named '" + name + "'");
  }
  const size_t n = info->nbytes / SafetensorsDtypeSize(info->dtype);
  if (count != n)
    return InvalidArgument("ReadAsF32: '" + name + "' has " + std::to_string(n) +
                           " elements, the buffer " + std::to_string(count));
  if (n > 0 && out == nullptr) return InvalidArgument("ReadAsF32: out is null");
  if (info->dtype == SafetensorsDtype::kF32) {
    if (n > 0) std::memcpy(out, info->data, info->nbytes);
  } else {
    const bool half = info->dtype == SafetensorsDtype::kF16;
    for (size_t i = 0; i < n; ++i) {
      uint16_t bits;
      std::memcpy(&bits, info->data + 2 * i, sizeof bits);  // data may be unaligned
      out[i] = half ? F16BitsToF32(bits) : BF16BitsToF32(bits);
    }
  }
  DropPages(*info);
  return Status::Ok();
}

Status SafetensorsFile::ReadAsHalf(const std::string &name, SafetensorsDtype dtype,
                                   uint16_t *out, size_t count) const {
  if (dtype == SafetensorsDtype::kF32) return InvalidArgument("ReadAsHalf: F32 is not a half type");
  const TensorInfo *info = Find(name);
  if (info == nullptr) {
    return InvalidArgument("safetensors file '" + path_ + "': no tensor named '" + name + "'");
  }
  const size_t n = info->nbytes / SafetensorsDtypeSize(info->dtype);
  if (count != n)
    return InvalidArgument("ReadAsHalf: '" + name + "' has " + std::to_string(n) +
                           " elements, the buffer " + std::to_string(count));
  if (n > 0 && out == nullptr) return InvalidArgument("ReadAsHalf: out is null");
  if (info->dtype == dtype) {
    if (n > 0) std::memcpy(out, info->data, info->nbytes);
  } else {
    auto narrow = dtype == SafetensorsDtype::kF16 ? &F32ToF16Bits : &F32ToBF16Bits;
    for (size_t i = 0; i < n; ++i) {
      float value;
      if (info->dtype == SafetensorsDtype::kF32) {
        std::memcpy(&value, info->data + 4 * i, sizeof value);  // data may be unaligned
      } else {
        uint16_t bits;
        std::memcpy(&bits, info->data + 2 * i, sizeof bits);
        value = info->dtype == SafetensorsDtype::kF16 ? F16BitsToF32(bits) : BF16BitsToF32(bits);
      }
      out[i] = narrow(value);
    }
  }
  DropPages(*info);
  return Status::Ok();
}

std::string_view SafetensorsFile::header() const {
  if (size_ < 8) return {};
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | base_[i];
  return std::string_view(reinterpret_cast<const char *>(base_), 8 + header_len);
}

void SafetensorsFile::DropPages(const TensorInfo &info) const {
  // The bytes were just converted into the caller's buffer: release the mapped pages so a
  // checkpoint is not resident twice while a model loads (they stay in the page cache and
  // fault back in if read again). Never on a copy made by FromBytes: MADV_DONTNEED would
  // zero its anonymous pages.
  if (map_ == nullptr) return;
  const uintptr_t page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  uintptr_t begin = (reinterpret_cast<uintptr_t>(info.data) + page - 1) / page * page;
  uintptr_t end = (reinterpret_cast<uintptr_t>(info.data) + info.nbytes) / page * page;
  if (end > begin) madvise(reinterpret_cast<void *>(begin), end - begin, MADV_DONTNEED);
}

}  // namespace tinymlir::gpt2
