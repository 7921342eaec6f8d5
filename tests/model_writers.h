// Writers of source checkpoints for tests: GGUF v3 files, safetensors files, Hugging Face model
// directories, and a random-weight Hugging Face checkpoint in a family's real tensor layout
// (with a GGUF made from it the way llama.cpp's convert_hf_to_gguf.py makes one).
//
// Everything here is written from the formats' and the families' published conventions, not
// from the converter under test, so the converter's readers are checked against it:
//  - GGUF "llama": q/k rows permuted into interleaved RoPE pairs (convert_hf_to_gguf's permute);
//    Llama 3 rope scaling as a rope_freqs tensor of per-frequency divisors.
//  - GGUF gemma2/gemma3: every "*norm.weight" stored as 1 + w; no output tensor (tied).
//  - GGUF phi3: attn_qkv and ffn_up (gate then up, 2 * ffn rows) stay fused, as in the HF files.
//  - Matrices are BF16 (values are generated bf16-exact), 1-D tensors F32, as llama.cpp writes.
#ifndef RINGLM_TESTS_MODEL_WRITERS_H_
#define RINGLM_TESTS_MODEL_WRITERS_H_

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <fstream>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <vector>

#include "../convert/ir.h"

namespace ringlm_test {

// ---- GGUF ------------------------------------------------------------------------------------

// Writes GGUF v3 files (alignment 32). Tensor data is passed already encoded (see ggml_type).
class GgufWriter {
 public:
  // ggml_type values of the tensor types written here.
  enum : uint32_t { kF32 = 0, kF16 = 1, kQ4_0 = 2, kQ8_0 = 8, kBF16 = 30 };
  void kv_u32(const std::string& k, uint32_t v) { key(k, 4); pod(v); }
  void kv_f32(const std::string& k, float v) { key(k, 6); pod(v); }
  void kv_bool(const std::string& k, bool v) { key(k, 7); pod(static_cast<uint8_t>(v)); }
  void kv_str(const std::string& k, const std::string& v) { key(k, 8); str(v); }
  void kv_strs(const std::string& k, const std::vector<std::string>& v) {
    key(k, 9);
    pod(uint32_t{8});
    pod(static_cast<uint64_t>(v.size()));
    for (const auto& s : v) str(s);
  }
  void kv_f32s(const std::string& k, const std::vector<float>& v) {
    key(k, 9);
    pod(uint32_t{6});
    pod(static_cast<uint64_t>(v.size()));
    for (float f : v) pod(f);
  }
  void kv_i32s(const std::string& k, const std::vector<int32_t>& v) {
    key(k, 9);
    pod(uint32_t{5});
    pod(static_cast<uint64_t>(v.size()));
    for (int32_t x : v) pod(x);
  }
  // ne = (cols[, rows]); data already in the ggml encoding.
  void tensor(const std::string& name, std::vector<uint64_t> ne, uint32_t type, std::string data) {
    tensors_.push_back({name, std::move(ne), type, std::move(data)});
  }
  std::string finish() const {
    std::string out;
    auto put = [&](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
    const uint32_t magic = 0x46554747u, version = 3;
    const uint64_t nt = tensors_.size();
    put(&magic, 4);
    put(&version, 4);
    put(&nt, 8);
    put(&n_kv_, 8);
    out += kv_;
    uint64_t off = 0;
    for (const auto& t : tensors_) {
      const uint64_t n = t.name.size();
      put(&n, 8);
      out += t.name;
      const uint32_t nd = static_cast<uint32_t>(t.ne.size());
      put(&nd, 4);
      for (uint64_t d : t.ne) put(&d, 8);
      put(&t.type, 4);
      put(&off, 8);
      off += (t.data.size() + 31) / 32 * 32;
    }
    out.resize((out.size() + 31) / 32 * 32, '\0');
    for (const auto& t : tensors_) {
      out += t.data;
      out.resize((out.size() + 31) / 32 * 32, '\0');
    }
    return out;
  }

 private:
  struct T {
    std::string name;
    std::vector<uint64_t> ne;
    uint32_t type;
    std::string data;
  };
  template <typename V>
  void pod(V v) { kv_.append(reinterpret_cast<const char*>(&v), sizeof v); }
  void str(const std::string& s) { pod(static_cast<uint64_t>(s.size())); kv_ += s; }
  void key(const std::string& k, uint32_t type) { str(k); pod(type); ++n_kv_; }
  std::string kv_;
  uint64_t n_kv_ = 0;
  std::vector<T> tensors_;
};

// The metadata of the tests' tiny llama GGUFs: `block_count` layers of width D (2 heads, 1 KV head,
// ffn F, context 64) and a llama (SentencePiece) vocabulary of `pieces` whose first three are
// <unk>, <s>, </s> and whose next five are normal tokens.
inline void put_tiny_llama_kv(GgufWriter* w, uint64_t D, uint64_t F, uint32_t block_count,
                              const std::vector<std::string>& pieces) {
  w->kv_u32("llama.block_count", block_count);
  w->kv_u32("llama.embedding_length", static_cast<uint32_t>(D));
  w->kv_u32("llama.feed_forward_length", static_cast<uint32_t>(F));
  w->kv_u32("llama.attention.head_count", 2);
  w->kv_u32("llama.attention.head_count_kv", 1);
  w->kv_u32("llama.context_length", 64);
  w->kv_f32("llama.attention.layer_norm_rms_epsilon", 1e-5f);
  w->kv_str("tokenizer.ggml.model", "llama");
  w->kv_strs("tokenizer.ggml.tokens", pieces);
  w->kv_f32s("tokenizer.ggml.scores", std::vector<float>(pieces.size(), 0.0f));
  w->kv_i32s("tokenizer.ggml.token_type", {2, 3, 3, 1, 1, 1, 1, 1});
  w->kv_u32("tokenizer.ggml.bos_token_id", 1);
  w->kv_u32("tokenizer.ggml.eos_token_id", 2);
}

// ---- encodings -------------------------------------------------------------------------------

// float -> bfloat16 bits, round to nearest even (exact for bf16-representable values).
inline uint16_t to_bf16(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  b += 0x7fffu + ((b >> 16) & 1u);
  return static_cast<uint16_t>(b >> 16);
}
inline float from_bf16(uint16_t h) {
  const uint32_t b = static_cast<uint32_t>(h) << 16;
  float f;
  memcpy(&f, &b, 4);
  return f;
}
inline float round_bf16(float f) { return from_bf16(to_bf16(f)); }

inline std::string bf16_bytes(const std::vector<float>& v) {
  std::string s(v.size() * 2, '\0');
  for (size_t i = 0; i < v.size(); ++i) {
    const uint16_t h = to_bf16(v[i]);
    memcpy(&s[2 * i], &h, 2);
  }
  return s;
}
inline std::string f32_bytes(const std::vector<float>& v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * 4);
}

// ---- safetensors -----------------------------------------------------------------------------

struct SafetensorsEntry {
  std::string name, dtype;  // "F32", "BF16", "F16"
  std::vector<uint64_t> shape;
  std::string bytes;
};

inline std::string safetensors_file(const std::vector<SafetensorsEntry>& entries) {
  nlohmann::json hdr = nlohmann::json::object();
  hdr["__metadata__"] = {{"format", "pt"}};
  std::string data;
  for (const SafetensorsEntry& e : entries) {
    const uint64_t b = data.size();
    data += e.bytes;
    hdr[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {b, data.size()}}};
  }
  std::string h = hdr.dump();
  h.resize((h.size() + 7) / 8 * 8, ' ');
  const uint64_t hn = h.size();
  return std::string(reinterpret_cast<const char*>(&hn), 8) + h + data;
}

inline bool write_bytes(const std::string& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  return static_cast<bool>(f);
}

// ---- a random Hugging Face checkpoint in a family's real layout ------------------------------

// Weight scales (standard deviations) of a random checkpoint.
struct WeightScales {
  float embed = 1.0f;      // token embedding entries
  float qk_gain = 1.5f;    // q_proj / k_proj: gain / sqrt(in)
  float gain = 1.0f;       // other matrices: gain / sqrt(in)
  float head_gain = 2.0f;  // untied lm_head: gain / sqrt(hidden)
  float norm = 0.1f;       // norm weights: 1 + N(0, norm) (Gemma: the stored w is N(0, norm))
  float bias = 0.5f;       // q/k/v biases
  float qk_norm_mean = 0.0f;     // added to q_norm / k_norm means (sharper attention with QK-norm)
  float final_norm_mean = 0.0f;  // added to model.norm's mean (larger logits, e.g. to reach a
                                 // final soft-cap)
};

struct HfDims {
  std::string model_type;
  bool gemma = false, qkv_bias = false, qk_norm = false, phi3 = false;
  uint64_t D = 0, L = 0, H = 0, KV = 0, hd = 0, F = 0, V = 0;
  bool tied = false;
};

// The dimensions a config names (defaults as the HF config classes have them).
inline HfDims hf_dims(const nlohmann::json& c) {
  HfDims d;
  d.model_type = c.value("model_type", std::string());
  d.gemma = d.model_type.compare(0, 5, "gemma") == 0;
  d.qkv_bias = d.model_type == "qwen2";
  d.qk_norm = d.model_type == "qwen3" || d.model_type.compare(0, 6, "gemma3") == 0;
  d.phi3 = d.model_type == "phi3";
  d.D = c["hidden_size"].get<uint64_t>();
  d.L = c["num_hidden_layers"].get<uint64_t>();
  d.H = c["num_attention_heads"].get<uint64_t>();
  d.KV = c.contains("num_key_value_heads") ? c["num_key_value_heads"].get<uint64_t>() : d.H;
  d.hd = c.contains("head_dim") && !c["head_dim"].is_null() ? c["head_dim"].get<uint64_t>()
         : d.gemma                                         ? 256
         : d.model_type == "qwen3"                         ? 128
                                                           : d.D / d.H;
  d.F = c["intermediate_size"].get<uint64_t>();
  d.V = c["vocab_size"].get<uint64_t>();
  d.tied = c.contains("tie_word_embeddings") ? c["tie_word_embeddings"].get<bool>() : d.gemma;
  return d;
}

// A source tensor whose values are held in memory (load_f32 copies them).
inline ringlm::internal::conv::TensorData memory_tensor(const std::string& name, std::vector<uint64_t> shape,
                                              std::vector<float> values) {
  ringlm::internal::conv::TensorData t;
  t.name = name;
  t.role = ringlm::internal::fb::TensorRole::TokenEmbedding;  // unused: checkpoints are looked up by name
  t.shape = std::move(shape);
  auto v = std::make_shared<std::vector<float>>(std::move(values));
  t.load_f32 = [v](std::vector<float>* out, std::string*) {
    *out = *v;
    return true;
  };
  return t;
}

// A random checkpoint of config `c`: tensors named as in the family's HF model.safetensors, in
// HF layout ((out, in) matrices; Gemma norm weights as the w of (1 + w); Phi-3 fused), values
// bf16-exact. Deterministic in `seed`.
inline ringlm::internal::conv::ModelData random_hf_checkpoint(const nlohmann::json& c, const WeightScales& s,
                                                    uint32_t seed) {
  const HfDims d = hf_dims(c);
  ringlm::internal::conv::ModelData m;
  uint32_t index = 0;
  auto gen = [&](const std::string& name, std::vector<uint64_t> shape, float mean, float sd) {
    uint64_t n = 1;
    for (uint64_t x : shape) n *= x;
    std::mt19937 rng(seed * 1000003u + index++);
    std::normal_distribution<float> dist(0.0f, 1.0f);
    std::vector<float> v(static_cast<size_t>(n));
    for (float& x : v) x = round_bf16(mean + sd * dist(rng));
    m.tensors.push_back(memory_tensor(name, std::move(shape), std::move(v)));
  };
  auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols, float gain) {
    gen(name, {rows, cols}, 0.0f, gain / sqrtf(static_cast<float>(cols)));
  };
  auto norm = [&](const std::string& name, uint64_t n, float extra = 0.0f) {
    gen(name, {n}, (d.gemma ? 0.0f : 1.0f) + extra, s.norm);
  };
  const uint64_t q = d.H * d.hd, kv = d.KV * d.hd;
  gen("model.embed_tokens.weight", {d.V, d.D}, 0.0f, s.embed);
  for (uint64_t l = 0; l < d.L; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    norm(p + "input_layernorm.weight", d.D);
    if (d.phi3) {
      // Fused rows: q, k, v. k rows get the q/k gain, v rows the plain one.
      uint64_t n = (q + 2 * kv) * d.D;
      std::mt19937 rng(seed * 1000003u + index++);
      std::normal_distribution<float> dist(0.0f, 1.0f);
      std::vector<float> v(static_cast<size_t>(n));
      for (uint64_t i = 0; i < n; ++i) {
        const float g = i < (q + kv) * d.D ? s.qk_gain : s.gain;
        v[i] = round_bf16(g / sqrtf(static_cast<float>(d.D)) * dist(rng));
      }
      m.tensors.push_back(memory_tensor(p + "self_attn.qkv_proj.weight", {q + 2 * kv, d.D}, v));
    } else {
      matrix(p + "self_attn.q_proj.weight", q, d.D, s.qk_gain);
      matrix(p + "self_attn.k_proj.weight", kv, d.D, s.qk_gain);
      matrix(p + "self_attn.v_proj.weight", kv, d.D, s.gain);
    }
    if (d.qkv_bias) {
      gen(p + "self_attn.q_proj.bias", {q}, 0.0f, s.bias);
      gen(p + "self_attn.k_proj.bias", {kv}, 0.0f, s.bias);
      gen(p + "self_attn.v_proj.bias", {kv}, 0.0f, s.bias);
    }
    if (d.qk_norm) {
      norm(p + "self_attn.q_norm.weight", d.hd, s.qk_norm_mean);
      norm(p + "self_attn.k_norm.weight", d.hd, s.qk_norm_mean);
    }
    matrix(p + "self_attn.o_proj.weight", d.D, q, s.gain);
    norm(p + "post_attention_layernorm.weight", d.D);
    if (d.gemma) {
      norm(p + "pre_feedforward_layernorm.weight", d.D);
      norm(p + "post_feedforward_layernorm.weight", d.D);
    }
    if (d.phi3) {
      matrix(p + "mlp.gate_up_proj.weight", 2 * d.F, d.D, s.gain);
    } else {
      matrix(p + "mlp.gate_proj.weight", d.F, d.D, s.gain);
      matrix(p + "mlp.up_proj.weight", d.F, d.D, s.gain);
    }
    matrix(p + "mlp.down_proj.weight", d.D, d.F, s.gain);
  }
  norm("model.norm.weight", d.D, s.final_norm_mean);
  if (!d.tied) matrix("lm_head.weight", d.V, d.D, s.head_gain);
  return m;
}

inline std::vector<float> load_values(const ringlm::internal::conv::TensorData& t) {
  std::vector<float> v;
  std::string err;
  t.load_f32(&v, &err);
  return v;
}

// A SentencePiece-style vocabulary of `n` (>= 259) pieces: <unk> <s> </s>, the 256 byte pieces,
// then "▁tokN". bos 1, eos 2.
inline ringlm::internal::conv::TokenizerData simple_vocab(uint32_t n) {
  ringlm::internal::conv::TokenizerData t;
  t.pieces = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    snprintf(buf, sizeof buf, "<0x%02X>", b);
    t.pieces.push_back(buf);
  }
  while (t.pieces.size() < n) t.pieces.push_back("\xe2\x96\x81tok" + std::to_string(t.pieces.size()));
  t.bos_id = 1;
  t.eos_id = 2;
  t.unk_id = 0;
  return t;
}

// A SentencePiece-style BPE tokenizer.json, laid out as Llama 2 / TinyStories checkpoints ship
// it: the normalizer prepends "▁" (U+2581) and turns spaces into it, no pre-tokenizer, byte
// fallback, unk "<unk>". `pieces` is the vocabulary (id = index, every piece in "vocab"); the ids
// in `special` are also listed as added special tokens; `merges` goes in as given (tokenizer.json
// accepts "a b" strings and ["a", "b"] pairs).
inline nlohmann::json sp_tokenizer_json(const std::vector<std::string>& pieces,
                                        const std::vector<uint32_t>& special,
                                        const nlohmann::json& merges = nlohmann::json::array()) {
  nlohmann::json v = nlohmann::json::object();
  for (size_t i = 0; i < pieces.size(); ++i) v[pieces[i]] = i;
  nlohmann::json added = nlohmann::json::array();
  for (uint32_t id : special)
    added.push_back({{"id", id}, {"content", pieces.at(id)}, {"special", true}});
  return {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", "\xE2\x96\x81"}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", "\xE2\x96\x81"}}}}}},
      {"pre_tokenizer", nullptr},
      {"model",
       {{"type", "BPE"}, {"byte_fallback", true}, {"unk_token", "<unk>"}, {"vocab", v},
        {"merges", merges}}}};
}

// Writes a Hugging Face directory: config.json, model.safetensors (BF16 matrices and vectors, as
// checkpoints are published), tokenizer.json (sp_tokenizer_json: <unk> <s> </s> special, no
// merges) for `vocab`.
inline bool write_hf_dir(const std::string& dir, const nlohmann::json& config,
                         const ringlm::internal::conv::ModelData& ckpt,
                         const ringlm::internal::conv::TokenizerData& vocab) {
  if (!write_bytes(dir + "/config.json", config.dump(2))) return false;
  std::vector<SafetensorsEntry> entries;
  for (const auto& t : ckpt.tensors)
    entries.push_back({t.name, "BF16", t.shape, bf16_bytes(load_values(t))});
  if (!write_bytes(dir + "/model.safetensors", safetensors_file(entries))) return false;
  return write_bytes(dir + "/tokenizer.json", sp_tokenizer_json(vocab.pieces, {0, 1, 2}).dump());
}

// The GGUF llama.cpp's convert_hf_to_gguf.py makes of `ckpt` (config `c`), tokenizer `vocab`.
// Supports model_type llama, qwen2, qwen3, gemma2, gemma3 / gemma3_text, phi3.
inline std::string gguf_from_hf(const nlohmann::json& c, const ringlm::internal::conv::ModelData& ckpt,
                                const ringlm::internal::conv::TokenizerData& vocab) {
  const HfDims d = hf_dims(c);
  std::string arch = d.model_type == "gemma3_text" ? "gemma3" : d.model_type;
  GgufWriter w;
  const std::string p = arch + ".";
  w.kv_str("general.architecture", arch);
  w.kv_u32(p + "block_count", static_cast<uint32_t>(d.L));
  w.kv_u32(p + "context_length", c.value("max_position_embeddings", 2048u));
  w.kv_u32(p + "embedding_length", static_cast<uint32_t>(d.D));
  w.kv_u32(p + "feed_forward_length", static_cast<uint32_t>(d.F));
  w.kv_u32(p + "attention.head_count", static_cast<uint32_t>(d.H));
  w.kv_u32(p + "attention.head_count_kv", static_cast<uint32_t>(d.KV));
  w.kv_f32(p + "attention.layer_norm_rms_epsilon", c.value("rms_norm_eps", 1e-6f));
  w.kv_f32(p + "rope.freq_base", c.value("rope_theta", 10000.0f));
  if (d.gemma || (c.contains("head_dim") && !c["head_dim"].is_null())) {
    w.kv_u32(p + "attention.key_length", static_cast<uint32_t>(d.hd));
    w.kv_u32(p + "attention.value_length", static_cast<uint32_t>(d.hd));
  }
  if (arch == "llama" || arch == "phi3") w.kv_u32(p + "rope.dimension_count", static_cast<uint32_t>(d.hd));
  uint32_t window = 0;
  for (const char* k : {"sliding_window", "sliding_window_attention_size"})
    if (c.contains(k) && c[k].is_number_integer()) window = c[k].get<uint32_t>();
  if (arch == "gemma2") {
    w.kv_f32(p + "attn_logit_softcapping", c.value("attn_logit_softcapping", 50.0f));
    w.kv_f32(p + "final_logit_softcapping", c.value("final_logit_softcapping", 30.0f));
    w.kv_u32(p + "attention.sliding_window", window);
  }
  if (arch == "gemma3") {
    w.kv_u32(p + "attention.sliding_window", window);
    if (c.contains("rope_scaling") && c["rope_scaling"].is_object()) {
      w.kv_str(p + "rope.scaling.type", "linear");
      w.kv_f32(p + "rope.scaling.factor", c["rope_scaling"]["factor"].get<float>());
    }
  }
  if (arch == "phi3") w.kv_u32(p + "attention.sliding_window", window);
  // Tokenizer: SentencePiece ("llama") vocabulary.
  w.kv_str("tokenizer.ggml.model", "llama");
  w.kv_strs("tokenizer.ggml.tokens", vocab.pieces);
  w.kv_f32s("tokenizer.ggml.scores", std::vector<float>(vocab.pieces.size(), 0.0f));
  std::vector<int32_t> types(vocab.pieces.size(), 1);
  types[0] = 2;
  types[1] = types[2] = 3;
  for (int b = 0; b < 256; ++b) types[3 + b] = 6;
  w.kv_i32s("tokenizer.ggml.token_type", types);
  w.kv_u32("tokenizer.ggml.bos_token_id", 1);
  w.kv_u32("tokenizer.ggml.eos_token_id", 2);
  w.kv_u32("tokenizer.ggml.unknown_token_id", 0);

  // Llama 3 rope scaling: per-frequency divisors (generate_extra_tensors of LlamaModel).
  if (arch == "llama" && c.contains("rope_scaling") && c["rope_scaling"].is_object() &&
      c["rope_scaling"].value("rope_type", std::string()) == "llama3") {
    const auto& rs = c["rope_scaling"];
    const double base = c.value("rope_theta", 10000.0), factor = rs.value("factor", 8.0);
    const double lo = rs.value("low_freq_factor", 1.0), hi = rs.value("high_freq_factor", 4.0);
    const double old_ctx = rs.value("original_max_position_embeddings", 8192.0);
    std::vector<float> f;
    for (uint64_t i = 0; i < d.hd; i += 2) {
      const double freq = 1.0 / pow(base, static_cast<double>(i) / static_cast<double>(d.hd));
      const double wl = 2 * M_PI / freq;
      if (wl < old_ctx / hi) f.push_back(1.0f);
      else if (wl > old_ctx / lo) f.push_back(static_cast<float>(factor));
      else {
        const double smooth = (old_ctx / wl - lo) / (hi - lo);
        f.push_back(static_cast<float>(1.0 / ((1 - smooth) / factor + smooth)));
      }
    }
    w.tensor("rope_freqs.weight", {f.size()}, GgufWriter::kF32, f32_bytes(f));
  }
  // q/k row permutation of LlamaModel.modify_tensors: within each head, rows (j, i) -> (i, j)
  // for j in {0, 1} halves, i.e. HF's rotate_half pairs (i, i + hd/2) become (2i, 2i + 1).
  auto permute = [&](const std::vector<float>& v, uint64_t heads, uint64_t cols) {
    std::vector<float> o(v.size());
    const uint64_t half = d.hd / 2;
    for (uint64_t h = 0; h < heads; ++h)
      for (uint64_t i = 0; i < half; ++i)
        for (uint64_t j = 0; j < 2; ++j)
          memcpy(&o[((h * d.hd) + 2 * i + j) * cols], &v[((h * d.hd) + j * half + i) * cols],
                 cols * sizeof(float));
    return o;
  };
  static const std::pair<const char*, const char*> names[] = {
      {"input_layernorm.weight", "attn_norm.weight"},
      {"self_attn.q_proj.weight", "attn_q.weight"},
      {"self_attn.k_proj.weight", "attn_k.weight"},
      {"self_attn.v_proj.weight", "attn_v.weight"},
      {"self_attn.qkv_proj.weight", "attn_qkv.weight"},
      {"self_attn.q_proj.bias", "attn_q.bias"},
      {"self_attn.k_proj.bias", "attn_k.bias"},
      {"self_attn.v_proj.bias", "attn_v.bias"},
      {"self_attn.q_norm.weight", "attn_q_norm.weight"},
      {"self_attn.k_norm.weight", "attn_k_norm.weight"},
      {"self_attn.o_proj.weight", "attn_output.weight"},
      {"pre_feedforward_layernorm.weight", "ffn_norm.weight"},
      {"post_feedforward_layernorm.weight", "post_ffw_norm.weight"},
      {"mlp.gate_proj.weight", "ffn_gate.weight"},
      {"mlp.up_proj.weight", "ffn_up.weight"},
      {"mlp.gate_up_proj.weight", "ffn_up.weight"},
      {"mlp.down_proj.weight", "ffn_down.weight"}};
  for (const auto& t : ckpt.tensors) {
    std::string name;
    if (t.name == "model.embed_tokens.weight") name = "token_embd.weight";
    else if (t.name == "model.norm.weight") name = "output_norm.weight";
    else if (t.name == "lm_head.weight") name = "output.weight";
    else {
      const size_t dot = t.name.find('.', strlen("model.layers."));
      const std::string layer = t.name.substr(strlen("model.layers."), dot - strlen("model.layers."));
      const std::string rest = t.name.substr(dot + 1);
      if (rest == "post_attention_layernorm.weight") {
        name = d.gemma ? "post_attention_norm.weight" : "ffn_norm.weight";
      } else {
        for (const auto& n : names)
          if (rest == n.first) name = n.second;
      }
      name = "blk." + layer + "." + name;
    }
    std::vector<float> v = load_values(t);
    if (arch == "llama" && t.name.find("q_proj.weight") != std::string::npos) v = permute(v, d.H, d.D);
    if (arch == "llama" && t.name.find("k_proj.weight") != std::string::npos) v = permute(v, d.KV, d.D);
    if (d.gemma && t.name.size() >= 11 && t.name.compare(t.name.size() - 11, 11, "norm.weight") == 0)
      for (float& x : v) x = 1.0f + x;
    if (t.shape.size() == 2) w.tensor(name, {t.shape[1], t.shape[0]}, GgufWriter::kBF16, bf16_bytes(v));
    else w.tensor(name, {t.shape[0]}, GgufWriter::kF32, f32_bytes(v));
  }
  return w.finish();
}

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_MODEL_WRITERS_H_
