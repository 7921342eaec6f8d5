// 32-bit ARMv7-A NEON kernels (compiled with -mfpu=neon; chosen only when HWCAP_NEON is set).
//
// ARMv7 NEON lacks what the aarch64 files lean on: no fused multiply-add without VFPv4 (vmla is
// used: multiply, round, add), no across-vector adds, no round-to-nearest conversion, no vector
// divide, no f16 conversion without the fp16 extension (f16 is widened with integer ops here,
// subnormals included). NEON arithmetic also flushes denormals to zero: results may differ from
// the reference by denormal amounts only.
//
// Q8/Q4 dot products: vmull.s8 / vmlal.s8 (two products per int16 lane, |w| <= 128, |x| <= 127)
// and vpadal.s16 into int32: exact per 32-group. Tiles: 4 rows x 1 token (decode), 2 x 2
// (prefill; 16 q registers).
#include "platform/kernels_isa.h"

#if defined(RINGLM_KERNELS_ARMV7)

#if !defined(__ARM_NEON)
#error "kernels_armv7.cc needs -mfpu=neon (runtime/CMakeLists.txt)"
#endif

#include <arm_neon.h>
#include <math.h>
#include <string.h>

namespace ringlm {
namespace {

#include "platform/kernels_drive.inc"

inline float hsum(float32x4_t v) {
  float32x2_t s = vadd_f32(vget_low_f32(v), vget_high_f32(v));
  s = vpadd_f32(s, s);
  return vget_lane_f32(s, 0);
}

inline float hmax(float32x4_t v) {
  float32x2_t s = vmax_f32(vget_low_f32(v), vget_high_f32(v));
  s = vpmax_f32(s, s);
  return vget_lane_f32(s, 0);
}

inline float32x4_t load_f32_tail(const float* p, uint32_t rem) {
  float tmp[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  for (uint32_t i = 0; i < rem; ++i) tmp[i] = p[i];
  return vld1q_f32(tmp);
}

inline void store_f32_tail(float* p, float32x4_t v, uint32_t rem) {
  float tmp[4];
  vst1q_f32(tmp, v);
  for (uint32_t i = 0; i < rem; ++i) p[i] = tmp[i];
}

// IEEE binary16 -> float32 with integer ops: normal and inf/nan by rebiasing the exponent,
// subnormals (and zero) as mantissa * 2^-24 (a normal float, so not flushed).
inline float32x4_t f16_to_f32(uint16x4_t h) {
  const uint32x4_t w = vmovl_u16(h);
  const uint32x4_t sign = vshlq_n_u32(vandq_u32(w, vdupq_n_u32(0x8000u)), 16);
  const uint32x4_t em = vandq_u32(w, vdupq_n_u32(0x7fffu));
  const uint32x4_t shifted = vshlq_n_u32(em, 13);
  uint32x4_t bits = vaddq_u32(shifted, vdupq_n_u32(112u << 23));
  bits = vbslq_u32(vcgeq_u32(em, vdupq_n_u32(0x7c00u)), vorrq_u32(shifted, vdupq_n_u32(0x7f800000u)),
                   bits);
  const float32x4_t sub = vmulq_f32(vcvtq_f32_u32(em), vdupq_n_f32(5.9604644775390625e-8f));
  bits = vbslq_u32(vcltq_u32(em, vdupq_n_u32(0x400u)), vreinterpretq_u32_f32(sub), bits);
  return vreinterpretq_f32_u32(vorrq_u32(bits, sign));
}

inline float32x4_t cvt_f16x4(const uint16_t* p) { return f16_to_f32(vld1_u16(p)); }

inline float32x4_t load_f16_tail(const uint16_t* p, uint32_t rem) {
  uint16_t tmp[4] = {0, 0, 0, 0};
  for (uint32_t i = 0; i < rem; ++i) tmp[i] = p[i];
  return cvt_f16x4(tmp);
}

// Round to nearest even (NEON always rounds to nearest; |v| < 2^22), as lrintf does.
inline int32x4_t round_s32(float32x4_t v) {
  const float32x4_t magic = vdupq_n_f32(12582912.0f);  // 1.5 * 2^23
  return vcvtq_s32_f32(vsubq_f32(vaddq_f32(v, magic), magic));
}

// 1/v to ~1 ulp: estimate + two Newton steps.
inline float32x4_t recip(float32x4_t v) {
  float32x4_t r = vrecpeq_f32(v);
  r = vmulq_f32(r, vrecpsq_f32(v, r));
  r = vmulq_f32(r, vrecpsq_f32(v, r));
  return r;
}

template <int R, int T>
inline void store_tile(const float32x4_t (&acc)[R][T], float* Y, size_t y_stride) {
  for (int j = 0; j < T; ++j)
    for (int i = 0; i < R; ++i) Y[j * y_stride + i] = hsum(acc[i][j]);
}

template <bool F16>
struct FloatMat {
  const void* W;
  size_t w_stride;
  uint32_t cols;
  const float* X;
  size_t x_stride;
  float* Y;
  size_t y_stride;

  float32x4_t w4(size_t idx) const {
    if (F16) return cvt_f16x4(static_cast<const uint16_t*>(W) + idx);
    return vld1q_f32(static_cast<const float*>(W) + idx);
  }
  float32x4_t w4_tail(size_t idx, uint32_t rem) const {
    if (F16) return load_f16_tail(static_cast<const uint16_t*>(W) + idx, rem);
    return load_f32_tail(static_cast<const float*>(W) + idx, rem);
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    float32x4_t acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = vdupq_n_f32(0.0f);
    const size_t wrow = static_cast<size_t>(r) * w_stride;
    const float* x = X + static_cast<size_t>(t) * x_stride;
    for (uint32_t c = 0; c < cols; c += 4) {
      const uint32_t rem = cols - c < 4 ? cols - c : 4;
      float32x4_t xv[T];
      for (int j = 0; j < T; ++j)
        xv[j] = rem == 4 ? vld1q_f32(x + j * x_stride + c) : load_f32_tail(x + j * x_stride + c, rem);
      for (int i = 0; i < R; ++i) {
        const size_t idx = wrow + i * w_stride + c;
        const float32x4_t wv = rem == 4 ? w4(idx) : w4_tail(idx, rem);
        for (int j = 0; j < T; ++j) acc[i][j] = vmlaq_f32(acc[i][j], wv, xv[j]);
      }
    }
    store_tile<R, T>(acc, Y + static_cast<size_t>(t) * y_stride + r, y_stride);
  }
};

struct QuantMat {
  const uint8_t* W;
  size_t w_row_bytes;
  const uint16_t* WS;
  uint32_t groups;
  const int8_t* X;
  size_t x_stride;
  const float* XS;
  float* Y;
  size_t y_stride;
};

inline QuantMat quant_mat(const WeightView& w, const QuantActs& x, float* y, size_t row_bytes) {
  QuantMat m;
  m.W = static_cast<const uint8_t*>(w.data);
  m.w_row_bytes = row_bytes;
  m.WS = w.scales;
  m.groups = w.row_stride / kQuantGroup;
  m.X = x.qs;
  m.x_stride = x.stride;
  m.XS = x.scales;
  m.Y = y;
  m.y_stride = w.rows;
  return m;
}

inline int32x4_t dot32(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
  int16x8_t p0 = vmull_s8(vget_low_s8(a0), vget_low_s8(b0));
  p0 = vmlal_s8(p0, vget_high_s8(a0), vget_high_s8(b0));
  int16x8_t p1 = vmull_s8(vget_low_s8(a1), vget_low_s8(b1));
  p1 = vmlal_s8(p1, vget_high_s8(a1), vget_high_s8(b1));
  return vpadalq_s16(vpaddlq_s16(p0), p1);
}

template <bool Q4>
struct QMat : QuantMat {
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
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
      float32x4_t xs[T];
      for (int j = 0; j < T; ++j) {
        const float* p = XSt + j * xs_stride + gb;
        xs[j] = nb == 4 ? vld1q_f32(p) : load_f32_tail(p, nb);
      }
      for (int i = 0; i < R; ++i) {
        const uint16_t* p = WSr + i * groups + gb;
        const float32x4_t ws = nb == 4 ? cvt_f16x4(p) : load_f16_tail(p, nb);
        for (int j = 0; j < T; ++j) vst1q_f32(sc[i][j], vmulq_f32(ws, xs[j]));
      }
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        int8x16_t w0[R], w1[R];
        for (int i = 0; i < R; ++i) {
          if (Q4) {
            const int8x16_t b = vreinterpretq_s8_u8(vld1q_u8(Wr + i * w_row_bytes + g * 16));
            w0[i] = vshrq_n_s8(vshlq_n_s8(b, 4), 4);
            w1[i] = vshrq_n_s8(b, 4);
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
            acc[i][j] = vmlaq_n_f32(acc[i][j], p, sc[i][j][k]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

// exp(x) as in kernels_x86_common.inc; 2^n via two factors, rounding with the magic constant.
inline float32x4_t exp_ps(float32x4_t x) {
  const uint32x4_t ovf = vcgtq_f32(x, vdupq_n_f32(88.72283935546875f));
  const uint32x4_t unf = vcltq_f32(x, vdupq_n_f32(-103.97208404541015625f));
  x = vmaxq_f32(x, vdupq_n_f32(-103.9f));
  x = vminq_f32(x, vdupq_n_f32(88.8f));
  const int32x4_t n = round_s32(vmulq_f32(x, vdupq_n_f32(1.44269504088896341f)));
  const float32x4_t fx = vcvtq_f32_s32(n);
  x = vmlsq_f32(x, fx, vdupq_n_f32(0.693359375f));
  x = vmlsq_f32(x, fx, vdupq_n_f32(-2.12194440e-4f));
  float32x4_t y = vdupq_n_f32(1.9875691500e-4f);
  y = vmlaq_f32(vdupq_n_f32(1.3981999507e-3f), y, x);
  y = vmlaq_f32(vdupq_n_f32(8.3334519073e-3f), y, x);
  y = vmlaq_f32(vdupq_n_f32(4.1665795894e-2f), y, x);
  y = vmlaq_f32(vdupq_n_f32(1.6666665459e-1f), y, x);
  y = vmlaq_f32(vdupq_n_f32(5.0000001201e-1f), y, x);
  y = vmlaq_f32(vaddq_f32(x, vdupq_n_f32(1.0f)), y, vmulq_f32(x, x));
  const int32x4_t n1 = vshrq_n_s32(n, 1);
  const int32x4_t n2 = vsubq_s32(n, n1);
  const float32x4_t p1 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n1, vdupq_n_s32(127)), 23));
  const float32x4_t p2 = vreinterpretq_f32_s32(vshlq_n_s32(vaddq_s32(n2, vdupq_n_s32(127)), 23));
  y = vmulq_f32(vmulq_f32(y, p1), p2);
  y = vbslq_f32(ovf, vdupq_n_f32(__builtin_inff()), y);
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(y), unf));
}

void matmul_f32_armv7(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  const FloatMat<false> m{w.data, w.row_stride, w.cols, x, w.cols, y, w.rows};
  drive<4, 2, 2>(m, n, r0, r1);
}

void matmul_f16_armv7(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  const FloatMat<true> m{w.data, w.row_stride, w.cols, x, w.cols, y, w.rows};
  drive<4, 2, 2>(m, n, r0, r1);
}

void matmul_q8_armv7(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  QMat<false> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride);
  drive<4, 2, 2>(m, n, r0, r1);
}

void matmul_q4_armv7(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  QMat<true> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride / 2);
  drive<4, 2, 2>(m, n, r0, r1);
}

void quantize_acts_armv7(const float* x, uint32_t n, uint32_t cols, uint32_t stride, int8_t* qs,
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
      float32x4_t m = vdupq_n_f32(0.0f);
      for (int k = 0; k < 8; ++k) m = vmaxq_f32(m, vabsq_f32(v[k]));
      const float amax = hmax(m);
      const float d = amax / 127.0f;  // VFP: IEEE division, as the reference
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      s[g] = d;
      int16x8_t h[4];
      for (int k = 0; k < 4; ++k) {
        const int32x4_t a = round_s32(vmulq_n_f32(v[2 * k], inv));
        const int32x4_t b = round_s32(vmulq_n_f32(v[2 * k + 1], inv));
        h[k] = vcombine_s16(vqmovn_s32(a), vqmovn_s32(b));
      }
      vst1q_s8(q + c0, vcombine_s8(vqmovn_s16(h[0]), vqmovn_s16(h[1])));
      vst1q_s8(q + c0 + 16, vcombine_s8(vqmovn_s16(h[2]), vqmovn_s16(h[3])));
    }
  }
}

void rmsnorm_armv7(float* out, const float* x, const float* w, uint32_t size, float eps) {
  float32x4_t a0 = vdupq_n_f32(0.0f), a1 = vdupq_n_f32(0.0f);
  uint32_t i = 0;
  for (; i + 8 <= size; i += 8) {
    const float32x4_t u = vld1q_f32(x + i), v = vld1q_f32(x + i + 4);
    a0 = vmlaq_f32(a0, u, u);
    a1 = vmlaq_f32(a1, v, v);
  }
  float ss = hsum(vaddq_f32(a0, a1));
  for (; i < size; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(size);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  i = 0;
  for (; i + 4 <= size; i += 4)
    vst1q_f32(out + i, vmulq_f32(vld1q_f32(w + i), vmulq_n_f32(vld1q_f32(x + i), ss)));
  for (; i < size; ++i) out[i] = w[i] * (ss * x[i]);
}

void softmax_armv7(float* x, uint32_t size) {
  float max_val = x[0];
  uint32_t i = 0;
  if (size >= 4) {
    float32x4_t mv = vld1q_f32(x);
    for (i = 4; i + 4 <= size; i += 4) mv = vmaxq_f32(mv, vld1q_f32(x + i));
    max_val = hmax(mv);
  }
  for (; i < size; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  const float32x4_t m = vdupq_n_f32(max_val);
  float32x4_t sv = vdupq_n_f32(0.0f);
  float tail_sum = 0.0f;
  for (i = 0; i < size; i += 4) {
    const uint32_t rem = size - i < 4 ? size - i : 4;
    const float32x4_t v = rem == 4 ? vld1q_f32(x + i) : load_f32_tail(x + i, rem);
    const float32x4_t e = exp_ps(vsubq_f32(v, m));
    if (rem == 4) {
      vst1q_f32(x + i, e);
      sv = vaddq_f32(sv, e);
    } else {
      store_f32_tail(x + i, e, rem);
      for (uint32_t k = 0; k < rem; ++k) tail_sum += x[i + k];
    }
  }
  const float sum = hsum(sv) + tail_sum;
  for (i = 0; i < size; ++i) x[i] /= sum;  // VFP division: exact as the reference's
}

void swiglu_armv7(float* a, const float* b, uint32_t size) {
  const float32x4_t one = vdupq_n_f32(1.0f);
  for (uint32_t i = 0; i < size; i += 4) {
    const uint32_t rem = size - i < 4 ? size - i : 4;
    const float32x4_t v = rem == 4 ? vld1q_f32(a + i) : load_f32_tail(a + i, rem);
    const float32x4_t bv = rem == 4 ? vld1q_f32(b + i) : load_f32_tail(b + i, rem);
    const float32x4_t den = vaddq_f32(one, exp_ps(vnegq_f32(v)));
    // 1/inf: the estimate is 0, and Newton steps on (inf, 0) give NaN; force 0.
    const uint32_t inf_bits = 0x7f800000u;
    const uint32x4_t is_inf = vceqq_u32(vreinterpretq_u32_f32(den), vdupq_n_u32(inf_bits));
    const float32x4_t sig = vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(recip(den)), is_inf));
    const float32x4_t r = vmulq_f32(vmulq_f32(v, sig), bv);
    if (rem == 4) vst1q_f32(a + i, r);
    else store_f32_tail(a + i, r, rem);
  }
}

void attn_dot_armv7(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                    uint32_t head_dim, bool k_f16, float scale, float* out) {
  if (k_f16) {
    const FloatMat<true> m{k_rows, row_stride_elems, head_dim, q, 0, out, 0};
    drive<4, 4, 1>(m, 1, 0, n_rows);
  } else {
    const FloatMat<false> m{k_rows, row_stride_elems, head_dim, q, 0, out, 0};
    drive<4, 4, 1>(m, 1, 0, n_rows);
  }
  for (uint32_t j = 0; j < n_rows; ++j) out[j] *= scale;
}

#include "platform/kernels_neon_attn.inc"

void attn_accum_armv7(const float* w, const void* v_rows, uint32_t row_stride_elems,
                      uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out) {
  if (v_f16) attn_accum_impl<true>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
  else attn_accum_impl<false>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
}

const KernelTable kArmv7 = {
    "armv7",             matmul_f32_armv7, matmul_f16_armv7, matmul_q8_armv7, matmul_q4_armv7,
    quantize_acts_armv7, rmsnorm_armv7,    softmax_armv7,    swiglu_armv7,    attn_dot_armv7,
    attn_accum_armv7,
};

}  // namespace

const KernelTable* kernels_armv7() { return &kArmv7; }

}  // namespace ringlm

#endif  // RINGLM_KERNELS_ARMV7
