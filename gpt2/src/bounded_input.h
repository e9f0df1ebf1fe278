// Reading the files of a model folder with bounds: every file is opened non-blocking and
// must be a regular file (checked with fstat on the open descriptor, so a symlink is judged
// by what it points to), its size is checked against a cap for its kind before a byte is
// read, and JSON is checked for depth and width before it is parsed. Nothing a folder
// holds (a FIFO, /dev/zero, a huge, deep or wide file) can then block a load or make it
// read or allocate without bound.
//
// Header-only: the readers of this folder (checkpoint, safetensors, tokenizer) and the
// fuzz targets share it.
#pragma once

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gpt2/src/status.h"

namespace tinymlir::gpt2 {

// Size caps, checked with fstat before reading. Each is far above what a real file of its
// kind needs; with the JSON limits below, the worst file of each kind measured about
// 0.5 GB of memory to load at most (a 64 MiB vocab.json of 2^20 long tokens).
//   config.json   1 MiB   (GPT-2's is under 1 KiB)
//   vocab.json   64 MiB   (GPT-2's is 1 MiB)
//   merges.txt   64 MiB   (GPT-2's is 456 KiB; a merge is kept only once per token pair)
// The safetensors header has the format's own cap (kMaxSafetensorsHeaderBytes in
// safetensors.h); the tensor data is mapped, never read into memory as a whole.
inline constexpr uint64_t kMaxConfigBytes = uint64_t{1} << 20;
inline constexpr uint64_t kMaxVocabBytes = uint64_t{64} << 20;
inline constexpr uint64_t kMaxMergesBytes = uint64_t{64} << 20;

// Shape limits for JSON, checked by a linear scan of the text before it is parsed, so a
// document past them is refused without building any of it. Nesting counts the root
// object or array as level 1; an array's elements and an object's members are counted at
// every level.
struct JsonLimits {
  int max_depth;
  size_t max_array_elements;
  size_t max_object_members;
};
// config.json: 32 levels (Hugging Face configs nest 3 at most); the 1 MiB cap bounds the
// rest.
inline constexpr JsonLimits kConfigJsonLimits = {32, SIZE_MAX, SIZE_MAX};
// vocab.json: a flat object of at most 2^20 tokens (as many as a model may have ids,
// kMaxVocabSize in checkpoint.h); level 2 and short arrays only so that a bad entry can be
// named.
inline constexpr JsonLimits kVocabJsonLimits = {2, 16, size_t{1} << 20};
// The safetensors header: the format needs 3 levels (header, entry, shape) and 2-element
// data_offsets; at most 2^16 tensors (GPT-2 XL has 580) and ranks of at most 64.
inline constexpr JsonLimits kSafetensorsJsonLimits = {8, 64, size_t{1} << 16};

// `text` for an error message: at most `max_bytes` of it (cut at a character boundary, with
// "..." appended), bytes that are not printable UTF-8 written as \xHH. Messages quote file
// contents; they must stay short and valid UTF-8 whatever the file holds.
inline std::string Excerpt(std::string_view text, size_t max_bytes = 80) {
  std::string out;
  size_t i = 0;
  while (i < text.size() && out.size() < max_bytes) {
    const auto b = [&](size_t k) { return static_cast<uint8_t>(text[k]); };
    const uint8_t c = b(i);
    size_t len = 0;
    if (c >= 0x20 && c < 0x7F) len = 1;
    else if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3;
    else if (c >= 0xF0 && c <= 0xF4) len = 4;
    bool valid = len > 0 && i + len <= text.size();
    for (size_t k = 1; valid && k < len; ++k) valid = (b(i + k) & 0xC0) == 0x80;
    if (valid && len == 3) {
      const uint32_t cp = ((c & 0x0Fu) << 12) | ((b(i + 1) & 0x3Fu) << 6);
      valid = cp >= 0x800 && (cp < 0xD800 || cp > 0xDFFF);
    } else if (valid && len == 4) {
      const uint32_t cp = ((c & 0x07u) << 18) | ((b(i + 1) & 0x3Fu) << 12);
      valid = cp >= 0x10000 && cp <= 0x10FFFF;
    }
    if (valid) {
      out.append(text, i, len);
      i += len;
    } else {
      char hex[5];
      std::snprintf(hex, sizeof hex, "\\x%02X", c);
      out += hex;
      i += 1;
    }
  }
  if (i < text.size()) out += "...";
  return out;
}

// A JSON value's text for an error message, shortened as Excerpt does.
inline std::string JsonExcerpt(const nlohmann::json &value, size_t max_bytes = 80) {
  return Excerpt(value.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                 max_bytes);
}

namespace bounded_input_detail {

inline const char *FileTypeName(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  return "not a regular file";
}

}  // namespace bounded_input_detail

// Opens `path` read-only, non-blocking (a FIFO cannot block the open) and close-on-exec,
// then requires, on the open descriptor, a regular file of at most `max_bytes` bytes.
// On success *fd is the caller's to close and *size the file's size. Messages start with
// `prefix` (e.g. "vocab file 'x': "); every failure is TM_ERROR_IO.
inline Status OpenRegularFile(const std::string &prefix, const std::string &path,
                              uint64_t max_bytes, int *fd, uint64_t *size) {
  const int f = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (f < 0) return IoError(prefix + "cannot open: " + std::strerror(errno));
  struct stat st;
  if (fstat(f, &st) != 0) {
    Status s = IoError(prefix + "cannot stat: " + std::strerror(errno));
    ::close(f);
    return s;
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(f);
    const char *type = bounded_input_detail::FileTypeName(st.st_mode);
    return IoError(prefix + "not a regular file (" + type + ")");
  }
  const uint64_t bytes = static_cast<uint64_t>(st.st_size);
  if (bytes > max_bytes) {
    ::close(f);
    return IoError(prefix + "is " + std::to_string(bytes) + " bytes, more than the limit of " +
                   std::to_string(max_bytes) + " bytes for this file");
  }
  *fd = f;
  *size = bytes;
  return Status::Ok();
}

// Reads a whole regular file of at most `max_bytes` bytes (see OpenRegularFile). The size
// is taken from fstat; a file that shrinks while it is read is an error, bytes appended
// meanwhile are not read.
inline Status ReadRegularFile(const std::string &prefix, const std::string &path,
                              uint64_t max_bytes, std::string *contents) {
  int fd = -1;
  uint64_t size = 0;
  TM_RETURN_IF_ERROR(OpenRegularFile(prefix, path, max_bytes, &fd, &size));
  std::string text;
  try {
    text.resize(static_cast<size_t>(size));
  } catch (...) {
    ::close(fd);
    throw;
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::read(fd, &text[done], text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = n < 0 ? IoError(prefix + "cannot read: " + std::strerror(errno))
                       : IoError(prefix + "shrank from " + std::to_string(size) + " to " +
                                 std::to_string(done) + " bytes while being read");
      ::close(fd);
      return s;
    }
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  *contents = std::move(text);
  return Status::Ok();
}

// Checks `text` against `limits` without parsing it: a scan that follows strings (and
// their escapes) and counts brackets and commas. Malformed JSON is left to the parser; this
// only refuses what is too deep or too wide, naming the byte offset.
inline Status CheckJsonShape(const std::string &prefix, std::string_view text,
                             const JsonLimits &limits) {
  struct Open {
    bool array;
    size_t items;  // commas seen at this level, plus one
  };
  std::vector<Open> stack;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    switch (c) {
      case '"': in_string = true; break;
      case '[':
      case '{':
        if (static_cast<int>(stack.size()) >= limits.max_depth)
          return IoError(prefix + "JSON nested deeper than " + std::to_string(limits.max_depth) +
                         " levels (at byte " + std::to_string(i) + ")");
        stack.push_back({c == '[', 1});
        break;
      case ']':
      case '}':
        if (!stack.empty()) stack.pop_back();
        break;
      case ',':
        if (!stack.empty()) {
          Open &top = stack.back();
          ++top.items;
          const size_t limit = top.array ? limits.max_array_elements : limits.max_object_members;
          if (top.items > limit)
            return IoError(prefix + "JSON " + (top.array ? "array" : "object") +
                           " with more than " + std::to_string(limit) +
                           (top.array ? " elements" : " members") + " (at byte " +
                           std::to_string(i) + ")");
        }
        break;
      default: break;
    }
  }
  return Status::Ok();
}

// Parses `text` as JSON within `limits` (CheckJsonShape first). TM_ERROR_IO starting with
// `prefix`: "not valid JSON: ...", or what CheckJsonShape reports.
inline Status ParseJsonWithLimits(const std::string &prefix, std::string_view text,
                                  const JsonLimits &limits, nlohmann::json *out) {
  TM_RETURN_IF_ERROR(CheckJsonShape(prefix, text, limits));
  try {
    // No parser callback: nlohmann's callback parser rescans an object's members at the
    // end of each member (quadratic in their number).
    *out = nlohmann::json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception &e) {
    // parse_error, and out_of_range for a number too large for a double (1e400). The
    // library's "[json.exception.parse_error.101] " tag means nothing to a reader.
    std::string_view what = e.what();
    if (what.rfind("[json.exception.", 0) == 0 && what.find("] ") != std::string_view::npos)
      what.remove_prefix(what.find("] ") + 2);
    return IoError(prefix + "not valid JSON: " + Excerpt(what, 200));
  }
  return Status::Ok();
}

}  // namespace tinymlir::gpt2
