// Real model families end to end (issue #6): a random-weight checkpoint in each family's real
// tensor layout is written both as a Hugging Face directory and as the GGUF llama.cpp would make
// of it (tests/model_writers.h), converted with load_source + build_model_bytes, opened with
// rlm_model_open, and run: 48 greedy steps after a 24-token prompt, the runtime's logits before
// every step compared with a float64 reference forward pass written from the HF modeling code
// (tests/reference_forward.cc) on the same token sequence.
//
// Shapes: each family's real config (../shared/configs/* where present, else the same values
// inline; Gemma 2 and Phi-3 written here from Gemma-2-2B and Phi-3-mini-4k) with these
// reductions, so the whole file runs in seconds (also under ASan and qemu):
//   every family: num_hidden_layers 2 (Gemma 2: 4, Gemma 3: 6 = one full sliding_window_pattern),
//                 vocab_size 512, hidden_size / intermediate_size / head counts reduced as listed
//                 in kFamilies (head_dim and the GQA ratio kept);
//   sliding windows: Gemma 2 and Gemma 3 16 (real 4096 / 512), Phi-3 32 (real 2047), so
//                 24 + 48 tokens cross them, in prefill and in decode;
//   Llama 3.2: rope_scaling as published for Llama 3.2 (llama3, factor 32, 1 / 4, 8192),
//                 which the shared config omits; Gemma 3: rope_scaling linear factor 8 (as the
//                 4B+ models; the 1B's is factor 1), applied to its global layer only.
// Tolerance per position: max |Δ| <= 1e-3 * max |reference logit| + 1e-4 (f32 model, f32 KV).
#include <math.h>
#include <stdio.h>
#include <time.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/synthetic.h"
#include "fixtures.h"
#include "gtest/gtest.h"
#include "model_writers.h"
#include "reference_forward.h"
#include "ringlm/ringlm.h"
#include "testing.h"

namespace {

using namespace ringlm::internal;
using conv::ModelData;
using json = nlohmann::json;
using ringlm_test::open_built_model;
using ringlm_test::OpenedModel;

constexpr uint32_t kPrompt = 24;
constexpr uint32_t kSteps = 48;
constexpr uint32_t kVocab = 512;

double now_s() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

struct Family {
  const char* name;
  const char* shared;    // ../shared/configs/<dir>/config.json, or nullptr
  const char* fallback;  // the real config's relevant values, when shared is absent / null
  const char* reduce;    // JSON merged over the config
  fb::Family family;
  std::vector<bool> local;  // expected layer_is_local after conversion (empty: none)
  ringlm_test::WeightScales scales;
};

// Tied models read logits off the embedding: a small embedding keeps the residual stream from
// being the input token's own row (which would make every step repeat it).
// Random nets tend to settle into repeating one token under greedy decoding; sharper attention
// (q/k gain, or (1 + w) of the QK-norms) keeps the argmax moving.
ringlm_test::WeightScales scales(float embed, float qk_gain, float final_norm_mean = 0.0f,
                                 float qk_norm_mean = 0.0f, float bias = 0.5f) {
  ringlm_test::WeightScales s;
  s.embed = embed;
  s.qk_gain = qk_gain;
  s.final_norm_mean = final_norm_mean;
  s.qk_norm_mean = qk_norm_mean;
  s.bias = bias;
  return s;
}

const std::vector<Family>& families() {
  static const std::vector<Family> f = {
      {"llama3", "Llama-3.2-1B-Instruct",
       R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","head_dim":64,
           "hidden_size":2048,"intermediate_size":8192,"max_position_embeddings":131072,
           "num_attention_heads":32,"num_hidden_layers":16,"num_key_value_heads":8,
           "rms_norm_eps":1e-05,"rope_theta":500000.0,"tie_word_embeddings":true,
           "vocab_size":128256})",
       R"({"num_hidden_layers":2,"hidden_size":256,"intermediate_size":1024,
           "num_attention_heads":4,"num_key_value_heads":1,"vocab_size":512,
           "rope_scaling":{"factor":32.0,"high_freq_factor":4.0,"low_freq_factor":1.0,
                           "original_max_position_embeddings":8192,"rope_type":"llama3"}})",
       fb::Family::Llama, {}, scales(0.1f, 1.5f)},
      {"smollm2", "SmolLM2-135M",
       R"({"architectures":["LlamaForCausalLM"],"model_type":"llama","hidden_size":576,
           "intermediate_size":1536,"max_position_embeddings":8192,"num_attention_heads":9,
           "num_hidden_layers":30,"num_key_value_heads":3,"rms_norm_eps":1e-05,
           "rope_theta":100000,"tie_word_embeddings":true,"vocab_size":49152})",
       R"({"num_hidden_layers":2,"hidden_size":192,"intermediate_size":512,
           "num_attention_heads":3,"num_key_value_heads":1,"vocab_size":512})",
       fb::Family::Llama, {}, scales(0.1f, 1.5f)},
      {"qwen2.5", "Qwen2.5-0.5B-Instruct",
       R"({"architectures":["Qwen2ForCausalLM"],"model_type":"qwen2","hidden_size":896,
           "intermediate_size":4864,"max_position_embeddings":32768,"max_window_layers":21,
           "num_attention_heads":14,"num_hidden_layers":24,"num_key_value_heads":2,
           "rms_norm_eps":1e-06,"rope_theta":1000000.0,"sliding_window":32768,
           "tie_word_embeddings":true,"use_sliding_window":false,"vocab_size":151936})",
       R"({"num_hidden_layers":2,"hidden_size":448,"intermediate_size":768,
           "num_attention_heads":7,"num_key_value_heads":1,"vocab_size":512})",
       fb::Family::Qwen2, {}, scales(0.1f, 3.0f, 0.0f, 0.0f, 0.2f)},
      {"qwen3", "Qwen3-1.7B",
       R"({"architectures":["Qwen3ForCausalLM"],"model_type":"qwen3","head_dim":128,
           "hidden_size":2048,"intermediate_size":6144,"max_position_embeddings":40960,
           "num_attention_heads":16,"num_hidden_layers":28,"num_key_value_heads":8,
           "rms_norm_eps":1e-06,"rope_theta":1000000,"sliding_window":null,
           "tie_word_embeddings":true,"use_sliding_window":false,"vocab_size":151936})",
       R"({"num_hidden_layers":2,"hidden_size":256,"intermediate_size":768,
           "num_attention_heads":4,"num_key_value_heads":2,"vocab_size":512})",
       fb::Family::Qwen3, {}, scales(0.1f, 1.5f, 0.0f, 1.0f)},
      {"gemma2", nullptr,
       // Gemma-2-2B's config.
       R"({"architectures":["Gemma2ForCausalLM"],"model_type":"gemma2",
           "attn_logit_softcapping":50.0,"final_logit_softcapping":30.0,"head_dim":256,
           "hidden_activation":"gelu_pytorch_tanh","hidden_size":2304,
           "intermediate_size":9216,"max_position_embeddings":8192,"num_attention_heads":8,
           "num_hidden_layers":26,"num_key_value_heads":4,"query_pre_attn_scalar":256,
           "rms_norm_eps":1e-06,"rope_theta":10000.0,"sliding_window":4096,
           "vocab_size":256000})",
       R"({"num_hidden_layers":4,"hidden_size":128,"intermediate_size":384,
           "num_attention_heads":2,"num_key_value_heads":1,"vocab_size":512,
           "sliding_window":16})",
       fb::Family::Gemma2, {true, false, true, false}, scales(0.09f, 3.0f, 9.0f)},
      {"gemma3", "gemma3_1b_it",
       R"({"architectures":["Gemma3ForCausalLM"],"model_type":"gemma3","head_dim":256,
           "hidden_activation":"gelu_pytorch_tanh","hidden_size":1152,
           "intermediate_size":6912,"max_position_embeddings":32768,"num_attention_heads":4,
           "num_hidden_layers":26,"num_key_value_heads":1,"query_pre_attn_scalar":256,
           "rms_norm_eps":1e-06,"rope_local_base_freq":10000,"rope_theta":1000000,
           "rope_scaling":{"factor":1.0,"type":"linear"},
           "sliding_window_attention_size":512,"sliding_window_pattern":6,
           "vocab_size":262144})",
       R"({"num_hidden_layers":6,"hidden_size":128,"intermediate_size":384,
           "num_attention_heads":4,"num_key_value_heads":1,"vocab_size":512,
           "sliding_window_attention_size":16,
           "rope_scaling":{"factor":8.0,"rope_type":"linear"}})",
       fb::Family::Gemma3, {true, true, true, true, true, false}, scales(0.09f, 1.5f, 2.0f, 2.0f)},
      {"phi3", nullptr,
       // Phi-3-mini-4k-instruct's config.
       R"({"architectures":["Phi3ForCausalLM"],"model_type":"phi3","hidden_act":"silu",
           "hidden_size":3072,"intermediate_size":8192,"max_position_embeddings":4096,
           "original_max_position_embeddings":4096,"num_attention_heads":32,
           "num_hidden_layers":32,"num_key_value_heads":32,"rms_norm_eps":1e-05,
           "rope_scaling":null,"rope_theta":10000.0,"sliding_window":2047,
           "tie_word_embeddings":false,"vocab_size":32064})",
       R"({"num_hidden_layers":2,"hidden_size":192,"intermediate_size":512,
           "num_attention_heads":2,"num_key_value_heads":2,"vocab_size":512,
           "sliding_window":32})",
       fb::Family::Phi3, {true, true}, scales(1.0f, 1.5f)},
  };
  return f;
}

json family_config(const Family& f) {
  json c;
  const std::string shared =
      f.shared ? ringlm_test::shared_path(std::string("configs/") + f.shared + "/config.json") : "";
  std::string text;
  if (!shared.empty() && ringlm_test::read_file(shared, &text)) c = json::parse(text);
  else c = json::parse(f.fallback);
  c.merge_patch(json::parse(f.reduce));
  c["bos_token_id"] = 1;
  c["eos_token_id"] = 2;
  return c;
}

std::vector<int32_t> prompt_ids(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<int32_t> p(kPrompt);
  for (int32_t& t : p) t = static_cast<int32_t>(3 + rng() % (kVocab - 3));
  return p;
}

// One family's checkpoint on disk, both ways.
struct Written {
  json config;
  ModelData ckpt;
  std::string hf_dir, gguf_path;
};

Written write_family(const Family& f, uint32_t seed) {
  static std::map<std::pair<std::string, uint32_t>, Written> cache;
  auto it = cache.find({f.name, seed});
  if (it != cache.end()) return it->second;
  Written& w = cache[{f.name, seed}];
  w.config = family_config(f);
  w.ckpt = ringlm_test::random_hf_checkpoint(w.config, f.scales, seed);
  const conv::TokenizerData vocab = ringlm_test::simple_vocab(kVocab);
  w.hf_dir = ringlm_test::temp_dir();
  EXPECT_TRUE(ringlm_test::write_hf_dir(w.hf_dir, w.config, w.ckpt, vocab));
  w.gguf_path = ringlm_test::temp_dir() + "/" + f.name + ".gguf";
  EXPECT_TRUE(ringlm_test::write_bytes(w.gguf_path, ringlm_test::gguf_from_hf(w.config, w.ckpt, vocab)));
  return w;
}

rlm_session_config session_config() {
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = 128;  // > 24 + 48: the global ring never wraps (the reference has no ring)
  c.kv_dtype = RLM_KV_F32;  // the float64 reference keeps keys and values unrounded
  return c;
}

// Greedy generation: the raw logits before each step (rlm_session_eval) and the sampled ids.
bool run_greedy(const rlm_model* m, const std::vector<int32_t>& prompt,
                std::vector<std::vector<float>>* logits, std::vector<int32_t>* ids,
                std::string* err) {
  ringlm_test::TestSession ts;
  if (ts.init(m, session_config()) != RLM_OK) return *err = "session init failed", false;
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  rlm_session_set_sampling(ts.s, &sp);
  rlm_session_set_ignore_eos(ts.s, 1);
  rlm_session_set_max_tokens(ts.s, 0);
  if (rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()) != RLM_OK)
    return *err = "feed failed", false;
  for (uint32_t i = 0; i < kSteps; ++i) {
    if (rlm_session_eval(ts.s) != RLM_OK) return *err = rlm_session_error(ts.s), false;
    const float* lp = nullptr;
    size_t n = 0;
    if (rlm_session_logits(ts.s, &lp, &n) != RLM_OK) return *err = "logits failed", false;
    logits->emplace_back(lp, lp + n);
    rlm_step_result r;
    rlm_step_result_default(&r);
    if (rlm_step(ts.s, &r) != RLM_OK) return *err = rlm_session_error(ts.s), false;
    ids->push_back(r.token);
  }
  rlm_session_release(ts.s);
  return true;
}

// Teacher-forced: the logits at each position of `seq` from `first` on (first + count <= size).
bool run_forced(const rlm_model* m, const std::vector<int32_t>& seq, size_t first, size_t count,
                std::vector<std::vector<float>>* logits, std::string* err) {
  ringlm_test::TestSession ts;
  if (ts.init(m, session_config()) != RLM_OK) return *err = "session init failed", false;
  if (rlm_session_feed_tokens(ts.s, seq.data(), first + 1) != RLM_OK) return *err = "feed", false;
  for (size_t i = 0; i < count; ++i) {
    if (i > 0 && rlm_session_feed_tokens(ts.s, &seq[first + i], 1) != RLM_OK)
      return *err = "feed", false;
    if (rlm_session_eval(ts.s) != RLM_OK) return *err = rlm_session_error(ts.s), false;
    const float* lp = nullptr;
    size_t n = 0;
    if (rlm_session_logits(ts.s, &lp, &n) != RLM_OK) return *err = "logits failed", false;
    logits->emplace_back(lp, lp + n);
  }
  rlm_session_release(ts.s);
  return true;
}

struct Compare {
  double max_abs = 0;     // max over positions of max |Δ|
  double max_rel = 0;     // max over positions of max |Δ| / max |reference|
  bool within = true;     // every position within tolerance
  uint32_t argmax_equal = 0;
  bool finite = true;
};

size_t argmax(const std::vector<double>& v) {
  return static_cast<size_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

Compare compare(const std::vector<std::vector<float>>& got,
                const std::vector<std::vector<double>>& ref) {
  Compare c;
  for (size_t p = 0; p < got.size() && p < ref.size(); ++p) {
    double scale = 0, worst = 0;
    for (double x : ref[p]) scale = std::max(scale, fabs(x));
    for (size_t i = 0; i < ref[p].size(); ++i) {
      if (!std::isfinite(got[p][i])) c.finite = false;
      worst = std::max(worst, fabs(static_cast<double>(got[p][i]) - ref[p][i]));
    }
    c.max_abs = std::max(c.max_abs, worst);
    c.max_rel = std::max(c.max_rel, worst / scale);
    if (!(worst <= 1e-3 * scale + 1e-4)) c.within = false;
    size_t g = static_cast<size_t>(std::max_element(got[p].begin(), got[p].end()) - got[p].begin());
    c.argmax_equal += g == argmax(ref[p]);
  }
  return c;
}

class FamilyTest : public ::testing::TestWithParam<size_t> {};

// The converted architecture: what each family must turn into, the same from HF and GGUF
// (rope_style and the form of Llama 3 scaling aside).
TEST_P(FamilyTest, ConvertsToTheFamilysArchitecture) {
  const Family& f = families()[GetParam()];
  const Written w = write_family(f, 11);
  ModelData hf, gg;
  std::string err;
  conv::ConvertOptions o;
  o.source = w.hf_dir;
  ASSERT_TRUE(conv::load_source(o, &hf, &err)) << err;
  o.source = w.gguf_path;
  ASSERT_TRUE(conv::load_source(o, &gg, &err)) << err;
  const auto& c = w.config;
  for (const ModelData* m : {&hf, &gg}) {
    SCOPED_TRACE(m == &hf ? "HF" : "GGUF");
    const auto& a = m->arch;
    EXPECT_EQ(a.family, f.family);
    EXPECT_EQ(a.n_layers, c["num_hidden_layers"].get<uint32_t>());
    EXPECT_EQ(a.dim, c["hidden_size"].get<uint32_t>());
    EXPECT_EQ(a.n_heads, c["num_attention_heads"].get<uint32_t>());
    EXPECT_EQ(a.n_kv_heads, c["num_key_value_heads"].get<uint32_t>());
    EXPECT_EQ(a.head_dim, ringlm_test::hf_dims(c).hd);
    EXPECT_EQ(a.vocab_size, kVocab);
    EXPECT_FLOAT_EQ(a.rope_theta, c["rope_theta"].get<float>());
    EXPECT_EQ(a.tied_embeddings, ringlm_test::hf_dims(c).tied);
    const bool gemma = f.family == fb::Family::Gemma2 || f.family == fb::Family::Gemma3;
    EXPECT_EQ(a.activation, gemma ? fb::Activation::GeluTanh : fb::Activation::SiLU);
    EXPECT_EQ(a.qkv_bias, f.family == fb::Family::Qwen2);
    EXPECT_EQ(a.qk_norm, f.family == fb::Family::Qwen3 || f.family == fb::Family::Gemma3);
    EXPECT_FLOAT_EQ(a.embedding_scale, gemma ? sqrtf(static_cast<float>(a.dim)) : 1.0f);
    EXPECT_FLOAT_EQ(a.attn_logit_softcap, f.family == fb::Family::Gemma2 ? 50.0f : 0.0f);
    EXPECT_FLOAT_EQ(a.final_logit_softcap, f.family == fb::Family::Gemma2 ? 30.0f : 0.0f);
    if (gemma) EXPECT_FLOAT_EQ(a.query_pre_attn_scalar, 256.0f);
    EXPECT_EQ(a.layer_is_local, f.local);
    if (!f.local.empty()) {
      EXPECT_EQ(a.sliding_window, f.family == fb::Family::Phi3 ? 32u : 16u);
      EXPECT_LT(a.sliding_window + 8, kPrompt + kSteps);  // the run crosses the window
    }
    EXPECT_FLOAT_EQ(a.rope_theta_local, f.family == fb::Family::Gemma3 ? 10000.0f : 0.0f);
    const bool gguf_llama = m == &gg && f.family == fb::Family::Llama;
    EXPECT_EQ(a.rope_style, gguf_llama ? fb::RopeStyle::Interleaved : fb::RopeStyle::Neox);
    bool has_freqs = false;
    for (const auto& t : m->tensors) has_freqs |= t.role == fb::TensorRole::RopeFreqs;
    if (std::string(f.name) == "llama3") {
      // HF: the llama3 rule; GGUF: llama.cpp's rope_freqs divisors instead.
      EXPECT_EQ(a.rope_scaling, m == &hf ? fb::RopeScaling::Llama3 : fb::RopeScaling::None);
      EXPECT_EQ(has_freqs, m == &gg);
      if (m == &hf) {
        EXPECT_FLOAT_EQ(a.rope_scaling_factor, 32.0f);
        EXPECT_FLOAT_EQ(a.rope_low_freq_factor, 1.0f);
        EXPECT_FLOAT_EQ(a.rope_high_freq_factor, 4.0f);
        EXPECT_EQ(a.rope_original_context, 8192u);
      }
    } else if (f.family == fb::Family::Gemma3) {
      EXPECT_EQ(a.rope_scaling, fb::RopeScaling::Linear);
      EXPECT_FLOAT_EQ(a.rope_scaling_factor, 8.0f);
    } else {
      EXPECT_EQ(a.rope_scaling, fb::RopeScaling::None);
      EXPECT_FALSE(has_freqs);
    }
  }
  // The reference reads the same layer kinds from the config.
  ringlm_test::ReferenceInfo info;
  std::vector<std::vector<double>> lg;
  ASSERT_TRUE(ringlm_test::reference_forward(w.config, w.ckpt, {5, 6}, 1, &lg, &err, &info)) << err;
  const bool any_local = std::find(info.layer_is_local.begin(), info.layer_is_local.end(), true) !=
                         info.layer_is_local.end();
  EXPECT_EQ(any_local ? info.layer_is_local : std::vector<bool>{}, f.local);
}

// The converted model runs like the float64 reference, from both sources.
TEST_P(FamilyTest, GreedyRunMatchesFloat64Reference) {
  const Family& f = families()[GetParam()];
  const double t0 = now_s();
  const Written w = write_family(f, 11);
  const std::vector<int32_t> prompt = prompt_ids(100 + static_cast<uint32_t>(GetParam()));
  std::map<std::vector<int32_t>, std::vector<std::vector<double>>> ref_cache;
  auto reference = [&](const std::vector<int32_t>& seq) -> const std::vector<std::vector<double>>& {
    auto it = ref_cache.find(seq);
    if (it != ref_cache.end()) return it->second;
    std::vector<std::vector<double>> lg;
    std::string err;
    EXPECT_TRUE(ringlm_test::reference_forward(w.config, w.ckpt, seq, kPrompt - 1, &lg, &err)) << err;
    return ref_cache[seq] = lg;
  };
  std::vector<int32_t> f32_seq;  // the HF f32 run's sequence (teacher-forced runs reuse it)
  for (const char* src : {"HF", "GGUF"}) {
    SCOPED_TRACE(src);
    const std::string path = std::string(src) == "HF" ? w.hf_dir : w.gguf_path;
    OpenedModel o;
    std::string err;
    ASSERT_TRUE(open_built_model(path, "", fb::DType::F32, &o, &err)) << err;
    std::vector<std::vector<float>> logits;
    std::vector<int32_t> ids;
    ASSERT_TRUE(run_greedy(&o.model, prompt, &logits, &ids, &err)) << err;
    std::vector<int32_t> seq = prompt;
    seq.insert(seq.end(), ids.begin(), ids.end() - 1);  // positions kPrompt - 1 .. + 47 run
    if (f32_seq.empty()) f32_seq = seq;
    const auto& ref = reference(seq);
    ASSERT_EQ(ref.size(), kSteps);
    const Compare c = compare(logits, ref);
    EXPECT_TRUE(c.finite);
    EXPECT_TRUE(c.within) << "max |dlogit| " << c.max_abs << " (relative " << c.max_rel << ")";
    // Greedy ids: the reference's argmax, unless the reference has a near-tie there.
    uint32_t ids_equal = 0;
    std::set<int32_t> distinct;
    for (uint32_t i = 0; i < kSteps; ++i) {
      const size_t best = argmax(ref[i]);
      ids_equal += static_cast<size_t>(ids[i]) == best;
      double scale = 0;
      for (double x : ref[i]) scale = std::max(scale, fabs(x));
      EXPECT_GE(ref[i][ids[i]], ref[i][best] - (1e-3 * scale + 1e-4)) << "step " << i;
      distinct.insert(ids[i]);
    }
    EXPECT_GE(distinct.size(), 4u) << "degenerate logits: the argmax barely changes";
    printf("[family] %-8s %-4s f32: max|dlogit| %.3g  relative %.3g  greedy ids equal %u/%u  "
           "distinct ids %zu\n",
           f.name, src, c.max_abs, c.max_rel, ids_equal, kSteps, distinct.size());
  }
  // f16 / q8 from both sources, teacher-forced on the f32 run's tokens: finite, same first token
  // as the reference (measured deviations printed, not asserted). Under qemu from HF only: the
  // GGUF reader is host logic the f32 run above and the host suites check, and the f16 / q8
  // kernels are the same for both sources.
  for (const char* src : {"HF", "GGUF"}) {
    if (ringlm_test::emulated() && std::string(src) == "GGUF") continue;
    for (fb::DType q : {fb::DType::F16, fb::DType::Q8}) {
      SCOPED_TRACE(std::string(src) + " " + conv::dtype_name(q));
      const std::string source = std::string(src) == "HF" ? w.hf_dir : w.gguf_path;
      OpenedModel o;
      std::string err;
      ASSERT_TRUE(open_built_model(source, "", q, &o, &err)) << err;
      std::vector<std::vector<float>> logits;
      ASSERT_TRUE(run_forced(&o.model, f32_seq, kPrompt - 1, kSteps, &logits, &err)) << err;
      const auto& ref = reference(f32_seq);
      const Compare c = compare(logits, ref);
      EXPECT_TRUE(c.finite);
      // Same first token as the reference, unless the reference's top two are closer than the
      // quantized model's measured error there (then either is a faithful answer).
      const size_t first = static_cast<size_t>(
          std::max_element(logits[0].begin(), logits[0].end()) - logits[0].begin());
      std::vector<double> top = ref[0];
      std::partial_sort(top.begin(), top.begin() + 2, top.end(), std::greater<double>());
      double err0 = 0;
      for (size_t i = 0; i < ref[0].size(); ++i)
        err0 = std::max(err0, fabs(logits[0][i] - ref[0][i]));
      if (top[0] - top[1] > 2 * err0) EXPECT_EQ(first, argmax(ref[0]));
      else EXPECT_GE(ref[0][first], top[0] - 2 * err0);
      printf("[family] %-8s %-4s %s: max|dlogit| %.3g  relative %.3g  argmax equal %u/%u\n",
             f.name, src, conv::dtype_name(q), c.max_abs, c.max_rel, c.argmax_equal, kSteps);
    }
  }
  printf("[family] %-8s %.2f s\n", f.name, now_s() - t0);
}

// Speculative decoding in every family (#14): with sliding-window layers (Gemma 2/3: 16-position
// windows, Phi-3: 32) whose rings wrap every few tokens, a 48-slot global ring that wraps too,
// biases, qk-norm and soft-caps: prompt lookup and a self-draft give the plain greedy tokens.
TEST_P(FamilyTest, SpeculativeDecodingMatchesPlain) {
  const Family& f = families()[GetParam()];
  const Written w = write_family(f, 11);
  OpenedModel o;
  std::string err;
  ASSERT_TRUE(open_built_model(w.hf_dir, "", fb::DType::Q8, &o, &err)) << err;
  std::vector<int32_t> prompt = prompt_ids(300 + static_cast<uint32_t>(GetParam()));
  prompt.insert(prompt.end(), prompt.begin(), prompt.end());  // repeats: lookup finds matches
  auto run = [&](int mode, std::vector<int32_t>* ids, uint64_t* accepted) {
    rlm_session_config c = session_config();
    c.n_ctx = 48;
    c.max_draft = mode ? 6 : 0;
    ringlm_test::TestSession ts, draft;
    ASSERT_EQ(ts.init(&o.model, c), RLM_OK);
    if (mode) {
      rlm_speculation spec;
      rlm_speculation_default(&spec);
      spec.ngram_min = 1;
      if (mode == 1) {
        spec.mode = RLM_SPEC_LOOKUP;
      } else {
        ASSERT_EQ(draft.init(&o.model, c), RLM_OK);
        spec.mode = RLM_SPEC_DRAFT_MODEL;
        spec.draft = draft.s;
        spec.p_min = 0.0f;
      }
      ASSERT_EQ(rlm_session_set_speculation(ts.s, &spec), RLM_OK) << rlm_session_error(ts.s);
    }
    rlm_sampling sp;
    rlm_sampling_default(&sp);
    sp.temperature = 0.0f;
    rlm_session_set_sampling(ts.s, &sp);
    rlm_session_set_ignore_eos(ts.s, 1);
    rlm_session_set_max_tokens(ts.s, 120);
    ASSERT_EQ(rlm_session_feed_tokens(ts.s, prompt.data(), prompt.size()), RLM_OK);
    rlm_step_result r;
    rlm_step_result_default(&r);
    do {
      ASSERT_EQ(rlm_step(ts.s, &r), RLM_OK) << rlm_session_error(ts.s);
      ids->push_back(r.token);
    } while (r.stop == RLM_STOP_NONE);
    rlm_spec_stats st;
    rlm_spec_stats_default(&st);
    rlm_session_spec_stats(ts.s, &st);
    *accepted = st.accepted;
  };
  std::vector<int32_t> plain, lookup, self;
  uint64_t a0 = 0, a1 = 0, a2 = 0;
  run(0, &plain, &a0);
  run(1, &lookup, &a1);
  run(2, &self, &a2);
  ASSERT_EQ(plain.size(), 120u);
  EXPECT_EQ(lookup, plain);
  EXPECT_EQ(self, plain);
  EXPECT_GT(a2, 0u) << "a self-draft accepts its greedy tokens";
}

INSTANTIATE_TEST_SUITE_P(Families, FamilyTest, ::testing::Range<size_t>(0, 7),
                         [](const ::testing::TestParamInfo<size_t>& i) {
                           std::string n = families()[i.param].name;
                           for (char& ch : n)
                             if (!isalnum(static_cast<unsigned char>(ch))) ch = '_';
                           return n;
                         });

// ---- unsupported inputs name what is unsupported ------------------------------------------

// The message of converting `source`, which must fail.
std::string load_error(const std::string& source) {
  conv::ConvertOptions o;
  o.source = source;
  ModelData md;
  std::string err;
  EXPECT_FALSE(conv::load_source(o, &md, &err)) << source;
  return err;
}

struct Refusal {
  const char* what;
  size_t family;      // base config (index into families())
  const char* patch;  // merged over the reduced config
  const char* expect; // substring of the error
};

TEST(FamilyRefusals, HuggingFaceOptionsTheRuntimeDoesNotRun) {
  const Refusal cases[] = {
      {"partial rotary", 6, R"({"partial_rotary_factor":0.75})", "partial_rotary_factor"},
      {"longrope", 6,
       R"({"rope_scaling":{"type":"longrope","long_factor":[1],"short_factor":[1]}})",
       "longrope"},
      {"su", 6, R"({"rope_scaling":{"type":"su","long_factor":[1],"short_factor":[1]}})", "'su'"},
      {"yarn", 0, R"({"rope_scaling":{"rope_type":"yarn","factor":4.0}})", "yarn"},
      {"moe", 2, R"({"num_experts":8})", "mixture-of-experts"},
      {"moe2", 0, R"({"num_local_experts":8})", "num_local_experts"},
      {"llama bias", 0, R"({"attention_bias":true})", "attention_bias"},
      {"mlp bias", 0, R"({"mlp_bias":true})", "mlp_bias"},
      {"unknown", 0, R"({"model_type":"gpt_neox","architectures":["GPTNeoXForCausalLM"]})",
       "gpt_neox"},
      {"unknown2", 0, R"({"model_type":"mixtral","architectures":["MixtralForCausalLM"]})",
       "mixtral"},
      {"gelu exact", 4, R"({"hidden_activation":"gelu"})", "'gelu'"},
      {"multimodal gemma3", 5, R"({"text_config":{"hidden_size":128}})", "multimodal"},
  };
  for (const Refusal& r : cases) {
    SCOPED_TRACE(r.what);
    // The config is read (and refused) before any weight: a directory with only config.json.
    json c = family_config(families()[r.family]);
    c.merge_patch(json::parse(r.patch));
    const std::string dir = ringlm_test::temp_dir();
    ASSERT_TRUE(ringlm_test::write_bytes(dir + "/config.json", c.dump()));
    const std::string err = load_error(dir);
    EXPECT_NE(err.find(r.expect), std::string::npos) << err;
    EXPECT_NE(err.find("config.json"), std::string::npos) << err;
  }
}

TEST(FamilyRefusals, MissingFamilyTensorsAreNamed) {
  // A Qwen2 checkpoint without its q bias; a Gemma 3 one without k_norm.
  for (const auto& c : {std::make_pair(size_t{2}, "model.layers.1.self_attn.q_proj.bias"),
                        std::make_pair(size_t{5}, "model.layers.0.self_attn.k_norm.weight")}) {
    const Family& f = families()[c.first];
    json cfg = family_config(f);
    ModelData ck = ringlm_test::random_hf_checkpoint(cfg, f.scales, 1);
    ck.tensors.erase(std::remove_if(ck.tensors.begin(), ck.tensors.end(),
                                    [&](const conv::TensorData& t) { return t.name == c.second; }),
                     ck.tensors.end());
    const std::string dir = ringlm_test::temp_dir();
    ASSERT_TRUE(ringlm_test::write_hf_dir(dir, cfg, ck, ringlm_test::simple_vocab(kVocab)));
    const std::string err = load_error(dir);
    EXPECT_NE(err.find(c.second), std::string::npos) << err;
  }
}

TEST(FamilyRefusals, GgufOptionsTheRuntimeDoesNotRun) {
  // Patch a valid GGUF's metadata by rebuilding it with one extra key or tensor.
  const conv::TokenizerData vocab = ringlm_test::simple_vocab(kVocab);
  auto expect_refused = [&](const std::string& file, const std::string& what) {
    const std::string path = ringlm_test::temp_dir() + "/x.gguf";
    ASSERT_TRUE(ringlm_test::write_bytes(path, file));
    const std::string err = load_error(path);
    EXPECT_NE(err.find(what), std::string::npos) << err;
  };
  // A one-layer GGUF of `arch` with the dimensions the reader checks first; the caller adds the
  // refused option, then the vocabulary.
  auto gguf = [](const std::string& arch, uint32_t dim, uint32_t ffn, uint32_t heads) {
    ringlm_test::GgufWriter gw;
    gw.kv_str("general.architecture", arch);
    gw.kv_u32(arch + ".block_count", 1);
    gw.kv_u32(arch + ".embedding_length", dim);
    gw.kv_u32(arch + ".feed_forward_length", ffn);
    gw.kv_u32(arch + ".attention.head_count", heads);
    return gw;
  };
  {
    // Phi-3 128k: LongRoPE factor tensors.
    ringlm_test::GgufWriter gw = gguf("phi3", 192, 512, 2);
    gw.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
    gw.tensor("rope_factors_long.weight", {48}, ringlm_test::GgufWriter::kF32,
              std::string(48 * 4, '\0'));
    expect_refused(gw.finish(), "LongRoPE");
  }
  {
    ringlm_test::GgufWriter gw = gguf("llama", 64, 128, 2);
    gw.kv_str("llama.rope.scaling.type", "yarn");
    gw.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
    expect_refused(gw.finish(), "yarn");
  }
  {
    ringlm_test::GgufWriter gw;
    gw.kv_str("general.architecture", "qwen2moe");
    gw.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
    expect_refused(gw.finish(), "'qwen2moe'");
  }
  {
    ringlm_test::GgufWriter gw = gguf("phi3", 3072, 8192, 32);
    gw.kv_u32("phi3.rope.dimension_count", 48);  // partial rotary
    gw.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
    expect_refused(gw.finish(), "partial rotary");
  }
  {
    ringlm_test::GgufWriter gw = gguf("llama", 64, 128, 2);
    gw.kv_u32("llama.expert_count", 8);
    gw.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
    expect_refused(gw.finish(), "mixture-of-experts");
  }
}

// ---- synthetic models are the real family ---------------------------------------------------

TEST(FamilySynthetic, SharedConfigsBuildTheirFamilyAndRun) {
  int checked = 0;
  for (const Family& f : families()) {
    SCOPED_TRACE(f.name);
    const std::string dir = ringlm_test::temp_dir();
    const json c = family_config(f);
    ASSERT_TRUE(ringlm_test::write_bytes(dir + "/config.json", c.dump()));
    conv::SyntheticOptions so;
    so.n_layers_override = 2;
    ModelData md;
    std::string err;
    ASSERT_TRUE(conv::synthetic_from_hf_config(dir + "/config.json", 7, so, &md, &err)) << err;
    EXPECT_EQ(md.arch.family, f.family);
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(conv::build_model_bytes(md, fb::DType::Q8, &bytes, &err)) << err;
    OpenedModel o;
    o.bytes.assign(bytes.data(), bytes.size());
    ASSERT_TRUE(o.open(&err)) << err;
    std::vector<std::vector<float>> logits;
    std::vector<int32_t> seq = prompt_ids(1);
    ASSERT_TRUE(run_forced(&o.model, seq, 3, 4, &logits, &err)) << err;
    for (const auto& l : logits)
      for (float x : l) ASSERT_TRUE(std::isfinite(x));
    ++checked;
  }
  EXPECT_EQ(checked, 7);
}

}  // namespace
