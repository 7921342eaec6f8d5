// The values a model tensor holds, as floats: f32 copied, f16 / q8 / q4 / q5 / q4_1 / q5_1 / q4k / q5k / q6k decoded with
// the runtime's own decoders (tests compare converted weights with their source through it).
#ifndef RINGLM_TESTS_TENSOR_VALUES_H_
#define RINGLM_TESTS_TENSOR_VALUES_H_

#include <stdint.h>
#include <string.h>

#include <vector>

#include "kernels/scalar.h"
#include "model.h"
#include "quant.h"

namespace ringlm_test {

inline std::vector<float> tensor_values(const ringlm::internal::ModelImpl& m,
                                        const ringlm::internal::fb::Tensor* t) {
  using namespace ringlm::internal;
  const WeightView v = model_weight(m, t);
  std::vector<float> out(static_cast<size_t>(v.rows) * v.cols);
  for (uint32_t r = 0; r < v.rows; ++r) {
    float* o = out.data() + static_cast<size_t>(r) * v.cols;
    switch (v.type) {
      case WeightType::F32:
        memcpy(o, static_cast<const float*>(v.data) + static_cast<size_t>(r) * v.cols, v.cols * 4);
        break;
      case WeightType::F16:
        for (uint32_t c = 0; c < v.cols; ++c) {
          uint16_t h;
          memcpy(&h, static_cast<const uint8_t*>(v.data) + (static_cast<size_t>(r) * v.cols + c) * 2, 2);
          o[c] = fp16_to_f32(h);
        }
        break;
      case WeightType::Q8:
        dequantize_row_q8(static_cast<const int8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride,
                          v.scales + static_cast<size_t>(r) * (v.row_stride / 32), v.cols, o);
        break;
      case WeightType::Q4:
        dequantize_row_q4(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                          v.scales + static_cast<size_t>(r) * (v.row_stride / 32), v.cols, o);
        break;
      case WeightType::Q4K: {
        const size_t supers = q4k_supers(v.cols);
        dequantize_row_q4k(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                           v.scales + static_cast<size_t>(r) * supers * 2,
                           v.subs + static_cast<size_t>(r) * supers * 16, v.cols, o);
        break;
      }
      case WeightType::Q5:
        dequantize_row_q5(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                          v.high + static_cast<size_t>(r) * v.row_stride / 8,
                          v.scales + static_cast<size_t>(r) * (v.row_stride / 32), v.cols, o);
        break;
      case WeightType::Q4_1:
        dequantize_row_q4_1(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                            v.scales + static_cast<size_t>(r) * (v.row_stride / 32) * 2, v.cols, o);
        break;
      case WeightType::Q5_1:
        dequantize_row_q5_1(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                            v.high + static_cast<size_t>(r) * v.row_stride / 8,
                            v.scales + static_cast<size_t>(r) * (v.row_stride / 32) * 2, v.cols, o);
        break;
      case WeightType::Q5K: {
        const size_t supers = q4k_supers(v.cols);
        dequantize_row_q5k(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                           v.high + static_cast<size_t>(r) * v.row_stride / 8,
                           v.scales + static_cast<size_t>(r) * supers * 2,
                           v.subs + static_cast<size_t>(r) * supers * 16, v.cols, o);
        break;
      }
      case WeightType::Q6K: {
        const size_t supers = q6k_supers(v.cols);
        dequantize_row_q6k(static_cast<const uint8_t*>(v.data) + static_cast<size_t>(r) * v.row_stride / 2,
                           v.high + static_cast<size_t>(r) * v.row_stride / 4,
                           v.scales + static_cast<size_t>(r) * supers,
                           reinterpret_cast<const int8_t*>(v.subs) + static_cast<size_t>(r) * supers * 16,
                           v.cols, o);
        break;
      }
    }
  }
  return out;
}

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_TENSOR_VALUES_H_
