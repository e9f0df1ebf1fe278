// Choosing the next token from logits: greedy argmax, or temperature / top-k / top-p
// sampling with a seeded generator (the same seed gives the same tokens on every platform:
// the generator and the uniform draw are defined here, not by <random>'s distributions).
#pragma once

#include <cstdint>
#include <vector>

namespace tinymlir::gpt2 {

struct SamplingOptions {
  float temperature = 0.0f;  // 0 = greedy
  int32_t top_k = 0;         // 0 = no limit
  float top_p = 1.0f;        // 1 = no limit
  uint64_t seed = 0;
};

class Sampler {
 public:
  explicit Sampler(const SamplingOptions &options);

  // The chosen id. Greedy picks the first maximum (as torch.argmax). NaN logits never win.
  int32_t Next(const float *logits, int32_t vocab_size);

 private:
  double Uniform();  // [0, 1)

  SamplingOptions options_;
  uint64_t state_;
  std::vector<int32_t> order_;
  std::vector<double> probs_;
};

int32_t Argmax(const float *logits, int32_t n);

// The first index of a NaN or infinite value, or -1 when every value is finite.
int32_t FirstNonFinite(const float *values, int32_t n);

}  // namespace tinymlir::gpt2
