#include "gpt2/src/safetensors.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <fstream>
#include <limits>

#include <sys/stat.h>

#include "tests/gpt2/bounded_child.h"

#if !defined(TM_TEST_DATA_DIR) || !defined(TM_MODELS_DIR)
#error "the build defines TM_TEST_DATA_DIR and TM_MODELS_DIR (tests/CMakeLists.txt)"
#endif

namespace tinymlir::gpt2 {
namespace {

// Plain GoogleTest (no gmock): passes when `text` contains `needle`, else shows both.
::testing::AssertionResult Contains(const std::string &text, const std::string &needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << needle << "\"";
}

// Writes hand-made checkpoints into a fresh directory removed at the end of the test.
class SafetensorsCorruptTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tm_safetensors_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string &f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }

  std::string WriteRaw(const std::string &bytes) {
    const std::string path = dir_ + "/f" + std::to_string(files_.size()) + ".safetensors";
    std::ofstream(path, std::ios::binary).write(bytes.data(), bytes.size());
    files_.push_back(path);
    return path;
  }
  // Header length field, header text, then `data_bytes` bytes of data.
  std::string Write(const std::string &header, size_t data_bytes, uint64_t header_len) {
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(header_len >> (8 * i)));
    bytes += header;
    bytes.append(data_bytes, '\0');
    return WriteRaw(bytes);
  }
  std::string Write(const std::string &header, size_t data_bytes) {
    return Write(header, data_bytes, header.size());
  }
  // Opens `path` expecting TM_ERROR_IO with `needle` in the message.
  void ExpectIoError(const std::string &path, const std::string &needle) {
    std::unique_ptr<SafetensorsFile> file;
    Status s = SafetensorsFile::Open(path, &file);
    EXPECT_EQ(s.code(), TM_ERROR_IO) << s.message();
    EXPECT_TRUE(Contains(s.message(), needle));
    EXPECT_EQ(file, nullptr);
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST(SafetensorsTest, OpensTinyAF32) {
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::Open(TM_TEST_DATA_DIR "/tiny-a/model.safetensors", &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(file->names().size(), 28u);
  EXPECT_TRUE(std::is_sorted(file->names().begin(), file->names().end()));
  EXPECT_EQ(file->Find("__metadata__"), nullptr);
  EXPECT_EQ(file->Find("wte.weight"), nullptr);

  const TensorInfo *wte = file->Find("transformer.wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->dtype, SafetensorsDtype::kF32);
  EXPECT_EQ(wte->shape, (std::vector<int64_t>{512, 32}));
  EXPECT_EQ(wte->nbytes, 512u * 32 * 4);
  EXPECT_EQ(wte->num_elements(), 512 * 32);
  const TensorInfo *attn = file->Find("transformer.h.0.attn.c_attn.weight");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->shape, (std::vector<int64_t>{32, 96}));

  std::vector<float> values;
  ASSERT_TRUE(file->ReadAsF32("transformer.wte.weight", &values).ok());
  ASSERT_EQ(values.size(), 512u * 32);
  EXPECT_EQ(values[0], -0.45767879486083984f);
  EXPECT_EQ(values[1], -0.2250695526599884f);
  ASSERT_TRUE(file->ReadAsF32("transformer.ln_f.weight", &values).ok());
  ASSERT_EQ(values.size(), 32u);
  EXPECT_EQ(values[0], 0.9553857445716858f);

  s = file->ReadAsF32("transformer.nope", &values);
  EXPECT_EQ(s.code(), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_TRUE(Contains(s.message(), "transformer.nope"));
}

TEST(SafetensorsTest, OpensKjvTinyF16) {
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::Open(TM_MODELS_DIR "/kjv-tiny/model.safetensors", &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(file->names().size(), 52u);
  const TensorInfo *wte = file->Find("wte.weight");
  ASSERT_NE(wte, nullptr);
  EXPECT_EQ(wte->dtype, SafetensorsDtype::kF16);
  EXPECT_EQ(wte->shape, (std::vector<int64_t>{50257, 128}));
  const TensorInfo *wpe = file->Find("wpe.weight");
  ASSERT_NE(wpe, nullptr);
  EXPECT_EQ(wpe->shape, (std::vector<int64_t>{256, 128}));
  const TensorInfo *attn = file->Find("h.0.attn.c_attn.weight");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->shape, (std::vector<int64_t>{128, 384}));

  std::vector<float> values;
  ASSERT_TRUE(file->ReadAsF32("h.0.attn.c_attn.weight", &values).ok());
  ASSERT_EQ(values.size(), 128u * 384);
  EXPECT_EQ(values[0], -0.06976318359375f);  // 0xAC77
  EXPECT_EQ(values[1], 0.1788330078125f);    // 0x31B9
  EXPECT_EQ(values[3], 0.0088958740234375f);  // 0x208E
  ASSERT_TRUE(file->ReadAsF32("ln_f.weight", &values).ok());
  EXPECT_EQ(values[0], 2.783203125f);
}

TEST(SafetensorsTest, F16KnownBitPatterns) {
  EXPECT_EQ(F16BitsToF32(0x3C00), 1.0f);
  EXPECT_EQ(F16BitsToF32(0xC000), -2.0f);
  EXPECT_EQ(F16BitsToF32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16BitsToF32(0xFC00), -std::numeric_limits<float>::infinity());
  EXPECT_EQ(F16BitsToF32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(F16BitsToF32(0x03FF), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(F16BitsToF32(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(F16BitsToF32(0x7BFF), 65504.0f);
  EXPECT_TRUE(std::isnan(F16BitsToF32(0x7E00)));
  EXPECT_TRUE(std::isnan(F16BitsToF32(0x7C01)));
  const float neg_zero = F16BitsToF32(0x8000);
  EXPECT_EQ(neg_zero, 0.0f);
  EXPECT_TRUE(std::signbit(neg_zero));
}

TEST(SafetensorsTest, F16MatchesReferenceForEveryPattern) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const int exp = (h >> 10) & 0x1f;
    const int mant = h & 0x3ff;
    const float sign = (h & 0x8000) ? -1.0f : 1.0f;
    const float got = F16BitsToF32(static_cast<uint16_t>(h));
    if (exp == 0x1f) {
      EXPECT_EQ(std::isnan(got), mant != 0) << std::hex << h;
      if (mant == 0) {
        EXPECT_EQ(got, sign * std::numeric_limits<float>::infinity());
      }
      continue;
    }
    const float want = exp == 0 ? sign * std::ldexp(static_cast<float>(mant), -24)
                                : sign * std::ldexp(1.0f + mant / 1024.0f, exp - 15);
    ASSERT_EQ(got, want) << "bits 0x" << std::hex << h;
  }
}

TEST(SafetensorsTest, BF16IsUpperHalfOfF32) {
  EXPECT_EQ(BF16BitsToF32(0x3F80), 1.0f);
  EXPECT_EQ(BF16BitsToF32(0xC000), -2.0f);
  EXPECT_EQ(BF16BitsToF32(0x7F80), std::numeric_limits<float>::infinity());
  EXPECT_EQ(BF16BitsToF32(0x0001), std::ldexp(1.0f, -133));
  EXPECT_TRUE(std::isnan(BF16BitsToF32(0x7FC0)));
  for (uint32_t b = 0; b < 0x10000; b += 257) {
    const uint32_t bits = b << 16;
    float want;
    std::memcpy(&want, &bits, 4);
    const float got = BF16BitsToF32(static_cast<uint16_t>(b));
    EXPECT_EQ(std::memcmp(&got, &want, 4), 0) << std::hex << b;
  }
}

TEST_F(SafetensorsCorruptTest, ReadsHandMadeF16Bf16AndMetadata) {
  // Odd header length, so the data section is unaligned.
  const std::string header =
      R"({"__metadata__":{"format":"pt"},)"
      R"("h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[4,8]},)"
      R"("e":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]}})";
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(header.size() >> (8 * i)));
  bytes += header;
  for (uint16_t v : {0x3C00, 0x0001, 0x3F80, 0xC000}) {
    bytes.push_back(static_cast<char>(v & 0xff));
    bytes.push_back(static_cast<char>(v >> 8));
  }
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::Open(WriteRaw(bytes), &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(file->names(), (std::vector<std::string>{"b", "e", "h"}));
  std::vector<float> values;
  ASSERT_TRUE(file->ReadAsF32("h", &values).ok());
  EXPECT_EQ(values, (std::vector<float>{1.0f, std::ldexp(1.0f, -24)}));
  ASSERT_TRUE(file->ReadAsF32("b", &values).ok());
  EXPECT_EQ(values, (std::vector<float>{1.0f, -2.0f}));
  ASSERT_TRUE(file->ReadAsF32("e", &values).ok());
  EXPECT_TRUE(values.empty());
  EXPECT_EQ(file->Find("b")->dtype, SafetensorsDtype::kBF16);
}

TEST_F(SafetensorsCorruptTest, MissingFile) {
  ExpectIoError(dir_ + "/does-not-exist.safetensors", "does-not-exist.safetensors");
}

TEST_F(SafetensorsCorruptTest, FileShorterThanEightBytes) {
  ExpectIoError(WriteRaw(std::string("\x02\0\0\0", 4)), "truncated: 4 bytes");
  ExpectIoError(WriteRaw(""), "truncated: 0 bytes");
}

TEST_F(SafetensorsCorruptTest, HeaderLengthLargerThanFile) {
  ExpectIoError(Write("{}", 0, 1000), "header length 1000 exceeds");
  ExpectIoError(Write("{}", 0, ~uint64_t{0}), "header length 18446744073709551615 exceeds");
}

TEST_F(SafetensorsCorruptTest, BadHeaderLength) {
  ExpectIoError(Write("{}", 16, 0), "bad header length 0");
  ExpectIoError(Write("{}", 16, 1), "bad header length 1");
}

TEST_F(SafetensorsCorruptTest, BadJson) {
  ExpectIoError(Write(R"({"a":{"dtype":"F32",)", 0), "header is not valid JSON");
  ExpectIoError(Write("[1,2]", 0), "header is not a JSON object");
}

TEST_F(SafetensorsCorruptTest, UnknownDtype) {
  ExpectIoError(Write(R"({"w":{"dtype":"I8","shape":[4],"data_offsets":[0,4]}})", 4),
                "tensor 'w': unsupported dtype 'I8'");
  ExpectIoError(Write(R"({"w":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}})", 8),
                "unsupported dtype 'F64'");
}

TEST_F(SafetensorsCorruptTest, MissingOrMalformedFields) {
  ExpectIoError(Write(R"({"w":{"shape":[1],"data_offsets":[0,4]}})", 4), "missing 'dtype'");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","data_offsets":[0,4]}})", 4), "missing 'shape'");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[1]}})", 4), "missing 'data_offsets'");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
                "shape[0] is negative");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[1.5],"data_offsets":[0,4]}})", 4),
                "shape[0] is not a non-negative integer");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0]}})", 4),
                "'data_offsets' must be [begin, end]");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[0],"data_offsets":[4,0]}})", 4),
                "data_offsets begin 4 > end 0");
  ExpectIoError(Write(R"({"w":[1,2]})", 4), "tensor 'w': entry is not a JSON object");
}

TEST_F(SafetensorsCorruptTest, SpanOutsideFile) {
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[16],"data_offsets":[0,64]}})", 16),
                "tensor 'w': data_offsets [0, 64] lie outside the data section of 16 bytes");
}

TEST_F(SafetensorsCorruptTest, ShapeTimesDtypeSizeDiffersFromSpan) {
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,16]}})", 16),
                "tensor 'w': shape [3] x F32 needs 12 bytes but data_offsets span 16 bytes");
  ExpectIoError(Write(R"({"w":{"dtype":"F16","shape":[2,2],"data_offsets":[0,16]}})", 16),
                "needs 8 bytes but data_offsets span 16 bytes");
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296],)"
                      R"("data_offsets":[0,16]}})", 16),
                "needs more than 2^64 bytes");
}

TEST_F(SafetensorsCorruptTest, OverlappingSpans) {
  ExpectIoError(Write(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                      R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})", 24),
                "tensor 'b' data_offsets [8, 24] overlap tensor 'a' data_offsets [0, 16]");
  // Identical spans are an overlap too.
  ExpectIoError(Write(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                      R"("b":{"dtype":"F16","shape":[8],"data_offsets":[0,16]}})", 16),
                "overlap");
}

// ---- Bounded reading -------------------------------------------------------------------

TEST_F(SafetensorsCorruptTest, FifoIsRefusedWithoutBlocking) {
  const std::string path = dir_ + "/fifo.safetensors";
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  files_.push_back(path);
  std::string result;
  EXPECT_TRUE(testing::RunBounded(
      [&] {
        std::unique_ptr<SafetensorsFile> file;
        Status s = SafetensorsFile::Open(path, &file);
        return std::to_string(static_cast<int>(s.code())) + "|" + s.message();
      },
      &result));
  EXPECT_TRUE(Contains(result, std::to_string(TM_ERROR_IO) + "|"));
  EXPECT_TRUE(Contains(result, "not a regular file (a FIFO)"));
}

TEST_F(SafetensorsCorruptTest, DevicesAndDirectoriesAreRefused) {
  ExpectIoError("/dev/zero", "not a regular file (a character device)");
  ExpectIoError(dir_, "not a regular file (a directory)");
}

// Each level of nesting costs the DOM parser about 40 times its 2 bytes of text; the header
// is refused at the first container past the limit instead.
TEST_F(SafetensorsCorruptTest, DeeplyNestedHeaderIsRefused) {
  const std::string deep = std::string(1 << 20, '[') + std::string(1 << 20, ']');
  ExpectIoError(Write("{\"w\":" + deep + "}", 0), "header is JSON nested deeper than 8 levels");
  ExpectIoError(Write("{\"__metadata__\":{\"a\":[[[[[[[[1]]]]]]]]}}", 0),
                "nested deeper than 8 levels");
  // Seven levels under the root are fine for the parser (and then not a tensor entry).
  ExpectIoError(Write("{\"w\":[[[[[[[1]]]]]]]}", 0), "tensor 'w': entry is not a JSON object");
}

// Width is bounded too: a rank past 64 or more than 2^16 tensors is refused by the scan
// before the parser builds anything (a 98 MB header of one shape's zeros once took 2.3 GB).
TEST_F(SafetensorsCorruptTest, WideHeaderIsRefused) {
  std::string zeros;
  for (int i = 0; i < 100000; ++i) zeros += "0,";
  ExpectIoError(Write(R"({"w":{"dtype":"F32","shape":[)" + zeros + R"(0],"data_offsets":[0,0]}})",
                      0),
                "header is JSON array with more than 64 elements");
  std::string entries = "{";
  for (int i = 0; i <= 65536; ++i) entries += "\"t" + std::to_string(i) + "\":0,";
  entries.back() = '}';
  ExpectIoError(Write(entries, 0), "header is JSON object with more than 65536 members");
  // Rank 64 is fine.
  std::string ones;
  for (int i = 0; i < 63; ++i) ones += "1,";
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::Open(
      Write(R"({"w":{"dtype":"F32","shape":[)" + ones + R"(1],"data_offsets":[0,4]}})", 4), &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(file->Find("w")->shape.size(), 64u);
}

// 2^16 tensors, the most a header may have, parse in linear time (a parser callback made
// it quadratic: minutes for this header).
TEST_F(SafetensorsCorruptTest, ManyTensorsParseQuickly) {
  std::string header = "{";
  for (int i = 0; i < 65536; ++i)
    header += "\"t" + std::to_string(i) + R"(":{"dtype":"F32","shape":[1],"data_offsets":[)" +
              std::to_string(4 * i) + "," + std::to_string(4 * i + 4) + "]},";
  header.back() = '}';
  const std::string path = Write(header, 4 * 65536);
  std::string result;
  EXPECT_TRUE(testing::RunBounded(
      [&] {
        std::unique_ptr<SafetensorsFile> file;
        Status s = SafetensorsFile::Open(path, &file);
        return s.ok() ? std::to_string(file->names().size()) : s.message();
      },
      &result, 20));
  EXPECT_EQ(result, "65536");
}

// Messages quote at most an excerpt of what the file holds, as valid UTF-8.
TEST_F(SafetensorsCorruptTest, MessagesQuoteShortValidExcerpts) {
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::Open(
      Write("{\"" + std::string(100000, 'n') + "\":{\"dtype\":\"" + std::string(5000, 'X') +
                "\",\"shape\":[1],\"data_offsets\":[0,4]}}",
            4),
      &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_LT(s.message().size(), 500u) << s.message().substr(0, 500);
  EXPECT_TRUE(Contains(s.message(), "unsupported dtype 'XXXX"));
  EXPECT_TRUE(Contains(s.message(), "nnn..."));
  std::string offsets;  // 60 long numbers: within the width limit, too long to quote
  for (int i = 0; i < 60; ++i) offsets += "1000000000000000000,";
  s = SafetensorsFile::Open(
      Write("{\"w\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[" + offsets +
                "4]}}", 4),
      &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_LT(s.message().size(), 500u) << s.message().substr(0, 500);
  EXPECT_TRUE(Contains(s.message(), "got [1000000000000000000,1000000000000000000,"));
  EXPECT_TRUE(Contains(s.message(), "..."));
  // Raw bytes of a malformed header are escaped.
  s = SafetensorsFile::Open(Write("{\"w\":\x01\xff}", 0), &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_EQ(s.message().find('\xff'), std::string::npos) << s.message();
}

TEST_F(SafetensorsCorruptTest, FromBytesValidatesLikeOpen) {
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  std::string bytes;
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(header.size() >> (8 * i)));
  bytes += header;
  const float values[2] = {1.5f, -2.0f};
  bytes.append(reinterpret_cast<const char *>(values), sizeof values);
  std::unique_ptr<SafetensorsFile> file;
  Status s = SafetensorsFile::FromBytes("mem", bytes.data(), bytes.size(), &file);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(file->path(), "mem");
  std::vector<float> got;
  ASSERT_TRUE(file->ReadAsF32("a", &got).ok());
  EXPECT_EQ(got, (std::vector<float>{1.5f, -2.0f}));
  // Reading twice gives the same values: a copy's pages are never dropped.
  ASSERT_TRUE(file->ReadAsF32("a", &got).ok());
  EXPECT_EQ(got, (std::vector<float>{1.5f, -2.0f}));

  s = SafetensorsFile::FromBytes("mem", bytes.data(), 7, &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "safetensors file 'mem': truncated: 7 bytes"));
  s = SafetensorsFile::FromBytes("mem", bytes.data(), bytes.size() - 1, &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "lie outside the data section of 7 bytes"));
  s = SafetensorsFile::FromBytes("mem", nullptr, 0, &file);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
}

}  // namespace
}  // namespace tinymlir
