#include "kv_ring.h"

#include <math.h>
#include <string.h>

#include "kernels/scalar.h"

namespace ringlm::internal {

size_t kv_row_bytes(rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim) {
  switch (dtype) {
    case RLM_KV_F16: return static_cast<size_t>(kv_dim) * 2;
    case RLM_KV_Q8: return kv_scale_offset(kv_dim, kv_dim / head_dim);
    default: return static_cast<size_t>(kv_dim) * 4;
  }
}

void kv_encode_row(const KernelTable* k, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                   const float* x, void* dst) {
  if (dtype == RLM_KV_F32) {
    memcpy(dst, x, kv_dim * sizeof(float));
  } else if (dtype == RLM_KV_F16) {
    uint16_t* h = static_cast<uint16_t*>(dst);
    if (k) {
      k->f32_to_f16(x, h, kv_dim);  // F16C / NEON: prefill spent ~5 % of its time here, scalar
    } else {
      for (uint32_t i = 0; i < kv_dim; ++i) h[i] = f32_to_fp16(x[i]);
    }
  } else {
    int8_t* q = static_cast<int8_t*>(dst);
    uint8_t* row = static_cast<uint8_t*>(dst);
    for (uint32_t i = kv_dim; i < ((kv_dim + 3) & ~3u); ++i) q[i] = 0;  // padding: defined bytes
    for (uint32_t h = 0; h < kv_dim / head_dim; ++h) {
      const float* xh = x + static_cast<size_t>(h) * head_dim;
      float amax = 0.0f;
      bool finite = true;
      for (uint32_t i = 0; i < head_dim; ++i) {
        finite = finite && isfinite(xh[i]);
        amax = fmaxf(amax, fabsf(xh[i]));
      }
      // A non-finite value (a diverged model) stores its head as zeros: converting NaN or
      // infinity to an integer has no defined result.
      const float scale = finite ? amax / 127.0f : 0.0f;
      const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
      for (uint32_t i = 0; i < head_dim; ++i) {
        q[h * head_dim + i] = static_cast<int8_t>(lrintf(xh[i] * inv));
      }
      memcpy(row + kv_scale_offset(kv_dim, h), &scale, sizeof scale);
    }
  }
}

void kv_decode_row(rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim, const void* src,
                   float* x) {
  if (dtype == RLM_KV_F32) {
    memcpy(x, src, kv_dim * sizeof(float));
  } else if (dtype == RLM_KV_F16) {
    const uint16_t* h = static_cast<const uint16_t*>(src);
    for (uint32_t i = 0; i < kv_dim; ++i) x[i] = fp16_to_f32(h[i]);
  } else {
    const int8_t* q = static_cast<const int8_t*>(src);
    for (uint32_t h = 0; h < kv_dim / head_dim; ++h) {
      float scale;
      memcpy(&scale, static_cast<const uint8_t*>(src) + kv_scale_offset(kv_dim, h), sizeof scale);
      for (uint32_t i = 0; i < head_dim; ++i) x[h * head_dim + i] = scale * q[h * head_dim + i];
    }
  }
}

namespace {

size_t kv_elem_bytes(rlm_kv_dtype dtype) { return dtype == RLM_KV_F16 ? 2 : 4; }

// Runs of a tiled slot: the slot's columns [c, c + run) are contiguous in both its row and its
// tile from column c on (keys: one column; values: a head's head_dim columns).
inline uint32_t tile_run(KvPlane plane, uint32_t head_dim) { return plane == kKvKeys ? 1 : head_dim; }

// Byte offset of column c of slot `slot` in a tiled sequence (kv_ring.h).
inline size_t tile_offset(KvPlane plane, uint32_t kv_dim, uint32_t head_dim, uint32_t slot,
                          uint32_t c, size_t elem) {
  const size_t tile = static_cast<size_t>(slot / kAttnTile) * kAttnTile * kv_dim;
  const uint32_t lane = slot % kAttnTile;
  if (plane == kKvKeys) return (tile + static_cast<size_t>(c) * kAttnTile + lane) * elem;
  const uint32_t h = c / head_dim, i = c % head_dim;
  return (tile + (static_cast<size_t>(h) * kAttnTile + lane) * head_dim + i) * elem;
}

}  // namespace

void kv_store_slot(const KernelTable* k, KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim,
                   uint32_t head_dim, const float* x, void* base, uint32_t slot) {
  if (!kv_tiled(dtype)) {
    kv_encode_row(k, dtype, kv_dim, head_dim, x,
                  static_cast<uint8_t*>(base) +
                      static_cast<size_t>(slot) * kv_row_bytes(dtype, kv_dim, head_dim));
    return;
  }
  // Encoded 64 values at a time on the stack (the table's f16 conversion), then placed.
  constexpr uint32_t kChunk = 64;
  union {
    float f[kChunk];
    uint16_t h[kChunk];
  } tmp;
  const size_t elem = kv_elem_bytes(dtype);
  const uint32_t run = tile_run(plane, head_dim);
  uint8_t* b = static_cast<uint8_t*>(base);
  for (uint32_t c0 = 0; c0 < kv_dim; c0 += kChunk) {
    const uint32_t n = kv_dim - c0 < kChunk ? kv_dim - c0 : kChunk;
    kv_encode_row(k, dtype, n, n, x + c0, &tmp);
    for (uint32_t c = 0; c < n;) {
      // Up to the end of the column's run or of the chunk.
      const uint32_t end_run = ((c0 + c) / run + 1) * run - c0;
      const uint32_t len = (end_run < n ? end_run : n) - c;
      memcpy(b + tile_offset(plane, kv_dim, head_dim, slot, c0 + c, elem),
             reinterpret_cast<const uint8_t*>(&tmp) + c * elem, len * elem);
      c += len;
    }
  }
}

void kv_slot_get(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                 const void* base, uint32_t slot, void* row) {
  const size_t row_bytes = kv_row_bytes(dtype, kv_dim, head_dim);
  if (!kv_tiled(dtype)) {
    memcpy(row, static_cast<const uint8_t*>(base) + slot * row_bytes, row_bytes);
    return;
  }
  const size_t elem = kv_elem_bytes(dtype);
  const uint32_t run = tile_run(plane, head_dim);
  for (uint32_t c = 0; c < kv_dim; c += run) {
    memcpy(static_cast<uint8_t*>(row) + c * elem,
           static_cast<const uint8_t*>(base) + tile_offset(plane, kv_dim, head_dim, slot, c, elem),
           run * elem);
  }
}

void kv_slot_put(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim, void* base,
                 uint32_t slot, const void* row) {
  const size_t row_bytes = kv_row_bytes(dtype, kv_dim, head_dim);
  if (!kv_tiled(dtype)) {
    memcpy(static_cast<uint8_t*>(base) + slot * row_bytes, row, row_bytes);
    return;
  }
  const size_t elem = kv_elem_bytes(dtype);
  const uint32_t run = tile_run(plane, head_dim);
  for (uint32_t c = 0; c < kv_dim; c += run) {
    memcpy(static_cast<uint8_t*>(base) + tile_offset(plane, kv_dim, head_dim, slot, c, elem),
           static_cast<const uint8_t*>(row) + c * elem, run * elem);
  }
}

void kv_slot_move(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                  void* base, uint32_t slot, ptrdiff_t delta) {
  uint8_t* b = static_cast<uint8_t*>(base);
  if (!kv_tiled(dtype)) {
    const size_t row_bytes = kv_row_bytes(dtype, kv_dim, head_dim);
    memcpy(b + slot * row_bytes + delta, b + slot * row_bytes, row_bytes);
    return;
  }
  const size_t elem = kv_elem_bytes(dtype);
  const uint32_t run = tile_run(plane, head_dim);
  for (uint32_t c = 0; c < kv_dim; c += run) {
    uint8_t* p = b + tile_offset(plane, kv_dim, head_dim, slot, c, elem);
    memcpy(p + delta, p, run * elem);
  }
}

void kv_ring_layout(Arena& a, uint32_t n_layers, const uint8_t* local, uint32_t n_ctx,
                    uint32_t n_sink, uint32_t local_slots, uint32_t kv_dim, uint32_t head_dim,
                    rlm_kv_dtype dtype, uint32_t undo_cap, KvRing* r) {
  r->n_layers = n_layers;
  r->kv_dim = kv_dim;
  r->head_dim = head_dim;
  r->dtype = dtype;
  r->row_bytes = kv_row_bytes(dtype, kv_dim, head_dim);
  r->geom[kKvGlobal] = KvGeom{n_ctx, n_sink, n_ctx - n_sink};
  r->geom[kKvLocal] = KvGeom{local_slots, 0, local_slots};
  r->layer_kind = a.alloc<uint8_t>(n_layers);
  r->layer_off = a.alloc<uint64_t>(n_layers);
  uint64_t total_slots = 0;  // < 2^10 layers * 2^24 slots
  for (uint32_t l = 0; l < n_layers; ++l) {
    const uint8_t kind = (local && local[l]) ? kKvLocal : kKvGlobal;
    if (r->layer_kind) {
      r->layer_kind[l] = kind;
      r->layer_off[l] = total_slots * r->row_bytes;
    }
    total_slots += kv_slots_stored(r->geom[kind].n_ctx);
  }
  r->k = a.alloc_2d(total_slots, r->row_bytes, 1, kArenaAlignment);
  r->v = a.alloc_2d(total_slots, r->row_bytes, 1, kArenaAlignment);
  r->tokens = a.alloc<int32_t>(n_ctx);
  r->undo_cap = undo_cap;
  r->undo_pos = 0;
  r->undo_n = 0;
  r->undo_k = r->undo_v = nullptr;
  r->undo_tokens = nullptr;
  if (undo_cap > 0) {
    const uint64_t rows = static_cast<uint64_t>(undo_cap) * n_layers;
    r->undo_k = a.alloc_2d(rows, r->row_bytes, 1, kArenaAlignment);
    r->undo_v = a.alloc_2d(rows, r->row_bytes, 1, kArenaAlignment);
    r->undo_tokens = a.alloc<int32_t>(undo_cap);
  }
}

namespace {

// Copies the (k, v) rows of layer l's slot for `pos` to (save) or from (restore) undo entry j.
void undo_copy(KvRing* r, uint32_t l, uint64_t pos, uint32_t j, bool save) {
  const KvGeom& g = r->geom[r->layer_kind[l]];
  if (pos < g.n_ctx) return;  // the slot never held an earlier position
  const size_t row = r->row_bytes;
  const size_t undo_off = (static_cast<size_t>(j) * r->n_layers + l) * row;
  const uint32_t slot = kv_slot(g, pos);
  uint8_t* keys = kv_row(*r, r->k, l, 0);
  uint8_t* vals = kv_row(*r, r->v, l, 0);
  uint8_t* uk = static_cast<uint8_t*>(r->undo_k) + undo_off;
  uint8_t* uv = static_cast<uint8_t*>(r->undo_v) + undo_off;
  if (save) {
    kv_slot_get(kKvKeys, r->dtype, r->kv_dim, r->head_dim, keys, slot, uk);
    kv_slot_get(kKvValues, r->dtype, r->kv_dim, r->head_dim, vals, slot, uv);
  } else {
    kv_slot_put(kKvKeys, r->dtype, r->kv_dim, r->head_dim, keys, slot, uk);
    kv_slot_put(kKvValues, r->dtype, r->kv_dim, r->head_dim, vals, slot, uv);
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
