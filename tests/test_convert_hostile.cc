// Hostile converter inputs (issue #12): sources whose layout or values are damaged in ways that
// used to convert into a model that verifies ("verified OK") and then generates garbage:
//  - GGUF tensor offsets not a multiple of general.alignment, overlapping another tensor, or past
//    the end of the file; general.alignment not a power of two;
//  - safetensors data_offsets that overlap (or are reversed, outside the file, the wrong size);
//  - NaN / infinite weights in any source (GGUF F32, a Q8_0 block's f16 scale, llama2.c floats),
//    and finite values the target encoding overflows to inf.
// Each is refused with an error naming the tensor (and the first bad element), unless
// ConvertOptions::allow_non_finite (`ringlm convert --allow-non-finite`) stores the values.
//
// RINGLM_WRITE_FUZZ_REGRESSIONS=DIR writes the hostile GGUFs built here into DIR (that is how
// fuzz/regressions/gguf/{misaligned-offset,...} were made).
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/readers.h"
#include "convert/safetensors.h"
#include "kernels/scalar.h"
#include "gtest/gtest.h"
#include "model_writers.h"
#include "testing.h"

namespace {

using namespace ringlm::internal;
using fb::DType;
using ringlm_test::GgufWriter;
using ringlm_test::write_temp;

const float kNan = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();


// Keeps a hostile GGUF as a fuzz regression input when RINGLM_WRITE_FUZZ_REGRESSIONS is set.
// fuzz_gguf picks the target type by the input's last byte (f32, f16, q8, q4, keep for 0..4 mod 5);
// `target` >= 0 is appended as that byte (GGUF readers ignore bytes after the data).
void keep_for_fuzz(const std::string& name, const std::string& data, int target = -1) {
  const char* dir = getenv("RINGLM_WRITE_FUZZ_REGRESSIONS");
  if (!dir || !*dir) return;
  std::string bytes = data;
  if (target >= 0) bytes.push_back(static_cast<char>(target));
  EXPECT_TRUE(ringlm_test::write_bytes(std::string(dir) + "/" + name, bytes));
}

// Q8_0 blocks (f16 scale amax / 127, then 32 int8) of `v` (size a multiple of 32).
std::string q8_0_bytes(const std::vector<float>& v) {
  std::string s;
  for (size_t b = 0; b < v.size() / 32; ++b) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, fabsf(v[b * 32 + j]));
    const uint16_t d16 = f32_to_fp16(amax / 127.0f);
    const float d = fp16_to_f32(d16);
    s.append(reinterpret_cast<const char*>(&d16), 2);
    for (int j = 0; j < 32; ++j)
      s.push_back(static_cast<char>(d > 0 ? static_cast<int8_t>(lrintf(v[b * 32 + j] / d)) : 0));
  }
  return s;
}

// A 1-layer llama GGUF: dim 32, 2 heads (1 KV head), ffn 64, 8 pieces; matrices Q8_0 (or F32),
// norms F32. `edit` may change a tensor's values before they are encoded, `edit_bytes` its
// encoded data.
struct TinyLlamaGguf {
  uint32_t matrix_type = GgufWriter::kQ8_0;
  int64_t alignment = -1;  // >= 0: written as general.alignment (uint32)
  uint32_t block_count = 1;  // the tensors are always those of one layer
  std::function<void(const std::string& name, std::vector<float>* values)> edit;
  std::function<void(const std::string& name, std::string* data)> edit_bytes;

  std::string build() const {
    const std::vector<std::string> pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b",
                                             "\xE2\x96\x81" "a", "ab"};
    const uint64_t D = 32, F = 64, kv = 16, V = pieces.size();
    GgufWriter w;
    w.kv_str("general.architecture", "llama");
    if (alignment >= 0) w.kv_u32("general.alignment", static_cast<uint32_t>(alignment));
    put_tiny_llama_kv(&w, D, F, block_count, pieces);
    uint32_t seed = 1;
    auto values = [&](const std::string& name, uint64_t n, float mean) {
      std::vector<float> v(n);
      uint32_t x = seed++ * 2654435761u;
      for (float& f : v) {
        x = x * 1664525u + 1013904223u;
        f = mean + (static_cast<float>(x >> 8) / 16777216.0f - 0.5f) * 0.2f;
      }
      if (edit) edit(name, &v);
      return v;
    };
    auto add = [&](const std::string& name, std::vector<uint64_t> ne, uint32_t type,
                   std::string data) {
      if (edit_bytes) edit_bytes(name, &data);
      w.tensor(name, std::move(ne), type, std::move(data));
    };
    auto matrix = [&](const std::string& name, uint64_t rows, uint64_t cols) {
      const std::vector<float> v = values(name, rows * cols, 0.0f);
      add(name, {cols, rows}, matrix_type,
          matrix_type == GgufWriter::kQ8_0 ? q8_0_bytes(v) : ringlm_test::f32_bytes(v));
    };
    auto vec = [&](const std::string& name) {
      add(name, {D}, GgufWriter::kF32, ringlm_test::f32_bytes(values(name, D, 1.0f)));
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

// Position of tensor `name`'s offset field in a GGUF's tensor directory (after the name: uint32
// n_dims, n_dims uint64 dims, uint32 type, uint64 offset).
size_t offset_field(const std::string& gguf, const std::string& name) {
  const uint64_t len = name.size();
  const std::string key = std::string(reinterpret_cast<const char*>(&len), 8) + name;
  const size_t at = gguf.find(key);
  if (at == std::string::npos) {
    ADD_FAILURE() << "no tensor " << name;
    return 0;
  }
  uint32_t n_dims;
  memcpy(&n_dims, &gguf[at + key.size()], 4);
  return at + key.size() + 4 + 8 * n_dims + 4;
}
uint64_t tensor_offset(const std::string& gguf, const std::string& name) {
  uint64_t v;
  memcpy(&v, &gguf[offset_field(gguf, name)], 8);
  return v;
}
std::string with_offset(std::string gguf, const std::string& name, uint64_t offset) {
  memcpy(&gguf[offset_field(gguf, name)], &offset, 8);
  return gguf;
}

// load_source + build_model_bytes; false with *err on the first failure.
bool convert(const std::string& path, DType quant, std::string* err, bool allow = false,
             std::ostream* log = nullptr) {
  conv::ConvertOptions o;
  o.source = path;
  conv::ModelData md;
  if (!conv::load_source(o, &md, err)) return false;
  std::vector<uint8_t> bytes;
  return conv::build_model_bytes(md, quant, &bytes, err, log, false, allow);
}

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// ---- GGUF layout -----------------------------------------------------------------------------

TEST(HostileGguf, TheTinyModelConvertsToEveryType) {
  const std::string path = write_temp("good.gguf", TinyLlamaGguf().build());
  for (DType q : {DType::F32, DType::F16, DType::Q8, DType::Q4}) {
    std::string err;
    EXPECT_TRUE(convert(path, q, &err)) << conv::dtype_name(q) << ": " << err;
  }
}

TEST(HostileGguf, MisalignedOffsetIsRefused) {
  const std::string good = TinyLlamaGguf().build();
  const std::string bad =
      with_offset(good, "blk.0.attn_k.weight", tensor_offset(good, "blk.0.attn_k.weight") + 8);
  keep_for_fuzz("misaligned-offset", bad);
  std::string err;
  EXPECT_FALSE(convert(write_temp("misaligned.gguf", bad), DType::F32, &err));
  EXPECT_TRUE(contains(err, "tensor 'blk.0.attn_k.weight' data offset") &&
              contains(err, "is not a multiple of general.alignment (32)"))
      << err;
}

TEST(HostileGguf, OverlappingTensorsAreRefused) {
  const std::string good = TinyLlamaGguf().build();
  // attn_v (same size as attn_k) patched onto attn_k's bytes: both stay aligned and in the file.
  const std::string bad =
      with_offset(good, "blk.0.attn_v.weight", tensor_offset(good, "blk.0.attn_k.weight"));
  keep_for_fuzz("overlapping-tensors", bad);
  std::string err;
  EXPECT_FALSE(convert(write_temp("overlap.gguf", bad), DType::F32, &err));
  EXPECT_TRUE(contains(err, "overlaps tensor") && contains(err, "'blk.0.attn_k.weight'") &&
              contains(err, "'blk.0.attn_v.weight'"))
      << err;
  // A tensor starting inside the previous one (an aligned 32 bytes in), not just at its start.
  const std::string bad2 = with_offset(good, "blk.0.attn_v.weight",
                                       tensor_offset(good, "blk.0.attn_k.weight") + 32);
  EXPECT_FALSE(convert(write_temp("overlap2.gguf", bad2), DType::F32, &err));
  EXPECT_TRUE(contains(err, "overlaps tensor")) << err;
}

TEST(HostileGguf, OffsetPastTheEndIsRefused) {
  const std::string good = TinyLlamaGguf().build();
  const std::string bad = with_offset(good, "blk.0.ffn_up.weight", uint64_t{1} << 40);
  keep_for_fuzz("offset-past-end", bad);
  std::string err;
  EXPECT_FALSE(convert(write_temp("past-end.gguf", bad), DType::F32, &err));
  EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_up.weight' data [") &&
              contains(err, "lies outside the file"))
      << err;
  // Offset + size wrapping around 2^64 (offset aligned, so only the bounds check can catch it).
  const std::string wrap = with_offset(good, "blk.0.ffn_up.weight", ~uint64_t{0} - 31);
  EXPECT_FALSE(convert(write_temp("wrap.gguf", wrap), DType::F32, &err));
  EXPECT_TRUE(contains(err, "lies outside the file")) << err;
}

TEST(HostileGguf, BadAlignmentKeyIsRefused) {
  for (uint32_t a : {0u, 24u, 48u, 1u << 21}) {
    TinyLlamaGguf g;
    g.alignment = a;
    const std::string bad = g.build();
    if (a == 24) keep_for_fuzz("alignment-not-power-of-two", bad);
    std::string err;
    EXPECT_FALSE(convert(write_temp("align.gguf", bad), DType::F32, &err)) << a;
    EXPECT_TRUE(contains(err, "general.alignment must be a power of two")) << err;
    EXPECT_TRUE(contains(err, "(is " + std::to_string(a) + ")")) << err;
  }
  // A valid power of two the offsets do not honour: the writer padded to 32, and some tensor
  // sizes are odd multiples of 32 (a 32 x 32 Q8_0 matrix is 1088 bytes).
  TinyLlamaGguf g;
  g.alignment = 64;
  std::string err;
  EXPECT_FALSE(convert(write_temp("align64.gguf", g.build()), DType::F32, &err));
  EXPECT_TRUE(contains(err, "is not a multiple of general.alignment (64)")) << err;
  // 32 spelled out is the default and converts.
  g.alignment = 32;
  EXPECT_TRUE(convert(write_temp("align32.gguf", g.build()), DType::F32, &err)) << err;
}

// Found by fuzz_gguf: a block_count of 2^28 sized per-layer lists before any tensor was looked
// at (gigabytes); the same in a Hugging Face config.json.
TEST(HostileGguf, HugeLayerCountsAreRefusedBeforeAllocating) {
  TinyLlamaGguf g;
  g.block_count = 1u << 28;
  const std::string bad = g.build();
  keep_for_fuzz("huge-block-count", bad);
  std::string err;
  EXPECT_FALSE(convert(write_temp("layers.gguf", bad), DType::F32, &err));
  EXPECT_TRUE(contains(err, "block_count 268435456 exceeds the runtime's limit of 1024 layers"))
      << err;
  const std::string dir = ringlm_test::temp_dir();
  ASSERT_TRUE(ringlm_test::write_bytes(
      dir + "/config.json",
      nlohmann::json({{"model_type", "llama"}, {"hidden_size", 32}, {"num_hidden_layers", 1 << 28},
                      {"num_attention_heads", 2}, {"intermediate_size", 64}, {"vocab_size", 8}})
          .dump()));
  EXPECT_FALSE(convert(dir, DType::F32, &err));
  EXPECT_TRUE(contains(err, "num_hidden_layers 268435456 exceeds the runtime's limit")) << err;
}

// ---- non-finite values -------------------------------------------------------------------------

// blk.0.ffn_down.weight is 32 rows x 64 columns: index 69 is row 1, column 5.
TinyLlamaGguf poisoned_f32(float value) {
  TinyLlamaGguf g;
  g.matrix_type = GgufWriter::kF32;
  g.edit = [value](const std::string& name, std::vector<float>* v) {
    if (name == "blk.0.ffn_down.weight") (*v)[69] = value;
  };
  return g;
}

TEST(HostileGguf, NanWeightIsRefusedForEveryTarget) {
  const std::string path = write_temp("nan.gguf", poisoned_f32(kNan).build());
  for (DType q : {DType::F32, DType::F16, DType::Q8, DType::Q4}) {
    std::string err;
    EXPECT_FALSE(convert(path, q, &err)) << conv::dtype_name(q);
    EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite value (nan) at "
                              "index 69 (row 1, column 5)") &&
                contains(err, "--allow-non-finite"))
        << conv::dtype_name(q) << ": " << err;
  }
}

TEST(HostileGguf, InfWeightIsRefused) {
  std::string err;
  EXPECT_FALSE(convert(write_temp("inf.gguf", poisoned_f32(-kInf).build()), DType::Q8, &err));
  EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite value (-inf) at "
                            "index 69 (row 1, column 5)"))
      << err;
}

// (The fuzz regressions are these small Q8_0 files rather than the F32 ones above.)
TEST(HostileGguf, NonFiniteNormWeightsAreRefused) {
  struct Case {
    const char* tensor;
    float value;
    const char* what;
    const char* fuzz_name;
    int fuzz_target;
  } cases[] = {{"blk.0.attn_norm.weight", kNan, "nan", "nan-weight", 3 /* q4 */},
               {"output_norm.weight", kInf, "inf", "inf-weight", 1 /* f16 */}};
  for (const Case& c : cases) {
    TinyLlamaGguf g;
    g.edit = [&c](const std::string& name, std::vector<float>* v) {
      if (name == c.tensor) (*v)[7] = c.value;
    };
    const std::string bad = g.build();
    keep_for_fuzz(c.fuzz_name, bad, c.fuzz_target);
    std::string err;
    EXPECT_FALSE(convert(write_temp("norm.gguf", bad), DType::Q8, &err));
    EXPECT_TRUE(contains(err, std::string("tensor '") + c.tensor + "' has a non-finite value (" +
                                  c.what + ") at index 7"))
        << err;
    EXPECT_FALSE(contains(err, "row")) << err;  // a vector has no rows
  }
}

// A Q8_0 block's f16 scale of NaN: copied raw into q8 (no float ever made), dequantized for any
// other target. Block 3 of ffn_down (2 blocks per 64-column row) covers row 1, columns 32..63.
TEST(HostileGguf, NanScaleInAQ8_0TensorIsRefused) {
  TinyLlamaGguf g;
  g.edit_bytes = [](const std::string& name, std::string* data) {
    if (name != "blk.0.ffn_down.weight") return;
    const uint16_t nan16 = 0x7e00;
    memcpy(&(*data)[3 * 34], &nan16, 2);
  };
  const std::string bad = g.build();
  keep_for_fuzz("nan-q8_0-scale", bad, /*q8*/ 2);
  const std::string path = write_temp("nan-scale.gguf", bad);
  std::string err;
  EXPECT_FALSE(convert(path, DType::Q8, &err));  // the raw copy
  EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite q8 block scale (nan) "
                            "for the 32 values from index 96 (row 1, column 32)"))
      << err;
  for (DType q : {DType::F32, DType::Q4}) {  // dequantized: every value of the block is NaN
    EXPECT_FALSE(convert(path, q, &err));
    EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' has a non-finite value (nan) at "
                              "index 96 (row 1, column 32)"))
        << conv::dtype_name(q) << ": " << err;
  }
}

TEST(HostileGguf, InfScaleInAQ8_0TensorIsRefused) {
  TinyLlamaGguf g;
  g.edit_bytes = [](const std::string& name, std::string* data) {
    if (name != "token_embd.weight") return;
    const uint16_t inf16 = 0x7c00;
    memcpy(&(*data)[0], &inf16, 2);
  };
  std::string err;
  EXPECT_FALSE(convert(write_temp("inf-scale.gguf", g.build()), DType::Q8, &err));
  EXPECT_TRUE(contains(err, "tensor 'token_embd.weight' has a non-finite q8 block scale (inf) "
                            "for the 32 values from index 0 (row 0, column 0)"))
      << err;
}

// The option stores them: the model builds, and the per-tensor error line says that there is no
// error figure instead of "rmse nan ... rel 0.0000%".
TEST(HostileGguf, AllowNonFiniteStoresThem) {
  const std::string path = write_temp("nan-allowed.gguf", poisoned_f32(kNan).build());
  for (DType q : {DType::F32, DType::F16, DType::Q8, DType::Q4}) {
    std::string err;
    std::ostringstream log;
    EXPECT_TRUE(convert(path, q, &err, /*allow=*/true, &log)) << conv::dtype_name(q) << ": " << err;
    EXPECT_FALSE(contains(log.str(), "rmse nan") || contains(log.str(), "rms nan")) << log.str();
    if (q != DType::F32)
      EXPECT_TRUE(contains(log.str(), "blk.0.ffn_down.weight") &&
                  contains(log.str(), "non-finite values stored"))
          << log.str();
  }
  TinyLlamaGguf g;
  g.edit_bytes = [](const std::string& name, std::string* data) {
    const uint16_t nan16 = 0x7e00;
    if (name == "blk.0.ffn_down.weight") memcpy(&(*data)[3 * 34], &nan16, 2);
  };
  std::string err;
  EXPECT_TRUE(convert(write_temp("nan-scale-allowed.gguf", g.build()), DType::Q8, &err, true))
      << err;
}

// convert_to_file (what `ringlm convert` runs): refused by default, written and verified with
// the option; the summary's figures stay finite.
TEST(HostileGguf, ConvertToFileHonoursTheOption) {
  conv::ConvertOptions o;
  o.source = write_temp("nan-file.gguf", poisoned_f32(kNan).build());
  o.quant = DType::Q8;
  const std::string out = ringlm_test::temp_dir() + "/nan.rlm";
  std::string err;
  EXPECT_FALSE(conv::convert_to_file(o, out, &err));
  EXPECT_TRUE(contains(err, "blk.0.ffn_down.weight")) << err;
  EXPECT_NE(access(out.c_str(), F_OK), 0);  // nothing written
  o.allow_non_finite = true;
  conv::ConvertStats st;
  ASSERT_TRUE(conv::convert_to_file(o, out, &err, &st)) << err;
  EXPECT_TRUE(std::isfinite(st.max_rel_rmse) && std::isfinite(st.mean_rel_rmse));
  EXPECT_NE(st.max_rel_rmse_tensor, "blk.0.ffn_down.weight");
  EXPECT_GT(st.mean_rel_rmse, 0.0);
}

// A finite source value the target encoding cannot hold becomes inf in the file: refused too.
TEST(HostileGguf, ValuesBeyondTheTargetRangeAreRefused) {
  const std::string big = write_temp("big.gguf", poisoned_f32(1e5f).build());
  std::string err;
  EXPECT_FALSE(convert(big, DType::F16, &err));
  EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' does not fit f16: value 100000 at "
                            "index 69 (row 1, column 5) is beyond f16's range"))
      << err;
  EXPECT_TRUE(convert(big, DType::Q8, &err)) << err;  // scale 787: fits
  EXPECT_TRUE(convert(big, DType::F32, &err)) << err;
  const std::string huge = write_temp("huge.gguf", poisoned_f32(1e7f).build());
  EXPECT_FALSE(convert(huge, DType::Q8, &err));  // scale 78740 > 65504
  EXPECT_TRUE(contains(err, "tensor 'blk.0.ffn_down.weight' does not fit q8: the f16 scale of the "
                            "32 values from index 64 (row 1, column 0) overflows"))
      << err;
  EXPECT_TRUE(convert(huge, DType::Q8, &err, /*allow=*/true)) << err;
}

// ---- safetensors -------------------------------------------------------------------------------

// A safetensors file with a hand-written header: entries (name, dtype, shape, begin, end).
struct StEntry {
  std::string name, dtype;
  std::vector<uint64_t> shape;
  uint64_t begin, end;
};
std::string st_file(const std::vector<StEntry>& entries, uint64_t data_bytes) {
  nlohmann::json h = nlohmann::json::object();
  for (const StEntry& e : entries)
    h[e.name] = {{"dtype", e.dtype}, {"shape", e.shape}, {"data_offsets", {e.begin, e.end}}};
  std::string text = h.dump();
  const uint64_t n = text.size();
  return std::string(reinterpret_cast<const char*>(&n), 8) + text + std::string(data_bytes, '\0');
}

std::string st_error(const std::vector<StEntry>& entries, uint64_t data_bytes) {
  std::map<std::string, conv::SafetensorsEntry> out;
  std::string err;
  if (conv::read_safetensors_header(write_temp("t.safetensors", st_file(entries, data_bytes)), &out,
                                    &err))
    return "(accepted)";
  return err;
}

TEST(HostileSafetensors, LayoutIsChecked) {
  // Good: two tensors back to back, and an empty one anywhere.
  EXPECT_EQ(st_error({{"a", "F32", {4}, 0, 16}, {"b", "F32", {2, 2}, 16, 32},
                      {"e", "F32", {0}, 8, 8}},
                     32),
            "(accepted)");
  std::string err = st_error({{"a", "F32", {4}, 0, 16}, {"b", "F32", {4}, 8, 24}}, 32);
  EXPECT_TRUE(contains(err, "tensor 'b': data_offsets [8, 24) overlap tensor 'a' [0, 16)")) << err;
  err = st_error({{"a", "F32", {8}, 0, 32}, {"b", "F16", {2}, 12, 16}}, 32);  // inside a
  EXPECT_TRUE(contains(err, "overlap tensor 'a'")) << err;
  err = st_error({{"a", "F32", {4}, 16, 0}}, 32);
  EXPECT_TRUE(contains(err, "tensor 'a'") && contains(err, "outside")) << err;
  err = st_error({{"a", "F32", {4}, 24, 40}}, 32);
  EXPECT_TRUE(contains(err, "tensor 'a'") && contains(err, "outside")) << err;
  err = st_error({{"a", "F32", {4}, 0, 12}}, 32);
  EXPECT_TRUE(contains(err, "data is 12 bytes, shape and dtype need 16")) << err;
}

TEST(HostileSafetensors, NanWeightInAHuggingFaceDirectoryIsRefused) {
  const nlohmann::json config = {{"model_type", "llama"},      {"hidden_size", 32},
                                 {"num_hidden_layers", 1},     {"num_attention_heads", 2},
                                 {"num_key_value_heads", 1},   {"intermediate_size", 64},
                                 {"vocab_size", 260},          {"max_position_embeddings", 64},
                                 {"rms_norm_eps", 1e-5},       {"tie_word_embeddings", true}};
  conv::ModelData ckpt = ringlm_test::random_hf_checkpoint(config, ringlm_test::WeightScales(), 3);
  for (conv::TensorData& t : ckpt.tensors) {
    if (t.name != "model.layers.0.mlp.up_proj.weight") continue;
    std::vector<float> v = ringlm_test::load_values(t);
    v[40] = kNan;  // row 1, column 8 of 64 x 32
    t = ringlm_test::memory_tensor(t.name, t.shape, v);
  }
  const std::string dir = ringlm_test::temp_dir();
  ASSERT_TRUE(ringlm_test::write_hf_dir(dir, config, ckpt, ringlm_test::simple_vocab(260)));
  std::string err;
  EXPECT_FALSE(convert(dir, DType::Q4, &err));
  EXPECT_TRUE(contains(err, "has a non-finite value (nan) at index 40 (row 1, column 8)")) << err;
  EXPECT_TRUE(convert(dir, DType::Q4, &err, /*allow=*/true)) << err;
}

// ---- llama2.c ----------------------------------------------------------------------------------

// A llama2.c v0 checkpoint (dim 32, hidden 64, 1 layer, 2 heads, vocab 8, seq 16, shared
// classifier) whose weights are all 0.01 but `poison_index` (of the whole float array after the
// header) = `value`; plus its tokenizer.bin.
void write_llama2c(const std::string& ckpt, const std::string& tok, size_t poison_index,
                   float value) {
  const int32_t hdr[7] = {32, 64, 1, 2, 2, 8, 16};
  const size_t n = 8 * 32 + 32 + 4 * 32 * 32 + 32 + 3 * 64 * 32 + 32 + 2 * 16 * 8;
  std::vector<float> w(n, 0.01f);
  w[poison_index] = value;
  std::string c(reinterpret_cast<const char*>(hdr), sizeof hdr);
  c += ringlm_test::f32_bytes(w);
  ASSERT_TRUE(ringlm_test::write_bytes(ckpt, c));
  std::string t;
  const int32_t max_len = 8;
  t.append(reinterpret_cast<const char*>(&max_len), 4);
  for (const char* p : {"<unk>", "<s>", "</s>", " ", "a", "b", " a", "ab"}) {
    const float score = 0;
    const int32_t len = static_cast<int32_t>(strlen(p));
    t.append(reinterpret_cast<const char*>(&score), 4);
    t.append(reinterpret_cast<const char*>(&len), 4);
    t += p;
  }
  ASSERT_TRUE(ringlm_test::write_bytes(tok, t));
}

TEST(HostileLlama2c, InfWeightIsRefusedNamingTheTensor) {
  const std::string dir = ringlm_test::temp_dir();
  // After the 8 x 32 embedding and the 32 rms_att floats: wq.0, row 2, column 3.
  write_llama2c(dir + "/m.bin", dir + "/tok.bin", 8 * 32 + 32 + 2 * 32 + 3, kInf);
  conv::ConvertOptions o;
  o.source = dir + "/m.bin";
  o.tokenizer = dir + "/tok.bin";
  conv::ModelData md;
  std::string err;
  ASSERT_TRUE(conv::load_source(o, &md, &err)) << err;
  std::vector<uint8_t> bytes;
  EXPECT_FALSE(conv::build_model_bytes(md, DType::F16, &bytes, &err));
  EXPECT_TRUE(contains(err, "tensor 'wq.0' has a non-finite value (inf) at index 67 "
                            "(row 2, column 3)"))
      << err;
  EXPECT_TRUE(conv::build_model_bytes(md, DType::F16, &bytes, &err, nullptr, false, true)) << err;
}

// ---- the command line --------------------------------------------------------------------------

TEST(HostileCli, ConvertRefusesNanUnlessAllowed) {
  if (access(ringlm_test::ringlm_bin_path().c_str(), X_OK) != 0) GTEST_SKIP() << "no ringlm binary";
  const std::string b = ringlm_test::ringlm_bin();
  std::string out;
  EXPECT_EQ(ringlm_test::run_command(b + " convert --help", &out), 0);
  EXPECT_TRUE(contains(out, "--allow-non-finite")) << out;
  const std::string src = write_temp("cli-poisoned.gguf", poisoned_f32(kNan).build());
  const std::string dst = ringlm_test::temp_dir() + "/cli.rlm";
  EXPECT_EQ(ringlm_test::run_command(b + " convert " + src + " --quant q8 -o " + dst + " 2>&1", &out),
            1);
  EXPECT_TRUE(contains(out, "tensor 'blk.0.ffn_down.weight' has a non-finite value (nan)")) << out;
  EXPECT_FALSE(contains(out, "verified OK")) << out;
  EXPECT_EQ(ringlm_test::run_command(
                b + " convert " + src + " --quant q8 --allow-non-finite -v -o " + dst + " 2>&1", &out),
            0)
      << out;
  EXPECT_TRUE(contains(out, "non-finite values stored")) << out;
  EXPECT_FALSE(contains(out, "rmse nan") || contains(out, "rms nan")) << out;
}

}  // namespace
