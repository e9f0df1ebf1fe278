// tm_generate_batch: every sequence of a batch gets the tokens tm_generate gives it alone
// (greedy and sampled with its seed, every weight dtype, prompts of different lengths and
// token counts), sequences that end leave the batch while the others go on, the callback
// is told each token with its sequence, and each bad input is an error naming its sequence.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "tinymlir/gpt2.h"
#include "tinymlir/gpt2.hpp"

namespace {

const std::string kKjv = std::string(TM_MODELS_DIR) + "/kjv-tiny";

// Prompts of 1 to 20 tokens: decode steps run their rows at positions far apart, in
// programs of 8 rows and, as sequences end, of 4, 2 and 1.
const char *const kPrompts[] = {
    "And",
    "In the beginning God created the heaven and the earth.",
    "And God said, Let there be light",
    "Blessed are the meek: for they shall inherit the earth. Blessed are they which do",
    "The LORD is my shepherd;",
    "For God so loved the world,",
    "Thou shalt",
    "And the evening and the morning were the first day. And God said, Let there be a",
};
constexpr int32_t kTokens[] = {32, 24, 17, 32, 1, 9, 28, 3};
constexpr size_t kN = sizeof kPrompts / sizeof kPrompts[0];

class Batch : public ::testing::TestWithParam<tm_dtype> {
 protected:
  void SetUp() override {
    ASSERT_EQ(tm_context_create(&ctx_), TM_OK);
    tm_model_options options;
    tm_model_options_init(&options);
    options.weights = GetParam();
    ASSERT_EQ(tm_model_load(ctx_, kKjv.c_str(), &options, &model_), TM_OK) << tm_last_error();
    for (const char *text : kPrompts) {
      size_t n = 0;
      ASSERT_EQ(tm_tokenize(model_, text, std::strlen(text), nullptr, 0, &n), TM_OK);
      std::vector<int32_t> ids(n);
      ASSERT_EQ(tm_tokenize(model_, text, std::strlen(text), ids.data(), n, &n), TM_OK);
      prompts_.push_back(ids);
    }
  }
  void TearDown() override {
    tm_model_destroy(model_);
    tm_context_release(ctx_);
  }

  // Sequence i's options: its token count, and with `sampled` temperature 0.8, top-k 40,
  // top-p 0.95 and a seed of its own.
  tm_generate_options Options(size_t i, bool sampled) const {
    tm_generate_options o;
    tm_generate_options_init(&o);
    o.max_new_tokens = kTokens[i];
    if (sampled) {
      o.temperature = 0.8f;
      o.top_k = 40;
      o.top_p = 0.95f;
      o.seed = 1000 + i;
    }
    return o;
  }

  std::vector<int32_t> Alone(size_t i, const tm_generate_options &o) {
    std::vector<int32_t> out(o.max_new_tokens);
    size_t n = 0;
    EXPECT_EQ(tm_generate(model_, prompts_[i].data(), prompts_[i].size(), &o, nullptr, nullptr,
                          out.data(), out.size(), &n),
              TM_OK)
        << tm_last_error();
    out.resize(n);
    return out;
  }

  // The batch of every prompt with options[i]; outputs[i] receives sequence i's tokens.
  tm_status RunBatch(const std::vector<tm_generate_options> &options,
                     std::vector<std::vector<int32_t>> *outputs,
                     tm_batch_token_callback callback = nullptr, void *user = nullptr) {
    outputs->assign(options.size(), {});
    std::vector<tm_batch_sequence> batch(options.size());
    for (size_t i = 0; i < options.size(); ++i) {
      (*outputs)[i].resize(options[i].max_new_tokens);
      batch[i] = {prompts_[i % kN].data(), prompts_[i % kN].size(), &options[i],
                  (*outputs)[i].data(), (*outputs)[i].size(), 0};
    }
    const tm_status s = tm_generate_batch(model_, batch.data(), batch.size(), callback, user);
    for (size_t i = 0; i < options.size(); ++i) (*outputs)[i].resize(batch[i].n_out);
    return s;
  }

  void ExpectEachAsAlone(bool sampled) {
    std::vector<tm_generate_options> options;
    for (size_t i = 0; i < kN; ++i) options.push_back(Options(i, sampled));
    std::vector<std::vector<int32_t>> outputs;
    ASSERT_EQ(RunBatch(options, &outputs), TM_OK) << tm_last_error();
    tm_model_stats stats;
    stats.struct_size = sizeof stats;
    ASSERT_EQ(tm_model_get_stats(model_, &stats), TM_OK);
    uint64_t decoded = 0;
    for (size_t i = 0; i < kN; ++i) {
      ASSERT_EQ(outputs[i].size(), static_cast<size_t>(kTokens[i])) << "sequence " << i;
      decoded += outputs[i].size() - 1;  // the first token comes from the prompt's pass
      EXPECT_EQ(outputs[i], Alone(i, options[i])) << "sequence " << i << ": \"" << kPrompts[i]
                                                  << "\"";
    }
    EXPECT_EQ(stats.decode_tokens, decoded);
    EXPECT_GT(stats.decode_seconds, 0.0);
    EXPECT_GT(stats.prefill_seconds, 0.0);
  }

  tm_context *ctx_ = nullptr;
  tm_model *model_ = nullptr;
  std::vector<std::vector<int32_t>> prompts_;
};

TEST_P(Batch, GreedyTokensAreEachSequencesAlone) { ExpectEachAsAlone(false); }

TEST_P(Batch, SampledTokensAreEachSequencesAloneWithItsSeed) { ExpectEachAsAlone(true); }

INSTANTIATE_TEST_SUITE_P(Weights, Batch, ::testing::Values(TM_F32, TM_F16, TM_BF16, TM_Q8_0),
                         [](const ::testing::TestParamInfo<tm_dtype> &info) {
                           switch (info.param) {
                             case TM_F16: return std::string("f16");
                             case TM_BF16: return std::string("bf16");
                             case TM_Q8_0: return std::string("q8_0");
                             default: return std::string("f32");
                           }
                         });

// The callback's record: every (sequence, token), and the sequence it ends after its
// third token.
struct Seen {
  std::vector<std::vector<int32_t>> tokens = std::vector<std::vector<int32_t>>(TM_MAX_BATCH_SEQUENCES);
  size_t end_after_three = SIZE_MAX;
  static int Record(void *user, size_t sequence, int32_t token) {
    auto *seen = static_cast<Seen *>(user);
    seen->tokens.at(sequence).push_back(token);
    return sequence == seen->end_after_three && seen->tokens[sequence].size() == 3;
  }
};

class BatchF32 : public Batch {};
INSTANTIATE_TEST_SUITE_P(Weights, BatchF32, ::testing::Values(TM_F32));

TEST_P(BatchF32, TheCallbackSeesEveryTokenAndEndsOneSequenceOnly) {
  std::vector<tm_generate_options> options;
  for (size_t i = 0; i < kN; ++i) options.push_back(Options(i, false));
  Seen seen;
  seen.end_after_three = 1;
  std::vector<std::vector<int32_t>> outputs;
  ASSERT_EQ(RunBatch(options, &outputs, Seen::Record, &seen), TM_OK) << tm_last_error();
  for (size_t i = 0; i < kN; ++i) {
    EXPECT_EQ(seen.tokens[i], outputs[i]) << "sequence " << i;
    std::vector<int32_t> alone = Alone(i, options[i]);
    if (i == 1) alone.resize(3);
    EXPECT_EQ(outputs[i], alone) << "sequence " << i;
  }
}

TEST_P(BatchF32, TheLargestBatchRunsAndOneMoreIsRefused) {
  std::vector<tm_generate_options> options;
  for (size_t i = 0; i < TM_MAX_BATCH_SEQUENCES; ++i) {
    options.push_back(Options(i % kN, true));
    options.back().seed = 5000 + i;
    options.back().max_new_tokens = 6;
  }
  std::vector<std::vector<int32_t>> outputs;
  ASSERT_EQ(RunBatch(options, &outputs), TM_OK) << tm_last_error();
  for (size_t i = 0; i < TM_MAX_BATCH_SEQUENCES; i += 5) {
    std::vector<int32_t> out(6);
    size_t n = 0;
    ASSERT_EQ(tm_generate(model_, prompts_[i % kN].data(), prompts_[i % kN].size(), &options[i],
                          nullptr, nullptr, out.data(), out.size(), &n),
              TM_OK);
    EXPECT_EQ(outputs[i], out) << "sequence " << i;
  }
  options.push_back(options.back());
  EXPECT_EQ(RunBatch(options, &outputs), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(tm_last_error()).find("at most 16"), std::string::npos)
      << tm_last_error();
}

// Each bad input: its status, and a message naming the sequence and what is wrong.
TEST_P(BatchF32, BadInputIsAnErrorNamingItsSequence) {
  std::vector<int32_t> out(8);
  const std::vector<int32_t> good = prompts_[2];
  tm_generate_options o = Options(0, false);
  o.max_new_tokens = 8;
  auto expect = [&](std::vector<tm_batch_sequence> batch, tm_status status,
                    const std::string &words) {
    EXPECT_EQ(tm_generate_batch(model_, batch.data(), batch.size(), nullptr, nullptr), status)
        << words;
    EXPECT_NE(std::string(tm_last_error()).find(words), std::string::npos)
        << "expected \"" << words << "\" in: " << tm_last_error();
  };
  const tm_batch_sequence ok = {good.data(), good.size(), &o, out.data(), out.size(), 0};
  tm_batch_sequence bad = ok;

  expect({}, TM_ERROR_INVALID_ARGUMENT, "no sequences");
  EXPECT_EQ(tm_generate_batch(model_, nullptr, 2, nullptr, nullptr), TM_ERROR_INVALID_ARGUMENT);
  EXPECT_EQ(tm_generate_batch(nullptr, &bad, 1, nullptr, nullptr), TM_ERROR_INVALID_ARGUMENT);

  bad.n_prompt = 0;
  expect({ok, bad}, TM_ERROR_INVALID_ARGUMENT, "sequence 1: the prompt is empty");

  const std::vector<int32_t> outside = {5, 1 << 20};
  bad = ok;
  bad.prompt = outside.data();
  bad.n_prompt = outside.size();
  expect({ok, ok, bad}, TM_ERROR_OUT_OF_RANGE,
         "sequence 2: token id 1048576 at position 1 is outside the vocabulary");

  const std::vector<int32_t> long_prompt(250, 5);  // kjv-tiny's context: 256 tokens
  bad = ok;
  bad.prompt = long_prompt.data();
  bad.n_prompt = long_prompt.size();
  expect({bad}, TM_ERROR_OUT_OF_RANGE, "sequence 0: the prompt (250 tokens) plus 8 new tokens");

  tm_generate_options no_cache = o;
  no_cache.use_kv_cache = 0;
  bad = ok;
  bad.options = &no_cache;
  expect({ok, bad}, TM_ERROR_INVALID_ARGUMENT, "sequence 1: use_kv_cache is 0");

  tm_generate_options bad_k = o;
  bad_k.top_k = -1;
  bad = ok;
  bad.options = &bad_k;
  expect({ok, ok, ok, bad}, TM_ERROR_INVALID_ARGUMENT, "sequence 3: options.top_k is -1");

  bad = ok;
  bad.out_ids = nullptr;
  expect({bad}, TM_ERROR_INVALID_ARGUMENT, "sequence 0: out_ids is NULL with a capacity of 8");

  // A refused batch changes nothing: the next one is whole.
  std::vector<tm_batch_sequence> batch = {ok};
  ASSERT_EQ(tm_generate_batch(model_, batch.data(), 1, nullptr, nullptr), TM_OK);
  std::vector<int32_t> alone(8);
  size_t n = 0;
  ASSERT_EQ(tm_generate(model_, good.data(), good.size(), &o, nullptr, nullptr, alone.data(), 8, &n),
            TM_OK);
  EXPECT_EQ(batch[0].n_out, 8u);
  EXPECT_EQ(std::vector<int32_t>(out.begin(), out.end()), alone);
}

// A callback that generates on its model is refused as busy; the batch goes on.
TEST_P(BatchF32, TheModelIsBusyDuringABatch) {
  struct Busy {
    tm_model *model;
    const std::vector<int32_t> *prompt;
    tm_status seen = TM_OK;
    static int Try(void *user, size_t, int32_t) {
      auto *b = static_cast<Busy *>(user);
      size_t n = 0;
      b->seen = tm_generate(b->model, b->prompt->data(), b->prompt->size(), nullptr, nullptr,
                            nullptr, nullptr, 0, &n);
      return 0;
    }
  } busy{model_, &prompts_[0]};
  std::vector<tm_generate_options> options = {Options(0, false), Options(1, false)};
  std::vector<std::vector<int32_t>> outputs;
  ASSERT_EQ(RunBatch(options, &outputs, Busy::Try, &busy), TM_OK) << tm_last_error();
  EXPECT_EQ(busy.seen, TM_ERROR_BUSY);
  EXPECT_EQ(outputs[0].size(), static_cast<size_t>(kTokens[0]));
}

}  // namespace
