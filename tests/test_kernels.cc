// Reference kernels and the weight encodings they read: fp16 conversion, q8/q4 quantizers,
// and every matmul against a double-precision oracle over the dequantized values.
#include <math.h>
#include <string.h>

#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "kernels/scalar.h"
#include "kernels/kernels.h"
#include "quant.h"

using namespace ringlm::internal;

TEST(Fp16, EveryHalfRoundTrips) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = fp16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(fp16_to_f32(f32_to_fp16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_fp16(f), h) << h;
  }
}

TEST(Fp16, RoundsToNearestEven) {
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3c00);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_fp16(65520.0f), 0x7c00);        // rounds up to inf
  EXPECT_EQ(f32_to_fp16(1.0f + 1.0f / 2048), 0x3c00);  // tie -> even
  EXPECT_EQ(f32_to_fp16(1.0f + 3.0f / 2048), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(f32_to_fp16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_fp16(-0.0f), 0x8000);
}

static std::vector<float> random_vec(size_t n, uint32_t seed, float sd = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, sd);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

static double rel_rmse(const std::vector<float>& a, const std::vector<float>& b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (a[i] - b[i]) * static_cast<double>(a[i] - b[i]);
    r += a[i] * static_cast<double>(a[i]);
  }
  return sqrt(e / r);
}

TEST(Quant, Q8AndQ4RowErrorsAreBounded) {
  for (size_t cols : {32u, 172u, 576u}) {
    const std::vector<float> x = random_vec(cols, static_cast<uint32_t>(cols));
    const size_t cp = padded_cols(cols);
    std::vector<int8_t> q8(cp);
    std::vector<uint8_t> q4(cp / 2);
    std::vector<uint16_t> s(cp / 32);
    std::vector<float> back(cols);
    quantize_row_q8(x.data(), cols, q8.data(), s.data());
    for (size_t i = cols; i < cp; ++i) EXPECT_EQ(q8[i], 0) << "padding must be zero";
    dequantize_row_q8(q8.data(), s.data(), cols, back.data());
    EXPECT_LT(rel_rmse(x, back), 0.01) << cols;
    quantize_row_q4(x.data(), cols, q4.data(), s.data());
    dequantize_row_q4(q4.data(), s.data(), cols, back.data());
    EXPECT_LT(rel_rmse(x, back), 0.15) << cols;
  }
}

// Rows of 300 values near float's limit (the K-quant fits' least-squares sums overflow: inf /
// inf = NaN) and subnormals.
static std::vector<std::vector<float>> extreme_rows() {
  const float big = 3.0e38f;
  const float patterns[][4] = {{big, -big, big, -big}, {big, big, big, big},
                               {-big, 0.0f, 1.0f, big}, {1e-45f, -1e-45f, 0.0f, 1e-40f}};
  std::vector<std::vector<float>> rows;
  for (const auto& p : patterns) {
    rows.emplace_back(300);
    for (size_t i = 0; i < rows.back().size(); ++i) rows.back()[i] = p[i % 4];
  }
  return rows;
}

// q4k's fit on extreme rows: every level stays defined (UBSan checks the float -> integer
// casts) and the row decodes.
TEST(Quant, Q4kSurvivesValuesNearFloatsLimit) {
  for (const std::vector<float>& x : extreme_rows()) {
    std::vector<uint8_t> qs(padded_cols(x.size()) / 2), subs(16 * q4k_supers(x.size()));
    std::vector<uint16_t> dm(2 * q4k_supers(x.size()));
    quantize_row_q4k(x.data(), x.size(), qs.data(), dm.data(), subs.data());
    for (uint8_t l : subs) EXPECT_LE(l, 63);
    std::vector<float> back(x.size());
    dequantize_row_q4k(qs.data(), dm.data(), subs.data(), x.size(), back.data());
  }
}

// q5 (GGUF Q5_0's rule: the largest magnitude maps to -16): error about half q4's, the padding
// q = 16 (value 0), and NaN / near-float-limit rows stay defined (UBSan checks the casts).
TEST(Quant, Q5RowErrorIsHalfQ4sAndPaddingIsZero) {
  for (size_t cols : {32u, 172u, 576u}) {
    const std::vector<float> x = random_vec(cols, static_cast<uint32_t>(cols) + 9);
    const size_t cp = padded_cols(cols);
    std::vector<uint8_t> qs(cp / 2), high(cp / 8), qs4(cp / 2);
    std::vector<uint16_t> s(cp / 32), s4(cp / 32);
    std::vector<float> back(cols), back4(cols);
    quantize_row_q5(x.data(), cols, qs.data(), high.data(), s.data());
    dequantize_row_q5(qs.data(), high.data(), s.data(), cols, back.data());
    quantize_row_q4(x.data(), cols, qs4.data(), s4.data());
    dequantize_row_q4(qs4.data(), s4.data(), cols, back4.data());
    EXPECT_LT(rel_rmse(x, back), 0.08) << cols;
    EXPECT_LT(rel_rmse(x, back), 0.6 * rel_rmse(x, back4)) << cols;
    for (size_t c = cols; c < cp; ++c)
      EXPECT_EQ(q5k_level(qs.data() + (c / 32) * 16, high.data() + (c / 32) * 4, c % 32), 16) << c;
  }
  for (std::vector<float> x : extreme_rows()) {
    x[5] = NAN;
    const size_t cp = padded_cols(x.size());
    std::vector<uint8_t> qs(cp / 2), high(cp / 8);
    std::vector<uint16_t> s(cp / 32);
    quantize_row_q5(x.data(), x.size(), qs.data(), high.data(), s.data());
    EXPECT_EQ(q5k_level(qs.data(), high.data(), 5), 16);  // NaN quantizes as 0
  }
}

// One row of q4_1 or q5_1: its planes (schema/model.fbs) and the values they decode to.
struct AsymRow {
  std::vector<uint8_t> qs, high;
  std::vector<uint16_t> dm;  // (groups, 2) d, m
  std::vector<float> back;
  AsymRow(const std::vector<float>& x, bool five)
      : qs(padded_cols(x.size()) / 2), high(padded_cols(x.size()) / 8),
        dm(padded_cols(x.size()) / 16), back(x.size()) {
    if (five) {
      quantize_row_q5_1(x.data(), x.size(), qs.data(), high.data(), dm.data());
      dequantize_row_q5_1(qs.data(), high.data(), dm.data(), x.size(), back.data());
    } else {
      quantize_row_q4_1(x.data(), x.size(), qs.data(), dm.data());
      dequantize_row_q4_1(qs.data(), dm.data(), x.size(), back.data());
    }
  }
  int level(size_t c) const {
    return q5k_level(qs.data() + (c / 32) * 16, high.data() + (c / 32) * 4, c % 32);
  }
};

// q4_1 / q5_1 (GGUF Q4_1's / Q5_1's rule: m = min, d = range / 15 or 31): the error on Gaussian
// rows is 4- / 5-bit rounding's; each group's min and max are stored exactly up to f16 rounding;
// rows of values far from 0 (where a symmetric grid spends its levels on the sign) keep their
// resolution; padding holds q = 0; NaN quantizes as q = 0 and near-float-limit rows stay
// defined (UBSan checks the casts).
TEST(Quant, Q4_1AndQ5_1RowErrorsAndPadding) {
  for (bool five : {false, true}) {
    SCOPED_TRACE(five ? "q5_1" : "q4_1");
    for (size_t cols : {32u, 172u, 576u}) {
      const std::vector<float> x = random_vec(cols, static_cast<uint32_t>(cols) + 11);
      const AsymRow q(x, five);
      EXPECT_LT(rel_rmse(x, q.back), five ? 0.05 : 0.1) << cols;
      for (size_t c = 0; c < cols; ++c) {
        const float d = fp16_to_f32(q.dm[2 * (c / 32)]);
        EXPECT_LE(fabsf(q.back[c] - x[c]), 0.5f * d * 1.01f + 1e-3f * fabsf(x[c])) << c;
      }
      for (size_t c = cols; c < padded_cols(cols); ++c) EXPECT_EQ(q.level(c), 0) << c;
    }
    // Values in [10, 10.5]: the asymmetric grid spends every level on the range.
    std::vector<float> x(64);
    for (size_t i = 0; i < x.size(); ++i) x[i] = 10.0f + 0.5f * static_cast<float>(i % 32) / 31.0f;
    const AsymRow q(x, five);
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(q.back[i], x[i], five ? 0.012 : 0.025) << i;
    for (std::vector<float> e : extreme_rows()) {
      e[5] = NAN;
      const AsymRow r(e, five);
      EXPECT_EQ(r.level(5), 0);
      for (size_t c = 0; c < e.size(); ++c) EXPECT_LE(r.level(c), five ? 31 : 15);
    }
  }
}

// One row of q5k: its planes (schema/model.fbs) and the values they decode to.
struct Q5kRow {
  std::vector<uint8_t> qs, high, subs;
  std::vector<uint16_t> dm;
  std::vector<float> back;
  explicit Q5kRow(const std::vector<float>& x)
      : qs(padded_cols(x.size()) / 2), high(padded_cols(x.size()) / 8), subs(16 * q4k_supers(x.size())),
        dm(2 * q4k_supers(x.size())), back(x.size()) {
    quantize_row_q5k(x.data(), x.size(), qs.data(), high.data(), dm.data(), subs.data());
    dequantize_row_q5k(qs.data(), high.data(), dm.data(), subs.data(), x.size(), back.data());
  }
};

// q5k halves q4k's step: on Gaussian rows its error is well below q4k's (~4 % against ~7 %), and
// the padding past cols holds level 0 (nibble and fifth bit).
TEST(Quant, Q5kRowErrorIsBelowQ4ksAndPaddingIsZero) {
  for (size_t cols : {32u, 172u, 300u, 576u}) {
    const std::vector<float> x = random_vec(cols, static_cast<uint32_t>(cols) + 5);
    const Q5kRow q(x);
    std::vector<uint8_t> qs4(padded_cols(cols) / 2), subs4(16 * q4k_supers(cols));
    std::vector<uint16_t> dm4(2 * q4k_supers(cols));
    std::vector<float> back4(cols);
    quantize_row_q4k(x.data(), cols, qs4.data(), dm4.data(), subs4.data());
    dequantize_row_q4k(qs4.data(), dm4.data(), subs4.data(), cols, back4.data());
    const double e5 = rel_rmse(x, q.back), e4 = rel_rmse(x, back4);
    EXPECT_LT(e5, 0.05) << cols;
    EXPECT_LT(e5, 0.7 * e4) << cols;
    for (size_t c = cols; c < padded_cols(cols); ++c)
      EXPECT_EQ(q5k_level(q.qs.data() + (c / 32) * 16, q.high.data() + (c / 32) * 4, c % 32), 0) << c;
  }
}

// q5k's fit on extreme rows: every level stays defined (UBSan checks the float -> integer
// casts) and the row decodes.
TEST(Quant, Q5kSurvivesValuesNearFloatsLimit) {
  for (const std::vector<float>& x : extreme_rows()) {
    const Q5kRow q(x);
    for (uint8_t l : q.subs) EXPECT_LE(l, 63);
  }
}

// y(n, rows) against the float64 products of the dequantized weights wd(rows, cols) and the
// quantized activations (xq, xs; row stride padded_cols(cols)), within 1e-5 of each sum's
// magnitude.
static void expect_matches_double_oracle(const std::vector<float>& y, const std::vector<float>& wd,
                                         const std::vector<int8_t>& xq, const std::vector<float>& xs,
                                         uint32_t rows, uint32_t cols, uint32_t n) {
  const uint32_t cp = static_cast<uint32_t>(padded_cols(cols));
  for (uint32_t t = 0; t < n; ++t) {
    for (uint32_t r = 0; r < rows; ++r) {
      double ref = 0, mag = 0;
      for (uint32_t c = 0; c < cols; ++c) {
        const double xv = xq[t * cp + c] * static_cast<double>(xs[t * cp / 32 + c / 32]);
        ref += wd[r * cols + c] * xv;
        mag += fabs(wd[r * cols + c] * xv);
      }
      EXPECT_NEAR(y[t * rows + r], ref, 1e-5 * mag + 1e-30) << cols << " " << t << " " << r;
    }
  }
}

// The reference Q5K matmul against a double oracle over the dequantized values and activations.
TEST(KernelsRef, Q5kMatmulMatchesDoubleOracle) {
  const KernelTable* k = kernels_ref();
  for (uint32_t cols : {32u, 172u, 300u, 1000u}) {
    const uint32_t rows = 11, n = 3;
    const uint32_t cp = static_cast<uint32_t>(padded_cols(cols)), supers =
        static_cast<uint32_t>(q4k_supers(cols));
    const std::vector<float> w = random_vec(size_t{rows} * cols, cols + 7, 0.1f);
    const std::vector<float> x = random_vec(size_t{n} * cols, cols + 8);
    std::vector<int8_t> xq(n * cp);
    std::vector<float> xs(n * cp / 32), sums(n * cp / 32);
    k->quantize_acts(x.data(), n, cols, cp, xq.data(), xs.data());
    for (size_t g = 0; g < sums.size(); ++g) {  // what the matmul layer computes for Q4K / Q5K
      int32_t s = 0;
      for (uint32_t j = 0; j < 32; ++j) s += xq[g * 32 + j];
      sums[g] = xs[g] * static_cast<float>(s);
    }
    std::vector<uint8_t> qs(size_t{rows} * cp / 2), high(size_t{rows} * cp / 8),
        subs(size_t{rows} * supers * 16);
    std::vector<uint16_t> dm(size_t{rows} * supers * 2);
    std::vector<float> wd(size_t{rows} * cols);
    for (uint32_t r = 0; r < rows; ++r) {
      const Q5kRow q(std::vector<float>(w.begin() + size_t{r} * cols, w.begin() + size_t{r + 1} * cols));
      memcpy(qs.data() + size_t{r} * cp / 2, q.qs.data(), cp / 2);
      memcpy(high.data() + size_t{r} * cp / 8, q.high.data(), cp / 8);
      memcpy(dm.data() + size_t{r} * supers * 2, q.dm.data(), supers * 4);
      memcpy(subs.data() + size_t{r} * supers * 16, q.subs.data(), supers * 16);
      memcpy(wd.data() + size_t{r} * cols, q.back.data(), cols * 4);
    }
    WeightView v;
    v.type = WeightType::Q5K;
    v.rows = rows;
    v.cols = cols;
    v.row_stride = cp;
    v.data = qs.data();
    v.high = high.data();
    v.scales = dm.data();
    v.subs = subs.data();
    std::vector<float> y(size_t{n} * rows, -1.0f);
    k->matmul_q5k(v, QuantActs{xq.data(), xs.data(), cp, sums.data()}, n, y.data(), 0, rows);
    expect_matches_double_oracle(y, wd, xq, xs, rows, cols, n);
  }
}

// One row of q6k: its planes (schema/model.fbs) and the values they decode to.
struct Q6kRow {
  std::vector<uint8_t> qs, high;
  std::vector<uint16_t> d;
  std::vector<int8_t> sc;
  std::vector<float> back;
  explicit Q6kRow(const std::vector<float>& x)
      : qs(padded_cols(x.size()) / 2), high(padded_cols(x.size()) / 4), d(q6k_supers(x.size())),
        sc(16 * q6k_supers(x.size())), back(x.size()) {
    quantize_row_q6k(x.data(), x.size(), qs.data(), high.data(), d.data(), sc.data());
    dequantize_row_q6k(qs.data(), high.data(), d.data(), sc.data(), x.size(), back.data());
  }
};

// q6k's error on Gaussian rows is 6-bit rounding's (step ~ 2 * 1.8 sd / 63 per 16 values: ~1.7 %
// relative RMSE; test_gguf_types compares it with llama.cpp's Q6_K on the same weights); padding
// decodes to 0 (q = 32) and missing groups' scales are 0.
TEST(Quant, Q6kRowErrorIsBoundedAndPaddingIsZero) {
  for (size_t cols : {16u, 32u, 172u, 300u, 576u, 1000u}) {
    const std::vector<float> x = random_vec(cols, static_cast<uint32_t>(cols) + 6);
    const Q6kRow q(x);
    EXPECT_LT(rel_rmse(x, q.back), 0.02) << cols;
    for (size_t c = cols; c < padded_cols(cols); ++c) {
      EXPECT_EQ(q6k_level(q.qs.data() + (c / 32) * 16, q.high.data() + (c / 32) * 8, c % 32), 32)
          << cols << " padding " << c;
    }
    const size_t groups = padded_cols(cols) / 32;
    for (size_t g = groups; g < 8 * q6k_supers(cols); ++g) {
      EXPECT_EQ(q.sc[2 * g], 0);
      EXPECT_EQ(q.sc[2 * g + 1], 0);
    }
  }
}

// q6k's fit on extreme rows: every level stays defined (UBSan checks the float -> integer
// casts) and the row decodes.
TEST(Quant, Q6kSurvivesValuesNearFloatsLimit) {
  for (const std::vector<float>& x : extreme_rows()) {
    const Q6kRow q(x);
    for (size_t c = 0; c < x.size(); ++c) {
      const int l = q6k_level(q.qs.data() + (c / 32) * 16, q.high.data() + (c / 32) * 8, c % 32);
      EXPECT_TRUE(l >= 0 && l <= 63);
    }
  }
}

// The reference Q6K matmul against a double oracle over the dequantized values and activations.
TEST(KernelsRef, Q6kMatmulMatchesDoubleOracle) {
  const KernelTable* k = kernels_ref();
  for (uint32_t cols : {32u, 172u, 300u, 1000u}) {
    const uint32_t rows = 11, n = 3;
    const uint32_t cp = static_cast<uint32_t>(padded_cols(cols)), supers =
        static_cast<uint32_t>(q6k_supers(cols));
    const std::vector<float> w = random_vec(size_t{rows} * cols, cols, 0.1f);
    const std::vector<float> x = random_vec(size_t{n} * cols, cols + 1);
    std::vector<int8_t> xq(n * cp);
    std::vector<float> xs(n * cp / 32);
    k->quantize_acts(x.data(), n, cols, cp, xq.data(), xs.data());
    std::vector<uint8_t> qs(size_t{rows} * cp / 2), high(size_t{rows} * cp / 4);
    std::vector<uint16_t> d(size_t{rows} * supers);
    std::vector<int8_t> sc(size_t{rows} * supers * 16);
    std::vector<float> wd(size_t{rows} * cols);
    for (uint32_t r = 0; r < rows; ++r) {
      const Q6kRow q(std::vector<float>(w.begin() + size_t{r} * cols, w.begin() + size_t{r + 1} * cols));
      memcpy(qs.data() + size_t{r} * cp / 2, q.qs.data(), cp / 2);
      memcpy(high.data() + size_t{r} * cp / 4, q.high.data(), cp / 4);
      memcpy(d.data() + size_t{r} * supers, q.d.data(), supers * 2);
      memcpy(sc.data() + size_t{r} * supers * 16, q.sc.data(), supers * 16);
      memcpy(wd.data() + size_t{r} * cols, q.back.data(), cols * 4);
    }
    WeightView v;
    v.type = WeightType::Q6K;
    v.rows = rows;
    v.cols = cols;
    v.row_stride = cp;
    v.data = qs.data();
    v.high = high.data();
    v.scales = d.data();
    v.subs = reinterpret_cast<const uint8_t*>(sc.data());
    std::vector<float> y(size_t{n} * rows, -1.0f);
    k->matmul_q6k(v, QuantActs{xq.data(), xs.data(), cp}, n, y.data(), 0, rows);
    expect_matches_double_oracle(y, wd, xq, xs, rows, cols, n);
  }
}

// The reference Q4_1 / Q5_1 matmuls against a double oracle over the dequantized values and
// activations (the min term through QuantActs.sums, as the matmul layer fills it).
TEST(KernelsRef, Q4_1AndQ5_1MatmulsMatchDoubleOracle) {
  const KernelTable* k = kernels_ref();
  for (bool five : {false, true}) {
    SCOPED_TRACE(five ? "q5_1" : "q4_1");
    for (uint32_t cols : {32u, 172u, 1000u}) {
      const uint32_t rows = 11, n = 3;
      const uint32_t cp = static_cast<uint32_t>(padded_cols(cols));
      // Offset weights: the min term matters.
      std::vector<float> w = random_vec(size_t{rows} * cols, cols + 17, 0.1f);
      for (float& v : w) v += 0.05f;
      const std::vector<float> x = random_vec(size_t{n} * cols, cols + 18);
      std::vector<int8_t> xq(n * cp);
      std::vector<float> xs(n * cp / 32), sums(n * cp / 32);
      k->quantize_acts(x.data(), n, cols, cp, xq.data(), xs.data());
      for (size_t g = 0; g < sums.size(); ++g) {
        int32_t sum = 0;
        for (uint32_t j = 0; j < 32; ++j) sum += xq[g * 32 + j];
        sums[g] = xs[g] * static_cast<float>(sum);
      }
      std::vector<uint8_t> qs(size_t{rows} * cp / 2), high(size_t{rows} * cp / 8);
      std::vector<uint16_t> dm(size_t{rows} * cp / 16);
      std::vector<float> wd(size_t{rows} * cols);
      for (uint32_t r = 0; r < rows; ++r) {
        const AsymRow q(std::vector<float>(w.begin() + size_t{r} * cols, w.begin() + size_t{r + 1} * cols),
                        five);
        memcpy(qs.data() + size_t{r} * cp / 2, q.qs.data(), cp / 2);
        memcpy(high.data() + size_t{r} * cp / 8, q.high.data(), cp / 8);
        memcpy(dm.data() + size_t{r} * cp / 16, q.dm.data(), cp / 8);
        memcpy(wd.data() + size_t{r} * cols, q.back.data(), cols * 4);
      }
      WeightView v;
      v.type = five ? WeightType::Q5_1 : WeightType::Q4_1;
      v.rows = rows;
      v.cols = cols;
      v.row_stride = cp;
      v.data = qs.data();
      v.high = five ? high.data() : nullptr;
      v.scales = dm.data();
      std::vector<float> y(size_t{n} * rows, -1.0f);
      (five ? k->matmul_q5_1 : k->matmul_q4_1)(v, QuantActs{xq.data(), xs.data(), cp, sums.data()}, n,
                                                y.data(), 0, rows);
      expect_matches_double_oracle(y, wd, xq, xs, rows, cols, n);
    }
  }
}

TEST(Quant, Q4LargestMagnitudeMapsToMinusEight) {
  std::vector<float> x(32, 0.5f);
  x[7] = -3.0f;
  std::vector<uint8_t> q(16);
  uint16_t s;
  quantize_row_q4(x.data(), 32, q.data(), &s);
  EXPECT_EQ(q4_get(q.data(), 7), -8);
  EXPECT_FLOAT_EQ(fp16_to_f32(s) * -8.0f, -3.0f);
}

// Every matmul against a double oracle over exactly the values the kernel sees.
TEST(KernelsRef, MatmulsMatchDoubleOracle) {
  const KernelTable* k = kernels_ref();
  const uint32_t rows = 37, cols = 172, n = 3;
  const std::vector<float> w = random_vec(rows * cols, 1, 0.1f);
  const std::vector<float> x = random_vec(n * cols, 2);
  const uint32_t cp = static_cast<uint32_t>(padded_cols(cols));
  // Activations as the kernel quantizes them.
  std::vector<int8_t> xq(n * cp);
  std::vector<float> xs(n * cp / 32);
  k->quantize_acts(x.data(), n, cols, cp, xq.data(), xs.data());
  for (int type = 0; type < 4; ++type) {
    std::vector<uint8_t> data(rows * cols * 4 + 64);
    std::vector<uint16_t> scales(rows * cp / 32);
    std::vector<float> wd(rows * cols);  // dequantized weights
    WeightView v;
    v.rows = rows;
    v.cols = cols;
    v.type = static_cast<WeightType>(type);
    v.data = data.data();
    v.scales = scales.data();
    for (uint32_t r = 0; r < rows; ++r) {
      const float* wr = w.data() + r * cols;
      switch (v.type) {
        case WeightType::F32:
          memcpy(data.data() + r * cols * 4, wr, cols * 4);
          memcpy(wd.data() + r * cols, wr, cols * 4);
          break;
        case WeightType::F16:
          for (uint32_t c = 0; c < cols; ++c) {
            uint16_t h = f32_to_fp16(wr[c]);
            memcpy(data.data() + (r * cols + c) * 2, &h, 2);
            wd[r * cols + c] = fp16_to_f32(h);
          }
          break;
        case WeightType::Q8:
          quantize_row_q8(wr, cols, reinterpret_cast<int8_t*>(data.data()) + r * cp,
                          scales.data() + r * cp / 32);
          dequantize_row_q8(reinterpret_cast<int8_t*>(data.data()) + r * cp,
                            scales.data() + r * cp / 32, cols, wd.data() + r * cols);
          break;
        case WeightType::Q4:
          quantize_row_q4(wr, cols, data.data() + r * cp / 2, scales.data() + r * cp / 32);
          dequantize_row_q4(data.data() + r * cp / 2, scales.data() + r * cp / 32, cols,
                            wd.data() + r * cols);
          break;
      }
    }
    v.row_stride = (v.type == WeightType::Q8 || v.type == WeightType::Q4) ? cp : cols;
    std::vector<float> y(n * rows, -1.0f);
    const QuantActs qa{xq.data(), xs.data(), cp};
    switch (v.type) {
      case WeightType::F32: k->matmul_f32(v, x.data(), n, y.data(), 0, rows); break;
      case WeightType::F16: k->matmul_f16(v, x.data(), n, y.data(), 0, rows); break;
      case WeightType::Q8: k->matmul_q8(v, qa, n, y.data(), 0, rows); break;
      case WeightType::Q4: k->matmul_q4(v, qa, n, y.data(), 0, rows); break;
    }
    const bool quant_in = v.type == WeightType::Q8 || v.type == WeightType::Q4;
    for (uint32_t t = 0; t < n; ++t) {
      for (uint32_t r = 0; r < rows; ++r) {
        double ref = 0;
        for (uint32_t c = 0; c < cols; ++c) {
          const double xv = quant_in ? xq[t * cp + c] * static_cast<double>(xs[t * cp / 32 + c / 32])
                                     : x[t * cols + c];
          ref += wd[r * cols + c] * xv;
        }
        EXPECT_NEAR(y[t * rows + r], ref, 1e-4 * (1 + fabs(ref))) << type << " " << t << " " << r;
      }
    }
  }
}

TEST(KernelsRef, RowRangeWritesOnlyItsRows) {
  const KernelTable* k = kernels_ref();
  const std::vector<float> w = random_vec(8 * 32, 3), x = random_vec(32, 4);
  WeightView v;
  v.data = w.data();
  v.rows = 8;
  v.cols = 32;
  v.row_stride = 32;
  std::vector<float> y(8, 123.0f);
  k->matmul_f32(v, x.data(), 1, y.data(), 2, 5);
  for (int r = 0; r < 8; ++r) {
    if (r < 2 || r >= 5) EXPECT_EQ(y[r], 123.0f);
    else EXPECT_NE(y[r], 123.0f);
  }
}

TEST(KernelsRef, SoftmaxRmsnormSwiglu) {
  const KernelTable* k = kernels_ref();
  float x[5] = {4, 3, 2, 1, 0.5f};
  // Returns log(e^4 + e^3 + e^2 + e^1 + e^0.5) = 4.45945
  EXPECT_NEAR(k->softmax(x, 5), 4.45945, 1e-5);
  EXPECT_NEAR(x[0], 0.632, 1e-3);
  EXPECT_NEAR(x[4], 0.019, 1e-3);
  float v[4] = {1, -2, 3, -4}, w[4] = {1, 1, 2, 2}, o[4];
  k->rmsnorm(o, v, w, 4, 0.0f);
  const float rms = sqrtf((1 + 4 + 9 + 16) / 4.0f);
  EXPECT_NEAR(o[2], 2 * 3 / rms, 1e-6);
  float a[2] = {0.0f, 2.0f}, b[2] = {5.0f, 3.0f};
  k->swiglu(a, b, 2);
  EXPECT_EQ(a[0], 0.0f);
  EXPECT_NEAR(a[1], 2.0f / (1.0f + expf(-2.0f)) * 3.0f, 1e-6);
}
