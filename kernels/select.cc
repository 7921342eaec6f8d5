// The ISA kernel tables and their selection: the best table the CPU can run, or the one a config
// names. Compiled with the baseline flags: it only takes the addresses of the ISA entry points.
#include <string.h>

#include "isa.h"
#include "kernels.h"
#include "platform/cpu_features.h"

namespace ringlm::internal {
namespace {

// Table `name`: the quantized matmuls of ISA `quant` (Q4K's of ISA `q4k`, Q6K's of ISA `q6k`,
// Q5K's of ISA `q5k`, Q5's of ISA `q5`, Q4_1's of ISA `q4_1` and Q5_1's of ISA `q5_1`: a derived
// ISA may use its base's), the softmax and the f32 / f16 attention of ISA `attn`, everything else
// of ISA `base` (isa.h).
#define RINGLM_KERNEL_TABLE(name, base, quant, q4k, q6k, q5k, q5, q4_1, q5_1, attn)               \
  const KernelTable k_##name = {#name,               matmul_f32_##base, matmul_f16_##base,       \
                                matmul_q8_##quant,   matmul_q4_##quant, matmul_q4k_##q4k,        \
                                matmul_q6k_##q6k,    matmul_q5k_##q5k,  matmul_q5_##q5,          \
                                matmul_q4_1_##q4_1,  matmul_q5_1_##q5_1,                         \
                                quantize_acts_##base,                                            \
                                rmsnorm_##base,      softmax_##attn,    swiglu_##base,           \
                                attn_dot_##attn,     attn_accum_##attn, attn_dot_q8_##base,      \
                                attn_accum_q8_##base, attn_dot_n_##attn, attn_accum_n_##attn,   \
                                attn_dot_tiled_##attn, f32_to_f16_##base};

#if defined(RINGLM_KERNELS_X86)
RINGLM_KERNEL_TABLE(avx512, avx2, avx512, avx512, avx512, avx512, avx512, avx512, avx512, avx512)
RINGLM_KERNEL_TABLE(avx2, avx2, avx2, avx2, avx2, avx2, avx2, avx2, avx2, avx2)
#elif defined(RINGLM_KERNELS_A64)
RINGLM_KERNEL_TABLE(i8mm, neon, i8mm, i8mm, i8mm, i8mm, i8mm, i8mm, i8mm, neon)
RINGLM_KERNEL_TABLE(dotprod, neon, dotprod, dotprod, dotprod, dotprod, dotprod, dotprod, dotprod, neon)
RINGLM_KERNEL_TABLE(neon, neon, neon, neon, neon, neon, neon, neon, neon, neon)
#elif defined(RINGLM_KERNELS_ARMV7)
RINGLM_KERNEL_TABLE(armv7, armv7, armv7, armv7, armv7, armv7, armv7, armv7, armv7, armv7)
#endif
#undef RINGLM_KERNEL_TABLE

struct Candidate {
  const KernelTable* table;
  bool runnable;
};

// Best first; ref last. Fills `out` (capacity kMaxTables) and returns the count.
constexpr size_t kMaxTables = 4;

size_t candidates(const CpuFeatures& f, Candidate* out) {
  size_t n = 0;
#if defined(RINGLM_KERNELS_X86)
  const bool avx2 = f.avx2 && f.fma && f.f16c;
  out[n++] = {&k_avx512, avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512vnni};
  out[n++] = {&k_avx2, avx2};
#elif defined(RINGLM_KERNELS_A64)
  out[n++] = {&k_i8mm, f.neon && f.dotprod && f.i8mm};
  out[n++] = {&k_dotprod, f.neon && f.dotprod};
  out[n++] = {&k_neon, f.neon};
#elif defined(RINGLM_KERNELS_ARMV7)
  out[n++] = {&k_armv7, f.neon};
#endif
  out[n++] = {kernels_ref(), true};
  return n;
}

}  // namespace

const KernelTable* kernels_select(const CpuFeatures& cpu, const char* override_name) {
  Candidate c[kMaxTables];
  const size_t n = candidates(cpu, c);
  const bool forced = override_name != nullptr && override_name[0] != '\0';
  for (size_t i = 0; i < n; ++i) {
    if (forced) {
      if (strcmp(c[i].table->name, override_name) == 0) return c[i].runnable ? c[i].table : nullptr;
    } else if (c[i].runnable) {
      return c[i].table;
    }
  }
  return nullptr;
}

size_t kernels_available(const CpuFeatures& cpu, const KernelTable** out, size_t cap) {
  Candidate c[kMaxTables];
  const size_t n = candidates(cpu, c);
  size_t k = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!c[i].runnable) continue;
    if (k < cap) out[k] = c[i].table;
    ++k;
  }
  return k;
}

size_t kernels_compiled(const KernelTable** out, size_t cap) {
  Candidate c[kMaxTables];
  const size_t n = candidates(CpuFeatures(), c);
  for (size_t i = 0; i < n && i < cap; ++i) out[i] = c[i].table;
  return n;
}

}  // namespace ringlm::internal
