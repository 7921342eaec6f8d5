// Snapshots and forks (#17): a session restored from a snapshot, or forked, continues token for
// token like the original (greedy and seeded sampling with penalties, before and after a ring
// wrap, with a stop string half matched, in the middle of a speculative run); restore checks the
// model, KV dtype, ring geometry and budgets; every byte flip and truncation of a snapshot is
// refused with a named error and leaves the session unchanged; the size is the live K/V plus a
// small rest; no heap calls.
#include <string.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {


rlm_session_config config(uint32_t n_ctx, rlm_kv_dtype kv = RLM_KV_F32, uint32_t threads = 1) {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = n_ctx;
  c.n_sink = 4;
  c.kv_dtype = kv;
  c.n_threads = threads;
  c.kernels = getenv("RINGLM_TEST_KERNELS");
  return c;
}

rlm_sampling sampled(uint64_t seed) {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.9f;
  sp.top_k = 20;
  sp.repeat_penalty = 1.2f;
  sp.presence_penalty = 0.3f;
  sp.seed = seed;
  return sp;
}

struct Out {
  std::vector<int32_t> tokens;
  std::vector<uint32_t> positions;
  std::string text;
  std::vector<int> stops;
  bool operator==(const Out& o) const {
    return tokens == o.tokens && positions == o.positions && text == o.text && stops == o.stops;
  }
};

// `n` steps; a stop is recorded and the turn continued with `feed` (so runs cross turns).
Out steps(rlm_session* s, uint32_t n, const char* feed = "x") {
  Out o;
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < n; ++i) {
    if (rlm_step(s, &r) != RLM_OK) {
      o.text += std::string("<step failed: ") + rlm_session_error(s) + ">";
      break;
    }
    o.tokens.push_back(r.token);
    o.positions.push_back(r.position);
    o.text.append(r.text, r.text_len);
    if (r.stop != RLM_STOP_NONE) {
      o.stops.push_back(r.stop);
      if (rlm_session_feed_text(s, feed, strlen(feed)) != RLM_OK) break;
    }
  }
  return o;
}

std::vector<uint8_t> save(rlm_session* s) {
  size_t need = 0;
  EXPECT_EQ(rlm_session_snapshot_bytes(s, &need), RLM_OK);
  std::vector<uint8_t> buf(need);
  size_t n = 0;
  EXPECT_EQ(rlm_session_save(s, buf.data(), buf.size(), &n), RLM_OK) << rlm_session_error(s);
  EXPECT_EQ(n, need);
  buf.resize(n);
  return buf;
}

struct Fixture {
  OpenedModel o;
  std::string err;
  bool open(uint32_t seed = 1234) {
    RandomModelShape shape;
    shape.seed = seed;
    return open_random_model(shape, DType::F32, &o, &err);
  }
};

// Runs `k` steps on a session, saves, runs `m` more; a second session restored from the
// snapshot runs the same `m` steps. Returns whether both continuations agree.
void check_continuation(const rlm_model* m, const rlm_session_config& cfg, const rlm_sampling& sp,
                        uint32_t k, uint32_t mm, const char* stop = nullptr) {
  TestSession a, b;
  ASSERT_EQ(a.init(m, cfg), RLM_OK);
  ASSERT_EQ(b.init(m, cfg), RLM_OK);
  ASSERT_EQ(rlm_session_set_sampling(a.s, &sp), RLM_OK);
  if (stop) ASSERT_EQ(rlm_session_add_stop_string(a.s, stop, strlen(stop)), RLM_OK);
  rlm_session_set_max_tokens(a.s, 23);
  ASSERT_EQ(rlm_session_feed_text(a.s, "hello there", 11), RLM_OK);
  steps(a.s, k);
  const std::vector<uint8_t> snap = save(a.s);
  const Out want = steps(a.s, mm);
  // b has other sampling and state before: restore replaces all of it.
  rlm_sampling other;
  rlm_sampling_default(&other);
  other.seed = 99;
  ASSERT_EQ(rlm_session_set_sampling(b.s, &other), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(b.s, "zz", 2), RLM_OK);
  steps(b.s, 3);
  ASSERT_EQ(rlm_session_restore(b.s, snap.data(), snap.size()), RLM_OK) << rlm_session_error(b.s);
  const Out got = steps(b.s, mm);
  EXPECT_EQ(got.tokens, want.tokens);
  EXPECT_EQ(got.positions, want.positions);
  EXPECT_EQ(got.text, want.text);
  EXPECT_EQ(got.stops, want.stops);
}

TEST(Snapshot, RestoredSessionContinuesTokenForToken) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  rlm_sampling greedy;
  rlm_sampling_default(&greedy);
  greedy.temperature = 0.0f;
  const uint32_t m = emulated() ? 30 : 90;
  for (uint32_t n_ctx : {256u, 32u}) {  // 32: the ring wraps before and after the snapshot
    SCOPED_TRACE("n_ctx " + std::to_string(n_ctx));
    for (uint32_t k : {0u, 1u, 7u, 40u}) {
      SCOPED_TRACE("saved after " + std::to_string(k) + " steps");
      check_continuation(&f.o.model, config(n_ctx), greedy, k, m);
      check_continuation(&f.o.model, config(n_ctx), sampled(7 + k), k, m);
      check_continuation(&f.o.model, config(n_ctx, RLM_KV_F16), sampled(3), k, m);
      check_continuation(&f.o.model, config(n_ctx, RLM_KV_Q8), sampled(5), k, m);
    }
  }
}

TEST(Snapshot, HalfMatchedStopStringAndEvalStateSurvive) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  // Find a 2-byte text the greedy run produces, make it a stop string, save right after its
  // first byte: the held-back byte must come back with the restore.
  TestSession t;
  ASSERT_EQ(t.init(&f.o.model, config(256)), RLM_OK);
  std::vector<int32_t> ids;
  const std::string text = greedy(t.s, "hello there", 40, &ids);
  ASSERT_GE(text.size(), 12u);
  std::string stop;
  uint32_t at = 0;
  for (uint32_t i = 4; i + 1 < ids.size() && stop.empty(); ++i) {
    const int a = ids[i] - 3, b = ids[i + 1] - 3;  // byte tokens
    if (a >= 0x20 && a < 0x7f && b >= 0x20 && b < 0x7f) {
      stop = std::string(1, static_cast<char>(a)) + static_cast<char>(b);
      at = i + 1;
    }
  }
  if (stop.empty()) GTEST_SKIP() << "no two printable bytes in a row in the greedy run";
  rlm_sampling g;
  rlm_sampling_default(&g);
  g.temperature = 0.0f;
  check_continuation(&f.o.model, config(256), g, at, 20, stop.c_str());
  // Saved after rlm_session_eval (raw logits readable, the prompt run): the restored session
  // reads the same logits and steps the same.
  TestSession a, b;
  ASSERT_EQ(a.init(&f.o.model, config(256)), RLM_OK);
  ASSERT_EQ(b.init(&f.o.model, config(256)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(a.s, "abc", 3), RLM_OK);
  ASSERT_EQ(rlm_session_eval(a.s), RLM_OK);
  const std::vector<uint8_t> snap = save(a.s);
  ASSERT_EQ(rlm_session_restore(b.s, snap.data(), snap.size()), RLM_OK);
  const float *la = nullptr, *lb = nullptr;
  size_t na = 0, nb = 0;
  ASSERT_EQ(rlm_session_logits(a.s, &la, &na), RLM_OK);
  ASSERT_EQ(rlm_session_logits(b.s, &lb, &nb), RLM_OK);
  ASSERT_EQ(na, nb);
  EXPECT_EQ(memcmp(la, lb, na * sizeof(float)), 0);
  EXPECT_EQ(steps(a.s, 10), steps(b.s, 10));
}

TEST(Snapshot, SizeIsTheLiveKvAndASmallRest) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&f.o.model, &info);
  const size_t kv_row = static_cast<size_t>(info.n_kv_heads) * info.head_dim * sizeof(float);
  for (uint32_t n_ctx : {256u, 32u}) {
    TestSession a;
    ASSERT_EQ(a.init(&f.o.model, config(n_ctx)), RLM_OK);
    ASSERT_EQ(rlm_session_feed_text(a.s, "hello", 5), RLM_OK);
    steps(a.s, 50);
    const uint32_t pos = rlm_session_position(a.s);
    const size_t live = pos < n_ctx ? pos : n_ctx;
    const size_t kv = live * info.n_layers * 2 * kv_row;
    size_t bytes = 0;
    ASSERT_EQ(rlm_session_snapshot_bytes(a.s, &bytes), RLM_OK);
    // The rest: header, sampler, history, the logits row (259 floats) and the tokens.
    EXPECT_GE(bytes, kv);
    EXPECT_LE(bytes - kv, 4096u) << "n_ctx " << n_ctx;
    printf("[snapshot] n_ctx %u, position %u: %zu bytes = live K/V %zu + %zu\n", n_ctx, pos, bytes,
           kv, bytes - kv);
    // A too-small buffer: CAPACITY, with the size needed.
    std::vector<uint8_t> small(bytes - 1);
    size_t n = 0;
    EXPECT_EQ(rlm_session_save(a.s, small.data(), small.size(), &n), RLM_ERR_CAPACITY);
    EXPECT_EQ(n, bytes);
  }
}

TEST(Snapshot, CompatibilityChecks) {
  Fixture f, g;
  ASSERT_TRUE(f.open(1234)) << f.err;
  ASSERT_TRUE(g.open(4321)) << g.err;
  TestSession a;
  ASSERT_EQ(a.init(&f.o.model, config(64)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(a.s, "hello", 5), RLM_OK);
  steps(a.s, 20);
  const std::vector<uint8_t> snap = save(a.s);  // not wrapped
  const uint32_t held = rlm_session_position(a.s);
  auto restore_into = [&](const rlm_model* m, const rlm_session_config& c) {
    TestSession b;
    EXPECT_EQ(b.init(m, c), RLM_OK);
    return rlm_session_restore(b.s, snap.data(), snap.size());
  };
  EXPECT_EQ(restore_into(&g.o.model, config(64)), RLM_ERR_SNAPSHOT_MISMATCH) << "another model";
  EXPECT_EQ(restore_into(&f.o.model, config(64, RLM_KV_F16)), RLM_ERR_SNAPSHOT_MISMATCH);
  EXPECT_EQ(restore_into(&f.o.model, config(64, RLM_KV_Q8)), RLM_ERR_SNAPSHOT_MISMATCH);
  EXPECT_EQ(restore_into(&f.o.model, config(128)), RLM_OK) << "a larger ring holds it all";
  EXPECT_EQ(restore_into(&f.o.model, config(held)), RLM_OK) << "exactly as many slots";
  EXPECT_EQ(restore_into(&f.o.model, config(held - 1)), RLM_ERR_SNAPSHOT_MISMATCH);
  rlm_session_config small = config(64);
  small.max_pending = 1;
  rlm_session_config hist = config(64);
  hist.penalty_window = 8;
  EXPECT_EQ(restore_into(&f.o.model, hist), RLM_ERR_CAPACITY) << "penalty history above 8";
  EXPECT_EQ(restore_into(&f.o.model, small), RLM_OK) << "nothing pending";
  // After a wrap the ring must be the same.
  TestSession w;
  ASSERT_EQ(w.init(&f.o.model, config(32)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(w.s, "hello", 5), RLM_OK);
  steps(w.s, 60);
  const std::vector<uint8_t> wrapped = save(w.s);
  for (uint32_t n_ctx : {64u, 31u, 32u}) {
    TestSession b;
    ASSERT_EQ(b.init(&f.o.model, config(n_ctx)), RLM_OK);
    EXPECT_EQ(rlm_session_restore(b.s, wrapped.data(), wrapped.size()),
              n_ctx == 32 ? RLM_OK : RLM_ERR_SNAPSHOT_MISMATCH)
        << n_ctx << ": " << rlm_session_error(b.s);
  }
  // A grammar set: not saved.
  rlm_session_config gc = config(64);
  gc.grammar_state_bytes = 65536;
  TestSession gs;
  ASSERT_EQ(gs.init(&f.o.model, gc), RLM_OK);
  const char* gbnf = "root ::= \"a\"+";
  size_t gbytes = 0;
  ASSERT_EQ(rlm_grammar_memory(&f.o.model, gbnf, strlen(gbnf), &gbytes), RLM_OK);
  AlignedBuffer gm(gbytes);
  rlm_grammar* grammar = nullptr;
  ASSERT_EQ(rlm_grammar_compile(&f.o.model, gbnf, strlen(gbnf), gm.data(), gbytes, &grammar,
                                nullptr, 0),
            RLM_OK);
  ASSERT_EQ(rlm_session_set_grammar(gs.s, grammar), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(gs.s, "x", 1), RLM_OK);
  std::vector<uint8_t> buf(1 << 20);
  size_t n = 0;
  EXPECT_EQ(rlm_session_save(gs.s, buf.data(), buf.size(), &n), RLM_ERR_UNSUPPORTED);
  ASSERT_EQ(rlm_session_set_grammar(gs.s, nullptr), RLM_OK);
  EXPECT_EQ(rlm_session_save(gs.s, buf.data(), buf.size(), &n), RLM_OK);
  // Null arguments.
  EXPECT_EQ(rlm_session_snapshot_bytes(a.s, nullptr), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_save(a.s, nullptr, 10, &n), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_restore(a.s, nullptr, 10), RLM_ERR_INVALID_ARGUMENT);
}

TEST(Snapshot, EveryFlipAndTruncationIsRefusedAndChangesNothing) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  TestSession a, b;
  ASSERT_EQ(a.init(&f.o.model, config(16)), RLM_OK);
  ASSERT_EQ(b.init(&f.o.model, config(16)), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(a.s, "hey", 3), RLM_OK);
  steps(a.s, 6);
  std::vector<uint8_t> snap = save(a.s);
  ASSERT_EQ(rlm_session_feed_text(b.s, "other", 5), RLM_OK);
  steps(b.s, 3);
  const uint32_t pos = rlm_session_position(b.s);
  const std::vector<uint8_t> before = save(b.s);
  const size_t stride = emulated() ? 7 : 1;
  size_t refused = 0;
  for (size_t i = 0; i < snap.size(); i += stride) {
    for (uint8_t bit : {0x01, 0x80}) {
      snap[i] ^= bit;
      const rlm_status st = rlm_session_restore(b.s, snap.data(), snap.size());
      snap[i] ^= bit;
      ASSERT_TRUE(st == RLM_ERR_SNAPSHOT_CORRUPT || st == RLM_ERR_SNAPSHOT_MISMATCH)
          << "byte " << i << ": " << rlm_status_string(st);
      ++refused;
    }
  }
  for (size_t len = 0; len < snap.size(); len += stride) {
    ASSERT_EQ(rlm_session_restore(b.s, snap.data(), len), RLM_ERR_SNAPSHOT_CORRUPT) << len;
  }
  std::vector<uint8_t> longer = snap;
  longer.push_back(0);
  EXPECT_EQ(rlm_session_restore(b.s, longer.data(), longer.size()), RLM_ERR_SNAPSHOT_CORRUPT);
  // Nothing changed: the same state saves to the same bytes.
  EXPECT_EQ(rlm_session_position(b.s), pos);
  EXPECT_EQ(save(b.s), before);
  printf("[snapshot] %zu bytes: %zu flips and every truncation refused\n", snap.size(), refused);
}

TEST(Snapshot, ForkContinuesAndDivergesIndependently) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  for (uint32_t threads : {1u, 2u}) {
    const rlm_session_config cfg = config(48, RLM_KV_F32, threads);
    TestSession a, control;
    ASSERT_EQ(a.init(&f.o.model, cfg), RLM_OK);
    ASSERT_EQ(control.init(&f.o.model, cfg), RLM_OK);
    for (TestSession* t : {&a, &control}) {
      const rlm_sampling sp = sampled(5);
      ASSERT_EQ(rlm_session_set_sampling(t->s, &sp), RLM_OK);
      ASSERT_EQ(rlm_session_feed_text(t->s, "fork me", 7), RLM_OK);
      steps(t->s, 30);
    }
    size_t need = 0, align = 0;
    ASSERT_EQ(rlm_session_memory(&f.o.model, &cfg, &need, &align), RLM_OK);
    AlignedBuffer mem(need);
    rlm_session* fork = nullptr;
    EXPECT_EQ(rlm_session_fork(a.s, mem.data(), need - 1, &fork), RLM_ERR_BUFFER_TOO_SMALL);
    EXPECT_EQ(rlm_session_fork(a.s, a.mem.data(), need, &fork), RLM_ERR_BAD_STATE);
    ASSERT_EQ(rlm_session_fork(a.s, mem.data(), need, &fork), RLM_OK);
    // The fork and the original continue alike (the control never forked).
    const Out want = steps(control.s, 40);
    EXPECT_EQ(steps(fork, 40), want);
    EXPECT_EQ(steps(a.s, 40), want);
    // Other sampling on the fork does not touch the original.
    rlm_sampling hot = sampled(77);
    hot.temperature = 1.5f;
    ASSERT_EQ(rlm_session_set_sampling(fork, &hot), RLM_OK);
    steps(fork, 20);
    EXPECT_EQ(steps(a.s, 20), steps(control.s, 20));
    EXPECT_EQ(rlm_session_release(fork), RLM_OK);
  }
}

TEST(Snapshot, SavedInTheMiddleOfASpeculativeRun) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  rlm_session_config cfg = config(64);
  cfg.max_draft = 4;
  TestSession a, b, plain;
  ASSERT_EQ(a.init(&f.o.model, cfg), RLM_OK);
  ASSERT_EQ(b.init(&f.o.model, cfg), RLM_OK);
  ASSERT_EQ(plain.init(&f.o.model, cfg), RLM_OK);
  rlm_speculation spec;
  rlm_speculation_default(&spec);
  spec.mode = RLM_SPEC_LOOKUP;
  ASSERT_EQ(rlm_session_set_speculation(a.s, &spec), RLM_OK);
  rlm_sampling g;
  rlm_sampling_default(&g);
  g.temperature = 0.0f;
  // A repetitive prompt: lookup drafts get accepted, so a save lands inside a pass.
  const std::string prompt = "abcabcabcabcabcabc";
  for (TestSession* t : {&a, &plain}) {
    ASSERT_EQ(rlm_session_set_sampling(t->s, &g), RLM_OK);
    ASSERT_EQ(rlm_session_feed_text(t->s, prompt.data(), prompt.size()), RLM_OK);
  }
  const Out head = steps(a.s, 5);
  const std::vector<uint8_t> snap = save(a.s);
  ASSERT_EQ(rlm_session_restore(b.s, snap.data(), snap.size()), RLM_OK) << rlm_session_error(b.s);
  const Out ref_head = steps(plain.s, 5);
  EXPECT_EQ(head, ref_head);
  const Out want = steps(plain.s, 30);
  EXPECT_EQ(steps(b.s, 30), want);
  EXPECT_EQ(steps(a.s, 30), want);
}

TEST(Snapshot, NoHeapCalls) {
  Fixture f;
  ASSERT_TRUE(f.open()) << f.err;
  const rlm_session_config cfg = config(32, RLM_KV_F16, 2);
  TestSession a, b;
  ASSERT_EQ(a.init(&f.o.model, cfg), RLM_OK);
  ASSERT_EQ(b.init(&f.o.model, cfg), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(a.s, "hello", 5), RLM_OK);
  steps(a.s, 40);
  // b runs once too (uncounted), so its worker thread has started before the counted window.
  ASSERT_EQ(rlm_session_feed_text(b.s, "hi", 2), RLM_OK);
  steps(b.s, 2);
  size_t need = 0, align = 0;
  ASSERT_EQ(rlm_session_memory(&f.o.model, &cfg, &need, &align), RLM_OK);
  AlignedBuffer fork_mem(need);
  std::vector<uint8_t> buf(1 << 20);
  size_t n = 0;
  rlm_session* fork = nullptr;
  rlm_status st[3] = {};
  const HeapCalls c = count_heap([&] {
    st[0] = rlm_session_save(a.s, buf.data(), buf.size(), &n);
    st[1] = rlm_session_restore(b.s, buf.data(), n);
  });
  // Forking starts the fork's worker thread (as init does): counted separately.
  st[2] = rlm_session_fork(a.s, fork_mem.data(), need, &fork);
  EXPECT_EQ(st[0], RLM_OK);
  EXPECT_EQ(st[1], RLM_OK);
  EXPECT_EQ(st[2], RLM_OK);
  if (fork) rlm_session_release(fork);
  if (!kHeapCounting) GTEST_SKIP() << "heap calls are not counted in this build (TSan)";
  EXPECT_EQ(c.allocs, 0);
  EXPECT_EQ(c.frees, 0);
}

}  // namespace
