// Weight encodings of the model file (see schema/model.fbs "TENSOR DATA ENCODINGS") and the
// reference quantizers. Shared by the runtime (verification, dequantizing an embedding row,
// quantizing activations) and the converter, so both sides agree on every byte.
#ifndef RINGLM_RUNTIME_QUANT_H_
#define RINGLM_RUNTIME_QUANT_H_

#include <stddef.h>
#include <stdint.h>

#include "kernels/kernels.h"  // kQuantGroup, WeightType

namespace ringlm::internal {

constexpr uint64_t kTensorAlignment = 64;

inline uint64_t align_up(uint64_t x, uint64_t a) { return (x + (a - 1)) & ~(a - 1); }
inline uint64_t padded_cols(uint64_t cols) { return align_up(cols, kQuantGroup); }

// Byte offset of the f16 scales plane inside a Q8/Q4/Q5 tensor's data (Q4K/Q5K: its (d, dmin)
// plane; Q4_1/Q5_1: its (d, m) plane; Q6K: its d plane).
uint64_t quant_scales_offset(WeightType t, uint64_t rows, uint64_t cols);

// Q4K: super-blocks per row, and the byte offset of the sc/m plane inside the tensor's data.
inline uint64_t q4k_supers(uint64_t cols) {
  return (padded_cols(cols) / kQuantGroup + kQ4kSuperGroups - 1) / kQ4kSuperGroups;
}
uint64_t q4k_subs_offset(uint64_t rows, uint64_t cols);

// Q6K (schema/model.fbs): super-blocks as Q4K's; byte offsets of the high-bits plane and the sc
// plane inside the tensor's data (its d plane is at quant_scales_offset).
inline uint64_t q6k_supers(uint64_t cols) { return q4k_supers(cols); }
uint64_t q6k_high_offset(uint64_t rows, uint64_t cols);
uint64_t q6k_subs_offset(uint64_t rows, uint64_t cols);

// Q5K (schema/model.fbs): super-blocks as Q4K's; the fifth-bit plane follows the nibbles, then
// the (d, dmin) plane (quant_scales_offset) and the sc/m plane (q5k_subs_offset). Q5's and Q5_1's
// fifth-bit planes are at the same offset, then their f16 scales / (d, m) pairs
// (quant_scales_offset).
inline uint64_t q5k_high_offset(uint64_t rows, uint64_t cols) {
  return align_up(rows * padded_cols(cols) / 2, kTensorAlignment);
}
uint64_t q5k_subs_offset(uint64_t rows, uint64_t cols);

// Exact bytes a tensor of this type and shape occupies, or 0 if it would overflow 2^62.
// Callers check rows, cols < 2^32 first.
uint64_t tensor_data_bytes(WeightType t, uint64_t rows, uint64_t cols);

// Quantize one row of `cols` floats; writes padded_cols(cols) values (zeros past cols) and
// padded_cols(cols)/32 scales. Scale per group: q8 = amax / 127; q4 = (signed value with the
// largest magnitude) / -8 so that value maps exactly to -8. Values are rounded with the
// f16-rounded scale so dequantization matches what the kernels compute.
void quantize_row_q8(const float* x, size_t cols, int8_t* qs, uint16_t* scales);
void quantize_row_q4(const float* x, size_t cols, uint8_t* qs, uint16_t* scales);

// Q5 (schema/model.fbs): as Q4 with 5 bits, the largest magnitude mapped to -16 (GGUF Q5_0's
// rule): q + 16 in [0, 31], its low nibble in qs (unsigned, Q4K's order) and its fifth bit in
// padded_cols(cols) / 8 bytes of `high` (Q5K's layout).
void quantize_row_q5(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* scales);

// Q4_1 / Q5_1 (schema/model.fbs): GGUF Q4_1's / Q5_1's rule (llama.cpp's quantize_row_q4_1_ref /
// q5_1_ref): per group m = min, d = (max - min) / 15 (/ 31), each stored as f16 in the
// padded_cols(cols) / 32 (d, m) pairs of `dm`; every value then takes the level q whose stored
// value d * q + m (with d and m as stored) is nearest. q in [0, 15] / [0, 31]: its low nibble in
// padded_cols(cols) / 2 bytes of qs (Q4K's order), Q5_1's fifth bit in padded_cols(cols) / 8
// bytes of `high` (Q5K's layout). Padding past cols is left out of the min and max and stores
// q = 0 (the activations there are 0). Non-finite values quantize as q = 0.
void quantize_row_q4_1(const float* x, size_t cols, uint8_t* qs, uint16_t* dm);
void quantize_row_q5_1(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm);

// Q4K (schema/model.fbs): one row into padded_cols(cols) / 2 bytes of unsigned nibbles,
// q4k_supers(cols) (d, dmin) pairs and q4k_supers(cols) * 16 sc/m bytes. Per group a scale and
// a min (min <= 0) are fitted by a weighted least-squares search over rounding grids (weights
// favour the larger values, which matter most to a dot product), then each super-block's are
// quantized to 6 bits of an f16 step (the nearest levels or a neighbour, whichever stores the
// group closest), and the values re-rounded with the scales as stored.
// Non-finite values quantize as 0.
void quantize_row_q4k(const float* x, size_t cols, uint8_t* qs, uint16_t* dm, uint8_t* subs);

// Q5K (schema/model.fbs): as Q4K with q in [0, 31], the fifth bits into padded_cols(cols) / 8
// bytes of `high` (the grids of llama.cpp's Q5_K search).
void quantize_row_q5k(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm,
                      uint8_t* subs);

// Q6K (schema/model.fbs): one row into padded_cols(cols) / 2 bytes of low nibbles,
// padded_cols(cols) / 4 bytes of high bits, q6k_supers(cols) f16 d and q6k_supers(cols) * 16
// int8 sc. Per 16 values a signed scale is fitted by a least-squares search over rounding grids
// (as Q4K's), each super-block's scales are quantized to int8 steps of an f16 d (the nearest
// level or a neighbour, whichever stores the sub-block closest), and the values re-rounded with
// the scales as stored. Non-finite values quantize as 0.
void quantize_row_q6k(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* d,
                      int8_t* sc);

// Dequantize `cols` values of one row (the padding is not written).
void dequantize_row_q8(const int8_t* qs, const uint16_t* scales, size_t cols, float* out);
void dequantize_row_q4(const uint8_t* qs, const uint16_t* scales, size_t cols, float* out);
void dequantize_row_q4k(const uint8_t* qs, const uint16_t* dm, const uint8_t* subs, size_t cols,
                        float* out);
void dequantize_row_q5k(const uint8_t* qs, const uint8_t* high, const uint16_t* dm,
                        const uint8_t* subs, size_t cols, float* out);
void dequantize_row_q5(const uint8_t* qs, const uint8_t* high, const uint16_t* scales, size_t cols,
                       float* out);
// Q4_1 / Q5_1: d * q + m, the product rounded to float first (GGUF's dequantization, bit for bit).
void dequantize_row_q4_1(const uint8_t* qs, const uint16_t* dm, size_t cols, float* out);
void dequantize_row_q5_1(const uint8_t* qs, const uint8_t* high, const uint16_t* dm, size_t cols,
                         float* out);
void dequantize_row_q6k(const uint8_t* qs, const uint8_t* high, const uint16_t* d,
                        const int8_t* sc, size_t cols, float* out);

// Q5K's (and Q5's, Q5_1's) q in [0, 31] of value j (< 32) of a group: its nibble and its fifth
// bit (bit j / 4 of byte j % 4 of the group's 4 high bytes).
inline int q5k_level(const uint8_t* group_qs, const uint8_t* group_high, unsigned j) {
  const int low = j < 16 ? (group_qs[j] & 0x0f) : (group_qs[j - 16] >> 4);
  return low | (((group_high[j % 4] >> (j / 4)) & 1) << 4);
}

// Q6K's q in [0, 63] of value j (< 32) of a group: its low nibble and its 2 high bits.
inline int q6k_level(const uint8_t* group_qs, const uint8_t* group_high, unsigned j) {
  const int low = j < 16 ? (group_qs[j] & 0x0f) : (group_qs[j - 16] >> 4);
  return low | (((group_high[j % 8] >> (2 * (j / 8))) & 3) << 4);
}

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_QUANT_H_
