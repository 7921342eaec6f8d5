// Synthetic random-weight models in the shape of real ones (see synthetic.h).
#include "convert/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "convert/file_io.h"
#include "fp16.h"
#include "model.h"
#include "quant.h"

namespace ringlm {
namespace conv {
namespace {

using json = nlohmann::json;
using fb::TensorRole;

constexpr uint32_t kSyntheticMinVocab = 3 + 256;  // <unk> <s> </s> + byte tokens

// splitmix64's finaliser: a counter-based generator (value i of a stream = mix(key + i * golden)).
inline uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// The canonical weights: element i of a tensor is an integer v(i) in [-127, 127], roughly normal
// with sd ~36.95 (the centred sum of four uniform bytes of a counter-based hash, / 4), times one
// f16-exact scale per tensor. One 64-bit hash yields two elements. The float values, the Q8
// encoding (qs = v, every group scale = the tensor scale) and therefore the weights a q8 model
// runs with are identical; Q4 stores round(v / 16) with scale 16 x the tensor scale.
constexpr float kVSd = 36.95f;

struct Gen {
  uint64_t k;
  explicit Gen(uint64_t key) : k(mix64(key)) {}
  // v of elements 2j and 2j + 1.
  inline void pair(uint64_t j, int32_t* a, int32_t* b) const {
    const uint64_t h = mix64(k + (j + 1) * 0x9e3779b97f4a7c15ull);
    *a = one(static_cast<uint32_t>(h));
    *b = one(static_cast<uint32_t>(h >> 32));
  }
  static inline int32_t one(uint32_t w) {
    const int32_t sum = static_cast<int32_t>(w & 0xff) + static_cast<int32_t>((w >> 8) & 0xff) +
                        static_cast<int32_t>((w >> 16) & 0xff) + static_cast<int32_t>(w >> 24);
    const int32_t v = (sum - 510 + 2) >> 2;  // [-127, 128]
    return v > 127 ? 127 : v;
  }
  inline int32_t at(uint64_t i) const {
    int32_t a, b;
    pair(i / 2, &a, &b);
    return (i & 1) ? b : a;
  }
};

// The per-tensor scale, rounded to f16 so the Q8 encoding holds it exactly.
uint16_t scale_f16(float std) { return f32_to_fp16(std / kVSd); }

void fill_f32(uint64_t key, float mean, float std, size_t n, std::vector<float>* out) {
  out->resize(n);
  float* o = out->data();
  const float s = fp16_to_f32(scale_f16(std));
  const Gen g(key);
  size_t i = 0;
  for (; i + 2 <= n; i += 2) {
    int32_t a, b;
    g.pair(i / 2, &a, &b);
    o[i] = mean + s * static_cast<float>(a);
    o[i + 1] = mean + s * static_cast<float>(b);
  }
  if (i < n) o[i] = mean + s * static_cast<float>(g.at(i));
}

// The tensor directly in the file encoding `t` (rows x cols, cols a multiple of 32, mean 0).
void fill_raw(uint64_t key, float std, fb::DType t, uint64_t rows, uint64_t cols,
              std::vector<uint8_t>* out) {
  const WeightType wt = static_cast<WeightType>(t);
  const uint64_t n = rows * cols;
  out->resize(static_cast<size_t>(tensor_data_bytes(wt, rows, cols)));
  uint8_t* o = out->data();
  const uint16_t s16 = scale_f16(std);
  const Gen g(key);
  switch (t) {
    case fb::DType::F32:
    case fb::DType::F16: {
      const float s = fp16_to_f32(s16);
      for (uint64_t i = 0; i < n; i += 2) {
        int32_t a, b;
        g.pair(i / 2, &a, &b);
        const float fa = s * static_cast<float>(a), fb_ = s * static_cast<float>(b);
        if (t == fb::DType::F32) {
          memcpy(o + 4 * i, &fa, 4);
          memcpy(o + 4 * i + 4, &fb_, 4);
        } else {
          const uint16_t ha = f32_to_fp16(fa), hb = f32_to_fp16(fb_);
          memcpy(o + 2 * i, &ha, 2);
          memcpy(o + 2 * i + 2, &hb, 2);
        }
      }
      return;
    }
    case fb::DType::Q8: {
      int8_t* qs = reinterpret_cast<int8_t*>(o);
      for (uint64_t i = 0; i < n; i += 2) {
        int32_t a, b;
        g.pair(i / 2, &a, &b);
        qs[i] = static_cast<int8_t>(a);
        qs[i + 1] = static_cast<int8_t>(b);
      }
      break;
    }
    case fb::DType::Q4: {
      // Group of 32: byte j holds value j (low nibble) and value j + 16 (high nibble).
      int32_t v[kQuantGroup];
      for (uint64_t grp = 0; grp < n / kQuantGroup; ++grp) {
        for (uint32_t j = 0; j < kQuantGroup; j += 2) g.pair(grp * 16 + j / 2, &v[j], &v[j + 1]);
        uint8_t* q = o + grp * (kQuantGroup / 2);
        for (uint32_t j = 0; j < kQuantGroup / 2; ++j) {
          int32_t lo = (v[j] + 8) >> 4, hi = (v[j + 16] + 8) >> 4;  // round(v / 16)
          lo = lo > 7 ? 7 : lo;
          hi = hi > 7 ? 7 : hi;
          q[j] = static_cast<uint8_t>((lo & 0x0f) | ((hi & 0x0f) << 4));
        }
      }
      break;
    }
  }
  const uint16_t sc = t == fb::DType::Q8 ? s16 : f32_to_fp16(16.0f * fp16_to_f32(s16));
  uint8_t* scales = o + quant_scales_offset(wt, rows, cols);
  const uint64_t n_scales = rows * (cols / kQuantGroup);
  for (uint64_t i = 0; i < n_scales; ++i) memcpy(scales + 2 * i, &sc, 2);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

bool get_u32(const json& cfg, const char* key, bool required, uint32_t* out, std::string* err) {
  if (!cfg.contains(key) || cfg[key].is_null()) {
    if (required) *err = std::string("missing '") + key + "'";
    return !required;
  }
  const json& v = cfg[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 0xffffffffll) {
    *err = std::string("'") + key + "' must be a non-negative integer";
    return false;
  }
  *out = static_cast<uint32_t>(v.get<int64_t>());
  return true;
}

bool get_float(const json& cfg, const char* key, float* out, std::string* err) {
  if (!cfg.contains(key) || cfg[key].is_null()) return true;
  if (!cfg[key].is_number()) {
    *err = std::string("'") + key + "' must be a number";
    return false;
  }
  *out = cfg[key].get<float>();
  return true;
}

bool truthy(const json& cfg, const char* key) {
  return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
}

bool non_null(const json& cfg, const char* key) {
  return cfg.contains(key) && !cfg[key].is_null() && !(cfg[key].is_boolean() && !cfg[key].get<bool>());
}

// model_type (or, without one, the first architectures entry) -> family.
struct FamilyInfo {
  fb::Family family = fb::Family::Llama;
  bool known = false;
  std::string name;  // model_type as given, for messages
};

FamilyInfo family_of(const json& cfg) {
  FamilyInfo f;
  std::string mt = cfg.contains("model_type") && cfg["model_type"].is_string()
                       ? lower(cfg["model_type"].get<std::string>())
                       : std::string();
  if (mt.empty() && cfg.contains("architectures") && cfg["architectures"].is_array() &&
      !cfg["architectures"].empty() && cfg["architectures"][0].is_string()) {
    static const std::pair<const char*, const char*> by_arch[] = {
        {"LlamaForCausalLM", "llama"},       {"MistralForCausalLM", "mistral"},
        {"Qwen2ForCausalLM", "qwen2"},       {"Qwen3ForCausalLM", "qwen3"},
        {"Gemma2ForCausalLM", "gemma2"},     {"Gemma3ForCausalLM", "gemma3_text"},
        {"Phi3ForCausalLM", "phi3"}};
    const std::string a = cfg["architectures"][0].get<std::string>();
    for (const auto& e : by_arch)
      if (a == e.first) mt = e.second;
    if (mt.empty()) mt = a;
  }
  f.name = mt.empty() ? std::string("(none)") : mt;
  static const std::pair<const char*, fb::Family> table[] = {
      {"llama", fb::Family::Llama},  {"mistral", fb::Family::Llama},
      {"qwen2", fb::Family::Qwen2},  {"qwen3", fb::Family::Qwen3},
      {"gemma2", fb::Family::Gemma2}, {"gemma3", fb::Family::Gemma3},
      {"gemma3_text", fb::Family::Gemma3}, {"phi3", fb::Family::Phi3}};
  for (const auto& e : table) {
    if (mt == e.first) {
      f.family = e.second;
      f.known = true;
    }
  }
  return f;
}

bool add_tensors(const SyntheticShape& shape, uint32_t seed, bool direct, fb::DType target,
                 ModelData* m) {
  const ModelData::Arch& a = shape.arch;
  const uint64_t D = a.dim, V = a.vocab_size, F = a.ffn_dim;
  const uint64_t q = static_cast<uint64_t>(a.n_heads) * a.head_dim;
  const uint64_t kv = static_cast<uint64_t>(a.n_kv_heads) * a.head_dim;
  const float std = shape.weight_std;
  uint64_t index = 0;
  auto add = [&](const std::string& name, TensorRole role, int32_t layer,
                 std::vector<uint64_t> dims, bool norm) {
    TensorData t;
    t.name = name;
    t.role = role;
    t.layer = layer;
    t.shape = dims;
    const uint64_t key = (static_cast<uint64_t>(seed) << 32) ^ (index++ * 0xd1b54a32d192ed03ull);
    const uint64_t n = dims.size() == 2 ? dims[0] * dims[1] : dims[0];
    // Norm weights ~1 (a little spread, as trained ones have), matrices ~N(0, std).
    const float mean = norm ? 1.0f : 0.0f, sd = norm ? 0.02f : std;
    t.load_f32 = [key, n, mean, sd](std::vector<float>* out, std::string*) {
      fill_f32(key, mean, sd, static_cast<size_t>(n), out);
      return true;
    };
    if (dims.size() == 2 && dims[1] % kQuantGroup == 0 && direct) {
      // Generated straight into the target encoding: no float tensor, no quantization pass.
      const uint64_t rows = dims[0], cols = dims[1];
      t.has_raw = true;
      t.raw_type = target;
      t.load_raw = [key, sd, target, rows, cols](std::vector<uint8_t>* out, std::string*) {
        fill_raw(key, sd, target, rows, cols, out);
        return true;
      };
    }
    m->tensors.push_back(std::move(t));
  };
  add("model.embed_tokens.weight", TensorRole::TokenEmbedding, -1, {V, D}, false);
  for (uint32_t l = 0; l < a.n_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    const int32_t li = static_cast<int32_t>(l);
    add(p + "input_layernorm.weight", TensorRole::AttnNorm, li, {D}, true);
    add(p + "self_attn.q_proj.weight", TensorRole::Wq, li, {q, D}, false);
    add(p + "self_attn.k_proj.weight", TensorRole::Wk, li, {kv, D}, false);
    add(p + "self_attn.v_proj.weight", TensorRole::Wv, li, {kv, D}, false);
    add(p + "self_attn.o_proj.weight", TensorRole::Wo, li, {D, q}, false);
    add(p + "post_attention_layernorm.weight", TensorRole::FfnNorm, li, {D}, true);
    add(p + "mlp.gate_proj.weight", TensorRole::FfnGate, li, {F, D}, false);
    add(p + "mlp.down_proj.weight", TensorRole::FfnDown, li, {D, F}, false);
    add(p + "mlp.up_proj.weight", TensorRole::FfnUp, li, {F, D}, false);
  }
  add("model.norm.weight", TensorRole::OutputNorm, -1, {D}, true);
  if (!a.tied_embeddings) add("lm_head.weight", TensorRole::Output, -1, {V, D}, false);
  return true;
}

bool read_json(const std::string& path, json* out, std::string* err) {
  std::string text;
  if (!read_text_file(path, &text, err)) return false;
  try {
    *out = json::parse(text);
  } catch (const std::exception& e) {
    *err = "'" + path + "' is not valid JSON (" + e.what() + ")";
    return false;
  }
  if (!out->is_object()) {
    *err = "'" + path + "' is not a JSON object";
    return false;
  }
  return true;
}

}  // namespace

bool synthetic_tokenizer(uint32_t vocab_size, TokenizerData* out, std::string* err) {
  if (vocab_size < kSyntheticMinVocab || vocab_size > kMaxVocab) {
    *err = "synthetic vocabulary size " + std::to_string(vocab_size) + " out of [" +
           std::to_string(kSyntheticMinVocab) + ", " + std::to_string(kMaxVocab) + "]";
    return false;
  }
  TokenizerData t;
  t.kind = fb::TokenizerKind::SentencePiece;
  t.pieces.reserve(vocab_size);
  t.pieces = {"<unk>", "<s>", "</s>"};
  t.types = {fb::TokenType::Unknown, fb::TokenType::Control, fb::TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    t.pieces.push_back(buf);
    t.types.push_back(fb::TokenType::Byte);
  }
  for (uint32_t id = kSyntheticMinVocab; id < vocab_size; ++id) {
    t.pieces.push_back("\xe2\x96\x81tok" + std::to_string(id));  // "▁tokN": decodes to " tokN"
    t.types.push_back(fb::TokenType::Normal);
  }
  t.scores.resize(vocab_size);
  for (uint32_t id = 0; id < vocab_size; ++id) t.scores[id] = -static_cast<float>(id);
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.end_ids = {2};
  t.add_bos = true;
  t.add_space_prefix = true;
  t.byte_fallback = true;
  *out = std::move(t);
  return true;
}

bool synthetic_from_shape(const SyntheticShape& shape, uint32_t seed, const SyntheticOptions& opts,
                          ModelData* out, std::string* err) {
  const ModelData::Arch& a = shape.arch;
  if (a.n_layers == 0 || a.dim == 0 || a.n_heads == 0 || a.n_kv_heads == 0 || a.head_dim == 0 ||
      a.ffn_dim == 0 || a.max_context == 0) {
    *err = shape.name + ": a dimension is zero";
    return false;
  }
  if (a.n_heads % a.n_kv_heads != 0) {
    *err = shape.name + ": num_attention_heads " + std::to_string(a.n_heads) +
           " is not a multiple of num_key_value_heads " + std::to_string(a.n_kv_heads);
    return false;
  }
  if (a.head_dim % 2 != 0) {
    *err = shape.name + ": head_dim " + std::to_string(a.head_dim) + " is odd";
    return false;
  }
  ModelData m;
  m.arch = a;
  if (!synthetic_tokenizer(a.vocab_size, &m.tokenizer, err)) {
    *err = shape.name + ": " + *err;
    return false;
  }
  add_tensors(shape, seed, opts.direct, opts.direct_type, &m);
  m.source = "synthetic:" + shape.name + " seed " + std::to_string(seed);
  *out = std::move(m);
  return true;
}

bool synthetic_from_hf_config(const std::string& config_json_path, uint32_t seed, ModelData* out,
                              std::string* err) {
  return synthetic_from_hf_config(config_json_path, seed, SyntheticOptions(), out, err);
}

bool synthetic_from_hf_config(const std::string& path_in, uint32_t seed,
                              const SyntheticOptions& opts, ModelData* out, std::string* err) {
  std::string path = path_in;
  if (is_directory(path)) path += "/config.json";
  json cfg;
  if (!read_json(path, &cfg, err)) return false;
  auto fail = [&](const std::string& what) {
    *err = "'" + path + "': " + what;
    return false;
  };

  const FamilyInfo fam = family_of(cfg);
  SyntheticShape shape;
  {
    // Display name: the directory holding config.json, else the file name.
    std::string dir = path;
    const size_t slash = dir.find_last_of('/');
    dir = slash == std::string::npos ? std::string() : dir.substr(0, slash);
    const size_t s2 = dir.find_last_of('/');
    shape.name = dir.empty() ? path : dir.substr(s2 == std::string::npos ? 0 : s2 + 1);
  }
  ModelData::Arch& a = shape.arch;
  a.family = fam.family;
  a.rope_style = fb::RopeStyle::Neox;  // Hugging Face rotate_half (see hf.cc)
  a.activation = fb::Activation::SiLU;
  a.max_context = 2048;
  a.rope_theta = 10000.0f;
  a.norm_eps = 1e-6f;
  const bool gemma = fam.family == fb::Family::Gemma2 || fam.family == fb::Family::Gemma3;
  std::string e;
  if (!get_u32(cfg, "hidden_size", true, &a.dim, &e) ||
      !get_u32(cfg, "num_hidden_layers", true, &a.n_layers, &e) ||
      !get_u32(cfg, "num_attention_heads", true, &a.n_heads, &e) ||
      !get_u32(cfg, "intermediate_size", true, &a.ffn_dim, &e) ||
      !get_u32(cfg, "vocab_size", true, &a.vocab_size, &e) ||
      !get_u32(cfg, "max_position_embeddings", false, &a.max_context, &e) ||
      !get_float(cfg, "rope_theta", &a.rope_theta, &e) ||
      !get_float(cfg, "rms_norm_eps", &a.norm_eps, &e))
    return fail(e);
  if (a.n_heads == 0) return fail("num_attention_heads is 0");
  a.n_kv_heads = a.n_heads;
  if (!get_u32(cfg, "num_key_value_heads", false, &a.n_kv_heads, &e)) return fail(e);
  if (!cfg.contains("head_dim") || cfg["head_dim"].is_null()) {
    if (a.dim % a.n_heads != 0)
      return fail("hidden_size " + std::to_string(a.dim) +
                  " is not a multiple of num_attention_heads and head_dim is not given");
    a.head_dim = a.dim / a.n_heads;
  } else if (!get_u32(cfg, "head_dim", true, &a.head_dim, &e)) {
    return fail(e);
  }
  // Hugging Face defaults: Gemma ties the embeddings, Llama / Qwen / Phi-3 configs do not.
  a.tied_embeddings = gemma;
  if (cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean())
    a.tied_embeddings = cfg["tie_word_embeddings"].get<bool>();
  std::string act = "silu";
  for (const char* key : {"hidden_act", "hidden_activation"})
    if (cfg.contains(key) && cfg[key].is_string()) act = lower(cfg[key].get<std::string>());
  if (act == "silu" || act == "swish") a.activation = fb::Activation::SiLU;
  else if (act.compare(0, 4, "gelu") == 0) a.activation = fb::Activation::GeluTanh;
  else return fail("hidden_act '" + act + "' is not supported");
  if (opts.weight_std > 0) shape.weight_std = opts.weight_std;
  else if (cfg.contains("initializer_range") && cfg["initializer_range"].is_number() &&
           cfg["initializer_range"].get<float>() > 0)
    shape.weight_std = cfg["initializer_range"].get<float>();

  // What the Llama forward pass of this runtime does not do.
  std::vector<std::string> missing;
  if (!fam.known) missing.push_back("model_type '" + fam.name + "' (unknown family)");
  else if (fam.family != fb::Family::Llama)
    missing.push_back(std::string("family ") + fb::EnumNameFamily(fam.family));
  if (a.activation != fb::Activation::SiLU) missing.push_back("activation '" + act + "'");
  if (fam.family == fb::Family::Qwen2 || truthy(cfg, "attention_bias"))
    missing.push_back("q/k/v projection biases");
  if (truthy(cfg, "mlp_bias")) missing.push_back("MLP biases");
  if (fam.family == fb::Family::Qwen3) missing.push_back("q/k RMSNorm (qk-norm)");
  if (gemma) {
    missing.push_back("Gemma RMSNorm (1 + w) and sqrt(dim) embedding scale");
    missing.push_back("post-attention / post-FFN norms");
  }
  if (cfg.contains("rope_scaling") && cfg["rope_scaling"].is_object()) {
    const json& rs = cfg["rope_scaling"];
    std::string kind = "?";
    if (rs.contains("rope_type") && rs["rope_type"].is_string()) kind = rs["rope_type"];
    else if (rs.contains("type") && rs["type"].is_string()) kind = rs["type"];
    const bool identity = kind == "default" ||
                          (kind == "linear" && rs.contains("factor") && rs["factor"].is_number() &&
                           rs["factor"].get<double>() == 1.0);
    if (!identity) missing.push_back("rope_scaling '" + kind + "'");
  }
  for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"})
    if (cfg.contains(key) && cfg[key].is_number() && cfg[key].get<double>() != 0)
      missing.push_back(key);
  const bool sliding_used =
      gemma || (non_null(cfg, "sliding_window") && !(cfg.contains("use_sliding_window") &&
                                                    cfg["use_sliding_window"].is_boolean() &&
                                                    !cfg["use_sliding_window"].get<bool>()));
  if (sliding_used) missing.push_back("sliding-window attention");
  if (cfg.contains("partial_rotary_factor") && cfg["partial_rotary_factor"].is_number() &&
      cfg["partial_rotary_factor"].get<double>() != 1.0)
    missing.push_back("partial rotary embedding");

  if (!missing.empty()) {
    std::string list;
    for (const std::string& s : missing) list += (list.empty() ? "" : ", ") + s;
    if (!opts.as_llama)
      return fail("model_type '" + fam.name + "' needs what this runtime does not run yet (" +
                  list + "); use --as-llama for a Llama model of the same shape");
    if (opts.ignored) *opts.ignored = missing;
    a.family = fb::Family::Llama;
    a.activation = fb::Activation::SiLU;
    shape.name += " (as llama)";
  }
  if (opts.n_layers_override) a.n_layers = opts.n_layers_override;
  if (!synthetic_from_shape(shape, seed, opts, out, err)) {
    *err = "'" + path + "': " + *err;
    return false;
  }
  if (opts.name) *opts.name = shape.name;
  return true;
}

std::vector<std::string> synthetic_builtin_names() { return {"smollm2-135m"}; }

bool synthetic_builtin(const std::string& name, uint32_t seed, const SyntheticOptions& opts,
                       ModelData* out, std::string* err) {
  SyntheticShape s;
  if (lower(name) == "smollm2-135m") {
    s.name = "smollm2-135m";
    ModelData::Arch& a = s.arch;
    a.family = fb::Family::Llama;
    a.n_layers = 30;
    a.dim = 576;
    a.n_heads = 9;
    a.n_kv_heads = 3;
    a.head_dim = 64;
    a.ffn_dim = 1536;
    a.vocab_size = 49152;
    a.max_context = 2048;
    a.rope_theta = 100000.0f;
    a.rope_style = fb::RopeStyle::Neox;
    a.norm_eps = 1e-5f;
    a.tied_embeddings = true;
    a.activation = fb::Activation::SiLU;
  } else {
    std::string names;
    for (const std::string& n : synthetic_builtin_names()) names += (names.empty() ? "" : ", ") + n;
    *err = "unknown built-in synthetic model '" + name + "' (built-ins: " + names + ")";
    return false;
  }
  if (opts.weight_std > 0) s.weight_std = opts.weight_std;
  if (opts.n_layers_override) s.arch.n_layers = opts.n_layers_override;
  if (!synthetic_from_shape(s, seed, opts, out, err)) return false;
  if (opts.name) *opts.name = s.name;
  return true;
}

bool synthetic_model(const std::string& spec, uint32_t seed, const SyntheticOptions& opts,
                     ModelData* out, std::string* err) {
  for (const std::string& n : synthetic_builtin_names())
    if (lower(spec) == n) return synthetic_builtin(spec, seed, opts, out, err);
  struct stat st;
  if (stat(spec.c_str(), &st) != 0) {
    std::string names;
    for (const std::string& n : synthetic_builtin_names()) names += (names.empty() ? "" : ", ") + n;
    *err = "'" + spec + "' is neither a config.json path nor a built-in shape (" + names + ")";
    return false;
  }
  return synthetic_from_hf_config(spec, seed, opts, out, err);
}

}  // namespace conv
}  // namespace ringlm
