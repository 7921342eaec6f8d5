// Beam search (#16): width 1 with length_penalty 0 is greedy decoding token for token; on a
// 4- and an 8-token vocabulary a search of width V^(L-1) over L steps finds exactly the best
// sequences a brute-force enumeration of every sequence finds (scores and order); on stories260K
// the best beam's log-probability is at least greedy's for every test prompt; stop strings, end
// tokens and max tokens finish hypotheses; the session is left as it was; results and errors;
// threads change nothing; no heap call during a search.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {


rlm_session_config beam_config(uint32_t n_ctx, uint32_t max_beams, uint32_t max_tokens,
                               uint32_t threads = 1) {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = n_ctx;
  c.max_beams = max_beams;
  c.max_beam_tokens = max_tokens;
  c.max_logit_rows = 64;
  c.n_threads = threads;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

struct Hyp {
  std::vector<int32_t> tokens;
  double logprob = 0, score = 0;
  rlm_stop_reason stop = RLM_STOP_NONE;
};

// Runs a search; empty on failure (status in *st).
std::vector<Hyp> search(rlm_session* s, uint32_t width, uint32_t max_tokens, float alpha,
                        uint32_t n_best, rlm_status* st = nullptr) {
  rlm_beam_params p;
  rlm_beam_params_default(&p);
  p.n_beams = width;
  p.max_tokens = max_tokens;
  p.length_penalty = alpha;
  p.n_best = n_best;
  std::vector<std::vector<int32_t>> bufs(n_best, std::vector<int32_t>(max_tokens));
  std::vector<rlm_beam_result> res(n_best);
  for (uint32_t i = 0; i < n_best; ++i) {
    rlm_beam_result_default(&res[i]);
    res[i].tokens = bufs[i].data();
    res[i].capacity = max_tokens;
  }
  uint32_t n = 0;
  const rlm_status r = rlm_session_beam_search(s, &p, res.data(), &n);
  if (st) *st = r;
  std::vector<Hyp> out;
  if (r != RLM_OK) return out;
  for (uint32_t i = 0; i < n; ++i) {
    Hyp h;
    h.tokens.assign(res[i].tokens, res[i].tokens + res[i].n_tokens);
    h.logprob = res[i].logprob;
    h.score = res[i].score;
    h.stop = res[i].stop;
    out.push_back(h);
  }
  return out;
}

// log p(tokens) after `prefix` from a fresh sequence (rlm_session_score).
double sequence_logprob(rlm_session* s, const std::vector<int32_t>& prefix,
                        const std::vector<int32_t>& tokens) {
  rlm_session_reset(s);
  EXPECT_EQ(rlm_session_feed_tokens(s, prefix.data(), prefix.size()), RLM_OK);
  double sum = 0;
  EXPECT_EQ(rlm_session_score(s, tokens.data(), tokens.size(), nullptr, nullptr, &sum), RLM_OK)
      << rlm_session_error(s);
  return sum;
}

// A random model whose vocabulary is <unk>, <s>, </s> and `v - 3` one-letter pieces.
bool small_vocab_model(uint32_t v, uint32_t seed, OpenedModel* out, std::string* err) {
  using namespace ringlm::internal;
  RandomModelShape shape;
  shape.seed = seed;
  shape.max_context = 64;
  conv::ModelData md = random_model_data(shape);
  conv::TokenizerData& t = md.tokenizer;
  const size_t keep = v;
  t.pieces.resize(keep);
  t.types.resize(keep);
  t.scores.resize(keep);
  for (size_t i = 3; i < keep; ++i) {
    t.pieces[i] = std::string(1, static_cast<char>('a' + i - 3));
    t.types[i] = fb::TokenType::Normal;
  }
  t.byte_fallback = false;
  md.arch.vocab_size = v;
  for (auto& td : md.tensors) {
    if (td.role == fb::TensorRole::TokenEmbedding || td.role == fb::TensorRole::Output) {
      td.shape[0] = v;
      // Somewhat larger weights than random_model_data's: distributions neither flat nor so
      // sharp that sequences tie at probability 1.
      auto base = random_weights(td.shape, false, seed * 31u + 7u);
      td.load_f32 = [base](std::vector<float>* o, std::string* e) {
        if (!base(o, e)) return false;
        for (float& x : *o) x *= 2.0f;
        return true;
      };
    }
  }
  std::vector<uint8_t> bytes;
  if (!conv::build_model_bytes(md, fb::DType::F32, &bytes, err)) return false;
  out->bytes.assign(bytes.data(), bytes.size());
  return out->open(err);
}

TEST(Beam, WidthOneIsGreedyTokenForToken) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  TestSession ts;
  ASSERT_EQ(ts.init(&o.model, beam_config(256, 4, 64)), RLM_OK);
  for (const char* prompt : {"hello", "The quick brown fox", "0123"}) {
    SCOPED_TRACE(prompt);
    rlm_session_reset(ts.s);
    std::vector<int32_t> greedy_ids;
    rlm_stop_reason gstop = RLM_STOP_NONE;
    greedy(ts.s, prompt, 40, &greedy_ids, &gstop);
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, prompt, strlen(prompt)), RLM_OK);
    const uint32_t pos = rlm_session_position(ts.s);
    const std::vector<Hyp> h = search(ts.s, 1, 40, 0.0f, 1);
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].tokens, greedy_ids);
    EXPECT_EQ(h[0].stop, gstop);
    // The sequence is left as it was (the prompt was run: its position is where it ends).
    EXPECT_GE(rlm_session_position(ts.s), pos);
    // Its log-probability is the greedy sequence's, scored independently.
    std::vector<int32_t> prefix(1, 1);
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, prompt, strlen(prompt)), RLM_OK);
    double sum = 0;
    ASSERT_EQ(rlm_session_score(ts.s, greedy_ids.data(), greedy_ids.size(), nullptr, nullptr, &sum),
              RLM_OK);
    EXPECT_NEAR(h[0].logprob, sum, 1e-4 * (1 + fabs(sum)));
  }
}

// Every sequence of up to L tokens that ends at its first end token or at L tokens, best first.
std::vector<Hyp> brute_force(rlm_session* s, uint32_t V, uint32_t L, float alpha) {
  std::vector<Hyp> all;
  std::vector<int32_t> seq;
  std::function<void()> rec = [&]() {
    for (uint32_t t = 0; t < V; ++t) {
      seq.push_back(static_cast<int32_t>(t));
      const bool end = t == 2;  // </s>
      if (end || seq.size() == L) {
        Hyp h;
        h.tokens = seq;
        h.logprob = sequence_logprob(s, {1}, seq);
        h.score = alpha == 0 ? h.logprob : h.logprob / pow(static_cast<double>(seq.size()), alpha);
        h.stop = end ? RLM_STOP_END_TOKEN : RLM_STOP_MAX_TOKENS;
        all.push_back(h);
      } else {
        rec();
      }
      seq.pop_back();
    }
  };
  rec();
  std::stable_sort(all.begin(), all.end(), [](const Hyp& a, const Hyp& b) { return a.score > b.score; });
  return all;
}

TEST(Beam, WideSearchEqualsBruteForceOnATinyVocabulary) {
  struct Case {
    uint32_t V, L;
  };
  for (const Case c : {Case{4, 3}, Case{8, 2}}) {
    for (float alpha : {0.0f, 1.0f}) {
      for (uint32_t seed : {11u, 12u, 13u}) {
        SCOPED_TRACE("V " + std::to_string(c.V) + " L " + std::to_string(c.L) + " alpha " +
                     std::to_string(alpha) + " seed " + std::to_string(seed));
        OpenedModel o;
        std::string err;
        ASSERT_TRUE(small_vocab_model(c.V, seed, &o, &err)) << err;
        TestSession ts;
        const uint32_t width = static_cast<uint32_t>(pow(c.V, c.L - 1));
        rlm_session_config cfg = beam_config(64, width, c.L);
        cfg.max_logit_bias = 0;
        char why[256] = "";
        rlm_session_config_check(&o.model, &cfg, why, sizeof why);
        ASSERT_EQ(ts.init(&o.model, cfg), RLM_OK) << why;
        const std::vector<Hyp> ref = brute_force(ts.s, c.V, c.L, alpha);
        rlm_session_reset(ts.s);
        const int32_t bos = 1;
        ASSERT_EQ(rlm_session_feed_tokens(ts.s, &bos, 1), RLM_OK);
        const std::vector<Hyp> got = search(ts.s, width, c.L, alpha, width);
        ASSERT_EQ(got.size(), std::min<size_t>(width, ref.size()));
        size_t distinct = 0;  // ranks whose sequence is decided (no tie)
        for (size_t i = 0; i < got.size(); ++i) {
          // Sequences whose scores tie within rounding may come in either order.
          const bool tie = (i > 0 && ref[i - 1].score - ref[i].score < 1e-4) ||
                           (i + 1 < ref.size() && ref[i].score - ref[i + 1].score < 1e-4);
          if (!tie) EXPECT_EQ(got[i].tokens, ref[i].tokens) << "rank " << i << " score " << ref[i].score;
          distinct += !tie;
          EXPECT_NEAR(got[i].logprob, ref[i].logprob, 1e-4) << "rank " << i;
          EXPECT_NEAR(got[i].score, ref[i].score, 1e-4) << "rank " << i;
          EXPECT_EQ(got[i].stop, ref[i].stop) << "rank " << i;
        }
        EXPECT_GE(distinct, got.size() / 2) << "too many ties for the order to mean anything";
        EXPECT_FALSE(ref[0].score - ref[1].score < 1e-4) << "the best sequence must be decided";
        EXPECT_EQ(got[0].tokens, ref[0].tokens);
      }
    }
  }
}

TEST(Beam, StoriesBestBeamIsAtLeastGreedy) {
  OpenedModel o;
  std::string err;
  if (!open_stories260k(DType::F32, &o, &err)) {
    if (err.empty()) GTEST_SKIP() << "../shared/models/stories260K is absent";
    FAIL() << err;
  }
  TestSession ts;
  ASSERT_EQ(ts.init(&o.model, beam_config(512, 4, 48)), RLM_OK);
  const uint32_t n = emulated() ? 12 : 48;
  int better = 0;
  for (const char* prompt : {"Once upon a time", "Lily and Tom went to the park", "One day, a little",
                             "The dog was sad because", "Sue had a red ball."}) {
    SCOPED_TRACE(prompt);
    rlm_session_reset(ts.s);
    std::vector<int32_t> g;
    greedy(ts.s, prompt, n, &g);
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, prompt, strlen(prompt)), RLM_OK);
    double greedy_sum = 0;
    ASSERT_EQ(rlm_session_score(ts.s, g.data(), g.size(), nullptr, nullptr, &greedy_sum), RLM_OK);
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, prompt, strlen(prompt)), RLM_OK);
    const std::vector<Hyp> h = search(ts.s, 4, n, 0.0f, 2);
    ASSERT_EQ(h.size(), 2u);
    EXPECT_GE(h[0].logprob, greedy_sum - 1e-4);
    EXPECT_GE(h[0].score, h[1].score);
    better += h[0].logprob > greedy_sum + 1e-3;
    // The result's own log-probability, scored independently.
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, prompt, strlen(prompt)), RLM_OK);
    double sum = 0;
    ASSERT_EQ(rlm_session_score(ts.s, h[0].tokens.data(), h[0].tokens.size(), nullptr, nullptr, &sum),
              RLM_OK);
    EXPECT_NEAR(h[0].logprob, sum, 1e-3);
    printf("[beam] %-32s greedy %8.4f (%zu tokens)  beam-4 %8.4f (%zu tokens)\n", prompt,
           greedy_sum, g.size(), h[0].logprob, h[0].tokens.size());
  }
  printf("[beam] beam-4 beat greedy on %d of 5 prompts\n", better);
}

TEST(Beam, StopStringsEndTokensAndTheSessionAfterwards) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  TestSession ts;
  ASSERT_EQ(ts.init(&o.model, beam_config(256, 4, 32)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(ts.s, "abc", 3), RLM_OK);
  const std::vector<Hyp> free_run = search(ts.s, 4, 32, 1.0f, 4);
  ASSERT_EQ(free_run.size(), 4u);
  // Make a printable byte the best run produces a stop string / end token: its hypotheses end
  // there.
  int32_t tok = -1;
  for (size_t i = 1; i < free_run[0].tokens.size() && tok < 0; ++i) {
    const int32_t t = free_run[0].tokens[i];
    if (t >= 3 + 0x20 && t < 3 + 0x7f) tok = t;
  }
  if (tok < 0) GTEST_SKIP() << "the best run has no printable byte after its first token";
  const char byte = static_cast<char>(tok - 3);
  rlm_session_reset(ts.s);
  ASSERT_EQ(rlm_session_add_stop_string(ts.s, &byte, 1), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(ts.s, "abc", 3), RLM_OK);
  std::vector<Hyp> h = search(ts.s, 4, 32, 1.0f, 4);
  ASSERT_FALSE(h.empty());
  for (const Hyp& x : h) {
    const auto it = std::find(x.tokens.begin(), x.tokens.end(), tok);
    if (x.stop == RLM_STOP_STOP_STRING) {
      EXPECT_EQ(x.tokens.back(), tok);
      EXPECT_EQ(it, x.tokens.end() - 1) << "the stop string ends the sequence at its first use";
    } else {
      EXPECT_EQ(it, x.tokens.end()) << "no hypothesis runs past the stop string";
    }
  }
  ASSERT_EQ(rlm_session_clear_stops(ts.s), RLM_OK);
  ASSERT_EQ(rlm_session_add_stop_token(ts.s, tok), RLM_OK);
  rlm_session_reset(ts.s);
  ASSERT_EQ(rlm_session_feed_text(ts.s, "abc", 3), RLM_OK);
  h = search(ts.s, 4, 32, 1.0f, 4);
  bool any_end = false;
  for (const Hyp& x : h) {
    if (x.stop == RLM_STOP_END_TOKEN) {
      any_end = true;
      EXPECT_EQ(x.tokens.back(), tok);
    }
    EXPECT_EQ(std::find(x.tokens.begin(), x.tokens.end() - 1, tok), x.tokens.end() - 1);
  }
  EXPECT_TRUE(any_end);
  // The session continues from the prompt: feeding the best result and stepping works, and a
  // second search from the same prompt gives the same result.
  const uint32_t pos = rlm_session_position(ts.s);
  std::vector<Hyp> again = search(ts.s, 4, 32, 1.0f, 4);
  ASSERT_EQ(again.size(), h.size());
  EXPECT_EQ(again[0].tokens, h[0].tokens);
  EXPECT_EQ(rlm_session_position(ts.s), pos);
  ASSERT_EQ(rlm_session_clear_stops(ts.s), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, h[0].tokens.data(), h[0].tokens.size()), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  EXPECT_EQ(rlm_step(ts.s, &r), RLM_OK) << rlm_session_error(ts.s);
  EXPECT_EQ(r.position, pos + h[0].tokens.size());
}

TEST(Beam, ThreadsAndKvF16ChangeNothingButRounding) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  std::vector<Hyp> ref;
  for (uint32_t threads : {1u, 2u}) {
    TestSession ts;
    ASSERT_EQ(ts.init(&o.model, beam_config(256, 8, 24, threads)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_text(ts.s, "hello world", 11), RLM_OK);
    const std::vector<Hyp> h = search(ts.s, 8, 24, 1.0f, 3);
    ASSERT_EQ(h.size(), 3u);
    if (ref.empty()) {
      ref = h;
    } else {
      for (size_t i = 0; i < h.size(); ++i) {
        EXPECT_EQ(h[i].tokens, ref[i].tokens);
        EXPECT_EQ(h[i].logprob, ref[i].logprob);
      }
    }
  }
  // f16 and q8 rings: beams store their rows in the ring's dtype too; the width-1 search is
  // still greedy.
  for (rlm_kv_dtype kv : {RLM_KV_F16, RLM_KV_Q8}) {
    rlm_session_config c = beam_config(256, 2, 24);
    c.kv_dtype = kv;
    TestSession ts;
    ASSERT_EQ(ts.init(&o.model, c), RLM_OK);
    std::vector<int32_t> g;
    greedy(ts.s, "hello world", 24, &g);
    rlm_session_reset(ts.s);
    ASSERT_EQ(rlm_session_feed_text(ts.s, "hello world", 11), RLM_OK);
    const std::vector<Hyp> h = search(ts.s, 1, 24, 0.0f, 1);
    ASSERT_EQ(h.size(), 1u);
    EXPECT_EQ(h[0].tokens, g) << "kv dtype " << kv;
  }
}

TEST(Beam, ErrorsAreNamed) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  {
    TestSession off;
    ASSERT_EQ(off.init(&o.model, beam_config(256, 0, 0)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_text(off.s, "a", 1), RLM_OK);
    rlm_status st = RLM_OK;
    search(off.s, 1, 4, 0.0f, 1, &st);
    EXPECT_EQ(st, RLM_ERR_BAD_STATE);
    EXPECT_NE(strstr(rlm_session_error(off.s), "max_beams 0"), nullptr);
  }
  TestSession ts;
  ASSERT_EQ(ts.init(&o.model, beam_config(64, 4, 32)), RLM_OK);
  rlm_status st = RLM_OK;
  search(ts.s, 2, 8, 0.0f, 1, &st);
  EXPECT_EQ(st, RLM_ERR_BAD_STATE) << "empty sequence";
  ASSERT_EQ(rlm_session_feed_text(ts.s, "abcdefghij", 10), RLM_OK);
  search(ts.s, 5, 8, 0.0f, 1, &st);
  EXPECT_EQ(st, RLM_ERR_INVALID_ARGUMENT) << "n_beams above max_beams";
  search(ts.s, 2, 33, 0.0f, 1, &st);
  EXPECT_EQ(st, RLM_ERR_INVALID_ARGUMENT) << "max_tokens above max_beam_tokens";
  search(ts.s, 2, 8, 0.0f, 3, &st);
  EXPECT_EQ(st, RLM_ERR_INVALID_ARGUMENT) << "n_best above n_beams";
  search(ts.s, 2, 8, NAN, 1, &st);
  EXPECT_EQ(st, RLM_ERR_INVALID_ARGUMENT) << "length_penalty NaN";
  search(ts.s, 2, 32, 0.0f, 1, &st);  // 10 + 1 (BOS) + 32 tokens > 64 - ... fits; 60 does not
  EXPECT_EQ(st, RLM_OK) << rlm_session_error(ts.s);
  std::vector<int32_t> more(30, 5);
  ASSERT_EQ(rlm_session_feed_tokens(ts.s, more.data(), more.size()), RLM_OK);
  search(ts.s, 2, 32, 0.0f, 1, &st);
  EXPECT_EQ(st, RLM_ERR_CAPACITY);
  EXPECT_NE(strstr(rlm_session_error(ts.s), "within the ring"), nullptr) << rlm_session_error(ts.s);
  // Struct sizes and a buffer too small for the result.
  rlm_session_reset(ts.s);
  ASSERT_EQ(rlm_session_feed_text(ts.s, "ab", 2), RLM_OK);
  rlm_beam_params p;
  rlm_beam_params_default(&p);
  p.n_beams = 2;
  p.max_tokens = 8;
  rlm_beam_result r;
  rlm_beam_result_default(&r);
  int32_t buf[2];
  r.tokens = buf;
  r.capacity = 2;
  uint32_t n = 99;
  p.struct_size = 4;
  EXPECT_EQ(rlm_session_beam_search(ts.s, &p, &r, &n), RLM_ERR_STRUCT_SIZE);
  p.struct_size = sizeof p;
  r.struct_size = 4;
  EXPECT_EQ(rlm_session_beam_search(ts.s, &p, &r, &n), RLM_ERR_STRUCT_SIZE);
  r.struct_size = sizeof r;
  p.length_penalty = 0.0f;
  // ignore_eos: every hypothesis runs to max_tokens, so 2 tokens of room is too little.
  ASSERT_EQ(rlm_session_set_ignore_eos(ts.s, 1), RLM_OK);
  EXPECT_EQ(rlm_session_beam_search(ts.s, &p, &r, &n), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(n, 0u);
  EXPECT_NE(strstr(rlm_session_error(ts.s), "capacity 2"), nullptr) << rlm_session_error(ts.s);
  // Config limits.
  size_t bytes = 0, align = 0;
  rlm_session_config c = beam_config(64, 17, 8);
  EXPECT_EQ(rlm_session_memory(&o.model, &c, &bytes, &align), RLM_ERR_INVALID_ARGUMENT);
  c = beam_config(64, 4, 5000);
  EXPECT_EQ(rlm_session_memory(&o.model, &c, &bytes, &align), RLM_ERR_INVALID_ARGUMENT);
  // An older config (ending before max_beams) is accepted and means no beams.
  c = beam_config(64, 4, 8);
  c.struct_size = offsetof(rlm_session_config, max_beams);
  EXPECT_EQ(rlm_session_memory(&o.model, &c, &bytes, &align), RLM_OK);
  size_t with_beams = 0;
  c.struct_size = sizeof c;
  EXPECT_EQ(rlm_session_memory(&o.model, &c, &with_beams, &align), RLM_OK);
  EXPECT_GT(with_beams, bytes) << "beams take memory only when configured";
}

TEST(Beam, NoHeapDuringASearch) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  TestSession ts;
  ASSERT_EQ(ts.init(&o.model, beam_config(256, 4, 32, 2)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(ts.s, "hello", 5), RLM_OK);
  rlm_beam_params p;
  rlm_beam_params_default(&p);
  rlm_beam_result r[2];
  int32_t bufs[2][32];
  for (int i = 0; i < 2; ++i) {
    rlm_beam_result_default(&r[i]);
    r[i].tokens = bufs[i];
    r[i].capacity = 32;
  }
  p.n_beams = 4;
  p.n_best = 2;
  p.max_tokens = 32;
  uint32_t n = 0;
  // A first search (uncounted): the worker thread init started may still be starting up, and
  // its start (the sanitizers' thread setup) must not land in the counted window.
  ASSERT_EQ(rlm_session_beam_search(ts.s, &p, r, &n), RLM_OK) << rlm_session_error(ts.s);
  rlm_status st = RLM_OK;
  const HeapCalls c = count_heap([&] { st = rlm_session_beam_search(ts.s, &p, r, &n); });
  ASSERT_EQ(st, RLM_OK) << rlm_session_error(ts.s);
  EXPECT_EQ(n, 2u);
  if (!kHeapCounting) GTEST_SKIP() << "heap calls are not counted in this build (TSan)";
  EXPECT_EQ(c.allocs, 0);
  EXPECT_EQ(c.frees, 0);
}

}  // namespace
