// A float array the model's programs read or write (activations, the KV cache): host
// memory, or, when the programs run on the GPU, CUDA managed memory (tm_process_managed_alloc),
// which tm_invoke hands to the kernels in place. In host memory, every GPU call would copy
// each tensor into fresh managed memory before the call and out after it, the whole
// attended KV cache included, and the device would fault every one of those pages in.
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
      managed_ = other.managed_;
      mapped_ = std::exchange(other.mapped_, false);
    }
    return *this;
  }

  // Where the array lives from now on: managed memory, or host memory (the default). Drops
  // the contents.
  void set_managed(bool managed) {
    Release();
    managed_ = managed;
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
      if (managed_) {
        if (tm_status s = tm_process_managed_alloc(n * sizeof(float), &block); s != TM_OK) return FromC(s);
        std::memset(block, 0, n * sizeof(float));
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

  bool managed() const { return managed_; }
  float *data() const { return data_; }
  size_t size() const { return size_; }
  float &operator[](size_t i) const { return data_[i]; }

 private:
  void Release() {
    if (managed_) {
      tm_process_managed_free(data_);
    } else if (mapped_) {
      munmap(data_, capacity_ * sizeof(float));
    } else {
      std::free(data_);
    }
    data_ = nullptr;
    size_ = capacity_ = 0;
    mapped_ = false;
  }

  static constexpr size_t kMappedBytes = size_t{128} << 10;

  float *data_ = nullptr;
  size_t size_ = 0, capacity_ = 0;
  bool managed_ = false;
  bool mapped_ = false;  // host memory from mmap (else calloc)
};

}  // namespace tinymlir::gpt2
