// Exact repacking of GGUF blocks into ringlm's own weight encodings (schema/model.fbs): the
// blocks of some GGML types are already a symmetric int8 / int4 grid with one f16 scale per 32
// values along the row, which is what q8 / q4 store; those import with the same values and no
// second rounding.
//
//   Q8_0   -> q8: the int8 quants and the f16 scale as they are.
//   Q4_0   -> q4: nibble u (value u - 8) becomes the two's-complement nibble u - 8.
//   Q5_0   -> q5: the nibbles as they are, the fifth bits regrouped into their plane (or, for a
//             q8 target, q8: the 5-bit quant q, value q - 16, becomes the int8 q - 16).
//   Q4_1   -> q4_1: d, m and the nibbles as they are.
//   Q5_1   -> q5_1: d, m and the nibbles as they are, the fifth bits regrouped into their plane.
//   IQ4_NL -> q8: the nibble's level (an int8 in [-127, 113]) becomes the int8 quant.
//   Q4_K   -> q4k: d, dmin, the 6-bit scales and mins unpacked to bytes, the nibbles regrouped
//             (q4k is Q4_K's arithmetic in a layout for our kernels: schema/model.fbs).
//   Q5_K   -> q5k: as Q4_K, the fifth bits regrouped into their own plane.
//   Q6_K   -> q6k: d and the int8 scales as they are, the 6-bit levels split into planes.
//   Q3_K   -> q6k: the same, its 3-bit levels and 6-bit scales being a sub-range of Q6_K's.
//
// In each case ggml's value, float(int) * d (IQ4_NL: d * float(level); Q4_1 / Q5_1: float(q) * d
// + m, two roundings), is the same float32 arithmetic the runtime applies to the stored integers
// and f16 scales, so the repacked tensor holds bit-identical weights. Other types (Q2_K, IQ4_XS)
// have per-16 or 6-bit scales that no ringlm encoding holds without re-rounding.
#ifndef RINGLM_CONVERT_GGML_REPACK_H_
#define RINGLM_CONVERT_GGML_REPACK_H_

#include <stdint.h>

#include <vector>

#include "model_generated.h"

namespace ringlm::internal {
namespace conv {

// The ringlm encoding a tensor of ggml `type` repacks into exactly (q8, q4, q5, q4_1, q5_1, q4k,
// q5k, q6k); false if none.
bool ggml_exact_repack_target(uint32_t type, fb::DType* out);

// A second encoding `type` repacks into exactly, for a --quant target other than the first
// (Q5_0 -> q8); false if none.
bool ggml_alt_repack_target(uint32_t type, fb::DType* out);

// Repacks the blocks of `type` at `src` (cols a multiple of the type's block: 32, K-quants 256;
// `type` one that ggml_exact_repack_target accepts) into the tensor data of a rows x cols matrix.
void ggml_repack(uint32_t type, const uint8_t* src, uint64_t rows, uint64_t cols,
                 std::vector<uint8_t>* out);
// The same into `target`: ggml_exact_repack_target's or ggml_alt_repack_target's.
void ggml_repack_to(uint32_t type, fb::DType target, const uint8_t* src, uint64_t rows,
                    uint64_t cols, std::vector<uint8_t>* out);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_CONVERT_GGML_REPACK_H_
