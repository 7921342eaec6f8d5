// Speculative decoding (#14): the output with any drafter is token for token the output without
// speculation — greedy over 2,000+ tokens across ring wraps on real models, seeded sampling with
// penalties and top-k/top-p/min-p, stops inside accepted runs, rewinds and feeds in the middle of
// a pass — plus a chi-square test of the joint distribution of the first three sampled tokens,
// the configuration errors, and the heap (no allocation with a drafter set).
#include <math.h>
#include <string.h>

#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

// Under qemu (the cross suites) the long runs are shortened: the native suites (release, asan)
// run the full lengths, the emulated ones check the ARM kernels on shorter ones.

// The KV dtype of every session these tests make (speculation is exact whatever the cache
// stores: a verification pass writes and reads the same rows decode would).
rlm_kv_dtype g_kv = RLM_KV_F32;

rlm_session_config config(uint32_t n_ctx, uint32_t max_draft, uint32_t threads = 1) {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.kv_dtype = g_kv;
  c.n_ctx = n_ctx;
  c.n_sink = 4;
  c.max_draft = max_draft;
  c.n_threads = threads;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

rlm_sampling greedy_sampling() {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  return sp;
}

// Everything a caller can observe of a generation.
struct Trace {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> positions;
  std::string text;
  std::vector<int> stops;
  uint32_t steps_without_eval = 0;  // steps that returned an accepted draft (n_evaluated 0)
  uint32_t final_position = 0;
  bool operator==(const Trace& o) const {
    return tokens == o.tokens && positions == o.positions && text == o.text && stops == o.stops &&
           final_position == o.final_position;
  }
};

// Steps until a stop or `max_steps`, appending to `t`.
void run_steps(rlm_session* s, uint32_t max_steps, Trace* t) {
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < max_steps; ++i) {
    const rlm_status st = rlm_step(s, &r);
    ASSERT_EQ(st, RLM_OK) << rlm_session_error(s);
    t->tokens.push_back(r.token);
    t->positions.push_back(r.position);
    t->text.append(r.text, r.text_len);
    if (r.n_evaluated == 0) ++t->steps_without_eval;
    if (r.stop != RLM_STOP_NONE) {
      t->stops.push_back(r.stop);
      break;
    }
  }
  t->final_position = rlm_session_position(s);
}

std::string piece_summary(const Trace& a, const Trace& b) {
  size_t i = 0;
  while (i < a.tokens.size() && i < b.tokens.size() && a.tokens[i] == b.tokens[i]) ++i;
  return "first difference at token " + std::to_string(i) + " of " +
         std::to_string(a.tokens.size()) + " / " + std::to_string(b.tokens.size());
}

struct Drafter {
  rlm_spec_mode mode;
  const OpenedModel* draft_model;  // RLM_SPEC_DRAFT_MODEL
  uint32_t n_max;
};

// Generates `n` tokens (ignoring EOS, so the run crosses the ring several times) from `prompt`
// with `sampling`, plainly (drafter null) or with the drafter. `stats` receives the counters.
Trace generate(const OpenedModel& target, const Drafter* drafter, uint32_t n_ctx,
               const std::string& prompt, uint32_t n, const rlm_sampling& sampling,
               uint32_t threads = 1, rlm_spec_stats* stats = nullptr) {
  Trace t;
  TestSession ts, draft;
  const uint32_t max_draft = drafter ? drafter->n_max : 0;
  EXPECT_EQ(ts.init(&target.model, config(n_ctx, max_draft, threads)), RLM_OK);
  if (!ts.s) return t;
  if (drafter) {
    rlm_speculation spec;
    rlm_speculation_default(&spec);
    spec.mode = drafter->mode;
    spec.n_max = drafter->n_max;
    if (drafter->mode == RLM_SPEC_DRAFT_MODEL) {
      EXPECT_EQ(draft.init(&drafter->draft_model->model, config(n_ctx, drafter->n_max, threads)),
                RLM_OK);
      spec.draft = draft.s;
      spec.p_min = 0.0f;
    }
    EXPECT_EQ(rlm_session_set_speculation(ts.s, &spec), RLM_OK) << rlm_session_error(ts.s);
  }
  EXPECT_EQ(rlm_session_set_sampling(ts.s, &sampling), RLM_OK);
  rlm_session_set_ignore_eos(ts.s, 1);
  rlm_session_set_max_tokens(ts.s, n);
  EXPECT_EQ(rlm_session_feed_text(ts.s, prompt.data(), prompt.size()), RLM_OK);
  run_steps(ts.s, n + 1, &t);
  if (stats) {
    rlm_spec_stats_default(stats);
    EXPECT_EQ(rlm_session_spec_stats(ts.s, stats), RLM_OK);
  }
  return t;
}

bool stories(DType q, OpenedModel* out) {
  std::string err;
  if (open_stories260k(q, out, &err)) return true;
  EXPECT_EQ(err, "") << "stories260K is there but does not convert or open";
  return false;
}

bool llama2xs(OpenedModel* out) {
  const std::string bin = shared_path("models/llama2xs-279K/model.bin");
  const std::string tok = shared_path("models/stories260K/tok512.bin");
  if (bin.empty() || tok.empty()) return false;
  std::string err;
  EXPECT_TRUE(open_built_model(bin, tok, DType::F32, out, &err)) << err;
  return err.empty();
}

bool tinystories(DType q, OpenedModel* out) {
  const std::string dir = shared_path("models/tinystories-656k");
  if (dir.empty()) return false;
  std::string err;
  EXPECT_TRUE(open_built_model(dir, "", q, out, &err)) << err;
  return err.empty();
}

// Greedy: plain vs each drafter, 2,000 tokens through a 256-slot ring (8 wraps) with 4 sinks
// (600 under qemu and the sanitizers: 2 wraps).
void expect_greedy_identical(const OpenedModel& target, const std::vector<Drafter>& drafters,
                             const std::string& prompt) {
  // (400 under qemu, where every float operation is emulated: still past one wrap.)
  const uint32_t n = emulated() ? 400 : light() ? 600 : 2000, n_ctx = 256;
  const Trace plain = generate(target, nullptr, n_ctx, prompt, n, greedy_sampling());
  ASSERT_EQ(plain.tokens.size(), n);
  for (const Drafter& d : drafters) {
    rlm_spec_stats st;
    const Trace spec = generate(target, &d, n_ctx, prompt, n, greedy_sampling(), 1, &st);
    EXPECT_TRUE(spec == plain) << "mode " << d.mode << ": " << piece_summary(plain, spec);
    EXPECT_GT(st.verify_passes, 0u) << "mode " << d.mode;
    EXPECT_GT(st.accepted, 0u) << "mode " << d.mode;
    EXPECT_EQ(spec.steps_without_eval, st.accepted) << "each accepted draft is one step without a pass";
    printf("[ spec     ] mode %d n_max %u: %llu passes, %llu drafted, %llu accepted (%.1f %%), "
           "%.2f tokens per target pass\n",
           d.mode, d.n_max, static_cast<unsigned long long>(st.verify_passes),
           static_cast<unsigned long long>(st.drafted),
           static_cast<unsigned long long>(st.accepted),
           st.drafted ? 100.0 * st.accepted / st.drafted : 0.0,
           static_cast<double>(n) / static_cast<double>(n - spec.steps_without_eval));
  }
}

}  // namespace

TEST(Speculative, GreedyIdenticalStories260KF32) {
  OpenedModel target, xs, q4;
  if (!stories(DType::F32, &target)) GTEST_SKIP() << "../shared stories260K absent";
  ASSERT_TRUE(stories(DType::Q4, &q4));
  std::vector<Drafter> drafters = {{RLM_SPEC_LOOKUP, nullptr, 8},
                                   {RLM_SPEC_DRAFT_MODEL, &q4, 4}};
  if (llama2xs(&xs)) drafters.push_back({RLM_SPEC_DRAFT_MODEL, &xs, 4});
  expect_greedy_identical(target, drafters, "Once upon a time");
}

TEST(Speculative, GreedyIdenticalStories260KQ8) {
  OpenedModel target, q4;
  if (!stories(DType::Q8, &target)) GTEST_SKIP() << "../shared stories260K absent";
  ASSERT_TRUE(stories(DType::Q4, &q4));
  expect_greedy_identical(target, {{RLM_SPEC_LOOKUP, nullptr, 4}, {RLM_SPEC_DRAFT_MODEL, &q4, 6}},
                          "Lily and Tom went to the park");
}

// q8 KV: the undo area keeps a row's scales with its values, so rejected drafts after the ring
// wrapped still restore the rows exactly.
TEST(Speculative, GreedyIdenticalWithQ8Kv) {
  OpenedModel target, q4;
  if (!stories(DType::F32, &target)) GTEST_SKIP() << "../shared stories260K absent";
  ASSERT_TRUE(stories(DType::Q4, &q4));
  g_kv = RLM_KV_Q8;
  expect_greedy_identical(target, {{RLM_SPEC_LOOKUP, nullptr, 8}, {RLM_SPEC_DRAFT_MODEL, &q4, 4}},
                          "Once upon a time");
  g_kv = RLM_KV_F32;
}

TEST(Speculative, GreedyIdenticalTinyStories) {
  OpenedModel target, q4;
  if (!tinystories(DType::Q8, &target)) GTEST_SKIP() << "../shared TinyStories-656K absent";
  ASSERT_TRUE(tinystories(DType::Q4, &q4));
  expect_greedy_identical(target, {{RLM_SPEC_LOOKUP, nullptr, 8}, {RLM_SPEC_DRAFT_MODEL, &q4, 4}},
                          "Once upon a time, there was a little dog");
}

// The real pair with two threads on the target and on the draft: the same tokens as one
// thread, plain.
TEST(Speculative, GreedyIdenticalAcrossThreads) {
  OpenedModel target, xs;
  if (!stories(DType::F32, &target) || !llama2xs(&xs)) GTEST_SKIP() << "../shared models absent";
  const uint32_t n = light() ? 300 : 600;
  const Trace plain = generate(target, nullptr, 128, "Once upon a time", n, greedy_sampling());
  const Drafter d{RLM_SPEC_DRAFT_MODEL, &xs, 6};
  const Trace spec = generate(target, &d, 128, "Once upon a time", n, greedy_sampling(), 2);
  EXPECT_TRUE(spec == plain) << piece_summary(plain, spec);
}

namespace {

OpenedModel& random_model_fixture() {
  static OpenedModel m;
  static bool opened = false;
  if (!opened) {
    RandomModelShape shape;
    shape.dim = 32;
    shape.n_heads = 4;
    shape.n_kv_heads = 2;
    shape.ffn_dim = 48;
    shape.max_context = 512;
    std::string err;
    EXPECT_TRUE(open_random_model(shape, DType::F32, &m, &err)) << err;
    opened = true;
  }
  return m;
}

rlm_sampling noisy_sampling(uint64_t seed) {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 1.3f;
  sp.top_k = 6;
  sp.top_p = 0.9f;
  sp.min_p = 0.02f;
  sp.repeat_penalty = 1.3f;
  sp.frequency_penalty = 0.2f;
  sp.presence_penalty = 0.1f;
  sp.penalty_last_n = 16;
  sp.seed = seed;
  return sp;
}

}  // namespace

// Seeded sampling with penalties: with the same seed, the same tokens (each token is sampled with
// the RNG state, history and logits plain decoding has at that point).
TEST(Speculative, SeededSamplingIdentical) {
  const OpenedModel& m = random_model_fixture();
  const Drafter self{RLM_SPEC_DRAFT_MODEL, &m, 5};
  const Drafter lookup{RLM_SPEC_LOOKUP, nullptr, 5};
  const std::string prompt = "abcabcabcabcabcabc";
  for (uint64_t seed : {1ull, 2ull, 3ull}) {
    const Trace plain = generate(m, nullptr, 64, prompt, 300, noisy_sampling(seed));
    for (const Drafter* d : {&self, &lookup}) {
      rlm_spec_stats st;
      const Trace spec = generate(m, d, 64, prompt, 300, noisy_sampling(seed), 1, &st);
      EXPECT_TRUE(spec == plain) << "seed " << seed << " mode " << d->mode << ": "
                                 << piece_summary(plain, spec);
      if (d == &self) EXPECT_GT(st.accepted, 0u);
    }
  }
}

// The joint distribution of the first three sampled tokens, plain vs speculative (self-draft:
// many accepted and many rejected drafts), over 20,000 runs each (2,000 under qemu, 4,000 under
// the sanitizers) with different seeds: a
// chi-square test of homogeneity. Fixed seeds make the test deterministic; the threshold is the
// 0.1 % critical value, so a correct implementation passes and a biased acceptance (e.g. one
// that accepted drafts without sampling) fails by orders of magnitude.
TEST(Speculative, JointDistributionOfThreeTokensMatchesPlain) {
  const OpenedModel& m = random_model_fixture();
  const int runs = emulated() ? 2000 : light() ? 4000 : 20000;
  std::map<std::vector<int32_t>, int> counts[2];
  for (int mode = 0; mode < 2; ++mode) {
    TestSession ts, draft;
    ASSERT_EQ(ts.init(&m.model, config(64, mode ? 3 : 0)), RLM_OK);
    if (mode) {
      ASSERT_EQ(draft.init(&m.model, config(64, 3)), RLM_OK);
      rlm_speculation spec;
      rlm_speculation_default(&spec);
      spec.mode = RLM_SPEC_DRAFT_MODEL;
      spec.draft = draft.s;
      spec.p_min = 0.0f;
      ASSERT_EQ(rlm_session_set_speculation(ts.s, &spec), RLM_OK) << rlm_session_error(ts.s);
    }
    rlm_step_result r;
    rlm_step_result_default(&r);
    uint64_t accepted_steps = 0;
    for (int i = 0; i < runs; ++i) {
      rlm_sampling sp = noisy_sampling(1000003ull * i + (mode ? 77 : 0));
      sp.temperature = 0.9f;
      sp.top_k = 4;
      ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
      ASSERT_EQ(rlm_session_reset(ts.s), RLM_OK);
      ASSERT_EQ(rlm_session_feed_text(ts.s, "xyz", 3), RLM_OK);
      std::vector<int32_t> key;
      for (int j = 0; j < 3; ++j) {
        ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK);
        key.push_back(r.token);
        if (r.n_evaluated == 0) ++accepted_steps;
      }
      ++counts[mode][key];
    }
    if (mode) EXPECT_GT(accepted_steps, runs / 10u) << "too few accepted drafts to test anything";
  }
  // Chi-square over the cells seen, pooling cells with an expected count below 5.
  double chi2 = 0.0, pool_a = 0.0, pool_b = 0.0;
  int dof = -1;
  std::map<std::vector<int32_t>, int> all = counts[0];
  for (auto& kv : counts[1]) all[kv.first] += 0;
  for (auto& kv : all) {
    const double a = counts[0].count(kv.first) ? counts[0][kv.first] : 0;
    const double b = counts[1].count(kv.first) ? counts[1][kv.first] : 0;
    if ((a + b) / 2.0 < 5.0) {
      pool_a += a;
      pool_b += b;
      continue;
    }
    const double e = (a + b) / 2.0;
    chi2 += (a - e) * (a - e) / e + (b - e) * (b - e) / e;
    ++dof;
  }
  if (pool_a + pool_b > 0) {
    const double e = (pool_a + pool_b) / 2.0;
    chi2 += (pool_a - e) * (pool_a - e) / e + (pool_b - e) * (pool_b - e) / e;
    ++dof;
  }
  ASSERT_GT(dof, 5) << "the distribution has too few cells to test";
  // 0.1 % critical value of chi-square (Wilson-Hilferty approximation).
  const double z = 3.0902;
  const double k = dof;
  const double crit = k * pow(1.0 - 2.0 / (9.0 * k) + z * sqrt(2.0 / (9.0 * k)), 3.0);
  printf("[ spec     ] chi-square %.1f, %d degrees of freedom, 0.1 %% critical value %.1f\n", chi2,
         dof, crit);
  EXPECT_LT(chi2, crit);
}

// Stops inside an accepted run: an end token, a stop string and max_tokens each end the turn at
// the same token as plain decoding, with the cache at the stop: the next turn continues alike.
TEST(Speculative, StopsInsideAcceptedRunsAndNextTurn) {
  const OpenedModel& m = random_model_fixture();
  // Where plain greedy goes, to choose stops inside the run.
  const std::string prompt = "hello hello hello hello";
  const Trace probe = generate(m, nullptr, 64, prompt, 40, greedy_sampling());
  ASSERT_EQ(probe.tokens.size(), 40u);
  const int32_t stop_token = probe.tokens[17];
  const std::string stop_text = probe.text.substr(probe.text.size() / 2, 2);
  for (int kind = 0; kind < 3; ++kind) {
    Trace t[2];
    for (int mode = 0; mode < 2; ++mode) {
      TestSession ts;
      ASSERT_EQ(ts.init(&m.model, config(64, mode ? 6 : 0)), RLM_OK);
      if (mode) {
        rlm_speculation spec;
        rlm_speculation_default(&spec);
        spec.mode = RLM_SPEC_LOOKUP;
        spec.ngram_min = 1;
        ASSERT_EQ(rlm_session_set_speculation(ts.s, &spec), RLM_OK);
      }
      const rlm_sampling sp = greedy_sampling();
      ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
      rlm_session_set_ignore_eos(ts.s, 1);
      if (kind == 0) ASSERT_EQ(rlm_session_add_stop_token(ts.s, stop_token), RLM_OK);
      if (kind == 1) {
        ASSERT_EQ(rlm_session_add_stop_string(ts.s, stop_text.data(), stop_text.size()), RLM_OK);
      }
      rlm_session_set_max_tokens(ts.s, kind == 2 ? 23 : 60);
      ASSERT_EQ(rlm_session_feed_text(ts.s, prompt.data(), prompt.size()), RLM_OK);
      run_steps(ts.s, 100, &t[mode]);
      // The next turn: more text, then generation continues from the rewound cache.
      ASSERT_EQ(rlm_session_clear_stops(ts.s), RLM_OK);
      rlm_session_set_max_tokens(ts.s, 30);
      ASSERT_EQ(rlm_session_feed_text(ts.s, " again", 6), RLM_OK);
      run_steps(ts.s, 100, &t[mode]);
    }
    EXPECT_TRUE(t[0] == t[1]) << "stop kind " << kind << ": " << piece_summary(t[0], t[1]);
    EXPECT_EQ(t[0].stops.size(), 2u) << "stop kind " << kind;
  }
}

// In the middle of a pass (accepted drafts not yet returned): logits, rewind, feed and a change
// of sampling behave as in plain decoding at the same token.
TEST(Speculative, CallsInTheMiddleOfAPassMatchPlain) {
  const OpenedModel& m = random_model_fixture();
  const std::string prompt = "the cat the cat the cat the cat";
  for (int what = 0; what < 3; ++what) {
    Trace t[2];
    std::vector<float> logits[2];
    for (int mode = 0; mode < 2; ++mode) {
      TestSession ts;
      ASSERT_EQ(ts.init(&m.model, config(64, mode ? 8 : 0)), RLM_OK);
      if (mode) {
        rlm_speculation spec;
        rlm_speculation_default(&spec);
        spec.mode = RLM_SPEC_LOOKUP;
        spec.ngram_min = 1;
        ASSERT_EQ(rlm_session_set_speculation(ts.s, &spec), RLM_OK);
      }
      const rlm_sampling sp = greedy_sampling();
      ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
      rlm_session_set_ignore_eos(ts.s, 1);
      ASSERT_EQ(rlm_session_feed_text(ts.s, prompt.data(), prompt.size()), RLM_OK);
      run_steps(ts.s, 13, &t[mode]);
      const float* l = nullptr;
      size_t n = 0;
      ASSERT_EQ(rlm_session_logits(ts.s, &l, &n), RLM_OK);
      logits[mode].assign(l, l + n);
      if (what == 0) {
        ASSERT_EQ(rlm_session_rewind(ts.s, rlm_session_position(ts.s) - 3), RLM_OK);
        ASSERT_EQ(rlm_session_feed_text(ts.s, "x", 1), RLM_OK);
      } else if (what == 1) {
        ASSERT_EQ(rlm_session_feed_text(ts.s, " dog", 4), RLM_OK);
      } else {
        const rlm_sampling noisy = noisy_sampling(9);
        ASSERT_EQ(rlm_session_set_sampling(ts.s, &noisy), RLM_OK);
      }
      rlm_session_set_max_tokens(ts.s, 25);
      run_steps(ts.s, 100, &t[mode]);
    }
    EXPECT_EQ(logits[0], logits[1]) << "case " << what;
    EXPECT_TRUE(t[0] == t[1]) << "case " << what << ": " << piece_summary(t[0], t[1]);
  }
}

TEST(Speculative, ConfigurationErrors) {
  const OpenedModel& m = random_model_fixture();
  size_t plain_bytes = 0, spec_bytes = 0, old_bytes = 0;
  rlm_session_config c = config(64, 0);
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &plain_bytes, nullptr), RLM_OK);
  c.struct_size = offsetof(rlm_session_config, max_draft);  // an older header: max_draft 0
  c.max_draft = 8;
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &old_bytes, nullptr), RLM_OK);
  EXPECT_EQ(old_bytes, plain_bytes);
  c = config(64, 8);
  ASSERT_EQ(rlm_session_memory(&m.model, &c, &spec_bytes, nullptr), RLM_OK);
  EXPECT_GT(spec_bytes, plain_bytes) << "the size query counts the draft rows and the undo area";
  char msg[256];
  c = config(64, 60);  // window 60: max_draft must be below it
  EXPECT_EQ(rlm_session_config_check(&m.model, &c, msg, sizeof msg), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(strstr(msg, "max_draft"), nullptr) << msg;
  c = config(256, 65);
  EXPECT_EQ(rlm_session_config_check(&m.model, &c, msg, sizeof msg), RLM_ERR_INVALID_ARGUMENT);

  TestSession off, on, other;
  ASSERT_EQ(off.init(&m.model, config(64, 0)), RLM_OK);
  ASSERT_EQ(on.init(&m.model, config(64, 4)), RLM_OK);
  rlm_speculation spec;
  rlm_speculation_default(&spec);
  spec.mode = RLM_SPEC_LOOKUP;
  EXPECT_EQ(rlm_session_set_speculation(off.s, &spec), RLM_ERR_UNSUPPORTED);
  EXPECT_EQ(rlm_session_set_speculation(off.s, nullptr), RLM_OK);  // off is always fine
  spec.n_max = 5;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
  spec.n_max = 0;
  spec.ngram_min = 3;
  spec.ngram_max = 2;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
  spec.ngram_min = 2;
  spec.ngram_max = 17;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
  rlm_speculation_default(&spec);
  int bad_mode = 7;
  memcpy(&spec.mode, &bad_mode, sizeof bad_mode);
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
  rlm_speculation_default(&spec);
  spec.struct_size = 4;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_STRUCT_SIZE);
  rlm_speculation_default(&spec);
  spec.mode = RLM_SPEC_DRAFT_MODEL;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);  // no draft
  spec.draft = on.s;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);  // itself
  spec.draft = off.s;  // max_draft 0 < n_max - 1
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(strstr(rlm_session_error(on.s), "max_draft"), nullptr) << rlm_session_error(on.s);
  spec.n_max = 1;  // needs no undo area in the draft
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_OK) << rlm_session_error(on.s);
  spec.p_min = 1.5f;
  EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);

  // Another vocabulary: refused, saying what differs.
  OpenedModel st;
  if (stories(DType::Q8, &st)) {
    ASSERT_EQ(other.init(&st.model, config(64, 4)), RLM_OK);
    rlm_speculation_default(&spec);
    spec.mode = RLM_SPEC_DRAFT_MODEL;
    spec.draft = other.s;
    EXPECT_EQ(rlm_session_set_speculation(on.s, &spec), RLM_ERR_INVALID_ARGUMENT);
    EXPECT_NE(strstr(rlm_session_error(on.s), "vocabulary differs"), nullptr)
        << rlm_session_error(on.s);
  }

  // A released draft session: the step says so instead of reading freed state.
  {
    TestSession target, draft;
    ASSERT_EQ(target.init(&m.model, config(64, 4)), RLM_OK);
    ASSERT_EQ(draft.init(&m.model, config(64, 4)), RLM_OK);
    rlm_speculation_default(&spec);
    spec.mode = RLM_SPEC_DRAFT_MODEL;
    spec.draft = draft.s;
    ASSERT_EQ(rlm_session_set_speculation(target.s, &spec), RLM_OK);
    ASSERT_EQ(rlm_session_feed_text(target.s, "ab", 2), RLM_OK);
    rlm_step_result r;
    rlm_step_result_default(&r);
    ASSERT_EQ(rlm_step(target.s, &r), RLM_OK);
    ASSERT_EQ(rlm_session_release(draft.s), RLM_OK);
    EXPECT_EQ(rlm_step(target.s, &r), RLM_ERR_BAD_STATE);
    EXPECT_NE(strstr(rlm_session_error(target.s), "released"), nullptr);
    EXPECT_EQ(rlm_session_set_speculation(target.s, nullptr), RLM_OK);
    EXPECT_EQ(rlm_step(target.s, &r), RLM_OK);  // plain again
  }
}

TEST(Speculative, NoHeapCallsWithADrafter) {
  if (!kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  const OpenedModel& m = random_model_fixture();
  TestSession target, draft;
  ASSERT_EQ(target.init(&m.model, config(32, 6)), RLM_OK);
  ASSERT_EQ(draft.init(&m.model, config(32, 6)), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  int ok = 0;
  uint64_t accepted = 0;
  const HeapCalls calls = count_heap([&] {
    for (int mode = 0; mode < 2; ++mode) {
      rlm_speculation spec;
      rlm_speculation_default(&spec);
      spec.mode = mode ? RLM_SPEC_LOOKUP : RLM_SPEC_DRAFT_MODEL;
      spec.draft = draft.s;
      spec.p_min = 0.0f;
      spec.ngram_min = 1;
      if (rlm_session_set_speculation(target.s, &spec) != RLM_OK) return;
      rlm_session_set_ignore_eos(target.s, 1);
      rlm_session_reset(target.s);
      rlm_session_feed_text(target.s, "ab ab ab ab", 11);
      for (int i = 0; i < 150; ++i) ok += rlm_step(target.s, &r) == RLM_OK;  // ring wraps
      rlm_spec_stats st;
      rlm_spec_stats_default(&st);
      rlm_session_spec_stats(target.s, &st);
      accepted += st.accepted;
    }
  });
  EXPECT_EQ(ok, 300);
  EXPECT_GT(accepted, 0u);
  EXPECT_EQ(calls.allocs, 0);
  EXPECT_EQ(calls.frees, 0);
}

// A model wide enough that the matmuls and attention split across threads: verification passes
// with 2 and 3 threads on the target and the draft give the plain one-thread tokens (also run
// under ThreadSanitizer).
TEST(Speculative, ThreadsSplitTheVerificationPass) {
  RandomModelShape shape;
  shape.dim = 256;
  shape.n_heads = 8;
  shape.n_kv_heads = 4;
  shape.ffn_dim = 512;
  shape.max_context = 256;
  OpenedModel m;
  std::string err;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &m, &err)) << err;
  const std::string prompt = "one two one two one two one two";
  const uint32_t n = emulated() ? 60 : 120;  // 60 under qemu: prompt + 60 still wrap the 64-slot ring
  const Trace plain = generate(m, nullptr, 64, prompt, n, noisy_sampling(5));
  const Drafter self{RLM_SPEC_DRAFT_MODEL, &m, 4};
  const Drafter lookup{RLM_SPEC_LOOKUP, nullptr, 6};
  for (uint32_t threads : {2u, 3u}) {
    for (const Drafter* d : {&self, &lookup}) {
      const Trace spec = generate(m, d, 64, prompt, n, noisy_sampling(5), threads);
      EXPECT_TRUE(spec == plain) << "threads " << threads << " mode " << d->mode << ": "
                                 << piece_summary(plain, spec);
    }
  }
}
