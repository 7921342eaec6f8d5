// aarch64 ARMv8.6 I8MM kernels (compiled with -march=armv8.2-a+dotprod+i8mm). smmla multiplies a
// 2x8 int8 block of two weight rows by the 8x2 block of two tokens into a 2x2 int32 tile: for
// prefill (n >= 2) one instruction does the work of two sdot, and a 32-group's 2x2 result (four
// smmla) is already fully reduced. The tiles are arm/neon.inc's row-lane tiles (LaneTile) over
// the product policy Smmla below: 4 rows (two row pairs) x 4 tokens (two token pairs), each
// group's two 2x2 results of a token pair unzipped into the row-lane layout (4 rows of a token in
// the lanes of one register), so the float side is the dotprod tiles' to the operation and every
// result equals theirs bit for bit (kShapeInvariant: exact rows run these tiles). Decode (n = 1)
// is the dotprod kernels'. An odd last token is computed as a pair with itself and one half kept.
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

// LaneTile's product policy (arm/neon.inc "Row-lane tiles") with smmla, two tokens a product:
//   weights  rows 0-1 and 2-3 as two pairs, each 4 registers: register k of pair p holds values
//            8k..8k+7 of its first row, then of its second (a 2x8 block); Q8 one ld4 by 64-bit
//            lane per row (post-indexed), Q4 one ld2 per row then Q4's unpack (lane 0 of the
//            first register holds bytes 0-7: values 0-7 low, 16-23 high; Q4_1's q as it is),
//            Q5 and Q5_1 the row-lane registers (LaneRows::group) zipped by pairs of rows
//   tokens   the same of the two tokens (one ld4 by 64-bit lane each)
//   products per pair four smmla give [r0 t0, r0 t1, r1 t0, r1 t1]; unzipped with the other
//            pair's, the rows of token 0 and of token 1 as 4 lanes each
// In asm, as arm/neon.inc's lane loads (and for the same reason): the weight loads into pinned
// registers (v24-v31); the token loads with the eight smmla (in v16-v19, clobbered), where GCC
// would give an accumulator the register of a token block and copy the block out of its way.
struct Smmla {
  static constexpr int kTokens = 2;

  template <bool Q4, bool kFive, bool kMin>
  [[gnu::always_inline]] static void weights(LaneRows<Q4, kFive, kMin>& rows, uint8x16_t f,
                                             int8x16_t* w) {
    LanePtrs& p = rows.w;
    if constexpr (!Q4) {
      register int8x16_t a0 asm("v24"), a1 asm("v25"), a2 asm("v26"), a3 asm("v27");
      register int8x16_t b0 asm("v28"), b1 asm("v29"), b2 asm("v30"), b3 asm("v31");
      asm volatile(
          "ld4 {%[a0].d - %[a3].d}[0], [%[p0]], #32\n\t"
          "ld4 {%[a0].d - %[a3].d}[1], [%[p1]], #32\n\t"
          "ld4 {%[b0].d - %[b3].d}[0], [%[p2]], #32\n\t"
          "ld4 {%[b0].d - %[b3].d}[1], [%[p3]], #32"
          : [a0] "=w"(a0), [a1] "=w"(a1), [a2] "=w"(a2), [a3] "=w"(a3), [b0] "=w"(b0),
            [b1] "=w"(b1), [b2] "=w"(b2), [b3] "=w"(b3), [p0] "+r"(p.p0), [p1] "+r"(p.p1),
            [p2] "+r"(p.p2), [p3] "+r"(p.p3)
          : "m"(span<32>(p.p0)), "m"(span<32>(p.p1)), "m"(span<32>(p.p2)),
            "m"(span<32>(p.p3)));
      w[0] = a0; w[1] = a1; w[2] = a2; w[3] = a3;
      w[4] = b0; w[5] = b1; w[6] = b2; w[7] = b3;
    } else if constexpr (!kFive) {
      (void)f;
      register int8x16_t a0 asm("v24"), a1 asm("v25"), b0 asm("v26"), b1 asm("v27");
      asm volatile(
          "ld2 {%[a0].d, %[a1].d}[0], [%[p0]], #16\n\t"
          "ld2 {%[a0].d, %[a1].d}[1], [%[p1]], #16\n\t"
          "ld2 {%[b0].d, %[b1].d}[0], [%[p2]], #16\n\t"
          "ld2 {%[b0].d, %[b1].d}[1], [%[p3]], #16"
          : [a0] "=w"(a0), [a1] "=w"(a1), [b0] "=w"(b0), [b1] "=w"(b1), [p0] "+r"(p.p0),
            [p1] "+r"(p.p1), [p2] "+r"(p.p2), [p3] "+r"(p.p3)
          : "m"(span<16>(p.p0)), "m"(span<16>(p.p1)), "m"(span<16>(p.p2)),
            "m"(span<16>(p.p3)));
      const int8x16_t q[4] = {a0, a1, b0, b1};
      for (int h = 0; h < 2; ++h) {  // pair h: blocks 0, 1 low nibbles, 2, 3 high
        if constexpr (kMin) {  // Q4_1: the nibbles as they are
          const uint8x16_t lo = vdupq_n_u8(0x0f);
          w[4 * h] = vandq_s8(q[2 * h], vreinterpretq_s8_u8(lo));
          w[4 * h + 1] = vandq_s8(q[2 * h + 1], vreinterpretq_s8_u8(lo));
          w[4 * h + 2] = vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(q[2 * h]), 4));
          w[4 * h + 3] = vreinterpretq_s8_u8(vshrq_n_u8(vreinterpretq_u8_s8(q[2 * h + 1]), 4));
        } else {
          w[4 * h] = vshrq_n_s8(vshlq_n_s8(q[2 * h], 4), 4);
          w[4 * h + 1] = vshrq_n_s8(vshlq_n_s8(q[2 * h + 1], 4), 4);
          w[4 * h + 2] = vshrq_n_s8(q[2 * h], 4);
          w[4 * h + 3] = vshrq_n_s8(q[2 * h + 1], 4);
        }
      }
    } else {
      int8x16_t l[8];
      rows.group(f, l);
      for (int k = 0; k < 4; ++k) {
        const int32x4_t u = vreinterpretq_s32_s8(l[2 * k]), v = vreinterpretq_s32_s8(l[2 * k + 1]);
        w[k] = vreinterpretq_s8_s32(vzip1q_s32(u, v));
        w[4 + k] = vreinterpretq_s8_s32(vzip2q_s32(u, v));
      }
    }
  }

  [[gnu::always_inline]] static void products(const int8x16_t* w, const int8_t** x,
                                              int32x4_t* s) {
    int32x4_t a, b;
    asm volatile(
        "ld4 {v16.d - v19.d}[0], [%[p0]], #32\n\t"
        "ld4 {v16.d - v19.d}[1], [%[p1]], #32\n\t"
        "movi %[a].4s, #0\n\t"
        "movi %[b].4s, #0\n\t"
        "smmla %[a].4s, %[w0].16b, v16.16b\n\t"
        "smmla %[b].4s, %[w4].16b, v16.16b\n\t"
        "smmla %[a].4s, %[w1].16b, v17.16b\n\t"
        "smmla %[b].4s, %[w5].16b, v17.16b\n\t"
        "smmla %[a].4s, %[w2].16b, v18.16b\n\t"
        "smmla %[b].4s, %[w6].16b, v18.16b\n\t"
        "smmla %[a].4s, %[w3].16b, v19.16b\n\t"
        "smmla %[b].4s, %[w7].16b, v19.16b"
        : [a] "=&w"(a), [b] "=&w"(b), [p0] "+r"(x[0]), [p1] "+r"(x[1])
        : [w0] "w"(w[0]), [w1] "w"(w[1]), [w2] "w"(w[2]), [w3] "w"(w[3]), [w4] "w"(w[4]),
          [w5] "w"(w[5]), [w6] "w"(w[6]), [w7] "w"(w[7]),
          "m"(span<32>(x[0])), "m"(span<32>(x[1]))
        : "v16", "v17", "v18", "v19");
    s[0] = vuzp1q_s32(a, b);
    s[1] = vuzp2q_s32(a, b);
  }
};

}  // namespace

// Decode (n = 1) is the dotprod kernels'.
void matmul_q8_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1) return matmul_q8_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 4, LaneTile<false, Smmla>>(w, x, n, y, r0, r1);
}

void matmul_q4_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1) return matmul_q4_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 4, LaneTile<true, Smmla>>(w, x, n, y, r0, r1);
}

// Q5: Q4's tiles with the fifth bit (q - 16 in [-16, 15]: smmla's int8 operands).
void matmul_q5_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  if (n == 1) return matmul_q5_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 4, LaneTile<true, Smmla, true>>(w, x, n, y, r0, r1);
}

// Q4_1 / Q5_1: Q4's / Q5's tiles over q as it is (0..15 / 0..31: smmla's int8 operands), with
// the (d, m) pairs and the min term.
void matmul_q4_1_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  if (n == 1) return matmul_q4_1_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 4, LaneTile<true, Smmla, false, true>>(w, x, n, y, r0, r1);
}

void matmul_q5_1_i8mm(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  if (n == 1) return matmul_q5_1_dotprod(w, x, n, y, r0, r1);
  quant_matmul<4, 4, 4, LaneTile<true, Smmla, true, true>>(w, x, n, y, r0, r1);
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
