// Model fixtures for tests: real models converted from ../shared in memory, and small
// random-weight Llama models that need no shared data at all.
#ifndef RINGLM_TESTS_FIXTURES_H_
#define RINGLM_TESTS_FIXTURES_H_

#include <stdint.h>

#include <functional>
#include <random>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/synthetic.h"
#include "ringlm/ringlm.h"
#include "testing.h"

namespace ringlm_test {

// Converts `source` (+ llama2.c tokenizer) to model bytes in `out`. false with *err on failure.
inline bool build_model(const std::string& source, const std::string& tokenizer,
                        ringlm::internal::fb::DType quant, AlignedBuffer* out, std::string* err) {
  ringlm::internal::conv::ConvertOptions opts;
  opts.source = source;
  opts.tokenizer = tokenizer;
  opts.quant = quant;
  ringlm::internal::conv::ModelData md;
  if (!ringlm::internal::conv::load_source(opts, &md, err)) return false;
  std::vector<uint8_t> bytes;
  if (!ringlm::internal::conv::build_model_bytes(md, quant, &bytes, err)) return false;
  out->assign(bytes.data(), bytes.size());
  return true;
}

// A TensorData::load_f32 of random weights that regenerates the same values on every call:
// N(1, 0.1) for a norm weight, else N(0, 0.08), drawn from mt19937(seed) for every element of
// `shape`.
inline std::function<bool(std::vector<float>*, std::string*)> random_weights(
    std::vector<uint64_t> shape, bool norm, uint32_t seed) {
  return [shape, norm, seed](std::vector<float>* out, std::string*) {
    size_t n = 1;
    for (uint64_t d : shape) n *= d;
    std::mt19937 rng(seed);
    std::normal_distribution<float> dist(norm ? 1.0f : 0.0f, norm ? 0.1f : 0.08f);
    out->resize(n);
    for (float& v : *out) v = dist(rng);
    return true;
  };
}

struct RandomModelShape {
  uint32_t dim = 64, n_layers = 2, n_heads = 4, n_kv_heads = 2, ffn_dim = 96, max_context = 256;
  bool tied = true;
  uint32_t seed = 1234;
};

// The Llama architecture of shape `s` (head_dim = dim / n_heads); vocab_size is left to the
// caller, who makes the vocabulary.
inline ringlm::internal::conv::ModelData::Arch llama_arch(const RandomModelShape& s) {
  ringlm::internal::conv::ModelData::Arch a;
  a.n_layers = s.n_layers;
  a.dim = s.dim;
  a.n_heads = s.n_heads;
  a.n_kv_heads = s.n_kv_heads;
  a.head_dim = s.dim / s.n_heads;
  a.ffn_dim = s.ffn_dim;
  a.max_context = s.max_context;
  a.tied_embeddings = s.tied;
  return a;
}

// A random-weight Llama with a 259-token vocab: <unk>, <s>, </s>, then the 256 byte tokens
// <0x00>..<0xFF> (SentencePiece byte fallback), so any text tokenizes: byte b is token 3 + b.
inline ringlm::internal::conv::ModelData random_model_data(const RandomModelShape& s) {
  using namespace ringlm::internal;
  conv::ModelData md;
  md.arch = llama_arch(s);
  // The synthetic vocabulary at its smallest (specials and byte pieces only). No piece is the
  // concatenation of two others, so scores never decide anything: all 0. (259 is a valid size.)
  conv::TokenizerData& t = md.tokenizer;
  std::string err;
  conv::synthetic_tokenizer(3 + 256, &t, &err);
  t.scores.assign(t.pieces.size(), 0.0f);
  t.add_space_prefix = false;  // "ab" is exactly the byte tokens of 'a', 'b'
  md.arch.vocab_size = static_cast<uint32_t>(t.pieces.size());
  const uint32_t V = md.arch.vocab_size, D = s.dim, hd = D / s.n_heads;
  const uint32_t kv = s.n_kv_heads * hd, F = s.ffn_dim;
  uint32_t counter = 0;
  auto add = [&](const char* name, fb::TensorRole role, int32_t layer,
                 std::vector<uint64_t> shape, bool norm) {
    conv::TensorData td;
    td.name = std::string(name) + (layer >= 0 ? "." + std::to_string(layer) : "");
    td.role = role;
    td.layer = layer;
    td.shape = shape;
    td.load_f32 = random_weights(shape, norm, s.seed * 7919u + counter++);
    md.tensors.push_back(std::move(td));
  };
  using R = fb::TensorRole;
  add("tok_embd", R::TokenEmbedding, -1, {V, D}, false);
  for (uint32_t l = 0; l < s.n_layers; ++l) {
    const int32_t li = static_cast<int32_t>(l);
    add("attn_norm", R::AttnNorm, li, {D}, true);
    add("wq", R::Wq, li, {s.n_heads * hd, D}, false);
    add("wk", R::Wk, li, {kv, D}, false);
    add("wv", R::Wv, li, {kv, D}, false);
    add("wo", R::Wo, li, {D, s.n_heads * hd}, false);
    add("ffn_norm", R::FfnNorm, li, {D}, true);
    add("gate", R::FfnGate, li, {F, D}, false);
    add("down", R::FfnDown, li, {D, F}, false);
    add("up", R::FfnUp, li, {F, D}, false);
  }
  add("output_norm", R::OutputNorm, -1, {D}, true);
  if (!s.tied) add("output", R::Output, -1, {V, D}, false);
  md.source = "random";
  return md;
}

inline bool random_model(const RandomModelShape& s, ringlm::internal::fb::DType quant, AlignedBuffer* out,
                         std::string* err) {
  std::vector<uint8_t> bytes;
  if (!ringlm::internal::conv::build_model_bytes(random_model_data(s), quant, &bytes, err)) return false;
  out->assign(bytes.data(), bytes.size());
  return true;
}

// Model bytes and the model opened over them (the model points into `bytes`: they go together).
struct OpenedModel {
  AlignedBuffer bytes;
  rlm_model model;
  // Opens `model` over `bytes`; false with *err = "<status>: <model error>" when it does not.
  bool open(std::string* err) {
    const rlm_status st = rlm_model_open(bytes.data(), bytes.size(), &model);
    if (st != RLM_OK) {
      *err = std::string(rlm_status_string(st)) + ": " + rlm_model_error(&model);
      return false;
    }
    return true;
  }
};

// build_model, then OpenedModel::open. false with *err on failure.
inline bool open_built_model(const std::string& source, const std::string& tokenizer,
                             ringlm::internal::fb::DType quant, OpenedModel* out, std::string* err) {
  return build_model(source, tokenizer, quant, &out->bytes, err) && out->open(err);
}

// random_model, then OpenedModel::open. false with *err on failure.
inline bool open_random_model(const RandomModelShape& s, ringlm::internal::fb::DType quant,
                              OpenedModel* out, std::string* err) {
  return random_model(s, quant, &out->bytes, err) && out->open(err);
}

// stories260K (../shared's llama2.c checkpoint with its tok512 tokenizer) converted in memory to
// `quant` and opened. false with *err empty when ../shared does not have the files; false with
// *err set when they do not convert or open.
inline bool open_stories260k(ringlm::internal::fb::DType quant, OpenedModel* out, std::string* err) {
  const std::string bin = shared_path("models/stories260K/stories260K.bin");
  const std::string tok = shared_path("models/stories260K/tok512.bin");
  err->clear();
  if (bin.empty() || tok.empty()) return false;
  return open_built_model(bin, tok, quant, out, err);
}

// llama2.c's greedy continuation of "Once upon a time" with stories260K: ../shared's
// references/stories260K/once-upon-a-time.greedy.txt (prompt, continuation, "\n") without the
// prompt and the trailing newlines. "" when the file is absent or does not start with the prompt.
inline std::string stories260k_greedy_continuation() {
  std::string ref;
  const std::string path = shared_path("references/stories260K/once-upon-a-time.greedy.txt");
  if (path.empty() || !read_file(path, &ref)) return "";
  while (!ref.empty() && ref.back() == '\n') ref.pop_back();
  const std::string prompt = "Once upon a time";
  return ref.compare(0, prompt.size(), prompt) == 0 ? ref.substr(prompt.size()) : "";
}

// A session in a vector-backed 64-aligned block, for tests.
struct TestSession {
  AlignedBuffer mem;
  rlm_session* s = nullptr;
  size_t bytes = 0;
  TestSession() = default;
  TestSession(const TestSession&) = delete;
  TestSession& operator=(const TestSession&) = delete;
  // Worker threads (n_threads > 1) run on this memory: stop them before it is freed. Releasing
  // an already released handle again is harmless (RLM_OK).
  ~TestSession() {
    if (s) rlm_session_release(s);
  }
  rlm_status init(const rlm_model* m, const rlm_session_config& cfg) {
    size_t align = 0;
    rlm_status st = rlm_session_memory(m, &cfg, &bytes, &align);
    if (st != RLM_OK) return st;
    mem.resize(bytes);
    return rlm_session_init(m, &cfg, mem.data(), bytes, &s);
  }
};

// Greedy generation from a fresh session state: feeds `prompt`, steps until a stop or `max`.
// Returns the concatenated text; `tokens` (optional) gets the sampled ids.
inline std::string greedy(rlm_session* s, const std::string& prompt, uint32_t max,
                          std::vector<int32_t>* tokens = nullptr,
                          rlm_stop_reason* stop = nullptr) {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  rlm_session_set_sampling(s, &sp);
  rlm_session_set_max_tokens(s, max);
  std::string text;
  if (rlm_session_feed_text(s, prompt.data(), prompt.size()) != RLM_OK) return "<feed failed>";
  rlm_step_result r;
  rlm_step_result_default(&r);
  for (;;) {
    if (rlm_step(s, &r) != RLM_OK) return text + "<step failed>";
    text.append(r.text, r.text_len);
    if (tokens) tokens->push_back(r.token);
    if (r.stop != RLM_STOP_NONE) break;
  }
  if (stop) *stop = r.stop;
  return text;
}

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_FIXTURES_H_
