// aarch64 ARMv8.6 I8MM kernels (compiled with -march=armv8.2-a+dotprod+i8mm). smmla multiplies a
// 2x8 int8 block of two weight rows by the 8x2 block of two tokens into a 2x2 int32 tile: for
// prefill (n >= 2) one instruction does the work of four sdot lanes-worth, and the 2x2 result of a
// 32-group ([r0t0, r0t1, r1t0, r1t1], four smmla) is already fully reduced, so it is scaled by the
// matching 2x2 scale products in one multiply-add. Decode (n = 1) has one token: the dotprod
// kernels do it. Tiles: 4 rows (two row pairs) x 2 tokens; an odd last row / token is computed as
// a pair with itself and only one half stored.
#include "isa.h"

#if defined(RINGLM_KERNELS_A64)

#if !defined(__ARM_FEATURE_MATMUL_INT8)
#error "arm/i8mm.cc needs -march=armv8.2-a+dotprod+i8mm (kernels/CMakeLists.txt)"
#endif

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "arm/a64.inc"

namespace ringlm::internal {
namespace {

// smmla operands for a pair of rows u, v (32 values each): four 2x8 blocks, k = 0..3 covering
// values 8k..8k+7 of both rows.
inline void pair_blocks(int8x16_t u0, int8x16_t u1, int8x16_t v0, int8x16_t v1, int8x16_t* m) {
  const int64x2_t a0 = vreinterpretq_s64_s8(u0), a1 = vreinterpretq_s64_s8(u1);
  const int64x2_t b0 = vreinterpretq_s64_s8(v0), b1 = vreinterpretq_s64_s8(v1);
  m[0] = vreinterpretq_s8_s64(vzip1q_s64(a0, b0));
  m[1] = vreinterpretq_s8_s64(vzip2q_s64(a0, b0));
  m[2] = vreinterpretq_s8_s64(vzip1q_s64(a1, b1));
  m[3] = vreinterpretq_s8_s64(vzip2q_s64(a1, b1));
}

// Q8, Q4, or Q5 (Q4 and kFive: load_group's q - 16, as arm/neon.inc's QuantTile).
template <bool Q4, bool kFive = false>
struct MmlaMat : QuantMat {
  static constexpr bool kQ4 = Q4;
  static constexpr bool kShapeInvariant = false;  // never used for exact rows (dotprod is)

  // R rows (1, 2 or 4) x T tokens (1 or 2).
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    constexpr int RP = (R + 1) / 2;  // row pairs
    const auto [Wr, WSr, Xt, XSt, xs_stride] = at(r, t);
    const uint8_t* Hr = kFive ? HI + r * hi_row_bytes : nullptr;  // Q5 only
    const int r_hi = R > 1 ? 1 : 0;  // second row of a pair (itself when R == 1)
    const int t_hi = T > 1 ? 1 : 0;
    float32x4_t acc[RP];
    for (int p = 0; p < RP; ++p) acc[p] = vdupq_n_f32(0.0f);
    for (uint32_t gb = 0; gb < groups; gb += 4) {
      const uint32_t nb = groups - gb < 4 ? groups - gb : 4;
      // Scale products per group k for each row pair: [w0 x0, w0 x1, w1 x0, w1 x1].
      float32x4_t xs0 = nb == 4 ? vld1q_f32(XSt + gb) : load_f32_tail(XSt + gb, nb);
      float32x4_t xs1 = nb == 4 ? vld1q_f32(XSt + t_hi * xs_stride + gb)
                                : load_f32_tail(XSt + t_hi * xs_stride + gb, nb);
      float xsp[4][4];  // [k] = x0, x1, x0, x1
      {
        const float32x4_t lo = vzip1q_f32(xs0, xs1), hi = vzip2q_f32(xs0, xs1);
        vst1q_f32(xsp[0], vcombine_f32(vget_low_f32(lo), vget_low_f32(lo)));
        vst1q_f32(xsp[1], vcombine_f32(vget_high_f32(lo), vget_high_f32(lo)));
        vst1q_f32(xsp[2], vcombine_f32(vget_low_f32(hi), vget_low_f32(hi)));
        vst1q_f32(xsp[3], vcombine_f32(vget_high_f32(hi), vget_high_f32(hi)));
      }
      float scp[RP][4][4];  // [pair][k] = w0 x0, w0 x1, w1 x0, w1 x1
      for (int p = 0; p < RP; ++p) {
        const int i0 = 2 * p, i1 = 2 * p + 1 < R ? 2 * p + 1 : 2 * p;
        const uint16_t* s0 = WSr + i0 * groups + gb;
        const uint16_t* s1 = WSr + i1 * groups + gb;
        const float32x4_t w0 = nb == 4 ? cvt_f16x4(s0) : load_f16_tail(s0, nb);
        const float32x4_t w1 = nb == 4 ? cvt_f16x4(s1) : load_f16_tail(s1, nb);
        const float32x4_t a = vzip1q_f32(w0, w0), b = vzip1q_f32(w1, w1);  // k = 0, 1
        const float32x4_t c = vzip2q_f32(w0, w0), d = vzip2q_f32(w1, w1);  // k = 2, 3
        const float32x4_t wk[4] = {vcombine_f32(vget_low_f32(a), vget_low_f32(b)),
                                   vcombine_f32(vget_high_f32(a), vget_high_f32(b)),
                                   vcombine_f32(vget_low_f32(c), vget_low_f32(d)),
                                   vcombine_f32(vget_high_f32(c), vget_high_f32(d))};
        for (int k = 0; k < 4; ++k) vst1q_f32(scp[p][k], vmulq_f32(wk[k], vld1q_f32(xsp[k])));
      }
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        int8x16_t xa0, xa1, xb0, xb1, xm[4];
        load_group<false>(reinterpret_cast<const uint8_t*>(Xt), g, &xa0, &xa1);
        load_group<false>(reinterpret_cast<const uint8_t*>(Xt + t_hi * x_stride), g, &xb0, &xb1);
        pair_blocks(xa0, xa1, xb0, xb1, xm);
        for (int p = 0; p < RP; ++p) {
          const int i1 = 2 * p + r_hi < R ? 2 * p + r_hi : 2 * p;
          int8x16_t u0, u1, v0, v1, wm[4];
          load_group<Q4, kFive>(Wr + (2 * p) * w_row_bytes, g, &u0, &u1,
                                kFive ? Hr + (2 * p) * hi_row_bytes : nullptr);
          load_group<Q4, kFive>(Wr + i1 * w_row_bytes, g, &v0, &v1,
                                kFive ? Hr + i1 * hi_row_bytes : nullptr);
          pair_blocks(u0, u1, v0, v1, wm);
          int32x4_t d = vmmlaq_s32(vdupq_n_s32(0), wm[0], xm[0]);
          d = vmmlaq_s32(d, wm[1], xm[1]);
          d = vmmlaq_s32(d, wm[2], xm[2]);
          d = vmmlaq_s32(d, wm[3], xm[3]);
          acc[p] = vfmaq_f32(acc[p], vcvtq_f32_s32(d), vld1q_f32(scp[p][k]));
        }
      }
    }
    float* Yt = Y + t * y_stride + r;
    for (int p = 0; p < RP; ++p) {
      float v[4];
      vst1q_f32(v, acc[p]);
      Yt[2 * p] = v[0];
      if (T > 1) Yt[y_stride + 2 * p] = v[1];
      if (2 * p + 1 < R) {
        Yt[2 * p + 1] = v[2];
        if (T > 1) Yt[y_stride + 2 * p + 1] = v[3];
      }
    }
  }
};

}  // namespace

// Decode (n = 1) is the dotprod kernels', and so are exact rows (kMatmulExactRows).
void matmul_q8_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1 || (n & kMatmulExactRows)) return matmul_q8_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 2, MmlaMat<false>>(w, x, n, y, r0, r1);
}

void matmul_q4_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1 || (n & kMatmulExactRows)) return matmul_q4_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 2, MmlaMat<true>>(w, x, n, y, r0, r1);
}

// Q5: Q4's tiles with the fifth bit (load_group's q - 16 in [-16, 15]: smmla's int8 operands).
void matmul_q5_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1 || (n & kMatmulExactRows)) return matmul_q5_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 2, MmlaMat<true, true>>(w, x, n, y, r0, r1);
}

// Q4K: the dotprod kernel for every n.
void matmul_q4k_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  matmul_q4k_dotprod(w, x, n, y, r0, r1);
}

// Q5K: the dotprod kernel for every n.
void matmul_q5k_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  matmul_q5k_dotprod(w, x, n, y, r0, r1);
}

// Q6K: the dotprod kernel for every n.
void matmul_q6k_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  matmul_q6k_dotprod(w, x, n, y, r0, r1);
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_A64
