// Argmax against the one-pass definition (first index of the largest value, NaN skipped;
// all NaN: the last index), on random logits with ties, NaNs and infinities at every
// position the eight-lane first pass and its tail can put them. Then the sampler by
// distribution: what it draws against the distribution the options define, computed here
// independently, with a chi-square goodness-of-fit test.
#include "gpt2/src/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <utility>
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

// ---------------------------------------------------------------------------------------
// The sampler by distribution.
//
// The distribution the options define (gpt2.h, sampler.h), written out here from the
// definition and not from sampler.cpp's code, in double:
//   1. candidates: every token, or with top_k > 0 the k largest logits; ties go to the
//      smaller id (sampler.cpp sorts "ties by id"; gpt2.h does not say, so the code decides);
//   2. probabilities: softmax(logit / T) over the candidates (so renormalised after top-k,
//      as Hugging Face's top-k then top-p warpers do: top-p sees the top-k distribution);
//   3. top-p < 1: in descending order (ties again by smaller id) the shortest prefix whose
//      cumulative probability reaches top_p (>=), compared with the float top_p as a double,
//      as the sampler does (0.9f is 0.89999997...); at least one token;
//   4. renormalise over the kept tokens.
// Temperature 0 is greedy: the first largest logit, whatever top_k and top_p say.
//
// Every draw must be a kept token with positive probability (a hard failure otherwise), and
// the counts must fit the distribution by a chi-square test at significance 1e-4. With the
// 48 grid settings under two seeding schemes and 9 more, ~100 tests, a correct sampler
// would fail somewhere with probability about 100 x 1e-4 = 1%, if the seeds were random.
// They are fixed, so the tests are deterministic: a pass stays a pass until the sampler or
// its generator changes, and a failure is either a real bug or (at that 1% rate, after
// such a change) a seed to change.
// ---------------------------------------------------------------------------------------

namespace {

using tinymlir::gpt2::Sampler;
using tinymlir::gpt2::SamplingOptions;

// Q(a, x) = Gamma(a, x) / Gamma(a), the regularized upper incomplete gamma function, as in
// Numerical Recipes (gammq): the series for P = 1 - Q below x = a + 1, where it converges
// fast, and Lentz's continued fraction for Q above, where the series would cancel.
double RegularizedUpperGamma(double a, double x) {
  if (x <= 0.0) return 1.0;
  const double prefix = std::exp(a * std::log(x) - x - std::lgamma(a));
  constexpr int kMaxTerms = 10000;
  constexpr double kEpsilon = 1e-15;
  if (x < a + 1.0) {
    double ap = a, term = 1.0 / a, sum = term;
    for (int n = 0; n < kMaxTerms && std::fabs(term) > std::fabs(sum) * kEpsilon; ++n) {
      ap += 1.0;
      term *= x / ap;
      sum += term;
    }
    return 1.0 - sum * prefix;
  }
  constexpr double kTiny = 1e-300;  // keeps Lentz's divisions away from zero
  double b = x + 1.0 - a, c = 1.0 / kTiny, d = 1.0 / b, h = d;
  for (int i = 1; i < kMaxTerms; ++i) {
    const double an = -i * (i - a);
    b += 2.0;
    d = an * d + b;
    if (std::fabs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::fabs(c) < kTiny) c = kTiny;
    d = 1.0 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1.0) < kEpsilon) break;
  }
  return prefix * h;
}

// P(X >= statistic) for X chi-square with `df` degrees of freedom.
double ChiSquareSurvival(double statistic, int df) {
  return RegularizedUpperGamma(df / 2.0, statistic / 2.0);
}

// Closed forms to check it by: for even df, Q(df/2, y) is the Poisson probability of fewer
// than df/2 events at mean y; for odd df, Q(n + 1/2, y) = erfc(sqrt y) + e^-y *
// sum_{j=1..n} y^(j-1/2) / Gamma(j + 1/2) (from Q(a + 1, y) = Q(a, y) + y^a e^-y / Gamma(a + 1)).
double ChiSquareSurvivalClosedForm(double statistic, int df) {
  const double y = statistic / 2.0;
  if (df % 2 == 0) {
    double term = std::exp(-y), sum = 0.0;
    for (int i = 0; i < df / 2; ++i) {
      sum += term;
      term *= y / (i + 1);
    }
    return sum;
  }
  const double pi = std::acos(-1.0);
  double term = std::sqrt(y) / (std::sqrt(pi) / 2.0), sum = 0.0;  // j = 1: y^(1/2) / G(3/2)
  for (int j = 1; j <= df / 2; ++j) {
    sum += term;
    term *= y / (j + 0.5);
  }
  return std::erfc(std::sqrt(y)) + std::exp(-y) * sum;
}

TEST(ChiSquareSurvival, MatchesTableValues) {
  // Critical values from the chi-square table (scipy.stats.chi2.isf, 16 digits): the
  // survival function there is the table's significance. A relative error of 1e-9 is far
  // below anything a 1e-4 threshold can notice.
  struct Case {
    double statistic;
    int df;
    double p;
  };
  const Case cases[] = {
      {3.841458820694124, 1, 0.05},   {6.6348966010212145, 1, 0.01},  {11.070497693516351, 5, 0.05},
      {20.515005652432873, 5, 0.001}, {18.307038053275146, 10, 0.05}, {0.0, 3, 1.0},
  };
  for (const Case &c : cases)
    EXPECT_NEAR(ChiSquareSurvival(c.statistic, c.df), c.p, c.p * 1e-9)
        << "chi2.sf(" << c.statistic << ", " << c.df << ")";
}

TEST(ChiSquareSurvival, MatchesTheClosedFormsFromTheCentreToTheFarTail) {
  // Both branches (series below x = a + 1, continued fraction above) and p from ~1 down to
  // ~1e-60; relative error 1e-9.
  for (int df : {1, 2, 3, 4, 5, 7, 10, 11, 30, 51, 100}) {
    for (double scale : {0.01, 0.1, 0.5, 0.9, 1.0, 1.1, 1.5, 2.0, 3.0, 5.0}) {
      for (double offset : {0.0, 5.0, 40.0}) {
        const double x = df * scale + offset;
        const double want = ChiSquareSurvivalClosedForm(x, df);
        EXPECT_NEAR(ChiSquareSurvival(x, df), want, want * 1e-9)
            << "chi2.sf(" << x << ", " << df << ")";
      }
    }
  }
}

// The distribution the options define (see the comment above), and how far the top-p cut
// is from flipping: a cumulative sum within rounding of top_p could be cut differently here
// and in the sampler without either being wrong, so the tests require a clear margin.
struct Defined {
  std::vector<double> probability;  // by token id; 0 outside the kept set
  double top_p_margin = 1.0;        // distance of top_p from the cumulative sums around the cut
};

Defined DefinedDistribution(const std::vector<float> &logits, const SamplingOptions &options) {
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  // Descending logit; stable, so tied logits stay in ascending id.
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  if (options.top_k > 0 && options.top_k < n) order.resize(options.top_k);

  const double t = options.temperature;
  const double max = logits[order[0]];
  std::vector<double> p(order.size());
  double sum = 0.0;
  for (size_t i = 0; i < order.size(); ++i) sum += p[i] = std::exp((logits[order[i]] - max) / t);
  for (double &x : p) x /= sum;

  Defined out;
  size_t keep = order.size();
  if (options.top_p < 1.0f) {
    const double top_p = options.top_p;
    double before = 0.0;
    for (size_t i = 0; i < order.size(); ++i) {
      const double after = before + p[i];
      if (after >= top_p) {
        keep = i + 1;
        out.top_p_margin = std::min(after - top_p, top_p - before);
        break;
      }
      before = after;
    }
  }
  out.probability.assign(n, 0.0);
  const double kept = std::accumulate(p.begin(), p.begin() + keep, 0.0);
  for (size_t i = 0; i < keep; ++i) out.probability[order[i]] = p[i] / kept;
  return out;
}

struct GoodnessOfFit {
  double statistic = 0.0;
  int df = 0;
  double p = 1.0;
};

// Pearson's chi-square over the tokens with positive probability. Cells expected fewer than
// 5 times (the usual validity rule for the chi-square approximation) are pooled, smallest
// first, into one cell until it reaches 5. One cell left: nothing to test (p = 1).
GoodnessOfFit ChiSquareTest(const std::vector<double> &probability,
                            const std::vector<int64_t> &counts, int64_t draws) {
  std::vector<std::pair<double, int64_t>> cells;  // (expected, observed)
  for (size_t i = 0; i < probability.size(); ++i)
    if (probability[i] > 0.0) cells.push_back({probability[i] * draws, counts[i]});
  std::sort(cells.begin(), cells.end());
  std::vector<std::pair<double, int64_t>> merged;
  std::pair<double, int64_t> pool{0.0, 0};
  size_t i = 0;
  for (; i < cells.size() && pool.first < 5.0; ++i) {
    if (pool.first == 0.0 && cells[i].first >= 5.0) break;  // nothing small to pool
    pool.first += cells[i].first;
    pool.second += cells[i].second;
  }
  if (pool.first > 0.0) merged.push_back(pool);
  merged.insert(merged.end(), cells.begin() + i, cells.end());

  GoodnessOfFit fit;
  for (const auto &[expected, observed] : merged)
    fit.statistic += (observed - expected) * (observed - expected) / expected;
  fit.df = static_cast<int>(merged.size()) - 1;
  fit.p = fit.df > 0 ? ChiSquareSurvival(fit.statistic, fit.df) : 1.0;
  return fit;
}

// Fail when the fit's p-value is below this; see the significance note above.
constexpr double kSignificance = 1e-4;

std::string Describe(const SamplingOptions &o) {
  std::ostringstream s;
  s << "T = " << o.temperature << ", top_k = " << o.top_k << ", top_p = " << o.top_p;
  return s.str();
}

// Checks `counts` (draws per token id) against the defined distribution: no draw outside the
// kept set, and a chi-square fit. On failure, the table of observed against expected.
void ExpectDrawsFit(const std::vector<float> &logits, const SamplingOptions &options,
                    const std::vector<int64_t> &counts, int64_t draws, const std::string &how) {
  const Defined defined = DefinedDistribution(logits, options);
  // The cut must not hinge on rounding (see Defined); a test-data problem, not the sampler's.
  ASSERT_GT(defined.top_p_margin, 1e-9) << Describe(options);
  std::ostringstream table;
  int64_t outside = 0;
  for (size_t id = 0; id < counts.size(); ++id) {
    if (defined.probability[id] == 0.0) outside += counts[id];
    if (defined.probability[id] > 0.0 || counts[id] > 0)
      table << "\n  token " << id << " (logit " << logits[id] << "): drawn " << counts[id]
            << ", expected " << defined.probability[id] * draws;
  }
  EXPECT_EQ(outside, 0) << Describe(options) << ", " << how
                        << ": drew tokens outside the allowed set" << table.str();
  const GoodnessOfFit fit = ChiSquareTest(defined.probability, counts, draws);
  EXPECT_GE(fit.p, kSignificance) << Describe(options) << ", " << how << ": chi-square "
                                  << fit.statistic << " on " << fit.df << " df, p = " << fit.p
                                  << table.str();
}

// Twelve logits: a unique maximum (id 5), a three-way tie (1, 3, 11) that top_k = 3 cuts
// through, a two-way tie (8, 10) that top_k = 5 cuts through, another tie (0, 7), a tail
// that T = 0.5 makes negligible (expected < 5 in 50,000: pooled) and a -inf (id 2) that
// must never be drawn (tm_generate stops on a non-finite logit before sampling, but the
// Sampler is a piece of its own and gives -inf probability 0). The top-p cut falls inside
// the (1, 3, 11) tie at T = 1, top_k = 5, top_p = 0.5 and at T = 2, top_k = 3,
// top_p = 0.5 (keeps 5 and 1, not 3).
const std::vector<float> kLogits = {1.0f,  2.5f, -INFINITY, 2.5f,  0.0f, 3.2f,
                                    -1.5f, 1.0f, 2.0f,      -3.0f, 2.0f, 2.5f};

// The whole grid: T in {0.5, 1, 2} x top_k in {0 (all), 1, 3, 5} x top_p in {1, 0.9, 0.5,
// 1e-6} = 48 settings, none skipped. Some coincide in outcome (top_k = 1 and top_p = 1e-6
// keep only the maximum, and there the chi-square has nothing to test: only the hard check
// applies; top_p = 0.9 keeps all of a top-3 set), but each goes through a different cut in
// the sampler, and all are cheap.
std::vector<SamplingOptions> Grid() {
  std::vector<SamplingOptions> grid;
  for (float t : {0.5f, 1.0f, 2.0f})
    for (int32_t k : {0, 1, 3, 5})
      for (float p : {1.0f, 0.9f, 0.5f, 1e-6f}) grid.push_back({t, k, p, 0});
  return grid;
}

// Draws per setting: 50,000 costs ~0.2 s for the 48 settings. A cell of probability 0.05
// (2,500 expected) off by 15% of itself adds ~56 to the chi-square, which fails at
// p < 1e-4 on up to 10 degrees of freedom (the most any grid setting has); the bugs that
// matter (a token too many or too few, the wrong temperature) move far more than that.
constexpr int64_t kDraws = 50000;

// How tm_generate seeds it: one Sampler per request, every token from the same stream.
// Each setting its own seed (its index), so the settings' streams are not the same draws.
TEST(SamplerDistribution, OneSeededStreamDrawsTheDistributionTheOptionsDefine) {
  const std::vector<SamplingOptions> grid = Grid();
  for (size_t s = 0; s < grid.size(); ++s) {
    SamplingOptions options = grid[s];
    options.seed = s;
    Sampler sampler(options);
    std::vector<int64_t> counts(kLogits.size(), 0);
    for (int64_t draw = 0; draw < kDraws; ++draw) {
      const int32_t id = sampler.Next(kLogits.data(), static_cast<int32_t>(kLogits.size()));
      ASSERT_TRUE(id >= 0 && id < static_cast<int32_t>(kLogits.size())) << id;
      ++counts[id];
    }
    ExpectDrawsFit(kLogits, options, counts, kDraws, "one stream, seed " + std::to_string(s));
  }
}

// The first token of requests seeded 0, 1, 2, ...: consecutive seeds must give independent
// first draws (a weak seed mix would correlate them), since that is how callers vary runs.
TEST(SamplerDistribution, FirstDrawsOfConsecutiveSeedsFollowTheDistributionTheOptionsDefine) {
  for (SamplingOptions options : Grid()) {
    std::vector<int64_t> counts(kLogits.size(), 0);
    for (int64_t seed = 0; seed < kDraws; ++seed) {
      options.seed = seed;
      Sampler sampler(options);
      const int32_t id = sampler.Next(kLogits.data(), static_cast<int32_t>(kLogits.size()));
      ASSERT_TRUE(id >= 0 && id < static_cast<int32_t>(kLogits.size())) << id;
      ++counts[id];
    }
    ExpectDrawsFit(kLogits, options, counts, kDraws,
                   "first draws of seeds 0.." + std::to_string(kDraws - 1));
  }
}

// A vocabulary large enough for top-k to take the partial-selection path over many distinct
// values, with settings as commonly used: top_k = 40 with top_p = 0.9; top_p = 0.95 alone
// (the cut then falls among hundreds of small probabilities); plain T = 1.5 over all 1000
// tokens, where many cells are small and pooled. 20,000 draws: the full sort that top_p
// alone costs per draw makes this the slowest test here (~0.5 s).
TEST(SamplerDistribution, ALargerVocabularyDrawsTheDistributionTheOptionsDefine) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  std::vector<float> logits(1000);
  for (float &x : logits) x = normal(rng);
  const SamplingOptions settings[] = {{0.8f, 40, 0.9f, 1}, {1.0f, 0, 0.95f, 2}, {1.5f, 0, 1.0f, 3}};
  for (const SamplingOptions &options : settings) {
    constexpr int64_t kLargeDraws = 20000;
    Sampler sampler(options);
    std::vector<int64_t> counts(logits.size(), 0);
    for (int64_t draw = 0; draw < kLargeDraws; ++draw) {
      const int32_t id = sampler.Next(logits.data(), static_cast<int32_t>(logits.size()));
      ASSERT_TRUE(id >= 0 && id < static_cast<int32_t>(logits.size())) << id;
      ++counts[id];
    }
    ExpectDrawsFit(logits, options, counts, kLargeDraws, "one stream");
  }
}

// The top-p cut is ">=": a prefix whose probability equals top_p exactly is enough. Four equal
// logits have probabilities of exactly 1/4 (exp(0) / 4 is exact in binary, at any T), so
// top_p = 0.25 keeps id 0 alone, 0.5 ids 0 and 1, 0.75 ids 0 to 2 (ties to the smaller id),
// where ">" would keep one token more. The grid cannot show this: its margin rule keeps every
// cumulative sum away from top_p, and a cut exactly at top_p is a set of measure zero.
TEST(SamplerDistribution, TopPKeepsThePrefixWhoseProbabilityEqualsPExactly) {
  const std::vector<float> equal(4, 0.7f);
  for (float t : {1.0f, 2.0f}) {
    for (int32_t kept : {1, 2, 3}) {
      const SamplingOptions options{t, 0, 0.25f * kept, static_cast<uint64_t>(kept)};
      Sampler sampler(options);
      std::vector<int64_t> counts(equal.size(), 0);
      constexpr int64_t kEqualDraws = 3000;
      for (int64_t draw = 0; draw < kEqualDraws; ++draw)
        ++counts[sampler.Next(equal.data(), static_cast<int32_t>(equal.size()))];
      std::vector<double> probability(equal.size(), 0.0);
      for (int32_t id = 0; id < kept; ++id) probability[id] = 1.0 / kept;
      for (int32_t id = kept; id < 4; ++id)
        EXPECT_EQ(counts[id], 0) << Describe(options) << ": token " << id << " is past the cut";
      const GoodnessOfFit fit = ChiSquareTest(probability, counts, kEqualDraws);
      EXPECT_GE(fit.p, kSignificance)
          << Describe(options) << ": chi-square " << fit.statistic << " on " << fit.df << " df";
    }
  }
}

// Temperature 0 is greedy: the first largest logit on every call, whatever top_k, top_p and
// the seed say (they only shape sampling), -inf and ties included.
TEST(SamplerDistribution, TemperatureZeroAlwaysPicksTheFirstLargestLogit) {
  std::vector<float> tied = kLogits;
  tied[9] = 3.2f;  // ties id 5, the maximum: the first (5) must win
  for (int32_t k : {0, 1, 3})
    for (float p : {1.0f, 0.5f, 1e-6f})
      for (uint64_t seed : {0ull, 1ull, 0xFFFFFFFFFFFFFFFFull}) {
        Sampler sampler({0.0f, k, p, seed});
        for (int draw = 0; draw < 100; ++draw) {
          ASSERT_EQ(sampler.Next(kLogits.data(), static_cast<int32_t>(kLogits.size())), 5);
          ASSERT_EQ(sampler.Next(tied.data(), static_cast<int32_t>(tied.size())), 5);
        }
      }
}

}  // namespace
