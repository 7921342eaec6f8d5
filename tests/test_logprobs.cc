// Log-probabilities and scoring (#16): the step's logprob / top-n against a float64 log-softmax of
// the raw logits (ties by id on a model with tied logits; before the grammar mask),
// sampler_logprob against an independent recomputation of the sampler's final distribution,
// generation unchanged by logprobs (plain and speculative), the old rlm_step_result size,
// rlm_session_score against teacher-forced stepping (pass sizes, pieces, rewinds, steps, a
// speculative pass in progress, the ring), the errors, the heap, and stories260K's greedy
// continuation as the argmax of its rows.
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

// Under qemu (the cross suites) the loops are shortened.

constexpr uint32_t kVocab = 259;  // the random model's vocabulary (fixtures.h)

const OpenedModel& random_model_fixture() {
  static OpenedModel m;
  static bool opened = false;
  if (!opened) {
    RandomModelShape shape;
    shape.max_context = 512;
    std::string err;
    EXPECT_TRUE(open_random_model(shape, DType::F32, &m, &err)) << err;
    opened = true;
  }
  return m;
}

rlm_session_config config(uint32_t n_ctx = 256, uint32_t max_logit_rows = 0, uint32_t n_batch = 64,
                          uint32_t max_draft = 0) {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = n_ctx;
  c.n_sink = 4;
  c.n_batch = n_batch;
  c.max_draft = max_draft;
  c.max_logit_rows = max_logit_rows;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

rlm_sampling greedy_sampling() {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  return sp;
}

// Byte tokens of `text` (the random model's byte b is token 3 + b).
std::vector<int32_t> bytes_of(const std::string& text) {
  std::vector<int32_t> t;
  for (unsigned char c : text) t.push_back(3 + c);
  return t;
}

// A deterministic token sequence over the whole vocabulary (all in range).
std::vector<int32_t> token_run(size_t n, uint32_t seed) {
  std::vector<int32_t> t(n);
  uint32_t x = seed * 2654435761u + 12345u;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    t[i] = static_cast<int32_t>((x >> 8) % kVocab);
  }
  return t;
}

std::vector<float> copy_logits(rlm_session* s) {
  const float* p = nullptr;
  size_t n = 0;
  EXPECT_EQ(rlm_session_logits(s, &p, &n), RLM_OK) << rlm_session_error(s);
  if (!p) return {};
  return std::vector<float>(p, p + n);
}

// Log-softmax in double (NaN and -inf logits never count).
std::vector<double> log_softmax(const std::vector<float>& x) {
  double m = -INFINITY;
  for (float v : x) m = v > m ? v : m;
  double sum = 0.0;
  for (float v : x) {
    if (v > -INFINITY) sum += exp(static_cast<double>(v) - m);
  }
  const double lse = m + log(sum);
  std::vector<double> out(x.size());
  for (size_t i = 0; i < x.size(); ++i) out[i] = static_cast<double>(x[i]) - lse;
  return out;
}

// The n most probable ids: logit descending, ties by lower id.
std::vector<int32_t> true_top(const std::vector<float>& x, size_t n) {
  std::vector<int32_t> ids(x.size());
  for (size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<int32_t>(i);
  n = std::min(n, ids.size());
  std::partial_sort(ids.begin(), ids.begin() + n, ids.end(), [&](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  ids.resize(n);
  return ids;
}

// The probability the sampler's final distribution gives `token`, recomputed from the raw logits
// in double along the documented stage order (ringlm.h rlm_sampling, runtime/sampler.h): logit
// bias -> repetition / frequency / presence penalties over the last penalty_last_n tokens of
// `history` -> temperature -> top-k -> softmax -> top-p -> min-p -> renormalise. *ambiguous is
// set when a truncation border is within rounding of a decision (the float pipeline may then
// decide the other way): the caller skips such a step. *cuts (optional) gets the survivors of
// top-k, of top-p and of min-p (each counted along the same order, vocab when off).
struct Cuts {
  size_t top_k = 0, top_p = 0, min_p = 0;
};

double sampler_probability(const std::vector<float>& raw, const rlm_sampling& sp,
                           const std::vector<int32_t>& history, int32_t token, bool* ambiguous,
                           Cuts* cuts = nullptr) {
  *ambiguous = false;
  const size_t V = raw.size();
  std::vector<double> x(raw.begin(), raw.end());
  for (uint32_t i = 0; i < sp.n_logit_bias; ++i) x[sp.logit_bias[i].token] += sp.logit_bias[i].bias;
  const size_t n_win = std::min(history.size(), static_cast<size_t>(sp.penalty_last_n));
  std::map<int32_t, int> count;
  for (size_t i = history.size() - n_win; i < history.size(); ++i) ++count[history[i]];
  for (const auto& kv : count) {
    double& v = x[kv.first];
    if (sp.repeat_penalty != 1.0f) v = v > 0.0 ? v / sp.repeat_penalty : v * sp.repeat_penalty;
    v -= static_cast<double>(sp.frequency_penalty) * kv.second;
    v -= static_cast<double>(sp.presence_penalty);
  }
  if (sp.temperature == 0.0f) {
    size_t best = 0;
    for (size_t i = 1; i < V; ++i) best = x[i] > x[best] ? i : best;
    return static_cast<int32_t>(best) == token ? 1.0 : 0.0;
  }
  for (double& v : x) v /= sp.temperature;
  std::vector<int32_t> order(V);
  for (size_t i = 0; i < V; ++i) order[i] = static_cast<int32_t>(i);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  });
  size_t k = V;
  if (sp.top_k > 0 && static_cast<size_t>(sp.top_k) < V) {
    k = static_cast<size_t>(sp.top_k);
    if (fabs(x[order[k - 1]] - x[order[k]]) < 1e-5) *ambiguous = true;
  }
  const double m = x[order[0]];
  std::vector<double> w(k);
  double sum_k = 0.0;
  for (size_t j = 0; j < k; ++j) sum_k += (w[j] = exp(x[order[j]] - m));
  // Top-p: the shortest prefix whose mass reaches top_p of the top-k mass.
  size_t n_p = k;
  if (sp.top_p < 1.0f) {
    const double target = static_cast<double>(sp.top_p) * sum_k;
    double cum = 0.0;
    for (size_t j = 0; j < k; ++j) {
      cum += w[j];
      if (fabs(cum - target) < 1e-5 * sum_k) *ambiguous = true;
      if (cum >= target) {
        n_p = j + 1;
        break;
      }
    }
  }
  // Min-p: p >= min_p * p_max, i.e. w >= min_p (w_max = 1).
  size_t n_m = 0;
  while (n_m < k && w[n_m] >= sp.min_p) ++n_m;
  if (sp.min_p > 0.0f) {
    for (size_t j = 0; j < k; ++j) {
      if (fabs(w[j] - sp.min_p) < 1e-5 * sp.min_p) *ambiguous = true;
    }
  }
  const size_t n = std::min(n_p, n_m);
  if (cuts) *cuts = Cuts{k, n_p, n_m == k ? V : n_m};
  double kept = 0.0;
  for (size_t j = 0; j < n; ++j) kept += w[j];
  for (size_t j = 0; j < n; ++j) {
    if (order[j] == token) return w[j] / kept;
  }
  return 0.0;
}

// Feeds `prompt`, then per step: eval, copy the raw logits, step with logprobs and a top-10
// array on; checks logprob and the top-n against a float64 log-softmax of the copy, and
// sampler_logprob against sampler_probability (or 0 for greedy). Returns the steps whose
// sampler check ran (not skipped as ambiguous).
struct StepCheckCounts {
  int checked = 0;        // sampler_logprob compared
  int skipped = 0;        // a truncation border too close to call
  int truncated = 0;      // steps where sampler_logprob differs from logprob by > 0.05
  int top_p_cut = 0;      // steps where top-p left fewer than top-k did
  int min_p_cut = 0;      // steps where min-p left fewer than top-p did
};

StepCheckCounts check_steps(const rlm_sampling& sp, uint32_t steps, double sampler_tol) {
  StepCheckCounts counts;
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  EXPECT_EQ(ts.init(&m.model, config()), RLM_OK);
  if (!ts.s) return counts;
  constexpr uint32_t kTop = 10;
  rlm_token_logprob top[kTop + 1];
  top[kTop] = rlm_token_logprob{-7, 7.0f};  // a guard past the array: never written
  EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, top, kTop), RLM_OK);
  EXPECT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK) << rlm_session_error(ts.s);
  rlm_session_set_ignore_eos(ts.s, 1);
  std::vector<int32_t> history = bytes_of("The quick brown fox jumps over the lazy dog. ");
  EXPECT_EQ(rlm_session_feed_tokens(ts.s, history.data(), history.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < steps; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    EXPECT_EQ(rlm_session_eval(ts.s), RLM_OK);
    const std::vector<float> raw = copy_logits(ts.s);
    if (raw.size() != kVocab) return counts;
    const std::vector<double> ls = log_softmax(raw);
    if (rlm_step(ts.s, &r) != RLM_OK) {
      ADD_FAILURE() << rlm_session_error(ts.s);
      return counts;
    }
    EXPECT_EQ(r.n_evaluated, 0u) << "the step samples the evaluated logits";
    EXPECT_NEAR(r.logprob, ls[r.token], 1e-5);
    // Top-n: the true top-n of the raw logits, sorted by logprob descending then id.
    const std::vector<int32_t> want = true_top(raw, kTop);
    EXPECT_EQ(r.n_top, kTop);
    for (uint32_t j = 0; j < kTop && j < r.n_top; ++j) {
      EXPECT_EQ(top[j].token, want[j]) << "top " << j;
      EXPECT_NEAR(top[j].logprob, ls[want[j]], 1e-5) << "top " << j;
      if (j > 0) {
        EXPECT_TRUE(top[j - 1].logprob > top[j].logprob ||
                    (top[j - 1].logprob == top[j].logprob && top[j - 1].token < top[j].token))
            << "top " << j << " out of order";
      }
    }
    EXPECT_EQ(top[kTop].token, -7) << "written past n_top";
    // The sampler's probability.
    if (sp.temperature == 0.0f) {
      EXPECT_EQ(r.sampler_logprob, 0.0f);
      if (sp.n_logit_bias == 0 && sp.repeat_penalty == 1.0f) EXPECT_EQ(r.token, want[0]);
      ++counts.checked;
    } else {
      bool ambiguous = false;
      Cuts cuts;
      const double p = sampler_probability(raw, sp, history, r.token, &ambiguous, &cuts);
      if (cuts.top_p < cuts.top_k) ++counts.top_p_cut;
      if (cuts.min_p < cuts.top_p) ++counts.min_p_cut;
      if (ambiguous) {
        ++counts.skipped;
      } else {
        EXPECT_GT(p, 0.0) << "token " << r.token << " sampled outside the reference's survivors";
        EXPECT_NEAR(r.sampler_logprob, log(p), sampler_tol) << "token " << r.token;
        ++counts.checked;
      }
    }
    if (fabs(static_cast<double>(r.sampler_logprob) - r.logprob) > 0.05) ++counts.truncated;
    history.push_back(r.token);
  }
  return counts;
}

}  // namespace

// 1 + 2: greedy. logprob and top-10 are the log-softmax of the raw logits; the sampled token is
// the top-1; sampler_logprob is 0.
TEST(Logprobs, GreedyStepMatchesLogSoftmaxOfRawLogits) {
  const uint32_t steps = emulated() ? 20 : 50;
  const StepCheckCounts c = check_steps(greedy_sampling(), steps, 0.0);
  EXPECT_EQ(c.checked, static_cast<int>(steps));
  EXPECT_EQ(c.truncated, static_cast<int>(steps)) << "logprob is the model's, not the sampler's 0";
}

// 1 + 2: seeded sampling with every stage on (temperature 0.7, top-k 40, top-p 0.9, min-p 0.05,
// repetition penalty 1.1, a logit bias raising one token and banning another): logprob and the
// top-10 still describe the raw logits; sampler_logprob is the log of the final distribution's
// probability, recomputed independently. Two more settings reach the sampler's other truncation
// paths (top-p without top-k; min-p alone) with a min-p that cuts.
TEST(Logprobs, SampledStepMatchesRawLogitsAndSamplerDistribution) {
  const uint32_t steps = emulated() ? 20 : 50;
  const rlm_logit_bias bias[2] = {{3 + 'e', 1.5f}, {3 + ' ', -INFINITY}};
  struct Setting {
    float temperature;
    int32_t top_k;
    float top_p, min_p, repeat, frequency, presence;
    uint64_t seed;
    bool expect_top_p_cut, expect_min_p_cut;
  };
  const Setting settings[] = {
      {0.7f, 40, 0.9f, 0.05f, 1.1f, 0.0f, 0.0f, 1, true, false},  // min-p 0.05 rarely bites here
      {0.7f, 40, 0.9f, 0.05f, 1.1f, 0.0f, 0.0f, 77, true, false},
      {0.7f, 0, 0.8f, 0.15f, 1.1f, 0.0f, 0.0f, 5, true, true},
      {1.3f, 0, 1.0f, 0.3f, 1.0f, 0.3f, 0.2f, 6, false, true},
  };
  for (const Setting& st : settings) {
    SCOPED_TRACE("seed " + std::to_string(st.seed));
    rlm_sampling sp;
    rlm_sampling_default(&sp);
    sp.temperature = st.temperature;
    sp.top_k = st.top_k;
    sp.top_p = st.top_p;
    sp.min_p = st.min_p;
    sp.repeat_penalty = st.repeat;
    sp.frequency_penalty = st.frequency;
    sp.presence_penalty = st.presence;
    sp.penalty_last_n = 64;
    sp.seed = st.seed;
    sp.logit_bias = bias;
    sp.n_logit_bias = 2;
    const StepCheckCounts c = check_steps(sp, steps, 1e-4);
    printf("[ logprobs ] seed %llu: sampler_logprob checked on %d steps (%d skipped at a border); "
           "top-p cut %d, min-p cut %d, truncated %d\n",
           static_cast<unsigned long long>(st.seed), c.checked, c.skipped, c.top_p_cut,
           c.min_p_cut, c.truncated);
    EXPECT_GE(c.checked, static_cast<int>(steps) * 4 / 5) << c.skipped << " steps skipped";
    EXPECT_GT(c.truncated, static_cast<int>(steps) / 2)
        << "truncation should change the drawn probability on most steps";
    if (st.expect_top_p_cut) EXPECT_GT(c.top_p_cut, 0);
    if (st.expect_min_p_cut) EXPECT_GT(c.min_p_cut, 0);
  }
}

// 2: temperature 1 without truncation, bias or penalties: the sampler draws from the softmax of
// the raw logits, so exp(sampler_logprob) == exp(logprob).
TEST(Logprobs, UntruncatedSamplerLogprobEqualsLogprob) {
  const uint32_t steps = emulated() ? 30 : 100;
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.repeat_penalty = 1.0f;
  sp.seed = 9;
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, config()), RLM_OK);
  ASSERT_EQ(rlm_session_set_logprobs(ts.s, 1, nullptr, 0), RLM_OK);
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  rlm_session_set_ignore_eos(ts.s, 1);
  const std::vector<int32_t> prompt = bytes_of("Hello there, ");
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  std::vector<int32_t> distinct;
  for (uint32_t i = 0; i < steps; ++i) {
    ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
    EXPECT_NEAR(exp(r.sampler_logprob), exp(r.logprob), 1e-4) << "step " << i;
    EXPECT_NEAR(r.sampler_logprob, r.logprob, 1e-4) << "step " << i;
    EXPECT_EQ(r.n_top, 0u);
    if (std::find(distinct.begin(), distinct.end(), r.token) == distinct.end()) {
      distinct.push_back(r.token);
    }
  }
  EXPECT_GT(distinct.size(), 5u) << "the draws should spread over many tokens";
}

namespace {

// Everything the caller sees of a generation with logprobs.
struct Gen {
  std::vector<int32_t> tokens;
  std::vector<float> logprob, sampler_logprob;
  std::vector<uint32_t> n_top;
  std::vector<int32_t> top_tokens;
  std::vector<float> top_logprobs;
  rlm_spec_stats stats{};
};

// Generates `n` tokens from `prompt` (EOS ignored) with logprobs on (top-5) or off, with a
// prompt-lookup drafter of max_draft 4 when `spec`.
Gen generate(const rlm_sampling& sp, bool logprobs, bool spec, uint32_t n,
             const std::vector<int32_t>& prompt) {
  Gen g;
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  EXPECT_EQ(ts.init(&m.model, config(64, 0, 64, spec ? 4 : 0)), RLM_OK);
  if (!ts.s) return g;
  if (spec) {
    rlm_speculation s;
    rlm_speculation_default(&s);
    s.mode = RLM_SPEC_LOOKUP;
    s.n_max = 4;
    EXPECT_EQ(rlm_session_set_speculation(ts.s, &s), RLM_OK) << rlm_session_error(ts.s);
  }
  rlm_token_logprob top[5];
  if (logprobs) EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, top, 5), RLM_OK);
  EXPECT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  rlm_session_set_ignore_eos(ts.s, 1);
  rlm_session_set_max_tokens(ts.s, n);
  EXPECT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < n; ++i) {
    if (rlm_step(ts.s, &r) != RLM_OK) {
      ADD_FAILURE() << rlm_session_error(ts.s);
      break;
    }
    g.tokens.push_back(r.token);
    g.logprob.push_back(r.logprob);
    g.sampler_logprob.push_back(r.sampler_logprob);
    g.n_top.push_back(r.n_top);
    for (uint32_t j = 0; j < r.n_top; ++j) {
      g.top_tokens.push_back(top[j].token);
      g.top_logprobs.push_back(top[j].logprob);
    }
    if (r.stop != RLM_STOP_NONE) break;
  }
  rlm_spec_stats_default(&g.stats);
  EXPECT_EQ(rlm_session_spec_stats(ts.s, &g.stats), RLM_OK);
  return g;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || memcmp(a.data(), b.data(), a.size() * 4) == 0);
}

}  // namespace

// 3: logprobs on or off, speculation on or off: the same tokens; with speculation the logprob,
// sampler_logprob and top-n values are bit for bit those of plain decoding.
TEST(Logprobs, DoNotChangeGenerationPlainOrSpeculative) {
  const uint32_t n = emulated() ? 60 : 200;  // through the 64-slot ring
  const std::vector<int32_t> prompt = bytes_of("abcabcabcabcabcabc");
  rlm_sampling noisy;
  rlm_sampling_default(&noisy);
  noisy.temperature = 0.9f;
  noisy.top_k = 30;
  noisy.top_p = 0.95f;
  noisy.min_p = 0.02f;
  noisy.repeat_penalty = 1.05f;
  noisy.seed = 4242;
  for (const rlm_sampling& sp : {greedy_sampling(), noisy}) {
    SCOPED_TRACE(sp.temperature == 0.0f ? "greedy" : "sampled");
    const Gen off = generate(sp, false, false, n, prompt);
    const Gen on = generate(sp, true, false, n, prompt);
    const Gen spec_off = generate(sp, false, true, n, prompt);
    const Gen spec_on = generate(sp, true, true, n, prompt);
    ASSERT_EQ(off.tokens.size(), n);
    EXPECT_EQ(on.tokens, off.tokens);
    EXPECT_EQ(spec_off.tokens, off.tokens);
    EXPECT_EQ(spec_on.tokens, off.tokens);
    for (size_t i = 0; i < off.tokens.size(); ++i) {
      EXPECT_TRUE(isnan(off.logprob[i]) && isnan(off.sampler_logprob[i]) && off.n_top[i] == 0)
          << "logprobs off, token " << i;
      EXPECT_TRUE(isfinite(on.logprob[i]) && on.logprob[i] <= 0.0f && on.n_top[i] == 5)
          << "logprobs on, token " << i;
      EXPECT_TRUE(isfinite(on.sampler_logprob[i]) && on.sampler_logprob[i] <= 0.0f) << i;
    }
    EXPECT_TRUE(same_bits(spec_on.logprob, on.logprob));
    EXPECT_TRUE(same_bits(spec_on.sampler_logprob, on.sampler_logprob));
    EXPECT_TRUE(same_bits(spec_on.top_logprobs, on.top_logprobs));
    EXPECT_EQ(spec_on.top_tokens, on.top_tokens);
    EXPECT_EQ(spec_on.n_top, on.n_top);
    EXPECT_GT(spec_on.stats.verify_passes, 0u) << "speculation never verified a draft";
    if (sp.temperature == 0.0f) EXPECT_GT(spec_on.stats.accepted, 0u);
  }
}

// 4: an rlm_step_result of the first release's size (ending before `logprob`) works with
// logprobs on and off, and the bytes past it stay untouched; other sizes are refused.
TEST(Logprobs, OldSizeStepResult) {
  const OpenedModel& m = random_model_fixture();
  TestSession ts, ref;
  ASSERT_EQ(ts.init(&m.model, config()), RLM_OK);
  ASSERT_EQ(ref.init(&m.model, config()), RLM_OK);
  const std::vector<int32_t> prompt = bytes_of("old callers ");
  for (TestSession* t : {&ts, &ref}) {
    const rlm_sampling g = greedy_sampling();
    ASSERT_EQ(rlm_session_set_sampling(t->s, &g), RLM_OK);
    rlm_session_set_ignore_eos(t->s, 1);
    ASSERT_EQ(rlm_session_feed_tokens(t->s, prompt.data(), prompt.size()), RLM_OK);
  }
  constexpr size_t kOld = offsetof(rlm_step_result, logprob);
  static_assert(kOld < sizeof(rlm_step_result), "logprob is a later field");
  rlm_token_logprob top[4];
  rlm_step_result want;
  rlm_step_result_default(&want);
  for (int i = 0; i < 8; ++i) {
    // Logprobs on for the first half, off for the second.
    const int on = i < 4;
    ASSERT_EQ(rlm_session_set_logprobs(ts.s, on, top, 4), RLM_OK);
    alignas(alignof(rlm_step_result)) unsigned char buf[sizeof(rlm_step_result) + 64];
    memset(buf, 0xAB, sizeof buf);
    const uint32_t size = static_cast<uint32_t>(kOld);
    memcpy(buf + offsetof(rlm_step_result, struct_size), &size, sizeof size);
    ASSERT_EQ(rlm_step(ts.s, reinterpret_cast<rlm_step_result*>(buf)), RLM_OK) << "step " << i;
    ASSERT_EQ(rlm_step(ref.s, &want), RLM_OK);
    int32_t token = 0;
    uint32_t position = 0;
    memcpy(&token, buf + offsetof(rlm_step_result, token), sizeof token);
    memcpy(&position, buf + offsetof(rlm_step_result, position), sizeof position);
    EXPECT_EQ(token, want.token) << "step " << i;
    EXPECT_EQ(position, want.position) << "step " << i;
    for (size_t b = kOld; b < sizeof buf; ++b) {
      ASSERT_EQ(buf[b], 0xAB) << "byte " << b << " past the old size written (step " << i << ")";
    }
  }
  // Sizes this library does not know.
  const uint32_t pos = rlm_session_position(ts.s);
  for (uint32_t bad : {0u, static_cast<uint32_t>(kOld) - 4, static_cast<uint32_t>(kOld) + 4,
                       static_cast<uint32_t>(sizeof(rlm_step_result)) - 4,
                       static_cast<uint32_t>(sizeof(rlm_step_result)) + 8}) {
    rlm_step_result r;
    rlm_step_result_default(&r);
    r.struct_size = bad;
    EXPECT_EQ(rlm_step(ts.s, &r), RLM_ERR_STRUCT_SIZE) << "struct_size " << bad;
  }
  EXPECT_EQ(rlm_session_position(ts.s), pos);
}

// 4: rlm_session_set_logprobs arguments, and what a step reports with logprobs off.
TEST(Logprobs, SetLogprobsErrorsAndOffValues) {
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, config()), RLM_OK);
  const rlm_sampling g = greedy_sampling();
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &g), RLM_OK);
  rlm_session_set_ignore_eos(ts.s, 1);
  const std::vector<int32_t> prompt = bytes_of("errors ");
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
  std::vector<rlm_token_logprob> big(4097);
  rlm_token_logprob three[3];
  EXPECT_EQ(rlm_session_set_logprobs(nullptr, 1, three, 3), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, nullptr, 1), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, big.data(), 4097), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, nullptr, 0), RLM_OK);  // logprob without top-n

  rlm_step_result r;
  rlm_step_result_default(&r);
  ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
  EXPECT_TRUE(isfinite(r.logprob));
  EXPECT_EQ(r.sampler_logprob, 0.0f);
  EXPECT_EQ(r.n_top, 0u);

  // n_top above the vocabulary: min(n_top, vocab) entries, the whole vocabulary in order.
  ASSERT_EQ(rlm_session_set_logprobs(ts.s, 1, big.data(), 4096), RLM_OK);
  ASSERT_EQ(rlm_session_eval(ts.s), RLM_OK);
  const std::vector<float> raw = copy_logits(ts.s);
  ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
  ASSERT_EQ(r.n_top, kVocab);
  const std::vector<int32_t> want = true_top(raw, kVocab);
  double mass = 0.0;
  for (uint32_t j = 0; j < kVocab; ++j) {
    EXPECT_EQ(big[j].token, want[j]) << j;
    mass += exp(static_cast<double>(big[j].logprob));
  }
  EXPECT_NEAR(mass, 1.0, 1e-5);
  EXPECT_EQ(big[0].token, r.token) << "greedy samples the top-1";
  EXPECT_EQ(big[0].logprob, r.logprob);

  // A refused call leaves the setting as it was (top-3 here).
  ASSERT_EQ(rlm_session_set_logprobs(ts.s, 1, three, 3), RLM_OK);
  EXPECT_EQ(rlm_session_set_logprobs(ts.s, 1, nullptr, 2), RLM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
  EXPECT_EQ(r.n_top, 3u);

  // Off: NAN, NAN, 0, whatever the fields held.
  ASSERT_EQ(rlm_session_set_logprobs(ts.s, 0, nullptr, 0), RLM_OK);
  for (int i = 0; i < 3; ++i) {
    r.logprob = 1.0f;
    r.sampler_logprob = 2.0f;
    r.n_top = 77;
    ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
    EXPECT_TRUE(isnan(r.logprob));
    EXPECT_TRUE(isnan(r.sampler_logprob));
    EXPECT_EQ(r.n_top, 0u);
  }
  // And off on a fresh session (never turned on).
  TestSession fresh;
  ASSERT_EQ(fresh.init(&m.model, config()), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(fresh.s, prompt.data(), prompt.size()), RLM_OK);
  r.logprob = r.sampler_logprob = 1.0f;
  r.n_top = 5;
  ASSERT_EQ(rlm_step(fresh.s, &r), RLM_OK);
  EXPECT_TRUE(isnan(r.logprob) && isnan(r.sampler_logprob) && r.n_top == 0);
}

namespace {

// The random model with tied logits: token embeddings (tied to the output) of 20, 21, 100, 150
// are 10x token 20's and those of 40, 90, 200 are -10x it, so each group's raw logits are equal
// bit for bit and one group or the other is usually among the most probable.
const OpenedModel& tie_model_fixture() {
  static OpenedModel m;
  static bool opened = false;
  if (!opened) {
    RandomModelShape shape;
    shape.max_context = 512;
    ringlm::internal::conv::ModelData md = random_model_data(shape);
    const size_t D = shape.dim;
    for (auto& t : md.tensors) {
      if (t.name != "tok_embd") continue;
      auto load = t.load_f32;
      t.load_f32 = [load, D](std::vector<float>* out, std::string* err) {
        if (!load(out, err)) return false;
        const std::vector<float> src(out->begin() + 20 * D, out->begin() + 21 * D);
        for (size_t id : {20, 21, 100, 150}) {
          for (size_t d = 0; d < D; ++d) (*out)[id * D + d] = 10.0f * src[d];
        }
        for (size_t id : {40, 90, 200}) {
          for (size_t d = 0; d < D; ++d) (*out)[id * D + d] = -10.0f * src[d];
        }
        return true;
      };
    }
    std::vector<uint8_t> bytes;
    std::string err;
    EXPECT_TRUE(ringlm::internal::conv::build_model_bytes(md, DType::F32, &bytes, &err)) << err;
    m.bytes.assign(bytes.data(), bytes.size());
    EXPECT_TRUE(m.open(&err)) << err;
    opened = true;
  }
  return m;
}

}  // namespace

// Top-n with exactly tied raw logits: tied tokens are listed by lower id, equal logprobs, and an
// n_top that ends inside a tie group keeps the lower ids (n_top 1, 2, 3, 10 in turn). Greedy
// takes the lowest id among the maxima.
TEST(Logprobs, TopNTiesByLowerId) {
  const OpenedModel& m = tie_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, config()), RLM_OK);
  const rlm_sampling g = greedy_sampling();
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &g), RLM_OK);
  rlm_session_set_ignore_eos(ts.s, 1);
  const std::vector<int32_t> prompt = bytes_of("ties, ties, ");
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
  ASSERT_EQ(rlm_session_eval(ts.s), RLM_OK);
  const std::vector<float> first = copy_logits(ts.s);
  ASSERT_EQ(first.size(), kVocab);
  if (first[20] != first[100] || first[40] != first[200]) {
    GTEST_SKIP() << "these kernels give identical output rows different logits";
  }
  rlm_token_logprob top[10];
  const uint32_t n_tops[] = {1, 2, 3, 10};
  int split_ties = 0, listed_ties = 0, top_ties = 0;
  const uint32_t steps = emulated() ? 24 : 60;
  for (uint32_t i = 0; i < steps; ++i) {
    SCOPED_TRACE("step " + std::to_string(i));
    const uint32_t n_top = n_tops[i % 4];
    ASSERT_EQ(rlm_session_set_logprobs(ts.s, 1, top, n_top), RLM_OK);
    ASSERT_EQ(rlm_session_eval(ts.s), RLM_OK);
    const std::vector<float> raw = copy_logits(ts.s);
    ASSERT_EQ(raw.size(), kVocab);
    ASSERT_EQ(raw[20], raw[100]) << "the tie model's tied logits differ";
    ASSERT_EQ(raw[40], raw[200]);
    const std::vector<double> ls = log_softmax(raw);
    rlm_step_result r;
    rlm_step_result_default(&r);
    ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
    const std::vector<int32_t> want = true_top(raw, n_top);
    ASSERT_EQ(r.n_top, n_top);
    for (uint32_t j = 0; j < n_top; ++j) {
      EXPECT_EQ(top[j].token, want[j]) << "rank " << j;
      EXPECT_NEAR(top[j].logprob, ls[want[j]], 1e-5);
      if (j > 0 && raw[want[j]] == raw[want[j - 1]]) {
        EXPECT_EQ(top[j].logprob, top[j - 1].logprob) << "tied logits, equal logprobs";
        ++listed_ties;
      }
    }
    const std::vector<int32_t> next = true_top(raw, n_top + 1);
    if (raw[next[n_top]] == raw[next[n_top - 1]]) ++split_ties;  // n_top ends inside a tie
    EXPECT_EQ(r.token, true_top(raw, 1)[0]);
    if (raw[next[0]] == raw[true_top(raw, 2)[1]]) ++top_ties;
  }
  printf("[ logprobs ] ties: %d listed, %d cut by n_top, %d at the top\n", listed_ties,
         split_ties, top_ties);
  EXPECT_GT(listed_ties, 0);
  EXPECT_GT(split_ties, 0);
  EXPECT_GT(top_ties, 0);
}

// The grammar's mask comes after the logprobs: logprob and the top-n describe the raw logits
// (tokens the grammar refuses included), while sampler_logprob is of the masked distribution:
// with temperature 1 and nothing else, log(p(token) / sum of p over the tokens allowed).
TEST(Logprobs, LogprobIsBeforeTheGrammarMask) {
  const OpenedModel& m = random_model_fixture();
  const std::string gbnf = "root ::= [abc] [abc] [abc] [abc] [abc] [abc] [abc] [abc]\n";
  size_t need = 0;
  ASSERT_EQ(rlm_grammar_memory(&m.model, gbnf.data(), gbnf.size(), &need), RLM_OK);
  AlignedBuffer gmem(need);
  rlm_grammar* grammar = nullptr;
  char msg[256] = "";
  ASSERT_EQ(rlm_grammar_compile(&m.model, gbnf.data(), gbnf.size(), gmem.data(), need, &grammar,
                                msg, sizeof msg),
            RLM_OK)
      << msg;
  rlm_session_config c = config();
  c.grammar_state_bytes = 64 * 1024;
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, c), RLM_OK);
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 1.0f;
  sp.top_k = 0;
  sp.top_p = 1.0f;
  sp.min_p = 0.0f;
  sp.seed = 12;
  ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
  ASSERT_EQ(rlm_session_set_grammar(ts.s, grammar), RLM_OK);
  rlm_token_logprob top[10];
  ASSERT_EQ(rlm_session_set_logprobs(ts.s, 1, top, 10), RLM_OK);
  const int32_t allowed[3] = {3 + 'a', 3 + 'b', 3 + 'c'};
  for (int turn = 0; turn < 3; ++turn) {
    const std::vector<int32_t> prompt = bytes_of(turn ? " and again: " : "Letters: ");
    ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
    int outside_in_top = 0;
    for (int i = 0; i < 8; ++i) {
      SCOPED_TRACE("turn " + std::to_string(turn) + " step " + std::to_string(i));
      ASSERT_EQ(rlm_session_eval(ts.s), RLM_OK);
      const std::vector<float> raw = copy_logits(ts.s);
      ASSERT_EQ(raw.size(), kVocab);
      const std::vector<double> ls = log_softmax(raw);
      rlm_step_result r;
      rlm_step_result_default(&r);
      ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK) << rlm_session_error(ts.s);
      ASSERT_TRUE(r.token == allowed[0] || r.token == allowed[1] || r.token == allowed[2]);
      EXPECT_NEAR(r.logprob, ls[r.token], 1e-5);
      double mass = 0.0;
      for (int32_t t : allowed) mass += exp(ls[t]);
      EXPECT_NEAR(r.sampler_logprob, ls[r.token] - log(mass), 1e-4);
      const std::vector<int32_t> want = true_top(raw, 10);
      ASSERT_EQ(r.n_top, 10u);
      for (uint32_t j = 0; j < 10; ++j) {
        EXPECT_EQ(top[j].token, want[j]);
        if (std::find(allowed, allowed + 3, top[j].token) == allowed + 3) ++outside_in_top;
      }
      EXPECT_EQ(r.stop, i == 7 ? RLM_STOP_GRAMMAR : RLM_STOP_NONE);
    }
    EXPECT_GT(outside_in_top, 0) << "the top-n lists tokens the grammar refuses";
  }
}

namespace {

struct Scored {
  std::vector<float> logprobs;
  std::vector<float> logits;  // n * vocab
  double sum = 0.0;
};

// rlm_session_score of `tokens` on `s`, every output requested.
Scored score(rlm_session* s, const std::vector<int32_t>& tokens) {
  Scored out;
  out.logprobs.assign(tokens.size(), NAN);
  out.logits.assign(tokens.size() * kVocab, NAN);
  out.sum = NAN;
  EXPECT_EQ(rlm_session_score(s, tokens.data(), tokens.size(), out.logprobs.data(),
                              out.logits.data(), &out.sum),
            RLM_OK)
      << rlm_session_error(s);
  return out;
}

// Teacher-forced stepping: for each token, eval, take the raw logits and their log-softmax, then
// feed the token. (The caller has fed the prefix.)
Scored teacher_forced(rlm_session* s, const std::vector<int32_t>& tokens) {
  Scored out;
  for (int32_t t : tokens) {
    EXPECT_EQ(rlm_session_eval(s), RLM_OK) << rlm_session_error(s);
    const std::vector<float> raw = copy_logits(s);
    if (raw.size() != kVocab) return out;
    out.logprobs.push_back(static_cast<float>(log_softmax(raw)[t]));
    out.logits.insert(out.logits.end(), raw.begin(), raw.end());
    out.sum += out.logprobs.back();
    EXPECT_EQ(rlm_session_feed_tokens(s, &t, 1), RLM_OK);
  }
  return out;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return INFINITY;
  double d = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    d = std::max(d, fabs(static_cast<double>(a[i]) - b[i]));
    if (a[i] != a[i] || b[i] != b[i]) return INFINITY;
  }
  return d;
}

// Checks `got` against `want` (logprobs and logits within `tol`) and `got`'s sum against its own
// logprobs.
void expect_scored_equal(const Scored& got, const Scored& want, double tol) {
  ASSERT_EQ(got.logprobs.size(), want.logprobs.size());
  EXPECT_LE(max_abs_diff(got.logprobs, want.logprobs), tol) << "logprobs";
  if (!want.logits.empty()) EXPECT_LE(max_abs_diff(got.logits, want.logits), tol) << "logits";
  double sum = 0.0;
  for (float lp : got.logprobs) sum += lp;
  EXPECT_DOUBLE_EQ(got.sum, sum) << "sum is the sum of the logprobs";
}

}  // namespace

// 5a-c: scoring equals teacher-forced stepping token by token (logprobs and the raw logits rows),
// for passes of 1, 7 and 16 positions (max_logit_rows 1, 7, 64 with n_batch 16); scoring in
// pieces equals scoring at once; sum is the sum of the logprobs.
TEST(Score, EqualsTeacherForcedStepsForEveryPassSize) {
  const OpenedModel& m = random_model_fixture();
  const std::vector<int32_t> prefix = bytes_of("Scoring ");
  const std::vector<int32_t> cont = token_run(emulated() ? 30 : 60, 1);
  TestSession tf;
  ASSERT_EQ(tf.init(&m.model, config(256, 0, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(tf.s, prefix.data(), prefix.size()), RLM_OK);
  const Scored want = teacher_forced(tf.s, cont);
  ASSERT_EQ(want.logprobs.size(), cont.size());
  ASSERT_EQ(rlm_session_eval(tf.s), RLM_OK);
  const std::vector<float> next = copy_logits(tf.s);  // the raw logits after the last token
  for (uint32_t rows : {1u, 7u, 64u}) {
    SCOPED_TRACE("max_logit_rows " + std::to_string(rows));
    TestSession a;
    ASSERT_EQ(a.init(&m.model, config(256, rows, 16)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(a.s, prefix.data(), prefix.size()), RLM_OK);
    const Scored got = score(a.s, cont);
    expect_scored_equal(got, want, 1e-5);
    EXPECT_EQ(rlm_session_position(a.s), prefix.size() + cont.size());
    EXPECT_LE(max_abs_diff(copy_logits(a.s), next), 1e-5) << "rlm_session_logits after score";
    for (size_t i = 0; i < cont.size(); ++i) {
      const std::vector<float> row(got.logits.begin() + i * kVocab,
                                   got.logits.begin() + (i + 1) * kVocab);
      EXPECT_NEAR(got.logprobs[i], log_softmax(row)[cont[i]], 1e-5) << "token " << i;
    }
    // In pieces (1, 3, 10, the rest), only logprobs requested for some: the same values.
    TestSession b;
    ASSERT_EQ(b.init(&m.model, config(256, rows, 16)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(b.s, prefix.data(), prefix.size()), RLM_OK);
    std::vector<float> pieces(cont.size(), NAN);
    size_t off = 0;
    for (size_t len : {size_t{1}, size_t{3}, size_t{10}, cont.size() - 14}) {
      double sum = NAN;
      ASSERT_EQ(rlm_session_score(b.s, cont.data() + off, len, pieces.data() + off, nullptr,
                                  len == 3 ? nullptr : &sum),
                RLM_OK);
      if (len != 3) {
        double s = 0.0;
        for (size_t i = off; i < off + len; ++i) s += pieces[i];
        EXPECT_DOUBLE_EQ(sum, s);
      }
      off += len;
    }
    EXPECT_LE(max_abs_diff(pieces, got.logprobs), 1e-6) << "pieces vs at once";
    EXPECT_EQ(rlm_session_position(b.s), prefix.size() + cont.size());
  }
  // Nothing requested at all, and n = 0: fine.
  TestSession c;
  ASSERT_EQ(c.init(&m.model, config(256, 7, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(c.s, prefix.data(), prefix.size()), RLM_OK);
  double sum = 1.0;
  EXPECT_EQ(rlm_session_score(c.s, cont.data(), 0, nullptr, nullptr, &sum), RLM_OK);
  EXPECT_EQ(sum, 0.0);
  EXPECT_EQ(rlm_session_score(c.s, cont.data(), cont.size(), nullptr, nullptr, nullptr), RLM_OK);
  EXPECT_EQ(rlm_session_position(c.s), prefix.size() + cont.size());
}

// 5d: after scoring, rlm_step continues exactly as after feeding the same tokens: greedy, and
// seeded sampling with penalties (the scored tokens are in the penalty window). Three steps come
// first, so the last sampled token runs before the scored ones, and the turn (max_tokens)
// restarts with the score as with a feed.
TEST(Score, StepAfterScoreContinuesLikeFeeding) {
  const OpenedModel& m = random_model_fixture();
  const std::vector<int32_t> prefix = bytes_of("Continue ");
  const std::vector<int32_t> cont = bytes_of("after scoring, like feeding, ");
  rlm_sampling pen;
  rlm_sampling_default(&pen);
  pen.temperature = 0.8f;
  pen.repeat_penalty = 1.5f;
  pen.presence_penalty = 0.5f;
  pen.penalty_last_n = 64;
  pen.seed = 31;
  const uint32_t n = emulated() ? 15 : 40;
  for (const rlm_sampling& sp : {greedy_sampling(), pen}) {
    SCOPED_TRACE(sp.temperature == 0.0f ? "greedy" : "sampled");
    TestSession a, b;
    ASSERT_EQ(a.init(&m.model, config(256, 7, 16)), RLM_OK);
    ASSERT_EQ(b.init(&m.model, config(256, 7, 16)), RLM_OK);
    rlm_token_logprob top_a[3], top_b[3];
    ASSERT_EQ(rlm_session_set_logprobs(a.s, 1, top_a, 3), RLM_OK);
    ASSERT_EQ(rlm_session_set_logprobs(b.s, 1, top_b, 3), RLM_OK);
    std::vector<int32_t> first_a, first_b;
    for (TestSession* t : {&a, &b}) {
      ASSERT_EQ(rlm_session_set_sampling(t->s, &sp), RLM_OK);
      rlm_session_set_ignore_eos(t->s, 1);
      rlm_session_set_max_tokens(t->s, n);
      ASSERT_EQ(rlm_session_feed_tokens(t->s, prefix.data(), prefix.size()), RLM_OK);
      for (int i = 0; i < 3; ++i) {
        rlm_step_result r;
        rlm_step_result_default(&r);
        ASSERT_EQ(rlm_step(t->s, &r), RLM_OK);
        (t == &a ? first_a : first_b).push_back(r.token);
      }
    }
    ASSERT_EQ(first_a, first_b);
    ASSERT_EQ(rlm_session_score(a.s, cont.data(), cont.size(), nullptr, nullptr, nullptr), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(b.s, cont.data(), cont.size()), RLM_OK);
    EXPECT_EQ(rlm_session_position(a.s), prefix.size() + 3 + cont.size());
    std::vector<int32_t> ta, tb;
    std::string text_a, text_b;
    for (uint32_t i = 0; i < n + 1; ++i) {
      rlm_step_result ra, rb;
      rlm_step_result_default(&ra);
      rlm_step_result_default(&rb);
      ASSERT_EQ(rlm_step(a.s, &ra), RLM_OK) << rlm_session_error(a.s);
      ASSERT_EQ(rlm_step(b.s, &rb), RLM_OK);
      ta.push_back(ra.token);
      tb.push_back(rb.token);
      text_a.append(ra.text, ra.text_len);
      text_b.append(rb.text, rb.text_len);
      EXPECT_EQ(ra.position, rb.position);
      EXPECT_NEAR(ra.logprob, rb.logprob, 1e-5) << "step " << i;
      EXPECT_NEAR(ra.sampler_logprob, rb.sampler_logprob, 1e-4) << "step " << i;
      EXPECT_EQ(ra.stop, rb.stop) << "step " << i;
      if (ra.stop != RLM_STOP_NONE || rb.stop != RLM_STOP_NONE) break;
    }
    EXPECT_EQ(ta, tb);
    EXPECT_EQ(text_a, text_b);
    EXPECT_EQ(ta.size(), n) << "max_tokens counts from the score as from the feed";
  }

  // A turn that ended (max_tokens) restarts with a score, as with a feed.
  TestSession c;
  ASSERT_EQ(c.init(&m.model, config(256, 7, 16)), RLM_OK);
  const rlm_sampling g = greedy_sampling();
  ASSERT_EQ(rlm_session_set_sampling(c.s, &g), RLM_OK);
  rlm_session_set_ignore_eos(c.s, 1);
  rlm_session_set_max_tokens(c.s, 2);
  ASSERT_EQ(rlm_session_feed_tokens(c.s, prefix.data(), prefix.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  ASSERT_EQ(rlm_step(c.s, &r), RLM_OK);
  ASSERT_EQ(rlm_step(c.s, &r), RLM_OK);
  ASSERT_EQ(r.stop, RLM_STOP_MAX_TOKENS);
  EXPECT_EQ(rlm_step(c.s, &r), RLM_ERR_BAD_STATE);
  ASSERT_EQ(rlm_session_score(c.s, cont.data(), cont.size(), nullptr, nullptr, nullptr), RLM_OK);
  ASSERT_EQ(rlm_step(c.s, &r), RLM_OK) << rlm_session_error(c.s);
  EXPECT_EQ(r.stop, RLM_STOP_NONE);
  EXPECT_EQ(r.position, prefix.size() + 2 + cont.size());
}

// Scoring while a speculative verification pass is in progress (after a step that took an
// accepted draft, and after an eval that took the next row): the same scores and the same
// continuation as a session decoding plainly. The 32-slot ring wraps during the run, so draft
// positions overwrite slots the pass must give back.
TEST(Score, DuringASpeculativePass) {
  const OpenedModel& m = random_model_fixture();
  const std::vector<int32_t> prompt = bytes_of("abcabcabcabcabcabc");
  const std::vector<int32_t> cont = token_run(10, 6);
  const rlm_sampling g = greedy_sampling();
  int mid_pass = 0;
  for (int with_eval = 0; with_eval < 2; ++with_eval) {
    for (uint32_t k = 1; k <= (emulated() ? 12u : 24u); ++k) {
      SCOPED_TRACE("k " + std::to_string(k) + (with_eval ? " + eval" : ""));
      TestSession spec, plain;
      ASSERT_EQ(spec.init(&m.model, config(32, 0, 16, 4)), RLM_OK);
      ASSERT_EQ(plain.init(&m.model, config(32, 5, 16)), RLM_OK);
      rlm_speculation sd;
      rlm_speculation_default(&sd);
      sd.mode = RLM_SPEC_LOOKUP;
      ASSERT_EQ(rlm_session_set_speculation(spec.s, &sd), RLM_OK);
      std::vector<int32_t> ts, tp;
      uint64_t accepted_before = 0;
      rlm_spec_stats st;
      rlm_spec_stats_default(&st);
      for (TestSession* t : {&spec, &plain}) {
        ASSERT_EQ(rlm_session_set_sampling(t->s, &g), RLM_OK);
        rlm_session_set_ignore_eos(t->s, 1);
        ASSERT_EQ(rlm_session_feed_tokens(t->s, prompt.data(), prompt.size()), RLM_OK);
        for (uint32_t i = 0; i < k; ++i) {
          if (t == &spec && i + 1 == k) {
            ASSERT_EQ(rlm_session_spec_stats(spec.s, &st), RLM_OK);
            accepted_before = st.accepted;
          }
          rlm_step_result r;
          rlm_step_result_default(&r);
          ASSERT_EQ(rlm_step(t->s, &r), RLM_OK);
          (t == &spec ? ts : tp).push_back(r.token);
        }
        if (with_eval) ASSERT_EQ(rlm_session_eval(t->s), RLM_OK);
      }
      ASSERT_EQ(ts, tp);
      ASSERT_EQ(rlm_session_spec_stats(spec.s, &st), RLM_OK);
      if (st.accepted > accepted_before) ++mid_pass;  // the k-th token was an accepted draft
      const Scored a = score(spec.s, cont);
      const Scored b = score(plain.s, cont);
      EXPECT_TRUE(same_bits(a.logprobs, b.logprobs));
      EXPECT_TRUE(same_bits(a.logits, b.logits));
      EXPECT_EQ(rlm_session_position(spec.s), rlm_session_position(plain.s));
      ts.clear();
      tp.clear();
      for (uint32_t i = 0; i < 12; ++i) {
        rlm_step_result ra, rb;
        rlm_step_result_default(&ra);
        rlm_step_result_default(&rb);
        ASSERT_EQ(rlm_step(spec.s, &ra), RLM_OK);
        ASSERT_EQ(rlm_step(plain.s, &rb), RLM_OK);
        ts.push_back(ra.token);
        tp.push_back(rb.token);
      }
      EXPECT_EQ(ts, tp);
    }
  }
  printf("[ logprobs ] %d of the scores landed inside a verification pass\n", mid_pass);
  EXPECT_GT(mid_pass, 0) << "no score landed inside a verification pass";
}

// 5e: nothing to score against, tokens outside the vocabulary, a NULL array: refused, and the
// session is as it was (position, pending input, logits).
TEST(Score, Errors) {
  const OpenedModel& m = random_model_fixture();
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, config(256, 4, 16)), RLM_OK);
  const std::vector<int32_t> prefix = bytes_of("errors: ");
  const std::vector<int32_t> cont = bytes_of("fine");
  float lp[4];
  double sum = 0.0;
  EXPECT_EQ(rlm_session_score(ts.s, cont.data(), cont.size(), lp, nullptr, &sum),
            RLM_ERR_BAD_STATE);
  EXPECT_EQ(rlm_session_position(ts.s), 0u);
  EXPECT_EQ(rlm_session_score(nullptr, cont.data(), cont.size(), lp, nullptr, &sum),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_score(ts.s, nullptr, 3, lp, nullptr, &sum), RLM_ERR_INVALID_ARGUMENT);

  // Pending input (nothing run yet): a bad token runs nothing.
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prefix.data(), prefix.size()), RLM_OK);
  for (const std::vector<int32_t>& bad : {std::vector<int32_t>{5, -1}, {3 + 'a', 259, 7},
                                          {static_cast<int32_t>(0x7fffffff)}}) {
    EXPECT_EQ(rlm_session_score(ts.s, bad.data(), bad.size(), lp, nullptr, &sum),
              RLM_ERR_TOKEN_OUT_OF_RANGE);
    EXPECT_EQ(rlm_session_position(ts.s), 0u);
  }
  // Then the pending prefix and the scores are those of a session that never saw the errors.
  TestSession clean;
  ASSERT_EQ(clean.init(&m.model, config(256, 4, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(clean.s, prefix.data(), prefix.size()), RLM_OK);
  const Scored want = score(clean.s, cont);
  const Scored got = score(ts.s, cont);
  EXPECT_TRUE(same_bits(got.logprobs, want.logprobs));
  EXPECT_EQ(rlm_session_position(ts.s), prefix.size() + cont.size());

  // After a run: position and logits unchanged by a refused score.
  ASSERT_EQ(rlm_session_eval(ts.s), RLM_OK);
  const std::vector<float> before = copy_logits(ts.s);
  const uint32_t pos = rlm_session_position(ts.s);
  const int32_t bad = kVocab;
  EXPECT_EQ(rlm_session_score(ts.s, &bad, 1, lp, nullptr, &sum), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_session_position(ts.s), pos);
  EXPECT_TRUE(same_bits(copy_logits(ts.s), before));
  // And the next score continues from there as on the clean session.
  const std::vector<int32_t> more = bytes_of(" more");
  EXPECT_TRUE(same_bits(score(ts.s, more).logprobs, score(clean.s, more).logprobs));
}

// 5f: scoring after a rewind (to the current position and to an earlier one), after an eval and
// after a step (the sampled token is part of the context).
TEST(Score, AfterRewindEvalAndStep) {
  const OpenedModel& m = random_model_fixture();
  const std::vector<int32_t> prefix = bytes_of("Rewind then score ");
  const std::vector<int32_t> cont = token_run(12, 2);
  const size_t P = prefix.size();
  TestSession a;
  ASSERT_EQ(a.init(&m.model, config(256, 7, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(a.s, prefix.data(), prefix.size()), RLM_OK);
  const Scored first = score(a.s, cont);

  ASSERT_EQ(rlm_session_rewind(a.s, static_cast<uint32_t>(P)), RLM_OK);
  EXPECT_EQ(rlm_session_position(a.s), P);
  expect_scored_equal(score(a.s, cont), first, 1e-5);

  // Rewind into the prefix: score its tail and the continuation again.
  ASSERT_EQ(rlm_session_rewind(a.s, 5), RLM_OK);
  std::vector<int32_t> tail(prefix.begin() + 5, prefix.end());
  tail.insert(tail.end(), cont.begin(), cont.end());
  const Scored again = score(a.s, tail);
  ASSERT_EQ(again.logprobs.size(), tail.size());
  const std::vector<float> again_cont(again.logprobs.end() - cont.size(), again.logprobs.end());
  EXPECT_LE(max_abs_diff(again_cont, first.logprobs), 1e-5);
  // Rewinding to the current position right after scoring: the same position scores the same.
  ASSERT_EQ(rlm_session_rewind(a.s, rlm_session_position(a.s)), RLM_OK);
  const std::vector<int32_t> more = bytes_of("xyz");
  const Scored m1 = score(a.s, more);
  TestSession fresh;
  ASSERT_EQ(fresh.init(&m.model, config(256, 7, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(fresh.s, prefix.data(), prefix.size()), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(fresh.s, cont.data(), cont.size()), RLM_OK);
  EXPECT_LE(max_abs_diff(m1.logprobs, teacher_forced(fresh.s, more).logprobs), 1e-5);

  // After rlm_session_eval: the evaluated logits score the first token.
  TestSession e;
  ASSERT_EQ(e.init(&m.model, config(256, 7, 16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(e.s, prefix.data(), prefix.size()), RLM_OK);
  ASSERT_EQ(rlm_session_eval(e.s), RLM_OK);
  expect_scored_equal(score(e.s, cont), first, 1e-5);

  // After a step: the sampled token is run first and is the context of cont[0].
  TestSession s;
  ASSERT_EQ(s.init(&m.model, config(256, 7, 16)), RLM_OK);
  const rlm_sampling g = greedy_sampling();
  ASSERT_EQ(rlm_session_set_sampling(s.s, &g), RLM_OK);
  rlm_session_set_ignore_eos(s.s, 1);
  ASSERT_EQ(rlm_session_feed_tokens(s.s, prefix.data(), prefix.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  ASSERT_EQ(rlm_step(s.s, &r), RLM_OK);
  const Scored after_step = score(s.s, cont);
  EXPECT_EQ(rlm_session_position(s.s), P + 1 + cont.size());
  TestSession ref;
  ASSERT_EQ(ref.init(&m.model, config(256, 7, 16)), RLM_OK);
  std::vector<int32_t> with_token = prefix;
  with_token.push_back(r.token);
  ASSERT_EQ(rlm_session_feed_tokens(ref.s, with_token.data(), with_token.size()), RLM_OK);
  const Scored want = teacher_forced(ref.s, cont);
  expect_scored_equal(after_step, want, 1e-5);
  EXPECT_GT(max_abs_diff(after_step.logprobs, first.logprobs), 1e-4)
      << "the step's token changes the context";
}

// 5g: scoring 100 tokens through a 32-slot ring with 4 sinks (passes of 7, crossing the wrap)
// equals teacher-forced stepping on an identical session.
TEST(Score, PastTheRingCapacity) {
  const OpenedModel& m = random_model_fixture();
  const std::vector<int32_t> prefix = bytes_of("Ring ");
  const std::vector<int32_t> cont = token_run(100, 3);
  for (uint32_t rows : {1u, 7u, 64u}) {
    SCOPED_TRACE("max_logit_rows " + std::to_string(rows));
    TestSession a, b;
    ASSERT_EQ(a.init(&m.model, config(32, rows, 16)), RLM_OK);
    ASSERT_EQ(b.init(&m.model, config(32, rows, 16)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(a.s, prefix.data(), prefix.size()), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(b.s, prefix.data(), prefix.size()), RLM_OK);
    const Scored got = score(a.s, cont);
    const Scored want = teacher_forced(b.s, cont);
    expect_scored_equal(got, want, 1e-5);
    EXPECT_EQ(rlm_session_position(a.s), prefix.size() + cont.size());
    EXPECT_EQ(rlm_session_rewind(a.s, 50), RLM_ERR_REWIND) << "the ring has wrapped";
    if (rows == 7) {
      // The ring matters: a session holding everything scores differently.
      TestSession big;
      ASSERT_EQ(big.init(&m.model, config(256, rows, 16)), RLM_OK);
      ASSERT_EQ(rlm_session_feed_tokens(big.s, prefix.data(), prefix.size()), RLM_OK);
      EXPECT_GT(max_abs_diff(score(big.s, cont).logprobs, got.logprobs), 1e-4);
    }
  }
}

// 5h: max_logit_rows limits and the older config size.
TEST(Score, MaxLogitRowsConfig) {
  const OpenedModel& m = random_model_fixture();
  size_t base = 0, rows64 = 0, rows4096 = 0, old_size = 0, bytes = 0, align = 0;
  rlm_session_config c = config(64, 0);
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &base, &align), RLM_OK);
  c.max_logit_rows = 64;
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &rows64, &align), RLM_OK);
  // Each row costs vocab floats (the single row of the default config is padded to 64 bytes).
  EXPECT_GE(rows64 - base + 64, 63u * kVocab * sizeof(float));
  EXPECT_LE(rows64 - base, 63u * kVocab * sizeof(float) + 64);
  c.max_logit_rows = 4096;
  EXPECT_EQ(rlm_session_memory(&m.model, &c, &rows4096, &align), RLM_OK);
  c.max_logit_rows = 4097;
  EXPECT_EQ(rlm_session_memory(&m.model, &c, &bytes, &align), RLM_ERR_INVALID_ARGUMENT);
  char msg[256] = "";
  EXPECT_EQ(rlm_session_config_check(&m.model, &c, msg, sizeof msg), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(strstr(msg, "max_logit_rows"), nullptr) << msg;
  c.max_logit_rows = 0xffffffffu;
  EXPECT_EQ(rlm_session_memory(&m.model, &c, &bytes, &align), RLM_ERR_INVALID_ARGUMENT);
  // An older caller's struct (ending before max_logit_rows): the field is not read.
  c.struct_size = offsetof(rlm_session_config, max_logit_rows);
  c.max_logit_rows = 5000;
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &old_size, &align), RLM_OK);
  EXPECT_EQ(old_size, base);
  TestSession ts;
  ASSERT_EQ(ts.init(&m.model, c), RLM_OK);
  const std::vector<int32_t> prefix = bytes_of("old config ");
  const std::vector<int32_t> cont = token_run(20, 4);
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, prefix.data(), prefix.size()), RLM_OK);
  const Scored got = score(ts.s, cont);
  TestSession tf;
  ASSERT_EQ(tf.init(&m.model, config(64, 0)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(tf.s, prefix.data(), prefix.size()), RLM_OK);
  expect_scored_equal(got, teacher_forced(tf.s, cont), 1e-5);
  // A size between two known ones is refused.
  c.struct_size = offsetof(rlm_session_config, max_logit_rows) + 2;
  EXPECT_EQ(rlm_session_memory(&m.model, &c, &bytes, &align), RLM_ERR_STRUCT_SIZE);
}

// 6: steps with logprobs and top-n on, and scoring (with every output), make no heap call.
TEST(Logprobs, NoHeapCalls) {
  if (!kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  const OpenedModel& m = random_model_fixture();
  TestSession ts, spec;
  ASSERT_EQ(ts.init(&m.model, config(32, 7, 16)), RLM_OK);
  ASSERT_EQ(spec.init(&m.model, config(32, 0, 16, 4)), RLM_OK);
  rlm_speculation sd;
  rlm_speculation_default(&sd);
  sd.mode = RLM_SPEC_LOOKUP;
  ASSERT_EQ(rlm_session_set_speculation(spec.s, &sd), RLM_OK);
  rlm_token_logprob top[16];
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.7f;
  sp.repeat_penalty = 1.1f;
  const std::vector<int32_t> prompt = bytes_of("no heap no heap no heap ");
  const std::vector<int32_t> cont = token_run(50, 5);
  std::vector<float> lp(cont.size()), logits(cont.size() * kVocab);
  double sum = 0.0;
  rlm_step_result r;
  rlm_step_result_default(&r);
  int ok = 0, calls_made = 0;
  const HeapCalls calls = count_heap([&] {
    for (rlm_session* s : {ts.s, spec.s}) {
      calls_made += 6;
      ok += rlm_session_set_logprobs(s, 1, top, 16) == RLM_OK;
      ok += rlm_session_set_sampling(s, &sp) == RLM_OK;
      ok += rlm_session_set_ignore_eos(s, 1) == RLM_OK;
      ok += rlm_session_feed_tokens(s, prompt.data(), prompt.size()) == RLM_OK;
      ok += rlm_session_score(s, cont.data(), cont.size(), lp.data(), logits.data(), &sum) ==
            RLM_OK;
      for (int i = 0; i < 60; ++i) {  // past the 32-slot ring
        ++calls_made;
        ok += rlm_step(s, &r) == RLM_OK;
      }
      ok += rlm_session_score(s, cont.data(), 10, lp.data(), logits.data(), &sum) == RLM_OK;
    }
  });
  EXPECT_EQ(ok, calls_made);
  EXPECT_EQ(r.n_top, 16u);
  EXPECT_EQ(calls.allocs, 0);
  EXPECT_EQ(calls.frees, 0);
}

// 7: stories260K's greedy continuation of "Once upon a time": each step's logprob is its top-1,
// and scoring the continuation gives each token the maximum logprob of its row (it is the
// argmax), equal to the step's.
TEST(Score, Stories260KGreedyContinuationIsTheArgmaxOfEveryRow) {
  OpenedModel m;
  std::string err;
  if (!open_stories260k(DType::F32, &m, &err)) {
    ASSERT_EQ(err, "") << "stories260K is there but does not convert or open";
    GTEST_SKIP() << "../shared stories260K absent";
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  ASSERT_EQ(rlm_model_get_info(&m.model, &info), RLM_OK);
  const uint32_t V = info.vocab_size;
  const uint32_t n = emulated() ? 20 : 60;
  const std::string prompt = "Once upon a time";
  rlm_session_config c = config(256, 16, 64);
  TestSession gen, sc;
  ASSERT_EQ(gen.init(&m.model, c), RLM_OK);
  ASSERT_EQ(sc.init(&m.model, c), RLM_OK);
  rlm_token_logprob top[5];
  ASSERT_EQ(rlm_session_set_logprobs(gen.s, 1, top, 5), RLM_OK);
  const rlm_sampling g = greedy_sampling();
  ASSERT_EQ(rlm_session_set_sampling(gen.s, &g), RLM_OK);
  rlm_session_set_max_tokens(gen.s, n);
  ASSERT_EQ(rlm_session_feed_text(gen.s, prompt.data(), prompt.size()), RLM_OK);
  std::vector<int32_t> tokens;
  std::vector<float> step_lp;
  std::string text;
  rlm_step_result r;
  rlm_step_result_default(&r);
  do {
    ASSERT_EQ(rlm_step(gen.s, &r), RLM_OK);
    tokens.push_back(r.token);
    step_lp.push_back(r.logprob);
    text.append(r.text, r.text_len);
    EXPECT_EQ(r.n_top, 5u);
    EXPECT_EQ(top[0].token, r.token) << "greedy takes the top-1";
    EXPECT_EQ(top[0].logprob, r.logprob);
    EXPECT_EQ(r.sampler_logprob, 0.0f);
  } while (r.stop == RLM_STOP_NONE);
  ASSERT_GT(tokens.size(), 5u);
  const std::string ref = stories260k_greedy_continuation();
  if (!ref.empty() && r.stop == RLM_STOP_MAX_TOKENS) {
    EXPECT_EQ(ref.compare(0, text.size(), text), 0) << "llama2.c's greedy: " << ref << "\nours: " << text;
  }

  ASSERT_EQ(rlm_session_feed_text(sc.s, prompt.data(), prompt.size()), RLM_OK);
  std::vector<float> lp(tokens.size()), logits(tokens.size() * V);
  double sum = 0.0;
  ASSERT_EQ(rlm_session_score(sc.s, tokens.data(), tokens.size(), lp.data(), logits.data(), &sum),
            RLM_OK);
  double total = 0.0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::vector<float> row(logits.begin() + i * V, logits.begin() + (i + 1) * V);
    const std::vector<double> ls = log_softmax(row);
    const double best = *std::max_element(ls.begin(), ls.end());
    EXPECT_NEAR(lp[i], best, 1e-5) << "token " << i << " is its row's argmax";
    EXPECT_EQ(true_top(row, 1)[0], tokens[i]) << "token " << i;
    EXPECT_NEAR(lp[i], step_lp[i], 1e-5) << "token " << i << ": score vs step";
    total += lp[i];
  }
  EXPECT_DOUBLE_EQ(sum, total);
  EXPECT_LT(sum, 0.0);

  // Text after a score: BOS alone, then "Once upon a time," scored: the next pieces ("▁there")
  // keep their space, as after feeding the same text (the scored tokens are the decode context).
  const std::string comma = prompt + ",";
  std::vector<int32_t> toks(64);
  std::vector<uint8_t> scratch(rlm_tokenize_scratch_bytes(&m.model, comma.size()));
  size_t n_toks = 0;
  ASSERT_EQ(rlm_tokenize(&m.model, comma.data(), comma.size(), 0, toks.data(), toks.size(),
                         &n_toks, scratch.data(), scratch.size()),
            RLM_OK);
  toks.resize(n_toks);
  TestSession after_score, after_feed;
  ASSERT_EQ(after_score.init(&m.model, c), RLM_OK);
  ASSERT_EQ(after_feed.init(&m.model, c), RLM_OK);
  const int32_t bos = info.bos_id;
  ASSERT_GE(bos, 0);
  ASSERT_EQ(rlm_session_feed_tokens(after_score.s, &bos, 1), RLM_OK);
  ASSERT_EQ(rlm_session_eval(after_score.s), RLM_OK);
  ASSERT_EQ(rlm_session_score(after_score.s, toks.data(), toks.size(), nullptr, nullptr, nullptr),
            RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(after_feed.s, comma.data(), comma.size()), RLM_OK);
  std::string text_score, text_feed;
  for (TestSession* t : {&after_score, &after_feed}) {
    ASSERT_EQ(rlm_session_set_sampling(t->s, &g), RLM_OK);
    rlm_session_set_max_tokens(t->s, 8);
    do {
      ASSERT_EQ(rlm_step(t->s, &r), RLM_OK);
      (t == &after_score ? text_score : text_feed).append(r.text, r.text_len);
    } while (r.stop == RLM_STOP_NONE);
  }
  EXPECT_EQ(text_score, text_feed);
  EXPECT_EQ(text_feed.compare(0, 1, " "), 0) << "expected a word after the comma: " << text_feed;
}
