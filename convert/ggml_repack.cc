// Block-by-block repacking (see ggml_repack.h). A GGUF row of cols values is cols / 32 blocks
// in order, so block b of the tensor is group b % (cols / 32) of row b / (cols / 32): with
// cols % 32 == 0 the q8 / q4 planes (no padding) hold the groups in the same order.
#include "convert/ggml_repack.h"

#include <string.h>

#include "convert/ggml_quants.h"
#include "quant.h"

namespace ringlm::internal {
namespace conv {
bool ggml_exact_repack_target(uint32_t type, fb::DType* out) {
  switch (type) {
    case kGgmlQ8_0: case kGgmlIQ4_NL: *out = fb::DType::Q8; return true;
    case kGgmlQ5_0: *out = fb::DType::Q5; return true;
    case kGgmlQ4_1: *out = fb::DType::Q4_1; return true;
    case kGgmlQ5_1: *out = fb::DType::Q5_1; return true;
    case kGgmlQ4_0: *out = fb::DType::Q4; return true;
    case kGgmlQ4_K: *out = fb::DType::Q4K; return true;
    case kGgmlQ5_K: *out = fb::DType::Q5K; return true;
    case kGgmlQ6_K: case kGgmlQ3_K: *out = fb::DType::Q6K; return true;
    default: return false;
  }
}

namespace {

// Q4_K / Q5_K super-blocks (256 values: f16 d, f16 dmin, 12 bytes of 6-bit scales and mins,
// Q5_K: 32 bytes qh, then 128 bytes of nibbles; cols a multiple of 256) -> Q4K / Q5K planes.
// Sub-block j (32 values) of a super-block is the low (j even) or high (j odd) nibbles of bytes
// 32 (j / 2) .. + 31, Q5_K's fifth bit of its value l bit j of qh[l]; our group j holds value l
// in byte l % 16, low nibble for l < 16, and Q5K's fifth bit in bit l / 4 of high byte l % 4.
template <bool Q5>
void repack_q45_k(const uint8_t* src, uint64_t rows, uint64_t cols, std::vector<uint8_t>* out) {
  const WeightType wt = Q5 ? WeightType::Q5K : WeightType::Q4K;
  out->assign(static_cast<size_t>(tensor_data_bytes(wt, rows, cols)), 0);
  uint8_t* qs = out->data();
  uint8_t* high = out->data() + q5k_high_offset(rows, cols);  // Q5K only
  uint8_t* dm = out->data() + quant_scales_offset(wt, rows, cols);
  uint8_t* subs = out->data() + (Q5 ? q5k_subs_offset(rows, cols) : q4k_subs_offset(rows, cols));
  const uint64_t n_blocks = rows * cols / 256;  // row-major: block b is super-block b of the plane
  for (uint64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = src + b * (Q5 ? 176 : 144);
    memcpy(dm + b * 4, blk, 4);  // d, dmin
    const uint8_t* sb = blk + 4;
    const uint8_t* qh = blk + 16;  // Q5_K only
    const uint8_t* q = blk + (Q5 ? 48 : 16);
    for (int j = 0; j < 8; ++j) {
      int sc, m;
      ggml_scale_min_k4(j, sb, &sc, &m);
      subs[b * 16 + j] = static_cast<uint8_t>(sc);
      subs[b * 16 + 8 + j] = static_cast<uint8_t>(m);
      uint8_t v[32];
      for (int l = 0; l < 32; ++l) v[l] = (j & 1) ? q[32 * (j / 2) + l] >> 4 : q[32 * (j / 2) + l] & 0x0f;
      uint8_t* g = qs + (b * 8 + j) * 16;
      for (int l = 0; l < 16; ++l) g[l] = static_cast<uint8_t>(v[l] | (v[l + 16] << 4));
      if (Q5) {
        uint8_t* h = high + (b * 8 + j) * 4;
        for (int l = 0; l < 32; ++l) h[l % 4] = static_cast<uint8_t>(h[l % 4] | ((qh[l] >> j) & 1) << (l / 4));
      }
    }
  }
}

// Q6_K / Q3_K super-blocks (256 values; cols a multiple of 256) -> Q6K planes: d and the 16
// int8 scales as they are (the same order: one per 16 values), each level q + 32 split into the
// low-nibble and high-bit planes (schema/model.fbs). Both types' values are (d * sc) * q, which
// is what Q6K computes (Q3_K's q in [-4, 3] and scales in [-32, 31] are a sub-range of Q6K's).
void repack_symmetric_k(uint32_t type, const uint8_t* src, uint64_t rows, uint64_t cols,
                        std::vector<uint8_t>* out) {
  out->assign(static_cast<size_t>(tensor_data_bytes(WeightType::Q6K, rows, cols)), 0);
  uint8_t* qs = out->data();
  uint8_t* high = out->data() + q6k_high_offset(rows, cols);
  uint8_t* d = out->data() + quant_scales_offset(WeightType::Q6K, rows, cols);
  uint8_t* sc = out->data() + q6k_subs_offset(rows, cols);
  uint32_t bv = 0, bb = 0;
  ggml_block_geometry(type, &bv, &bb);
  const uint64_t n_blocks = rows * cols / 256;  // row-major: block b is super-block b of the plane
  for (uint64_t b = 0; b < n_blocks; ++b) {
    uint16_t dh;
    int8_t s16[16], q[256];
    ggml_symmetric_k_levels(type, src + b * bb, &dh, s16, q);
    memcpy(d + b * 2, &dh, 2);
    memcpy(sc + b * kQ6kSubsPerSuper, s16, kQ6kSubsPerSuper);
    for (uint32_t g = 0; g < kQ4kSuperGroups; ++g) {
      uint8_t* lo = qs + (b * kQ4kSuperGroups + g) * 16;
      uint8_t* hi = high + (b * kQ4kSuperGroups + g) * 8;
      for (uint32_t j = 0; j < 32; ++j) {
        const uint32_t u = static_cast<uint32_t>(q[32 * g + j] + 32);  // [0, 63]
        lo[j % 16] = static_cast<uint8_t>(lo[j % 16] | (u & 15u) << (j < 16 ? 0 : 4));
        hi[j % 8] = static_cast<uint8_t>(hi[j % 8] | (u >> 4) << (2 * (j / 8)));
      }
    }
  }
}

}  // namespace

bool ggml_alt_repack_target(uint32_t type, fb::DType* out) {
  if (type != kGgmlQ5_0) return false;
  *out = fb::DType::Q8;
  return true;
}

void ggml_repack(uint32_t type, const uint8_t* src, uint64_t rows, uint64_t cols,
                 std::vector<uint8_t>* out) {
  fb::DType target = fb::DType::F32;
  ggml_exact_repack_target(type, &target);
  ggml_repack_to(type, target, src, rows, cols, out);
}

void ggml_repack_to(uint32_t type, fb::DType target, const uint8_t* src, uint64_t rows,
                    uint64_t cols, std::vector<uint8_t>* out) {
  if (type == kGgmlQ4_K) return repack_q45_k<false>(src, rows, cols, out);
  if (type == kGgmlQ5_K) return repack_q45_k<true>(src, rows, cols, out);
  if (type == kGgmlQ6_K || type == kGgmlQ3_K) return repack_symmetric_k(type, src, rows, cols, out);
  const WeightType wt = target == fb::DType::Q8     ? WeightType::Q8
                        : target == fb::DType::Q5   ? WeightType::Q5
                        : target == fb::DType::Q4_1 ? WeightType::Q4_1
                        : target == fb::DType::Q5_1 ? WeightType::Q5_1
                                                    : WeightType::Q4;
  out->assign(static_cast<size_t>(tensor_data_bytes(wt, rows, cols)), 0);
  uint32_t bv = 0, bb = 0;
  ggml_block_geometry(type, &bv, &bb);
  const uint64_t n_blocks = rows * cols / 32;
  const uint64_t group_bytes = wt == WeightType::Q8 ? 32 : 16;  // Q5, Q4_1, Q5_1: their nibbles
  // Q4_1 / Q5_1: (d, m) per group, the block's first 4 bytes as they are; the others: d.
  const uint64_t scale_bytes = wt == WeightType::Q4_1 || wt == WeightType::Q5_1 ? 4 : 2;
  uint8_t* qs = out->data();
  uint8_t* high = out->data() + q5k_high_offset(rows, cols);  // Q5, Q5_1 only
  uint8_t* scales = out->data() + quant_scales_offset(wt, rows, cols);
  for (uint64_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = src + b * bb;
    memcpy(scales + b * scale_bytes, blk, scale_bytes);  // each of these types starts with d (, m)
    uint8_t* dst = qs + b * group_bytes;
    switch (type) {
      case kGgmlQ8_0:
        memcpy(dst, blk + 2, 32);
        break;
      case kGgmlQ4_0:
        // Unsigned nibble u (value u - 8) -> two's-complement nibble (u - 8) & 15 == u ^ 8.
        for (int j = 0; j < 16; ++j) dst[j] = blk[2 + j] ^ 0x88;
        break;
      case kGgmlQ4_1:
        memcpy(dst, blk + 4, 16);  // unsigned nibbles, value j low / j + 16 high: ours
        break;
      case kGgmlQ5_0:
      case kGgmlQ5_1: {
        // q5 / q5_1: the nibbles are ours as they are (unsigned, value j low / j + 16 high); the
        // fifth bit of value j, bit j of the little-endian qh, goes to bit j / 4 of high byte
        // j % 4. q8 (Q5_0 only): each value's q - 16 as an int8.
        const uint8_t* qh = blk + (type == kGgmlQ5_1 ? 4 : 2);
        const uint8_t* q = qh + 4;
        if (wt == WeightType::Q5 || wt == WeightType::Q5_1) {
          memcpy(dst, q, 16);
          uint8_t* h = high + b * 4;
          for (int j = 0; j < 32; ++j) h[j % 4] = static_cast<uint8_t>(h[j % 4] | ((qh[j / 8] >> (j % 8)) & 1) << (j / 4));
        } else {
          for (int j = 0; j < 32; ++j) {
            const int lo = j < 16 ? (q[j] & 0x0f) : (q[j - 16] >> 4);
            dst[j] = static_cast<uint8_t>(static_cast<int8_t>((lo | ((qh[j / 8] >> (j % 8)) & 1) << 4) - 16));
          }
        }
        break;
      }
      case kGgmlIQ4_NL: {
        const uint8_t* q = blk + 2;
        for (int j = 0; j < 16; ++j) {
          dst[j] = static_cast<uint8_t>(kIq4Levels[q[j] & 0x0f]);
          dst[j + 16] = static_cast<uint8_t>(kIq4Levels[q[j] >> 4]);
        }
        break;
      }
      default:
        break;
    }
  }
}

}  // namespace conv
}  // namespace ringlm::internal
