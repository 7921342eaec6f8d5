// The GGML dequantizers (convert/ggml_quants.h) and exact repacks (convert/ggml_repack.h) on
// hostile blocks: any bytes as quants and scales (NaN / infinite / subnormal f16 scales,
// saturated sub-scales), truncated data, rows that are not a multiple of the block.
//
// Input: [type selector][rows][cols factor][flags][block bytes...]
//  - type: F32, F16, BF16 or one of the 12 block types (tests/ggml_blocks.h);
//  - direct: every whole block present is dequantized; a block's values are all finite exactly
//    when its f16 fields (d, m / dmin at the offsets ggml-common.h gives) are (F32 / F16 / BF16:
//    element by element, from the bits);
//  - every exact repack (Q8_0 / IQ4_NL -> q8, Q4_0 -> q4, Q5_0 -> q5, Q4_1 -> q4_1, Q5_1 -> q5_1,
//    K-quants -> q4k / q5k / q6k) dequantized by the runtime's own decoders equals the dequantizer
//    bit for bit (NaN for NaN);
//  - as a one-tensor GGUF (rows x cols, the bytes as its data, flags bit 0: one column more):
//    read_gguf_tensors refuses a row off the block size and data running past the end of the
//    file with a message, and otherwise loads exactly the direct values.
#include <math.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "convert/ggml_quants.h"
#include "convert/ggml_repack.h"
#include "convert/readers.h"
#include "fuzz_common.h"
#include "ggml_blocks.h"
#include "kernels/scalar.h"
#include "model_writers.h"
#include "quant.h"

using namespace ringlm_fuzz;
namespace conv = ringlm::internal::conv;

namespace {

bool same_value(float a, float b) {
  return (a != a && b != b) || memcmp(&a, &b, 4) == 0;
}

bool f16_finite(const uint8_t* p) {
  uint16_t h;
  memcpy(&h, p, 2);
  return (h & 0x7c00u) != 0x7c00u;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 4) return 0;
  const auto& layouts = ringlm_test::ggml_block_layouts();
  const uint32_t n_types = 3 + static_cast<uint32_t>(layouts.size());
  const uint32_t sel = data[0] % n_types;
  const ringlm_test::GgmlBlockLayout* l = sel >= 3 ? &layouts[sel - 3] : nullptr;
  const uint32_t type = sel == 0 ? 0u : sel == 1 ? 1u : sel == 2 ? 30u : l->type;
  const uint32_t bv = l ? l->values : 1, bb = l ? l->bytes : (type == 0 ? 4 : 2);
  const uint64_t rows = 1 + data[1] % 4;
  const uint64_t cols = static_cast<uint64_t>(bv) * (1 + data[2] % 4) + (data[3] & 1);
  const uint8_t* body = data + 4;
  const size_t body_size = size - 4;

  // The converter's table agrees with the block layout written from ggml-common.h.
  uint32_t gv = 0, gb = 0;
  FUZZ_CHECK(conv::ggml_block_geometry(type, &gv, &gb) && gv == bv && gb == bb,
             "block geometry of %s", conv::ggml_type_name(type).c_str());
  FUZZ_CHECK(conv::ggml_type_readable(type), "%s not readable", conv::ggml_type_name(type).c_str());

  // Direct: the whole blocks present (at most 64).
  const size_t n_blocks = std::min<size_t>(body_size / bb, 64);
  std::vector<float> v(n_blocks * bv);
  FUZZ_CHECK(conv::ggml_dequantize(type, body, v.size(), v.data()), "dequantize refused");
  for (size_t b = 0; b < n_blocks; ++b) {
    const uint8_t* blk = body + b * bb;
    if (!l) {
      bool finite;
      if (type == 0) {
        float f;
        memcpy(&f, blk, 4);
        finite = std::isfinite(f);
      } else if (type == 1) {
        finite = f16_finite(blk);
      } else {
        finite = (blk[1] & 0x7f) != 0x7f || (blk[0] & 0x80) == 0;  // bf16 exponent not all ones
      }
      FUZZ_CHECK(std::isfinite(v[b]) == finite, "%s element %zu: %g", conv::ggml_type_name(type).c_str(),
                 b, static_cast<double>(v[b]));
      continue;
    }
    bool scales_finite = true;
    for (int k = 0; k < l->n_scales; ++k) scales_finite &= f16_finite(blk + l->scale_at[k]);
    for (uint32_t j = 0; j < bv; ++j) {
      FUZZ_CHECK(std::isfinite(v[b * bv + j]) == scales_finite,
                 "%s block %zu value %u = %g with %s scales", l->name, b, j,
                 static_cast<double>(v[b * bv + j]), scales_finite ? "finite" : "non-finite");
    }
  }

  // Repacks: same values through the runtime's q8 / q4 / q5 / q4_1 / q5_1 / q4k / q5k / q6k
  // decoders.
  ringlm::internal::fb::DType target;
  if (l && conv::ggml_exact_repack_target(type, &target) && cols % 32 == 0 &&
      rows * cols / bv <= n_blocks) {
    std::vector<uint8_t> packed;
    conv::ggml_repack(type, body, rows, cols, &packed);
    using ringlm::internal::WeightType;
    const WeightType wt = target == ringlm::internal::fb::DType::Q8    ? WeightType::Q8
                          : target == ringlm::internal::fb::DType::Q4  ? WeightType::Q4
                          : target == ringlm::internal::fb::DType::Q4K ? WeightType::Q4K
                          : target == ringlm::internal::fb::DType::Q5K ? WeightType::Q5K
                          : target == ringlm::internal::fb::DType::Q5  ? WeightType::Q5
                          : target == ringlm::internal::fb::DType::Q4_1 ? WeightType::Q4_1
                          : target == ringlm::internal::fb::DType::Q5_1 ? WeightType::Q5_1
                                                                       : WeightType::Q6K;
    const uint16_t* scales = reinterpret_cast<const uint16_t*>(
        packed.data() + ringlm::internal::quant_scales_offset(wt, rows, cols));
    const uint64_t supers = ringlm::internal::q4k_supers(cols);
    std::vector<float> row(cols);
    for (uint64_t r = 0; r < rows; ++r) {
      if (wt == WeightType::Q8)
        ringlm::internal::dequantize_row_q8(reinterpret_cast<const int8_t*>(packed.data()) + r * cols,
                                            scales + r * (cols / 32), cols, row.data());
      else if (wt == WeightType::Q4)
        ringlm::internal::dequantize_row_q4(packed.data() + r * cols / 2, scales + r * (cols / 32),
                                            cols, row.data());
      else if (wt == WeightType::Q6K)
        ringlm::internal::dequantize_row_q6k(
            packed.data() + r * cols / 2,
            packed.data() + ringlm::internal::q6k_high_offset(rows, cols) + r * cols / 4,
            scales + r * supers,
            reinterpret_cast<const int8_t*>(packed.data() + ringlm::internal::q6k_subs_offset(rows, cols)) +
                r * supers * 16,
            cols, row.data());
      else if (wt == WeightType::Q5)
        ringlm::internal::dequantize_row_q5(
            packed.data() + r * cols / 2,
            packed.data() + ringlm::internal::q5k_high_offset(rows, cols) + r * cols / 8,
            scales + r * (cols / 32), cols, row.data());
      else if (wt == WeightType::Q4_1)
        ringlm::internal::dequantize_row_q4_1(packed.data() + r * cols / 2,
                                              scales + r * (cols / 32) * 2, cols, row.data());
      else if (wt == WeightType::Q5_1)
        ringlm::internal::dequantize_row_q5_1(
            packed.data() + r * cols / 2,
            packed.data() + ringlm::internal::q5k_high_offset(rows, cols) + r * cols / 8,
            scales + r * (cols / 32) * 2, cols, row.data());
      else if (wt == WeightType::Q5K)
        ringlm::internal::dequantize_row_q5k(
            packed.data() + r * cols / 2,
            packed.data() + ringlm::internal::q5k_high_offset(rows, cols) + r * cols / 8,
            scales + r * supers * 2,
            packed.data() + ringlm::internal::q5k_subs_offset(rows, cols) + r * supers * 16, cols,
            row.data());
      else
        ringlm::internal::dequantize_row_q4k(
            packed.data() + r * cols / 2, scales + r * supers * 2,
            packed.data() + ringlm::internal::q4k_subs_offset(rows, cols) + r * supers * 16, cols,
            row.data());
      for (uint64_t c = 0; c < cols; ++c)
        FUZZ_CHECK(same_value(row[c], v[r * cols + c]), "%s repack differs at row %llu col %llu",
                   l->name, static_cast<unsigned long long>(r), static_cast<unsigned long long>(c));
    }
  }

  // As a GGUF tensor.
  ringlm_test::GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("x", {cols, rows}, type, std::string(reinterpret_cast<const char*>(body), body_size));
  const std::string file = w.finish();
  const std::string path = scratch_dir() + "/q.gguf";
  FUZZ_CHECK(write_file(path, file), "write");
  std::vector<conv::GgufTensor> ts;
  std::string err;
  const bool ok = conv::read_gguf_tensors(path, &ts, &err);
  const uint64_t need = rows * (cols / bv) * bb;
  const uint64_t stored = (body_size + 31) / 32 * 32;  // the writer pads the data to 32
  if (cols % bv != 0) {
    FUZZ_CHECK(!ok && err.find("not a multiple of the") != std::string::npos,
               "a row off the block size: %s", err.c_str());
    return 0;
  }
  if (need > stored) {
    FUZZ_CHECK(!ok && err.find("lies outside the file (truncated?)") != std::string::npos,
               "truncated data: %s", err.c_str());
    return 0;
  }
  FUZZ_CHECK(ok && ts.size() == 1, "read_gguf_tensors: %s", err.c_str());
  std::vector<float> got;
  FUZZ_CHECK(ts[0].load_f32(&got, &err), "load: %s", err.c_str());
  FUZZ_CHECK(got.size() == rows * cols, "loaded %zu values", got.size());
  std::vector<uint8_t> padded(body, body + body_size);
  padded.resize(static_cast<size_t>(need), 0);
  std::vector<float> want(rows * cols);
  conv::ggml_dequantize(type, padded.data(), want.size(), want.data());
  for (size_t i = 0; i < want.size(); ++i)
    FUZZ_CHECK(same_value(got[i], want[i]), "GGUF load differs at %zu", i);
  return 0;
}
