// A float array the model's programs read or write (activations, the KV cache): host
// memory, or, when the programs run on the GPU, a device buffer (tm_device_buffer), which
// tm_invoke hands to the kernels in place. In host memory, every GPU call would copy each
// tensor to the device before the call and back after it, the whole attended KV cache
// included. The host reaches a device array's floats only through Write, Read, Zero and
// CopyFrom, which the device orders with the program calls; data() is then an address for
// tensors, never to be read.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "gpt2/src/status.h"
#include "tinymlir/tinymlir.h"

namespace tinymlir::gpt2 {

class Floats {
 public:
  Floats() = default;
  ~Floats() { Release(); }
  Floats(const Floats &) = delete;
  Floats &operator=(const Floats &) = delete;
  Floats(Floats &&other) noexcept { *this = std::move(other); }
  Floats &operator=(Floats &&other) noexcept {
    if (this != &other) {
      Release();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
      capacity_ = std::exchange(other.capacity_, 0);
      buffer_ = std::exchange(other.buffer_, nullptr);
      on_device_ = other.on_device_;
      target_ = other.target_;
      mapped_ = std::exchange(other.mapped_, false);
    }
    return *this;
  }

  // Where the array lives from now on: a buffer on `target`'s device when `on_device`, else
  // host memory (the default). Drops the contents.
  void set_device(bool on_device, tm_target target) {
    Release();
    on_device_ = on_device;
    target_ = target;
  }

  // n floats, zero when newly allocated (a block already large enough is kept with its
  // contents). Host memory of kMappedBytes or more is a fresh anonymous mapping, whose pages
  // the kernel maps as they are first touched (a KV cache occupies memory only as the rows
  // read grow), whatever the allocator did before; smaller blocks come from calloc.
  Status Resize(size_t n) {
    if (n > capacity_) {
      Release();
      if (n > SIZE_MAX / sizeof(float))
        return OutOfMemory(std::to_string(n) + " floats do not fit in memory");
      void *block = nullptr;
      if (on_device_) {
        tm_device_buffer *buffer = nullptr;
        if (tm_status s = tm_device_buffer_create(target_, n * sizeof(float), &buffer); s != TM_OK)
          return FromC(s);
        buffer_ = buffer;
        block = tm_device_buffer_data(buffer);
      } else if (n * sizeof(float) >= kMappedBytes) {
        block = mmap(nullptr, n * sizeof(float), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (block == MAP_FAILED)
          return OutOfMemory("cannot map " + std::to_string(n * sizeof(float)) + " bytes");
        mapped_ = true;
      } else if (!(block = std::calloc(n, sizeof(float)))) {
        return OutOfMemory("cannot allocate " + std::to_string(n * sizeof(float)) + " bytes");
      }
      data_ = static_cast<float *>(block);
      capacity_ = n;
    }
    size_ = n;
    return Status::Ok();
  }

  bool on_device() const { return on_device_; }
  float *data() const { return data_; }
  size_t size() const { return size_; }

  // Floats [at, at + n) from host memory; the caller keeps the range inside the array.
  Status Write(size_t at, const float *src, size_t n) {
    if (!on_device_) {
      if (n) std::memcpy(data_ + at, src, n * sizeof(float));
      return Status::Ok();
    }
    return FromC(tm_device_buffer_write(buffer_, at * sizeof(float), src, n * sizeof(float)));
  }
  // Floats [at, at + n) into host memory (on a device, once the work before is done).
  Status Read(size_t at, size_t n, float *dst) const {
    if (!on_device_) {
      if (n) std::memcpy(dst, data_ + at, n * sizeof(float));
      return Status::Ok();
    }
    return FromC(tm_device_buffer_read(buffer_, at * sizeof(float), dst, n * sizeof(float)));
  }
  // Zeros over floats [at, at + n).
  Status Zero(size_t at, size_t n) {
    if (!on_device_) {
      if (n) std::memset(data_ + at, 0, n * sizeof(float));
      return Status::Ok();
    }
    return FromC(tm_device_buffer_fill(buffer_, at * sizeof(float), 0, n * sizeof(float)));
  }
  // Floats [at, at + n) from src's [src_at, src_at + n): on the device when both are there.
  Status CopyFrom(size_t at, const Floats &src, size_t src_at, size_t n) {
    if (on_device_ && src.on_device_)
      return FromC(tm_device_buffer_copy(buffer_, at * sizeof(float), src.buffer_,
                                         src_at * sizeof(float), n * sizeof(float)));
    if (!src.on_device_) return Write(at, src.data_ + src_at, n);
    return src.Read(src_at, n, data_ + at);
  }

 private:
  void Release() {
    if (buffer_) {
      tm_device_buffer_destroy(buffer_);
    } else if (mapped_) {
      munmap(data_, capacity_ * sizeof(float));
    } else {
      std::free(data_);
    }
    buffer_ = nullptr;
    data_ = nullptr;
    size_ = capacity_ = 0;
    mapped_ = false;
  }

  static constexpr size_t kMappedBytes = size_t{128} << 10;

  float *data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  tm_device_buffer *buffer_ = nullptr;  // when on_device_
  bool on_device_ = false;
  tm_target target_ = TM_TARGET_CPU;
  bool mapped_ = false;  // host memory from mmap (else calloc)
};

}  // namespace tinymlir::gpt2
