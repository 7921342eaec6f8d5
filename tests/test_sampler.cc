// Sampler: exact stage behaviour (issue #3 figures), determinism, draw frequencies, parameter
// validation and arena layout.
#include "sampler.h"

#include <math.h>
#include <string.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "sampler_testing.h"
#include "testing.h"

namespace {

using ringlm::internal::Arena;
using ringlm::internal::ErrorSink;
using ringlm::internal::Rng;
using ringlm::internal::SamplerParams;
using ringlm::internal::SamplerScratch;

using Scratch = ringlm_test::SamplerScratchBuffer;

// Every stage at its neutral value, temperature 1.
SamplerParams neutral() {
  SamplerParams p{};
  p.temperature = 1.0f;
  p.top_k = 0;
  p.top_p = 1.0f;
  p.min_p = 0.0f;
  p.repeat_penalty = 1.0f;
  p.frequency_penalty = 0.0f;
  p.presence_penalty = 0.0f;
  p.penalty_last_n = 0;
  p.seed = 1;
  p.logit_bias = nullptr;
  p.n_logit_bias = 0;
  return p;
}

const std::vector<float> kFive = {4.0f, 3.0f, 2.0f, 1.0f, 0.5f};

struct Cands {
  std::vector<int32_t> idx;
  std::vector<float> probs;
};

Cands candidates(std::vector<float> logits, const SamplerParams& p,
                 const std::vector<int32_t>& recent = {}) {
  Scratch sc(static_cast<uint32_t>(logits.size()), 64);
  const uint32_t n = ringlm::internal::sampler_candidates(logits.data(),
                                                static_cast<uint32_t>(logits.size()), p,
                                                recent.data(), recent.size(), &sc.s);
  Cands c;
  c.idx.assign(sc.s.idx, sc.s.idx + n);
  c.probs.assign(sc.s.probs, sc.s.probs + n);
  return c;
}

float sum(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += x;
  return static_cast<float>(s);
}

// ---- Issue #3 figures -------------------------------------------------------------------------

TEST(Sampler, SoftmaxAtTemperatureOne) {
  const Cands c = candidates(kFive, neutral());
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2, 3, 4}));
  const float want[5] = {0.632f, 0.232f, 0.085f, 0.031f, 0.019f};
  for (int i = 0; i < 5; ++i) EXPECT_NEAR(c.probs[i], want[i], 0.001f) << i;
  EXPECT_NEAR(sum(c.probs), 1.0f, 1e-6f);
}

TEST(Sampler, TopKThreeRenormalises) {
  SamplerParams p = neutral();
  p.top_k = 3;
  const Cands c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(c.probs[0], 0.666f, 0.001f);  // exactly 1 / (1 + e^-1 + e^-2) = 0.66524
  EXPECT_NEAR(c.probs[0], 0.66524f, 0.0001f);
  EXPECT_NEAR(sum(c.probs), 1.0f, 1e-6f);
}

TEST(Sampler, TopPKeepsSmallestPrefixReachingP) {
  SamplerParams p = neutral();
  p.top_p = 0.9f;  // cumulative 0.632, 0.864, 0.949 -> three tokens
  const Cands c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(c.probs[0], 0.66524f, 0.0001f);  // renormalised over the three kept
  // Always at least one token, even when the first alone exceeds p.
  p.top_p = 0.01f;
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0}));
}

TEST(Sampler, Temperature) {
  SamplerParams p = neutral();
  // The issue quotes 0.866 for T = 0.5. softmax([8, 6, 4, 2, 1])[0] is 0.86427; 0.866 is the
  // T = 0.5 value with top-k 3 (0.86681), so both are checked, each against its exact value.
  p.temperature = 0.5f;
  EXPECT_NEAR(candidates(kFive, p).probs[0], 0.86427f, 0.001f);
  p.top_k = 3;
  EXPECT_NEAR(candidates(kFive, p).probs[0], 0.866f, 0.001f);
  p.top_k = 0;
  p.temperature = 2.0f;
  EXPECT_NEAR(candidates(kFive, p).probs[0], 0.422f, 0.001f);
}

// ---- Greedy ----------------------------------------------------------------------------------

TEST(Sampler, GreedyPicksArgmaxLowestIdOnTies) {
  SamplerParams p = neutral();
  p.temperature = 0.0f;
  Scratch sc(6, 8);
  Rng rng;
  rng.seed(7);
  const uint64_t before = rng.state;
  std::vector<float> l = {1.0f, 5.0f, -2.0f, 5.0f, NAN, 4.0f};
  EXPECT_EQ(ringlm::internal::sample(l.data(), 6, p, nullptr, 0, &rng, &sc.s), 1);
  EXPECT_EQ(rng.state, before) << "greedy must not consume randomness";
  l = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
  EXPECT_EQ(ringlm::internal::sample(l.data(), 6, p, nullptr, 0, &rng, &sc.s), -1);  // nothing to sample
  l = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
  EXPECT_EQ(ringlm::internal::sample(l.data(), 6, p, nullptr, 0, &rng, &sc.s), 0);
  // Candidates at temperature 0: the greedy token alone.
  const Cands c = candidates({1.0f, 3.0f, 3.0f}, p);
  EXPECT_EQ(c.idx, (std::vector<int32_t>{1}));
  EXPECT_EQ(c.probs, (std::vector<float>{1.0f}));
}

TEST(Sampler, TopKOneEqualsGreedy) {
  const uint32_t vocab = 4096;
  Scratch sc(vocab, 8);
  std::mt19937 gen(123);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> l(vocab);
    for (float& x : l) x = std::round(nd(gen) * 4.0f) / 4.0f;  // coarse: many ties
    std::vector<float> g = l;
    SamplerParams greedy = neutral();
    greedy.temperature = 0.0f;
    Rng r0;
    r0.seed(1);
    const int32_t want = ringlm::internal::sample(g.data(), vocab, greedy, nullptr, 0, &r0, &sc.s);
    SamplerParams k1 = neutral();
    k1.top_k = 1;
    k1.temperature = 0.7f;
    Rng r1;
    r1.seed(static_cast<uint64_t>(trial) + 1);
    EXPECT_EQ(ringlm::internal::sample(l.data(), vocab, k1, nullptr, 0, &r1, &sc.s), want) << trial;
  }
}

// ---- Min-p -----------------------------------------------------------------------------------

TEST(Sampler, MinP) {
  SamplerParams p = neutral();
  p.min_p = 0.04f;  // threshold 0.04 * 0.6316 = 0.02526: drops 0.0191 only
  Cands c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2, 3}));
  EXPECT_NEAR(c.probs[0], 0.63163f / (1.0f - 0.019074f), 1e-4f);
  EXPECT_NEAR(sum(c.probs), 1.0f, 1e-6f);
  p.min_p = 0.1f;  // threshold 0.0632: keeps 0.632, 0.232, 0.085
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0, 1, 2}));
  p.min_p = 1.0f;  // only the maximum
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0}));
  p.min_p = 1.0f;  // ...all of the tied maxima, lowest id first
  EXPECT_EQ(candidates({1.0f, 2.0f, 0.0f, 2.0f}, p).idx, (std::vector<int32_t>{1, 3}));
}

TEST(Sampler, TopPThenMinPKeepsTheShorterPrefix) {
  SamplerParams p = neutral();
  p.top_p = 0.7f;   // two tokens (0.632, 0.864)
  p.min_p = 0.1f;   // three tokens
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0, 1}));
  p.top_p = 0.99f;  // all five
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0, 1, 2}));
}

// ---- Penalties and bias (exact values on the in-place logits) --------------------------------

// Applies stages 1-3 only (temperature 0 skips the rest and leaves the logits undivided).
std::vector<float> penalised(std::vector<float> l, SamplerParams p,
                             const std::vector<int32_t>& recent) {
  p.temperature = 0.0f;
  Scratch sc(static_cast<uint32_t>(l.size()), 16);
  ringlm::internal::sampler_candidates(l.data(), static_cast<uint32_t>(l.size()), p, recent.data(),
                             recent.size(), &sc.s);
  return l;
}

const std::vector<float> kSix = {2.0f, -2.0f, 1.0f, 0.5f, -1.0f, 3.0f};
const std::vector<int32_t> kRecent = {0, 1, 0, 3, 5, 0};  // counts: 0:3, 1:1, 3:1, 5:1

TEST(Sampler, RepetitionPenaltyOncePerDistinctToken) {
  SamplerParams p = neutral();
  p.repeat_penalty = 1.5f;
  p.penalty_last_n = 6;
  const std::vector<float> got = penalised(kSix, p, kRecent);
  const std::vector<float> want = {2.0f / 1.5f, -2.0f * 1.5f, 1.0f, 0.5f / 1.5f, -1.0f,
                                   3.0f / 1.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(Sampler, FrequencyPenaltyScalesWithCount) {
  SamplerParams p = neutral();
  p.frequency_penalty = 0.25f;
  p.penalty_last_n = 6;
  const std::vector<float> got = penalised(kSix, p, kRecent);
  const std::vector<float> want = {2.0f - 0.75f, -2.25f, 1.0f, 0.25f, -1.0f, 2.75f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(Sampler, PresencePenaltyOnceIfPresent) {
  SamplerParams p = neutral();
  p.presence_penalty = 0.5f;
  p.penalty_last_n = 6;
  const std::vector<float> got = penalised(kSix, p, kRecent);
  const std::vector<float> want = {1.5f, -2.5f, 1.0f, 0.0f, -1.0f, 2.5f};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
}

TEST(Sampler, PenaltiesCombineInOrder) {
  SamplerParams p = neutral();
  p.repeat_penalty = 1.5f;
  p.frequency_penalty = 0.25f;
  p.presence_penalty = 0.5f;
  p.penalty_last_n = 6;
  const std::vector<float> got = penalised(kSix, p, kRecent);
  auto pen = [](float v, float c) {
    v = v > 0 ? v / 1.5f : v * 1.5f;
    v -= 0.25f * c;
    v -= 0.5f;
    return v;
  };
  const std::vector<float> want = {pen(2.0f, 3), pen(-2.0f, 1), 1.0f, pen(0.5f, 1), -1.0f,
                                   pen(3.0f, 1)};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << i;
}

TEST(Sampler, PenaltyWindowIsTheNewestTokens) {
  SamplerParams p = neutral();
  p.frequency_penalty = 1.0f;
  p.penalty_last_n = 2;  // of {0, 1, 0, 3, 5, 0} only {5, 0} count
  std::vector<float> got = penalised(kSix, p, kRecent);
  EXPECT_EQ(got, (std::vector<float>{1.0f, -2.0f, 1.0f, 0.5f, -1.0f, 2.0f}));
  // Ids outside the vocab in the window are ignored; last_n 0 disables penalties.
  got = penalised(kSix, p, {-1, 99});
  EXPECT_EQ(got, kSix);
  p.penalty_last_n = 0;
  EXPECT_EQ(penalised(kSix, p, kRecent), kSix);
}

TEST(Sampler, LogitBias) {
  SamplerParams p = neutral();
  const rlm_logit_bias ban[1] = {{0, -INFINITY}};
  p.logit_bias = ban;
  p.n_logit_bias = 1;
  // Banned token never a candidate, never sampled, not greedy.
  Cands c = candidates(kFive, p);
  EXPECT_EQ(c.idx, (std::vector<int32_t>{1, 2, 3, 4}));
  EXPECT_NEAR(sum(c.probs), 1.0f, 1e-6f);
  Scratch sc(5, 4);
  Rng rng;
  rng.seed(99);
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> l = kFive;
    EXPECT_NE(ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s), 0);
  }
  SamplerParams g = p;
  g.temperature = 0.0f;
  EXPECT_EQ(penalised(kFive, g, {})[0], -INFINITY);
  std::vector<float> l = kFive;
  EXPECT_EQ(ringlm::internal::sample(l.data(), 5, g, nullptr, 0, &rng, &sc.s), 1);

  // Finite biases add exactly; +inf forces a token.
  const rlm_logit_bias add[2] = {{4, 3.75f}, {2, -0.5f}};
  p.logit_bias = add;
  p.n_logit_bias = 2;
  EXPECT_EQ(penalised(kFive, p, {}),
            (std::vector<float>{4.0f, 3.0f, 1.5f, 1.0f, 4.25f}));
  const rlm_logit_bias force[1] = {{3, INFINITY}};
  p.logit_bias = force;
  p.n_logit_bias = 1;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l2 = kFive;
    EXPECT_EQ(ringlm::internal::sample(l2.data(), 5, p, nullptr, 0, &rng, &sc.s), 3);
  }
  // Everything banned: no candidates (see NothingToSample).
  const rlm_logit_bias all[5] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY},
                                 {3, -INFINITY}, {4, -INFINITY}};
  p.logit_bias = all;
  p.n_logit_bias = 5;
  c = candidates(kFive, p);
  EXPECT_TRUE(c.idx.empty());
}

// ---- Nothing to sample (issue #12) ---------------------------------------------------------------

// Every logit −inf or NaN after bias and penalties: sample() returns -1 without advancing the
// RNG, for greedy and sampling and whatever the truncation stages, and the logits are left
// exactly as they came in (bias and penalties undone, temperature never applied). It used to
// return token 0 as if it had been sampled.
TEST(Sampler, NothingToSampleIsReportedAndTheLogitsAreRestored) {
  const float nan = NAN;
  struct Case {
    const char* what;
    std::vector<float> logits;
    std::vector<rlm_logit_bias> bias;
    float frequency_penalty;
    std::vector<int32_t> recent;
  };
  const std::vector<Case> cases = {
      {"all banned by bias", kFive,
       {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY}, {4, -INFINITY}}, 0.0f,
       {}},
      {"token biased twice, then banned", kFive,
       {{2, 1.5f}, {0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY},
        {4, -INFINITY}, {2, 0.25f}},
       0.0f, {}},
      {"all NaN (model output)", std::vector<float>(5, nan), {}, 0.0f, {}},
      {"NaN and -inf", {nan, -INFINITY, nan, -INFINITY, nan}, {}, 0.0f, {}},
      {"bias bans some, NaN the rest", {nan, 1.0f, nan, 2.0f, nan},
       {{1, -INFINITY}, {3, -INFINITY}}, 0.0f, {}},
      {"penalties reach -inf", kFive, {}, 3e38f, {0, 1, 2, 3, 4, 0, 1, 2, 3, 4}},
      {"bias and penalties", kFive, {{0, -INFINITY}, {1, -INFINITY}}, 3e38f,
       {2, 3, 4, 2, 3, 4}},
  };
  const float temps[] = {0.0f, 1e-40f, 0.8f, 1.0f, 3.0f};
  for (const Case& k : cases) {
    for (float t : temps) {
      for (int32_t top_k : {0, 1, 3}) {
        for (float top_p : {1.0f, 0.5f}) {
          for (float min_p : {0.0f, 0.1f}) {
            SamplerParams p = neutral();
            p.temperature = t;
            p.top_k = top_k;
            p.top_p = top_p;
            p.min_p = min_p;
            p.logit_bias = k.bias.data();
            p.n_logit_bias = static_cast<uint32_t>(k.bias.size());
            p.frequency_penalty = k.frequency_penalty;
            p.penalty_last_n = 16;
            Scratch sc(5, 16, 8);
            Rng rng;
            rng.seed(7);
            std::vector<float> l = k.logits;
            const int32_t got = ringlm::internal::sample(l.data(), 5, p, k.recent.data(), k.recent.size(),
                                               &rng, &sc.s);
            const std::string where = std::string(k.what) + " T=" + std::to_string(t) +
                                      " k=" + std::to_string(top_k) +
                                      " p=" + std::to_string(top_p) +
                                      " min_p=" + std::to_string(min_p);
            EXPECT_EQ(got, -1) << where;
            EXPECT_EQ(rng.state, 7u) << where;  // not advanced
            EXPECT_EQ(memcmp(l.data(), k.logits.data(), 5 * sizeof(float)), 0) << where;
            l = k.logits;
            EXPECT_EQ(ringlm::internal::sampler_candidates(l.data(), 5, p, k.recent.data(),
                                                 k.recent.size(), &sc.s),
                      0u)
                << where;
            EXPECT_EQ(memcmp(l.data(), k.logits.data(), 5 * sizeof(float)), 0) << where;
          }
        }
      }
    }
  }
}

// One finite logit among −inf / NaN is always the token, whatever the truncation stages; no
// stage after the maximum can leave nothing (top-k >= 1, top-p keeps one, min-p <= 1).
TEST(Sampler, TruncationNeverLeavesNothing) {
  const float nan = NAN;
  for (int32_t only = 0; only < 5; ++only) {
    std::vector<float> base = {nan, -INFINITY, nan, -INFINITY, -INFINITY};
    base[only] = -1e30f;
    for (float t : {0.0f, 1e-40f, 0.5f, 2.0f}) {
      for (int32_t top_k : {0, 1, 2, 5}) {
        for (float top_p : {1.0f, 1e-6f}) {
          for (float min_p : {0.0f, 1.0f}) {
            SamplerParams p = neutral();
            p.temperature = t;
            p.top_k = top_k;
            p.top_p = top_p;
            p.min_p = min_p;
            Scratch sc(5, 4);
            Rng rng;
            rng.seed(3);
            std::vector<float> l = base;
            EXPECT_EQ(ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s), only)
                << only << " T=" << t << " k=" << top_k << " p=" << top_p << " min_p=" << min_p;
          }
        }
      }
    }
  }
  // min_p 1 and top_p tiny on a flat distribution: every tied maximum survives min-p, top-p
  // keeps the first in candidate order (lowest id).
  SamplerParams p = neutral();
  p.min_p = 1.0f;
  p.top_p = 1e-6f;
  const Cands c = candidates({2.0f, 2.0f, 2.0f, 1.0f}, p);
  EXPECT_EQ(c.idx, (std::vector<int32_t>{0}));
}

// ---- Temperature overflow (issue #12) ------------------------------------------------------------

// logit / T overflowed to +inf for a tiny T (e.g. --temp 1e-40), so every token with a positive
// logit looked "forced" and was drawn uniformly. Now the logits are shifted by their maximum
// when the division could overflow: the distribution tends to greedy as T -> 0.
TEST(Sampler, TinyTemperatureTendsToGreedy) {
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  std::vector<float> base(512);
  for (float& x : base) x = nd(gen);
  const int32_t best =
      static_cast<int32_t>(std::max_element(base.begin(), base.end()) - base.begin());
  for (float t : {1e-40f, 1e-38f, 1e-30f, 1e-12f}) {
    for (int32_t top_k : {0, 40}) {
      for (float top_p : {1.0f, 0.95f}) {
        for (float min_p : {0.0f, 0.05f}) {
          SamplerParams p = neutral();
          p.temperature = t;
          p.top_k = top_k;
          p.top_p = top_p;
          p.min_p = min_p;
          Scratch sc(512, 4);
          Rng rng;
          rng.seed(11);
          for (int i = 0; i < 200; ++i) {
            std::vector<float> l = base;
            ASSERT_EQ(ringlm::internal::sample(l.data(), 512, p, nullptr, 0, &rng, &sc.s), best)
                << "T=" << t << " k=" << top_k << " p=" << top_p << " min_p=" << min_p;
          }
          std::vector<float> l = base;
          EXPECT_EQ(ringlm::internal::sampler_candidates(l.data(), 512, p, nullptr, 0, &sc.s), 1u);
          EXPECT_EQ(sc.s.probs[0], 1.0f);
        }
      }
    }
  }
}

// Huge (biased) logits at an ordinary temperature overflowed the same way: two tokens biased to
// 3e38 and 2e38 both became +inf at T = 0.5 and were drawn half and half; the larger wins now.
TEST(Sampler, HugeLogitsDoNotOverflowIntoForcedTokens) {
  const rlm_logit_bias big[2] = {{1, 3e38f}, {3, 2e38f}};
  SamplerParams p = neutral();
  p.temperature = 0.5f;
  p.logit_bias = big;
  p.n_logit_bias = 2;
  Scratch sc(5, 4);
  Rng rng;
  rng.seed(21);
  for (int i = 0; i < 200; ++i) {
    std::vector<float> l = kFive;
    ASSERT_EQ(ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s), 1) << i;
  }
  // Exact ties at the maximum share the probability in the limit (not greedy's lowest id).
  const Cands c = candidates({1.0f, 3.0f, 3.0f, 2.9999998f}, [] {
    SamplerParams q = neutral();
    q.temperature = 1e-40f;
    return q;
  }());
  EXPECT_EQ(c.idx, (std::vector<int32_t>{1, 2}));
  EXPECT_EQ(c.probs, (std::vector<float>{0.5f, 0.5f}));
  // A +inf (forced) token stays the only candidate; finite logits / T that overflow do not
  // join it.
  const rlm_logit_bias force[1] = {{4, INFINITY}};
  p.logit_bias = force;
  p.n_logit_bias = 1;
  p.temperature = 1e-40f;
  for (int i = 0; i < 100; ++i) {
    std::vector<float> l = kFive;
    ASSERT_EQ(ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s), 4) << i;
  }
}

// Ordinary temperatures keep the plain division: logits[i] / T, bit for bit.
TEST(Sampler, OrdinaryTemperatureDividesExactly) {
  for (float t : {0.3f, 0.8f, 1.0f, 1.7f}) {
    SamplerParams p = neutral();
    p.temperature = t;
    Scratch sc(5, 4);
    std::vector<float> l = kFive;
    ringlm::internal::sampler_candidates(l.data(), 5, p, nullptr, 0, &sc.s);
    for (int i = 0; i < 5; ++i) EXPECT_EQ(l[i], kFive[i] / t) << t << " " << i;
  }
}

// ---- RNG and determinism ---------------------------------------------------------------------

TEST(Sampler, RngIsXorshift64Star) {
  Rng r;
  r.seed(1);
  // Reference values computed from the formula in sampler.h.
  EXPECT_EQ(r.next_u64(), 0x47e4ce4b896cdd1dull);
  EXPECT_EQ(r.next_u64(), 0xabcfa6a8e079651dull);
  EXPECT_EQ(r.next_u64(), 0xb9d10d8feb731f57ull);
  r.seed(0);  // mapped to a non-zero state, so the stream is not stuck at 0
  EXPECT_EQ(r.state, 0x9E3779B97F4A7C15ull);
  EXPECT_EQ(r.next_u64(), 0x0d83b3e29a21487aull);
  r.seed(0);
  EXPECT_EQ(r.next_float(), static_cast<float>(0x0d83b3e29a21487aull >> 40) / 16777216.0f);
  r.seed(42);
  for (int i = 0; i < 100000; ++i) {
    const float u = r.next_float();
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
  }
}

std::vector<int32_t> draw_sequence(uint64_t seed, int n) {
  const uint32_t vocab = 512;
  Scratch sc(vocab, 64);
  std::mt19937 gen(5);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  std::vector<float> base(vocab);
  for (float& x : base) x = nd(gen);
  SamplerParams p = neutral();
  p.temperature = 0.9f;
  p.top_k = 64;
  p.top_p = 0.95f;
  p.min_p = 0.01f;
  p.repeat_penalty = 1.1f;
  p.penalty_last_n = 32;
  Rng rng;
  rng.seed(seed);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    std::vector<float> l = base;
    const size_t nr = std::min<size_t>(out.size(), 32);
    out.push_back(ringlm::internal::sample(l.data(), vocab, p, out.data() + out.size() - nr, nr, &rng,
                                 &sc.s));
  }
  return out;
}

TEST(Sampler, SameSeedSameSequenceDifferentSeedDifferent) {
  const std::vector<int32_t> a = draw_sequence(1234, 200);
  EXPECT_EQ(a, draw_sequence(1234, 200));
  EXPECT_NE(a, draw_sequence(1235, 200));
  EXPECT_NE(a, draw_sequence(0, 200));
}

// 100k draws at T = 1 from softmax([4, 3, 2, 1, 0.5]). Each token's count is Binomial(N, p), so
// its frequency has standard error sqrt(p(1-p)/N) (0.0015 for p = 0.632, 0.00043 for 0.019).
// A correct sampler lands within 4 SE with probability 1 - 6e-5 per token; the seed is fixed, so
// the result is deterministic and a pass is not luck on reruns. A sampler that walked the
// wrong order or used the wrong probabilities would be off by far more than 4 SE.
TEST(Sampler, DrawFrequenciesMatchProbabilities) {
  const int kDraws = 100000;
  Scratch sc(5, 4);
  Rng rng;
  rng.seed(2024);
  SamplerParams p = neutral();
  int counts[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> l = kFive;
    const int32_t t = ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s);
    ASSERT_GE(t, 0);
    ASSERT_LT(t, 5);
    ++counts[t];
  }
  double z = 0;
  for (float x : kFive) z += exp(static_cast<double>(x));
  for (int t = 0; t < 5; ++t) {
    const double prob = exp(static_cast<double>(kFive[t])) / z;
    const double se = sqrt(prob * (1 - prob) / kDraws);
    const double freq = static_cast<double>(counts[t]) / kDraws;
    EXPECT_LE(fabs(freq - prob), 4 * se) << "token " << t << " freq " << freq << " p " << prob;
  }
}

// The same check through the sorted walk (top-p 0.999 keeps all five, so the survivors are
// walked in candidate order rather than token-id order): same frequencies.
TEST(Sampler, DrawFrequenciesSortedWalk) {
  const int kDraws = 100000;
  Scratch sc(5, 4);
  Rng rng;
  rng.seed(77);
  SamplerParams p = neutral();
  p.top_p = 0.999f;
  ASSERT_EQ(candidates(kFive, p).idx.size(), 5u);
  int counts[5] = {0, 0, 0, 0, 0};
  for (int i = 0; i < kDraws; ++i) {
    std::vector<float> l = kFive;
    ++counts[ringlm::internal::sample(l.data(), 5, p, nullptr, 0, &rng, &sc.s)];
  }
  double z = 0;
  for (float x : kFive) z += exp(static_cast<double>(x));
  for (int t = 0; t < 5; ++t) {
    const double prob = exp(static_cast<double>(kFive[t])) / z;
    const double se = sqrt(prob * (1 - prob) / kDraws);
    EXPECT_LE(fabs(static_cast<double>(counts[t]) / kDraws - prob), 4 * se) << t;
  }
}

// ---- Agreement with a plain double-precision reference of the documented order ---------------

// The documented pipeline written the obvious way: full sort, softmax over the top-k, top-p,
// then min-p, renormalise. The sampler prunes min-p before sorting; results must match.
Cands reference(const std::vector<float>& logits, const SamplerParams& p) {
  const int n = static_cast<int>(logits.size());
  std::vector<int32_t> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::vector<double> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<double>(logits[i] / p.temperature);
  std::sort(order.begin(), order.end(),
            [&](int a, int b) { return x[a] > x[b] || (x[a] == x[b] && a < b); });
  const int k = (p.top_k <= 0 || p.top_k >= n) ? n : p.top_k;
  order.resize(k);
  std::vector<double> w(k);
  double s = 0;
  for (int j = 0; j < k; ++j) s += (w[j] = exp(x[order[j]] - x[order[0]]));
  int keep = k;
  if (p.top_p < 1.0f) {
    double cum = 0;
    for (int j = 0; j < k; ++j) {
      cum += w[j] / s;
      if (cum >= p.top_p) {
        keep = j + 1;
        break;
      }
    }
  }
  int keep2 = 0;
  while (keep2 < keep && w[keep2] / s >= p.min_p * (w[0] / s)) ++keep2;
  Cands c;
  double kept = 0;
  for (int j = 0; j < keep2; ++j) kept += w[j];
  for (int j = 0; j < keep2; ++j) {
    c.idx.push_back(order[j]);
    c.probs.push_back(static_cast<float>(w[j] / kept));
  }
  return c;
}

TEST(Sampler, MatchesReferencePipeline) {
  const uint32_t vocab = 3000;
  std::mt19937 gen(77);
  std::normal_distribution<float> nd(0.0f, 2.5f);
  const float temps[] = {0.3f, 0.8f, 1.0f, 1.7f};
  const int32_t ks[] = {0, 1, 5, 40, 2999, 5000};
  const float ps[] = {1.0f, 0.95f, 0.5f};
  const float mins[] = {0.0f, 0.05f, 0.2f};
  int cases = 0;
  for (float t : temps)
    for (int32_t k : ks)
      for (float tp : ps)
        for (float mp : mins) {
          std::vector<float> l(vocab);
          for (float& x : l) x = nd(gen);
          SamplerParams p = neutral();
          p.temperature = t;
          p.top_k = k;
          p.top_p = tp;
          p.min_p = mp;
          const Cands want = reference(l, p);
          const Cands got = candidates(l, p);
          ASSERT_EQ(got.idx, want.idx) << "T " << t << " k " << k << " p " << tp << " min_p "
                                       << mp;
          for (size_t j = 0; j < want.probs.size(); ++j) {
            ASSERT_NEAR(got.probs[j], want.probs[j], 1e-5f) << j;
          }
          ++cases;
        }
  EXPECT_EQ(cases, 4 * 6 * 3 * 3);
}

// Heavy ties (coarse logits) and flat distributions: tie order and the top-p pruning bound.
TEST(Sampler, MatchesReferenceWithTiesAndFlatDistributions) {
  std::mt19937 gen(78);
  std::uniform_int_distribution<int> coarse(-8, 8);
  for (uint32_t vocab : {2u, 3u, 50u, 2000u}) {
    for (int32_t k : {0, 1, 2, 7, 1500}) {
      for (float tp : {1.0f, 0.9f, 0.3f, 0.01f}) {
        for (int flat = 0; flat < 2; ++flat) {
          std::vector<float> l(vocab);
          for (float& x : l) x = flat ? 1.5f : static_cast<float>(coarse(gen)) * 0.5f;
          SamplerParams p = neutral();
          p.top_k = k;
          p.top_p = tp;
          p.min_p = flat ? 0.0f : 0.01f;
          const Cands want = reference(l, p);
          const Cands got = candidates(l, p);
          ASSERT_EQ(got.idx, want.idx) << vocab << " k " << k << " p " << tp << " flat " << flat;
          for (size_t j = 0; j < want.probs.size(); ++j) {
            ASSERT_NEAR(got.probs[j], want.probs[j], 1e-5f) << j;
          }
        }
      }
    }
  }
}

// ---- Parameter validation --------------------------------------------------------------------

TEST(Sampler, ParamsFromAbi) {
  rlm_sampling s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  s.temperature = 0.8f;
  s.top_k = 40;
  s.top_p = 0.95f;
  s.min_p = 0.05f;
  s.repeat_penalty = 1.1f;
  s.frequency_penalty = 0.1f;
  s.presence_penalty = -0.2f;
  s.penalty_last_n = 64;
  s.seed = 0x5eed;
  const rlm_logit_bias bias[2] = {{3, -INFINITY}, {99, 2.0f}};
  s.logit_bias = bias;
  s.n_logit_bias = 2;
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  SamplerParams out{};
  ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&s, 100, 64, 2, &out, &err), RLM_OK);
  EXPECT_EQ(out.temperature, 0.8f);
  EXPECT_EQ(out.top_k, 40);
  EXPECT_EQ(out.top_p, 0.95f);
  EXPECT_EQ(out.min_p, 0.05f);
  EXPECT_EQ(out.repeat_penalty, 1.1f);
  EXPECT_EQ(out.frequency_penalty, 0.1f);
  EXPECT_EQ(out.presence_penalty, -0.2f);
  EXPECT_EQ(out.penalty_last_n, 64);
  EXPECT_EQ(out.seed, 0x5eedu);
  EXPECT_EQ(out.logit_bias, bias);  // not copied
  EXPECT_EQ(out.n_logit_bias, 2u);

  // Boundary values that are valid.
  {
    rlm_sampling b = s;
    b.temperature = 0.0f;
    b.top_k = 0;
    b.top_p = 1.0f;
    b.min_p = 1.0f;
    b.penalty_last_n = 0;
    b.logit_bias = nullptr;
    b.n_logit_bias = 0;
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK);
    b.min_p = 0.0f;
    b.top_k = 100000;  // larger than the vocab: off
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK);
  }

  struct Bad {
    const char* what;
    void (*mutate)(rlm_sampling*);
  };
  static const rlm_logit_bias kOutOfRange[1] = {{100, 1.0f}};
  static const rlm_logit_bias kNegative[1] = {{-1, 1.0f}};
  static const rlm_logit_bias kNan[1] = {{1, NAN}};
  const Bad bad[] = {
      {"negative temperature", [](rlm_sampling* p) { p->temperature = -0.1f; }},
      {"inf temperature", [](rlm_sampling* p) { p->temperature = INFINITY; }},
      {"nan temperature", [](rlm_sampling* p) { p->temperature = NAN; }},
      {"negative top_k", [](rlm_sampling* p) { p->top_k = -1; }},
      {"top_p 0", [](rlm_sampling* p) { p->top_p = 0.0f; }},
      {"top_p > 1", [](rlm_sampling* p) { p->top_p = 1.01f; }},
      {"top_p nan", [](rlm_sampling* p) { p->top_p = NAN; }},
      {"min_p < 0", [](rlm_sampling* p) { p->min_p = -0.01f; }},
      {"min_p > 1", [](rlm_sampling* p) { p->min_p = 1.5f; }},
      {"min_p nan", [](rlm_sampling* p) { p->min_p = NAN; }},
      {"repeat 0", [](rlm_sampling* p) { p->repeat_penalty = 0.0f; }},
      {"repeat negative", [](rlm_sampling* p) { p->repeat_penalty = -1.0f; }},
      {"repeat inf", [](rlm_sampling* p) { p->repeat_penalty = INFINITY; }},
      {"frequency nan", [](rlm_sampling* p) { p->frequency_penalty = NAN; }},
      {"frequency inf", [](rlm_sampling* p) { p->frequency_penalty = -INFINITY; }},
      {"presence inf", [](rlm_sampling* p) { p->presence_penalty = INFINITY; }},
      {"last_n negative", [](rlm_sampling* p) { p->penalty_last_n = -1; }},
      {"last_n > window", [](rlm_sampling* p) { p->penalty_last_n = 65; }},
      {"too many biases", [](rlm_sampling* p) { p->n_logit_bias = 3; }},
      {"bias array null", [](rlm_sampling* p) { p->logit_bias = nullptr; }},
      {"bias token = vocab", [](rlm_sampling* p) { p->logit_bias = kOutOfRange; p->n_logit_bias = 1; }},
      {"bias token negative", [](rlm_sampling* p) { p->logit_bias = kNegative; p->n_logit_bias = 1; }},
      {"bias nan", [](rlm_sampling* p) { p->logit_bias = kNan; p->n_logit_bias = 1; }},
  };
  for (const Bad& b : bad) {
    rlm_sampling m = s;
    b.mutate(&m);
    SamplerParams untouched{};
    untouched.top_k = 12345;
    msg[0] = '\0';
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&m, 100, 64, 2, &untouched, &err),
              RLM_ERR_INVALID_ARGUMENT)
        << b.what;
    EXPECT_NE(msg[0], '\0') << b.what;
    EXPECT_EQ(untouched.top_k, 12345) << b.what << ": output written on failure";
  }
  rlm_sampling m = s;
  m.struct_size = sizeof m + 8;
  EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&m, 100, 64, 2, &out, &err), RLM_ERR_STRUCT_SIZE);
  EXPECT_EQ(ringlm::internal::sampler_params_from_abi(nullptr, 100, 64, 2, &out, &err),
            RLM_ERR_INVALID_ARGUMENT);
}

// ---- Layout ----------------------------------------------------------------------------------

TEST(Sampler, LayoutMeasureEqualsReal) {
  const uint32_t vocabs[] = {1, 5, 512, 32000, 128256};
  const uint32_t windows[] = {0, 1, 64, 256};
  for (uint32_t v : vocabs) {
    for (uint32_t w : windows) {
      const uint32_t nb = v < 16 ? v : 16;
      Arena measure(nullptr, 0);
      SamplerScratch m{};
      ringlm::internal::sampler_layout(measure, v, w, nb, &m);
      EXPECT_TRUE(measure.ok());
      EXPECT_EQ(m.idx, nullptr);
      ringlm_test::AlignedBuffer mem(measure.used());
      Arena real(mem.data(), mem.size());
      SamplerScratch s{};
      ringlm::internal::sampler_layout(real, v, w, nb, &s);
      EXPECT_TRUE(real.ok());
      EXPECT_EQ(real.used(), measure.used()) << v << " " << w;
      EXPECT_NE(s.idx, nullptr);
      EXPECT_NE(s.probs, nullptr);
      EXPECT_EQ(s.vocab, v);
      EXPECT_EQ(s.window_cap, w);
      EXPECT_EQ(s.saved_cap, w + nb);
      EXPECT_GE(measure.used(), 2 * sizeof(float) * v + sizeof(int32_t) * w +
                                    sizeof(rlm_logit_bias) * (w + nb));
      // One byte short is detected.
      Arena small(mem.data(), mem.size() - 1);
      ringlm::internal::sampler_layout(small, v, w, nb, &s);
      EXPECT_FALSE(small.ok());
    }
  }
}

// Scratch is reused: a call after a very different call gives the same answer as a fresh one.
TEST(Sampler, ScratchReuseHasNoMemory) {
  Scratch sc(5, 8);
  SamplerParams p = neutral();
  p.frequency_penalty = 2.0f;
  p.penalty_last_n = 8;
  const int32_t recent[4] = {0, 0, 1, 4};
  std::vector<float> l = kFive;
  ringlm::internal::sampler_candidates(l.data(), 5, p, recent, 4, &sc.s);
  const uint32_t n = ringlm::internal::sampler_candidates((l = kFive).data(), 5, neutral(), nullptr, 0,
                                                &sc.s);
  const Cands fresh = candidates(kFive, neutral());
  ASSERT_EQ(n, fresh.idx.size());
  EXPECT_EQ(std::vector<int32_t>(sc.s.idx, sc.s.idx + n), fresh.idx);
  EXPECT_EQ(std::vector<float>(sc.s.probs, sc.s.probs + n), fresh.probs);
}

}  // namespace
