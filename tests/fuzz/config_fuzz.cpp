// config.json parsing on arbitrary bytes, then the parsed config against a fixed checkpoint
// (tests/data/tiny-a): a config is accepted only with every dimension inside the documented
// limits, and no config makes the checkpoint loader size anything the header does not
// confirm (libFuzzer's malloc limit turns such an allocation into a crash).
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "gpt2/src/checkpoint.h"
#include "gpt2/src/safetensors.h"
#include "tests/fuzz/fuzz_util.h"

#ifndef TM_TEST_DATA_DIR
#error "the build defines TM_TEST_DATA_DIR (tests/fuzz/CMakeLists.txt)"
#endif

namespace gpt2 = tinymlir::gpt2;

namespace {

const gpt2::SafetensorsFile &TinyA() {
  static const std::unique_ptr<gpt2::SafetensorsFile> file = [] {
    std::unique_ptr<gpt2::SafetensorsFile> f;
    const gpt2::Status s =
        gpt2::SafetensorsFile::Open(TM_TEST_DATA_DIR "/tiny-a/model.safetensors", &f);
    FUZZ_CHECK(s.ok(), s.message());
    return f;
  }();
  return *file;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  const std::string_view text(reinterpret_cast<const char *>(data), size);
  gpt2::Gpt2Config c;
  const gpt2::Status s = gpt2::ParseGpt2Config("config.json", text, &c);
  if (!s.ok()) {
    FUZZ_CHECK(s.code() == TM_ERROR_IO || s.code() == TM_ERROR_UNSUPPORTED, s.message());
    tinymlir::fuzz::CheckMessage(s.message());
    return 0;
  }
  FUZZ_CHECK(c.vocab_size >= 1 && c.vocab_size <= gpt2::kMaxVocabSize, "vocab_size");
  FUZZ_CHECK(c.n_ctx >= 1 && c.n_ctx <= gpt2::kMaxContext, "n_ctx");
  FUZZ_CHECK(c.n_embd >= 1 && c.n_embd <= gpt2::kMaxEmbd, "n_embd");
  FUZZ_CHECK(c.n_layer >= 1 && c.n_layer <= gpt2::kMaxLayers, "n_layer");
  FUZZ_CHECK(c.n_head >= 1 && c.n_head <= gpt2::kMaxHeads, "n_head");
  FUZZ_CHECK(c.n_inner >= 1 && c.n_inner <= gpt2::kMaxInner, "n_inner");
  FUZZ_CHECK(c.n_embd % c.n_head == 0, "n_embd not divisible by n_head");
  FUZZ_CHECK(c.eos_token_id == -1 || (c.eos_token_id >= 0 && c.eos_token_id < c.vocab_size),
             "eos_token_id " + std::to_string(c.eos_token_id));
  FUZZ_CHECK(std::isfinite(c.layer_norm_epsilon) && c.layer_norm_epsilon >= 0,
             "layer_norm_epsilon");

  gpt2::Gpt2Weights w;
  const gpt2::Status load = gpt2::LoadGpt2Weights(TinyA(), c, &w);
  if (!load.ok()) {
    FUZZ_CHECK(load.code() == TM_ERROR_IO, load.message());
    tinymlir::fuzz::CheckMessage(load.message());
    return 0;
  }
  // Only tiny-a's own dimensions load tiny-a.
  FUZZ_CHECK(c.vocab_size == 512 && c.n_ctx == 64 && c.n_embd == 32 && c.n_layer == 2 &&
                 c.n_inner == 128,
             "a config unlike tiny-a's loaded it");
  FUZZ_CHECK(w.layers.size() == 2 && w.wte.elements() == 512 * 32, "weights");
  return 0;
}
