// Every common GGUF tensor type (issue #18): the converter's GGUF reader dequantizes F32, F16,
// BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL and IQ4_XS bit for bit
// as ggml does. Checked against ../shared/gguf-types: for every tensor of every file there, the
// dumped rows (first and last 16) must be identical and the SHA-256 of the whole dequantized
// tensor must equal the recorded one (gguf-py's values, which the data set checked against
// llama.cpp's own dequantize_row_* with 0 differences). Types it does not read (IQ1 / IQ2 / IQ3,
// ternary, Q8_K, integers, unknown numbers) are refused naming the tensor and the type; hostile
// blocks (NaN / infinite scales, truncated data, rows not a multiple of the block) get named
// errors.
//
// `--quant keep` stores every tensor in the smallest encoding that holds it exactly: the model
// it writes holds bit-identical values (every file of the set, and each type synthetically), and
// TinyStories-656K's llama.cpp presets run like llama.cpp runs them: perplexity within 1 % of
// llama.cpp's figure, greedy text equal to llama.cpp's up to the first near-tie (see
// GreedyTextFollowsLlamaCpp for why that is what can be asserted) and for at least 100
// characters (#18's bar).
#include <dirent.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/ggml_quants.h"
#include "convert/readers.h"
#include "ggml_blocks.h"
#include "gtest/gtest.h"
#include "kernels/scalar.h"
#include "model.h"
#include "model_writers.h"
#include "quant.h"
#include "sha256.h"
#include "tensor_values.h"
#include "testing.h"

namespace {

using namespace ringlm::internal;
using ringlm_test::emulated;
using ringlm_test::light;
using ringlm_test::tensor_values;
using fb::DType;
using ringlm_test::GgmlBlockLayout;
using ringlm_test::GgufWriter;
using ringlm_test::sanitized;
using ringlm_test::write_temp;

// Under qemu (the ARM suites) and the sanitizers the sweeps are lighter: the dumped rows and the
// extremes only, the TinyStories files only, three presets' texts; the release build checks
// everything (tests/test_speculative.cc and test_grammar_session.cc decide the same way).

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}


// Units in the last place between two floats of the same sign (for messages).
int64_t ulp_distance(float a, float b) {
  int32_t ia, ib;
  memcpy(&ia, &a, 4);
  memcpy(&ib, &b, 4);
  if (ia < 0) ia = static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(ia));
  if (ib < 0) ib = static_cast<int32_t>(0x80000000u - static_cast<uint32_t>(ib));
  return std::llabs(static_cast<int64_t>(ia) - ib);
}

// ---- the reference sweep ----------------------------------------------------------------------

struct TypeTally {
  uint32_t files = 0, tensors = 0;
  uint64_t values_compared = 0, values_differing = 0;
  uint32_t digests_equal = 0;
};

// Checks every tensor of `base`.gguf against `base`.dequant.{json,f32}; adds to `tally`.
void check_file(const std::string& base, bool full, std::map<std::string, TypeTally>* tally) {
  SCOPED_TRACE(base);
  std::string json_text, dump;
  ASSERT_TRUE(ringlm_test::read_file(base + ".dequant.json", &json_text));
  ASSERT_TRUE(ringlm_test::read_file(base + ".dequant.f32", &dump));
  const nlohmann::json ref = nlohmann::json::parse(json_text);
  std::vector<conv::GgufTensor> tensors;
  std::string err;
  ASSERT_TRUE(conv::read_gguf_tensors(base + ".gguf", &tensors, &err)) << err;
  ASSERT_EQ(tensors.size(), ref.size());
  std::set<std::string> types_in_file;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const conv::GgufTensor& t = tensors[i];
    const nlohmann::json& r = ref[i];
    SCOPED_TRACE(t.name);
    ASSERT_EQ(t.name, r["name"].get<std::string>());  // the file's own order
    const std::string type = r["type"].get<std::string>();
    EXPECT_EQ(conv::ggml_type_name(t.type), type);
    EXPECT_EQ(t.type, r["type_id"].get<uint32_t>());
    EXPECT_EQ(t.ne, r["shape"].get<std::vector<uint64_t>>());
    std::vector<float> v;
    if (!conv::ggml_type_readable(t.type)) {
      // IQ3_XXS / IQ3_S (the set's extras): refused, naming the tensor and the type.
      EXPECT_FALSE(t.load_f32(&v, &err));
      EXPECT_TRUE(contains(err, "tensor '" + t.name + "' has type " + type +
                                    ", which the converter does not read"))
          << err;
      continue;
    }
    ASSERT_TRUE(t.load_f32(&v, &err)) << err;
    const uint64_t n = r["n_elements"].get<uint64_t>();
    ASSERT_EQ(v.size(), n);
    TypeTally& ty = (*tally)[type];
    ++ty.tensors;
    types_in_file.insert(type);
    // The dumped rows, value by value (bit patterns).
    const uint64_t row = t.ne[0];
    uint64_t at = r["offset_floats"].get<uint64_t>();
    ASSERT_LE((at + r["n_floats"].get<uint64_t>()) * 4, dump.size());
    uint64_t differing = 0, first_bad = n;
    for (const auto& range : r["rows"]) {
      for (uint64_t rr = range[0].get<uint64_t>(); rr < range[1].get<uint64_t>(); ++rr) {
        for (uint64_t c = 0; c < row; ++c, ++at) {
          const float want = [&] {
            float f;
            memcpy(&f, &dump[static_cast<size_t>(at * 4)], 4);
            return f;
          }();
          const float got = v[rr * row + c];
          if (memcmp(&want, &got, 4) != 0) {
            if (differing++ == 0) {
              first_bad = rr * row + c;
              ADD_FAILURE() << type << " value " << first_bad << " (row " << rr << ", column "
                            << c << "): " << got << " vs reference " << want << " ("
                            << ulp_distance(got, want) << " ULP)";
            }
          }
          ++ty.values_compared;
        }
      }
    }
    EXPECT_EQ(differing, 0u);
    ty.values_differing += differing;
    const nlohmann::json& full_ref = r["full"];
    const auto mm = std::minmax_element(v.begin(), v.end());
    EXPECT_EQ(*mm.first, full_ref["min"].get<float>());
    EXPECT_EQ(*mm.second, full_ref["max"].get<float>());
    if (full) {
      ringlm_test::Sha256 h;
      h.update(v.data(), v.size() * 4);
      const std::string digest = h.hex();
      EXPECT_EQ(digest, full_ref["sha256"].get<std::string>());
      if (digest == full_ref["sha256"].get<std::string>()) ++ty.digests_equal;
      ty.values_compared += n;  // every value, through the digest
      double sum = 0, sum_sq = 0;
      for (float x : v) {
        sum += x;
        sum_sq += static_cast<double>(x) * x;
      }
      const double ref_sum = full_ref["sum"].get<double>(), ref_sq = full_ref["sum_sq"].get<double>();
      EXPECT_NEAR(sum, ref_sum, 1e-9 * full_ref["sum_abs"].get<double>() + 1e-12);
      EXPECT_NEAR(sum_sq, ref_sq, 1e-9 * ref_sq + 1e-12);
    }
  }
  for (const std::string& ty : types_in_file) ++(*tally)[ty].files;
}

// No values: nothing is read or written, null pointers included (found by fuzz_ggml_quants:
// memcpy(null, src, 0) is undefined behaviour).
TEST(GgufTypes, ZeroValuesTouchNothing) {
  std::vector<uint32_t> types = {GgufWriter::kF32, GgufWriter::kF16, GgufWriter::kBF16};
  for (const GgmlBlockLayout& l : ringlm_test::ggml_block_layouts()) types.push_back(l.type);
  for (uint32_t type : types) {
    EXPECT_TRUE(conv::ggml_dequantize(type, nullptr, 0, nullptr)) << conv::ggml_type_name(type);
  }
  EXPECT_FALSE(conv::ggml_dequantize(9999, nullptr, 0, nullptr));
}

TEST(GgufTypes, EveryTensorOfEveryReferenceFileDequantizesExactly) {
  const std::string dir = ringlm_test::shared_path("gguf-types");
  if (dir.empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  std::vector<std::string> bases;
  if (DIR* d = opendir(dir.c_str())) {
    while (dirent* e = readdir(d)) {
      const std::string f = e->d_name, suffix = ".dequant.json";
      if (f.size() > suffix.size() && f.compare(f.size() - suffix.size(), suffix.size(), suffix) == 0)
        bases.push_back(dir + "/" + f.substr(0, f.size() - suffix.size()));
    }
    closedir(d);
  }
  std::sort(bases.begin(), bases.end());
  ASSERT_GE(bases.size(), 26u) << "expected the 19 rand256 and 7 TinyStories-656K references";
  const bool full = !light();
  std::map<std::string, TypeTally> tally;
  for (const std::string& b : bases) check_file(b, full, &tally);
  // Every type of the list was met, in some file, and matched.
  for (const char* ty : {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q2_K",
                         "Q3_K", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL", "IQ4_XS"}) {
    ASSERT_TRUE(tally.count(ty)) << ty << " appears in no reference file";
    const TypeTally& t = tally[ty];
    EXPECT_EQ(t.values_differing, 0u) << ty;
    if (full) EXPECT_EQ(t.digests_equal, t.tensors) << ty;
    printf("[gguf-types] %-6s %2u files, %3u tensors, %9llu values compared, %llu differ%s\n", ty,
           t.files, t.tensors, static_cast<unsigned long long>(t.values_compared),
           static_cast<unsigned long long>(t.values_differing),
           full ? (t.digests_equal == t.tensors ? ", every tensor's SHA-256 equal" : ", SHA-256 MISMATCH")
                : " (dumped rows only: emulated / sanitized build)");
  }
}

// ---- synthetic GGUFs ------------------------------------------------------------------------

const GgmlBlockLayout& layout(const char* name) {
  for (const GgmlBlockLayout& l : ringlm_test::ggml_block_layouts())
    if (!strcmp(l.name, name)) return l;
  ADD_FAILURE() << "no layout " << name;
  return ringlm_test::ggml_block_layouts()[0];
}

// Encoded data of a rows x cols matrix of ggml `type` (F32 / F16 / BF16 or a block type), with
// random finite values / scales.
std::string random_matrix(uint32_t type, uint64_t rows, uint64_t cols, uint32_t seed) {
  if (const GgmlBlockLayout* l = ringlm_test::ggml_block_layout(type))
    return ringlm_test::random_ggml_blocks(*l, rows * cols / l->values, seed);
  std::vector<float> v(rows * cols);
  uint32_t x = seed * 2654435761u + 1;
  for (float& f : v) {
    x = x * 1664525u + 1013904223u;
    f = (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.2f;
  }
  if (type == GgufWriter::kF32) return ringlm_test::f32_bytes(v);
  std::string s;
  for (float f : v) {
    const uint16_t h = type == GgufWriter::kF16 ? f32_to_fp16(f) : ringlm_test::to_bf16(f);
    s.append(reinterpret_cast<const char*>(&h), 2);
  }
  return s;
}

// A 1-layer llama GGUF with rows of 256 (a whole K-quant block): dim 256, 2 heads of 128, one KV
// head, ffn 256, 8 pieces. Matrices are `type` (random, finite), norms F32. `edit` may change a
// tensor's type or encoded data before it is written.
struct Tiny256 {
  uint32_t type = GgufWriter::kF32;
  std::function<void(const std::string& name, uint32_t* type, std::string* data)> edit;

  std::string build() const {
    const std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                             "\xE2\x96\x81" "a", "ab"};
    const uint64_t D = 256, F = 256, kv = 128, V = pieces.size();
    GgufWriter w;
    w.kv_str("general.architecture", "llama");
    put_tiny_llama_kv(&w, D, F, 1, pieces);
    uint32_t seed = 1;
    auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols) {
      uint32_t ty = type;
      std::string data = random_matrix(ty, rows, cols, seed++);
      if (edit) edit(name, &ty, &data);
      w.tensor(name, {cols, rows}, ty, data);
    };
    auto vec = [&](const std::string& name) {
      w.tensor(name, {D}, GgufWriter::kF32, ringlm_test::f32_bytes(std::vector<float>(D, 1.0f)));
    };
    matrix("token_embd.weight", V, D);
    vec("blk.0.attn_norm.weight");
    matrix("blk.0.attn_q.weight", D, D);
    matrix("blk.0.attn_k.weight", kv, D);
    matrix("blk.0.attn_v.weight", kv, D);
    matrix("blk.0.attn_output.weight", D, D);
    vec("blk.0.ffn_norm.weight");
    matrix("blk.0.ffn_gate.weight", F, D);
    matrix("blk.0.ffn_down.weight", D, F);
    matrix("blk.0.ffn_up.weight", F, D);
    vec("output_norm.weight");
    return w.finish();
  }
};

// load_source + build_model_bytes (+ the runtime's verification through convert_to_file when
// `verify`); false with *err on the first failure.
bool convert(const std::string& path, DType quant, std::string* err, bool allow = false,
             std::ostream* log = nullptr, bool keep = false) {
  conv::ConvertOptions o;
  o.source = path;
  o.quant = quant;
  o.keep = keep;
  o.allow_non_finite = allow;
  o.log = log;
  static const std::string dir = ringlm_test::temp_dir();
  return conv::convert_to_file(o, dir + "/out.rlm", err);
}

// A GGUF with the one tensor "x" (ne = {cols, rows}) of `type` holding `data`.
std::string one_tensor(uint32_t type, uint64_t cols, uint64_t rows, const std::string& data) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.tensor("x", {cols, rows}, type, data);
  return w.finish();
}

TEST(GgufTypes, RandomBlocksOfEveryReadableTypeConvertAndVerify) {
  std::vector<uint32_t> types = {GgufWriter::kF32, GgufWriter::kF16, GgufWriter::kBF16};
  for (const GgmlBlockLayout& l : ringlm_test::ggml_block_layouts()) types.push_back(l.type);
  for (uint32_t type : types) {
    Tiny256 g;
    g.type = type;
    const std::string path = write_temp(conv::ggml_type_name(type) + ".gguf", g.build());
    // Under qemu to f32 and q8 only: the reader of each type is what this checks; the other
    // encoders run emulated for a minute here and are checked by the host suites and
    // test_convert under qemu.
    const std::vector<DType> targets =
        emulated() ? std::vector<DType>{DType::F32, DType::Q8}
                   : std::vector<DType>{DType::F32, DType::F16, DType::Q8, DType::Q4, DType::Q4K};
    for (DType q : targets) {
      std::string err;
      EXPECT_TRUE(convert(path, q, &err)) << conv::ggml_type_name(type) << " -> "
                                          << conv::dtype_name(q) << ": " << err;
    }
    // The loader's values are ggml_dequantize's of the very bytes written.
    std::vector<conv::GgufTensor> ts;
    std::string err;
    ASSERT_TRUE(conv::read_gguf_tensors(path, &ts, &err)) << err;
    for (const conv::GgufTensor& t : ts) {
      std::vector<float> v;
      ASSERT_TRUE(t.load_f32(&v, &err)) << err;
      for (float x : v) ASSERT_TRUE(std::isfinite(x)) << t.name << " " << conv::ggml_type_name(type);
    }
  }
}

// Types the converter does not read are named with the tensor, whether their size is known
// (bounds still checked) or not.
TEST(GgufTypes, UnreadableTypesAreRefusedNamingTheTensorAndTheType) {
  struct Case {
    uint32_t type;
    const char* name;
    uint64_t row_bytes;  // of a 256-value row
  };
  const Case cases[] = {{9, "Q8_1", 8 * 36},     {15, "Q8_K", 292},    {16, "IQ2_XXS", 66},
                        {17, "IQ2_XS", 74},      {18, "IQ3_XXS", 98},  {19, "IQ1_S", 50},
                        {21, "IQ3_S", 110},      {22, "IQ2_S", 82},    {24, "I8", 256},
                        {28, "F64", 2048},       {29, "IQ1_M", 56},    {34, "TQ1_0", 54},
                        {35, "TQ2_0", 66},       {39, "MXFP4", 8 * 17}, {4, "Q4_2", 0},
                        {77, "type 77", 0}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    Tiny256 g;
    g.edit = [&](const std::string& name, uint32_t* type, std::string* data) {
      if (name != "blk.0.attn_v.weight") return;
      *type = c.type;
      *data = std::string(static_cast<size_t>(c.row_bytes ? c.row_bytes * 128 : 64), '\0');
    };
    const std::string path = write_temp("unreadable.gguf", g.build());
    std::string err;
    EXPECT_FALSE(convert(path, DType::F32, &err));
    EXPECT_TRUE(contains(err, "tensor 'blk.0.attn_v.weight' has type " + std::string(c.name) +
                                  ", which the converter does not read (it reads F32, F16, BF16"))
        << err;
  }
  // The shared extras, by the converter: the first tensor of the file is named.
  const std::string iq3 = ringlm_test::shared_path("gguf-types/rand256.IQ3_XXS.gguf");
  if (!iq3.empty()) {
    std::string err;
    EXPECT_FALSE(convert(iq3, DType::Q8, &err));
    EXPECT_TRUE(contains(err, "tensor 'output.weight' has type IQ3_XXS")) << err;
  }
}

TEST(GgufTypes, RowsNotAMultipleOfTheBlockAreRefused) {
  std::vector<conv::GgufTensor> ts;
  std::string err;
  // 128 columns of Q4_K (256-value blocks): the bytes would be half a block per row.
  EXPECT_FALSE(conv::read_gguf_tensors(
      write_temp("q4k-128.gguf", one_tensor(12, 128, 4, std::string(2 * 144, '\0'))), &ts, &err));
  EXPECT_TRUE(contains(err, "tensor 'x' (Q4_K): its 128 columns are not a multiple of the Q4_K "
                            "block size 256"))
      << err;
  EXPECT_FALSE(conv::read_gguf_tensors(
      write_temp("q5_1-48.gguf", one_tensor(7, 48, 2, std::string(3 * 24, '\0'))), &ts, &err));
  EXPECT_TRUE(contains(err, "tensor 'x' (Q5_1): its 48 columns are not a multiple of the Q5_1 "
                            "block size 32"))
      << err;
}

TEST(GgufTypes, TruncatedBlocksAreRefused) {
  for (const GgmlBlockLayout& l : ringlm_test::ggml_block_layouts()) {
    SCOPED_TRACE(l.name);
    const uint64_t cols = 256, rows = 4;
    std::string file = one_tensor(l.type, cols, rows,
                                  ringlm_test::random_ggml_blocks(l, rows * cols / l.values, 5));
    // The data ends the file (finish() pads to 32): cut into the last block.
    const uint64_t data_bytes = rows * cols / l.values * l.bytes;
    file.resize(file.size() - ((32 - data_bytes % 32) % 32) - l.bytes / 2);
    std::vector<conv::GgufTensor> ts;
    std::string err;
    EXPECT_FALSE(conv::read_gguf_tensors(write_temp("cut.gguf", file), &ts, &err));
    EXPECT_TRUE(contains(err, "tensor 'x' data [0, +" + std::to_string(data_bytes) +
                                  ") lies outside the file (truncated?)"))
        << err;
  }
}

// A NaN or infinite f16 field (d, m or dmin) in one block: that block's values are all
// non-finite, the others stay finite, and the converter refuses the tensor for every target,
// naming it and the first bad element, unless non-finite values are allowed.
TEST(GgufTypes, NonFiniteBlockScalesAreRefusedUnlessAllowed) {
  const uint16_t kBad[2] = {0x7e00 /* nan */, 0xfc00 /* -inf */};
  for (const GgmlBlockLayout& l : ringlm_test::ggml_block_layouts()) {
    for (int field = 0; field < l.n_scales; ++field) {
      for (uint16_t bad : kBad) {
        SCOPED_TRACE(std::string(l.name) + " field " + std::to_string(field) +
                     (bad == kBad[0] ? " nan" : " -inf"));
        // Direct: block 1 of 3.
        std::string blocks = ringlm_test::random_ggml_blocks(l, 3, 11);
        memcpy(&blocks[l.bytes + l.scale_at[field]], &bad, 2);
        std::vector<float> v(3 * l.values);
        ASSERT_TRUE(conv::ggml_dequantize(l.type, reinterpret_cast<const uint8_t*>(blocks.data()),
                                          v.size(), v.data()));
        for (size_t i = 0; i < v.size(); ++i) {
          const bool in_bad_block = i / l.values == 1;
          ASSERT_EQ(std::isfinite(v[i]), !in_bad_block) << "value " << i << " = " << v[i];
        }
        // Through the converter: block 1 of blk.0.ffn_down.weight (256 columns).
        Tiny256 g;
        g.type = l.type;
        g.edit = [&](const std::string& name, uint32_t*, std::string* data) {
          if (name == "blk.0.ffn_down.weight") memcpy(&(*data)[l.bytes + l.scale_at[field]], &bad, 2);
        };
        const std::string path = write_temp("bad-scale.gguf", g.build());
        const uint64_t first = l.values;  // block 1's first value
        const std::string at = "index " + std::to_string(first) + " (row " +
                               std::to_string(first / 256) + ", column " +
                               std::to_string(first % 256) + ")";
        // f32: through the dequantizer; q8: a raw repack for Q8_0 / Q5_0 (its q8 form) / IQ4_NL, else
        // re-quantized (every target's non-finite check is tests/test_convert_hostile.cc's).
        for (DType q : {DType::F32, DType::Q8}) {
          std::string err;
          EXPECT_FALSE(convert(path, q, &err)) << conv::dtype_name(q);
          EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite ") &&
                      contains(err, at) && contains(err, "--allow-non-finite"))
              << conv::dtype_name(q) << ": " << err;
        }
        std::string err;
        EXPECT_FALSE(convert(path, DType::F32, &err, false, nullptr, /*keep=*/true));
        EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite ")) << err;
        EXPECT_TRUE(convert(path, DType::F32, &err, /*allow=*/true)) << err;
      }
    }
  }
}

// ---- --quant keep --------------------------------------------------------------------------


struct KeepResult {
  std::map<std::string, std::string> dtype_of;  // tensor name -> "f32" / "f16" / "q8" / "q4"
  std::string log;
  uint64_t file_bytes = 0;
};

// Converts `path` with --quant keep in memory, opens the result with the runtime, and expects
// every tensor to hold exactly (bit for bit) the source values.
void expect_keep_lossless(const std::string& path, KeepResult* res) {
  SCOPED_TRACE(path);
  conv::ConvertOptions o;
  o.source = path;
  conv::ModelData md;
  std::string err;
  ASSERT_TRUE(conv::load_source(o, &md, &err)) << err;
  std::vector<uint8_t> bytes;
  std::ostringstream log;
  ASSERT_TRUE(conv::build_model_bytes(md, DType::F32, &bytes, &err, &log, false, false,
                                      /*keep=*/true))
      << err;
  res->log = log.str();
  res->file_bytes = bytes.size();
  ringlm_test::AlignedBuffer buf;
  buf.assign(bytes.data(), bytes.size());
  std::unique_ptr<ModelImpl> m(new ModelImpl());
  ASSERT_EQ(model_open(buf.data(), buf.size(), m.get()), RLM_OK) << m->error;
  std::map<std::string, const fb::Tensor*> by_name;
  for (const fb::Tensor* t : *m->root->tensors()) by_name[t->name()->str()] = t;
  for (const conv::TensorData& t : md.tensors) {
    SCOPED_TRACE(t.name);
    ASSERT_TRUE(by_name.count(t.name));
    const fb::Tensor* ft = by_name[t.name];
    res->dtype_of[t.name] = conv::dtype_name(ft->dtype());
    std::vector<float> want;
    ASSERT_TRUE(t.load_f32(&want, &err)) << err;
    const std::vector<float> got = tensor_values(*m, ft);
    ASSERT_EQ(got.size(), want.size());
    size_t differ = 0;
    for (size_t i = 0; i < got.size(); ++i) differ += memcmp(&got[i], &want[i], 4) != 0;
    EXPECT_EQ(differ, 0u) << t.source_type << " stored as " << conv::dtype_name(ft->dtype());
    // The per-tensor line names the source type and the target.
    EXPECT_TRUE(contains(res->log, t.name) &&
                contains(res->log, t.source_type + std::string(7 - std::min<size_t>(7, t.source_type.size()), ' ') +
                                       " -> " + conv::dtype_name(ft->dtype())))
        << res->log;
  }
}

// Each readable type, synthetically: the smallest exact encoding, and nothing lost.
TEST(GgufKeep, EachTypeGoesToItsSmallestExactEncoding) {
  struct Case {
    uint32_t type;
    const char* want;  // dtype of the matrices
  };
  const Case cases[] = {
      {GgufWriter::kF32, "f32"},  // random floats: not f16 values
      {GgufWriter::kF16, "f16"},
      {2, "q4"},   {8, "q8"},   {6, "q5"},   {20, "q8"},  // Q4_0, Q8_0, Q5_0, IQ4_NL: repacked
      {12, "q4k"}, {13, "q5k"},                          // Q4_K, Q5_K: repacked into their own
      {14, "q6k"}, {11, "q6k"},                          // Q6_K, Q3_K: into Q6K
      {3, "q4_1"}, {7, "q5_1"},                          // Q4_1, Q5_1: into their own
      {10, "f32"}, {23, "f32"},  // Q2_K, IQ4_XS: scales and mins per 16, or 6-bit scales
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(conv::ggml_type_name(c.type));
    Tiny256 g;
    g.type = c.type;
    KeepResult r;
    expect_keep_lossless(write_temp("keep.gguf", g.build()), &r);
    for (const auto& kv : r.dtype_of) {
      const bool norm = contains(kv.first, "norm");
      EXPECT_EQ(kv.second, norm ? "f32" : c.want) << kv.first;
    }
  }
  // BF16: f16 when every value is an f16 value, else f32 (here one value below f16's range).
  for (bool tiny : {false, true}) {
    Tiny256 g;
    g.type = GgufWriter::kBF16;
    g.edit = [&](const std::string& name, uint32_t*, std::string* data) {
      for (size_t i = 0; i < data->size() / 2; ++i) {  // k / 64, k in [-64, 64): f16-exact
        const float v = static_cast<float>(static_cast<int>(i % 128) - 64) / 64.0f;
        const uint16_t h = ringlm_test::to_bf16(tiny && name == "blk.0.attn_q.weight" && i == 7 ? 1e-30f : v);
        memcpy(&(*data)[2 * i], &h, 2);
      }
    };
    KeepResult r;
    expect_keep_lossless(write_temp("keep-bf16.gguf", g.build()), &r);
    EXPECT_EQ(r.dtype_of["blk.0.attn_k.weight"], "f16");
    EXPECT_EQ(r.dtype_of["blk.0.attn_q.weight"], tiny ? "f32" : "f16");
    EXPECT_TRUE(contains(r.log, tiny ? "kept as f32: no smaller encoding" : "BF16    -> f16  stored exactly"))
        << r.log;
  }
}

// Our own quantizers (quantize_row_q4k / _q5k / _q6k, for --quant q4k / q5k / q6k from float
// sources) against llama.cpp's Q4_K / Q5_K / Q6_K quantizers on the same weights:
// rand256.Q4_K.gguf is llama-quantize's Q4_K of rand256.f32.gguf (no importance matrix), and so
// on. The relative RMS error of all 2-D weights must not be worse than llama.cpp's (both figures
// computed here, from the files).
//
// Relative RMS error of our quantizer `ours_type` (Q4K, Q5K, Q6K, Q4_1 or Q5_1) and of llama.cpp's
// (rand256.<gguf_type>.gguf, GGUF type id `type_id`) on rand256's 2-D float weights.
void quantizer_vs_llama_cpp(WeightType ours_type, const char* gguf_type, uint32_t type_id,
                            double* ours, double* theirs) {
  const std::string dir = ringlm_test::shared_path("gguf-types");
  std::vector<conv::GgufTensor> src, ref;
  std::string err;
  ASSERT_TRUE(conv::read_gguf_tensors(dir + "/rand256.f32.gguf", &src, &err)) << err;
  ASSERT_TRUE(conv::read_gguf_tensors(dir + "/rand256." + gguf_type + ".gguf", &ref, &err)) << err;
  std::map<std::string, const conv::GgufTensor*> ref_of;
  for (const conv::GgufTensor& t : ref) ref_of[t.name] = &t;
  double x2 = 0, ours2 = 0, theirs2 = 0;
  size_t n_matrices = 0;
  // Under qemu, where the grid searches run emulated (a minute for the 16 matrices), the first 4
  // matrices: the same comparison on fewer weights (each file's matrices are alike: rand256).
  const size_t max_matrices = emulated() ? 4 : 16;
  for (size_t i = 0; i < src.size() && n_matrices < max_matrices; ++i) {
    if (src[i].ne.size() != 2) continue;
    ASSERT_TRUE(ref_of.count(src[i].name)) << src[i].name;
    const conv::GgufTensor& rt = *ref_of[src[i].name];
    ASSERT_EQ(rt.type, type_id) << rt.name;
    ++n_matrices;
    std::vector<float> x, theirs_v;
    ASSERT_TRUE(src[i].load_f32(&x, &err)) << err;
    ASSERT_TRUE(rt.load_f32(&theirs_v, &err)) << err;
    const size_t cols = src[i].ne[0], rows = src[i].ne[1];
    std::vector<uint8_t> qs(padded_cols(cols) / 2), high(padded_cols(cols) / 4);  // Q5K: / 8
    std::vector<uint16_t> dm(2 * std::max<size_t>(q4k_supers(cols), padded_cols(cols) / 32));
    std::vector<uint8_t> subs(16 * q4k_supers(cols));
    std::vector<float> back(cols);
    for (size_t r = 0; r < rows; ++r) {
      const float* row = x.data() + r * cols;
      if (ours_type == WeightType::Q4_1) {
        quantize_row_q4_1(row, cols, qs.data(), dm.data());
        dequantize_row_q4_1(qs.data(), dm.data(), cols, back.data());
      } else if (ours_type == WeightType::Q5_1) {
        quantize_row_q5_1(row, cols, qs.data(), high.data(), dm.data());
        dequantize_row_q5_1(qs.data(), high.data(), dm.data(), cols, back.data());
      } else if (ours_type == WeightType::Q6K) {
        int8_t* sc = reinterpret_cast<int8_t*>(subs.data());
        quantize_row_q6k(row, cols, qs.data(), high.data(), dm.data(), sc);
        dequantize_row_q6k(qs.data(), high.data(), dm.data(), sc, cols, back.data());
      } else if (ours_type == WeightType::Q5K) {
        quantize_row_q5k(row, cols, qs.data(), high.data(), dm.data(), subs.data());
        dequantize_row_q5k(qs.data(), high.data(), dm.data(), subs.data(), cols, back.data());
      } else {
        quantize_row_q4k(row, cols, qs.data(), dm.data(), subs.data());
        dequantize_row_q4k(qs.data(), dm.data(), subs.data(), cols, back.data());
      }
      for (size_t c = 0; c < cols; ++c) {
        const double t = theirs_v[r * cols + c];
        x2 += static_cast<double>(row[c]) * row[c];
        ours2 += (static_cast<double>(back[c]) - row[c]) * (back[c] - row[c]);
        theirs2 += (t - row[c]) * (t - row[c]);
      }
    }
  }
  EXPECT_EQ(n_matrices, max_matrices);
  *ours = sqrt(ours2 / x2);
  *theirs = sqrt(theirs2 / x2);
}

TEST(GgufTypes, Q4kQuantizerIsAsGoodAsLlamaCpps) {
  if (ringlm_test::shared_path("gguf-types").empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  double ours = 0, theirs = 0;
  ASSERT_NO_FATAL_FAILURE(quantizer_vs_llama_cpp(WeightType::Q4K, "Q4_K", 12, &ours, &theirs));
  printf("[q4k] relative RMS error of rand256's 2-D weights: ringlm q4k %.5f, llama.cpp Q4_K %.5f\n",
         ours, theirs);
  EXPECT_GT(ours, 0.0);
  EXPECT_LE(ours, theirs);
}

TEST(GgufTypes, Q5kQuantizerIsAsGoodAsLlamaCpps) {
  if (ringlm_test::shared_path("gguf-types").empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  double ours = 0, theirs = 0;
  ASSERT_NO_FATAL_FAILURE(quantizer_vs_llama_cpp(WeightType::Q5K, "Q5_K", 13, &ours, &theirs));
  printf("[q5k] relative RMS error of rand256's 2-D weights: ringlm q5k %.5f, llama.cpp Q5_K %.5f\n",
         ours, theirs);
  EXPECT_GT(ours, 0.0);
  EXPECT_LE(ours, theirs);
}

TEST(GgufTypes, Q6kQuantizerIsAsGoodAsLlamaCpps) {
  if (ringlm_test::shared_path("gguf-types").empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  double ours = 0, theirs = 0;
  ASSERT_NO_FATAL_FAILURE(quantizer_vs_llama_cpp(WeightType::Q6K, "Q6_K", 14, &ours, &theirs));
  printf("[q6k] relative RMS error of rand256's 2-D weights: ringlm q6k %.5f, llama.cpp Q6_K %.5f\n",
         ours, theirs);
  EXPECT_GT(ours, 0.0);
  EXPECT_LE(ours, theirs);
}

// Q4_1 / Q5_1 (--quant q4_1 / q5_1 from float sources): llama.cpp's own rule (quantize_row_q4_1_ref
// / q5_1_ref, what llama-quantize runs without an importance matrix: rand256.Q4_1.gguf /
// Q5_1.gguf), with each level chosen against the f16-rounded d and m: never worse, value by value.
TEST(GgufTypes, Q4_1AndQ5_1QuantizersAreAsGoodAsLlamaCpps) {
  if (ringlm_test::shared_path("gguf-types").empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  for (WeightType t : {WeightType::Q4_1, WeightType::Q5_1}) {
    const bool five = t == WeightType::Q5_1;
    double ours = 0, theirs = 0;
    ASSERT_NO_FATAL_FAILURE(
        quantizer_vs_llama_cpp(t, five ? "Q5_1" : "Q4_1", five ? 7 : 3, &ours, &theirs));
    printf("[%s] relative RMS error of rand256's 2-D weights: ringlm %s %.5f, llama.cpp %s %.5f\n",
           five ? "q5_1" : "q4_1", five ? "q5_1" : "q4_1", ours, five ? "Q5_1" : "Q4_1", theirs);
    EXPECT_GT(ours, 0.0);
    EXPECT_LE(ours, theirs);
  }
}

// GGUF Q4_1 / Q5_1 kept bit for bit: rand256's (every 2-D tensor of the type) and TinyStories'
// llama.cpp presets' (its Q4_1 / Q5_1 files, and Q5_K_M's Q5_1 fallbacks) stored as q4_1 / q5_1
// under --quant keep and under --quant q4_1 / q5_1, whose values, decoded by the runtime, have
// the SHA-256 the data set recorded for llama.cpp's dequantization (every tensor, the F32 norms
// included). --quant q8 re-quantizes them as before.
TEST(GgufKeep, Q4_1AndQ5_1AreKeptBitForBit) {
  const std::string dir = ringlm_test::shared_path("gguf-types");
  if (dir.empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  struct Case {
    const char* file;
    const char* type;  // the GGUF type kept
    DType quant;       // --quant besides keep
  };
  const Case cases[] = {{"rand256.Q4_1", "Q4_1", DType::Q4_1},
                        {"rand256.Q5_1", "Q5_1", DType::Q5_1},
                        {"tinystories-656k.Q4_1", "Q4_1", DType::Q4_1},
                        {"tinystories-656k.Q5_K_M", "Q5_1", DType::Q5_1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.file);
    std::string json_text, err;
    ASSERT_TRUE(ringlm_test::read_file(dir + "/" + c.file + ".dequant.json", &json_text));
    std::map<std::string, nlohmann::json> ref;
    for (const nlohmann::json& r : nlohmann::json::parse(json_text)) ref[r["name"].get<std::string>()] = r;
    conv::ConvertOptions o;
    o.source = dir + "/" + c.file + ".gguf";
    conv::ModelData md;
    ASSERT_TRUE(conv::load_source(o, &md, &err)) << err;
    for (int keep = 1; keep >= 0; --keep) {
      SCOPED_TRACE(keep ? "keep" : conv::dtype_name(c.quant));
      std::vector<uint8_t> bytes;
      std::ostringstream log;
      ASSERT_TRUE(conv::build_model_bytes(md, c.quant, &bytes, &err, &log, false, false, keep != 0))
          << err;
      ringlm_test::AlignedBuffer buf;
      buf.assign(bytes.data(), bytes.size());
      std::unique_ptr<ModelImpl> m(new ModelImpl());
      ASSERT_EQ(model_open(buf.data(), buf.size(), m.get()), RLM_OK) << m->error;
      EXPECT_EQ(m->root->format_version(), 5u);
      const std::string want = conv::dtype_name(c.quant);
      uint32_t kept = 0;
      for (const fb::Tensor* t : *m->root->tensors()) {
        const std::string name = t->name()->str();
        SCOPED_TRACE(name);
        ASSERT_TRUE(ref.count(name));
        const nlohmann::json& r = ref[name];
        const std::vector<float> v = tensor_values(*m, t);
        if (r["type"] == c.type) {
          EXPECT_EQ(conv::dtype_name(t->dtype()), want);
          ++kept;
        } else if (!keep && t->shape()->size() == 2) {
          continue;  // another type (Q8_0) re-quantized into the target: not the source's values
        }
        ringlm_test::Sha256 h;
        h.update(v.data(), v.size() * 4);
        EXPECT_EQ(h.hex(), r["full"]["sha256"].get<std::string>());
      }
      EXPECT_GE(kept, 12u);
      // Q4_1's blocks are copied (d, m and the nibbles as they are), Q5_1's repacked (the fifth
      // bits into their plane); the per-tensor lines say so.
      EXPECT_TRUE(contains(log.str(), std::string(c.type) + "    -> " + want + "  " +
                                          (c.type[1] == '4' ? "copied" : "repacked") +
                                          " without re-quantization"))
          << log.str();
    }
  }
  // --quant q8 keeps today's behaviour: Q5_1 has no exact q8 form, so it is re-quantized.
  conv::ConvertOptions o;
  o.source = dir + "/rand256.Q5_1.gguf";
  conv::ModelData md;
  std::string err;
  ASSERT_TRUE(conv::load_source(o, &md, &err)) << err;
  std::vector<uint8_t> bytes;
  std::ostringstream log;
  ASSERT_TRUE(conv::build_model_bytes(md, DType::Q8, &bytes, &err, &log)) << err;
  EXPECT_TRUE(contains(log.str(), "  blk.0.attn_q.weight                  Q5_1    -> q8   re-quantized"))
      << log.str();
}

// Every file of ../shared/gguf-types (IQ3 extras aside) converts with keep into a model holding
// its exact values; the K-quant presets' fallback types land where the rules say.
TEST(GgufKeep, EveryReferenceFileConvertsLosslessly) {
  const std::string dir = ringlm_test::shared_path("gguf-types");
  if (dir.empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  std::vector<std::string> files = {"tinystories-656k.Q2_K", "tinystories-656k.Q3_K_M",
                                    "tinystories-656k.Q4_1", "tinystories-656k.Q4_K_M",
                                    "tinystories-656k.Q5_1", "tinystories-656k.Q5_K_M",
                                    "tinystories-656k.Q6_K"};
  if (!light()) {
    for (const char* t : {"f32", "F16", "BF16", "Q8_0", "Q6_K", "Q5_1", "Q5_0", "Q5_K", "Q4_1",
                          "Q4_0", "Q4_K", "IQ4_NL", "IQ4_XS", "Q3_K", "Q2_K", "Q4_K_M", "Q5_K_M"})
      files.push_back(std::string("rand256.") + t);
  }
  for (const std::string& f : files) {
    KeepResult r;
    expect_keep_lossless(dir + "/" + f + ".gguf", &r);
    if (f == "rand256.Q4_0") EXPECT_EQ(r.dtype_of["blk.0.attn_q.weight"], "q4");
    if (f == "rand256.Q4_K") {
      EXPECT_EQ(r.dtype_of["blk.0.attn_q.weight"], "q4k");
      EXPECT_TRUE(contains(r.log, "Q4_K    -> q4k  repacked without re-quantization")) << r.log;
    }
    if (f == "rand256.Q5_K") {
      EXPECT_EQ(r.dtype_of["blk.0.attn_q.weight"], "q5k");
      EXPECT_TRUE(contains(r.log, "Q5_K    -> q5k  repacked without re-quantization")) << r.log;
    }
    if (f == "rand256.F16") EXPECT_EQ(r.dtype_of["blk.0.attn_q.weight"], "f16");
    if (f == "tinystories-656k.Q4_K_M") {  // Q5_0 x 12 -> q5, Q8_0 x 3 -> q8
      EXPECT_EQ(r.dtype_of["blk.0.ffn_up.weight"], "q5");
      EXPECT_EQ(r.dtype_of["blk.1.ffn_down.weight"], "q8");
    }
    if (f == "tinystories-656k.Q5_K_M") EXPECT_EQ(r.dtype_of["blk.0.ffn_up.weight"], "q5_1");  // Q5_1
    if (f == "tinystories-656k.Q4_1") {
      EXPECT_EQ(r.dtype_of["blk.0.ffn_up.weight"], "q4_1");
      EXPECT_TRUE(contains(r.log, "Q4_1    -> q4_1  copied without re-quantization")) << r.log;
    }
    if (f == "tinystories-656k.Q5_1") {
      EXPECT_EQ(r.dtype_of["blk.0.ffn_up.weight"], "q5_1");
      EXPECT_TRUE(contains(r.log, "Q5_1    -> q5_1  repacked without re-quantization")) << r.log;
    }
  }
}

// ---- TinyStories-656K presets against llama.cpp, through the CLI -----------------------------

const char* const kPresets[] = {"Q6_K", "Q5_K_M", "Q5_1", "Q4_K_M", "Q4_1", "Q3_K_M", "Q2_K"};

double final_ppl(const std::string& out) {
  const std::string key = "Final estimate: PPL = ";
  const size_t at = out.find(key);
  return at == std::string::npos ? NAN : atof(out.c_str() + at + key.size());
}

// One greedy generation compared with a reference text of llama.cpp's.
struct Agreement {
  size_t chars = 0;        // common prefix, prompt included
  bool to_the_end = false;  // no divergence before one of the texts ends
  double margin = NAN;     // at the divergence: log p(our token) - log p(llama.cpp's token)
  std::string ours, theirs;
};

// Generates greedily from `model` with top-5 log-probabilities and walks the reference `ref`
// ("Once upon a time" + continuation): while our text stays a prefix of it, we agree. At the first
// step that leaves it, llama.cpp took another token there or one step earlier (pieces ending in a
// space make "se" + ". She" and "se " + "with" both start like "se with"): the margin is the
// smallest log-probability gap, at those two steps, between our token and a candidate of our
// top 5 that would have stayed on llama.cpp's text.
Agreement follow(const std::string& model, const std::string& ref) {
  Agreement a;
  std::string out;
  EXPECT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " generate -m " + model +
                                         " -p 'Once upon a time' -n 200 --temp 0 --logprobs 5",
                                     &out),
            0);
  std::string ours = "Once upon a time";
  std::vector<std::pair<std::string, nlohmann::json>> steps;  // (text before, step)
  std::istringstream lines(out);
  std::string line;
  auto on_ref = [&](const std::string& s) {
    return s.size() <= ref.size() ? ref.compare(0, s.size(), s) == 0
                                  : s.compare(0, ref.size(), ref) == 0;
  };
  while (std::getline(lines, line)) {
    const nlohmann::json j = nlohmann::json::parse(line);
    steps.push_back({ours, j});
    const std::string next = ours + j["text"].get<std::string>();
    if (!on_ref(next)) {
      double m = INFINITY;
      for (size_t k = steps.size() >= 2 ? steps.size() - 2 : 0; k < steps.size(); ++k) {
        const nlohmann::json& s = steps[k].second;
        for (const auto& t : s["top"]) {
          const std::string alt = steps[k].first + t["text"].get<std::string>();
          if (t["token"] != s["token"] && !t["text"].get<std::string>().empty() &&
              ref.compare(0, alt.size(), alt) == 0)
            m = std::min(m, s["logprob"].get<double>() - t["logprob"].get<double>());
        }
      }
      a.margin = m;
      a.ours = next.substr(ours.size() > 20 ? ours.size() - 20 : 0, 40);
      a.theirs = ref.substr(ours.size() > 20 ? ours.size() - 20 : 0, 40);
      break;
    }
    ours = next;
  }
  if (std::isnan(a.margin)) a.to_the_end = true;
  a.chars = 0;
  while (a.chars < ours.size() && a.chars < ref.size() && ours[a.chars] == ref[a.chars]) ++a.chars;
  return a;
}

// The texts llama.cpp wrote (llama-simple -n 200 "Once upon a time"), its BOS piece dropped.
std::string llamacpp_text(const std::string& preset, const char* kind) {
  std::string t;
  EXPECT_TRUE(ringlm_test::read_file(
      ringlm_test::shared_path("gguf-types/tinystories-656k." + preset + "." + kind + ".txt"), &t));
  const std::string bos = "<|start_story|> ";
  if (t.compare(0, bos.size(), bos) == 0) t.erase(0, bos.size());
  return t;
}

// Perplexity of `--quant keep` within 1 % of llama.cpp's on the same file, text and settings
// (README "Log-probabilities, scoring and perplexity"; tinystories-656k.ppl.txt).
TEST(GgufKeepShared, TinyStoriesPresetsPerplexityWithinOnePercentOfLlamaCpp) {
  const std::string text = ringlm_test::shared_path("gguf-types/ppl-text.txt");
  const std::string ref_path = ringlm_test::shared_path("gguf-types/tinystories-656k.ppl.txt");
  if (text.empty() || ref_path.empty()) GTEST_SKIP() << "../shared/gguf-types is absent";
  std::string ref;
  ASSERT_TRUE(ringlm_test::read_file(ref_path, &ref));
  const std::string dir = ringlm_test::temp_dir();
  for (const char* preset : kPresets) {
    SCOPED_TRACE(preset);
    const std::string key = std::string("tinystories-656k.") + preset + ".gguf |";
    const size_t at = ref.find(key);
    ASSERT_NE(at, std::string::npos);
    const double llama_cpp = final_ppl(ref.substr(at, ref.find('\n', at) - at));
    const std::string model = dir + "/" + preset + ".rlm";
    std::string out;
    const bool verbose = !strcmp(preset, "Q4_K_M");
    ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " convert " +
                                           ringlm_test::shared_path(std::string("gguf-types/tinystories-656k.") + preset + ".gguf") +
                                           " --quant keep " + (verbose ? "-v" : "-q") + " -o " +
                                           model + " 2>&1",
                                       &out),
              0)
        << out;
    // The summary line says what happened to the tensors, also without -v; -v says it per tensor.
    EXPECT_TRUE(contains(out, "tensors: 5 F32 -> f32 (exact)")) << out;
    if (verbose) {
      EXPECT_TRUE(contains(out, "3 Q8_0 -> q8 (exact copy), 12 Q5_0 -> q5 (exact repack)")) << out;
      EXPECT_TRUE(contains(out, "  blk.0.ffn_up.weight                  Q5_0    -> q5   repacked "
                                "without re-quantization (exact, same values)"))
          << out;
      EXPECT_TRUE(contains(out, "  blk.1.ffn_down.weight                Q8_0    -> q8   copied "
                                "without re-quantization (exact)"))
          << out;
    }
    ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " perplexity -m " + model +
                                           " -f " + text + " -c 128 2>&1",
                                       &out),
              0)
        << out;
    const double ppl = final_ppl(out);
    printf("[gguf-keep] tinystories-656k.%-6s keep: PPL %.4f, llama.cpp %.4f (%+.2f %%)\n", preset,
           ppl, llama_cpp, 100.0 * (ppl / llama_cpp - 1.0));
    EXPECT_NEAR(ppl, llama_cpp, 0.01 * llama_cpp) << out;
  }
}

// Greedy text. llama.cpp multiplies quantized weights with quantized activations (Q8_0 / Q8_1 /
// Q8_K per weight type); ringlm's q8 kernels quantize activations too, but not identically, and
// it multiplies f32 weights in f32. This tiny model has near-ties early in the story: the data
// set's README found llama.cpp's own text for the same weights in f32 (`-deqf32`) leaving its
// quantized text after 15 to 129 words. So what can be asserted is:
//  - the f32 conversion (same weights, f32 math on both sides) follows llama.cpp's -deqf32 text,
//    and the keep conversion follows llama.cpp's own text, up to the end or to a divergence
//    where the two tokens are a near-tie: within 0.25 nats (a probability ratio of 1.28) under
//    our model. A wrongly imported weight moves logits by far more.
// The common prefixes are printed (the issue asks for >= 100 characters of llama.cpp's text).
TEST(GgufKeepShared, GreedyTextFollowsLlamaCpp) {
  if (ringlm_test::shared_path("gguf-types/tinystories-656k.Q6_K.llamacpp.txt").empty())
    GTEST_SKIP() << "../shared/gguf-types is absent";
  const double kNearTie = 0.25;
  const std::string dir = ringlm_test::temp_dir();
  for (const char* preset : kPresets) {
    if (light() && strcmp(preset, "Q6_K") && strcmp(preset, "Q4_K_M") && strcmp(preset, "Q2_K"))
      continue;
    SCOPED_TRACE(preset);
    const std::string gguf =
        ringlm_test::shared_path(std::string("gguf-types/tinystories-656k.") + preset + ".gguf");
    std::string out;
    for (const char* q : {"keep", "f32"}) {
      const std::string model = dir + "/" + preset + "." + q + ".rlm";
      ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " convert " + gguf +
                                             " --quant " + q + " -q -o " + model + " 2>&1",
                                         &out),
                0)
          << out;
      const bool keep = !strcmp(q, "keep");
      const Agreement a = follow(model, llamacpp_text(preset, keep ? "llamacpp" : "llamacpp-deqf32"));
      printf("[gguf-keep] tinystories-656k.%-6s %-4s vs llama.cpp %-7s text: %3zu characters "
             "agree%s",
             preset, q, keep ? "" : "-deqf32", a.chars, a.to_the_end ? ", to the end\n" : "");
      if (!a.to_the_end)
        printf(", then a near-tie of %.4f nats (ours \"%s\", theirs \"%s\")\n", a.margin,
               a.ours.c_str(), a.theirs.c_str());
      EXPECT_TRUE(a.to_the_end || a.margin <= kNearTie)
          << q << ": diverges after " << a.chars << " characters with a margin of " << a.margin
          << " nats: ours \"" << a.ours << "\", llama.cpp \"" << a.theirs << "\"";
      // #18's bar: the kept file's greedy text is llama.cpp's for at least 100 characters (the
      // activation scales rounded to f16 as llama.cpp's Q8_0 blocks made this hold: Q6_K was 65).
      if (keep) {
        EXPECT_GE(a.chars, 100u) << "ours \"" << a.ours << "\", llama.cpp \"" << a.theirs
                                 << "\"";
      }
    }
  }
}

}  // namespace
