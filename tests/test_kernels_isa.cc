// Every ISA kernel table against the scalar reference (kernels/ref.cc), entry by entry,
// on random data over many shapes. Tables compiled for this architecture but not runnable on this
// CPU are skipped, saying so.
//
// Tolerances (what differs from ref is only float summation order and fused multiply-adds):
//   quantize_acts                bit-exact (qs and scales)
//   matmul_q8 / matmul_q4        |y - ref| <= 1e-5 * sum_g |w_scale_g x_scale_g| sum_j |w_j x_j|
//   / matmul_q4k / matmul_q5k    (q4k, q5k, q4_1, q5_1: + sum_g |min_g x_sum_g|, their min term;
//   / matmul_q6k / matmul_q5     q6k: per 16 values)
//   / matmul_q4_1 / matmul_q5_1
//                                (int32 partial dot products are exact; only the scaled sum is
//                                reordered). And bit-exact with unit scales while every partial
//                                sum stays below 2^24 (all float sums exact): the integer dot
//                                products themselves must be right.
//   matmul_f32 / matmul_f16      |y - ref| <= 1e-5 * sum_c |w_c x_c|
//   attn_dot                     |out - ref| <= 1e-5 * scale * sum_i |q_i k_i|
//   attn_accum                   |out - ref| <= 1e-5 * (|out_i| + sum_j |w_j v_ji|), and rows in
//                                two calls equal one call bit for bit
//   attn_dot_tiled               attn_dot's bound; entries outside [j0, j1) untouched; n_q
//                                queries bit for bit the one-query calls
//   attn_dot_q8, attn_accum_q8   the same bounds over the rows' values s_j * k_j[i]; the
//                                reference also against the float64 math
//   rmsnorm                      relative 1e-5 per value (the mean square is reordered)
//   softmax, swiglu              relative 1e-5 per value + 1e-30 absolute (vector exp ~1-2 ulp);
//                                softmax's returned sum relative 1e-5 to float64
// Output rows outside [r0, r1) must stay untouched.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <limits>
#include <random>
#include <utility>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "../platform/cpu_features.h"
#include "kernels/scalar.h"
#include "kernels/kernels.h"
#include "quant.h"

using namespace ringlm::internal;

namespace {

const KernelTable* find_compiled(const std::string& name) {
  const KernelTable* t[16];
  const size_t n = kernels_compiled(t, 16);
  for (size_t i = 0; i < n && i < 16; ++i)
    if (name == t[i]->name) return t[i];
  return nullptr;
}

std::vector<std::string> isa_names() {
  const KernelTable* t[16];
  const size_t n = kernels_compiled(t, 16);
  std::vector<std::string> out;
  for (size_t i = 0; i < n && i < 16; ++i)
    if (std::string(t[i]->name) != "ref") out.push_back(t[i]->name);
  return out;
}

std::vector<float> normal(std::mt19937& rng, size_t n, float sd) {
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

constexpr float kSentinel = 12345.0f;

class KernelsIsa : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    const CpuFeatures cpu = cpu_features_detect();
    k_ = find_compiled(GetParam());
    ASSERT_NE(k_, nullptr);
    if (kernels_select(cpu, GetParam().c_str()) == nullptr) {
      char buf[256];
      cpu_features_describe(cpu, buf, sizeof buf);
      GTEST_SKIP() << "SKIPPED: " << GetParam() << " not supported by this CPU (has: " << buf
                   << ")";
    }
    ASSERT_EQ(kernels_select(cpu, GetParam().c_str()), k_);
    ref_ = kernels_ref();
  }
  const KernelTable* k_ = nullptr;
  const KernelTable* ref_ = nullptr;
};

// Quantized weights with random int8 / nibble data (every value incl. -128 and -8) and random f16
// scales; activations quantized by the reference.
struct QuantCase {
  uint32_t rows, cols, stride;
  WeightType type;
  std::vector<uint8_t> data;
  std::vector<uint16_t> scales;
  std::vector<int8_t> xq;
  std::vector<float> xs;
  std::vector<uint8_t> subs;  // Q4K/Q5K: (rows, supers, 16) sc[8], m[8]; scales: (rows, supers,
                              // 2); Q6K: (rows, supers, 16) int8 sc; scales: (rows, supers) d;
                              // Q4_1/Q5_1: none; scales: (rows, stride / 32, 2) d, m
  std::vector<uint8_t> high;  // Q6K: (rows, stride / 4) the high 2 bits; Q5K/Q5/Q5_1: (rows,
                              // stride / 8) the fifth bits
  std::vector<float> sums;    // (n, groups) xs * sum of the group's xq (Q4K/Q5K/Q4_1/Q5_1's)
  uint32_t n_tok;

  uint32_t supers() const { return (stride / 32 + 7) / 8; }

  QuantCase(std::mt19937& rng, WeightType t, uint32_t r, uint32_t c, uint32_t n)
      : rows(r), cols(c), stride(static_cast<uint32_t>(padded_cols(c))), type(t), n_tok(n) {
    const size_t bytes = t == WeightType::Q8 ? size_t{rows} * stride : size_t{rows} * stride / 2;
    data.resize(bytes);
    std::uniform_int_distribution<int> byte(0, 255);
    for (uint8_t& b : data) b = static_cast<uint8_t>(byte(rng));
    if (t == WeightType::Q6K || t == WeightType::Q5K || t == WeightType::Q5 || t == WeightType::Q5_1) {
      high.resize(size_t{rows} * stride / (t == WeightType::Q6K ? 4 : 8));
      for (uint8_t& b : high) b = static_cast<uint8_t>(byte(rng));
    }
    // Padding past cols holds zeros, as the encodings require (Q6K: q = 32, high bits 2; Q5:
    // q = 16, fifth bit 1; Q4_1 / Q5_1: q = 0, whose value m meets zero activations).
    for (uint32_t row = 0; row < rows; ++row) {
      for (uint32_t col = cols; col < stride; ++col) {
        if (t == WeightType::Q8) {
          data[size_t{row} * stride + col] = 0;
        } else {
          uint8_t& b = data[size_t{row} * stride / 2 + (col / 32) * 16 + (col % 32) % 16];
          b &= (col % 32) < 16 ? 0xf0 : 0x0f;
        }
        if (t == WeightType::Q6K) {
          const uint32_t j = col % 32, shift = 2 * (j / 8);
          uint8_t& h = high[size_t{row} * stride / 4 + (col / 32) * 8 + j % 8];
          h = static_cast<uint8_t>((h & ~(3u << shift)) | (2u << shift));
        }
        if (t == WeightType::Q5K || t == WeightType::Q5 || t == WeightType::Q5_1) {
          const uint32_t j = col % 32;
          uint8_t& h = high[size_t{row} * stride / 8 + (col / 32) * 4 + j % 4];
          h = static_cast<uint8_t>((h & ~(1u << (j / 4))) | (t == WeightType::Q5 ? 1u << (j / 4) : 0u));
        }
      }
    }
    std::normal_distribution<float> sd(0.0f, 0.01f);
    if (t == WeightType::Q4K || t == WeightType::Q5K) {
      // Random d / dmin (any sign) and 6-bit levels; 0 for the groups a short super-block lacks.
      scales.resize(size_t{rows} * supers() * 2);
      subs.resize(size_t{rows} * supers() * 16);
      std::uniform_int_distribution<int> level(0, 63);
      for (size_t i = 0; i < subs.size(); ++i) {
        const uint32_t g = static_cast<uint32_t>((i / 16) % supers()) * 8 + i % 8;
        subs[i] = g < stride / 32 ? static_cast<uint8_t>(level(rng)) : 0;
      }
    } else if (t == WeightType::Q6K) {
      // Random d (any sign) and int8 scales (every value); 0 for the groups a short super-block
      // lacks.
      scales.resize(size_t{rows} * supers());
      subs.resize(size_t{rows} * supers() * 16);
      for (size_t i = 0; i < subs.size(); ++i) {
        const uint32_t g = static_cast<uint32_t>((i / 16) % supers()) * 8 + (i % 16) / 2;
        subs[i] = g < stride / 32 ? static_cast<uint8_t>(byte(rng)) : 0;
      }
    } else if (t == WeightType::Q4_1 || t == WeightType::Q5_1) {
      scales.resize(size_t{rows} * stride / 32 * 2);  // random d and m (any sign)
    } else {
      scales.resize(size_t{rows} * stride / 32);
    }
    for (uint16_t& s : scales) s = f32_to_fp16(sd(rng));
    const std::vector<float> x = normal(rng, size_t{n} * cols, 1.0f);
    xq.resize(size_t{n} * stride);
    xs.resize(size_t{n} * stride / 32);
    kernels_ref()->quantize_acts(x.data(), n, cols, stride, xq.data(), xs.data());
    make_sums();
  }

  void make_sums() {  // what the matmul layer computes for a Q4K / Q5K / Q4_1 / Q5_1 run
    sums.resize(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      int32_t sum = 0;
      for (uint32_t j = 0; j < 32; ++j) sum += xq[i * 32 + j];
      sums[i] = xs[i] * static_cast<float>(sum);
    }
  }

  WeightView view() const {
    WeightView v;
    v.data = data.data();
    v.scales = scales.data();
    v.type = type;
    v.rows = rows;
    v.cols = cols;
    v.row_stride = stride;
    if (type == WeightType::Q4K || type == WeightType::Q5K || type == WeightType::Q6K) v.subs = subs.data();
    if (type == WeightType::Q6K || type == WeightType::Q5K || type == WeightType::Q5 || type == WeightType::Q5_1)
      v.high = high.data();
    return v;
  }
  QuantActs acts(uint32_t tok0 = 0) const {
    return QuantActs{xq.data() + size_t{tok0} * stride, xs.data() + size_t{tok0} * stride / 32,
                     stride, sums.data() + size_t{tok0} * stride / 32};
  }

  int w(uint32_t r, uint32_t c) const {
    if (type == WeightType::Q8) return static_cast<int8_t>(data[size_t{r} * stride + c]);
    if (type == WeightType::Q6K) {
      return q6k_level(data.data() + size_t{r} * stride / 2 + (c / 32) * 16,
                       high.data() + size_t{r} * stride / 4 + (c / 32) * 8, c % 32) - 32;
    }
    if (type == WeightType::Q5) {
      return q5k_level(data.data() + size_t{r} * stride / 2 + (c / 32) * 16,
                       high.data() + size_t{r} * stride / 8 + (c / 32) * 4, c % 32) - 16;
    }
    if (type == WeightType::Q5K || type == WeightType::Q5_1) {
      return q5k_level(data.data() + size_t{r} * stride / 2 + (c / 32) * 16,
                       high.data() + size_t{r} * stride / 8 + (c / 32) * 4, c % 32);
    }
    if (type == WeightType::Q4K || type == WeightType::Q4_1) {
      const uint8_t b = data[size_t{r} * stride / 2 + (c / 32) * 16 + (c % 32) % 16];
      return (c % 32) < 16 ? (b & 15) : (b >> 4);
    }
    return q4_get(data.data() + size_t{r} * stride / 2 + (c / 32) * 16, c % 32);
  }
  bool dm_pairs() const { return type == WeightType::Q4_1 || type == WeightType::Q5_1; }
  // Group g's weight scale (Q4K/Q5K: d * sc; Q6K: of value j's sub-block; Q4_1/Q5_1: d) and min
  // (Q4K/Q5K: dmin * m; Q4_1/Q5_1: m; 0 otherwise).
  float w_scale(uint32_t r, uint32_t g, uint32_t j = 0) const {
    if (type == WeightType::Q6K) {
      const size_t sb = size_t{r} * supers() + g / 8;
      return fp16_to_f32(scales[sb]) * static_cast<int8_t>(subs[16 * sb + 2 * (g % 8) + j / 16]);
    }
    if (dm_pairs()) return fp16_to_f32(scales[2 * (size_t{r} * stride / 32 + g)]);
    if (type != WeightType::Q4K && type != WeightType::Q5K) {
      return fp16_to_f32(scales[size_t{r} * stride / 32 + g]);
    }
    const size_t sb = size_t{r} * supers() + g / 8;
    return fp16_to_f32(scales[2 * sb]) * subs[16 * sb + g % 8];
  }
  float w_min(uint32_t r, uint32_t g) const {
    if (dm_pairs()) return fp16_to_f32(scales[2 * (size_t{r} * stride / 32 + g) + 1]);
    if (type != WeightType::Q4K && type != WeightType::Q5K) return 0.0f;
    const size_t sb = size_t{r} * supers() + g / 8;
    return fp16_to_f32(scales[2 * sb + 1]) * subs[16 * sb + 8 + g % 8];
  }
  // sum_g |w_scale * x_scale| * sum_j |w_j x_j| (+ |min_g * x_sum_g|)
  double magnitude(uint32_t r, uint32_t t) const {
    double m = 0;
    for (uint32_t g = 0; g < stride / 32; ++g) {
      for (uint32_t half = 0; half < 2; ++half) {  // Q6K's scale may differ per 16 values
        int64_t asum = 0;
        for (uint32_t j = 16 * half; j < 16 * half + 16; ++j)
          asum += abs(w(r, g * 32 + j) * xq[size_t{t} * stride + g * 32 + j]);
        m += fabs(static_cast<double>(asum) * w_scale(r, g, 16 * half) *
                  xs[size_t{t} * stride / 32 + g]);
      }
      m += fabs(static_cast<double>(w_min(r, g)) * sums[size_t{t} * stride / 32 + g]);
    }
    return m;
  }
  // Unit scales and full-range activations (-127..127): results are exact integers. Q4K / Q5K:
  // d = dmin = 1 with levels 0..3, so a group adds at most 3 * 31 * 127 * 32 + 3 * 127 * 32; Q6K:
  // d = 1 with sc in [-3, 3], at most 3 * 32 * 127 * 32; Q4_1 / Q5_1: d = m = 1, at most
  // 31 * 127 * 32 + 127 * 32.
  void unit_scales(std::mt19937& rng) {
    for (uint16_t& s : scales) s = 0x3c00;  // 1.0
    for (float& s : xs) s = 1.0f;
    std::uniform_int_distribution<int> q(-127, 127);
    for (size_t i = 0; i < xq.size(); ++i) xq[i] = (i % stride) < cols ? static_cast<int8_t>(q(rng)) : 0;
    if (type == WeightType::Q6K) {
      for (uint8_t& l : subs) l = static_cast<uint8_t>(static_cast<int8_t>(l) % 4);
    } else {
      for (uint8_t& l : subs) l &= 3;
    }
    make_sums();
  }
};

struct Shape {
  uint32_t rows, cols, n;
};

std::vector<Shape> matmul_shapes() {
  std::vector<Shape> s;
  const uint32_t cols[] = {32, 64, 96, 172, 288, 576, 1000, 1536, 4096};
  const uint32_t rows[] = {1, 2, 3, 5, 6, 7, 9, 13, 37};
  uint32_t i = 0;
  for (uint32_t c : cols) {
    for (uint32_t n = 1; n <= 9; ++n) {
      if (c >= 1536 && n % 4 != 1 && n != 2) continue;  // keep emulated runs short
      s.push_back({rows[(i++) % 9], c, n});
    }
  }
  s.push_back({64, 4096, 1});
  s.push_back({37, 4096, 9});
  s.push_back({100, 33, 5});
  // Prefill widths (16+ tokens: avx512 q8 takes its grouped walk there), whole 16-group blocks
  // plus a tail pair (576), an odd tail group (1000: 32 groups padded; 33: one group), and more
  // tokens than one stack chunk of prepared activations holds (4096 columns: 12 per chunk).
  s.push_back({37, 576, 17});
  s.push_back({13, 1000, 23});
  s.push_back({6, 1536, 16});
  s.push_back({9, 33, 40});
  s.push_back({5, 4096, 25});
  return s;
}

// Row ranges to try for `rows` output rows: all, and unaligned sub-ranges.
std::vector<std::pair<uint32_t, uint32_t>> ranges(uint32_t rows) {
  std::vector<std::pair<uint32_t, uint32_t>> v{{0, rows}};
  if (rows >= 3) v.push_back({1, rows - 1});
  if (rows >= 7) v.push_back({3, rows - 2});
  if (rows >= 2) v.push_back({rows - 1, rows});
  return v;
}

void check_rows_untouched(const std::vector<float>& y, uint32_t rows, uint32_t n, uint32_t r0,
                          uint32_t r1, const char* what) {
  for (uint32_t t = 0; t < n; ++t)
    for (uint32_t r = 0; r < rows; ++r)
      if (r < r0 || r >= r1) ASSERT_EQ(y[size_t{t} * rows + r], kSentinel) << what << " row " << r;
}

using QuantFn = void (*)(const WeightView&, const QuantActs&, uint32_t, float*, uint32_t, uint32_t);
QuantFn quant_fn(const KernelTable* k, WeightType t) {
  return t == WeightType::Q8    ? k->matmul_q8
         : t == WeightType::Q4  ? k->matmul_q4
         : t == WeightType::Q4K ? k->matmul_q4k
         : t == WeightType::Q5K ? k->matmul_q5k
         : t == WeightType::Q5  ? k->matmul_q5
         : t == WeightType::Q4_1 ? k->matmul_q4_1
         : t == WeightType::Q5_1 ? k->matmul_q5_1
                                : k->matmul_q6k;
}

void test_quant_matmul(const KernelTable* k, const KernelTable* ref, WeightType type) {
  std::mt19937 rng(type == WeightType::Q8 ? 8 : type == WeightType::Q4 ? 4 : type == WeightType::Q4K ? 44 : type == WeightType::Q5K ? 55 : type == WeightType::Q5 ? 5 : type == WeightType::Q4_1 ? 41 : type == WeightType::Q5_1 ? 51 : 66);
  int checked = 0;
  for (const Shape& s : matmul_shapes()) {
    const QuantCase qc(rng, type, s.rows, s.cols, s.n);
    const WeightView v = qc.view();
    const QuantActs qa = qc.acts();
    for (auto [r0, r1] : ranges(s.rows)) {
      std::vector<float> y(size_t{s.n} * s.rows, kSentinel), yr(y);
      quant_fn(k, type)(v, qa, s.n, y.data(), r0, r1);
      quant_fn(ref, type)(v, qa, s.n, yr.data(), r0, r1);
      check_rows_untouched(y, s.rows, s.n, r0, r1, "quant");
      for (uint32_t t = 0; t < s.n; ++t) {
        for (uint32_t r = r0; r < r1; ++r) {
          const size_t i = size_t{t} * s.rows + r;
          ASSERT_NEAR(y[i], yr[i], 1e-5 * qc.magnitude(r, t) + 1e-30)
              << "rows " << s.rows << " cols " << s.cols << " n " << s.n << " range [" << r0
              << "," << r1 << ") t " << t << " r " << r;
          ++checked;
        }
      }
    }
  }
  EXPECT_GT(checked, 1000);
}

// With unit scales every partial sum is an integer below 2^24 (q8, q4k, q6k: cols <= 1024; q4,
// q4_1: any), so every summation order gives the same float: ISA == ref bit for bit.
void test_quant_exact(const KernelTable* k, const KernelTable* ref, WeightType type) {
  std::mt19937 rng(type == WeightType::Q8 ? 81 : type == WeightType::Q4 ? 41 : type == WeightType::Q4K ? 441 : type == WeightType::Q5K ? 551 : type == WeightType::Q5 ? 51 : type == WeightType::Q4_1 ? 411 : type == WeightType::Q5_1 ? 511 : 661);
  for (const Shape& s : matmul_shapes()) {
    if (type != WeightType::Q4 && type != WeightType::Q4_1 && s.cols > 1024) continue;
    QuantCase qc(rng, type, s.rows, s.cols, s.n);
    qc.unit_scales(rng);
    const WeightView v = qc.view();
    const QuantActs qa = qc.acts();
    std::vector<float> y(size_t{s.n} * s.rows, kSentinel), yr(y);
    quant_fn(k, type)(v, qa, s.n, y.data(), 0, s.rows);
    quant_fn(ref, type)(v, qa, s.n, yr.data(), 0, s.rows);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_EQ(y[i], yr[i]) << "rows " << s.rows << " cols " << s.cols << " n " << s.n << " i "
                             << i;
  }
}

// Q6K at the ends of its integer range: every q 0 (q - 32 = -32) or every q 63, activations all
// -127 or all +127, every sub-block scale -128 or 127, d = 1: the largest sums a kernel's int32
// lanes can meet (AVX2's quads hold 256 * sc * 16 products of a group: 2^31 * 127 / 128 at most).
// Results as the reference's, to the same bound as the random cases: a wrapped lane would miss by
// ~2^32.
void test_q6k_extremes(const KernelTable* k, const KernelTable* ref) {
  std::mt19937 rng(606);
  for (uint32_t cols : {32u, 96u, 256u, 288u, 576u}) {
    for (int q_hi = 0; q_hi < 2; ++q_hi) {
      for (int x_pos = 0; x_pos < 2; ++x_pos) {
        for (int sc_pos = 0; sc_pos < 2; ++sc_pos) {
          const uint32_t rows = 5, n = 3;
          QuantCase qc(rng, WeightType::Q6K, rows, cols, n);
          std::fill(qc.data.begin(), qc.data.end(), q_hi ? 0xff : 0x00);
          std::fill(qc.high.begin(), qc.high.end(), q_hi ? 0xff : 0x00);
          for (uint16_t& s : qc.scales) s = 0x3c00;  // d = 1.0
          std::fill(qc.subs.begin(), qc.subs.end(), static_cast<uint8_t>(sc_pos ? 127 : 0x80));
          std::fill(qc.xq.begin(), qc.xq.end(), static_cast<int8_t>(x_pos ? 127 : -127));
          std::fill(qc.xs.begin(), qc.xs.end(), 1.0f);
          const WeightView v = qc.view();
          const QuantActs qa = qc.acts();
          std::vector<float> y(size_t{n} * rows, kSentinel), yr(y);
          k->matmul_q6k(v, qa, n, y.data(), 0, rows);
          ref->matmul_q6k(v, qa, n, yr.data(), 0, rows);
          for (uint32_t t = 0; t < n; ++t) {
            for (uint32_t r = 0; r < rows; ++r) {
              const size_t i = size_t{t} * rows + r;
              // every product is 32 or 31 x 127 x |sc|: the sum's magnitude bounds its rounding
              const double mag = static_cast<double>(cols) * 32 * 127 * 128;
              ASSERT_NEAR(y[i], yr[i], 1e-5 * mag) << "cols " << cols << " q " << (q_hi ? 63 : 0)
                                                   << " x " << (x_pos ? 127 : -127) << " sc "
                                                   << (sc_pos ? 127 : -128) << " t " << t << " r " << r;
              ASSERT_GT(fabs(static_cast<double>(yr[i])), 0.5 * mag) << "the case is not extreme";
            }
          }
        }
      }
    }
  }
}

void test_float_matmul(const KernelTable* k, const KernelTable* ref, bool f16) {
  std::mt19937 rng(f16 ? 16 : 32);
  for (const Shape& s : matmul_shapes()) {
    const std::vector<float> wf = normal(rng, size_t{s.rows} * s.cols, 0.1f);
    const std::vector<float> x = normal(rng, size_t{s.n} * s.cols, 1.0f);
    std::vector<uint16_t> wh(wf.size());
    std::vector<float> wd(wf);  // the values the kernel sees
    for (size_t i = 0; i < wf.size(); ++i) {
      wh[i] = f32_to_fp16(wf[i]);
      if (f16) wd[i] = fp16_to_f32(wh[i]);
    }
    WeightView v;
    v.data = f16 ? static_cast<const void*>(wh.data()) : wf.data();
    v.type = f16 ? WeightType::F16 : WeightType::F32;
    v.rows = s.rows;
    v.cols = s.cols;
    v.row_stride = s.cols;
    for (auto [r0, r1] : ranges(s.rows)) {
      std::vector<float> y(size_t{s.n} * s.rows, kSentinel), yr(y);
      (f16 ? k->matmul_f16 : k->matmul_f32)(v, x.data(), s.n, y.data(), r0, r1);
      (f16 ? ref->matmul_f16 : ref->matmul_f32)(v, x.data(), s.n, yr.data(), r0, r1);
      check_rows_untouched(y, s.rows, s.n, r0, r1, "float");
      for (uint32_t t = 0; t < s.n; ++t) {
        for (uint32_t r = r0; r < r1; ++r) {
          double mag = 0;
          for (uint32_t c = 0; c < s.cols; ++c)
            mag += fabs(double{wd[size_t{r} * s.cols + c]} * x[size_t{t} * s.cols + c]);
          const size_t i = size_t{t} * s.rows + r;
          ASSERT_NEAR(y[i], yr[i], 1e-5 * mag)
              << "rows " << s.rows << " cols " << s.cols << " n " << s.n << " t " << t << " r "
              << r;
        }
      }
    }
  }
}

// kMatmulExactRows: each token row of an n-row call equals, bit for bit, a one-row call on that
// token (what speculative verification relies on), over row ranges that start where the matmul
// layer's thread parts do (multiples of 16) and cross the 32-row blocks.
void test_exact_rows(const KernelTable* k, WeightType type) {
  std::mt19937 rng(77 + static_cast<int>(type));
  const uint32_t rows_list[] = {37, 70, 133};
  // 1568 columns: 49 groups, three 16-group blocks and an odd tail group (avx512 q8's block sums)
  // 224 / 352 / 416 / 896 / 960: 7, 11, 13, 28, 30 groups (q4's decode tails of 7, 3, 5, 4, 6
  // groups past its 8-group blocks)
  const uint32_t cols_list[] = {64, 576, 1000, 1568, 224, 352, 416, 896, 960};
  // 17: more than one multi-token tile (avx512 q8 takes 8 tokens a tile), as prefill
  const uint32_t n_list[] = {2, 5, 9, 17};
  int i = 0;
  for (uint32_t rows : rows_list) {
    for (uint32_t cols : cols_list) {
      const uint32_t n = n_list[(i % 9 + i / 9) % 4];  // each width meets 3 of the 4 n
      ++i;
      WeightView v;
      std::vector<float> wf, x = normal(rng, size_t{n} * cols, 1.0f);
      std::vector<uint16_t> wh;
      const bool quant = type == WeightType::Q8 || type == WeightType::Q4 ||
                         type == WeightType::Q4K || type == WeightType::Q5K ||
                         type == WeightType::Q6K || type == WeightType::Q5 ||
                         type == WeightType::Q4_1 || type == WeightType::Q5_1;
      QuantCase qc(rng, quant ? type : WeightType::Q8, rows, cols, n);
      if (quant) {
        v = qc.view();
      } else {
        wf = normal(rng, size_t{rows} * cols, 0.1f);
        wh.resize(wf.size());
        for (size_t j = 0; j < wf.size(); ++j) wh[j] = f32_to_fp16(wf[j]);
        v.data = type == WeightType::F16 ? static_cast<const void*>(wh.data()) : wf.data();
        v.type = type;
        v.rows = rows;
        v.cols = cols;
        v.row_stride = cols;
      }
      auto run = [&](uint32_t tok0, uint32_t count, float* y, uint32_t r0, uint32_t r1) {
        if (quant) {
          quant_fn(k, type)(v, qc.acts(tok0), count, y, r0, r1);
        } else {
          (type == WeightType::F16 ? k->matmul_f16 : k->matmul_f32)(
              v, x.data() + size_t{tok0} * cols, count, y, r0, r1);
        }
      };
      for (uint32_t r0 : {0u, 16u}) {
        std::vector<float> y(size_t{n} * rows, kSentinel), y1(rows, kSentinel);
        run(0, n | kMatmulExactRows, y.data(), r0, rows);
        check_rows_untouched(y, rows, n, r0, rows, "exact rows");
        for (uint32_t t = 0; t < n; ++t) {
          run(t, 1, y1.data(), r0, rows);
          ASSERT_EQ(memcmp(y.data() + size_t{t} * rows + r0, y1.data() + r0,
                           (rows - r0) * sizeof(float)),
                    0)
              << "rows " << rows << " cols " << cols << " n " << n << " token " << t << " r0 "
              << r0;
        }
      }
    }
  }
}

}  // namespace

TEST_P(KernelsIsa, MatmulExactRowsEqualOneRowCalls) {
  for (WeightType t :
       {WeightType::Q8, WeightType::Q4, WeightType::Q5, WeightType::Q4_1, WeightType::Q5_1, WeightType::Q4K,
        WeightType::Q5K, WeightType::Q6K, WeightType::F32, WeightType::F16}) {
    SCOPED_TRACE(static_cast<int>(t));
    test_exact_rows(k_, t);
  }
}

TEST_P(KernelsIsa, MatmulQ8) { test_quant_matmul(k_, ref_, WeightType::Q8); }
TEST_P(KernelsIsa, MatmulQ4) { test_quant_matmul(k_, ref_, WeightType::Q4); }
TEST_P(KernelsIsa, MatmulQ8ExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q8); }
TEST_P(KernelsIsa, MatmulQ4ExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q4); }
TEST_P(KernelsIsa, MatmulQ5) { test_quant_matmul(k_, ref_, WeightType::Q5); }
TEST_P(KernelsIsa, MatmulQ5ExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q5); }
TEST_P(KernelsIsa, MatmulQ4_1) { test_quant_matmul(k_, ref_, WeightType::Q4_1); }
TEST_P(KernelsIsa, MatmulQ4_1ExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q4_1); }
TEST_P(KernelsIsa, MatmulQ5_1) { test_quant_matmul(k_, ref_, WeightType::Q5_1); }
TEST_P(KernelsIsa, MatmulQ5_1ExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q5_1); }
TEST_P(KernelsIsa, MatmulQ4K) { test_quant_matmul(k_, ref_, WeightType::Q4K); }
TEST_P(KernelsIsa, MatmulQ4KExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q4K); }
TEST_P(KernelsIsa, MatmulQ5K) { test_quant_matmul(k_, ref_, WeightType::Q5K); }
TEST_P(KernelsIsa, MatmulQ5KExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q5K); }
TEST_P(KernelsIsa, MatmulQ6K) { test_quant_matmul(k_, ref_, WeightType::Q6K); }
TEST_P(KernelsIsa, MatmulQ6KExactIntegers) { test_quant_exact(k_, ref_, WeightType::Q6K); }
TEST_P(KernelsIsa, MatmulQ6KExtremes) { test_q6k_extremes(k_, ref_); }
TEST_P(KernelsIsa, MatmulF32) { test_float_matmul(k_, ref_, false); }
TEST_P(KernelsIsa, MatmulF16) { test_float_matmul(k_, ref_, true); }

TEST_P(KernelsIsa, QuantizeActsBitExact) {
  std::mt19937 rng(7);
  for (uint32_t cols : {1u, 5u, 31u, 32u, 33u, 64u, 100u, 172u, 576u, 1000u, 1536u, 4096u}) {
    for (uint32_t n : {1u, 2u, 3u, 9u}) {
      std::vector<float> x = normal(rng, size_t{n} * cols, 3.0f);
      if (cols >= 64) {
        for (uint32_t c = 0; c < 32; ++c) x[c] = 0.0f;   // an all-zero group: scale 0
        x[40] = 1e-3f;                                  // a tiny group next to a large one
        x[33] = 250.0f;
      }
      const uint32_t stride = static_cast<uint32_t>(padded_cols(cols));
      std::vector<int8_t> q(size_t{n} * stride, 99), qr(q);
      std::vector<float> s(size_t{n} * stride / 32, -1.0f), sr(s);
      k_->quantize_acts(x.data(), n, cols, stride, q.data(), s.data());
      ref_->quantize_acts(x.data(), n, cols, stride, qr.data(), sr.data());
      ASSERT_EQ(0, memcmp(q.data(), qr.data(), q.size())) << "cols " << cols << " n " << n;
      ASSERT_EQ(0, memcmp(s.data(), sr.data(), s.size() * sizeof(float)))
          << "cols " << cols << " n " << n;
    }
  }
}

TEST_P(KernelsIsa, Rmsnorm) {
  std::mt19937 rng(11);
  for (uint32_t size : {1u, 3u, 8u, 15u, 16u, 17u, 64u, 100u, 576u, 2048u, 4099u}) {
    const std::vector<float> x = normal(rng, size, 2.0f), w = normal(rng, size, 1.0f);
    std::vector<float> o(size), orf(size);
    k_->rmsnorm(o.data(), x.data(), w.data(), size, 1e-5f);
    ref_->rmsnorm(orf.data(), x.data(), w.data(), size, 1e-5f);
    for (uint32_t i = 0; i < size; ++i) ASSERT_NEAR(o[i], orf[i], 1e-5 * fabs(orf[i])) << size;
  }
}

TEST_P(KernelsIsa, Softmax) {
  std::mt19937 rng(13);
  for (uint32_t size : {1u, 2u, 7u, 8u, 9u, 31u, 100u, 1000u, 4097u}) {
    for (float sd : {0.1f, 3.0f, 30.0f}) {
      std::vector<float> x = normal(rng, size, sd), xr;
      if (size > 3) x[size / 2] = -200.0f;  // far below the max: exp underflows
      xr = x;
      // The returned log of the sum of exp(x): against float64 (to float's rounding of the max,
      // which can be large: sd 30, about 100).
      double mx = x[0], sum = 0.0;
      for (float v : x) mx = v > mx ? v : mx;
      for (float v : x) sum += exp(double{v} - mx);
      const double exact = mx + log(sum);
      const float lse = k_->softmax(x.data(), size);
      const float lse_ref = ref_->softmax(xr.data(), size);
      ASSERT_NEAR(lse, exact, 1e-5 + 2e-7 * fabs(exact)) << size << " " << sd;
      ASSERT_NEAR(lse_ref, exact, 1e-5 + 2e-7 * fabs(exact)) << size << " " << sd;
      for (uint32_t i = 0; i < size; ++i)
        ASSERT_NEAR(x[i], xr[i], 1e-5 * fabs(xr[i]) + 1e-30) << size << " " << sd << " " << i;
    }
  }
}

TEST_P(KernelsIsa, Swiglu) {
  std::mt19937 rng(17);
  for (uint32_t size : {1u, 5u, 8u, 13u, 64u, 1000u, 1537u}) {
    std::vector<float> a = normal(rng, size, 4.0f), b = normal(rng, size, 1.0f);
    const float extremes[] = {0.0f, -0.0f, 100.0f, -100.0f, 88.5f, -88.5f, 87.0f, -87.0f,
                              20.0f, -20.0f, 1e-8f, -1e-8f};
    for (size_t i = 0; i < sizeof extremes / sizeof extremes[0] && i < size; ++i) a[i] = extremes[i];
    std::vector<float> ar(a);
    k_->swiglu(a.data(), b.data(), size);
    ref_->swiglu(ar.data(), b.data(), size);
    for (uint32_t i = 0; i < size; ++i)
      ASSERT_NEAR(a[i], ar[i], 1e-5 * fabs(ar[i]) + 1e-30) << size << " " << i;
  }
}

// f32 -> f16 rows: bit for bit scalar.h's f32_to_fp16 (kernels.h), over the values that round
// differently (ties to even, the largest finite, overflow to infinity, subnormals and their
// ties, signed zeros, infinities, NaNs with and without payloads) and random ones of every
// magnitude, in rows of every length a vector tail can take.
TEST_P(KernelsIsa, F32ToF16BitExact) {
  std::mt19937 rng(23);
  std::vector<float> v;
  const uint32_t bits[] = {0x00000000u, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                           0xffc00000u, 0x7f800001u, 0x7fbfffffu, 0xffffffffu, 0x7fe12345u,
                           0x477fe000u, 0x477fefffu, 0x477ff000u, 0x477fffffu, 0x47800000u,
                           0x38800000u, 0x387fffffu, 0x33800000u, 0x33000000u, 0x33000001u,
                           0x32ffffffu, 0x35800000u, 0x35a00000u, 0x35c00000u, 0x00000001u,
                           0x3f801000u, 0x3f803000u, 0x3f800fffu, 0x3f802001u, 0xbf801000u};
  for (uint32_t b : bits) {
    float f;
    memcpy(&f, &b, sizeof f);
    v.push_back(f);
  }
  std::uniform_int_distribution<uint32_t> any;
  for (int i = 0; i < 4000; ++i) {
    uint32_t b = any(rng);
    // Most of them near f16's range, where the rounding matters.
    if (i % 4 != 0) b = (b & 0x807fffffu) | ((0x60u + (b >> 24) % 0x30u) << 23);
    float f;
    memcpy(&f, &b, sizeof f);
    v.push_back(f);
  }
  for (uint32_t n : {1u, 3u, 4u, 7u, 8u, 9u, 15u, 16u, 17u, static_cast<uint32_t>(v.size())}) {
    for (uint32_t off = 0; off + n <= v.size(); off += n < 64 ? 61 : n) {
      std::vector<uint16_t> got(n + 1, 0xabcd);
      k_->f32_to_f16(v.data() + off, got.data(), n);
      for (uint32_t i = 0; i < n; ++i) {
        uint32_t b;
        memcpy(&b, &v[off + i], sizeof b);
        ASSERT_EQ(got[i], f32_to_fp16(v[off + i])) << std::hex << "input 0x" << b << " n " << std::dec << n;
      }
      ASSERT_EQ(got[n], 0xabcd) << "wrote past n = " << n;
    }
  }
}

TEST_P(KernelsIsa, AttnDot) {
  std::mt19937 rng(19);
  for (bool f16 : {false, true}) {
    for (uint32_t hd : {1u, 7u, 16u, 32u, 64u, 80u, 128u, 256u}) {
      for (uint32_t rows : {1u, 2u, 3u, 4u, 5u, 9u, 37u, 130u}) {
        const uint32_t stride = hd * 3 + (f16 ? 1 : 0);
        const std::vector<float> q = normal(rng, hd, 1.0f);
        const std::vector<float> kf = normal(rng, size_t{rows} * stride, 1.0f);
        std::vector<uint16_t> kh(kf.size());
        for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_fp16(kf[i]);
        const void* kp = f16 ? static_cast<const void*>(kh.data()) : kf.data();
        const float scale = 1.0f / sqrtf(static_cast<float>(hd));
        std::vector<float> o(rows + 1, kSentinel), orf(rows + 1, kSentinel);
        k_->attn_dot(q.data(), kp, stride, rows, hd, f16, scale, o.data());
        ref_->attn_dot(q.data(), kp, stride, rows, hd, f16, scale, orf.data());
        ASSERT_EQ(o[rows], kSentinel);
        for (uint32_t j = 0; j < rows; ++j) {
          double mag = 0;
          for (uint32_t i = 0; i < hd; ++i) {
            const size_t e = size_t{j} * stride + i;
            mag += fabs(double{q[i]} * (f16 ? fp16_to_f32(kh[e]) : kf[e]));
          }
          ASSERT_NEAR(o[j], orf[j], 1e-5 * scale * mag) << f16 << " hd " << hd << " rows " << rows;
        }
      }
    }
  }
}

TEST_P(KernelsIsa, AttnAccum) {
  std::mt19937 rng(23);
  for (bool f16 : {false, true}) {
    for (uint32_t hd : {1u, 7u, 16u, 32u, 33u, 64u, 80u, 128u, 256u}) {
      for (uint32_t rows : {0u, 1u, 2u, 3u, 5u, 9u, 37u, 130u}) {
        const uint32_t stride = hd * 2 + (f16 ? 3 : 0);
        std::vector<float> w = normal(rng, rows, 1.0f);
        for (float& x : w) x = fabsf(x);
        const std::vector<float> vf = normal(rng, size_t{rows} * stride + 1, 1.0f);
        std::vector<uint16_t> vh(vf.size());
        for (size_t i = 0; i < vf.size(); ++i) vh[i] = f32_to_fp16(vf[i]);
        const void* vp = f16 ? static_cast<const void*>(vh.data()) : vf.data();
        // The sums continue from out's values (attention zeroes out, then walks row blocks).
        std::vector<float> o = normal(rng, hd + 1, 1.0f);
        o[hd] = kSentinel;
        const std::vector<float> start = o;
        std::vector<float> orf = o, split = o;
        k_->attn_accum(w.data(), vp, stride, rows, hd, f16, o.data());
        ref_->attn_accum(w.data(), vp, stride, rows, hd, f16, orf.data());
        // Rows in two calls: bit for bit one call (each output is one chain in row order).
        const uint32_t cut = rows / 3;
        k_->attn_accum(w.data(), vp, stride, cut, hd, f16, split.data());
        k_->attn_accum(w.data() + cut, static_cast<const uint8_t*>(vp) + cut * stride * (f16 ? 2 : 4),
                       stride, rows - cut, hd, f16, split.data());
        ASSERT_EQ(o[hd], kSentinel);
        ASSERT_EQ(split[hd], kSentinel);
        for (uint32_t i = 0; i < hd; ++i) {
          double mag = fabs(start[i]), exact = start[i];
          for (uint32_t j = 0; j < rows; ++j) {
            const size_t e = size_t{j} * stride + i;
            const double term = double{w[j]} * (f16 ? fp16_to_f32(vh[e]) : vf[e]);
            mag += fabs(term);
            exact += term;
          }
          ASSERT_NEAR(o[i], orf[i], 1e-5 * mag) << f16 << " hd " << hd << " rows " << rows;
          ASSERT_NEAR(orf[i], exact, 1e-5 * mag) << f16 << " hd " << hd << " rows " << rows;
          ASSERT_EQ(split[i], o[i]) << f16 << " hd " << hd << " rows " << rows << " cut " << cut;
        }
      }
    }
  }
}

// The grouped entries (the queries of the heads sharing a KV head): bit for bit what the
// one-query entries give each query.
TEST_P(KernelsIsa, AttnGroupedEqualsPerQuery) {
  std::mt19937 rng(37);
  for (bool f16 : {false, true}) {
    for (uint32_t hd : {8u, 13u, 32u, 64u, 80u, 128u}) {
      for (uint32_t n_q : {1u, 2u, 3u, 4u, 5u, 7u}) {
        for (uint32_t rows : {0u, 1u, 3u, 4u, 9u, 21u}) {
          SCOPED_TRACE(testing::Message() << "f16 " << f16 << " hd " << hd << " n_q " << n_q
                                          << " rows " << rows);
          const uint32_t stride = hd * 3 + 1;
          const std::vector<float> kf = normal(rng, size_t{rows} * stride + 1, 1.0f);
          std::vector<uint16_t> kh(kf.size());
          for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_fp16(kf[i]);
          const void* kp = f16 ? static_cast<const void*>(kh.data()) : kf.data();
          const std::vector<float> q = normal(rng, size_t{n_q} * hd, 1.0f);
          const uint32_t out_stride = rows + 5;
          std::vector<float> grouped(size_t{n_q} * out_stride, kSentinel), one = grouped;
          k_->attn_dot_n(q.data(), n_q, kp, stride, rows, hd, f16, 0.3f, grouped.data(),
                         out_stride);
          for (uint32_t t = 0; t < n_q; ++t) {
            k_->attn_dot(q.data() + t * hd, kp, stride, rows, hd, f16, 0.3f,
                         one.data() + t * out_stride);
          }
          ASSERT_EQ(0, memcmp(grouped.data(), one.data(), grouped.size() * sizeof(float)));
          // Values: the weights (w_stride apart) over the same rows, onto random start values.
          const uint32_t w_stride = rows + 3;
          std::vector<float> w = normal(rng, size_t{n_q} * w_stride, 1.0f);
          const std::vector<float> start = normal(rng, size_t{n_q} * hd + 1, 1.0f);
          std::vector<float> go = start, oo = start;
          k_->attn_accum_n(w.data(), n_q, w_stride, kp, stride, rows, hd, f16, go.data());
          for (uint32_t t = 0; t < n_q; ++t) {
            k_->attn_accum(w.data() + t * w_stride, kp, stride, rows, hd, f16, oo.data() + t * hd);
          }
          ASSERT_EQ(0, memcmp(go.data(), oo.data(), go.size() * sizeof(float)));
        }
      }
    }
  }
}

// Tiled keys (attn_dot_tiled): tiles of kAttnTile positions, column i of position j at
// (j / 16) * tile_stride + i * 16 + j % 16, with other heads' columns between tiles (the ring's
// layout). Ranges that start and end inside tiles; the lanes outside hold NaN, which must not
// reach the kept scores.
TEST_P(KernelsIsa, AttnDotTiled) {
  std::mt19937 rng(41);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (bool f16 : {false, true}) {
    for (uint32_t hd : {2u, 8u, 14u, 64u, 80u, 128u, 256u}) {
      for (uint32_t n_q : {1u, 2u, 3u, 4u, 5u, 8u}) {
        for (auto [j0, j1] : {std::pair<uint32_t, uint32_t>{0, 1}, {0, 16}, {3, 16}, {0, 37},
                              {5, 70}, {16, 48}, {17, 31}, {7, 7}}) {
          SCOPED_TRACE(testing::Message() << "f16 " << f16 << " hd " << hd << " n_q " << n_q
                                          << " [" << j0 << ", " << j1 << ")");
          const uint32_t tiles = (j1 + kAttnTile - 1) / kAttnTile + 1;
          const uint32_t ts = hd * kAttnTile * 3;  // two other heads' columns between tiles
          std::vector<float> kf(size_t{tiles} * ts + 1, nan);
          for (uint32_t j = j0; j < j1; ++j) {
            for (uint32_t i = 0; i < hd; ++i) {
              kf[size_t{j / kAttnTile} * ts + i * kAttnTile + j % kAttnTile] =
                  std::normal_distribution<float>(0.0f, 1.0f)(rng);
            }
          }
          std::vector<uint16_t> kh(kf.size());
          for (size_t i = 0; i < kf.size(); ++i) kh[i] = f32_to_fp16(kf[i]);
          const void* kp = f16 ? static_cast<const void*>(kh.data()) : kf.data();
          const std::vector<float> q = normal(rng, size_t{n_q} * hd, 1.0f);
          const uint32_t os = j1 + 19;
          const float scale = 1.0f / sqrtf(static_cast<float>(hd));
          std::vector<float> o(size_t{n_q} * os, kSentinel), orf = o, one = o;
          k_->attn_dot_tiled(q.data(), n_q, kp, ts, j0, j1, hd, f16, scale, o.data(), os);
          ref_->attn_dot_tiled(q.data(), n_q, kp, ts, j0, j1, hd, f16, scale, orf.data(), os);
          for (uint32_t u = 0; u < n_q; ++u) {
            k_->attn_dot_tiled(q.data() + u * hd, 1, kp, ts, j0, j1, hd, f16, scale,
                               one.data() + u * os, 0);
          }
          ASSERT_EQ(0, memcmp(o.data(), one.data(), o.size() * sizeof(float)));
          for (uint32_t u = 0; u < n_q; ++u) {
            for (uint32_t j = 0; j < os; ++j) {
              const size_t at = size_t{u} * os + j;
              if (j < j0 || j >= j1) {
                ASSERT_EQ(o[at], kSentinel) << "wrote outside the range: q " << u << " j " << j;
                continue;
              }
              double mag = 0;
              for (uint32_t i = 0; i < hd; ++i) {
                const size_t e = size_t{j / kAttnTile} * ts + i * kAttnTile + j % kAttnTile;
                mag += fabs(double{q[u * hd + i]} * (f16 ? fp16_to_f32(kh[e]) : kf[e]));
              }
              ASSERT_NEAR(o[at], orf[at], 1e-5 * scale * mag + 1e-30) << "q " << u << " j " << j;
            }
          }
        }
      }
    }
  }
}

// q8 KV rows: (stride bytes) = head_dim int8 values at the row start, the row's f32 scale at
// scale_off, as the ring stores them (kv_ring.h); the stride is a multiple of 4 (the ring pads
// its rows so scales stay aligned) with other heads' bytes between rows.
struct Q8Rows {
  std::vector<uint32_t> storage;  // 4-byte aligned
  uint32_t stride = 0, scale_off = 0;
  uint8_t* base() { return reinterpret_cast<uint8_t*>(storage.data()); }
  const int8_t* values() { return reinterpret_cast<const int8_t*>(base()); }
  const float* scales() { return reinterpret_cast<const float*>(base() + scale_off); }
  int8_t value(uint32_t j, uint32_t i) { return values()[size_t{j} * stride + i]; }
  float scale(uint32_t j) {
    float f;
    memcpy(&f, base() + size_t{j} * stride + scale_off, 4);
    return f;
  }
};

Q8Rows random_q8_rows(std::mt19937& rng, uint32_t rows, uint32_t hd) {
  Q8Rows r;
  r.scale_off = (hd * 3 + 3) / 4 * 4;
  r.stride = r.scale_off + 8;
  r.storage.assign((size_t{rows} * r.stride + 3) / 4 + 1, 0);
  std::uniform_int_distribution<int> v(-127, 127);
  std::uniform_real_distribution<float> sc(1e-3f, 0.1f);
  for (uint32_t j = 0; j < rows; ++j) {
    uint8_t* row = r.base() + size_t{j} * r.stride;
    for (uint32_t i = 0; i < r.scale_off; ++i) row[i] = static_cast<uint8_t>(v(rng));
    const float s = sc(rng);
    memcpy(row + r.scale_off, &s, 4);
  }
  // Extremes in the first row: every code at its limits.
  if (rows > 0) {
    for (uint32_t i = 0; i < hd; ++i) r.base()[i] = static_cast<uint8_t>(i % 2 ? -127 : 127);
  }
  return r;
}

TEST_P(KernelsIsa, AttnDotQ8) {
  std::mt19937 rng(29);
  for (uint32_t hd : {1u, 7u, 8u, 13u, 16u, 32u, 64u, 80u, 128u, 256u}) {
    for (uint32_t rows : {0u, 1u, 2u, 3u, 4u, 5u, 9u, 37u, 130u}) {
      Q8Rows k = random_q8_rows(rng, rows, hd);
      const std::vector<float> q = normal(rng, hd, 1.0f);
      const float scale = 1.0f / sqrtf(static_cast<float>(hd));
      std::vector<float> o(rows + 1, kSentinel), orf(rows + 1, kSentinel);
      k_->attn_dot_q8(q.data(), k.values(), k.scales(), k.stride, rows, hd, scale, o.data());
      ref_->attn_dot_q8(q.data(), k.values(), k.scales(), k.stride, rows, hd, scale, orf.data());
      ASSERT_EQ(o[rows], kSentinel);
      for (uint32_t j = 0; j < rows; ++j) {
        double mag = 0, exact = 0;
        for (uint32_t i = 0; i < hd; ++i) {
          mag += fabs(double{q[i]} * k.value(j, i));
          exact += double{q[i]} * k.value(j, i);
        }
        const double s = double{k.scale(j)} * scale;
        ASSERT_NEAR(o[j], orf[j], 1e-5 * s * mag) << "hd " << hd << " rows " << rows;
        // And the reference is the math: scale * s_j * q . k_j.
        ASSERT_NEAR(orf[j], exact * s, 1e-5 * s * mag) << "hd " << hd << " rows " << rows;
      }
    }
  }
}

TEST_P(KernelsIsa, AttnAccumQ8) {
  std::mt19937 rng(31);
  for (uint32_t hd : {1u, 7u, 8u, 16u, 32u, 33u, 64u, 80u, 128u, 256u}) {
    for (uint32_t rows : {0u, 1u, 2u, 3u, 5u, 9u, 37u, 130u}) {
      Q8Rows v = random_q8_rows(rng, rows, hd);
      std::vector<float> w = normal(rng, rows, 1.0f);
      for (float& x : w) x = fabsf(x);
      std::vector<float> o = normal(rng, hd + 1, 1.0f);
      o[hd] = kSentinel;
      const std::vector<float> start = o;
      std::vector<float> orf = o, split = o;
      k_->attn_accum_q8(w.data(), v.values(), v.scales(), v.stride, rows, hd, o.data());
      ref_->attn_accum_q8(w.data(), v.values(), v.scales(), v.stride, rows, hd, orf.data());
      const uint32_t cut = rows / 3;
      k_->attn_accum_q8(w.data(), v.values(), v.scales(), v.stride, cut, hd, split.data());
      k_->attn_accum_q8(w.data() + cut, v.values() + size_t{cut} * v.stride,
                        reinterpret_cast<const float*>(v.base() + size_t{cut} * v.stride +
                                                       v.scale_off),
                        v.stride, rows - cut, hd, split.data());
      ASSERT_EQ(o[hd], kSentinel);
      ASSERT_EQ(split[hd], kSentinel);
      for (uint32_t i = 0; i < hd; ++i) {
        ASSERT_EQ(split[i], o[i]) << "hd " << hd << " rows " << rows << " cut " << cut;
        double mag = fabs(start[i]), exact = start[i];
        for (uint32_t j = 0; j < rows; ++j) {
          const double term = double{w[j]} * v.scale(j) * v.value(j, i);
          mag += fabs(term);
          exact += term;
        }
        ASSERT_NEAR(o[i], orf[i], 1e-5 * mag) << "hd " << hd << " rows " << rows;
        ASSERT_NEAR(orf[i], exact, 1e-5 * mag) << "hd " << hd << " rows " << rows;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Isa, KernelsIsa, ::testing::ValuesIn(isa_names()),
                         [](const ::testing::TestParamInfo<std::string>& p) { return p.param; });
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(KernelsIsa);

TEST(KernelsSelect, OverridesAndAvailability) {
  const CpuFeatures cpu = cpu_features_detect();
  char buf[256];
  cpu_features_describe(cpu, buf, sizeof buf);
  const KernelTable* avail[16];
  const size_t n = kernels_available(cpu, avail, 16);
  ASSERT_GE(n, 1u);
  std::string list;
  for (size_t i = 0; i < n; ++i) list += std::string(" ") + avail[i]->name;
  printf("cpu: %s\navailable (best first):%s\n", buf, list.c_str());
  EXPECT_STREQ(avail[n - 1]->name, "ref");
  EXPECT_EQ(kernels_select(cpu, nullptr), avail[0]);
  EXPECT_EQ(kernels_select(cpu, ""), avail[0]);
  EXPECT_EQ(kernels_select(cpu, "ref"), kernels_ref());
  EXPECT_EQ(kernels_select(cpu, "no-such-isa"), nullptr);
  for (size_t i = 0; i < n; ++i) EXPECT_EQ(kernels_select(cpu, avail[i]->name), avail[i]);
  // A CPU with nothing: only ref.
  const CpuFeatures none;
  EXPECT_EQ(kernels_select(none, nullptr), kernels_ref());
  EXPECT_EQ(kernels_available(none, avail, 16), 1u);
  const KernelTable* all[16];
  const size_t nc = kernels_compiled(all, 16);
  for (size_t i = 0; i + 1 < nc; ++i) EXPECT_EQ(kernels_select(none, all[i]->name), nullptr);
  // Every table fills every entry.
  for (size_t i = 0; i < nc; ++i) {
    const KernelTable* t = all[i];
    EXPECT_TRUE(t->matmul_f32 && t->matmul_f16 && t->matmul_q8 && t->matmul_q4 && t->matmul_q4k && t->matmul_q6k && t->matmul_q5k && t->matmul_q5 &&
                t->matmul_q4_1 && t->matmul_q5_1 &&
                t->quantize_acts && t->rmsnorm && t->softmax && t->swiglu && t->attn_dot &&
                t->attn_accum && t->attn_dot_q8 && t->attn_accum_q8 && t->attn_dot_n &&
                t->attn_accum_n && t->attn_dot_tiled && t->f32_to_f16)
        << t->name;
  }
}
