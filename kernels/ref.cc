// Scalar reference kernels. Accumulation order is plain and sequential (matching llama2.c's
// run.c), so f32 results are reproducible bit for bit on every target.
#include <math.h>
#include <string.h>

#include "isa.h"  // f32_to_f16_ref
#include "kernels.h"
#include "scalar.h"

namespace ringlm::internal {
namespace {

// F32 or F16 weights, widened value by value.
template <bool F16>
void matmul_float_ref(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  n &= ~kMatmulExactRows;  // every row is computed on its own anyway
  for (uint32_t t = 0; t < n; ++t) {
    const float* xt = x + static_cast<size_t>(t) * w.cols;
    float* yt = y + static_cast<size_t>(t) * w.rows;
    for (uint32_t r = r0; r < r1; ++r) {
      const size_t row = static_cast<size_t>(r) * w.row_stride;
      float acc = 0.0f;
      for (uint32_t c = 0; c < w.cols; ++c) {
        const float v = F16 ? fp16_to_f32(static_cast<const uint16_t*>(w.data)[row + c])
                            : static_cast<const float*>(w.data)[row + c];
        acc += v * xt[c];
      }
      yt[r] = acc;
    }
  }
}

// Q8 (int8 values), Q4 (packed nibbles) or Q5 (Q5: unsigned nibbles and fifth bits, q - 16): per
// group, the exact int32 dot product, then scaled.
// kMin: Q4_1 (unsigned nibbles q, the Q4 flag off) or Q5_1 (Q5: nibbles and fifth bits, q as it
// is), each group's scale d and min m from the (d, m) pairs; the min term m * x.sums accumulated
// apart and added at the end, as Q4K's (kernels.h).
template <bool Q4, bool Q5 = false, bool kMin = false>
void matmul_quant_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  static_assert(!(kMin && Q4), "Q4_1's nibbles are unsigned: Q4 off");
  n &= ~kMatmulExactRows;  // every row is computed on its own anyway
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = Q4 || Q5 || kMin ? w.row_stride / 2 : w.row_stride;
  const uint32_t groups = w.row_stride / kQuantGroup;
  constexpr uint32_t kPerGroup = kMin ? 2 : 1;  // f16 values per group in w.scales: (d, m) or s
  constexpr int32_t kOffset = Q5 && !kMin ? 16 : 0;  // Q5: q - 16
  for (uint32_t t = 0; t < n; ++t) {
    const int8_t* xq = x.qs + static_cast<size_t>(t) * x.stride;
    const float* xs = x.scales + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    const float* xsum = kMin ? x.sums + static_cast<size_t>(t) * (x.stride / kQuantGroup) : nullptr;
    float* yt = y + static_cast<size_t>(t) * w.rows;
    for (uint32_t r = r0; r < r1; ++r) {
      const uint8_t* row = W + static_cast<size_t>(r) * row_bytes;
      const uint16_t* ws = w.scales + static_cast<size_t>(r) * groups * kPerGroup;
      const uint8_t* hi = Q5 ? w.high + static_cast<size_t>(r) * (w.row_stride / 8) : nullptr;
      float acc = 0.0f, acc_min = 0.0f;
      for (uint32_t g = 0; g < groups; ++g) {
        const int8_t* xg = xq + g * kQuantGroup;
        int32_t isum = 0;
        for (uint32_t j = 0; j < kQuantGroup; ++j) {
          int32_t v;
          if (Q5 || kMin) {
            const uint8_t b = row[g * (kQuantGroup / 2) + j % 16];
            v = j < 16 ? b & 0x0f : b >> 4;
            if (Q5) v = (v | ((hi[g * 4 + j % 4] >> (j / 4)) & 1) << 4) - kOffset;
          } else {
            v = Q4 ? q4_get(row + g * (kQuantGroup / 2), j) : static_cast<int8_t>(row[g * kQuantGroup + j]);
          }
          isum += v * xg[j];
        }
        acc += static_cast<float>(isum) * (fp16_to_f32(ws[kPerGroup * g]) * xs[g]);
        if (kMin) acc_min += fp16_to_f32(ws[2 * g + 1]) * xsum[g];
      }
      yt[r] = kMin ? acc + acc_min : acc;
    }
  }
}

// Q4K / Q5K (kFive: q's fifth bit from w.high): the exact int32 dot product per group, scaled by
// (d * sc) * xscale, and the min term accumulated apart, subtracted at the end (kernels.h).
template <bool kFive>
void matmul_qk_asym_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y,
                        uint32_t r0, uint32_t r1) {
  n &= ~kMatmulExactRows;  // every row is computed on its own anyway
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const size_t row_bytes = w.row_stride / 2;
  const uint32_t groups = w.row_stride / kQuantGroup;
  const uint32_t supers = (groups + kQ4kSuperGroups - 1) / kQ4kSuperGroups;
  for (uint32_t t = 0; t < n; ++t) {
    const int8_t* xq = x.qs + static_cast<size_t>(t) * x.stride;
    const float* xs = x.scales + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    const float* xsum = x.sums + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    float* yt = y + static_cast<size_t>(t) * w.rows;
    for (uint32_t r = r0; r < r1; ++r) {
      const uint8_t* row = W + static_cast<size_t>(r) * row_bytes;
      const uint8_t* hi = kFive ? w.high + static_cast<size_t>(r) * (w.row_stride / 8) : nullptr;
      const uint16_t* dm = w.scales + static_cast<size_t>(r) * supers * 2;
      const uint8_t* sub = w.subs + static_cast<size_t>(r) * supers * 16;
      float acc = 0.0f, acc_min = 0.0f;
      for (uint32_t g = 0; g < groups; ++g) {
        const uint32_t s = g / kQ4kSuperGroups, k = g % kQ4kSuperGroups;
        const float d = fp16_to_f32(dm[2 * s]), dmin = fp16_to_f32(dm[2 * s + 1]);
        const uint8_t* grp = row + g * (kQuantGroup / 2);
        const int8_t* xg = xq + g * kQuantGroup;
        int32_t isum = 0;
        for (uint32_t j = 0; j < kQuantGroup; ++j) {
          int32_t v = j < 16 ? (grp[j] & 0x0f) : (grp[j - 16] >> 4);
          if (kFive) v |= ((hi[g * 4 + j % 4] >> (j / 4)) & 1) << 4;
          isum += v * xg[j];
        }
        const float dl = d * static_cast<float>(sub[16 * s + k]);
        const float ml = dmin * static_cast<float>(sub[16 * s + 8 + k]);
        acc += static_cast<float>(isum) * (dl * xs[g]);
        acc_min += ml * xsum[g];
      }
      yt[r] = acc - acc_min;
    }
  }
}

}  // namespace

// Outside the anonymous namespace: isa.h names them, for tables that have no kernel of their own
// for Q4K / Q5K / Q5 / Q4_1 / Q5_1.
void matmul_q4k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  matmul_qk_asym_ref<false>(w, x, n, y, r0, r1);
}

void matmul_q5k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  matmul_qk_asym_ref<true>(w, x, n, y, r0, r1);
}

void matmul_q5_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                   uint32_t r1) {
  matmul_quant_ref<false, true>(w, x, n, y, r0, r1);
}

void matmul_q4_1_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  matmul_quant_ref<false, false, true>(w, x, n, y, r0, r1);
}

void matmul_q5_1_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  matmul_quant_ref<false, true, true>(w, x, n, y, r0, r1);
}

// Q6K: per sub-block of 16 the exact int32 dot product of (q - 32) and the activations; a
// group's two combine in int32 with their scales, then scale by d * xscale (kernels.h).
void matmul_q6k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  n &= ~kMatmulExactRows;  // every row is computed on its own anyway
  const uint8_t* W = static_cast<const uint8_t*>(w.data);
  const uint32_t groups = w.row_stride / kQuantGroup;
  const uint32_t supers = (groups + kQ4kSuperGroups - 1) / kQ4kSuperGroups;
  for (uint32_t t = 0; t < n; ++t) {
    const int8_t* xq = x.qs + static_cast<size_t>(t) * x.stride;
    const float* xs = x.scales + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    float* yt = y + static_cast<size_t>(t) * w.rows;
    for (uint32_t r = r0; r < r1; ++r) {
      const uint8_t* lo = W + static_cast<size_t>(r) * (w.row_stride / 2);
      const uint8_t* hi = w.high + static_cast<size_t>(r) * (w.row_stride / 4);
      const uint16_t* ds = w.scales + static_cast<size_t>(r) * supers;
      const int8_t* sc = reinterpret_cast<const int8_t*>(w.subs) +
                         static_cast<size_t>(r) * supers * kQ6kSubsPerSuper;
      float acc = 0.0f;
      for (uint32_t g = 0; g < groups; ++g) {
        const uint8_t* grp = lo + g * (kQuantGroup / 2);
        const uint8_t* h = hi + g * (kQuantGroup / 4);
        const int8_t* xg = xq + g * kQuantGroup;
        int32_t isum[2] = {0, 0};
        for (uint32_t j = 0; j < kQuantGroup; ++j) {
          const int32_t low = j < 16 ? (grp[j] & 0x0f) : (grp[j - 16] >> 4);
          const int32_t high = (h[j % 8] >> (2 * (j / 8))) & 3;
          isum[j / 16] += (low + 16 * high - 32) * xg[j];
        }
        const uint32_t s = g / kQ4kSuperGroups, k = g % kQ4kSuperGroups;
        const int32_t comb = sc[s * kQ6kSubsPerSuper + 2 * k] * isum[0] +
                             sc[s * kQ6kSubsPerSuper + 2 * k + 1] * isum[1];
        acc += static_cast<float>(comb) * (fp16_to_f32(ds[s]) * xs[g]);
      }
      yt[r] = acc;
    }
  }
}

namespace {

void quantize_acts_ref(const float* x, uint32_t n, uint32_t cols, uint32_t stride, int8_t* qs,
                       float* scales) {
  const uint32_t groups = stride / kQuantGroup;
  for (uint32_t t = 0; t < n; ++t) {
    const float* xt = x + static_cast<size_t>(t) * cols;
    int8_t* q = qs + static_cast<size_t>(t) * stride;
    float* s = scales + static_cast<size_t>(t) * groups;
    for (uint32_t g = 0; g < groups; ++g) {
      const uint32_t c0 = g * kQuantGroup;
      const uint32_t c1 = c0 + kQuantGroup < cols ? c0 + kQuantGroup : cols;
      float amax = 0.0f;
      for (uint32_t c = c0; c < c1; ++c) amax = fmaxf(amax, fabsf(xt[c]));
      const float d = amax / 127.0f;
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      s[g] = d;
      for (uint32_t j = 0; j < kQuantGroup; ++j) {
        const uint32_t c = c0 + j;
        q[c] = c < cols ? static_cast<int8_t>(lrintf(xt[c] * inv)) : 0;
      }
    }
  }
}

void rmsnorm_ref(float* out, const float* x, const float* w, uint32_t size, float eps) {
  float ss = 0.0f;
  for (uint32_t i = 0; i < size; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(size);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  for (uint32_t i = 0; i < size; ++i) out[i] = w[i] * (ss * x[i]);
}

float softmax_ref(float* x, uint32_t size) {
  float max_val = x[0];
  for (uint32_t i = 1; i < size; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  float sum = 0.0f;
  for (uint32_t i = 0; i < size; ++i) {
    x[i] = expf(x[i] - max_val);
    sum += x[i];
  }
  for (uint32_t i = 0; i < size; ++i) x[i] /= sum;
  return max_val + logf(sum);
}

void swiglu_ref(float* a, const float* b, uint32_t size) {
  for (uint32_t i = 0; i < size; ++i) {
    float v = a[i];
    v *= 1.0f / (1.0f + expf(-v));
    a[i] = v * b[i];
  }
}

// Same loops as the transformer's scalar attention: f16 rows widened value by value.
void attn_dot_ref(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                  uint32_t head_dim, bool k_f16, float scale, float* out) {
  for (uint32_t j = 0; j < n_rows; ++j) {
    const size_t off = static_cast<size_t>(j) * row_stride_elems;
    float score = 0.0f;
    if (k_f16) {
      const uint16_t* k = static_cast<const uint16_t*>(k_rows) + off;
      for (uint32_t i = 0; i < head_dim; ++i) score += q[i] * fp16_to_f32(k[i]);
    } else {
      const float* k = static_cast<const float*>(k_rows) + off;
      for (uint32_t i = 0; i < head_dim; ++i) score += q[i] * k[i];
    }
    out[j] = score * scale;
  }
}

void attn_accum_ref(const float* w, const void* v_rows, uint32_t row_stride_elems,
                    uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out) {
  for (uint32_t j = 0; j < n_rows; ++j) {
    const size_t off = static_cast<size_t>(j) * row_stride_elems;
    const float a = w[j];
    if (v_f16) {
      const uint16_t* v = static_cast<const uint16_t*>(v_rows) + off;
      for (uint32_t i = 0; i < head_dim; ++i) out[i] += a * fp16_to_f32(v[i]);
    } else {
      const float* v = static_cast<const float*>(v_rows) + off;
      for (uint32_t i = 0; i < head_dim; ++i) out[i] += a * v[i];
    }
  }
}

// Scale of row j of a q8 KV operand (see attn_dot_q8).
float kv_q8_scale(const float* scales, size_t j, uint32_t row_stride_bytes) {
  return *reinterpret_cast<const float*>(reinterpret_cast<const uint8_t*>(scales) +
                                         j * row_stride_bytes);
}

void attn_dot_q8_ref(const float* q, const int8_t* k_rows, const float* k_scales,
                     uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim, float scale,
                     float* out) {
  for (uint32_t j = 0; j < n_rows; ++j) {
    const int8_t* k = k_rows + static_cast<size_t>(j) * row_stride_bytes;
    float score = 0.0f;
    for (uint32_t i = 0; i < head_dim; ++i) score += q[i] * static_cast<float>(k[i]);
    out[j] = score * (kv_q8_scale(k_scales, j, row_stride_bytes) * scale);
  }
}

void attn_accum_q8_ref(const float* w, const int8_t* v_rows, const float* v_scales,
                       uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim, float* out) {
  for (uint32_t j = 0; j < n_rows; ++j) {
    const int8_t* v = v_rows + static_cast<size_t>(j) * row_stride_bytes;
    const float a = w[j] * kv_q8_scale(v_scales, j, row_stride_bytes);
    for (uint32_t i = 0; i < head_dim; ++i) out[i] += a * static_cast<float>(v[i]);
  }
}

void attn_dot_n_ref(const float* q, uint32_t n_q, const void* k_rows, uint32_t row_stride_elems,
                    uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out,
                    uint32_t out_stride) {
  for (uint32_t t = 0; t < n_q; ++t) {
    attn_dot_ref(q + static_cast<size_t>(t) * head_dim, k_rows, row_stride_elems, n_rows,
                 head_dim, k_f16, scale, out + static_cast<size_t>(t) * out_stride);
  }
}

void attn_accum_n_ref(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,
                      uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim, bool v_f16,
                      float* out) {
  for (uint32_t t = 0; t < n_q; ++t) {
    attn_accum_ref(w + static_cast<size_t>(t) * w_stride, v_rows, row_stride_elems, n_rows,
                   head_dim, v_f16, out + static_cast<size_t>(t) * head_dim);
  }
}

void attn_dot_tiled_ref(const float* q, uint32_t n_q, const void* k_tiles,
                        uint32_t tile_stride_elems, uint32_t j0, uint32_t j1, uint32_t head_dim,
                        bool k_f16, float scale, float* out, uint32_t out_stride) {
  for (uint32_t u = 0; u < n_q; ++u) {
    const float* qu = q + static_cast<size_t>(u) * head_dim;
    for (uint32_t j = j0; j < j1; ++j) {
      const size_t off = static_cast<size_t>(j / kAttnTile) * tile_stride_elems + j % kAttnTile;
      float even = 0.0f, odd = 0.0f;
      for (uint32_t i = 0; i < head_dim; i += 2) {
        const size_t e = off + static_cast<size_t>(i) * kAttnTile;
        float k0, k1;
        if (k_f16) {
          k0 = fp16_to_f32(static_cast<const uint16_t*>(k_tiles)[e]);
          k1 = fp16_to_f32(static_cast<const uint16_t*>(k_tiles)[e + kAttnTile]);
        } else {
          k0 = static_cast<const float*>(k_tiles)[e];
          k1 = static_cast<const float*>(k_tiles)[e + kAttnTile];
        }
        even += qu[i] * k0;
        odd += qu[i + 1] * k1;
      }
      out[static_cast<size_t>(u) * out_stride + j] = scale * (even + odd);
    }
  }
}

const KernelTable kRef = {
    "ref",
    matmul_float_ref<false>,
    matmul_float_ref<true>,
    matmul_quant_ref<false>,
    matmul_quant_ref<true>,
    matmul_q4k_ref,
    matmul_q6k_ref,
    matmul_q5k_ref,
    matmul_q5_ref,
    matmul_q4_1_ref,
    matmul_q5_1_ref,
    quantize_acts_ref,
    rmsnorm_ref,
    softmax_ref,
    swiglu_ref,
    attn_dot_ref,
    attn_accum_ref,
    attn_dot_q8_ref,
    attn_accum_q8_ref,
    attn_dot_n_ref,
    attn_accum_n_ref,
    attn_dot_tiled_ref,
    f32_to_f16_ref,
};

}  // namespace

void f32_to_f16_ref(const float* x, uint16_t* out, uint32_t n) {
  for (uint32_t i = 0; i < n; ++i) out[i] = f32_to_fp16(x[i]);
}

const KernelTable* kernels_ref() { return &kRef; }

}  // namespace ringlm::internal
