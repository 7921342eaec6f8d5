// Synthetic models (tools/convert/synthetic) and the `ringlm bench` command line. No timing
// assertions: the bench's numbers are only checked to be present and positive.
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/synthetic.h"
#include "fixtures.h"
#include "kernels/scalar.h"
#include "quant.h"
#include "gtest/gtest.h"
#include "ringlm/ringlm.h"
#include "testing.h"

namespace {

using namespace ringlm::internal;
using conv::ModelData;
using conv::TensorData;
using fb::TensorRole;
using json = nlohmann::json;
using ringlm_test::AlignedBuffer;

// The shapes of the configs in ../shared/configs (what the synthetic model must reproduce).
struct Expected {
  uint32_t n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab, max_context;
  float rope_theta, norm_eps;
  bool tied;
  fb::Family family;
  uint32_t per_layer;  // tensors per layer in that family
};

const std::map<std::string, Expected>& expected_shapes() {
  using F = fb::Family;
  static const std::map<std::string, Expected> m = {
      {"SmolLM2-135M", {30, 576, 9, 3, 64, 1536, 49152, 8192, 1e5f, 1e-5f, true, F::Llama, 9}},
      {"Llama-3.2-1B-Instruct",
       {16, 2048, 32, 8, 64, 8192, 128256, 131072, 5e5f, 1e-5f, true, F::Llama, 9}},
      {"Qwen2.5-0.5B-Instruct",
       {24, 896, 14, 2, 64, 4864, 151936, 32768, 1e6f, 1e-6f, true, F::Qwen2, 12}},
      {"Qwen3-1.7B", {28, 2048, 16, 8, 128, 6144, 151936, 40960, 1e6f, 1e-6f, true, F::Qwen3, 11}},
      {"gemma3_1b_it",
       {26, 1152, 4, 1, 256, 6912, 262144, 32768, 1e6f, 1e-6f, true, F::Gemma3, 13}},
  };
  return m;
}

std::vector<std::string> shared_configs() {
  std::vector<std::string> out;
  const std::string dir = ringlm_test::shared_path("configs");
  if (dir.empty()) return out;
  DIR* d = opendir(dir.c_str());
  if (!d) return out;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    const std::string p = dir + "/" + e->d_name + "/config.json";
    std::ifstream f(p);
    if (f.good()) out.push_back(e->d_name);
  }
  closedir(d);
  std::sort(out.begin(), out.end());
  return out;
}

const TensorData* find(const ModelData& m, TensorRole role, int32_t layer) {
  for (const TensorData& t : m.tensors)
    if (t.role == role && t.layer == layer) return &t;
  return nullptr;
}

// The tensors of a model of arch `a` (Llama core plus the family's extras), with their shapes.
void expect_family_tensors(const ModelData& m, uint32_t per_layer) {
  const auto& a = m.arch;
  const uint64_t D = a.dim, q = uint64_t{a.n_heads} * a.head_dim,
                 kv = uint64_t{a.n_kv_heads} * a.head_dim, F = a.ffn_dim, V = a.vocab_size;
  EXPECT_EQ(m.tensors.size(), 2u + per_layer * a.n_layers + (a.tied_embeddings ? 0u : 1u));
  auto shape = [&](TensorRole r, int32_t l) {
    const TensorData* t = find(m, r, l);
    return t ? t->shape : std::vector<uint64_t>{};
  };
  using V64 = std::vector<uint64_t>;
  EXPECT_EQ(shape(TensorRole::TokenEmbedding, -1), (V64{V, D}));
  EXPECT_EQ(shape(TensorRole::OutputNorm, -1), (V64{D}));
  EXPECT_EQ(find(m, TensorRole::Output, -1) != nullptr, !a.tied_embeddings);
  const bool gemma = a.family == fb::Family::Gemma2 || a.family == fb::Family::Gemma3;
  for (int32_t l : {0, static_cast<int32_t>(a.n_layers) - 1}) {
    EXPECT_EQ(shape(TensorRole::AttnNorm, l), (V64{D}));
    EXPECT_EQ(shape(TensorRole::Wq, l), (V64{q, D}));
    EXPECT_EQ(shape(TensorRole::Wk, l), (V64{kv, D}));
    EXPECT_EQ(shape(TensorRole::Wv, l), (V64{kv, D}));
    EXPECT_EQ(shape(TensorRole::Wo, l), (V64{D, q}));
    EXPECT_EQ(shape(TensorRole::FfnNorm, l), (V64{D}));
    EXPECT_EQ(shape(TensorRole::FfnGate, l), (V64{F, D}));
    EXPECT_EQ(shape(TensorRole::FfnUp, l), (V64{F, D}));
    EXPECT_EQ(shape(TensorRole::FfnDown, l), (V64{D, F}));
    EXPECT_EQ(shape(TensorRole::Bq, l), a.qkv_bias ? V64{q} : V64{});
    EXPECT_EQ(shape(TensorRole::Bk, l), a.qkv_bias ? V64{kv} : V64{});
    EXPECT_EQ(shape(TensorRole::Bv, l), a.qkv_bias ? V64{kv} : V64{});
    EXPECT_EQ(shape(TensorRole::QNorm, l), a.qk_norm ? V64{a.head_dim} : V64{});
    EXPECT_EQ(shape(TensorRole::KNorm, l), a.qk_norm ? V64{a.head_dim} : V64{});
    EXPECT_EQ(shape(TensorRole::PostAttnNorm, l), gemma ? V64{D} : V64{});
    EXPECT_EQ(shape(TensorRole::PostFfnNorm, l), gemma ? V64{D} : V64{});
  }
  EXPECT_EQ(m.tokenizer.pieces.size(), a.vocab_size);
  EXPECT_EQ(m.tokenizer.types.size(), a.vocab_size);
  EXPECT_EQ(m.tokenizer.scores.size(), a.vocab_size);
}

void expect_llama_tensors(const ModelData& m) {
  EXPECT_EQ(m.arch.family, fb::Family::Llama);
  expect_family_tensors(m, 9);
}

// Builds `m` (its matrices generated as q4) and opens it with the runtime.
void expect_opens(const ModelData& m) {
  std::vector<uint8_t> bytes;
  std::string err;
  ASSERT_TRUE(conv::build_model_bytes(m, fb::DType::Q4, &bytes, &err)) << err;
  AlignedBuffer buf;
  buf.assign(bytes.data(), bytes.size());
  rlm_model model;
  ASSERT_EQ(rlm_model_open(buf.data(), buf.size(), &model), RLM_OK) << rlm_model_error(&model);
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 32;
  ringlm_test::TestSession ts;
  ASSERT_EQ(ts.init(&model, cfg), RLM_OK);
  std::vector<int32_t> toks;
  ringlm_test::greedy(ts.s, "Hi", 2, &toks);
  EXPECT_EQ(toks.size(), 2u);
}

// ---- synthetic_from_hf_config on the shared configs ------------------------------------------

TEST(Synthetic, SharedConfigsGiveTheirShapes) {
  const std::vector<std::string> names = shared_configs();
  if (names.empty()) GTEST_SKIP() << "no ../shared/configs/*/config.json";
  int checked = 0;
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const std::string path = ringlm_test::shared_path("configs/" + name + "/config.json");
    json cfg;
    {
      std::string text;
      ASSERT_TRUE(ringlm_test::read_file(path, &text));
      cfg = json::parse(text);
    }
    // The config's own family.
    ModelData m;
    std::string err;
    ASSERT_TRUE(conv::synthetic_from_hf_config(path, 7, &m, &err)) << err;
    EXPECT_EQ(m.arch.rope_style, fb::RopeStyle::Neox);
    EXPECT_EQ(m.arch.dim, cfg["hidden_size"].get<uint32_t>());
    EXPECT_EQ(m.arch.n_layers, cfg["num_hidden_layers"].get<uint32_t>());
    EXPECT_EQ(m.arch.n_heads, cfg["num_attention_heads"].get<uint32_t>());
    EXPECT_EQ(m.arch.ffn_dim, cfg["intermediate_size"].get<uint32_t>());
    EXPECT_EQ(m.arch.vocab_size, cfg["vocab_size"].get<uint32_t>());

    // Its Llama-shaped equivalent.
    ModelData l;
    std::vector<std::string> ignored;
    conv::SyntheticOptions opts;
    opts.as_llama = true;
    opts.ignored = &ignored;
    ASSERT_TRUE(conv::synthetic_from_hf_config(path, 7, opts, &l, &err)) << err;
    expect_llama_tensors(l);
    EXPECT_EQ(l.arch.activation, fb::Activation::SiLU);
    EXPECT_FALSE(l.arch.qkv_bias || l.arch.qk_norm || l.arch.sliding_window);
    EXPECT_EQ(l.arch.dim, m.arch.dim);
    EXPECT_EQ(l.arch.head_dim, m.arch.head_dim);
    EXPECT_EQ(l.arch.n_kv_heads, m.arch.n_kv_heads);
    EXPECT_EQ(l.arch.vocab_size, m.arch.vocab_size);
    EXPECT_EQ(ignored.empty(), m.arch.family == fb::Family::Llama &&
                                   m.arch.rope_scaling == fb::RopeScaling::None);

    auto it = expected_shapes().find(name);
    if (it == expected_shapes().end()) continue;
    const Expected& x = it->second;
    EXPECT_EQ(m.arch.family, x.family);
    EXPECT_EQ(m.arch.n_layers, x.n_layers);
    EXPECT_EQ(m.arch.dim, x.dim);
    EXPECT_EQ(m.arch.n_heads, x.n_heads);
    EXPECT_EQ(m.arch.n_kv_heads, x.n_kv_heads);
    EXPECT_EQ(m.arch.head_dim, x.head_dim);
    EXPECT_EQ(m.arch.ffn_dim, x.ffn_dim);
    EXPECT_EQ(m.arch.vocab_size, x.vocab);
    EXPECT_EQ(m.arch.max_context, x.max_context);
    EXPECT_FLOAT_EQ(m.arch.rope_theta, x.rope_theta);
    EXPECT_FLOAT_EQ(m.arch.norm_eps, x.norm_eps);
    EXPECT_EQ(m.arch.tied_embeddings, x.tied);
    expect_family_tensors(m, x.per_layer);
    ++checked;
  }
  EXPECT_GT(checked, 0) << "none of the known configs was present";
}

// Family details the shared configs carry.
TEST(Synthetic, SharedConfigFamilyDetails) {
  const std::string qwen2 = ringlm_test::shared_path("configs/Qwen2.5-0.5B-Instruct/config.json");
  const std::string qwen3 = ringlm_test::shared_path("configs/Qwen3-1.7B/config.json");
  const std::string gemma = ringlm_test::shared_path("configs/gemma3_1b_it/config.json");
  if (qwen2.empty() || qwen3.empty() || gemma.empty())
    GTEST_SKIP() << "Qwen2.5 / Qwen3 / Gemma3 configs not in ../shared/configs";
  ModelData m;
  std::string err;
  ASSERT_TRUE(conv::synthetic_from_hf_config(qwen2, 1, &m, &err)) << err;
  EXPECT_TRUE(m.arch.qkv_bias);
  EXPECT_FALSE(m.arch.qk_norm);
  EXPECT_EQ(std::count(m.arch.layer_is_local.begin(), m.arch.layer_is_local.end(), true), 0);
  ASSERT_TRUE(conv::synthetic_from_hf_config(qwen3, 1, &m, &err)) << err;
  EXPECT_TRUE(m.arch.qk_norm);
  EXPECT_FALSE(m.arch.qkv_bias);
  ASSERT_TRUE(conv::synthetic_from_hf_config(gemma, 1, &m, &err)) << err;
  EXPECT_EQ(m.arch.activation, fb::Activation::GeluTanh);
  EXPECT_TRUE(m.arch.qk_norm);
  EXPECT_EQ(m.arch.sliding_window, 512u);
  ASSERT_EQ(m.arch.layer_is_local.size(), 26u);
  for (uint32_t l = 0; l < 26; ++l) EXPECT_EQ(m.arch.layer_is_local[l], (l + 1) % 6 != 0) << l;
  EXPECT_FLOAT_EQ(m.arch.rope_theta_local, 10000.0f);
  EXPECT_FLOAT_EQ(m.arch.embedding_scale, sqrtf(1152.0f));
  // A reduced layer count keeps the local/global pattern.
  conv::SyntheticOptions o;
  o.n_layers_override = 7;
  ASSERT_TRUE(conv::synthetic_from_hf_config(gemma, 1, o, &m, &err)) << err;
  ASSERT_EQ(m.arch.layer_is_local.size(), 7u);
  EXPECT_FALSE(m.arch.layer_is_local[5]);
  EXPECT_TRUE(m.arch.layer_is_local[6]);
}

// Each shared config's family, reduced (2 layers, ffn 128, a 1000-piece vocabulary), converts and
// runs.
TEST(Synthetic, SharedConfigFamiliesRun) {
  const std::vector<std::string> names = shared_configs();
  if (names.empty()) GTEST_SKIP() << "no ../shared/configs/*/config.json";
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    std::string text;
    ASSERT_TRUE(
        ringlm_test::read_file(ringlm_test::shared_path("configs/" + name + "/config.json"), &text));
    json cfg = json::parse(text);
    cfg["vocab_size"] = 1000;
    cfg["intermediate_size"] = 128;
    const std::string dir = ringlm_test::temp_dir();
    std::ofstream(dir + "/config.json") << cfg.dump();
    for (bool as_llama : {false, true}) {
      conv::SyntheticOptions o;
      o.as_llama = as_llama;
      o.n_layers_override = 2;
      o.direct = true;
      o.direct_type = fb::DType::Q4;
      ModelData m;
      std::string err;
      ASSERT_TRUE(conv::synthetic_from_hf_config(dir, 3, o, &m, &err)) << err;
      ASSERT_NO_FATAL_FAILURE(expect_opens(m));
    }
  }
}

TEST(Synthetic, IgnoredFeaturesAreNamed) {
  const std::string qwen2 = ringlm_test::shared_path("configs/Qwen2.5-0.5B-Instruct/config.json");
  const std::string qwen3 = ringlm_test::shared_path("configs/Qwen3-1.7B/config.json");
  const std::string gemma = ringlm_test::shared_path("configs/gemma3_1b_it/config.json");
  if (qwen2.empty() || qwen3.empty() || gemma.empty())
    GTEST_SKIP() << "Qwen2.5 / Qwen3 / Gemma3 configs not in ../shared/configs";
  auto ignored_of = [](const std::string& p) {
    std::vector<std::string> ig;
    conv::SyntheticOptions o;
    o.as_llama = true;
    o.ignored = &ig;
    o.n_layers_override = 1;
    ModelData m;
    std::string err;
    EXPECT_TRUE(conv::synthetic_from_hf_config(p, 1, o, &m, &err)) << err;
    std::string all;
    for (const std::string& s : ig) all += s + "; ";
    return all;
  };
  const std::string q2 = ignored_of(qwen2), q3 = ignored_of(qwen3), g = ignored_of(gemma);
  EXPECT_NE(q2.find("qwen2"), std::string::npos) << q2;
  EXPECT_NE(q2.find("bias"), std::string::npos) << q2;
  EXPECT_EQ(q2.find("sliding"), std::string::npos) << q2;  // use_sliding_window: false
  EXPECT_NE(q3.find("qk-norm"), std::string::npos) << q3;
  EXPECT_NE(g.find("gemma3"), std::string::npos) << g;
  EXPECT_NE(g.find("post-attention"), std::string::npos) << g;
  EXPECT_NE(g.find("gelu"), std::string::npos) << g;
  EXPECT_NE(g.find("sliding"), std::string::npos) << g;
}

// Written configs: defaults, rope scaling, broken input.
class SyntheticConfig : public ::testing::Test {
 protected:
  std::string write(const json& j) {
    const std::string dir = ringlm_test::temp_dir();
    std::ofstream(dir + "/config.json") << j.dump();
    return dir + "/config.json";
  }
  json base() {
    return json{{"model_type", "llama"},      {"hidden_size", 64},      {"num_hidden_layers", 2},
                {"num_attention_heads", 4},   {"intermediate_size", 96}, {"vocab_size", 300}};
  }
};

TEST_F(SyntheticConfig, Defaults) {
  ModelData m;
  std::string err;
  ASSERT_TRUE(conv::synthetic_from_hf_config(write(base()), 1, &m, &err)) << err;
  EXPECT_EQ(m.arch.n_kv_heads, 4u);  // = heads
  EXPECT_EQ(m.arch.head_dim, 16u);   // = hidden / heads
  EXPECT_EQ(m.arch.max_context, 2048u);
  EXPECT_FLOAT_EQ(m.arch.rope_theta, 10000.0f);
  EXPECT_FALSE(m.arch.tied_embeddings);  // Llama default
  expect_llama_tensors(m);
  // A directory holding config.json works too.
  std::string path = write(base());
  path.resize(path.size() - strlen("/config.json"));
  EXPECT_TRUE(conv::synthetic_from_hf_config(path, 1, &m, &err)) << err;
}

TEST_F(SyntheticConfig, RopeScaling) {
  json j = base();
  j["rope_scaling"] = {{"rope_type", "llama3"}, {"factor", 32.0}, {"low_freq_factor", 1.0},
                       {"high_freq_factor", 4.0}, {"original_max_position_embeddings", 8192}};
  ModelData m;
  std::string err;
  ASSERT_TRUE(conv::synthetic_from_hf_config(write(j), 1, &m, &err)) << err;
  EXPECT_EQ(m.arch.rope_scaling, fb::RopeScaling::Llama3);
  EXPECT_FLOAT_EQ(m.arch.rope_scaling_factor, 32.0f);
  EXPECT_EQ(m.arch.rope_original_context, 8192u);
  ASSERT_NO_FATAL_FAILURE(expect_opens(m));
  conv::SyntheticOptions o;
  o.as_llama = true;
  std::vector<std::string> ig;
  o.ignored = &ig;
  ASSERT_TRUE(conv::synthetic_from_hf_config(write(j), 1, o, &m, &err)) << err;
  EXPECT_EQ(m.arch.rope_scaling, fb::RopeScaling::None);
  ASSERT_EQ(ig.size(), 1u);
  EXPECT_NE(ig[0].find("rope_scaling"), std::string::npos) << ig[0];
  // A kind the runtime does not run: refused, or (--as-llama) dropped with the reason.
  j["rope_scaling"] = {{"rope_type", "yarn"}, {"factor", 4.0}};
  EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, &m, &err));
  EXPECT_NE(err.find("yarn"), std::string::npos) << err;
  EXPECT_NE(err.find("--as-llama"), std::string::npos) << err;
  ASSERT_TRUE(conv::synthetic_from_hf_config(write(j), 1, o, &m, &err)) << err;
  ASSERT_EQ(ig.size(), 1u);
  EXPECT_NE(ig[0].find("yarn"), std::string::npos) << ig[0];
  expect_llama_tensors(m);
  j["rope_scaling"] = {{"rope_type", "default"}};
  EXPECT_TRUE(conv::synthetic_from_hf_config(write(j), 1, &m, &err)) << err;
  EXPECT_EQ(m.arch.rope_scaling, fb::RopeScaling::None);
}

TEST_F(SyntheticConfig, BadConfigs) {
  ModelData m;
  std::string err;
  json j = base();
  j.erase("hidden_size");
  EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, &m, &err));
  EXPECT_NE(err.find("hidden_size"), std::string::npos) << err;
  j = base();
  j["num_key_value_heads"] = 3;  // 4 heads not a multiple of 3
  EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, &m, &err));
  j = base();
  j["vocab_size"] = 100;  // below the 259 pieces the synthetic vocabulary needs
  EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, &m, &err));
  j = base();
  j["model_type"] = "mamba";
  EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, &m, &err));
  EXPECT_NE(err.find("mamba"), std::string::npos) << err;
  EXPECT_NE(err.find("--as-llama"), std::string::npos) << err;
  {
    conv::SyntheticOptions o;
    o.as_llama = true;
    std::string name;
    o.name = &name;
    EXPECT_TRUE(conv::synthetic_from_hf_config(write(j), 1, o, &m, &err)) << err;
    EXPECT_NE(name.find("(as llama)"), std::string::npos) << name;
    j.erase("num_attention_heads");  // but the dimensions must be there
    EXPECT_FALSE(conv::synthetic_from_hf_config(write(j), 1, o, &m, &err));
  }
  EXPECT_FALSE(conv::synthetic_from_hf_config("/nonexistent/config.json", 1, &m, &err));
  const std::string dir = ringlm_test::temp_dir();
  std::ofstream(dir + "/config.json") << "{ not json";
  EXPECT_FALSE(conv::synthetic_from_hf_config(dir + "/config.json", 1, &m, &err));
  EXPECT_FALSE(conv::synthetic_model("no-such-builtin", 1, conv::SyntheticOptions(), &m, &err));
  EXPECT_NE(err.find("smollm2-135m"), std::string::npos) << err;
}

// ---- weights ----------------------------------------------------------------------------------

TEST(Synthetic, WeightsAreDeterministicAndScaled) {
  conv::SyntheticOptions o;
  o.n_layers_override = 2;
  ModelData a, b, c;
  std::string err;
  ASSERT_TRUE(conv::synthetic_builtin("smollm2-135m", 5, o, &a, &err)) << err;
  ASSERT_TRUE(conv::synthetic_builtin("smollm2-135m", 5, o, &b, &err)) << err;
  ASSERT_TRUE(conv::synthetic_builtin("smollm2-135m", 6, o, &c, &err)) << err;
  const TensorData* wa = find(a, TensorRole::FfnGate, 1);
  const TensorData* wb = find(b, TensorRole::FfnGate, 1);
  const TensorData* wc = find(c, TensorRole::FfnGate, 1);
  const TensorData* other = find(a, TensorRole::FfnUp, 1);
  ASSERT_TRUE(wa && wb && wc && other);
  std::vector<float> xa, xb, xc, xo;
  ASSERT_TRUE(wa->load_f32(&xa, &err));
  ASSERT_TRUE(wb->load_f32(&xb, &err));
  ASSERT_TRUE(wc->load_f32(&xc, &err));
  ASSERT_TRUE(other->load_f32(&xo, &err));
  ASSERT_EQ(xa.size(), 1536u * 576u);
  EXPECT_EQ(xa, xb);  // same seed, same values
  EXPECT_NE(xa, xc);  // another seed
  EXPECT_NE(xa, xo);  // another tensor
  double sum = 0, sq = 0;
  for (float v : xa) {
    sum += v;
    sq += static_cast<double>(v) * v;
  }
  const double mean = sum / xa.size(), sd = sqrt(sq / xa.size() - mean * mean);
  EXPECT_NEAR(mean, 0.0, 1e-3);
  EXPECT_NEAR(sd, 0.02, 0.002);
  std::vector<float> norm;
  ASSERT_TRUE(find(a, TensorRole::AttnNorm, 0)->load_f32(&norm, &err));
  for (float v : norm) EXPECT_NEAR(v, 1.0f, 0.1f);
}

// Direct (raw) generation in each encoding holds the same weights as the float path.
TEST(Synthetic, DirectEncodingsMatchFloat) {
  for (fb::DType t : {fb::DType::F32, fb::DType::F16, fb::DType::Q8, fb::DType::Q4, fb::DType::Q4_1,
                      fb::DType::Q5_1}) {
    SCOPED_TRACE(conv::dtype_name(t));
    conv::SyntheticOptions o;
    o.direct = true;
    o.direct_type = t;
    conv::SyntheticShape shape;  // small, so building all four encodings stays quick
    shape.name = "small";
    shape.arch.n_layers = 2;
    shape.arch.dim = 128;
    shape.arch.n_heads = 4;
    shape.arch.n_kv_heads = 2;
    shape.arch.head_dim = 32;
    shape.arch.ffn_dim = 320;
    shape.arch.vocab_size = 512;
    shape.arch.max_context = 256;
    ModelData m;
    std::string err;
    ASSERT_TRUE(conv::synthetic_from_shape(shape, 9, o, &m, &err)) << err;
    for (const TensorData& td : m.tensors) EXPECT_EQ(td.has_raw, td.shape.size() == 2) << td.name;
    const TensorData* w = find(m, TensorRole::FfnDown, 1);  // (128, 320)
    ASSERT_TRUE(w && w->has_raw && w->load_raw);
    EXPECT_EQ(w->raw_type, t);
    const uint64_t rows = w->shape[0], cols = w->shape[1];
    std::vector<float> x;
    std::vector<uint8_t> raw;
    ASSERT_TRUE(w->load_f32(&x, &err));
    ASSERT_TRUE(w->load_raw(&raw, &err));
    ASSERT_EQ(raw.size(), tensor_data_bytes(static_cast<WeightType>(t), rows, cols));
    std::vector<float> back(cols);
    const uint64_t groups = cols / kQuantGroup;
    const uint64_t sc = quant_scales_offset(static_cast<WeightType>(t), rows, cols);
    const uint8_t* high = raw.data() + q5k_high_offset(rows, cols);  // Q5_1's fifth bits
    double max_err = 0, amax = 0;
    for (uint64_t r = 0; r < rows; ++r) {
      const uint16_t* scales = reinterpret_cast<const uint16_t*>(raw.data() + sc) + r * groups;
      switch (t) {
        case fb::DType::F32:
          memcpy(back.data(), raw.data() + r * cols * 4, cols * 4);
          break;
        case fb::DType::F16:
          for (uint64_t c = 0; c < cols; ++c) {
            uint16_t h;
            memcpy(&h, raw.data() + 2 * (r * cols + c), 2);
            back[c] = fp16_to_f32(h);
          }
          break;
        case fb::DType::Q8:
          dequantize_row_q8(reinterpret_cast<const int8_t*>(raw.data()) + r * cols, scales, cols,
                            back.data());
          break;
        case fb::DType::Q4:
          dequantize_row_q4(raw.data() + r * cols / 2, scales, cols, back.data());
          break;
        case fb::DType::Q4_1:  // (d, m) pairs: twice the f16 values of a row of scales
          dequantize_row_q4_1(raw.data() + r * cols / 2, scales + r * groups, cols, back.data());
          break;
        case fb::DType::Q5_1:
          dequantize_row_q5_1(raw.data() + r * cols / 2, high + r * cols / 8, scales + r * groups,
                              cols, back.data());
          break;
      }
      for (uint64_t c = 0; c < cols; ++c) {
        max_err = std::max(max_err, static_cast<double>(fabsf(back[c] - x[r * cols + c])));
        amax = std::max(amax, static_cast<double>(fabsf(x[r * cols + c])));
      }
    }
    if (t == fb::DType::F32 || t == fb::DType::Q8) EXPECT_EQ(max_err, 0.0);  // exact
    if (t == fb::DType::F16) EXPECT_LT(max_err, amax * 1e-3);
    // q4 = round(v / 16) clamped to 7: at most 16 steps of the tensor scale (0.02 / 36.95).
    if (t == fb::DType::Q4) EXPECT_LE(max_err, 16 * 0.02 / 36.95 * 1.01);
    // q4_1 holds q4's grid (d = 16 s, m = -8 d); q5_1 round(v / 8) + 16 in [0, 31]: at most 16 /
    // 8 steps (the clamp at 15 / 31, else half a step).
    if (t == fb::DType::Q4_1) EXPECT_LE(max_err, 16 * 0.02 / 36.95 * 1.01);
    if (t == fb::DType::Q5_1) EXPECT_LE(max_err, 8 * 0.02 / 36.95 * 1.01);
    EXPECT_GT(amax, 0.0);
    // And the model builds and verifies in that encoding.
    std::vector<uint8_t> bytes;
    ASSERT_TRUE(conv::build_model_bytes(m, t, &bytes, &err)) << err;
    AlignedBuffer buf;
    buf.assign(bytes.data(), bytes.size());
    rlm_model model;
    EXPECT_EQ(rlm_model_open(buf.data(), buf.size(), &model), RLM_OK) << rlm_model_error(&model);
  }
}

TEST(Synthetic, TokenizerPieces) {
  conv::TokenizerData t;
  std::string err;
  ASSERT_TRUE(conv::synthetic_tokenizer(1000, &t, &err)) << err;
  ASSERT_EQ(t.pieces.size(), 1000u);
  EXPECT_EQ(t.pieces[0], "<unk>");
  EXPECT_EQ(t.pieces[1], "<s>");
  EXPECT_EQ(t.pieces[2], "</s>");
  EXPECT_EQ(t.pieces[3], "<0x00>");
  EXPECT_EQ(t.pieces[258], "<0xFF>");
  EXPECT_EQ(t.types[100], fb::TokenType::Byte);
  EXPECT_EQ(t.types[259], fb::TokenType::Normal);
  std::vector<std::string> sorted = t.pieces;
  std::sort(sorted.begin(), sorted.end());
  EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());  // all distinct
  EXPECT_EQ(t.bos_id, 1);
  EXPECT_EQ(t.eos_id, 2);
  EXPECT_FALSE(conv::synthetic_tokenizer(258, &t, &err));
}

// ---- the built-in SmolLM2 shape converts and runs ----------------------------------------------

TEST(Synthetic, SmolLM2ShapeConvertsAndOpens) {
  conv::SyntheticOptions o;
  o.n_layers_override = 2;
  o.direct = true;
  o.direct_type = fb::DType::Q8;
  std::string name;
  o.name = &name;
  ModelData md;
  std::string err;
  ASSERT_TRUE(conv::synthetic_model("smollm2-135m", 1, o, &md, &err)) << err;
  EXPECT_EQ(name, "smollm2-135m");
  EXPECT_EQ(md.arch.dim, 576u);
  EXPECT_EQ(md.arch.n_heads, 9u);
  EXPECT_EQ(md.arch.n_kv_heads, 3u);
  EXPECT_EQ(md.arch.ffn_dim, 1536u);
  EXPECT_EQ(md.arch.vocab_size, 49152u);
  EXPECT_EQ(md.arch.max_context, 2048u);
  EXPECT_FLOAT_EQ(md.arch.rope_theta, 1e5f);
  EXPECT_TRUE(md.arch.tied_embeddings);
  expect_llama_tensors(md);
  {
    conv::SyntheticOptions full;
    ModelData m30;
    ASSERT_TRUE(conv::synthetic_builtin("smollm2-135m", 1, full, &m30, &err)) << err;
    EXPECT_EQ(m30.arch.n_layers, 30u);
  }

  std::vector<uint8_t> bytes;
  ASSERT_TRUE(conv::build_model_bytes(md, fb::DType::Q8, &bytes, &err)) << err;
  AlignedBuffer buf;
  buf.assign(bytes.data(), bytes.size());
  bytes.clear();
  bytes.shrink_to_fit();
  rlm_model model;
  ASSERT_EQ(rlm_model_open(buf.data(), buf.size(), &model), RLM_OK) << rlm_model_error(&model);
  rlm_model_info info;
  rlm_model_info_default(&info);
  ASSERT_EQ(rlm_model_get_info(&model, &info), RLM_OK);
  EXPECT_EQ(info.n_layers, 2u);
  EXPECT_EQ(info.dim, 576u);
  EXPECT_EQ(info.n_heads, 9u);
  EXPECT_EQ(info.n_kv_heads, 3u);
  EXPECT_EQ(info.head_dim, 64u);
  EXPECT_EQ(info.ffn_dim, 1536u);
  EXPECT_EQ(info.vocab_size, 49152u);
  EXPECT_EQ(info.bos_id, 1);
  EXPECT_EQ(info.eos_id, 2);

  // Text prompts tokenize (byte fallback) and greedy decoding yields synthetic pieces.
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 64;
  ringlm_test::TestSession ts;
  ASSERT_EQ(ts.init(&model, cfg), RLM_OK);
  std::vector<int32_t> toks;
  const std::string text = ringlm_test::greedy(ts.s, "Hello", 3, &toks);
  EXPECT_EQ(toks.size(), 3u);
  EXPECT_EQ(text.find("fail"), std::string::npos) << text;
}

TEST(Synthetic, SmolLM2ConfigMatchesBuiltin) {
  const std::string path = ringlm_test::shared_path("configs/SmolLM2-135M/config.json");
  if (path.empty()) GTEST_SKIP() << "configs/SmolLM2-135M/config.json not in ../shared";
  conv::SyntheticOptions o;
  o.n_layers_override = 1;
  ModelData from_cfg, builtin;
  std::string err;
  ASSERT_TRUE(conv::synthetic_from_hf_config(path, 3, o, &from_cfg, &err)) << err;
  ASSERT_TRUE(conv::synthetic_builtin("smollm2-135m", 3, o, &builtin, &err)) << err;
  const auto &a = from_cfg.arch, &b = builtin.arch;
  EXPECT_EQ(a.dim, b.dim);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.n_kv_heads, b.n_kv_heads);
  EXPECT_EQ(a.head_dim, b.head_dim);
  EXPECT_EQ(a.ffn_dim, b.ffn_dim);
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.tied_embeddings, b.tied_embeddings);
  EXPECT_FLOAT_EQ(a.rope_theta, b.rope_theta);
}

// ---- ringlm bench ------------------------------------------------------------------------------

struct TableRow {
  std::vector<std::string> cells;
};

std::string trim(const std::string& s) {
  size_t b = s.find_first_not_of(' '), e = s.find_last_not_of(' ');
  return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
}

// Markdown table rows ("| a | b |") of `out`, header and separator excluded.
std::vector<TableRow> table_rows(const std::string& out) {
  std::vector<TableRow> rows;
  std::istringstream in(out);
  std::string line;
  int n = 0;
  while (std::getline(in, line)) {
    if (line.size() < 2 || line[0] != '|') continue;
    if (n++ < 2) continue;  // header, separator
    TableRow r;
    size_t p = 1;
    while (p < line.size()) {
      size_t q = line.find('|', p);
      if (q == std::string::npos) break;
      r.cells.push_back(trim(line.substr(p, q - p)));
      p = q + 1;
    }
    rows.push_back(r);
  }
  return rows;
}

// "12.34 ± 0.56" -> mean, sd.
bool parse_tps(const std::string& s, double* mean, double* sd) {
  return sscanf(s.c_str(), "%lf ± %lf", mean, sd) == 2;
}

void expect_bench_rows(const std::string& out, const std::vector<std::string>& tests,
                       const std::string& model_substr) {
  const std::vector<TableRow> rows = table_rows(out);
  ASSERT_EQ(rows.size(), tests.size()) << out;
  for (size_t i = 0; i < rows.size(); ++i) {
    const TableRow& r = rows[i];
    ASSERT_EQ(r.cells.size(), 7u) << out;
    EXPECT_NE(r.cells[0].find(model_substr), std::string::npos) << r.cells[0];
    EXPECT_TRUE(r.cells[1].find("MiB") != std::string::npos ||
                r.cells[1].find("KiB") != std::string::npos ||
                r.cells[1].find("GiB") != std::string::npos)
        << r.cells[1];
    EXPECT_GT(atof(r.cells[1].c_str()), 0.0) << r.cells[1];
    EXPECT_GT(atof(r.cells[2].c_str()), 0.0) << r.cells[2];
    EXPECT_EQ(r.cells[3].compare(0, 4, "CPU/"), 0) << r.cells[3];  // CPU/<kernel table>
    EXPECT_EQ(r.cells[4], "1");
    EXPECT_EQ(r.cells[5], tests[i]);
    double mean = 0, sd = -1;
    ASSERT_TRUE(parse_tps(r.cells[6], &mean, &sd)) << r.cells[6];
    EXPECT_GT(mean, 0.0);
    EXPECT_GE(sd, 0.0);
  }
}

TEST(BenchCli, SyntheticSmolLM2Q4) {
  std::string out;
  const std::string cmd = ringlm_test::ringlm_bin() +
                          " bench --synthetic smollm2-135m --quant q4 -p 8 -n 4 -r 1 --layers 2"
                          " --bw-mib 8";
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"pp8", "tg4"}, "smollm2-135m"));
  const std::vector<TableRow> rows = table_rows(out);
  EXPECT_NE(rows[0].cells[0].find("q4"), std::string::npos) << rows[0].cells[0];
  EXPECT_NE(rows[0].cells[0].find("2L"), std::string::npos) << rows[0].cells[0];
  // The lines below the table.
  double gbs = 0;
  const size_t d = out.find("decode (CPU/");
  ASSERT_NE(d, std::string::npos) << out;
  const size_t colon = out.find(", 1 thread): ", d);
  ASSERT_NE(colon, std::string::npos) << out;
  EXPECT_EQ(sscanf(out.c_str() + colon, ", 1 thread): %lf GB/s", &gbs), 1);
  EXPECT_GT(gbs, 0.0);
  EXPECT_NE(out.find("of triad"), std::string::npos) << out;
  EXPECT_NE(out.find("memory bandwidth (8 MiB buffers"), std::string::npos) << out;
  EXPECT_NE(out.find("model open: "), std::string::npos) << out;
  EXPECT_NE(out.find("session "), std::string::npos) << out;
  EXPECT_NE(out.find("peak RSS "), std::string::npos) << out;
}

TEST(BenchCli, ModelFileAndThreadList) {
  ringlm_test::RandomModelShape shape;
  AlignedBuffer buf;
  std::string err;
  ASSERT_TRUE(ringlm_test::random_model(shape, fb::DType::Q8, &buf, &err)) << err;
  const std::string path = ringlm_test::temp_dir() + "/tiny.rlm";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  std::string out;
  const std::string cmd =
      ringlm_test::ringlm_bin() + " bench -m " + path + " -p 16 -n 8 -r 2 -t 1,2 --bw-mib 0";
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  const std::vector<TableRow> rows = table_rows(out);
  ASSERT_EQ(rows.size(), 4u) << out;
  std::vector<TableRow> one(rows.begin(), rows.begin() + 2);
  for (const TableRow& r : one) {
    EXPECT_EQ(r.cells[0], "tiny q8");
    EXPECT_EQ(r.cells[4], "1");
    double mean = 0, sd = 0;
    EXPECT_TRUE(parse_tps(r.cells[6], &mean, &sd)) << r.cells[6];
    EXPECT_GT(mean, 0.0);
  }
  EXPECT_EQ(rows[0].cells[5], "pp16");
  EXPECT_EQ(rows[1].cells[5], "tg8");
  // Two threads: numbers once the thread pool lands, "unsupported" until then.
  for (size_t i = 2; i < 4; ++i) {
    EXPECT_EQ(rows[i].cells[4], "2");
    double mean = 0, sd = 0;
    EXPECT_TRUE(rows[i].cells[6] == "unsupported" ||
                (parse_tps(rows[i].cells[6], &mean, &sd) && mean > 0))
        << rows[i].cells[6];
  }
  EXPECT_EQ(out.find("memory bandwidth"), std::string::npos) << out;  // --bw-mib 0
}

// --verify, --spec-lookup and --beams on one small model: the verification line names the pass
// and its ratio, the echo line says the tokens were identical, the beam line its alternated runs;
// the rows after the echo rows run without speculation (their steps are plain ones).
TEST(BenchCli, VerifyEchoAndBeamLines) {
  ringlm_test::RandomModelShape shape;
  AlignedBuffer buf;
  std::string err;
  ASSERT_TRUE(ringlm_test::random_model(shape, fb::DType::Q8, &buf, &err)) << err;
  const std::string path = ringlm_test::temp_dir() + "/tiny_verify.rlm";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  const std::string b = ringlm_test::ringlm_bin();
  std::string out;
  const std::string cmd = b + " bench -m " + path +
                          " -p 0 -n 8 -r 1 --verify 2,3 --spec-lookup 2 --beams 2 --bw-mib 0 2>&1";
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  for (const char* want : {"verify 1+2 (", "a pass of 3 tokens", "verify 1+3 (", "a pass of 4 tokens",
                           "(medians of 20 alternated)", "echo lookup2 (", "tokens identical",
                           "beam2 (", "alternated tg8 / beam runs"})
    EXPECT_NE(out.find(want), std::string::npos) << want << "\n" << out;
  double ratio = 0;
  const size_t v = out.find("verify 1+3 (");
  ASSERT_NE(v, std::string::npos);
  const size_t x = out.find("alternated): ", v);
  ASSERT_NE(x, std::string::npos) << out;
  ASSERT_EQ(sscanf(out.c_str() + x, "alternated): %lfx", &ratio), 1) << out;
  EXPECT_GT(ratio, 0.0);
  for (const char* bad : {" --verify 0", " --verify 65", " --verify x"}) {
    EXPECT_EQ(ringlm_test::run_command(b + " bench -m " + path + bad + " 2>/dev/null", &out), 2)
        << bad;
  }
}

TEST(BenchCli, KernelTables) {
  ringlm_test::RandomModelShape shape;
  AlignedBuffer buf;
  std::string err;
  ASSERT_TRUE(ringlm_test::random_model(shape, fb::DType::Q4, &buf, &err)) << err;
  const std::string path = ringlm_test::temp_dir() + "/tiny4.rlm";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  std::string out;
  const std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path +
                          " -p 8 -n 4 -r 1 -k auto,ref,no-such-table --bw-mib 0 2>/dev/null";
  // The "unsupported" rows make the exit status 1; the table is printed in full all the same.
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 1) << cmd << "\n" << out;
  const std::vector<TableRow> rows = table_rows(out);
  ASSERT_EQ(rows.size(), 6u) << out;
  // auto: resolved to a real table name.
  EXPECT_EQ(rows[0].cells[3].compare(0, 4, "CPU/"), 0);
  EXPECT_NE(rows[0].cells[3], "CPU/auto");
  EXPECT_EQ(rows[0].cells[3], rows[1].cells[3]);
  EXPECT_EQ(rows[2].cells[3], "CPU/ref");
  EXPECT_EQ(rows[3].cells[3], "CPU/ref");
  double mean = 0, sd = 0;
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(parse_tps(rows[i].cells[6], &mean, &sd)) << rows[i].cells[6];
    EXPECT_GT(mean, 0.0);
  }
  EXPECT_EQ(rows[4].cells[3], "CPU/no-such-table");
  EXPECT_EQ(rows[4].cells[6], "unsupported");
  EXPECT_EQ(rows[5].cells[6], "unsupported");
  EXPECT_NE(out.find("decode (CPU/ref, 1 thread): "), std::string::npos) << out;
}

// Writes a small random q8 model and returns its path.
std::string tiny_q8_model(const char* name) {
  ringlm_test::RandomModelShape shape;
  AlignedBuffer buf;
  std::string err;
  EXPECT_TRUE(ringlm_test::random_model(shape, fb::DType::Q8, &buf, &err)) << err;
  const std::string path = ringlm_test::temp_dir() + "/" + name;
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  return path;
}

// Exit status: 0 only when every row ran; 1 when any row did not (issue #12, defect 6: it used
// to be 0 even when every row was "unsupported").
TEST(BenchCli, ExitStatusIsNonZeroWhenARowFails) {
  const std::string path = tiny_q8_model("tiny-exit.rlm");
  const std::string b =
      ringlm_test::ringlm_bin() + " bench -m " + path + " -p 4 -n 2 -r 1 --bw-mib 0";
  std::string out;
  // Every row unsupported.
  EXPECT_EQ(ringlm_test::run_command(b + " -k no-such-table 2>/dev/null", &out), 1) << out;
  std::vector<TableRow> rows = table_rows(out);
  ASSERT_EQ(rows.size(), 2u) << out;
  for (const TableRow& r : rows) EXPECT_EQ(r.cells[6], "unsupported");
  // One thread count the runtime refuses (n_threads above its maximum) among good ones.
  EXPECT_EQ(ringlm_test::run_command(b + " -t 1,100000 2>/dev/null", &out), 1) << out;
  rows = table_rows(out);
  ASSERT_EQ(rows.size(), 4u) << out;
  double mean = 0, sd = 0;
  EXPECT_TRUE(parse_tps(rows[0].cells[6], &mean, &sd)) << rows[0].cells[6];
  EXPECT_EQ(rows[2].cells[6], "unsupported");
  EXPECT_NE(out.find("model open: "), std::string::npos) << out;  // the report still ends
  // Every row ran.
  EXPECT_EQ(ringlm_test::run_command(b + " -t 1,2 2>/dev/null", &out), 0) << out;
}

// --background: busy processes per load level, a "load" column, threads 1 and 2 by default, a
// summary line per load, and no busy process left after the bench exits.
TEST(BenchCli, BackgroundLoad) {
  const std::string path = tiny_q8_model("tiny-bg.rlm");
  const std::string err_path = ringlm_test::temp_dir() + "/bg-err.txt";
  const std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path +
                          " -p 8 -n 4 -r 1 --bw-mib 0 --background 0,2 2>" + err_path;
  std::string out, err;
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  const std::vector<TableRow> rows = table_rows(out);
  ASSERT_EQ(rows.size(), 8u) << out;
  const char* expect[8][3] = {{"1", "0", "pp8"}, {"1", "0", "tg4"}, {"2", "0", "pp8"},
                              {"2", "0", "tg4"}, {"1", "2", "pp8"}, {"1", "2", "tg4"},
                              {"2", "2", "pp8"}, {"2", "2", "tg4"}};
  for (size_t i = 0; i < rows.size(); ++i) {
    ASSERT_EQ(rows[i].cells.size(), 8u) << out;
    EXPECT_EQ(rows[i].cells[4], expect[i][0]) << i;  // threads
    EXPECT_EQ(rows[i].cells[5], expect[i][1]) << i;  // load
    EXPECT_EQ(rows[i].cells[6], expect[i][2]) << i;
    double mean = 0, sd = 0;
    EXPECT_TRUE(parse_tps(rows[i].cells[7], &mean, &sd) && mean > 0) << rows[i].cells[7];
  }
  EXPECT_NE(out.find("| threads | load | test |"), std::string::npos) << out;
  for (const char* line : {"load 0 (CPU/", "load 2 (CPU/"}) {
    const size_t at = out.find(line);
    ASSERT_NE(at, std::string::npos) << line << "\n" << out;
    EXPECT_NE(out.find("2 threads vs 1: pp8 ", at), std::string::npos) << out;
    EXPECT_NE(out.find(", tg4 ", at), std::string::npos) << out;
  }
  EXPECT_NE(out.find("decode (CPU/"), std::string::npos) << out;
  EXPECT_NE(out.find(", load 2): "), std::string::npos) << out;
  // The busy processes were named on stderr, and none of them is left.
  ASSERT_TRUE(ringlm_test::read_file(err_path, &err));
  const size_t at = err.find("background load: 2 busy processes (pid ");
  ASSERT_NE(at, std::string::npos) << err;
  long a = 0, c = 0;
  ASSERT_EQ(sscanf(err.c_str() + at, "background load: 2 busy processes (pid %ld %ld)", &a, &c), 2)
      << err;
  for (long pid : {a, c}) {
    EXPECT_EQ(kill(static_cast<pid_t>(pid), 0), -1) << "busy process " << pid << " still there";
    EXPECT_EQ(errno, ESRCH);
  }
  // Usage errors.
  const std::string b = ringlm_test::ringlm_bin() + " bench -m " + path;
  EXPECT_EQ(ringlm_test::run_command(b + " --background x 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(b + " --background 65 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(b + " --background 1, 2>/dev/null", &out), 2);
}

TEST(BenchCli, OnlyOneTest) {
  ringlm_test::RandomModelShape shape;
  AlignedBuffer buf;
  std::string err;
  ASSERT_TRUE(ringlm_test::random_model(shape, fb::DType::F32, &buf, &err)) << err;
  const std::string path = ringlm_test::temp_dir() + "/tiny32.rlm";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(buf.data()), static_cast<std::streamsize>(buf.size()));
  }
  std::string out;
  std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path + " -p 0 -n 3 -r 1 --bw-mib 0";
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"tg3"}, "tiny32 f32"));
  cmd = ringlm_test::ringlm_bin() + " bench -m " + path + " -p 5 -n 0 -r 1 -b 2 --kv f16 --bw-mib 0";
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"pp5"}, "tiny32 f32"));
  EXPECT_NE(out.find("n_batch 2, kv f16"), std::string::npos) << out;
}

// -o json: one JSON document on stdout (the table goes to stderr); --vs-roofline measures the
// bandwidth first and gives each decode row bytes per token x t/s over the read bandwidth (#19).
// --bw-each: a bandwidth probe before every tg repetition, each repetition's share of it.
TEST(BenchCli, BwEachSharesPerRepetition) {
  const std::string path = tiny_q8_model("tinybweach.rlm");
  const std::string b = ringlm_test::ringlm_bin() + " bench -m " + path + " -p 0 -n 4 -r 3 --bw-mib 8";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(b + " --bw-each -o json 2>/dev/null", &out), 0) << out;
  const json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  ASSERT_TRUE(j.contains("decode_read_share")) << j.dump(2);
  ASSERT_EQ(j["decode_read_share"].size(), 1u) << j.dump(2);
  const json& s = j["decode_read_share"][0];
  EXPECT_EQ(s["threads"], 1);
  ASSERT_EQ(s["read_share_pct_reps"].size(), 3u) << s.dump();
  ASSERT_EQ(s["read_gbs_reps"].size(), 3u) << s.dump();
  std::vector<double> shares;
  for (const json& v : s["read_share_pct_reps"]) shares.push_back(v.get<double>());
  for (const json& v : s["read_gbs_reps"]) EXPECT_GT(v.get<double>(), 0.0);
  std::sort(shares.begin(), shares.end());
  EXPECT_GT(shares.front(), 0.0);
  EXPECT_EQ(s["read_share_pct_median"].get<double>(), shares[1]);
  ASSERT_EQ(ringlm_test::run_command(b + " --bw-each 2>/dev/null", &out), 0) << out;
  EXPECT_NE(out.find("of the read bandwidth measured just before each repetition (median of 3;"),
            std::string::npos) << out;
  // Without the flag: neither the line nor the JSON key.
  ASSERT_EQ(ringlm_test::run_command(b + " -o json 2>/dev/null", &out), 0) << out;
  EXPECT_FALSE(json::parse(out).contains("decode_read_share"));
}

TEST(BenchCli, JsonOutputAndRooflineColumn) {
  const std::string path = tiny_q8_model("tinyjson.rlm");
  const std::string b = ringlm_test::ringlm_bin() + " bench -m " + path +
                        " -p 4 -n 4 -r 1 --bw-mib 8 --vs-roofline";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(b + " -o json 2>/dev/null", &out), 0) << out;
  const json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << "stdout is not one JSON document:\n" << out;
  ASSERT_TRUE(j["environment"]["cpu"].is_string());
  const json& runnable = j["environment"]["kernels_runnable"];
  ASSERT_TRUE(runnable.is_array());
  EXPECT_EQ(runnable.back(), "ref") << runnable.dump();
  EXPECT_EQ(j["environment"]["kernels_auto"], runnable.front());
  EXPECT_EQ(j["config"]["kv"], "f16");
  ASSERT_EQ(j["rows"].size(), 2u) << j.dump(2);
  const json& pp = j["rows"][0];
  const json& tg = j["rows"][1];
  EXPECT_EQ(pp["test"], "pp4");
  EXPECT_FALSE(pp.contains("vs_roofline_pct"));  // prefill is compute-bound: no figure
  EXPECT_EQ(tg["test"], "tg4");
  ASSERT_TRUE(tg["supported"].get<bool>());
  const json* one = nullptr;
  for (const json& bw : j["bandwidth"])
    if (bw["threads"] == 1) one = &bw;
  ASSERT_NE(one, nullptr) << j["bandwidth"].dump();
  const double read = (*one)["read_gbs"].get<double>();
  ASSERT_GT(read, 0.0);
  const double expect = 100.0 * j["decode_bytes_per_token"].get<double>() *
                        tg["tps_mean"].get<double>() / (read * 1e9);
  EXPECT_NEAR(tg["vs_roofline_pct"].get<double>(), expect, 1e-9 * expect);
  EXPECT_EQ(j["decode_bytes_per_token"].get<double>(), j["model"]["weight_bytes"].get<double>());
  // The markdown table: the environment line above it and the column.
  ASSERT_EQ(ringlm_test::run_command(b + " 2>/dev/null", &out), 0) << out;
  EXPECT_EQ(out.rfind("cpu: ", 0), 0u) << out;
  EXPECT_NE(out.find("| vs roofline |"), std::string::npos) << out;
  EXPECT_NE(out.find("(runnable: "), std::string::npos) << out;
  EXPECT_EQ(ringlm_test::run_command(b + " -o xml 2>/dev/null", &out), 2);
}

// A "depth (...): TEST / BASE = ..." line below the table (-d LIST), its numbers parsed.
struct DepthLine {
  size_t at = std::string::npos;  // where the line starts in the output
  double ratio = -1, median = -1, lo = -1, hi = -1;
  size_t pairs = 0;
  double bytes_from = -1, bytes_to = -1, roofline = -1;  // tg lines only ("KiB" figures)
};

bool depth_line(const std::string& out, const std::string& test, const std::string& base,
                DepthLine* d) {
  const std::string key = "): " + test + " / " + base + " = ";
  const size_t at = out.find(key);
  if (at == std::string::npos) return false;
  const size_t bol = out.rfind('\n', at) + 1;
  if (out.compare(bol, 7, "depth (") != 0) return false;
  d->at = bol;
  const std::string line = out.substr(bol, out.find('\n', at) - bol);
  if (sscanf(line.c_str() + (at - bol) + key.size(),
             "%lf (median of %zu interleaved repetition pairs %lf, range %lf–%lf)", &d->ratio,
             &d->pairs, &d->median, &d->lo, &d->hi) != 5)
    return false;
  const size_t bytes = line.find("; bytes read per token ");
  if (bytes != std::string::npos &&
      sscanf(line.c_str() + bytes,
             "; bytes read per token %lf KiB -> %lf KiB: a bandwidth-bound decode would give %lf",
             &d->bytes_from, &d->bytes_to, &d->roofline) != 3)
    return false;
  return true;
}

// -d LIST: rows depth by depth in the order given (pp then tg), one session per depth (n_ctx
// covering the largest), a decode line per depth and a ratio line per test for each depth after
// the first, whose numbers agree with the rows.
TEST(BenchCli, DepthListRowsAndRatioLines) {
  const std::string path = tiny_q8_model("tiny-depths.rlm");
  const std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path +
                          " -p 4 -n 4 -r 2 -d 0,16 --bw-mib 0 2>/dev/null";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  ASSERT_NO_FATAL_FAILURE(
      expect_bench_rows(out, {"pp4", "tg4", "pp4 @ d16", "tg4 @ d16"}, " q8"));
  const std::vector<TableRow> rows = table_rows(out);
  double mean[4], sd = 0;
  for (int i = 0; i < 4; ++i) ASSERT_TRUE(parse_tps(rows[i].cells[6], &mean[i], &sd));
  DepthLine pp, tg;
  ASSERT_TRUE(depth_line(out, "pp4 @ d16", "pp4", &pp)) << out;
  ASSERT_TRUE(depth_line(out, "tg4 @ d16", "tg4", &tg)) << out;
  EXPECT_LT(pp.at, tg.at);
  EXPECT_NE(out.find("depth (" + rows[0].cells[3] + ", 1 thread): pp4 @ d16"), std::string::npos)
      << out;
  for (const DepthLine* d : {&pp, &tg}) {
    // Positive and finite, no upper bound: these are timings of a tiny model, and one preempted
    // repetition on a loaded machine (CI under ASan) put a pair's ratio above 10.
    EXPECT_GT(d->ratio, 0.0);
    EXPECT_TRUE(std::isfinite(d->ratio));
    EXPECT_EQ(d->pairs, 2u);  // -r 2
    EXPECT_GT(d->lo, 0.0);
    EXPECT_LE(d->lo, d->median);
    EXPECT_LE(d->median, d->hi);
    // The means' ratio is the pair ratios' average weighted by the first depth's t/s: within
    // their range (to the printed 2 decimals).
    EXPECT_GE(d->ratio, d->lo - 0.0051);
    EXPECT_LE(d->ratio, d->hi + 0.0051);
  }
  EXPECT_NEAR(pp.ratio, mean[2] / mean[0], 0.0051) << out;
  EXPECT_NEAR(tg.ratio, mean[3] / mean[1], 0.0051) << out;
  // Bytes per token: the weights, then also 16 + 4 / 2 positions' K and V rows.
  EXPECT_EQ(pp.roofline, -1.0) << out;  // no bandwidth clause for prefill
  EXPECT_GT(tg.bytes_from, 0.0);
  EXPECT_LT(tg.bytes_from, tg.bytes_to);
  EXPECT_NEAR(tg.roofline, tg.bytes_from / tg.bytes_to, 0.0051 + 0.01 / tg.bytes_to);
  EXPECT_LT(tg.roofline, 1.0);
  // A decode line per depth, each with its own bytes.
  const size_t d0 = out.find(", 1 thread, depth 0): ");
  const size_t d16 = out.find(", 1 thread, depth 16): ");
  ASSERT_NE(d0, std::string::npos) << out;
  ASSERT_NE(d16, std::string::npos) << out;
  EXPECT_EQ(out.compare(out.find("effective", d0), 25, "effective weight traffic "), 0) << out;
  EXPECT_NE(out.find(" KV) x ", d16), std::string::npos) << out;
  // Two sessions, each sized for the largest depth: 16 + max(4, 4 + 1).
  EXPECT_NE(out.find(" x 2 depths (n_ctx 21,"), std::string::npos) << out;
}

// -d with the largest depth first: the first depth given is the ratio's base; --verify runs at
// the largest depth, the echo rows once per configuration (from an empty context).
TEST(BenchCli, DepthListOrderVerifyAndEcho) {
  const std::string path = tiny_q8_model("tiny-depths2.rlm");
  const std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path +
                          " -p 0 -n 4 -r 2 -d 24,0 --spec-lookup 2 --verify 2 --bw-mib 0 "
                          "2>/dev/null";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(
      out, {"tg4 @ d24", "tg4", "echo tg4", "echo tg4 lookup2"}, " q8"));
  DepthLine tg;
  ASSERT_TRUE(depth_line(out, "tg4", "tg4 @ d24", &tg)) << out;
  EXPECT_GT(tg.ratio, 0.0);
  EXPECT_TRUE(std::isfinite(tg.ratio));  // a timing: no upper bound (DepthListRowsAndRatioLines)
  EXPECT_GT(tg.bytes_from, tg.bytes_to);
  EXPECT_GT(tg.roofline, 1.0);
  EXPECT_EQ(out.find("depth (", tg.at + 1), std::string::npos) << out;  // -p 0: one line
  EXPECT_EQ(out.find("depth (CPU/"), tg.at) << out;
  const size_t v = out.find("verify 1+2 (");
  ASSERT_NE(v, std::string::npos) << out;
  EXPECT_NE(out.find("at position 24)", v), std::string::npos) << out;
  EXPECT_EQ(out.find("verify 1+2 (", v + 1), std::string::npos) << out;
  const size_t e = out.find("echo lookup2 (");
  ASSERT_NE(e, std::string::npos) << out;
  EXPECT_EQ(out.find("echo lookup2 (", e + 1), std::string::npos) << out;
}

// -o json with -d LIST: the depths in the config, a depth on every row, each decode row's bytes
// and roofline share at its own depth, and the ratios.
TEST(BenchCli, DepthListJson) {
  const std::string path = tiny_q8_model("tiny-depths-json.rlm");
  const std::string cmd = ringlm_test::ringlm_bin() + " bench -m " + path +
                          " -p 4 -n 4 -r 2 -d 0,16 --bw-mib 8 --vs-roofline -o json 2>/dev/null";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0) << cmd << "\n" << out;
  const json j = json::parse(out, nullptr, false);
  ASSERT_FALSE(j.is_discarded()) << out;
  EXPECT_EQ(j["config"]["depths"], json({0, 16}));
  EXPECT_EQ(j["config"]["depth"], 16);
  const json& rows = j["rows"];
  ASSERT_EQ(rows.size(), 4u) << j.dump(2);
  const char* tests[4] = {"pp4", "tg4", "pp4 @ d16", "tg4 @ d16"};
  const uint32_t depth[4] = {0, 0, 16, 16};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(rows[i]["test"], tests[i]);
    EXPECT_EQ(rows[i]["depth"], depth[i]);
    ASSERT_TRUE(rows[i]["supported"].get<bool>());
  }
  const double weights = j["model"]["weight_bytes"].get<double>();
  EXPECT_FALSE(rows[0].contains("decode_bytes_per_token"));
  EXPECT_EQ(rows[1]["decode_bytes_per_token"].get<double>(), weights);
  const double b16 = rows[3]["decode_bytes_per_token"].get<double>();
  EXPECT_GT(b16, weights);
  EXPECT_EQ(j["decode_bytes_per_token"].get<double>(), b16);  // at config.depth
  const json* one = nullptr;
  for (const json& bw : j["bandwidth"])
    if (bw["threads"] == 1) one = &bw;
  ASSERT_NE(one, nullptr) << j["bandwidth"].dump();
  const double read = (*one)["read_gbs"].get<double>();
  for (size_t i : {1, 3}) {
    const double expect = 100.0 * rows[i]["decode_bytes_per_token"].get<double>() *
                          rows[i]["tps_mean"].get<double>() / (read * 1e9);
    EXPECT_NEAR(rows[i]["vs_roofline_pct"].get<double>(), expect, 1e-9 * expect) << i;
  }
  const json& ratios = j["depth_ratios"];
  ASSERT_EQ(ratios.size(), 2u) << j.dump(2);
  for (size_t k = 0; k < 2; ++k) {
    const json& r = ratios[k];
    const size_t at = k == 0 ? 2 : 3, base = at - 2;  // pp, then tg
    EXPECT_EQ(r["test"], tests[at]);
    EXPECT_EQ(r["backend"], rows[at]["backend"]);
    EXPECT_EQ(r["threads"], 1);
    EXPECT_FALSE(r.contains("load"));
    EXPECT_EQ(r["depth"], 16);
    EXPECT_EQ(r["base_depth"], 0);
    const double ratio = r["ratio"].get<double>();
    EXPECT_NEAR(ratio, rows[at]["tps_mean"].get<double>() / rows[base]["tps_mean"].get<double>(),
                1e-9 * ratio);
    const double lo = r["pair_min"].get<double>(), med = r["pair_median"].get<double>(),
                 hi = r["pair_max"].get<double>();
    EXPECT_GT(lo, 0.0);
    EXPECT_LE(lo, med);
    EXPECT_LE(med, hi);
    EXPECT_GE(ratio, lo * (1 - 1e-12));
    EXPECT_LE(ratio, hi * (1 + 1e-12));
    EXPECT_TRUE(std::isfinite(hi));  // a timing: no upper bound (DepthListRowsAndRatioLines)
  }
  EXPECT_FALSE(ratios[0].contains("roofline_ratio"));
  EXPECT_DOUBLE_EQ(ratios[1]["roofline_ratio"].get<double>(), weights / b16);
}

// One depth: as before -d took a list (no ratio line, no per-depth notes, one session); bad lists
// are usage errors.
TEST(BenchCli, SingleDepthAndBadDepthLists) {
  const std::string path = tiny_q8_model("tiny-depth1.rlm");
  const std::string b = ringlm_test::ringlm_bin() + " bench -m " + path;
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(b + " -p 4 -n 4 -r 2 -d 16 --bw-mib 0 2>/dev/null", &out), 0)
      << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"pp4 @ d16", "tg4 @ d16"}, " q8"));
  EXPECT_EQ(out.find("depth ("), std::string::npos) << out;
  EXPECT_EQ(out.find(", depth "), std::string::npos) << out;
  EXPECT_EQ(out.find(" depths ("), std::string::npos) << out;
  const size_t d = out.find("decode (CPU/");
  ASSERT_NE(d, std::string::npos) << out;
  EXPECT_NE(out.find(", 1 thread): ", d), std::string::npos) << out;
  EXPECT_NE(out.find(" KV) x ", d), std::string::npos) << out;
  EXPECT_NE(out.find("(n_ctx 21,"), std::string::npos) << out;
  const struct {
    const char* arg;
    const char* message;
  } bad[] = {{"-d 16,16", "depth 16 is given twice in -d 16,16"},
             {"--depth 0,16,0", "depth 0 is given twice in --depth 0,16,0"},
             {"-d 0,,16", "bad value '0,,16' for -d"},
             {"-d 0,", "bad value '0,' for -d"},
             {"-d x", "bad value 'x' for -d"},
             {"-d ''", "bad value '' for -d"},
             {"-d 0,1048577", "bad value '0,1048577' for -d"}};
  for (const auto& c : bad) {
    EXPECT_EQ(ringlm_test::run_command(b + " -p 4 -n 4 -r 1 --bw-mib 0 " + c.arg + " 2>&1", &out),
              2)
        << c.arg << "\n" << out;
    EXPECT_NE(out.find(std::string("ringlm bench: ") + c.message), std::string::npos)
        << c.arg << "\n" << out;
    EXPECT_EQ(out.find("| model |"), std::string::npos) << c.arg << "\n" << out;
  }
}

TEST(BenchCli, HelpAndUsageErrors) {
  const std::string b = ringlm_test::ringlm_bin();
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(b + " bench --help", &out), 0);
  for (const char* opt : {"--model", "--synthetic", "--quant", "--as-llama", "--seed", "--layers",
                          "--n-prompt", "--n-gen", "--threads", "--kernels", "--repetitions",
                          "--batch", "--kv", "--background", "Exit status",
                          "--bw-mib", "smollm2-135m", "unsupported", "--vs-roofline", "--output",
                          "--clock", "--depth", "--verify", "--spec-lookup", "--beams"})
    EXPECT_NE(out.find(opt), std::string::npos) << opt;
  EXPECT_EQ(ringlm_test::run_command(b + " --help", &out), 0);
  EXPECT_NE(out.find("bench"), std::string::npos);
  EXPECT_EQ(ringlm_test::run_command(b + " bench 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench -m x --synthetic smollm2-135m 2>/dev/null", &out),
            2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench -m x.rlm --quant q4 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench --synthetic smollm2-135m --quant q3 2>/dev/null",
                                     &out),
            2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench --synthetic smollm2-135m -t 0 2>/dev/null", &out),
            2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench --synthetic smollm2-135m --backend x 2>/dev/null",
                                     &out),
            2);
  EXPECT_EQ(ringlm_test::run_command(b + " bench -m /nonexistent.rlm 2>/dev/null", &out), 1);
  EXPECT_EQ(ringlm_test::run_command(b + " bench --synthetic nope 2>/dev/null", &out), 1);
}

TEST(BenchCli, FamiliesAndAsLlama) {
  // A small Qwen2-style config (the real shapes are covered by the Synthetic tests).
  const std::string dir = ringlm_test::temp_dir();
  json cfg = {{"architectures", {"Qwen2ForCausalLM"}}, {"model_type", "qwen2"},
              {"hidden_size", 128},        {"num_hidden_layers", 2},
              {"num_attention_heads", 4},  {"num_key_value_heads", 2},
              {"intermediate_size", 256},  {"vocab_size", 1000},
              {"tie_word_embeddings", true}, {"sliding_window", 4096},
              {"use_sliding_window", false}};
  std::ofstream(dir + "/config.json") << cfg.dump();
  const std::string b = ringlm_test::ringlm_bin();
  std::string out, err;
  // Its own family.
  ASSERT_EQ(ringlm_test::run_command(b + " bench --synthetic " + dir +
                                         "/config.json -p 4 -n 2 -r 1 --bw-mib 0 2>" + dir +
                                         "/err.txt",
                                     &out),
            0)
      << out;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"pp4", "tg2"}, "synth "));
  EXPECT_EQ(out.find("(as llama)"), std::string::npos) << out;
  // --as-llama (the directory works as SPEC too): runs, and says what it dropped.
  ASSERT_EQ(ringlm_test::run_command(b + " bench --synthetic " + dir +
                                         " --as-llama -p 4 -n 2 -r 1 --bw-mib 0 2>" + dir +
                                         "/err2.txt",
                                     &out),
            0)
      << out;
  ASSERT_TRUE(ringlm_test::read_file(dir + "/err2.txt", &err));
  EXPECT_NE(err.find("--as-llama: ignoring"), std::string::npos) << err;
  EXPECT_NE(err.find("bias"), std::string::npos) << err;
  ASSERT_NO_FATAL_FAILURE(expect_bench_rows(out, {"pp4", "tg2"}, "(as llama)"));
  // A config no family reader takes: refused, naming the way out.
  cfg["model_type"] = "mamba";
  cfg["architectures"] = {"MambaForCausalLM"};
  std::ofstream(dir + "/config.json") << cfg.dump();
  EXPECT_EQ(ringlm_test::run_command(b + " bench --synthetic " + dir + " -p 4 -n 2 -r 1 2>" + dir +
                                         "/err3.txt",
                                     &out),
            1);
  ASSERT_TRUE(ringlm_test::read_file(dir + "/err3.txt", &err));
  EXPECT_NE(err.find("--as-llama"), std::string::npos) << err;
  EXPECT_NE(err.find("mamba"), std::string::npos) << err;
}

}  // namespace
