// x86-64 AVX-512 (F/BW/VL) + VNNI kernels for the quantized matmuls, the softmax and the f32 / f16
// attention (compiled with -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c);
// every other entry is the AVX2 kernel (float matmuls stream 2-4 bytes per weight and are
// memory-bound either way; the other elementwise kernels are a rounding error of a token's time,
// where attention at depth is not: below, "f32 / f16 attention").
//
// One zmm holds two 32-groups (lanes 0-7: group g, lanes 8-15: group g+1). vpdpbusd multiplies
// unsigned by signed bytes, so one side is offset into unsigned range and the offset's
// contribution, which depends only on the activations, is removed by starting the int32
// accumulator at its negation (computed once per token and shared by all rows of the tile):
//   Q8: u = w + 128 (w xor 0x80), sum(u x) - 128 sum(x) = sum(w x), exact for every int8 w, x
//   Q4: u = v + 8 (nibble xor 8),  sum(u x) -   8 sum(x) = sum(v x)
//   Q5: u = q (nibble | 16 * fifth bit, unsigned already), sum(q x) - 16 sum(x) = sum((q - 16) x)
// Q4 / Q5 (and Q8 rows too wide for BlockQ8's stack buffer, VnniQ8): the int32 lanes are
// converted and scaled by [s_g x8 | s_g+1 x8] (w_scale * x_scale); decode 8 adjacent rows x 1
// token (Q8: 4 rows; Q4 and Q4K rows of whole cache lines: 4 strided rows, q4k_strided_decode),
// prefill 4 rows x 4 tokens.
// Q8: BlockQ8 (below) finishes each group's integer sum in its own lane before converting, for
// every token count: decode by a reduction tree, 2+ tokens (verification passes, beam steps,
// prefill) by weights transposed once per row block for up to 10 tokens.
// Q4K: Q4Quad's walk over unsigned nibbles (no offset), with per-super-block scales (Q4kQuad);
// prefill on Q4_1's block sums with the super-blocks' levels as its (d, m) (BlockQ4<.., kK>).
// Q5K: Q4K's walk with each group's fifth bits merged into its nibbles as 16 (Q4kQuad<true>;
// prefill BlockQ4 with them); Q5: Q4's walk with them (Q4Quad<true>).
// Q4_1 / Q5_1: Q4's / Q5's walk over q as it is (unsigned: no offset, no correction), scaled by
// d per group and the min term m * x_sum added per block of 8 groups (Q4Quad<false / true, true>).
// Q6K: Q4kQuad's walk over the 6-bit values, offset 32 removed per token as Q4's 8, the two
// sub-block scales of a group applied in integers, the activations' side prepared once per call
// (Q6kPrep; Q6kQuad, which prepares it per tile, for rows too wide for its stack buffer).
#include "isa.h"

#if defined(RINGLM_KERNELS_X86)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512VNNI__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx512.cc needs -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "x86/x86.inc"

namespace ringlm::internal {
namespace {

using namespace x86;

// Upper 256 bits (AVX512F only: extractf32x8 would need DQ).
inline __m256 hi256(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// [lo | hi] (AVX512F only: insertf32x8 would need DQ).
inline __m512 concat256(__m256 lo, __m256 hi) {
  return _mm512_castpd_ps(_mm512_insertf64x4(_mm512_castpd256_pd512(_mm256_castps_pd(lo)),
                                             _mm256_castps_pd(hi), 1));
}

// The halves added, then hsum's order: what store_tile512's 4-row path gives every lane (and
// hsum512x8 each of its vectors), so rows reduce alike in every tile shape (kShapeInvariant).
[[gnu::always_inline]] inline float hsum512(__m512 v) { return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi256(v))); }

template <int R, int T>
inline void store_tile512(const __m512 (&acc)[R][T], float* Y, size_t y_stride, size_t y_step = 1) {
  if (y_step != 1) {  // a strided decode view's rows (one token): the same sums, lane by lane
    for (int j = 0; j < T; ++j)
      for (int i = 0; i < R; ++i) Y[j * y_stride + i * y_step] = hsum512(acc[i][j]);
    return;
  }
  for (int j = 0; j < T; ++j) {
    if constexpr (R == 4) {
      const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(acc[0][j]),
                                     hi256(acc[0][j]));
      const __m256 b = _mm256_add_ps(_mm512_castps512_ps256(acc[1][j]),
                                     hi256(acc[1][j]));
      const __m256 c = _mm256_add_ps(_mm512_castps512_ps256(acc[2][j]),
                                     hi256(acc[2][j]));
      const __m256 d = _mm256_add_ps(_mm512_castps512_ps256(acc[3][j]),
                                     hi256(acc[3][j]));
      _mm_storeu_ps(Y + j * y_stride, hsum4(a, b, c, d));
    } else {
      for (int i = 0; i < R; ++i) Y[j * y_stride + i] = hsum512(acc[i][j]);
    }
  }
}

// hsum512 of eight vectors at once, bit for bit: the same additions in the same pairing (halves,
// then adjacent lanes, then adjacent pairs, then the two 128-bit quarters), eight vectors per
// instruction instead of one. Returns [v0 v2 v4 v6 v1 v3 v5 v7].
[[gnu::always_inline]] inline __m256 hsum512x8(const __m512 (&v)[8]) {
  __m512 s[4];
  for (int k = 0; k < 4; ++k)  // [v2k lo + hi | v2k+1 lo + hi]: hsum512's halves
    s[k] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0x44),
                         _mm512_shuffle_f32x4(v[2 * k], v[2 * k + 1], 0xee));
  __m512 u[2];
  for (int k = 0; k < 2; ++k)  // per 128-bit lane [a0+a1, a2+a3, b0+b1, b2+b3]: hadd's pairs
    u[k] = _mm512_add_ps(_mm512_shuffle_ps(s[2 * k], s[2 * k + 1], 0x88),
                         _mm512_shuffle_ps(s[2 * k], s[2 * k + 1], 0xdd));
  // (x0+x1) + (x2+x3): the second hadd
  const __m512 w = _mm512_add_ps(_mm512_shuffle_ps(u[0], u[1], 0x88), _mm512_shuffle_ps(u[0], u[1], 0xdd));
  // the low quarter's sum + the high quarter's (hsum's final add_ss)
  const __m512 q = _mm512_add_ps(_mm512_shuffle_f32x4(w, w, 0x88), _mm512_shuffle_f32x4(w, w, 0xdd));
  return _mm512_castps512_ps256(q);
}

// q4k_levels (x86.inc) in one zmm: the 16 level bytes widened and converted together, times
// [d x 8, dmin x 8]: the same two products per lane (float(sc) x d, float(m) x dmin), so the same
// floats, in ~7 vector ops where two ymm halves took ~13 (a super-block's levels were about half
// of a 576-column Q4K decode row's ops).
[[gnu::always_inline]] inline void q4k_levels512(const uint16_t* dm_pair, const uint8_t* levels,
                                                 __m256* dl, __m256* ml) {
  uint32_t dm_bits;
  memcpy(&dm_bits, dm_pair, sizeof dm_bits);
  const __m128 dm = _mm_cvtph_ps(_mm_cvtsi32_si128(static_cast<int>(dm_bits)));  // d, dmin
  const __m512 dmv = _mm512_permutexvar_ps(
      _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1), _mm512_castps128_ps512(dm));
  const __m512 lv = _mm512_cvtepi32_ps(
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(levels))));
  const __m512 v = _mm512_mul_ps(lv, dmv);
  *dl = _mm512_castps512_ps256(v);
  *ml = _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// Lane indices spreading block scales sc[2k], sc[2k+1] over a zmm (8 lanes each).
inline __m512i pair_index(uint32_t k) {
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(2 * k));
  return _mm512_mask_add_epi32(lo, 0xff00, lo, _mm512_set1_epi32(1));
}

// Q8, two groups per step, for rows wider than BlockQ8's stack buffer takes (~52k columns), at
// every token count: the same integer dot products, scales, fma order (one accumulator per
// element) and reduction in every tile shape (kShapeInvariant, so kMatmulExactRows costs nothing).
struct VnniQ8 : QuantMat {
  static constexpr bool kQ4 = false;
  static constexpr bool kShapeInvariant = true;

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, WSr, Xt, XSt, xs_stride] = at(r, t);
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    __m512 acc[R][T] = {};  // zeros
    alignas(32) float sc[R][T][8];
    for (uint32_t gb = 0; gb < groups; gb += 8) {
      const uint32_t nb = groups - gb < 8 ? groups - gb : 8;
      block_scales<R, T>(WSr, groups, XSt, xs_stride, gb, nb, sc);
      for (uint32_t k = 0; 2 * k < nb; ++k) {
        const size_t g = gb + 2 * k;
        const bool half = 2 * k + 1 == nb;
        const __m512i idx = pair_index(k);
        __m512i u[R];
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = Wr + i * w_row_bytes + g * kQuantGroup;
          prefetch(p + kPrefetchBytes);
          // w + 128 (see the top of the file); the upper group zero when `half`
          const __m512i wv = half ? _mm512_maskz_loadu_epi8(0xffffffffull, p) : _mm512_loadu_si512(p);
          u[i] = _mm512_xor_si512(wv, offset);
        }
        for (int j = 0; j < T; ++j) {
          const int8_t* xp = Xt + j * x_stride + g * kQuantGroup;
          const __m512i xv = half ? _mm512_maskz_loadu_epi8(0xffffffffull, xp) : _mm512_loadu_si512(xp);
          const __m512i neg =
              _mm512_sub_epi32(_mm512_setzero_si512(), _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xv));
          for (int i = 0; i < R; ++i) {
            const __m512 d = _mm512_cvtepi32_ps(_mm512_dpbusd_epi32(neg, u[i], xv));
            const __m512 s = _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][j])));
            acc[i][j] = _mm512_fmadd_ps(d, s, acc[i][j]);
          }
        }
      }
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};


// Q5 / Q5K: q = nibble | 16 * fifth bit in [0, 31] of four groups, values 0..15 into *qlo and
// 16..31 into *qhi (as the nibbles' 64 bytes b hold them), from the groups' 16 fifth-bit bytes at h
// (4 a group, bit k of byte j: value 4k + j's; only the first ng groups' read). They go as:
//   vpermd: group L's 4 bytes into every dword of 128-bit lane L (the lane of its nibble bytes;
//      byte j of dword k then holds the bits of values 4k + j and 16 + 4k + j, qlo's and qhi's
//      byte 4k + j).
//   vpand: dword k keeps bits k and k + 4 of its bytes; vprolvd by 4 - k: the qlo bit (k) to bit
//      4 of its byte, the qhi bit (k + 4) to bit 0 of the next byte (byte 3's: of byte 0).
//   qlo = vpternlogd: the low nibbles, that bit 4 above them (the rest of bits 4-7 is zero).
//   qhi = vprord 4 of vpternlogd(the high nibbles, bit 0 below them): each byte takes its own high
//      nibble down and the next byte's bit 0 to bit 4, which is its qhi bit (byte 3: byte 0's, the
//      dword rotating) - the rotate replacing the nibbles' vpsrlw.
// 6 vector ops (and a register copy: vpternlogd overwrites its first input), where the plain
// nibbles take 3.
inline void merge_fifth_bits(__m512i b, const uint8_t* h, uint32_t ng, __m512i* qlo,
                             __m512i* qhi) {
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const __m512i quad_of_lane = _mm512_srli_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  // dword k of every lane keeps bits k, k + 4 of its bytes, rotated by 4 - k
  const __m512i keep = _mm512_set4_epi32(static_cast<int>(0x88888888u), 0x44444444, 0x22222222,
                                         0x11111111);
  const __m512i rot = _mm512_set4_epi32(1, 2, 3, 4);
  const __mmask16 hmask = static_cast<__mmask16>((1u << (4 * ng)) - 1);
  const __m128i hv = ng == 4 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(h))
                             : _mm_maskz_loadu_epi8(hmask, h);
  const __m512i hb = _mm512_rolv_epi32(
      _mm512_and_si512(_mm512_permutexvar_epi32(quad_of_lane, _mm512_castsi128_si512(hv)), keep),
      rot);
  *qlo = _mm512_ternarylogic_epi32(b, hb, nib, 0xe4);  // (b & nib) | (hb & ~nib)
  *qhi = _mm512_ror_epi32(_mm512_ternarylogic_epi32(b, hb, nib, 0xd8), 4);  // b & ~nib | hb & nib
}

// Q4 / Q5, four groups per step: 64 packed bytes hold groups g..g+3; their low nibbles are values
// 0..15 and their high nibbles values 16..31 of each group, so with the activations regrouped
// once per token (xlo = x[0..15] of the four groups, xhi = x[16..31]; shared by every row) a
// row's four groups cost one load, three logic ops and two vpdpbusd, and int32 lanes 4k..4k+3
// belong to group g+k. Decode per row and four groups: 3 + 5 ops (2 vpdpbusd, the scales'
// vpermps, vcvtdq2ps, vfmadd), 2 a group.
// kFive: Q5, the fifth bits of HI merged into the nibbles (merge_fifth_bits: 6 ops for the 3, 2.75
// a group in decode) and offset 16 for 8 (31 * 127 fits vpdpbusd's products as 15 * 127 does);
// else Q4 (HI null, unread).
// kMin: Q4_1 (Q4's walk) or Q5_1 (Q5's), q unsigned as it is: no offset and no correction (the
// int32 accumulator starts at 0), the scales d * x_scale from the (d, m) pairs and the min term
// m * x_sum added to the accumulator's lower 8 lanes once per block of 8 groups, row and token
// (block_scales_dm). Decode per group and row: Q4_1 2 as Q4 (vpand, vpsrlw, vpand for Q4's two
// vpternlogd and vpsrlw), Q5_1 2.75 as Q5; and per block and row 8 for the pairs and the min term
// where block_scales takes 2: one more op a group than Q4 / Q5 (the pairs are twice the bytes).
// kStrided: decode_walk's strided tiles (four long streams; q4k_strided_decode), else adjacent
// rows.
template <bool kFive, bool kMin = false, bool kStrided = false>
struct Q4Quad : QuantMat {
  static constexpr bool kQ4 = true;
  // Per-element fma order; store_tile512 (the fifth bits and the offset only change the
  // integers, exact either way; Q4_1 / Q5_1's min term is one fma per block in block order).
  static constexpr bool kShapeInvariant = true;
  static constexpr bool kRowStep = kStrided;
  Q4Quad strided(uint32_t r, uint32_t step) const {
    Q4Quad k;
    static_cast<QuantMat&>(k) = strided_view(r, step);
    return k;
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, WSr, Xt, XSt, xs_stride] = at(r, t);
    const uint8_t* Hr = kFive ? HI + r * hi_row_bytes : nullptr;  // Q5, Q5_1: row r's fifth bits
    const float* XMt = kMin ? XSUM + t * xs_stride : nullptr;     // Q4_1, Q5_1: token t's sums
    const __m512i offset = _mm512_set1_epi8(kFive ? 16 : 8);  // Q4 / Q5: the unsigned offset
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    __m512 acc[R][T] = {};  // zeros
    alignas(32) float sc[R][T][8];
    for (uint32_t gb = 0; gb < groups; gb += 8) {
      const uint32_t nb = groups - gb < 8 ? groups - gb : 8;
      if constexpr (kMin) {
        block_scales_dm<R, T>(WSr, ws_row, XSt, XMt, xs_stride, gb, nb, sc, acc,
                              [](__m256 m, __m256 xm, __m512 a) {
                                return _mm512_fmadd_ps(_mm512_zextps256_ps512(m),
                                                       _mm512_zextps256_ps512(xm), a);
                              });
        // The (d, m) plane: 4 bytes a group, as the fifth bits (x86.inc).
        for (int i = 0; i < R; ++i) {
          prefetch_fifth_bits(reinterpret_cast<const uint8_t*>(WSr + i * ws_row), gb / 8);
        }
      } else {
        block_scales<R, T>(WSr, ws_row, XSt, xs_stride, gb, nb, sc);  // ws_row: groups, or a strided view's
      }
      if constexpr (kFive) {
        // A block's 8 groups of fifth bits are a Q5K super-block's: its prefetch, out of the
        // quad loop as there.
        for (int i = 0; i < R; ++i) prefetch_fifth_bits(Hr + i * hi_row_bytes, gb / 8);
      }
      for (uint32_t q = 0; 4 * q < nb; ++q) {
        const size_t g = gb + 4 * q;
        const uint32_t ng = nb - 4 * q < 4 ? nb - 4 * q : 4;  // groups in this quad
        const __mmask64 wmask = ng == 4 ? ~0ull : (1ull << (16 * ng)) - 1;
        const __mmask64 xmask_a = ng >= 2 ? ~0ull : (1ull << (32 * ng)) - 1;
        const __mmask64 xmask_b = ng == 4 ? ~0ull : ng <= 2 ? 0 : (1ull << (32 * (ng - 2))) - 1;
        const __m512i idx = _mm512_srli_epi32(
            _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
        const __m512i sidx = _mm512_add_epi32(idx, _mm512_set1_epi32(static_cast<int>(4 * q)));
        __m512i ulo[R], uhi[R];
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = Wr + i * w_row_bytes + g * 16;
          prefetch(p + kPrefetchBytes);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(wmask, p);
          if constexpr (kFive) {
            const uint8_t* h = Hr + i * hi_row_bytes + g * (kQuantGroup / 8);
            merge_fifth_bits(b, h, ng, &ulo[i], &uhi[i]);
          } else if constexpr (kMin) {  // Q4_1: unsigned already
            ulo[i] = _mm512_and_si512(b, nib);
            uhi[i] = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
          } else {
            ulo[i] = _mm512_ternarylogic_epi32(b, nib, offset, 0x6a);  // (b & 0x0f) ^ 8
            uhi[i] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 4), nib, offset, 0x6a);
          }
        }
        for (int j = 0; j < T; ++j) {
          const int8_t* xp = Xt + j * x_stride + g * kQuantGroup;
          const __m512i a = ng >= 2 ? _mm512_loadu_si512(xp) : _mm512_maskz_loadu_epi8(xmask_a, xp);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(xp + 64)
                                    : _mm512_maskz_loadu_epi8(xmask_b, xp + 64);
          const __m512i xlo = _mm512_permutex2var_epi64(a, lo_idx, b);
          const __m512i xhi = _mm512_permutex2var_epi64(a, hi_idx, b);
          // Q4 / Q5: the offset's contribution, negated; Q4_1 / Q5_1: none.
          const __m512i neg =
              kMin ? _mm512_setzero_si512()
                   : _mm512_sub_epi32(_mm512_setzero_si512(),
                                      _mm512_dpbusd_epi32(
                                          _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xlo),
                                          offset, xhi));
          for (int i = 0; i < R; ++i) {
            const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg, ulo[i], xlo), uhi[i], xhi);
            const __m512 s = _mm512_permutexvar_ps(sidx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][j])));
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s, acc[i][j]);
          }
        }
      }
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride, y_step);
  }
};

// ---- Q8: block sums, one int32 lane per group ------------------------------------------------
// Converting, scaling and accumulating every 64-byte step of every (row, token) pair (VnniQ8: four
// vector ops per 64 multiply-adds) bounds a many-token call at the compute side: a speculative
// verification pass of 1+K rows, a beam step, prefill. Here each group's integer dot product is
// finished in its own int32 lane first, so one convert, one multiply (the two scales) and one fma
// finish 16 groups (a block: 512 bytes of a row). Two ways give the same 16 exact sums:
//   - decode (one token): the block's eight vectors in memory order, one vpdpbusd each (eight
//     independent chains), then a reduction tree of 21 shuffles and adds (reduce_block);
//   - several tokens: the weights transposed by dwords once per block (transpose_block: 24
//     shuffles, shared by every token of the tile) and the activations the same way once per call,
//     so eight vpdpbusd per token give the sums: ~11 vector ops per row, token and block.
// Both leave group sigma(L) in lane L (what the tree's unpacks and 128-bit shuffles give):
//   sigma = 0 4 2 6 1 5 3 7 | 8 12 10 14 9 13 11 15
// and every later operation is shared: cvt, (w scale x x scale) in sigma order, fma per block in
// block order, the tail pairs (below), hsum512. So every output element takes the same operations
// in the same order whatever the number of tokens or the tile (kShapeInvariant): decode, a
// verification pass (kMatmulExactRows) and prefill give a row the same float, bit for bit.
//
// Groups past the last whole block (SmolLM2's 576 columns: 18 groups = 1 block + 2) take a pair
// step (one vpdpbusd per two groups, then convert, scale, fma; the lanes hold 4-product partial
// sums of group g (0-7) and g+1 (8-15)): a transposed block of zeros would cost a whole block.
// Tails of odd group counts: the upper group of the last pair is zero in weights, activations
// and scales, so it adds 0 x 0.
constexpr uint32_t kBlockGroups = 16;
// Prepared activations of one token: per whole block xt[8] (64 B each, the block transposed as
// the weights are), int32 x 16: -128 x (sum of group sigma(L)), float x 16: scale of group
// sigma(L); then per tail pair its 64 bytes as they are (the upper 32 zero when the pair has one
// group), int32 x 16: -128 x (each lane's 4 bytes), float x 16: [scale g x 8 | scale g+1 x 8].
constexpr size_t kPrepXt = 0, kPrepNeg = 512, kPrepScale = 576, kPrepBlockBytes = 640;
constexpr size_t kPairNeg = 64, kPairScale = 128, kPrepPairBytes = 192;
// Stack buffer for the prepared tokens of one chunk (a matmul over more tokens takes several
// chunks, each reading the weights again: at 64 KiB a SmolLM2-shape row of 576 / 1536 columns
// leaves 78 / 34 tokens per chunk). Worker stacks are 256 KiB (platform/threads.h).
constexpr size_t kPrepBytes = 64 * 1024;
// Tokens per multi-token tile: 8 transposed weight vectors + 10 sums + 10 accumulators fit the
// 32 zmm registers (two rows x 8 tokens spilled). A 1+8-token verification pass is one tile
// (measured, SmolLM2's 1536 x 576 in cache: 9 tokens 29 ms per 256 MiB as one tile, 34 as 5 + 4).
constexpr int kMaxTileTokens = 10;

inline __m512i sigma_index() {
  return _mm512_setr_epi32(0, 4, 2, 6, 1, 5, 3, 7, 8, 12, 10, 14, 9, 13, 11, 15);
}

// v[c] (c = 0..7): bytes [64c, 64c+64) of a block (lanes 0-7: group 2c by dword, 8-15: 2c+1).
// Afterwards the lane-wise sum over m of v[m] is reduce_block(v as it was): lane L of every v[m]
// holds one dword of group sigma(L). The same three levels as reduce_block, each keeping both
// halves of an unpack (or 128-bit shuffle) pair instead of adding them.
[[gnu::always_inline]] inline void transpose_block(__m512i (&v)[8]) {
  __m512i a[8], b[8];
  for (int k = 0; k < 4; ++k) {
    a[2 * k] = _mm512_unpacklo_epi32(v[2 * k], v[2 * k + 1]);
    a[2 * k + 1] = _mm512_unpackhi_epi32(v[2 * k], v[2 * k + 1]);
  }
  for (int h = 0; h < 2; ++h) {
    const __m512i* e = a + 4 * h;  // e[0] + e[1] and e[2] + e[3]: reduce_block's two inputs
    b[4 * h + 0] = _mm512_unpacklo_epi32(e[0], e[2]);
    b[4 * h + 1] = _mm512_unpackhi_epi32(e[0], e[2]);
    b[4 * h + 2] = _mm512_unpacklo_epi32(e[1], e[3]);
    b[4 * h + 3] = _mm512_unpackhi_epi32(e[1], e[3]);
  }
  for (int i = 0; i < 4; ++i) {
    v[2 * i] = _mm512_shuffle_i32x4(b[i], b[4 + i], 0x88);      // 128-bit lanes 0, 2 | 0, 2
    v[2 * i + 1] = _mm512_shuffle_i32x4(b[i], b[4 + i], 0xdd);  // 1, 3 | 1, 3
  }
}

// The 16 lane sums of d[0..7] laid out as above: d[c] lanes 0-7 add into group 2c's lane, 8-15
// into 2c+1's. (unpacklo + unpackhi of a pair: each 128-bit lane [A0+A2, B0+B2, A1+A3, B1+B3].)
[[gnu::always_inline]] inline __m512i reduce_block(const __m512i (&d)[8]) {
  __m512i e[4];
  for (int k = 0; k < 4; ++k)
    e[k] = _mm512_add_epi32(_mm512_unpacklo_epi32(d[2 * k], d[2 * k + 1]),
                            _mm512_unpackhi_epi32(d[2 * k], d[2 * k + 1]));
  const __m512i f0 = _mm512_add_epi32(_mm512_unpacklo_epi32(e[0], e[1]), _mm512_unpackhi_epi32(e[0], e[1]));
  const __m512i f1 = _mm512_add_epi32(_mm512_unpacklo_epi32(e[2], e[3]), _mm512_unpackhi_epi32(e[2], e[3]));
  return _mm512_add_epi32(_mm512_shuffle_i32x4(f0, f1, 0x88), _mm512_shuffle_i32x4(f0, f1, 0xdd));
}

// The 64 bytes of tail pair k (groups 2k, 2k+1 from `g0`) of a row or activation row p; the upper
// half zero when group 2k+1 is past the row's `groups`.
[[gnu::always_inline]] inline __m512i load_pair(const void* p, uint32_t g0, uint32_t groups, uint32_t k) {
  const uint8_t* q = static_cast<const uint8_t*>(p) + (static_cast<size_t>(g0) + 2 * k) * 32;
  return g0 + 2 * k + 1 < groups ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi8(0xffffffffull, q);
}

// Prepares `n` tokens of x (token t at x.qs + t * x.stride) with `groups` groups each into P
// (token t at P + t * p_stride).
void prep_tokens(const QuantActs& x, uint32_t n, uint32_t groups, bool tail8, size_t p_stride,
                 uint8_t* P) {
  const uint32_t blocks = groups / kBlockGroups, g0 = blocks * kBlockGroups;
  const uint32_t pairs = tail8 ? 0 : (groups - g0 + 1) / 2;
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  const __m512i zero = _mm512_setzero_si512();
  for (uint32_t t = 0; t < n; ++t) {
    const int8_t* xq = x.qs + static_cast<size_t>(t) * x.stride;
    const float* xs = x.scales + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    uint8_t* o = P + t * p_stride;
    for (uint32_t b = 0; b < blocks; ++b, o += kPrepBlockBytes) {
      __m512i v[8];
      for (int c = 0; c < 8; ++c) v[c] = _mm512_loadu_si512(xq + b * 512 + 64 * c);
      transpose_block(v);
      __m512i sum = zero;
      for (int m = 0; m < 8; ++m) {
        _mm512_store_si512(o + kPrepXt + 64 * m, v[m]);
        sum = _mm512_dpbusd_epi32(sum, offset, v[m]);
      }
      _mm512_store_si512(o + kPrepNeg, _mm512_sub_epi32(zero, sum));
      const __m512 s = _mm512_loadu_ps(xs + b * kBlockGroups);
      _mm512_store_ps(reinterpret_cast<float*>(o + kPrepScale),
                      _mm512_permutexvar_ps(sigma_index(), s));
    }
    if (tail8) {
      // The two tail groups as eight rows' tails see them (BlockQ8::tail8): eight copies of
      // their 64 bytes, transposed as the weights' rows are; virtual group v is tail group v % 2.
      __m512i v[8];
      for (int c = 0; c < 8; ++c) v[c] = _mm512_loadu_si512(xq + g0 * kQuantGroup);
      transpose_block(v);
      __m512i sum = zero;
      for (int m = 0; m < 8; ++m) {
        _mm512_store_si512(o + kPrepXt + 64 * m, v[m]);
        sum = _mm512_dpbusd_epi32(sum, offset, v[m]);
      }
      _mm512_store_si512(o + kPrepNeg, _mm512_sub_epi32(zero, sum));
      const __m512 s2 = _mm512_permutexvar_ps(  // lane v: the scale of tail group v % 2
          _mm512_set1_epi64(0x0000000100000000ll), _mm512_castps128_ps512(_mm_castpd_ps(
                                                        _mm_load_sd(reinterpret_cast<const double*>(xs + g0)))));
      _mm512_store_ps(reinterpret_cast<float*>(o + kPrepScale), _mm512_permutexvar_ps(sigma_index(), s2));
    }
    for (uint32_t k = 0; k < pairs; ++k, o += kPrepPairBytes) {
      const __m512i v = load_pair(xq, g0, groups, k);
      _mm512_store_si512(o, v);
      _mm512_store_si512(o + kPairNeg, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, offset, v)));
      const bool two = g0 + 2 * k + 1 < groups;
      const __m512 s = _mm512_maskz_loadu_ps(two ? 0x3 : 0x1, xs + g0 + 2 * k);
      _mm512_store_ps(reinterpret_cast<float*>(o + kPairScale),
                      _mm512_permutexvar_ps(pair_index(0), s));
    }
  }
}

// Y[j * y_stride] = hsum512(acc[j]) for j < T, eight at a time through hsum512x8.
template <int T>
[[gnu::always_inline]] inline void store_sums(const __m512 (&acc)[T], float* Y, size_t y_stride) {
  constexpr int kOrder[8] = {0, 4, 1, 5, 2, 6, 3, 7};  // lane of v[j] in hsum512x8's result
  for (int j0 = 0; j0 < T; j0 += 8) {
    if (T - j0 == 1) {
      Y[j0 * y_stride] = hsum512(acc[j0]);
      break;
    }
    __m512 v[8];
    for (int j = 0; j < 8; ++j) v[j] = j0 + j < T ? acc[j0 + j] : _mm512_setzero_ps();
    alignas(32) float out[8];
    _mm256_store_ps(out, hsum512x8(v));
    for (int j = 0; j < 8 && j0 + j < T; ++j) Y[(j0 + j) * y_stride] = out[kOrder[j]];
  }
}

// The exact sums of one transposed block u (8 vectors, group sigma(L) in lane L) with the T
// tokens' prepared blocks at pb[j]: their transposed activations at xt_off, their int32
// corrections at neg_off. Up to 4 tokens, each sum runs as two vpdpbusd chains (even / odd m;
// int32 adds are exact, so the split changes nothing) for the out-of-order core to overlap.
template <int T>
[[gnu::always_inline]] inline void block_isums(const __m512i (&u)[8], const uint8_t* const (&pb)[T],
                                               size_t xt_off, size_t neg_off, __m512i (&isum)[T]) {
  constexpr int K = T <= 4 ? 2 : 1;
  __m512i d[T][K];
  _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
    d[j][0] = _mm512_load_si512(pb[j] + neg_off);
    if constexpr (K == 2) d[j][1] = _mm512_setzero_si512();
  }
  _Pragma("GCC unroll 16") for (int m = 0; m < 8; ++m) {
    _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j)
      d[j][m % K] = _mm512_dpbusd_epi32(d[j][m % K], u[m], _mm512_load_si512(pb[j] + xt_off + 64 * m));
  }
  _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
    isum[j] = d[j][0];
    if constexpr (K == 2) isum[j] = _mm512_add_epi32(isum[j], d[j][1]);
  }
}

// Tokens [t, t+width) of row r (1 <= width <= kMaxTileTokens) through K::row_tokens<width>.
template <class K>
[[gnu::always_inline]] inline void block_tile(const K& k, uint32_t r, uint32_t t, uint32_t width) {
  switch (width) {
    case 10: return k.template row_tokens<10>(r, t);
    case 9: return k.template row_tokens<9>(r, t);
    case 8: return k.template row_tokens<8>(r, t);
    case 7: return k.template row_tokens<7>(r, t);
    case 6: return k.template row_tokens<6>(r, t);
    case 5: return k.template row_tokens<5>(r, t);
    case 4: return k.template row_tokens<4>(r, t);
    case 3: return k.template row_tokens<3>(r, t);
    case 2: return k.template row_tokens<2>(r, t);
    case 1: return k.template row_tokens<1>(r, t);  // a last chunk of one token
    default: return;
  }
}

// Rows [r0, r1) x tokens [0, n) of a block-sum kernel K (BlockQ8, BlockQ4): the tokens in the
// fewest tiles of at most kMaxTileTokens, their widths balanced (9 tokens: one tile; 12: 6 + 6,
// not 10 + 2), and the rows in blocks of kBlockRows: per block, tiles outer and rows inner, so a
// tile's prepared activations stay in L1 across the block's rows and the block's weights in L1 /
// L2 across its tiles (rows outer and tiles inner read the whole prep buffer, L2-sized, for every
// row: prefill of 128 tokens ran ~1.6x slower per token than a 9-token pass). With K::tail8, the
// rows' two-group tails after each tile's rows, eight rows at a time.
constexpr uint32_t kBlockRows = 16;
template <class K>
void block_rows_all(const K& k, uint32_t r0, uint32_t r1, uint32_t n) {
  const uint32_t tiles = (n + kMaxTileTokens - 1) / kMaxTileTokens;
  const uint32_t base = n / tiles, extra = n % tiles;
  for (uint32_t rb = r0; rb < r1; rb += kBlockRows) {
    const uint32_t re = r1 - rb < kBlockRows ? r1 : rb + kBlockRows;
    uint32_t t = 0;
    for (uint32_t i = 0; i < tiles; ++i) {
      const uint32_t width = base + (i < extra ? 1 : 0);
      for (uint32_t r = rb; r < re; ++r) block_tile(k, r, t, width);
      if (k.tail8) {
        for (uint32_t r = rb; r < re; r += 8) k.tail8_rows(r, re, t, width);
      }
      t += width;
    }
  }
}

struct BlockQ8 {
  const uint8_t* W;    // row r at W + r * w_row_bytes
  size_t w_row_bytes;
  const uint16_t* WS;  // (rows, groups)
  uint32_t groups;
  uint32_t blocks;     // whole blocks of 16 groups
  uint32_t pairs;      // tail pairs after them
  bool tail8;          // the rows end in exactly two groups past the blocks: tail8 below
  const int8_t* X;     // token 0 as quantized (decode reads its blocks in memory order)
  const uint8_t* P;    // prepared token t at P + t * p_stride
  size_t p_stride;
  float* Y;            // token t, row r at Y[t * y_stride + r]
  size_t y_stride;

  const uint8_t* prep(uint32_t t) const { return P + t * p_stride; }

  // The tail pairs of row r for tokens [t, t+T), into acc.
  template <int T>
  [[gnu::always_inline]] void tail(uint32_t r, uint32_t t, __m512 (&acc)[T]) const {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* row = W + static_cast<size_t>(r) * w_row_bytes;
    const uint32_t g0 = blocks * kBlockGroups;
    for (uint32_t k = 0; k < pairs; ++k) {
      const bool two = g0 + 2 * k + 1 < groups;
      const __m512i u = _mm512_xor_si512(load_pair(row, g0, groups, k), offset);
      const __m128i h = _mm_maskz_loadu_epi16(two ? 0x3 : 0x1,
                                              WS + static_cast<size_t>(r) * groups + g0 + 2 * k);
      const __m512 ws = _mm512_permutexvar_ps(pair_index(0), _mm512_castps256_ps512(_mm256_cvtph_ps(h)));
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
        const uint8_t* pp = prep(t + j) + static_cast<size_t>(blocks) * kPrepBlockBytes +
                            static_cast<size_t>(k) * kPrepPairBytes;
        const __m512i dd = _mm512_dpbusd_epi32(_mm512_load_si512(pp + kPairNeg), u, _mm512_load_si512(pp));
        const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pp + kPairScale));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dd), _mm512_mul_ps(ws, xs), acc[j]);
      }
    }
  }

  // Block b's 16 w scales of row r, in sigma order.
  [[gnu::always_inline]] __m512 block_ws(uint32_t r, uint32_t b) const {
    const __m256i h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
        WS + static_cast<size_t>(r) * groups + static_cast<size_t>(b) * kBlockGroups));
    return _mm512_permutexvar_ps(sigma_index(), _mm512_cvtph_ps(h));
  }

  // Rows ending in exactly two groups past the blocks (SmolLM2's 576 columns: 16 + 2; every row
  // of 64 columns): the tails of eight rows [r, r+8) (those below r_end; the others zero, never
  // stored) form one block of 16 virtual groups, v = 2 * (row - r) + tail group, transposed as a
  // row block is, so eight vpdpbusd per token give the 16 exact tail sums of eight rows (the
  // activations' tail prepared to match); then per row y = h + (t0 + t1), h the blocks' sum the
  // row's walk stored in Y and t_g = cvt(isum_g) * (w_scale_g * x_scale_g). Decode and every tile
  // take these operations, so rows stay equal whatever the token count. (The pair step costs
  // five vector ops per row and token for these two groups, ~20 % of a 576-column row.)
  [[gnu::always_inline]] void tail8_rows(uint32_t r, uint32_t r_end, uint32_t t, uint32_t n) const {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint32_t g0 = blocks * kBlockGroups;
    const uint32_t rows = r_end - r < 8 ? r_end - r : 8;
    __m512i u[8];
    alignas(32) uint32_t wsp[8];  // row i's two f16 tail scales
    for (uint32_t i = 0; i < 8; ++i) {
      if (i < rows) {
        const uint8_t* p = W + static_cast<size_t>(r + i) * w_row_bytes + g0 * kQuantGroup;
        u[i] = _mm512_xor_si512(_mm512_loadu_si512(p), offset);  // w + 128
        memcpy(&wsp[i], WS + static_cast<size_t>(r + i) * groups + g0, sizeof(uint32_t));
      } else {
        u[i] = _mm512_setzero_si512();  // adds 0 x x: its rows are never stored
        wsp[i] = 0;
      }
    }
    transpose_block(u);
    const __m512 ws = _mm512_permutexvar_ps(
        sigma_index(), _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wsp))));
    // Lanes of virtual groups 0, 2, .., 14 (the rows' first tail group), then 1, 3, .., 15.
    const __m512i split = _mm512_setr_epi32(0, 2, 1, 3, 8, 10, 9, 11, 4, 6, 5, 7, 12, 14, 13, 15);
    const __mmask8 keep = static_cast<__mmask8>((1u << rows) - 1);
    for (uint32_t j = t; j < t + n; ++j) {
      const uint8_t* pb = prep(j) + static_cast<size_t>(blocks) * kPrepBlockBytes;
      __m512i d0 = _mm512_load_si512(pb + kPrepNeg), d1 = _mm512_setzero_si512();
      _Pragma("GCC unroll 8") for (int m = 0; m < 8; m += 2) {
        d0 = _mm512_dpbusd_epi32(d0, u[m], _mm512_load_si512(pb + kPrepXt + 64 * m));
        d1 = _mm512_dpbusd_epi32(d1, u[m + 1], _mm512_load_si512(pb + kPrepXt + 64 * (m + 1)));
      }
      const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb + kPrepScale));
      const __m512 terms = _mm512_permutexvar_ps(
          split, _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), _mm512_mul_ps(ws, xs)));
      const __m256 sums = _mm256_add_ps(_mm512_castps512_ps256(terms), hi256(terms));
      float* yr = Y + static_cast<size_t>(j) * y_stride + r;
      _mm256_mask_storeu_ps(yr, keep, _mm256_add_ps(_mm256_maskz_loadu_ps(keep, yr), sums));
    }
  }

  // Decode: row r, token 0. The eight vpdpbusd of a block are independent (the tree joins them),
  // and the row streams in memory order.
  void row1(uint32_t r) const {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* row = W + static_cast<size_t>(r) * w_row_bytes;
    __m512 acc[1] = {_mm512_setzero_ps()};
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint8_t* p = row + static_cast<size_t>(b) * 512;
      const int8_t* xp = X + static_cast<size_t>(b) * 512;
      __m512i d[8];
      _Pragma("GCC unroll 16") for (int c = 0; c < 8; ++c) {
        prefetch(p + 64 * c + kPrefetchBytes);
        const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(p + 64 * c), offset);  // w + 128
        d[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xp + 64 * c));
      }
      const uint8_t* pb = prep(0) + static_cast<size_t>(b) * kPrepBlockBytes;
      const __m512i isum = _mm512_add_epi32(reduce_block(d), _mm512_load_si512(pb + kPrepNeg));
      const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb + kPrepScale));
      acc[0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum), _mm512_mul_ps(block_ws(r, b), xs), acc[0]);
    }
    tail<1>(r, 0, acc);
    Y[r] = hsum512(acc[0]);
  }

  // Decode of rows r, r + step, .., r + (R - 1) step: row1's operations for each row, the rows
  // interleaved block by block (R sequential streams when the rows are quarters apart).
  template <int R>
  void rows_strided(uint32_t r, uint32_t step) const {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* row[R];
    __m512 acc[R][1];
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {
      row[i] = W + static_cast<size_t>(r + i * step) * w_row_bytes;
      acc[i][0] = _mm512_setzero_ps();
    }
    for (uint32_t b = 0; b < blocks; ++b) {
      const int8_t* xp = X + static_cast<size_t>(b) * 512;
      const uint8_t* pb = prep(0) + static_cast<size_t>(b) * kPrepBlockBytes;
      const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb + kPrepScale));
      _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {
        const uint8_t* p = row[i] + static_cast<size_t>(b) * 512;
        __m512i d[8];
        _Pragma("GCC unroll 16") for (int c = 0; c < 8; ++c) {
          prefetch(p + 64 * c + kPrefetchBytes);
          const __m512i u = _mm512_xor_si512(_mm512_loadu_si512(p + 64 * c), offset);  // w + 128
          d[c] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), u, _mm512_loadu_si512(xp + 64 * c));
        }
        const __m512i isum = _mm512_add_epi32(reduce_block(d), _mm512_load_si512(pb + kPrepNeg));
        acc[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum),
                                    _mm512_mul_ps(block_ws(r + i * step, b), xs), acc[i][0]);
      }
    }
    _Pragma("GCC unroll 8") for (int i = 0; i < R; ++i) {
      tail<1>(r + i * step, 0, acc[i]);
      Y[r + i * step] = hsum512(acc[i][0]);
    }
  }

  // Row r, tokens [t, t+T) (1 <= T <= kMaxTileTokens): each block transposed once for the T
  // tokens (block_isums).
  template <int T>
  void row_tokens(uint32_t r, uint32_t t) const {
    const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
    const uint8_t* row = W + static_cast<size_t>(r) * w_row_bytes;
    __m512 acc[T];
    _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) acc[j] = _mm512_setzero_ps();
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint8_t* p = row + static_cast<size_t>(b) * 512;
      __m512i u[8];
      _Pragma("GCC unroll 16") for (int c = 0; c < 8; ++c) {
        prefetch(p + 64 * c + kPrefetchBytes);
        u[c] = _mm512_xor_si512(_mm512_loadu_si512(p + 64 * c), offset);  // w + 128
      }
      transpose_block(u);
      const __m512 ws = block_ws(r, b);
      const uint8_t* pb[T];
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j)
        pb[j] = prep(t + j) + static_cast<size_t>(b) * kPrepBlockBytes;
      __m512i isum[T];
      block_isums<T>(u, pb, kPrepXt, kPrepNeg, isum);
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
        const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb[j] + kPrepScale));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(ws, xs), acc[j]);
      }
    }
    tail<T>(r, t, acc);
    store_sums<T>(acc, Y + static_cast<size_t>(t) * y_stride + r, y_stride);
  }

};

// false when one token's prepared activations do not fit the stack buffer (rows wider than
// ~52k columns): then the caller takes VnniQ8, for every token count alike.
bool q8_blocks(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
               uint32_t r1) {
  const uint32_t groups = w.row_stride / kQuantGroup;
  const uint32_t blocks = groups / kBlockGroups;
  const bool tail8 = groups - blocks * kBlockGroups == 2;
  const uint32_t pairs = tail8 ? 0 : (groups - blocks * kBlockGroups + 1) / 2;
  const size_t per_token = (blocks + (tail8 ? 1 : 0)) * kPrepBlockBytes + pairs * kPrepPairBytes;
  if (per_token > kPrepBytes) return false;
  alignas(64) uint8_t prep[kPrepBytes];
  const uint32_t chunk = static_cast<uint32_t>(kPrepBytes / per_token);
  BlockQ8 k;
  k.W = static_cast<const uint8_t*>(w.data);
  k.w_row_bytes = w.row_stride;
  k.WS = w.scales;
  k.groups = groups;
  k.blocks = blocks;
  k.pairs = pairs;
  k.tail8 = tail8;
  k.P = prep;
  k.p_stride = per_token;
  k.y_stride = w.rows;
  for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
    // A last chunk of one token takes the decode walk: the same floats as a tile's.
    const uint32_t nt = n - t0 < chunk ? n - t0 : chunk;
    const QuantActs xc{x.qs + static_cast<size_t>(t0) * x.stride,
                       x.scales + static_cast<size_t>(t0) * (x.stride / kQuantGroup), x.stride};
    prep_tokens(xc, nt, groups, tail8, per_token, prep);
    k.X = xc.qs;
    k.Y = y + static_cast<size_t>(t0) * w.rows;
    if (nt == 1) {
      // Four streams (rows q, Q + q, 2Q + q, 3Q + q), then the rows past 4Q as below; tail8
      // rows (whose tails eight adjacent rows share) the same way below. Microbenchmark of
      // the decode matmul, 256 MiB of matrices, one thread, Zen 5, G weights/s, one row at a
      // time -> four streams: 1,536 columns 19 -> 25, 960 16 -> 20, 2,048 20-22 -> 21-26, 8,192
      // 19-20 -> 25, 896 17 -> 16-18; 576 (tail8, its tails then taken by the pair step, five
      // more ops a row) 31 -> 23.
      const uint32_t Q = (r1 - r0) / 4;
      uint32_t rs = r0;
      if (!tail8 && Q >= 2) {
        for (uint32_t q = 0; q < Q; ++q) k.rows_strided<4>(r0 + q, Q);
        rs = r0 + 4 * Q;
      }
      if (tail8) {
        // Four sequential streams as above, read together: rows q, Q + q, 2Q + q, 3Q + q
        // (Q a multiple of 8) through the blocks, and after eight such steps the tails of the
        // four runs of eight rows they completed (tail8_rows, as in order: the same operations
        // for every row, so the same outputs). Reading the rows in order, eight at a time, is
        // one stream, which Intel's prefetchers run at about half the rate of four (Xeon
        // Emerald Rapids, `ringlm bench`'s probe: 1 / 4 streams 8.9 / 18.0 GB/s): SmolLM2-135M
        // shape q8, one thread, tg64 alternated six times, in order 90-123 t/s, four streams
        // 113-152, the avx2 table's strided rows 99-147.
        const uint32_t QQ = (r1 - r0) / 32 * 8;
        if (QQ >= 16) {
          for (uint32_t q = 0; q < QQ; q += 8) {
            for (uint32_t i = q; i < q + 8; ++i) k.rows_strided<4>(r0 + i, QQ);
            for (uint32_t p = 0; p < 4; ++p) k.tail8_rows(r0 + p * QQ + q, r0 + p * QQ + q + 8, 0, 1);
          }
          rs = r0 + 4 * QQ;
        }
        for (uint32_t r = rs; r < r1; r += 8) {
          const uint32_t re = r1 - r < 8 ? r1 : r + 8;
          for (uint32_t i = r; i < re; ++i) k.row1(i);
          k.tail8_rows(r, re, 0, 1);
        }
      } else {
        for (uint32_t r = rs; r < r1; ++r) k.row1(r);
      }
    } else {
      block_rows_all(k, r0, r1, nt);
    }
  }
  return true;
}

// ---- Q4 / Q5 / Q4_1 / Q5_1 (and Q4K / Q5K) prefill: block sums ------------------------------------
// BlockQ8's multi-token scheme for the nibble encodings, for prefill (2+ tokens without
// kMatmulExactRows): each 32-group's integer sum finished in its own int32 lane, 16 groups (four
// vectors of nibbles) a block, then one convert, one scale multiply and one fma (Q4_1 / Q5_1: and
// one fma of the min term) per block and token. Q4Quad's unpack gives per four groups ulo (128-bit
// lane k: values 0-15 of group k, as dwords 0-3) and uhi (values 16-31); ulo_0..3 and uhi_0..3,
// each transposed 4x4 within 128-bit lanes (8 ops each, once per row block for up to 10 tokens),
// put dword p of group 4a + k in lane 4k + a of vector p: eight vpdpbusd per token give the sums
// of group sigma4(L) = 4 (L % 4) + L / 4 in lane L, the activations transposed alike once per
// call with the correction (Q4: -8 sum(x), Q5: -16 sum(x); none for the unsigned Q4_1 / Q5_1) in
// that order. Groups past the last whole block take Q4Quad's quad step. Per 16 groups, row and
// token: 8 vpdpbusd + 4 where Q4Quad's tiles take 8 + 12.
// Decode and exact rows (verification passes, beam steps, scoring) stay on Q4Quad, whose decode
// (8 rows a step, the activations shared) the block sums did not beat (1536 x 576 q4, one thread,
// in cache: 5.3 against 4.3 ms per 256 MiB by a per-row reduction tree); its tiles are
// shape-invariant, so a verification pass runs at tile speed anyway.
inline __m512i sigma4_index() {
  return _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// v[0..3] -> w[0..3]: 128-bit lane k of w[p] = [v0.k.p, v1.k.p, v2.k.p, v3.k.p] (dword p of lane k
// of each input).
[[gnu::always_inline]] inline void transpose4_lanes(const __m512i* v, __m512i* w) {
  const __m512i t0 = _mm512_unpacklo_epi32(v[0], v[1]), t1 = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i t2 = _mm512_unpacklo_epi32(v[2], v[3]), t3 = _mm512_unpackhi_epi32(v[2], v[3]);
  w[0] = _mm512_unpacklo_epi64(t0, t2);
  w[1] = _mm512_unpackhi_epi64(t0, t2);
  w[2] = _mm512_unpacklo_epi64(t1, t3);
  w[3] = _mm512_unpackhi_epi64(t1, t3);
}

// Prepared activations of one token: per whole block xt[8] (the transposed vectors), int32 x 16:
// the correction in sigma4 order, float x 16: the scales in sigma4 order, (kMin) float x 16:
// x_scale * sum(x) per group in sigma4 order; then per tail quad xlo, xhi, the correction (lane
// 4k + i: -offset * group k's dword i sum), the scales (lane 4k + i: group k's) and (kMin) the
// sums (lane 4k: group k's, else 0).
constexpr size_t kP4Xt = 0, kP4Neg = 512, kP4Scale = 576, kP4Sum = 640;
constexpr size_t kQ4QuadXlo = 0, kQ4QuadXhi = 64, kQ4QuadNeg = 128, kQ4QuadScale = 192, kQ4QuadSum = 256;
inline size_t q4_block_bytes(bool kmin) { return kmin ? 704 : 640; }
inline size_t q4_quad_bytes(bool kmin) { return kmin ? 320 : 256; }

// The quad (four groups from g) of an activation row as xlo / xhi; groups past `ng` zero.
[[gnu::always_inline]] inline void load_x_quad(const int8_t* xq, uint32_t ng, __m512i* xlo, __m512i* xhi) {
  const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
  const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
  const __mmask64 ma = ng >= 2 ? ~0ull : (1ull << (32 * ng)) - 1;
  const __mmask64 mb = ng == 4 ? ~0ull : ng <= 2 ? 0 : (1ull << (32 * (ng - 2))) - 1;
  const __m512i a = ng >= 2 ? _mm512_loadu_si512(xq) : _mm512_maskz_loadu_epi8(ma, xq);
  const __m512i b = ng == 4 ? _mm512_loadu_si512(xq + 64) : _mm512_maskz_loadu_epi8(mb, xq + 64);
  *xlo = _mm512_permutex2var_epi64(a, lo_idx, b);
  *xhi = _mm512_permutex2var_epi64(a, hi_idx, b);
}

template <bool kFive, bool kMin>
void prep_q4_tokens(const QuantActs& x, uint32_t n, uint32_t groups, bool tail8, size_t p_stride,
                    uint8_t* P) {
  const uint32_t blocks = groups / kBlockGroups, g0 = blocks * kBlockGroups;
  const uint32_t quads = tail8 ? 0 : (groups - g0 + 3) / 4;
  const __m512i off = _mm512_set1_epi8(kFive ? 16 : 8);
  const __m512i zero = _mm512_setzero_si512();
  const __m512i quad_of_lane = _mm512_srli_epi32(
      _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
  for (uint32_t t = 0; t < n; ++t) {
    const int8_t* xq = x.qs + static_cast<size_t>(t) * x.stride;
    const float* xs = x.scales + static_cast<size_t>(t) * (x.stride / kQuantGroup);
    const float* xm = kMin ? x.sums + static_cast<size_t>(t) * (x.stride / kQuantGroup) : nullptr;
    uint8_t* o = P + t * p_stride;
    for (uint32_t b = 0; b < blocks; ++b, o += q4_block_bytes(kMin)) {
      __m512i xl[4], xh[4], w[8];
      for (int a = 0; a < 4; ++a) load_x_quad(xq + (b * kBlockGroups + 4 * a) * kQuantGroup, 4, &xl[a], &xh[a]);
      transpose4_lanes(xl, w);
      transpose4_lanes(xh, w + 4);
      __m512i sum = zero;
      for (int m = 0; m < 8; ++m) {
        _mm512_store_si512(o + kP4Xt + 64 * m, w[m]);
        if (!kMin) sum = _mm512_dpbusd_epi32(sum, off, w[m]);
      }
      _mm512_store_si512(o + kP4Neg, _mm512_sub_epi32(zero, sum));
      _mm512_store_ps(reinterpret_cast<float*>(o + kP4Scale),
                      _mm512_permutexvar_ps(sigma4_index(), _mm512_loadu_ps(xs + b * kBlockGroups)));
      if (kMin) {
        _mm512_store_ps(reinterpret_cast<float*>(o + kP4Sum),
                        _mm512_permutexvar_ps(sigma4_index(), _mm512_loadu_ps(xm + b * kBlockGroups)));
      }
    }
    if (tail8) {
      // The two tail groups as BlockQ4::tail8_rows' virtual groups see them: quad a = (g0, g0 + 1,
      // g0, g0 + 1) for every a, transposed as a block; virtual group v is tail group v % 2.
      alignas(64) int8_t quad[128];
      memcpy(quad, xq + g0 * kQuantGroup, 64);
      memcpy(quad + 64, xq + g0 * kQuantGroup, 64);
      __m512i xl[4], xh[4], w[8];
      load_x_quad(quad, 4, &xl[0], &xh[0]);
      for (int a = 1; a < 4; ++a) xl[a] = xl[0], xh[a] = xh[0];
      transpose4_lanes(xl, w);
      transpose4_lanes(xh, w + 4);
      __m512i sum = zero;
      for (int m = 0; m < 8; ++m) {
        _mm512_store_si512(o + kP4Xt + 64 * m, w[m]);
        if (!kMin) sum = _mm512_dpbusd_epi32(sum, off, w[m]);
      }
      _mm512_store_si512(o + kP4Neg, _mm512_sub_epi32(zero, sum));
      const __m512i alt = _mm512_set1_epi64(0x0000000100000000ll);  // lane v: v % 2
      const __m512 two = _mm512_castps128_ps512(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xs + g0))));
      _mm512_store_ps(reinterpret_cast<float*>(o + kP4Scale),
                      _mm512_permutexvar_ps(sigma4_index(), _mm512_permutexvar_ps(alt, two)));
      if (kMin) {
        const __m512 tm = _mm512_castps128_ps512(_mm_castpd_ps(_mm_load_sd(reinterpret_cast<const double*>(xm + g0))));
        _mm512_store_ps(reinterpret_cast<float*>(o + kP4Sum),
                        _mm512_permutexvar_ps(sigma4_index(), _mm512_permutexvar_ps(alt, tm)));
      }
    }
    for (uint32_t q = 0; q < quads; ++q, o += q4_quad_bytes(kMin)) {
      const uint32_t g = g0 + 4 * q, ng = groups - g < 4 ? groups - g : 4;
      __m512i xlo, xhi;
      load_x_quad(xq + g * kQuantGroup, ng, &xlo, &xhi);
      _mm512_store_si512(o + kQ4QuadXlo, xlo);
      _mm512_store_si512(o + kQ4QuadXhi, xhi);
      const __m512i neg = kMin ? zero
                               : _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(
                                                            _mm512_dpbusd_epi32(zero, off, xlo), off, xhi));
      _mm512_store_si512(o + kQ4QuadNeg, neg);
      const __mmask16 gm = static_cast<__mmask16>((1u << ng) - 1);
      _mm512_store_ps(reinterpret_cast<float*>(o + kQ4QuadScale),
                      _mm512_permutexvar_ps(quad_of_lane, _mm512_maskz_loadu_ps(gm, xs + g)));
      if (kMin) {
        // lane 4k: group k's sum (once per group), the other lanes 0
        _mm512_store_ps(reinterpret_cast<float*>(o + kQ4QuadSum),
                        _mm512_maskz_permutexvar_ps(0x1111, quad_of_lane, _mm512_maskz_loadu_ps(gm, xm + g)));
      }
    }
  }
}

// kK (with kMin): Q4K / Q5K, whose (d * sc, -dmin * m) per group come from the super-block's
// levels (q4k_levels) instead of a (d, m) plane: value = (d * sc) q - dmin * m, Q4_1's d q + m.
template <bool kFive, bool kMin, bool kK = false>
struct BlockQ4 {
  static_assert(!kK || kMin, "Q4K / Q5K take the min term");
  const uint8_t* W;    // row r at W + r * w_row_bytes (nibbles, 16 bytes a group)
  size_t w_row_bytes;
  const uint8_t* SUB;  // kK: (rows, supers, 16) sc[8], m[8]; WS then (rows, supers, 2) d, dmin
  uint32_t supers;     // kK: super-blocks per row
  const uint8_t* HI;   // Q5 / Q5_1: row r's fifth bits at HI + r * hi_row_bytes (4 bytes a group)
  size_t hi_row_bytes;
  const uint16_t* WS;  // Q4 / Q5: (rows, groups) f16; Q4_1 / Q5_1: (rows, groups, 2) (d, m)
  size_t ws_row;       // f16 values per row of WS
  uint32_t groups, blocks, quads;
  const uint8_t* P;    // prepared token t at P + t * p_stride
  size_t p_stride;
  float* Y;            // token t, row r at Y[t * y_stride + r]
  size_t y_stride;

  const uint8_t* prep(uint32_t t) const { return P + t * p_stride; }

  // The four groups from g of row r as (ulo, uhi): unsigned values (Q4: nibble ^ 8; Q5, Q5_1:
  // with the fifth bits; Q4_1: the nibbles). ng < 4: the groups past it zero.
  [[gnu::always_inline]] void unpack_quad(uint32_t r, uint32_t g, uint32_t ng, __m512i* ulo,
                                          __m512i* uhi) const {
    const uint8_t* p = W + static_cast<size_t>(r) * w_row_bytes + static_cast<size_t>(g) * 16;
    prefetch(p + kPrefetchBytes);
    const __m512i b = ng == 4 ? _mm512_loadu_si512(p)
                              : _mm512_maskz_loadu_epi8((1ull << (16 * ng)) - 1, p);
    unpack_bytes(b, kFive ? HI + static_cast<size_t>(r) * hi_row_bytes + static_cast<size_t>(g) * 4 : nullptr,
                 ng, ulo, uhi);
  }

  // 64 nibble bytes (four groups; their fifth bits at h) as (ulo, uhi).
  [[gnu::always_inline]] static void unpack_bytes(__m512i b, const uint8_t* h, uint32_t ng, __m512i* ulo,
                                                  __m512i* uhi) {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    if constexpr (kFive) {
      merge_fifth_bits(b, h, ng, ulo, uhi);
    } else if constexpr (kMin) {
      *ulo = _mm512_and_si512(b, nib);
      *uhi = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
    } else {
      const __m512i eight = _mm512_set1_epi8(8);
      *ulo = _mm512_ternarylogic_epi32(b, nib, eight, 0x6a);  // (b & 0x0f) ^ 8
      *uhi = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 4), nib, eight, 0x6a);
    }
  }

  // Block b's w scales (kMin: d) of row r in sigma4 order, and (kMin) the mins in *m.
  [[gnu::always_inline]] __m512 block_ws(uint32_t r, uint32_t b, __m512* m) const {
    const uint16_t* w = WS + static_cast<size_t>(r) * ws_row;
    if constexpr (kK) {
      // super-blocks 2b, 2b + 1: the block's 16 groups (both whole: the block is)
      const size_t s = static_cast<size_t>(r) * supers + 2 * static_cast<size_t>(b);
      __m256 d0, m0, d1, m1;
      q4k_levels512(WS + 2 * s, SUB + 16 * s, &d0, &m0);
      q4k_levels512(WS + 2 * (s + 1), SUB + 16 * (s + 1), &d1, &m1);
      const __m512 d = concat256(d0, d1), mm = concat256(m0, m1);
      *m = _mm512_sub_ps(_mm512_setzero_ps(), _mm512_permutexvar_ps(sigma4_index(), mm));
      return _mm512_permutexvar_ps(sigma4_index(), d);
    } else if constexpr (kMin) {
      const uint16_t* q = w + static_cast<size_t>(b) * kBlockGroups * 2;
      const __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q)));
      const __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(q + 16)));
      const __m512i s2 = _mm512_slli_epi32(sigma4_index(), 1);  // (d, m) pairs: d of group g at 2g
      *m = _mm512_permutex2var_ps(lo, _mm512_add_epi32(s2, _mm512_set1_epi32(1)), hi);
      return _mm512_permutex2var_ps(lo, s2, hi);
    } else {
      const __m256i h = _mm256_loadu_si256(
          reinterpret_cast<const __m256i*>(w + static_cast<size_t>(b) * kBlockGroups));
      return _mm512_permutexvar_ps(sigma4_index(), _mm512_cvtph_ps(h));
    }
  }

  // Tail quad q's w scales (kMin: d, and the mins in *m, lane 4k only) of row r: lane 4k + i:
  // group k's.
  [[gnu::always_inline]] __m512 quad_ws(uint32_t r, uint32_t q, __m512* m) const {
    const __m512i quad_of_lane = _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    const uint32_t g = blocks * kBlockGroups + 4 * q, ng = groups - g < 4 ? groups - g : 4;
    const uint16_t* w = WS + static_cast<size_t>(r) * ws_row;
    if constexpr (kK) {
      // lane 4k + i: group g + k, at lane g % 8 + k of its super-block's levels (groups past
      // ng meet zero activations)
      const size_t s = static_cast<size_t>(r) * supers + g / kQ4kSuperGroups;
      __m256 dl, ml;
      q4k_levels512(WS + 2 * s, SUB + 16 * s, &dl, &ml);
      const __m512i idx = _mm512_add_epi32(quad_of_lane, _mm512_set1_epi32(static_cast<int>(g % kQ4kSuperGroups)));
      *m = _mm512_maskz_permutexvar_ps(0x1111, idx, _mm512_castps256_ps512(_mm256_sub_ps(_mm256_setzero_ps(), ml)));
      return _mm512_permutexvar_ps(idx, _mm512_castps256_ps512(dl));
    } else if constexpr (kMin) {
      const __m512 dm = _mm512_castps256_ps512(_mm256_cvtph_ps(
          _mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << (2 * ng)) - 1), w + 2 * g)));
      const __m512i two = _mm512_slli_epi32(quad_of_lane, 1);
      *m = _mm512_maskz_permutexvar_ps(0x1111, _mm512_add_epi32(two, _mm512_set1_epi32(1)), dm);
      return _mm512_permutexvar_ps(two, dm);
    } else {
      const __m512 s = _mm512_castps256_ps512(
          _mm256_cvtph_ps(_mm_maskz_loadu_epi16(static_cast<__mmask8>((1u << ng) - 1), w + g)));
      return _mm512_permutexvar_ps(quad_of_lane, s);
    }
  }

  // The tail quads of row r for tokens [t, t+T), into acc.
  template <int T>
  [[gnu::always_inline]] void tail(uint32_t r, uint32_t t, __m512 (&acc)[T]) const {
    for (uint32_t q = 0; q < quads; ++q) {
      const uint32_t g = blocks * kBlockGroups + 4 * q, ng = groups - g < 4 ? groups - g : 4;
      __m512i ulo, uhi;
      unpack_quad(r, g, ng, &ulo, &uhi);
      __m512 m;
      const __m512 ws = quad_ws(r, q, &m);
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
        const uint8_t* pq = prep(t + j) + blocks * q4_block_bytes(kMin) + q * q4_quad_bytes(kMin);
        const __m512i d = _mm512_dpbusd_epi32(
            _mm512_dpbusd_epi32(_mm512_load_si512(pq + kQ4QuadNeg), ulo, _mm512_load_si512(pq + kQ4QuadXlo)),
            uhi, _mm512_load_si512(pq + kQ4QuadXhi));
        const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pq + kQ4QuadScale));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(ws, xs), acc[j]);
        if constexpr (kMin) {
          acc[j] = _mm512_fmadd_ps(m, _mm512_load_ps(reinterpret_cast<const float*>(pq + kQ4QuadSum)), acc[j]);
        }
      }
    }
  }

  // Rows ending in exactly two groups past the blocks (SmolLM2's 576 columns): the tails of eight
  // rows [r, r+8) (those below r_end) as one block of 16 virtual groups, v = 2 * (row - r) +
  // tail group, rows 2a and 2a + 1 making quad a: transposed as a row block, eight vpdpbusd per
  // token give the 16 tail sums, and y += t0 + t1 per row (Y holds the blocks' sum), t_g its
  // group's term (as BlockQ8::tail8_rows; here the activations' tail is prepared as one block).
  bool tail8;
  void tail8_rows(uint32_t r, uint32_t r_end, uint32_t t, uint32_t n) const {
    const uint32_t g0 = blocks * kBlockGroups;
    const uint32_t rows = r_end - r < 8 ? r_end - r : 8;
    __m512i ul[4], uh[4], u[8];
    alignas(64) uint16_t wsv[32];  // virtual group v's scale (kMin: d at 2v, m at 2v + 1)
    alignas(64) float kd[16], km[16];  // kK: virtual group v's d * sc and -dmin * m
    for (uint32_t a = 0; a < 4; ++a) {
      alignas(16) uint8_t h[16] = {};
      __m256i half[2];
      for (uint32_t e = 0; e < 2; ++e) {
        const uint32_t i = 2 * a + e;
        if (i < rows) {
          const uint8_t* p = W + static_cast<size_t>(r + i) * w_row_bytes + g0 * 16;
          half[e] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
          if (kFive) memcpy(h + 8 * e, HI + static_cast<size_t>(r + i) * hi_row_bytes + g0 * 4, 8);
          if constexpr (kK) {
            // g0 is a multiple of 16: the tail pair is groups 0, 1 of super-block g0 / 8
            const size_t s = static_cast<size_t>(r + i) * supers + g0 / kQ4kSuperGroups;
            __m256 dl, ml;
            q4k_levels512(WS + 2 * s, SUB + 16 * s, &dl, &ml);
            alignas(32) float dv[8], mv[8];
            _mm256_store_ps(dv, dl);
            _mm256_store_ps(mv, ml);
            kd[2 * i] = dv[0];
            kd[2 * i + 1] = dv[1];
            km[2 * i] = -mv[0];
            km[2 * i + 1] = -mv[1];
          } else {
            memcpy(wsv + (kMin ? 4 : 2) * i, WS + static_cast<size_t>(r + i) * ws_row + (kMin ? 2 : 1) * g0,
                   (kMin ? 4 : 2) * sizeof(uint16_t));
          }
        } else {
          half[e] = _mm256_setzero_si256();  // its rows are never stored
          memset(wsv + (kMin ? 4 : 2) * i, 0, (kMin ? 4 : 2) * sizeof(uint16_t));
          kd[2 * i] = kd[2 * i + 1] = km[2 * i] = km[2 * i + 1] = 0.0f;
        }
      }
      const __m512i b = _mm512_inserti64x4(_mm512_castsi256_si512(half[0]), half[1], 1);
      unpack_bytes(b, h, 4, &ul[a], &uh[a]);
    }
    transpose4_lanes(ul, u);
    transpose4_lanes(uh, u + 4);
    __m512 ws, m = _mm512_setzero_ps();
    if constexpr (kK) {
      ws = _mm512_permutexvar_ps(sigma4_index(), _mm512_load_ps(kd));
      m = _mm512_permutexvar_ps(sigma4_index(), _mm512_load_ps(km));
    } else if constexpr (kMin) {
      const __m512 lo = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wsv)));
      const __m512 hi = _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wsv + 16)));
      const __m512i s2 = _mm512_slli_epi32(sigma4_index(), 1);
      m = _mm512_permutex2var_ps(lo, _mm512_add_epi32(s2, _mm512_set1_epi32(1)), hi);
      ws = _mm512_permutex2var_ps(lo, s2, hi);
    } else {
      ws = _mm512_permutexvar_ps(sigma4_index(),
                                 _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(wsv))));
    }
    // Lanes of virtual groups 0, 2, .., 14 (the rows' first tail group), then 1, 3, .., 15.
    const __m512i split = _mm512_setr_epi32(0, 8, 1, 9, 2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15);
    const __mmask8 keep = static_cast<__mmask8>((1u << rows) - 1);
    for (uint32_t j = t; j < t + n; ++j) {
      const uint8_t* pb = prep(j) + static_cast<size_t>(blocks) * q4_block_bytes(kMin);
      __m512i d0 = _mm512_load_si512(pb + kP4Neg), d1 = _mm512_setzero_si512();
      _Pragma("GCC unroll 8") for (int mm = 0; mm < 8; mm += 2) {
        d0 = _mm512_dpbusd_epi32(d0, u[mm], _mm512_load_si512(pb + kP4Xt + 64 * mm));
        d1 = _mm512_dpbusd_epi32(d1, u[mm + 1], _mm512_load_si512(pb + kP4Xt + 64 * (mm + 1)));
      }
      const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb + kP4Scale));
      __m512 terms = _mm512_mul_ps(_mm512_cvtepi32_ps(_mm512_add_epi32(d0, d1)), _mm512_mul_ps(ws, xs));
      if constexpr (kMin) {
        terms = _mm512_fmadd_ps(m, _mm512_load_ps(reinterpret_cast<const float*>(pb + kP4Sum)), terms);
      }
      terms = _mm512_permutexvar_ps(split, terms);
      const __m256 sums = _mm256_add_ps(_mm512_castps512_ps256(terms), hi256(terms));
      float* yr = Y + static_cast<size_t>(j) * y_stride + r;
      _mm256_mask_storeu_ps(yr, keep, _mm256_add_ps(_mm256_maskz_loadu_ps(keep, yr), sums));
    }
  }

  // Row r, tokens [t, t+T): each block unpacked and transposed once for the T tokens.
  template <int T>
  void row_tokens(uint32_t r, uint32_t t) const {
    __m512 acc[T];
    _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) acc[j] = _mm512_setzero_ps();
    for (uint32_t b = 0; b < blocks; ++b) {
      __m512i ul[4], uh[4], u[8];
      _Pragma("GCC unroll 4") for (int a = 0; a < 4; ++a) unpack_quad(r, b * kBlockGroups + 4 * a, 4, &ul[a], &uh[a]);
      transpose4_lanes(ul, u);
      transpose4_lanes(uh, u + 4);
      __m512 m;
      const __m512 ws = block_ws(r, b, &m);
      const uint8_t* pb[T];
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j)
        pb[j] = prep(t + j) + static_cast<size_t>(b) * q4_block_bytes(kMin);
      __m512i isum[T];
      block_isums<T>(u, pb, kP4Xt, kP4Neg, isum);
      _Pragma("GCC unroll 16") for (int j = 0; j < T; ++j) {
        const __m512 xs = _mm512_load_ps(reinterpret_cast<const float*>(pb[j] + kP4Scale));
        acc[j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(isum[j]), _mm512_mul_ps(ws, xs), acc[j]);
        if constexpr (kMin) {
          acc[j] = _mm512_fmadd_ps(m, _mm512_load_ps(reinterpret_cast<const float*>(pb[j] + kP4Sum)), acc[j]);
        }
      }
    }
    tail<T>(r, t, acc);
    store_sums<T>(acc, Y + static_cast<size_t>(t) * y_stride + r, y_stride);
  }

};

// false when one token's prepared activations do not fit the stack buffer (rows wider than
// ~53k columns): then the caller takes Q4Quad's tiles, for every token count alike.
template <bool kFive, bool kMin, bool kK = false>
bool q4_blocks(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0, uint32_t r1) {
  if (kK && !x.sums) return false;  // no min-term sums: never for a run holding a Q4K matrix
  const uint32_t groups = w.row_stride / kQuantGroup;
  const uint32_t blocks = groups / kBlockGroups;
  const bool tail8 = groups - blocks * kBlockGroups == 2;
  const uint32_t quads = tail8 ? 0 : (groups - blocks * kBlockGroups + 3) / 4;
  const size_t per_token = (blocks + (tail8 ? 1 : 0)) * q4_block_bytes(kMin) + quads * q4_quad_bytes(kMin);
  if (per_token > kPrepBytes) return false;
  alignas(64) uint8_t prep[kPrepBytes];
  const uint32_t chunk = static_cast<uint32_t>(kPrepBytes / per_token);
  BlockQ4<kFive, kMin, kK> k;
  k.W = static_cast<const uint8_t*>(w.data);
  k.SUB = kK ? w.subs : nullptr;
  k.supers = (groups + kQ4kSuperGroups - 1) / kQ4kSuperGroups;
  k.w_row_bytes = w.row_stride / 2;
  k.HI = kFive ? w.high : nullptr;
  k.hi_row_bytes = w.row_stride / 8;
  k.WS = w.scales;
  k.ws_row = static_cast<size_t>(groups) * (kMin ? 2 : 1);
  k.groups = groups;
  k.blocks = blocks;
  k.quads = quads;
  k.tail8 = tail8;
  k.P = prep;
  k.p_stride = per_token;
  k.y_stride = w.rows;
  for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
    const uint32_t nt = n - t0 < chunk ? n - t0 : chunk;
    const size_t xs_stride = x.stride / kQuantGroup;
    const QuantActs xc{x.qs + static_cast<size_t>(t0) * x.stride, x.scales + t0 * xs_stride, x.stride,
                       kMin ? x.sums + t0 * xs_stride : nullptr};
    prep_q4_tokens<kFive, kMin>(xc, nt, groups, tail8, per_token, prep);
    k.Y = y + static_cast<size_t>(t0) * w.rows;
    block_rows_all(k, r0, r1, nt);
  }
  return true;
}

}  // namespace

void matmul_q8_avx512(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  // Both walks are shape-invariant (each computes every row as its own decode does), so exact
  // rows (kMatmulExactRows: verification passes, beam steps, scoring) need nothing of their own.
  n &= ~kMatmulExactRows;
  if (q8_blocks(w, x, n, y, r0, r1)) return;
  const VnniQ8 m = quant_mat<VnniQ8>(w, x, y);
  drive<4, 4, 4>(m, n, r0, r1);
}

// Q4 / Q5 / Q4_1 / Q5_1: prefill on block sums (BlockQ4); decode, exact rows and rows wider than
// its stack buffer on Q4Quad's tiles.
// Whether a Q4K decode takes 4-row strided tiles (four sequential streams) over 8 adjacent rows.
// Measured on Zen 5, one thread, decode of 256 MiB of matrices (microbenchmark, G weights/s,
// adjacent -> strided): the strided walk wins wherever a row's nibbles are whole 64-byte lines
// (640 columns 37 -> 42, 768 35-41 -> 44, 896 35 -> 42, 1024 33 -> 45, 1152 34 -> 45, 1536
// 32 -> 45, 2048 35 -> 44-50, 4864 28 -> 43, 8192 32 -> 42-47) and at 1088; the adjacent tile
// wins for rows of a half line more below that (576 columns 44-46 -> 25-39, 704 57 -> 32-45,
// 960 50-53 -> 44-46): eight such rows are whole lines, read together.
inline bool q4k_strided_decode(uint32_t cols) { return cols % 128 != 64 || cols > 1024; }

#define RINGLM_Q4_BLOCKS(name, kFive, kMin)                                                         \
  void name(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,        \
            uint32_t r1) {                                                                      \
    if (n >= 2 && !(n & kMatmulExactRows) && q4_blocks<kFive, kMin>(w, x, n, y, r0, r1)) return; \
    if (!kFive && !kMin && q4k_strided_decode(w.row_stride)) {                                  \
      quant_matmul<4, 4, 4, Q4Quad<kFive, kMin, true>>(w, x, n, y, r0, r1);                     \
    } else {                                                                                    \
      quant_matmul<8, 4, 4, Q4Quad<kFive, kMin>>(w, x, n, y, r0, r1);                           \
    }                                                                                           \
  }
RINGLM_Q4_BLOCKS(matmul_q4_avx512, false, false)
RINGLM_Q4_BLOCKS(matmul_q5_avx512, true, false)
RINGLM_Q4_BLOCKS(matmul_q4_1_avx512, false, true)
RINGLM_Q4_BLOCKS(matmul_q5_1_avx512, true, true)
#undef RINGLM_Q4_BLOCKS

namespace {

// ---- Q4K / Q5K ---------------------------------------------------------------------------------
// Q4Quad's four groups per step; the nibbles are unsigned already, so vpdpbusd(q, x) is the dot
// product (no offset, no correction). Per super-block, the combined scales (d * sc_g) * x_scale_g
// of each (row, token) come from one vector op chain, and the min term (dmin * m[8]) * x_sum[8] is
// subtracted from the accumulator's lower 8 lanes with one fnmadd (lanes of groups a short
// super-block lacks add 0).
// Q5K: q = nibble | 16 * fifth bit in [0, 31] (merge_fifth_bits; vpdpbusd's products 31 * 127
// fit as 15 * 127 do). Per row and four groups: 6 vector ops to unpack against Q4K's 3 (vpand,
// vpsrlw, vpand), then 5 per token either way (2 vpdpbusd, the scales' vpermps, vcvtdq2ps,
// vfmadd): in decode 2.75 ops a group and row against 2.

// kFive: Q5K (the fifth-bit plane merged into every group's nibbles); else Q4K (Hr null, unread).
// kStrided: decode_walk's strided tiles (rows q, q + Q, q + 2Q, q + 3Q: four long streams, see
// q4k_strided_decode); else adjacent rows.
template <bool kFive, bool kStrided = false>
struct Q4kQuad : Q4kMat {
  // Every element: the same fnmadds and fmas in the same order in one accumulator whatever the
  // tile, then store_tile512's reduction (the fifth bits only change the integers, exact either
  // way).
  static constexpr bool kShapeInvariant = true;
  static constexpr bool kRowStep = kStrided;
  Q4kQuad strided(uint32_t r, uint32_t step) const {
    Q4kQuad k;
    static_cast<Q4kMat&>(k) = strided_view(r, step);
    return k;
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, Hr, DMr, SUBr, dm_stride, sub_stride, Xt, XSt, XMt, xs_stride] = at(r, t);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    const __m512i quad_of_lane = _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
    alignas(32) float sc[R][T][8];
    for (uint32_t s = 0; s < supers; ++s) {
      const uint32_t gb = s * kQ4kSuperGroups;
      const uint32_t nb = groups - gb < kQ4kSuperGroups ? groups - gb : kQ4kSuperGroups;
      {
        const __mmask8 bm = static_cast<__mmask8>((1u << nb) - 1);
        __m256 xs[T], xm[T];  // zero past nb (never read)
        for (int j = 0; j < T; ++j) {
          xs[j] = _mm256_maskz_loadu_ps(bm, XSt + j * xs_stride + gb);
          xm[j] = _mm256_maskz_loadu_ps(bm, XMt + j * xs_stride + gb);
        }
        for (int i = 0; i < R; ++i) {
          __m256 dl, ml;
          q4k_levels512(DMr + i * dm_stride + 2 * s, SUBr + i * sub_stride + 16 * s, &dl, &ml);
          for (int j = 0; j < T; ++j) {
            _mm256_store_ps(sc[i][j], _mm256_mul_ps(dl, xs[j]));
            acc[i][j] = _mm512_fnmadd_ps(_mm512_zextps256_ps512(ml), _mm512_zextps256_ps512(xm[j]), acc[i][j]);
          }
          if constexpr (kFive) prefetch_fifth_bits(Hr + i * hi_row_bytes, s);
        }
      }
      for (uint32_t q = 0; 4 * q < nb; ++q) {
        const size_t g = gb + 4 * q;
        const uint32_t ng = nb - 4 * q < 4 ? nb - 4 * q : 4;  // groups in this quad
        const __mmask64 wmask = ng == 4 ? ~0ull : (1ull << (16 * ng)) - 1;
        const __mmask64 xmask_a = ng >= 2 ? ~0ull : (1ull << (32 * ng)) - 1;
        const __mmask64 xmask_b = ng == 4 ? ~0ull : ng <= 2 ? 0 : (1ull << (32 * (ng - 2))) - 1;
        const __m512i sidx = _mm512_add_epi32(quad_of_lane, _mm512_set1_epi32(static_cast<int>(4 * q)));
        // Row i's four groups: values 0..15 / 16..31.
        // Named copies: a lambda may not capture structured bindings before C++20 (clang refuses).
        const uint8_t* const w_rows = Wr;
        const uint8_t* const h_rows = Hr;
        const int8_t* const x_rows = Xt;
        auto unpack = [&](int i, __m512i* lo, __m512i* hi) {
          const uint8_t* p = w_rows + i * w_row_bytes + g * 16;
          prefetch(p + kPrefetchBytes);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(wmask, p);
          if constexpr (kFive) {
            const uint8_t* h = h_rows + i * hi_row_bytes + g * (kQuantGroup / 8);
            merge_fifth_bits(b, h, ng, lo, hi);
          } else {
            *lo = _mm512_and_si512(b, nib);
            *hi = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
          }
        };
        // Token j's four groups as the unpacked weights' order: values 0..15 / 16..31.
        auto token_quad = [&](int j, __m512i* xlo, __m512i* xhi) {
          const int8_t* xp = x_rows + j * x_stride + g * kQuantGroup;
          const __m512i a = ng >= 2 ? _mm512_loadu_si512(xp) : _mm512_maskz_loadu_epi8(xmask_a, xp);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(xp + 64)
                                    : _mm512_maskz_loadu_epi8(xmask_b, xp + 64);
          *xlo = _mm512_permutex2var_epi64(a, lo_idx, b);
          *xhi = _mm512_permutex2var_epi64(a, hi_idx, b);
        };
        if constexpr (T == 1) {
          // Decode: the token's quad first, then each row unpacked and used at once (the 8-row
          // tile holding every row's unpacked groups spilled its accumulators to the stack).
          __m512i xlo, xhi;
          token_quad(0, &xlo, &xhi);
          for (int i = 0; i < R; ++i) {
            __m512i lo, hi;
            unpack(i, &lo, &hi);
            const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, xlo), hi, xhi);
            const __m512 sv = _mm512_permutexvar_ps(sidx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][0])));
            acc[i][0] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sv, acc[i][0]);
          }
          continue;
        }
        __m512i qlo[R], qhi[R];  // values 0..15 / 16..31 of the four groups
        for (int i = 0; i < R; ++i) unpack(i, &qlo[i], &qhi[i]);
        for (int j = 0; j < T; ++j) {
          __m512i xlo, xhi;
          token_quad(j, &xlo, &xhi);
          for (int i = 0; i < R; ++i) {
            const __m512i d = _mm512_dpbusd_epi32(
                _mm512_dpbusd_epi32(_mm512_setzero_si512(), qlo[i], xlo), qhi[i], xhi);
            const __m512 sv =
                _mm512_permutexvar_ps(sidx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][j])));
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), sv, acc[i][j]);
          }
        }
      }
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride, y_step);
  }
};

}  // namespace


// Decode 8 adjacent rows or 4 strided rows x 1 token (q4k_strided_decode), exact rows 4 x 4, as
// Q4Quad. Every row's arithmetic is the same in either tile (kShapeInvariant). Prefill (2+
// tokens without kMatmulExactRows) on block sums as Q4_1's (SmolLM2 layer matmuls at 128 tokens,
// one thread, in cache: 9.1 -> 5.4 ms), whose floats differ from the tiles' in the last bits.
void matmul_q4k_avx512(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1) {
  if (n >= 2 && !(n & kMatmulExactRows) && q4_blocks<false, true, true>(w, x, n, y, r0, r1)) return;
  if (q4k_strided_decode(w.row_stride)) {
    drive<4, 4, 4>(q4k_mat<Q4kQuad<false, true>>(w, x, y), n, r0, r1);
  } else {
    drive<8, 4, 4>(q4k_mat<Q4kQuad<false>>(w, x, y), n, r0, r1);
  }
}

// As Q4K (the same tile, the fifth bits merged in).
void matmul_q5k_avx512(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1) {
  if (n >= 2 && !(n & kMatmulExactRows) && q4_blocks<true, true, true>(w, x, n, y, r0, r1)) return;
  if (q4k_strided_decode(w.row_stride)) {
    drive<4, 4, 4>(q4k_mat<Q4kQuad<true, true>>(w, x, y), n, r0, r1);
  } else {
    drive<8, 4, 4>(q4k_mat<Q4kQuad<true>>(w, x, y), n, r0, r1);
  }
}

namespace {

// ---- Q6K ---------------------------------------------------------------------------------------
// Q4kQuad's four groups per step (values 0..15 of groups g..g+3 in one zmm, 16..31 in another,
// the activations regrouped to match once per token), with the high 2 bits merged into the
// nibbles and the two sub-blocks scaled apart:
//   q: the four groups' 8 high bytes each fill both qwords of their 16-byte block (vpermq); a
//      per-qword shift brings field 0 / 1 (values 0..7 / 8..15: the block's two qwords) to bits
//      4-5 (left by 4 / 2), and one vpternlogd merges it under 0x30 with the low nibbles; fields
//      2 / 3 (right by 0 / 2) likewise with the high nibbles.
//   vpdpbusd(q, x) started at -32 x the 4-byte sums of x (per token, shared by the rows) gives the
//      int32 sums of (q - 32) x over 4 values, exact and below 2^15 in magnitude: each is its
//      dword's low word as an int16 (the high word holding only its sign).
//   vpmaddwd / vpdpwssd with dwords (256 * sc, 0) (x86.inc) then combine a group's two
//      sub-blocks in int32, 256 (sc_a t_a + sc_b t_b) per lane, exact; converted and fma'd with
//      d / 256 * x_scale as Q4kQuad's.
// Per row and four groups: 8 vector ops to unpack and 2 shuffles for the scales (Q4kQuad: 3),
// then per token 7 (Q4kQuad: 5). The scales could be combined in float instead (two conversions,
// two fmas): one op fewer per row in decode, two more per row in a 4-token prefill tile.

struct Q6kQuad : Q6kMat {
  // Every element: the same fmas in the same order in one accumulator whatever the tile, then
  // store_tile512's reduction.
  static constexpr bool kShapeInvariant = true;

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, Hr, Dr, SCr, d_stride, sc_stride, Xt, XSt, xs_stride] = at(r, t);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i high_bits = _mm512_set1_epi8(0x30);
    const __m512i m32 = _mm512_set1_epi8(32);
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    const __m512i dup = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
    const __m512i shl = _mm512_setr_epi64(4, 2, 4, 2, 4, 2, 4, 2);  // fields 0, 1 to bits 4-5
    const __m512i shr = _mm512_setr_epi64(0, 2, 0, 2, 0, 2, 0, 2);  // fields 2, 3 to bits 4-5
    const __m512i quad_of_lane = _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    // vpshufb control of quad 0's sub-block a scale words: dword lane L takes byte 2 (L / 4) of
    // the super-block's 16 scales (broadcast to every 128-bit lane) into its byte 1, zeroes the
    // rest (0x80): the dword (256 * sc, 0). Quad q's adds 8q to byte 1, sub-block b's 1 more.
    const __m512i sc_ctl =
        _mm512_or_si512(_mm512_set1_epi32(static_cast<int>(0x80800080u)),
                        _mm512_slli_epi32(_mm512_add_epi32(quad_of_lane, quad_of_lane), 8));
    const __m512i zero = _mm512_setzero_si512();
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
    alignas(32) float sc[R][T][8];  // d / 256 * x_scale per group of the super-block
    for (uint32_t s = 0; s < supers; ++s) {
      const uint32_t gb = s * kQ4kSuperGroups;
      const uint32_t nb = groups - gb < kQ4kSuperGroups ? groups - gb : kQ4kSuperGroups;
      {
        const __mmask8 bm = static_cast<__mmask8>((1u << nb) - 1);
        __m256 xs[T];  // zero past nb (never read)
        for (int j = 0; j < T; ++j) xs[j] = _mm256_maskz_loadu_ps(bm, XSt + j * xs_stride + gb);
        q6k_super_start<R, T>(xs, Dr, d_stride, s, Wr, w_row_bytes, Hr, hi_row_bytes, gb, sc);
      }
      for (uint32_t q = 0; 4 * q < nb; ++q) {
        const size_t g = gb + 4 * q;
        const uint32_t ng = nb - 4 * q < 4 ? nb - 4 * q : 4;  // groups in this quad
        const __mmask64 wmask = ng == 4 ? ~0ull : (1ull << (16 * ng)) - 1;
        const __mmask32 hmask = ng == 4 ? ~0u : (1u << (8 * ng)) - 1;
        const __mmask64 xmask_a = ng >= 2 ? ~0ull : (1ull << (32 * ng)) - 1;
        const __mmask64 xmask_b = ng == 4 ? ~0ull : ng <= 2 ? 0 : (1ull << (32 * (ng - 2))) - 1;
        const __m512i sidx =
            _mm512_add_epi32(quad_of_lane, _mm512_set1_epi32(static_cast<int>(4 * q)));
        const __m512i ctl_a =
            _mm512_add_epi32(sc_ctl, _mm512_set1_epi32(static_cast<int>(8 * q) << 8));
        const __m512i ctl_b = _mm512_add_epi32(ctl_a, _mm512_set1_epi32(1 << 8));
        // The activations' side first, then row by row: each unpacked row meets every token at
        // once, so only one row's vectors are live (decode's 8-row tile holds them for one row).
        __m512i xlo[T], xhi[T], nlo[T], nhi[T];  // values 0..15 / 16..31, and -32 x their sums
        for (int j = 0; j < T; ++j) {
          const int8_t* xp = Xt + j * x_stride + g * kQuantGroup;
          const __m512i a = ng >= 2 ? _mm512_loadu_si512(xp) : _mm512_maskz_loadu_epi8(xmask_a, xp);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(xp + 64)
                                    : _mm512_maskz_loadu_epi8(xmask_b, xp + 64);
          xlo[j] = _mm512_permutex2var_epi64(a, lo_idx, b);
          xhi[j] = _mm512_permutex2var_epi64(a, hi_idx, b);
          nlo[j] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, m32, xlo[j]));
          nhi[j] = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, m32, xhi[j]));
        }
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = Wr + i * w_row_bytes + g * (kQuantGroup / 2);
          const uint8_t* h = Hr + i * hi_row_bytes + g * (kQuantGroup / 4);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(p) : _mm512_maskz_loadu_epi8(wmask, p);
          const __m256i hv = ng == 4 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h))
                                     : _mm256_maskz_loadu_epi8(hmask, h);
          const __m512i hh = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(hv));
          // a | (b & c): the clean nibbles, the shifted fields under 0x30
          const __m512i nlo_w = _mm512_and_si512(b, nib);
          const __m512i nhi_w = _mm512_and_si512(_mm512_srli_epi16(b, 4), nib);
          const __m512i qlo =
              _mm512_ternarylogic_epi32(nlo_w, _mm512_sllv_epi64(hh, shl), high_bits, 0xf8);
          const __m512i qhi =
              _mm512_ternarylogic_epi32(nhi_w, _mm512_srlv_epi64(hh, shr), high_bits, 0xf8);
          const int8_t* scp = SCr + i * sc_stride + kQ6kSubsPerSuper * s;
          const __m512i scb =
              _mm512_broadcast_i32x4(_mm_loadu_si128(reinterpret_cast<const __m128i*>(scp)));
          const __m512i sa = _mm512_shuffle_epi8(scb, ctl_a);
          const __m512i sb = _mm512_shuffle_epi8(scb, ctl_b);
          for (int j = 0; j < T; ++j) {
            const __m512i ta = _mm512_dpbusd_epi32(nlo[j], qlo, xlo[j]);
            const __m512i tb = _mm512_dpbusd_epi32(nhi[j], qhi, xhi[j]);
            const __m512i c = _mm512_dpwssd_epi32(_mm512_madd_epi16(ta, sa), tb, sb);
            const __m512 sv =
                _mm512_permutexvar_ps(sidx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][j])));
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), sv, acc[i][j]);
          }
        }
      }
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

// Q6kQuad with the activations' side prepared once per call and token (Q6kPrep, below) instead
// of in every tile: per quad of 4 groups, x regrouped to the weights' order (values 0..15 /
// 16..31 of the four groups), -32 x its 4-byte sums (the vpdpbusd starts) and each lane's x
// scale (lane L: group L / 4's). A tile's quad then takes, per row, Q6kQuad's unpacking and
// scale shuffles, and per token 2 vpdpbusd, vpmaddwd, vpdpwssd, cvt, a multiply by d / 256
// and the fma: no per-tile x permutes or sums, and no per-row vpermps of the scales. Every row
// takes the same float ops in the same order in decode and in every tile (kShapeInvariant); the
// values equal Q6kQuad's integer sums, the floats may differ from its in the last bits
// (summation order of the fmas: per quad here, per group there).
constexpr size_t kQ6PXlo = 0, kQ6PXhi = 64, kQ6PNlo = 128, kQ6PNhi = 192, kQ6PScale = 256,
                 kQ6PQuadBytes = 320;

struct Q6kPrep : Q6kMat {
  static constexpr bool kShapeInvariant = true;
  uint32_t quads;    // whole quads per row
  uint32_t tail;     // groups past them (0..3)
  const uint8_t* P;  // prepared token t at P + t * p_stride
  size_t p_stride;

  static void prep_token(const int8_t* xt, const float* st, uint32_t groups, uint8_t* o) {
    const uint32_t nq = (groups + 3) / 4;
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    const __m512i m32 = _mm512_set1_epi8(32);
    const __m512i zero = _mm512_setzero_si512();
    const __m512i quad_of_lane = _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    for (uint32_t qd = 0; qd < nq; ++qd, o += kQ6PQuadBytes) {
      const uint32_t ng = groups - 4 * qd < 4 ? groups - 4 * qd : 4;
      const int8_t* xp = xt + size_t{4 * qd} * kQuantGroup;
      const __mmask64 ma = ng >= 2 ? ~0ull : (1ull << (32 * ng)) - 1;
      const __mmask64 mb = ng == 4 ? ~0ull : ng <= 2 ? 0 : (1ull << (32 * (ng - 2))) - 1;
      const __m512i a = _mm512_maskz_loadu_epi8(ma, xp);
      const __m512i b = _mm512_maskz_loadu_epi8(mb, xp + 64);
      const __m512i xlo = _mm512_permutex2var_epi64(a, lo_idx, b);
      const __m512i xhi = _mm512_permutex2var_epi64(a, hi_idx, b);
      _mm512_store_si512(o + kQ6PXlo, xlo);
      _mm512_store_si512(o + kQ6PXhi, xhi);
      _mm512_store_si512(o + kQ6PNlo, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, m32, xlo)));
      _mm512_store_si512(o + kQ6PNhi, _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, m32, xhi)));
      const __m512 s = _mm512_castps128_ps512(
          _mm_maskz_loadu_ps(static_cast<__mmask8>((1u << ng) - 1), st + 4 * qd));
      _mm512_store_ps(o + kQ6PScale, _mm512_permutexvar_ps(quad_of_lane, s));
    }
  }

  template <int R, int T, bool kTail>
  [[gnu::always_inline]] void quad(const uint8_t* Wr, const uint8_t* Hr, uint32_t qd,
                                   const __m512i (&sab)[R][2], const __m512 (&dv)[R],
                                   const uint8_t* const (&pq)[T], __m512 (&acc)[R][T]) const {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i high_bits = _mm512_set1_epi8(0x30);
    const __m512i dup = _mm512_setr_epi64(0, 0, 1, 1, 2, 2, 3, 3);
    const __m512i shl = _mm512_setr_epi64(4, 2, 4, 2, 4, 2, 4, 2);  // fields 0, 1 to bits 4-5
    const __m512i shr = _mm512_setr_epi64(0, 2, 0, 2, 0, 2, 0, 2);  // fields 2, 3 to bits 4-5
    for (int i = 0; i < R; ++i) {
      const uint8_t* p = Wr + i * w_row_bytes + size_t{qd} * 64;
      const uint8_t* h = Hr + i * hi_row_bytes + size_t{qd} * 32;
      __m512i b;
      __m256i hv;
      if constexpr (kTail) {
        b = _mm512_maskz_loadu_epi8((1ull << (16 * tail)) - 1, p);
        hv = _mm256_maskz_loadu_epi8((1u << (8 * tail)) - 1, h);
      } else {
        b = _mm512_loadu_si512(p);
        hv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(h));
      }
      const __m512i hh = _mm512_permutexvar_epi64(dup, _mm512_castsi256_si512(hv));
      const __m512i qlo = _mm512_ternarylogic_epi32(_mm512_and_si512(b, nib),
                                                    _mm512_sllv_epi64(hh, shl), high_bits, 0xf8);
      const __m512i qhi = _mm512_ternarylogic_epi32(_mm512_and_si512(_mm512_srli_epi16(b, 4), nib),
                                                    _mm512_srlv_epi64(hh, shr), high_bits, 0xf8);
      for (int j = 0; j < T; ++j) {
        const uint8_t* pj = pq[j];
        const __m512i ta = _mm512_dpbusd_epi32(_mm512_load_si512(pj + kQ6PNlo), qlo,
                                               _mm512_load_si512(pj + kQ6PXlo));
        const __m512i tb = _mm512_dpbusd_epi32(_mm512_load_si512(pj + kQ6PNhi), qhi,
                                               _mm512_load_si512(pj + kQ6PXhi));
        const __m512i c = _mm512_dpwssd_epi32(_mm512_madd_epi16(ta, sab[i][0]), tb, sab[i][1]);
        const __m512 sv = _mm512_mul_ps(dv[i], _mm512_load_ps(pj + kQ6PScale));
        acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(c), sv, acc[i][j]);
      }
    }
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, Hr, Dr, SCr, d_stride, sc_stride, Xt, XSt, xs_stride] = at(r, t);
    (void)Xt;
    (void)XSt;
    (void)xs_stride;
    const __m512i quad_of_lane = _mm512_srli_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), 2);
    // Q6kQuad's scale controls, for the first and the second quad of a super-block.
    const __m512i sc_ctl =
        _mm512_or_si512(_mm512_set1_epi32(static_cast<int>(0x80800080u)),
                        _mm512_slli_epi32(_mm512_add_epi32(quad_of_lane, quad_of_lane), 8));
    const __m512i ctl[2][2] = {
        {sc_ctl, _mm512_add_epi32(sc_ctl, _mm512_set1_epi32(1 << 8))},
        {_mm512_add_epi32(sc_ctl, _mm512_set1_epi32(8 << 8)),
         _mm512_add_epi32(sc_ctl, _mm512_set1_epi32(9 << 8))}};
    __m512 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm512_setzero_ps();
    const uint8_t* pt[T];
    for (int j = 0; j < T; ++j) pt[j] = P + (t + j) * p_stride;
    __m512 dv[R];       // d / 256 of the super-block, per row
    __m512i scb[R];     // its 16 scales in every 128-bit lane
    for (int i = 0; i < R; ++i) {
      dv[i] = _mm512_setzero_ps();
      scb[i] = _mm512_setzero_si512();
    }
    const uint32_t all = quads + (tail ? 1 : 0);
    for (uint32_t qd = 0; qd < all; ++qd) {
      const uint32_t s = qd / 2;
      if (qd % 2 == 0) {
        for (int i = 0; i < R; ++i) {
          dv[i] = _mm512_set1_ps(q6k_d256(Dr + i * d_stride + s));
          scb[i] = _mm512_broadcast_i32x4(
              _mm_loadu_si128(reinterpret_cast<const __m128i*>(SCr + i * sc_stride + kQ6kSubsPerSuper * s)));
          const uint8_t* lo = Wr + i * w_row_bytes + size_t{s} * 128 + kPrefetchBytes;
          prefetch(lo);
          prefetch(lo + 64);
          prefetch(Hr + i * hi_row_bytes + size_t{s} * 64 + kPrefetchBytes / 2);
        }
      }
      __m512i sab[R][2];
      for (int i = 0; i < R; ++i) {
        sab[i][0] = _mm512_shuffle_epi8(scb[i], ctl[qd % 2][0]);
        sab[i][1] = _mm512_shuffle_epi8(scb[i], ctl[qd % 2][1]);
      }
      const uint8_t* pq[T];
      for (int j = 0; j < T; ++j) pq[j] = pt[j] + size_t{qd} * kQ6PQuadBytes;
      if (qd < quads) quad<R, T, false>(Wr, Hr, qd, sab, dv, pq, acc);
      else quad<R, T, true>(Wr, Hr, qd, sab, dv, pq, acc);
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};


}  // namespace

// ---- softmax -----------------------------------------------------------------------------------
// As softmax_avx2 (max, then exp(x - max) stored and summed, then each divided by the sum) with 16
// lanes, and exp's 2^n applied by vscalefps: one instruction with a single rounding (denormal
// results included) where exp_ps splits 2^n into two factors and an overflow blend. The
// polynomial and the range reduction are exp_ps's, so values agree with it to an ulp or two
// (test_kernels_isa: 1e-5 relative). Attention calls it on every head's scores each decode step
// (about a tenth of attention's time at depth 2,048 on the SmolLM2 shape).

namespace {

// exp(x) for softmax's x - max (never above 0: no overflow), as exp_ps: x < -103.97 gives 0, NaN
// stays NaN.
inline __m512 exp512_nonpos(__m512 x) {
  const __mmask16 unf = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-103.97208404541015625f), _CMP_LT_OQ);
  x = _mm512_max_ps(_mm512_set1_ps(-103.9f), x);  // NaN: max returns its second operand
  const __m512 fx = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(0.693359375f), x);
  x = _mm512_fnmadd_ps(fx, _mm512_set1_ps(-2.12194440e-4f), x);
  __m512 y = _mm512_set1_ps(1.9875691500e-4f);
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.3981999507e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(8.3334519073e-3f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(4.1665795894e-2f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(1.6666665459e-1f));
  y = _mm512_fmadd_ps(y, x, _mm512_set1_ps(5.0000001201e-1f));
  y = _mm512_fmadd_ps(y, _mm512_mul_ps(x, x), _mm512_add_ps(x, _mm512_set1_ps(1.0f)));
  return _mm512_maskz_scalef_ps(static_cast<__mmask16>(~unf), y, fx);  // y * 2^fx
}

inline __mmask16 first_lanes16(uint32_t n) {
  return n >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << n) - 1);
}

}  // namespace

float softmax_avx512(float* x, uint32_t size) {
  // Two independent max / sum chains over the whole 32-value steps (as softmax_avx2's), then the
  // 16-lane rest with masks.
  __m512 mv = _mm512_set1_ps(x[0]), mv2 = mv;
  uint32_t i = 0;
  for (; i + 32 <= size; i += 32) {
    mv = _mm512_max_ps(mv, _mm512_loadu_ps(x + i));
    mv2 = _mm512_max_ps(mv2, _mm512_loadu_ps(x + i + 16));
  }
  for (; i < size; i += 16) {
    const __mmask16 m = first_lanes16(size - i);
    mv = _mm512_mask_max_ps(mv, m, mv, _mm512_maskz_loadu_ps(m, x + i));
  }
  const __m512 mx = _mm512_set1_ps(_mm512_reduce_max_ps(_mm512_max_ps(mv, mv2)));
  __m512 sv = _mm512_setzero_ps(), sv2 = _mm512_setzero_ps();
  i = 0;
  for (; i + 32 <= size; i += 32) {
    const __m512 e = exp512_nonpos(_mm512_sub_ps(_mm512_loadu_ps(x + i), mx));
    const __m512 e2 = exp512_nonpos(_mm512_sub_ps(_mm512_loadu_ps(x + i + 16), mx));
    _mm512_storeu_ps(x + i, e);
    _mm512_storeu_ps(x + i + 16, e2);
    sv = _mm512_add_ps(sv, e);
    sv2 = _mm512_add_ps(sv2, e2);
  }
  sv = _mm512_add_ps(sv, sv2);
  for (; i < size; i += 16) {
    const __mmask16 m = first_lanes16(size - i);
    const __m512 e = _mm512_maskz_mov_ps(m, exp512_nonpos(_mm512_sub_ps(_mm512_maskz_loadu_ps(m, x + i), mx)));
    _mm512_mask_storeu_ps(x + i, m, e);
    sv = _mm512_add_ps(sv, e);
  }
  const __m512 sum = _mm512_set1_ps(_mm512_reduce_add_ps(sv));
  for (i = 0; i < size; i += 16) {
    const __mmask16 m = first_lanes16(size - i);
    _mm512_mask_storeu_ps(x + i, m, _mm512_div_ps(_mm512_maskz_loadu_ps(m, x + i), sum));
  }
  return _mm512_cvtss_f32(mx) + logf(_mm512_cvtss_f32(sum));
}

// ---- f32 / f16 attention (kernels.h: attn_dot, attn_accum and their n-query forms) -------------
// As AVX2's (avx2.cc) with 16 lanes and twice the registers. A score is one fma chain of 16 lanes
// per (query, row) over the head's columns, then summed by a shuffle tree (hsum4x16), 4 rows a
// tile, each row loaded once for up to 3 queries. A value output is one fma chain per column in
// row order; the 3 queries' 64 columns (12 accumulators) stay in registers for the whole walk, so
// each value row is converted once for all of them (AVX2's 16 registers take 32 columns at a
// time). The n-query entries give each query what the one-query
// entry gives it, bit for bit. The runtime's attend walks the cache in blocks and prefetches the
// next one, so the grouped kernels request nothing; the one-query value walk (beam steps) fetches
// kAttnAheadRows ahead as AVX2's does.

namespace {

// 16 values (lanes past the mask zero) of f16 / f32 rows from element e.
template <bool F16>
inline __m512 load_w16(const void* base, size_t e, __mmask16 m = 0xffff) {
  if (F16) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(m, static_cast<const uint16_t*>(base) + e));
  }
  return _mm512_maskz_loadu_ps(m, static_cast<const float*>(base) + e);
}

// The 4 sums of a[0..3]'s 16 lanes, each in one order whatever the other three hold: per lane of
// a 128-bit block (blocks 0 + 2) + (1 + 3), then (l0 + l2) + (l1 + l3). So a row's score does not
// depend on its place in a tile, and a row alone (the others zero) gets the same bits. 14 vector
// ops, where folding each to 8 lanes and hsum4 took 8 + 3 hadds + 2.
inline __m128 hsum4x16(const __m512 (&a)[4]) {
  // [a(0+2), a(1+3), b(0+2), b(1+3)] of rows 0, 1 and of rows 2, 3
  const __m512 p0 = _mm512_add_ps(_mm512_shuffle_f32x4(a[0], a[1], 0x44),
                                  _mm512_shuffle_f32x4(a[0], a[1], 0xee));
  const __m512 p1 = _mm512_add_ps(_mm512_shuffle_f32x4(a[2], a[3], 0x44),
                                  _mm512_shuffle_f32x4(a[2], a[3], 0xee));
  // Block b: row b's 4 lanes summed over its blocks.
  const __m512 v = _mm512_add_ps(_mm512_shuffle_f32x4(p0, p1, 0x88),
                                 _mm512_shuffle_f32x4(p0, p1, 0xdd));
  const __m512 w = _mm512_add_ps(v, _mm512_permute_ps(v, 0x4e));  // [l0 + l2, l1 + l3, ..]
  const __m512 z = _mm512_add_ps(w, _mm512_permute_ps(w, 0xb1));
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0);
  return _mm512_castps512_ps128(_mm512_permutexvar_ps(order, z));
}

// Scores of NQ queries (q + t * q_stride) over n_rows rows (stride elements apart), times scale,
// to out + t * out_stride: 4 rows a tile, each row loaded once for the NQ queries (q comes from
// L1). 8-row tiles measured slower: attention's 20-row blocks left 4 rows to the one-row path.
template <bool F16, int NQ>
void scores16(const float* q, size_t q_stride, const void* k_rows, size_t stride,
              uint32_t n_rows, uint32_t hd, float scale, float* out, size_t out_stride) {
  const uint32_t full = hd & ~15u;
  const __mmask16 tmask = first_lanes16(hd & 15u);  // 0: no tail
  const __m128 s4 = _mm_set1_ps(scale);
  uint32_t j = 0;
  for (; j + 4 <= n_rows; j += 4) {
    const size_t base = static_cast<size_t>(j) * stride;
    __m512 acc[NQ][4];
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) acc[t][r] = _mm512_setzero_ps();
    for (uint32_t c = 0; c < full; c += 16) {
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512 kv = load_w16<F16>(k_rows, base + r * stride + c);
#pragma GCC unroll 4
        for (int t = 0; t < NQ; ++t) {
          acc[t][r] = _mm512_fmadd_ps(kv, _mm512_loadu_ps(q + t * q_stride + c), acc[t][r]);
        }
      }
    }
    if (tmask) {
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m512 kv = load_w16<F16>(k_rows, base + r * stride + full, tmask);
#pragma GCC unroll 4
        for (int t = 0; t < NQ; ++t) {
          acc[t][r] = _mm512_fmadd_ps(kv, _mm512_maskz_loadu_ps(tmask, q + t * q_stride + full),
                                      acc[t][r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t) {
      _mm_storeu_ps(out + t * out_stride + j, _mm_mul_ps(hsum4x16(acc[t]), s4));
    }
  }
  for (; j < n_rows; ++j) {
    const size_t base = static_cast<size_t>(j) * stride;
    for (int t = 0; t < NQ; ++t) {
      const float* qt = q + t * q_stride;
      __m512 acc[4];
      for (int r = 0; r < 4; ++r) acc[r] = _mm512_setzero_ps();
      for (uint32_t c = 0; c < full; c += 16) {
        acc[0] = _mm512_fmadd_ps(load_w16<F16>(k_rows, base + c), _mm512_loadu_ps(qt + c), acc[0]);
      }
      if (tmask) {
        acc[0] = _mm512_fmadd_ps(load_w16<F16>(k_rows, base + full, tmask),
                                 _mm512_maskz_loadu_ps(tmask, qt + full), acc[0]);
      }
      out[t * out_stride + j] = _mm_cvtss_f32(hsum4x16(acc)) * scale;
    }
  }
}

template <bool F16>
void scores_queries16(const float* q, uint32_t n_q, const void* k_rows, size_t stride,
                      uint32_t n_rows, uint32_t hd, float scale, float* out, size_t out_stride) {
  uint32_t t = 0;
  for (; t + 3 <= n_q; t += 3) {
    scores16<F16, 3>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                     out_stride);
  }
  if (n_q - t == 2) {
    scores16<F16, 2>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                     out_stride);
  } else if (n_q - t == 1) {
    scores16<F16, 1>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                     out_stride);
  }
}

// out_t[c, c + 16 NV) += sum_j w_t[j] v_j[c, c + 16 NV) for NQ queries (weights w + t * w_stride,
// outputs out + t * out_stride), the last vector's lanes limited to `last` (the others full): each
// value vector converted once for the NQ queries, every output one fma chain in row order.
// kAhead: fetch the row kAttnAheadRows ahead (the one-query walk over a whole head, whose rows
// are strided: the other heads' values sit between them).
template <int NQ, int NV, bool F16, bool kAhead>
void accum16(const float* w, size_t w_stride, const void* v_rows, size_t stride, uint32_t n_rows,
             size_t c, __mmask16 last, float* out, size_t out_stride) {
  __m512 acc[NQ][NV];
#pragma GCC unroll 4
  for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 4
    for (int k = 0; k < NV; ++k) {
      const __mmask16 m = k + 1 < NV ? 0xffff : last;
      acc[t][k] = _mm512_maskz_loadu_ps(m, out + t * out_stride + c + 16 * k);
    }
  constexpr size_t kElem = F16 ? 2 : 4;
  for (uint32_t j = 0; j < n_rows; ++j) {
    const size_t base = static_cast<size_t>(j) * stride + c;
    if constexpr (kAhead) {
      const char* ahead =
          static_cast<const char*>(v_rows) + (base + kAttnAheadRows * stride) * kElem;
      for (size_t b = 0; b < 16 * NV * kElem; b += 64) prefetch(ahead + b);
    }
    __m512 v[NV];
#pragma GCC unroll 4
    for (int k = 0; k < NV; ++k) {
      v[k] = load_w16<F16>(v_rows, base + 16 * k, k + 1 < NV ? 0xffff : last);
    }
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t) {
      const __m512 a = _mm512_set1_ps(w[t * w_stride + j]);
#pragma GCC unroll 4
      for (int k = 0; k < NV; ++k) acc[t][k] = _mm512_fmadd_ps(a, v[k], acc[t][k]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 4
    for (int k = 0; k < NV; ++k) {
      const __mmask16 m = k + 1 < NV ? 0xffff : last;
      _mm512_mask_storeu_ps(out + t * out_stride + c + 16 * k, m, acc[t][k]);
    }
}

// NQ queries over all hd columns: chunks of 64 (4 vectors), then one of the 1-3 vectors left.
template <int NQ, bool F16, bool kAhead>
void accum_queries16(const float* w, size_t w_stride, const void* v_rows, size_t stride,
                     uint32_t n_rows, uint32_t hd, float* out, size_t out_stride) {
  uint32_t c = 0;
  for (; c + 64 <= hd; c += 64) {
    accum16<NQ, 4, F16, kAhead>(w, w_stride, v_rows, stride, n_rows, c, 0xffff, out, out_stride);
  }
  const uint32_t left = hd - c;
  if (left == 0) return;
  const __mmask16 last = first_lanes16(left - (left - 1) / 16 * 16);
  if (left > 32) {
    accum16<NQ, 3, F16, kAhead>(w, w_stride, v_rows, stride, n_rows, c, last, out, out_stride);
  } else if (left > 16) {
    accum16<NQ, 2, F16, kAhead>(w, w_stride, v_rows, stride, n_rows, c, last, out, out_stride);
  } else {
    accum16<NQ, 1, F16, kAhead>(w, w_stride, v_rows, stride, n_rows, c, last, out, out_stride);
  }
}

template <bool F16>
void accum_n16(const float* w, uint32_t n_q, size_t w_stride, const void* v_rows, size_t stride,
               uint32_t n_rows, uint32_t hd, float* out) {
  uint32_t t = 0;
  for (; t + 3 <= n_q; t += 3) {
    accum_queries16<3, F16, false>(w + t * w_stride, w_stride, v_rows, stride, n_rows, hd,
                                   out + static_cast<size_t>(t) * hd, hd);
  }
  if (n_q - t == 2) {
    accum_queries16<2, F16, false>(w + t * w_stride, w_stride, v_rows, stride, n_rows, hd,
                                   out + static_cast<size_t>(t) * hd, hd);
  } else if (n_q - t == 1) {
    accum_queries16<1, F16, false>(w + t * w_stride, w_stride, v_rows, stride, n_rows, hd,
                                   out + static_cast<size_t>(t) * hd, hd);
  }
}

// attn_dot_tiled over NT tiles (tile t's first element at e + t * ts) for NQ queries: one chain
// per tile, query and column parity (2 * NT * NQ accumulators, 12 for 2 x 3: enough chains to
// keep both FMA pipes busy), each tile's column converted once for all queries.
template <bool F16, int NQ, int NT>
inline void tiled_scores16(const float* q, uint32_t head_dim, const void* k, size_t e, size_t ts,
                           float scale, __m512 (&res)[NT][NQ]) {
  __m512 ev[NT][NQ], od[NT][NQ];
#pragma GCC unroll 2
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
    for (int u = 0; u < NQ; ++u) ev[t][u] = od[t][u] = _mm512_setzero_ps();
  }
  for (uint32_t i = 0; i < head_dim; i += 2) {
    __m512 k0[NT], k1[NT];
#pragma GCC unroll 2
    for (int t = 0; t < NT; ++t) {
      k0[t] = load_w16<F16>(k, e + t * ts + static_cast<size_t>(i) * kAttnTile);
      k1[t] = load_w16<F16>(k, e + t * ts + static_cast<size_t>(i + 1) * kAttnTile);
    }
#pragma GCC unroll 4
    for (int u = 0; u < NQ; ++u) {
      const __m512 qe = _mm512_set1_ps(q[u * head_dim + i]);
      const __m512 qo = _mm512_set1_ps(q[u * head_dim + i + 1]);
#pragma GCC unroll 2
      for (int t = 0; t < NT; ++t) {
        ev[t][u] = _mm512_fmadd_ps(qe, k0[t], ev[t][u]);
        od[t][u] = _mm512_fmadd_ps(qo, k1[t], od[t][u]);
      }
    }
  }
  const __m512 s = _mm512_set1_ps(scale);
#pragma GCC unroll 2
  for (int t = 0; t < NT; ++t) {
#pragma GCC unroll 4
    for (int u = 0; u < NQ; ++u) res[t][u] = _mm512_mul_ps(s, _mm512_add_ps(ev[t][u], od[t][u]));
  }
}

// Lanes of the tile starting at position `base` that fall in [j0, j1).
inline __mmask16 tile_mask(uint32_t base, uint32_t j0, uint32_t j1) {
  const uint32_t lo = j0 > base ? j0 - base : 0;
  const uint32_t hi = j1 - base < kAttnTile ? j1 - base : kAttnTile;
  return static_cast<__mmask16>(((1u << hi) - 1) & ~((1u << lo) - 1));
}

template <bool F16, int NQ>
void tiled_range16(const float* q, const void* k, uint32_t ts, uint32_t j0, uint32_t j1,
                   uint32_t head_dim, float scale, float* out, uint32_t os) {
  uint32_t t = j0 / kAttnTile;
  const uint32_t t_end = (j1 + kAttnTile - 1) / kAttnTile;
  for (; t + 2 <= t_end; t += 2) {
    __m512 r[2][NQ];
    tiled_scores16<F16, NQ, 2>(q, head_dim, k, static_cast<size_t>(t) * ts, ts, scale, r);
    for (int i = 0; i < 2; ++i) {
      const uint32_t base = (t + i) * kAttnTile;
      const __mmask16 m = tile_mask(base, j0, j1);
      for (int u = 0; u < NQ; ++u) _mm512_mask_storeu_ps(out + u * size_t{os} + base, m, r[i][u]);
    }
  }
  if (t < t_end) {
    __m512 r[1][NQ];
    tiled_scores16<F16, NQ, 1>(q, head_dim, k, static_cast<size_t>(t) * ts, ts, scale, r);
    const uint32_t base = t * kAttnTile;
    const __mmask16 m = tile_mask(base, j0, j1);
    for (int u = 0; u < NQ; ++u) _mm512_mask_storeu_ps(out + u * size_t{os} + base, m, r[0][u]);
  }
}

// Queries 4 at a time (22 registers for 2 tiles), then the rest.
template <bool F16>
void tiled16(const float* q, uint32_t n_q, const void* k, uint32_t ts, uint32_t j0, uint32_t j1,
             uint32_t head_dim, float scale, float* out, uint32_t os) {
  if (j0 >= j1) return;
  for (uint32_t u = 0; u < n_q; u += 4) {
    const float* qu = q + static_cast<size_t>(u) * head_dim;
    float* o = out + static_cast<size_t>(u) * os;
    switch (n_q - u) {
      case 1: tiled_range16<F16, 1>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
      case 2: tiled_range16<F16, 2>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
      case 3: tiled_range16<F16, 3>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
      default: tiled_range16<F16, 4>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
    }
  }
}

}  // namespace

void attn_dot_avx512(const float* q, const void* k_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out) {
  if (k_f16) scores16<true, 1>(q, 0, k_rows, row_stride_elems, n_rows, head_dim, scale, out, 0);
  else scores16<false, 1>(q, 0, k_rows, row_stride_elems, n_rows, head_dim, scale, out, 0);
}

void attn_accum_avx512(const float* w, const void* v_rows, uint32_t row_stride_elems,
                       uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out) {
  if (v_f16) {
    accum_queries16<1, true, true>(w, 0, v_rows, row_stride_elems, n_rows, head_dim, out, 0);
  } else {
    accum_queries16<1, false, true>(w, 0, v_rows, row_stride_elems, n_rows, head_dim, out, 0);
  }
}

void attn_dot_n_avx512(const float* q, uint32_t n_q, const void* k_rows,
                       uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim, bool k_f16,
                       float scale, float* out, uint32_t out_stride) {
  if (k_f16) {
    scores_queries16<true>(q, n_q, k_rows, row_stride_elems, n_rows, head_dim, scale, out,
                           out_stride);
  } else {
    scores_queries16<false>(q, n_q, k_rows, row_stride_elems, n_rows, head_dim, scale, out,
                            out_stride);
  }
}

void attn_accum_n_avx512(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,
                         uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim,
                         bool v_f16, float* out) {
  if (v_f16) accum_n16<true>(w, n_q, w_stride, v_rows, row_stride_elems, n_rows, head_dim, out);
  else accum_n16<false>(w, n_q, w_stride, v_rows, row_stride_elems, n_rows, head_dim, out);
}

void attn_dot_tiled_avx512(const float* q, uint32_t n_q, const void* k_tiles,
                           uint32_t tile_stride_elems, uint32_t j0, uint32_t j1, uint32_t head_dim,
                           bool k_f16, float scale, float* out, uint32_t out_stride) {
  if (k_f16) tiled16<true>(q, n_q, k_tiles, tile_stride_elems, j0, j1, head_dim, scale, out, out_stride);
  else tiled16<false>(q, n_q, k_tiles, tile_stride_elems, j0, j1, head_dim, scale, out, out_stride);
}

// Decode 8 rows x 1 token, prefill 4 x 4, as Q4kQuad.
void matmul_q6k_avx512(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1) {
  if (q6k_prepared_matmul<Q6kPrep, kQ6PQuadBytes, kPrepBytes, 8, 4, 4>(
          w, x, n & ~kMatmulExactRows, y, r0, r1)) {
    return;
  }
  drive<8, 4, 4>(q6k_mat<Q6kQuad>(w, x, y), n, r0, r1);
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_X86
