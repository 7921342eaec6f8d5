// x86-64 AVX-512 (F/BW/VL) + VNNI kernels for the quantized matmuls (compiled with -mavx512f
// -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c); every other entry is the AVX2 kernel
// (float matmuls stream 2-4 bytes per weight and are memory-bound either way; the elementwise
// kernels are a rounding error of a token's time).
//
// One zmm holds two 32-groups (lanes 0-7: group g, lanes 8-15: group g+1). vpdpbusd multiplies
// unsigned by signed bytes, so one side is offset into unsigned range and the offset's
// contribution, which depends only on the activations, is removed by starting the int32
// accumulator at its negation (computed once per token and shared by all rows of the tile):
//   Q8: u = w + 128 (w xor 0x80), sum(u x) - 128 sum(x) = sum(w x), exact for every int8 w, x
//   Q4: u = v + 8 (nibble xor 8),  sum(u x) -   8 sum(x) = sum(v x)
// The int32 lanes are converted and scaled by [s_g x8 | s_g+1 x8] (w_scale * x_scale).
// Decode: 4 rows x 1 token, prefetching a fixed distance ahead; prefill: 4 rows x 4 tokens.
#include "isa.h"

#if defined(RINGLM_KERNELS_X86)

#if !defined(__AVX512F__) || !defined(__AVX512BW__) || !defined(__AVX512VL__) || \
    !defined(__AVX512VNNI__) || !defined(__AVX2__) || !defined(__FMA__) || !defined(__F16C__)
#error "kernels_avx512.cc needs -mavx512f -mavx512bw -mavx512vl -mavx512vnni -mavx2 -mfma -mf16c"
#endif

#include <immintrin.h>
#include <string.h>

#include "x86/x86.inc"

namespace ringlm::internal {
namespace {

using namespace x86;

// Upper 256 bits (AVX512F only: extractf32x8 would need DQ).
inline __m256 hi256(__m512 v) {
  return _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v), 1));
}

// The halves added, then hsum's order: what store_tile512's 4-row path gives every lane, so
// rows reduce alike in every tile shape and in q8_decode_rows (kShapeInvariant).
inline float hsum512(__m512 v) { return hsum(_mm256_add_ps(_mm512_castps512_ps256(v), hi256(v))); }

template <int R, int T>
inline void store_tile512(const __m512 (&acc)[R][T], float* Y, size_t y_stride) {
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

// Lane indices spreading block scales sc[2k], sc[2k+1] over a zmm (8 lanes each).
inline __m512i pair_index(uint32_t k) {
  const __m512i lo = _mm512_set1_epi32(static_cast<int>(2 * k));
  return _mm512_mask_add_epi32(lo, 0xff00, lo, _mm512_set1_epi32(1));
}

// Q8, two groups per step (the 4-row tile: prefill, and decode of rows wider than
// q8_decode_rows takes).
// Equal to q8_decode_rows too (kMatmulExactRows): the same integer dot products, scales, fma
// order (one accumulator per element) and reduction.
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


// Q4, four groups per step: 64 packed bytes hold groups g..g+3; their low nibbles are values
// 0..15 and their high nibbles values 16..31 of each group, so with the activations regrouped
// once per token (xlo = x[0..15] of the four groups, xhi = x[16..31]; shared by every row) a
// row's four groups cost one load, three logic ops and two vpdpbusd, and int32 lanes 4k..4k+3
// belong to group g+k.
struct Q4Quad : QuantMat {
  static constexpr bool kQ4 = true;
  static constexpr bool kShapeInvariant = true;  // per-element fma order; store_tile512

  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    const auto [Wr, WSr, Xt, XSt, xs_stride] = at(r, t);
    const __m512i eights = _mm512_set1_epi8(8);
    const __m512i nib = _mm512_set1_epi8(0x0f);
    const __m512i lo_idx = _mm512_setr_epi64(0, 1, 4, 5, 8, 9, 12, 13);
    const __m512i hi_idx = _mm512_setr_epi64(2, 3, 6, 7, 10, 11, 14, 15);
    __m512 acc[R][T] = {};  // zeros
    alignas(32) float sc[R][T][8];
    for (uint32_t gb = 0; gb < groups; gb += 8) {
      const uint32_t nb = groups - gb < 8 ? groups - gb : 8;
      block_scales<R, T>(WSr, groups, XSt, xs_stride, gb, nb, sc);
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
          ulo[i] = _mm512_ternarylogic_epi32(b, nib, eights, 0x6a);  // (b & 0x0f) ^ 8
          uhi[i] = _mm512_ternarylogic_epi32(_mm512_srli_epi16(b, 4), nib, eights, 0x6a);
        }
        for (int j = 0; j < T; ++j) {
          const int8_t* xp = Xt + j * x_stride + g * kQuantGroup;
          const __m512i a = ng >= 2 ? _mm512_loadu_si512(xp) : _mm512_maskz_loadu_epi8(xmask_a, xp);
          const __m512i b = ng == 4 ? _mm512_loadu_si512(xp + 64)
                                    : _mm512_maskz_loadu_epi8(xmask_b, xp + 64);
          const __m512i xlo = _mm512_permutex2var_epi64(a, lo_idx, b);
          const __m512i xhi = _mm512_permutex2var_epi64(a, hi_idx, b);
          const __m512i neg = _mm512_sub_epi32(
              _mm512_setzero_si512(),
              _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), eights, xlo), eights, xhi));
          for (int i = 0; i < R; ++i) {
            const __m512i d = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(neg, ulo[i], xlo), uhi[i], xhi);
            const __m512 s = _mm512_permutexvar_ps(sidx, _mm512_castps256_ps512(_mm256_load_ps(sc[i][j])));
            acc[i][j] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s, acc[i][j]);
          }
        }
      }
    }
    store_tile512<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

// Q8 decode, one row at a time. From DRAM a single sequential stream (row after row) is read
// faster than four rows walked side by side (measured: ~85-89% vs ~70% of a read loop), so the
// per-token work the 4-row tile shares between rows is hoisted out instead: the int32 offset
// corrections -128 sum(x) of every group pair are computed once per call into a bounded stack
// array (16 KiB: cols <= 16384; wider rows take the 4-row tile).
constexpr uint32_t kMaxDecodePairs = 256;

bool q8_decode_rows(const QuantMat& m, uint32_t r0, uint32_t r1) {
  const uint32_t groups = m.groups;
  const uint32_t pairs = (groups + 1) / 2;
  if (pairs > kMaxDecodePairs) return false;
  __m512i negc[kMaxDecodePairs];
  const __m512i offset = _mm512_set1_epi8(static_cast<char>(0x80));
  for (uint32_t k = 0; k < pairs; ++k) {
    const int8_t* xp = m.X + static_cast<size_t>(k) * 64;
    const __m512i xv = 2 * k + 1 == groups ? _mm512_maskz_loadu_epi8(0xffffffffull, xp)
                                           : _mm512_loadu_si512(xp);
    negc[k] = _mm512_sub_epi32(_mm512_setzero_si512(),
                               _mm512_dpbusd_epi32(_mm512_setzero_si512(), offset, xv));
  }
  for (uint32_t r = r0; r < r1; ++r) {
    const uint8_t* row = m.W + static_cast<size_t>(r) * m.w_row_bytes;
    const uint16_t* ws_row = m.WS + static_cast<size_t>(r) * groups;
    // One accumulator, as VnniQ8's tiles (kShapeInvariant): rows are independent iterations,
    // so the out-of-order core overlaps their fma chains anyway.
    __m512 acc = _mm512_setzero_ps();
    for (uint32_t gb = 0; gb < groups; gb += 8) {
      const uint32_t nb = groups - gb < 8 ? groups - gb : 8;
      const __mmask8 bm = static_cast<__mmask8>((1u << nb) - 1);
      const __m256 xs = nb == 8 ? _mm256_loadu_ps(m.XS + gb) : _mm256_maskz_loadu_ps(bm, m.XS + gb);
      const __m128i h = nb == 8 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(ws_row + gb))
                                : _mm_maskz_loadu_epi16(bm, ws_row + gb);
      const __m512 sc = _mm512_castps256_ps512(_mm256_mul_ps(_mm256_cvtph_ps(h), xs));
      for (uint32_t k = 0; 2 * k < nb; ++k) {
        const size_t g = gb + 2 * k;
        const uint8_t* p = row + g * 32;
        prefetch(p + kPrefetchBytes);
        const bool half = 2 * k + 1 == nb;
        const __m512i wv = half ? _mm512_maskz_loadu_epi8(0xffffffffull, p) : _mm512_loadu_si512(p);
        const int8_t* xp = m.X + g * 32;
        const __m512i xv = half ? _mm512_maskz_loadu_epi8(0xffffffffull, xp) : _mm512_loadu_si512(xp);
        const __m512i d = _mm512_dpbusd_epi32(negc[g / 2], _mm512_xor_si512(wv, offset), xv);
        const __m512 s = _mm512_permutexvar_ps(pair_index(k), sc);
        acc = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), s, acc);
      }
    }
    m.Y[r] = hsum512(acc);
  }
  return true;
}

}  // namespace

void matmul_q8_avx512(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1) {
  const VnniQ8 m = quant_mat<VnniQ8>(w, x, y);
  if (n == 1 && q8_decode_rows(m, r0, r1)) return;
  // Exact rows (kMatmulExactRows): the tiles compute each row as q8_decode_rows does.
  drive<4, 4, 4>(m, n, r0, r1);
}

RINGLM_QUANT_MATMUL(matmul_q4_avx512, 8, 4, 4, Q4Quad)

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_X86
