// Internal: the per-ISA kernel tables (platform/kernels_*.cc) and the kernels one ISA file lends
// another (the dotprod and i8mm tables reuse the baseline NEON f32/f16/elementwise kernels, the
// AVX-512 table the AVX2 ones). Only runtime/kernels/select.cc and the kernel files include this.
//
// Each kernels_<isa>.cc is compiled with its own ISA flags (runtime/CMakeLists.txt) and must not
// be entered unless the CPU has them: kernels_select() is the only way in. Those files therefore
// use no inline function of a shared header (its out-of-line copy could be compiled with the
// wider ISA and picked by the linker for every caller) and no dynamic initialisation.
#ifndef RINGLM_PLATFORM_KERNELS_ISA_H_
#define RINGLM_PLATFORM_KERNELS_ISA_H_

#include "kernels/kernels.h"

#if defined(__x86_64__)
#define RINGLM_KERNELS_X86 1
#elif defined(__aarch64__)
#define RINGLM_KERNELS_A64 1
#elif defined(__arm__)
#define RINGLM_KERNELS_ARMV7 1
#endif

namespace ringlm {

#define RINGLM_DECLARE_KERNELS(isa)                                                             \
  void matmul_f32_##isa(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0, \
                        uint32_t r1);                                                            \
  void matmul_f16_##isa(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0, \
                        uint32_t r1);                                                            \
  void matmul_q8_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,           \
                       uint32_t r0, uint32_t r1);                                                \
  void matmul_q4_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,           \
                       uint32_t r0, uint32_t r1);                                                \
  void quantize_acts_##isa(const float* x, uint32_t n, uint32_t cols, uint32_t stride,          \
                           int8_t* qs, float* scales);                                           \
  void rmsnorm_##isa(float* out, const float* x, const float* w, uint32_t size, float eps);     \
  void softmax_##isa(float* x, uint32_t size);                                                   \
  void swiglu_##isa(float* a, const float* b, uint32_t size);                                    \
  void attn_dot_##isa(const float* q, const void* k_rows, uint32_t row_stride_elems,            \
                      uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out);  \
  void attn_accum_##isa(const float* w, const void* v_rows, uint32_t row_stride_elems,          \
                        uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out);

#if defined(RINGLM_KERNELS_X86)
RINGLM_DECLARE_KERNELS(avx2)
const KernelTable* kernels_avx2();    // AVX2 + FMA + F16C
const KernelTable* kernels_avx512();  // AVX-512 F/BW/VL + VNNI (and the AVX2 set)
#elif defined(RINGLM_KERNELS_A64)
RINGLM_DECLARE_KERNELS(neon)
void matmul_q8_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1);
void matmul_q4_dotprod(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                       uint32_t r1);
const KernelTable* kernels_neon();     // ARMv8.0 AdvSIMD
const KernelTable* kernels_dotprod();  // + sdot (ARMv8.2 DotProd)
const KernelTable* kernels_i8mm();     // + smmla (ARMv8.6 I8MM)
#elif defined(RINGLM_KERNELS_ARMV7)
const KernelTable* kernels_armv7();    // ARMv7-A NEON
#endif

#undef RINGLM_DECLARE_KERNELS

}  // namespace ringlm

#endif  // RINGLM_PLATFORM_KERNELS_ISA_H_
