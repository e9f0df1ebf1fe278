#include "gpt2/src/bpe_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <functional>
#include <mutex>
#include <queue>
#include <unordered_map>

#include <nlohmann/json.hpp>

#include "gpt2/src/bounded_input.h"

namespace tinymlir::gpt2 {
namespace {

// GPT-2's pre-tokenization pattern (encoder.py in openai/gpt-2, and Hugging Face's ByteLevel).
constexpr char kGpt2Pattern[] =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// Pieces longer than this are merged without caching (as in Hugging Face), so a huge
// unbroken word cannot pin megabytes in the cache.
constexpr size_t kMaxCachedPieceBytes = 256;
constexpr size_t kMaxCacheEntries = 10000;

void AppendUtf8(uint32_t cp, std::string *s) {
  if (cp < 0x80) {
    s->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    s->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    s->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    s->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    s->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// Returns the length of the valid UTF-8 sequence at s[i], or 0 if it is invalid or
// truncated. Rejects overlong forms, surrogates and code points above U+10FFFF.
size_t Utf8SequenceLength(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<uint8_t>(s[k]); };
  const auto cont = [&](size_t k, uint8_t lo = 0x80, uint8_t hi = 0xBF) {
    return k < s.size() && b(k) >= lo && b(k) <= hi;
  };
  const uint8_t c = b(i);
  if (c < 0x80) return 1;
  if (c >= 0xC2 && c <= 0xDF) return cont(i + 1) ? 2 : 0;
  if (c == 0xE0) return cont(i + 1, 0xA0, 0xBF) && cont(i + 2) ? 3 : 0;
  if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) return cont(i + 1) && cont(i + 2) ? 3 : 0;
  if (c == 0xED) return cont(i + 1, 0x80, 0x9F) && cont(i + 2) ? 3 : 0;
  if (c == 0xF0) return cont(i + 1, 0x90, 0xBF) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c >= 0xF1 && c <= 0xF3) return cont(i + 1) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  if (c == 0xF4) return cont(i + 1, 0x80, 0x8F) && cont(i + 2) && cont(i + 3) ? 4 : 0;
  return 0;
}

// Decodes one code point of valid UTF-8 at s[*i] and advances *i.
uint32_t NextCodePoint(std::string_view s, size_t *i) {
  const size_t len = Utf8SequenceLength(s, *i);
  const uint8_t c = static_cast<uint8_t>(s[*i]);
  uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1F) : len == 3 ? (c & 0x0F) : (c & 0x07);
  for (size_t k = 1; k < len; ++k) cp = (cp << 6) | (static_cast<uint8_t>(s[*i + k]) & 0x3F);
  *i += len == 0 ? 1 : len;
  return cp;
}

// GPT-2's bytes_to_unicode(): printable Latin-1 bytes map to themselves, the other 68
// bytes to U+0100.. in byte order, so every byte has a visible, non-space character.
std::array<uint32_t, 256> BytesToUnicode() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    map[b] = printable ? b : next++;
  }
  return map;
}

uint64_t PairKey(int32_t a, int32_t b) {
  return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
}

}  // namespace

struct BpeTokenizer::Impl {
  struct Merge {
    int32_t rank;
    int32_t new_id;
  };

  std::unordered_map<std::string, int32_t> token_to_id;
  std::vector<std::string> id_to_bytes;  // what each id decodes to
  std::unordered_map<uint64_t, Merge> merges;
  std::array<int32_t, 256> byte_ids{};
  pcre2_code *re = nullptr;

  mutable std::mutex cache_mu;
  mutable std::unordered_map<std::string, std::vector<int32_t>> cache;

  ~Impl() { pcre2_code_free(re); }

  Status LoadVocab(const std::string &path, std::string_view text);
  Status LoadMerges(const std::string &path, std::string_view text);
  Status CompilePattern();
  void MergeWord(std::string_view piece, std::vector<int32_t> *ids) const;
  void EncodePiece(std::string_view piece, std::vector<int32_t> *ids) const;
};

Status BpeTokenizer::Impl::LoadVocab(const std::string &path, std::string_view text) {
  const std::string prefix = "vocab file '" + path + "': ";
  nlohmann::json vocab;
  TM_RETURN_IF_ERROR(ParseJsonWithLimits(prefix, text, kVocabJsonLimits, &vocab));
  if (!vocab.is_object()) return IoError(prefix + "not a JSON object");
  const size_t n = vocab.size();
  if (n == 0 || n > static_cast<size_t>(INT32_MAX)) {
    return IoError(prefix + "has " + std::to_string(n) + " tokens");
  }
  std::vector<const std::string *> id_to_token(n, nullptr);
  for (auto it = vocab.begin(); it != vocab.end(); ++it) {
    const std::string &token = it.key();
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() >= n) {
      return IoError(prefix + "token '" + Excerpt(token) + "' has id " + JsonExcerpt(it.value()) +
                     ", expected an integer in [0, " + std::to_string(n) + ")");
    }
    const size_t id = it.value().get<uint64_t>();
    if (id_to_token[id] != nullptr) {
      return IoError(prefix + "id " + std::to_string(id) + " is used by both '" +
                     Excerpt(*id_to_token[id]) + "' and '" + Excerpt(token) + "'");
    }
    id_to_token[id] = &token_to_id.emplace(token, static_cast<int32_t>(id)).first->first;
  }

  // Decoding inverts the byte alphabet; a character outside it (possible only in tokens
  // that are not byte-level, e.g. added ones) is kept as its own UTF-8.
  const std::array<uint32_t, 256> byte_to_cp = BytesToUnicode();
  std::array<int16_t, 512> cp_to_byte;
  cp_to_byte.fill(-1);
  for (int b = 0; b < 256; ++b) cp_to_byte[byte_to_cp[b]] = static_cast<int16_t>(b);
  id_to_bytes.resize(n);
  for (size_t id = 0; id < n; ++id) {
    const std::string &token = *id_to_token[id];
    std::string &bytes = id_to_bytes[id];
    for (size_t i = 0; i < token.size();) {
      const size_t start = i;
      const uint32_t cp = NextCodePoint(token, &i);
      if (cp < cp_to_byte.size() && cp_to_byte[cp] >= 0) {
        bytes.push_back(static_cast<char>(cp_to_byte[cp]));
      } else {
        bytes.append(token, start, i - start);
      }
    }
  }
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(byte_to_cp[b], &ch);
    auto it = token_to_id.find(ch);
    if (it == token_to_id.end()) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", b);
      return IoError(prefix + "lacks the byte-level token '" + ch + "' for byte " + hex);
    }
    byte_ids[b] = it->second;
  }
  return Status::Ok();
}

Status BpeTokenizer::Impl::LoadMerges(const std::string &path, std::string_view text) {
  const std::string prefix = "merges file '" + path + "': ";
  int32_t rank = 0;
  size_t line_no = 0;
  for (size_t pos = 0; pos < text.size();) {
    size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string_view line(text.data() + pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty() || line.rfind("#version", 0) == 0) continue;
    const size_t sp = line.find(' ');
    if (sp == 0 || sp == std::string_view::npos || sp + 1 == line.size() ||
        line.find(' ', sp + 1) != std::string_view::npos) {
      return IoError(prefix + "line " + std::to_string(line_no) + " is not \"left right\": '" +
                     Excerpt(line) + "'");
    }
    const std::string left(line.substr(0, sp)), right(line.substr(sp + 1));
    int32_t ids[3];
    const std::string parts[3] = {left, right, left + right};
    for (int k = 0; k < 3; ++k) {
      auto it = token_to_id.find(parts[k]);
      if (it == token_to_id.end()) {
        return IoError(prefix + "line " + std::to_string(line_no) + ": token '" +
                       Excerpt(parts[k]) + "' is not in the vocabulary");
      }
      ids[k] = it->second;
    }
    // A repeated pair takes its later rank, as in Hugging Face and OpenAI's encoder.
    merges[PairKey(ids[0], ids[1])] = Merge{rank++, ids[2]};
  }
  return Status::Ok();
}

Status BpeTokenizer::Impl::CompilePattern() {
  int err = 0;
  PCRE2_SIZE err_offset = 0;
  re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(kGpt2Pattern), PCRE2_ZERO_TERMINATED,
                     PCRE2_UTF | PCRE2_UCP, &err, &err_offset, nullptr);
  if (re == nullptr) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    return Unsupported(std::string("PCRE2 cannot compile the GPT-2 pattern at offset ") +
                       std::to_string(err_offset) + ": " + reinterpret_cast<char *>(msg));
  }
  pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);  // optional speed-up; the interpreter works too
  return Status::Ok();
}

// Byte-level BPE of one pre-tokenized piece, merging the lowest-ranked adjacent pair first
// (leftmost on ties) exactly as Hugging Face's Word::merge_all does.
void BpeTokenizer::Impl::MergeWord(std::string_view piece, std::vector<int32_t> *ids) const {
  struct Symbol {
    int32_t id;
    int prev, next;
    bool alive;
  };
  struct Candidate {
    int32_t rank;
    int pos;
    int32_t new_id;
    bool operator>(const Candidate &o) const {
      return rank != o.rank ? rank > o.rank : pos > o.pos;
    }
  };
  const int n = static_cast<int>(piece.size());
  std::vector<Symbol> sym(n);
  for (int i = 0; i < n; ++i) {
    const int32_t id = byte_ids[static_cast<uint8_t>(piece[i])];
    sym[i] = Symbol{id, i - 1, i + 1 < n ? i + 1 : -1, true};
  }
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto push_pair = [&](int left) {
    auto it = merges.find(PairKey(sym[left].id, sym[sym[left].next].id));
    if (it != merges.end()) queue.push(Candidate{it->second.rank, left, it->second.new_id});
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol &left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    // Stale candidate: the pair at this position changed since it was queued.
    auto it = merges.find(PairKey(left.id, sym[left.next].id));
    if (it == merges.end() || it->second.new_id != top.new_id) continue;
    Symbol &right = sym[left.next];
    left.id = top.new_id;
    left.next = right.next;
    right.alive = false;
    if (left.next >= 0) sym[left.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    if (left.next >= 0) push_pair(top.pos);
  }
  for (int i = 0; i < n; ++i) {
    if (sym[i].alive) ids->push_back(sym[i].id);
  }
}

// The cache is a shortcut, never waited for: a piece whose lock is taken (by another thread,
// or, in a child forked while another thread held it, for good) is merged without it.
void BpeTokenizer::Impl::EncodePiece(std::string_view piece, std::vector<int32_t> *ids) const {
  const bool cacheable = piece.size() <= kMaxCachedPieceBytes;
  if (cacheable) {
    std::unique_lock<std::mutex> lock(cache_mu, std::try_to_lock);
    auto it = lock.owns_lock() ? cache.find(std::string(piece)) : cache.end();
    if (it != cache.end()) {
      ids->insert(ids->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  const size_t start = ids->size();
  MergeWord(piece, ids);
  if (cacheable) {
    std::unique_lock<std::mutex> lock(cache_mu, std::try_to_lock);
    if (lock.owns_lock() && cache.size() < kMaxCacheEntries) {
      cache.emplace(std::string(piece), std::vector<int32_t>(ids->begin() + start, ids->end()));
    }
  }
}

BpeTokenizer::BpeTokenizer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
BpeTokenizer::~BpeTokenizer() = default;

Status BpeTokenizer::Load(const std::string &vocab_json_path, const std::string &merges_txt_path,
                          std::unique_ptr<BpeTokenizer> *out) {
  if (out == nullptr) return InvalidArgument("BpeTokenizer::Load: out is null");
  std::string vocab, merges;
  TM_RETURN_IF_ERROR(ReadRegularFile("vocab file '" + vocab_json_path + "': ", vocab_json_path,
                                     kMaxVocabBytes, &vocab));
  TM_RETURN_IF_ERROR(ReadRegularFile("merges file '" + merges_txt_path + "': ",
                                     merges_txt_path, kMaxMergesBytes, &merges));
  return FromContents(vocab_json_path, vocab, merges_txt_path, merges, out);
}

Status BpeTokenizer::FromContents(const std::string &vocab_name, std::string_view vocab_json,
                                  const std::string &merges_name, std::string_view merges_txt,
                                  std::unique_ptr<BpeTokenizer> *out) {
  if (out == nullptr) return InvalidArgument("BpeTokenizer::FromContents: out is null");
  auto impl = std::make_unique<Impl>();
  try {
    TM_RETURN_IF_ERROR(impl->LoadVocab(vocab_name, vocab_json));
    TM_RETURN_IF_ERROR(impl->LoadMerges(merges_name, merges_txt));
  } catch (const std::bad_alloc &) {
    throw;  // the C boundary reports TM_ERROR_OUT_OF_MEMORY
  } catch (const std::exception &e) {  // a json type error we missed
    return IoError("loading tokenizer from '" + vocab_name + "' and '" + merges_name +
                   "': " + Excerpt(e.what(), 200));
  }
  TM_RETURN_IF_ERROR(impl->CompilePattern());
  out->reset(new BpeTokenizer(std::move(impl)));
  return Status::Ok();
}

Status BpeTokenizer::Encode(std::string_view text, std::vector<int32_t> *ids) const {
  if (ids == nullptr) return InvalidArgument("BpeTokenizer::Encode: ids is null");
  ids->clear();
  // Validate first so PCRE2 can skip its own check and the error names our offset.
  for (size_t i = 0; i < text.size();) {
    const size_t len = Utf8SequenceLength(text, i);
    if (len == 0) {
      char hex[8];
      std::snprintf(hex, sizeof hex, "0x%02X", static_cast<uint8_t>(text[i]));
      return InvalidArgument("the text is invalid UTF-8 at byte offset " + std::to_string(i) +
                             " (byte " + hex + ")");
    }
    i += len;
  }
  std::unique_ptr<pcre2_match_data, decltype(&pcre2_match_data_free)> match(
      pcre2_match_data_create_from_pattern(impl_->re, nullptr), &pcre2_match_data_free);
  if (match == nullptr) return RuntimeError("BpeTokenizer::Encode: no memory for PCRE2 match data");
  pcre2_match_data *md = match.get();
  const auto subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  Status status;
  size_t pos = 0;
  try {
    while (pos < text.size()) {
      const int rc = pcre2_match(impl_->re, subject, text.size(), pos, PCRE2_NO_UTF_CHECK, md,
                                 nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        impl_->EncodePiece(text.substr(pos), ids);  // unmatched tail stays a piece of its own
        break;
      }
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        status = RuntimeError("BpeTokenizer::Encode: PCRE2 match failed at byte offset " +
                              std::to_string(pos) + ": " + reinterpret_cast<char *>(msg));
        break;
      }
      const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
      const size_t begin = ov[0], end = ov[1];
      if (begin > pos) impl_->EncodePiece(text.substr(pos, begin - pos), ids);
      if (end <= begin) {  // the pattern cannot match empty; never loop forever if it did
        status = RuntimeError("BpeTokenizer::Encode: empty pre-tokenizer match at byte offset " +
                              std::to_string(begin));
        break;
      }
      impl_->EncodePiece(text.substr(begin, end - begin), ids);
      pos = end;
    }
  } catch (const std::exception &e) {  // only allocation failure can throw here
    status = RuntimeError(std::string("BpeTokenizer::Encode: ") + e.what());
  }
  if (!status.ok()) ids->clear();
  return status;
}

Status BpeTokenizer::Decode(const int32_t *ids, size_t n, std::string *text) const {
  if (text == nullptr) return InvalidArgument("BpeTokenizer::Decode: text is null");
  text->clear();
  if (ids == nullptr && n > 0) return InvalidArgument("BpeTokenizer::Decode: ids is null");
  for (size_t i = 0; i < n; ++i) {
    if (ids[i] < 0 || ids[i] >= vocab_size()) {
      text->clear();
      return OutOfRange("token id " + std::to_string(ids[i]) + " at position " + std::to_string(i) +
                        " is outside the vocabulary [0, " + std::to_string(vocab_size()) + ")");
    }
    text->append(impl_->id_to_bytes[ids[i]]);
  }
  return Status::Ok();
}

int32_t BpeTokenizer::vocab_size() const {
  return static_cast<int32_t>(impl_->id_to_bytes.size());
}

}  // namespace tinymlir::gpt2
