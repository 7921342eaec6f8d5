// The extra samplers (#17 item 6): DRY, XTC, typical-p, top-n-sigma and Mirostat v2. Each one's
// math on hand-made distributions (expected sets and probabilities worked out by hand below),
// DRY against a brute-force reference, determinism with a seed, neutral values changing nothing,
// validation, the older rlm_sampling size, no heap calls, and a session run where DRY reduces
// repetition.
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"
#include "sampler.h"
#include "sampler_testing.h"
#include "session.h"

using namespace ringlm_test;
using ringlm::internal::Arena;
using ringlm::internal::ErrorSink;
using ringlm::internal::Rng;
using ringlm::internal::SamplerParams;
using ringlm::internal::SamplerScratch;
using ringlm::internal::fb::DType;

namespace {

using Scratch = ringlm_test::SamplerScratchBuffer;

// Every stage at its neutral value, temperature 1 (the extra samplers as the ABI's defaults).
SamplerParams neutral() {
  SamplerParams p{};
  p.temperature = 1.0f;
  p.top_p = 1.0f;
  p.repeat_penalty = 1.0f;
  p.seed = 1;
  p.dry_base = 1.75f;
  p.dry_allowed_length = 2;
  p.xtc_threshold = 0.1f;
  p.typical_p = 1.0f;
  p.mirostat_tau = 5.0f;
  p.mirostat_eta = 0.1f;
  return p;
}

struct Cands {
  std::vector<int32_t> idx;
  std::vector<float> probs;
};

Cands candidates(std::vector<float> logits, const SamplerParams& p,
                 const std::vector<int32_t>& recent = {}, Rng* rng = nullptr,
                 const float* mu = nullptr) {
  Scratch sc(static_cast<uint32_t>(logits.size()), 64);
  const uint32_t n = ringlm::internal::sampler_candidates(
      logits.data(), static_cast<uint32_t>(logits.size()), p, recent.data(), recent.size(), &sc.s,
      rng, mu);
  Cands c;
  c.idx.assign(sc.s.idx, sc.s.idx + n);
  c.probs.assign(sc.s.probs, sc.s.probs + n);
  return c;
}

const std::vector<float> kFive = {4.0f, 3.0f, 2.0f, 1.0f, 0.5f};

// Logits whose softmax is exactly {0.4, 0.3, 0.2, 0.1} (up to float rounding).
const std::vector<float> kFour = {logf(0.4f), logf(0.3f), logf(0.2f), logf(0.1f)};

// ---- top-n-sigma ----------------------------------------------------------------------------

// kFive: mean 2.1, squared deviations 3.61 + 0.81 + 0.01 + 1.21 + 2.56 = 8.2, sigma =
// sqrt(8.2 / 5) = 1.28062. n = 1: keep logit >= 4 - 1.28 = 2.719 -> {0, 1}, p = 1 / (1 + e^-1)
// = 0.731059. n = 2: >= 1.439 -> {0, 1, 2}, p0 = 1 / (1 + e^-1 + e^-2) = 0.665241.
TEST(TopNSigma, WorkedExample) {
  SamplerParams p = neutral();
  p.top_n_sigma = 1.0f;
  Cands c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(c.probs[0], 0.731059f, 1e-5f);
  p.top_n_sigma = 2.0f;
  c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(c.probs[0], 0.665241f, 1e-5f);
  // Scale-invariant: the same set at another temperature.
  p.temperature = 2.0f;
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0, 1, 2}));
  // A banned (-inf) token does not enter mean or sigma.
  p.temperature = 1.0f;
  p.top_n_sigma = 1.0f;
  std::vector<float> six = kFive;
  six.push_back(-INFINITY);
  EXPECT_EQ(candidates(six, p).idx, (std::vector<int32_t>{0, 1}));
  // Flat logits: sigma 0 keeps every (tied) maximum.
  EXPECT_EQ(candidates({1.0f, 1.0f, 1.0f}, p).idx, (std::vector<int32_t>{0, 1, 2}));
}

// ---- typical-p ------------------------------------------------------------------------------

// kFive: p = {0.631632, 0.232365, 0.085482, 0.031447, 0.019074}, H = -Σ p ln p = 1.023876.
// |-ln p - H| = {0.5644, 0.4356, 1.4356, 2.4356, 2.9356}: order 1, 0, 2, 3, 4 with cumulative
// p 0.2324, 0.8640, 0.9495, ... So typical 0.2 keeps {1} alone (the most likely token goes),
// 0.5 keeps {0, 1}, 0.9 keeps {0, 1, 2}.
TEST(Typical, WorkedExample) {
  SamplerParams p = neutral();
  p.typical_p = 0.2f;
  Cands c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{1}));
  EXPECT_EQ(c.probs[0], 1.0f);
  p.typical_p = 0.5f;
  c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(c.probs[0], 0.731059f, 1e-5f);
  p.typical_p = 0.9f;
  c = candidates(kFive, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_NEAR(c.probs[2], 0.0900306f, 1e-5f);  // e^-2 / (1 + e^-1 + e^-2)
  // After top-k 3 the softmax is over three tokens: p = {0.665241, 0.244728, 0.090031},
  // H = 0.832033, scores {0.4245, 0.5755, 1.5755}: typical 0.5 keeps {0} alone.
  p.top_k = 3;
  p.typical_p = 0.5f;
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0}));
  // Top-p then measures p renormalised over typical's survivors: {0, 1} at 0.7311 / 0.2689,
  // top-p 0.7 keeps {0}; min-p is relative to the largest survivor.
  p.top_k = 0;
  p.typical_p = 0.5f;
  p.top_p = 0.7f;
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{0}));
  p.top_p = 1.0f;
  p.typical_p = 0.2f;
  p.min_p = 0.9f;
  EXPECT_EQ(candidates(kFive, p).idx, (std::vector<int32_t>{1}));
}

// ---- XTC ------------------------------------------------------------------------------------

// kFour (p 0.4, 0.3, 0.2, 0.1), probability 1: threshold 0.15 -> tokens 0, 1, 2 are above, all
// but the least probable of them (2) go: {2, 3} at 2/3, 1/3. Threshold 0.35: only token 0 is
// above: nothing goes. Threshold 0.3: {0, 1} above, 0 goes: {1, 2, 3} at 0.5, 1/3, 1/6.
TEST(Xtc, WorkedExample) {
  SamplerParams p = neutral();
  p.xtc_probability = 1.0f;
  p.xtc_threshold = 0.15f;
  Rng rng;
  rng.seed(7);
  Cands c = candidates(kFour, p, {}, &rng);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(c.probs[0], 2.0f / 3.0f, 1e-5f);
  p.xtc_threshold = 0.35f;
  EXPECT_EQ(candidates(kFour, p, {}, &rng).idx, (std::vector<int32_t>{0, 1, 2, 3}));
  p.xtc_threshold = 0.29f;
  c = candidates(kFour, p, {}, &rng);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_NEAR(c.probs[0], 0.5f, 1e-5f);
  // Without an RNG (sampler_candidates' default) XTC does not run.
  p.xtc_threshold = 0.15f;
  EXPECT_EQ(candidates(kFour, p).idx.size(), 4u);
  // Applied after min-p: min-p 0.6 leaves {0, 1} (0.3 >= 0.24), renormalised 4/7, 3/7, both
  // above 0.15: {1} remains.
  p.min_p = 0.6f;
  EXPECT_EQ(candidates(kFour, p, {}, &rng).idx, (std::vector<int32_t>{1}));
}

// With probability q, XTC applies exactly when its u (the first RNG output) is below q, and
// sample() takes two RNG steps per token.
TEST(Xtc, ProbabilityAndRngSteps) {
  SamplerParams p = neutral();
  p.xtc_probability = 0.5f;
  p.xtc_threshold = 0.15f;
  Scratch sc(4, 8);
  int applied = 0, skipped = 0;
  for (uint64_t seed = 1; seed <= 64; ++seed) {
    Rng rng, expect;
    rng.seed(seed);
    expect.seed(seed);
    const float u = expect.next_float();
    std::vector<float> l = kFour;
    const uint32_t n =
        ringlm::internal::sampler_candidates(l.data(), 4, p, nullptr, 0, &sc.s, &rng);
    EXPECT_EQ(n, u < 0.5f ? 2u : 4u) << seed;
    (u < 0.5f ? applied : skipped) += 1;
    EXPECT_EQ(rng.state, expect.state);
    // sample(): the XTC step, then the draw's.
    rng.seed(seed);
    expect.seed(seed);
    l = kFour;
    const int32_t t = ringlm::internal::sample(l.data(), 4, p, nullptr, 0, &rng, &sc.s);
    expect.next_float();
    expect.next_float();
    EXPECT_EQ(rng.state, expect.state);
    if (u < 0.5f) EXPECT_GE(t, 2);
  }
  EXPECT_GT(applied, 10);
  EXPECT_GT(skipped, 10);
}

// ---- Mirostat v2 ----------------------------------------------------------------------------

// kFour, tau 1 (mu = 2): surprises -log2 p = 1.32, 1.74, 2.32, 3.32: {0, 1} kept at 4/7, 3/7.
// Drawing 0: mu -= 0.1 * (-log2(4/7) - 1) -> 2.019265; drawing 1: 2 - 0.1 * (1.222392 - 1) =
// 1.977761. Top-k does not apply.
TEST(Mirostat, WorkedExample) {
  SamplerParams p = neutral();
  p.mirostat = 2;
  p.mirostat_tau = 1.0f;
  p.mirostat_eta = 0.1f;
  p.top_k = 1;
  p.min_p = 0.9f;
  Cands c = candidates(kFour, p);
  ASSERT_EQ(c.idx, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(c.probs[0], 4.0f / 7.0f, 1e-5f);
  Scratch sc(4, 8);
  bool saw[2] = {false, false};
  for (uint64_t seed = 1; seed <= 32; ++seed) {
    Rng rng;
    rng.seed(seed);
    float mu = 2.0f;
    double pd = 0;
    std::vector<float> l = kFour;
    const int32_t t = ringlm::internal::sample(l.data(), 4, p, nullptr, 0, &rng, &sc.s, &pd, &mu);
    ASSERT_TRUE(t == 0 || t == 1) << t;
    saw[t] = true;
    EXPECT_NEAR(pd, t == 0 ? 4.0 / 7.0 : 3.0 / 7.0, 1e-6);
    EXPECT_NEAR(mu, t == 0 ? 2.019265f : 1.977761f, 1e-5f);
  }
  EXPECT_TRUE(saw[0] && saw[1]);
  // mu 0: nothing has surprise <= 0 but the first token is kept. mu large: everything.
  float mu = 0.0f;
  EXPECT_EQ(candidates(kFour, p, {}, nullptr, &mu).idx, (std::vector<int32_t>{0}));
  mu = 10.0f;
  EXPECT_EQ(candidates(kFour, p, {}, nullptr, &mu).idx.size(), 4u);
  // Greedy wins over Mirostat and leaves mu alone.
  p.temperature = 0.0f;
  Rng rng;
  rng.seed(3);
  mu = 2.0f;
  std::vector<float> l = kFour;
  EXPECT_EQ(ringlm::internal::sample(l.data(), 4, p, nullptr, 0, &rng, &sc.s, nullptr, &mu), 0);
  EXPECT_EQ(mu, 2.0f);
}

// Mirostat converges: the running average surprise approaches tau.
TEST(Mirostat, AverageSurpriseNearTau) {
  const uint32_t vocab = 200;
  std::vector<float> base(vocab);
  for (uint32_t i = 0; i < vocab; ++i) base[i] = -0.05f * static_cast<float>(i);
  SamplerParams p = neutral();
  p.mirostat = 2;
  p.mirostat_tau = 3.0f;
  p.mirostat_eta = 0.1f;
  Scratch sc(vocab, 8);
  Rng rng;
  rng.seed(11);
  float mu = 6.0f;
  double sum = 0;
  int n = 0;
  for (int i = 0; i < 2000; ++i) {
    std::vector<float> l = base;
    double pd = 0;
    ringlm::internal::sample(l.data(), vocab, p, nullptr, 0, &rng, &sc.s, &pd, &mu);
    if (i >= 500) {
      sum += -log2(pd);
      ++n;
    }
  }
  EXPECT_NEAR(sum / n, 3.0, 0.3);
}

// ---- DRY ------------------------------------------------------------------------------------

uint32_t bits_word(uint32_t vocab) { return (vocab + 31) / 32; }

// llama.cpp's example: a b c c b c y a b c (a = 0, b = 1, c = 2, y = 3). Repeats of the end
// "... a b c": "a b c" at positions 0-2 (length 3, followed by c), "b c" at 4-5 (length 2,
// followed by y), "c" at 3 (length 1). Allowed length 2: c gets mult * base^(3 - 2), y gets
// mult * base^0; b (length 1) nothing.
TEST(Dry, WorkedExample) {
  const std::vector<int32_t> recent = {0, 1, 2, 2, 1, 2, 3, 0, 1, 2};
  SamplerParams p = neutral();
  p.temperature = 0.0f;  // greedy: the logits keep the stage 1-2b changes
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  p.dry_allowed_length = 2;
  p.dry_penalty_last_n = 64;
  Scratch sc(5, 64);
  auto run = [&](const SamplerParams& q) {
    std::vector<float> l(5, 0.0f);
    ringlm::internal::sampler_candidates(l.data(), 5, q, recent.data(), recent.size(), &sc.s);
    return l;
  };
  EXPECT_EQ(run(p), (std::vector<float>{0.0f, 0.0f, -2.0f, -1.0f, 0.0f}));
  // Multiplier 0.8, base 1.75: c -1.4, y -0.8.
  SamplerParams q = p;
  q.dry_multiplier = 0.8f;
  q.dry_base = 1.75f;
  std::vector<float> l = run(q);
  EXPECT_FLOAT_EQ(l[2], -1.4f);
  EXPECT_FLOAT_EQ(l[3], -0.8f);
  // Allowed length 3: only c (length 3, exponent 0).
  q = p;
  q.dry_allowed_length = 3;
  EXPECT_EQ(run(q), (std::vector<float>{0.0f, 0.0f, -1.0f, 0.0f, 0.0f}));
  // y a breaker: it limits repeats to the 3 newest tokens (c's repeat of 3 stays) and is never
  // penalised itself.
  std::vector<uint32_t> bits(bits_word(5), 0);
  q = p;
  q.dry_breaker_bits = bits.data();
  bits[0] = 1u << 3;
  EXPECT_EQ(run(q), (std::vector<float>{0.0f, 0.0f, -2.0f, 0.0f, 0.0f}));
  // a a breaker (2 back): repeats are capped at 2: c and y both get base^0.
  bits[0] = 1u << 0;
  EXPECT_EQ(run(q), (std::vector<float>{0.0f, 0.0f, -1.0f, -1.0f, 0.0f}));
  // b a breaker (1 back): the limit 1 is below the allowed length: nothing.
  bits[0] = 1u << 1;
  EXPECT_EQ(run(q), std::vector<float>(5, 0.0f));
  // A window of the last 4 tokens (y a b c) has no repeat.
  q = p;
  q.dry_penalty_last_n = 4;
  EXPECT_EQ(run(q), std::vector<float>(5, 0.0f));
  // Multiplier 0 is off.
  q = p;
  q.dry_multiplier = 0.0f;
  EXPECT_EQ(run(q), std::vector<float>(5, 0.0f));
}

// The exponent is capped at int(88.7228391 / ln base): base 1e10 -> 3, so a repeat of length 10
// with allowed length 0 costs 1e30, not inf.
TEST(Dry, ExponentCap) {
  std::vector<int32_t> recent;
  for (int i = 0; i < 12; ++i) recent.push_back(i % 2);
  SamplerParams p = neutral();
  p.temperature = 0.0f;
  p.dry_multiplier = 1.0f;
  p.dry_base = 1e10f;
  p.dry_allowed_length = 0;
  p.dry_penalty_last_n = 64;
  Scratch sc(3, 64);
  std::vector<float> l(3, 0.0f);
  ringlm::internal::sampler_candidates(l.data(), 3, p, recent.data(), recent.size(), &sc.s);
  EXPECT_FLOAT_EQ(l[0], -static_cast<float>(pow(static_cast<double>(1e10f), 3)));
  EXPECT_TRUE(isfinite(l[0]));
}

// Against a brute-force reference on random windows: for every earlier position j, the longest
// common suffix of window[0..j] and the whole window, capped at the breaker limit; the token
// after j gets mult * base^(len - allowed) for its largest len >= allowed.
TEST(Dry, MatchesBruteForce) {
  uint32_t x = 12345;
  auto rnd = [&x](uint32_t n) {
    x = x * 1664525u + 1013904223u;
    return (x >> 8) % n;
  };
  const uint32_t vocab = 4;
  Scratch sc(vocab, 64);
  int penalised = 0, limited = 0;
  for (int trial = 0; trial < 400; ++trial) {
    const size_t n = 1 + rnd(40);
    std::vector<int32_t> w(n);
    for (auto& t : w) t = static_cast<int32_t>(rnd(trial % 2 ? 2 : 3));
    std::vector<uint32_t> bits(1, trial % 3 == 0 ? (1u << 3) : 0u);
    if (trial % 3 == 0 && n > 5) w[n - 1 - rnd(5)] = 3;  // a breaker somewhere near the end
    SamplerParams p = neutral();
    p.temperature = 0.0f;
    p.dry_multiplier = 0.5f;
    p.dry_base = 1.5f;
    p.dry_allowed_length = static_cast<int32_t>(rnd(4));
    p.dry_penalty_last_n = 64;
    p.dry_breaker_bits = bits.data();
    std::vector<float> got(vocab, 0.0f);
    ringlm::internal::sampler_candidates(got.data(), vocab, p, w.data(), w.size(), &sc.s);

    auto breaker = [&](int32_t t) { return (bits[0] >> t) & 1u; };
    size_t limit = n;
    for (size_t i = 0; i < n; ++i) {
      if (breaker(w[n - 1 - i])) {
        limit = i;
        break;
      }
    }
    std::vector<float> want(vocab, 0.0f);
    if (n > static_cast<size_t>(p.dry_allowed_length) &&
        limit >= static_cast<size_t>(p.dry_allowed_length)) {
      std::map<int32_t, size_t> best;
      for (size_t j = 0; j + 1 < n; ++j) {  // window[0..j] ends before the newest token
        size_t len = 0;
        while (len <= j && w[j - len] == w[n - 1 - len]) ++len;
        len = std::min(len, limit);
        if (len < static_cast<size_t>(p.dry_allowed_length)) continue;
        const int32_t t = w[j + 1];
        if (breaker(t)) continue;
        if (!best.count(t) || best[t] < len) best[t] = len;
      }
      for (const auto& kv : best) {
        want[kv.first] -=
            static_cast<float>(0.5 * pow(static_cast<double>(1.5f),
                                         static_cast<int>(kv.second) - p.dry_allowed_length));
      }
    }
    ASSERT_EQ(got, want) << "trial " << trial;
    penalised += got != std::vector<float>(vocab, 0.0f);
    limited += limit < n && limit >= static_cast<size_t>(p.dry_allowed_length);
  }
  EXPECT_GT(penalised, 200);  // the cases are not trivial
  EXPECT_GT(limited, 20);
}

// Nothing to sample: DRY's changes are undone with the bias's, the logits come back as given.
TEST(Dry, NoCandidatesRestoresLogits) {
  const std::vector<int32_t> recent = {0, 1, 2, 2, 1, 2, 3, 0, 1, 2};
  const rlm_logit_bias ban[5] = {{0, -INFINITY}, {1, -INFINITY}, {2, -INFINITY}, {3, -INFINITY},
                                 {4, -INFINITY}};
  SamplerParams p = neutral();
  p.dry_multiplier = 1.0f;
  p.dry_base = 2.0f;
  p.dry_penalty_last_n = 64;
  p.repeat_penalty = 1.5f;
  p.penalty_last_n = 64;
  p.logit_bias = ban;
  p.n_logit_bias = 5;
  Scratch sc(5, 64);
  const std::vector<float> in = {0.5f, -1.0f, 2.0f, 3.0f, 0.0f};
  for (float t : {0.0f, 1.0f}) {
    p.temperature = t;
    std::vector<float> l = in;
    Rng rng;
    rng.seed(1);
    EXPECT_EQ(ringlm::internal::sample(l.data(), 5, p, recent.data(), recent.size(), &rng, &sc.s),
              -1);
    EXPECT_EQ(l, in);
    EXPECT_EQ(rng.state, 1u);
  }
}

// ---- Everything at once: determinism, neutral values, heap ----------------------------------

std::vector<float> random_logits(uint32_t vocab, uint32_t seed) {
  std::vector<float> l(vocab);
  Rng r;
  r.seed(seed);
  for (auto& v : l) v = (r.next_float() - 0.5f) * 12.0f;
  return l;
}

std::vector<int32_t> run_tokens(const SamplerParams& p, uint32_t vocab, int steps, uint64_t seed,
                                Scratch* sc, std::vector<double>* pds = nullptr) {
  Rng rng;
  rng.seed(seed);
  float mu = 2.0f * p.mirostat_tau;
  std::vector<int32_t> out = {1, 2, 3, 1, 2, 3, 1, 2};
  for (int i = 0; i < steps; ++i) {
    std::vector<float> l = random_logits(vocab, 100 + static_cast<uint32_t>(i) % 7);
    double pd = 0;
    const size_t nr = std::min<size_t>(out.size(), 64);
    out.push_back(ringlm::internal::sample(l.data(), vocab, p, out.data() + out.size() - nr, nr,
                                           &rng, &sc->s, &pd, &mu));
    if (pds) pds->push_back(pd);
  }
  return out;
}

TEST(SamplersExtra, DeterministicWithSeed) {
  const uint32_t vocab = 300;
  Scratch sc(vocab, 64);
  std::vector<uint32_t> bits(bits_word(vocab), 0);
  bits[0] = 1u << 7;
  SamplerParams all = neutral();
  all.top_k = 100;
  all.top_p = 0.95f;
  all.min_p = 0.01f;
  all.dry_multiplier = 0.8f;
  all.dry_penalty_last_n = 64;
  all.dry_breaker_bits = bits.data();
  all.xtc_probability = 0.5f;
  all.xtc_threshold = 0.05f;
  all.typical_p = 0.9f;
  all.top_n_sigma = 2.0f;
  SamplerParams miro = neutral();
  miro.mirostat = 2;
  miro.top_n_sigma = 1.0f;  // replaced by Mirostat
  for (const SamplerParams& p : {all, miro}) {
    const std::vector<int32_t> a = run_tokens(p, vocab, 60, 42, &sc);
    EXPECT_EQ(a, run_tokens(p, vocab, 60, 42, &sc));
    EXPECT_NE(a, run_tokens(p, vocab, 60, 43, &sc));
  }
}

// The ABI's neutral values and an older struct give the same params, and the same tokens and
// probabilities, bit for bit, as value-initialised extra fields (the pipeline before them).
TEST(SamplersExtra, NeutralValuesChangeNothing) {
  rlm_sampling def;
  rlm_sampling_default(&def);
  rlm_sampling old = def;
  old.struct_size = static_cast<uint32_t>(
      (offsetof(rlm_sampling, n_logit_bias) + sizeof(uint32_t) + alignof(rlm_sampling) - 1) /
      alignof(rlm_sampling) * alignof(rlm_sampling));
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  SamplerParams from_def{}, from_old{};
  ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&def, 300, 64, 4, &from_def, &err), RLM_OK)
      << msg;
  ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&old, 300, 64, 4, &from_old, &err), RLM_OK)
      << msg;
  EXPECT_EQ(from_def.n_dry_breakers, 4u);  // copied, unused while DRY is off
  EXPECT_EQ(from_old.n_dry_breakers, 0u);
  EXPECT_EQ(from_old.typical_p, 1.0f);
  EXPECT_EQ(from_old.dry_base, 1.75f);
  EXPECT_EQ(from_old.mirostat_tau, 5.0f);
  EXPECT_EQ(from_def.dry_penalty_last_n, 64);  // -1 resolved to the window
  SamplerParams plain{};  // the old fields only
  plain.temperature = from_def.temperature;
  plain.top_k = from_def.top_k;
  plain.top_p = from_def.top_p;
  plain.min_p = from_def.min_p;
  plain.repeat_penalty = 1.3f;
  plain.penalty_last_n = 32;
  from_def.repeat_penalty = from_old.repeat_penalty = 1.3f;
  from_def.penalty_last_n = from_old.penalty_last_n = 32;
  const uint32_t vocab = 300;
  Scratch sc(vocab, 64);
  for (int variant = 0; variant < 3; ++variant) {
    SamplerParams a = plain, b = from_def, c = from_old;
    if (variant == 1) a.top_k = b.top_k = c.top_k = 0;  // the unsorted by-id walk
    if (variant == 2) a.top_p = b.top_p = c.top_p = 0.8f, a.top_k = b.top_k = c.top_k = 0;
    std::vector<double> pa, pb, pc;
    const auto ta = run_tokens(a, vocab, 50, 9, &sc, &pa);
    EXPECT_EQ(ta, run_tokens(b, vocab, 50, 9, &sc, &pb));
    EXPECT_EQ(ta, run_tokens(c, vocab, 50, 9, &sc, &pc));
    EXPECT_EQ(pa, pb);
    EXPECT_EQ(pa, pc);
  }
}

// The generic path (forced by XTC with probability 1 and threshold 1: it never drops anything)
// keeps exactly the plain path's top-k / top-p / min-p survivors.
TEST(SamplersExtra, GenericPathMatchesPlainTruncation) {
  const uint32_t vocab = 257;
  for (uint32_t seed = 1; seed <= 40; ++seed) {
    SamplerParams p = neutral();
    p.top_k = static_cast<int32_t>(seed % 4 == 0 ? 0 : 10 * (seed % 4));
    p.top_p = seed % 3 == 0 ? 1.0f : 0.5f + 0.1f * static_cast<float>(seed % 5);
    p.min_p = seed % 2 ? 0.0f : 0.02f;
    p.temperature = 0.5f + 0.1f * static_cast<float>(seed % 7);
    SamplerParams q = p;
    q.xtc_probability = 1.0f;
    q.xtc_threshold = 1.0f;
    Rng rng;
    rng.seed(seed);
    const std::vector<float> l = random_logits(vocab, seed);
    const Cands a = candidates(l, p);
    const Cands b = candidates(l, q, {}, &rng);
    ASSERT_EQ(a.idx, b.idx) << seed;
    for (size_t j = 0; j < a.probs.size(); ++j) ASSERT_NEAR(a.probs[j], b.probs[j], 1e-6f) << seed;
  }
}

TEST(SamplersExtra, NoHeapCalls) {
  if (!kHeapCounting) GTEST_SKIP() << "heap calls are not counted in this build";
  const uint32_t vocab = 300;
  Scratch sc(vocab, 64);
  std::vector<uint32_t> bits(bits_word(vocab), 0x11111111u);
  SamplerParams all = neutral();
  all.top_k = 50;
  all.dry_multiplier = 0.8f;
  all.dry_penalty_last_n = 64;
  all.dry_breaker_bits = bits.data();
  all.xtc_probability = 1.0f;
  all.typical_p = 0.9f;
  all.top_n_sigma = 2.0f;
  SamplerParams miro = all;
  miro.mirostat = 2;
  std::vector<float> l = random_logits(vocab, 5);
  const std::vector<int32_t> recent = {1, 2, 3, 1, 2, 3, 1, 2, 3, 4, 5, 1, 2};
  const HeapCalls calls = count_heap([&] {
    for (const SamplerParams* p : {&all, &miro}) {
      Rng rng;
      rng.seed(1);
      float mu = 10.0f;
      for (int i = 0; i < 20; ++i) {
        ringlm::internal::sample(l.data(), vocab, *p, recent.data(), recent.size(), &rng, &sc.s,
                                 nullptr, &mu);
      }
    }
  });
  EXPECT_EQ(calls.allocs, 0);
  EXPECT_EQ(calls.frees, 0);
}

// ---- Validation -----------------------------------------------------------------------------

TEST(SamplersExtra, Validation) {
  rlm_sampling s;
  rlm_sampling_default(&s);
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  SamplerParams out{};
  ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&s, 100, 64, 2, &out, &err), RLM_OK);
  // Values that are valid.
  {
    rlm_sampling b = s;
    b.dry_multiplier = 2.0f;
    b.dry_base = 1.0f;
    b.dry_allowed_length = 0;
    b.dry_penalty_last_n = 64;
    b.xtc_probability = 1.0f;
    b.xtc_threshold = 0.0f;
    b.typical_p = 0.01f;
    b.top_n_sigma = 3.0f;
    b.mirostat = 2;
    b.mirostat_tau = 0.0f;
    b.mirostat_eta = 0.0f;
    b.dry_sequence_breakers = nullptr;
    b.n_dry_sequence_breakers = 0;
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK) << msg;
    EXPECT_EQ(out.dry_penalty_last_n, 64);
    b.dry_penalty_last_n = 0;
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK) << msg;
  }
  // A zeroed tail (a caller that memsets instead of rlm_sampling_default) is valid and off.
  {
    rlm_sampling z = s;
    memset(reinterpret_cast<char*>(&z) + offsetof(rlm_sampling, dry_multiplier), 0,
           sizeof z - offsetof(rlm_sampling, dry_multiplier));
    ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&z, 100, 64, 2, &out, &err), RLM_OK) << msg;
    std::vector<float> l = kFive, l2 = kFive;
    SamplerParams n = neutral();
    out.temperature = n.temperature = 1.0f;
    out.top_k = n.top_k = 0;
    out.top_p = n.top_p = 1.0f;
    out.min_p = n.min_p = 0.0f;
    Scratch sc(5, 64);
    Rng r1, r2;
    r1.seed(5);
    r2.seed(5);
    double p1 = 0, p2 = 0;
    EXPECT_EQ(ringlm::internal::sample(l.data(), 5, out, nullptr, 0, &r1, &sc.s, &p1),
              ringlm::internal::sample(l2.data(), 5, n, nullptr, 0, &r2, &sc.s, &p2));
    EXPECT_EQ(p1, p2);
    EXPECT_EQ(r1.state, r2.state);
  }
  // Breakers are copied: the caller's strings may change afterwards.
  {
    char a[] = "ab", c[] = "\n";
    const char* list[2] = {a, c};
    rlm_sampling b = s;
    b.dry_sequence_breakers = list;
    b.n_dry_sequence_breakers = 2;
    ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK) << msg;
    a[0] = 'x';
    EXPECT_EQ(out.n_dry_breakers, 2u);
    EXPECT_EQ(std::string(out.dry_breaker_text, 3), "ab\n");
    EXPECT_EQ(out.dry_breaker_len[0], 2);
    EXPECT_EQ(out.dry_breaker_len[1], 1);
  }
  static const char* const kNine[9] = {"a", "b", "c", "d", "e", "f", "g", "h", "i"};
  static const char* const kEmpty[1] = {""};
  static const char* const kNullEntry[2] = {"a", nullptr};
  static const char* const kLong[2] = {
      "0123456789012345678901234567890123456789", "012345678901234567890123456789"};  // 70 bytes
  static const char* const kLongOne[1] = {
      "01234567890123456789012345678901234567890123456789012345678901234"};  // 65 bytes
  struct Bad {
    const char* what;
    const char* needle;  // in the message
    void (*mutate)(rlm_sampling*);
  };
  const Bad bad[] = {
      {"dry_multiplier < 0", "dry_multiplier", [](rlm_sampling* p) { p->dry_multiplier = -0.1f; }},
      {"dry_multiplier nan", "dry_multiplier", [](rlm_sampling* p) { p->dry_multiplier = NAN; }},
      {"dry_multiplier inf", "dry_multiplier",
       [](rlm_sampling* p) { p->dry_multiplier = INFINITY; }},
      {"dry_base < 1", "dry_base",
       [](rlm_sampling* p) {
         p->dry_multiplier = 1.0f;
         p->dry_base = 0.99f;
       }},
      {"dry_base inf", "dry_base",
       [](rlm_sampling* p) {
         p->dry_multiplier = 1.0f;
         p->dry_base = INFINITY;
       }},
      {"dry_allowed_length < 0", "dry_allowed_length",
       [](rlm_sampling* p) { p->dry_allowed_length = -1; }},
      {"dry_penalty_last_n -2", "dry_penalty_last_n",
       [](rlm_sampling* p) { p->dry_penalty_last_n = -2; }},
      {"dry_penalty_last_n > window", "dry_penalty_last_n",
       [](rlm_sampling* p) { p->dry_penalty_last_n = 65; }},
      {"9 breakers", "breakers",
       [](rlm_sampling* p) {
         p->dry_sequence_breakers = kNine;
         p->n_dry_sequence_breakers = 9;
       }},
      {"breakers null", "dry_sequence_breakers",
       [](rlm_sampling* p) { p->dry_sequence_breakers = nullptr; }},
      {"breaker empty", "empty",
       [](rlm_sampling* p) {
         p->dry_sequence_breakers = kEmpty;
         p->n_dry_sequence_breakers = 1;
       }},
      {"breaker null", "NULL",
       [](rlm_sampling* p) {
         p->dry_sequence_breakers = kNullEntry;
         p->n_dry_sequence_breakers = 2;
       }},
      {"breakers too long", "bytes",
       [](rlm_sampling* p) {
         p->dry_sequence_breakers = kLong;
         p->n_dry_sequence_breakers = 2;
       }},
      {"one breaker too long", "bytes",
       [](rlm_sampling* p) {
         p->dry_sequence_breakers = kLongOne;
         p->n_dry_sequence_breakers = 1;
       }},
      {"xtc_probability > 1", "xtc_probability",
       [](rlm_sampling* p) { p->xtc_probability = 1.5f; }},
      {"xtc_probability nan", "xtc_probability", [](rlm_sampling* p) { p->xtc_probability = NAN; }},
      {"xtc_threshold < 0", "xtc_threshold", [](rlm_sampling* p) { p->xtc_threshold = -0.1f; }},
      {"xtc_threshold > 1", "xtc_threshold", [](rlm_sampling* p) { p->xtc_threshold = 1.1f; }},
      {"typical < 0", "typical_p", [](rlm_sampling* p) { p->typical_p = -0.01f; }},
      {"typical > 1", "typical_p", [](rlm_sampling* p) { p->typical_p = 1.01f; }},
      {"typical nan", "typical_p", [](rlm_sampling* p) { p->typical_p = NAN; }},
      {"top_n_sigma < 0", "top_n_sigma", [](rlm_sampling* p) { p->top_n_sigma = -1.0f; }},
      {"top_n_sigma inf", "top_n_sigma", [](rlm_sampling* p) { p->top_n_sigma = INFINITY; }},
      {"mirostat 1", "not supported", [](rlm_sampling* p) { p->mirostat = 1; }},
      {"mirostat 3", "mirostat", [](rlm_sampling* p) { p->mirostat = 3; }},
      {"mirostat -1", "mirostat", [](rlm_sampling* p) { p->mirostat = -1; }},
      {"tau < 0", "mirostat_tau", [](rlm_sampling* p) { p->mirostat_tau = -1.0f; }},
      {"tau nan", "mirostat_tau", [](rlm_sampling* p) { p->mirostat_tau = NAN; }},
      {"eta < 0", "mirostat_eta", [](rlm_sampling* p) { p->mirostat_eta = -0.1f; }},
      {"eta inf", "mirostat_eta", [](rlm_sampling* p) { p->mirostat_eta = INFINITY; }},
  };
  {
    rlm_sampling b = s;
    b.dry_multiplier = 1.0f;
    b.mirostat = 2;
    ASSERT_EQ(ringlm::internal::sampler_params_from_abi(&b, 100, 64, 2, &out, &err), RLM_OK);
    EXPECT_TRUE(ringlm::internal::sampler_extra_params_valid(out, 64));
    EXPECT_FALSE(ringlm::internal::sampler_extra_params_valid(out, 63));  // last_n 64 > 63
    SamplerParams bad_p = out;
    bad_p.n_dry_breakers = 9;
    EXPECT_FALSE(ringlm::internal::sampler_extra_params_valid(bad_p, 64));
    bad_p = out;
    bad_p.mirostat = 1;
    EXPECT_FALSE(ringlm::internal::sampler_extra_params_valid(bad_p, 64));
    bad_p = out;
    bad_p.typical_p = NAN;
    EXPECT_FALSE(ringlm::internal::sampler_extra_params_valid(bad_p, 64));
  }
  for (const Bad& b : bad) {
    rlm_sampling m = s;
    b.mutate(&m);
    SamplerParams untouched{};
    untouched.top_k = 12345;
    msg[0] = '\0';
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&m, 100, 64, 2, &untouched, &err),
              RLM_ERR_INVALID_ARGUMENT)
        << b.what;
    EXPECT_NE(strstr(msg, b.needle), nullptr) << b.what << ": " << msg;
    EXPECT_EQ(untouched.top_k, 12345) << b.what << ": output written on failure";
  }
  // Sizes: the current and the older one only. (On 32-bit targets the older size can equal
  // offsetof(dry_multiplier): no padding after n_logit_bias there.)
  rlm_sampling m = s;
  const uint32_t old_size = static_cast<uint32_t>(
      (offsetof(rlm_sampling, n_logit_bias) + sizeof(uint32_t) + alignof(rlm_sampling) - 1) /
      alignof(rlm_sampling) * alignof(rlm_sampling));
  for (uint32_t size : {static_cast<uint32_t>(offsetof(rlm_sampling, dry_multiplier)),
                        static_cast<uint32_t>(offsetof(rlm_sampling, mirostat)),
                        static_cast<uint32_t>(sizeof m + 8), 0u}) {
    if (size == old_size) continue;
    m.struct_size = size;
    EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&m, 100, 64, 2, &out, &err),
              RLM_ERR_STRUCT_SIZE)
        << size;
  }
  // The older size ignores whatever lies past it (here: invalid values).
  m = s;
  m.struct_size = static_cast<uint32_t>(
      (offsetof(rlm_sampling, n_logit_bias) + sizeof(uint32_t) + alignof(rlm_sampling) - 1) /
      alignof(rlm_sampling) * alignof(rlm_sampling));
  m.mirostat = 1;
  m.typical_p = -5.0f;
  EXPECT_EQ(ringlm::internal::sampler_params_from_abi(&m, 100, 64, 2, &out, &err), RLM_OK) << msg;
  EXPECT_EQ(out.mirostat, 0);
}

// ---- Through a session ----------------------------------------------------------------------

const OpenedModel& random_model_fixture() {
  static OpenedModel m;
  static bool opened = false;
  if (!opened) {
    RandomModelShape shape;
    std::string err;
    EXPECT_TRUE(open_random_model(shape, DType::F32, &m, &err)) << err;
    opened = true;
  }
  return m;
}

rlm_session_config session_config() {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = 256;
  c.n_sink = 4;
  c.n_batch = 64;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

// Byte tokens of `text` (the random model's byte b is token 3 + b).
std::vector<int32_t> bytes_of(const std::string& text) {
  std::vector<int32_t> t;
  for (unsigned char c : text) t.push_back(3 + c);
  return t;
}

std::vector<int32_t> generate(rlm_session* s, const std::vector<int32_t>& prompt, int n) {
  EXPECT_EQ(rlm_session_reset(s), RLM_OK);
  EXPECT_EQ(rlm_session_feed_tokens(s, prompt.data(), prompt.size()), RLM_OK);
  EXPECT_EQ(rlm_session_set_ignore_eos(s, 1), RLM_OK);
  std::vector<int32_t> out;
  for (int i = 0; i < n; ++i) {
    rlm_step_result r;
    rlm_step_result_default(&r);
    if (rlm_step(s, &r) != RLM_OK) break;
    out.push_back(r.token);
  }
  return out;
}

// Tokens that extend a trigram already seen in prompt + output.
int repeated_trigrams(const std::vector<int32_t>& prompt, const std::vector<int32_t>& out) {
  std::vector<int32_t> all = prompt;
  std::set<std::vector<int32_t>> seen;
  for (size_t i = 2; i < all.size(); ++i) seen.insert({all[i - 2], all[i - 1], all[i]});
  int repeats = 0;
  for (int32_t t : out) {
    all.push_back(t);
    const size_t i = all.size() - 1;
    const std::vector<int32_t> tri = {all[i - 2], all[i - 1], all[i]};
    repeats += seen.count(tri) ? 1 : 0;
    seen.insert(tri);
  }
  return repeats;
}

TEST(SamplersExtraSession, DryReducesRepetition) {
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, session_config()), RLM_OK);
  std::string text;
  for (int i = 0; i < 12; ++i) text += "the cat sat. ";
  const std::vector<int32_t> prompt = bytes_of(text);
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  const std::vector<int32_t> plain = generate(ts.s, prompt, 64);
  ASSERT_EQ(plain.size(), 64u);
  const int plain_repeats = repeated_trigrams(prompt, plain);

  sp.dry_multiplier = 2.0f;  // breakers: the defaults "\n", ":", "\"", "*"
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK) << rlm_session_error(ts.s);
  auto* impl = reinterpret_cast<ringlm::internal::SessionImpl*>(ts.s);
  ASSERT_NE(impl->sp.dry_breaker_bits, nullptr);
  auto bit = [&](int32_t t) { return (impl->sp.dry_breaker_bits[t >> 5] >> (t & 31)) & 1u; };
  EXPECT_EQ(bit(3 + '\n'), 1u);
  EXPECT_EQ(bit(3 + ':'), 1u);
  EXPECT_EQ(bit(3 + '*'), 1u);
  EXPECT_EQ(bit(3 + 'a'), 0u);
  const std::vector<int32_t> dry = generate(ts.s, prompt, 64);
  ASSERT_EQ(dry.size(), 64u);
  const int dry_repeats = repeated_trigrams(prompt, dry);
  RecordProperty("plain_repeats", plain_repeats);
  RecordProperty("dry_repeats", dry_repeats);
  EXPECT_LT(dry_repeats, plain_repeats) << "plain " << plain_repeats << " dry " << dry_repeats;
  EXPECT_LE(dry_repeats * 2, plain_repeats) << "plain " << plain_repeats << " dry " << dry_repeats;

  // DRY off again: the bitset pointer goes, the output is the plain one.
  sp.dry_multiplier = 0.0f;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  EXPECT_EQ(impl->sp.dry_breaker_bits, nullptr);
  EXPECT_EQ(generate(ts.s, prompt, 64), plain);
}

// Seeded sampling with every extra sampler repeats exactly after set_sampling; Mirostat's mu
// restarts at 2 * tau on set_sampling and on reset; steps allocate nothing.
TEST(SamplersExtraSession, DeterministicMirostatStateAndNoHeap) {
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, session_config()), RLM_OK);
  auto* impl = reinterpret_cast<ringlm::internal::SessionImpl*>(ts.s);
  const std::vector<int32_t> prompt = bytes_of("Once upon a time, once upon a time");
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.seed = 77;
  sp.dry_multiplier = 0.8f;
  sp.xtc_probability = 0.5f;
  sp.typical_p = 0.95f;
  sp.top_n_sigma = 2.0f;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  const std::vector<int32_t> a = generate(ts.s, prompt, 40);
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  EXPECT_EQ(generate(ts.s, prompt, 40), a);

  rlm_sampling miro;
  rlm_sampling_default(&miro);
  miro.mirostat = 2;
  miro.mirostat_tau = 3.0f;
  miro.mirostat_eta = 0.2f;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &miro), RLM_OK);
  EXPECT_EQ(impl->mirostat_mu, 6.0f);
  const std::vector<int32_t> b = generate(ts.s, prompt, 20);
  EXPECT_NE(impl->mirostat_mu, 6.0f);
  ASSERT_EQ(rlm_session_reset(ts.s), RLM_OK);
  EXPECT_EQ(impl->mirostat_mu, 6.0f);
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &miro), RLM_OK);
  EXPECT_EQ(generate(ts.s, prompt, 20), b);

  if (!kHeapCounting) return;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
  const HeapCalls calls = count_heap([&] {
    EXPECT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
    for (int i = 0; i < 10; ++i) {
      rlm_step_result r;
      rlm_step_result_default(&r);
      EXPECT_EQ(rlm_step(ts.s, &r), RLM_OK);
    }
    EXPECT_EQ(rlm_session_set_sampling(ts.s, &miro), RLM_OK);
    for (int i = 0; i < 10; ++i) {
      rlm_step_result r;
      rlm_step_result_default(&r);
      EXPECT_EQ(rlm_step(ts.s, &r), RLM_OK);
    }
  });
  EXPECT_EQ(calls.allocs, 0);
  EXPECT_EQ(calls.frees, 0);
}

}  // namespace
