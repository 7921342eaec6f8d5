// Scalar decoders of the encodings the kernels consume: IEEE binary16 <-> float32, portable and
// exact (round-to-nearest-even on narrowing), and the packed Q4 nibbles. The reference kernels,
// the runtime and the converter use them; the ISA files do not (inline functions: see kernels.h),
// they convert with their own instructions.
#ifndef RINGLM_KERNELS_SCALAR_H_
#define RINGLM_KERNELS_SCALAR_H_

#include <stdint.h>
#include <string.h>

namespace ringlm::internal {

inline float fp16_to_f32(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do {
        ++e;
        mant <<= 1;
      } while ((mant & 0x400u) == 0);
      bits = sign | (static_cast<uint32_t>(127 - 15 - e) << 23) | ((mant & 0x3ffu) << 13);
    }
  } else if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + (127 - 15)) << 23) | (mant << 13);
  }
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

inline uint16_t f32_to_fp16(float f) {
  uint32_t x;
  memcpy(&x, &f, sizeof x);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u : 0u));
  }
  if (absx >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow -> inf
  if (absx < 0x38800000u) {  // result is subnormal or zero
    if (absx < 0x33000000u) return static_cast<uint16_t>(sign);
    uint32_t mant = (absx & 0x7fffffu) | 0x800000u;
    int shift = 113 - static_cast<int>(absx >> 23) + 13;  // 14..24
    uint32_t half = mant >> shift;
    uint32_t rem = mant & ((1u << shift) - 1u);
    uint32_t mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1u))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t h = ((absx >> 13) - ((127 - 15) << 10));
  uint32_t rem = absx & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

// Value i (0..31) of a packed Q4 group of 16 bytes: values 0..15 in the low nibbles of bytes
// 0..15, values 16..31 in their high nibbles, each stored as v + 8.
inline int q4_get(const uint8_t* group, unsigned i) {
  uint8_t b = group[i & 15u];
  unsigned nib = i < 16 ? (b & 0x0fu) : (b >> 4);
  return static_cast<int>(nib ^ 8u) - 8;  // sign-extend 4 bits
}

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_SCALAR_H_
