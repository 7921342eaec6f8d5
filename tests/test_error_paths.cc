// Error paths of the C ABI (issue #7): every function given NULL, wrong sizes, wrong
// struct_size, a session in the wrong state, out-of-range tokens, returns its named status; a
// failed call leaves the session as it was (position, pending input, logits, sampling, stops);
// init that fails (one byte short, misaligned, bad config) never leaves a session behind, and
// the same memory then serves a successful init. Random-weight models: no shared data needed.
#include <math.h>
#include <string.h>

#include <limits>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/readers.h"
#include "fixtures.h"
#include "quant.h"
// session.h (internal) needs the project root on the include path (fuzz/CMakeLists.txt adds it).
#if __has_include("platform/threads.h")
#include "session.h"
#define RINGLM_TEST_HAVE_SESSION_IMPL 1
#endif

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

class ErrorPaths : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string err;
    shape_.max_context = 64;
    ASSERT_TRUE(random_model(shape_, DType::F32, &bytes_, &err)) << err;
    ASSERT_EQ(rlm_model_open(bytes_.data(), bytes_.size(), &model_), RLM_OK)
        << rlm_model_error(&model_);
    rlm_model_info info;
    rlm_model_info_default(&info);
    ASSERT_EQ(rlm_model_get_info(&model_, &info), RLM_OK);
    vocab_ = static_cast<int32_t>(info.vocab_size);
    rlm_session_config_default(&cfg_);
    cfg_.n_ctx = 16;
    cfg_.n_sink = 2;
  }
  // A fresh session on cfg_, greedy sampling.
  void init(TestSession* ts) {
    ASSERT_EQ(ts->init(&model_, cfg_), RLM_OK);
    rlm_sampling sp;
    rlm_sampling_default(&sp);
    sp.temperature = 0;
    ASSERT_EQ(rlm_session_set_sampling(ts->s, &sp), RLM_OK);
  }
  // The session's logits; empty when it has none yet (RLM_ERR_BAD_STATE: nothing run since init,
  // reset or rewind), so "no logits" compares equal to itself and unequal to any logits.
  static std::vector<float> logits(rlm_session* s) {
    const float* l = nullptr;
    size_t n = 0;
    const rlm_status st = rlm_session_logits(s, &l, &n);
    EXPECT_TRUE(st == RLM_OK || st == RLM_ERR_BAD_STATE) << rlm_status_string(st);
    return st == RLM_OK ? std::vector<float>(l, l + n) : std::vector<float>();
  }
  static bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() &&
           (a.empty() || memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
  }
  static rlm_step_result step(rlm_session* s) {
    rlm_step_result r;
    rlm_step_result_default(&r);
    EXPECT_EQ(rlm_step(s, &r), RLM_OK) << rlm_session_error(s);
    return r;
  }
  RandomModelShape shape_;
  AlignedBuffer bytes_;
  rlm_model model_;
  int32_t vocab_ = 0;
  rlm_session_config cfg_;
};

// ---- NULL, wrong sizes, wrong struct_size ------------------------------------------------------

TEST_F(ErrorPaths, StatusStringsAreNamedAndNeverNull) {
  EXPECT_STREQ(rlm_status_string(RLM_OK), "RLM_OK");
  EXPECT_STREQ(rlm_status_string(RLM_ERR_BAD_STATE), "RLM_ERR_BAD_STATE");
  for (int v : {-1, 13, 19, 31, 98, 100, 12345}) {
    const char* s = rlm_status_string(static_cast<rlm_status>(v));
    ASSERT_NE(s, nullptr) << v;
  }
}

TEST_F(ErrorPaths, ModelFunctionsRejectNullAndUnopenedStorage) {
  rlm_model m;
  EXPECT_EQ(rlm_model_open(nullptr, 100, &m), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_STRNE(rlm_model_error(&m), "");
  EXPECT_EQ(rlm_model_open(bytes_.data(), bytes_.size(), nullptr), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_STREQ(rlm_model_error(nullptr), "");
  EXPECT_EQ(rlm_model_open(bytes_.data() + 1, bytes_.size() - 1, &m), RLM_ERR_MODEL_ALIGNMENT);
  EXPECT_EQ(rlm_model_open(bytes_.data(), 4, &m), RLM_ERR_MODEL_TRUNCATED);
  const rlm_status half = rlm_model_open(bytes_.data(), bytes_.size() / 2, &m);
  EXPECT_TRUE(half == RLM_ERR_MODEL_BOUNDS || half == RLM_ERR_MODEL_TRUNCATED) << rlm_status_string(half);

  rlm_model_info_default(nullptr);  // no crash
  rlm_model_info info;
  rlm_model_info_default(&info);
  EXPECT_EQ(rlm_model_get_info(nullptr, &info), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_model_get_info(&model_, nullptr), RLM_ERR_INVALID_ARGUMENT);
  // After a failed open the storage is not a model for any call.
  EXPECT_EQ(rlm_model_get_info(&m, &info), RLM_ERR_INVALID_ARGUMENT);
  rlm_model zero;
  memset(&zero, 0, sizeof zero);
  EXPECT_EQ(rlm_model_get_info(&zero, &info), RLM_ERR_INVALID_ARGUMENT);
  info.struct_size = sizeof info - 4;
  EXPECT_EQ(rlm_model_get_info(&model_, &info), RLM_ERR_STRUCT_SIZE);
  info.struct_size = sizeof info + 4;
  EXPECT_EQ(rlm_model_get_info(&model_, &info), RLM_ERR_STRUCT_SIZE);

  EXPECT_EQ(rlm_tokenize_scratch_bytes(nullptr, 10), 0u);
  EXPECT_EQ(rlm_tokenize_scratch_bytes(&zero, 10), 0u);
  EXPECT_EQ(rlm_token_is_end(nullptr, 2), 0);
  EXPECT_EQ(rlm_token_is_end(&zero, 2), 0);
  EXPECT_EQ(rlm_token_is_end(&model_, 2), 1);
  EXPECT_EQ(rlm_token_is_end(&model_, -1), 0);
  EXPECT_EQ(rlm_token_is_end(&model_, vocab_), 0);

  const char* t = nullptr;
  size_t len = 0;
  EXPECT_EQ(rlm_model_chat_template(nullptr, &t, &len), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_model_chat_template(&model_, nullptr, &len), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_model_chat_template(&model_, &t, nullptr), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_model_chat_template(&model_, &t, &len), RLM_ERR_NOT_FOUND);  // none in this model
}

TEST_F(ErrorPaths, TokenizerFunctionsRejectBadArguments) {
  const char text[] = "hello";
  const size_t len = 5;
  const size_t need = rlm_tokenize_scratch_bytes(&model_, len);
  ASSERT_GT(need, 0u);
  std::vector<uint64_t> scratch(need / 8 + 2);
  int32_t toks[16];
  size_t n = 99;
  EXPECT_EQ(rlm_tokenize(nullptr, text, len, 0, toks, 16, &n, scratch.data(), need),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_tokenize(&model_, nullptr, len, 0, toks, 16, &n, scratch.data(), need),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 0, nullptr, 16, &n, scratch.data(), need),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 0, toks, 16, nullptr, scratch.data(), need),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 0, toks, 16, &n,
                         reinterpret_cast<uint8_t*>(scratch.data()) + 4, need),
            RLM_ERR_MISALIGNED);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 0, toks, 16, &n, scratch.data(), need - 1),
            RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 0, toks, 16, &n, nullptr, 0),
            RLM_ERR_BUFFER_TOO_SMALL);
  // Capacity: 5 byte tokens + BOS need 6; n_out says so.
  n = 0;
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 1, toks, 5, &n, scratch.data(), need), RLM_ERR_CAPACITY);
  EXPECT_EQ(n, 6u);
  EXPECT_EQ(rlm_tokenize(&model_, text, len, 1, toks, 6, &n, scratch.data(), need), RLM_OK);
  EXPECT_EQ(n, 6u);
  // Empty text: NULL allowed with len 0.
  EXPECT_EQ(rlm_tokenize(&model_, nullptr, 0, 0, nullptr, 0, &n, scratch.data(), need), RLM_OK);
  EXPECT_EQ(n, 0u);

  char out[8];
  size_t m = 0;
  EXPECT_EQ(rlm_token_to_bytes(nullptr, 3, out, 8, &m), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_to_bytes(&model_, 3, nullptr, 8, &m), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_to_bytes(&model_, 3, out, 8, nullptr), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_to_bytes(&model_, -1, out, 8, &m), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_token_to_bytes(&model_, vocab_, out, 8, &m), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_token_to_bytes(&model_, std::numeric_limits<int32_t>::min(), out, 8, &m),
            RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_token_to_bytes(&model_, 3 + 'a', out, 0, &m), RLM_ERR_CAPACITY);
  EXPECT_EQ(m, 1u);  // the bytes needed
  EXPECT_EQ(rlm_token_to_bytes(&model_, 3 + 'a', nullptr, 0, &m), RLM_ERR_CAPACITY);
  EXPECT_EQ(rlm_token_to_bytes(&model_, 3 + 'a', out, 1, &m), RLM_OK);
  EXPECT_EQ(out[0], 'a');

  int32_t id = -5;
  EXPECT_EQ(rlm_token_lookup(nullptr, "<s>", 3, &id), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_lookup(&model_, nullptr, 3, &id), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_lookup(&model_, "<s>", 3, nullptr), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_token_lookup(&model_, "<nope>", 6, &id), RLM_ERR_NOT_FOUND);
  EXPECT_EQ(id, -5);  // untouched on failure
  EXPECT_EQ(rlm_token_lookup(&model_, "<s>", 3, &id), RLM_OK);
  EXPECT_EQ(id, 1);
}

TEST_F(ErrorPaths, SessionMemoryAndInitRejectBadArguments) {
  rlm_session_config_default(nullptr);  // no crash
  size_t need = 0, align = 0;
  EXPECT_EQ(rlm_session_memory(nullptr, &cfg_, &need, &align), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_memory(&model_, nullptr, &need, &align), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_memory(&model_, &cfg_, nullptr, &align), RLM_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(rlm_session_memory(&model_, &cfg_, &need, nullptr), RLM_OK);  // alignment optional
  ASSERT_EQ(rlm_session_memory(&model_, &cfg_, &need, &align), RLM_OK);
  EXPECT_EQ(align, 64u);

  AlignedBuffer mem(need + 64);
  rlm_session* s = reinterpret_cast<rlm_session*>(0x10);
  EXPECT_EQ(rlm_session_init(nullptr, &cfg_, mem.data(), need, &s), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_init(&model_, nullptr, mem.data(), need, &s), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_init(&model_, &cfg_, nullptr, need, &s), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_init(&model_, &cfg_, mem.data(), need, nullptr), RLM_ERR_INVALID_ARGUMENT);
  s = reinterpret_cast<rlm_session*>(0x10);
  EXPECT_EQ(rlm_session_init(&model_, &cfg_, mem.data() + 8, need, &s), RLM_ERR_MISALIGNED);
  EXPECT_EQ(s, nullptr);

  // struct_size: smaller, larger, zero (an older header's size, ending before `backend`, is
  // accepted: test_xnnpack).
  for (uint32_t size : {0u, 4u, static_cast<uint32_t>(sizeof cfg_) - 1,
                        static_cast<uint32_t>(sizeof cfg_) + 8}) {
    rlm_session_config c = cfg_;
    c.struct_size = size;
    EXPECT_EQ(rlm_session_memory(&model_, &c, &need, &align), RLM_ERR_STRUCT_SIZE) << size;
    s = reinterpret_cast<rlm_session*>(0x10);
    EXPECT_EQ(rlm_session_init(&model_, &c, mem.data(), mem.size(), &s), RLM_ERR_STRUCT_SIZE);
    EXPECT_EQ(s, nullptr);
  }

  // Every field out of range: INVALID_ARGUMENT from both (UNSUPPORTED for unknown kernels).
  struct Bad {
    const char* what;
    void (*set)(rlm_session_config*);
    rlm_status want;
  };
  const Bad bad[] = {
      {"n_ctx 1", [](rlm_session_config* c) { c->n_ctx = 1; }, RLM_ERR_INVALID_ARGUMENT},
      {"n_ctx huge", [](rlm_session_config* c) { c->n_ctx = (1u << 24) + 1; }, RLM_ERR_INVALID_ARGUMENT},
      {"n_sink = n_ctx", [](rlm_session_config* c) { c->n_sink = c->n_ctx; }, RLM_ERR_INVALID_ARGUMENT},
      {"kv_dtype 3", [](rlm_session_config* c) { c->kv_dtype = static_cast<rlm_kv_dtype>(3); },
       RLM_ERR_INVALID_ARGUMENT},
      {"kv_dtype -1", [](rlm_session_config* c) { c->kv_dtype = static_cast<rlm_kv_dtype>(-1); },
       RLM_ERR_INVALID_ARGUMENT},
      {"n_threads 0", [](rlm_session_config* c) { c->n_threads = 0; }, RLM_ERR_INVALID_ARGUMENT},
      {"n_threads 65", [](rlm_session_config* c) { c->n_threads = 65; }, RLM_ERR_INVALID_ARGUMENT},
      {"n_batch 0", [](rlm_session_config* c) { c->n_batch = 0; }, RLM_ERR_INVALID_ARGUMENT},
      {"n_batch 4097", [](rlm_session_config* c) { c->n_batch = 4097; }, RLM_ERR_INVALID_ARGUMENT},
      {"max_pending 0", [](rlm_session_config* c) { c->max_pending = 0; }, RLM_ERR_INVALID_ARGUMENT},
      {"max_text_bytes", [](rlm_session_config* c) { c->max_text_bytes = (1u << 26) + 1; },
       RLM_ERR_INVALID_ARGUMENT},
      {"stop_string_bytes", [](rlm_session_config* c) { c->stop_string_bytes = (1u << 20) + 1; },
       RLM_ERR_INVALID_ARGUMENT},
      {"max_stop_strings", [](rlm_session_config* c) { c->max_stop_strings = 1025; },
       RLM_ERR_INVALID_ARGUMENT},
      {"max_stop_tokens", [](rlm_session_config* c) { c->max_stop_tokens = 1025; },
       RLM_ERR_INVALID_ARGUMENT},
      {"penalty_window", [](rlm_session_config* c) { c->penalty_window = (1u << 16) + 1; },
       RLM_ERR_INVALID_ARGUMENT},
      {"max_logit_bias > vocab", [](rlm_session_config* c) { c->max_logit_bias = 100000; },
       RLM_ERR_INVALID_ARGUMENT},
      {"kernels", [](rlm_session_config* c) { c->kernels = "no-such-isa"; }, RLM_ERR_UNSUPPORTED},
  };
  for (const Bad& b : bad) {
    rlm_session_config c = cfg_;
    b.set(&c);
    EXPECT_EQ(rlm_session_memory(&model_, &c, &need, &align), b.want) << b.what;
    s = reinterpret_cast<rlm_session*>(0x10);
    EXPECT_EQ(rlm_session_init(&model_, &c, mem.data(), mem.size(), &s), b.want) << b.what;
    EXPECT_EQ(s, nullptr) << b.what;
  }
}

TEST_F(ErrorPaths, EverySessionFunctionRejectsNullAndReleasedHandles) {
  TestSession ts;
  init(&ts);
  rlm_step_result r;
  rlm_step_result_default(&r);
  rlm_step_result_default(nullptr);  // no crash
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  rlm_sampling_default(nullptr);  // no crash
  const int32_t tok = 5;
  const float* l = nullptr;
  size_t n = 0;
  rlm_session_info info;
  rlm_session_info_default(&info);
  // NULL, memory that never held a session, then a released handle (the memory still holds the
  // old session's header): INVALID_ARGUMENT for the first two, BAD_STATE for the released one
  // (issue #12; it was INVALID_ARGUMENT), whatever the other arguments are.
  AlignedBuffer never(ts.bytes);
  memset(never.data(), 0, never.size());
  rlm_session* const garbage = reinterpret_cast<rlm_session*>(never.data());
  rlm_session* const released = ts.s;
  ASSERT_EQ(rlm_session_release(released), RLM_OK);
  for (rlm_session* s : {static_cast<rlm_session*>(nullptr), garbage, released}) {
    const rlm_status want = s == released ? RLM_ERR_BAD_STATE : RLM_ERR_INVALID_ARGUMENT;
    EXPECT_EQ(rlm_session_reset(s), want);
    EXPECT_EQ(rlm_session_feed_text(s, "a", 1), want);
    EXPECT_EQ(rlm_session_feed_text(s, nullptr, 1), want);
    EXPECT_EQ(rlm_session_feed_text_ex(s, "a", 1, 0), want);
    EXPECT_EQ(rlm_session_feed_tokens(s, &tok, 1), want);
    EXPECT_EQ(rlm_session_set_sampling(s, &sp), want);
    EXPECT_EQ(rlm_session_set_sampling(s, nullptr), want);
    EXPECT_EQ(rlm_session_add_stop_token(s, 2), want);
    EXPECT_EQ(rlm_session_add_stop_string(s, "x", 1), want);
    EXPECT_EQ(rlm_session_clear_stops(s), want);
    EXPECT_EQ(rlm_session_set_max_tokens(s, 3), want);
    EXPECT_EQ(rlm_session_set_ignore_eos(s, 1), want);
    EXPECT_EQ(rlm_step(s, &r), want);
    EXPECT_EQ(rlm_step(s, nullptr), want);
    EXPECT_EQ(rlm_session_eval(s), want);
    EXPECT_EQ(rlm_session_logits(s, &l, &n), want);
    EXPECT_EQ(rlm_session_get_info(s, &info), want);
    EXPECT_EQ(rlm_session_position(s), 0u);
    EXPECT_EQ(rlm_session_rewind(s, 0), want);
    if (s == released) {
      // Releasing again is harmless, and the message names the state.
      EXPECT_EQ(rlm_session_release(s), RLM_OK);
      EXPECT_NE(std::string(rlm_session_error(s)).find("released"), std::string::npos)
          << rlm_session_error(s);
    } else {
      EXPECT_EQ(rlm_session_release(s), RLM_ERR_INVALID_ARGUMENT);
      EXPECT_STREQ(rlm_session_error(s), "");
    }
  }
  // The released memory initialises again.
  rlm_session* again = nullptr;
  ASSERT_EQ(rlm_session_init(&model_, &cfg_, ts.mem.data(), ts.bytes, &again), RLM_OK);
  EXPECT_EQ(again, released);
  EXPECT_EQ(rlm_session_reset(again), RLM_OK);
  ts.s = again;  // released by ~TestSession
}

TEST_F(ErrorPaths, SessionArgumentsAreChecked) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  EXPECT_EQ(rlm_session_feed_text(s, nullptr, 3), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_feed_text(s, nullptr, 0), RLM_OK);  // empty text
  EXPECT_EQ(rlm_session_feed_tokens(s, nullptr, 2), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_feed_tokens(s, nullptr, 0), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  EXPECT_EQ(rlm_step(s, nullptr), RLM_ERR_INVALID_ARGUMENT);
  for (uint32_t size : {0u, 4u, static_cast<uint32_t>(sizeof r) + 4}) {
    r.struct_size = size;
    EXPECT_EQ(rlm_step(s, &r), RLM_ERR_STRUCT_SIZE) << size;
  }
  const float* l = nullptr;
  size_t n = 0;
  EXPECT_EQ(rlm_session_logits(s, nullptr, &n), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_logits(s, &l, nullptr), RLM_ERR_INVALID_ARGUMENT);
  // Nothing has run yet: no logits (issue #12; they were uninitialised memory with RLM_OK).
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);
  const int32_t one = 3;
  ASSERT_EQ(rlm_session_feed_tokens(s, &one, 1), RLM_OK);
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);
  EXPECT_EQ(n, static_cast<size_t>(vocab_));

  // Stop strings: NULL / empty, invalid UTF-8, count and byte budgets.
  EXPECT_EQ(rlm_session_add_stop_string(s, nullptr, 1), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_add_stop_string(s, "x", 0), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_add_stop_string(s, "\xff", 1), RLM_ERR_INVALID_UTF8);
  EXPECT_EQ(rlm_session_add_stop_string(s, "\xc3", 1), RLM_ERR_INVALID_UTF8);  // truncated
  EXPECT_EQ(rlm_session_add_stop_string(s, "\xed\xa0\x80", 3), RLM_ERR_INVALID_UTF8);  // surrogate
  EXPECT_EQ(rlm_session_add_stop_string(s, "\xc0\xaf", 2), RLM_ERR_INVALID_UTF8);  // overlong
  const std::string big(cfg_.stop_string_bytes + 1, 'z');
  EXPECT_EQ(rlm_session_add_stop_string(s, big.data(), big.size()), RLM_ERR_CAPACITY);
  for (uint32_t i = 0; i < cfg_.max_stop_strings; ++i) {
    ASSERT_EQ(rlm_session_add_stop_string(s, "ab", 2), RLM_OK) << i;
  }
  EXPECT_EQ(rlm_session_add_stop_string(s, "ab", 2), RLM_ERR_CAPACITY);
  ASSERT_EQ(rlm_session_clear_stops(s), RLM_OK);
  EXPECT_EQ(rlm_session_add_stop_string(s, "ab", 2), RLM_OK);

  // Stop tokens: range, then capacity.
  EXPECT_EQ(rlm_session_add_stop_token(s, -1), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_session_add_stop_token(s, vocab_), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_EQ(rlm_session_add_stop_token(s, std::numeric_limits<int32_t>::min()),
            RLM_ERR_TOKEN_OUT_OF_RANGE);
  for (uint32_t i = 0; i < cfg_.max_stop_tokens; ++i) ASSERT_EQ(rlm_session_add_stop_token(s, 7), RLM_OK);
  EXPECT_EQ(rlm_session_add_stop_token(s, 7), RLM_ERR_CAPACITY);
}

TEST_F(ErrorPaths, SamplingValuesOutOfRangeAreNamed) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  EXPECT_EQ(rlm_session_set_sampling(s, nullptr), RLM_ERR_INVALID_ARGUMENT);
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  for (uint32_t size : {0u, static_cast<uint32_t>(sizeof sp) - 4, static_cast<uint32_t>(sizeof sp) + 4}) {
    rlm_sampling b = sp;
    b.struct_size = size;
    EXPECT_EQ(rlm_session_set_sampling(s, &b), RLM_ERR_STRUCT_SIZE) << size;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  rlm_logit_bias bias[20];
  for (auto& b : bias) b = {3, 1.0f};
  struct Bad {
    const char* what;
    rlm_sampling s;
  };
  std::vector<Bad> bad;
  auto add = [&](const char* what, void (*f)(rlm_sampling*, rlm_logit_bias*, float, float)) {
    rlm_sampling b = sp;
    f(&b, bias, nan, inf);
    bad.push_back({what, b});
  };
  add("temperature -1", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->temperature = -1; });
  add("temperature NaN", [](rlm_sampling* p, rlm_logit_bias*, float n, float) { p->temperature = n; });
  add("temperature inf", [](rlm_sampling* p, rlm_logit_bias*, float, float i) { p->temperature = i; });
  add("top_k -1", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->top_k = -1; });
  add("top_p 0", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->top_p = 0; });
  add("top_p 1.5", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->top_p = 1.5f; });
  add("top_p NaN", [](rlm_sampling* p, rlm_logit_bias*, float n, float) { p->top_p = n; });
  add("min_p -0.1", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->min_p = -0.1f; });
  add("min_p 1.1", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->min_p = 1.1f; });
  add("min_p NaN", [](rlm_sampling* p, rlm_logit_bias*, float n, float) { p->min_p = n; });
  add("repeat_penalty 0", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->repeat_penalty = 0; });
  add("repeat_penalty inf", [](rlm_sampling* p, rlm_logit_bias*, float, float i) { p->repeat_penalty = i; });
  add("frequency inf", [](rlm_sampling* p, rlm_logit_bias*, float, float i) { p->frequency_penalty = i; });
  add("presence NaN", [](rlm_sampling* p, rlm_logit_bias*, float n, float) { p->presence_penalty = n; });
  add("penalty_last_n -1", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->penalty_last_n = -1; });
  add("penalty_last_n > window", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->penalty_last_n = 257; });
  add("n_logit_bias > max", [](rlm_sampling* p, rlm_logit_bias* b, float, float) {
    p->logit_bias = b;
    p->n_logit_bias = 17;
  });
  add("logit_bias NULL", [](rlm_sampling* p, rlm_logit_bias*, float, float) { p->n_logit_bias = 1; });
  add("bias token -1", [](rlm_sampling* p, rlm_logit_bias* b, float, float) {
    static rlm_logit_bias one[1] = {{-1, 1.0f}};
    (void)b;
    p->logit_bias = one;
    p->n_logit_bias = 1;
  });
  add("bias token vocab", [](rlm_sampling* p, rlm_logit_bias*, float, float) {
    static rlm_logit_bias one[1] = {{259, 1.0f}};
    p->logit_bias = one;
    p->n_logit_bias = 1;
  });
  add("bias NaN", [](rlm_sampling* p, rlm_logit_bias*, float n, float) {
    static rlm_logit_bias one[1] = {{5, 0.0f}};
    one[0].bias = n;
    p->logit_bias = one;
    p->n_logit_bias = 1;
  });
  for (const Bad& b : bad) {
    EXPECT_EQ(rlm_session_set_sampling(s, &b.s), RLM_ERR_INVALID_ARGUMENT) << b.what;
    EXPECT_STRNE(rlm_session_error(s), "") << b.what;
  }
  // ±inf bias is allowed (a ban / a force).
  rlm_logit_bias ban[2] = {{5, -inf}, {6, inf}};
  rlm_sampling ok = sp;
  ok.logit_bias = ban;
  ok.n_logit_bias = 2;
  EXPECT_EQ(rlm_session_set_sampling(s, &ok), RLM_OK);
}

// ---- Wrong state ---------------------------------------------------------------------------------

TEST_F(ErrorPaths, StepBeforeFeedAndAfterAStopIsBadState) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  rlm_step_result r;
  rlm_step_result_default(&r);
  EXPECT_EQ(rlm_step(s, &r), RLM_ERR_BAD_STATE);
  EXPECT_STRNE(rlm_session_error(s), "");
  EXPECT_EQ(r.token, -1);  // the result is untouched
  // eval with nothing pending is a no-op, and still nothing to sample from.
  EXPECT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), 0u);
  EXPECT_EQ(rlm_step(s, &r), RLM_ERR_BAD_STATE);
  // An empty feed is not input either.
  ASSERT_EQ(rlm_session_feed_tokens(s, nullptr, 0), RLM_OK);
  EXPECT_EQ(rlm_step(s, &r), RLM_ERR_BAD_STATE);

  // A turn that stops (max tokens 2), then steps without new input.
  ASSERT_EQ(rlm_session_set_max_tokens(s, 2), RLM_OK);
  const int32_t prompt[3] = {10, 20, 30};
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 3), RLM_OK);
  EXPECT_EQ(step(s).stop, RLM_STOP_NONE);
  const rlm_step_result last = step(s);
  EXPECT_EQ(last.stop, RLM_STOP_MAX_TOKENS);
  const uint32_t pos = rlm_session_position(s);
  const std::vector<float> before = logits(s);
  for (int i = 0; i < 3; ++i) {
    rlm_step_result again;
    rlm_step_result_default(&again);
    EXPECT_EQ(rlm_step(s, &again), RLM_ERR_BAD_STATE);
    EXPECT_EQ(again.token, -1);
  }
  EXPECT_EQ(rlm_session_position(s), pos);
  EXPECT_TRUE(same_bits(before, logits(s)));
  // eval after a stop runs the last sampled token; the turn is still over.
  EXPECT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), pos + 1);
  rlm_step_result again;
  rlm_step_result_default(&again);
  EXPECT_EQ(rlm_step(s, &again), RLM_ERR_BAD_STATE);
  // New input continues.
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 1), RLM_OK);
  EXPECT_EQ(rlm_step(s, &again), RLM_OK);
}

TEST_F(ErrorPaths, RewindBeyondThePositionAndAfterTheWrap) {
  TestSession ts;
  init(&ts);  // 16 slots, 2 sinks
  rlm_session* s = ts.s;
  EXPECT_EQ(rlm_session_rewind(s, 0), RLM_OK);
  EXPECT_EQ(rlm_session_rewind(s, 1), RLM_ERR_INVALID_ARGUMENT);
  std::vector<int32_t> prompt;
  for (int i = 0; i < 10; ++i) prompt.push_back(3 + 'a' + i);
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt.data(), prompt.size()), RLM_OK);
  EXPECT_EQ(rlm_session_rewind(s, 1), RLM_ERR_INVALID_ARGUMENT);  // pending is not position
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  ASSERT_EQ(rlm_session_position(s), 10u);
  EXPECT_EQ(rlm_session_rewind(s, 11), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_rewind(s, UINT32_MAX), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(rlm_session_position(s), 10u);
  EXPECT_EQ(rlm_session_rewind(s, 4), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), 4u);
  // Fill past the 16 slots: positions 0..1 stay (sinks), the rest of the early ones are gone.
  ASSERT_EQ(rlm_session_set_ignore_eos(s, 1), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt.data(), prompt.size()), RLM_OK);
  while (rlm_session_position(s) < 20) step(s);
  const uint32_t pos = rlm_session_position(s);
  const std::vector<float> before = logits(s);
  for (uint32_t target : {0u, 1u, 5u, pos - 1}) {
    EXPECT_EQ(rlm_session_rewind(s, target), RLM_ERR_REWIND) << target;
    EXPECT_EQ(rlm_session_position(s), pos);
  }
  EXPECT_EQ(rlm_session_rewind(s, pos + 1), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(same_bits(before, logits(s)));
  // A failed rewind left the turn running: the next step continues from the same state as in
  // a session that never tried.
  const rlm_step_result next = step(s);
  EXPECT_EQ(next.position, pos + 1);  // the pending sampled token ran
  // Rewinding to the current position is allowed (drops the pending sampled token).
  EXPECT_EQ(rlm_session_rewind(s, rlm_session_position(s)), RLM_OK);
  // reset always works and allows rewinds again.
  ASSERT_EQ(rlm_session_reset(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), 0u);
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt.data(), 5), RLM_OK);
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_rewind(s, 2), RLM_OK);
}

TEST_F(ErrorPaths, OutOfRangeTokensAreRefusedWholesale) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  const int32_t good[2] = {10, 11};
  ASSERT_EQ(rlm_session_feed_tokens(s, good, 2), RLM_OK);
  for (int32_t badtok : {-1, vocab_, vocab_ + 1000, std::numeric_limits<int32_t>::min(),
                         std::numeric_limits<int32_t>::max()}) {
    const int32_t mixed[3] = {12, badtok, 13};
    EXPECT_EQ(rlm_session_feed_tokens(s, mixed, 3), RLM_ERR_TOKEN_OUT_OF_RANGE) << badtok;
    EXPECT_STRNE(rlm_session_error(s), "");
  }
  // Only the two good tokens were queued.
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), 2u);
}

// ---- A failed call leaves the session as it was --------------------------------------------------

// Two sessions take the same calls, one also takes failing calls in between; position, logits
// and the generated tokens must stay identical.
TEST_F(ErrorPaths, FailedCallsChangeNothing) {
  cfg_.max_pending = 8;
  cfg_.max_text_bytes = 12;
  cfg_.max_stop_strings = 2;
  cfg_.stop_string_bytes = 6;
  TestSession a, b;
  init(&a);
  init(&b);
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.9f;
  sp.seed = 1234;
  ASSERT_EQ(rlm_session_set_sampling(a.s, &sp), RLM_OK);
  ASSERT_EQ(rlm_session_set_sampling(b.s, &sp), RLM_OK);
  ASSERT_EQ(rlm_session_add_stop_string(a.s, "qq", 2), RLM_OK);
  ASSERT_EQ(rlm_session_add_stop_string(b.s, "qq", 2), RLM_OK);

  auto failing_calls = [&](rlm_session* s) {
    const uint32_t pos = rlm_session_position(s);
    const std::vector<float> l = logits(s);
    const int32_t bad[2] = {4, vocab_};
    EXPECT_EQ(rlm_session_feed_tokens(s, bad, 2), RLM_ERR_TOKEN_OUT_OF_RANGE);
    const int32_t many[9] = {5, 5, 5, 5, 5, 5, 5, 5, 5};
    EXPECT_EQ(rlm_session_feed_tokens(s, many, 9), RLM_ERR_CAPACITY);
    // 12 bytes fit max_text_bytes but not max_pending (8): tokenized, then refused.
    EXPECT_EQ(rlm_session_feed_text(s, "abcdefghijkl", 12), RLM_ERR_CAPACITY);
    EXPECT_EQ(rlm_session_feed_text(s, "abcdefghijklm", 13), RLM_ERR_CAPACITY);
    rlm_sampling other = sp;
    other.seed = 99;        // would reseed the RNG if it were applied
    other.top_p = -1.0f;    // but the call fails
    EXPECT_EQ(rlm_session_set_sampling(s, &other), RLM_ERR_INVALID_ARGUMENT);
    EXPECT_EQ(rlm_session_add_stop_string(s, "abcde", 5), RLM_ERR_CAPACITY);  // 2 + 5 > 6 bytes
    EXPECT_EQ(rlm_session_rewind(s, pos + 3), RLM_ERR_INVALID_ARGUMENT);
    rlm_step_result r;
    rlm_step_result_default(&r);
    r.struct_size = 1;
    EXPECT_EQ(rlm_step(s, &r), RLM_ERR_STRUCT_SIZE);
    EXPECT_EQ(rlm_session_position(s), pos);
    EXPECT_TRUE(same_bits(l, logits(s)));
  };

  const int32_t prompt[4] = {3 + 'O', 3 + 'n', 3 + 'c', 3 + 'e'};
  for (TestSession* t : {&a, &b}) ASSERT_EQ(rlm_session_feed_tokens(t->s, prompt, 4), RLM_OK);
  failing_calls(b.s);  // with input pending
  for (TestSession* t : {&a, &b}) ASSERT_EQ(rlm_session_eval(t->s), RLM_OK);
  EXPECT_TRUE(same_bits(logits(a.s), logits(b.s)));
  failing_calls(b.s);  // logits ready
  std::vector<int32_t> ta, tb;
  for (int i = 0; i < 24; ++i) {
    rlm_step_result ra, rb;
    rlm_step_result_default(&ra);
    rlm_step_result_default(&rb);
    const rlm_status sa = rlm_step(a.s, &ra);
    const rlm_status sb = rlm_step(b.s, &rb);
    ASSERT_EQ(sa, sb) << i;
    if (sa != RLM_OK) break;
    EXPECT_EQ(ra.token, rb.token) << i;
    EXPECT_EQ(ra.position, rb.position) << i;
    EXPECT_EQ(std::string(ra.text, ra.text_len), std::string(rb.text, rb.text_len)) << i;
    EXPECT_EQ(ra.stop, rb.stop) << i;
    if (ra.stop != RLM_STOP_NONE) {
      for (TestSession* t : {&a, &b}) ASSERT_EQ(rlm_session_feed_tokens(t->s, prompt, 1), RLM_OK);
    }
    failing_calls(b.s);  // mid-generation (a sampled token pending)
    EXPECT_TRUE(same_bits(logits(a.s), logits(b.s))) << i;
  }
}

// The position is committed only when a step succeeds. The one failure a step can meet after
// its argument checks is the position limit (2^32 - 16, unreachable in a test by generating),
// so the session's position is moved there directly.
TEST_F(ErrorPaths, StepAtThePositionLimitFailsWithoutCommittingAnything) {
#ifndef RINGLM_TEST_HAVE_SESSION_IMPL
  GTEST_SKIP() << "runtime/session.h not reachable from this build (RINGLM_FUZZ off)";
#else
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  const int32_t prompt[3] = {10, 11, 12};
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 3), RLM_OK);
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  const std::vector<float> before = logits(s);
  auto* impl = reinterpret_cast<ringlm::internal::SessionImpl*>(s);
  const uint32_t limit_pos = 0xfffffff0u - 1;
  impl->n_past = limit_pos;
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 2), RLM_OK);  // 2 more do not fit below the limit
  for (int i = 0; i < 2; ++i) {
    rlm_step_result r;
    rlm_step_result_default(&r);
    EXPECT_EQ(rlm_step(s, &r), RLM_ERR_CAPACITY);
    EXPECT_STRNE(rlm_session_error(s), "");
    EXPECT_EQ(r.token, -1);
    EXPECT_EQ(rlm_session_position(s), limit_pos);
    EXPECT_TRUE(same_bits(before, logits(s)));
    EXPECT_EQ(rlm_session_eval(s), RLM_ERR_CAPACITY);  // the pending input is still there
    EXPECT_EQ(rlm_session_position(s), limit_pos);
  }
  // One token still fits: the position limit is exact.
  ASSERT_EQ(rlm_session_rewind(s, limit_pos), RLM_OK);  // drops the pending input
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 1), RLM_OK);
  EXPECT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), limit_pos + 1);
  ASSERT_EQ(rlm_session_reset(s), RLM_OK);
  EXPECT_EQ(rlm_session_position(s), 0u);
#endif
}

// ---- Out of memory: init one byte short never leaves a session -----------------------------------

TEST_F(ErrorPaths, InitShortOfMemoryLeavesNoSessionAndTheMemoryIsReusable) {
  for (uint32_t threads : {1u, 2u}) {
    rlm_session_config c = cfg_;
    c.n_threads = threads;
    size_t need = 0;
    ASSERT_EQ(rlm_session_memory(&model_, &c, &need, nullptr), RLM_OK);
    AlignedBuffer mem(need);
    memset(mem.data(), 0x5A, need);
    for (size_t size : {size_t{0}, size_t{1}, size_t{63}, size_t{64}, need / 2, need - 64, need - 1}) {
      rlm_session* s = reinterpret_cast<rlm_session*>(0x10);
      EXPECT_EQ(rlm_session_init(&model_, &c, mem.data(), size, &s), RLM_ERR_BUFFER_TOO_SMALL)
          << size << " of " << need;
      EXPECT_EQ(s, nullptr);
    }
    // Nothing was written: the failed inits did not touch the memory.
    size_t touched = 0;
    for (size_t i = 0; i < need; ++i) touched += mem.data()[i] != 0x5A;
    EXPECT_EQ(touched, 0u);
    // The handle of a failed init is unusable, and the same memory then works.
    EXPECT_EQ(rlm_step(nullptr, nullptr), RLM_ERR_INVALID_ARGUMENT);
    rlm_session* s = nullptr;
    ASSERT_EQ(rlm_session_init(&model_, &c, mem.data(), need, &s), RLM_OK);
    std::vector<int32_t> got, want;
    greedy(s, "Once", 12, &got);
    ASSERT_EQ(rlm_session_release(s), RLM_OK);
    TestSession fresh;
    ASSERT_EQ(fresh.init(&model_, c), RLM_OK);
    greedy(fresh.s, "Once", 12, &want);
    ASSERT_EQ(rlm_session_release(fresh.s), RLM_OK);  // joins its worker before the memory goes
    EXPECT_EQ(got, want);
    // Released memory can be initialised again (no half state from the previous session).
    memset(mem.data(), 0xFF, need);
    ASSERT_EQ(rlm_session_init(&model_, &c, mem.data(), need, &s), RLM_OK);
    got.clear();
    greedy(s, "Once", 12, &got);
    EXPECT_EQ(got, want);
    ASSERT_EQ(rlm_session_release(s), RLM_OK);
  }
}

// ---- Issue #12: silent wrong results --------------------------------------------------------------

// rlm_session_logits returned RLM_OK with uninitialised memory before anything had run. The logits
// exist from the first position run (eval or step) until reset or rewind.
TEST_F(ErrorPaths, LogitsExistOnlyAfterAPositionRuns) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  const float* l = nullptr;
  size_t n = 0;
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);
  EXPECT_NE(std::string(rlm_session_error(s)).find("no logits"), std::string::npos)
      << rlm_session_error(s);
  EXPECT_EQ(l, nullptr);
  const int32_t prompt[3] = {10, 20, 30};
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 3), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);  // queued, not run
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  ASSERT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);
  EXPECT_EQ(n, static_cast<size_t>(vocab_));
  step(s);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);  // the sampler's working values
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 1), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);  // still the last run position's
  ASSERT_EQ(rlm_session_reset(s), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 3), RLM_OK);
  step(s);
  ASSERT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);
  // A rewind drops them, also to the current position (they may be working values).
  ASSERT_EQ(rlm_session_rewind(s, rlm_session_position(s)), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);
  ASSERT_EQ(rlm_session_rewind(s, 1), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_ERR_BAD_STATE);
  ASSERT_EQ(rlm_session_feed_tokens(s, prompt + 1, 1), RLM_OK);
  ASSERT_EQ(rlm_session_eval(s), RLM_OK);
  EXPECT_EQ(rlm_session_logits(s, &l, &n), RLM_OK);
}

// Banning every token (logit_bias -inf on all of them) returned token 0 with RLM_OK. Now the
// step fails with RLM_ERR_NO_CANDIDATES: the input has run (as rlm_session_eval would) and the
// logits are left raw, so the next step, with sampling that allows a token, samples exactly what
// it would have sampled without the failed step.
TEST_F(ErrorPaths, EveryTokenBannedIsNoCandidates) {
  cfg_.max_logit_bias = static_cast<uint32_t>(vocab_);
  std::vector<rlm_logit_bias> ban(static_cast<size_t>(vocab_));
  for (int32_t t = 0; t < vocab_; ++t) ban[static_cast<size_t>(t)] = {t, -INFINITY};
  const int32_t prompt[4] = {10, 20, 30, 40};
  for (float temperature : {0.0f, 0.8f}) {
    rlm_sampling allow;
    rlm_sampling_default(&allow);
    allow.temperature = temperature;
    allow.seed = 99;
    rlm_sampling banned = allow;
    banned.logit_bias = ban.data();
    banned.n_logit_bias = static_cast<uint32_t>(ban.size());

    // Reference: never banned.
    TestSession ref_ts;
    ASSERT_EQ(ref_ts.init(&model_, cfg_), RLM_OK);
    rlm_session* ref = ref_ts.s;
    ASSERT_EQ(rlm_session_set_sampling(ref, &allow), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(ref, prompt, 4), RLM_OK);
    ASSERT_EQ(rlm_session_eval(ref), RLM_OK);
    const std::vector<float> ref_prompt_logits = logits(ref);
    std::vector<int32_t> want;
    for (int i = 0; i < 6; ++i) want.push_back(step(ref).token);

    TestSession ts;
    ASSERT_EQ(ts.init(&model_, cfg_), RLM_OK);
    rlm_session* s = ts.s;
    ASSERT_EQ(rlm_session_set_sampling(s, &banned), RLM_OK);
    ASSERT_EQ(rlm_session_feed_tokens(s, prompt, 4), RLM_OK);
    rlm_step_result r;
    rlm_step_result_default(&r);
    ASSERT_EQ(rlm_step(s, &r), RLM_ERR_NO_CANDIDATES) << temperature;
    EXPECT_EQ(r.token, -1);  // the result is untouched
    EXPECT_NE(std::string(rlm_session_error(s)).find("no token can be sampled"),
              std::string::npos)
        << rlm_session_error(s);
    EXPECT_EQ(rlm_session_position(s), 4u);  // the prompt ran, as rlm_session_eval runs it
    EXPECT_TRUE(same_bits(logits(s), ref_prompt_logits)) << "the logits are left raw";
    // Still banned: the same answer, nothing runs again.
    EXPECT_EQ(rlm_step(s, &r), RLM_ERR_NO_CANDIDATES);
    EXPECT_EQ(rlm_session_position(s), 4u);
    std::vector<int32_t> got;
    ASSERT_EQ(rlm_session_set_sampling(s, &allow), RLM_OK);
    got.push_back(step(s).token);
    got.push_back(step(s).token);
    // A decode step with everything banned: the last sampled token runs, then the same.
    const uint32_t pos = rlm_session_position(s);
    ASSERT_EQ(rlm_session_set_sampling(s, &banned), RLM_OK);
    EXPECT_EQ(rlm_step(s, &r), RLM_ERR_NO_CANDIDATES);
    EXPECT_EQ(rlm_session_position(s), pos + 1);
    ASSERT_EQ(rlm_session_set_sampling(s, &allow), RLM_OK);
    for (int i = 0; i < 4; ++i) got.push_back(step(s).token);
    EXPECT_EQ(std::vector<int32_t>(got.begin(), got.begin() + 2),
              std::vector<int32_t>(want.begin(), want.begin() + 2))
        << temperature;
    // Greedy: the whole sequence (sampling differs after the reseed of set_sampling).
    if (temperature == 0.0f) EXPECT_EQ(got, want);
  }
}

// --temp 1e-40 overflowed logit / T to +inf and sampled uniformly among the positive logits. A
// tiny temperature now samples the greedy sequence, whatever the seed.
TEST_F(ErrorPaths, TinyTemperatureSamplesTheGreedySequence) {
  std::vector<int32_t> want;
  {
    TestSession ts;
    init(&ts);
    greedy(ts.s, "Once", 10, &want);
  }
  ASSERT_EQ(want.size(), 10u);
  for (uint64_t seed : {1ull, 2ull, 12345ull}) {
    for (float temperature : {1e-40f, 1e-30f}) {
      TestSession ts;
      init(&ts);
      rlm_sampling sp;
      rlm_sampling_default(&sp);
      sp.temperature = temperature;
      sp.top_k = 0;
      sp.top_p = 1.0f;
      sp.min_p = 0.0f;
      sp.seed = seed;
      ASSERT_EQ(rlm_session_set_sampling(ts.s, &sp), RLM_OK);
      ASSERT_EQ(rlm_session_feed_text(ts.s, "Once", 4), RLM_OK);
      std::vector<int32_t> got;
      for (int i = 0; i < 10; ++i) got.push_back(step(ts.s).token);
      EXPECT_EQ(got, want) << "seed " << seed << " T " << temperature;
    }
  }
}

// A second rlm_session_init over the memory of a live multi-threaded session orphaned its worker
// (ASan: SEGV in the worker once the memory changed). It is refused now: RLM_ERR_BAD_STATE, the
// live session untouched and its rlm_session_error saying what to do; after release the memory
// initialises again.
TEST_F(ErrorPaths, InitOverALiveSessionIsRefused) {
  for (uint32_t threads : {1u, 2u}) {
    rlm_session_config c = cfg_;
    c.n_threads = threads;
    TestSession ts;
    ASSERT_EQ(ts.init(&model_, c), RLM_OK);
    std::vector<int32_t> want;
    greedy(ts.s, "Once", 6, &want);
    rlm_session* second = reinterpret_cast<rlm_session*>(0x10);
    EXPECT_EQ(rlm_session_init(&model_, &c, ts.mem.data(), ts.bytes, &second), RLM_ERR_BAD_STATE)
        << threads;
    EXPECT_EQ(second, nullptr);
    EXPECT_NE(std::string(rlm_session_error(ts.s)).find("rlm_session_release"), std::string::npos)
        << rlm_session_error(ts.s);
    // Another config (one thread) over it is refused too.
    rlm_session_config one = cfg_;
    EXPECT_EQ(rlm_session_init(&model_, &one, ts.mem.data(), ts.bytes, &second),
              RLM_ERR_BAD_STATE);
    // The live session is intact: it continues like a fresh one.
    ASSERT_EQ(rlm_session_reset(ts.s), RLM_OK);
    std::vector<int32_t> got;
    greedy(ts.s, "Once", 6, &got);
    EXPECT_EQ(got, want);
    // A byte copy of a live session's header elsewhere is not a live session (its self-pointer
    // differs): that memory initialises. Only the header is copied: the rest of the block holds
    // the running workers' stacks, which no one may read while they run (TSan).
    AlignedBuffer copy(ts.bytes);
    memset(copy.data(), 0, ts.bytes);
    memcpy(copy.data(), ts.mem.data(), 256);
    rlm_session* other = nullptr;
    ASSERT_EQ(rlm_session_init(&model_, &c, copy.data(), ts.bytes, &other), RLM_OK);
    got.clear();
    greedy(other, "Once", 6, &got);
    EXPECT_EQ(got, want);
    ASSERT_EQ(rlm_session_release(other), RLM_OK);
    // Released: the memory initialises again.
    ASSERT_EQ(rlm_session_release(ts.s), RLM_OK);
    ASSERT_EQ(rlm_session_init(&model_, &c, ts.mem.data(), ts.bytes, &second), RLM_OK);
    got.clear();
    greedy(second, "Once", 6, &got);
    EXPECT_EQ(got, want);
    ts.s = second;  // released by ~TestSession
  }
}

// Messages carried the runtime's source location ("session.cc:115: n_ctx 1 ..."). They are
// for the user now; builds with RINGLM_ERROR_LOCATIONS (by default those without NDEBUG, i.e.
// Debug) keep the location as a prefix.
TEST_F(ErrorPaths, MessagesCarryNoSourceLocationUnlessConfigured) {
#ifndef RINGLM_TEST_HAVE_SESSION_IMPL
  GTEST_SKIP() << "runtime/status.h not reachable from this build (RINGLM_FUZZ off)";
#else
  std::vector<std::string> messages;
  char why[256];
  rlm_session_config bad = cfg_;
  bad.n_ctx = 1;
  ASSERT_EQ(rlm_session_config_check(&model_, &bad, why, sizeof why), RLM_ERR_INVALID_ARGUMENT);
  messages.push_back(why);
  TestSession ts;
  init(&ts);
  rlm_step_result r;
  rlm_step_result_default(&r);
  ASSERT_EQ(rlm_step(ts.s, &r), RLM_ERR_BAD_STATE);
  messages.push_back(rlm_session_error(ts.s));
  AlignedBuffer junk(4096);
  memset(junk.data(), 0x5A, junk.size());
  rlm_model m;
  ASSERT_NE(rlm_model_open(junk.data(), junk.size(), &m), RLM_OK);
  messages.push_back(rlm_model_error(&m));
  for (const std::string& msg : messages) {
    ASSERT_FALSE(msg.empty());
    const size_t cc = msg.find(".cc:");
    if (RINGLM_ERROR_LOCATIONS) {
      EXPECT_NE(cc, std::string::npos) << msg;
      EXPECT_LT(cc, msg.find(' ')) << "the location is the prefix: " << msg;
    } else {
      EXPECT_EQ(cc, std::string::npos) << msg;
      EXPECT_EQ(msg.find(".h:"), std::string::npos) << msg;
    }
  }
#endif
}

// ---- Findings of the fuzzers ---------------------------------------------------------------------

// Converting a tensor with NaN or infinite values to q8/q4 cast NaN to an integer (undefined
// behaviour; UBSan in the asan suite). Found by fuzz_llama2c / fuzz_gguf / fuzz_hf.
TEST(FuzzFindings, QuantizingNonFiniteValuesIsDefined) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> row(64, 0.25f);
  row[3] = nan;
  row[40] = inf;
  row[41] = -inf;
  std::vector<int8_t> q8(64);
  std::vector<uint16_t> s8(2);
  ringlm::internal::quantize_row_q8(row.data(), row.size(), q8.data(), s8.data());
  EXPECT_EQ(q8[3], 0);
  std::vector<uint8_t> q4(32);
  std::vector<uint16_t> s4(2);
  ringlm::internal::quantize_row_q4(row.data(), row.size(), q4.data(), s4.data());
  std::vector<float> back(64);
  ringlm::internal::dequantize_row_q8(q8.data(), s8.data(), 64, back.data());
  EXPECT_FALSE(std::isnan(back[0]));
}

// Findings of the fuzzers, fixed at their root; kept as regression tests.

// runtime/stop.cc text_stream_finish: an incomplete UTF-8 sequence held at the end of a turn
// became U+FFFD after stop matching, so a stop string ending in U+FFFD reached the output.
TEST_F(ErrorPaths, StopStringCompletedByTheEndOfTurnReplacementIsNotReleased) {
  TestSession ts;
  init(&ts);
  rlm_session* s = ts.s;
  rlm_logit_bias force[1] = {{3 + 0xE2, std::numeric_limits<float>::infinity()}};  // <0xE2>
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0;
  sp.logit_bias = force;
  sp.n_logit_bias = 1;
  ASSERT_EQ(rlm_session_set_sampling(s, &sp), RLM_OK);
  ASSERT_EQ(rlm_session_add_stop_string(s, "\xEF\xBF\xBD", 3), RLM_OK);
  ASSERT_EQ(rlm_session_set_max_tokens(s, 1), RLM_OK);
  ASSERT_EQ(rlm_session_feed_text(s, "a", 1), RLM_OK);
  const rlm_step_result r = step(s);
  EXPECT_EQ(r.token, 3 + 0xE2);
  EXPECT_NE(r.stop, RLM_STOP_NONE);
  EXPECT_EQ(std::string(r.text, r.text_len).find("\xEF\xBF\xBD"), std::string::npos)
      << "the stop string was released";
}

// convert/hf.cc read_tokenizer_json: nlohmann::json type errors (json::value / get on a
// value of another type) escaped and terminated `ringlm convert`.
TEST(FuzzFindings, HfTokenizerJsonWithWrongTypesIsAnErrorNotAnException) {
  const std::string dir = temp_dir();
  const char* bad[] = {
      R"({"model":{"type":"BPE","vocab":{"a":0},"merges":[]},"added_tokens":[{"id":1,"content":"<s>","special":1}]})",
      R"({"model":{"type":7,"vocab":{"a":0}}})",
      R"({"model":{"type":"BPE","vocab":{"a":0},"byte_fallback":"yes"}})",
  };
  for (const char* json : bad) {
    const std::string path = dir + "/tokenizer.json";
    FILE* f = fopen(path.c_str(), "w");
    ASSERT_NE(f, nullptr);
    fputs(json, f);
    fclose(f);
    ringlm::internal::conv::TokenizerData td;
    std::string err;
    bool ok = true;
    try {
      ok = ringlm::internal::conv::read_hf_tokenizer(path, &td, &err);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "exception escaped: " << e.what() << " for " << json;
      continue;
    }
    EXPECT_FALSE(ok) << json;
    EXPECT_FALSE(err.empty()) << json;
  }
}

}  // namespace
