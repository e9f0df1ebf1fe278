#include "gpt2/src/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>

namespace tinymlir::gpt2 {

// The first index of the largest value, NaN skipped (all NaN: the last index; n <= 0: 0).
// Two passes: the largest value in eight independent lanes (a branch-free select that
// compilers turn into vector max instructions; NaN never wins a `>`), then the first index
// holding it. One pass carrying an index is a chain of dependent, branching compares: 33 us
// per token over GPT-2's 50257 logits, 3% of a kjv-tiny decode step.
int32_t Argmax(const float *logits, int32_t n) {
  constexpr int kLanes = 8;
  float lane[kLanes];
  for (float &v : lane) v = -INFINITY;
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) lane[l] = logits[i + l] > lane[l] ? logits[i + l] : lane[l];
  float best = -INFINITY;
  for (int l = 0; l < kLanes; ++l) best = lane[l] > best ? lane[l] : best;
  for (; i < n; ++i) best = logits[i] > best ? logits[i] : best;
  for (int32_t j = 0; j < n; ++j)
    if (logits[j] == best) return j;
  return n > 0 ? n - 1 : 0;  // every logit NaN
}

// The first index whose value is NaN or infinite, or -1. The common case (all finite) is one
// branch-free pass in eight lanes over the exponent bits; only a hit takes a second pass.
int32_t FirstNonFinite(const float *values, int32_t n) {
  constexpr int kLanes = 8;
  constexpr uint32_t kExponent = 0x7f800000u;  // all ones: infinity or NaN
  uint32_t lane[kLanes] = {};
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes)
    for (int l = 0; l < kLanes; ++l) {
      uint32_t bits;
      std::memcpy(&bits, values + i + l, sizeof bits);
      lane[l] |= (bits & kExponent) == kExponent;
    }
  uint32_t any = 0;
  for (uint32_t v : lane) any |= v;
  for (; i < n; ++i) any |= !std::isfinite(values[i]);
  if (!any) return -1;
  for (int32_t j = 0; j < n; ++j)
    if (!std::isfinite(values[j])) return j;
  return -1;
}

Sampler::Sampler(const SamplingOptions &options) : options_(options), state_(options.seed) {}

// splitmix64: a small, well-tested generator with a fully specified output sequence.
double Sampler::Uniform() {
  uint64_t z = (state_ += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);  // 53 bits
}

int32_t Sampler::Next(const float *logits, int32_t n) {
  if (options_.temperature <= 0.0f) return Argmax(logits, n);

  // Candidates: the top-k by logit (ties by id), in order only when top-p needs it.
  order_.resize(n);
  std::iota(order_.begin(), order_.end(), 0);
  auto by_logit = [&](int32_t a, int32_t b) {
    float la = std::isnan(logits[a]) ? -INFINITY : logits[a];
    float lb = std::isnan(logits[b]) ? -INFINITY : logits[b];
    return la > lb || (la == lb && a < b);
  };
  int32_t k = options_.top_k > 0 ? std::min(options_.top_k, n) : n;
  if (k < n) {  // the k best, then only those sorted
    std::nth_element(order_.begin(), order_.begin() + (k - 1), order_.end(), by_logit);
    order_.resize(k);
  }
  // Top-p needs the candidates in order; plain sampling does not (the max is enough).
  if (options_.top_p < 1.0f) std::sort(order_.begin(), order_.end(), by_logit);
  else std::iter_swap(order_.begin(), std::min_element(order_.begin(), order_.end(), by_logit));

  // Softmax of logit / T over the candidates, in double.
  probs_.resize(k);
  double max = logits[order_[0]] / static_cast<double>(options_.temperature), sum = 0.0;
  for (int32_t i = 0; i < k; ++i) {
    double l = logits[order_[i]];
    probs_[i] = std::isnan(l) ? 0.0 : std::exp(l / options_.temperature - max);
    sum += probs_[i];
  }
  for (double &p : probs_) p /= sum;

  // Top-p: the smallest prefix whose probability reaches p (at least one token).
  int32_t keep = k;
  if (options_.top_p < 1.0f) {
    double cumulative = 0.0;
    for (int32_t i = 0; i < k; ++i) {
      cumulative += probs_[i];
      if (cumulative >= options_.top_p) {
        keep = i + 1;
        break;
      }
    }
  }
  double total = std::accumulate(probs_.begin(), probs_.begin() + keep, 0.0);
  double r = Uniform() * total;
  for (int32_t i = 0; i < keep; ++i) {
    r -= probs_[i];
    if (r < 0.0) return order_[i];
  }
  return order_[keep - 1];
}

}  // namespace tinymlir::gpt2
