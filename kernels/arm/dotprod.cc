// aarch64 ARMv8.2 DotProd kernels (compiled with -march=armv8.2-a+dotprod): sdot sums four int8
// products per int32 lane, so a 32-group is two sdot per row and token, exact. Everything but the
// quantized matmuls comes from the baseline NEON table.
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
};

}  // namespace

RINGLM_QUANT_MATMUL(matmul_q8_dotprod, 4, 4, 4, QuantTile<false, Sdot>)
RINGLM_QUANT_MATMUL(matmul_q4_dotprod, 4, 4, 4, QuantTile<true, Sdot>)

void matmul_q4k_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                        uint32_t r1) {
  q4k_matmul<4, 4, 2, Q4kTile<Sdot>>(w, x, n, y, r0, r1);
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_A64
