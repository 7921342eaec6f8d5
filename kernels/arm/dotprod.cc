// aarch64 ARMv8.2 DotProd kernels (compiled with -march=armv8.2-a+dotprod): sdot sums four int8
// products per int32 lane, exact. Q8 / Q4 / Q5 / Q4_1 / Q5_1 run arm/neon.inc's row-lane tiles
// (LaneTile) with sdot by element, a 32-group of 4 rows and a token in 8 sdot (Sdot::products);
// Q4K / Q5K take a group in two sdot per row and token (Sdot::dot), Q6K too (Q6kSdot, pairs of
// groups). Everything but the quantized matmuls comes from the baseline NEON table.
#include "isa.h"

#if defined(RINGLM_KERNELS_A64)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "arm/dotprod.cc needs -march=armv8.2-a+dotprod (kernels/CMakeLists.txt)"
#endif

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#include "arm/a64.inc"

namespace ringlm::internal {
namespace {

struct Sdot {
  static int32x4_t dot(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
    return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, b0), a1, b1);
  }
  // LaneTile's product policy (arm/neon.inc "Row-lane tiles"): a token at a time (one ld1 of
  // its group), the 4 rows' group in 8 sdot by element.
  static constexpr int kTokens = 1;
  template <bool Q4, bool kFive, bool kMin>
  [[gnu::always_inline]] static void weights(LaneRows<Q4, kFive, kMin>& rows, uint8x16_t f,
                                             int8x16_t* w) {
    rows.group(f, w);
  }
  [[gnu::always_inline]] static void products(const int8x16_t* w, const int8_t** x,
                                              int32x4_t* s) {
    int8x16_t x0, x1;
    lane_token(x[0], &x0, &x1);
    int32x4_t d = vdotq_laneq_s32(vdupq_n_s32(0), w[0], x0, 0);
    d = vdotq_laneq_s32(d, w[1], x0, 1);
    d = vdotq_laneq_s32(d, w[2], x0, 2);
    d = vdotq_laneq_s32(d, w[3], x0, 3);
    d = vdotq_laneq_s32(d, w[4], x1, 0);
    d = vdotq_laneq_s32(d, w[5], x1, 1);
    d = vdotq_laneq_s32(d, w[6], x1, 2);
    s[0] = vdotq_laneq_s32(d, w[7], x1, 3);
  }
};

// The integer half of Q6K (arm/neon.inc "Q6K") with sdot, a pair of groups at a time. The pair's
// low-nibble bytes are interleaved by 8-byte halves (zip), [first group's bytes 0-7, second's
// 0-7] and [8-15, 8-15]: then its 16 high-bit bytes line up with them lane for lane, and one sdot
// chain of two takes sub-block a of both groups (int32 lanes 0-1 the first's, 2-3 the second's),
// another sub-block b. One pairwise add gives the four sub-block sums, one multiply scales them:
// per row, token and pair two chains, one add and one multiply, where a chain per sub-block
// would take four chains and three adds (under qemu 4 % fewer instructions in prefill, 1 % in
// decode, where the interleaving costs about what it saves). The activations are interleaved
// alike, once per token for all the rows.
struct Q6kSdot {
  struct Weights {  // values 0-7, 8-15, 16-23, 24-31 of both groups
    int8x16_t a1, a2, b1, b2;
  };
  struct Acts {  // the matching activations, and where the chains of a and b start
    int8x16_t a1, a2, b1, b2;
    int32x4_t sa, sb;
  };
  using Quad = int16x8_t;    // sa0 sa1 sb0 sb1 sa2 sa3 sb2 sb3
  using Scales = int32x4_t;  // sa0 sa1 sb0 sb1 of the pair (groups 0, 1 of it)
  // Biased (decode): the weights are q in [0, 63], not q - 32 (two subtractions fewer per row and
  // group), and the chains start from -32 times the activations' 4-value sums (one sdot per
  // sub-block and token, shared by the tile's rows).
  static constexpr bool kBias = true;

  // Halves 0 of a and b, then halves 1: [a0-7, b0-7], [a8-15, b8-15].
  static void zip_halves(int8x16_t a, int8x16_t b, int8x16_t* lo, int8x16_t* hi) {
    const int64x2_t u = vreinterpretq_s64_s8(a), v = vreinterpretq_s64_s8(b);
    *lo = vreinterpretq_s8_s64(vzip1q_s64(u, v));
    *hi = vreinterpretq_s8_s64(vzip2q_s64(u, v));
  }

  template <bool Biased>
  static Acts acts(const int8_t* x, bool two) {
    const int8x16_t z = vdupq_n_s8(0);
    const int8x16_t xa1 = two ? vld1q_s8(x + 32) : z, xb1 = two ? vld1q_s8(x + 48) : z;
    Acts a;
    zip_halves(vld1q_s8(x), xa1, &a.a1, &a.a2);
    zip_halves(vld1q_s8(x + 16), xb1, &a.b1, &a.b2);
    a.sa = a.sb = vdupq_n_s32(0);
    if (Biased) {
      const int8x16_t m = vdupq_n_s8(-32);
      a.sa = vdotq_s32(vdotq_s32(a.sa, m, a.a1), m, a.a2);
      a.sb = vdotq_s32(vdotq_s32(a.sb, m, a.b1), m, a.b2);
    }
    return a;
  }

  // With m = high bytes & 0x33 (and m2 the same of the bytes >> 2), lane j finds the high bits of
  // a1's lane j at bits 0-1 and of b1's at 4-5 (of a2's and b2's in m2): unpack_q6k's inserts.
  template <bool Biased>
  static Weights weights(const uint8_t* lo, const uint8_t* hi, bool two) {
    const uint8x16_t l1 = two ? vld1q_u8(lo + 16) : vdupq_n_u8(0);
    const uint8x16_t h = two ? vld1q_u8(hi) : vcombine_u8(vld1_u8(hi), vdup_n_u8(0));
    int8x16_t v1, v2;
    zip_halves(vreinterpretq_s8_u8(vld1q_u8(lo)), vreinterpretq_s8_u8(l1), &v1, &v2);
    const uint8x16_t u1 = vreinterpretq_u8_s8(v1), u2 = vreinterpretq_u8_s8(v2);
    const uint8x16_t k = vdupq_n_u8(0x33);
    const uint8x16_t m1 = vandq_u8(h, k), m2 = vandq_u8(vshrq_n_u8(h, 2), k);
    Weights w;
    w.a1 = vreinterpretq_s8_u8(vsliq_n_u8(u1, m1, 4));
    w.b1 = vreinterpretq_s8_u8(vsriq_n_u8(m1, u1, 4));
    w.a2 = vreinterpretq_s8_u8(vsliq_n_u8(u2, m2, 4));
    w.b2 = vreinterpretq_s8_u8(vsriq_n_u8(m2, u2, 4));
    if (!Biased) {
      const int8x16_t k32 = vdupq_n_s8(32);
      w.a1 = vsubq_s8(w.a1, k32);
      w.a2 = vsubq_s8(w.a2, k32);
      w.b1 = vsubq_s8(w.b1, k32);
      w.b2 = vsubq_s8(w.b2, k32);
    }
    return w;
  }

  // [isum_a0, isum_a1, isum_b0, isum_b1] * [sa0, sa1, sb0, sb1].
  static int32x4_t pair(const Weights& w, const Acts& x, Scales s) {
    const int32x4_t ya = vdotq_s32(vdotq_s32(x.sa, w.a1, x.a1), w.a2, x.a2);
    const int32x4_t yb = vdotq_s32(vdotq_s32(x.sb, w.b1, x.b1), w.b2, x.b2);
    return vmulq_s32(vpaddq_s32(ya, yb), s);
  }
  // a terms of groups 0-3 plus their b terms.
  static int32x4_t quad(int32x4_t p01, int32x4_t p23) {
    const int64x2_t u = vreinterpretq_s64_s32(p01), v = vreinterpretq_s64_s32(p23);
    return vaddq_s32(vreinterpretq_s32_s64(vzip1q_s64(u, v)),
                     vreinterpretq_s32_s64(vzip2q_s64(u, v)));
  }
  static Quad quad_scales(const int8_t* p) {
    const uint8_t order[8] = {0, 2, 1, 3, 4, 6, 5, 7};  // sa0 sb0 sa1 sb1 .. -> sa0 sa1 sb0 sb1 ..
    return vmovl_s8(vtbl1_s8(vld1_s8(p), vreinterpret_s8_u8(vld1_u8(order))));
  }
  template <int P>
  static Scales pair_scales(Quad q) {
    return P == 0 ? vmovl_s16(vget_low_s16(q)) : vmovl_high_s16(q);
  }
};

}  // namespace

RINGLM_QUANT_MATMUL(matmul_q8_dotprod, 4, 4, 4, LaneTile<false, Sdot>)
RINGLM_QUANT_MATMUL(matmul_q4_dotprod, 4, 4, 4, LaneTile<true, Sdot>)
// Q5: Q4's tiles with the fifth bit (q - 16 in [-16, 15]: sdot's int8 operands as they are).
RINGLM_QUANT_MATMUL(matmul_q5_dotprod, 4, 4, 4, LaneTile<true, Sdot, true>)
// Q4_1 / Q5_1: Q4's / Q5's tiles over q as it is (0..15 / 0..31: sdot's int8 operands as they
// are), with the (d, m) pairs and the min term.
RINGLM_QUANT_MATMUL(matmul_q4_1_dotprod, 4, 4, 4, LaneTile<true, Sdot, false, true>)
RINGLM_QUANT_MATMUL(matmul_q5_1_dotprod, 4, 4, 4, LaneTile<true, Sdot, true, true>)

void matmul_q4k_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                        uint32_t r1) {
  q4k_matmul<4, 4, 2, Q4kTile<Sdot>>(w, x, n, y, r0, r1);
}

// Q5K: Q4K's tiles with the fifth bit (q in [0, 31]: sdot's int8 operands as they are).
void matmul_q5k_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                        uint32_t r1) {
  q4k_matmul<4, 4, 2, Q4kTile<Sdot, true>>(w, x, n, y, r0, r1);
}

void matmul_q6k_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                        uint32_t r1) {
  q6k_matmul<4, 4, 2, Q6kTile<Q6kSdot>>(w, x, n, y, r0, r1);
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_A64
