// ringlm.hpp: the header-only C++ wrapper over the C ABI (Result/Status, Model, Session,
// generate), against the raw C ABI on random-weight models, and stories260K against llama2.c.
// Also `ringlm generate` (which drives the wrapper) end to end.
#include <string.h>

#include <string>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "ringlm/ringlm.hpp"

using namespace ringlm_test;
using ringlm::internal::fb::DType;

namespace {

AlignedBuffer random_bytes(DType q = DType::F32) {
  AlignedBuffer b;
  std::string err;
  RandomModelShape shape;
  EXPECT_TRUE(random_model(shape, q, &b, &err)) << err;
  return b;
}

std::string c_greedy(const AlignedBuffer& bytes, const std::string& prompt, uint32_t n,
                     std::vector<int32_t>* ids) {
  rlm_model m;
  if (rlm_model_open(bytes.data(), bytes.size(), &m) != RLM_OK) return "<open>";
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  TestSession ts;
  if (ts.init(&m, cfg) != RLM_OK) return "<init>";
  std::string t = greedy(ts.s, prompt, n, ids);
  rlm_session_release(ts.s);
  return t;
}

}  // namespace

TEST(CppWrapper, ModelOpenFailureCarriesStatusNameAndMessage) {
  AlignedBuffer junk(4096);
  memset(junk.data(), 0x5a, junk.size());
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(junk.data(), junk.size());
  EXPECT_FALSE(m);
  EXPECT_FALSE(m.ok());
  EXPECT_NE(m.code(), RLM_OK);
  EXPECT_EQ(std::string(m.status_name()).rfind("RLM_ERR_MODEL_", 0), 0u) << m.status_name();
  EXPECT_STRNE(m.message(), "");
  EXPECT_EQ(m.status().name(), rlm_status_string(m.code()));

  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> mis = ringlm::Model::open(b.data() + 1, b.size() - 1);
  EXPECT_FALSE(mis);
  ringlm::Result<ringlm::Model> shorter = ringlm::Model::open(b.data(), b.size() - 1);
  EXPECT_FALSE(shorter);
}

TEST(CppWrapper, ModelInfoAndTokenText) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m) << m.status_name() << ": " << m.message();
  ringlm::Result<ringlm::ModelInfo> info = m->info();
  ASSERT_TRUE(info);
  EXPECT_EQ(info->vocab_size, 259u);
  EXPECT_EQ(info->dim, 64u);
  char buf[8];
  ringlm::Result<std::string_view> t = m->token_text(3 + 'A', buf, sizeof buf);
  ASSERT_TRUE(t);
  EXPECT_EQ(*t, "A");
  EXPECT_EQ(m->token_text(100000, buf, sizeof buf).code(), RLM_ERR_TOKEN_OUT_OF_RANGE);
}

TEST(CppWrapper, BorrowedMemoryIsExactAndChecked) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::SessionConfig cfg;
  ringlm::Result<ringlm::MemoryRequirement> need = ringlm::Session::memory_required(*m, cfg);
  ASSERT_TRUE(need);
  size_t c_bytes = 0, c_align = 0;
  ASSERT_EQ(rlm_session_memory(m->get(), &cfg, &c_bytes, &c_align), RLM_OK);
  EXPECT_EQ(need->bytes, c_bytes);
  EXPECT_EQ(need->alignment, 64u);

  AlignedBuffer mem(need->bytes + 64);
  ringlm::Result<ringlm::Session> small =
      ringlm::Session::create(*m, mem.data(), need->bytes - 1, cfg);
  EXPECT_EQ(small.code(), RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_STREQ(small.status_name(), "RLM_ERR_BUFFER_TOO_SMALL");
  ringlm::Result<ringlm::Session> mis = ringlm::Session::create(*m, mem.data() + 8, need->bytes, cfg);
  EXPECT_EQ(mis.code(), RLM_ERR_MISALIGNED);
  ringlm::Result<ringlm::Session> s = ringlm::Session::create(*m, mem.data(), need->bytes, cfg);
  ASSERT_TRUE(s);
  EXPECT_FALSE(s->owns_memory());
  EXPECT_EQ(s->memory_bytes(), need->bytes);
  EXPECT_GE(reinterpret_cast<const uint8_t*>(s->get()), mem.data());
  EXPECT_LT(reinterpret_cast<const uint8_t*>(s->get()), mem.data() + need->bytes);

  ringlm::SessionConfig bad;
  bad.struct_size = 3;
  EXPECT_EQ(ringlm::Session::memory_required(*m, bad).code(), RLM_ERR_STRUCT_SIZE);
  EXPECT_EQ(ringlm::Session::allocate(*m, bad).code(), RLM_ERR_STRUCT_SIZE);
}

TEST(CppWrapper, GenerateMatchesTheCAbi) {
  AlignedBuffer b = random_bytes(DType::Q8);
  std::vector<int32_t> c_ids;
  const std::string c_text = c_greedy(b, "hello world", 40, &c_ids);

  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m);
  ASSERT_TRUE(s) << s.status_name();
  EXPECT_TRUE(s->owns_memory());
  ASSERT_TRUE(s->set_sampling(ringlm::Sampling::greedy()));
  ASSERT_TRUE(s->set_max_tokens(40));
  std::string text;
  std::vector<int32_t> ids;
  ringlm::Result<rlm_stop_reason> why = s->generate("hello world", [&](const ringlm::StepResult& r) {
    text.append(r.text.data(), r.text.size());
    ids.push_back(r.token);
  });
  ASSERT_TRUE(why) << why.status_name();
  EXPECT_EQ(*why, RLM_STOP_MAX_TOKENS);
  EXPECT_EQ(ids, c_ids);
  EXPECT_EQ(text, c_text);

  // string_view callback, same text again after reset.
  ASSERT_TRUE(s->reset());
  std::string text2;
  why = s->generate("hello world", [&](std::string_view t) { text2.append(t.data(), t.size()); });
  ASSERT_TRUE(why);
  EXPECT_EQ(text2, c_text);
}

TEST(CppWrapper, CallbackReturningFalseEndsTheTurn) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m);
  ASSERT_TRUE(s);
  (void)s->set_sampling(ringlm::Sampling::greedy());
  (void)s->set_max_tokens(50);
  int calls = 0;
  ringlm::Result<rlm_stop_reason> why = s->generate("abc", [&](std::string_view) {
    return ++calls < 3;
  });
  ASSERT_TRUE(why);
  EXPECT_EQ(*why, RLM_STOP_NONE);
  EXPECT_EQ(calls, 3);
  // resume() goes on from there.
  ringlm::Result<rlm_stop_reason> rest = s->resume([](std::string_view) {});
  ASSERT_TRUE(rest);
  EXPECT_EQ(*rest, RLM_STOP_MAX_TOKENS);
}

TEST(CppWrapper, ErrorsCarryTheSessionMessage) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m);
  ASSERT_TRUE(s);
  ringlm::Result<ringlm::StepResult> r = s->step();  // nothing fed
  EXPECT_EQ(r.code(), RLM_ERR_BAD_STATE);
  EXPECT_STREQ(r.status_name(), "RLM_ERR_BAD_STATE");
  EXPECT_STREQ(r.message(), rlm_session_error(s->get()));
  const int32_t bad = 100000;
  ringlm::Status st = s->feed_tokens(&bad, 1);
  EXPECT_EQ(st.code(), RLM_ERR_TOKEN_OUT_OF_RANGE);
  EXPECT_FALSE(st);
  EXPECT_STRNE(st.message(), "");
  EXPECT_EQ(s->add_stop_string("").code(), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(s->add_stop_token(5));
  EXPECT_TRUE(s->clear_stops());
  EXPECT_TRUE(s->set_ignore_eos(true));
  EXPECT_EQ(s->rewind(10).code(), RLM_ERR_INVALID_ARGUMENT);
}

TEST(CppWrapper, EvalLogitsStepAndRewind) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m);
  ASSERT_TRUE(s);
  (void)s->set_sampling(ringlm::Sampling::greedy());
  ASSERT_TRUE(s->feed("xy"));
  ASSERT_TRUE(s->eval());
  ringlm::Result<ringlm::Session::Logits> l = s->logits();
  ASSERT_TRUE(l);
  EXPECT_EQ(l->size, 259u);
  int32_t argmax = 0;
  for (size_t i = 1; i < l->size; ++i) {
    if (l->data[i] > l->data[argmax]) argmax = static_cast<int32_t>(i);
  }
  ringlm::Result<ringlm::StepResult> r = s->step();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->token, argmax);
  EXPECT_EQ(r->n_evaluated, 0u);  // eval already ran the prompt
  const uint32_t pos = s->position();
  EXPECT_EQ(pos, 3u);             // BOS x y
  ringlm::Result<ringlm::StepResult> r2 = s->step();
  ASSERT_TRUE(r2);
  EXPECT_TRUE(s->rewind(pos));
  EXPECT_EQ(s->position(), pos);
}

// Logprobs in StepResult, score, and beam search through the wrapper agree with each other.
TEST(CppWrapper, LogprobsScoreAndBeams) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.max_beams = 2;
  cfg.max_beam_tokens = 8;
  cfg.max_logit_rows = 8;
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m, cfg);
  ASSERT_TRUE(s);
  (void)s->set_sampling(ringlm::Sampling::greedy());
  rlm_token_logprob top[3];
  ASSERT_TRUE(s->set_logprobs(true, top, 3));
  ASSERT_TRUE(s->feed("xy"));
  std::vector<int32_t> ids;
  std::vector<float> lps;
  for (int i = 0; i < 5; ++i) {
    ringlm::Result<ringlm::StepResult> r = s->step();
    ASSERT_TRUE(r);
    EXPECT_EQ(r->n_top, 3u);
    EXPECT_EQ(top[0].token, r->token);      // greedy takes the most probable token
    EXPECT_EQ(r->sampler_logprob, 0.0f);
    ids.push_back(r->token);
    lps.push_back(r->logprob);
  }
  // Scoring the same tokens after the same prompt gives the same log-probabilities.
  ASSERT_TRUE(s->reset());
  ASSERT_TRUE(s->feed("xy"));
  std::vector<float> scored(ids.size());
  double sum = 0;
  ASSERT_TRUE(s->score(ids.data(), ids.size(), scored.data(), nullptr, &sum));
  for (size_t i = 0; i < ids.size(); ++i) EXPECT_NEAR(scored[i], lps[i], 1e-5) << i;
  // Width 1 without a length penalty: the greedy tokens.
  ASSERT_TRUE(s->reset());
  ASSERT_TRUE(s->feed("xy"));
  rlm_beam_params p;
  rlm_beam_params_default(&p);
  p.n_beams = 1;
  p.max_tokens = 5;
  p.length_penalty = 0.0f;
  int32_t out[8];
  rlm_beam_result res;
  rlm_beam_result_default(&res);
  res.tokens = out;
  res.capacity = 8;
  uint32_t n = 0;
  ASSERT_TRUE(s->beam_search(p, &res, &n));
  ASSERT_EQ(n, 1u);
  EXPECT_EQ(std::vector<int32_t>(out, out + res.n_tokens), ids);
  EXPECT_NEAR(res.logprob, sum, 1e-4);
  p.n_beams = 3;
  EXPECT_EQ(s->beam_search(p, &res, &n).code(), RLM_ERR_INVALID_ARGUMENT);
}

TEST(CppWrapper, SessionsMoveAndReleaseOnce) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  ringlm::SessionConfig cfg;
  cfg.n_threads = 2;  // release must join the worker: a leak or a double release would show
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m, cfg);
  ASSERT_TRUE(s) << s.status_name();
  rlm_session* raw = s->get();
  ringlm::Session a = std::move(*s);
  EXPECT_FALSE(*s);
  EXPECT_EQ(a.get(), raw);
  EXPECT_TRUE(a.owns_memory());
  ringlm::Session c;
  c = std::move(a);
  EXPECT_FALSE(a);
  EXPECT_EQ(c.get(), raw);
  (void)c.set_sampling(ringlm::Sampling::greedy());
  (void)c.set_max_tokens(5);
  std::string out;
  ringlm::Result<rlm_stop_reason> why = c.generate("z", [&](std::string_view t) { out += t; });
  ASSERT_TRUE(why);
  c.release();
  c.release();
  EXPECT_FALSE(c);
  EXPECT_STREQ(c.error(), "");

  // Result<Session> moves too.
  ringlm::Result<ringlm::Session> r1 = ringlm::Session::allocate(*m, cfg);
  ringlm::Result<ringlm::Session> r2 = std::move(r1);
  ASSERT_TRUE(r2);
  EXPECT_TRUE(*r2);
}

TEST(CppWrapper, Stories260KMatchesLlama2c) {
  const std::string bin = shared_path("models/stories260K/stories260K.bin");
  const std::string tok = shared_path("models/stories260K/tok512.bin");
  const std::string expected = stories260k_greedy_continuation();
  if (bin.empty() || tok.empty() || expected.empty()) GTEST_SKIP() << "../shared stories260K absent";
  AlignedBuffer bytes;
  std::string err;
  ASSERT_TRUE(build_model(bin, tok, DType::F32, &bytes, &err)) << err;
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(bytes.data(), bytes.size());
  ASSERT_TRUE(m) << m.message();
  alignas(64) static unsigned char arena[8 << 20];
  ringlm::Result<ringlm::Session> s = ringlm::Session::create(*m, arena, sizeof arena);
  ASSERT_TRUE(s) << s.status_name();
  (void)s->set_sampling(ringlm::Sampling::greedy());
  std::string got;
  ringlm::Result<rlm_stop_reason> why = s->generate("Once upon a time", [&](const ringlm::StepResult& r) {
    got.append(r.text.data(), r.text.size());
    // llama2.c ran 256 positions: stop where it stopped.
    if (r.n_evaluated > 1) (void)s->set_max_tokens(256 - s->position() + 1);
  });
  ASSERT_TRUE(why) << why.status_name();
  EXPECT_EQ(*why, RLM_STOP_MAX_TOKENS);
  EXPECT_EQ(got, expected);
}

// `ringlm generate` runs on the wrapper: its stdout is the reference continuation, its
// messages keep their form.
TEST(CppWrapper, GenerateToolOutput) {
  const std::string bin = shared_path("models/stories260K/stories260K.bin");
  const std::string tok = shared_path("models/stories260K/tok512.bin");
  const std::string expected = stories260k_greedy_continuation();
  if (bin.empty() || tok.empty() || expected.empty()) GTEST_SKIP() << "../shared stories260K absent";
  const std::string dir = temp_dir();
  const std::string model = dir + "/s.rlm";
  std::string out;
  ASSERT_EQ(run_command(ringlm_bin() + " convert '" + bin + "' --tokenizer '" + tok +
                            "' --quant f32 -o '" + model + "' >/dev/null 2>&1",
                        &out),
            0);
  // Prompt "Once upon a time" is 4 tokens + BOS here; llama2.c stopped at position 256.
  ASSERT_EQ(run_command(ringlm_bin() + " generate -m '" + model +
                            "' -p 'Once upon a time' --temp 0 -n 252 2>/dev/null",
                        &out),
            0);
  EXPECT_EQ(out, expected);  // the continuation alone: the prompt is not echoed
  ASSERT_EQ(run_command(ringlm_bin() + " generate -m '" + model +
                            "' -p 'Once upon a time' --temp 0 -n 4 --print-ids 2>&1 >/dev/null",
                        &out),
            0);  // stats line on stderr
  EXPECT_NE(out.find("[prompt tokens 5 | prefill "), std::string::npos) << out;
  EXPECT_NE(out.find(" | stop max-tokens]"), std::string::npos) << out;
  EXPECT_EQ(run_command(ringlm_bin() + " generate -m '" + dir +
                            "/missing.rlm' -p x 2>&1",
                        &out),
            1);
  EXPECT_NE(out.find("ringlm generate: cannot open"), std::string::npos) << out;
  ASSERT_EQ(run_command("head -c 1000 '" + model + "' > '" + dir + "/cut.rlm'", &out), 0);
  run_command(ringlm_bin() + " generate -m '" + dir + "/cut.rlm' -p x 2>&1", &out);
  EXPECT_NE(out.find("ringlm generate: model: RLM_ERR_MODEL_"), std::string::npos) << out;
  run_command(ringlm_bin() + " generate -m '" + model + "' -p x --stop '' 2>&1", &out);
  EXPECT_NE(out.find("ringlm generate: stop string: RLM_ERR_INVALID_ARGUMENT"), std::string::npos)
      << out;
}

// Speculation through the wrapper: prompt lookup gives the C ABI's plain greedy tokens, and the
// counters say drafts were checked.
TEST(CppWrapper, SpeculationKeepsTheTokens) {
  AlignedBuffer b = random_bytes(DType::Q8);
  std::vector<int32_t> c_ids;
  c_greedy(b, "hello hello hello hello", 40, &c_ids);
  ringlm::Result<ringlm::Model> m = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(m);
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.max_draft = 6;
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*m, cfg);
  ASSERT_TRUE(s) << s.status_name();
  rlm_speculation spec;
  rlm_speculation_default(&spec);
  spec.mode = RLM_SPEC_LOOKUP;
  spec.ngram_min = 1;
  ASSERT_TRUE(s->set_speculation(&spec));
  ASSERT_TRUE(s->set_sampling(ringlm::Sampling::greedy()));
  ASSERT_TRUE(s->set_max_tokens(40));
  std::vector<int32_t> ids;
  ringlm::Result<rlm_stop_reason> why = s->generate(
      "hello hello hello hello", [&](const ringlm::StepResult& r) { ids.push_back(r.token); });
  ASSERT_TRUE(why) << why.status_name();
  EXPECT_EQ(ids, c_ids);
  ringlm::Result<rlm_spec_stats> st = s->spec_stats();
  ASSERT_TRUE(st);
  EXPECT_GT(st->verify_passes, 0u);
  spec.n_max = 7;  // above max_draft
  EXPECT_EQ(s->set_speculation(&spec).code(), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_TRUE(s->set_speculation(nullptr));
}

TEST(CppWrapper, GrammarsCompileAndConstrainTheSession) {
  AlignedBuffer b = random_bytes();
  ringlm::Result<ringlm::Model> model = ringlm::Model::open(b.data(), b.size());
  ASSERT_TRUE(model) << model.message();
  // A bad grammar: the status name and the located message.
  ringlm::Result<ringlm::Grammar> bad = ringlm::Grammar::allocate(*model, "root ::= \"yes");
  EXPECT_EQ(bad.code(), RLM_ERR_GRAMMAR);
  EXPECT_NE(std::string(bad.message()).find("line 1"), std::string::npos) << bad.message();
  // Borrowed memory: exactly memory_required bytes; allocate owns its own.
  const std::string gbnf = "root ::= \"yes\" | \"no\"";
  ringlm::Result<size_t> need = ringlm::Grammar::memory_required(*model, gbnf);
  ASSERT_TRUE(need);
  ringlm::AlignedMemory mem(64, *need);
  ringlm::Result<ringlm::Grammar> g = ringlm::Grammar::compile(*model, gbnf, mem.data(), *need);
  ASSERT_TRUE(g) << g.message();
  EXPECT_EQ(ringlm::Grammar::compile(*model, gbnf, mem.data(), *need - 1).code(),
            RLM_ERR_BUFFER_TOO_SMALL);
  ringlm::Result<ringlm::Grammar> schema = ringlm::Grammar::allocate_json_schema(
      *model, R"({"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"]})");
  ASSERT_TRUE(schema) << schema.message();
  ringlm::Result<ringlm::Grammar> unsupported =
      ringlm::Grammar::allocate_json_schema(*model, R"({"type": "integer", "multipleOf": 3})");
  EXPECT_EQ(unsupported.code(), RLM_ERR_GRAMMAR) << unsupported.message();

  ringlm::SessionConfig cfg;
  cfg.grammar_state_bytes = 64 * 1024;
  cfg.grammar_cache_bytes = 256 * 1024;
  ringlm::Result<ringlm::Session> s = ringlm::Session::allocate(*model, cfg);
  ASSERT_TRUE(s) << s.message();
  ringlm::Sampling sp;
  sp.seed = 5;
  ASSERT_TRUE(s->set_sampling(sp));
  for (const ringlm::Grammar* grammar : {&*g, &*schema}) {
    ASSERT_TRUE(s->set_grammar(grammar)) << s->error();
    std::string text;
    ringlm::Result<rlm_stop_reason> stop =
        s->generate("x", [&](std::string_view piece) { text += piece; });
    ASSERT_TRUE(stop) << stop.message();
    if (grammar == &*g) {
      EXPECT_TRUE(text == "yes" || text == "no") << text;
    } else {
      EXPECT_TRUE(text.find("\"ok\"") != std::string::npos) << text;
    }
    EXPECT_EQ(*stop, RLM_STOP_GRAMMAR) << text;
  }
  ASSERT_TRUE(s->set_grammar(nullptr));
  // Without grammar memory in the config: a named error from the session.
  ringlm::Result<ringlm::Session> plain = ringlm::Session::allocate(*model);
  ASSERT_TRUE(plain);
  ringlm::Status st = plain->set_grammar(&*g);
  EXPECT_EQ(st.code(), RLM_ERR_BAD_STATE);
  EXPECT_NE(std::string(st.message()).find("grammar_state_bytes"), std::string::npos);
}
