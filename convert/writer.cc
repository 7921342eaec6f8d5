// Model-file writer: header FlatBuffer with final offsets, padding, tensor data (quantized as
// requested), streamed through a sink so a large model never sits in memory as a whole.
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>

#include "convert/convert.h"
#include "convert/output_file.h"
#include "convert/writer.h"
#include "kernels/scalar.h"
#include "quant.h"
#include "ringlm/ringlm.h"

namespace ringlm::internal {
namespace conv {
namespace {

constexpr const char* kConverterName = "ringlm-convert 0.1";
constexpr uint64_t kProgressThreshold = 16ull << 20;

struct Planned {
  const TensorData* src;
  fb::DType dtype;
  uint64_t rows, cols;
  uint64_t size;
  uint64_t offset;
  bool raw;
  bool kept_f32;  // --quant keep chose f32: no smaller encoding holds the values exactly
};

// True when every value is an f16 value (converts to f16 and back to the same bits), so an f16
// tensor holds them exactly.
bool all_f16_exact(const std::vector<float>& v) {
  for (float x : v) {
    const float back = fp16_to_f32(f32_to_fp16(x));
    if (memcmp(&back, &x, 4) != 0) return false;
  }
  return true;
}

void count_action(ConvertStats* stats, const std::string& source, fb::DType target,
                  const char* how) {
  if (!stats) return;
  for (ConvertStats::Action& a : stats->actions) {
    if (a.source == source && a.target == dtype_name(target) && a.how == how) {
      ++a.count;
      return;
    }
  }
  stats->actions.push_back({source, dtype_name(target), how, 1});
}

// "  blk.0.attn_q.weight                  Q5_0    -> q8   <what>"
void log_line(std::ostream* log, const Planned& p, const std::string& what) {
  if (!log) return;
  char head[160];
  snprintf(head, sizeof head, "  %-36s %-7s -> %-3s  ", p.src->name.c_str(),
           p.src->source_type.c_str(), dtype_name(p.dtype));
  *log << head << what << "\n";
}

std::vector<uint8_t> build_header(const ModelData& m, const std::vector<Planned>& plan) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  auto tok = build_tokenizer(fbb, m.tokenizer);
  std::vector<flatbuffers::Offset<fb::Tensor>> tensors;
  tensors.reserve(plan.size());
  for (const Planned& p : plan) {
    auto name = fbb.CreateString(p.src->name);
    auto shape = fbb.CreateVector(p.src->shape);
    fb::TensorBuilder tb(fbb);
    tb.add_name(name);
    tb.add_role(p.src->role);
    tb.add_layer(p.src->layer);
    tb.add_shape(shape);
    tb.add_dtype(p.dtype);
    tb.add_group_size(p.dtype == fb::DType::Q8 || p.dtype == fb::DType::Q4 ||
                              p.dtype == fb::DType::Q4K || p.dtype == fb::DType::Q6K ||
                              p.dtype == fb::DType::Q5K || p.dtype == fb::DType::Q5 ||
                              p.dtype == fb::DType::Q4_1 || p.dtype == fb::DType::Q5_1
                          ? kQuantGroup
                          : 0);
    tb.add_offset(p.offset);
    tb.add_size(p.size);
    tensors.push_back(tb.Finish());
  }
  auto tensors_v = fbb.CreateVector(tensors);
  flatbuffers::Offset<fb::GenerationDefaults> gen;
  if (m.generation.present) {
    const GenerationData& g = m.generation;
    gen = fb::CreateGenerationDefaults(fbb, g.temperature, g.top_k, g.top_p, g.min_p,
                                       g.repeat_penalty, g.max_tokens);
  }
  flatbuffers::Offset<flatbuffers::String> tmpl;
  if (!m.chat_template.empty()) tmpl = fbb.CreateString(m.chat_template);
  auto prov = fb::CreateProvenanceDirect(fbb, m.source.c_str(), kConverterName);

  const auto& a = m.arch;
  flatbuffers::Offset<flatbuffers::Vector<uint8_t>> local;
  if (!a.layer_is_local.empty()) {
    std::vector<uint8_t> flags(a.layer_is_local.begin(), a.layer_is_local.end());
    local = fbb.CreateVector(flags);
  }
  fb::ArchitectureBuilder ab(fbb);
  ab.add_family(a.family);
  ab.add_n_layers(a.n_layers);
  ab.add_dim(a.dim);
  ab.add_n_heads(a.n_heads);
  ab.add_n_kv_heads(a.n_kv_heads);
  ab.add_head_dim(a.head_dim);
  ab.add_ffn_dim(a.ffn_dim);
  ab.add_vocab_size(a.vocab_size);
  ab.add_max_context(a.max_context);
  ab.add_rope_theta(a.rope_theta);
  ab.add_rope_style(a.rope_style);
  ab.add_norm_eps(a.norm_eps);
  ab.add_tied_embeddings(a.tied_embeddings);
  ab.add_activation(a.activation);
  ab.add_rope_scaling(a.rope_scaling);
  ab.add_rope_scaling_factor(a.rope_scaling_factor);
  ab.add_rope_low_freq_factor(a.rope_low_freq_factor);
  ab.add_rope_high_freq_factor(a.rope_high_freq_factor);
  ab.add_rope_original_context(a.rope_original_context);
  ab.add_qkv_bias(a.qkv_bias);
  ab.add_qk_norm(a.qk_norm);
  ab.add_embedding_scale(a.embedding_scale);
  ab.add_attn_logit_softcap(a.attn_logit_softcap);
  ab.add_final_logit_softcap(a.final_logit_softcap);
  ab.add_query_pre_attn_scalar(a.query_pre_attn_scalar);
  ab.add_sliding_window(a.sliding_window);
  if (!a.layer_is_local.empty()) ab.add_layer_is_local(local);
  ab.add_rope_theta_local(a.rope_theta_local);
  auto arch = ab.Finish();

  fb::ModelBuilder mb(fbb);
  // The lowest version that holds the file (schema/model.fbs): 5 when it has Q4_1 or Q5_1
  // tensors, 4 when Q5K or Q5 ones, 3 when Q6K ones, 2 when Q4K ones.
  uint32_t version = 1;
  for (const Planned& p : plan) {
    const uint32_t need = p.dtype == fb::DType::Q4_1 || p.dtype == fb::DType::Q5_1 ? 5
                          : p.dtype == fb::DType::Q5K || p.dtype == fb::DType::Q5 ? 4
                          : p.dtype == fb::DType::Q6K ? 3
                          : p.dtype == fb::DType::Q4K ? 2
                                                      : 1;
    if (need > version) version = need;
  }
  mb.add_format_version(version);
  mb.add_arch(arch);
  mb.add_tokenizer(tok);
  mb.add_tensors(tensors_v);
  if (m.generation.present) mb.add_generation(gen);
  if (!m.chat_template.empty()) mb.add_chat_template(tmpl);
  mb.add_provenance(prov);
  fb::FinishSizePrefixedModelBuffer(fbb, mb.Finish());
  return std::vector<uint8_t>(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
}

// Encodes `x` (rows x cols floats) as `t`; accumulates squared error and squared source.
void encode(const std::vector<float>& x, fb::DType t, uint64_t rows, uint64_t cols,
            std::vector<uint8_t>* out, double* err2, double* src2) {
  const uint64_t n = rows * cols;
  out->assign(static_cast<size_t>(tensor_data_bytes(static_cast<WeightType>(t), rows, cols)), 0);
  double e2 = 0, s2 = 0;
  for (uint64_t i = 0; i < n; ++i) s2 += static_cast<double>(x[i]) * x[i];
  switch (t) {
    case fb::DType::F32:
      memcpy(out->data(), x.data(), n * 4);
      break;
    case fb::DType::F16: {
      uint8_t* o = out->data();
      for (uint64_t i = 0; i < n; ++i) {
        const uint16_t h = f32_to_fp16(x[i]);
        memcpy(o + 2 * i, &h, 2);
        const double d = static_cast<double>(fp16_to_f32(h)) - x[i];
        e2 += d * d;
      }
      break;
    }
    case fb::DType::Q8:
    case fb::DType::Q4:
    case fb::DType::Q5: {
      const WeightType wt = static_cast<WeightType>(t);
      const uint64_t cp = padded_cols(cols);
      const uint64_t row_qs = wt == WeightType::Q8 ? cp : cp / 2;
      const uint64_t groups = cp / kQuantGroup;
      uint8_t* qs = out->data();
      uint8_t* high = out->data() + q5k_high_offset(rows, cols);  // Q5 only
      uint8_t* sc = out->data() + quant_scales_offset(wt, rows, cols);
      std::vector<uint16_t> scales(static_cast<size_t>(groups));
      std::vector<float> back(static_cast<size_t>(cols));
      for (uint64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        uint8_t* q = qs + r * row_qs;
        if (wt == WeightType::Q8) {
          quantize_row_q8(row, cols, reinterpret_cast<int8_t*>(q), scales.data());
          dequantize_row_q8(reinterpret_cast<const int8_t*>(q), scales.data(), cols, back.data());
        } else if (wt == WeightType::Q5) {
          uint8_t* h = high + r * (cp / 8);
          quantize_row_q5(row, cols, q, h, scales.data());
          dequantize_row_q5(q, h, scales.data(), cols, back.data());
        } else {
          quantize_row_q4(row, cols, q, scales.data());
          dequantize_row_q4(q, scales.data(), cols, back.data());
        }
        memcpy(sc + r * groups * 2, scales.data(), groups * 2);
        for (uint64_t c = 0; c < cols; ++c) {
          const double d = static_cast<double>(back[c]) - row[c];
          e2 += d * d;
        }
      }
      break;
    }
    case fb::DType::Q4_1:
    case fb::DType::Q5_1: {
      const bool five = t == fb::DType::Q5_1;
      const WeightType wt = static_cast<WeightType>(t);
      const uint64_t cp = padded_cols(cols), groups = cp / kQuantGroup;
      uint8_t* qs = out->data();
      uint8_t* high = out->data() + q5k_high_offset(rows, cols);  // Q5_1 only
      uint8_t* dm = out->data() + quant_scales_offset(wt, rows, cols);
      std::vector<uint16_t> dmv(static_cast<size_t>(2 * groups));  // (groups, 2) d, m
      std::vector<float> back(static_cast<size_t>(cols));
      for (uint64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        uint8_t* q = qs + r * (cp / 2);
        if (five) {
          uint8_t* h = high + r * (cp / 8);
          quantize_row_q5_1(row, cols, q, h, dmv.data());
          dequantize_row_q5_1(q, h, dmv.data(), cols, back.data());
        } else {
          quantize_row_q4_1(row, cols, q, dmv.data());
          dequantize_row_q4_1(q, dmv.data(), cols, back.data());
        }
        memcpy(dm + r * groups * 4, dmv.data(), groups * 4);
        for (uint64_t c = 0; c < cols; ++c) {
          const double d = static_cast<double>(back[c]) - row[c];
          e2 += d * d;
        }
      }
      break;
    }
    case fb::DType::Q4K:
    case fb::DType::Q5K: {
      const bool five = t == fb::DType::Q5K;
      const WeightType wt = static_cast<WeightType>(t);
      const uint64_t row_qs = padded_cols(cols) / 2, supers = q4k_supers(cols);
      uint8_t* qs = out->data();
      uint8_t* high = out->data() + q5k_high_offset(rows, cols);  // Q5K only
      uint8_t* dm = out->data() + quant_scales_offset(wt, rows, cols);
      uint8_t* subs = out->data() + (five ? q5k_subs_offset(rows, cols) : q4k_subs_offset(rows, cols));
      std::vector<uint16_t> dmv(static_cast<size_t>(2 * supers));
      std::vector<float> back(static_cast<size_t>(cols));
      for (uint64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        uint8_t* q = qs + r * row_qs;
        uint8_t* sb = subs + r * supers * 16;
        if (five) {
          uint8_t* h = high + r * (padded_cols(cols) / 8);
          quantize_row_q5k(row, cols, q, h, dmv.data(), sb);
          dequantize_row_q5k(q, h, dmv.data(), sb, cols, back.data());
        } else {
          quantize_row_q4k(row, cols, q, dmv.data(), sb);
          dequantize_row_q4k(q, dmv.data(), sb, cols, back.data());
        }
        memcpy(dm + r * supers * 4, dmv.data(), supers * 4);
        for (uint64_t c = 0; c < cols; ++c) {
          const double d = static_cast<double>(back[c]) - row[c];
          e2 += d * d;
        }
      }
      break;
    }
    case fb::DType::Q6K: {
      const uint64_t cp = padded_cols(cols), supers = q6k_supers(cols);
      uint8_t* qs = out->data();
      uint8_t* high = out->data() + q6k_high_offset(rows, cols);
      uint8_t* dp = out->data() + quant_scales_offset(WeightType::Q6K, rows, cols);
      int8_t* sc = reinterpret_cast<int8_t*>(out->data() + q6k_subs_offset(rows, cols));
      std::vector<uint16_t> dv(static_cast<size_t>(supers));
      std::vector<float> back(static_cast<size_t>(cols));
      for (uint64_t r = 0; r < rows; ++r) {
        const float* row = x.data() + r * cols;
        uint8_t* q = qs + r * cp / 2;
        uint8_t* h = high + r * cp / 4;
        int8_t* s16 = sc + r * supers * kQ6kSubsPerSuper;
        quantize_row_q6k(row, cols, q, h, dv.data(), s16);
        dequantize_row_q6k(q, h, dv.data(), s16, cols, back.data());
        memcpy(dp + r * supers * 2, dv.data(), supers * 2);
        for (uint64_t c = 0; c < cols; ++c) {
          const double d = static_cast<double>(back[c]) - row[c];
          e2 += d * d;
        }
      }
      break;
    }
  }
  *err2 = e2;
  *src2 = s2;
}

// ---- non-finite values ----------------------------------------------------------------------
// A NaN or infinite weight turns every activation it reaches into NaN: the converted model
// verifies (the verifier checks structure, not values) and then samples one token forever.
// Every reader's tensors pass through write_model on their way into the file, so the check is
// made once here, for all of them: on the source floats (load_f32), on the f16 scales of raw
// GGUF Q8_0 / Q4_0 copies (load_raw), and on the encoded output, where a finite source value
// can still overflow f16 (|x| > 65504 as f16; a q8 / q4 group whose scale exceeds f16's range).

struct NonFinite {
  uint64_t index;  // first affected element (row-major), or n when all are finite
  float value;     // the non-finite value found (a source value, or an f16 value / scale)
};

const char* float_class(float v) { return v != v ? "nan" : v > 0 ? "inf" : "-inf"; }

NonFinite first_non_finite(const float* x, uint64_t n) {
  for (uint64_t i = 0; i < n; ++i)
    if (!std::isfinite(x[i])) return {i, x[i]};
  return {n, 0.0f};
}

// In `data`, a tensor of rows x cols stored as `t` (file layout): the first stored f16 value
// (F16) or group scale (Q8 / Q4 / Q5, Q4_1's / Q5_1's d or m; index = the group's first element)
// that is not finite. F32 data is the source itself and is checked by first_non_finite.
NonFinite first_non_finite_stored(const uint8_t* data, fb::DType t, uint64_t rows,
                                  uint64_t cols) {
  const uint64_t n = rows * cols;
  auto bad = [](uint16_t h) { return (h & 0x7c00u) == 0x7c00u; };  // exponent all ones
  if (t == fb::DType::F16) {
    for (uint64_t i = 0; i < n; ++i) {
      uint16_t h;
      memcpy(&h, data + 2 * i, 2);
      if (bad(h)) return {i, fp16_to_f32(h)};
    }
  } else if (t == fb::DType::Q8 || t == fb::DType::Q4 || t == fb::DType::Q5 ||
             t == fb::DType::Q4_1 || t == fb::DType::Q5_1) {
    const WeightType wt = static_cast<WeightType>(t);
    const uint64_t groups = padded_cols(cols) / kQuantGroup;
    const uint64_t per = t == fb::DType::Q4_1 || t == fb::DType::Q5_1 ? 2 : 1;  // f16 per group
    const uint8_t* sc = data + quant_scales_offset(wt, rows, cols);
    for (uint64_t i = 0; i < rows * groups * per; ++i) {
      uint16_t h;
      memcpy(&h, sc + 2 * i, 2);
      const uint64_t k = i / per;  // the group
      if (bad(h)) return {(k / groups) * cols + (k % groups) * kQuantGroup, fp16_to_f32(h)};
    }
  } else if (t == fb::DType::Q4K || t == fb::DType::Q5K || t == fb::DType::Q6K) {
    // d (and Q4K's / Q5K's dmin) of each super-block (8 groups); index = the super-block's first
    // element.
    const uint64_t supers = q4k_supers(cols);
    const uint64_t per = t == fb::DType::Q6K ? 1 : 2;  // f16 values per super-block
    const uint8_t* dm = data + quant_scales_offset(static_cast<WeightType>(t), rows, cols);
    for (uint64_t k = 0; k < rows * supers * per; ++k) {
      uint16_t h;
      memcpy(&h, dm + 2 * k, 2);
      const uint64_t sb = k / per;
      if (bad(h)) {
        return {(sb / supers) * cols + (sb % supers) * kQuantGroup * kQ4kSuperGroups,
                fp16_to_f32(h)};
      }
    }
  }
  return {n, 0.0f};
}

// Values one stored f16 scale covers (a Q4K / Q5K super-block's d / dmin, a Q6K one's d: 8
// groups).
uint32_t scale_span(fb::DType t) {
  return t == fb::DType::Q4K || t == fb::DType::Q5K || t == fb::DType::Q6K
             ? kQuantGroup * kQ4kSuperGroups
             : kQuantGroup;
}

// "index I (row R, column C)" for matrices, "index I" for vectors.
std::string where(const Planned& p, uint64_t i) {
  std::string s = "index " + std::to_string(i);
  if (p.src->shape.size() == 2)
    s += " (row " + std::to_string(i / p.cols) + ", column " + std::to_string(i % p.cols) + ")";
  return s;
}

constexpr const char* kAllowHint =
    "; the source is damaged (`ringlm convert --allow-non-finite` stores such values anyway)";

void progress_bar(uint64_t done, uint64_t total, const std::string& name) {
  const int width = 40;
  const int fill = total ? static_cast<int>(done * width / total) : width;
  fprintf(stderr, "\r[%.*s%*s] %3d%% %-40.40s", fill, "========================================",
          width - fill, "", total ? static_cast<int>(done * 100 / total) : 100, name.c_str());
  if (done >= total) fputc('\n', stderr);
  fflush(stderr);
}

}  // namespace

const char* dtype_name(fb::DType t) {
  switch (t) {
    case fb::DType::F32: return "f32";
    case fb::DType::F16: return "f16";
    case fb::DType::Q8: return "q8";
    case fb::DType::Q4: return "q4";
    case fb::DType::Q4K: return "q4k";
    case fb::DType::Q6K: return "q6k";
    case fb::DType::Q5K: return "q5k";
    case fb::DType::Q5: return "q5";
    case fb::DType::Q4_1: return "q4_1";
    case fb::DType::Q5_1: return "q5_1";
  }
  return "?";
}

bool parse_dtype(const std::string& s, fb::DType* out) {
  std::string l = s;
  for (char& c : l) c = static_cast<char>(tolower(static_cast<unsigned char>(c)));
  if (l == "f32") *out = fb::DType::F32;
  else if (l == "f16") *out = fb::DType::F16;
  else if (l == "q8" || l == "q8_0") *out = fb::DType::Q8;
  else if (l == "q4" || l == "q4_0") *out = fb::DType::Q4;
  else if (l == "q4k" || l == "q4_k") *out = fb::DType::Q4K;
  else if (l == "q6k" || l == "q6_k") *out = fb::DType::Q6K;
  else if (l == "q5k" || l == "q5_k") *out = fb::DType::Q5K;
  else if (l == "q5" || l == "q5_0") *out = fb::DType::Q5;
  else if (l == "q4_1") *out = fb::DType::Q4_1;
  else if (l == "q5_1") *out = fb::DType::Q5_1;
  else return false;
  return true;
}

std::string actions_summary(const ConvertStats& st) {
  std::string s;
  for (const ConvertStats::Action& a : st.actions) {
    if (!s.empty()) s += ", ";
    s += std::to_string(a.count) + " " + a.source + " -> " + a.target + " (" + a.how + ")";
  }
  return s;
}

bool write_model(const ModelData& m, fb::DType quant, const ByteSink& sink, std::string* err,
                 std::ostream* log, bool progress, ConvertStats* stats,
                 const PlanCheck& plan_check, bool allow_non_finite, bool keep) {
  if (static_cast<uint32_t>(quant) > static_cast<uint32_t>(fb::DType::MAX)) {
    *err = "unknown target dtype";
    return false;
  }
  std::vector<Planned> plan;
  plan.reserve(m.tensors.size());
  uint64_t total_src = 0;
  for (const TensorData& t : m.tensors) {
    if (t.shape.size() != 1 && t.shape.size() != 2) {
      *err = "tensor '" + t.name + "' has rank " + std::to_string(t.shape.size()) +
             " (only 1 and 2 are stored)";
      return false;
    }
    Planned p;
    p.src = &t;
    p.rows = t.shape.size() == 2 ? t.shape[0] : 1;
    p.cols = t.shape.back();
    if (p.rows == 0 || p.cols == 0 || p.rows >= (1ull << 32) || p.cols >= (1ull << 32)) {
      *err = "tensor '" + t.name + "' has a dimension out of range";
      return false;
    }
    p.kept_f32 = false;
    if (t.shape.size() != 2) {
      p.dtype = fb::DType::F32;  // norms, biases: always f32
    } else if (!keep) {
      p.dtype = t.has_target ? t.target : quant;
    } else if (t.has_raw && t.load_raw && p.cols % kQuantGroup == 0) {
      p.dtype = t.raw_type;  // the source's own blocks, repacked without rounding
    } else if (t.source_type == "F16") {
      p.dtype = fb::DType::F16;
    } else {
      // The layout needs every size before the first byte is written, so the values are
      // checked here and loaded again when the tensor is written.
      std::vector<float> v;
      if (!t.load_f32) {
        *err = "tensor '" + t.name + "' has no float loader";
        return false;
      }
      if (!t.load_f32(&v, err)) {
        *err = "tensor '" + t.name + "': " + *err;
        return false;
      }
      p.dtype = all_f16_exact(v) ? fb::DType::F16 : fb::DType::F32;
      p.kept_f32 = p.dtype == fb::DType::F32;
    }
    p.raw = p.cols % kQuantGroup == 0 &&
            ((t.has_raw && t.raw_type == p.dtype && t.load_raw) ||
             (t.load_raw_as && t.shape.size() == 2 &&
              (!t.has_raw_as_only || t.raw_as_only == p.dtype)));
    if (!p.raw && !t.load_f32) {
      *err = "tensor '" + t.name + "' has no loader for target " + dtype_name(p.dtype);
      return false;
    }
    p.size = tensor_data_bytes(static_cast<WeightType>(p.dtype), p.rows, p.cols);
    if (p.size == 0) {
      *err = "tensor '" + t.name + "' is too large";
      return false;
    }
    p.offset = 0;
    total_src += p.rows * p.cols * 4;
    plan.push_back(p);
  }

  // Lay out: the header's size does not depend on the offset values (all non-zero), but rebuild
  // until the data start is stable anyway.
  uint64_t data_start = 64;
  std::vector<uint8_t> header;
  for (int iter = 0; iter < 8; ++iter) {
    uint64_t off = data_start;
    for (Planned& p : plan) {
      p.offset = off;
      off = align_up(off + p.size, kTensorAlignment);
    }
    header = build_header(m, plan);
    const uint64_t need = align_up(header.size(), kTensorAlignment);
    if (need <= data_start) break;
    data_start = need;
    if (iter == 7) {
      *err = "internal: header layout did not converge";
      return false;
    }
  }
  if (header.size() > 0x7fffffffu) {
    *err = "model metadata exceeds the 2 GiB FlatBuffer limit";
    return false;
  }

  if (plan_check) {
    // Tensors are laid out in order: the last one ends the file.
    const uint64_t file_bytes = plan.empty() ? header.size() : plan.back().offset + plan.back().size;
    if (!plan_check(file_bytes, err)) return false;
  }

  static const uint8_t zeros[64] = {};
  uint64_t pos = 0;
  auto put = [&](const void* p, uint64_t n) {
    if (!sink(p, n, err)) return false;
    pos += n;
    return true;
  };
  auto pad_to = [&](uint64_t target) {
    while (pos < target) {
      if (!put(zeros, std::min<uint64_t>(sizeof zeros, target - pos))) return false;
    }
    return true;
  };
  if (!put(header.data(), header.size())) return false;

  const bool show = progress && total_src > kProgressThreshold;
  uint64_t done = 0;
  double rel_sum = 0;
  uint32_t n_lossy = 0, n_rel = 0;  // lossy tensors; those with a finite relative error
  std::vector<float> x;
  std::vector<uint8_t> enc;
  for (const Planned& p : plan) {
    const TensorData& t = *p.src;
    if (show) progress_bar(done, total_src, t.name);
    if (!pad_to(p.offset)) return false;
    const uint64_t n = p.rows * p.cols;
    if (p.raw) {
      const bool source_blocks = t.has_raw && t.raw_type == p.dtype && t.load_raw;
      if (!(source_blocks ? t.load_raw(&enc, err) : t.load_raw_as(p.dtype, &enc, err))) {
        *err = "tensor '" + t.name + "': " + *err;
        return false;
      }
      if (enc.size() != p.size) {
        *err = "tensor '" + t.name + "': raw data is " + std::to_string(enc.size()) +
               " bytes, expected " + std::to_string(p.size);
        return false;
      }
      const NonFinite bad = first_non_finite_stored(enc.data(), p.dtype, p.rows, p.cols);
      if (bad.index < n && !allow_non_finite) {
        *err = "tensor '" + t.name + "' has a non-finite " + dtype_name(p.dtype) +
               " block scale (" + float_class(bad.value) + ") for the " +
               std::to_string(scale_span(p.dtype)) + " values from " + where(p, bad.index) + kAllowHint;
        return false;
      }
      // Q8_0 / Q4_0 blocks are q8 / q4 groups already; Q5_0 blocks become q5 (or int8), Q4_1 /
      // Q5_1 blocks q4_1 / q5_1 (the fifth bits regrouped), IQ4_NL quants int8.
      const bool copy = t.source_type == "Q8_0" || t.source_type == "Q4_0" || t.source_type == "Q4_1";
      log_line(log, p, copy ? "copied without re-quantization (exact)"
                            : "repacked without re-quantization (exact, same values)");
      count_action(stats, t.source_type, p.dtype, copy ? "exact copy" : "exact repack");
      if (stats) ++stats->n_raw_copied;
    } else {
      if (!t.load_f32(&x, err)) {
        *err = "tensor '" + t.name + "': " + *err;
        return false;
      }
      if (x.size() != n) {
        *err = "tensor '" + t.name + "': loader gave " + std::to_string(x.size()) +
               " values, shape needs " + std::to_string(n);
        return false;
      }
      const NonFinite src_bad = first_non_finite(x.data(), n);
      if (src_bad.index < n && !allow_non_finite) {
        *err = "tensor '" + t.name + "' has a non-finite value (" + float_class(src_bad.value) +
               ") at " + where(p, src_bad.index) + kAllowHint;
        return false;
      }
      double e2 = 0, s2 = 0;
      encode(x, p.dtype, p.rows, p.cols, &enc, &e2, &s2);
      if (src_bad.index == n && !allow_non_finite) {
        // A finite source that the encoding turned into inf (f16 overflow).
        const NonFinite out_bad = first_non_finite_stored(enc.data(), p.dtype, p.rows, p.cols);
        if (out_bad.index < n) {
          char v[32];
          snprintf(v, sizeof v, "%g", x[out_bad.index]);
          *err = "tensor '" + t.name + "' does not fit " + dtype_name(p.dtype) + ": " +
                 (p.dtype == fb::DType::F16
                      ? std::string("value ") + v + " at " + where(p, out_bad.index) +
                            " is beyond f16's range (65504)"
                      : "the f16 scale of the " + std::to_string(scale_span(p.dtype)) +
                            " values from " + where(p, out_bad.index) + " overflows") +
                 "; convert with --quant f32 (or --allow-non-finite to store inf)";
          return false;
        }
      }
      const bool source_finite = src_bad.index == n;
      if (p.dtype == fb::DType::F32) {
        // f32 holds every source value (a dequantized block's values are float32 products).
        log_line(log, p, !source_finite ? "non-finite values stored"
                         : p.kept_f32   ? "stored exactly (kept as f32: no smaller encoding "
                                          "holds these values without rounding)"
                                        : "stored exactly");
        count_action(stats, t.source_type, p.dtype,
                     source_finite ? "exact" : "non-finite values stored");
      } else {
        const double rms = sqrt(s2 / static_cast<double>(n));
        const double rmse = sqrt(e2 / static_cast<double>(n));
        // Non-finite values (stored under --allow-non-finite) make both sums inf or NaN; a
        // relative error then means nothing and is neither printed as a number nor counted.
        const bool finite = std::isfinite(rms) && std::isfinite(rmse);
        const double rel = rms > 0 ? rmse / rms : (rmse > 0 ? INFINITY : 0.0);
        const bool exact = finite && e2 == 0.0;
        if (log) {
          char line[256];
          if (!finite) {
            snprintf(line, sizeof line, "non-finite values stored (no error figure)");
          } else if (exact) {
            snprintf(line, sizeof line, "stored exactly (rmse 0)");
          } else {
            snprintf(line, sizeof line, "re-quantized: rmse %.3e  rms %.3e  rel %.4f%%", rmse,
                     rms, rel * 100.0);
          }
          log_line(log, p, line);
        }
        count_action(stats, t.source_type, p.dtype,
                     !finite ? "non-finite values stored" : exact ? "exact" : "re-quantized");
        ++n_lossy;
        if (finite) {
          rel_sum += rel;
          ++n_rel;
          if (stats && rel >= stats->max_rel_rmse) {
            stats->max_rel_rmse = rel;
            stats->max_rel_rmse_tensor = t.name;
          }
        }
      }
    }
    if (!put(enc.data(), enc.size())) return false;
    done += n * 4;
  }
  if (show) progress_bar(total_src, total_src, "done");
  if (stats) {
    stats->n_tensors = static_cast<uint32_t>(plan.size());
    stats->n_quantized = n_lossy;
    stats->mean_rel_rmse = n_rel ? rel_sum / n_rel : 0.0;
    stats->file_bytes = pos;
    stats->weight_bytes = 0;
    for (const Planned& p : plan) stats->weight_bytes += p.size;
  }
  return true;
}

bool build_model_bytes(const ModelData& model, fb::DType quant, std::vector<uint8_t>* out,
                       std::string* err, std::ostream* log, bool progress,
                       bool allow_non_finite, bool keep) {
  std::vector<uint8_t> bytes;
  ByteSink sink = [&bytes](const void* p, uint64_t n, std::string*) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    bytes.insert(bytes.end(), b, b + n);
    return true;
  };
  if (!write_model(model, quant, sink, err, log, progress, nullptr, nullptr, allow_non_finite,
                   keep))
    return false;
  *out = std::move(bytes);
  return true;
}

bool write_model_to_fd(const ModelData& model, fb::DType quant, int fd,
                       const std::string& write_error, std::string* err, std::ostream* log,
                       bool progress, ConvertStats* stats, bool allow_non_finite, bool keep) {
  std::vector<uint8_t> buf;
  buf.reserve(4u << 20);
  auto flush = [&](std::string* e) {
    size_t off = 0;
    while (off < buf.size()) {
      ssize_t w = ::write(fd, buf.data() + off, buf.size() - off);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        *e = write_error + ": " + strerror(errno);
        return false;
      }
      off += static_cast<size_t>(w);
    }
    buf.clear();
    return true;
  };
  ByteSink sink = [&](const void* p, uint64_t n, std::string* e) {
    const uint8_t* b = static_cast<const uint8_t*>(p);
    while (n > 0) {
      const uint64_t k = std::min<uint64_t>(buf.capacity() - buf.size(), n);
      buf.insert(buf.end(), b, b + k);
      b += k;
      n -= k;
      if (buf.size() == buf.capacity() && !flush(e)) return false;
    }
    return true;
  };
  PlanCheck fits = [fd](uint64_t need, std::string* e) {
    // Only a regular file's file system is asked (a pipe's "free space" means nothing); when it
    // is unknown, write() reports running out.
    struct stat st;
    uint64_t free_bytes = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || !free_bytes_on(fd, &free_bytes)) return true;
    if (need <= free_bytes) return true;
    char msg[160];
    snprintf(msg, sizeof msg, "the model needs %.2f GiB but its file system has %.2f GiB free",
             need / 1073741824.0, free_bytes / 1073741824.0);
    *e = msg;
    return false;
  };
  return write_model(model, quant, sink, err, log, progress, stats, fits, allow_non_finite,
                     keep) &&
         flush(err);
}

}  // namespace conv
}  // namespace ringlm::internal
