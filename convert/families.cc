// Per-family configuration and tensor tables (see families.h).
#include "convert/families.h"

#include <ctype.h>
#include <math.h>

#include <map>
#include <utility>

#include "convert/json_config.h"
#include "tensor_manifest.h"

namespace ringlm::internal {
namespace conv {
namespace {

using json = nlohmann::json;
using fb::Family;
using fb::TensorRole;

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

bool is_gemma(Family f) { return f == Family::Gemma2 || f == Family::Gemma3; }

bool present(const json& cfg, const char* key) { return cfg.contains(key) && !cfg[key].is_null(); }

bool truthy(const json& cfg, const char* key) {
  return cfg.contains(key) && cfg[key].is_boolean() && cfg[key].get<bool>();
}

// "model.layers.N.rest" / "blk.N.rest" -> N, rest.
bool split_layer(const std::string& name, const std::string& prefix, int32_t* layer,
                 std::string* rest) {
  if (name.compare(0, prefix.size(), prefix) != 0) return false;
  const size_t dot = name.find('.', prefix.size());
  if (dot == std::string::npos || dot == prefix.size() || dot - prefix.size() > 6) return false;
  int32_t l = 0;
  for (size_t i = prefix.size(); i < dot; ++i) {
    if (!isdigit(static_cast<unsigned char>(name[i]))) return false;
    l = l * 10 + (name[i] - '0');
  }
  *layer = l;
  *rest = name.substr(dot + 1);
  return true;
}

struct NameRole {
  const char* name;
  TensorRole role;
  Split split;
  bool norm;
};

// Per-layer Hugging Face tensors of each family.
std::vector<NameRole> hf_layer_table(Family f) {
  std::vector<NameRole> t = {
      {"self_attn.q_proj.weight", TensorRole::Wq, Split::None, false},
      {"self_attn.k_proj.weight", TensorRole::Wk, Split::None, false},
      {"self_attn.v_proj.weight", TensorRole::Wv, Split::None, false},
      {"self_attn.o_proj.weight", TensorRole::Wo, Split::None, false},
      {"mlp.gate_proj.weight", TensorRole::FfnGate, Split::None, false},
      {"mlp.up_proj.weight", TensorRole::FfnUp, Split::None, false},
      {"mlp.down_proj.weight", TensorRole::FfnDown, Split::None, false},
      {"input_layernorm.weight", TensorRole::AttnNorm, Split::None, true}};
  if (is_gemma(f)) {
    t.push_back({"post_attention_layernorm.weight", TensorRole::PostAttnNorm, Split::None, true});
    t.push_back({"pre_feedforward_layernorm.weight", TensorRole::FfnNorm, Split::None, true});
    t.push_back({"post_feedforward_layernorm.weight", TensorRole::PostFfnNorm, Split::None, true});
  } else {
    t.push_back({"post_attention_layernorm.weight", TensorRole::FfnNorm, Split::None, true});
  }
  if (f == Family::Qwen2) {
    t.push_back({"self_attn.q_proj.bias", TensorRole::Bq, Split::None, false});
    t.push_back({"self_attn.k_proj.bias", TensorRole::Bk, Split::None, false});
    t.push_back({"self_attn.v_proj.bias", TensorRole::Bv, Split::None, false});
  }
  if (f == Family::Qwen3 || f == Family::Gemma3) {
    t.push_back({"self_attn.q_norm.weight", TensorRole::QNorm, Split::None, true});
    t.push_back({"self_attn.k_norm.weight", TensorRole::KNorm, Split::None, true});
  }
  if (f == Family::Phi3) {
    t.push_back({"self_attn.qkv_proj.weight", TensorRole::Wq, Split::Qkv, false});
    t.push_back({"mlp.gate_up_proj.weight", TensorRole::FfnGate, Split::GateUp, false});
  }
  return t;
}

// Per-layer GGUF tensors (llama.cpp's names) of each family.
std::vector<NameRole> gguf_layer_table(Family f) {
  std::vector<NameRole> t = {{"attn_norm.weight", TensorRole::AttnNorm, Split::None, true},
                             {"attn_q.weight", TensorRole::Wq, Split::None, false},
                             {"attn_k.weight", TensorRole::Wk, Split::None, false},
                             {"attn_v.weight", TensorRole::Wv, Split::None, false},
                             {"attn_output.weight", TensorRole::Wo, Split::None, false},
                             {"ffn_norm.weight", TensorRole::FfnNorm, Split::None, true},
                             {"ffn_down.weight", TensorRole::FfnDown, Split::None, false}};
  if (f == Family::Phi3) {
    // Phi-3: fused attn_qkv (or separate q/k/v), and ffn_up holds gate and up (2 * ffn rows).
    t.push_back({"attn_qkv.weight", TensorRole::Wq, Split::Qkv, false});
    t.push_back({"ffn_up.weight", TensorRole::FfnGate, Split::GateUp, false});
  } else {
    t.push_back({"ffn_gate.weight", TensorRole::FfnGate, Split::None, false});
    t.push_back({"ffn_up.weight", TensorRole::FfnUp, Split::None, false});
  }
  if (is_gemma(f)) {
    t.push_back({"post_attention_norm.weight", TensorRole::PostAttnNorm, Split::None, true});
    t.push_back({"post_ffw_norm.weight", TensorRole::PostFfnNorm, Split::None, true});
  }
  if (f == Family::Qwen2) {
    t.push_back({"attn_q.bias", TensorRole::Bq, Split::None, false});
    t.push_back({"attn_k.bias", TensorRole::Bk, Split::None, false});
    t.push_back({"attn_v.bias", TensorRole::Bv, Split::None, false});
  }
  if (f == Family::Qwen3 || f == Family::Gemma3) {
    t.push_back({"attn_q_norm.weight", TensorRole::QNorm, Split::None, true});
    t.push_back({"attn_k_norm.weight", TensorRole::KNorm, Split::None, true});
  }
  return t;
}

bool lookup(const std::vector<NameRole>& table, const std::string& rest, int32_t layer,
            SourceRole* out) {
  for (const NameRole& e : table) {
    if (rest == e.name) {
      out->role = e.role;
      out->layer = layer;
      out->split = e.split;
      out->norm = e.norm;
      return true;
    }
  }
  return false;
}

std::string shape_str(const std::vector<uint64_t>& s) {
  std::string o = "[";
  for (size_t i = 0; i < s.size(); ++i) o += (i ? ", " : "") + std::to_string(s[i]);
  return o + "]";
}

}  // namespace

const char* family_display_name(Family f) {
  switch (f) {
    case Family::Llama: return "llama";
    case Family::Qwen2: return "qwen2";
    case Family::Qwen3: return "qwen3";
    case Family::Gemma2: return "gemma2";
    case Family::Gemma3: return "gemma3";
    case Family::Phi3: return "phi3";
  }
  return "?";
}

bool hf_family(const json& cfg, Family* family, std::string* name) {
  std::string mt = cfg.contains("model_type") && cfg["model_type"].is_string()
                       ? lower(cfg["model_type"].get<std::string>())
                       : std::string();
  if (mt.empty() && cfg.contains("architectures") && cfg["architectures"].is_array() &&
      !cfg["architectures"].empty() && cfg["architectures"][0].is_string()) {
    static const std::pair<const char*, const char*> by_arch[] = {
        {"LlamaForCausalLM", "llama"},   {"MistralForCausalLM", "mistral"},
        {"Qwen2ForCausalLM", "qwen2"},   {"Qwen3ForCausalLM", "qwen3"},
        {"Gemma2ForCausalLM", "gemma2"}, {"Gemma3ForCausalLM", "gemma3_text"},
        {"Phi3ForCausalLM", "phi3"}};
    const std::string a = cfg["architectures"][0].get<std::string>();
    for (const auto& e : by_arch)
      if (a == e.first) mt = e.second;
    if (mt.empty()) mt = a;
  }
  *name = mt.empty() ? std::string("(none)") : mt;
  static const std::pair<const char*, Family> table[] = {
      {"llama", Family::Llama},   {"mistral", Family::Llama},      {"qwen2", Family::Qwen2},
      {"qwen3", Family::Qwen3},   {"gemma2", Family::Gemma2},      {"gemma3", Family::Gemma3},
      {"gemma3_text", Family::Gemma3}, {"phi3", Family::Phi3}};
  for (const auto& e : table) {
    if (mt == e.first) {
      *family = e.second;
      return true;
    }
  }
  return false;
}

namespace {

// The activation, and refusing the options no family here runs (partial rotary, experts,
// MLP / o_proj biases); the family's QKV-bias and QK-norm flags.
bool hf_activation_and_options(const json& cfg, Family fam, const std::string& who,
                               ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  std::string act = is_gemma(fam) ? "gelu_pytorch_tanh" : "silu";
  for (const char* key : {"hidden_act", "hidden_activation"})
    if (cfg.contains(key) && cfg[key].is_string()) act = lower(cfg[key].get<std::string>());
  if (act == "silu" || act == "swish") {
    a.activation = fb::Activation::SiLU;
  } else if (act == "gelu_pytorch_tanh" || act == "gelu_new") {
    a.activation = fb::Activation::GeluTanh;
  } else {
    *err = "hidden_act '" + act + "' is not supported (silu, gelu_pytorch_tanh)";
    return false;
  }

  // Options no family here runs.
  if (present(cfg, "partial_rotary_factor") && cfg["partial_rotary_factor"].is_number() &&
      cfg["partial_rotary_factor"].get<double>() != 1.0) {
    *err = who + ": partial_rotary_factor " + cfg["partial_rotary_factor"].dump() +
           " (partial rotary embedding) is not supported";
    return false;
  }
  for (const char* key : {"num_local_experts", "num_experts", "n_routed_experts"}) {
    if (present(cfg, key) && cfg[key].is_number_integer() && cfg[key].get<int64_t>() > 0) {
      *err = who + ": mixture-of-experts models (" + key + ") are not supported";
      return false;
    }
  }
  if (truthy(cfg, "mlp_bias")) {
    *err = who + ": mlp_bias (MLP biases) is not supported";
    return false;
  }
  if (fam != Family::Qwen2 && truthy(cfg, "attention_bias")) {
    *err = who + ": attention_bias (q/k/v/o projection biases) is not supported";
    return false;
  }
  a.qkv_bias = fam == Family::Qwen2;  // Qwen2: q/k/v biases always, no o_proj bias
  a.qk_norm = fam == Family::Qwen3 || fam == Family::Gemma3;
  return true;
}

// RoPE scaling: linear and llama3; LongRoPE and others refused.
bool hf_rope_scaling(const json& cfg, const std::string& who, ModelData::Arch* arch,
                     std::string* err) {
  ModelData::Arch& a = *arch;
  if (present(cfg, "rope_scaling")) {
    const json& rs = cfg["rope_scaling"];
    if (!rs.is_object()) {
      *err = "'rope_scaling' must be an object or null";
      return false;
    }
    std::string kind = "?";
    if (rs.contains("rope_type") && rs["rope_type"].is_string()) kind = rs["rope_type"];
    else if (rs.contains("type") && rs["type"].is_string()) kind = rs["type"];
    kind = lower(kind);
    auto num = [&](const char* key, double def, double* v) {
      if (!rs.contains(key) || rs[key].is_null()) {
        if (def < 0) {
          *err = who + ": rope_scaling '" + kind + "' needs '" + key + "'";
          return false;
        }
        *v = def;
        return true;
      }
      if (!rs[key].is_number()) {
        *err = std::string("rope_scaling '") + key + "' must be a number";
        return false;
      }
      *v = rs[key].get<double>();
      return true;
    };
    if (kind == "default") {
      // no scaling
    } else if (kind == "linear") {
      double f = 0;
      if (!num("factor", -1, &f)) return false;
      if (!(f >= 1.0 && f <= 1024.0)) {
        *err = who + ": rope_scaling linear factor " + std::to_string(f) + " out of [1, 1024]";
        return false;
      }
      if (f != 1.0) {
        a.rope_scaling = fb::RopeScaling::Linear;
        a.rope_scaling_factor = static_cast<float>(f);
      }
    } else if (kind == "llama3") {
      double f = 0, lo = 0, hi = 0, orig = 0;
      if (!num("factor", -1, &f) || !num("low_freq_factor", 1.0, &lo) ||
          !num("high_freq_factor", 4.0, &hi) ||
          !num("original_max_position_embeddings", 8192.0, &orig))
        return false;
      if (!(f >= 1.0 && f <= 1024.0) || !(lo > 0) || !(hi > lo) || !(orig >= 1 && orig < 4.3e9)) {
        *err = who + ": rope_scaling llama3 parameters are inconsistent";
        return false;
      }
      a.rope_scaling = fb::RopeScaling::Llama3;
      a.rope_scaling_factor = static_cast<float>(f);
      a.rope_low_freq_factor = static_cast<float>(lo);
      a.rope_high_freq_factor = static_cast<float>(hi);
      a.rope_original_context = static_cast<uint32_t>(orig);
    } else if (kind == "longrope" || kind == "su") {
      *err = who + ": rope_scaling '" + kind +
             "' (Phi-3 long-context LongRoPE factors) is not supported";
      return false;
    } else {
      *err = who + ": rope_scaling '" + kind + "' is not supported (linear and llama3 are)";
      return false;
    }
  }
  return true;
}

// Gemma: scaled embeddings, query scale, soft-caps, local RoPE base; soft-caps refused elsewhere.
bool hf_gemma_options(const json& cfg, Family fam, const std::string& who,
                      ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  std::string e;
  if (is_gemma(fam)) {
    a.embedding_scale = static_cast<float>(sqrt(static_cast<double>(a.dim)));
    a.query_pre_attn_scalar = 256.0f;  // the HF config default
    if (!json_float(cfg, "query_pre_attn_scalar", &a.query_pre_attn_scalar, &e)) {
      *err = e;
      return false;
    }
    a.attn_logit_softcap = fam == Family::Gemma2 ? 50.0f : 0.0f;
    a.final_logit_softcap = fam == Family::Gemma2 ? 30.0f : 0.0f;
    for (auto kv : {std::make_pair("attn_logit_softcapping", &a.attn_logit_softcap),
                    std::make_pair("final_logit_softcapping", &a.final_logit_softcap)}) {
      if (cfg.contains(kv.first) && cfg[kv.first].is_null()) *kv.second = 0.0f;
      else if (!json_float(cfg, kv.first, kv.second, &e)) {
        *err = e;
        return false;
      }
    }
    if (fam == Family::Gemma3) {
      a.rope_theta_local = 10000.0f;
      if (!json_float(cfg, "rope_local_base_freq", &a.rope_theta_local, &e)) {
        *err = e;
        return false;
      }
    }
  } else {
    for (const char* key : {"attn_logit_softcapping", "final_logit_softcapping"}) {
      if (present(cfg, key) && cfg[key].is_number() && cfg[key].get<double>() != 0) {
        *err = who + ": " + key + " is only supported for Gemma";
        return false;
      }
    }
  }
  return true;
}

// Sliding-window layers: layer_types when given, else the family's rule.
bool hf_sliding_window(const json& cfg, Family fam, const std::string& who,
                       ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  std::string e;
  uint32_t window = is_gemma(fam) ? 4096 : 0;
  bool window_given = false;
  for (const char* key : {"sliding_window", "sliding_window_attention_size"}) {
    if (present(cfg, key)) {
      if (!json_u32(cfg, key, true, &window, &e)) {
        *err = e;
        return false;
      }
      window_given = true;
      break;
    }
  }
  if (cfg.contains("sliding_window") && cfg["sliding_window"].is_null() && !is_gemma(fam))
    window = 0;
  std::vector<bool> local(a.n_layers, false);
  if (cfg.contains("layer_types") && cfg["layer_types"].is_array()) {
    const json& lt = cfg["layer_types"];
    if (lt.size() != a.n_layers) {
      *err = "'layer_types' has " + std::to_string(lt.size()) + " entries for " +
             std::to_string(a.n_layers) + " layers";
      return false;
    }
    for (uint32_t l = 0; l < a.n_layers; ++l) {
      const std::string t = lt[l].is_string() ? lt[l].get<std::string>() : std::string("?");
      if (t == "sliding_attention") local[l] = true;
      else if (t != "full_attention") {
        *err = "layer_types entry '" + t + "' is not supported";
        return false;
      }
    }
  } else if (fam == Family::Gemma2) {
    for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = l % 2 == 0;  // even layers local
  } else if (fam == Family::Gemma3) {
    uint32_t pattern = 6;
    if (!json_u32(cfg, "sliding_window_pattern", false, &pattern, &e)) {
      *err = e;
      return false;
    }
    if (pattern == 0) {
      *err = "'sliding_window_pattern' must be positive";
      return false;
    }
    for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = (l + 1) % pattern != 0;
  } else if (fam == Family::Qwen2 || fam == Family::Qwen3) {
    if (truthy(cfg, "use_sliding_window") && window > 0) {
      uint32_t first = 0;
      if (!json_u32(cfg, "max_window_layers", false, &first, &e)) {
        *err = e;
        return false;
      }
      for (uint32_t l = first; l < a.n_layers; ++l) local[l] = true;
    }
  } else if (window_given && window > 0) {
    // Mistral and Phi-3: every layer attends within the window.
    for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = true;
  }
  bool any_local = false;
  for (bool b : local) any_local |= b;
  if (any_local) {
    if (window == 0) {
      *err = who + ": sliding-window layers need a positive sliding_window";
      return false;
    }
    a.sliding_window = window;
    a.layer_is_local = local;
  }
  return true;
}

}  // namespace

bool hf_config_arch(const json& cfg, ModelData::Arch* out, std::string* err) {
  Family fam;
  std::string mt;
  if (!hf_family(cfg, &fam, &mt)) {
    std::string archs;
    if (cfg.contains("architectures") && cfg["architectures"].is_array())
      for (const auto& a : cfg["architectures"])
        if (a.is_string()) archs += (archs.empty() ? "" : ", ") + a.get<std::string>();
    *err = "model_type '" + mt + "' (architectures: " + (archs.empty() ? "none" : archs) +
           ") is not supported (supported: llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3)";
    return false;
  }
  const std::string who = "model_type '" + mt + "'";
  if (fam == Family::Gemma3 && cfg.contains("text_config")) {
    *err = who + " with a text_config (Gemma3ForConditionalGeneration, multimodal) is not "
                 "supported: convert a text-only Gemma3ForCausalLM checkpoint";
    return false;
  }
  ModelData::Arch a;
  a.family = fam;
  a.rope_style = fb::RopeStyle::Neox;  // HF rotate_half; q/k are never permuted
  a.activation = fb::Activation::SiLU;
  a.max_context = 2048;
  a.norm_eps = 1e-6f;
  a.rope_theta = 10000.0f;
  std::string e;
  if (!json_u32(cfg, "hidden_size", true, &a.dim, &e) ||
      !json_u32(cfg, "intermediate_size", true, &a.ffn_dim, &e) ||
      !json_u32(cfg, "num_hidden_layers", true, &a.n_layers, &e) ||
      !json_u32(cfg, "num_attention_heads", true, &a.n_heads, &e) ||
      !json_u32(cfg, "vocab_size", true, &a.vocab_size, &e) ||
      !json_u32(cfg, "max_position_embeddings", false, &a.max_context, &e) ||
      !json_float(cfg, "rms_norm_eps", &a.norm_eps, &e) ||
      !json_float(cfg, "rope_theta", &a.rope_theta, &e)) {
    *err = e;
    return false;
  }
  if (a.n_heads == 0 || a.n_layers == 0 || a.dim == 0) {
    *err = "hidden_size, num_hidden_layers and num_attention_heads must be positive";
    return false;
  }
  a.n_kv_heads = a.n_heads;
  if (!json_u32(cfg, "num_key_value_heads", false, &a.n_kv_heads, &e)) {
    *err = e;
    return false;
  }
  // head_dim: the config's, else the family default (Gemma 256, Qwen3 128), else dim / heads.
  if (present(cfg, "head_dim")) {
    if (!json_u32(cfg, "head_dim", true, &a.head_dim, &e)) {
      *err = e;
      return false;
    }
  } else if (is_gemma(fam)) {
    a.head_dim = 256;
  } else if (fam == Family::Qwen3) {
    a.head_dim = 128;
  } else {
    if (a.dim % a.n_heads != 0) {
      *err = "hidden_size " + std::to_string(a.dim) +
             " is not a multiple of num_attention_heads and head_dim is not given";
      return false;
    }
    a.head_dim = a.dim / a.n_heads;
  }
  // Hugging Face defaults: Gemma ties the embeddings; Llama, Qwen and Phi-3 configs do not.
  a.tied_embeddings = is_gemma(fam);
  if (cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean())
    a.tied_embeddings = cfg["tie_word_embeddings"].get<bool>();

  if (!hf_activation_and_options(cfg, fam, who, &a, err) ||
      !hf_rope_scaling(cfg, who, &a, err) ||
      !hf_gemma_options(cfg, fam, who, &a, err) ||
      !hf_sliding_window(cfg, fam, who, &a, err)) {
    return false;
  }
  *out = a;
  return true;
}

bool gguf_family(const std::string& arch, Family* family) {
  static const std::pair<const char*, Family> table[] = {
      {"llama", Family::Llama},   {"qwen2", Family::Qwen2},   {"qwen3", Family::Qwen3},
      {"gemma2", Family::Gemma2}, {"gemma3", Family::Gemma3}, {"phi3", Family::Phi3}};
  for (const auto& e : table) {
    if (arch == e.first) {
      *family = e.second;
      return true;
    }
  }
  return false;
}

bool hf_tensor_role(Family f, const std::string& name, SourceRole* out) {
  *out = SourceRole();
  if (name == "model.embed_tokens.weight") return out->role = TensorRole::TokenEmbedding, true;
  if (name == "model.norm.weight") {
    out->role = TensorRole::OutputNorm;
    out->norm = true;
    return true;
  }
  if (name == "lm_head.weight") return out->role = TensorRole::Output, true;
  int32_t layer;
  std::string rest;
  if (!split_layer(name, "model.layers.", &layer, &rest)) return false;
  return lookup(hf_layer_table(f), rest, layer, out);
}

bool gguf_tensor_role(Family f, const std::string& name, SourceRole* out) {
  *out = SourceRole();
  if (name == "token_embd.weight") return out->role = TensorRole::TokenEmbedding, true;
  if (name == "output_norm.weight") {
    out->role = TensorRole::OutputNorm;
    out->norm = true;
    return true;
  }
  if (name == "output.weight") return out->role = TensorRole::Output, true;
  if (name == "rope_freqs.weight" && f == Family::Llama)
    return out->role = TensorRole::RopeFreqs, true;
  int32_t layer;
  std::string rest;
  if (!split_layer(name, "blk.", &layer, &rest)) return false;
  return lookup(gguf_layer_table(f), rest, layer, out);
}

namespace {
std::string table_name(const std::vector<NameRole>& table, const std::string& prefix,
                       TensorRole role, int32_t layer) {
  for (const NameRole& e : table) {
    const bool covers = e.role == role ||
                        (e.split == Split::Qkv && (role == TensorRole::Wk || role == TensorRole::Wv)) ||
                        (e.split == Split::GateUp && role == TensorRole::FfnUp);
    if (covers) {
      // Prefer the unfused name when both exist (Phi-3 lists the fused one last).
      return prefix + std::to_string(layer) + "." + e.name;
    }
  }
  return prefix + std::to_string(layer) + "." + fb::EnumNameTensorRole(role);
}
}  // namespace

std::string hf_tensor_name(Family f, TensorRole role, int32_t layer) {
  switch (role) {
    case TensorRole::TokenEmbedding: return "model.embed_tokens.weight";
    case TensorRole::OutputNorm: return "model.norm.weight";
    case TensorRole::Output: return "lm_head.weight";
    case TensorRole::RopeFreqs: return "rope_freqs";
    default: break;
  }
  std::vector<NameRole> t = hf_layer_table(f);
  if (f == Family::Phi3) {  // Phi-3 checkpoints hold the fused tensors
    std::vector<NameRole> fused;
    for (const NameRole& e : t)
      if (e.split != Split::None) fused.push_back(e);
    for (const NameRole& e : t)
      if (e.split == Split::None) fused.push_back(e);
    t = fused;
  }
  return table_name(t, "model.layers.", role, layer);
}

std::string gguf_tensor_name(Family f, TensorRole role, int32_t layer) {
  switch (role) {
    case TensorRole::TokenEmbedding: return "token_embd.weight";
    case TensorRole::OutputNorm: return "output_norm.weight";
    case TensorRole::Output: return "output.weight";
    case TensorRole::RopeFreqs: return "rope_freqs.weight";
    default: break;
  }
  return table_name(gguf_layer_table(f), "blk.", role, layer);
}

bool add_source_tensor(const ModelData::Arch& a, const SourceRole& r, TensorData t,
                       std::vector<TensorData>* out, std::string* err) {
  t.role = r.role;
  t.layer = r.layer;
  if (r.split == Split::None) {
    out->push_back(std::move(t));
    return true;
  }
  const uint64_t q = uint64_t{a.n_heads} * a.head_dim, kv = uint64_t{a.n_kv_heads} * a.head_dim;
  const uint64_t F = a.ffn_dim;
  struct Part {
    TensorRole role;
    uint64_t r0, n;
    const char* what;
  };
  // A fixed array, not a std::vector assigned from a braced list: GCC 12 warns (-Wnonnull, a
  // false positive) on the memmove of that assignment into an empty vector.
  const bool qkv = r.split == Split::Qkv;
  const Part all[3] = {
      qkv ? Part{TensorRole::Wq, 0, q, "q"} : Part{TensorRole::FfnGate, 0, F, "gate"},
      qkv ? Part{TensorRole::Wk, q, kv, "k"} : Part{TensorRole::FfnUp, F, F, "up"},
      Part{TensorRole::Wv, q + kv, kv, "v"}};
  const size_t n_parts = qkv ? 3 : 2;
  const uint64_t want = qkv ? q + 2 * kv : 2 * F;
  if (t.shape.size() != 2 || t.shape[0] != want) {
    *err = "fused tensor '" + t.name + "' has shape " + shape_str(t.shape) + ", expected " +
           std::to_string(want) + " rows";
    return false;
  }
  const uint64_t cols = t.shape[1];
  for (size_t pi = 0; pi < n_parts; ++pi) {
    const Part& p = all[pi];
    TensorData s;
    s.name = t.name + "[" + p.what + "]";
    s.role = p.role;
    s.layer = r.layer;
    s.shape = {p.n, cols};
    s.source_type = t.source_type;
    auto load = t.load_f32;
    const uint64_t r0 = p.r0, n = p.n;
    s.load_f32 = [load, r0, n, cols](std::vector<float>* dst, std::string* e) {
      std::vector<float> full;
      if (!load(&full, e)) return false;
      dst->assign(full.begin() + static_cast<ptrdiff_t>(r0 * cols),
                  full.begin() + static_cast<ptrdiff_t>((r0 + n) * cols));
      return true;
    };
    out->push_back(std::move(s));
  }
  return true;
}

void add_one_on_load(TensorData* t) {
  auto load = t->load_f32;
  t->load_f32 = [load](std::vector<float>* dst, std::string* e) {
    if (!load(dst, e)) return false;
    for (float& v : *dst) v = 1.0f + v;
    return true;
  };
  t->has_raw = false;
}

std::vector<TensorSpec> family_tensor_specs(const ModelData::Arch& a) {
  // The runtime's manifest (runtime/tensor_manifest.h) is the one list; this only reorders it the
  // way files are written (embedding, layers, final norm, output) and drops what may be absent.
  const ManifestShape shape{a.n_layers,
                            a.dim,
                            a.n_heads * a.head_dim,
                            a.n_kv_heads * a.head_dim,
                            a.head_dim,
                            a.ffn_dim,
                            a.vocab_size,
                            a.qkv_bias,
                            a.qk_norm,
                            is_gemma(a.family),
                            a.tied_embeddings};
  std::vector<TensorSpec> s;
  auto add = [&s](const ManifestEntry& e) {
    if (!e.required) return;  // RopeFreqs: checked on its own by check_family_tensors
    std::vector<uint64_t> dims = e.rows == 0 ? std::vector<uint64_t>{e.cols}
                                             : std::vector<uint64_t>{e.rows, e.cols};
    s.push_back({e.role, e.layer, std::move(dims), true, e.norm});
  };
  ManifestEntry globals[kManifestMaxGlobal], layer[kManifestMaxLayer];
  const uint32_t n_globals = manifest_globals(shape, globals);
  add(globals[0]);  // TokenEmbedding
  for (uint32_t l = 0; l < a.n_layers; ++l) {
    const uint32_t n = manifest_layer(shape, l, layer);
    for (uint32_t i = 0; i < n; ++i) add(layer[i]);
  }
  for (uint32_t i = 1; i < n_globals; ++i) add(globals[i]);
  return s;
}

bool check_family_tensors(const ModelData& m,
                          std::string (*name_of)(Family, TensorRole, int32_t),
                          std::string* err) {
  const Family f = m.arch.family;
  std::map<std::pair<int, int32_t>, const TensorData*> have;
  for (const TensorData& t : m.tensors) {
    auto key = std::make_pair(static_cast<int>(t.role), t.layer);
    if (have.count(key)) {
      *err = "tensor '" + t.name + "' duplicates '" + have[key]->name + "'";
      return false;
    }
    have[key] = &t;
  }
  size_t used = 0;
  for (const TensorSpec& s : family_tensor_specs(m.arch)) {
    auto it = have.find(std::make_pair(static_cast<int>(s.role), s.layer));
    if (it == have.end()) {
      if (!s.required) continue;
      *err = std::string(family_display_name(f)) + " model is missing tensor '" +
             name_of(f, s.role, s.layer) + "'";
      return false;
    }
    ++used;
    if (it->second->shape != s.shape) {
      *err = "tensor '" + it->second->name + "' has shape " + shape_str(it->second->shape) +
             ", the " + family_display_name(f) + " configuration implies " + shape_str(s.shape);
      return false;
    }
  }
  auto rf = have.find(std::make_pair(static_cast<int>(TensorRole::RopeFreqs), -1));
  if (rf != have.end()) {
    ++used;
    const std::vector<uint64_t> want = {m.arch.head_dim / 2};
    if (rf->second->shape != want) {
      *err = "tensor '" + rf->second->name + "' has shape " + shape_str(rf->second->shape) +
             ", expected " + shape_str(want) + " (head_dim / 2)";
      return false;
    }
  }
  if (used != m.tensors.size()) {
    for (const TensorData& t : m.tensors) {
      bool known = t.role == TensorRole::RopeFreqs && t.layer == -1;
      for (const TensorSpec& s : family_tensor_specs(m.arch))
        known |= s.role == t.role && s.layer == t.layer;
      if (!known) {
        *err = "tensor '" + t.name + "' is not used by a " + family_display_name(f) +
               " model of this configuration";
        return false;
      }
    }
  }
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
