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

#include <stdint.h>

#include "arena.h"
#include "ringlm/ringlm.h"

namespace ringlm::internal {

struct KvGeom {
  uint32_t n_ctx;   // slots
  uint32_t n_sink;  // slots pinned to positions [0, n_sink)
  uint32_t window;  // n_ctx - n_sink
};

enum KvKind : uint8_t { kKvGlobal = 0, kKvLocal = 1 };

struct KvRing {
  uint32_t n_layers, kv_dim;
  rlm_kv_dtype dtype;
  KvGeom geom[2];         // [kKvGlobal], [kKvLocal] (local unused without local layers)
  uint8_t* layer_kind;    // (n_layers) KvKind of each layer
  uint64_t* layer_off;    // (n_layers) offset, in elements, of the layer's (slots, kv_dim) block
  void* k;                // (Σ_layers slots(layer), kv_dim) f32 or f16, rotated keys
  void* v;                // same shape
  int32_t* tokens;        // (geom[kKvGlobal].n_ctx) token held by each global slot
};

// `local` (n_layers flags, may be null) marks sliding-window layers with `local_slots` slots.
void kv_ring_layout(Arena& a, uint32_t n_layers, const uint8_t* local, uint32_t n_ctx,
                    uint32_t n_sink, uint32_t local_slots, uint32_t kv_dim, rlm_kv_dtype dtype,
                    KvRing* r);

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
