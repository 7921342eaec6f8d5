// x86-64 AVX2 + FMA + F16C kernels (compiled with -mavx2 -mfma -mf16c; see isa.h for why nothing
// here may use a shared header's inline function).
//
// Matmuls walk output rows in tiles (rows outer, tokens inner): a tile of R rows x T tokens keeps
// R*T accumulators in registers, so each loaded weight block serves T tokens and each activation
// block R rows. Decode (n = 1) uses 4 rows x 1 token: one pass over the weights, the activation
// group shared by four rows; for Q8, f16 / f32 and Q6K the four rows are a quarter of the range
// apart (decode_walk's strided tiles, tile.inc: four long streams instead of four short ones).
// Prefill uses 2 rows x 4 tokens (Q8, Q5, Q4_1, Q5_1, Q6K) / 4 x 2 (float, Q5K; Q4K and Q4 take
// block sums).
//
// Q8: per 32-group, vpsignb makes |w| (unsigned) and x*sign(w), vpmaddubsw + vpmaddwd give eight
// exact int32 partial sums (|w| <= 128, |x| <= 127: pair sums stay below 2^15), converted to float
// and scaled by w_scale*x_scale. (Block sums as Q4's below were tried for Q8, the sums as
// vpsignb + vpmaddubsw + vpmaddwd + vpaddd per 32 multiply-adds: on Zen 5 no faster than these
// tiles at 1-128 tokens, the core being bound by the vector op count, which the 8x8 transposes
// and the registers of 8 tokens ate up.)
// Q4: block sums (Q4Blocks, below) for every token count: each group's exact integer dot product
// finished in its own int32 lane (the unsigned nibbles' products summed as int16 words, ~2 ops
// per 32 multiply-adds in multi-token tiles), then one convert, scale and fma per 8 groups; decode
// and multi-token calls give every row the same floats. QuantTile<true> (below) for rows too wide
// for its stack buffer: 16 bytes become 32 unsigned nibbles u = v + 8 in [0, 15] (low/high
// nibble, matching the x[0..15] / x[16..31] order of the layout, then xor 8); maddubs(u, x) -
// maddubs(8, x) is the exact signed dot product, the second term shared by all rows of the tile.
// Q5: the same with u = q = nibble | 16 * fifth bit in [0, 31] (the fifth bits
// as Q5K's, below) and maddubs(u, x) - maddubs(16, x) (31 * 127 * 2 < 2^15, 16 * 128 * 2 = 4096:
// neither saturates; QuantTile<true, true>). Q4_1 / Q5_1: Q4's / Q5's walk over q as it is
// (unsigned: maddubs(q, x) is the dot product, no correction), scaled by d and the min term
// m * x_sum added per block of 8 groups (QuantTile<true, false / true, true>). Q4K: Q4's block
// sums (Q4Blocks<true>: a super-block is a block; the nibbles are unsigned already, so no offset
// and no -8 x sum; the 8 levels d * sc scale the block's sums and d_min * m times the
// activations' group sums is taken off with one fnmadd per block); Q4kTile for rows too wide
// for the stack buffer. Q5K: Q4K's walk with each group's fifth bits or'd into its nibbles as 16 (q in
// [0, 31]: pair sums 31 * 127 * 2 < 2^15; Q4kTile<true>). Q6K: four groups at a time over the
// 6-bit values with the activations prepared in the weights' byte order, offset 32 removed as
// Q4's 8, the sub-block scales applied in int16 by vpmaddwd (Q6kQuads; Q6kTile, a group at a
// time, for rows too wide for its stack buffer).
#include "isa.h"

#if defined(RINGLM_KERNELS_X86)

#if !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "x86/avx2.cc needs -mavx2 -mfma -mf16c (kernels/CMakeLists.txt)"
#endif

#include <immintrin.h>
#include <math.h>
#include <string.h>

#include <utility>

#include "x86/x86.inc"

namespace ringlm::internal {
namespace {

using namespace x86;

// ---- f32 / f16 matmuls --------------------------------------------------------------------------

// Loads 8 weights (f32 or f16) as floats; `rem` < 8 loads a zero-padded tail.
template <bool F16>
inline __m256 load_w8(const void* base, size_t idx) {
  if (F16) return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
                   static_cast<const uint16_t*>(base) + idx)));
  return _mm256_loadu_ps(static_cast<const float*>(base) + idx);
}

template <bool F16>
inline __m256 load_w_tail(const void* base, size_t idx, uint32_t rem) {
  if (F16) {
    uint16_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(tmp, static_cast<const uint16_t*>(base) + idx, rem * sizeof(uint16_t));
    return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(tmp)));
  }
  return _mm256_maskload_ps(static_cast<const float*>(base) + idx, tail_mask(rem));
}

// Float dot products of R weight rows with T activation rows (cols values each).
template <bool F16>
struct FloatMat : FloatOperands {
  static constexpr bool kShapeInvariant = true;  // per-element fma order; store_tile: hsum order
  static constexpr bool kRowStep = true;         // decode_walk's strided tiles (tile.inc)
  FloatMat strided(uint32_t r, uint32_t step) const {
    FloatMat k;
    static_cast<FloatOperands&>(k) = strided_view(r, step, F16 ? 2 : 4);
    return k;
  }
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    __m256 acc[R][T];
    // Zeroed lane by lane: `= {}` made GCC 12 clear a stack copy with rep stos in every tile
    // (~30 cycles; a 64-wide attention row tile does only 8 steps) though acc lives in registers.
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    const size_t wrow = static_cast<size_t>(r) * w_stride;
    const float* x = X + static_cast<size_t>(t) * x_stride;
    // Decode (T == 1) walks R rows side by side, which the hardware prefetcher alone follows
    // poorly (f32 SmolLM2-135M decode, one thread: 35 -> 45 tok/s with this): each row is
    // prefetched kPrefetchBytes ahead, once per 64-byte line. Prefill reuses each weight T times
    // and is compute-bound. The accumulation order is the same either way (bit-equal prefill).
    constexpr uint32_t kLineElems = F16 ? 32 : 16;
    constexpr size_t kAheadElems = kPrefetchBytes / (F16 ? 2 : 4);
    uint32_t c = 0;
    for (; c + 8 <= cols; c += 8) {
      if (T == 1 && c % kLineElems == 0) {
        for (int i = 0; i < R; ++i) {
          const size_t e = wrow + i * w_stride + c + kAheadElems;
          prefetch(F16 ? static_cast<const void*>(static_cast<const uint16_t*>(W) + e)
                       : static_cast<const void*>(static_cast<const float*>(W) + e));
        }
      }
      __m256 xv[T];
      for (int j = 0; j < T; ++j) xv[j] = _mm256_loadu_ps(x + j * x_stride + c);
      for (int i = 0; i < R; ++i) {
        const __m256 wv = load_w8<F16>(W, wrow + i * w_stride + c);
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
      }
    }
    if (c < cols) {
      const uint32_t rem = cols - c;
      __m256 xv[T];
      for (int j = 0; j < T; ++j) xv[j] = _mm256_maskload_ps(x + j * x_stride + c, tail_mask(rem));
      for (int i = 0; i < R; ++i) {
        const __m256 wv = load_w_tail<F16>(W, wrow + i * w_stride + c, rem);
        for (int j = 0; j < T; ++j) acc[i][j] = _mm256_fmadd_ps(wv, xv[j], acc[i][j]);
      }
    }
    store_tile<R, T>(acc, Y + static_cast<size_t>(t) * y_stride + r, y_stride, y_step);
  }
};

// ---- Q8 / Q4 / Q5 -------------------------------------------------------------------------------

// 16 packed bytes -> their 32 nibbles as bytes 0..15 (value j in byte j, j = 0..31): low nibbles
// in the lower lane, high nibbles (the upper lane shifted by 4) in the upper one.
inline __m256i unpack_nibbles(const uint8_t* p) {
  const __m256i b = _mm256_broadcastsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  const __m256i sh = _mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4));
  return _mm256_and_si256(sh, _mm256_set1_epi8(0x0f));
}

// Q4: the signed nibbles v as unsigned values v + 8.
inline __m256i unpack_q4(const uint8_t* p) {
  return _mm256_xor_si256(unpack_nibbles(p), _mm256_set1_epi8(0x08));
}

// Q5 / Q5K: the fifth bits of a group's values as bytes 16 * bit in value order, from its 4 bytes
// at p (bit k of byte j: value 4k + j's). A dword broadcast gives byte lane v byte v % 4, the one
// holding value v's bit, and dword k (values 4k..4k+3) keeps its bytes' bit k: each byte is 0 or
// 2^k. vpsignb(16, that) then gives 16 where it is not 0 (dword 7's 2^7 is a negative byte: its
// sixteens are -16, negated). Two ops before the merge, where aligning the bit by shifts takes
// three (vpsrlvd by k, vpslld 4, vpand 0x10).
inline __m256i unpack_fifth_bits(const uint8_t* p) {
  int32_t bits;
  memcpy(&bits, p, sizeof bits);
  const __m256i bit_k = _mm256_setr_epi32(0x01010101, 0x02020202, 0x04040404, 0x08080808,
                                          0x10101010, 0x20202020, 0x40404040,
                                          static_cast<int>(0x80808080u));
  const __m256i sixteen = _mm256_setr_epi32(0x10101010, 0x10101010, 0x10101010, 0x10101010,
                                            0x10101010, 0x10101010, 0x10101010,
                                            static_cast<int>(0xf0f0f0f0u));  // -16: see above
  return _mm256_sign_epi8(sixteen, _mm256_and_si256(_mm256_set1_epi32(bits), bit_k));
}

// Q5 / Q5K: a group's unsigned q = nibble | 16 * fifth bit in [0, 31] in value order, from its
// 16 nibble bytes at p and its 4 fifth-bit bytes at h.
inline __m256i unpack_q5(const uint8_t* p, const uint8_t* h) {
  const __m256i q = unpack_nibbles(p);  // first (GCC evaluates call arguments right to left)
  return _mm256_or_si256(q, unpack_fifth_bits(h));
}

// The five differ only in the int32 partial sums of a group (see the top of the file):
//   Q8: maddubs(|w|, x * sign(w));  Q4: maddubs(u, x) - maddubs(8, x), the second per token;
//   Q5 (kFive, a Q4 tile: its nibble plane is Q4's shape): maddubs(q, x) - maddubs(16, x), q with
//   the fifth bits of HI;
//   Q4_1 / Q5_1 (kMin, with Q4 / Q4 and kFive): maddubs(q, x), q unsigned as it is (no offset,
//   no correction); per block of 8 groups the scales d * x_scale come from the (d, m) pairs and
//   the min term m * x_sum is added to the accumulator, one fma per row and token
//   (block_scales_dm).
// Decode ops per group and row: Q4 8 (vpsrlvq, vpand, vpxor, then vpmaddubsw, vpmaddwd, vpsubd,
// vcvtdq2ps, vfmadd), Q5 10 (vpand, vpsignb, vpor in place of vpxor; and a broadcast load of the
// 4 bytes); the correction's 2 per group and token are shared by the tile's rows. Q4_1 6 (Q4's
// without vpxor and vpsubd), Q5_1 9 (Q5's without vpsubd); and per row and block of 8 groups 8
// for the pairs and the min term (load, vpshufb, vpermq, vextracti128, 2 vcvtph2ps, vmulps,
// vfmadd) where block_scales takes 2 (vcvtph2ps, vmulps): 7 / 10 ops a group against Q4's 8.25 /
// Q5's 10.25.
template <bool Q4, bool kFive = false, bool kMin = false>
struct QuantTile : QuantMat {
  static_assert(Q4 || !kFive, "Q5 takes Q4's walk");
  static_assert(Q4 || !kMin, "Q4_1 / Q5_1 take Q4's walk");
  static constexpr bool kQ4 = Q4;
  // As FloatMat (Q5, Q4_1, Q5_1: the fifth bits and the offset only change the integers, exact
  // either way; the min term is one fma per block in block order whatever the tile).
  static constexpr bool kShapeInvariant = true;
  // decode_walk's strided tiles (tile.inc) for Q8 only: Q5 / Q4_1 / Q5_1 (more planes a row,
  // more ops a group) measured 2-4 % slower with them (SmolLM2 q5 decode, one thread, Zen 5).
  static constexpr bool kRowStep = !Q4;
  static constexpr size_t kGroupBytes = Q4 ? kQuantGroup / 2 : kQuantGroup;
  QuantTile strided(uint32_t r, uint32_t step) const {
    QuantTile k;
    static_cast<QuantMat&>(k) = strided_view(r, step);
    return k;
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, WSr, Xt, XSt, xs_stride] = at(r, t);
    const uint8_t* Hr = kFive ? HI + r * hi_row_bytes : nullptr;  // Q5, Q5_1: row r's fifth bits
    const float* XMt = kMin ? XSUM + t * xs_stride : nullptr;     // Q4_1, Q5_1: token t's sums
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i offset = _mm256_set1_epi8(kFive ? 16 : 8);  // Q4 / Q5: the unsigned offset
    __m256 acc[R][T];
    // Zeroed lane by lane: `= {}` made GCC 12 clear a stack copy with rep stos in every tile
    // (~30 cycles; a 64-wide attention row tile does only 8 steps) though acc lives in registers.
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    alignas(32) float sc[R][T][8];
    for (uint32_t gb = 0; gb < groups; gb += 8) {
      const uint32_t nb = groups - gb < 8 ? groups - gb : 8;
      if constexpr (kMin) {
        block_scales_dm<R, T>(
            WSr, ws_row, XSt, XMt, xs_stride, gb, nb, sc, acc,
            [](__m256 m, __m256 xm, __m256 a) { return _mm256_fmadd_ps(m, xm, a); });
        // The (d, m) plane: 4 bytes a group, as the fifth bits (x86.inc).
        for (int i = 0; i < R; ++i) {
          prefetch_fifth_bits(reinterpret_cast<const uint8_t*>(WSr + i * ws_row), gb / 8);
        }
      } else {
        block_scales<R, T>(WSr, ws_row, XSt, xs_stride, gb, nb, sc);
      }
      if constexpr (kFive) {
        // A block's 8 groups of fifth bits are a Q5K super-block's: its prefetch, out of the
        // group loop as there.
        for (int i = 0; i < R; ++i) prefetch_fifth_bits(Hr + i * hi_row_bytes, gb / 8);
      }
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        __m256i wv[R], u[R];  // Q8: w and |w|; Q4, Q5: u only
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = Wr + i * w_row_bytes + g * kGroupBytes;
          if (k % (64 / kGroupBytes) == 0) prefetch(p + kPrefetchBytes);  // once per line
          if constexpr (kFive) {
            u[i] = unpack_q5(p, Hr + i * hi_row_bytes + g * (kQuantGroup / 8));
          } else if constexpr (kMin) {
            u[i] = unpack_nibbles(p);  // Q4_1: unsigned already
          } else if constexpr (Q4) {
            u[i] = unpack_q4(p);
          } else {
            wv[i] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
            u[i] = _mm256_sign_epi8(wv[i], wv[i]);
          }
        }
        for (int j = 0; j < T; ++j) {
          const __m256i xv = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(Xt + j * x_stride + g * kQuantGroup));
          __m256i corr = _mm256_setzero_si256();
          if constexpr (Q4 && !kMin) {
            corr = _mm256_madd_epi16(_mm256_maddubs_epi16(offset, xv), ones);
          }
          for (int i = 0; i < R; ++i) {
            __m256i d;
            if constexpr (kMin) {
              d = _mm256_madd_epi16(_mm256_maddubs_epi16(u[i], xv), ones);
            } else if constexpr (Q4) {
              d = _mm256_sub_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u[i], xv), ones), corr);
            } else {
              d = _mm256_madd_epi16(_mm256_maddubs_epi16(u[i], _mm256_sign_epi8(xv, wv[i])), ones);
            }
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_broadcast_ss(&sc[i][j][k]),
                                        acc[i][j]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride, y_step);
  }
};

// ---- Q4K / Q5K ----------------------------------------------------------------------------------
// Per 32-group: the unsigned nibbles q (unpack_nibbles) times the int8 activations, vpmaddubsw +
// vpmaddwd: eight exact int32 partial sums (15 * 127 * 2 < 2^15: no saturation), converted and
// fma'd with the group's combined scale (d * sc_g) * x_scale_g. Per super-block, the 8 combined
// scales of each (row, token) come from one vector op chain (sc[8] widened, * d, * x_scale[8]),
// and the min term (dmin * m[8]) * x_sum[8] is subtracted from the same accumulator with one fnmadd
// (lane k: group k's min; lanes of groups a short super-block lacks add 0).
// Q5K is the same walk with q = nibble | 16 * fifth bit (unpack_q5) in [0, 31]: pair sums
// 31 * 127 * 2 < 2^15, still exact. Decode ops per group and row: Q4K 6 (vpsrlvq, vpand, then
// vpmaddubsw, vpmaddwd, vcvtdq2ps, vfmadd), Q5K 9 (vpand, vpsignb, vpor more; and a broadcast
// load of the 4 bytes).

// `nb` (1..8) floats, zero past nb (never read).
inline __m256 load_f32_upto8(const float* p, uint32_t nb) {
  return nb == 8 ? _mm256_loadu_ps(p) : _mm256_maskload_ps(p, tail_mask(nb));
}

// kFive: Q5K (the fifth-bit plane or'd into every group's nibbles); else Q4K (Hr null, unread).
template <bool kFive>
struct Q4kTile : Q4kMat {
  // Every element: the same group fmas and per-super-block fnmadds in the same order in one
  // accumulator whatever the tile, then store_tile's hsum order (the fifth bits only change the
  // integers, exact either way).
  static constexpr bool kShapeInvariant = true;
  // No strided decode tiles (tile.inc): Q5K decode measured 11 % slower with them (two planes a
  // row, compute-bound on AVX2: SmolLM2 q5k, one thread, Zen 5).

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, Hr, DMr, SUBr, dm_stride, sub_stride, Xt, XSt, XMt, xs_stride] = at(r, t);
    const __m256i ones = _mm256_set1_epi16(1);
    __m256 acc[R][T];
    // Zeroed lane by lane (see QuantTile).
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    alignas(32) float sc[R][T][8];
    for (uint32_t s = 0; s < supers; ++s) {
      const uint32_t gb = s * kQ4kSuperGroups;
      const uint32_t nb = groups - gb < kQ4kSuperGroups ? groups - gb : kQ4kSuperGroups;
      {
        __m256 xs[T], xm[T];
        for (int j = 0; j < T; ++j) {
          xs[j] = load_f32_upto8(XSt + j * xs_stride + gb, nb);
          xm[j] = load_f32_upto8(XMt + j * xs_stride + gb, nb);
        }
        for (int i = 0; i < R; ++i) {
          __m256 dl, ml;
          q4k_levels(DMr + i * dm_stride + 2 * s, SUBr + i * sub_stride + 16 * s, &dl, &ml);
          for (int j = 0; j < T; ++j) {
            _mm256_store_ps(sc[i][j], _mm256_mul_ps(dl, xs[j]));
            acc[i][j] = _mm256_fnmadd_ps(ml, xm[j], acc[i][j]);
          }
          if constexpr (kFive) prefetch_fifth_bits(Hr + i * hi_row_bytes, s);
        }
      }
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        __m256i u[R];
        for (int i = 0; i < R; ++i) {
          const uint8_t* p = Wr + i * w_row_bytes + g * (kQuantGroup / 2);
          if (k % 4 == 0) prefetch(p + kPrefetchBytes);  // once per 64-byte line
          if constexpr (kFive) {
            u[i] = unpack_q5(p, Hr + i * hi_row_bytes + g * (kQuantGroup / 8));
          } else {
            u[i] = unpack_nibbles(p);
          }
        }
        for (int j = 0; j < T; ++j) {
          const __m256i xv = _mm256_loadu_si256(
              reinterpret_cast<const __m256i*>(Xt + j * x_stride + g * kQuantGroup));
          for (int i = 0; i < R; ++i) {
            const __m256i d = _mm256_madd_epi16(_mm256_maddubs_epi16(u[i], xv), ones);
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_broadcast_ss(&sc[i][j][k]),
                                        acc[i][j]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

// ---- Q6K ---------------------------------------------------------------------------------------
// Per 32-group and row: the 6-bit q as 32 unsigned bytes in value order (the low nibbles as
// unpack_nibbles gives them, or'd with unpack_q6k_high's 16 * h), then vpmaddubsw(q, x) -
// vpmaddubsw(32, x): the int16 pair sums of (q - 32) x, exact (63 * 127 * 2 and 32 * 128 * 2 are
// below 2^15: neither saturates; the second term is per token, shared by the tile's rows).
// vpmaddwd with the sub-block scales as words 256 * sc (lower lane, values 0..15: sc_a; upper
// lane, 16..31: sc_b; x86.inc) gives eight exact int32 lanes, converted and fma'd with the group's
// d / 256 * x_scale as Q4K's are. About twice Q4K's instructions per group (12 vector ops a row
// in decode against 6) for 1.4 times its bytes.

// The high 2 bits of a group's values as bytes 16 * h in value order, from its 8 bytes at p:
// broadcast, the upper lane shifted by 4 (fields 2, 3 down to bits 0-3, as unpack_nibbles), then
// per byte the field it needs as an index (bytes 0-7 of a lane: bits 0-1, so 0..3; bytes 8-15:
// bits 2-3, so 0, 4, 8, 12; two index sets meeting only at 0) into one table of 16 * field.
inline __m256i unpack_q6k_high(const uint8_t* p) {
  const __m256i b = _mm256_broadcastq_epi64(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  const __m256i sh = _mm256_srlv_epi64(b, _mm256_setr_epi64x(0, 0, 4, 4));
  const __m256i field = _mm256_setr_epi8(3, 3, 3, 3, 3, 3, 3, 3, 12, 12, 12, 12, 12, 12, 12, 12,
                                         3, 3, 3, 3, 3, 3, 3, 3, 12, 12, 12, 12, 12, 12, 12, 12);
  const __m256i times16 = _mm256_setr_epi8(0, 16, 32, 48, 16, 0, 0, 0, 32, 0, 0, 0, 48, 0, 0, 0,
                                           0, 16, 32, 48, 16, 0, 0, 0, 32, 0, 0, 0, 48, 0, 0, 0);
  return _mm256_shuffle_epi8(times16, _mm256_and_si256(sh, field));
}

struct Q6kTile : Q6kMat {
  // Every element: the same group fmas in the same order in one accumulator whatever the tile,
  // then store_tile's hsum order.
  static constexpr bool kShapeInvariant = true;
  static constexpr bool kRowStep = true;  // decode_walk's strided tiles (tile.inc)
  Q6kTile strided(uint32_t r, uint32_t step) const {
    Q6kTile k;
    static_cast<Q6kMat&>(k) = strided_view(r, step);
    return k;
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, Hr, Dr, SCr, d_stride, sc_stride, Xt, XSt, xs_stride] = at(r, t);
    const __m256i m32 = _mm256_set1_epi8(32);
    // vpshufb control spreading a group's two scale bytes (sc_a, sc_b, broadcast): words 256 * sc_a
    // in the lower lane, 256 * sc_b in the upper (their low bytes zeroed by index 0x80).
    const __m256i sc_ctl = _mm256_setr_epi8(
        -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0, -128, 0,
        -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1, -128, 1);
    __m256 acc[R][T];
    // Zeroed lane by lane (see QuantTile).
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    alignas(32) float sc[R][T][8];  // d / 256 * x_scale per group of the super-block
    for (uint32_t s = 0; s < supers; ++s) {
      const uint32_t gb = s * kQ4kSuperGroups;
      const uint32_t nb = groups - gb < kQ4kSuperGroups ? groups - gb : kQ4kSuperGroups;
      {
        __m256 xs[T];
        for (int j = 0; j < T; ++j) xs[j] = load_f32_upto8(XSt + j * xs_stride + gb, nb);
        q6k_super_start<R, T>(xs, Dr, d_stride, s, Wr, w_row_bytes, Hr, hi_row_bytes, gb, sc);
      }
      for (uint32_t k = 0; k < nb; ++k) {
        const size_t g = gb + k;
        // The activations' side first (per token, shared by the rows), then row by row: each
        // unpacked row meets every token at once, so only one row's q and scales are live.
        __m256i corr[T];  // vpmaddubsw(32, x): 32 x the pair sums of x
        for (int j = 0; j < T; ++j) {
          corr[j] = _mm256_maddubs_epi16(m32, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(
                                                  Xt + j * x_stride + g * kQuantGroup)));
        }
        for (int i = 0; i < R; ++i) {
          const uint8_t* lo = Wr + i * w_row_bytes + g * (kQuantGroup / 2);
          const uint8_t* hi = Hr + i * hi_row_bytes + g * (kQuantGroup / 4);
          const __m256i q = _mm256_or_si256(unpack_nibbles(lo), unpack_q6k_high(hi));
          int16_t sc_ab;  // the group's sub-block scales sc[2k], sc[2k + 1]
          memcpy(&sc_ab, SCr + i * sc_stride + kQ6kSubsPerSuper * s + 2 * k, sizeof sc_ab);
          const __m256i scw = _mm256_shuffle_epi8(_mm256_set1_epi16(sc_ab), sc_ctl);
          for (int j = 0; j < T; ++j) {
            const __m256i xv = _mm256_loadu_si256(
                reinterpret_cast<const __m256i*>(Xt + j * x_stride + g * kQuantGroup));
            const __m256i p = _mm256_sub_epi16(_mm256_maddubs_epi16(q, xv), corr[j]);
            const __m256i d = _mm256_madd_epi16(p, scw);
            acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_broadcast_ss(&sc[i][j][k]),
                                        acc[i][j]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride, y_step);
  }
};


// ---- Q4: block sums, one int32 lane per group ---------------------------------------------------
// QuantTile<true> converts, scales and accumulates every group of every (row, token) pair: ~8
// vector ops per 32 multiply-adds, which bounds a many-token call (prefill, a speculative
// verification pass, a beam step) at the compute side. Q4Blocks finishes each group's integer
// dot product in its own int32 lane instead, and a group's products are small: u = v + 8 in
// [0, 15] times int8 x gives vpmaddubsw pair sums within +-3810, so 8 of them add up as int16
// words (16 products a word, |sum| <= 30480 < 2^15) before one vpmaddwd with ones. A block is 8
// groups (128 packed bytes: 4 vectors [group 2k | group 2k+1], 16 bytes each, one per lane); two
// ways give the same exact sums in the same lane order:
//   - several tokens: the block's 4 vectors transposed by dwords once per row and token tile
//     (transpose_packed: 8 in-lane unpacks, shared by the tile's tokens), so lane L of vector m
//     holds packed dword m of group sigma(L), sigma = 0 2 4 6 1 3 5 7 (its low nibbles: values
//     4m..4m+3; its high ones: 16+4m..16+4m+3), and the activations the same way once per call
//     (prep_block). Per token and block: 8 vpmaddubsw, 7 vpaddw, vpmaddwd, vpaddd (the
//     activations' -8 x sum(x) per group, prepared once per call): ~2 ops per 32 multiply-adds;
//   - decode (one token): the 4 vectors in memory order, vpmaddubsw against the activations
//     regrouped to match (values 0..15 / 16..31 of groups 2k, 2k+1), then the int16 words reduced
//     by transpose_packed's own unpacks with vpaddw (4, 8, 16 products a word) and one vpmaddwd:
//     the same lanes, 9 shuffle-and-add ops a block.
// Every later operation is shared: cvt, (w scale x x scale) in sigma order, one fma per block in
// block order, hsum, then the tail (below). So every output element takes the same float
// operations in the same order whatever the number of tokens or the tile: decode, a verification
// pass (kMatmulExactRows) and prefill give a row the same float, bit for bit.
// Groups past the last whole block (rem = groups % 8; SmolLM2's 576 columns: 2 blocks + 2) form
// one virtual block for K = 8 / rem rows (rem 1, 2, 4; otherwise K = 1, the block padded with
// zeros): virtual group v = rem x (row - r) + tail group, transposed as a row block, the
// activations' tail prepared to match (tail group v % rem). Its terms t_v = cvt(isum_v) x
// (w_scale_v x x_scale_v) are added to each row in group order after its blocks, y = hsum(blocks)
// + ((t0 + t1) + ...), in every tile alike (rem = 2: four rows' tails cost one block). Decode
// computes the same terms from each row's tail read in memory order (decode_tail: no lane
// inserts or transposes; SmolLM2-shape layer in cache, AVX2: q4 100 -> 92 us, q4k 127 -> 115 us)
// and adds them in the same order.
constexpr uint32_t kBlk = 8;  // groups per block
// Prepared activations of one token, per block (the whole blocks, then the tail block): x[8]
// (256 B: transposed as the weights are; a decode call's whole blocks in decode_row's order),
// int32 x 8: -8 x (sum of group sigma(L)), float x 8: the scale of group sigma(L).
constexpr size_t kPX = 0, kPNeg = 256, kPScale = 288, kPBlockBytes = 320;
// Stack buffer for the prepared tokens of one chunk (more tokens take several chunks, each
// reading the weights again: at 64 KiB a row of 576 / 1536 columns leaves 68 / 34 tokens a
// chunk). Worker stacks are 256 KiB (platform/threads.h).
constexpr size_t kBlkPrepBytes = 64 * 1024;
// Tokens per multi-token tile: a block's 8 unpacked weight vectors stay in registers, each
// token's int16 sum and float accumulator beside them (measured on Zen 5: 8 beat 4 and 6).
constexpr int kBlkTileTokens = 8;
// Rows per row block of the multi-token walk: per block, tiles outer and rows inner, so a tile's
// prepared activations stay in L1 across the block's rows (a multiple of every K).
constexpr uint32_t kBlkRows = 16;

inline __m256i q4_sigma() { return _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7); }
inline __m256i q4_sigma_inv() { return _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7); }

// p[k] = [group 2k | group 2k+1], 4 dwords each -> p[m] lane L = dword m of group sigma(L).
[[gnu::always_inline]] inline void transpose_packed(__m256i (&p)[4]) {
  const __m256i a0 = _mm256_unpacklo_epi32(p[0], p[1]), a1 = _mm256_unpackhi_epi32(p[0], p[1]);
  const __m256i a2 = _mm256_unpacklo_epi32(p[2], p[3]), a3 = _mm256_unpackhi_epi32(p[2], p[3]);
  p[0] = _mm256_unpacklo_epi64(a0, a2);
  p[1] = _mm256_unpackhi_epi64(a0, a2);
  p[2] = _mm256_unpacklo_epi64(a1, a3);
  p[3] = _mm256_unpackhi_epi64(a1, a3);
}

// Four transposed packed vectors as 8 vectors of unsigned u = v + 8 (Q4K, kK: the nibbles as
// they are, unsigned already): the low nibbles of p[k] into u[k], the high ones into u[4 + k].
template <bool kK>
[[gnu::always_inline]] inline void q4_unpack(const __m256i (&p)[4], __m256i (&u)[8]) {
  const __m256i nib = _mm256_set1_epi8(0x0f), off = _mm256_set1_epi8(static_cast<char>(0x88));
  for (int k = 0; k < 4; ++k) {
    const __m256i b = kK ? p[k] : _mm256_xor_si256(p[k], off);
    u[k] = _mm256_and_si256(b, nib);
    u[4 + k] = _mm256_and_si256(_mm256_srli_epi16(b, 4), nib);
  }
}

// Eight u16 lanes f(0) .. f(7), inserted from registers (vpinsrw; an immediate lane each).
template <typename F, size_t... V>
[[gnu::always_inline]] inline __m128i u16_lanes_seq(const F& f, std::index_sequence<V...>) {
  __m128i r = _mm_setzero_si128();
  ((r = _mm_insert_epi16(r, static_cast<int>(f(static_cast<uint32_t>(V))), static_cast<int>(V))), ...);
  return r;
}
template <typename F>
[[gnu::always_inline]] inline __m128i u16_lanes(const F& f) {
  return u16_lanes_seq(f, std::make_index_sequence<8>());
}

// kK: Q4K (a block is a super-block: its 8 levels d * sc and d_min * m from q4k_levels, the
// nibbles unsigned, the min term d_min * m * x_sum per group applied with one fnmadd per block).
template <bool kK>
struct Q4Blocks {
  static constexpr size_t kBlockBytes = kBlk * kQuantGroup / 2;  // 128
  const uint8_t* W;    // row r at W + r * w_row_bytes
  size_t w_row_bytes;
  const uint16_t* WS;  // Q4: (rows, groups) f16 scales; Q4K: (rows, supers, 2) f16 d, d_min
  const uint8_t* SUB;  // Q4K: (rows, supers, 16) sc[8], m[8]; Q4: null
  uint32_t supers;     // Q4K: super-blocks per row (blocks + (rem ? 1 : 0))
  uint32_t groups;
  uint32_t blocks;     // whole blocks
  uint32_t rem;        // groups past them (0..7)
  uint32_t K;          // rows per tail block (8 / rem, or 1 when rem does not divide 8)
  uint8_t v_row[8];    // virtual group v of the tail block: row r + v_row[v] (0xff: padding)
  uint8_t v_group[8];  // and its tail group
  uint8_t* P;          // prepared token t at P + t * p_stride
  size_t p_stride;
  float* Y;            // token t, row r at Y[t * y_stride + r]
  size_t y_stride;
  bool decode_tail_prep = false;  // decode: prep_tokens adds the block decode_tail reads

  const uint8_t* prep(uint32_t t) const { return P + t * p_stride; }

  // Block b's 8 w scales of row r, in sigma order.
  [[gnu::always_inline]] __m256 block_ws(uint32_t r, uint32_t b) const {
    const __m256 w = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(
        WS + static_cast<size_t>(r) * groups + static_cast<size_t>(b) * kBlk)));
    return _mm256_permutevar8x32_ps(w, q4_sigma());
  }

  // Block b's scales of row r in sigma order: Q4 *dl = its 8 f16 scales (*ml unset); Q4K the
  // super-block's d * sc and d_min * m.
  [[gnu::always_inline]] void block_levels(uint32_t r, uint32_t b, __m256* dl, __m256* ml) const {
    if constexpr (kK) {
      const size_t s = static_cast<size_t>(r) * supers + b;
      __m256 d, m;
      q4k_levels(WS + 2 * s, SUB + 16 * s, &d, &m);
      *dl = _mm256_permutevar8x32_ps(d, q4_sigma());
      *ml = _mm256_permutevar8x32_ps(m, q4_sigma());
    } else {
      *dl = block_ws(r, b);
      *ml = _mm256_setzero_ps();
    }
  }

  // One block of a row and token into its accumulator: + cvt(isum) x (dl x x_scale); Q4K then
  // - ml x x_sum. Decode and the tiles both take it: the same float ops in the same order.
  [[gnu::always_inline]] static __m256 block_step(__m256 acc, __m256i isum, __m256 dl, __m256 ml,
                                                  const uint8_t* pb) {
    const __m256 xs = _mm256_load_ps(reinterpret_cast<const float*>(pb + kPScale));
    acc = _mm256_fmadd_ps(_mm256_cvtepi32_ps(isum), _mm256_mul_ps(dl, xs), acc);
    if constexpr (kK) {
      acc = _mm256_fnmadd_ps(ml, _mm256_load_ps(reinterpret_cast<const float*>(pb + kPNeg)), acc);
    }
    return acc;
  }

  // Prepares tokens [0, n) of x (token t at xq + t * x_stride, its scales at xs + t * xs_stride)
  // into P; `decode`: the whole blocks in decode_row's order.
  // Q4K: xm (the activations' x_scale * sum per group, same layout as xs) is kept in the
  // block's kPNeg place, as floats.
  void prep_tokens(const int8_t* xq, size_t x_stride, const float* xs, const float* xm,
                   size_t xs_stride, uint32_t n, bool decode) const {
    for (uint32_t t = 0; t < n; ++t) {
      const int8_t* xt = xq + t * x_stride;
      const float* st = xs + t * xs_stride;
      const float* mt = kK ? xm + t * xs_stride : nullptr;
      uint8_t* o = P + t * p_stride;
      for (uint32_t b = 0; b < blocks; ++b, o += kPBlockBytes) {
        __m256i g[8];
        for (int c = 0; c < 8; ++c)
          g[c] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + (b * kBlk + c) * kQuantGroup));
        prep_block(g, _mm256_loadu_ps(st + b * kBlk), kK ? _mm256_loadu_ps(mt + b * kBlk) : _mm256_setzero_ps(),
                   decode, o);
      }
      if (rem) {
        const uint32_t g0 = blocks * kBlk;
        __m256i g[8];
        alignas(32) float s[8], m[8];
        for (uint32_t v = 0; v < kBlk; ++v) {
          const bool real = v_row[v] != 0xff;
          g[v] = real ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + (g0 + v_group[v]) * kQuantGroup))
                      : _mm256_setzero_si256();
          s[v] = real ? st[g0 + v_group[v]] : 0.0f;
          m[v] = kK && real ? mt[g0 + v_group[v]] : 0.0f;
        }
        prep_block(g, _mm256_load_ps(s), _mm256_load_ps(m), false, o);
        if (decode_tail_prep) {
          prep_decode_tail(xt + static_cast<size_t>(g0) * kQuantGroup, st + g0, kK ? mt + g0 : nullptr,
                           o + kPBlockBytes);
        }
      }
    }
  }

  // Decode: the rem tail groups (xt: the first one's 32 values, st: their scales, Q4K mt: their
  // x_scale * sum) in decode_tail's order, one block's bytes at o: vector k = values 0..15 of
  // groups 2k, 2k+1, vector 4 + k = values 16..31 (zeros past rem); at kPNeg Q4 int32 x 8:
  // -8 x (sum of group v), Q4K float x 8: mt[v]; float x 8 at kPScale: st[v]; in group order
  // (zeros past rem).
  void prep_decode_tail(const int8_t* xt, const float* st, const float* mt, uint8_t* o) const {
    __m256i g[8];
    alignas(32) int32_t neg[8];
    alignas(32) float s[8], m[8];
    for (uint32_t v = 0; v < kBlk; ++v) {
      const bool real = v < rem;
      g[v] = real ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + v * kQuantGroup))
                  : _mm256_setzero_si256();
      int32_t sum = 0;
      for (uint32_t i = 0; real && i < kQuantGroup; ++i) sum += xt[v * kQuantGroup + i];
      neg[v] = -8 * sum;
      s[v] = real ? st[v] : 0.0f;
      m[v] = kK && real ? mt[v] : 0.0f;
    }
    __m256i* ox = reinterpret_cast<__m256i*>(o + kPX);
    for (int k = 0; k < 4; ++k) {
      _mm256_store_si256(ox + k, _mm256_permute2x128_si256(g[2 * k], g[2 * k + 1], 0x20));
      _mm256_store_si256(ox + 4 + k, _mm256_permute2x128_si256(g[2 * k], g[2 * k + 1], 0x31));
    }
    if constexpr (kK) {
      _mm256_store_ps(reinterpret_cast<float*>(o + kPNeg), _mm256_load_ps(m));
    } else {
      _mm256_store_si256(reinterpret_cast<__m256i*>(o + kPNeg), _mm256_load_si256(reinterpret_cast<const __m256i*>(neg)));
    }
    _mm256_store_ps(reinterpret_cast<float*>(o + kPScale), _mm256_load_ps(s));
  }

  // One block of activations (g[c]: group c's 32 values, xs: their scales) into o.
  [[gnu::always_inline]] static void prep_block(const __m256i (&g)[8], __m256 xs, __m256 xm, bool decode,
                                                uint8_t* o) {
    __m256i* ox = reinterpret_cast<__m256i*>(o + kPX);
    // A[k] = values 0..15 of groups 2k, 2k+1; B[k] = values 16..31 (the packed bytes' order).
    __m256i A[4], B[4];
    for (int k = 0; k < 4; ++k) {
      A[k] = _mm256_permute2x128_si256(g[2 * k], g[2 * k + 1], 0x20);
      B[k] = _mm256_permute2x128_si256(g[2 * k], g[2 * k + 1], 0x31);
    }
    if (decode) {
      for (int k = 0; k < 4; ++k) {
        _mm256_store_si256(ox + k, A[k]);
        _mm256_store_si256(ox + 4 + k, B[k]);
      }
    }
    transpose_packed(A);
    transpose_packed(B);
    if (!decode) {
      for (int k = 0; k < 4; ++k) {
        _mm256_store_si256(ox + k, A[k]);
        _mm256_store_si256(ox + 4 + k, B[k]);
      }
    }
    if constexpr (kK) {
      _mm256_store_ps(reinterpret_cast<float*>(o + kPNeg), _mm256_permutevar8x32_ps(xm, q4_sigma()));
    } else {
      (void)xm;
      const __m256i eight = _mm256_set1_epi8(8);
      __m256i s = _mm256_setzero_si256();  // 8 x pair sums: |word| <= 8 x 8 x 2 x 127 < 2^15
      for (int k = 0; k < 4; ++k) {
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(eight, A[k]));
        s = _mm256_add_epi16(s, _mm256_maddubs_epi16(eight, B[k]));
      }
      _mm256_store_si256(reinterpret_cast<__m256i*>(o + kPNeg),
                         _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_madd_epi16(s, _mm256_set1_epi16(1))));
    }
    _mm256_store_ps(reinterpret_cast<float*>(o + kPScale), _mm256_permutevar8x32_ps(xs, q4_sigma()));
  }

  // The exact int32 sums of a transposed block u with prepared block pb, in sigma order (the
  // -8 x sum correction included).
  [[gnu::always_inline]] static __m256i block_isum(const __m256i (&u)[8], const uint8_t* pb) {
    const __m256i* x = reinterpret_cast<const __m256i*>(pb + kPX);
    __m256i s = _mm256_maddubs_epi16(u[0], _mm256_load_si256(x));
    for (int m = 1; m < 8; ++m) s = _mm256_add_epi16(s, _mm256_maddubs_epi16(u[m], _mm256_load_si256(x + m)));
    const __m256i d = _mm256_madd_epi16(s, _mm256_set1_epi16(1));
    if constexpr (kK) return d;
    return _mm256_add_epi32(d, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + kPNeg)));
  }

  // Decode: the sum (t0 + t1) + ... of row r's kRem tail terms t_v = cvt(isum_v) x (w_scale_v
  // x x_scale_v) (Q4K: fnmadd'ed with its min level x x_sum), the floats and order tail_rows
  // gives a row (its integer sums exact either way), read in memory order as a block: pair k of the tail's groups is one 32-byte vector (an
  // odd last group, 16 bytes). tail_rows gathers the tails of K rows into a transposed block
  // instead, whose lane inserts and transposes cost a decode call as much as the whole blocks
  // (SmolLM2's 576 columns: 2 blocks + 2 groups a row).
  template <uint32_t kRem>
  [[gnu::always_inline]] float decode_tail(uint32_t r) const {
    static_assert(kRem > 0 && kRem < kBlk, "a tail is 1..7 groups");
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i nib = _mm256_set1_epi8(0x0f), off = _mm256_set1_epi8(static_cast<char>(0x88));
    const uint8_t* p = W + static_cast<size_t>(r) * w_row_bytes + static_cast<size_t>(blocks) * kBlockBytes;
    const uint8_t* pb = prep(0) + static_cast<size_t>(blocks + 1) * kPBlockBytes;
    const __m256i* x = reinterpret_cast<const __m256i*>(pb + kPX);
    constexpr uint32_t kPairs = (kRem + 1) / 2;
    __m128i pair[4];  // pair k: [isum 2k, isum 2k+1, same, same]
    for (uint32_t k = 0; k < kPairs; ++k) {
      const __m256i raw = 2 * k + 1 < kRem
                              ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k))
                              : _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 32 * k)));
      const __m256i q = kK ? raw : _mm256_xor_si256(raw, off);
      const __m256i s = _mm256_add_epi16(
          _mm256_maddubs_epi16(_mm256_and_si256(q, nib), _mm256_load_si256(x + k)),
          _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), nib), _mm256_load_si256(x + 4 + k)));
      __m256i d = _mm256_madd_epi16(s, ones);  // 4 dwords a group (lane)
      d = _mm256_add_epi32(d, _mm256_shuffle_epi32(d, 0x4e));
      d = _mm256_add_epi32(d, _mm256_shuffle_epi32(d, 0xb1));  // every dword: its lane's sum
      pair[k] = _mm_unpacklo_epi32(_mm256_castsi256_si128(d), _mm256_extracti128_si256(d, 1));
    }
    // Groups 0..3 and 4..7 of the tail in group order.
    __m128i is[2];
    is[0] = kPairs > 1 ? _mm_unpacklo_epi64(pair[0], pair[1]) : pair[0];
    if constexpr (kPairs > 2) is[1] = kPairs > 3 ? _mm_unpacklo_epi64(pair[2], pair[3]) : pair[2];
    // Q4: the row's kRem f16 scales, exactly their bytes, put together in registers (a small
    // buffer stored in parts and loaded as one vector stalls on store forwarding: a quarter of the
    // time). Q4K: the tail super-block's levels in group order (q4k_levels, as tail_rows' lanes).
    __m256 ws, ms = _mm256_setzero_ps();
    if constexpr (kK) {
      const size_t sup = static_cast<size_t>(r) * supers + blocks;
      q4k_levels(WS + 2 * sup, SUB + 16 * sup, &ws, &ms);
    } else {
      const uint16_t* wr = WS + static_cast<size_t>(r) * groups + static_cast<size_t>(blocks) * kBlk;
      const auto bits = [wr](uint32_t v0, uint32_t v1) {
        uint64_t b = 0;
        for (uint32_t v = v0; v < v1; ++v) b |= uint64_t{wr[v]} << (16 * (v - v0));
        return static_cast<long long>(b);
      };
      __m128i wsv = _mm_cvtsi64_si128(bits(0, kRem < 4 ? kRem : 4));
      if constexpr (kRem > 4) wsv = _mm_insert_epi64(wsv, bits(4, kRem), 1);
      ws = _mm256_cvtph_ps(wsv);
    }
    const float* xs = reinterpret_cast<const float*>(pb + kPScale);
    const int32_t* neg = reinterpret_cast<const int32_t*>(pb + kPNeg);
    const float* xm = reinterpret_cast<const float*>(pb + kPNeg);
    alignas(16) float tv[8];
    for (uint32_t h = 0; h < (kRem + 3) / 4; ++h) {
      const __m128i isum = kK ? is[h] : _mm_add_epi32(is[h], _mm_load_si128(reinterpret_cast<const __m128i*>(neg + 4 * h)));
      const __m128 wh = h == 0 ? _mm256_castps256_ps128(ws) : _mm256_extractf128_ps(ws, 1);
      __m128 t = _mm_mul_ps(_mm_cvtepi32_ps(isum), _mm_mul_ps(wh, _mm_load_ps(xs + 4 * h)));
      if constexpr (kK) {
        const __m128 mh = h == 0 ? _mm256_castps256_ps128(ms) : _mm256_extractf128_ps(ms, 1);
        t = _mm_fnmadd_ps(mh, _mm_load_ps(xm + 4 * h), t);
      }
      _mm_store_ps(tv + 4 * h, t);
    }
    float t = tv[0];
    for (uint32_t v = 1; v < kRem; ++v) t += tv[v];
    return t;
  }

  // Decode: row r, token 0, the blocks in memory order; with kRem > 0 then its tail
  // (decode_tail), so y = hsum(blocks) + ((t0 + t1) + ...) as tail_rows adds it.
  template <uint32_t kRem = 0>
  void decode_row(uint32_t r) const {
    const __m256i ones = _mm256_set1_epi16(1);
    const __m256i nib = _mm256_set1_epi8(0x0f), off = _mm256_set1_epi8(static_cast<char>(0x88));
    const uint8_t* row = W + static_cast<size_t>(r) * w_row_bytes;
    __m256 acc = _mm256_setzero_ps();
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint8_t* p = row + static_cast<size_t>(b) * kBlockBytes;
      const uint8_t* pb = prep(0) + static_cast<size_t>(b) * kPBlockBytes;
      const __m256i* x = reinterpret_cast<const __m256i*>(pb + kPX);
      prefetch(p + kPrefetchBytes);
      prefetch(p + 64 + kPrefetchBytes);
      // s[k]: the words of groups 2k (lower lane) and 2k+1 (upper), 4 products each
      __m256i s[4];
      for (int k = 0; k < 4; ++k) {
        const __m256i raw = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
        const __m256i q = kK ? raw : _mm256_xor_si256(raw, off);
        s[k] = _mm256_add_epi16(
            _mm256_maddubs_epi16(_mm256_and_si256(q, nib), _mm256_load_si256(x + k)),
            _mm256_maddubs_epi16(_mm256_and_si256(_mm256_srli_epi16(q, 4), nib), _mm256_load_si256(x + 4 + k)));
      }
      // transpose_packed's unpacks, each pair added: lanes [0 2 0 2 | 1 3 1 3] and [4 6 4 6 |
      // 5 7 5 7] (8 products a word), then sigma's order (16 products a word)
      const __m256i e0 = _mm256_add_epi16(_mm256_unpacklo_epi32(s[0], s[1]), _mm256_unpackhi_epi32(s[0], s[1]));
      const __m256i e1 = _mm256_add_epi16(_mm256_unpacklo_epi32(s[2], s[3]), _mm256_unpackhi_epi32(s[2], s[3]));
      const __m256i f = _mm256_add_epi16(_mm256_unpacklo_epi64(e0, e1), _mm256_unpackhi_epi64(e0, e1));
      __m256i isum = _mm256_madd_epi16(f, ones);
      if constexpr (!kK) isum = _mm256_add_epi32(isum, _mm256_load_si256(reinterpret_cast<const __m256i*>(pb + kPNeg)));
      __m256 dl, ml;
      block_levels(r, b, &dl, &ml);
      acc = block_step(acc, isum, dl, ml, pb);
    }
    if constexpr (kRem > 0) {
      prefetch(row + static_cast<size_t>(blocks) * kBlockBytes + kPrefetchBytes);
      Y[r] = hsum(acc) + decode_tail<kRem>(r);
    } else {
      Y[r] = hsum(acc);
    }
  }

  // Decode of rows [r0, r1) whose rows have kRem tail groups each.
  template <uint32_t kRem>
  void decode_rows(uint32_t r0, uint32_t r1) const {
    for (uint32_t r = r0; r < r1; ++r) decode_row<kRem>(r);
  }

  // Row r, tokens [t, t+T): each block unpacked and transposed once for the T tokens.
  template <int T>
  void row_tokens(uint32_t r, uint32_t t) const {
    const uint8_t* row = W + static_cast<size_t>(r) * w_row_bytes;
    __m256 acc[T];
    for (int j = 0; j < T; ++j) acc[j] = _mm256_setzero_ps();
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint8_t* p = row + static_cast<size_t>(b) * kBlockBytes;
      __m256i q[4], u[8];
      for (int k = 0; k < 4; ++k) q[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
      transpose_packed(q);
      q4_unpack<kK>(q, u);
      __m256 dl, ml;
      block_levels(r, b, &dl, &ml);
      for (int j = 0; j < T; ++j) {
        const uint8_t* pb = prep(t + j) + static_cast<size_t>(b) * kPBlockBytes;
        acc[j] = block_step(acc[j], block_isum(u, pb), dl, ml, pb);
      }
    }
    for (int j = 0; j < T; ++j) Y[static_cast<size_t>(t + j) * y_stride + r] = hsum(acc[j]);
  }

  // The tail block of rows [r, r + K) below r_end, tokens [t, t + n): y += each row's terms in
  // group order.
  void tail_rows(uint32_t r, uint32_t r_end, uint32_t t, uint32_t n) const {
    const uint32_t rows = r_end - r < K ? r_end - r : K;
    const uint32_t g0 = blocks * kBlk;
    __m128i v16[8];
    size_t lane_row[8];  // a padding lane reads row r (its value is never summed)
    for (uint32_t v = 0; v < kBlk; ++v) {
      const bool real = v_row[v] < rows;
      lane_row[v] = static_cast<size_t>(r + (real ? v_row[v] : 0));
      const size_t g = g0 + v_group[v];
      v16[v] = real ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(W + lane_row[v] * w_row_bytes + g * (kQuantGroup / 2)))
                    : _mm_setzero_si128();
    }
    // The virtual groups' scales are put into vector lanes from registers (vpinsrw): stored as
    // scalars and loaded back as one vector they cost a store-forwarding stall a tail (~8 % of
    // SmolLM2 q4 decode in perf, at the vector load). Only real lanes (v_row[v] < rows) reach
    // y; a padding lane's level is whatever its clamped row gives.
    __m256 ws, ms = _mm256_setzero_ps();
    if constexpr (kK) {
      // As q4k_levels: float(sc) x d, float(m) x d_min (the same single rounding). v_group < 8:
      // within the super-block's 16 sub-scale bytes.
      const auto sup = [&](uint32_t v) { return lane_row[v] * supers + blocks; };
      const __m128i sc = u16_lanes([&](uint32_t v) { return SUB[16 * sup(v) + v_group[v]]; });
      const __m128i mn = u16_lanes([&](uint32_t v) { return SUB[16 * sup(v) + 8 + v_group[v]]; });
      const __m128i d = u16_lanes([&](uint32_t v) { return WS[2 * sup(v)]; });
      const __m128i dm = u16_lanes([&](uint32_t v) { return WS[2 * sup(v) + 1]; });
      ws = _mm256_permutevar8x32_ps(
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(sc)), _mm256_cvtph_ps(d)), q4_sigma());
      ms = _mm256_permutevar8x32_ps(
          _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepu16_epi32(mn)), _mm256_cvtph_ps(dm)), q4_sigma());
    } else {
      // A padding lane's group may lie past the row's scales: 0 there.
      const __m128i h = u16_lanes(
          [&](uint32_t v) { return v_row[v] < rows ? WS[lane_row[v] * groups + g0 + v_group[v]] : 0; });
      ws = _mm256_permutevar8x32_ps(_mm256_cvtph_ps(h), q4_sigma());
    }
    __m256i q[4], u[8];
    for (int k = 0; k < 4; ++k) q[k] = _mm256_setr_m128i(v16[2 * k], v16[2 * k + 1]);
    transpose_packed(q);
    q4_unpack<kK>(q, u);
    const uint32_t nr = K > 1 ? rows : 1;
    for (uint32_t j = t; j < t + n; ++j) {
      const uint8_t* pb = prep(j) + static_cast<size_t>(blocks) * kPBlockBytes;
      const __m256 xs = _mm256_load_ps(reinterpret_cast<const float*>(pb + kPScale));
      __m256 terms = _mm256_mul_ps(_mm256_cvtepi32_ps(block_isum(u, pb)), _mm256_mul_ps(ws, xs));
      if constexpr (kK) {
        terms = _mm256_fnmadd_ps(ms, _mm256_load_ps(reinterpret_cast<const float*>(pb + kPNeg)), terms);
      }
      alignas(32) float tv[8];  // in virtual group order
      _mm256_store_ps(tv, _mm256_permutevar8x32_ps(terms, q4_sigma_inv()));
      float* yr = Y + static_cast<size_t>(j) * y_stride + r;
      for (uint32_t i = 0; i < nr; ++i) {
        float s = tv[i * rem];
        for (uint32_t g = 1; g < rem; ++g) s += tv[i * rem + g];
        yr[i] += s;
      }
    }
  }

  void tile(uint32_t r, uint32_t t, uint32_t width) const {
    switch (width) {
      case 8: return row_tokens<8>(r, t);
      case 7: return row_tokens<7>(r, t);
      case 6: return row_tokens<6>(r, t);
      case 5: return row_tokens<5>(r, t);
      case 4: return row_tokens<4>(r, t);
      case 3: return row_tokens<3>(r, t);
      case 2: return row_tokens<2>(r, t);
      case 1: return row_tokens<1>(r, t);
      default: return;
    }
  }

  // Rows [r0, r1) x tokens [0, n) (n >= 2): the tokens in the fewest tiles of at most
  // kBlkTileTokens, their widths balanced (9 tokens: 5 + 4, not 8 + 1), the rows in blocks of
  // kBlkRows: per block, tiles outer and rows inner (a tile's prepared activations stay in L1
  // across the block's rows).
  void rows_all(uint32_t r0, uint32_t r1, uint32_t n) const {
    const uint32_t tiles = (n + kBlkTileTokens - 1) / kBlkTileTokens;
    const uint32_t base = n / tiles, extra = n % tiles;
    for (uint32_t rb = r0; rb < r1; rb += kBlkRows) {
      const uint32_t re = r1 - rb < kBlkRows ? r1 : rb + kBlkRows;
      uint32_t t = 0;
      for (uint32_t i = 0; i < tiles; ++i) {
        const uint32_t width = base + (i < extra ? 1 : 0);
        for (uint32_t r = rb; r < re; ++r) tile(r, t, width);
        if (rem) {
          for (uint32_t r = rb; r < re; r += K) tail_rows(r, re, t, width);
        }
        t += width;
      }
    }
  }
};

// false when one token's prepared activations do not fit the stack buffer (rows wider than
// ~50k columns) or there are none (no columns): then the caller takes QuantTile, for every token
// count alike.
template <bool kK>
bool q4_blocks(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
               uint32_t r1) {
  const uint32_t groups = w.row_stride / kQuantGroup;
  const uint32_t blocks = groups / kBlk, rem = groups % kBlk;
  const size_t base_bytes = (blocks + (rem ? 1 : 0)) * kPBlockBytes;
  if (base_bytes == 0 || base_bytes > kBlkPrepBytes) return false;
  // Decode prepares one more block when it fits: the tail in decode_tail's order.
  const size_t decode_extra =
      rem && n == 1 && base_bytes + kPBlockBytes <= kBlkPrepBytes ? kPBlockBytes : 0;
  const size_t per_token = base_bytes + decode_extra;
  alignas(32) uint8_t prep[kBlkPrepBytes];
  const uint32_t chunk = static_cast<uint32_t>(kBlkPrepBytes / per_token);
  if (kK && !x.sums) return false;  // no min-term sums: never for a run holding a Q4K matrix
  Q4Blocks<kK> k;
  k.W = static_cast<const uint8_t*>(w.data);
  k.w_row_bytes = w.row_stride / 2;
  k.WS = w.scales;
  k.SUB = kK ? w.subs : nullptr;
  k.supers = blocks + (rem ? 1 : 0);
  k.groups = groups;
  k.blocks = blocks;
  k.rem = rem;
  k.K = rem == 0 ? 1 : kBlk % rem == 0 ? kBlk / rem : 1;
  for (uint32_t v = 0; v < kBlk; ++v) {
    const bool pad = k.K == 1 && v >= rem;  // rem does not divide 8: zeros past it
    k.v_row[v] = pad ? 0xff : k.K > 1 ? static_cast<uint8_t>(v / rem) : 0;
    k.v_group[v] = static_cast<uint8_t>(k.K > 1 ? v % rem : v);
  }
  k.P = prep;
  k.p_stride = per_token;
  k.decode_tail_prep = decode_extra != 0;
  k.y_stride = w.rows;
  const size_t xs_stride = x.stride / kQuantGroup;
  for (uint32_t t0 = 0; t0 < n; t0 += chunk) {
    // A last chunk of one token takes the decode walk: the same floats as a tile's.
    const uint32_t nt = n - t0 < chunk ? n - t0 : chunk;
    k.prep_tokens(x.qs + static_cast<size_t>(t0) * x.stride, x.stride,
                  x.scales + static_cast<size_t>(t0) * xs_stride,
                  kK ? x.sums + static_cast<size_t>(t0) * xs_stride : nullptr, xs_stride, nt, nt == 1);
    k.Y = y + static_cast<size_t>(t0) * w.rows;
    if (nt == 1 && decode_extra) {
      switch (rem) {
        case 1: k.template decode_rows<1>(r0, r1); break;
        case 2: k.template decode_rows<2>(r0, r1); break;
        case 3: k.template decode_rows<3>(r0, r1); break;
        case 4: k.template decode_rows<4>(r0, r1); break;
        case 5: k.template decode_rows<5>(r0, r1); break;
        case 6: k.template decode_rows<6>(r0, r1); break;
        default: k.template decode_rows<7>(r0, r1); break;
      }
    } else if (nt == 1) {
      for (uint32_t r = r0; r < r1; r += k.K) {
        const uint32_t re = r1 - r < k.K ? r1 : r + k.K;
        for (uint32_t i = r; i < re; ++i) k.decode_row(i);
        if (rem) k.tail_rows(r, re, 0, 1);
      }
    } else {
      k.rows_all(r0, r1, nt);
    }
  }
  return true;
}


// ---- Q6K: four groups at a time ------------------------------------------------------------
// Q6kTile spends ~15 vector ops a group and row, 3-4 of them byte shuffles (one port on Intel):
// it spreads each group's 8 high-bit bytes with vpshufb and builds its two scale words with a
// broadcast and vpshufb. Q6kQuads takes a quad of 4 groups (64 nibble bytes, 32 high-bit bytes)
// at once and lets the activations follow the weights' byte order instead (prepared once per
// call and token, shared by every row): with T = the quad's high-bit bytes in group order
// 0, 2, 1, 3 (one vpermq), L / U = the low / high qwords of the nibble bytes of groups (0, 2 |
// 1, 3) (vpunpcklqdq / vpunpckhqdq), the 6-bit values are
//   V0 = L & 15 | (T << 4) & 48   values 0..7    of groups [0, 2 | 1, 3]
//   V1 = U & 15 | (T << 2) & 48   values 8..15
//   V2 = L >> 4 | T & 48          values 16..23
//   V3 = U >> 4 | (T >> 2) & 48   values 24..31
// (the 16-bit shifts' carries between bytes are masked off), the activations X0..X3 in the same
// order. Per quad, row and token: vpmaddubsw(V, X) summed for the two 8-value halves of each
// sub-block in int16 (4 products of q in [0, 63] and |x| <= 127: below 2^15), minus 32 x their x
// sums (prepared), vpmaddwd with the sub-block scales as words 256 * sc (one vpshufb each from
// the quad's 8 scale bytes) and added: int32 lanes [g0, g0, g2, g2 | g1, g1, g3, g3] each
// 256 * sc * 8 products (|.| < 2^31 - 2^23: no overflow; a multiple of 256 of an integer below
// 2^24, so its conversion is exact), converted and fma'd with d / 256 x the group's x scale.
// ~9 vector ops a group and row, 1.25 shuffles. Decode and every tile give each row the same
// float ops in the same order (kShapeInvariant). A last partial quad (groups % 4 of a row, e.g.
// 2 of a 576-wide row) reads only its groups' bytes; the prepared activations are zero past them.
constexpr size_t kQ6PX = 0, kQ6PCorr = 128, kQ6PScale = 192, kQ6PQuadBytes = 224;

struct Q6kQuads : Q6kMat {
  static constexpr bool kShapeInvariant = true;
  static constexpr bool kRowStep = true;  // decode_walk's strided tiles (tile.inc)
  uint32_t quads;       // whole quads per row
  uint32_t tail;        // groups past them (0..3)
  const uint8_t* P;     // prepared token t at P + t * p_stride (kQ6PQuadBytes per quad)
  size_t p_stride;

  Q6kQuads strided(uint32_t r, uint32_t step) const {
    Q6kQuads k = *this;
    static_cast<Q6kMat&>(k) = strided_view(r, step);
    return k;
  }

  // Prepares token t's quads at o: x (in the weights' order), the -32 correction, the scales.
  static void prep_token(const int8_t* xt, const float* st, uint32_t groups, uint8_t* o) {
    const uint32_t nq = (groups + 3) / 4;
    const __m256i m32 = _mm256_set1_epi8(32);
    for (uint32_t qd = 0; qd < nq; ++qd, o += kQ6PQuadBytes) {
      __m256i g[4];
      alignas(32) float s[8];
      for (uint32_t k = 0; k < 4; ++k) {
        const uint32_t gi = 4 * qd + k;
        const bool real = gi < groups;
        g[k] = real ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xt + size_t{gi} * kQuantGroup))
                    : _mm256_setzero_si256();
        // lanes [g0, g0, g2, g2 | g1, g1, g3, g3]
        const uint32_t lane = (k % 2) * 4 + (k / 2) * 2;
        s[lane] = s[lane + 1] = real ? st[gi] : 0.0f;
      }
      const __m256i lo02 = _mm256_unpacklo_epi64(g[0], g[2]), hi02 = _mm256_unpackhi_epi64(g[0], g[2]);
      const __m256i lo13 = _mm256_unpacklo_epi64(g[1], g[3]), hi13 = _mm256_unpackhi_epi64(g[1], g[3]);
      __m256i x[4];
      x[0] = _mm256_permute2x128_si256(lo02, lo13, 0x20);
      x[1] = _mm256_permute2x128_si256(hi02, hi13, 0x20);
      x[2] = _mm256_permute2x128_si256(lo02, lo13, 0x31);
      x[3] = _mm256_permute2x128_si256(hi02, hi13, 0x31);
      __m256i* ox = reinterpret_cast<__m256i*>(o + kQ6PX);
      for (int m = 0; m < 4; ++m) _mm256_store_si256(ox + m, x[m]);
      __m256i* oc = reinterpret_cast<__m256i*>(o + kQ6PCorr);
      _mm256_store_si256(oc, _mm256_add_epi16(_mm256_maddubs_epi16(m32, x[0]), _mm256_maddubs_epi16(m32, x[1])));
      _mm256_store_si256(oc + 1, _mm256_add_epi16(_mm256_maddubs_epi16(m32, x[2]), _mm256_maddubs_epi16(m32, x[3])));
      _mm256_store_ps(reinterpret_cast<float*>(o + kQ6PScale), _mm256_load_ps(s));
    }
  }

  // The quad's 6-bit values of one row (nibbles at lo, high bits at hi); kTail: only `n` (1..3)
  // groups there.
  template <bool kTail>
  [[gnu::always_inline]] static void unpack(const uint8_t* lo, const uint8_t* hi, uint32_t n,
                                            __m256i (&v)[4]) {
    __m256i n01, n23, h;
    if constexpr (kTail) {
      const __m128i n0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(lo));
      n01 = n >= 2 ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo)) : _mm256_zextsi128_si256(n0);
      n23 = n == 3 ? _mm256_zextsi128_si256(_mm_loadu_si128(reinterpret_cast<const __m128i*>(lo + 32)))
                   : _mm256_setzero_si256();
      const __m128i h0 = n >= 2 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(hi))
                                : _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi));
      h = n == 3 ? _mm256_inserti128_si256(_mm256_zextsi128_si256(h0),
                                           _mm_loadl_epi64(reinterpret_cast<const __m128i*>(hi + 16)), 1)
                 : _mm256_zextsi128_si256(h0);
    } else {
      n01 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo));
      n23 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(lo + 32));
      h = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(hi));
    }
    const __m256i t = _mm256_permute4x64_epi64(h, 0xd8);  // groups 0, 2, 1, 3
    const __m256i l = _mm256_unpacklo_epi64(n01, n23), u = _mm256_unpackhi_epi64(n01, n23);
    const __m256i m4 = _mm256_set1_epi8(0x0f), m48 = _mm256_set1_epi8(0x30);
    v[0] = _mm256_or_si256(_mm256_and_si256(l, m4), _mm256_and_si256(_mm256_slli_epi16(t, 4), m48));
    v[1] = _mm256_or_si256(_mm256_and_si256(u, m4), _mm256_and_si256(_mm256_slli_epi16(t, 2), m48));
    v[2] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(l, 4), m4), _mm256_and_si256(t, m48));
    v[3] = _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(u, 4), m4),
                           _mm256_and_si256(_mm256_srli_epi16(t, 2), m48));
  }

  // Quad qd of rows [0, R) (tile rows at Wr, Hr, SCr) into acc, token j's prepared quad at
  // pq[j]; d256[i]: row i's super-block d / 256.
  template <int R, int T, bool kTail>
  [[gnu::always_inline]] void quad(const uint8_t* Wr, const uint8_t* Hr, const int8_t* SCr,
                                   size_t sc_stride, uint32_t qd, const float (&d256)[R],
                                   const uint8_t* const (&pq)[T], __m256 (&acc)[R][T]) const {
    // 256 * sc words: sc_a of groups [0, 2 | 1, 3] (bytes 0, 4 | 2, 6 of the quad's 8 scale
    // bytes, in the words' high bytes), sc_b (bytes 1, 5 | 3, 7).
    const __m256i ctl_a = _mm256_setr_epi8(
        -128, 0, -128, 0, -128, 0, -128, 0, -128, 4, -128, 4, -128, 4, -128, 4,
        -128, 2, -128, 2, -128, 2, -128, 2, -128, 6, -128, 6, -128, 6, -128, 6);
    const __m256i ctl_b = _mm256_setr_epi8(
        -128, 1, -128, 1, -128, 1, -128, 1, -128, 5, -128, 5, -128, 5, -128, 5,
        -128, 3, -128, 3, -128, 3, -128, 3, -128, 7, -128, 7, -128, 7, -128, 7);
    for (int i = 0; i < R; ++i) {
      __m256i v[4];
      unpack<kTail>(Wr + i * w_row_bytes + size_t{qd} * 64, Hr + i * hi_row_bytes + size_t{qd} * 32,
                    tail, v);
      // The quad's 8 scale bytes: super-block qd / 2, its groups 4 (qd % 2) ..
      const __m256i sb = _mm256_broadcastq_epi64(
          _mm_loadl_epi64(reinterpret_cast<const __m128i*>(SCr + i * sc_stride + size_t{qd} * 8)));
      const __m256i sa = _mm256_shuffle_epi8(sb, ctl_a), sbb = _mm256_shuffle_epi8(sb, ctl_b);
      for (int j = 0; j < T; ++j) {
        // Laundered per row: GCC 12 otherwise loads a token's prepared vectors once for the R
        // rows and, short of registers, spills the accumulators instead (measured: 4-row decode
        // tile kept them on the stack).
        const uint8_t* p = pq[j];
        asm("" : "+r"(p));
        const __m256i* px = reinterpret_cast<const __m256i*>(p + kQ6PX);
        const __m256i* pc = reinterpret_cast<const __m256i*>(p + kQ6PCorr);
        const __m256i pa = _mm256_sub_epi16(
            _mm256_add_epi16(_mm256_maddubs_epi16(v[0], _mm256_load_si256(px)),
                             _mm256_maddubs_epi16(v[1], _mm256_load_si256(px + 1))),
            _mm256_load_si256(pc));
        const __m256i pb = _mm256_sub_epi16(
            _mm256_add_epi16(_mm256_maddubs_epi16(v[2], _mm256_load_si256(px + 2)),
                             _mm256_maddubs_epi16(v[3], _mm256_load_si256(px + 3))),
            _mm256_load_si256(pc + 1));
        const __m256i is = _mm256_add_epi32(_mm256_madd_epi16(pa, sa), _mm256_madd_epi16(pb, sbb));
        const __m256 sc = _mm256_mul_ps(_mm256_set1_ps(d256[i]),
                                        _mm256_load_ps(reinterpret_cast<const float*>(p + kQ6PScale)));
        acc[i][j] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(is), sc, acc[i][j]);
      }
    }
  }

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    // The rows' planes from at(); the activations come prepared (P), not from its X / XS.
    const At rows = at(r, t);
    const uint8_t* const Wr = rows.W;
    const uint8_t* const Hr = rows.HI;
    const uint16_t* const Dr = rows.D;
    const int8_t* const SCr = rows.SC;
    const size_t d_stride = rows.d_stride, sc_stride = rows.sc_stride;
    __m256 acc[R][T];
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < T; ++j) acc[i][j] = _mm256_setzero_ps();
    const uint8_t* pt[T];
    for (int j = 0; j < T; ++j) pt[j] = P + (t + j) * p_stride;
    float d256[R];  // set at each super-block's first quad (qd = 0 is one)
    for (int i = 0; i < R; ++i) d256[i] = 0.0f;
    const uint32_t all = quads + (tail ? 1 : 0);
    for (uint32_t qd = 0; qd < all; ++qd) {
      if (qd % 2 == 0) {
        // A super-block starts: its d, and prefetches of both planes' lines of it, kPrefetchBytes
        // ahead (the high plane at half the pace: half the distance).
        const uint32_t s = qd / 2;
        for (int i = 0; i < R; ++i) {
          d256[i] = q6k_d256(Dr + i * d_stride + s);
          const uint8_t* lo = Wr + i * w_row_bytes + size_t{s} * 128 + kPrefetchBytes;
          prefetch(lo);
          prefetch(lo + 64);
          prefetch(Hr + i * hi_row_bytes + size_t{s} * 64 + kPrefetchBytes / 2);
        }
      }
      const uint8_t* pq[T];
      for (int j = 0; j < T; ++j) pq[j] = pt[j] + size_t{qd} * kQ6PQuadBytes;
      if (qd < quads) quad<R, T, false>(Wr, Hr, SCr, sc_stride, qd, d256, pq, acc);
      else quad<R, T, true>(Wr, Hr, SCr, sc_stride, qd, d256, pq, acc);
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride, y_step);
  }
};


}  // namespace

// ---- entry points -------------------------------------------------------------------------------

RINGLM_FLOAT_MATMUL(matmul_f32_avx2, 4, 4, 2, FloatMat<false>)
RINGLM_FLOAT_MATMUL(matmul_f16_avx2, 4, 4, 2, FloatMat<true>)
RINGLM_QUANT_MATMUL(matmul_q8_avx2, 4, 2, 4, QuantTile<false>)
// Q4: block sums (Q4Blocks) for every token count; QuantTile for rows too wide for its stack
// buffer. Both walks compute every row as their own decode does (shape-invariant), so exact
// rows (kMatmulExactRows: verification passes, beam steps, scoring) need nothing more.
void matmul_q4_avx2(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1) {
  n &= ~kMatmulExactRows;
  if (q4_blocks<false>(w, x, n, y, r0, r1)) return;
  drive<4, 2, 4>(quant_mat<QuantTile<true>>(w, x, y), n, r0, r1);
}
// Q4's tiles (QuantTile<true>, which Q4 itself now takes only for very wide rows), the fifth
// bits or'd in.
RINGLM_QUANT_MATMUL(matmul_q5_avx2, 4, 2, 4, QuantTile<true, true>)
// Q4's tiles too (unsigned nibbles with the (d, m) pairs; Q5_1: and the fifth bits).
RINGLM_QUANT_MATMUL(matmul_q4_1_avx2, 4, 2, 4, QuantTile<true, false, true>)
RINGLM_QUANT_MATMUL(matmul_q5_1_avx2, 4, 2, 4, QuantTile<true, true, true>)

// Q4K: block sums as Q4 (Q4Blocks<true>), every token count; Q4kTile (below) when they cannot
// run (rows too wide for the stack buffer, or no activation sums). Q5K: Q4kTile.
// Decode 4 rows x 1 token as QuantTile; prefill 4 rows x 2 tokens: each row tile reads every
// token's activations (from L2 at 128 tokens), so 4-row tiles read them half as often as 2 x 4 (SmolLM2
// shape, one thread, microbenchmark of the layer matmuls at 128 tokens: ~13 % faster than 2 x 4;
// 4 x 3, 3 x 4 and 4 x 4 were slower).
void matmul_q4k_avx2(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  if (q4_blocks<true>(w, x, n & ~kMatmulExactRows, y, r0, r1)) return;
  drive<4, 4, 2>(q4k_mat<Q4kTile<false>>(w, x, y), n, r0, r1);
}

// As Q4K (the same tile, the fifth bits or'd in).
void matmul_q5k_avx2(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  drive<4, 4, 2>(q4k_mat<Q4kTile<true>>(w, x, y), n, r0, r1);
}

// Q6kQuads (decode 4 strided rows x 1 token, prefill 2 x 4: of 2 x 4, 3 x 4, 4 x 3, 3 x 3, 2 x 3
// and 4 x 2 the fastest, SmolLM2 layer matmuls at 128 tokens in cache: 11.6-11.9 ms against
// 12.0-14.0, Q6kTile's 4 x 3 16.4); Q6kTile (decode 4 x 1, prefill 4 x 3) for rows too wide for
// its stack buffer, every token count alike.
void matmul_q6k_avx2(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1) {
  if (q6k_prepared_matmul<Q6kQuads, kQ6PQuadBytes, kBlkPrepBytes, 4, 2, 4>(
          w, x, n & ~kMatmulExactRows, y, r0, r1)) {
    return;
  }
  drive<4, 4, 3>(q6k_mat<Q6kTile>(w, x, y), n, r0, r1);
}

void quantize_acts_avx2(const float* x, uint32_t n, uint32_t cols, uint32_t stride, int8_t* qs,
                        float* scales) {
  const uint32_t groups = stride / kQuantGroup;
  const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
  const __m256i perm = _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7);
  for (uint32_t t = 0; t < n; ++t) {
    const float* xt = x + static_cast<size_t>(t) * cols;
    int8_t* q = qs + static_cast<size_t>(t) * stride;
    float* s = scales + static_cast<size_t>(t) * groups;
    for (uint32_t g = 0; g < groups; ++g) {
      const uint32_t c0 = g * kQuantGroup;
      __m256 v[4];
      for (int k = 0; k < 4; ++k) {
        const uint32_t c = c0 + 8 * k;
        v[k] = c + 8 <= cols ? _mm256_loadu_ps(xt + c)
               : c < cols    ? _mm256_maskload_ps(xt + c, tail_mask(cols - c))
                             : _mm256_setzero_ps();
      }
      // max(|v|, amax): an unordered |v| (NaN) leaves amax, as fmaxf does.
      __m256 m = _mm256_setzero_ps();
      for (int k = 0; k < 4; ++k) m = _mm256_max_ps(_mm256_and_ps(v[k], abs_mask), m);
      const float amax = hmax(m);
      const float d = amax / 127.0f;
      const float inv = d != 0.0f ? 1.0f / d : 0.0f;
      s[g] = d;
      const __m256 iv = _mm256_set1_ps(inv);
      __m256i i[4];
      for (int k = 0; k < 4; ++k) i[k] = _mm256_cvtps_epi32(_mm256_mul_ps(v[k], iv));
      const __m256i a = _mm256_packs_epi32(i[0], i[1]);
      const __m256i b = _mm256_packs_epi32(i[2], i[3]);
      const __m256i p = _mm256_permutevar8x32_epi32(_mm256_packs_epi16(a, b), perm);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(q + c0), p);
    }
  }
}

void rmsnorm_avx2(float* out, const float* x, const float* w, uint32_t size, float eps) {
  __m256 acc0 = _mm256_setzero_ps(), acc1 = _mm256_setzero_ps();
  uint32_t i = 0;
  for (; i + 16 <= size; i += 16) {
    const __m256 a = _mm256_loadu_ps(x + i), b = _mm256_loadu_ps(x + i + 8);
    acc0 = _mm256_fmadd_ps(a, a, acc0);
    acc1 = _mm256_fmadd_ps(b, b, acc1);
  }
  float ss = hsum(_mm256_add_ps(acc0, acc1));
  for (; i < size; ++i) ss += x[i] * x[i];
  ss /= static_cast<float>(size);
  ss += eps;
  ss = 1.0f / sqrtf(ss);
  const __m256 s = _mm256_set1_ps(ss);
  i = 0;
  for (; i + 8 <= size; i += 8) {
    _mm256_storeu_ps(out + i,
                     _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(s, _mm256_loadu_ps(x + i))));
  }
  for (; i < size; ++i) out[i] = w[i] * (ss * x[i]);
}

namespace {

// exp(x) for softmax's x - max (never above 0; NaN stays NaN): exp_ps's range reduction and
// polynomial, with 2^n made by one exponent add. That is exact for n >= -126, so x is clamped
// there and x < -126 ln 2 (e^x below 2^-126, where exp_ps gives a denormal) gives 0: an absolute
// difference below 1.2e-38 in a probability. No overflow to handle. 19 vector ops against
// exp_ps's 28 (softmax runs over every head's scores each decode step: at depth 2,048 on the
// SmolLM2 shape it was 0.38 ms of a token's 2.4 ms of attention).
inline __m256 exp_nonpos_ps(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.33654475f);  // -126 ln 2
  const __m256 unf = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_max_ps(lo, x);  // NaN: max returns its second operand
  const __m256 fx = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                    _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
  x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
  return _mm256_andnot_ps(unf, _mm256_mul_ps(y, _mm256_castsi256_ps(e)));
}

}  // namespace

float softmax_avx2(float* x, uint32_t size) {
  __m256 mv = _mm256_set1_ps(x[0]);
  // Two independent max / sum chains: one chain's latency, not the vector ops, set the pace of
  // a pass over a few thousand scores (max is exact in any order).
  __m256 mv2 = mv;
  uint32_t i = 0;
  for (; i + 16 <= size; i += 16) {
    mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    mv2 = _mm256_max_ps(mv2, _mm256_loadu_ps(x + i + 8));
  }
  for (; i + 8 <= size; i += 8) mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
  float max_val = hmax(_mm256_max_ps(mv, mv2));
  for (; i < size; ++i) max_val = x[i] > max_val ? x[i] : max_val;
  const __m256 m = _mm256_set1_ps(max_val);
  __m256 sv = _mm256_setzero_ps(), sv2 = _mm256_setzero_ps();
  i = 0;
  for (; i + 16 <= size; i += 16) {
    const __m256 e = exp_nonpos_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    const __m256 e2 = exp_nonpos_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i + 8), m));
    _mm256_storeu_ps(x + i, e);
    _mm256_storeu_ps(x + i + 8, e2);
    sv = _mm256_add_ps(sv, e);
    sv2 = _mm256_add_ps(sv2, e2);
  }
  sv = _mm256_add_ps(sv, sv2);
  for (; i + 8 <= size; i += 8) {
    const __m256 e = exp_nonpos_ps(_mm256_sub_ps(_mm256_loadu_ps(x + i), m));
    _mm256_storeu_ps(x + i, e);
    sv = _mm256_add_ps(sv, e);
  }
  if (i < size) {
    const __m256i mask = tail_mask(size - i);
    const __m256 e = exp_nonpos_ps(_mm256_sub_ps(_mm256_maskload_ps(x + i, mask), m));
    const __m256 em = _mm256_and_ps(e, _mm256_castsi256_ps(mask));
    _mm256_maskstore_ps(x + i, mask, em);
    sv = _mm256_add_ps(sv, em);
  }
  const __m256 sum = _mm256_set1_ps(hsum(sv));
  i = 0;
  for (; i + 8 <= size; i += 8) _mm256_storeu_ps(x + i, _mm256_div_ps(_mm256_loadu_ps(x + i), sum));
  if (i < size) {
    const __m256i mask = tail_mask(size - i);
    _mm256_maskstore_ps(x + i, mask, _mm256_div_ps(_mm256_maskload_ps(x + i, mask), sum));
  }
  return max_val + logf(_mm256_cvtss_f32(sum));
}

void swiglu_avx2(float* a, const float* b, uint32_t size) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  uint32_t i = 0;
  for (; i < size; i += 8) {
    const bool full = i + 8 <= size;
    const __m256i mask = tail_mask(full ? 8 : size - i);
    const __m256 v = full ? _mm256_loadu_ps(a + i) : _mm256_maskload_ps(a + i, mask);
    const __m256 bv = full ? _mm256_loadu_ps(b + i) : _mm256_maskload_ps(b + i, mask);
    const __m256 sig = _mm256_div_ps(one, _mm256_add_ps(one, exp_ps(_mm256_xor_ps(v, sign))));
    const __m256 r = _mm256_mul_ps(_mm256_mul_ps(v, sig), bv);
    if (full) _mm256_storeu_ps(a + i, r);
    else _mm256_maskstore_ps(a + i, mask, r);
  }
}

namespace {

// Attention scores over f32 / f16 rows for NQ queries (the heads sharing a KV head): 4 rows at
// a time, one fma chain of 8 lanes per (query, row) over the head's columns, the lane sums in
// hsum4's order (a row alone: hsum, the same order), times `scale`; each row is loaded once for
// all NQ queries (q operands come from L1: 4 NQ accumulators and the row fit the 16 registers
// up to NQ = 3). Attention calls it on blocks of rows it just brought into L1 (the runtime's
// attend), so unlike the matmul tiles it prefetches nothing and its loop is short: a 64-wide f16
// row is 8 conversions and 8 NQ fmas. Every score is what NQ = 1 gives it, bit for bit.
template <bool F16, int NQ>
void scores_rows(const float* q, size_t q_stride, const void* k_rows, size_t stride,
                 uint32_t n_rows, uint32_t hd, float scale, float* out, size_t out_stride) {
  const uint32_t full = hd & ~7u, rem = hd & 7u;
  const __m256i tmask = tail_mask(rem);
  const __m128 s4 = _mm_set1_ps(scale);
  uint32_t j = 0;
  for (; j + 4 <= n_rows; j += 4) {
    const size_t base = static_cast<size_t>(j) * stride;
    __m256 acc[NQ][4];
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) acc[t][r] = _mm256_setzero_ps();
    for (uint32_t c = 0; c < full; c += 8) {
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m256 kv = load_w8<F16>(k_rows, base + r * stride + c);
#pragma GCC unroll 4
        for (int t = 0; t < NQ; ++t) {
          acc[t][r] = _mm256_fmadd_ps(kv, _mm256_loadu_ps(q + t * q_stride + c), acc[t][r]);
        }
      }
    }
    if (rem) {
#pragma GCC unroll 4
      for (int r = 0; r < 4; ++r) {
        const __m256 kv = load_w_tail<F16>(k_rows, base + r * stride + full, rem);
#pragma GCC unroll 4
        for (int t = 0; t < NQ; ++t) {
          acc[t][r] = _mm256_fmadd_ps(kv, _mm256_maskload_ps(q + t * q_stride + full, tmask),
                                      acc[t][r]);
        }
      }
    }
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t) {
      _mm_storeu_ps(out + t * out_stride + j,
                    _mm_mul_ps(hsum4(acc[t][0], acc[t][1], acc[t][2], acc[t][3]), s4));
    }
  }
  for (; j < n_rows; ++j) {
    const size_t base = static_cast<size_t>(j) * stride;
    for (int t = 0; t < NQ; ++t) {
      const float* qt = q + t * q_stride;
      __m256 acc = _mm256_setzero_ps();
      for (uint32_t c = 0; c < full; c += 8) {
        acc = _mm256_fmadd_ps(load_w8<F16>(k_rows, base + c), _mm256_loadu_ps(qt + c), acc);
      }
      if (rem) {
        acc = _mm256_fmadd_ps(load_w_tail<F16>(k_rows, base + full, rem),
                              _mm256_maskload_ps(qt + full, tmask), acc);
      }
      out[t * out_stride + j] = hsum(acc) * scale;
    }
  }
}

template <bool F16>
void scores_queries(const float* q, uint32_t n_q, const void* k_rows, size_t stride,
                    uint32_t n_rows, uint32_t hd, float scale, float* out, size_t out_stride) {
  uint32_t t = 0;
  for (; t + 3 <= n_q; t += 3) {
    scores_rows<F16, 3>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                        out_stride);
  }
  if (n_q - t == 2) {
    scores_rows<F16, 2>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                        out_stride);
  } else if (n_q - t == 1) {
    scores_rows<F16, 1>(q + t * hd, hd, k_rows, stride, n_rows, hd, scale, out + t * out_stride,
                        out_stride);
  }
}

}  // namespace

void attn_dot_avx2(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                   uint32_t head_dim, bool k_f16, float scale, float* out) {
  if (k_f16) scores_rows<true, 1>(q, 0, k_rows, row_stride_elems, n_rows, head_dim, scale, out, 0);
  else scores_rows<false, 1>(q, 0, k_rows, row_stride_elems, n_rows, head_dim, scale, out, 0);
}

void attn_dot_n_avx2(const float* q, uint32_t n_q, const void* k_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out,
                     uint32_t out_stride) {
  if (k_f16) {
    scores_queries<true>(q, n_q, k_rows, row_stride_elems, n_rows, head_dim, scale, out,
                         out_stride);
  } else {
    scores_queries<false>(q, n_q, k_rows, row_stride_elems, n_rows, head_dim, scale, out,
                          out_stride);
  }
}

namespace {

// out[0, 8 NV) = sum_j w[j] v_j[c, c + 8 NV): NV full vectors kept in registers (a runtime
// count would index the accumulators through memory).
template <int NV, bool F16>
void accum_cols(const float* w, const void* v_rows, size_t row_stride_elems, uint32_t n_rows,
                size_t c, float* out) {
  __m256 acc[NV];
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) acc[k] = _mm256_loadu_ps(out + 8 * k);  // continue out's sums
  constexpr size_t kElem = F16 ? 2 : 4;
  for (uint32_t j = 0; j < n_rows; ++j) {
    const __m256 a = _mm256_broadcast_ss(w + j);
    const size_t base = static_cast<size_t>(j) * row_stride_elems + c;
    // The rows of one head are strided (the other heads' values sit between them), which the
    // hardware prefetcher follows poorly: fetch the row kAttnAheadRows ahead, line by line.
    const char* ahead = static_cast<const char*>(v_rows) +
                        (base + kAttnAheadRows * row_stride_elems) * kElem;
    for (size_t b = 0; b < 8 * NV * kElem; b += 64) prefetch(ahead + b);
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_fmadd_ps(a, load_w8<F16>(v_rows, base + 8 * k), acc[k]);
  }
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(out + 8 * k, acc[k]);
}

// The sums a tail chunk continues: out[0, len) (len = 1..64) into up to 8 vectors, zeros past it.
inline void load_acc_tail(const float* out, uint32_t len, __m256 (&acc)[8]) {
  for (uint32_t k = 0; k < 8; ++k) {
    const uint32_t rem = 8 * k < len ? len - 8 * k : 0;
    acc[k] = rem >= 8 ? _mm256_loadu_ps(out + 8 * k)
             : rem    ? _mm256_maskload_ps(out + 8 * k, tail_mask(rem))
                      : _mm256_setzero_ps();
  }
}

// Up to 8 vectors, the last one partial (`len` = 1..64 columns).
template <bool F16>
void accum_cols_tail(const float* w, const void* v_rows, size_t row_stride_elems, uint32_t n_rows,
                     size_t c, uint32_t len, float* out) {
  const int nv = static_cast<int>((len + 7) / 8);
  __m256 acc[8];
  load_acc_tail(out, len, acc);
  for (uint32_t j = 0; j < n_rows; ++j) {
    const __m256 a = _mm256_broadcast_ss(w + j);
    const size_t base = static_cast<size_t>(j) * row_stride_elems + c;
    for (int k = 0; k < nv; ++k) {
      const uint32_t rem = len - 8 * k;
      const __m256 v = rem >= 8 ? load_w8<F16>(v_rows, base + 8 * k)
                                : load_w_tail<F16>(v_rows, base + 8 * k, rem);
      acc[k] = _mm256_fmadd_ps(a, v, acc[k]);
    }
  }
  for (int k = 0; k < nv; ++k) {
    const uint32_t rem = len - 8 * k;
    if (rem >= 8) _mm256_storeu_ps(out + 8 * k, acc[k]);
    else _mm256_maskstore_ps(out + 8 * k, tail_mask(rem), acc[k]);
  }
}

template <bool F16>
void attn_accum_impl(const float* w, const void* v_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, float* out) {
  // Columns in chunks of up to 64, all rows per chunk: a 64-wide head (the common size) is one
  // pass over its value rows with eight independent FMA chains covering the FMA latency. Each
  // output still sums its rows in row order, so the chunking changes no result.
  uint32_t c = 0;
  for (; c + 64 <= head_dim; c += 64) accum_cols<8, F16>(w, v_rows, row_stride_elems, n_rows, c, out + c);
  if (c + 32 <= head_dim) {
    accum_cols<4, F16>(w, v_rows, row_stride_elems, n_rows, c, out + c);
    c += 32;
  }
  if (c < head_dim) accum_cols_tail<F16>(w, v_rows, row_stride_elems, n_rows, c, head_dim - c, out + c);
}

}  // namespace

namespace {

// attn_dot_tiled, a tile (two 8-lane halves) for NQ <= 3 queries: one chain per half, query and
// column parity (12 accumulators for 3 queries, with the column's two halves and a broadcast:
// 15 of the 16 registers), each column converted once for all queries.
template <bool F16, int NQ>
void tiled_tile8(const float* q, uint32_t head_dim, const void* k, size_t e, float scale,
                 float (&res)[NQ][kAttnTile]) {
  __m256 ev[NQ][2], od[NQ][2];
#pragma GCC unroll 4
  for (int u = 0; u < NQ; ++u) ev[u][0] = ev[u][1] = od[u][0] = od[u][1] = _mm256_setzero_ps();
  for (uint32_t i = 0; i < head_dim; i += 2) {
    const size_t c = e + static_cast<size_t>(i) * kAttnTile;
    const __m256 k0a = load_w8<F16>(k, c), k0b = load_w8<F16>(k, c + 8);
#pragma GCC unroll 4
    for (int u = 0; u < NQ; ++u) {
      const __m256 qe = _mm256_broadcast_ss(q + u * head_dim + i);
      ev[u][0] = _mm256_fmadd_ps(qe, k0a, ev[u][0]);
      ev[u][1] = _mm256_fmadd_ps(qe, k0b, ev[u][1]);
    }
    const __m256 k1a = load_w8<F16>(k, c + kAttnTile), k1b = load_w8<F16>(k, c + kAttnTile + 8);
#pragma GCC unroll 4
    for (int u = 0; u < NQ; ++u) {
      const __m256 qo = _mm256_broadcast_ss(q + u * head_dim + i + 1);
      od[u][0] = _mm256_fmadd_ps(qo, k1a, od[u][0]);
      od[u][1] = _mm256_fmadd_ps(qo, k1b, od[u][1]);
    }
  }
  const __m256 s = _mm256_set1_ps(scale);
#pragma GCC unroll 4
  for (int u = 0; u < NQ; ++u) {
    _mm256_storeu_ps(res[u], _mm256_mul_ps(s, _mm256_add_ps(ev[u][0], od[u][0])));
    _mm256_storeu_ps(res[u] + 8, _mm256_mul_ps(s, _mm256_add_ps(ev[u][1], od[u][1])));
  }
}

template <bool F16, int NQ>
void tiled_range8(const float* q, const void* k, uint32_t ts, uint32_t j0, uint32_t j1,
                  uint32_t head_dim, float scale, float* out, uint32_t os) {
  const uint32_t t_end = (j1 + kAttnTile - 1) / kAttnTile;
  for (uint32_t t = j0 / kAttnTile; t < t_end; ++t) {
    alignas(32) float r[NQ][kAttnTile];
    tiled_tile8<F16, NQ>(q, head_dim, k, static_cast<size_t>(t) * ts, scale, r);
    const uint32_t base = t * kAttnTile;
    const uint32_t lo = j0 > base ? j0 - base : 0;
    const uint32_t hi = j1 - base < kAttnTile ? j1 - base : kAttnTile;
    for (int u = 0; u < NQ; ++u) {
      memcpy(out + u * size_t{os} + base + lo, r[u] + lo, (hi - lo) * sizeof(float));
    }
  }
}

template <bool F16>
void tiled8(const float* q, uint32_t n_q, const void* k, uint32_t ts, uint32_t j0, uint32_t j1,
            uint32_t head_dim, float scale, float* out, uint32_t os) {
  if (j0 >= j1) return;
  for (uint32_t u = 0; u < n_q; u += 3) {
    const float* qu = q + static_cast<size_t>(u) * head_dim;
    float* o = out + static_cast<size_t>(u) * os;
    switch (n_q - u) {
      case 1: tiled_range8<F16, 1>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
      case 2: tiled_range8<F16, 2>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
      default: tiled_range8<F16, 3>(qu, k, ts, j0, j1, head_dim, scale, o, os); break;
    }
  }
}

}  // namespace

void attn_dot_tiled_avx2(const float* q, uint32_t n_q, const void* k_tiles,
                         uint32_t tile_stride_elems, uint32_t j0, uint32_t j1, uint32_t head_dim,
                         bool k_f16, float scale, float* out, uint32_t out_stride) {
  if (k_f16) tiled8<true>(q, n_q, k_tiles, tile_stride_elems, j0, j1, head_dim, scale, out, out_stride);
  else tiled8<false>(q, n_q, k_tiles, tile_stride_elems, j0, j1, head_dim, scale, out, out_stride);
}

void attn_accum_avx2(const float* w, const void* v_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out) {
  if (v_f16) attn_accum_impl<true>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
  else attn_accum_impl<false>(w, v_rows, row_stride_elems, n_rows, head_dim, out);
}

namespace {

// attn_accum for NQ queries sharing the value rows: out_t[c, c + 8 NV) += sum_j w_t[j] v_j[...]
// for t < NQ, each value vector converted once for the NQ queries (NQ NV accumulators, the NQ
// row weights and one value: 3 x 4 takes all 16 registers, so a 64-wide head is two walks of its
// rows, where 3 x 2 with the NV values live took four: SmolLM2 shape, f16 KV, d = 2,048, one
// thread, the value walk 1.13-1.27 -> 0.98-1.02 ms a token). Every output is one chain in row
// order, as attn_accum's: the results are attn_accum's per query, bit for bit.
template <int NQ, int NV, bool F16>
void accum_cols_n(const float* w, size_t w_stride, const void* v_rows, size_t row_stride_elems,
                  uint32_t n_rows, size_t c, float* out, size_t out_stride) {
  __m256 acc[NQ][NV];
#pragma GCC unroll 4
  for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) acc[t][k] = _mm256_loadu_ps(out + t * out_stride + c + 8 * k);
  for (uint32_t j = 0; j < n_rows; ++j) {
    const size_t base = static_cast<size_t>(j) * row_stride_elems + c;
    __m256 a[NQ];
#pragma GCC unroll 4
    for (int t = 0; t < NQ; ++t) a[t] = _mm256_broadcast_ss(w + t * w_stride + j);
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) {
      const __m256 v = load_w8<F16>(v_rows, base + 8 * k);
#pragma GCC unroll 4
      for (int t = 0; t < NQ; ++t) acc[t][k] = _mm256_fmadd_ps(a[t], v, acc[t][k]);
    }
  }
#pragma GCC unroll 4
  for (int t = 0; t < NQ; ++t)
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) _mm256_storeu_ps(out + t * out_stride + c + 8 * k, acc[t][k]);
}

// NQ queries over the columns: chunks of 8 NV, the rest (a head width not a multiple of 8 NV)
// query by query through attn_accum_impl's chunks.
template <int NQ, int NV, bool F16>
void accum_queries(const float* w, size_t w_stride, const void* v_rows, size_t row_stride_elems,
                   uint32_t n_rows, uint32_t hd, float* out) {
  uint32_t c = 0;
  for (; c + 8 * NV <= hd; c += 8 * NV) {
    accum_cols_n<NQ, NV, F16>(w, w_stride, v_rows, row_stride_elems, n_rows, c, out, hd);
  }
  if (c < hd) {
    for (int t = 0; t < NQ; ++t) {
      const float* wt = w + t * w_stride;
      float* ot = out + static_cast<size_t>(t) * hd + c;
      const uint32_t len = hd - c;
      uint32_t d = 0;
      for (; d + 32 <= len; d += 32) {
        accum_cols<4, F16>(wt, v_rows, row_stride_elems, n_rows, c + d, ot + d);
      }
      if (d < len) accum_cols_tail<F16>(wt, v_rows, row_stride_elems, n_rows, c + d, len - d, ot + d);
    }
  }
}

template <bool F16>
void accum_n(const float* w, uint32_t n_q, size_t w_stride, const void* v_rows,
             size_t row_stride_elems, uint32_t n_rows, uint32_t hd, float* out) {
  uint32_t t = 0;
  for (; t + 3 <= n_q; t += 3) {
    accum_queries<3, 4, F16>(w + t * w_stride, w_stride, v_rows, row_stride_elems, n_rows, hd,
                             out + static_cast<size_t>(t) * hd);
  }
  if (n_q - t == 2) {
    accum_queries<2, 4, F16>(w + t * w_stride, w_stride, v_rows, row_stride_elems, n_rows, hd,
                             out + static_cast<size_t>(t) * hd);
  } else if (n_q - t == 1) {
    attn_accum_impl<F16>(w + t * w_stride, v_rows, static_cast<uint32_t>(row_stride_elems), n_rows,
                         hd, out + static_cast<size_t>(t) * hd);
  }
}

}  // namespace

void attn_accum_n_avx2(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,
                       uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim, bool v_f16,
                       float* out) {
  if (v_f16) accum_n<true>(w, n_q, w_stride, v_rows, row_stride_elems, n_rows, head_dim, out);
  else accum_n<false>(w, n_q, w_stride, v_rows, row_stride_elems, n_rows, head_dim, out);
}


// ---- q8 KV cache attention ----------------------------------------------------------------------
// int8 rows widened to floats (vpmovsxbd + vcvtdq2ps) and multiplied with f32 FMAs, in the
// reference's per-element order; the row's scale is applied once to its dot product (scores) or
// folded into its weight (values).

namespace {

inline float q8_row_scale(const float* scales, size_t j, uint32_t stride) {
  float s;
  memcpy(&s, reinterpret_cast<const uint8_t*>(scales) + j * stride, sizeof s);
  return s;
}

inline __m256 load_i8x8(const int8_t* p) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}

inline __m256 load_i8_tail(const int8_t* p, uint32_t rem) {
  int8_t tmp[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  memcpy(tmp, p, rem);
  return load_i8x8(tmp);
}

// acc[r] = lane sums of q · row r for R rows starting at k (stride bytes apart).
template <int R>
inline void dot_q8_rows(const float* q, const int8_t* k, uint32_t stride, uint32_t hd,
                        __m256 (&acc)[R]) {
  for (int r = 0; r < R; ++r) acc[r] = _mm256_setzero_ps();
  uint32_t c = 0;
  for (; c + 8 <= hd; c += 8) {
    const __m256 qv = _mm256_loadu_ps(q + c);
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm256_fmadd_ps(load_i8x8(k + static_cast<size_t>(r) * stride + c), qv, acc[r]);
    }
  }
  if (c < hd) {
    const uint32_t rem = hd - c;
    const __m256 qv = _mm256_maskload_ps(q + c, tail_mask(rem));
    for (int r = 0; r < R; ++r) {
      acc[r] = _mm256_fmadd_ps(load_i8_tail(k + static_cast<size_t>(r) * stride + c, rem), qv,
                               acc[r]);
    }
  }
}

// out[0, 8 NV) = sum_j w[j] s_j v_j[c, c + 8 NV), accumulators in registers (as accum_cols).
template <int NV>
void accum_q8_cols(const float* w, const int8_t* v, const float* sc, uint32_t stride,
                   uint32_t n_rows, size_t c, float* out) {
  __m256 acc[NV];
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) acc[k] = _mm256_loadu_ps(out + 8 * k);  // continue out's sums
  for (uint32_t j = 0; j < n_rows; ++j) {
    const __m256 a = _mm256_set1_ps(w[j] * q8_row_scale(sc, j, stride));
    const int8_t* row = v + static_cast<size_t>(j) * stride + c;
#pragma GCC unroll 8
    for (int k = 0; k < NV; ++k) acc[k] = _mm256_fmadd_ps(a, load_i8x8(row + 8 * k), acc[k]);
  }
#pragma GCC unroll 8
  for (int k = 0; k < NV; ++k) _mm256_storeu_ps(out + 8 * k, acc[k]);
}

// Up to 8 vectors, the last one partial (len = 1..64 columns).
void accum_q8_cols_tail(const float* w, const int8_t* v, const float* sc, uint32_t stride,
                        uint32_t n_rows, size_t c, uint32_t len, float* out) {
  const int nv = static_cast<int>((len + 7) / 8);
  __m256 acc[8];
  load_acc_tail(out, len, acc);
  for (uint32_t j = 0; j < n_rows; ++j) {
    const __m256 a = _mm256_set1_ps(w[j] * q8_row_scale(sc, j, stride));
    const int8_t* row = v + static_cast<size_t>(j) * stride + c;
    for (int k = 0; k < nv; ++k) {
      const uint32_t rem = len - 8 * k;
      const __m256 x = rem >= 8 ? load_i8x8(row + 8 * k) : load_i8_tail(row + 8 * k, rem);
      acc[k] = _mm256_fmadd_ps(a, x, acc[k]);
    }
  }
  for (int k = 0; k < nv; ++k) {
    const uint32_t rem = len - 8 * k;
    if (rem >= 8) _mm256_storeu_ps(out + 8 * k, acc[k]);
    else _mm256_maskstore_ps(out + 8 * k, tail_mask(rem), acc[k]);
  }
}

}  // namespace

void attn_dot_q8_avx2(const float* q, const int8_t* k_rows, const float* k_scales,
                      uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim, float scale,
                      float* out) {
  const uint32_t st = row_stride_bytes;
  uint32_t j = 0;
  for (; j + 4 <= n_rows; j += 4) {
    __m256 acc[4];
    dot_q8_rows<4>(q, k_rows + static_cast<size_t>(j) * st, st, head_dim, acc);
    const __m128 s = _mm_setr_ps(q8_row_scale(k_scales, j, st) * scale,
                                 q8_row_scale(k_scales, j + 1, st) * scale,
                                 q8_row_scale(k_scales, j + 2, st) * scale,
                                 q8_row_scale(k_scales, j + 3, st) * scale);
    _mm_storeu_ps(out + j, _mm_mul_ps(hsum4(acc[0], acc[1], acc[2], acc[3]), s));
  }
  for (; j < n_rows; ++j) {
    __m256 acc[1];
    dot_q8_rows<1>(q, k_rows + static_cast<size_t>(j) * st, st, head_dim, acc);
    out[j] = hsum(acc[0]) * (q8_row_scale(k_scales, j, st) * scale);
  }
}

void attn_accum_q8_avx2(const float* w, const int8_t* v_rows, const float* v_scales,
                        uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim,
                        float* out) {
  uint32_t c = 0;
  for (; c + 64 <= head_dim; c += 64) {
    accum_q8_cols<8>(w, v_rows, v_scales, row_stride_bytes, n_rows, c, out + c);
  }
  if (c + 32 <= head_dim) {
    accum_q8_cols<4>(w, v_rows, v_scales, row_stride_bytes, n_rows, c, out + c);
    c += 32;
  }
  if (c < head_dim) {
    accum_q8_cols_tail(w, v_rows, v_scales, row_stride_bytes, n_rows, c, head_dim - c, out + c);
  }
}

// ---- f32 -> f16 rows (the f16 KV cache) --------------------------------------------------------
// vcvtps2ph rounds to nearest even as f32_to_fp16 does; a NaN keeps its payload's top bits there,
// where f32_to_fp16 gives 0x7e00 with the sign: those lanes are replaced (kernels.h).
namespace {
inline __m128i f16_of8(__m256 v) {
  const __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m256 nan = _mm256_cmp_ps(v, v, _CMP_UNORD_Q);
  const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(nan)),
                                        _mm256_extractf128_si256(_mm256_castps_si256(nan), 1));
  const __m128i quiet = _mm_or_si128(_mm_and_si128(h, _mm_set1_epi16(static_cast<short>(0x8000))),
                                     _mm_set1_epi16(0x7e00));
  return _mm_blendv_epi8(h, quiet, nan16);
}
}  // namespace

void f32_to_f16_avx2(const float* x, uint16_t* out, uint32_t n) {
  uint32_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), f16_of8(_mm256_loadu_ps(x + i)));
  }
  if (i < n) {
    const __m256 v = _mm256_maskload_ps(x + i, tail_mask(n - i));
    alignas(16) uint16_t tmp[8];
    _mm_store_si128(reinterpret_cast<__m128i*>(tmp), f16_of8(v));
    memcpy(out + i, tmp, (n - i) * sizeof(uint16_t));
  }
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_X86
