#include "kv_ring.h"

namespace ringlm::internal {

void kv_ring_layout(Arena& a, uint32_t n_layers, const uint8_t* local, uint32_t n_ctx,
                    uint32_t n_sink, uint32_t local_slots, uint32_t kv_dim, rlm_kv_dtype dtype,
                    KvRing* r) {
  r->n_layers = n_layers;
  r->kv_dim = kv_dim;
  r->dtype = dtype;
  r->geom[kKvGlobal] = KvGeom{n_ctx, n_sink, n_ctx - n_sink};
  r->geom[kKvLocal] = KvGeom{local_slots, 0, local_slots};
  r->layer_kind = a.alloc<uint8_t>(n_layers);
  r->layer_off = a.alloc<uint64_t>(n_layers);
  uint64_t total_slots = 0;  // < 2^10 layers * 2^24 slots
  for (uint32_t l = 0; l < n_layers; ++l) {
    const uint8_t kind = (local && local[l]) ? kKvLocal : kKvGlobal;
    if (r->layer_kind) {
      r->layer_kind[l] = kind;
      r->layer_off[l] = total_slots * kv_dim;
    }
    total_slots += r->geom[kind].n_ctx;
  }
  const size_t elem = dtype == RLM_KV_F16 ? 2 : 4;
  r->k = a.alloc_2d(total_slots, kv_dim, elem, kArenaAlignment);
  r->v = a.alloc_2d(total_slots, kv_dim, elem, kArenaAlignment);
  r->tokens = a.alloc<int32_t>(n_ctx);
}

bool kv_wrapped(const KvRing& r, uint64_t n_past) {
  for (uint32_t l = 0; l < r.n_layers; ++l) {
    if (n_past > r.geom[r.layer_kind[l]].n_ctx) return true;
  }
  return false;
}

}  // namespace ringlm::internal
