// The Llama-family forward pass: forward(tokens, pos) writes the logits of the last token. Norms,
// RoPE and attention run on the kernel table; every matrix product goes through the matmul layer
// (matmul.h), whichever backend holds the matrix. Buffers live in the session arena (see
// transformer_layout).
#ifndef RINGLM_RUNTIME_TRANSFORMER_H_
#define RINGLM_RUNTIME_TRANSFORMER_H_

#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "kv_ring.h"
#include "matmul.h"
#include "model.h"
#include "platform/threads.h"

namespace ringlm::internal {

// A layer's vectors; its matrices are the matmul layer's slots (layer, MatRole).
struct LayerWeights {
  WeightView attn_norm, ffn_norm;
  WeightView bq, bk, bv;                  // qkv_bias only
  WeightView q_norm, k_norm;              // qk_norm only: (head_dim) shared by all heads
  WeightView post_attn_norm, post_ffn_norm;  // post_norms only
  uint8_t kind;                           // KvKind: global or sliding-window layer
};

struct Transformer {
  const KernelTable* k;     // static table; never freed
  Hparams hp;
  WeightView tok_emb, out_norm;
  LayerWeights* layers;     // (n_layers) views into the model bytes
  Matmuls mm;               // every matrix: Wq .. Down per layer, the output projection
  KvRing kv;
  uint32_t n_batch;         // max tokens per pass
  // Activations for one pass of up to n_batch tokens.
  float* x;                 // (n_batch, dim) residual stream
  float* xb;                // (n_batch, max(dim, q_dim)) normed input / attention output
  float* xb2;               // (n_batch, dim) projection output
  float* q;                 // (n_batch, q_dim) queries, unrotated
  float* kt;                // (n_batch, kv_dim) new keys
  float* vt;                // (n_batch, kv_dim) new values
  float* hb;                // (n_batch, ffn_dim) gate, then SwiGLU output
  float* hb2;               // (n_batch, ffn_dim) up
  ThreadPool* pool;         // workers started at init (n_threads - 1 of them); null for one thread
  void* pool_memory;        // (thread_pool_bytes(n_threads)) where init starts the pool, or null
  uint32_t n_threads;
  // Per-thread attention scratch, thread i at offset i * stride.
  float* qrot;              // (n_threads, q_dim) the thread's heads' queries rotated at their
                            // position
  float* qsink;             // (n_threads, q_dim) the same rotated at the sink position
  float* att;               // (n_threads, n_heads, n_ctx) attention weights of the thread's heads
  float* kbuf;              // (n_threads, head_dim) one key row being rotated
  // Attention over more than attn_chunk slots runs chunk by chunk (attend_chunks); the chunks
  // depend only on n_ctx, never on the thread count.
  uint32_t attn_chunk;      // slots per chunk: a multiple of kAttnTile, at least 256
  uint32_t attn_chunks;     // chunks of a full ring: ceil(n_ctx / attn_chunk) <= 16
  float* part_out;          // (attn_chunks, q_dim) each chunk's output, normalized by its softmax
  float* part_lse;          // (attn_chunks, n_heads) each chunk's log of its sum of exp(score)
  float* rope_freq;         // (head_dim / 2) inverse frequencies of global layers
  float* rope_freq_local;   // (head_dim / 2) inverse frequencies of sliding-window layers
  float* rope_cs;           // (n_batch, head_dim): cos | sin tables of the batch's positions
  float* rope_cs_local;     // (n_batch, head_dim): the same for sliding-window layers
  float* rope_sink;         // (head_dim): cos | sin at n_ctx - 1, the sinks' query position
  // Cancellation (rlm_session_cancel): while `cancel` is set, a pass whose positions overwrite
  // no live slot stops after the layer during which *cancel moved away from cancel_base.
  const uint32_t* cancel;   // the session's request counter, or null (not cancellable)
  uint32_t cancel_base;
  float* logits;            // (n_logit_rows, vocab): the last rows' logits of a pass
  uint32_t n_logit_rows;    // max(1 + max_draft (speculative verification), logit_rows (scoring))
};

// Reserves every buffer from `a` (measure mode allowed) and fills sizes; weights are resolved
// separately by transformer_bind (needs real memory). A backend's operators are the matmul
// layer's (matmul_backend_layout / _create / _release on `mm`).
// `max_draft` > 0 adds the speculative parts: logits of 1 + max_draft rows and the KV undo area
// (the batch must be at least 1 + max_draft: the caller's n_batch is raised to it).
// `logit_rows` raises the logits rows further (scoring); it does not raise the batch.
void transformer_layout(Arena& a, const Hparams& hp, uint32_t n_ctx, uint32_t n_sink,
                        rlm_kv_dtype kv_dtype, uint32_t n_batch, uint32_t n_threads,
                        uint32_t max_draft, uint32_t logit_rows, Transformer* t);

// Beam storage: the K/V rows each beam adds after the shared prefix, in the ring's dtype and key
// layout (kv_ring.h), layer l's slot `slot` a sequence of slot_rows rows from
// ((l * max_beams + slot) * slot_rows) * row_bytes. Rows belong to beam slots, not to beams:
// a beam that continues its parent keeps the parent's slot, so reordering copies only the rows of
// beams that fork (beam.h).
struct BeamKv {
  void* k;                  // (n_layers, max_beams, slot_rows, row_bytes): keys as in the ring
  void* v;                  // same, rows
  uint32_t max_beams, max_len;
  uint32_t slot_rows;       // kv_slots_stored(max_len): whole key tiles
  size_t row_bytes;         // the ring's kv_row_bytes
};

// One beam step for forward: token i is the next token of the beam in slot slot[i]; every token
// is at position `pos0` = prefix + row. Its K/V go to row `row` of its slot; it attends to ring
// positions [0, prefix) (which must not have wrapped: slot == position) and its slot's rows
// [0, row].
struct BeamStep {
  const BeamKv* kv;
  const uint32_t* slot;     // (n)
  uint32_t row;
  uint32_t prefix;
};

// Bytes of beam storage for `max_beams` x `max_len` rows (0 when either is 0).
void beam_kv_layout(Arena& a, const Hparams& hp, rlm_kv_dtype dtype, uint32_t max_beams,
                    uint32_t max_len, BeamKv* b);

// Copies rows [0, n_rows) of slot `from` to slot `to` in every layer (K and V).
void beam_kv_copy(const BeamKv& b, const Hparams& hp, uint32_t from, uint32_t to,
                  uint32_t n_rows);

// Resolves the weight views of a verified model (init only; never fails after model_open).
void transformer_bind(const ModelImpl& m, Transformer* t);

// Runs tokens[0..n) at positions pos0.. (n <= n_batch, tokens in range — checked by the caller),
// writing K/V into the ring and the logits of the last n_logits tokens (1 <= n_logits <=
// min(n, n_logit_rows)) into t->logits, row i for token n - n_logits + i. Each row equals what a
// one-token pass at that position computes (every kernel computes rows independently).
// With `beam` (n_logits must then be n): a beam step (BeamStep above) instead of consecutive
// positions; the ring is read, never written.
// Returns false when cancelled (t->cancel): the pass stopped between layers, its logits are not
// written and the K/V it wrote belong to no position (only passes that overwrite no live slot
// stop early: a pass that wraps the ring always completes, so the ring stays consistent).
bool forward(Transformer* t, const int32_t* tokens, uint32_t n, uint64_t pos0,
             uint32_t n_logits = 1, const BeamStep* beam = nullptr);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TRANSFORMER_H_
