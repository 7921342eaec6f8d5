// Internal to kernels/: the entry points of the per-ISA files, named <op>_<isa>, which
// select.cc assembles into tables. A derived ISA (avx512 on avx2, dotprod and i8mm on neon)
// defines only the quantized matmuls (avx512: and the softmax and f32 / f16 attention) and borrows every other entry of
// its base.
//
// Each x86/*.cc and arm/*.cc is compiled with its own ISA flags (kernels/CMakeLists.txt) and must
// not be entered unless the CPU has them: kernels_select() is the only way in. So those files
// (1) include nothing of ringlm but this header, kernels.h and the kernels/*.inc templates (their
// include path holds kernels/ only: runtime/, platform/ and the generated schema are out of
// reach), (2) put every helper in an anonymous namespace, so each file gets its own copy built
// with its own flags, and (3) use no dynamic initialisation. The build checks (2) and (3) on the
// objects themselves: no weak (COMDAT) symbol, no static constructor (check_isa_objects.cmake).
#ifndef RINGLM_KERNELS_ISA_H_
#define RINGLM_KERNELS_ISA_H_

#include "kernels.h"

#if defined(__x86_64__)
#define RINGLM_KERNELS_X86 1
#elif defined(__aarch64__)
#define RINGLM_KERNELS_A64 1
#elif defined(__arm__)
#define RINGLM_KERNELS_ARMV7 1
#endif

namespace ringlm::internal {

#define RINGLM_DECLARE_QUANT_MATMULS(isa)                                                       \
  void matmul_q8_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,           \
                       uint32_t r0, uint32_t r1);                                                \
  void matmul_q4_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,           \
                       uint32_t r0, uint32_t r1);                                                \
  void matmul_q4k_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,          \
                        uint32_t r0, uint32_t r1);                                               \
  void matmul_q6k_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,          \
                        uint32_t r0, uint32_t r1);                                               \
  void matmul_q5k_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,          \
                        uint32_t r0, uint32_t r1);                                               \
  void matmul_q5_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,           \
                       uint32_t r0, uint32_t r1);                                                \
  void matmul_q4_1_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,         \
                         uint32_t r0, uint32_t r1);                                              \
  void matmul_q5_1_##isa(const WeightView& w, const QuantActs& x, uint32_t n, float* y,         \
                         uint32_t r0, uint32_t r1);

#define RINGLM_DECLARE_KERNELS(isa)                                                             \
  RINGLM_DECLARE_QUANT_MATMULS(isa)                                                             \
  void matmul_f32_##isa(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0, \
                        uint32_t r1);                                                            \
  void matmul_f16_##isa(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0, \
                        uint32_t r1);                                                            \
  void quantize_acts_##isa(const float* x, uint32_t n, uint32_t cols, uint32_t stride,          \
                           int8_t* qs, float* scales);                                           \
  void rmsnorm_##isa(float* out, const float* x, const float* w, uint32_t size, float eps);     \
  float softmax_##isa(float* x, uint32_t size);                                                  \
  void swiglu_##isa(float* a, const float* b, uint32_t size);                                    \
  void attn_dot_##isa(const float* q, const void* k_rows, uint32_t row_stride_elems,            \
                      uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out);  \
  void attn_accum_##isa(const float* w, const void* v_rows, uint32_t row_stride_elems,          \
                        uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out);           \
  void attn_dot_q8_##isa(const float* q, const int8_t* k_rows, const float* k_scales,           \
                         uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim,         \
                         float scale, float* out);                                              \
  void attn_accum_q8_##isa(const float* w, const int8_t* v_rows, const float* v_scales,         \
                           uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim,       \
                           float* out);                                                         \
  void attn_dot_n_##isa(const float* q, uint32_t n_q, const void* k_rows,                       \
                        uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim,          \
                        bool k_f16, float scale, float* out, uint32_t out_stride);              \
  void attn_accum_n_##isa(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,  \
                          uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim,        \
                          bool v_f16, float* out);                                              \
  void attn_dot_tiled_##isa(const float* q, uint32_t n_q, const void* k_tiles,                  \
                            uint32_t tile_stride_elems, uint32_t j0, uint32_t j1,               \
                            uint32_t head_dim, bool k_f16, float scale, float* out,             \
                            uint32_t out_stride);                                               \
  void f32_to_f16_##isa(const float* x, uint16_t* out, uint32_t n);

// ref.cc: the reference Q4K, Q5K, Q6K, Q5, Q4_1 and Q5_1 matmuls, for the tables with no kernel
// of their own for them.
void matmul_q4k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
void matmul_q6k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
void matmul_q5k_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
void matmul_q5_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                   uint32_t r1);
void matmul_q4_1_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
void matmul_q5_1_ref(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
// ref.cc: the scalar f32 -> f16 row (armv7, whose NEON has no half-precision conversion).
void f32_to_f16_ref(const float* x, uint16_t* out, uint32_t n);

#if defined(RINGLM_KERNELS_X86)
RINGLM_DECLARE_KERNELS(avx2)              // x86/avx2.cc: AVX2 + FMA + F16C
RINGLM_DECLARE_QUANT_MATMULS(avx512)      // x86/avx512.cc: AVX-512 F/BW/VL + VNNI
// x86/avx512.cc: the softmax and the f32 / f16 attention (the table's attn ISA, select.cc)
float softmax_avx512(float* x, uint32_t size);
void attn_dot_avx512(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                     uint32_t head_dim, bool k_f16, float scale, float* out);
void attn_accum_avx512(const float* w, const void* v_rows, uint32_t row_stride_elems,
                       uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out);
void attn_dot_n_avx512(const float* q, uint32_t n_q, const void* k_rows,
                       uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim, bool k_f16,
                       float scale, float* out, uint32_t out_stride);
void attn_accum_n_avx512(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,
                         uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim,
                         bool v_f16, float* out);
void attn_dot_tiled_avx512(const float* q, uint32_t n_q, const void* k_tiles,
                           uint32_t tile_stride_elems, uint32_t j0, uint32_t j1, uint32_t head_dim,
                           bool k_f16, float scale, float* out, uint32_t out_stride);
#elif defined(RINGLM_KERNELS_A64)
RINGLM_DECLARE_KERNELS(neon)              // arm/neon.cc: ARMv8.0 AdvSIMD
RINGLM_DECLARE_QUANT_MATMULS(dotprod)     // arm/dotprod.cc: + sdot (ARMv8.2 DotProd)
RINGLM_DECLARE_QUANT_MATMULS(i8mm)        // arm/i8mm.cc: + smmla (ARMv8.6 I8MM)
#elif defined(RINGLM_KERNELS_ARMV7)
RINGLM_DECLARE_KERNELS(armv7)             // arm/armv7.cc: ARMv7-A NEON
#endif

#undef RINGLM_DECLARE_KERNELS
#undef RINGLM_DECLARE_QUANT_MATMULS

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_ISA_H_
