// Concurrency (issue #7): one model, many sessions on many threads at once. Each session's
// tokens equal the same session run alone (different prompts and seeds per session), with
// n_threads 1 and 2 per session; sessions are created and released while others generate;
// model-level calls (tokenize, token text, info, lookups) run from every thread at once. Runs in
// the tsan suite (ThreadSanitizer must stay silent). docs/concurrency.md lists, per ABI
// function, what may be called concurrently.
#include <string.h>

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

// stories260K (q8) when ../shared is there, else a random model: the test needs no data.
void load(OpenedModel* out) {
  std::string err;
  if (open_stories260k(DType::Q8, out, &err)) return;
  ASSERT_EQ(err, "") << "stories260K is there but does not convert or open";
  RandomModelShape shape;
  shape.dim = 128;
  shape.n_heads = 4;
  shape.n_kv_heads = 2;
  shape.ffn_dim = 256;
  ASSERT_TRUE(open_random_model(shape, DType::Q8, out, &err)) << err;
}

// Starts all threads' work at the same moment.
class Gate {
 public:
  void wait() {
    std::unique_lock<std::mutex> l(mu_);
    cv_.wait(l, [this] { return open_; });
  }
  void open() {
    {
      std::lock_guard<std::mutex> l(mu_);
      open_ = true;
    }
    cv_.notify_all();
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool open_ = false;
};

struct Job {
  std::string prompt;
  uint64_t seed;
  float temperature;
  uint32_t n_threads;
  uint32_t n_ctx;
  uint32_t n_tokens;
  const char* stop;  // a stop string, or null
};

struct Result {
  std::vector<int32_t> tokens;
  std::string text;
  std::string error;
};

// One complete session lifetime: init, configure, generate, release. Touches nothing shared
// but the model.
Result run_job(const rlm_model* m, const Job& j) {
  Result out;
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_threads = j.n_threads;
  cfg.n_ctx = j.n_ctx;
  TestSession ts;
  if (ts.init(m, cfg) != RLM_OK) {
    out.error = "init failed";
    return out;
  }
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.seed = j.seed;
  sp.temperature = j.temperature;
  sp.repeat_penalty = 1.1f;
  rlm_session_set_sampling(ts.s, &sp);
  rlm_session_set_ignore_eos(ts.s, 1);
  if (j.stop) rlm_session_add_stop_string(ts.s, j.stop, strlen(j.stop));
  if (rlm_session_feed_text(ts.s, j.prompt.data(), j.prompt.size()) != RLM_OK) {
    out.error = "feed failed";
    rlm_session_release(ts.s);
    return out;
  }
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (uint32_t i = 0; i < j.n_tokens; ++i) {
    if (rlm_step(ts.s, &r) != RLM_OK) {
      out.error = rlm_session_error(ts.s);
      break;
    }
    out.tokens.push_back(r.token);
    out.text.append(r.text, r.text_len);
    if (r.stop != RLM_STOP_NONE) {
      // A stop string ended the turn: continue with a new one (the last token as input).
      const int32_t more = r.token;
      if (rlm_session_feed_tokens(ts.s, &more, 1) != RLM_OK) break;
    }
  }
  if (rlm_session_release(ts.s) != RLM_OK) out.error = "release failed";
  return out;
}

std::vector<Job> jobs(uint32_t n, uint32_t n_threads, uint32_t n_tokens) {
  const char* prompts[] = {"Once upon a time", "The little dog", "Lily and Tom went",
                           "One day, a big bird", "The sun was hot", "Ben had a red ball",
                           "In the park there", "Mom said"};
  std::vector<Job> out;
  for (uint32_t i = 0; i < n; ++i) {
    Job j;
    j.prompt = prompts[i % 8];
    j.seed = 1000 + 17 * i;
    j.temperature = i % 4 == 0 ? 0.0f : 0.7f + 0.1f * static_cast<float>(i % 3);
    j.n_threads = n_threads;
    j.n_ctx = i % 2 ? 64 : 0;  // half of them wrap a small ring
    j.n_tokens = n_tokens;
    j.stop = i % 3 == 0 ? "." : nullptr;
    out.push_back(j);
  }
  return out;
}

// Runs every job alone (the reference), then all at once on their own std::threads, and
// compares.
void concurrent_equals_alone(const rlm_model* m, const std::vector<Job>& js) {
  std::vector<Result> alone;
  for (const Job& j : js) alone.push_back(run_job(m, j));
  for (const Result& r : alone) ASSERT_EQ(r.error, "");
  for (int round = 0; round < 2; ++round) {
    std::vector<Result> together(js.size());
    Gate gate;
    std::vector<std::thread> threads;
    for (size_t i = 0; i < js.size(); ++i) {
      threads.emplace_back([&, i] {
        gate.wait();
        together[i] = run_job(m, js[i]);
      });
    }
    gate.open();
    for (std::thread& t : threads) t.join();
    for (size_t i = 0; i < js.size(); ++i) {
      EXPECT_EQ(together[i].error, "") << "session " << i;
      EXPECT_EQ(together[i].tokens, alone[i].tokens) << "session " << i << " round " << round;
      EXPECT_EQ(together[i].text, alone[i].text) << "session " << i;
    }
  }
}

// Fewer tokens under the sanitizers (the tsan suite runs these tests) and under qemu-user
// (cross suites: every token costs ~20x).
uint32_t token_budget(uint32_t normal) {
#if defined(__SANITIZE_THREAD__) || defined(__SANITIZE_ADDRESS__)
  return normal / 4;
#else
  return ringlm_bin() != ringlm_bin_path() ? normal / 4 : normal;
#endif
}

}  // namespace

TEST(Concurrency, EightSessionsOnEightThreadsEqualTheirSoloRuns) {
  OpenedModel md;
  load(&md);
  concurrent_equals_alone(&md.model, jobs(8, 1, token_budget(160)));
}

TEST(Concurrency, EightSessionsWithTwoThreadsEach) {
  OpenedModel md;
  load(&md);
  concurrent_equals_alone(&md.model, jobs(8, 2, token_budget(120)));
}

// Sessions start and end while others generate; the model serves them all.
TEST(Concurrency, SessionsComeAndGoWhileOthersGenerate) {
  OpenedModel md;
  load(&md);
  const std::vector<Job> js = jobs(6, 1, token_budget(40));
  std::vector<Result> alone;
  for (const Job& j : js) alone.push_back(run_job(&md.model, j));
  std::atomic<int> mismatches{0};
  Gate gate;
  std::vector<std::thread> threads;
  for (size_t i = 0; i < js.size(); ++i) {
    threads.emplace_back([&, i] {
      gate.wait();
      for (int k = 0; k < 4; ++k) {  // four lifetimes per thread, staggered by the job sizes
        Job j = js[(i + k) % js.size()];
        j.n_threads = (i + k) % 3 == 0 ? 2 : 1;
        const Result r = run_job(&md.model, j);
        if (r.tokens != alone[(i + k) % js.size()].tokens) ++mismatches;
      }
    });
  }
  gate.open();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(mismatches.load(), 0);
}

// Model-level calls are read-only: any number of threads may make them at once, alongside
// generating sessions.
TEST(Concurrency, ModelCallsFromManyThreadsAtOnce) {
  OpenedModel md;
  load(&md);
  rlm_model_info info;
  rlm_model_info_default(&info);
  ASSERT_EQ(rlm_model_get_info(&md.model, &info), RLM_OK);
  const std::string text = "Once upon a time, Lily's dog ran \xc3\xa9 fast!";
  const size_t scratch_bytes = rlm_tokenize_scratch_bytes(&md.model, text.size());
  std::vector<int32_t> want(text.size() * 3 + 8);
  size_t want_n = 0;
  {
    std::vector<uint64_t> scratch(scratch_bytes / 8 + 1);
    ASSERT_EQ(rlm_tokenize(&md.model, text.data(), text.size(), 1, want.data(), want.size(), &want_n,
                           scratch.data(), scratch_bytes),
              RLM_OK);
    want.resize(want_n);
  }
  std::atomic<int> failures{0};
  Gate gate;
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      gate.wait();
      std::vector<uint64_t> scratch(scratch_bytes / 8 + 1);
      std::vector<int32_t> ids(text.size() * 3 + 8);
      for (int k = 0; k < 50; ++k) {
        size_t n = 0;
        if (rlm_tokenize(&md.model, text.data(), text.size(), 1, ids.data(), ids.size(), &n,
                         scratch.data(), scratch_bytes) != RLM_OK ||
            std::vector<int32_t>(ids.begin(), ids.begin() + n) != want) {
          ++failures;
        }
        char piece[300];
        size_t pn = 0;
        for (uint32_t id = static_cast<uint32_t>(t); id < info.vocab_size; id += 8) {
          if (rlm_token_to_bytes(&md.model, static_cast<int32_t>(id), piece, sizeof piece, &pn) != RLM_OK) {
            ++failures;
          }
          rlm_token_is_end(&md.model, static_cast<int32_t>(id));
        }
        rlm_model_info mi;
        rlm_model_info_default(&mi);
        if (rlm_model_get_info(&md.model, &mi) != RLM_OK || mi.vocab_size != info.vocab_size) ++failures;
        int32_t id = -1;
        rlm_token_lookup(&md.model, "<s>", 3, &id);
        const char* tmpl = nullptr;
        size_t tl = 0;
        rlm_model_chat_template(&md.model, &tmpl, &tl);
        size_t need = 0;
        rlm_session_config cfg;
        rlm_session_config_default(&cfg);
        if (rlm_session_memory(&md.model, &cfg, &need, nullptr) != RLM_OK) ++failures;
      }
    });
  }
  // Two generating sessions alongside.
  const std::vector<Job> js = jobs(2, 2, token_budget(60));
  std::vector<Result> alone;
  for (const Job& j : js) alone.push_back(run_job(&md.model, j));
  std::vector<Result> during(js.size());
  for (size_t i = 0; i < js.size(); ++i) {
    threads.emplace_back([&, i] {
      gate.wait();
      during[i] = run_job(&md.model, js[i]);
    });
  }
  gate.open();
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  for (size_t i = 0; i < js.size(); ++i) EXPECT_EQ(during[i].tokens, alone[i].tokens);
}

// One session handed from thread to thread (never used by two at once): allowed, and the
// result equals a single-threaded run. The hand-off (join, then start) orders the accesses.
TEST(Concurrency, OneSessionMovesBetweenThreads) {
  OpenedModel md;
  load(&md);
  for (uint32_t n_threads : {1u, 2u}) {
    rlm_session_config cfg;
    rlm_session_config_default(&cfg);
    cfg.n_threads = n_threads;
    TestSession ref, moved;
    ASSERT_EQ(ref.init(&md.model, cfg), RLM_OK);
    std::vector<int32_t> want;
    greedy(ref.s, "Once upon a time", token_budget(80), &want);
    ASSERT_EQ(rlm_session_release(ref.s), RLM_OK);

    std::vector<int32_t> got;
    std::thread([&] { ASSERT_EQ(moved.init(&md.model, cfg), RLM_OK); }).join();
    std::thread([&] {
      rlm_sampling sp;
      rlm_sampling_default(&sp);
      sp.temperature = 0;
      rlm_session_set_sampling(moved.s, &sp);
      rlm_session_set_max_tokens(moved.s, token_budget(80));
      rlm_session_feed_text(moved.s, "Once upon a time", 16);
    }).join();
    bool done = false;
    while (!done) {
      std::thread([&] {
        rlm_step_result r;
        rlm_step_result_default(&r);
        for (int i = 0; i < 7 && !done; ++i) {
          if (rlm_step(moved.s, &r) != RLM_OK) {
            done = true;
            break;
          }
          got.push_back(r.token);
          done = r.stop != RLM_STOP_NONE;
        }
      }).join();
    }
    std::thread([&] { EXPECT_EQ(rlm_session_release(moved.s), RLM_OK); }).join();
    EXPECT_EQ(got, want) << n_threads << " threads per session";
  }
}
