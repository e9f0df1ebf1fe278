// config.json and the checkpoint's structure: bounded reading (regular files only, size
// caps, nesting limit), integers range-checked in int64 before use, and the layers of the
// safetensors header checked against n_layer before anything is sized from it.
#include "gpt2/src/checkpoint.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/src/bounded_input.h"
#include "gpt2/src/prepared_weights.h"
#include "gpt2/src/safetensors.h"
#include "gpt2/src/weight_memory.h"
#include "tests/gpt2/bounded_child.h"

#if !defined(TM_TEST_DATA_DIR) || !defined(TM_MODELS_DIR)
#error "the build defines TM_TEST_DATA_DIR and TM_MODELS_DIR (tests/CMakeLists.txt)"
#endif

namespace tinymlir::gpt2 {
namespace {

using testing::HasSubstr;
using testing::RunBounded;

constexpr char kTinyA[] = TM_TEST_DATA_DIR "/tiny-a";

// The status of a call, as "code|message", so a bounded child can send it back.
std::string Describe(const Status &s) { return std::to_string(static_cast<int>(s.code())) + "|" + s.message(); }

class Gpt2CheckpointFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tm_checkpoint_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::ifstream in(std::string(kTinyA) + "/config.json");
    config_ = nlohmann::json::parse(in);
  }
  void TearDown() override {
    for (const std::string &f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Path(const std::string &name) {
    const std::string path = dir_ + "/" + name;
    files_.push_back(path);
    return path;
  }
  std::string Write(const std::string &name, const std::string &contents) {
    const std::string path = Path(name);
    std::ofstream(path, std::ios::binary) << contents;
    return path;
  }
  // Reads `path` in a bounded child; returns "code|message".
  std::string ReadConfigBounded(const std::string &path) {
    std::string result;
    EXPECT_TRUE(RunBounded(
        [&] {
          Gpt2Config c;
          return Describe(ReadGpt2Config(path, &c));
        },
        &result));
    return result;
  }

  std::string dir_;
  std::vector<std::string> files_;
  nlohmann::json config_;
};

TEST(Gpt2ConfigTest, ReadsTheShippedConfigs) {
  Gpt2Config c;
  Status s = ReadGpt2Config(std::string(kTinyA) + "/config.json", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.vocab_size, 512);
  EXPECT_EQ(c.n_ctx, 64);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 2);
  EXPECT_EQ(c.n_inner, 128);
  EXPECT_EQ(c.eos_token_id, 511);
  s = ReadGpt2Config(TM_MODELS_DIR "/kjv-tiny/config.json", &c);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(c.vocab_size, 50257);
  EXPECT_EQ(c.n_layer, 4);
  EXPECT_EQ(c.eos_token_id, 50256);
}

TEST(Gpt2ConfigTest, LimitsKeepEverySizeInRange) {
  // The largest products the model computes from a config, in bytes of F32.
  static_assert(kMaxVocabSize * kMaxEmbd * 4 < (int64_t{1} << 40));
  static_assert(kMaxContext * kMaxEmbd * 4 * kMaxLayers < (int64_t{1} << 50));
  static_assert(kMaxEmbd * 3 * kMaxEmbd * 4 < (int64_t{1} << 40));
  static_assert(kMaxEmbd * kMaxInner * 4 < (int64_t{1} << 40));
  static_assert(4 * kMaxEmbd <= kMaxInner);
  static_assert(kMaxInner <= std::numeric_limits<int32_t>::max());
  static_assert(kMaxContext * kMaxContext < std::numeric_limits<int64_t>::max() / 4);
}

TEST_F(Gpt2CheckpointFilesTest, ConfigThatIsAFifoIsRefusedWithoutBlocking) {
  const std::string path = Path("config.json");
  ASSERT_EQ(mkfifo(path.c_str(), 0600), 0);
  const std::string result = ReadConfigBounded(path);
  EXPECT_TRUE(HasSubstr(result, std::to_string(TM_ERROR_IO) + "|"));
  EXPECT_TRUE(HasSubstr(result, "not a regular file (a FIFO)"));
}

TEST_F(Gpt2CheckpointFilesTest, ConfigThatIsADeviceOrASymlinkToOneIsRefused) {
  const std::string link = Path("config.json");
  ASSERT_EQ(symlink("/dev/zero", link.c_str()), 0);
  for (const std::string &path : {std::string("/dev/zero"), link}) {
    const std::string result = ReadConfigBounded(path);
    EXPECT_TRUE(HasSubstr(result, std::to_string(TM_ERROR_IO) + "|"));
    EXPECT_TRUE(HasSubstr(result, "not a regular file (a character device)"));
  }
}

TEST_F(Gpt2CheckpointFilesTest, ConfigThatIsADirectoryIsRefused) {
  Gpt2Config c;
  Status s = ReadGpt2Config(dir_, &c);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "not a regular file (a directory)"));
}

TEST_F(Gpt2CheckpointFilesTest, ConfigLargerThanItsCapIsRefusedBeforeReading) {
  // Sparse: the size is what fstat reports, no disk is used.
  const std::string path = Write("config.json", "");
  ASSERT_EQ(truncate(path.c_str(), static_cast<off_t>(kMaxConfigBytes + 1)), 0);
  Gpt2Config c;
  Status s = ReadGpt2Config(path, &c);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "is 1048577 bytes, more than the limit of 1048576"));
}

TEST_F(Gpt2CheckpointFilesTest, DeeplyNestedConfigIsRefused) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  std::string text = config_.dump();
  text.insert(1, "\"deep\":" + deep + ",");
  const std::string path = Write("config.json", text);
  Gpt2Config c;
  Status s = ReadGpt2Config(path, &c);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "JSON nested deeper than 32 levels"));
  // 32 levels are fine.
  text = config_.dump();
  text.insert(1, "\"deep\":" + std::string(31, '[') + std::string(31, ']') + ",");
  Write("config.json", text);
  s = ReadGpt2Config(path, &c);
  EXPECT_TRUE(s.ok()) << s.message();
}

TEST_F(Gpt2CheckpointFilesTest, IntegersAreRangeCheckedInInt64NamingKeyAndValue) {
  const struct {
    const char *key;
    const char *value;
    tm_status code;
    const char *message;
  } cases[] = {
      // Outside int32: once silently truncated (4294967301 -> 5).
      {"eos_token_id", "4294967301", TM_ERROR_IO,
       "\"eos_token_id\" = 4294967301 is outside the vocabulary [0, 512)"},
      {"eos_token_id", "-2", TM_ERROR_IO, "\"eos_token_id\" = -2 is outside the vocabulary"},
      {"eos_token_id", "512", TM_ERROR_IO, "\"eos_token_id\" = 512 is outside the vocabulary"},
      {"n_layer", "20000000", TM_ERROR_UNSUPPORTED,
       "\"n_layer\" = 20000000 exceeds this implementation's limit of 1024"},
      {"n_layer", "2e7", TM_ERROR_IO, "\"n_layer\" = 20000000.0 is not an integer"},
      {"n_layer", "\"12\"", TM_ERROR_IO, "\"n_layer\" = \"12\" is not an integer"},
      // 4 * n_embd would overflow an int32.
      {"n_embd", "1073741824", TM_ERROR_UNSUPPORTED,
       "\"n_embd\" = 1073741824 exceeds this implementation's limit of 65536"},
      {"vocab_size", "18446744073709551615", TM_ERROR_UNSUPPORTED,
       "\"vocab_size\" = 18446744073709551615 exceeds"},
      {"vocab_size", "4294967808", TM_ERROR_UNSUPPORTED, "\"vocab_size\" = 4294967808 exceeds"},
      {"n_positions", "0", TM_ERROR_IO, "\"n_positions\" = 0 must be a positive integer"},
      {"n_head", "-4", TM_ERROR_IO, "\"n_head\" = -4 must be a positive integer"},
      {"n_head", "2048", TM_ERROR_UNSUPPORTED, "\"n_head\" = 2048 exceeds"},
      {"n_inner", "9223372036854775807", TM_ERROR_UNSUPPORTED,
       "\"n_inner\" = 9223372036854775807 exceeds this implementation's limit of 262144"},
      {"n_inner", "-9223372036854775808", TM_ERROR_IO,
       "\"n_inner\" = -9223372036854775808 must be a positive integer"},
      {"n_ctx", "1e30", TM_ERROR_IO, "not an integer"},
      // A double cannot hold it: refused by the parser, not turned into infinity.
      {"layer_norm_epsilon", "1e400", TM_ERROR_IO, "not valid JSON"},
      {"layer_norm_epsilon", "-1e-5", TM_ERROR_IO,
       "\"layer_norm_epsilon\" = -1e-05 must be a finite non-negative number"},
  };
  for (const auto &c : cases) {
    // Written as text, so that numbers keep their spelling (1e400, 2e7).
    nlohmann::json config = config_;
    config.erase(c.key);
    if (std::string(c.key) == "n_ctx") config.erase("n_positions");
    std::string text = config.dump();
    text.insert(1, "\"" + std::string(c.key) + "\":" + c.value + ",");
    const std::string path = Write("config.json", text);
    Gpt2Config read;
    Status s = ReadGpt2Config(path, &read);
    EXPECT_EQ(s.code(), c.code) << c.key << " = " << c.value << ": " << s.message();
    EXPECT_TRUE(HasSubstr(s.message(), c.message)) << c.key << " = " << c.value;
  }
}

TEST_F(Gpt2CheckpointFilesTest, LimitsAreInclusive) {
  nlohmann::json c = config_;
  c["vocab_size"] = kMaxVocabSize;
  c["n_positions"] = kMaxContext;
  c["n_embd"] = kMaxEmbd;
  c["n_head"] = kMaxHeads;
  c["n_layer"] = kMaxLayers;
  c["n_inner"] = nullptr;
  c["eos_token_id"] = kMaxVocabSize - 1;
  Gpt2Config read;
  Status s = ReadGpt2Config(Write("config.json", c.dump()), &read);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(read.n_inner, kMaxInner);
  EXPECT_EQ(read.eos_token_id, kMaxVocabSize - 1);
}

TEST(Gpt2ConfigTest, ParseMatchesRead) {
  std::ifstream in(std::string(kTinyA) + "/config.json");
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  Gpt2Config parsed, read;
  ASSERT_TRUE(ParseGpt2Config("config.json", text, &parsed).ok());
  ASSERT_TRUE(ReadGpt2Config(std::string(kTinyA) + "/config.json", &read).ok());
  EXPECT_EQ(parsed.vocab_size, read.vocab_size);
  EXPECT_EQ(parsed.n_inner, read.n_inner);
  Status s = ParseGpt2Config("cfg", "[1]", &parsed);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "cfg: not a JSON object"));
  s = ParseGpt2Config("cfg", "{\"vocab_size\":", &parsed);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "cfg: not valid JSON"));
}

// n_layer is checked against the layers the header has before anything is sized from it:
// a config calling for 20 million layers (past the config limit, set directly here) against
// a 2-layer checkpoint is an error naming both, not gigabytes of empty layers.
TEST(Gpt2WeightsTest, LayerCountIsCheckedAgainstTheHeaderBeforeSizing) {
  Gpt2Config c;
  ASSERT_TRUE(ReadGpt2Config(std::string(kTinyA) + "/config.json", &c).ok());
  for (int32_t n_layer : {20000000, 1000, 3}) {
    c.n_layer = n_layer;
    std::string result;
    EXPECT_TRUE(RunBounded(
        [&] {
          Gpt2Weights w;
          return Describe(LoadGpt2Weights(std::string(kTinyA) + "/model.safetensors", c, &w));
        },
        &result))
        << result;
    EXPECT_TRUE(HasSubstr(result, std::to_string(TM_ERROR_IO) + "|"));
    EXPECT_TRUE(HasSubstr(result, "the config calls for " + std::to_string(n_layer) +
                                      " layers (n_layer) but the checkpoint has tensors for 2 "
                                      "(none for transformer.h.2)"));
  }
  // Fewer layers in the config than in the file: the first extra layer is named.
  c.n_layer = 1;
  Gpt2Weights w;
  Status s = LoadGpt2Weights(std::string(kTinyA) + "/model.safetensors", c, &w);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(HasSubstr(s.message(), "unexpected tensor transformer.h.1."));
  EXPECT_TRUE(HasSubstr(s.message(), "for a GPT-2 with 1 layers"));
}

TEST(Gpt2WeightsTest, LoadsTinyAFromAnOpenedFile) {
  Gpt2Config c;
  ASSERT_TRUE(ReadGpt2Config(std::string(kTinyA) + "/config.json", &c).ok());
  std::unique_ptr<SafetensorsFile> file;
  ASSERT_TRUE(SafetensorsFile::Open(std::string(kTinyA) + "/model.safetensors", &file).ok());
  Gpt2Weights w;
  Status s = LoadGpt2Weights(*file, c, &w);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_EQ(w.layers.size(), 2u);
  EXPECT_EQ(w.wte.shape, (std::vector<int64_t>{512, 32}));
  EXPECT_EQ(static_cast<size_t>(w.wte.elements()), 512u * 32);
  EXPECT_EQ(w.layers[1].fc_w.shape, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(static_cast<size_t>(w.layers[1].fc_w.elements()), 32u * 128);
}

// Every tensor LoadGpt2Weights keeps lies in one arena, back to back in the order read
// (wte, wpe, each layer's twelve, ln_f), each on a cache line, the values as in the file.
TEST(Gpt2WeightsTest, TheTensorsLieBackToBackInOneArena) {
  for (tm_dtype matrices : {TM_F32, TM_F16}) {
    Gpt2Config c;
    ASSERT_TRUE(ReadGpt2Config(std::string(kTinyA) + "/config.json", &c).ok());
    c.matrices = matrices;
    Gpt2Weights w;
    Status s = LoadGpt2Weights(std::string(kTinyA) + "/model.safetensors", c, &w);
    ASSERT_TRUE(s.ok()) << s.message();
    std::vector<const Weight *> order = {&w.wte, &w.wpe};
    for (const Gpt2Layer &l : w.layers)
      for (const Weight *x : {&l.ln_1_g, &l.ln_1_b, &l.attn_w, &l.attn_b, &l.attn_proj_w,
                              &l.attn_proj_b, &l.ln_2_g, &l.ln_2_b, &l.fc_w, &l.fc_b,
                              &l.mlp_proj_w, &l.mlp_proj_b})
        order.push_back(x);
    order.push_back(&w.ln_f_g);
    order.push_back(&w.ln_f_b);
    const char *at = static_cast<const char *>(order[0]->host.data());
    for (const Weight *x : order) {
      EXPECT_EQ(static_cast<const char *>(x->host.data()), at) << matrices;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(x->host.data()) % 64, 0u);
      at += HostArena::Space(x->bytes());
    }
    EXPECT_EQ(w.wte.bytes(), 512u * 32 * (matrices == TM_F16 ? 2 : 4));
    EXPECT_EQ(w.ln_f_b.bytes(), 32u * 4);
  }
}

// An arena hands out its mapping in order, 64-byte aligned and zeroed, refuses to go past
// its end (naming the sizes), and its parts keep the mapping alive after it is gone.
TEST(HostArenaTest, TakesInOrderAndItsPartsOutliveIt) {
  HostArray kept;
  {
    HostArena arena;
    ASSERT_TRUE(arena.Allocate(HostArena::Space(70) + HostArena::Space(3 << 20)).ok());
    HostArray a, b, c;
    ASSERT_TRUE(arena.Take(70, &a).ok());
    ASSERT_TRUE(arena.Take(3 << 20, &b).ok());
    EXPECT_EQ(static_cast<char *>(b.data()) - static_cast<char *>(a.data()), 128);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(b.data()) % 64, 0u);
    EXPECT_EQ(a.bytes(), 70u);
    EXPECT_EQ(b.bytes(), size_t{3} << 20);
    for (size_t i = 0; i < b.bytes(); i += 4096) EXPECT_EQ(b.as<char>()[i], 0);
    const Status past = arena.Take(1, &c);
    EXPECT_EQ(past.code(), StatusCode::kRuntime);
    EXPECT_TRUE(HasSubstr(past.message(), "past the"));
    EXPECT_EQ(c.data(), nullptr);
    b.as<float>()[(3 << 18) - 1] = 2.5f;
    kept = std::move(b);
    EXPECT_EQ(b.data(), nullptr);
  }
  ASSERT_NE(kept.data(), nullptr);
  EXPECT_EQ(kept.as<float>()[(3 << 18) - 1], 2.5f);  // still mapped
}

// Layer names are canonical decimal: "h.01." is not layer 1.
// The prepared weights' key names what the load read: the checkpoint as it was opened and
// the config text as it was parsed, not what the paths hold when the key is made. (A
// checkpoint replaced by another of the same shapes during a load would otherwise lend its
// size and time to a prepared file of the weights read before, and the next load of the new
// checkpoint would map the old weights.)
TEST_F(Gpt2CheckpointFilesTest, ThePreparedKeyNamesTheCheckpointAsOpenedAndTheConfigAsParsed) {
  std::ifstream in(std::string(kTinyA) + "/model.safetensors", std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), {});
  const std::string checkpoint = Write("model.safetensors", bytes);
  std::string text;
  Gpt2Config config;
  ASSERT_TRUE(ReadGpt2Config(Write("config.json", config_.dump()), &config, &text).ok());
  EXPECT_EQ(text, config_.dump()) << "the text handed back is the one parsed";
  std::unique_ptr<SafetensorsFile> opened;
  ASSERT_TRUE(SafetensorsFile::Open(checkpoint, &opened).ok());
  // Only the key's text is compared: no cache folder is made for its path.
  const char *cache = std::getenv("TINYMLIR_CACHE_DIR");
  const std::string saved = cache ? cache : "";
  setenv("TINYMLIR_CACHE_DIR", "off", 1);
  struct Restore {
    bool had;
    std::string value;
    ~Restore() { had ? setenv("TINYMLIR_CACHE_DIR", value.c_str(), 1) : unsetenv("TINYMLIR_CACHE_DIR"); }
  } restore{cache != nullptr, saved};
  std::string why;
  const PreparedKey before = KeyFor(dir_, *opened, config, text, &why);
  ASSERT_FALSE(before.text.empty()) << why;

  // Another checkpoint of the same size and header takes the path, ten seconds newer.
  std::string other = bytes;
  other.back() = static_cast<char>(other.back() ^ 0x5a);
  const std::string replacement = Write("replacement", other);
  struct stat st;
  ASSERT_EQ(stat(checkpoint.c_str(), &st), 0);
  const struct timespec times[2] = {st.st_atim, {st.st_mtim.tv_sec + 10, st.st_mtim.tv_nsec}};
  ASSERT_EQ(utimensat(AT_FDCWD, replacement.c_str(), times, 0), 0);
  ASSERT_EQ(rename(replacement.c_str(), checkpoint.c_str()), 0);

  EXPECT_EQ(KeyFor(dir_, *opened, config, text, &why).text, before.text)
      << "the key followed the path to the new file, not the file that was read";
  std::unique_ptr<SafetensorsFile> reopened;
  ASSERT_TRUE(SafetensorsFile::Open(checkpoint, &reopened).ok());
  EXPECT_NE(KeyFor(dir_, *reopened, config, text, &why).text, before.text)
      << "the new checkpoint (a new time) must have a key of its own";
  EXPECT_NE(KeyFor(dir_, *opened, config, text + " ", &why).text, before.text)
      << "another config text must make another key";
}

TEST(Gpt2WeightsTest, NonCanonicalLayerNamesAreUnexpected) {
  Gpt2Config c;
  c.vocab_size = 4;
  c.n_ctx = 2;
  c.n_embd = 2;
  c.n_layer = 1;
  c.n_head = 1;
  c.n_inner = 8;
  for (const char *name : {"h.01.ln_1.weight", "h.x.ln_1.weight", "h.-1.ln_1.weight",
                           "h.1234567890.ln_1.weight", "h.0"}) {
    const std::string header = std::string("{\"") + name +
                               "\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}}";
    std::string bytes;
    for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>(header.size() >> (8 * i)));
    bytes += header;
    std::unique_ptr<SafetensorsFile> file;
    ASSERT_TRUE(SafetensorsFile::FromBytes("x", bytes.data(), bytes.size(), &file).ok());
    Gpt2Weights w;
    Status s = LoadGpt2Weights(*file, c, &w);
    EXPECT_EQ(s.code(), TM_ERROR_IO);
    EXPECT_TRUE(HasSubstr(s.message(), std::string("unexpected tensor ") + name));
  }
}

}  // namespace
}  // namespace tinymlir::gpt2
