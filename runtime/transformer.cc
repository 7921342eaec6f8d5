#include "transformer.h"

#include <math.h>
#include <string.h>

#include "kernels/scalar.h"

namespace ringlm::internal {
namespace {

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

// Attention work (visible slots × q_dim) below which heads are not split across threads.
constexpr uint64_t kMinParallelAttention = 1u << 14;

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
    case WeightType::Q4K: {
      const size_t supers = q4k_supers(e.cols);
      dequantize_row_q4k(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                         e.scales + r * supers * 2, e.subs + r * supers * 16, e.cols, out);
      break;
    }
    case WeightType::Q5:
      dequantize_row_q5(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                        e.high + r * (e.row_stride / 8), e.scales + r * (e.row_stride / kQuantGroup),
                        e.cols, out);
      break;
    case WeightType::Q4_1:
      dequantize_row_q4_1(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                          e.scales + r * (e.row_stride / kQuantGroup) * 2, e.cols, out);
      break;
    case WeightType::Q5_1:
      dequantize_row_q5_1(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                          e.high + r * (e.row_stride / 8),
                          e.scales + r * (e.row_stride / kQuantGroup) * 2, e.cols, out);
      break;
    case WeightType::Q5K: {
      const size_t supers = q4k_supers(e.cols);
      dequantize_row_q5k(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                         e.high + r * (e.row_stride / 8), e.scales + r * supers * 2,
                         e.subs + r * supers * 16, e.cols, out);
      break;
    }
    case WeightType::Q6K: {
      const size_t supers = q6k_supers(e.cols);
      dequantize_row_q6k(static_cast<const uint8_t*>(e.data) + r * (e.row_stride / 2),
                         e.high + r * (e.row_stride / 4), e.scales + r * supers,
                         reinterpret_cast<const int8_t*>(e.subs) + r * supers * kQ6kSubsPerSuper,
                         e.cols, out);
      break;
    }
  }
}

// Row `row` of beam slot `slot` in layer l.
void* beam_row(const BeamKv& b, void* base, uint32_t l, uint32_t slot, uint32_t row) {
  const size_t idx = (static_cast<size_t>(l) * b.max_beams + slot) * b.slot_rows + row;
  return static_cast<uint8_t*>(base) + idx * b.row_bytes;
}


// out[j] = scale * q · K_j for the n rows starting at `rows` (row j at rows + j * row_bytes),
// K_j = key head h_kv of that row, in the ring's dtype.
void kv_scores(const KernelTable* k, const KvRing& kv, const float* q, const uint8_t* rows,
               uint32_t h_kv, uint32_t n, float scale, float* out) {
  const uint8_t* p = rows + kv_head_offset(kv.dtype, h_kv, kv.head_dim);
  if (kv.dtype == RLM_KV_Q8) {
    k->attn_dot_q8(q, reinterpret_cast<const int8_t*>(p),
                   reinterpret_cast<const float*>(rows + kv_scale_offset(kv.kv_dim, h_kv)),
                   static_cast<uint32_t>(kv.row_bytes), n, kv.head_dim, scale, out);
  } else {
    k->attn_dot(q, p, kv.kv_dim, n, kv.head_dim, kv.dtype == RLM_KV_F16, scale, out);
  }
}

// out = Σ_j w[j] V_j over the n rows starting at `rows`, V_j = value head h_kv of row j.
void kv_mix(const KernelTable* k, const KvRing& kv, const float* w, const uint8_t* rows,
            uint32_t h_kv, uint32_t n, float* out) {
  const uint8_t* p = rows + kv_head_offset(kv.dtype, h_kv, kv.head_dim);
  if (kv.dtype == RLM_KV_Q8) {
    k->attn_accum_q8(w, reinterpret_cast<const int8_t*>(p),
                     reinterpret_cast<const float*>(rows + kv_scale_offset(kv.kv_dim, h_kv)),
                     static_cast<uint32_t>(kv.row_bytes), n, kv.head_dim, out);
  } else {
    k->attn_accum(w, p, kv.kv_dim, n, kv.head_dim, kv.dtype == RLM_KV_F16, out);
  }
}

// kv_scores for the n_q queries of one KV head (query t at q + t * head_dim, its scores at
// out + t * out_stride): f32 / f16 rows go to the grouped kernel, which may load each row once
// for all of them; results equal one call per query.
void kv_scores_n(const KernelTable* k, const KvRing& kv, const float* q, uint32_t n_q,
                 const uint8_t* rows, uint32_t h_kv, uint32_t n, float scale, float* out,
                 size_t out_stride) {
  if (kv.dtype == RLM_KV_Q8) {
    for (uint32_t t = 0; t < n_q; ++t) {
      kv_scores(k, kv, q + t * kv.head_dim, rows, h_kv, n, scale, out + t * out_stride);
    }
    return;
  }
  k->attn_dot_n(q, n_q, rows + kv_head_offset(kv.dtype, h_kv, kv.head_dim), kv.kv_dim, n,
                kv.head_dim, kv.dtype == RLM_KV_F16, scale, out, static_cast<uint32_t>(out_stride));
}

// Scores of the n_q queries of KV head h_kv over slots [j0, j1) of the key sequence at `keys`
// (slot 0's start, kv_ring.h), query t's score of slot j at out[t * out_stride + j]: tiled keys
// go to attn_dot_tiled, q8 rows to kv_scores_n.
void kv_scores_seq(const KernelTable* k, const KvRing& kv, const float* q, uint32_t n_q,
                   const uint8_t* keys, uint32_t h_kv, uint32_t j0, uint32_t j1, float scale,
                   float* out, size_t out_stride) {
  if (j0 >= j1) return;
  if (!kv_tiled(kv.dtype)) {
    kv_scores_n(k, kv, q, n_q, keys + j0 * kv.row_bytes, h_kv, j1 - j0, scale, out + j0,
                out_stride);
    return;
  }
  // Head h_kv's columns start h_kv * head_dim columns into each tile.
  const size_t elem = kv.dtype == RLM_KV_F16 ? 2 : 4;
  k->attn_dot_tiled(q, n_q, keys + static_cast<size_t>(h_kv) * kv.head_dim * kAttnTile * elem,
                    kAttnTile * kv.kv_dim, j0, j1, kv.head_dim, kv.dtype == RLM_KV_F16, scale,
                    out, static_cast<uint32_t>(out_stride));
}

// kv_mix for n_q queries of one KV head (weights of query t at w + t * w_stride, output at
// out + t * head_dim).
void kv_mix_n(const KernelTable* k, const KvRing& kv, const float* w, uint32_t n_q,
              size_t w_stride, const uint8_t* rows, uint32_t h_kv, uint32_t n, float* out) {
  if (kv.dtype == RLM_KV_Q8) {
    for (uint32_t t = 0; t < n_q; ++t) {
      kv_mix(k, kv, w + t * w_stride, rows, h_kv, n, out + t * kv.head_dim);
    }
    return;
  }
  k->attn_accum_n(w, n_q, static_cast<uint32_t>(w_stride),
                  rows + kv_head_offset(kv.dtype, h_kv, kv.head_dim), kv.kv_dim, n, kv.head_dim,
                  kv.dtype == RLM_KV_F16, out);
}

// out(t) += Σ_j w_t[j] V_j for the n_q queries of KV head h_kv (weights of query t at
// w + t * w_stride, indexed by slot; output at out + t * head_dim) over slots [j0, j1) of the
// value sequence at `vals` (slot 0's start, kv_ring.h): tile by tile (a head's rows are
// head_dim apart inside a tile), or q8 rows through kv_mix_n. Each output stays one chain in slot
// order, so the result is the one call over rows the row layout gave.
void kv_mix_seq(const KernelTable* k, const KvRing& kv, const float* w, uint32_t n_q,
                size_t w_stride, const uint8_t* vals, uint32_t h_kv, uint32_t j0, uint32_t j1,
                float* out) {
  if (j0 >= j1) return;
  if (!kv_tiled(kv.dtype)) {
    kv_mix_n(k, kv, w + j0, n_q, w_stride, vals + j0 * kv.row_bytes, h_kv, j1 - j0, out);
    return;
  }
  const size_t elem = kv.dtype == RLM_KV_F16 ? 2 : 4;
  const size_t hd = kv.head_dim;
  for (uint32_t a = j0; a < j1;) {
    const uint32_t tile_end = (a / kAttnTile + 1) * kAttnTile;
    const uint32_t b = tile_end < j1 ? tile_end : j1;
    const uint8_t* rows = vals + (static_cast<size_t>(a / kAttnTile) * kAttnTile * kv.kv_dim +
                                  (h_kv * kAttnTile + a % kAttnTile) * hd) * elem;
    k->attn_accum_n(w + a, n_q, static_cast<uint32_t>(w_stride), rows, static_cast<uint32_t>(hd),
                    b - a, kv.head_dim, kv.dtype == RLM_KV_F16, out);
    a = b;
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

// out(n, dim) = RMSNorm of each row of x(n, dim) times w(dim); in place when out == x.
void rmsnorm_rows(const KernelTable* k, float* out, const float* x, const WeightView& w,
                  uint32_t n, uint32_t dim, float eps) {
  for (uint32_t i = 0; i < n; ++i) {
    const size_t off = static_cast<size_t>(i) * dim;
    k->rmsnorm(out + off, x + off, static_cast<const float*>(w.data), dim, eps);
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

// Rows per block of the attention walk over rows (values, q8 keys): about 8 KiB of cached rows,
// whole key tiles (kAttnTile). Every head of the call reads its part of a block while the block
// is in L1, so each layer's K and V rows stream from memory once, in address order. Walking head by head
// instead reads each head's part at the row stride (the other heads' values sit between), which
// the hardware prefetcher follows poorly: SmolLM2-135M shape, f16 KV, 2,000 positions, AVX2, one
// thread: 10.5 -> 6.4 ms of attention per token. Results do not depend on the blocking: a score
// is one row's dot product, and attn_accum continues each output's chain of multiply-adds.
uint32_t attn_block_rows(size_t row_bytes) {
  const size_t rows = 8192 / row_bytes;
  return rows < kAttnTile ? kAttnTile : rows > 128 ? 128 : static_cast<uint32_t>(rows & ~size_t{kAttnTile - 1});
}

// Prefetches share r of `runs` of [p, p + bytes) (the next block's rows): each KV-head run of the
// block walk requests its share while it computes, so the whole next block is on its way before
// the walk reaches it. The block is contiguous, but each run reads only its head's columns of
// every row (a strided pattern the hardware prefetcher follows poorly), so without this each
// block's first touch waits on memory: SmolLM2-135M shape q8, f16 KV, AVX2, one thread, decode at
// depth 2,048: 25.4 -> 37.1 tok/s, best of 5 (`ringlm bench -d 2048 --kv f16`). Hints only: results are
// unchanged.
// The most value bytes attend_heads requests during its key walk (values_ahead): a quarter of
// a 1 MiB L2, half of a Cortex-A76's 512 KiB.
constexpr size_t kValuesAheadBytes = 256 * 1024;

inline void prefetch_share(const uint8_t* p, size_t bytes, uint32_t r, uint32_t runs) {
  const size_t lines = (bytes + 63) / 64;
  const size_t l0 = lines * r / runs, l1 = lines * (r + 1) / runs;
  for (size_t l = l0; l < l1; ++l) __builtin_prefetch(p + l * 64, 0, 3);
}

// Prefetches bytes [off, off + bytes) of each of `rows` rows (`stride` apart) from p: one KV
// head's columns of a block, for a thread that reads only some heads (prefetch_share would fetch
// the other threads' columns too).
inline void prefetch_cols(const uint8_t* p, size_t stride, uint32_t rows, size_t off, size_t bytes) {
  for (uint32_t r = 0; r < rows; ++r) {
    const uintptr_t b = reinterpret_cast<uintptr_t>(p + r * stride + off);
    for (uintptr_t l = b & ~uintptr_t{63}; l < b + bytes; l += 64) {
      __builtin_prefetch(reinterpret_cast<const void*>(l), 0, 3);
    }
  }
}

// Attention of one token at `pos` (its K/V already stored) for heads [h0, h1) over the visible
// slots [c0, c1) (all of them, or one chunk: attend_chunks); out(q_dim), head h at h * head_dim.
// With `lse_out`, head h's log of the sum of exp(score) goes to lse_out[h] (a chunk's
// softmax, merged by attend_chunks). `scratch` selects the calling thread's buffers.
void attend_heads(Transformer* t, uint32_t l, const float* q, uint64_t pos, const float* cs,
                  float* out, uint32_t h0, uint32_t h1, uint32_t scratch, uint32_t c0,
                  uint32_t c1, float* lse_out) {
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
  const size_t n_ctx = kv.geom[kKvGlobal].n_ctx;
  // This thread's heads, head h at index h - h0.
  float* qrot = t->qrot + static_cast<size_t>(scratch) * hp.q_dim;
  float* qsink = t->qsink + static_cast<size_t>(scratch) * hp.q_dim;
  float* att = t->att + static_cast<size_t>(scratch) * hp.n_heads * n_ctx;
  const uint8_t* kbase = kv_row(kv, kv.k, l, 0);
  const uint8_t* vbase = kv_row(kv, kv.v, l, 0);
  // Sink slots [0, n_sink) see the query rotated at the sink position once the ring wrapped.
  // Only global layers have sinks, and their sink position is always n_ctx - 1.
  const uint32_t n_sinks = sink_pos != pos ? (g.n_sink < visible ? g.n_sink : visible) : 0;
  for (uint32_t h = h0; h < h1; ++h) {
    rope(q + h * hd, qrot + (h - h0) * hd, cs, hd, hp.rope_style);
    if (n_sinks) rope(q + h * hd, qsink + (h - h0) * hd, t->rope_sink, hd, hp.rope_style);
  }
  // The heads of [h0, h1) in runs sharing a KV head: run [a, b) reads KV head a / group.
  auto run_end = [&](uint32_t a) {
    const uint32_t e = (a / group + 1) * group;
    return e < h1 ? e : h1;
  };
  const uint32_t runs = (h1 - 1) / group - h0 / group + 1;  // run of head a: a / group - h0 / group
  for (uint32_t a = h0; a < h1; a = run_end(a)) {
    kv_scores_seq(t->k, kv, qsink + (a - h0) * hd, run_end(a) - a, kbase, a / group, c0,
                  n_sinks < c1 ? n_sinks : c1, scale, att + (a - h0) * n_ctx, n_ctx);
  }
  // Tiled keys: a block is one tile, and a thread with every KV head reads it whole, in address
  // order, head after head: the key walk is one sequential stream, which the hardware prefetcher
  // follows better than the block prefetch (SmolLM2-135M shape, f16 KV, 2,048 rows, AVX-512, the
  // 30 layers' scores per token, best of rounds: 0.75-0.82 ms without, 1.0-1.1 ms with; two-tile
  // blocks, each head's part of a tile 6 KiB from the next, took 1.75-1.9 ms). A thread with only
  // some KV heads skips the others' columns, so it prefetches exactly its heads' columns of the
  // next block (keys and values): prefetching whole blocks there fetched every other thread's
  // columns too (with a KV head per part, three times the bytes it reads). Row keys (q8): blocks
  // of about 8 KiB, prefetched as the values.
  const bool tiled = kv_tiled(kv.dtype);
  const bool all_heads = runs == hp.n_kv_heads;
  const size_t elem = kv.dtype == RLM_KV_F32 ? 4 : kv.dtype == RLM_KV_F16 ? 2 : 1;
  const uint32_t block = tiled ? kAttnTile : attn_block_rows(kv.row_bytes);
  // The next block's part of run a's head: `next` is the next block's first row, nb_next rows.
  auto prefetch_next = [&](const uint8_t* next, uint32_t nb_next, uint32_t a) {
    if (nb_next == 0) {
    } else if (!all_heads && tiled) {
      prefetch_cols(next, 0, 1, static_cast<size_t>(a / group) * hd * kAttnTile * elem,
                    hd * kAttnTile * elem);  // this head's part of the tile: contiguous
    } else if (!all_heads) {
      prefetch_cols(next, kv.row_bytes, nb_next, kv_head_offset(kv.dtype, a / group, hd), hd * elem);
    } else if (!tiled) {
      prefetch_share(next, nb_next * kv.row_bytes, a / group - h0 / group, runs);
    }
  };
  // The key walk also requests the same block's values, which the value walk reads after the
  // softmax: two streams in flight where one sequential stream runs at the one-stream read
  // bandwidth, below what the core can take (this host: 27 against 36 GB/s with 4 streams), and
  // the values then come from L2. Only when the range's values fit well inside L2 (a chunk of
  // 256 positions of SmolLM2-135M: 96 KiB), so none are evicted before their turn. SmolLM2-135M
  // shape q8, f16 KV, depth 2,048, one thread, the time per token above depth 0's, mean of
  // three alternated rounds: avx512 2.60 -> 2.40 ms, avx2 3.37 -> 2.98 ms. Requesting the next
  // chunk's keys during this chunk's value walk as well measured no better.
  const bool values_ahead = tiled && all_heads &&
                            static_cast<size_t>(c1 - c0) * kv.row_bytes <= kValuesAheadBytes;
  // Blocks start at whole tiles (c0 is a multiple of kAttnTile); a block's slots below n_sinks
  // were scored above.
  for (uint32_t j0 = c0; j0 < c1; j0 += block) {
    const uint32_t nb = c1 - j0 < block ? c1 - j0 : block;
    const uint32_t nb_next = c1 - j0 - nb < block ? c1 - j0 - nb : block;
    const uint32_t lo = j0 > n_sinks ? j0 : n_sinks;
    for (uint32_t a = h0; a < h1; a = run_end(a)) {
      prefetch_next(kbase + (j0 + nb) * kv.row_bytes, nb_next, a);
      if (values_ahead) prefetch_share(vbase + j0 * kv.row_bytes, nb * kv.row_bytes, a / group - h0 / group, runs);
      kv_scores_seq(t->k, kv, qrot + (a - h0) * hd, run_end(a) - a, kbase, a / group, lo,
                    j0 + nb, scale, att + (a - h0) * n_ctx, n_ctx);
    }
  }
  for (uint32_t h = h0; h < h1; ++h) {
    float* a = att + (h - h0) * n_ctx + c0;
    if (cap > 0.0f) soft_cap(a, c1 - c0, cap);
    const float lse = t->k->softmax(a, c1 - c0);
    if (lse_out) lse_out[h] = lse;
    memset(out + h * hd, 0, hd * sizeof(float));
  }
  // Values as the keys: tiled, one tile a block read in address order (a head's 16 rows
  // contiguous), prefetched only by a thread that skips other heads' columns; q8 rows in blocks
  // with the block prefetch, which their strided head columns need.
  for (uint32_t j0 = c0; j0 < c1; j0 += block) {
    const uint32_t nb = c1 - j0 < block ? c1 - j0 : block;
    const uint32_t nb_next = c1 - j0 - nb < block ? c1 - j0 - nb : block;
    for (uint32_t a = h0; a < h1; a = run_end(a)) {
      prefetch_next(vbase + (j0 + nb) * kv.row_bytes, nb_next, a);
      kv_mix_seq(t->k, kv, att + (a - h0) * n_ctx, run_end(a) - a, n_ctx, vbase, a / group, j0,
                 j0 + nb, out + a * hd);
    }
  }
}

// attend_heads for a beam step: the prefix from the ring, then the beam slot's own rows; one
// softmax over both (ring slot order is position order before a wrap, and the beam's rows follow).
void attend_beam_heads(Transformer* t, uint32_t l, const float* q, const float* cs, float* out,
                       uint32_t h0, uint32_t h1, uint32_t scratch, const BeamStep& b,
                       uint32_t slot) {
  const Hparams& hp = t->hp;
  const KvRing& kv = t->kv;
  const uint32_t hd = hp.head_dim;
  const uint32_t group = hp.n_heads / hp.n_kv_heads;
  const uint32_t own = b.row + 1;
  const uint32_t visible = b.prefix + own;
  float* qrot = t->qrot + static_cast<size_t>(scratch) * hp.q_dim;
  float* att = t->att + static_cast<size_t>(scratch) * hp.n_heads * kv.geom[kKvGlobal].n_ctx;
  const uint8_t* kbase = kv_row(kv, kv.k, l, 0);
  const uint8_t* vbase = kv_row(kv, kv.v, l, 0);
  const uint8_t* bk = static_cast<const uint8_t*>(beam_row(*b.kv, b.kv->k, l, slot, 0));
  const uint8_t* bv = static_cast<const uint8_t*>(beam_row(*b.kv, b.kv->v, l, slot, 0));
  for (uint32_t h = h0; h < h1; ++h) {
    const uint32_t hk = h / group;
    rope(q + h * hd, qrot, cs, hd, hp.rope_style);
    kv_scores_seq(t->k, kv, qrot, 1, kbase, hk, 0, b.prefix, hp.attn_scale, att, 0);
    kv_scores_seq(t->k, kv, qrot, 1, bk, hk, 0, own, hp.attn_scale, att + b.prefix, 0);
    if (hp.attn_softcap > 0.0f) soft_cap(att, visible, hp.attn_softcap);
    t->k->softmax(att, visible);
    // One chain per output over the prefix's rows, then the beam's own.
    float* o = out + h * hd;
    memset(o, 0, hd * sizeof(float));
    kv_mix_seq(t->k, kv, att, 1, 0, vbase, hk, 0, b.prefix, o);
    kv_mix_seq(t->k, kv, att + b.prefix, 1, 0, bv, hk, 0, own, o);
  }
}

struct AttendJob {
  Transformer* t;
  uint32_t l;
  const float* q;
  uint64_t pos;
  const float* cs;
  float* out;
  const BeamStep* beam;  // null: a sequence position
  uint32_t beam_slot;
};

// Heads per unit of the attention's thread split. With at least as many KV heads as threads, a
// KV head's whole group: each KV head's keys and values are read by one thread, once, its
// queries sharing every load. Split head by head instead, a KV head's group lands in several
// parts (9 heads in 8 parts on two threads): each re-reads its keys and values, and at depth
// two threads decoded slower than one (SmolLM2-135M shape q8, f16 KV, depth 2,048, avx512:
// 115-120 tok/s against 130-150). Fewer KV heads than threads: single heads, so every thread
// has a share. Each head is still computed whole by one thread: results do not depend on the
// split.
uint32_t attn_split_heads(const Transformer* t) {
  return t->hp.n_kv_heads >= t->n_threads ? t->hp.n_heads / t->hp.n_kv_heads : 1;
}

// Part `part` of `n_parts`: whole units of attn_split_heads heads, with the scratch of the thread
// (`slot`) running it.
void attend_job(void* ctx, uint32_t part, uint32_t n_parts, uint32_t slot) {
  const AttendJob* j = static_cast<const AttendJob*>(ctx);
  uint32_t h0, h1;
  thread_share(j->t->hp.n_heads, attn_split_heads(j->t), part, n_parts, &h0, &h1);
  if (j->beam) {
    attend_beam_heads(j->t, j->l, j->q, j->cs, j->out, h0, h1, slot, *j->beam, j->beam_slot);
  } else {
    const uint32_t visible = kv_visible(j->t->kv.geom[j->t->layers[j->l].kind], j->pos);
    attend_heads(j->t, j->l, j->q, j->pos, j->cs, j->out, h0, h1, slot, 0, visible, nullptr);
  }
}

// The units of a chunked attention are its chunks, every head of each: a chunk's keys and values
// are whole tiles read in address order (one stream, as the unchunked walk), and a part's chunks
// are adjacent. Units of one KV head's part of a chunk read 2 of every 6 KiB of the tiles
// instead: SmolLM2-135M shape, f16 KV, depth 2,048, one thread, 137 -> 88 tok/s.
struct ChunkJob {
  Transformer* t;
  uint32_t l;
  const float* q;
  uint64_t pos;
  const float* cs;
  uint32_t visible, n_chunks;
};

void attend_chunk_units(const ChunkJob& j, uint32_t u0, uint32_t u1, uint32_t slot) {
  Transformer* t = j.t;
  for (uint32_t c = u0; c < u1; ++c) {
    const uint32_t c0 = c * t->attn_chunk;
    const uint32_t c1 = j.visible - c0 < t->attn_chunk ? j.visible : c0 + t->attn_chunk;
    attend_heads(t, j.l, j.q, j.pos, j.cs, t->part_out + static_cast<size_t>(c) * t->hp.q_dim, 0,
                 t->hp.n_heads, slot, c0, c1,
                 t->part_lse + static_cast<size_t>(c) * t->hp.n_heads);
  }
}

void attend_chunk_job(void* ctx, uint32_t part, uint32_t n_parts, uint32_t slot) {
  const ChunkJob* j = static_cast<const ChunkJob*>(ctx);
  uint32_t u0, u1;
  thread_share(j->n_chunks, 1, part, n_parts, &u0, &u1);
  attend_chunk_units(*j, u0, u1, slot);
}

// Attention over more than attn_chunk visible slots: chunk by chunk (in parallel on the pool
// when there are threads), each chunk's softmax and output normalized on its own, then merged
// in chunk order: with L_c the chunk's log of its sum of exp(score) (the softmax kernel's
// result), M the largest L_c, z_c = e^(L_c - M) and Z = sum z_c, out = sum_c (z_c / Z) o_c, which
// is the softmax over all slots. The chunks do not depend on
// the thread count, so neither does the result; they balance any number of threads, where a
// split by heads left one of two threads two of three KV heads (SmolLM2-135M).
void attend_chunks(Transformer* t, uint32_t l, const float* q, uint64_t pos, const float* cs,
                   float* out, uint32_t visible) {
  const Hparams& hp = t->hp;
  ChunkJob job{t, l, q, pos, cs, visible, (visible + t->attn_chunk - 1) / t->attn_chunk};
  const uint32_t units = job.n_chunks;
  if (t->n_threads > 1) {
    thread_pool_run(t->pool, attend_chunk_job, &job, job_parts(units, t->n_threads));
  } else {
    attend_chunk_units(job, 0, units, 0);
  }
  const uint32_t hd = hp.head_dim;
  for (uint32_t h = 0; h < hp.n_heads; ++h) {
    const float* lse = t->part_lse + h;  // chunk c's at lse[c * n_heads]
    float mx = lse[0];
    for (uint32_t c = 1; c < job.n_chunks; ++c) {
      const float m = lse[static_cast<size_t>(c) * hp.n_heads];
      mx = m > mx ? m : mx;
    }
    float z_sum = 0.0f;
    for (uint32_t c = 0; c < job.n_chunks; ++c) z_sum += expf(lse[static_cast<size_t>(c) * hp.n_heads] - mx);
    float* o = out + static_cast<size_t>(h) * hd;
    for (uint32_t c = 0; c < job.n_chunks; ++c) {
      const float w = expf(lse[static_cast<size_t>(c) * hp.n_heads] - mx) / z_sum;
      const float* oc = t->part_out + static_cast<size_t>(c) * hp.q_dim + static_cast<size_t>(h) * hd;
      if (c == 0) {
        for (uint32_t i = 0; i < hd; ++i) o[i] = w * oc[i];
      } else {
        for (uint32_t i = 0; i < hd; ++i) o[i] += w * oc[i];
      }
    }
  }
}

void attend(Transformer* t, uint32_t l, const float* q, uint64_t pos, const float* cs,
            float* out, const BeamStep* beam = nullptr, uint32_t beam_slot = 0) {
  const uint64_t visible =
      beam ? beam->prefix + beam->row + 1 : kv_visible(t->kv.geom[t->layers[l].kind], pos);
  if (!beam && visible > t->attn_chunk) {
    attend_chunks(t, l, q, pos, cs, out, static_cast<uint32_t>(visible));
    return;
  }
  const uint64_t work = visible * t->hp.q_dim;
  AttendJob job{t, l, q, pos, cs, out, beam, beam_slot};
  if (t->n_threads > 1 && t->hp.n_heads > 1 && work >= kMinParallelAttention) {
    thread_pool_run(t->pool, attend_job, &job,
                    job_parts(t->hp.n_heads / attn_split_heads(t), t->n_threads));
  } else if (beam) {
    attend_beam_heads(t, l, q, cs, out, 0, t->hp.n_heads, 0, *beam, beam_slot);
  } else {
    attend_heads(t, l, q, pos, cs, out, 0, t->hp.n_heads, 0, 0, static_cast<uint32_t>(visible),
                 nullptr);
  }
}

}  // namespace

void transformer_layout(Arena& a, const Hparams& hp, uint32_t n_ctx, uint32_t n_sink,
                        rlm_kv_dtype kv_dtype, uint32_t n_batch, uint32_t n_threads,
                        uint32_t max_draft, uint32_t logit_rows, Transformer* t) {
  if (n_batch < max_draft + 1) n_batch = max_draft + 1;
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
                 hp.head_dim, kv_dtype, max_draft, &t->kv);
  const uint32_t wide = hp.dim > hp.q_dim ? hp.dim : hp.q_dim;
  t->x = static_cast<float*>(a.alloc_2d(n_batch, hp.dim, sizeof(float), kArenaAlignment));
  t->xb = static_cast<float*>(a.alloc_2d(n_batch, wide, sizeof(float), kArenaAlignment));
  t->xb2 = static_cast<float*>(a.alloc_2d(n_batch, hp.dim, sizeof(float), kArenaAlignment));
  t->q = static_cast<float*>(a.alloc_2d(n_batch, hp.q_dim, sizeof(float), kArenaAlignment));
  t->kt = static_cast<float*>(a.alloc_2d(n_batch, hp.kv_dim, sizeof(float), kArenaAlignment));
  t->vt = static_cast<float*>(a.alloc_2d(n_batch, hp.kv_dim, sizeof(float), kArenaAlignment));
  t->hb = static_cast<float*>(a.alloc_2d(n_batch, hp.ffn_dim, sizeof(float), kArenaAlignment));
  t->hb2 = static_cast<float*>(a.alloc_2d(n_batch, hp.ffn_dim, sizeof(float), kArenaAlignment));
  matmul_layout(a, hp, n_batch, n_threads, &t->pool, &t->mm);
  t->qrot = static_cast<float*>(a.alloc_2d(n_threads, hp.q_dim, sizeof(float), kArenaAlignment));
  t->qsink = static_cast<float*>(a.alloc_2d(n_threads, hp.q_dim, sizeof(float), kArenaAlignment));
  // Chunks of at least 256 slots, at most 16 of them in a full ring (whole key tiles).
  const uint32_t chunk = kv_slots_stored((n_ctx + 15) / 16);
  t->attn_chunk = chunk > 256 ? chunk : 256;
  t->attn_chunks = (n_ctx + t->attn_chunk - 1) / t->attn_chunk;
  t->part_out = static_cast<float*>(
      a.alloc_2d(t->attn_chunks, hp.q_dim, sizeof(float), kArenaAlignment));
  t->part_lse = static_cast<float*>(
      a.alloc_2d(t->attn_chunks, hp.n_heads, sizeof(float), kArenaAlignment));
  t->att = static_cast<float*>(a.alloc_2d(n_threads, static_cast<uint64_t>(hp.n_heads) * n_ctx,
                                          sizeof(float), kArenaAlignment));
  t->kbuf = static_cast<float*>(a.alloc_2d(n_threads, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_freq = a.alloc<float>(hp.head_dim / 2);
  t->rope_freq_local = a.alloc<float>(hp.head_dim / 2);
  t->rope_cs = static_cast<float*>(a.alloc_2d(n_batch, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_cs_local =
      static_cast<float*>(a.alloc_2d(n_batch, hp.head_dim, sizeof(float), kArenaAlignment));
  t->rope_sink = a.alloc<float>(hp.head_dim);
  t->n_logit_rows = 1 + max_draft > logit_rows ? 1 + max_draft : logit_rows;
  t->logits = static_cast<float*>(
      a.alloc_2d(t->n_logit_rows, hp.vocab_size, sizeof(float), kArenaAlignment));
}

void beam_kv_layout(Arena& a, const Hparams& hp, rlm_kv_dtype dtype, uint32_t max_beams,
                    uint32_t max_len, BeamKv* b) {
  b->max_beams = max_beams;
  b->max_len = max_len;
  b->k = b->v = nullptr;
  b->slot_rows = kv_slots_stored(max_len);
  b->row_bytes = kv_row_bytes(dtype, hp.kv_dim, hp.head_dim);
  if (max_beams == 0 || max_len == 0) return;
  const uint64_t rows = static_cast<uint64_t>(hp.n_layers) * max_beams * b->slot_rows;
  b->k = a.alloc_2d(rows, b->row_bytes, 1, kArenaAlignment);
  b->v = a.alloc_2d(rows, b->row_bytes, 1, kArenaAlignment);
}

void beam_kv_copy(const BeamKv& b, const Hparams& hp, uint32_t from, uint32_t to,
                  uint32_t n_rows) {
  if (n_rows == 0 || from == to) return;
  // By whole tiles (slots past n_rows come along unused).
  const size_t bytes = static_cast<size_t>(kv_slots_stored(n_rows)) * b.row_bytes;
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    memcpy(beam_row(b, b.k, l, to, 0), beam_row(b, b.k, l, from, 0), bytes);
    memcpy(beam_row(b, b.v, l, to, 0), beam_row(b, b.v, l, from, 0), bytes);
  }
}

void transformer_bind(const ModelImpl& m, Transformer* t) {
  using R = fb::TensorRole;
  const Hparams& hp = t->hp;
  t->tok_emb = model_weight(m, R::TokenEmbedding, -1);
  t->out_norm = model_weight(m, R::OutputNorm, -1);
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    const int32_t li = static_cast<int32_t>(l);
    LayerWeights& w = t->layers[l];
    w.attn_norm = model_weight(m, R::AttnNorm, li);
    w.ffn_norm = model_weight(m, R::FfnNorm, li);
    w.bq = model_weight(m, R::Bq, li);
    w.bk = model_weight(m, R::Bk, li);
    w.bv = model_weight(m, R::Bv, li);
    w.q_norm = model_weight(m, R::QNorm, li);
    w.k_norm = model_weight(m, R::KNorm, li);
    w.post_attn_norm = model_weight(m, R::PostAttnNorm, li);
    w.post_ffn_norm = model_weight(m, R::PostFfnNorm, li);
    w.kind = t->kv.layer_kind[l];
  }
  matmul_bind(m, t->k, &t->mm);
  const WeightView factors = model_weight(m, R::RopeFreqs, -1);
  const float* f = factors.present() ? static_cast<const float*>(factors.data) : nullptr;
  rope_frequencies(hp, hp.rope_theta, true, f, t->rope_freq);
  // Sliding-window layers use their own base and never the long-context scaling (Gemma 2/3:
  // HF's local rotary embedding has no rope_scaling).
  rope_frequencies(hp, hp.rope_theta_local, false, nullptr, t->rope_freq_local);
  rope_table(t->rope_freq, hp.head_dim / 2, t->kv.geom[kKvGlobal].n_ctx - 1, t->rope_sink);
}

bool forward(Transformer* t, const int32_t* tokens, uint32_t n, uint64_t pos0,
             uint32_t n_logits, const BeamStep* beam) {
  using R = MatRole;
  const Hparams& hp = t->hp;
  const KernelTable* k = t->k;
  Matmuls* mm = &t->mm;
  // A verification pass (logits of several rows) must give every row the logits a one-token pass
  // would: its matmuls compute rows exactly as decode does. Scoring and beam steps too, so a
  // score equals stepping token by token and a beam's log-probability equals its score.
  mm->exact_rows = n_logits > 1;
  const size_t nd = static_cast<size_t>(n) * hp.dim;
  for (uint32_t i = 0; i < n; ++i) embed(t, tokens[i], t->x + static_cast<size_t>(i) * hp.dim);
  // Rotation tables of the batch's positions, shared by every layer and head.
  for (uint32_t i = 0; i < n; ++i) {
    const uint64_t pos = beam ? pos0 : pos0 + i;  // a beam step's tokens share one position
    rope_table(t->rope_freq, hp.head_dim / 2, pos,
               t->rope_cs + static_cast<size_t>(i) * hp.head_dim);
    if (hp.has_local_layers) {
      rope_table(t->rope_freq_local, hp.head_dim / 2, pos,
                 t->rope_cs_local + static_cast<size_t>(i) * hp.head_dim);
    }
  }
  if (hp.embedding_scale != 1.0f) {
    for (size_t i = 0; i < nd; ++i) t->x[i] *= hp.embedding_scale;
  }

  // Checked at three points per layer (before it, after attention, after the gate/up matmuls),
  // so a large prefill chunk answers a cancel within about a third of a layer.
  const bool cancellable = t->cancel != nullptr && !beam && !kv_wrapped(t->kv, pos0 + n);
  auto cancelled = [t, cancellable] {
    return cancellable && __atomic_load_n(t->cancel, __ATOMIC_ACQUIRE) != t->cancel_base;
  };
  for (uint32_t l = 0; l < hp.n_layers; ++l) {
    if (cancelled()) return false;
    const LayerWeights& w = t->layers[l];
    const KvGeom& g = t->kv.geom[w.kind];
    const float* cs_base = w.kind == kKvLocal ? t->rope_cs_local : t->rope_cs;
    // Attention block.
    rmsnorm_rows(k, t->xb, t->x, w.attn_norm, n, hp.dim, hp.norm_eps);
    matmul_run(mm, t->xb, n, {{l, R::Wq}, {l, R::Wk}, {l, R::Wv}}, {t->q, t->kt, t->vt});
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
      const uint64_t pos = beam ? pos0 : pos0 + i;
      const float* cs = cs_base + static_cast<size_t>(i) * hp.head_dim;
      float* kr = t->kt + static_cast<size_t>(i) * hp.kv_dim;
      for (uint32_t h = 0; h < hp.n_kv_heads; ++h) {
        rope(kr + h * hp.head_dim, t->kbuf, cs, hp.head_dim, hp.rope_style);
        memcpy(kr + h * hp.head_dim, t->kbuf, hp.head_dim * sizeof(float));
      }
      if (beam) {
        // The beam slot's row, in the ring's dtype (as kv_store would round it).
        const BeamKv& b = *beam->kv;
        const float* vr = t->vt + static_cast<size_t>(i) * hp.kv_dim;
        kv_store_slot(k, kKvKeys, t->kv.dtype, hp.kv_dim, hp.head_dim, kr,
                      beam_row(b, b.k, l, beam->slot[i], 0), beam->row);
        kv_store_slot(k, kKvValues, t->kv.dtype, hp.kv_dim, hp.head_dim, vr,
                      beam_row(b, b.v, l, beam->slot[i], 0), beam->row);
        attend(t, l, t->q + static_cast<size_t>(i) * hp.q_dim, pos, cs,
               t->xb + static_cast<size_t>(i) * hp.q_dim, beam, beam->slot[i]);
        continue;
      }
      const uint32_t slot = kv_slot(g, pos);
      kv_store_slot(k, kKvKeys, t->kv.dtype, hp.kv_dim, hp.head_dim, kr,
                    kv_row(t->kv, t->kv.k, l, 0), slot);
      kv_store_slot(k, kKvValues, t->kv.dtype, hp.kv_dim, hp.head_dim,
                    t->vt + static_cast<size_t>(i) * hp.kv_dim, kv_row(t->kv, t->kv.v, l, 0), slot);
      if (l == 0) t->kv.tokens[kv_slot(t->kv.geom[kKvGlobal], pos)] = tokens[i];
      attend(t, l, t->q + static_cast<size_t>(i) * hp.q_dim, pos, cs,
             t->xb + static_cast<size_t>(i) * hp.q_dim);
    }
    if (cancelled()) return false;
    linear(mm, {l, R::Wo}, t->xb, n, t->xb2);
    if (hp.post_norms) rmsnorm_rows(k, t->xb2, t->xb2, w.post_attn_norm, n, hp.dim, hp.norm_eps);
    for (size_t i = 0; i < nd; ++i) t->x[i] += t->xb2[i];

    // Feed-forward block: SwiGLU or GeGLU.
    rmsnorm_rows(k, t->xb, t->x, w.ffn_norm, n, hp.dim, hp.norm_eps);
    matmul_run(mm, t->xb, n, {{l, R::Gate}, {l, R::Up}}, {t->hb, t->hb2});
    if (cancelled()) return false;
    if (hp.activation == fb::Activation::GeluTanh) {
      geglu(t->hb, t->hb2, static_cast<size_t>(n) * hp.ffn_dim);
    } else {
      k->swiglu(t->hb, t->hb2, n * hp.ffn_dim);
    }
    linear(mm, {l, R::Down}, t->hb, n, t->xb2);
    if (hp.post_norms) rmsnorm_rows(k, t->xb2, t->xb2, w.post_ffn_norm, n, hp.dim, hp.norm_eps);
    for (size_t i = 0; i < nd; ++i) t->x[i] += t->xb2[i];
  }

  // Logits of the last n_logits tokens only (1 for prefill and plain decode; the draft rows too
  // in a verification pass), in one output matmul that reads the matrix once for all rows.
  float* last = t->x + static_cast<size_t>(n - n_logits) * hp.dim;
  rmsnorm_rows(k, t->xb, last, t->out_norm, n_logits, hp.dim, hp.norm_eps);
  linear(mm, kMatOutput, t->xb, n_logits, t->logits);
  if (hp.final_softcap > 0.0f) {
    soft_cap(t->logits, static_cast<uint32_t>(static_cast<size_t>(n_logits) * hp.vocab_size),
             hp.final_softcap);
  }
  return true;
}

}  // namespace ringlm::internal
