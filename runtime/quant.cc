#include "quant.h"

#include <math.h>
#include <string.h>

#include "kernels/scalar.h"

namespace ringlm::internal {

uint64_t quant_scales_offset(WeightType t, uint64_t rows, uint64_t cols) {
  uint64_t cp = padded_cols(cols);
  uint64_t qs = t == WeightType::Q8 ? rows * cp : rows * cp / 2;
  return align_up(qs, kTensorAlignment);
}

uint64_t tensor_data_bytes(WeightType t, uint64_t rows, uint64_t cols) {
  if (rows >= (1ull << 32) || cols >= (1ull << 32)) return 0;
  const uint64_t n = rows * cols;  // < 2^64
  if (n >= (1ull << 60)) return 0;
  switch (t) {
    case WeightType::F32:
      return n * 4;
    case WeightType::F16:
      return n * 2;
    case WeightType::Q8:
    case WeightType::Q4:
      return quant_scales_offset(t, rows, cols) + rows * (padded_cols(cols) / kQuantGroup) * 2;
  }
  return 0;
}

static inline float group_value(const float* x, size_t cols, size_t i) {
  return i < cols ? x[i] : 0.0f;
}

void quantize_row_q8(const float* x, size_t cols, int8_t* qs, uint16_t* scales) {
  const size_t cp = padded_cols(cols);
  for (size_t g = 0; g < cp / kQuantGroup; ++g) {
    float amax = 0.0f;
    for (size_t j = 0; j < kQuantGroup; ++j) {
      float v = fabsf(group_value(x, cols, g * kQuantGroup + j));
      if (v > amax) amax = v;
    }
    const uint16_t s16 = f32_to_fp16(amax / 127.0f);
    const float s = fp16_to_f32(s16);
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    scales[g] = s16;
    for (size_t j = 0; j < kQuantGroup; ++j) {
      float q = roundf(group_value(x, cols, g * kQuantGroup + j) * inv);
      if (q != q) q = 0.0f;  // NaN (a NaN or infinite weight): casting it to int8 is UB
      if (q > 127.0f) q = 127.0f;
      if (q < -127.0f) q = -127.0f;
      qs[g * kQuantGroup + j] = static_cast<int8_t>(q);
    }
  }
}

void quantize_row_q4(const float* x, size_t cols, uint8_t* qs, uint16_t* scales) {
  const size_t cp = padded_cols(cols);
  for (size_t g = 0; g < cp / kQuantGroup; ++g) {
    float amax = 0.0f, m = 0.0f;
    for (size_t j = 0; j < kQuantGroup; ++j) {
      float v = group_value(x, cols, g * kQuantGroup + j);
      if (fabsf(v) > amax) {
        amax = fabsf(v);
        m = v;
      }
    }
    const uint16_t s16 = f32_to_fp16(m / -8.0f);
    const float s = fp16_to_f32(s16);
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    scales[g] = s16;
    uint8_t* out = qs + g * (kQuantGroup / 2);
    for (size_t j = 0; j < kQuantGroup / 2; ++j) {
      int q[2];
      for (int h = 0; h < 2; ++h) {
        float v = roundf(group_value(x, cols, g * kQuantGroup + j + 16 * h) * inv);
        if (v != v) v = 0.0f;  // NaN (a NaN or infinite weight): casting it to int is UB
        if (v > 7.0f) v = 7.0f;
        if (v < -8.0f) v = -8.0f;
        q[h] = static_cast<int>(v);
      }
      out[j] = static_cast<uint8_t>((q[0] & 0x0f) | ((q[1] & 0x0f) << 4));
    }
  }
}

void dequantize_row_q8(const int8_t* qs, const uint16_t* scales, size_t cols, float* out) {
  for (size_t i = 0; i < cols; ++i) {
    out[i] = static_cast<float>(qs[i]) * fp16_to_f32(scales[i / kQuantGroup]);
  }
}

void dequantize_row_q4(const uint8_t* qs, const uint16_t* scales, size_t cols, float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup;
    out[i] = static_cast<float>(q4_get(qs + g * 16, static_cast<unsigned>(i % kQuantGroup))) *
             fp16_to_f32(scales[g]);
  }
}

}  // namespace ringlm::internal
