// aarch64 baseline (ARMv8.0 AdvSIMD, every 64-bit ARM CPU) kernels. Also the f32/f16/elementwise
// kernels of the dotprod and i8mm tables.
//
// Q8/Q4 int8 dot products: smull/smlal2 multiply 16 int8 pairs into 8 int16 lanes (two products
// per lane: |w| <= 128, |x| <= 127 keep the sum below 2^15), sadalp widens them into int32 lanes:
// exact per 32-group, then scaled by w_scale * x_scale and accumulated in float. Tiles as in
// kernels_drive.inc: 4 rows x 1 token for decode, 4 rows x 2 tokens for prefill.
#include "platform/kernels_isa.h"

#if defined(RINGLM_KERNELS_A64)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "platform/kernels_a64_common.inc"

namespace ringlm {
namespace {

using namespace a64;

// int32x4 lanes summing to the dot product of 32 int8 pairs (a0|a1) . (b0|b1).
inline int32x4_t dot32(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
  int16x8_t p0 = vmull_s8(vget_low_s8(a0), vget_low_s8(b0));
  p0 = vmlal_high_s8(p0, a0, b0);
  int16x8_t p1 = vmull_s8(vget_low_s8(a1), vget_low_s8(b1));
  p1 = vmlal_high_s8(p1, a1, b1);
  return vpadalq_s16(vpaddlq_s16(p0), p1);
}

template <bool Q4>
struct QMat : QuantMat {
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    if constexpr (T == 1) {
      decode_tile<Q4, R>(*this, r, t, dot32);
      return;
    }
    const size_t xs_stride = x_stride / kQuantGroup;
    const uint8_t* Wr = W + r * w_row_bytes;
    const uint16_t* WSr = WS + static_cast<size_t>(r) * groups;
    const int8_t* Xt = X + t * x_stride;
    const float* XSt = XS + t * xs_stride;
    float32x4_t acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = vdupq_n_f32(0.0f);
    float sc[R][T][4];
    for (uint32_t gb = 0; gb < groups; gb += 4) {
      const uint32_t nb = groups - gb < 4 ? groups - gb : 4;
      block_scales<R, T>(WSr, groups, XSt, xs_stride, gb, nb, sc);
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        int8x16_t w0[R], w1[R];
        for (int i = 0; i < R; ++i) {
          if (Q4) {
            unpack_q4(Wr + i * w_row_bytes + g * 16, &w0[i], &w1[i]);
          } else {
            const int8_t* p = reinterpret_cast<const int8_t*>(Wr + i * w_row_bytes) + g * 32;
            w0[i] = vld1q_s8(p);
            w1[i] = vld1q_s8(p + 16);
          }
        }
        for (int j = 0; j < T; ++j) {
          const int8x16_t x0 = vld1q_s8(Xt + j * x_stride + g * 32);
          const int8x16_t x1 = vld1q_s8(Xt + j * x_stride + g * 32 + 16);
          for (int i = 0; i < R; ++i) {
            const float32x4_t p = vcvtq_f32_s32(dot32(w0[i], w1[i], x0, x1));
            acc[i][j] = vfmaq_n_f32(acc[i][j], p, sc[i][j][k]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

#include "platform/kernels_neon_attn.inc"

}  // namespace

void matmul_f32_neon(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  const FloatMat<false> m{w.data, w.row_stride, w.cols, x, w.cols, y, w.rows};
  drive<4, 4, 2>(m, n, r0, r1);
}

void matmul_f16_neon(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  const FloatMat<true> m{w.data, w.row_stride, w.cols, x, w.cols, y, w.rows};
  drive<4, 4, 2>(m, n, r0, r1);
}

void matmul_q8_neon(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  QMat<false> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride);
  drive<4, 4, 2>(m, n, r0, r1);
}

void matmul_q4_neon(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  QMat<true> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride / 2);
  drive<4, 4, 2>(m, n, r0, r1);
}

void quantize_acts_neon(const float* x, uint32_t n, uint32_t cols, uint32_t stride, int8_t* qs,
                        float* scales) {
  const uint32_t groups = stride / kQuantGroup;
  for (uint32_t t = 0; t < n; ++t) {
    const float* xt = x + static_cast<size_t>(t) * cols;
    int8_t* q = qs + static_cast<size_t>(t) * stride;
    float* s = scales + static_cast<size_t>(t) * groups;
    for (uint32_t g = 0; g < groups; ++g) {
      const uint32_t c0 = g * kQuantGroup;
      float32x4_t v[8];
      for (int k = 0; k < 8; ++k) {
        const uint32_t c = c0 + 4 * k;
        v[k] = c + 4 <= cols ? vld1q_f32(xt + c)
               : c < cols    ? load_f32_tail(xt + c, cols - c)
                             : vdupq_n_f32(0.0f);
      }
      // maxnm ignores NaN like fmaxf.
      float32x4_t m = vdupq_n_f32(0.0f);
      for (int k = 0; k < 8; ++k) m = vmaxnmq_f32(m, vabsq_f32(v[k]));
      const float amax = vmaxnmvq_f32(m);
      const float d = amax / 127.0f;
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      s[g] = d;
      int16x8_t h[4];
      for (int k = 0; k < 4; ++k) {
        // fcvtns: round to nearest even, as lrintf in the default rounding mode.
        const int32x4_t a = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k], inv));
        const int32x4_t b = vcvtnq_s32_f32(vmulq_n_f32(v[2 * k + 1], inv));
        h[k] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
      }
      vst1q_s8(q + c0, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
      vst1q_s8(q + c0 + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
    }
  }
}

void rmsnorm_neon(float* out, const float* x, const float* w, uint32_t size, float eps) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
  uint32_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const float32x4_t u = vld1q_f32(x + i), v = vld1q_f32(x + i + 4);
    a0 = vfmaq_f32(a0, u, u);
    a1 = vfmaq_f32(a1, v, v);
  }
  float ss = vaddvq_f32(vaddq_f32(a0, a1));
  for (; i < size; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(size);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  i = 0;
  for (; i + 4 <= size; i += 4)
    vst1q_f32(out + i, vmulq_f32(vld1q_f32(w + i), vmulq_n_f32(vld1q_f32(x + i), ss)));
  for (; i < size; ++i) out[i] = w[i] * (ss * x[i]);
}

void softmax_neon(float* x, uint32_t size) {
  float32x4_t mv = vdupq_n_f32(x[0]);
  uint32_t i = 0;
  for (; i + 4 <= size; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
  float max_val = vmaxvq_f32(mv);
  for (; i < size; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  const float32x4_t m = vdupq_n_f32(max_val);
  float32x4_t sv = vdupq_n_f32(0.0f);
  for (i = 0; i < size; i += 4) {
    const uint32_t rem = size - i < 4 ? size - i : 4;
    const float32x4_t v = rem == 4 ? vld1q_f32(x + i) : load_f32_tail(x + i, rem);
    float32x4_t e = exp_ps(vsubq_f32(v, m));
    if (rem < 4) {
      const uint32_t lanes[4] = {0, 1, 2, 3};
      const uint32x4_t keep = vcltq_u32(vld1q_u32(lanes), vdupq_n_u32(rem));
      e = vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(e), keep));
      store_f32_tail(x + i, e, rem);
    } else {
      vst1q_f32(x + i, e);
    }
    sv = vaddq_f32(sv, e);
  }
  const float32x4_t sum = vdupq_n_f32(vaddvq_f32(sv));
  for (i = 0; i + 4 <= size; i += 4) vst1q_f32(x + i, vdivq_f32(vld1q_f32(x + i), sum));
  const float s = vgetq_lane_f32(sum, 0);
  for (; i < size; ++i) x[i] /= s;
}

void swiglu_neon(float* a, const float* b, uint32_t size) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  for (uint32_t i = 0; i < size; i += 4) {
    const uint32_t rem = size - i < 4 ? size - i : 4;
    const float32x4_t v = rem == 4 ? vld1q_f32(a + i) : load_f32_tail(a + i, rem);
    const float32x4_t bv = rem == 4 ? vld1q_f32(b + i) : load_f32_tail(b + i, rem);
    const float32x4_t sig = vdivq_f32(one, vaddq_f32(one, exp_ps(vnegq_f32(v))));
    const float32x4_t r = vmulq_f32(vmulq_f32(v, sig), bv);
    if (rem == 4) vst1q_f32(a + i, r);
    else store_f32_tail(a + i, r, rem);
  }
}

void attn_dot_neon(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                   uint32_t head_dim, bool k_f16, float scale, float* out) {
  if (k_f16) {
    const FloatMat<true> m{k_rows, row_stride_elems, head_dim, q, 0, out, 0};
    drive<4, 4, 1>(m, 1, 0, n_rows);
  } else {
    const FloatMat<false> m{k_rows, row_stride_elems, head_dim, q, 0, out, 0};
    drive<4, 4, 1>(m, 1, 0, n_rows);
  }
  uint32_t j = 0;
  for (; j + 4 <= n_rows; j += 4) vst1q_f32(out + j, vmulq_n_f32(vld1q_f32(out + j), scale));
  for (; j < n_rows; ++j) out[j] *= scale;
}

void attn_accum_neon(const float* w, const void* v_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out) {
  if (v_f16) attn_accum_impl<true>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
  else attn_accum_impl<false>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
}

namespace {
const KernelTable kNeon = {
    "neon",           matmul_f32_neon, matmul_f16_neon, matmul_q8_neon, matmul_q4_neon,
    quantize_acts_neon, rmsnorm_neon,  softmax_neon,    swiglu_neon,    attn_dot_neon,
    attn_accum_neon,
};
}  // namespace

const KernelTable* kernels_neon() { return &kNeon; }

}  // namespace ringlm

#elif defined(RINGLM_KERNELS_ARMV7)
#endif  // RINGLM_KERNELS_A64
