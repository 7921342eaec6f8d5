#include "platform/kernels_isa.h"

#if defined(RINGLM_KERNELS_X86)
namespace ringlm {
namespace {
const KernelTable kAvx512 = {
    "avx512",           matmul_f32_avx2, matmul_f16_avx2, matmul_q8_avx2, matmul_q4_avx2,
    quantize_acts_avx2, rmsnorm_avx2,    softmax_avx2,    swiglu_avx2,    attn_dot_avx2,
    attn_accum_avx2,
};
}  // namespace
const KernelTable* kernels_avx512() { return &kAvx512; }
}  // namespace ringlm
#endif
