// GPT-2's tokenizer (models/kjv-tiny's vocab.json and merges.txt) on arbitrary bytes:
// invalid UTF-8 (judged by an independent validator) is TM_ERROR_INVALID_ARGUMENT with no
// ids; valid text encodes into ids inside the vocabulary and decodes back to itself.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpt2/src/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

#ifndef TM_MODELS_DIR
#error "the build defines TM_MODELS_DIR (tests/fuzz/CMakeLists.txt)"
#endif

using tinymlir::gpt2::BpeTokenizer;
using tinymlir::gpt2::Status;

namespace {

const BpeTokenizer &Gpt2Tokenizer() {
  static const std::unique_ptr<BpeTokenizer> tok = [] {
    std::unique_ptr<BpeTokenizer> t;
    const Status s = BpeTokenizer::Load(TM_MODELS_DIR "/kjv-tiny/vocab.json",
                                        TM_MODELS_DIR "/kjv-tiny/merges.txt", &t);
    FUZZ_CHECK(s.ok(), s.message());
    return t;
  }();
  return *tok;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const BpeTokenizer &tok = Gpt2Tokenizer();
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  std::vector<int32_t> ids = {7};
  const Status s = tok.Encode(text, &ids);
  if (!tinymlir::fuzz::IsValidUtf8(text)) {
    FUZZ_CHECK(s.code() == TM_ERROR_INVALID_ARGUMENT, "invalid UTF-8 accepted: " + s.message());
    FUZZ_CHECK(s.message().find("invalid UTF-8") != std::string::npos, s.message());
    FUZZ_CHECK(ids.empty(), "ids left after an error");
    return 0;
  }
  FUZZ_CHECK(s.ok(), "valid UTF-8 refused: " + s.message());
  FUZZ_CHECK(text.empty() == ids.empty(), "empty text <=> no ids");
  FUZZ_CHECK(ids.size() <= text.size(), "more ids than bytes");
  for (int32_t id : ids) FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), std::to_string(id));
  std::string back = "stale";
  const Status d = tok.Decode(ids.data(), ids.size(), &back);
  FUZZ_CHECK(d.ok(), d.message());
  FUZZ_CHECK(back == text, "decode(encode(text)) != text");
  return 0;
}
