#include "quant.h"

#include <float.h>
#include <math.h>
#include <string.h>

#include "kernels/scalar.h"

namespace ringlm::internal {
namespace {

// roundf (halves away from zero) without its libm call: x86-64's baseline has no SSE4.1 round
// instruction, and the K-quant fits round ~50 times per weight (a 135M-weight model took minutes
// to convert). Exact for |x| < 2^23 (x - trunc(x) is exact there); larger floats are integers
// already, and inf / NaN come back as they are.
inline float round_away(float x) {
  if (!(fabsf(x) < 8388608.0f)) return x;
  const float t = static_cast<float>(static_cast<int32_t>(x));
  const float f = x - t;
  return f >= 0.5f ? t + 1.0f : (f <= -0.5f ? t - 1.0f : t);
}

}  // namespace

uint64_t quant_scales_offset(WeightType t, uint64_t rows, uint64_t cols) {
  uint64_t cp = padded_cols(cols);
  if (t == WeightType::Q6K) return q6k_high_offset(rows, cols) + align_up(rows * cp / 4, kTensorAlignment);
  if (t == WeightType::Q5K || t == WeightType::Q5 || t == WeightType::Q5_1) {
    return q5k_high_offset(rows, cols) + align_up(rows * cp / 8, kTensorAlignment);
  }
  uint64_t qs = t == WeightType::Q8 ? rows * cp : rows * cp / 2;
  return align_up(qs, kTensorAlignment);
}

uint64_t q4k_subs_offset(uint64_t rows, uint64_t cols) {
  return quant_scales_offset(WeightType::Q4K, rows, cols) +
         align_up(rows * q4k_supers(cols) * 4, kTensorAlignment);
}

uint64_t q5k_subs_offset(uint64_t rows, uint64_t cols) {
  return quant_scales_offset(WeightType::Q5K, rows, cols) +
         align_up(rows * q4k_supers(cols) * 4, kTensorAlignment);
}

uint64_t q6k_high_offset(uint64_t rows, uint64_t cols) {
  return align_up(rows * padded_cols(cols) / 2, kTensorAlignment);
}

uint64_t q6k_subs_offset(uint64_t rows, uint64_t cols) {
  return quant_scales_offset(WeightType::Q6K, rows, cols) +
         align_up(rows * q6k_supers(cols) * 2, kTensorAlignment);
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
    case WeightType::Q5:
      return quant_scales_offset(t, rows, cols) + rows * (padded_cols(cols) / kQuantGroup) * 2;
    case WeightType::Q4_1:
    case WeightType::Q5_1:  // a (d, m) pair of f16 per group
      return quant_scales_offset(t, rows, cols) + rows * (padded_cols(cols) / kQuantGroup) * 4;
    case WeightType::Q4K:
      return q4k_subs_offset(rows, cols) + rows * q4k_supers(cols) * 16;
    case WeightType::Q6K:
      return q6k_subs_offset(rows, cols) + rows * q6k_supers(cols) * kQ6kSubsPerSuper;
    case WeightType::Q5K:
      return q5k_subs_offset(rows, cols) + rows * q4k_supers(cols) * 16;
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
      float q = round_away(group_value(x, cols, g * kQuantGroup + j) * inv);
      if (q != q) q = 0.0f;  // NaN (a NaN or infinite weight): casting it to int8 is UB
      if (q > 127.0f) q = 127.0f;
      if (q < -127.0f) q = -127.0f;
      qs[g * kQuantGroup + j] = static_cast<int8_t>(q);
    }
  }
}

namespace {

// Q4 (kHalf 8: two's-complement nibbles of q in [-8, 7], high null) and Q5 (kHalf 16: q + 16 in
// [0, 31], its low nibble in qs and its fifth bit in `high`, 4 bytes a group): the signed value
// with the largest magnitude maps to -kHalf, as GGUF Q4_0 / Q5_0 do.
template <int kHalf>
void quantize_row_sym(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* scales) {
  constexpr float half = static_cast<float>(kHalf);
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
    const uint16_t s16 = f32_to_fp16(m / -half);
    const float s = fp16_to_f32(s16);
    const float inv = s != 0.0f ? 1.0f / s : 0.0f;
    scales[g] = s16;
    uint8_t* out = qs + g * (kQuantGroup / 2);
    uint8_t* h5 = kHalf == 16 ? high + g * (kQuantGroup / 8) : nullptr;
    if (kHalf == 16) memset(h5, 0, kQuantGroup / 8);
    for (size_t j = 0; j < kQuantGroup / 2; ++j) {
      int q[2];
      for (int h = 0; h < 2; ++h) {
        float v = round_away(group_value(x, cols, g * kQuantGroup + j + 16 * h) * inv);
        if (v != v) v = 0.0f;  // NaN (a NaN or infinite weight): casting it to int is UB
        if (v > half - 1.0f) v = half - 1.0f;
        if (v < -half) v = -half;
        q[h] = static_cast<int>(v) + (kHalf == 16 ? 16 : 0);  // Q5: unsigned
        if (kHalf == 16) {
          const size_t k = j + 16 * h;  // value index in the group
          h5[k % 4] = static_cast<uint8_t>(h5[k % 4] | (q[h] >> 4) << (k / 4));
        }
      }
      out[j] = static_cast<uint8_t>((q[0] & 0x0f) | ((q[1] & 0x0f) << 4));
    }
  }
}

}  // namespace

void quantize_row_q4(const float* x, size_t cols, uint8_t* qs, uint16_t* scales) {
  quantize_row_sym<8>(x, cols, qs, nullptr, scales);
}

void quantize_row_q5(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* scales) {
  quantize_row_sym<16>(x, cols, qs, high, scales);
}

namespace {

// Q4_1 (kBits 4, high null) and Q5_1 (kBits 5: the fifth bits in `high`, 4 bytes a group), as
// quant.h says. llama.cpp rounds (x - min) / d with d and min before their f16 rounding; here the
// level is chosen against the stored d and m (round((x - m) / d), or a neighbour when the stored
// value d * q + m of that is nearer x): never farther from x than llama.cpp's level.
template <int kBits>
void quantize_row_asym(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm) {
  constexpr int kTop = (1 << kBits) - 1;
  const size_t cp = padded_cols(cols);
  for (size_t g = 0; g < cp / kQuantGroup; ++g) {
    const size_t c0 = g * kQuantGroup;
    const size_t n = cols - c0 < kQuantGroup ? cols - c0 : kQuantGroup;  // values, not padding
    float lo = FLT_MAX, hi = -FLT_MAX;
    for (size_t j = 0; j < n; ++j) {
      const float v = x[c0 + j];  // NaN compares false: left out
      if (v < lo) lo = v;
      if (v > hi) hi = v;
    }
    if (hi < lo) lo = hi = 0.0f;  // every value NaN
    const uint16_t d16 = f32_to_fp16((hi - lo) / static_cast<float>(kTop));
    const uint16_t m16 = f32_to_fp16(lo);
    dm[2 * g] = d16;
    dm[2 * g + 1] = m16;
    const float d = fp16_to_f32(d16), m = fp16_to_f32(m16);
    // inf (a range beyond f16's; the converter refuses the stored scale) or 0: every q = 0.
    const float inv = d != 0.0f && fabsf(d) <= FLT_MAX ? 1.0f / d : 0.0f;
    uint8_t* out = qs + g * (kQuantGroup / 2);
    uint8_t* h5 = kBits == 5 ? high + g * (kQuantGroup / 8) : nullptr;
    memset(out, 0, kQuantGroup / 2);
    if (kBits == 5) memset(h5, 0, kQuantGroup / 8);
    for (size_t j = 0; j < n; ++j) {
      const float v = x[c0 + j];
      float l = round_away((v - m) * inv);
      if (!(l >= 0.0f)) l = 0.0f;  // below the min, or NaN: casting NaN to int is UB
      if (l > static_cast<float>(kTop)) l = static_cast<float>(kTop);
      int q = static_cast<int>(l);
      // The error of level c as dequantize_row_q4_1 / _q5_1 store it (NaN: never below `best`).
      auto err = [&](int c) {
        return fabs(static_cast<double>(static_cast<float>(c) * d + m) - v);
      };
      double best = err(q);
      for (int c = q - 1; c <= q + 1; c += 2) {
        if (c < 0 || c > kTop) continue;
        const double e = err(c);
        if (e < best) {
          best = e;
          q = c;
        }
      }
      out[j % 16] = static_cast<uint8_t>(out[j % 16] | (q & 15) << (j < 16 ? 0 : 4));
      if (kBits == 5) h5[j % 4] = static_cast<uint8_t>(h5[j % 4] | (q >> 4) << (j / 4));
    }
  }
}

}  // namespace

void quantize_row_q4_1(const float* x, size_t cols, uint8_t* qs, uint16_t* dm) {
  quantize_row_asym<4>(x, cols, qs, nullptr, dm);
}

void quantize_row_q5_1(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm) {
  quantize_row_asym<5>(x, cols, qs, high, dm);
}

namespace {

// A rounded level clamped to [0, top]; NaN (values near float's limit overflow the fit's sums:
// inf / inf) becomes 0, since casting NaN to an integer is UB.
inline float clamp_level(float l, float top) {
  return l > 0.0f ? (l < top ? l : top) : 0.0f;
}

// Fits x[i] ~= a * q[i] - b, q[i] in [0, top] (top = 15: Q4K, 31: Q5K), a >= 0, b >= 0 (the
// group's minimum clamped to <= 0), minimizing sum w[i] (x[i] - (a q[i] - b))^2 over the rounding
// grids q = round(is * (x - lo)) for is around top / (hi - lo): each grid's (a, b) is the weighted
// least-squares line through its points. The search (from llama.cpp's make_qkx2_quants: same
// grids and weights, our code) beats plain min/max rounding by ~10 % RMSE on Gaussian weights.
// Grids: is = (top + rmin + 0.1 step) / (hi - lo), step 0..steps (llama.cpp's Q4_K: rmin -1,
// 20 steps; Q5_K: -0.5, 15), and step -1 for plain min/max.
void fit_group_asym(const float* x, const float* w, uint32_t n, float top, float rmin, int steps,
                    float* a_out, float* b_out) {
  float lo = 0.0f, hi = -INFINITY, sw = 0.0f, swx = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    lo = fminf(lo, x[i]);
    hi = fmaxf(hi, x[i]);
    sw += w[i];
    swx += w[i] * x[i];
  }
  if (!(hi > lo)) {  // constant (or empty) group: all values equal lo <= 0
    *a_out = 0.0f;
    *b_out = -lo;
    return;
  }
  float best_a = (hi - lo) / top, best_b = -lo, best_err = INFINITY;
  for (int step = -1; step <= steps; ++step) {
    const float is = step < 0 ? top / (hi - lo) : (top + rmin + 0.1f * step) / (hi - lo);
    float sl = 0.0f, sl2 = 0.0f, sxl = 0.0f;
    for (uint32_t i = 0; i < n; ++i) {
      float l = round_away(is * (x[i] - lo));
      l = clamp_level(l, top);
      sl += w[i] * l;
      sl2 += w[i] * l * l;
      sxl += w[i] * l * x[i];
    }
    const float det = sw * sl2 - sl * sl;
    if (!(det > 0.0f)) continue;
    float a = (sw * sxl - swx * sl) / det;
    float c = (sl2 * swx - sl * sxl) / det;  // x ~= a l + c, c = -b
    if (c > 0.0f) {                           // b >= 0: refit a with c = 0
      c = 0.0f;
      a = sl2 > 0.0f ? sxl / sl2 : 0.0f;
    }
    if (!(a >= 0.0f)) continue;
    // The least-squares fit leaves sum w x^2 - (a sxl + c swx) for this grid's levels (c = 0:
    // sum w x^2 - a sxl): the smallest remainder wins, one pass per grid.
    const float err = -(a * sxl + c * swx);
    if (err < best_err) {
      best_err = err;
      best_a = a;
      best_b = -c;
    }
  }
  *a_out = best_a;
  *b_out = best_b;
}

// 6-bit steps of an f16 super-block scale: the f16 scale and the levels of `v` (n values >= 0).
uint16_t six_bit_levels(const float* v, uint32_t n, uint8_t* levels) {
  float vmax = 0.0f;
  for (uint32_t i = 0; i < n; ++i) vmax = fmaxf(vmax, v[i]);
  const uint16_t h = f32_to_fp16(vmax / 63.0f);
  const float step = fp16_to_f32(h);
  for (uint32_t i = 0; i < n; ++i) {
    float l = step > 0.0f ? round_away(v[i] / step) : 0.0f;
    levels[i] = static_cast<uint8_t>(clamp_level(l, 63.0f));
  }
  return h;
}

}  // namespace

namespace {

// Q4K (kTop 15, high null) and Q5K (kTop 31: the fifth bits into `high`, 4 bytes a group).
template <int kTop>
void quantize_row_asym_k(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm,
                         uint8_t* subs) {
  constexpr float top = static_cast<float>(kTop);
  const size_t groups = padded_cols(cols) / kQuantGroup;
  const size_t supers = q4k_supers(cols);
  memset(subs, 0, supers * 16);
  for (size_t s = 0; s < supers; ++s) {
    const size_t g0 = s * kQ4kSuperGroups;
    const uint32_t ng = static_cast<uint32_t>(groups - g0 < kQ4kSuperGroups ? groups - g0
                                                                             : kQ4kSuperGroups);
    float v[kQ4kSuperGroups][kQuantGroup], a[kQ4kSuperGroups], b[kQ4kSuperGroups];
    uint32_t len[kQ4kSuperGroups];
    for (uint32_t k = 0; k < ng; ++k) {
      const size_t c0 = (g0 + k) * kQuantGroup;
      len[k] = c0 >= cols ? 0 : static_cast<uint32_t>(cols - c0 < kQuantGroup ? cols - c0 : kQuantGroup);
      float ss = 0.0f, w[kQuantGroup];
      for (uint32_t j = 0; j < len[k]; ++j) {
        const float f = x[c0 + j];
        v[k][j] = f - f == 0.0f ? f : 0.0f;  // NaN / inf -> 0
        ss += v[k][j] * v[k][j];
      }
      const float av = len[k] ? sqrtf(ss / static_cast<float>(len[k])) : 0.0f;
      for (uint32_t j = 0; j < len[k]; ++j) w[j] = av + fabsf(v[k][j]);
      if (kTop == 15) {
        fit_group_asym(v[k], w, len[k], top, -1.0f, 20, &a[k], &b[k]);
      } else {
        fit_group_asym(v[k], w, len[k], top, -0.5f, 15, &a[k], &b[k]);
      }
    }
    uint8_t* sc = subs + 16 * s;
    dm[2 * s] = six_bit_levels(a, ng, sc);
    dm[2 * s + 1] = six_bit_levels(b, ng, sc + 8);
    const float d = fp16_to_f32(dm[2 * s]), dmin = fp16_to_f32(dm[2 * s + 1]);
    for (uint32_t k = 0; k < ng; ++k) {
      // The 6-bit levels rounded to nearest, and their neighbours: the pair whose values are
      // closest to the group's (squared error, as stored) wins. The rounding of the super-block
      // step moves each group's best level by up to one.
      uint8_t q[kQuantGroup] = {}, trial[kQuantGroup] = {};
      float best = INFINITY;
      const int sc0 = sc[k], m0 = sc[8 + k];
      for (int ds = -1; ds <= 1; ++ds) {
        for (int dd = -1; dd <= 1; ++dd) {
          const int ls = sc0 + ds, lm = m0 + dd;
          if (ls < 0 || ls > 63 || lm < 0 || lm > 63) continue;
          const float dl = d * static_cast<float>(ls);
          const float ml = dmin * static_cast<float>(lm);
          const float inv = dl > 0.0f ? 1.0f / dl : 0.0f;
          float err = 0.0f;
          for (uint32_t j = 0; j < len[k]; ++j) {
            float l = round_away((v[k][j] + ml) * inv);
            l = clamp_level(l, top);
            trial[j] = static_cast<uint8_t>(l);
            const float e = dl * l - ml - v[k][j];
            err += e * e;
          }
          if (err < best) {
            best = err;
            sc[k] = static_cast<uint8_t>(ls);
            sc[8 + k] = static_cast<uint8_t>(lm);
            memcpy(q, trial, sizeof q);
          }
        }
      }
      uint8_t* out = qs + (g0 + k) * (kQuantGroup / 2);
      for (uint32_t j = 0; j < kQuantGroup / 2; ++j) {
        out[j] = static_cast<uint8_t>((q[j] & 0x0f) | ((q[j + 16] & 0x0f) << 4));
      }
      if (kTop == 31) {
        uint8_t* h = high + (g0 + k) * (kQuantGroup / 8);
        memset(h, 0, kQuantGroup / 8);
        for (uint32_t j = 0; j < kQuantGroup; ++j) h[j % 4] |= static_cast<uint8_t>((q[j] >> 4) << (j / 4));
      }
    }
  }
}

}  // namespace

void quantize_row_q4k(const float* x, size_t cols, uint8_t* qs, uint16_t* dm, uint8_t* subs) {
  quantize_row_asym_k<15>(x, cols, qs, nullptr, dm, subs);
}

void quantize_row_q5k(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* dm,
                      uint8_t* subs) {
  quantize_row_asym_k<31>(x, cols, qs, high, dm, subs);
}

namespace {

// Fits x[i] ~= a * l[i], l[i] in [-32, 31], minimizing sum w[i] (x[i] - a l[i])^2 over the
// rounding grids l = round(is * x) for is around -32 / m and 31 / m (m the value of largest
// magnitude): each grid's a is its weighted least-squares scale. Returns a (0 for a zero block).
float fit_sub_q6k(const float* x, const float* w, uint32_t n) {
  float m = 0.0f;
  for (uint32_t i = 0; i < n; ++i) {
    if (fabsf(x[i]) > fabsf(m)) m = x[i];
  }
  if (m == 0.0f) return 0.0f;
  float best_a = m / -32.0f, best_err = INFINITY;
  for (int side = 0; side < 2; ++side) {
    for (int step = -10; step <= 10; ++step) {
      const float is = side == 0 ? (-32.0f + 0.1f * step) / m : (31.0f + 0.1f * step) / m;
      float sxl = 0.0f, sl2 = 0.0f;
      for (uint32_t i = 0; i < n; ++i) {
        const float l = clamp_level(round_away(is * x[i]) + 32.0f, 63.0f) - 32.0f;
        sxl += w[i] * x[i] * l;
        sl2 += w[i] * l * l;
      }
      if (!(sl2 > 0.0f)) continue;
      const float a = sxl / sl2;
      if (!(a == a) || a == 0.0f) continue;
      // For this grid's levels the best scale leaves sum w x^2 - sxl^2 / sl2: the largest
      // sxl^2 / sl2 wins (one pass per grid, as llama.cpp's make_qx_quants).
      const float err = -(sxl * sxl) / sl2;
      if (err < best_err) {
        best_err = err;
        best_a = a;
      }
    }
  }
  return best_a;
}

}  // namespace

void quantize_row_q6k(const float* x, size_t cols, uint8_t* qs, uint8_t* high, uint16_t* d,
                      int8_t* sc) {
  const size_t groups = padded_cols(cols) / kQuantGroup;
  const size_t supers = q6k_supers(cols);
  constexpr uint32_t kSub = kQuantGroup / 2;
  memset(sc, 0, supers * kQ6kSubsPerSuper);
  memset(high, 0, groups * (kQuantGroup / 4));
  for (size_t s = 0; s < supers; ++s) {
    const size_t g0 = s * kQ4kSuperGroups;
    const uint32_t nsub = 2 * static_cast<uint32_t>(
        groups - g0 < kQ4kSuperGroups ? groups - g0 : kQ4kSuperGroups);
    float v[kQ6kSubsPerSuper][kSub] = {}, a[kQ6kSubsPerSuper] = {};
    for (uint32_t b = 0; b < nsub; ++b) {
      const size_t c0 = g0 * kQuantGroup + b * kSub;
      const uint32_t len =
          c0 >= cols ? 0 : static_cast<uint32_t>(cols - c0 < kSub ? cols - c0 : kSub);
      float ss = 0.0f, w[kSub];
      for (uint32_t j = 0; j < len; ++j) {
        const float f = x[c0 + j];
        v[b][j] = f - f == 0.0f ? f : 0.0f;  // NaN / inf -> 0
        ss += v[b][j] * v[b][j];
      }
      const float av = len ? sqrtf(ss / static_cast<float>(len)) : 0.0f;
      for (uint32_t j = 0; j < len; ++j) w[j] = av + fabsf(v[b][j]);
      a[b] = fit_sub_q6k(v[b], w, len);
    }
    // The scale of largest magnitude maps to -128 (int8's extra level), as GGUF Q6_K does.
    float m = 0.0f;
    for (uint32_t b = 0; b < nsub; ++b) {
      if (fabsf(a[b]) > fabsf(m)) m = a[b];
    }
    d[s] = f32_to_fp16(m / -128.0f);
    const float step = fp16_to_f32(d[s]);
    int8_t* scs = sc + s * kQ6kSubsPerSuper;
    for (uint32_t b = 0; b < nsub; ++b) {
      // The nearest int8 level and its neighbours: the one whose values are closest to the
      // sub-block's (squared error, as stored) wins.
      const float l0 = step != 0.0f ? round_away(a[b] / step) : 0.0f;
      const int base = static_cast<int>(clamp_level(l0 + 128.0f, 255.0f)) - 128;
      uint8_t q[kSub], trial[kSub];
      memset(q, 32, sizeof q);  // value 0, should no level be finite
      float best = INFINITY;
      int best_l = base;
      for (int dl = -1; dl <= 1; ++dl) {
        const int l = base + dl;
        if (l < -128 || l > 127) continue;
        const float scale = step * static_cast<float>(l);
        const float inv = scale != 0.0f ? 1.0f / scale : 0.0f;
        float err = 0.0f;
        for (uint32_t j = 0; j < kSub; ++j) {
          const float lv = clamp_level(round_away(v[b][j] * inv) + 32.0f, 63.0f);
          trial[j] = static_cast<uint8_t>(lv);
          const float e = scale * (lv - 32.0f) - v[b][j];
          err += e * e;
        }
        if (err < best) {
          best = err;
          best_l = l;
          memcpy(q, trial, sizeof q);
        }
      }
      scs[b] = static_cast<int8_t>(best_l);
      const size_t g = g0 + b / 2;
      uint8_t* lo = qs + g * (kQuantGroup / 2);
      uint8_t* hi = high + g * (kQuantGroup / 4);
      for (uint32_t j = 0; j < kSub; ++j) {
        const uint32_t k = (b % 2) * kSub + j;  // value index within the group
        if (b % 2 == 0) {
          lo[j] = static_cast<uint8_t>((lo[j] & 0xf0) | (q[j] & 0x0f));
        } else {
          lo[j] = static_cast<uint8_t>((lo[j] & 0x0f) | ((q[j] & 0x0f) << 4));
        }
        hi[k % 8] = static_cast<uint8_t>(hi[k % 8] | ((q[j] >> 4) << (2 * (k / 8))));
      }
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

void dequantize_row_q4k(const uint8_t* qs, const uint16_t* dm, const uint8_t* subs, size_t cols,
                        float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup, s = g / kQ4kSuperGroups, k = g % kQ4kSuperGroups;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const uint8_t b = qs[g * 16 + (j & 15u)];
    const float q = static_cast<float>(j < 16 ? (b & 0x0f) : (b >> 4));
    const float dl = fp16_to_f32(dm[2 * s]) * static_cast<float>(subs[16 * s + k]);
    const float ml = fp16_to_f32(dm[2 * s + 1]) * static_cast<float>(subs[16 * s + 8 + k]);
    out[i] = dl * q - ml;
  }
}

void dequantize_row_q5(const uint8_t* qs, const uint8_t* high, const uint16_t* scales, size_t cols,
                       float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const int q = q5k_level(qs + g * (kQuantGroup / 2), high + g * (kQuantGroup / 8), j);
    out[i] = static_cast<float>(q - 16) * fp16_to_f32(scales[g]);
  }
}

void dequantize_row_q4_1(const uint8_t* qs, const uint16_t* dm, size_t cols, float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const uint8_t b = qs[g * (kQuantGroup / 2) + j % 16];
    const float q = static_cast<float>(j < 16 ? (b & 0x0f) : (b >> 4));
    out[i] = q * fp16_to_f32(dm[2 * g]) + fp16_to_f32(dm[2 * g + 1]);  // two roundings (no fma)
  }
}

void dequantize_row_q5_1(const uint8_t* qs, const uint8_t* high, const uint16_t* dm, size_t cols,
                         float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const float q = static_cast<float>(
        q5k_level(qs + g * (kQuantGroup / 2), high + g * (kQuantGroup / 8), j));
    out[i] = q * fp16_to_f32(dm[2 * g]) + fp16_to_f32(dm[2 * g + 1]);  // two roundings (no fma)
  }
}

void dequantize_row_q5k(const uint8_t* qs, const uint8_t* high, const uint16_t* dm,
                        const uint8_t* subs, size_t cols, float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup, s = g / kQ4kSuperGroups, k = g % kQ4kSuperGroups;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const float q = static_cast<float>(q5k_level(qs + g * (kQuantGroup / 2), high + g * (kQuantGroup / 8), j));
    const float dl = fp16_to_f32(dm[2 * s]) * static_cast<float>(subs[16 * s + k]);
    const float ml = fp16_to_f32(dm[2 * s + 1]) * static_cast<float>(subs[16 * s + 8 + k]);
    out[i] = dl * q - ml;
  }
}

void dequantize_row_q6k(const uint8_t* qs, const uint8_t* high, const uint16_t* d,
                        const int8_t* sc, size_t cols, float* out) {
  for (size_t i = 0; i < cols; ++i) {
    const size_t g = i / kQuantGroup, s = g / kQ4kSuperGroups, k = g % kQ4kSuperGroups;
    const unsigned j = static_cast<unsigned>(i % kQuantGroup);
    const int q = q6k_level(qs + g * (kQuantGroup / 2), high + g * (kQuantGroup / 4), j);
    const float dl = fp16_to_f32(d[s]) * static_cast<float>(sc[s * kQ6kSubsPerSuper + 2 * k + j / 16]);
    out[i] = dl * static_cast<float>(q - 32);
  }
}

}  // namespace ringlm::internal
