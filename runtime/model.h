// A verified, read-only view over a model file in caller memory.
//
// model_open runs every structural check once (FlatBuffers verifier, then semantics: bounds,
// overlap, alignment, shapes, dtypes, tokenizer ids), so later code indexes tensors and
// tokenizer tables without re-checking anything but data-dependent values (token ids).
#ifndef RINGLM_RUNTIME_MODEL_H_
#define RINGLM_RUNTIME_MODEL_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"  // WeightView
#include "model_generated.h"
#include "quant.h"
#include "status.h"
#include "tokenizer/limits.h"  // kMaxVocab, kMaxPieceBytes

namespace ringlm::internal {

constexpr uint32_t kFormatVersion = RLM_FORMAT_VERSION;

// Limits a verified model stays within (guard arithmetic against hostile headers). The
// tokenizer's (kMaxVocab, kMaxPieceBytes) are in tokenizer/limits.h.
constexpr uint32_t kMaxLayers = 1024;
constexpr uint32_t kMaxDim = 1u << 16;
constexpr uint32_t kMaxHeads = 1024;
constexpr uint32_t kMaxHeadDim = 1024;
constexpr uint32_t kMaxFfn = 1u << 18;
constexpr uint32_t kMaxContext = 1u << 24;

struct Hparams {
  fb::Family family;
  uint32_t n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, max_context;
  uint32_t q_dim;   // n_heads * head_dim
  uint32_t kv_dim;  // n_kv_heads * head_dim
  float rope_theta, norm_eps;
  fb::RopeStyle rope_style;
  bool tied_embeddings;
  fb::Activation activation;
  fb::RopeScaling rope_scaling;
  float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
  uint32_t rope_original_context;
  float rope_theta_local;       // RoPE base of sliding-window layers
  bool qkv_bias;                // Bq/Bk/Bv present (Qwen2)
  bool qk_norm;                 // per-head RMSNorm of q and k before RoPE (Qwen3, Gemma 3)
  bool post_norms;              // PostAttnNorm / PostFfnNorm around the blocks (Gemma 2/3)
  float embedding_scale;        // x *= this after the embedding lookup (Gemma: sqrt(dim))
  float attn_scale;             // score scale: 1/sqrt(query_pre_attn_scalar or head_dim)
  float attn_softcap;           // 0 = off; else score = cap * tanh(score / cap)
  float final_softcap;          // 0 = off; same on the logits
  uint32_t sliding_window;      // window of local layers (0 = none)
  const uint8_t* layer_is_local;  // (n_layers) or null; borrows the model bytes
  bool has_local_layers;
  // Bytes of the longest text one token decodes to (token_text_bytes of the longest piece): what
  // every buffer holding one token's text is sized by.
  uint32_t max_token_text;
};

inline bool layer_is_local(const Hparams& h, uint32_t l) {
  return h.layer_is_local != nullptr && h.layer_is_local[l] != 0;
}

struct ModelImpl {
  const uint8_t* bytes;        // borrowed: the whole file
  size_t size;
  const fb::Model* root;       // inside bytes
  Hparams hp;
  uint64_t weight_bytes;
  uint32_t n_tensors;
  char error[256];
};
static_assert(sizeof(ModelImpl) <= sizeof(rlm_model), "rlm_model storage too small");
static_assert(alignof(ModelImpl) <= alignof(rlm_model), "rlm_model storage misaligned");

inline ModelImpl* model_impl(rlm_model* m) { return reinterpret_cast<ModelImpl*>(m); }
inline const ModelImpl* model_impl(const rlm_model* m) {
  return reinterpret_cast<const ModelImpl*>(m);
}

// Verifies and fills `out`. On failure, out->error holds the message and out->root is null.
Status model_open(const void* bytes, size_t size, ModelImpl* out);

// The tensor with this role and layer (-1 for global roles), or null.
const fb::Tensor* model_find_tensor(const ModelImpl& m, fb::TensorRole role, int32_t layer);

// View of a verified tensor (empty view for null).
WeightView model_weight(const ModelImpl& m, const fb::Tensor* t);

// Whether generation normally ends at `token`: the tokenizer's eos_id or any of its end_ids.
bool model_is_end_token(const ModelImpl& m, int32_t token);

// Convenience: find + view.
inline WeightView model_weight(const ModelImpl& m, fb::TensorRole role, int32_t layer) {
  return model_weight(m, model_find_tensor(m, role, layer));
}

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_MODEL_H_
