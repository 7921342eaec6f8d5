#include "kv_ring.h"

namespace ringlm {

void kv_ring_layout(Arena& a, uint32_t n_layers, uint32_t n_ctx, uint32_t n_sink,
                    uint32_t kv_dim, rlm_kv_dtype dtype, KvRing* r) {
  r->n_layers = n_layers;
  r->n_ctx = n_ctx;
  r->n_sink = n_sink;
  r->window = n_ctx - n_sink;
  r->kv_dim = kv_dim;
  r->dtype = dtype;
  const size_t elem = dtype == RLM_KV_F16 ? 2 : 4;
  const uint64_t per_layer = static_cast<uint64_t>(n_ctx) * kv_dim;  // < 2^40
  r->k = a.alloc_2d(n_layers, per_layer, elem, kArenaAlignment);
  r->v = a.alloc_2d(n_layers, per_layer, elem, kArenaAlignment);
  r->tokens = a.alloc<int32_t>(n_ctx);
}

}  // namespace ringlm
