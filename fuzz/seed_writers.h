// Writers for the seed corpora: small GGUF, safetensors and llama2.c files from a ModelData
// (random weights), so every reader's seed is a few KB and fuzzing stays fast. Test-time only.
// The file containers (GGUF, safetensors) are the tests' writers (tests/model_writers.h); what
// is added here is a ModelData's tensors in each family's checkpoint form and the ggml encodings.
#ifndef RINGLM_FUZZ_SEED_WRITERS_H_
#define RINGLM_FUZZ_SEED_WRITERS_H_

#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "convert/families.h"
#include "convert/ir.h"
#include "fixtures.h"
#include "ggml_blocks.h"
#include "kernels/scalar.h"
#include "model_writers.h"

namespace ringlm_fuzz {

namespace fb = ringlm::internal::fb;
using ringlm::internal::conv::ModelData;
using ringlm::internal::conv::TensorData;
using ringlm::internal::conv::TokenizerData;
using ringlm_test::GgufWriter;

inline void put_bytes(std::string* o, const void* p, size_t n) {
  o->append(static_cast<const char*>(p), n);
}
template <typename T>
inline void put(std::string* o, T v) {
  put_bytes(o, &v, sizeof v);
}

// ---- tensor encodings ---------------------------------------------------------------------------

// `values` (row-major) in ggml encoding `type` (GgufWriter's kF32, kF16, kBF16, kQ8_0,
// kQ4_0). Q8_0 / Q4_0 need rows of whole 32-value blocks: each block is an f16 scale d =
// amax / 127 (Q8_0) or amax / 7 (Q4_0), then round(v / d) as int8 (Q8_0) or as 4 bits offset by 8,
// byte j holding values j (low nibble) and j + 16 (high nibble) (Q4_0).
inline std::string ggml_bytes(const std::vector<float>& values, uint32_t type) {
  std::string data;
  switch (type) {
    case GgufWriter::kF32: return ringlm_test::f32_bytes(values);
    case GgufWriter::kBF16: return ringlm_test::bf16_bytes(values);
    case GgufWriter::kF16:
      for (float f : values) put<uint16_t>(&data, ringlm::internal::f32_to_fp16(f));
      break;
    case GgufWriter::kQ8_0:
      for (size_t b = 0; b < values.size() / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[b * 32 + j]));
        const float d = amax / 127.0f;
        put<uint16_t>(&data, ringlm::internal::f32_to_fp16(d));
        for (int j = 0; j < 32; ++j) {
          const float q = d ? values[b * 32 + j] / d : 0.0f;
          put<int8_t>(&data, static_cast<int8_t>(std::lround(q)));
        }
      }
      break;
    case GgufWriter::kQ4_0:
      for (size_t b = 0; b < values.size() / 32; ++b) {
        float amax = 0;
        for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(values[b * 32 + j]));
        const float d = amax / 7.0f;
        put<uint16_t>(&data, ringlm::internal::f32_to_fp16(d));
        for (int j = 0; j < 16; ++j) {
          auto q = [&](int k) {
            const long v = d ? std::lround(values[b * 32 + k] / d) + 8 : 8;
            return static_cast<uint8_t>(std::min(15L, std::max(0L, v)));
          };
          put<uint8_t>(&data, static_cast<uint8_t>(q(j) | (q(j + 16) << 4)));
        }
      }
      break;
  }
  return data;
}

// ---- the tensors a checkpoint holds -------------------------------------------------------------

// One tensor as checkpoints store it: `role` / `layer` of its (first) model tensor.
struct CheckpointTensor {
  fb::TensorRole role;
  int32_t layer;
  std::vector<uint64_t> shape;  // (rows, cols) or (n)
  std::vector<float> values;    // row-major
};

// The tensors of `m` in checkpoint form: Phi-3's Wq / Wk / Wv as one fused tensor (q, k, v rows;
// role Wq) and FfnGate / FfnUp as one (gate, up rows; role FfnGate), as both its Hugging Face and
// its GGUF files hold them; every other tensor as it is.
inline std::vector<CheckpointTensor> checkpoint_tensors(const ModelData& m) {
  const bool phi3 = m.arch.family == fb::Family::Phi3;
  std::map<std::pair<int, int>, std::vector<float>> vals;  // (role, layer) -> values
  for (const TensorData& t : m.tensors)
    vals[{static_cast<int>(t.role), t.layer}] = ringlm_test::load_values(t);
  std::vector<CheckpointTensor> out;
  for (const TensorData& t : m.tensors) {
    if (phi3 && (t.role == fb::TensorRole::Wk || t.role == fb::TensorRole::Wv ||
                 t.role == fb::TensorRole::FfnUp))
      continue;
    CheckpointTensor c{t.role, t.layer, t.shape, vals[{static_cast<int>(t.role), t.layer}]};
    if (phi3 && t.role == fb::TensorRole::Wq) {
      for (auto r : {fb::TensorRole::Wk, fb::TensorRole::Wv}) {
        const auto& x = vals[{static_cast<int>(r), t.layer}];
        c.values.insert(c.values.end(), x.begin(), x.end());
        c.shape[0] += x.size() / c.shape[1];
      }
    } else if (phi3 && t.role == fb::TensorRole::FfnGate) {
      const auto& x = vals[{static_cast<int>(fb::TensorRole::FfnUp), t.layer}];
      c.values.insert(c.values.end(), x.begin(), x.end());
      c.shape[0] *= 2;
    }
    out.push_back(std::move(c));
  }
  return out;
}

// ---- GGUF v3 ------------------------------------------------------------------------------------

inline const char* gguf_arch_name(fb::Family f) {
  switch (f) {
    case fb::Family::Llama: return "llama";
    case fb::Family::Qwen2: return "qwen2";
    case fb::Family::Qwen3: return "qwen3";
    case fb::Family::Gemma2: return "gemma2";
    case fb::Family::Gemma3: return "gemma3";
    case fb::Family::Phi3: return "phi3";
  }
  return "llama";
}

inline void gguf_tokenizer(GgufWriter& g, const TokenizerData& t) {
  const bool bpe = t.kind == fb::TokenizerKind::ByteLevel;
  g.kv_str("tokenizer.ggml.model", bpe ? "gpt2" : "llama");
  if (bpe) g.kv_str("tokenizer.ggml.pre", "llama-bpe");
  g.kv_strs("tokenizer.ggml.tokens", t.pieces);
  if (!t.scores.empty()) g.kv_f32s("tokenizer.ggml.scores", t.scores);
  std::vector<int32_t> types;
  for (fb::TokenType ty : t.types) {
    // ggml: 1 normal, 2 unknown, 3 control, 4 user defined, 5 unused, 6 byte
    switch (ty) {
      case fb::TokenType::Normal: types.push_back(1); break;
      case fb::TokenType::Unknown: types.push_back(2); break;
      case fb::TokenType::Control: types.push_back(3); break;
      case fb::TokenType::UserDefined: types.push_back(4); break;
      case fb::TokenType::Unused: types.push_back(5); break;
      case fb::TokenType::Byte: types.push_back(6); break;
    }
  }
  g.kv_i32s("tokenizer.ggml.token_type", types);
  if (!t.merges.empty()) {
    std::vector<std::string> m;
    for (const auto& mg : t.merges) m.push_back(t.pieces[mg.left] + " " + t.pieces[mg.right]);
    g.kv_strs("tokenizer.ggml.merges", m);
  }
  if (t.bos_id >= 0) g.kv_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(t.bos_id));
  if (t.eos_id >= 0) g.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(t.eos_id));
  if (t.unk_id >= 0) g.kv_u32("tokenizer.ggml.unknown_token_id", static_cast<uint32_t>(t.unk_id));
  g.kv_bool("tokenizer.ggml.add_bos_token", t.add_bos);
}

// A GGUF of `m`: matrices in ggml type `type` (F32 where Q8_0 / Q4_0 blocks do not fit a row),
// 1-D tensors F32.
inline std::string write_gguf(const ModelData& m, uint32_t type, const std::string& chat = "") {
  GgufWriter g;
  const auto& a = m.arch;
  const std::string arch = gguf_arch_name(a.family);
  g.kv_str("general.architecture", arch);
  g.kv_u32(arch + ".block_count", a.n_layers);
  g.kv_u32(arch + ".embedding_length", a.dim);
  g.kv_u32(arch + ".feed_forward_length", a.ffn_dim);
  g.kv_u32(arch + ".attention.head_count", a.n_heads);
  g.kv_u32(arch + ".attention.head_count_kv", a.n_kv_heads);
  g.kv_u32(arch + ".attention.key_length", a.head_dim);
  g.kv_u32(arch + ".context_length", a.max_context);
  g.kv_f32(arch + ".rope.freq_base", a.rope_theta);
  g.kv_f32(arch + ".attention.layer_norm_rms_epsilon", a.norm_eps);
  if (a.sliding_window) g.kv_u32(arch + ".attention.sliding_window", a.sliding_window);
  if (a.family == fb::Family::Gemma3) g.kv_u32(arch + ".attention.sliding_window_pattern", 2);
  if (a.rope_scaling == fb::RopeScaling::Linear) {
    g.kv_str(arch + ".rope.scaling.type", "linear");
    g.kv_f32(arch + ".rope.scaling.factor", a.rope_scaling_factor);
  }
  gguf_tokenizer(g, m.tokenizer);
  if (!chat.empty()) g.kv_str("tokenizer.chat_template", chat);
  const bool phi3 = a.family == fb::Family::Phi3;
  uint32_t seed = 1;
  for (const CheckpointTensor& t : checkpoint_tensors(m)) {
    uint32_t ty = t.shape.size() == 2 ? type : GgufWriter::kF32;
    const ringlm_test::GgmlBlockLayout* blocks = ringlm_test::ggml_block_layout(ty);
    if (blocks && t.shape.back() % blocks->values != 0) ty = GgufWriter::kF32;
    // Block types without an encoder here (Q4_1, Q5_0, Q5_1, K-quants, IQ4_*): random blocks
    // with finite scales (the values are noise either way).
    std::string data = blocks && ty != GgufWriter::kF32 && ty != GgufWriter::kQ8_0 &&
                               ty != GgufWriter::kQ4_0
                           ? ringlm_test::random_ggml_blocks(*blocks, t.values.size() / blocks->values,
                                                             seed++, 0.02f)
                           : ggml_bytes(t.values, ty);
    std::string name = ringlm::internal::conv::gguf_tensor_name(a.family, t.role, t.layer);
    if (phi3 && t.role == fb::TensorRole::Wq) name = "blk." + std::to_string(t.layer) + ".attn_qkv.weight";
    if (phi3 && t.role == fb::TensorRole::FfnGate) name = "blk." + std::to_string(t.layer) + ".ffn_up.weight";
    // ggml order: ne[0] = cols.
    g.tensor(name, std::vector<uint64_t>(t.shape.rbegin(), t.shape.rend()), ty, std::move(data));
  }
  return g.finish();
}

// ---- safetensors --------------------------------------------------------------------------------

// Tensors (name, shape, values) as one safetensors file, stored as `dtype` (F32, F16, BF16).
inline std::string write_safetensors(
    const std::vector<std::pair<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>>& ts,
    const std::string& dtype) {
  const uint32_t type = dtype == "F32" ? GgufWriter::kF32
                        : dtype == "F16" ? GgufWriter::kF16
                                         : GgufWriter::kBF16;
  std::vector<ringlm_test::SafetensorsEntry> entries;
  for (const auto& e : ts)
    entries.push_back({e.first, dtype, e.second.first, ggml_bytes(e.second.second, type)});
  return ringlm_test::safetensors_file(entries);
}

// The HF tensors of `m` (Phi-3: fused qkv / gate_up), named per family.
inline std::vector<std::pair<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>>
hf_tensors(const ModelData& m) {
  const auto& a = m.arch;
  const bool gemma = a.family == fb::Family::Gemma2 || a.family == fb::Family::Gemma3;
  std::vector<std::pair<std::string, std::pair<std::vector<uint64_t>, std::vector<float>>>> out;
  for (CheckpointTensor& t : checkpoint_tensors(m)) {
    // Gemma HF norms are stored as w (the reader adds 1).
    if (gemma && t.shape.size() == 1 && t.role != fb::TensorRole::Bq &&
        t.role != fb::TensorRole::Bk && t.role != fb::TensorRole::Bv) {
      for (float& f : t.values) f -= 1.0f;
    }
    out.push_back({ringlm::internal::conv::hf_tensor_name(a.family, t.role, t.layer),
                   {std::move(t.shape), std::move(t.values)}});
  }
  return out;
}

// A random-weight model of `a` (family tensors from family_tensor_specs) with tokenizer `t`;
// weights as ringlm_test::random_weights draws them.
inline ModelData random_family_model(const ModelData::Arch& a, const TokenizerData& t, uint32_t seed) {
  ModelData m;
  m.arch = a;
  m.arch.vocab_size = static_cast<uint32_t>(t.pieces.size());
  m.tokenizer = t;
  uint32_t k = 0;
  for (const auto& spec : ringlm::internal::conv::family_tensor_specs(m.arch)) {
    if (!spec.required) continue;
    TensorData td;
    td.name = ringlm::internal::conv::hf_tensor_name(a.family, spec.role, spec.layer);
    td.role = spec.role;
    td.layer = spec.layer;
    td.shape = spec.shape;
    td.load_f32 = ringlm_test::random_weights(spec.shape, spec.norm, seed * 7919u + k++);
    m.tensors.push_back(std::move(td));
  }
  return m;
}

// ---- llama2.c -------------------------------------------------------------------------------------

// A llama2.c v0 checkpoint of random weights (shared classifier when `shared`).
inline std::string write_llama2c(int32_t dim, int32_t hidden, int32_t layers, int32_t heads,
                                 int32_t kv_heads, int32_t vocab, int32_t seq, bool shared,
                                 uint32_t seed) {
  std::string o;
  for (int32_t v : {dim, hidden, layers, heads, kv_heads, shared ? vocab : -vocab, seq}) put(&o, v);
  const int64_t hs = dim / heads, kv = hs * kv_heads;
  const int64_t n = static_cast<int64_t>(vocab) * dim + layers * (dim + dim * dim + 2 * kv * dim +
                    dim * dim + dim + 3 * static_cast<int64_t>(hidden) * dim) + dim +
                    2 * static_cast<int64_t>(seq) * (hs / 2) + (shared ? 0 : static_cast<int64_t>(vocab) * dim);
  std::mt19937 rng(seed);
  std::normal_distribution<float> dist(0.0f, 0.1f);
  for (int64_t i = 0; i < n; ++i) put(&o, dist(rng));
  return o;
}

// A llama2.c tokenizer.bin of `t` (pieces with "▁" as ' ', as llama2.c's export writes them).
inline std::string write_llama2c_tokenizer(const TokenizerData& t) {
  std::string o;
  int32_t max_len = 1;
  for (const std::string& p : t.pieces) max_len = std::max<int32_t>(max_len, static_cast<int32_t>(p.size()));
  put(&o, max_len);
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    std::string p;
    for (size_t k = 0; k < t.pieces[i].size();) {
      if (t.pieces[i].compare(k, 3, "\xE2\x96\x81") == 0) {
        p += ' ';
        k += 3;
      } else {
        p += t.pieces[i][k++];
      }
    }
    put<float>(&o, t.scores.empty() ? 0.0f : t.scores[i]);
    put<int32_t>(&o, static_cast<int32_t>(p.size()));
    o += p;
  }
  return o;
}

}  // namespace ringlm_fuzz

#endif  // RINGLM_FUZZ_SEED_WRITERS_H_
