#include "tensor_manifest.h"

namespace ringlm::internal {

uint32_t manifest_layer(const ManifestShape& s, uint32_t layer, ManifestEntry* out) {
  using R = fb::TensorRole;
  const int32_t l = static_cast<int32_t>(layer);
  const uint64_t D = s.dim, F = s.ffn_dim, q = s.q_dim, kv = s.kv_dim;
  uint32_t n = 0;
  auto add = [&](R role, uint64_t rows, uint64_t cols, bool norm) {
    out[n++] = ManifestEntry{role, l, rows, cols, true, norm};
  };
  add(R::AttnNorm, 0, D, true);
  add(R::Wq, q, D, false);
  add(R::Wk, kv, D, false);
  add(R::Wv, kv, D, false);
  if (s.qkv_bias) {
    add(R::Bq, 0, q, false);
    add(R::Bk, 0, kv, false);
    add(R::Bv, 0, kv, false);
  }
  if (s.qk_norm) {
    add(R::QNorm, 0, s.head_dim, true);
    add(R::KNorm, 0, s.head_dim, true);
  }
  add(R::Wo, D, q, false);
  if (s.post_norms) add(R::PostAttnNorm, 0, D, true);
  add(R::FfnNorm, 0, D, true);
  add(R::FfnGate, F, D, false);
  add(R::FfnUp, F, D, false);
  add(R::FfnDown, D, F, false);
  if (s.post_norms) add(R::PostFfnNorm, 0, D, true);
  return n;
}

uint32_t manifest_globals(const ManifestShape& s, ManifestEntry* out) {
  using R = fb::TensorRole;
  uint32_t n = 0;
  out[n++] = ManifestEntry{R::TokenEmbedding, -1, s.vocab_size, s.dim, true, false};
  out[n++] = ManifestEntry{R::OutputNorm, -1, 0, s.dim, true, true};
  if (!s.tied_embeddings) out[n++] = ManifestEntry{R::Output, -1, s.vocab_size, s.dim, true, false};
  out[n++] = ManifestEntry{R::RopeFreqs, -1, 0, s.head_dim / 2, false, false};
  return n;
}

}  // namespace ringlm::internal
