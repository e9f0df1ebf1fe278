// GPT-2 byte-level BPE tokenizer, matching Hugging Face `tokenizers` (BPE model from
// vocab.json + merges.txt, ByteLevel pre-tokenizer with add_prefix_space=false, no special
// tokens): text is split with GPT-2's regex, each piece's bytes are mapped to GPT-2's
// printable byte alphabet, then merged by merge rank and looked up in the vocabulary.
//
// Special tokens are not recognized in input text: "<|endoftext|>" in a string encodes as
// ordinary text. Id 50256 (`<|endoftext|>`) decodes to its literal text.
//
// Thread-safety: Encode and Decode may be called concurrently on one tokenizer; the
// per-word merge cache is guarded by an internal mutex.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

class BpeTokenizer {
 public:
  // Reads vocab.json (token -> id; ids must be unique and cover [0, n)) and merges.txt
  // (optional "#version" first line, then one "left right" pair per line, rank = order).
  // Each must be a regular file of at most kMaxVocabBytes / kMaxMergesBytes, and vocab.json
  // a flat JSON object of at most 2^20 tokens (kVocabJsonLimits, gpt2/src/bounded_input.h). TM_ERROR_IO for unreadable or malformed
  // files, naming the file and the problem.
  static Status Load(const std::string &vocab_json_path, const std::string &merges_txt_path,
                     std::unique_ptr<BpeTokenizer> *out);

  // The same from the files' contents; the names stand for the files in messages.
  static Status FromContents(const std::string &vocab_name, std::string_view vocab_json,
                             const std::string &merges_name, std::string_view merges_txt,
                             std::unique_ptr<BpeTokenizer> *out);

  ~BpeTokenizer();
  BpeTokenizer(const BpeTokenizer &) = delete;
  BpeTokenizer &operator=(const BpeTokenizer &) = delete;

  // Replaces `*ids` with the token ids of `text`. TM_ERROR_INVALID_ARGUMENT (naming the byte
  // offset) when `text` is not valid UTF-8; `*ids` is then left empty.
  Status Encode(std::string_view text, std::vector<int32_t> *ids) const;

  // Replaces `*text` with the bytes of `ids[0..n)`. The result is raw bytes: a prefix of a
  // token sequence may end inside a multi-byte character. TM_ERROR_OUT_OF_RANGE naming the
  // first id outside [0, vocab_size()).
  Status Decode(const int32_t *ids, size_t n, std::string *text) const;

  // Number of ids (50257 for GPT-2).
  int32_t vocab_size() const;

 private:
  struct Impl;
  explicit BpeTokenizer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace tinymlir::gpt2
