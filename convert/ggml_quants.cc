// GGML block formats (see ggml_quants.h). Each block is read byte by byte from its documented
// layout (little-endian f16 scales, packed nibbles / bit planes), so the code does not depend on
// host struct packing or alignment: GGUF tensor data is only 32-byte aligned and a block of 18,
// 22 or 110 bytes starts anywhere.
//
// Rounding contract: every value is computed with the same float32 operations in the same order
// as ggml's reference dequantizers (e.g. Q4_K: (d * sc) * q - (dmin * m)), each rounded to
// float32; the file is built with -ffp-contract=off (convert/CMakeLists.txt) so none is fused.
#include "convert/ggml_quants.h"

#include <string.h>

#include "kernels/scalar.h"

namespace ringlm::internal {
namespace conv {
namespace {

constexpr uint32_t kQK = 256;  // values per K-quant / IQ4_XS super-block

struct TypeRow {
  uint32_t type;
  const char* name;
  uint32_t block_values;  // 0: size unknown
  uint32_t block_bytes;
  bool readable;
};

// Block sizes from ggml-common.h's block structs (e.g. block_q4_K: f16 d, f16 dmin, 12 bytes of
// 6-bit scales / mins, 128 bytes of nibbles = 144 bytes per 256 values).
constexpr TypeRow kTypes[] = {
    {kGgmlF32, "F32", 1, 4, true},
    {kGgmlF16, "F16", 1, 2, true},
    {kGgmlQ4_0, "Q4_0", 32, 18, true},
    {kGgmlQ4_1, "Q4_1", 32, 20, true},
    {4, "Q4_2", 0, 0, false},
    {5, "Q4_3", 0, 0, false},
    {kGgmlQ5_0, "Q5_0", 32, 22, true},
    {kGgmlQ5_1, "Q5_1", 32, 24, true},
    {kGgmlQ8_0, "Q8_0", 32, 34, true},
    {kGgmlQ8_1, "Q8_1", 32, 36, false},
    {kGgmlQ2_K, "Q2_K", kQK, 84, true},
    {kGgmlQ3_K, "Q3_K", kQK, 110, true},
    {kGgmlQ4_K, "Q4_K", kQK, 144, true},
    {kGgmlQ5_K, "Q5_K", kQK, 176, true},
    {kGgmlQ6_K, "Q6_K", kQK, 210, true},
    {kGgmlQ8_K, "Q8_K", kQK, 292, false},
    {kGgmlIQ2_XXS, "IQ2_XXS", kQK, 66, false},
    {kGgmlIQ2_XS, "IQ2_XS", kQK, 74, false},
    {kGgmlIQ3_XXS, "IQ3_XXS", kQK, 98, false},
    {kGgmlIQ1_S, "IQ1_S", kQK, 50, false},
    {kGgmlIQ4_NL, "IQ4_NL", 32, 18, true},
    {kGgmlIQ3_S, "IQ3_S", kQK, 110, false},
    {kGgmlIQ2_S, "IQ2_S", kQK, 82, false},
    {kGgmlIQ4_XS, "IQ4_XS", kQK, 136, true},
    {kGgmlI8, "I8", 1, 1, false},
    {kGgmlI16, "I16", 1, 2, false},
    {kGgmlI32, "I32", 1, 4, false},
    {kGgmlI64, "I64", 1, 8, false},
    {kGgmlF64, "F64", 1, 8, false},
    {kGgmlIQ1_M, "IQ1_M", kQK, 56, false},
    {kGgmlBF16, "BF16", 1, 2, true},
    {31, "Q4_0_4_4", 0, 0, false},
    {32, "Q4_0_4_8", 0, 0, false},
    {33, "Q4_0_8_8", 0, 0, false},
    {kGgmlTQ1_0, "TQ1_0", kQK, 54, false},
    {kGgmlTQ2_0, "TQ2_0", kQK, 66, false},
    {36, "IQ4_NL_4_4", 0, 0, false},
    {37, "IQ4_NL_4_8", 0, 0, false},
    {38, "IQ4_NL_8_8", 0, 0, false},
    {kGgmlMXFP4, "MXFP4", 32, 17, false},
};

const TypeRow* find_type(uint32_t type) {
  for (const TypeRow& r : kTypes)
    if (r.type == type) return &r;
  return nullptr;
}

inline float half_at(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return fp16_to_f32(h);
}

inline uint32_t u32_at(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 |
         static_cast<uint32_t>(p[2]) << 16 | static_cast<uint32_t>(p[3]) << 24;
}

// ---- 32-value blocks ------------------------------------------------------------------------
// Value j (0..15) of a block is in the low nibble of byte j, value j + 16 in its high nibble.

// Q4_0: f16 d, 16 bytes of nibbles; x = (nibble - 8) * d.
void deq_q4_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>((qs[j] & 0x0f) - 8) * d;
    y[j + 16] = static_cast<float>((qs[j] >> 4) - 8) * d;
  }
}

// Q4_1: f16 d, f16 m, 16 bytes of nibbles; x = nibble * d + m.
void deq_q4_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint8_t* qs = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = static_cast<float>(qs[j] & 0x0f) * d + m;
    y[j + 16] = static_cast<float>(qs[j] >> 4) * d + m;
  }
}

// Q5_0 / Q5_1: the fifth bit of value j is bit j of the little-endian u32 qh (values 16..31:
// bits 16..31).
inline int q5_value(const uint8_t* qs, uint32_t qh, int j) {
  const int lo = j < 16 ? (qs[j] & 0x0f) : (qs[j - 16] >> 4);
  return lo | static_cast<int>((qh >> j) & 1u) << 4;
}

// Q5_0: f16 d, u32 qh, 16 bytes of nibbles; x = (q - 16) * d.
void deq_q5_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint32_t qh = u32_at(b + 2);
  const uint8_t* qs = b + 6;
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_value(qs, qh, j) - 16) * d;
}

// Q5_1: f16 d, f16 m, u32 qh, 16 bytes of nibbles; x = q * d + m.
void deq_q5_1(const uint8_t* b, float* y) {
  const float d = half_at(b), m = half_at(b + 2);
  const uint32_t qh = u32_at(b + 4);
  const uint8_t* qs = b + 8;
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(q5_value(qs, qh, j)) * d + m;
}

// Q8_0: f16 d, 32 int8; x = q * d.
void deq_q8_0(const uint8_t* b, float* y) {
  const float d = half_at(b);
  for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
}

// IQ4_NL: f16 d, 16 bytes of nibbles indexing kIq4Levels; x = d * level.
void deq_iq4_nl(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint8_t* qs = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(kIq4Levels[qs[j] & 0x0f]);
    y[j + 16] = d * static_cast<float>(kIq4Levels[qs[j] >> 4]);
  }
}

// ---- 256-value super-blocks ------------------------------------------------------------------

// Q3_K / Q6_K: x = (d * scale[i / 16]) * q[i] (ggml_symmetric_k_levels).
void deq_symmetric_k(uint32_t type, const uint8_t* b, float* y) {
  uint16_t dh;
  int8_t sc[16], q[256];
  ggml_symmetric_k_levels(type, b, &dh, sc, q);
  const float d = fp16_to_f32(dh);
  for (int i = 0; i < 256; ++i) {
    const float dl = d * static_cast<float>(sc[i / 16]);
    y[i] = dl * static_cast<float>(q[i]);
  }
}

// Q2_K: 16 bytes of (scale | min << 4) per 16 values, 64 bytes of 2-bit quants, f16 d, f16 dmin.
// Quant byte l of each 32-byte half holds, in bit pairs 0..3, values of four consecutive
// 32-value runs: run k of half h (128 values) is (qs[32h + l] >> 2k) & 3 at y[128h + 32k + l].
// x = (d * scale) * q - (dmin * min), scale / min the nibbles of sub-block (128h + 32k + l) / 16.
void deq_q2_k(const uint8_t* b, float* y) {
  const uint8_t* sc = b;
  const uint8_t* qs = b + 16;
  const float d = half_at(b + 80), dmin = half_at(b + 82);
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, k = (i % 128) / 32, l = i % 32;
    const int q = (qs[32 * h + l] >> (2 * k)) & 3;
    const uint8_t s = sc[i / 16];
    const float dl = d * static_cast<float>(s & 0x0f);
    const float ml = dmin * static_cast<float>(s >> 4);
    y[i] = dl * static_cast<float>(q) - ml;
  }
}

void deq_q3_k(const uint8_t* b, float* y) { deq_symmetric_k(kGgmlQ3_K, b, y); }

inline void scale_min_k4(int j, const uint8_t* q, int* sc, int* m) { ggml_scale_min_k4(j, q, sc, m); }

// Q4_K: f16 d, f16 dmin, 12 scale bytes, 128 bytes of nibbles. Values 64c .. 64c + 31 are the
// low nibbles of bytes 32c .. 32c + 31 (sub-block 2c), values 64c + 32 .. 64c + 63 their high
// nibbles (sub-block 2c + 1). x = (d * sc) * q - (dmin * m).
// Q5_K: as Q4_K with 32 bytes qh after the scales: the fifth bit of value 64c + 32 * half + l
// is bit 2c + half of qh[l].
template <bool Q5>
void deq_q45_k(const uint8_t* b, float* y) {
  const float d = half_at(b), dmin = half_at(b + 2);
  const uint8_t* sb = b + 4;
  const uint8_t* qh = b + 16;
  const uint8_t* qs = b + (Q5 ? 48 : 16);
  for (int c = 0; c < 4; ++c) {
    for (int half = 0; half < 2; ++half) {
      int sc, m;
      scale_min_k4(2 * c + half, sb, &sc, &m);
      const float dl = d * static_cast<float>(sc);
      const float ml = dmin * static_cast<float>(m);
      for (int l = 0; l < 32; ++l) {
        int q = half ? qs[32 * c + l] >> 4 : qs[32 * c + l] & 0x0f;
        if (Q5) q += ((qh[l] >> (2 * c + half)) & 1) << 4;
        y[64 * c + 32 * half + l] = dl * static_cast<float>(q) - ml;
      }
    }
  }
}
void deq_q4_k(const uint8_t* b, float* y) { deq_q45_k<false>(b, y); }
void deq_q5_k(const uint8_t* b, float* y) { deq_q45_k<true>(b, y); }

void deq_q6_k(const uint8_t* b, float* y) { deq_symmetric_k(kGgmlQ6_K, b, y); }

// IQ4_XS: f16 d, u16 scales_h, 4 bytes scales_l, 128 bytes of nibbles. Sub-block s (0..7, 32
// values) has the 6-bit scale (nibble s % 2 of scales_l[s / 2]) | ((scales_h >> 2s) & 3) << 4,
// stored + 32, and its 16 bytes of nibbles laid out as IQ4_NL's. x = (d * (ls - 32)) * level.
void deq_iq4_xs(const uint8_t* b, float* y) {
  const float d = half_at(b);
  const uint32_t sh = static_cast<uint32_t>(b[2]) | static_cast<uint32_t>(b[3]) << 8;
  const uint8_t* sl = b + 4;
  const uint8_t* qs = b + 8;
  for (int s = 0; s < 8; ++s) {
    const int ls = ((sl[s / 2] >> (4 * (s % 2))) & 0x0f) | static_cast<int>((sh >> (2 * s)) & 3u) << 4;
    const float dl = d * static_cast<float>(ls - 32);
    const uint8_t* q = qs + 16 * s;
    for (int j = 0; j < 16; ++j) {
      y[32 * s + j] = dl * static_cast<float>(kIq4Levels[q[j] & 0x0f]);
      y[32 * s + j + 16] = dl * static_cast<float>(kIq4Levels[q[j] >> 4]);
    }
  }
}

}  // namespace

const int8_t kIq4Levels[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                               1,    13,   25,  38,  53,  69,  89,  113};

std::string ggml_type_name(uint32_t type) {
  const TypeRow* r = find_type(type);
  return r ? r->name : "type " + std::to_string(type);
}

bool ggml_block_geometry(uint32_t type, uint32_t* block_values, uint32_t* block_bytes) {
  const TypeRow* r = find_type(type);
  if (!r || r->block_values == 0) return false;
  *block_values = r->block_values;
  *block_bytes = r->block_bytes;
  return true;
}

bool ggml_type_readable(uint32_t type) {
  const TypeRow* r = find_type(type);
  return r && r->readable;
}

const char* ggml_readable_types() {
  return "F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, "
         "IQ4_XS";
}

bool ggml_tensor_bytes(uint32_t type, uint64_t cols, uint64_t n, uint64_t* bytes,
                       std::string* why) {
  uint32_t bv, bb;
  if (!ggml_block_geometry(type, &bv, &bb)) {
    *why = "its size is unknown";
    return false;
  }
  if (cols == 0 || cols % bv != 0) {
    *why = "its " + std::to_string(cols) + " columns are not a multiple of the " +
           ggml_type_name(type) + " block size " + std::to_string(bv);
    return false;
  }
  const uint64_t blocks = n / bv;
  if (blocks > (1ull << 62) / bb) {
    *why = "its size overflows";
    return false;
  }
  *bytes = blocks * bb;
  return true;
}

bool ggml_dequantize(uint32_t type, const uint8_t* src, uint64_t n, float* dst) {
  void (*block)(const uint8_t*, float*) = nullptr;
  // No values: nothing is read or written (the pointers may be null then, as an empty vector's
  // data() is; memcpy must not see them).
  if (n == 0) return ggml_type_readable(type);
  switch (type) {
    case kGgmlF32:
      memcpy(dst, src, n * 4);
      return true;
    case kGgmlF16:
      for (uint64_t i = 0; i < n; ++i) dst[i] = half_at(src + 2 * i);
      return true;
    case kGgmlBF16:
      // bfloat16 is the top half of a float32: widening is exact (NaN payloads kept).
      for (uint64_t i = 0; i < n; ++i) {
        const uint32_t bits = (static_cast<uint32_t>(src[2 * i]) |
                               static_cast<uint32_t>(src[2 * i + 1]) << 8) << 16;
        memcpy(&dst[i], &bits, 4);
      }
      return true;
    case kGgmlQ4_0: block = deq_q4_0; break;
    case kGgmlQ4_1: block = deq_q4_1; break;
    case kGgmlQ5_0: block = deq_q5_0; break;
    case kGgmlQ5_1: block = deq_q5_1; break;
    case kGgmlQ8_0: block = deq_q8_0; break;
    case kGgmlIQ4_NL: block = deq_iq4_nl; break;
    case kGgmlQ2_K: block = deq_q2_k; break;
    case kGgmlQ3_K: block = deq_q3_k; break;
    case kGgmlQ4_K: block = deq_q4_k; break;
    case kGgmlQ5_K: block = deq_q5_k; break;
    case kGgmlQ6_K: block = deq_q6_k; break;
    case kGgmlIQ4_XS: block = deq_iq4_xs; break;
    default: return false;
  }
  uint32_t bv, bb;
  ggml_block_geometry(type, &bv, &bb);
  for (uint64_t k = 0; k < n / bv; ++k) block(src + k * bb, dst + k * bv);
  return true;
}

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12 bytes:
// j < 4: scale = q[j] & 63, min = q[j + 4] & 63; j >= 4: the low 4 bits from byte j + 4
// (scale: low nibble, min: high nibble) and the top 2 bits from bits 6..7 of bytes j - 4 / j.
void ggml_scale_min_k4(int j, const uint8_t* q, int* sc, int* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0x0f) | ((q[j - 4] >> 6) << 4);
    *m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Q3_K: 32 bytes hmask (high bit), 64 bytes of 2-bit quants, 12 bytes of 16 six-bit scales, f16
// d. The low bits of y[128h + 32k + l] are (qs[32h + l] >> 2k) & 3, its high bit is bit
// (4h + k) of hmask[l], and a clear bit subtracts 4: q in [-4, 3]. Scale s (0..15): low 4 bits
// from byte s (s < 8, low nibble) or s - 8 (high nibble), top 2 bits from byte 8 + s % 4 at bit
// 2 * (s / 4); stored + 32.
// Q6_K: 128 bytes ql (low 4 bits), 64 bytes qh (high 2 bits), 16 int8 scales, f16 d. In each
// 128-value half h (ql + 64h, qh + 32h), for l in 0..31 the four values at 128h + l + 32k
// (k = 0..3) take their low nibble from ql[l] (k = 0: low, 2: high) or ql[l + 32] (k = 1: low,
// 3: high) and their top bits from (qh[l] >> 2k) & 3; q = value - 32 in [-32, 31].
void ggml_symmetric_k_levels(uint32_t type, const uint8_t* b, uint16_t* d, int8_t* sc,
                             int8_t* q) {
  if (type == kGgmlQ3_K) {
    const uint8_t* hmask = b;
    const uint8_t* qs = b + 32;
    const uint8_t* sb = b + 96;
    memcpy(d, b + 108, 2);
    for (int s = 0; s < 16; ++s) {
      const int lo = s < 8 ? (sb[s] & 0x0f) : (sb[s - 8] >> 4);
      const int hi = (sb[8 + s % 4] >> (2 * (s / 4))) & 3;
      sc[s] = static_cast<int8_t>((lo | hi << 4) - 32);
    }
    for (int i = 0; i < 256; ++i) {
      const int h = i / 128, k = (i % 128) / 32, l = i % 32;
      const int low = (qs[32 * h + l] >> (2 * k)) & 3;
      q[i] = static_cast<int8_t>(low - ((hmask[l] >> (4 * h + k)) & 1 ? 0 : 4));
    }
    return;
  }
  const uint8_t* ql = b;
  const uint8_t* qh = b + 128;
  memcpy(sc, b + 192, 16);
  memcpy(d, b + 208, 2);
  for (int h = 0; h < 2; ++h) {
    const uint8_t* l4 = ql + 64 * h;
    const uint8_t* h2 = qh + 32 * h;
    for (int l = 0; l < 32; ++l) {
      for (int k = 0; k < 4; ++k) {
        const uint8_t lb = l4[l + (k & 1) * 32];
        const int lo = k < 2 ? (lb & 0x0f) : (lb >> 4);
        q[128 * h + 32 * k + l] = static_cast<int8_t>((lo | ((h2[l] >> (2 * k)) & 3) << 4) - 32);
      }
    }
  }
}

}  // namespace conv
}  // namespace ringlm::internal
