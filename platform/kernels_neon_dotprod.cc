// aarch64 ARMv8.2 DotProd kernels (compiled with -march=armv8.2-a+dotprod): sdot sums four int8
// products per int32 lane, so a 32-group is two sdot per row and token, exact. Everything but the
// quantized matmuls comes from the baseline NEON table.
#include "platform/kernels_isa.h"

#if defined(RINGLM_KERNELS_A64)

#if !defined(__ARM_FEATURE_DOTPROD)
#error "kernels_neon_dotprod.cc needs -march=armv8.2-a+dotprod (runtime/CMakeLists.txt)"
#endif

#include <arm_neon.h>
#include <string.h>

#include "platform/kernels_a64_common.inc"

namespace ringlm {
namespace {

using namespace a64;

inline int32x4_t dotp(int8x16_t a0, int8x16_t a1, int8x16_t b0, int8x16_t b1) {
  return vdotq_s32(vdotq_s32(vdupq_n_s32(0), a0, b0), a1, b1);
}

template <bool Q4>
struct DotMat : QuantMat {
  template <int R, int T>
  void tile(uint32_t r, uint32_t t) const {
    if constexpr (T == 1) {
      decode_tile<Q4, R>(*this, r, t, dotp);
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
            const int32x4_t d = vdotq_s32(vdotq_s32(vdupq_n_s32(0), w0[i], x0), w1[i], x1);
            acc[i][j] = vfmaq_n_f32(acc[i][j], vcvtq_f32_s32(d), sc[i][j][k]);
          }
        }
      }
    }
    store_tile<R, T>(acc, Y + t * y_stride + r, y_stride);
  }
};

}  // namespace

void matmul_q8_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1) {
  DotMat<false> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride);
  drive<4, 4, 4>(m, n, r0, r1);
}

void matmul_q4_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1) {
  DotMat<true> m;
  static_cast<QuantMat&>(m) = quant_mat(w, x, y, w.row_stride / 2);
  drive<4, 4, 4>(m, n, r0, r1);
}

namespace {
const KernelTable kDotprod = {
    "dotprod",          matmul_f32_neon, matmul_f16_neon, matmul_q8_dotprod, matmul_q4_dotprod,
    quantize_acts_neon, rmsnorm_neon,    softmax_neon,    swiglu_neon,       attn_dot_neon,
    attn_accum_neon,
};
}  // namespace

const KernelTable* kernels_dotprod() { return &kDotprod; }

}  // namespace ringlm

#endif  // RINGLM_KERNELS_A64
