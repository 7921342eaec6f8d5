// The KV cache as a fixed ring of slots.
//
// Slots [0, n_sink) hold positions [0, n_sink) forever (attention sinks). The other
// window = n_ctx - n_sink slots hold the most recent positions: position p >= n_sink lives in
// slot n_sink + (p - n_sink) % window, overwriting p - window. Memory never grows.
//
// RoPE across the wrap (the StreamingLLM rule, at the cost of one extra query rotation): keys are
// stored rotated at their absolute position. Attention scores depend only on the difference of
// the query's and key's rotation angles, so for window keys the query is rotated at its own
// absolute position p, and key/query distances equal the true ones (at most window - 1). For sink
// keys the query is rotated at min(p, n_ctx - 1) instead: once the ring has wrapped, the sinks
// are seen as if they sat directly before the window (the positions the model saw in training,
// never the unbounded true distance). Angles are computed in double from the absolute position
// so precision does not decay over millions of tokens.
#ifndef RINGLM_RUNTIME_KV_RING_H_
#define RINGLM_RUNTIME_KV_RING_H_

#include <stdint.h>

#include "arena.h"
#include "ringlm/ringlm.h"

namespace ringlm {

struct KvRing {
  uint32_t n_layers, n_ctx, n_sink, window, kv_dim;
  rlm_kv_dtype dtype;
  void* k;           // (n_layers, n_ctx, kv_dim) f32 or f16, rotated keys
  void* v;           // (n_layers, n_ctx, kv_dim)
  int32_t* tokens;   // (n_ctx) token held by each slot (for rewind / decode context)
};

void kv_ring_layout(Arena& a, uint32_t n_layers, uint32_t n_ctx, uint32_t n_sink,
                    uint32_t kv_dim, rlm_kv_dtype dtype, KvRing* r);

inline uint32_t kv_slot(const KvRing& r, uint64_t pos) {
  if (pos < r.n_sink) return static_cast<uint32_t>(pos);
  return r.n_sink + static_cast<uint32_t>((pos - r.n_sink) % r.window);
}

// Slots a query at `pos` attends to, once slot(pos) is written: [0, count).
inline uint32_t kv_visible(const KvRing& r, uint64_t pos) {
  return pos < r.n_ctx ? static_cast<uint32_t>(pos + 1) : r.n_ctx;
}

// True once any position has been overwritten (positions before n_past are no longer all held).
inline bool kv_wrapped(const KvRing& r, uint64_t n_past) { return n_past > r.n_ctx; }

}  // namespace ringlm

#endif  // RINGLM_RUNTIME_KV_RING_H_
