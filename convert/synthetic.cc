// Synthetic random-weight models in the shape of real ones (see synthetic.h).
#include "convert/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "convert/families.h"
#include "convert/file_io.h"
#include "convert/json_config.h"
#include "kernels/scalar.h"
#include "model.h"
#include "quant.h"

namespace ringlm::internal {
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

// The 4- or 5-bit grid levels round(v / 2^shift) + mid, clamped to [0, 2 mid - 1], of n generated
// values packed as Q4K's nibbles at `qs` (and, when `five`, their fifth bits in Q5K's plane at
// `high`): what the Q5, Q4_1, Q5_1, Q4K and Q5K encodings share. Both planes start zeroed.
void pack_grid_levels(const Gen& g, uint64_t n, int shift, int mid, bool five, uint8_t* qs,
                      uint8_t* high) {
  int32_t v[kQuantGroup];
  for (uint64_t grp = 0; grp < n / kQuantGroup; ++grp) {
    for (uint32_t j = 0; j < kQuantGroup; j += 2) g.pair(grp * 16 + j / 2, &v[j], &v[j + 1]);
    uint8_t* q = qs + grp * (kQuantGroup / 2);
    for (uint32_t j = 0; j < kQuantGroup; ++j) {
      int32_t l = ((v[j] + (1 << (shift - 1))) >> shift) + mid;
      l = l < 0 ? 0 : l > 2 * mid - 1 ? 2 * mid - 1 : l;
      q[j % 16] = static_cast<uint8_t>(q[j % 16] | (l & 15) << (j < 16 ? 0 : 4));
      if (five) {
        uint8_t& h = high[grp * 4 + j % 4];
        h = static_cast<uint8_t>(h | (l >> 4) << (j / 4));
      }
    }
  }
}

// The tensor directly in the file encoding `t` (rows x cols, cols a multiple of 32, mean 0).
void fill_raw(uint64_t key, float std, fb::DType t, uint64_t rows, uint64_t cols,
              std::vector<uint8_t>* out) {
  const WeightType wt = static_cast<WeightType>(t);
  const uint64_t n = rows * cols;
  out->assign(static_cast<size_t>(tensor_data_bytes(wt, rows, cols)), 0);  // padding, short super-blocks: 0
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
    case fb::DType::Q5: {
      // Levels round(v / 8) + 16 in [0, 31] with scale 8 s: the 5-bit grid, in Q5's encoding.
      pack_grid_levels(g, n, 3, 16, true, o, o + q5k_high_offset(rows, cols));
      break;
    }
    case fb::DType::Q4_1:
    case fb::DType::Q5_1: {
      // Q4_1: levels round(v / 16) + 8 in [0, 15] with d = 16 s and m = -8 d, so value = d q + m
      // = d (q - 8): the Q4 grid, in Q4_1's encoding. Q5_1: levels round(v / 8) + 16 in [0, 31]
      // with d = 8 s and m = -16 d: Q5's grid.
      const bool five = t == fb::DType::Q5_1;
      const int shift = five ? 3 : 4, mid = five ? 16 : 8;
      pack_grid_levels(g, n, shift, mid, five, o, five ? o + q5k_high_offset(rows, cols) : nullptr);
      const uint16_t d = f32_to_fp16(static_cast<float>(1 << shift) * fp16_to_f32(s16));
      const uint16_t m = f32_to_fp16(-static_cast<float>(mid) * fp16_to_f32(d));
      uint8_t* dm = o + quant_scales_offset(wt, rows, cols);
      for (uint64_t i = 0; i < rows * (cols / kQuantGroup); ++i) {
        memcpy(dm + 4 * i, &d, 2);
        memcpy(dm + 4 * i + 2, &m, 2);
      }
      return;
    }
    case fb::DType::Q4K:
    case fb::DType::Q5K: {
      // Q4K: unsigned nibbles round(v / 16) + 8; every group's sc = m = 1 with d = 16 s and
      // dmin = 8 d, so value = d q - dmin = d (q - 8): the Q4 grid, in Q4K's encoding. Q5K: the
      // same with levels round(v / 8) + 16 in [0, 31], d = 8 s, dmin = 16 d: the 5-bit grid.
      const bool five = t == fb::DType::Q5K;
      const int shift = five ? 3 : 4, mid = five ? 16 : 8;
      pack_grid_levels(g, n, shift, mid, five, o, five ? o + q5k_high_offset(rows, cols) : nullptr);
      const uint64_t supers = rows * q4k_supers(cols);
      const uint16_t d = f32_to_fp16(static_cast<float>(1 << shift) * fp16_to_f32(s16));
      const uint16_t dmin = f32_to_fp16(static_cast<float>(mid) * fp16_to_f32(d));
      uint8_t* dm = o + quant_scales_offset(wt, rows, cols);
      uint8_t* subs = o + (five ? q5k_subs_offset(rows, cols) : q4k_subs_offset(rows, cols));
      const uint32_t groups = static_cast<uint32_t>(cols / kQuantGroup);
      for (uint64_t i = 0; i < supers; ++i) {
        memcpy(dm + 4 * i, &d, 2);
        memcpy(dm + 4 * i + 2, &dmin, 2);
        const uint32_t first = static_cast<uint32_t>(i % q4k_supers(cols)) * kQ4kSuperGroups;
        for (uint32_t k = 0; k < kQ4kSuperGroups && first + k < groups; ++k) {
          subs[16 * i + k] = 1;
          subs[16 * i + 8 + k] = 1;
        }
      }
      return;
    }
    case fb::DType::Q6K: {
      // Levels round(v / 4) + 32 in [0, 63]; every sub-block's sc = 1 with d = 4 s, so value =
      // d (q - 32): the int8 grid at a quarter of its resolution, in Q6K's encoding.
      int32_t v[kQuantGroup];
      uint8_t* high = o + q6k_high_offset(rows, cols);
      for (uint64_t grp = 0; grp < n / kQuantGroup; ++grp) {
        for (uint32_t j = 0; j < kQuantGroup; j += 2) g.pair(grp * 16 + j / 2, &v[j], &v[j + 1]);
        uint8_t* q = o + grp * (kQuantGroup / 2);
        uint8_t* h = high + grp * (kQuantGroup / 4);
        for (uint32_t j = 0; j < kQuantGroup; ++j) {
          int32_t l = ((v[j] + 2) >> 2) + 32;
          l = l < 0 ? 0 : l > 63 ? 63 : l;
          q[j % 16] = static_cast<uint8_t>(q[j % 16] | (l & 15) << (j < 16 ? 0 : 4));
          h[j % 8] = static_cast<uint8_t>(h[j % 8] | (l >> 4) << (2 * (j / 8)));
        }
      }
      const uint64_t supers = rows * q6k_supers(cols);
      const uint16_t d = f32_to_fp16(4.0f * fp16_to_f32(s16));
      uint8_t* dp = o + quant_scales_offset(wt, rows, cols);
      uint8_t* sc = o + q6k_subs_offset(rows, cols);
      const uint32_t groups = static_cast<uint32_t>(cols / kQuantGroup);
      for (uint64_t i = 0; i < supers; ++i) {
        memcpy(dp + 2 * i, &d, 2);
        const uint32_t first = static_cast<uint32_t>(i % q6k_supers(cols)) * kQ4kSuperGroups;
        for (uint32_t k = 0; k < kQ4kSuperGroups && first + k < groups; ++k) {
          sc[kQ6kSubsPerSuper * i + 2 * k] = 1;
          sc[kQ6kSubsPerSuper * i + 2 * k + 1] = 1;
        }
      }
      return;
    }
  }
  const uint16_t sc = t == fb::DType::Q8   ? s16
                      : t == fb::DType::Q5 ? f32_to_fp16(8.0f * fp16_to_f32(s16))
                                           : f32_to_fp16(16.0f * fp16_to_f32(s16));
  uint8_t* scales = o + quant_scales_offset(wt, rows, cols);
  const uint64_t n_scales = rows * (cols / kQuantGroup);
  for (uint64_t i = 0; i < n_scales; ++i) memcpy(scales + 2 * i, &sc, 2);
}

std::string lower(std::string s) {
  for (char& c : s) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  return s;
}

// The dimensions alone, for --as-llama on a config the family reader refuses (unknown
// model_type, MoE, partial rotary, ...): a Llama model of the same size.
bool lenient_llama_arch(const json& cfg, ModelData::Arch* out, std::string* err) {
  ModelData::Arch a;
  a.family = fb::Family::Llama;
  a.rope_style = fb::RopeStyle::Neox;
  a.activation = fb::Activation::SiLU;
  a.max_context = 2048;
  a.norm_eps = 1e-6f;
  a.rope_theta = 10000.0f;
  if (!json_u32(cfg, "hidden_size", true, &a.dim, err) ||
      !json_u32(cfg, "num_hidden_layers", true, &a.n_layers, err) ||
      !json_u32(cfg, "num_attention_heads", true, &a.n_heads, err) ||
      !json_u32(cfg, "intermediate_size", true, &a.ffn_dim, err) ||
      !json_u32(cfg, "vocab_size", true, &a.vocab_size, err) ||
      !json_u32(cfg, "max_position_embeddings", false, &a.max_context, err) ||
      !json_float(cfg, "rope_theta", &a.rope_theta, err) ||
      !json_float(cfg, "rms_norm_eps", &a.norm_eps, err))
    return false;
  if (a.n_heads == 0) {
    *err = "num_attention_heads is 0";
    return false;
  }
  a.n_kv_heads = a.n_heads;
  if (!json_u32(cfg, "num_key_value_heads", false, &a.n_kv_heads, err)) return false;
  if (cfg.contains("head_dim") && !cfg["head_dim"].is_null()) {
    if (!json_u32(cfg, "head_dim", true, &a.head_dim, err)) return false;
  } else if (a.dim % a.n_heads != 0) {
    *err = "hidden_size " + std::to_string(a.dim) +
           " is not a multiple of num_attention_heads and head_dim is not given";
    return false;
  } else {
    a.head_dim = a.dim / a.n_heads;
  }
  if (cfg.contains("tie_word_embeddings") && cfg["tie_word_embeddings"].is_boolean())
    a.tied_embeddings = cfg["tie_word_embeddings"].get<bool>();
  *out = a;
  return true;
}

// Turns `a` into its Llama-family equivalent (same dimensions), listing what is dropped.
void to_llama(ModelData::Arch* a, std::vector<std::string>* dropped) {
  const ModelData::Arch d;  // Llama defaults
  if (a->family != fb::Family::Llama)
    dropped->push_back(std::string("family ") + family_display_name(a->family));
  if (a->activation != fb::Activation::SiLU) dropped->push_back("GeGLU (gelu) activation");
  if (a->qkv_bias) dropped->push_back("q/k/v projection biases");
  if (a->qk_norm) dropped->push_back("q/k RMSNorm (qk-norm)");
  if (a->family == fb::Family::Gemma2 || a->family == fb::Family::Gemma3)
    dropped->push_back("post-attention / post-FFN norms");
  if (a->embedding_scale != d.embedding_scale) dropped->push_back("embedding scale");
  if (a->query_pre_attn_scalar != d.query_pre_attn_scalar) dropped->push_back("query_pre_attn_scalar");
  if (a->attn_logit_softcap != 0 || a->final_logit_softcap != 0)
    dropped->push_back("logit soft-capping");
  const size_t n_local = static_cast<size_t>(
      std::count(a->layer_is_local.begin(), a->layer_is_local.end(), true));
  if (a->sliding_window && n_local)
    dropped->push_back("sliding-window attention (" + std::to_string(n_local) + " of " +
                       std::to_string(a->n_layers) + " layers, window " +
                       std::to_string(a->sliding_window) + ")");
  if (a->rope_theta_local != 0) dropped->push_back("local-layer RoPE base");
  if (a->rope_scaling != fb::RopeScaling::None)
    dropped->push_back(std::string("rope_scaling ") + fb::EnumNameRopeScaling(a->rope_scaling));
  ModelData::Arch l = d;
  l.n_layers = a->n_layers;
  l.dim = a->dim;
  l.n_heads = a->n_heads;
  l.n_kv_heads = a->n_kv_heads;
  l.head_dim = a->head_dim;
  l.ffn_dim = a->ffn_dim;
  l.vocab_size = a->vocab_size;
  l.max_context = a->max_context;
  l.rope_theta = a->rope_theta;
  l.rope_style = a->rope_style;
  l.norm_eps = a->norm_eps;
  l.tied_embeddings = a->tied_embeddings;
  *a = l;
}

// Changes the layer count, keeping the per-layer local/global pattern (repeated when growing).
void set_layers(ModelData::Arch* a, uint32_t n) {
  if (!a->layer_is_local.empty()) {
    std::vector<bool> local(n);
    for (uint32_t l = 0; l < n; ++l) local[l] = a->layer_is_local[l % a->layer_is_local.size()];
    a->layer_is_local = local;
  }
  a->n_layers = n;
}

void add_tensors(const SyntheticShape& shape, uint32_t seed, bool direct, fb::DType target,
                 ModelData* m) {
  const ModelData::Arch& a = shape.arch;
  const float std = shape.weight_std;
  uint64_t index = 0;
  for (const TensorSpec& spec : family_tensor_specs(a)) {
    if (!spec.required) continue;
    TensorData t;
    t.name = hf_tensor_name(a.family, spec.role, spec.layer);
    t.role = spec.role;
    t.layer = spec.layer;
    t.shape = spec.shape;
    const uint64_t key = (static_cast<uint64_t>(seed) << 32) ^ (index++ * 0xd1b54a32d192ed03ull);
    const uint64_t n = spec.shape.size() == 2 ? spec.shape[0] * spec.shape[1] : spec.shape[0];
    // Norm weights ~1 (a little spread, as trained ones have; Gemma's are stored as 1 + w),
    // matrices and biases ~N(0, std).
    const float mean = spec.norm ? 1.0f : 0.0f, sd = spec.norm ? 0.02f : std;
    t.load_f32 = [key, n, mean, sd](std::vector<float>* out, std::string*) {
      fill_f32(key, mean, sd, static_cast<size_t>(n), out);
      return true;
    };
    if (spec.shape.size() == 2 && spec.shape[1] % kQuantGroup == 0 && direct) {
      // Generated straight into the target encoding: no float tensor, no quantization pass.
      const uint64_t rows = spec.shape[0], cols = spec.shape[1];
      t.has_raw = true;
      t.raw_type = target;
      t.load_raw = [key, sd, target, rows, cols](std::vector<uint8_t>* out, std::string*) {
        fill_raw(key, sd, target, rows, cols, out);
        return true;
      };
      t.load_raw_as = [key, sd, rows, cols](fb::DType type, std::vector<uint8_t>* out, std::string*) {
        fill_raw(key, sd, type, rows, cols, out);
        return true;
      };
    }
    m->tensors.push_back(std::move(t));
  }
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
  ModelData::Arch a = shape.arch;
  if (opts.vocab) {
    if (opts.vocab->pieces.empty() || opts.vocab->pieces.size() > kMaxVocab) {
      *err = shape.name + ": vocabulary of " + std::to_string(opts.vocab->pieces.size()) +
             " tokens out of [1, " + std::to_string(kMaxVocab) + "]";
      return false;
    }
    a.vocab_size = static_cast<uint32_t>(opts.vocab->pieces.size());
  }
  if (a.n_layers == 0 || a.dim == 0 || a.n_heads == 0 || a.n_kv_heads == 0 || a.head_dim == 0 ||
      a.ffn_dim == 0 || a.max_context == 0) {
    *err = shape.name + ": a dimension is zero";
    return false;
  }
  // The runtime's verifier (runtime/model.cc check_hparams) refuses a model outside these limits;
  // refusing here, before anything is written, keeps e.g. --layers 99999 from writing hundreds
  // of GB that the final verification would then reject.
  struct Limit {
    const char* name;
    uint64_t value, max;
  };
  const Limit limits[] = {
      {"n_layers", a.n_layers, kMaxLayers},
      {"hidden_size", a.dim, kMaxDim},
      {"num_attention_heads", a.n_heads, kMaxHeads},
      {"num_key_value_heads", a.n_kv_heads, kMaxHeads},
      {"head_dim", a.head_dim, kMaxHeadDim},
      {"intermediate_size", a.ffn_dim, kMaxFfn},
      {"max_position_embeddings", a.max_context, kMaxContext},
      {"num_attention_heads * head_dim", uint64_t{a.n_heads} * a.head_dim, uint64_t{kMaxDim} * 4},
  };
  for (const Limit& l : limits) {
    if (l.value > l.max) {
      *err = shape.name + ": " + l.name + " " + std::to_string(l.value) +
             " is above the runtime's limit " + std::to_string(l.max);
      return false;
    }
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
  if (opts.vocab) {
    m.tokenizer = *opts.vocab;
  } else if (!synthetic_tokenizer(a.vocab_size, &m.tokenizer, err)) {
    *err = shape.name + ": " + *err;
    return false;
  }
  SyntheticShape sized = shape;
  sized.arch = a;
  add_tensors(sized, seed, opts.direct, opts.direct_type, &m);
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
  if (!read_json_object(path, &cfg, err)) return false;
  auto fail = [&](const std::string& what) {
    *err = "'" + path + "': " + what;
    return false;
  };
  SyntheticShape shape;
  {
    // Display name: the directory holding config.json, else the file name.
    const size_t slash = path.find_last_of('/');
    const std::string dir = slash == std::string::npos ? std::string() : path.substr(0, slash);
    const size_t s2 = dir.find_last_of('/');
    shape.name = dir.empty() ? path : dir.substr(s2 == std::string::npos ? 0 : s2 + 1);
  }
  std::vector<std::string> dropped;
  std::string e;
  if (hf_config_arch(cfg, &shape.arch, &e)) {
    if (opts.as_llama) to_llama(&shape.arch, &dropped);
  } else {
    // A config the family reader refuses: only its Llama-shaped equivalent can be built.
    if (!opts.as_llama)
      return fail(e + " (--as-llama builds a Llama model of the same dimensions)");
    std::string le;
    if (!lenient_llama_arch(cfg, &shape.arch, &le)) return fail(le);
    dropped.push_back(e);
  }
  if (!dropped.empty()) shape.name += " (as llama)";
  if (opts.ignored) *opts.ignored = dropped;
  if (opts.weight_std > 0) shape.weight_std = opts.weight_std;
  else if (cfg.contains("initializer_range") && cfg["initializer_range"].is_number() &&
           cfg["initializer_range"].get<float>() > 0)
    shape.weight_std = cfg["initializer_range"].get<float>();
  if (opts.n_layers_override) set_layers(&shape.arch, opts.n_layers_override);
  if (!synthetic_from_shape(shape, seed, opts, out, err)) return fail(*err);
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
  if (opts.n_layers_override) set_layers(&s.arch, opts.n_layers_override);
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
}  // namespace ringlm::internal
