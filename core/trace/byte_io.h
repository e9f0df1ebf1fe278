// Little binary formats: fixed-width integers, length-prefixed texts and tensor types,
// written in the host's byte order (every format here is read by the same build on the same
// kind of machine). Readers never read past the end: each call says whether it could.
// Used by program files (core/engine/program_file.cpp), traces as bytes
// (core/trace/trace_bytes.cpp) and the compiler process's messages
// (core/driver/compiler_protocol.cpp).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "core/trace/trace.h"

namespace tinymlir {

class ByteWriter {
 public:
  void U64(uint64_t v) { bytes_.append(reinterpret_cast<const char *>(&v), sizeof v); }
  void I64(int64_t v) { U64(static_cast<uint64_t>(v)); }
  void F64(double v) { bytes_.append(reinterpret_cast<const char *>(&v), sizeof v); }
  void Text(const std::string &s) {
    U64(s.size());
    bytes_ += s;
  }
  void Type(const TensorType &t) {
    I64(static_cast<int64_t>(t.dtype));
    U64(t.shape.size());
    for (int64_t d : t.shape) I64(d);
  }
  std::string Take() { return std::move(bytes_); }

 private:
  std::string bytes_;
};

class ByteReader {
 public:
  explicit ByteReader(const std::string &bytes) : bytes_(bytes) {}
  bool U64(uint64_t *v) {
    if (bytes_.size() - pos_ < sizeof *v) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof *v);
    pos_ += sizeof *v;
    return true;
  }
  bool I64(int64_t *v) {
    uint64_t u;
    if (!U64(&u)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool F64(double *v) {
    if (bytes_.size() - pos_ < sizeof *v) return false;
    std::memcpy(v, bytes_.data() + pos_, sizeof *v);
    pos_ += sizeof *v;
    return true;
  }
  // A count no larger than `limit`.
  bool Count(uint64_t limit, uint64_t *n) { return U64(n) && *n <= limit; }
  bool Text(std::string *s) {
    uint64_t n;
    if (!U64(&n) || n > bytes_.size() - pos_) return false;
    s->assign(bytes_, pos_, n);
    pos_ += n;
    return true;
  }
  bool Type(TensorType *t) {
    int64_t dtype;
    uint64_t rank;
    if (!I64(&dtype) || !IsValidDtype(static_cast<int>(dtype)) ||
        !Count(static_cast<uint64_t>(kMaxRank), &rank))
      return false;
    t->dtype = static_cast<DType>(dtype);
    t->shape.resize(rank);
    for (int64_t &d : t->shape)
      if (!I64(&d) || d < 0) return false;
    return true;
  }
  bool AtEnd() const { return pos_ == bytes_.size(); }

 private:
  const std::string &bytes_;
  size_t pos_ = 0;
};

}  // namespace tinymlir
