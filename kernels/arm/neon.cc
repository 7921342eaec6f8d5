// aarch64 baseline (ARMv8.0 AdvSIMD, every 64-bit ARM CPU) kernels. Also the f32/f16/elementwise
// kernels of the dotprod and i8mm tables.
//
// Q8/Q4 int8 dot products: smull/smlal2 multiply 16 int8 pairs into 8 int16 lanes (two products
// per lane: |w| <= 128, |x| <= 127 keep the sum below 2^15), sadalp widens them into int32 lanes:
// exact per 32-group, then scaled by w_scale * x_scale and accumulated in float (Q5's q - 16 in
// [-16, 15], the unsigned q of Q4K, Q5K, Q4_1 and Q5_1, at most 31, too: arm/neon.inc). Tiles as
// in tile.inc: 4 rows x 1 token for decode (Q4K, Q5K and Q6K 2 x 1), 4 rows x 2 tokens for
// prefill.
#include "isa.h"

#if defined(RINGLM_KERNELS_A64)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "arm/a64.inc"

namespace ringlm::internal {
namespace {

// int32x4 lanes summing to the dot product of 32 int8 pairs (a0|a1) . (b0|b1).
struct SmullDot {
  static int32x4_t dot(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    int16x8_t p0 = vmull_s8(vget_low_s8(a0), vget_low_s8(b0));
    p0 = vmlal_high_s8(p0, a0, b0);
    int16x8_t p1 = vmull_s8(vget_low_s8(a1), vget_low_s8(b1));
    p1 = vmlal_high_s8(p1, a1, b1);
    return vpadalq_s16(vpaddlq_s16(p0), p1);
  }
};

}  // namespace

RINGLM_NEON_KERNELS(neon, 4, 2, SmullDot)

float softmax_neon(float* x, uint32_t size) {
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
  return max_val + logf(s);
}

void attn_dot_neon(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                   uint32_t head_dim, bool k_f16, float scale, float* out) {
  attn_scores<FloatMat>(q, k_rows, row_stride_elems, n_rows, head_dim, k_f16, out);
  uint32_t j = 0;
  for (; j + 4 <= n_rows; j += 4) vst1q_f32(out + j, vmulq_n_f32(vld1q_f32(out + j), scale));
  for (; j < n_rows; ++j) out[j] *= scale;
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_A64
