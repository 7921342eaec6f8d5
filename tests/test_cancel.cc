// rlm_session_cancel (#17): from another thread during a long prefill, the running call returns
// RLM_ERR_CANCELLED with the chunks that ran committed and the rest pending; the next call
// finishes the prompt with logits bit-identical to an uncancelled run; a cancel while nothing runs
// changes nothing; scoring and beam search stop between passes and leave a valid session.
// (How fast a cancel returns is measured by `ringlm bench --cancel`, not asserted here.)
#include <string.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {


// Under qemu and the sanitizers the forward pass is 10-50x slower: shorter prompts there.
bool short_runs() { return light(); }

RandomModelShape wide_shape() {
  RandomModelShape s;
  s.dim = 256;
  s.n_layers = 4;
  s.n_heads = 8;
  s.n_kv_heads = 4;
  s.ffn_dim = 512;
  s.max_context = 4096;
  // Under qemu every float operation is emulated (50-150x slower than native): a quarter of the
  // multiply-adds there. Still several 64-token chunks per prompt, so a cancel lands between
  // passes as on the host.
  if (emulated()) {
    s.dim = 128;
    s.n_layers = 2;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.ffn_dim = 256;
  }
  return s;
}

rlm_session_config config(uint32_t threads) {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = 4096;
  c.n_batch = 64;
  c.max_pending = 4096;
  c.n_threads = threads;
  c.max_beams = 4;
  c.max_beam_tokens = 256;
  c.max_logit_rows = 64;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

std::vector<int32_t> prompt(uint32_t n) {
  std::vector<int32_t> t(n);
  for (uint32_t i = 0; i < n; ++i) t[i] = 3 + static_cast<int32_t>((i * 37 + i / 7) % 256);
  return t;
}

// Runs `call` on this thread while another thread cancels the session after `delay`; returns
// the call's status.
template <class F>
rlm_status call_and_cancel(rlm_session* s, std::chrono::microseconds delay, F&& call) {
  std::atomic<bool> started{false};
  std::thread canceller([&] {
    while (!started.load()) std::this_thread::yield();
    std::this_thread::sleep_for(delay);
    rlm_session_cancel(s);
  });
  started = true;
  const rlm_status st = call();
  canceller.join();
  return st;
}

TEST(Cancel, PrefillStopsCommitsWholeChunksAndResumesExactly) {
  OpenedModel o;
  std::string err;
  ASSERT_TRUE(open_random_model(wide_shape(), DType::F32, &o, &err)) << err;
  const uint32_t n = short_runs() ? 256 : 2048;
  const std::vector<int32_t> toks = prompt(n);
  for (uint32_t threads : {1u, 2u}) {
    SCOPED_TRACE(threads);
    TestSession ref;
    ASSERT_EQ(ref.init(&o.model, config(threads)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(ref.s, toks.data(), n), RLM_OK);
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(rlm_session_eval(ref.s), RLM_OK);
    const auto full = std::chrono::duration_cast<std::chrono::microseconds>(
        std::chrono::steady_clock::now() - t0);
    const float* want = nullptr;
    size_t vocab = 0;
    ASSERT_EQ(rlm_session_logits(ref.s, &want, &vocab), RLM_OK);

    // Cancel about halfway through (then earlier) until one lands inside the prefill.
    bool landed = false;
    for (int attempt = 0; attempt < 8 && !landed; ++attempt) {
      TestSession s;
      ASSERT_EQ(s.init(&o.model, config(threads)), RLM_OK);
      ASSERT_EQ(rlm_session_feed_tokens(s.s, toks.data(), n), RLM_OK);
      const rlm_status st = call_and_cancel(s.s, full / (2 << attempt),
                                            [&] { return rlm_session_eval(s.s); });
      if (st == RLM_OK) continue;  // finished before the cancel came
      ASSERT_EQ(st, RLM_ERR_CANCELLED) << rlm_session_error(s.s);
      landed = true;
      const uint32_t pos = rlm_session_position(s.s);
      EXPECT_LT(pos, n);
      EXPECT_EQ(pos % 64, 0u) << "only whole chunks are committed";
      const float* l = nullptr;
      size_t nl = 0;
      EXPECT_EQ(rlm_session_logits(s.s, &l, &nl), pos == 0 ? RLM_ERR_BAD_STATE : RLM_ERR_BAD_STATE);
      // The next call runs the rest; the result is the uncancelled one, bit for bit.
      ASSERT_EQ(rlm_session_eval(s.s), RLM_OK) << rlm_session_error(s.s);
      EXPECT_EQ(rlm_session_position(s.s), n);
      ASSERT_EQ(rlm_session_logits(s.s, &l, &nl), RLM_OK);
      ASSERT_EQ(nl, vocab);
      EXPECT_EQ(memcmp(l, want, vocab * sizeof(float)), 0);
      printf("[cancel] %u thread(s): cancelled at position %u of %u, resumed exactly\n", threads,
             pos, n);
    }
    EXPECT_TRUE(landed) << "no cancel landed inside a " << n << "-token prefill";
  }
}

TEST(Cancel, WithNothingRunningChangesNothing) {
  OpenedModel o;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(open_random_model(shape, DType::F32, &o, &err)) << err;
  TestSession a, b;
  ASSERT_EQ(a.init(&o.model, config(1)), RLM_OK);
  ASSERT_EQ(b.init(&o.model, config(1)), RLM_OK);
  EXPECT_EQ(rlm_session_cancel(a.s), RLM_OK);
  EXPECT_EQ(rlm_session_cancel(a.s), RLM_OK);
  std::vector<int32_t> ta, tb;
  greedy(a.s, "hello", 20, &ta);
  greedy(b.s, "hello", 20, &tb);
  EXPECT_EQ(ta, tb);
  EXPECT_EQ(rlm_session_cancel(nullptr), RLM_ERR_INVALID_ARGUMENT);
}

TEST(Cancel, ScoringAndBeamSearchStopBetweenPasses) {
  OpenedModel o;
  std::string err;
  ASSERT_TRUE(open_random_model(wide_shape(), DType::F32, &o, &err)) << err;
  const uint32_t n = short_runs() ? 256 : 2048;
  const std::vector<int32_t> toks = prompt(n);
  bool score_landed = false, beam_landed = false;
  for (int attempt = 0; attempt < 8 && !(score_landed && beam_landed); ++attempt) {
    TestSession s;
    ASSERT_EQ(s.init(&o.model, config(1)), RLM_OK);
    const int32_t bos = 1;
    ASSERT_EQ(rlm_session_feed_tokens(s.s, &bos, 1), RLM_OK);
    std::vector<float> lp(n, 1.0f);
    double sum = 0;
    if (!score_landed) {
      const rlm_status st = call_and_cancel(s.s, std::chrono::microseconds(500 << attempt), [&] {
        return rlm_session_score(s.s, toks.data(), n, lp.data(), nullptr, &sum);
      });
      if (st == RLM_ERR_CANCELLED) {
        score_landed = true;
        // Cancelled while BOS ran (nothing scored), or between scoring passes.
        const uint32_t pos = rlm_session_position(s.s);
        const uint32_t scored = pos > 0 ? pos - 1 : 0;
        EXPECT_LT(scored, n);
        EXPECT_EQ(scored % 64, 0u);
        double total = 0;
        for (uint32_t i = 0; i < scored; ++i) total += lp[i];
        EXPECT_NEAR(total, sum, 1e-3 * (1 + fabs(sum)));
        // The session continues: scoring the rest gives what one call would have.
        double rest = 0;
        ASSERT_EQ(rlm_session_score(s.s, toks.data() + scored, n - scored, nullptr, nullptr, &rest),
                  RLM_OK);
        TestSession whole;
        ASSERT_EQ(whole.init(&o.model, config(1)), RLM_OK);
        ASSERT_EQ(rlm_session_feed_tokens(whole.s, &bos, 1), RLM_OK);
        double all = 0;
        ASSERT_EQ(rlm_session_score(whole.s, toks.data(), n, nullptr, nullptr, &all), RLM_OK);
        EXPECT_NEAR(sum + rest, all, 1e-3 * (1 + fabs(all)));
      } else {
        ASSERT_EQ(st, RLM_OK);
      }
    }
    if (!beam_landed) {
      rlm_session_reset(s.s);
      ASSERT_EQ(rlm_session_feed_tokens(s.s, toks.data(), 64), RLM_OK);
      ASSERT_EQ(rlm_session_eval(s.s), RLM_OK);
      const uint32_t pos = rlm_session_position(s.s);
      rlm_beam_params p;
      rlm_beam_params_default(&p);
      p.max_tokens = short_runs() ? 64 : 256;  // the search that completes runs to the end
      p.length_penalty = 0.0f;
      rlm_session_set_ignore_eos(s.s, 1);
      std::vector<int32_t> out(256);
      rlm_beam_result r;
      rlm_beam_result_default(&r);
      r.tokens = out.data();
      r.capacity = 256;
      uint32_t got = 0;
      const rlm_status st = call_and_cancel(s.s, std::chrono::microseconds(500 << attempt),
                                            [&] { return rlm_session_beam_search(s.s, &p, &r, &got); });
      if (st == RLM_ERR_CANCELLED) {
        beam_landed = true;
        EXPECT_EQ(got, 0u);
        EXPECT_EQ(rlm_session_position(s.s), pos) << "the sequence is unchanged";
        // And the session works: a search without a cancel completes.
        EXPECT_EQ(rlm_session_beam_search(s.s, &p, &r, &got), RLM_OK);
        EXPECT_EQ(got, 1u);
      } else {
        ASSERT_EQ(st, RLM_OK);
      }
    }
  }
  EXPECT_TRUE(score_landed);
  EXPECT_TRUE(beam_landed);
}

}  // namespace
