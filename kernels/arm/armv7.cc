// 32-bit ARMv7-A NEON kernels (compiled with -mfpu=neon; chosen only when HWCAP_NEON is set).
//
// ARMv7 NEON lacks what the aarch64 files lean on: no fused multiply-add without VFPv4 (vmla is
// used: multiply, round, add), no across-vector adds, no round-to-nearest conversion, no vector
// divide, no f16 conversion without the fp16 extension (f16 is widened with integer ops here,
// subnormals included). NEON arithmetic also flushes denormals to zero: results may differ from
// the reference by denormal amounts only.
//
// Q8/Q4 dot products: vmull.s8 / vmlal.s8 (two products per int16 lane, |w| <= 128, |x| <= 127)
// and vpadal.s16 into int32: exact per 32-group (Q5's q - 16 in [-16, 15], the unsigned q of Q4K,
// Q5K, Q4_1 and Q5_1, at most 31, too: arm/neon.inc). Tiles: 4 rows x 1 token (decode; Q4K, Q5K
// and Q6K 2 x 1), 2 x 2 (prefill; 16 q registers).
#include "isa.h"

#if defined(RINGLM_KERNELS_ARMV7)

#if !defined(__ARM_NEON)
#error "arm/armv7.cc needs -mfpu=neon (kernels/CMakeLists.txt)"
#endif

#include <arm_neon.h>
#include <math.h>
#include <string.h>

namespace ringlm::internal {
namespace {

#include "tile.inc"

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

// Two f16 vectors as floats, f16_to_f32's values (Q4_1's / Q5_1's d and m: two a group where Q4
// has one scale). When none of the 8 is subnormal, infinite or NaN (zeros may be), each one's
// magnitude bits shifted into a float's place make a normal float (or zero) 2^-112 times its
// value: a multiply by 2^112 scales it, exactly, and a bit select puts the sign back; the check
// and that take ~18 instructions for the 8, where f16_to_f32 takes ~13 (and its constants) for 4.
// Otherwise f16_to_f32 on both.
inline void f16_to_f32_x2(uint16x4_t a, uint16x4_t b, float32x4_t* fa, float32x4_t* fb) {
  const uint16x8_t em = vandq_u16(vcombine_u16(a, b), vdupq_n_u16(0x7fff));
  // Subnormal: em in [1, 0x3ff] (em - 1 below 0x3ff, unsigned: zero wraps above); inf / NaN:
  // em >= 0x7c00.
  const uint16x8_t odd = vorrq_u16(vcltq_u16(vsubq_u16(em, vdupq_n_u16(1)), vdupq_n_u16(0x3ff)),
                                   vcgeq_u16(em, vdupq_n_u16(0x7c00)));
  uint16x4_t any = vorr_u16(vget_low_u16(odd), vget_high_u16(odd));
  any = vpmax_u16(any, any);  // lanes 0 and 1: the maxima of lanes 0-1 and 2-3
  if (vget_lane_u32(vreinterpret_u32_u16(any), 0) != 0) {
    *fa = f16_to_f32(a);
    *fb = f16_to_f32(b);
    return;
  }
  const float32x4_t k = vdupq_n_f32(0x1p112f);
  const uint32x4_t sign = vdupq_n_u32(0x80000000u);
  *fa = vbslq_f32(sign, vreinterpretq_f32_u32(vshll_n_u16(a, 16)),
                  vmulq_f32(vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(em), 13)), k));
  *fb = vbslq_f32(sign, vreinterpretq_f32_u32(vshll_n_u16(b, 16)),
                  vmulq_f32(vreinterpretq_f32_u32(vshll_n_u16(vget_high_u16(em), 13)), k));
}

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

// 1/v to ~1 ulp: estimate + two Newton steps (no vector divide). 1/inf: the estimate is 0, and
// Newton steps on (inf, 0) give NaN; forced to 0.
inline float32x4_t inv(float32x4_t v) {
  float32x4_t r = vrecpeq_f32(v);
  r = vmulq_f32(r, vrecpsq_f32(v, r));
  r = vmulq_f32(r, vrecpsq_f32(v, r));
  const uint32x4_t is_inf = vceqq_u32(vreinterpretq_u32_f32(v), vdupq_n_u32(0x7f800000u));
  return vreinterpretq_f32_u32(vbicq_u32(vreinterpretq_u32_f32(r), is_inf));
}

inline float32x4_t mla(float32x4_t acc, float32x4_t a, float32x4_t b) { return vmlaq_f32(acc, a, b); }
inline float32x4_t mla_n(float32x4_t acc, float32x4_t v, float s) { return vmlaq_n_f32(acc, v, s); }
// acc - a * v[L].
template <int L>
inline float32x4_t mls_lane(float32x4_t acc, float32x4_t a, float32x2_t v) {
  return vmlsq_lane_f32(acc, a, v, L);
}
inline float32x4_t max_abs(float32x4_t m, float32x4_t v) { return vmaxq_f32(m, vabsq_f32(v)); }
// Pairwise sums: a's lane pairs, then b's (vpadd on each half).
inline int32x4_t padd_s32(int32x4_t a, int32x4_t b) {
  return vcombine_s32(vpadd_s32(vget_low_s32(a), vget_high_s32(a)),
                      vpadd_s32(vget_low_s32(b), vget_high_s32(b)));
}
inline int16x8_t padd_s16(int16x8_t a, int16x8_t b) {
  return vcombine_s16(vpadd_s16(vget_low_s16(a), vget_high_s16(a)),
                      vpadd_s16(vget_low_s16(b), vget_high_s16(b)));
}
// Widening products of the high halves: acc + a_hi * b_hi (int8), a_hi * b_hi (int16).
inline int16x8_t mlal_high_s8(int16x8_t acc, int8x16_t a, int8x16_t b) {
  return vmlal_s8(acc, vget_high_s8(a), vget_high_s8(b));
}
inline int32x4_t mull_high_s16(int16x8_t a, int16x8_t b) {
  return vmull_s16(vget_high_s16(a), vget_high_s16(b));
}
// A Q6K group's 8 high-bit bytes h (at p) as (h, h >> 2): the two halves of a q register; the
// same for two consecutive groups.
inline uint8x16_t load_q6k_high(const uint8_t* p) {
  const uint8x8_t h = vld1_u8(p);
  return vcombine_u8(h, vshr_n_u8(h, 2));
}
inline void load_q6k_high2(const uint8_t* p, uint8x16_t* h0, uint8x16_t* h1) {
  *h0 = load_q6k_high(p);
  *h1 = load_q6k_high(p + 8);
}

template <int R, int T>
inline void store_tile(const float32x4_t (&acc)[R][T], float* Y, size_t y_stride) {
  for (int j = 0; j < T; ++j)
    for (int i = 0; i < R; ++i) Y[j * y_stride + i] = hsum(acc[i][j]);
}

// exp(x) as in x86/x86.inc; 2^n via two factors, rounding with the magic constant.
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

#include "arm/neon.inc"

template <bool F16>
struct FloatMat : FloatOperands {
  static constexpr bool kShapeInvariant = true;  // per-element fma order; store_tile
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    float32x4_t acc[R][T] = {};  // zeros
    const size_t wrow = static_cast<size_t>(r) * w_stride;
    const float* x = X + static_cast<size_t>(t) * x_stride;
    for (uint32_t c = 0; c < cols; c += 4) {
      const uint32_t rem = cols - c < 4 ? cols - c : 4;
      float32x4_t xv[T];
      for (int j = 0; j < T; ++j)
        xv[j] = rem == 4 ? vld1q_f32(x + j * x_stride + c) : load_f32_tail(x + j * x_stride + c, rem);
      for (int i = 0; i < R; ++i) {
        const size_t idx = wrow + i * w_stride + c;
        const float32x4_t wv = rem == 4 ? load_w4<F16>(W, idx) : load_w4_tail<F16>(W, idx, rem);
        for (int j = 0; j < T; ++j) acc[i][j] = vmlaq_f32(acc[i][j], wv, xv[j]);
      }
    }
    store_tile<R, T>(acc, Y + static_cast<size_t>(t) * y_stride + r, y_stride);
  }
};

// int32x4 lanes summing to the dot product of 32 int8 pairs (a0|a1) . (b0|b1).
struct SmullDot {
  static int32x4_t dot(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    int16x8_t p0 = vmull_s8(vget_low_s8(a0), vget_low_s8(b0));
    p0 = vmlal_s8(p0, vget_high_s8(a0), vget_high_s8(b0));
    int16x8_t p1 = vmull_s8(vget_low_s8(a1), vget_low_s8(b1));
    p1 = vmlal_s8(p1, vget_high_s8(a1), vget_high_s8(b1));
    return vpadalq_s16(vpaddlq_s16(p0), p1);
  }
};

}  // namespace

RINGLM_NEON_KERNELS(armv7, 2, 2, SmullDot)

float softmax_armv7(float* x, uint32_t size) {
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
  return max_val + logf(sum);
}

void attn_dot_armv7(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                    uint32_t head_dim, bool k_f16, float scale, float* out) {
  attn_scores<FloatMat>(q, k_rows, row_stride_elems, n_rows, head_dim, k_f16, out);
  for (uint32_t j = 0; j < n_rows; ++j) out[j] *= scale;  // VFP: no flush to zero
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_ARMV7
