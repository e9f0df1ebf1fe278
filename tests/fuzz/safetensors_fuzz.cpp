// The safetensors reader on arbitrary bytes (SafetensorsFile::FromBytes, the same
// validation as Open on a mapped file). Accepted files must keep the reader's promises:
// every tensor lies inside the data section, spans do not overlap, sizes agree with
// shapes, and every tensor converts to F32. Refused ones are TM_ERROR_IO with a short,
// valid UTF-8 message.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "gpt2/src/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

using tinymlir::gpt2::SafetensorsDtypeSize;
using tinymlir::gpt2::SafetensorsFile;
using tinymlir::gpt2::Status;
using tinymlir::gpt2::TensorInfo;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  std::unique_ptr<SafetensorsFile> file;
  const Status s = SafetensorsFile::FromBytes("fuzz", data, size, &file);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == TM_ERROR_IO, s.message());
    FUZZ_CHECK(file == nullptr, "a failed open produced a file");
    tinymlir::fuzz::CheckMessage(s.message());
    return 0;
  }
  FUZZ_CHECK(size >= 8, "accepted a file without a header length");
  uint64_t header_len = 0;
  std::memcpy(&header_len, data, 8);  // little-endian host, as the reader assumes
  FUZZ_CHECK(header_len <= size - 8, "header length past the end");
  const uint64_t data_size = size - 8 - header_len;

  const std::vector<std::string> &names = file->names();
  std::vector<std::tuple<uint64_t, uint64_t>> spans;
  for (size_t i = 0; i < names.size(); ++i) {
    FUZZ_CHECK(i == 0 || names[i - 1] < names[i], "names not sorted and unique");
    FUZZ_CHECK(names[i] != "__metadata__", "__metadata__ listed as a tensor");
    const TensorInfo *info = file->Find(names[i]);
    FUZZ_CHECK(info != nullptr && info->name == names[i], names[i]);
    FUZZ_CHECK(info->data_begin <= data_size && info->nbytes <= data_size - info->data_begin,
               names[i] + ": span outside the data section");
    uint64_t elements = 1;
    for (int64_t d : info->shape) {
      FUZZ_CHECK(d >= 0, names[i] + ": negative dimension");
      elements *= static_cast<uint64_t>(d);  // no overflow: checked against the span below
    }
    FUZZ_CHECK(elements * SafetensorsDtypeSize(info->dtype) == info->nbytes,
               names[i] + ": shape and span disagree");
    FUZZ_CHECK(static_cast<uint64_t>(info->num_elements()) == elements, names[i]);
    if (info->nbytes > 0) spans.emplace_back(info->data_begin, info->data_begin + info->nbytes);

    std::vector<float> values;
    const Status r = file->ReadAsF32(names[i], &values);
    FUZZ_CHECK(r.ok(), r.message());
    FUZZ_CHECK(values.size() == elements, names[i] + ": wrong number of values");
  }
  std::sort(spans.begin(), spans.end());
  for (size_t i = 1; i < spans.size(); ++i)
    FUZZ_CHECK(std::get<0>(spans[i]) >= std::get<1>(spans[i - 1]), "overlapping spans");
  FUZZ_CHECK(file->Find("__metadata__") == nullptr, "__metadata__ found as a tensor");
  return 0;
}
