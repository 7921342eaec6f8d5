// What the CPU we run on can execute, as far as the kernels care: cpuid + XCR0 on x86 (the OS
// must save the AVX / AVX-512 register state, or the instructions fault), getauxval(AT_HWCAP,
// AT_HWCAP2) on ARM Linux/Android. Plain data, detected once by the caller (session init) and
// handed to kernels_select(); nothing is cached in a static.
#ifndef RINGLM_PLATFORM_CPU_FEATURES_H_
#define RINGLM_PLATFORM_CPU_FEATURES_H_

#include <stddef.h>

namespace ringlm::internal {

struct CpuFeatures {
  // x86-64. Each AVX flag is set only when the OS also enables the register state (XCR0).
  bool avx2 = false;
  bool fma = false;
  bool f16c = false;
  bool avx512f = false;
  bool avx512bw = false;
  bool avx512vl = false;
  bool avx512vnni = false;
  bool avxvnni = false;  // VEX-encoded vpdpbusd on ymm (Alder Lake, Zen 5)
  // ARM (aarch64 and 32-bit).
  bool neon = false;      // aarch64: ASIMD (always); armv7: HWCAP_NEON
  bool dotprod = false;   // aarch64 HWCAP_ASIMDDP: sdot/udot
  bool i8mm = false;      // aarch64 HWCAP2_I8MM: smmla/usmmla
  bool fp16 = false;      // aarch64 HWCAP_FPHP && HWCAP_ASIMDHP: half-precision arithmetic
  bool vfpv4 = false;     // armv7 HWCAP_VFPv4 (fused multiply-add, f16 conversion)
};

// Detects the running CPU. Cheap (a few cpuid / getauxval calls); no allocation, no statics.
CpuFeatures cpu_features_detect();

// "avx2 fma f16c ..." (the set flags, space separated) into buf; returns the length it wanted.
size_t cpu_features_describe(const CpuFeatures& f, char* buf, size_t cap);

}  // namespace ringlm::internal

#endif  // RINGLM_PLATFORM_CPU_FEATURES_H_
