// The tensor manifest: which tensors a model of given hyperparameters has, with their shapes.
//
// One list, written once, read by the converter (what to write: convert/families.cc), by
// model_open (what must be there, once, with this shape, and nothing else: model.cc) and by the
// synthetic-model generator. The order is the order the converter writes: the embedding, each
// layer's tensors in forward-pass order, then the final norm and the output projection.
// Plain data and no allocation, so the runtime can use it; no family names here: the families
// differ only through the shape flags (bias, QK-norm, post-norms, tied embeddings).
#ifndef RINGLM_RUNTIME_TENSOR_MANIFEST_H_
#define RINGLM_RUNTIME_TENSOR_MANIFEST_H_

#include <stdint.h>

#include "model_generated.h"

namespace ringlm::internal {

// The hyperparameters the tensor list depends on.
struct ManifestShape {
  uint32_t n_layers, dim, q_dim, kv_dim, head_dim, ffn_dim, vocab_size;
  bool qkv_bias;         // Bq, Bk, Bv (Qwen2)
  bool qk_norm;          // QNorm, KNorm: per-head RMSNorm of q and k (Qwen3, Gemma 3)
  bool post_norms;       // PostAttnNorm, PostFfnNorm (Gemma 2 / 3)
  bool tied_embeddings;  // the output projection is the embedding: no Output tensor
};

struct ManifestEntry {
  fb::TensorRole role;
  int32_t layer;         // -1: a model-wide tensor
  uint64_t rows, cols;   // rows == 0: a vector of `cols` (stored f32)
  bool required;         // false: may be absent (RoPE frequency factors)
  bool norm;             // an RMSNorm weight
};

constexpr uint32_t kManifestMaxLayer = 16;   // entries manifest_layer may write
constexpr uint32_t kManifestMaxGlobal = 4;   // entries manifest_globals may write

// Layer `layer`'s tensors, in forward-pass order, into `out` (kManifestMaxLayer entries);
// returns how many.
uint32_t manifest_layer(const ManifestShape& s, uint32_t layer, ManifestEntry* out);

// The model-wide tensors into `out` (kManifestMaxGlobal entries): TokenEmbedding, OutputNorm,
// Output (absent with tied embeddings), RopeFreqs (optional); returns how many.
uint32_t manifest_globals(const ManifestShape& s, ManifestEntry* out);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TENSOR_MANIFEST_H_
