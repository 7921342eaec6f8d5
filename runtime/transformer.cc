#include "transformer.h"

#include <math.h>
#include <string.h>

#include "kernels/scalar.h"

namespace ringlm {
namespace {

uint32_t max3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t m = a > b ? a : b;
  return m > c ? m : c;
}

// cos/sin of every rotation angle at absolute position `pos`: cs = (cos[half], sin[half]).
// Double precision angles: exact for positions far beyond float's 2^24.
void rope_table(const float* inv_freq, uint32_t half, uint64_t pos, float* cs) {
  for (uint32_t i = 0; i < half; ++i) {
    const double angle = static_cast<double>(pos) * static_cast<double>(inv_freq[i]);
    cs[i] = static_cast<float>(cos(angle));
    cs[half + i] = static_cast<float>(sin(angle));
  }
}

// Rotates one head vector `in` into `out` with a table from rope_table.
void rope(const float* in, float* out, const float* cs, uint32_t head_dim, fb::RopeStyle style) {
  const uint32_t half = head_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    const float c = cs[i], s = cs[half + i];
    const uint32_t i0 = style == fb::RopeStyle::Interleaved ? 2 * i : i;
    const uint32_t i1 = style == fb::RopeStyle::Interleaved ? 2 * i + 1 : i + half;
    const float a = in[i0], b = in[i1];
    out[i0] = a * c - b * s;
    out[i1] = a * s + b * c;
  }
}

// Quantizes x once for a group of matmuls sharing it, when any of them needs int8 inputs.
QuantActs prepare_acts(Transformer* t, const float* x, uint32_t n, uint32_t cols) {
  t->k->quantize_acts(x, n, cols, static_cast<uint32_t>(padded_cols(cols)), t->xq, t->xqs);
  return QuantActs{t->xq, t->xqs, static_cast<uint32_t>(padded_cols(cols))};
}

bool is_quant(const WeightView& w) {
  return w.type == WeightType::Q8 || w.type == WeightType::Q4;
}

// Bytes a matmul reads of `w` (values and, for Q8/Q4, the f16 group scales).
uint64_t weight_bytes(const WeightView& w) {
  const uint64_t n = static_cast<uint64_t>(w.rows) * w.row_stride;
  switch (w.type) {
    case WeightType::F32: return 4 * n;
    case WeightType::F16: return 2 * n;
    case WeightType::Q8: return n + n / kQuantGroup * 2;
    case WeightType::Q4: return n / 2 + n / kQuantGroup * 2;
  }
  return n;
}

// Rows are split across threads in blocks of this many, so every thread count sees the same
// block boundaries and each row is computed by the same kernel code path: results do not depend
// on the thread count.
constexpr uint32_t kRowBlock = 16;
// When a matmul job is worth splitting across threads. Prefill is compute-bound: it pays once
// the job has this many multiply-adds (weights x tokens; ~0.1 ms on one core), below which the
// hand-off costs more than it saves (stories260K, 2 threads: prefill 4 % slower at 2^16).
constexpr uint64_t kMinParallelMacs = 1u << 22;
// Decode is bandwidth-bound: a second core adds bandwidth once the job streams this many weight
// bytes, more than a core's L2 keeps between tokens (smaller models run from cache, where the
// split only adds the hand-off).
constexpr uint64_t kMinParallelBytes = 1u << 18;
// Attention work (visible slots × q_dim) below which heads are not split across threads.
constexpr uint64_t kMinParallelAttention = 1u << 14;
// A parallel job is split into up to this many parts per thread, claimed by whichever thread is
// free (see platform/threads.h): a thread that is descheduled on a busy device then delays the
// job by at most the part it holds, and the others take the rest. More parts cost more claims.
constexpr uint32_t kPartsPerThread = 4;

// Parts for a job of `units` indivisible units (row blocks, heads) on `n_threads`.
uint32_t job_parts(uint32_t units, uint32_t n_threads) {
  const uint32_t most = n_threads * kPartsPerThread;
  return units < most ? (units ? units : 1) : most;
}

// y(n, w.rows) = x(n, w.cols) · Wᵀ for rows [r0, r1). `qa` holds x quantized when w is Q8/Q4.
void linear_rows(const KernelTable* k, const WeightView& w, const float* x, const QuantActs& qa,
                 uint32_t n, float* y, uint32_t r0, uint32_t r1) {
  if (r0 >= r1) return;
  switch (w.type) {
    case WeightType::F32:
      k->matmul_f32(w, x, n, y, r0, r1);
      break;
    case WeightType::F16:
      k->matmul_f16(w, x, n, y, r0, r1);
      break;
    case WeightType::Q8:
      k->matmul_q8(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q4:
      k->matmul_q4(w, qa, n, y, r0, r1);
      break;
  }
}

struct ProjectJob {
  const KernelTable* k;
  const WeightView* const* w;
  float* const* y;
  uint32_t count;
  const float* x;
  QuantActs qa;
  uint32_t n;
  void* const* xnn[3];     // per matrix: its XNNPACK operators (one per session thread) or null
  uint32_t xnn_threads;    // the session's thread count (the operators' slicing)
};

// Runs matrix i's XNNPACK operators of part `part` of `n_parts`: the operators' slices are spread
// over the parts (one each when n_parts >= the slice count, all of them for one part).
void project_xnn(const ProjectJob* j, uint32_t i, uint32_t part, uint32_t n_parts) {
  const uint32_t nt = j->xnn_threads;
  uint32_t s0, s1;
  thread_share(nt, 1, part, n_parts, &s0, &s1);
  for (uint32_t s = s0; s < s1; ++s) {
    void* op = j->xnn[i][s];
    if (!op) continue;  // empty slice
    uint32_t r0, r1;
    thread_share(j->w[i]->rows, kRowBlock, s, nt, &r0, &r1);
    xnnpack_run_f32(op, j->x, j->n, j->y[i] + r0);
  }
}

// Part `part` of `n_parts`: the same share of every matrix's row blocks, whichever thread runs it.
void project_job(void* ctx, uint32_t part, uint32_t n_parts, uint32_t /*slot*/) {
  const ProjectJob* j = static_cast<const ProjectJob*>(ctx);
  for (uint32_t i = 0; i < j->count; ++i) {
    if (j->xnn[i]) {
      project_xnn(j, i, part, n_parts);
      continue;
    }
    uint32_t r0, r1;
    thread_share(j->w[i]->rows, kRowBlock, part, n_parts, &r0, &r1);
    linear_rows(j->k, *j->w[i], j->x, j->qa, j->n, j->y[i], r0, r1);
  }
}

// The XNNPACK operators of a slot, or null when it runs on the kernel table.
void* const* xnn_ops(const Transformer* t, uint32_t slot) {
  const XnnMatmuls& x = t->xnn;
  return x.n_slots && x.on[slot] ? x.ops + static_cast<size_t>(slot) * t->n_threads : nullptr;
}

// Up to three projections of one input, quantizing it once, as one parallel job. `slot0`: the
// XNNPACK slot of w[0] (the others follow it), or UINT32_MAX for none.
void project(Transformer* t, const float* x, uint32_t n, uint32_t cols, const WeightView* w[3],
             float* y[3], uint32_t count, uint32_t slot0) {
  ProjectJob job{t->k, w, y, count, x, QuantActs{}, n, {nullptr, nullptr, nullptr}, t->n_threads};
  if (slot0 != UINT32_MAX) {
    for (uint32_t i = 0; i < count; ++i) job.xnn[i] = xnn_ops(t, slot0 + i);
  }
  bool need = false, all_xnn = true;
  uint64_t weights = 0, bytes = 0;
  uint32_t blocks = 0;  // of the tallest matrix
  for (uint32_t i = 0; i < count; ++i) {
    need |= is_quant(*w[i]);
    all_xnn = all_xnn && job.xnn[i];
    weights += static_cast<uint64_t>(w[i]->rows) * w[i]->cols;
    bytes += weight_bytes(*w[i]);
    const uint32_t b = (w[i]->rows + kRowBlock - 1) / kRowBlock;
    blocks = b > blocks ? b : blocks;
  }
  if (need) job.qa = prepare_acts(t, x, n, cols);
  if (t->n_threads > 1 && (weights * n >= kMinParallelMacs || bytes >= kMinParallelBytes)) {
    // XNNPACK matrices come in one pre-sliced operator per session thread: those are the parts.
    const uint32_t parts = all_xnn ? t->n_threads : job_parts(blocks, t->n_threads);
    thread_pool_run(t->pool, project_job, &job, parts);
  } else {
    project_job(&job, 0, 1, 0);
  }
}

void embed(const Transformer* t, int32_t token, float* out) {
  const WeightView& e = t->tok_emb;
  const size_t r = static_cast<size_t>(token);
  switch (e.type) {
    case WeightType::F32:
      memcpy(out, static_cast<const float*>(e.data) + r * e.row_stride, e.cols * sizeof(float));
      break;
    case WeightType::F16: {
      const uint16_t* row = static_cast<const uint16_t*>(e.data) + r * e.row_stride;
      for (uint32_t i = 0; i < e.cols; ++i) out[i] = fp16_to_f32(row[i]);
      break;
    }
    case WeightType::Q8:
      dequantize_row_q8(static_cast<const int8_t*>(e.data) + r * e.row_stride,
                        e.scales + r * (e.row_stride / kQuantGroup), e.cols, out);
      break;
    case WeightType::Q4:
      dequantize_row_q4(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                        e.scales + r * (e.row_stride / kQuantGroup), e.cols, out);
      break;
  }
}

void kv_store(const KvRing& kv, void* base, uint32_t l, uint32_t slot, const float* row) {
  const size_t idx = kv.layer_off[l] + static_cast<size_t>(slot) * kv.kv_dim;
  if (kv.dtype == RLM_KV_F32) {
    memcpy(static_cast<float*>(base) + idx, row, kv.kv_dim * sizeof(float));
  } else {
    uint16_t* h = static_cast<uint16_t*>(base) + idx;
    for (uint32_t i = 0; i < kv.kv_dim; ++i) h[i] = f32_to_fp16(row[i]);
  }
}

void soft_cap(float* x, uint32_t n, float cap) {
  for (uint32_t i = 0; i < n; ++i) x[i] = cap * tanhf(x[i] / cap);
}

// a(i) = gelu_tanh(a(i)) * b(i) (GeGLU, Gemma).
void geglu(float* a, const float* b, size_t n) {
  const float k = 0.7978845608028654f;  // sqrt(2 / pi)
  for (size_t i = 0; i < n; ++i) {
    const float x = a[i];
    a[i] = 0.5f * x * (1.0f + tanhf(k * (x + 0.044715f * x * x * x))) * b[i];
  }
}

void add_bias(float* y, const WeightView& b, uint32_t n, uint32_t width) {
  const float* bias = static_cast<const float*>(b.data);
  for (uint32_t t = 0; t < n; ++t) {
    float* row = y + static_cast<size_t>(t) * width;
    for (uint32_t i = 0; i < width; ++i) row[i] += bias[i];
  }
}

// RMSNorm of each head_dim slice of rows (n, heads * head_dim), in place.
void head_norm(const KernelTable* k, float* x, uint32_t n, uint32_t heads, uint32_t hd,
               const WeightView& w, float eps) {
  for (size_t i = 0; i < static_cast<size_t>(n) * heads; ++i) {
    k->rmsnorm(x + i * hd, x + i * hd, static_cast<const float*>(w.data), hd, eps);
  }
}

// Fills inv_freq (head_dim/2) for base `theta` with the model's frequency scaling.
void rope_frequencies(const Hparams& hp, float theta, bool scaled, const float* factors,
                      float* inv_freq) {
  const uint32_t half = hp.head_dim / 2;
  for (uint32_t i = 0; i < half; ++i) {
    double f = 1.0 / pow(static_cast<double>(theta),
                         static_cast<double>(2 * i) / static_cast<double>(hp.head_dim));
    if (scaled && hp.rope_scaling == fb::RopeScaling::Linear) {
      f /= hp.rope_factor;
    } else if (scaled && hp.rope_scaling == fb::RopeScaling::Llama3) {
      // Meta's llama3 rule: long wavelengths scaled by 1/factor, short ones kept, a smooth
      // blend between.
      const double two_pi = 6.283185307179586;
      const double old_ctx = hp.rope_original_context;
      const double low_wl = old_ctx / hp.rope_low_freq_factor;
      const double high_wl = old_ctx / hp.rope_high_freq_factor;
      const double wl = two_pi / f;
      if (wl > low_wl) {
        f /= hp.rope_factor;
      } else if (wl >= high_wl) {
        const double smooth = (old_ctx / wl - hp.rope_low_freq_factor) /
                              (hp.rope_high_freq_factor - hp.rope_low_freq_factor);
        f = (1.0 - smooth) * f / hp.rope_factor + smooth * f;
      }
    }
    if (scaled && factors) f /= factors[i];
    inv_freq[i] = static_cast<float>(f);
  }
}

// Attention of one token at `pos` (its K/V already stored) for heads [h0, h1); out(q_dim).
// `scratch` selects the calling thread's buffers.
void attend_heads(Transformer* t, uint32_t l, const float* q, uint64_t pos, const float* cs,
                  float* out, uint32_t h0, uint32_t h1, uint32_t scratch) {
  const Hparams& hp = t->hp;
  const KvRing& kv = t->kv;
  const uint32_t kind = t->layers[l].kind;
  const KvGeom& g = kv.geom[kind];
  const uint32_t hd = hp.head_dim;
  const uint32_t group = hp.n_heads / hp.n_kv_heads;
  const uint32_t visible = kv_visible(g, pos);
  const uint64_t sink_pos = pos < g.n_ctx ? pos : g.n_ctx - 1;
  const float scale = hp.attn_scale;
  const float cap = hp.attn_softcap;
  float* qrot = t->qrot + static_cast<size_t>(scratch) * hd;
  float* qsink = t->qsink + static_cast<size_t>(scratch) * hd;
  float* att = t->att + static_cast<size_t>(scratch) * kv.geom[kKvGlobal].n_ctx;
  const bool f16 = kv.dtype == RLM_KV_F16;
  const size_t elem = f16 ? 2 : 4;
  const uint8_t* kbase = static_cast<const uint8_t*>(kv.k) + kv.layer_off[l] * elem;
  const uint8_t* vbase = static_cast<const uint8_t*>(kv.v) + kv.layer_off[l] * elem;
  for (uint32_t h = h0; h < h1; ++h) {
    const size_t koff = static_cast<size_t>(h / group) * hd * elem;
    rope(q + h * hd, qrot, cs, hd, hp.rope_style);
    // Sink slots [0, n_sink) see the query rotated at the sink position once the ring wrapped.
    const uint32_t n_sinks = sink_pos != pos ? (g.n_sink < visible ? g.n_sink : visible) : 0;
    if (n_sinks) {
      // Only global layers have sinks, and their sink position is always n_ctx - 1.
      rope(q + h * hd, qsink, t->rope_sink, hd, hp.rope_style);
      t->k->attn_dot(qsink, kbase + koff, kv.kv_dim, n_sinks, hd, f16, scale, att);
    }
    t->k->attn_dot(qrot, kbase + koff + static_cast<size_t>(n_sinks) * kv.kv_dim * elem,
                   kv.kv_dim, visible - n_sinks, hd, f16, scale, att + n_sinks);
    if (cap > 0.0f) soft_cap(att, visible, cap);
    t->k->softmax(att, visible);
    t->k->attn_accum(att, vbase + koff, kv.kv_dim, visible, hd, f16, out + h * hd);
  }
}

struct AttendJob {
  Transformer* t;
  uint32_t l;
  const float* q;
  uint64_t pos;
  const float* cs;
  float* out;
};

// Part `part` of `n_parts`: whole heads, with the scratch of the thread (`slot`) running it.
void attend_job(void* ctx, uint32_t part, uint32_t n_parts, uint32_t slot) {
  const AttendJob* j = static_cast<const AttendJob*>(ctx);
  uint32_t h0, h1;
  thread_share(j->t->hp.n_heads, 1, part, n_parts, &h0, &h1);
  attend_heads(j->t, j->l, j->q, j->pos, j->cs, j->out, h0, h1, slot);
}

void attend(Transformer* t, uint32_t l, const float* q, uint64_t pos, const float* cs,
            float* out) {
  const uint64_t work =
      static_cast<uint64_t>(kv_visible(t->kv.geom[t->layers[l].kind], pos)) * t->hp.q_dim;
  AttendJob job{t, l, q, pos, cs, out};
  if (t->n_threads > 1 && t->hp.n_heads > 1 && work >= kMinParallelAttention) {
    thread_pool_run(t->pool, attend_job, &job, job_parts(t->hp.n_heads, t->n_threads));
  } else {
    attend_heads(t, l, q, pos, cs, out, 0, t->hp.n_heads, 0);
  }
}

}  // namespace

void transformer_layout(Arena& a, const Hparams& hp, uint32_t n_ctx, uint32_t n_sink,
                        rlm_kv_dtype kv_dtype, uint32_t n_batch, uint32_t n_threads,
                        Transformer* t) {
  t->hp = hp;
  t->n_batch = n_batch;
  t->n_threads = n_threads;
  // The pool's state and its workers' stacks; session init starts the pool there.
  t->pool = nullptr;
  t->pool_memory =
      n_threads > 1 ? a.alloc_2d(1, thread_pool_bytes(n_threads), 1, kThreadPoolAlignment) : nullptr;
  t->k = kernels_ref();  // session init replaces it with the table chosen for this CPU
  t->layers = a.alloc<LayerWeights>(hp.n_layers, alignof(LayerWeights));
  // Sliding-window layers never look further back than the window, so their ring is that big.
  const uint32_t local_slots =
      hp.has_local_layers && hp.sliding_window < n_ctx ? hp.sliding_window : n_ctx;
  kv_ring_layout(a, hp.n_layers, hp.layer_is_local, n_ctx, n_sink, local_slots, hp.kv_dim,
                 kv_dtype, &t->kv);
  const uint32_t wide = hp.dim > hp.q_dim ? hp.dim : hp.q_dim;
  t->x = static_cast<float*>(a.alloc_2d(n_batch, hp.dim, sizeof(float), kArenaAlignment));
  t->xb = static_cast<float*>(a.alloc_2d(n_batch, wide, sizeof(float), kArenaAlignment));
  t->xb2 = static_cast<float*>(a.alloc_2d(n_batch, hp.dim, sizeof(float), kArenaAlignment));
  t->q = static_cast<float*>(a.alloc_2d(n_batch, hp.q_dim, sizeof(float), kArenaAlignment));
  t->kt = static_cast<float*>(a.alloc_2d(n_batch, hp.kv_dim, sizeof(float), kArenaAlignment));
  t->vt = static_cast<float*>(a.alloc_2d(n_batch, hp.kv_dim, sizeof(float), kArenaAlignment));
  t->hb = static_cast<float*>(a.alloc_2d(n_batch, hp.ffn_dim, sizeof(float), kArenaAlignment));
  t->hb2 = static_cast<float*>(a.alloc_2d(n_batch, hp.ffn_dim, sizeof(float), kArenaAlignment));
  t->act_stride = static_cast<uint32_t>(padded_cols(max3(hp.dim, hp.q_dim, hp.ffn_dim)));
  t->xq = static_cast<int8_t*>(a.alloc_2d(n_batch, t->act_stride, 1, kArenaAlignment));
  t->xqs = static_cast<float*>(
      a.alloc_2d(n_batch, t->act_stride / kQuantGroup, sizeof(float), kArenaAlignment));
  t->qrot = static_cast<float*>(a.alloc_2d(n_threads, hp.head_dim, sizeof(float), kArenaAlignment));
  t->qsink = static_cast<float*>(a.alloc_2d(n_threads, hp.head_dim, sizeof(float), kArenaAlignment));
  t->att = static_cast<float*>(a.alloc_2d(n_threads, n_ctx, sizeof(float), kArenaAlignment));
  t->kbuf = static_cast<float*>(a.alloc_2d(n_threads, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_freq = a.alloc<float>(hp.head_dim / 2);
  t->rope_freq_local = a.alloc<float>(hp.head_dim / 2);
  t->rope_cs = static_cast<float*>(a.alloc_2d(n_batch, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_cs_local =
      static_cast<float*>(a.alloc_2d(n_batch, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_sink = a.alloc<float>(hp.head_dim);
  t->logits = a.alloc<float>(hp.vocab_size);
}

void transformer_bind(const ModelImpl& m, Transformer* t) {
  using R = fb::TensorRole;
  const Hparams& hp = t->hp;
  t->tok_emb = model_weight(m, R::TokenEmbedding, -1);
  t->out_norm = model_weight(m, R::OutputNorm, -1);
  t->output = hp.tied_embeddings ? t->tok_emb : model_weight(m, R::Output, -1);
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    const int32_t li = static_cast<int32_t>(l);
    LayerWeights& w = t->layers[l];
    w.attn_norm = model_weight(m, R::AttnNorm, li);
    w.wq = model_weight(m, R::Wq, li);
    w.wk = model_weight(m, R::Wk, li);
    w.wv = model_weight(m, R::Wv, li);
    w.wo = model_weight(m, R::Wo, li);
    w.ffn_norm = model_weight(m, R::FfnNorm, li);
    w.gate = model_weight(m, R::FfnGate, li);
    w.down = model_weight(m, R::FfnDown, li);
    w.up = model_weight(m, R::FfnUp, li);
    w.bq = model_weight(m, R::Bq, li);
    w.bk = model_weight(m, R::Bk, li);
    w.bv = model_weight(m, R::Bv, li);
    w.q_norm = model_weight(m, R::QNorm, li);
    w.k_norm = model_weight(m, R::KNorm, li);
    w.post_attn_norm = model_weight(m, R::PostAttnNorm, li);
    w.post_ffn_norm = model_weight(m, R::PostFfnNorm, li);
    w.kind = t->kv.layer_kind[l];
  }
  const WeightView factors = model_weight(m, R::RopeFreqs, -1);
  const float* f = factors.present() ? static_cast<const float*>(factors.data) : nullptr;
  rope_frequencies(hp, hp.rope_theta, true, f, t->rope_freq);
  // Sliding-window layers use their own base and never the long-context scaling (Gemma 2/3:
  // HF's local rotary embedding has no rope_scaling).
  rope_frequencies(hp, hp.rope_theta_local, false, nullptr, t->rope_freq_local);
  rope_table(t->rope_freq, hp.head_dim / 2, t->kv.geom[kKvGlobal].n_ctx - 1, t->rope_sink);
}

namespace {

// The matrix of an XNNPACK slot (see kXnnLayerSlots), from the model.
WeightView xnn_slot_weight(const ModelImpl& m, uint32_t slot) {
  using R = fb::TensorRole;
  const uint32_t n_layers = m.hp.n_layers;
  if (slot == n_layers * kXnnLayerSlots) {
    return m.hp.tied_embeddings ? model_weight(m, R::TokenEmbedding, -1)
                                : model_weight(m, R::Output, -1);
  }
  static const R kRoles[kXnnLayerSlots] = {R::Wq, R::Wk, R::Wv, R::Wo,
                                           R::FfnGate, R::FfnUp, R::FfnDown};
  const int32_t layer = static_cast<int32_t>(slot / kXnnLayerSlots);
  return model_weight(m, kRoles[slot % kXnnLayerSlots], layer);
}

bool xnn_takes(const WeightView& w) { return w.present() && w.type == WeightType::F32; }

}  // namespace

uint32_t xnn_eligible_matrices(const ModelImpl& m) {
  uint32_t count = 0;
  const uint32_t n_slots = m.hp.n_layers * kXnnLayerSlots + 1;
  for (uint32_t slot = 0; slot < n_slots; ++slot) count += xnn_takes(xnn_slot_weight(m, slot));
  return count;
}

void transformer_xnn_layout(Arena& a, const ModelImpl& m, bool use_xnn, Transformer* t) {
  memset(static_cast<void*>(&t->xnn), 0, sizeof t->xnn);
  if (!use_xnn) return;
  const uint32_t n_slots = m.hp.n_layers * kXnnLayerSlots + 1;
  const uint32_t nt = t->n_threads;
  t->xnn.n_slots = n_slots;
  t->xnn.ops = static_cast<void**>(a.alloc_2d(n_slots, nt, sizeof(void*), kArenaAlignment));
  t->xnn.on = a.alloc<uint8_t>(n_slots);
  // The bound, summed in 64 bits so a hostile shape on a 32-bit target overflows cleanly.
  uint64_t bound = 0;
  for (uint32_t slot = 0; slot < n_slots; ++slot) {
    const WeightView w = xnn_slot_weight(m, slot);
    if (!xnn_takes(w)) continue;
    for (uint32_t i = 0; i < nt; ++i) {
      uint32_t r0, r1;
      thread_share(w.rows, kRowBlock, i, nt, &r0, &r1);
      if (r0 < r1) bound += xnnpack_f32_fc_bound(r1 - r0, w.cols);
    }
  }
  uint8_t* region = static_cast<uint8_t*>(a.alloc_2d(1, bound, 1, kArenaAlignment));
  t->xnn.arena.base = region;
  t->xnn.arena.cap = static_cast<size_t>(bound);
}

Status transformer_xnn_create(const ModelImpl& m, Transformer* t, ErrorSink* err) {
  XnnMatmuls& x = t->xnn;
  if (x.n_slots == 0) return RLM_OK;
  const uint32_t nt = t->n_threads;
  memset(x.ops, 0, static_cast<size_t>(x.n_slots) * nt * sizeof(void*));
  memset(x.on, 0, x.n_slots);
  x.n_matrices = 0;
  x.n_ops = 0;
  x.arena.used = 0;
  x.arena.calls = 0;
  x.arena.refused = 0;
  x.arena.realloc_refused = false;
  char msg[200];
  for (uint32_t slot = 0; slot < x.n_slots; ++slot) {
    const WeightView w = xnn_slot_weight(m, slot);
    if (!xnn_takes(w)) continue;
    for (uint32_t i = 0; i < nt; ++i) {
      uint32_t r0, r1;
      thread_share(w.rows, kRowBlock, i, nt, &r0, &r1);
      if (r0 >= r1) continue;
      const float* rows =
          static_cast<const float*>(w.data) + static_cast<size_t>(r0) * w.row_stride;
      void** op = &x.ops[static_cast<size_t>(slot) * nt + i];
      if (!xnnpack_create_f32(&x.arena, rows, r1 - r0, w.cols, w.rows, op, msg, sizeof msg)) {
        transformer_xnn_release(t);
        RLM_CHECK(false, RLM_ERR_BACKEND, err, "%s", msg);
      }
      ++x.n_ops;
    }
    x.on[slot] = 1;
    ++x.n_matrices;
  }
  return RLM_OK;
}

void transformer_xnn_release(Transformer* t) {
  XnnMatmuls& x = t->xnn;
  if (x.n_slots == 0 || !x.ops) return;
  const size_t n = static_cast<size_t>(x.n_slots) * t->n_threads;
  for (size_t i = 0; i < n; ++i) {
    xnnpack_delete(x.ops[i]);
    x.ops[i] = nullptr;
  }
  memset(x.on, 0, x.n_slots);
  x.n_ops = 0;
}

void forward(Transformer* t, const int32_t* tokens, uint32_t n, uint64_t pos0) {
  const Hparams& hp = t->hp;
  const KernelTable* k = t->k;
  const size_t nd = static_cast<size_t>(n) * hp.dim;
  for (uint32_t i = 0; i < n; ++i) embed(t, tokens[i], t->x + static_cast<size_t>(i) * hp.dim);
  // Rotation tables of the batch's positions, shared by every layer and head.
  for (uint32_t i = 0; i < n; ++i) {
    rope_table(t->rope_freq, hp.head_dim / 2, pos0 + i, t->rope_cs + static_cast<size_t>(i) * hp.head_dim);
    if (hp.has_local_layers) {
      rope_table(t->rope_freq_local, hp.head_dim / 2, pos0 + i,
                 t->rope_cs_local + static_cast<size_t>(i) * hp.head_dim);
    }
  }
  if (hp.embedding_scale != 1.0f) {
    for (size_t i = 0; i < nd; ++i) t->x[i] *= hp.embedding_scale;
  }

  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    const LayerWeights& w = t->layers[l];
    const KvGeom& g = t->kv.geom[w.kind];
    const float* cs_base = w.kind == kKvLocal ? t->rope_cs_local : t->rope_cs;
    // Attention block.
    for (uint32_t i = 0; i < n; ++i) {
      k->rmsnorm(t->xb + static_cast<size_t>(i) * hp.dim, t->x + static_cast<size_t>(i) * hp.dim,
                 static_cast<const float*>(w.attn_norm.data), hp.dim, hp.norm_eps);
    }
    {
      const WeightView* ws[3] = {&w.wq, &w.wk, &w.wv};
      float* ys[3] = {t->q, t->kt, t->vt};
      project(t, t->xb, n, hp.dim, ws, ys, 3, l * kXnnLayerSlots + 0);
    }
    if (hp.qkv_bias) {
      add_bias(t->q, w.bq, n, hp.q_dim);
      add_bias(t->kt, w.bk, n, hp.kv_dim);
      add_bias(t->vt, w.bv, n, hp.kv_dim);
    }
    if (hp.qk_norm) {
      head_norm(k, t->q, n, hp.n_heads, hp.head_dim, w.q_norm, hp.norm_eps);
      head_norm(k, t->kt, n, hp.n_kv_heads, hp.head_dim, w.k_norm, hp.norm_eps);
    }
    // Per token in order: store its K/V, then attend, so a batch longer than the ring window
    // still sees exactly the positions a token-by-token run would.
    for (uint32_t i = 0; i < n; ++i) {
      const uint64_t pos = pos0 + i;
      const uint32_t slot = kv_slot(g, pos);
      const float* cs = cs_base + static_cast<size_t>(i) * hp.head_dim;
      float* kr = t->kt + static_cast<size_t>(i) * hp.kv_dim;
      for (uint32_t h = 0; h < hp.n_kv_heads; ++h) {
        rope(kr + h * hp.head_dim, t->kbuf, cs, hp.head_dim, hp.rope_style);
        memcpy(kr + h * hp.head_dim, t->kbuf, hp.head_dim * sizeof(float));
      }
      kv_store(t->kv, t->kv.k, l, slot, kr);
      kv_store(t->kv, t->kv.v, l, slot, t->vt + static_cast<size_t>(i) * hp.kv_dim);
      if (l == 0) t->kv.tokens[kv_slot(t->kv.geom[kKvGlobal], pos)] = tokens[i];
      attend(t, l, t->q + static_cast<size_t>(i) * hp.q_dim, pos, cs,
             t->xb + static_cast<size_t>(i) * hp.q_dim);
    }
    {
      const WeightView* ws[1] = {&w.wo};
      float* ys[1] = {t->xb2};
      project(t, t->xb, n, hp.q_dim, ws, ys, 1, l * kXnnLayerSlots + 3);
    }
    if (hp.post_norms) {
      for (uint32_t i = 0; i < n; ++i) {
        float* row = t->xb2 + static_cast<size_t>(i) * hp.dim;
        k->rmsnorm(row, row, static_cast<const float*>(w.post_attn_norm.data), hp.dim,
                   hp.norm_eps);
      }
    }
    for (size_t i = 0; i < nd; ++i) t->x[i] += t->xb2[i];

    // Feed-forward block: SwiGLU or GeGLU.
    for (uint32_t i = 0; i < n; ++i) {
      k->rmsnorm(t->xb + static_cast<size_t>(i) * hp.dim, t->x + static_cast<size_t>(i) * hp.dim,
                 static_cast<const float*>(w.ffn_norm.data), hp.dim, hp.norm_eps);
    }
    {
      const WeightView* ws[2] = {&w.gate, &w.up};
      float* ys[2] = {t->hb, t->hb2};
      project(t, t->xb, n, hp.dim, ws, ys, 2, l * kXnnLayerSlots + 4);
    }
    if (hp.activation == fb::Activation::GeluTanh) {
      geglu(t->hb, t->hb2, static_cast<size_t>(n) * hp.ffn_dim);
    } else {
      k->swiglu(t->hb, t->hb2, n * hp.ffn_dim);
    }
    {
      const WeightView* ws[1] = {&w.down};
      float* ys[1] = {t->xb2};
      project(t, t->hb, n, hp.ffn_dim, ws, ys, 1, l * kXnnLayerSlots + 6);
    }
    if (hp.post_norms) {
      for (uint32_t i = 0; i < n; ++i) {
        float* row = t->xb2 + static_cast<size_t>(i) * hp.dim;
        k->rmsnorm(row, row, static_cast<const float*>(w.post_ffn_norm.data), hp.dim,
                   hp.norm_eps);
      }
    }
    for (size_t i = 0; i < nd; ++i) t->x[i] += t->xb2[i];
  }

  // Logits of the last token only: generation never needs the others.
  float* last = t->x + static_cast<size_t>(n - 1) * hp.dim;
  k->rmsnorm(t->xb, last, static_cast<const float*>(t->out_norm.data), hp.dim, hp.norm_eps);
  const WeightView* ws[1] = {&t->output};
  float* ys[1] = {t->logits};
  project(t, t->xb, 1, hp.dim, ws, ys, 1, hp.n_layers * kXnnLayerSlots);
  if (hp.final_softcap > 0.0f) soft_cap(t->logits, hp.vocab_size, hp.final_softcap);
}

}  // namespace ringlm
