// The KV cache as fixed rings of slots.
//
// Two ring geometries exist, one per layer kind:
//  - global layers: n_ctx slots. Slots [0, n_sink) hold positions [0, n_sink) forever
//    (attention sinks); the other window = n_ctx - n_sink slots hold the most recent positions:
//    position p >= n_sink lives in slot n_sink + (p - n_sink) % window, overwriting p - window.
//  - sliding-window ("local") layers: min(sliding_window, n_ctx) slots, no sinks: they attend to
//    the last sliding_window positions only, so they never need more.
// Memory never grows.
//
// RoPE across the wrap (the StreamingLLM rule, at the cost of one extra query rotation): keys
// are stored rotated at their absolute position. Attention scores depend only on the difference
// of the query's and key's rotation angles, so for window keys the query is rotated at its own
// absolute position p, and key/query distances equal the true ones (at most window - 1). For
// sink keys the query is rotated at min(p, n_ctx - 1) instead: once the ring has wrapped, the
// sinks are seen as if they sat directly before the window (the positions the model saw in
// training, never the unbounded true distance). Angles are computed in double from the absolute
// position so precision does not decay over millions of tokens.
#ifndef RINGLM_RUNTIME_KV_RING_H_
#define RINGLM_RUNTIME_KV_RING_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"  // KernelTable
#include "ringlm/ringlm.h"

namespace ringlm::internal {

struct KvGeom {
  uint32_t n_ctx;   // slots
  uint32_t n_sink;  // slots pinned to positions [0, n_sink)
  uint32_t window;  // n_ctx - n_sink
};

enum KvKind : uint8_t { kKvGlobal = 0, kKvLocal = 1 };

// One slot's row of one layer (K or V), by dtype:
//   f32, f16: kv_dim values.
//   q8:       kv_dim int8 values (zero-padded to a multiple of 4 bytes), then n_kv_heads f32
//             scales: value i of head h is scale[h] * q[h * head_dim + i]; symmetric, scale =
//             amax / 127 over the head's head_dim values (per head and position). Scales sit
//             in the row so every copy of a row (undo area, snapshots, beams) stays one memcpy.
size_t kv_row_bytes(rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim);
// Byte offset of head h's values in a row, and (q8) of its scale.
inline size_t kv_head_offset(rlm_kv_dtype dtype, uint32_t h, uint32_t head_dim) {
  const size_t elem = dtype == RLM_KV_F32 ? 4 : dtype == RLM_KV_F16 ? 2 : 1;
  return static_cast<size_t>(h) * head_dim * elem;
}
inline size_t kv_scale_offset(uint32_t kv_dim, uint32_t h) {
  return ((static_cast<size_t>(kv_dim) + 3) & ~size_t{3}) + static_cast<size_t>(h) * sizeof(float);
}
// Stores the kv_dim floats of `x` as one row at `dst` (f16 rounding, or q8 quantization); `k`
// (the session's kernel table, or null: scalar) converts f16 rows, the same bits either way.
void kv_encode_row(const KernelTable* k, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                   const float* x, void* dst);
// The inverse (tests, tools): kv_dim floats from a row.
void kv_decode_row(rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim, const void* src,
                   float* x);

// The f32 / f16 cache (ring and beam slots alike) is stored in tiles of kAttnTile slots: in a
// sequence of slots starting at `base` (slot 0 at a tile's first lane), tile t holds the
// row_bytes * kAttnTile bytes from t * kAttnTile rows in, laid out by plane:
//   keys (attn_dot_tiled's operand): column c of slot s at element
//     t * kAttnTile * kv_dim + c * kAttnTile + s % kAttnTile  ([tile][column][lane]);
//   values (attn_accum's rows, head by head): column c = h * head_dim + i of slot s at
//     t * kAttnTile * kv_dim + h * head_dim * kAttnTile + (s % kAttnTile) * head_dim + i
//     ([tile][head][lane][i]: a head's 16 rows contiguous, head_dim elements apart).
// Either way the walk of a tile, head after head, reads it in address order: one stream the
// hardware prefetcher follows. q8 rows (their scales sit in the row) stay rows in both planes. A
// sequence of n slots takes kv_slots_stored(n) rows' bytes.
enum KvPlane : uint8_t { kKvKeys = 0, kKvValues = 1 };
inline bool kv_tiled(rlm_kv_dtype dtype) { return dtype != RLM_KV_Q8; }
inline uint32_t kv_slots_stored(uint32_t n) { return (n + kAttnTile - 1) / kAttnTile * kAttnTile; }
// Encodes the kv_dim floats of `x` (as kv_encode_row) into slot `slot` of the `plane` sequence at
// `base`.
void kv_store_slot(const KernelTable* k, KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim,
                   uint32_t head_dim, const float* x, void* base, uint32_t slot);
// Copies slot `slot` of the `plane` sequence at `base` to / from an encoded row (row_bytes): how
// undo, snapshots and tests see a slot whatever the layout.
void kv_slot_get(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                 const void* base, uint32_t slot, void* row);
void kv_slot_put(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim, void* base,
                 uint32_t slot, const void* row);
// Copies slot `slot` of the `plane` sequence at `base` to the same slot of the sequence `delta`
// bytes away (a session copy: same geometry, other block).
void kv_slot_move(KvPlane plane, rlm_kv_dtype dtype, uint32_t kv_dim, uint32_t head_dim,
                  void* base, uint32_t slot, ptrdiff_t delta);

struct KvRing {
  uint32_t n_layers, kv_dim, head_dim;
  rlm_kv_dtype dtype;
  size_t row_bytes;       // kv_row_bytes(dtype, kv_dim, head_dim)
  KvGeom geom[2];         // [kKvGlobal], [kKvLocal] (local unused without local layers)
  uint8_t* layer_kind;    // (n_layers) KvKind of each layer
  uint64_t* layer_off;    // (n_layers) byte offset of the layer's block of
                          // kv_slots_stored(slots) rows
  void* k;                // (Σ_layers kv_slots_stored(slots(layer)), row_bytes) rotated keys,
                          // the keys plane (tiled as kv_tiled says)
  void* v;                // same shape, the values plane
  int32_t* tokens;        // (geom[kKvGlobal].n_ctx) token held by each global slot
  // Undo area of speculative positions (sessions with max_draft > 0): before a pass writes
  // positions that may be rejected, the slots they overwrite are saved here, and restored when
  // those positions are dropped, so a rejected position never costs a live one.
  uint32_t undo_cap;      // positions the area holds (max_draft)
  uint64_t undo_pos;      // first saved position
  uint32_t undo_n;        // saved positions: [undo_pos, undo_pos + undo_n)
  void* undo_k;           // (undo_cap, n_layers, row_bytes): the saved key rows
  void* undo_v;           // same shape: the saved value rows
  int32_t* undo_tokens;   // (undo_cap) the saved global-slot tokens
};

// `local` (n_layers flags, may be null) marks sliding-window layers with `local_slots` slots.
// `undo_cap` positions of undo area (0: none).
void kv_ring_layout(Arena& a, uint32_t n_layers, const uint8_t* local, uint32_t n_ctx,
                    uint32_t n_sink, uint32_t local_slots, uint32_t kv_dim, uint32_t head_dim,
                    rlm_kv_dtype dtype, uint32_t undo_cap, KvRing* r);

// Row of layer l's slot in `base` (kv.k or kv.v). For tiled planes, only slot 0's is meaningful:
// the start of the layer's tiles.
inline uint8_t* kv_row(const KvRing& r, void* base, uint32_t l, uint32_t slot) {
  return static_cast<uint8_t*>(base) + r.layer_off[l] + static_cast<size_t>(slot) * r.row_bytes;
}

// Saves the slots positions [pos, pos + n) are about to overwrite (n <= undo_cap; n below every
// layer kind's window, so the n slots are distinct). Slots that never held a position (before the
// ring reaches them) are not read. Replaces what the area held.
void kv_undo_save(KvRing* r, uint64_t pos, uint32_t n);
// Drops saved positions >= `pos`: their slots get back what they held before kv_undo_save.
// Positions below `pos` are kept (committed). Afterwards the area is empty.
void kv_undo_restore(KvRing* r, uint64_t pos);

inline uint32_t kv_slot(const KvGeom& g, uint64_t pos) {
  if (pos < g.n_sink) return static_cast<uint32_t>(pos);
  return g.n_sink + static_cast<uint32_t>((pos - g.n_sink) % g.window);
}

// Slots a query at `pos` attends to, once slot(pos) is written: [0, count).
inline uint32_t kv_visible(const KvGeom& g, uint64_t pos) {
  return pos < g.n_ctx ? static_cast<uint32_t>(pos + 1) : g.n_ctx;
}

// True once some layer kind has overwritten a position before n_past.
bool kv_wrapped(const KvRing& r, uint64_t n_past);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_KV_RING_H_
