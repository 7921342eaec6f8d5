// The Llama-family forward pass over the kernel table: forward(tokens, pos) writes the logits of
// the last token. Buffers live in the session arena (see transformer_layout).
#ifndef RINGLM_RUNTIME_TRANSFORMER_H_
#define RINGLM_RUNTIME_TRANSFORMER_H_

#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "kv_ring.h"
#include "model.h"
#include "platform/threads.h"
#include "platform/xnnpack_backend.h"

namespace ringlm {

struct LayerWeights {
  WeightView attn_norm, wq, wk, wv, wo, ffn_norm, gate, down, up;
  WeightView bq, bk, bv;                  // qkv_bias only
  WeightView q_norm, k_norm;              // qk_norm only: (head_dim) shared by all heads
  WeightView post_attn_norm, post_ffn_norm;  // post_norms only
  uint8_t kind;                           // KvKind: global or sliding-window layer
};

// Matrices the XNNPACK backend may take, as slots: per layer wq, wk, wv, wo, gate, up, down, then
// one for the output projection.
constexpr uint32_t kXnnLayerSlots = 7;

// Backend "xnnpack": one XNNPACK operator per (F32 matrix, thread), owning that thread's row slice
// (the same slices as the native path), created at init in `arena`, a region of the session block.
struct XnnMatmuls {
  void** ops;         // (n_slots, n_threads); null: empty slice, or the slot runs natively
  uint8_t* on;        // (n_slots) 1 = the slot's matrix runs on XNNPACK
  uint32_t n_slots;   // n_layers * kXnnLayerSlots + 1; 0 = native backend
  uint32_t n_matrices;  // slots on XNNPACK
  uint32_t n_ops;     // operators created
  XnnArena arena;
};

struct Transformer {
  const KernelTable* k;     // static table; never freed
  Hparams hp;
  WeightView tok_emb, out_norm, output;  // output = tok_emb when tied
  LayerWeights* layers;     // (n_layers) views into the model bytes
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
  int8_t* xq;               // (n_batch, act_stride) quantized activations
  float* xqs;               // (n_batch, act_stride / 32) their scales
  uint32_t act_stride;      // padded max(dim, q_dim, ffn_dim)
  ThreadPool* pool;         // workers started at init (n_threads - 1 of them); null for one thread
  void* pool_memory;        // (thread_pool_bytes(n_threads)) where init starts the pool, or null
  uint32_t n_threads;
  // Per-thread attention scratch, thread i at offset i * stride.
  float* qrot;              // (n_threads, head_dim) query rotated at its position
  float* qsink;             // (n_threads, head_dim) query rotated at the sink position
  float* att;               // (n_threads, n_ctx) attention weights of one head
  float* kbuf;              // (n_threads, head_dim) one key / value row converted from f16
  float* rope_freq;         // (head_dim / 2) inverse frequencies of global layers
  float* rope_freq_local;   // (head_dim / 2) inverse frequencies of sliding-window layers
  float* rope_cs;           // (n_batch, head_dim): cos | sin tables of the batch's positions
  float* rope_cs_local;     // (n_batch, head_dim): the same for sliding-window layers
  float* rope_sink;         // (head_dim): cos | sin at n_ctx - 1, the sinks' query position
  float* logits;            // (vocab)
  XnnMatmuls xnn;           // zero unless the session's backend is "xnnpack"
};

// Reserves every buffer from `a` (measure mode allowed) and fills sizes; weights are resolved
// separately by transformer_bind (needs real memory).
void transformer_layout(Arena& a, const Hparams& hp, uint32_t n_ctx, uint32_t n_sink,
                        rlm_kv_dtype kv_dtype, uint32_t n_batch, uint32_t n_threads,
                        Transformer* t);

// Resolves the weight views of a verified model (init only; never fails after model_open).
void transformer_bind(const ModelImpl& m, Transformer* t);

// Matrices of a verified model the XNNPACK backend takes (F32 weights of the matmuls).
uint32_t xnn_eligible_matrices(const ModelImpl& m);

// Backend "xnnpack": reserves the operator table and XNNPACK's region — an upper bound computed
// from the shapes (xnnpack_f32_fc_bound per operator) — from `a` (measure mode allowed). Call
// after transformer_layout; does nothing when !use_xnn.
void transformer_xnn_layout(Arena& a, const ModelImpl& m, bool use_xnn, Transformer* t);

// Creates the XNNPACK operators (init, after transformer_bind; the caller's thread). On failure
// (RLM_ERR_BACKEND) the ones created are deleted again.
Status transformer_xnn_create(const ModelImpl& m, Transformer* t, ErrorSink* err);

// Deletes the XNNPACK operators (after the workers are joined). Idempotent.
void transformer_xnn_release(Transformer* t);

// Runs tokens[0..n) at positions pos0.. (n <= n_batch, tokens in range — checked by the caller),
// writing K/V into the ring and the last token's logits into t->logits.
void forward(Transformer* t, const int32_t* tokens, uint32_t n, uint64_t pos0);

}  // namespace ringlm

#endif  // RINGLM_RUNTIME_TRANSFORMER_H_
