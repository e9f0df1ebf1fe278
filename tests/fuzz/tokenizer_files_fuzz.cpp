// The tokenizer's files from one input: vocab.json is the bytes before the first NUL,
// merges.txt the bytes after it (none: an empty merges.txt). Refused files are TM_ERROR_IO
// with a short, valid UTF-8 message. An accepted tokenizer, whatever its merges, must
// encode valid text into ids it can decode back to exactly that text.
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpt2/src/bpe_tokenizer.h"
#include "tests/fuzz/fuzz_util.h"

using tinymlir::gpt2::BpeTokenizer;
using tinymlir::gpt2::Status;

namespace {

void CheckRoundTrip(const BpeTokenizer &tok, std::string_view text) {
  if (!tinymlir::fuzz::IsValidUtf8(text)) return;
  std::vector<int32_t> ids;
  const Status e = tok.Encode(text, &ids);
  FUZZ_CHECK(e.ok(), e.message());
  for (int32_t id : ids)
    FUZZ_CHECK(id >= 0 && id < tok.vocab_size(), "id " + std::to_string(id) + " outside");
  std::string back;
  const Status d = tok.Decode(ids.data(), ids.size(), &back);
  FUZZ_CHECK(d.ok(), d.message());
  FUZZ_CHECK(back == text, "decode(encode(text)) != text for \"" + std::string(text) + "\"");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view all(reinterpret_cast<const char *>(data), size);
  const size_t nul = all.find('\0');
  const std::string_view vocab = all.substr(0, nul);
  const std::string_view merges = nul == std::string_view::npos ? "" : all.substr(nul + 1);

  std::unique_ptr<BpeTokenizer> tok;
  const Status s = BpeTokenizer::FromContents("vocab.json", vocab, "merges.txt", merges, &tok);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == TM_ERROR_IO, s.message());
    FUZZ_CHECK(tok == nullptr, "a failed load produced a tokenizer");
    tinymlir::fuzz::CheckMessage(s.message());
    return 0;
  }
  FUZZ_CHECK(tok->vocab_size() >= 256, "a byte-level vocabulary has at least 256 tokens");
  for (std::string_view text :
       {std::string_view("Hello world, it's 2024!\n\n  tabs\tand spaces   "),
        std::string_view("caf\xc3\xa9 \xe4\xb8\xad\xe6\x96\x87 \xf0\x9f\x99\x82"),
        std::string_view("\0a\0", 3)})
    CheckRoundTrip(*tok, text);
  // The files' own text, which holds the merged pieces.
  CheckRoundTrip(*tok, merges);
  CheckRoundTrip(*tok, vocab);
  // Every id decodes.
  std::string bytes;
  for (int32_t id = 0; id < tok->vocab_size() && id < 4096; ++id) {
    const Status d = tok->Decode(&id, 1, &bytes);
    FUZZ_CHECK(d.ok(), d.message());
  }
  return 0;
}
