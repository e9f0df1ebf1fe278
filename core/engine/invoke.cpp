// Program::Invoke: check every caller tensor against the specialisation, keep the
// `restrict` promise (copy overlapping inputs), make strided tensors contiguous, check
// gather indices, then call the linked kernel with ranked memref descriptors.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/engine/device_buffers.h"
#include "core/runtime/device.h"
#include "core/engine/program.h"

namespace tinymlir {
namespace {

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};
using Buffer = std::unique_ptr<uint8_t, FreeDeleter>;

// A caller tensor after checking: element strides (never NULL) and its byte range. Fixed
// arrays (a program's rank is at most kMaxRank), so that checking, copying and describing
// a tensor allocates nothing: an invoke of a GPT-2 step program, some twenty tensors, made
// about 150 small allocations before, 3-5% of a kjv-tiny decode step.
struct View {
  uint8_t *data;
  int rank;
  int64_t shape[kMaxRank];
  int64_t strides[kMaxRank];
  size_t elem;
  bool contiguous;
  uintptr_t lo, hi;  // [lo, hi) bytes touched; lo == hi for empty tensors

  Shape ShapeVector() const { return Shape(shape, shape + rank); }
  Shape StridesVector() const { return Shape(strides, strides + rank); }
  int64_t NumElements() const {
    int64_t n = 1;
    for (int d = 0; d < rank; ++d) n *= shape[d];
    return n;
  }
  // Row-major strides for this shape.
  void ContiguousStrides(int64_t *out) const {
    int64_t step = 1;
    for (int d = rank; d-- > 0;) {
      out[d] = step;
      step *= shape[d];
    }
  }
};

// Copies v's elements (its shape and element size) between two strided layouts.
void CopyStrided(const uint8_t *src, const int64_t *src_strides, uint8_t *dst,
                 const int64_t *dst_strides, const View &v) {
  const int rank = v.rank;
  if (v.NumElements() == 0) return;
  const int64_t elem = static_cast<int64_t>(v.elem);
  int64_t index[kMaxRank] = {};
  while (true) {
    int64_t so = 0, d = 0;
    for (int i = 0; i < rank; ++i) {
      so += index[i] * src_strides[i];
      d += index[i] * dst_strides[i];
    }
    std::memcpy(dst + d * elem, src + so * elem, v.elem);
    int i = rank;
    while (i > 0 && ++index[i - 1] == v.shape[i - 1]) index[--i] = 0;
    if (i == 0) return;
  }
}

// A q8_0 tensor as the compiled code takes it: its bytes, (..., k / 32, 34), dense (strides
// in elements mean nothing inside a block, so only NULL or the dense strides are taken).
Status DescribeBlocks(const std::string &name, const TensorView &t, View *view) {
  int64_t dense[kMaxRank];
  view->ContiguousStrides(dense);
  if (t.strides && !std::equal(t.strides, t.strides + t.rank, dense))
    return InvalidArgument(name + " is q8_0 with strides " +
                           ShapeToString(Shape(t.strides, t.strides + t.rank)) +
                           "; q8_0 tensors are dense blocks (pass NULL strides)");
  if (view->rank + 1 > kMaxRank)  // a traced program's q8_0 inputs have rank < kMaxRank
    return ShapeError(name + " is q8_0 with rank " + std::to_string(view->rank) +
                      ", above the maximum of " + std::to_string(kMaxRank - 1));
  view->shape[view->rank - 1] /= kQ8BlockElements;
  view->shape[view->rank++] = kQ8BlockBytes;
  view->elem = 1;
  view->ContiguousStrides(view->strides);
  view->contiguous = true;
  view->data = static_cast<uint8_t *>(t.data);
  const auto base = reinterpret_cast<uintptr_t>(t.data);
  view->lo = base;
  view->hi = base + view->NumElements();
  return Status::Ok();
}

Status CheckTensor(const char *what, int i, const TensorView &t, const TensorType &want,
                   View *view) {
  // The tensor's name, built only for a message.
  auto name = [&] { return std::string(what) + " " + std::to_string(i); };
  if (t.dtype != want.dtype)
    return DtypeError(name() + " has dtype " +
                      (IsValidDtype(t.dtype) ? DtypeName(t.dtype)
                                             : std::to_string(static_cast<int>(t.dtype))) +
                      ", the program expects " + want.ToString());
  if (t.rank != want.rank())
    return ShapeError(name() + " has rank " + std::to_string(t.rank) +
                      ", the program expects " + want.ToString());
  if (t.rank > 0 && !t.shape)
    return InvalidArgument(name() + " has rank " + std::to_string(t.rank) +
                           " but a NULL shape");
  if (t.rank > kMaxRank)  // no traced program has such a rank; a file's is refused on load
    return ShapeError(name() + " has rank " + std::to_string(t.rank) +
                      ", above the maximum of " + std::to_string(kMaxRank));
  view->rank = t.rank;
  for (int d = 0; d < t.rank; ++d) view->shape[d] = t.shape[d];
  if (!std::equal(t.shape, t.shape + t.rank, want.shape.begin()))
    return ShapeError(name() + " has shape " + ShapeToString(view->ShapeVector()) +
                      ", the program expects " + want.ToString());
  int64_t n = view->NumElements();
  if (!t.data && n > 0) return InvalidArgument(name() + " has NULL data");
  if (IsQuantized(want.dtype)) return DescribeBlocks(name(), t, view);
  view->elem = DtypeSize(want.dtype);
  int64_t contiguous[kMaxRank];
  view->ContiguousStrides(contiguous);
  for (int d = 0; d < t.rank; ++d) view->strides[d] = t.strides ? t.strides[d] : contiguous[d];
  view->contiguous = true;
  for (int d = 0; d < t.rank; ++d)
    if (view->shape[d] > 1 && view->strides[d] != contiguous[d]) view->contiguous = false;
  view->data = static_cast<uint8_t *>(t.data);
  // Byte range: the lowest and highest element addresses reached by the strides.
  int64_t lo = 0, hi = 0;
  for (int d = 0; d < t.rank; ++d) {
    int64_t extent = (view->shape[d] - 1) * view->strides[d];
    (extent < 0 ? lo : hi) += extent;
  }
  auto base = reinterpret_cast<uintptr_t>(t.data);
  if (n == 0) {
    view->lo = view->hi = base;
  } else {
    view->lo = base + lo * static_cast<int64_t>(view->elem);
    view->hi = base + (hi + 1) * static_cast<int64_t>(view->elem);
  }
  return Status::Ok();
}

// An output whose strides map two indices to one element (a zero stride on a dimension
// longer than 1, say) would be written twice: refused. Dimensions sorted by stride must
// each step over the whole extent of the ones inside them.
Status CheckOutputLayout(int i, const View &v) {
  if (v.NumElements() == 0) return Status::Ok();  // no element to write twice
  std::pair<int64_t, int64_t> dims[kMaxRank];  // (|stride|, size) of dims longer than 1
  int n = 0;
  for (int d = 0; d < v.rank; ++d)
    if (v.shape[d] > 1) dims[n++] = {v.strides[d] < 0 ? -v.strides[d] : v.strides[d], v.shape[d]};
  for (int a = 1; a < n; ++a)  // insertion sort: at most kMaxRank entries
    for (int b = a; b > 0 && dims[b] < dims[b - 1]; --b) std::swap(dims[b], dims[b - 1]);
  int64_t extent = 1;  // elements spanned by the dims inside the current one
  for (int d = 0; d < n; ++d) {
    const auto [stride, size] = dims[d];
    if (stride < extent)
      return InvalidArgument("output " + std::to_string(i) + " has strides under which "
                             "elements overlap (shape " + ShapeToString(v.ShapeVector()) +
                             ", strides " + ShapeToString(v.StridesVector()) + ")");
    extent = stride * size;
  }
  return Status::Ok();
}

// Bool tensors hold bytes 0 or 1; anything else is not a bool.
Status CheckBoolBytes(int i, const View &v) {
  const int64_t n = v.NumElements();
  int64_t index[kMaxRank] = {};
  for (int64_t k = 0; k < n; ++k) {
    int64_t offset = 0;
    for (int d = 0; d < v.rank; ++d) offset += index[d] * v.strides[d];
    const uint8_t byte = v.data[offset];
    if (byte > 1)
      return InvalidArgument("input " + std::to_string(i) + " (bool) holds the byte " +
                             std::to_string(byte) + " at element " + std::to_string(k) +
                             "; bools must be 0 or 1");
    for (int d = v.rank; d-- > 0;) {
      if (++index[d] < v.shape[d]) break;
      index[d] = 0;
    }
  }
  return Status::Ok();
}

// Empty tensors touch no memory and overlap nothing.
bool Overlap(const View &a, const View &b) {
  return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi;
}

Status Allocate(size_t bytes, Buffer *out) {
  size_t rounded = ((bytes + 63) / 64) * 64;
  void *p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  if (!p) return OutOfMemory("cannot allocate " + std::to_string(bytes) + " bytes");
  out->reset(static_cast<uint8_t *>(p));
  return Status::Ok();
}

// A contiguous private copy of a view (for strided or aliased inputs).
Status CopyToContiguous(View *v, std::vector<Buffer> *keep) {
  Buffer buffer;
  TM_RETURN_IF_ERROR(Allocate(v->NumElements() * v->elem, &buffer));
  int64_t contiguous[kMaxRank];
  v->ContiguousStrides(contiguous);
  CopyStrided(v->data, v->strides, buffer.get(), contiguous, *v);
  v->data = buffer.get();
  std::copy(contiguous, contiguous + v->rank, v->strides);
  v->contiguous = true;
  keep->push_back(std::move(buffer));
  return Status::Ok();
}

// Whether `v` lies in a device buffer the host cannot read, checking what such a tensor
// must be (device_buffers.h): inside the buffer, on the program's own device, contiguous.
// A tensor in a buffer of host memory is like any other host memory.
Status InDeviceMemory(const char *what, int i, const View &v, const Device *device,
                      bool *on_device) {
  *on_device = false;
  bool in = false;
  DeviceBuffer buffer;
  const auto name = [&] { return std::string(what) + " " + std::to_string(i); };
  Status found = FindDeviceBuffer(reinterpret_cast<const void *>(v.lo), v.hi - v.lo, &in, &buffer);
  if (!found.ok()) return Status(found.code(), name() + ": " + found.message());
  if (!in || buffer.device->host_memory()) return Status::Ok();
  if (buffer.device != device)
    return InvalidArgument(name() + " lies in a device buffer of the " + buffer.device->name() +
                           " device, but the program runs on the " + device->name() +
                           " device; pass it in host memory or in a buffer of the program's "
                           "target");
  if (!v.contiguous)
    return InvalidArgument(name() + " lies in device memory and is strided; a tensor in a "
                           "device buffer must be contiguous (row-major)");
  *on_device = true;
  return Status::Ok();
}

// Host work Invoke would do on input i, which a tensor in device memory cannot have.
Status RefuseHostWork(int i, const char *work) {
  return InvalidArgument("input " + std::to_string(i) + " lies in device memory, where the host "
                         "cannot " + work + "; pass it in host memory");
}

Status CheckGatherIndices(const View &v, DType dtype, int input, int64_t rows) {
  int64_t n = v.NumElements();
  for (int64_t i = 0; i < n; ++i) {
    int64_t idx = dtype == DType::kI32 ? reinterpret_cast<const int32_t *>(v.data)[i]
                                  : reinterpret_cast<const int64_t *>(v.data)[i];
    if (idx < 0 || idx >= rows)
      return OutOfRange("input " + std::to_string(input) +
                        " (gather indices) holds " + std::to_string(idx) + " at element " +
                        std::to_string(i) + ", outside the table's " + std::to_string(rows) +
                        " rows");
  }
  return Status::Ok();
}

// The ranked memref descriptor layout: {allocated, aligned, offset, sizes[r], strides[r]},
// every field 8 bytes wide.
struct Descriptor {
  int64_t words[3 + 2 * kMaxRank];
  // v's shape and strides, its elements at `data` (where the device put them).
  Descriptor(const View &v, const uint8_t *data) {
    auto p = static_cast<int64_t>(reinterpret_cast<intptr_t>(data));
    words[0] = words[1] = p;
    words[2] = 0;
    std::copy(v.shape, v.shape + v.rank, words + 3);
    std::copy(v.strides, v.strides + v.rank, words + 3 + v.rank);
  }
};

}  // namespace

Status Program::CheckCounts(int32_t n_in, int32_t n_out) const {
  if (n_in != static_cast<int32_t>(inputs.size()) || n_out != static_cast<int32_t>(outputs.size()))
    return InvalidArgument("the program takes " + std::to_string(inputs.size()) +
                           " inputs and " + std::to_string(outputs.size()) +
                           " outputs, got " + std::to_string(n_in) + " and " +
                           std::to_string(n_out));
  return Status::Ok();
}

Status Program::Invoke(const TensorView *in, int32_t n_in, const TensorView *out,
                       int32_t n_out) const {
  TM_RETURN_IF_ERROR(CheckCounts(n_in, n_out));
  std::vector<View> ins(n_in), outs(n_out);
  for (int i = 0; i < n_in; ++i) TM_RETURN_IF_ERROR(CheckTensor("input", i, in[i], inputs[i], &ins[i]));
  for (int i = 0; i < n_out; ++i)
    TM_RETURN_IF_ERROR(CheckTensor("output", i, out[i], outputs[i], &outs[i]));
  for (int i = 0; i < n_out; ++i) TM_RETURN_IF_ERROR(CheckOutputLayout(i, outs[i]));
  for (int i = 0; i < n_out; ++i)
    for (int j = 0; j < i; ++j)
      if (Overlap(outs[i], outs[j]))
        return InvalidArgument("outputs " + std::to_string(j) + " and " +
                               std::to_string(i) + " overlap in memory");

  if (!bound_device) return RuntimeError("the program is not linked to a device");
  std::vector<bool> in_device_memory(n_in);
  for (int i = 0; i < n_in; ++i) {
    bool on_device = false;
    TM_RETURN_IF_ERROR(InDeviceMemory("input", i, ins[i], bound_device, &on_device));
    in_device_memory[i] = on_device;
    if (inputs[i].dtype != DType::kBool) continue;
    if (on_device) return RefuseHostWork(i, "check that its bools are 0 or 1");
    TM_RETURN_IF_ERROR(CheckBoolBytes(i, ins[i]));
  }
  for (int i = 0; i < n_out; ++i) {
    bool on_device = false;
    TM_RETURN_IF_ERROR(InDeviceMemory("output", i, outs[i], bound_device, &on_device));
  }

  std::vector<Buffer> temporaries;
  for (int i = 0; i < n_in; ++i) {
    bool aliased = !ins[i].contiguous;
    for (int j = 0; j < n_out && !aliased; ++j) aliased = Overlap(ins[i], outs[j]);
    for (int j = 0; j < i && !aliased; ++j) aliased = Overlap(ins[i], ins[j]);
    if (aliased && in_device_memory[i])
      return RefuseHostWork(i, "copy it apart from the tensors it overlaps");
    if (aliased) TM_RETURN_IF_ERROR(CopyToContiguous(&ins[i], &temporaries));
  }
  for (const GatherCheck &g : gather_checks) {
    if (in_device_memory[g.input]) return RefuseHostWork(g.input, "check its gather indices");
    TM_RETURN_IF_ERROR(
        CheckGatherIndices(ins[g.input], inputs[g.input].dtype, g.input, g.table_rows));
  }

  // Strided outputs are computed into a contiguous temporary and scattered afterwards.
  std::vector<View> results = outs;
  for (View &r : results)
    if (!r.contiguous) {
      Buffer buffer;
      TM_RETURN_IF_ERROR(Allocate(r.NumElements() * r.elem, &buffer));
      r.data = buffer.get();
      r.ContiguousStrides(r.strides);
      temporaries.push_back(std::move(buffer));
    }
  // Empty tensors may come with NULL data; the kernel never dereferences them.
  static uint8_t empty_storage[64];
  for (View &v : ins) if (!v.data) v.data = empty_storage;
  for (View &v : results) if (!v.data) v.data = empty_storage;

  // The device makes the tensors reachable by the code (core/runtime/device.h): a host
  // device uses them in place, another stages copies and brings the results back in Finish.
  std::vector<CallBuffer> in_buffers(ins.size()), out_buffers(results.size());
  for (size_t i = 0; i < ins.size(); ++i)
    in_buffers[i] = {ins[i].data, static_cast<uint64_t>(ins[i].NumElements()) * ins[i].elem};
  for (size_t i = 0; i < results.size(); ++i)
    out_buffers[i] = {results[i].data,
                      static_cast<uint64_t>(results[i].NumElements()) * results[i].elem};
  const std::vector<CallBuffer> caller_outputs = out_buffers;
  std::unique_ptr<DeviceCall> call;
  TM_RETURN_IF_ERROR(bound_device->Stage(temporary_bytes, in_buffers.data(), in_buffers.size(),
                                         out_buffers.data(), out_buffers.size(), &call));

  // One descriptor per tensor, each argument a pointer to a pointer to its descriptor.
  const size_t n_args = ins.size() + results.size();
  std::vector<Descriptor> descriptors;
  descriptors.reserve(n_args);
  for (size_t i = 0; i < ins.size(); ++i) descriptors.emplace_back(ins[i], in_buffers[i].data);
  for (size_t i = 0; i < results.size(); ++i)
    descriptors.emplace_back(results[i], out_buffers[i].data);
  std::vector<void *> pointers(2 * n_args);  // [descriptor pointers | argument pointers]
  for (size_t i = 0; i < n_args; ++i) {
    pointers[i] = descriptors[i].words;
    pointers[n_args + i] = &pointers[i];
  }
  TM_RETURN_IF_ERROR(bound_device->Launch(entry, pointers.data() + n_args));
  TM_RETURN_IF_ERROR(
      bound_device->Finish(call.get(), caller_outputs.data(), caller_outputs.size()));

  for (int i = 0; i < n_out; ++i)
    if (!outs[i].contiguous)
      CopyStrided(results[i].data, results[i].strides, outs[i].data, outs[i].strides, outs[i]);
  return Status::Ok();
}

}  // namespace tinymlir
