// GGML tensor types as GGUF files store them: names, block geometry, byte sizes, and exact
// dequantization to float32 of the types the converter reads.
//
// Written from the block layouts (ggml-common.h's block_* structs and the GGUF spec); the result
// of every dequantizer equals ggml's own dequantize_row_* bit for bit (checked against reference
// dumps in tests/test_gguf_types.cc). Bit-exactness needs each product and sum rounded to float32
// in ggml's order: this file is compiled with -ffp-contract=off so no compiler fuses
// `d * q - m` into an FMA (aarch64 gcc would by default).
#ifndef RINGLM_CONVERT_GGML_QUANTS_H_
#define RINGLM_CONVERT_GGML_QUANTS_H_

#include <stdint.h>

#include <string>

namespace ringlm::internal {
namespace conv {

// ggml_type numbers (the file format's; numbers 4, 5 and 31..33 are retired types).
enum GgmlType : uint32_t {
  kGgmlF32 = 0, kGgmlF16 = 1, kGgmlQ4_0 = 2, kGgmlQ4_1 = 3, kGgmlQ5_0 = 6, kGgmlQ5_1 = 7,
  kGgmlQ8_0 = 8, kGgmlQ8_1 = 9, kGgmlQ2_K = 10, kGgmlQ3_K = 11, kGgmlQ4_K = 12, kGgmlQ5_K = 13,
  kGgmlQ6_K = 14, kGgmlQ8_K = 15, kGgmlIQ2_XXS = 16, kGgmlIQ2_XS = 17, kGgmlIQ3_XXS = 18,
  kGgmlIQ1_S = 19, kGgmlIQ4_NL = 20, kGgmlIQ3_S = 21, kGgmlIQ2_S = 22, kGgmlIQ4_XS = 23,
  kGgmlI8 = 24, kGgmlI16 = 25, kGgmlI32 = 26, kGgmlI64 = 27, kGgmlF64 = 28, kGgmlIQ1_M = 29,
  kGgmlBF16 = 30, kGgmlTQ1_0 = 34, kGgmlTQ2_0 = 35, kGgmlMXFP4 = 39
};

// IQ4_NL / IQ4_XS: the 16 non-uniform int8 levels a nibble selects (ggml's kvalues_iq4nl).
extern const int8_t kIq4Levels[16];

// "Q4_K", or "type N" for a number ggml never defined.
std::string ggml_type_name(uint32_t type);

// Values per block and bytes per block; false when the size of `type` is not known (a retired
// or future type number). Types of known size that the converter does not read (IQ2_*, IQ3_*,
// IQ1_*, TQ*, Q8_K, integer types, ...) still have a size, so a file holding them is bounds-
// checked and refused only if such a tensor is used.
bool ggml_block_geometry(uint32_t type, uint32_t* block_values, uint32_t* block_bytes);

// True for the types ggml_dequantize reads: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K,
// Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS.
bool ggml_type_readable(uint32_t type);

// The readable types as a list for messages: "F32, F16, BF16, Q4_0, ...".
const char* ggml_readable_types();

// Bytes of a tensor of `type` with rows of `cols` values and `n` values in all (n a multiple of
// cols). Returns false and sets *why when the size is unknown, cols is not a multiple of the
// block size, or the size overflows 2^62.
bool ggml_tensor_bytes(uint32_t type, uint64_t cols, uint64_t n, uint64_t* bytes,
                       std::string* why);

// Dequantizes `n` values (a whole number of blocks) from `src` (exactly the bytes
// ggml_tensor_bytes gives for them) into `dst`. Returns false for a type that is not readable
// (dst untouched). Scales that are NaN or infinite give NaN / infinite values, as in ggml: the
// converter then refuses the tensor (or stores them under --allow-non-finite).
bool ggml_dequantize(uint32_t type, const uint8_t* src, uint64_t n, float* dst);

// The 6-bit scale and min of sub-block j (0..7) of a Q4_K / Q5_K super-block, from its 12
// scale bytes.
void ggml_scale_min_k4(int j, const uint8_t* q, int* sc, int* m);

// A Q3_K or Q6_K super-block (256 values) as its f16 d, 16 int8 scales and 256 levels q in
// [-32, 31]: value i is (d * sc[i / 16]) * q[i], each product rounded to float32 (ggml's
// dequantization; Q3_K's q lie in [-4, 3], its scales in [-32, 31]). `type` is one of the two.
void ggml_symmetric_k_levels(uint32_t type, const uint8_t* block, uint16_t* d, int8_t* sc,
                             int8_t* q);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_CONVERT_GGML_QUANTS_H_
