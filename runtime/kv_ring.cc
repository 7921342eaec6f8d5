#include "kv_ring.h"

#include <string.h>

namespace ringlm::internal {

void kv_ring_layout(Arena& a, uint32_t n_layers, const uint8_t* local, uint32_t n_ctx,
                    uint32_t n_sink, uint32_t local_slots, uint32_t kv_dim, rlm_kv_dtype dtype,
                    uint32_t undo_cap, KvRing* r) {
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
  r->undo_cap = undo_cap;
  r->undo_pos = 0;
  r->undo_n = 0;
  r->undo_k = r->undo_v = nullptr;
  r->undo_tokens = nullptr;
  if (undo_cap > 0) {
    const uint64_t rows = static_cast<uint64_t>(undo_cap) * n_layers;
    r->undo_k = a.alloc_2d(rows, kv_dim, elem, kArenaAlignment);
    r->undo_v = a.alloc_2d(rows, kv_dim, elem, kArenaAlignment);
    r->undo_tokens = a.alloc<int32_t>(undo_cap);
  }
}

namespace {

// Copies the (k, v) rows of layer l's slot for `pos` to (save) or from (restore) undo entry j.
void undo_copy(KvRing* r, uint32_t l, uint64_t pos, uint32_t j, bool save) {
  const KvGeom& g = r->geom[r->layer_kind[l]];
  if (pos < g.n_ctx) return;  // the slot never held an earlier position
  const size_t elem = r->dtype == RLM_KV_F16 ? 2 : 4;
  const size_t row = static_cast<size_t>(r->kv_dim) * elem;
  const size_t ring_off = (r->layer_off[l] + static_cast<size_t>(kv_slot(g, pos)) * r->kv_dim) * elem;
  const size_t undo_off = (static_cast<size_t>(j) * r->n_layers + l) * row;
  uint8_t* k = static_cast<uint8_t*>(r->k) + ring_off;
  uint8_t* v = static_cast<uint8_t*>(r->v) + ring_off;
  uint8_t* uk = static_cast<uint8_t*>(r->undo_k) + undo_off;
  uint8_t* uv = static_cast<uint8_t*>(r->undo_v) + undo_off;
  if (save) {
    memcpy(uk, k, row);
    memcpy(uv, v, row);
  } else {
    memcpy(k, uk, row);
    memcpy(v, uv, row);
  }
}

}  // namespace

void kv_undo_save(KvRing* r, uint64_t pos, uint32_t n) {
  const KvGeom& g = r->geom[kKvGlobal];
  for (uint32_t j = 0; j < n; ++j) {
    for (uint32_t l = 0; l < r->n_layers; ++l) undo_copy(r, l, pos + j, j, true);
    if (pos + j >= g.n_ctx) r->undo_tokens[j] = r->tokens[kv_slot(g, pos + j)];
  }
  r->undo_pos = pos;
  r->undo_n = n;
}

void kv_undo_restore(KvRing* r, uint64_t pos) {
  const KvGeom& g = r->geom[kKvGlobal];
  const uint64_t end = r->undo_pos + r->undo_n;
  for (uint64_t p = pos > r->undo_pos ? pos : r->undo_pos; p < end; ++p) {
    const uint32_t j = static_cast<uint32_t>(p - r->undo_pos);
    for (uint32_t l = 0; l < r->n_layers; ++l) undo_copy(r, l, p, j, false);
    if (p >= g.n_ctx) r->tokens[kv_slot(g, p)] = r->undo_tokens[j];
  }
  r->undo_n = 0;
}

bool kv_wrapped(const KvRing& r, uint64_t n_past) {
  for (uint32_t l = 0; l < r.n_layers; ++l) {
    if (n_past > r.geom[r.layer_kind[l]].n_ctx) return true;
  }
  return false;
}

}  // namespace ringlm::internal
