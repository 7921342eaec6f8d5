#include "platform/cpu_features.h"

#include <stdint.h>
#include <string.h>

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#elif (defined(__aarch64__) || defined(__arm__)) && (defined(__linux__) || defined(__ANDROID__))
#include <sys/auxv.h>
#define RINGLM_HAVE_AUXV 1
#endif

namespace ringlm::internal {
namespace {

#if defined(__x86_64__) || defined(__i386__)
// XCR0 through xgetbv; only valid when CPUID.1:ECX.OSXSAVE is set.
uint64_t read_xcr0() {
  uint32_t lo, hi;
  __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));  // xgetbv
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

void detect_x86(CpuFeatures* f) {
  unsigned a, b, c, d;
  if (!__get_cpuid(0, &a, &b, &c, &d)) return;
  const unsigned max_leaf = a;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return;
  const bool osxsave = (c >> 27) & 1u;
  const bool avx = (c >> 28) & 1u;
  const bool fma = (c >> 12) & 1u;
  const bool f16c = (c >> 29) & 1u;
  uint64_t xcr0 = osxsave ? read_xcr0() : 0;
  const bool os_ymm = (xcr0 & 0x6u) == 0x6u;            // XMM | YMM state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0u) == 0xe0u;  // opmask | ZMM_Hi256 | Hi16_ZMM
  if (!avx || !os_ymm || max_leaf < 7) return;
  f->fma = fma;
  f->f16c = f16c;
  __cpuid_count(7, 0, a, b, c, d);
  const unsigned max_sub7 = a;
  f->avx2 = (b >> 5) & 1u;
  if (os_zmm) {
    f->avx512f = (b >> 16) & 1u;
    f->avx512bw = (b >> 30) & 1u;
    f->avx512vl = (b >> 31) & 1u;
    f->avx512vnni = f->avx512f && ((c >> 11) & 1u);
  }
  if (max_sub7 >= 1) {
    __cpuid_count(7, 1, a, b, c, d);
    f->avxvnni = f->avx2 && ((a >> 4) & 1u);
  }
}
#endif

#if defined(RINGLM_HAVE_AUXV)
#if defined(__aarch64__)
constexpr unsigned long kHwcapAsimd = 1ul << 1;
constexpr unsigned long kHwcapFphp = 1ul << 9;
constexpr unsigned long kHwcapAsimdhp = 1ul << 10;
constexpr unsigned long kHwcapAsimddp = 1ul << 20;
constexpr unsigned long kHwcap2I8mm = 1ul << 13;

void detect_arm(CpuFeatures* f) {
  const unsigned long hw = getauxval(AT_HWCAP);
  const unsigned long hw2 = getauxval(AT_HWCAP2);
  f->neon = (hw & kHwcapAsimd) != 0;
  f->dotprod = f->neon && (hw & kHwcapAsimddp) != 0;
  f->i8mm = f->neon && (hw2 & kHwcap2I8mm) != 0;
  f->fp16 = (hw & kHwcapFphp) != 0 && (hw & kHwcapAsimdhp) != 0;
  f->vfpv4 = true;  // AArch64 always has fused multiply-add and f16 conversion
}
#else   // 32-bit ARM (also a 32-bit process on a 64-bit kernel: the compat hwcaps)
constexpr unsigned long kHwcapNeon = 1ul << 12;
constexpr unsigned long kHwcapVfpv4 = 1ul << 16;

void detect_arm(CpuFeatures* f) {
  const unsigned long hw = getauxval(AT_HWCAP);
  f->neon = (hw & kHwcapNeon) != 0;
  f->vfpv4 = (hw & kHwcapVfpv4) != 0;
}
#endif
#endif

}  // namespace

CpuFeatures cpu_features_detect() {
  CpuFeatures f;
#if defined(__x86_64__) || defined(__i386__)
  detect_x86(&f);
#elif defined(RINGLM_HAVE_AUXV)
  detect_arm(&f);
#elif defined(__aarch64__)
  f.neon = true;  // AdvSIMD is mandatory in AArch64; nothing newer is assumed without hwcaps
  f.vfpv4 = true;
#endif
  return f;
}

size_t cpu_features_describe(const CpuFeatures& f, char* buf, size_t cap) {
  struct Flag {
    bool on;
    const char* name;
  };
  const Flag flags[] = {{f.avx2, "avx2"},         {f.fma, "fma"},
                        {f.f16c, "f16c"},         {f.avx512f, "avx512f"},
                        {f.avx512bw, "avx512bw"}, {f.avx512vl, "avx512vl"},
                        {f.avx512vnni, "avx512vnni"}, {f.avxvnni, "avxvnni"},
                        {f.neon, "neon"},         {f.dotprod, "dotprod"},
                        {f.i8mm, "i8mm"},         {f.fp16, "fp16"},
                        {f.vfpv4, "vfpv4"}};
  size_t len = 0;
  for (const Flag& fl : flags) {
    if (!fl.on) continue;
    const size_t n = strlen(fl.name);
    for (size_t i = 0; i < n + 1; ++i) {  // separator first (except the first flag), then name
      const char ch = i == 0 ? ' ' : fl.name[i - 1];
      if (i == 0 && len == 0) continue;
      if (len + 1 < cap) buf[len] = ch;
      ++len;
    }
  }
  if (cap > 0) buf[len < cap ? len : cap - 1] = '\0';
  return len;
}

}  // namespace ringlm::internal
