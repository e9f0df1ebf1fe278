// Argmax against the one-pass definition (first index of the largest value, NaN skipped;
// all NaN: the last index), on random logits with ties, NaNs and infinities at every
// position the eight-lane first pass and its tail can put them.
#include "gpt2/src/sampler.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace {

int32_t ReferenceArgmax(const std::vector<float> &v) {
  int32_t best = 0;
  for (int32_t i = 1; i < static_cast<int32_t>(v.size()); ++i)
    if (v[i] > v[best] || std::isnan(v[best])) best = i;
  return best;
}

TEST(Argmax, MatchesTheOnePassDefinition) {
  std::mt19937 rng(7);
  const float specials[] = {NAN, INFINITY, -INFINITY, 0.0f, -0.0f, 3.0f};
  for (int32_t n : {1, 2, 7, 8, 9, 15, 16, 17, 63, 50257}) {
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> v(n);
      // Few distinct values, so that the maximum is often tied.
      for (float &x : v) x = static_cast<float>(static_cast<int>(rng() % 5)) - 2.0f;
      const int specials_here = static_cast<int>(rng() % 4);
      for (int s = 0; s < specials_here; ++s) v[rng() % n] = specials[rng() % 6];
      if (trial % 17 == 0)
        for (float &x : v) x = NAN;  // every logit NaN
      if (trial % 19 == 0)
        for (float &x : v) x = rng() % 2 ? NAN : -INFINITY;
      ASSERT_EQ(tinymlir::gpt2::Argmax(v.data(), n), ReferenceArgmax(v)) << "n = " << n;
    }
  }
}

TEST(Argmax, PicksTheFirstOfTiedMaxima) {
  std::vector<float> v(100, 1.0f);
  v[40] = v[41] = v[90] = 5.0f;
  EXPECT_EQ(tinymlir::gpt2::Argmax(v.data(), 100), 40);
  v[3] = NAN;
  EXPECT_EQ(tinymlir::gpt2::Argmax(v.data(), 100), 40);
}

TEST(Argmax, EmptyIsZero) { EXPECT_EQ(tinymlir::gpt2::Argmax(nullptr, 0), 0); }

}  // namespace

namespace {

TEST(FirstNonFinite, FindsTheFirstNanOrInfinityAtEveryPosition) {
  for (int32_t n : {0, 1, 7, 8, 9, 16, 17, 50257}) {
    std::vector<float> v(n, 1.5f);
    EXPECT_EQ(tinymlir::gpt2::FirstNonFinite(v.data(), n), -1) << "n = " << n;
    for (float bad : {NAN, INFINITY, -INFINITY}) {
      for (int32_t at : {0, n / 2, n - 1}) {
        if (n == 0) continue;
        std::vector<float> w = v;
        w[at] = bad;
        if (at + 1 < n) w[n - 1] = NAN;  // a later one does not hide the first
        EXPECT_EQ(tinymlir::gpt2::FirstNonFinite(w.data(), n), at) << "n = " << n;
      }
    }
  }
  // The largest finite values and the smallest subnormals are finite.
  std::vector<float> edge = {3.4028235e38f, -3.4028235e38f, 1e-45f, -0.0f, 0.0f, 1e-38f,
                             2.0f, 3.0f, 4.0f};
  EXPECT_EQ(tinymlir::gpt2::FirstNonFinite(edge.data(), 9), -1);
}

}  // namespace
