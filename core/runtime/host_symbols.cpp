#include "core/runtime/host_symbols.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "core/runtime/guarded_call.h"
#include "core/runtime/parallel_for.h"
#include "core/support/fork_safe_once.h"

extern "C" void tm_rt_memref_copy(int64_t elem_size, void *src_arg, void *dst_arg) {
  struct Unranked {
    int64_t rank;
    void *descriptor;
  };
  struct Ranked {  // the fixed head of a strided memref descriptor; sizes, strides follow
    char *base;
    char *data;
    int64_t offset;
  };
  const auto *src = static_cast<const Unranked *>(src_arg);
  const auto *dst = static_cast<const Unranked *>(dst_arg);
  const int64_t rank = src->rank;
  const auto *s = static_cast<const Ranked *>(src->descriptor);
  const auto *d = static_cast<const Ranked *>(dst->descriptor);
  const int64_t *sizes = reinterpret_cast<const int64_t *>(s + 1);
  const int64_t *src_strides = sizes + rank;
  const int64_t *dst_strides = reinterpret_cast<const int64_t *>(d + 1) + rank;
  for (int64_t i = 0; i < rank; ++i)
    if (sizes[i] == 0) return;
  const char *from = s->data + s->offset * elem_size;
  char *to = d->data + d->offset * elem_size;
  if (rank == 0) {
    std::memcpy(to, from, static_cast<size_t>(elem_size));
    return;
  }
  // Odometer over the index space; the innermost dimension is copied in one memcpy when
  // both sides are contiguous along it.
  const int64_t inner = rank - 1;
  const bool contiguous = src_strides[inner] == 1 && dst_strides[inner] == 1;
  std::vector<int64_t> index(static_cast<size_t>(rank), 0);
  for (;;) {
    int64_t so = 0, doff = 0;
    for (int64_t i = 0; i < inner; ++i) {
      so += index[i] * src_strides[i];
      doff += index[i] * dst_strides[i];
    }
    if (contiguous) {
      std::memmove(to + doff * elem_size, from + so * elem_size,
                   static_cast<size_t>(sizes[inner] * elem_size));
    } else {
      for (int64_t j = 0; j < sizes[inner]; ++j)
        std::memmove(to + (doff + j * dst_strides[inner]) * elem_size,
                     from + (so + j * src_strides[inner]) * elem_size, static_cast<size_t>(elem_size));
    }
    int64_t dim = inner - 1;
    while (dim >= 0 && ++index[dim] == sizes[dim]) index[dim--] = 0;
    if (dim < 0) return;
  }
}

// libgcc's f16 <-> f32 conversions (GCC 12). LLVM calls them where the CPU has no F16C;
// they are not visible to the compiler's check of the lowered module, since code generation
// adds them.
extern "C" float __extendhfsf2(_Float16);
extern "C" _Float16 __truncsfhf2(float);

namespace tinymlir {

// External functions every device's host code may call, by the addresses this library
// links against. The linker must not depend on a process-global symbol search: a host that
// loads libtinymlir with RTLD_LOCAL (Python does) hides libm from such a search.
static ForkSafeOnce<const std::unordered_map<std::string, void *> *> host_symbols;

const std::unordered_map<std::string, void *> &HostSymbols() {
  return *host_symbols.Get([] {
    return new std::unordered_map<std::string, void *>{
        {"tm_rt_parallel_for", reinterpret_cast<void *>(&tm_rt_parallel_for)},
        {"memrefCopy", reinterpret_cast<void *>(&tm_rt_memref_copy)},
        // Temporaries go through the engine's guarded allocator (core/runtime/guarded_call.h):
        // a failed allocation becomes TM_ERROR_OUT_OF_MEMORY instead of a write through NULL.
        {"malloc", reinterpret_cast<void *>(&tm_rt_malloc)},
        {"free", reinterpret_cast<void *>(&tm_rt_free)},
        {"aligned_alloc", reinterpret_cast<void *>(&tm_rt_aligned_alloc)},
        {"calloc", reinterpret_cast<void *>(&tm_rt_calloc)},
        {"memcpy", reinterpret_cast<void *>(&::memcpy)},
        {"memmove", reinterpret_cast<void *>(&::memmove)},
        {"memset", reinterpret_cast<void *>(&::memset)},
#define TM_LIBM(name)                                                                 \
  {#name "f", reinterpret_cast<void *>(static_cast<float (*)(float)>(&::name##f))}, \
      {#name, reinterpret_cast<void *>(static_cast<double (*)(double)>(&::name))}
        TM_LIBM(exp), TM_LIBM(expm1), TM_LIBM(exp2), TM_LIBM(log), TM_LIBM(log1p),
        TM_LIBM(log2), TM_LIBM(log10), TM_LIBM(tanh), TM_LIBM(erf), TM_LIBM(sqrt),
        TM_LIBM(fabs), TM_LIBM(sin), TM_LIBM(cos), TM_LIBM(floor), TM_LIBM(ceil),
        TM_LIBM(round), TM_LIBM(trunc),
#undef TM_LIBM
        {"powf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::powf))},
        {"fmaf", reinterpret_cast<void *>(static_cast<float (*)(float, float, float)>(&::fmaf))},
        {"fma", reinterpret_cast<void *>(static_cast<double (*)(double, double, double)>(&::fma))},
        {"pow", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::pow))},
        {"fmaxf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::fmaxf))},
        {"fminf", reinterpret_cast<void *>(static_cast<float (*)(float, float)>(&::fminf))},
        {"fmax", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::fmax))},
        {"fmin", reinterpret_cast<void *>(static_cast<double (*)(double, double)>(&::fmin))},
        {"__extendhfsf2", reinterpret_cast<void *>(&__extendhfsf2)},
        {"__truncsfhf2", reinterpret_cast<void *>(&__truncsfhf2)},
    };
  });
}

}  // namespace tinymlir
