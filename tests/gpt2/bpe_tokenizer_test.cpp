#include "gpt2/src/bpe_tokenizer.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <thread>

#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "gpt2/src/bounded_input.h"
#include "tests/gpt2/bounded_child.h"

#if !defined(TM_TEST_DATA_DIR) || !defined(TM_MODELS_DIR)
#error "the build defines TM_TEST_DATA_DIR and TM_MODELS_DIR (tests/CMakeLists.txt)"
#endif

namespace tinymlir::gpt2 {
namespace {

constexpr char kVocab[] = TM_MODELS_DIR "/kjv-tiny/vocab.json";
constexpr char kMerges[] = TM_MODELS_DIR "/kjv-tiny/merges.txt";

::testing::AssertionResult Contains(const std::string &text, const std::string &needle) {
  if (text.find(needle) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "\"" << text << "\" lacks \"" << needle << "\"";
}

// Loading parses a 1 MB vocabulary; share one tokenizer across the suite.
class BpeTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    Status s = BpeTokenizer::Load(kVocab, kMerges, &tokenizer_);
    ASSERT_TRUE(s.ok()) << s.message();
  }
  static void TearDownTestSuite() { tokenizer_.reset(); }

  static std::vector<int32_t> Encode(const std::string &text) {
    std::vector<int32_t> ids;
    Status s = tokenizer_->Encode(text, &ids);
    EXPECT_TRUE(s.ok()) << s.message();
    return ids;
  }
  static std::string Decode(const std::vector<int32_t> &ids) {
    std::string text;
    Status s = tokenizer_->Decode(ids.data(), ids.size(), &text);
    EXPECT_TRUE(s.ok()) << s.message();
    return text;
  }

  static std::unique_ptr<BpeTokenizer> tokenizer_;
};
std::unique_ptr<BpeTokenizer> BpeTokenizerTest::tokenizer_;

std::vector<std::string> RoundTripTexts() {
  return {
      "Hello world",
      "In the beginning God created the heaven and the earth.\n\nAnd the earth was without form",
      "I'm sure they'll say we've done it, isn't it? He'd.  'S 'T",
      "tabs\tand\r\nnewlines\n\n  \n",
      "trailing spaces   ",
      std::string("embedded\0nul", 12),
      "non-breaking\u00a0space and ideographic\u3000space",
      "中文字符 and 日本語 and 한국어",
      "math: ∑ x² ≤ ∞, arrows ⇒ ←",
      "emoji 🙂🚀👩‍👩‍👧 flags 🇫🇷",
      "<|endoftext|>",
      "    ",
      "\n",
  };
}

TEST_F(BpeTokenizerTest, VocabSize) { EXPECT_EQ(tokenizer_->vocab_size(), 50257); }

TEST_F(BpeTokenizerTest, MatchesHuggingFaceGolden) {
  std::ifstream in(TM_TEST_DATA_DIR "/gpt2-tokenizer-golden.json");
  ASSERT_TRUE(in) << "cannot open golden file";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["cases"].size(), 1u);
  for (const auto &c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(Encode(text), want) << "text: \"" << text << "\"";
    EXPECT_EQ(Decode(want), text);
  }
}

// Ids from two npm GPT-2 encoders that agree with each other and with Hugging Face
// (tests/data/make_npm_tokenizer_golden.js): every contraction ('s 't 're 've 'm 'll 'd),
// runs of one character of odd and even length ("aaa", "!!!": of two pairs of equal rank,
// the leftmost merges first), mixed text.
TEST_F(BpeTokenizerTest, MatchesNpmEncodersGolden) {
  std::ifstream in(TM_TEST_DATA_DIR "/gpt2-tokenizer-npm-golden.json");
  ASSERT_TRUE(in) << "cannot open golden file";
  const nlohmann::json golden = nlohmann::json::parse(in);
  ASSERT_GE(golden["cases"].size(), 30u);
  for (const auto &c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    const std::vector<int32_t> want = c["ids"].get<std::vector<int32_t>>();
    EXPECT_EQ(Encode(text), want) << "text: \"" << text << "\"";
    EXPECT_EQ(Decode(want), text);
  }
}

TEST_F(BpeTokenizerTest, DecodeOfEncodeIsIdentity) {
  std::ifstream in(TM_TEST_DATA_DIR "/gpt2-tokenizer-golden.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  std::vector<std::string> texts = RoundTripTexts();
  for (const auto &c : golden["cases"]) texts.push_back(c["text"].get<std::string>());
  for (const std::string &text : texts) {
    EXPECT_EQ(Decode(Encode(text)), text) << "text: \"" << text << "\"";
  }
}

TEST_F(BpeTokenizerTest, SecondEncodeUsesCacheWithSameResult) {
  const std::string text = "And God said, Let there be light: and there was light.";
  const std::vector<int32_t> first = Encode(text);
  EXPECT_EQ(Encode(text), first);
  EXPECT_FALSE(first.empty());
}

TEST_F(BpeTokenizerTest, EndOfTextIdDecodesToLiteral) {
  const int32_t eot = 50256;
  std::string text;
  ASSERT_TRUE(tokenizer_->Decode(&eot, 1, &text).ok());
  EXPECT_EQ(text, "<|endoftext|>");
  // Special tokens are not recognized in input: the literal is ordinary text.
  const std::vector<int32_t> ids = Encode("<|endoftext|>");
  EXPECT_GT(ids.size(), 1u);
  for (int32_t id : ids) EXPECT_NE(id, eot);
}

TEST_F(BpeTokenizerTest, EmptyInputs) {
  EXPECT_TRUE(Encode("").empty());
  std::string text = "stale";
  ASSERT_TRUE(tokenizer_->Decode(nullptr, 0, &text).ok());
  EXPECT_EQ(text, "");
}

TEST_F(BpeTokenizerTest, InvalidUtf8IsAnError) {
  const struct {
    std::string text;
    std::string where;
  } cases[] = {
      {"\xff\xfe", "byte offset 0 (byte 0xFF)"},
      {"ab\xe2\x82", "byte offset 2 (byte 0xE2)"},      // truncated 3-byte sequence
      {"caf\xc3", "byte offset 3 (byte 0xC3)"},         // truncated 2-byte sequence
      {"x\xc0\xaf", "byte offset 1 (byte 0xC0)"},       // overlong '/'
      {"\xed\xa0\x80", "byte offset 0 (byte 0xED)"},    // UTF-16 surrogate
      {"ok \xf4\x90\x80\x80", "byte offset 3 (byte 0xF4)"},  // above U+10FFFF
      {"\x80", "byte offset 0 (byte 0x80)"},            // lone continuation byte
  };
  for (const auto &c : cases) {
    std::vector<int32_t> ids = {1, 2, 3};
    Status s = tokenizer_->Encode(c.text, &ids);
    EXPECT_EQ(s.code(), TM_ERROR_INVALID_ARGUMENT) << s.message();
    EXPECT_TRUE(Contains(s.message(), "invalid UTF-8"));
    EXPECT_TRUE(Contains(s.message(), c.where));
    EXPECT_TRUE(ids.empty());
  }
}

TEST_F(BpeTokenizerTest, DecodeRejectsIdsOutsideVocab) {
  for (int32_t bad : {50257, -1, 1 << 30}) {
    const int32_t ids[] = {15496, bad};
    std::string text;
    Status s = tokenizer_->Decode(ids, 2, &text);
    EXPECT_EQ(s.code(), TM_ERROR_OUT_OF_RANGE);
    EXPECT_TRUE(Contains(s.message(), "id " + std::to_string(bad) + " at position 1"));
    EXPECT_TRUE(text.empty());
  }
}

TEST_F(BpeTokenizerTest, ConcurrentEncodeAgrees) {
  const std::vector<std::string> texts = RoundTripTexts();
  std::vector<std::vector<int32_t>> want;
  for (const std::string &t : texts) want.push_back(Encode(t));
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 20; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          std::vector<int32_t> ids;
          if (!tokenizer_->Encode(texts[i], &ids).ok() || ids != want[i]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread &th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

TEST(BpeTokenizerLoadTest, MissingFilesAreIoErrors) {
  std::unique_ptr<BpeTokenizer> tok;
  Status s = BpeTokenizer::Load("/nonexistent/vocab.json", kMerges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "/nonexistent/vocab.json"));
  s = BpeTokenizer::Load(kVocab, "/nonexistent/merges.txt", &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "/nonexistent/merges.txt"));
  EXPECT_EQ(tok, nullptr);
}

// Small hand-made tokenizer files: bad inputs must be reported, not crash.
class BpeTokenizerFilesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "tm_bpe_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    for (const std::string &f : files_) unlink(f.c_str());
    rmdir(dir_.c_str());
  }
  std::string Write(const std::string &name, const std::string &contents) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << contents;
    files_.push_back(path);
    return path;
  }
  // A complete byte-level vocabulary (ids 0..255) plus `extra` tokens after it.
  std::string ByteVocab(const std::vector<std::string> &extra) {
    std::ifstream in(kVocab);
    const nlohmann::json full = nlohmann::json::parse(in);
    nlohmann::json v = nlohmann::json::object();
    for (auto it = full.begin(); it != full.end(); ++it) {
      if (it.value().get<int>() < 256) v[it.key()] = it.value();
    }
    int id = 256;
    for (const std::string &t : extra) v[t] = id++;
    return v.dump();
  }

  std::string dir_;
  std::vector<std::string> files_;
};

TEST_F(BpeTokenizerFilesTest, MergesWithVersionLineAndCrlf) {
  // In GPT-2's vocabulary the first 256 ids are exactly the byte alphabet.
  const std::string vocab = Write("v.json", ByteVocab({"ab", "abc"}));
  const std::string merges = Write("m.txt", "#version: 0.2\r\na b\r\nab c\r\n");
  std::unique_ptr<BpeTokenizer> tok;
  Status s = BpeTokenizer::Load(vocab, merges, &tok);
  ASSERT_TRUE(s.ok()) << s.message();
  EXPECT_EQ(tok->vocab_size(), 258);
  std::vector<int32_t> ids;
  ASSERT_TRUE(tok->Encode("abcab", &ids).ok());
  EXPECT_EQ(ids, (std::vector<int32_t>{257, 256}));
}

// A merges file that lists a pair twice: the later rank counts, as in OpenAI's encoder.py
// and Hugging Face. The files and the ids are those of the npm golden, where gpt-3-encoder
// tokenized with them ("a b" is ranked 0 and again 2, after "b c" at 1: "abc" is "a" "bc").
TEST_F(BpeTokenizerFilesTest, RepeatedMergeTakesItsLaterRank) {
  std::ifstream in(TM_TEST_DATA_DIR "/gpt2-tokenizer-npm-golden.json");
  ASSERT_TRUE(in) << "cannot open golden file";
  const nlohmann::json golden = nlohmann::json::parse(in)["duplicate_merges"];
  std::string merges = "#version: 0.2\n";
  for (const auto &m : golden["merges"]) merges += m.get<std::string>() + "\n";
  std::unique_ptr<BpeTokenizer> tok;
  const Status s = BpeTokenizer::Load(Write("vocab.json", golden["vocab"].dump()),
                                      Write("merges.txt", merges), &tok);
  ASSERT_TRUE(s.ok()) << s.message();
  ASSERT_GE(golden["cases"].size(), 3u);
  for (const auto &c : golden["cases"]) {
    const std::string text = c["text"].get<std::string>();
    std::vector<int32_t> ids;
    ASSERT_TRUE(tok->Encode(text, &ids).ok());
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>()) << "text: \"" << text << "\"";
  }
}

TEST_F(BpeTokenizerFilesTest, MalformedFilesAreIoErrors) {
  std::unique_ptr<BpeTokenizer> tok;
  const std::string good_vocab = Write("good.json", ByteVocab({"ab"}));
  const std::string good_merges = Write("good.txt", "a b\n");

  Status s = BpeTokenizer::Load(Write("bad.json", "{\"a\": 0,"), good_merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "not valid JSON"));

  s = BpeTokenizer::Load(Write("neg.json", "{\"a\": -3}"), good_merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "token 'a' has id -3"));

  s = BpeTokenizer::Load(Write("dup.json", "{\"a\": 0, \"b\": 0}"), good_merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "id 0 is used by both"));

  s = BpeTokenizer::Load(Write("nobytes.json", "{\"a\": 0}"), good_merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "lacks the byte-level token"));

  s = BpeTokenizer::Load(good_vocab, Write("m1.txt", "a b\nabc\n"), &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "line 2 is not \"left right\": 'abc'"));

  s = BpeTokenizer::Load(good_vocab, Write("m2.txt", "a b\nb c\n"), &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "line 2: token 'bc' is not in the vocabulary"));
  EXPECT_EQ(tok, nullptr);
}

// ---- Bounded reading -------------------------------------------------------------------

// Loads in a bounded child (a reader that blocks or reads without end fails, not hangs).
std::string LoadBounded(const std::string &vocab, const std::string &merges) {
  std::string result;
  EXPECT_TRUE(testing::RunBounded(
      [&] {
        std::unique_ptr<BpeTokenizer> tok;
        Status s = BpeTokenizer::Load(vocab, merges, &tok);
        return std::to_string(static_cast<int>(s.code())) + "|" + s.message();
      },
      &result));
  return result;
}

TEST_F(BpeTokenizerFilesTest, FifosDevicesAndDirectoriesAreRefused) {
  const std::string io = std::to_string(TM_ERROR_IO) + "|";
  const std::string vocab = Write("v.json", ByteVocab({}));
  const std::string merges = Write("m.txt", "");
  const std::string fifo = dir_ + "/fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  files_.push_back(fifo);
  const std::string zero_link = dir_ + "/zero.json";
  ASSERT_EQ(symlink("/dev/zero", zero_link.c_str()), 0);
  files_.push_back(zero_link);

  std::string r = LoadBounded(fifo, merges);
  EXPECT_TRUE(Contains(r, io));
  EXPECT_TRUE(Contains(r, "vocab file '" + fifo + "': not a regular file (a FIFO)"));
  r = LoadBounded(vocab, fifo);
  EXPECT_TRUE(Contains(r, io));
  EXPECT_TRUE(Contains(r, "merges file '" + fifo + "': not a regular file (a FIFO)"));
  for (const std::string &zero : {std::string("/dev/zero"), zero_link}) {
    r = LoadBounded(zero, merges);
    EXPECT_TRUE(Contains(r, io));
    EXPECT_TRUE(Contains(r, "not a regular file (a character device)"));
    r = LoadBounded(vocab, zero);
    EXPECT_TRUE(Contains(r, io));
    EXPECT_TRUE(Contains(r, "not a regular file (a character device)"));
  }
  r = LoadBounded(dir_, merges);
  EXPECT_TRUE(Contains(r, "not a regular file (a directory)"));
  // The real files still load.
  r = LoadBounded(vocab, merges);
  EXPECT_EQ(r, std::to_string(TM_OK) + "|");
}

TEST_F(BpeTokenizerFilesTest, OversizedFilesAreRefusedBeforeReading) {
  // Sparse files: fstat reports the size, no disk or memory is used.
  const std::string big = Write("big", "");
  ASSERT_EQ(truncate(big.c_str(), static_cast<off_t>(kMaxVocabBytes + 1)), 0);
  const std::string vocab = Write("v.json", ByteVocab({}));
  const std::string merges = Write("m.txt", "");
  std::unique_ptr<BpeTokenizer> tok;
  Status s = BpeTokenizer::Load(big, merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "is 67108865 bytes, more than the limit of 67108864"));
  ASSERT_EQ(truncate(big.c_str(), static_cast<off_t>(kMaxMergesBytes + 1)), 0);
  s = BpeTokenizer::Load(vocab, big, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "merges file '" + big + "': is 67108865 bytes"));
  EXPECT_EQ(tok, nullptr);
}

TEST_F(BpeTokenizerFilesTest, NestedVocabIsRefused) {
  const std::string merges = Write("m.txt", "");
  std::unique_ptr<BpeTokenizer> tok;
  Status s = BpeTokenizer::Load(
      Write("deep.json", "{\"a\":" + std::string(1 << 20, '[') + std::string(1 << 20, ']') + "}"),
      merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "JSON nested deeper than 2 levels"));
  // No more tokens than a model may have ids (2^20), refused before parsing.
  std::string many = "{";
  for (int i = 0; i <= (1 << 20); ++i) many += "\"a\":0,";
  many.back() = '}';
  s = BpeTokenizer::Load(Write("many.json", many), merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "JSON object with more than 1048576 members"));
  // One level under the root is still parsed, and named as a bad id.
  s = BpeTokenizer::Load(Write("list.json", "{\"a\":[1]}"), merges, &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "token 'a' has id [1]"));
}

TEST_F(BpeTokenizerFilesTest, FromContentsMatchesLoad) {
  const std::string vocab_text = ByteVocab({"ab", "abc"});
  const std::string merges_text = "#version: 0.2\na b\nab c\n";
  std::unique_ptr<BpeTokenizer> loaded, parsed;
  ASSERT_TRUE(
      BpeTokenizer::Load(Write("v.json", vocab_text), Write("m.txt", merges_text), &loaded).ok());
  Status s = BpeTokenizer::FromContents("v", vocab_text, "m", merges_text, &parsed);
  ASSERT_TRUE(s.ok()) << s.message();
  std::vector<int32_t> a, b;
  ASSERT_TRUE(loaded->Encode("abcab xyz", &a).ok());
  ASSERT_TRUE(parsed->Encode("abcab xyz", &b).ok());
  EXPECT_EQ(a, b);
  s = BpeTokenizer::FromContents("v", vocab_text, "m", "a b\nb c\n", &parsed);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(
      Contains(s.message(), "merges file 'm': line 2: token 'bc' is not in the vocabulary"));
}

// Messages quote at most an excerpt of the file, as valid UTF-8.
TEST_F(BpeTokenizerFilesTest, MessagesQuoteShortValidExcerpts) {
  std::unique_ptr<BpeTokenizer> tok;
  Status s = BpeTokenizer::FromContents("v", ByteVocab({"ab"}), "m",
                                        "a b\n" + std::string(100000, 'x') + "\xff\n", &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_LT(s.message().size(), 300u);
  EXPECT_TRUE(Contains(s.message(), "line 2 is not \"left right\": 'xxx"));
  s = BpeTokenizer::FromContents("v", ByteVocab({}), "m", "a \xff\xfe\n", &tok);
  EXPECT_EQ(s.code(), TM_ERROR_IO);
  EXPECT_TRUE(Contains(s.message(), "token '\\xFF\\xFE' is not in the vocabulary"));
}

}  // namespace
}  // namespace tinymlir
