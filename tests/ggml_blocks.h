// Test-side knowledge of GGML block layouts: where each readable type keeps its f16 scale
// fields (d, and m / dmin where the type has one), so tests and fuzz seeds can plant hostile
// scales, and random finite blocks of any readable type. Written from ggml-common.h's block
// structs, independently of convert/ggml_quants.cc.
#ifndef RINGLM_TESTS_GGML_BLOCKS_H_
#define RINGLM_TESTS_GGML_BLOCKS_H_

#include <stdint.h>
#include <string.h>

#include <random>
#include <string>
#include <vector>

#include "kernels/scalar.h"

namespace ringlm_test {

struct GgmlBlockLayout {
  uint32_t type;         // ggml type number
  const char* name;
  uint32_t values;       // per block
  uint32_t bytes;        // per block
  int n_scales;          // f16 fields in the block
  uint32_t scale_at[2];  // their byte offsets
};

// The 12 block-quantized types the converter reads (F32 / F16 / BF16 have no blocks).
inline const std::vector<GgmlBlockLayout>& ggml_block_layouts() {
  static const std::vector<GgmlBlockLayout> v = {
      {2, "Q4_0", 32, 18, 1, {0, 0}},      {3, "Q4_1", 32, 20, 2, {0, 2}},
      {6, "Q5_0", 32, 22, 1, {0, 0}},      {7, "Q5_1", 32, 24, 2, {0, 2}},
      {8, "Q8_0", 32, 34, 1, {0, 0}},      {10, "Q2_K", 256, 84, 2, {80, 82}},
      {11, "Q3_K", 256, 110, 1, {108, 0}}, {12, "Q4_K", 256, 144, 2, {0, 2}},
      {13, "Q5_K", 256, 176, 2, {0, 2}},   {14, "Q6_K", 256, 210, 1, {208, 0}},
      {20, "IQ4_NL", 32, 18, 1, {0, 0}},   {23, "IQ4_XS", 256, 136, 1, {0, 0}},
  };
  return v;
}

inline const GgmlBlockLayout* ggml_block_layout(uint32_t type) {
  for (const GgmlBlockLayout& l : ggml_block_layouts())
    if (l.type == type) return &l;
  return nullptr;
}

// `n_blocks` random blocks of layout `l` whose f16 fields are finite, of magnitude up to
// `scale` (the quants and packed sub-scales are random bytes, all valid).
inline std::string random_ggml_blocks(const GgmlBlockLayout& l, uint64_t n_blocks, uint32_t seed,
                                      float scale = 0.01f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.0f, 1.0f);
  std::string s(static_cast<size_t>(n_blocks * l.bytes), '\0');
  for (char& c : s) c = static_cast<char>(rng() & 0xff);
  for (uint64_t b = 0; b < n_blocks; ++b) {
    for (int k = 0; k < l.n_scales; ++k) {
      const uint16_t h = ringlm::internal::f32_to_fp16(scale * u(rng));
      memcpy(&s[static_cast<size_t>(b * l.bytes + l.scale_at[k])], &h, 2);
    }
  }
  return s;
}

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_GGML_BLOCKS_H_
