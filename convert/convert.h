// The converter's library API: read a checkpoint (llama2.c .bin, GGUF, Hugging Face directory)
// into the IR, and write the ringlm model file (see schema/model.fbs for the layout).
#ifndef RINGLM_TOOLS_CONVERT_CONVERT_H_
#define RINGLM_TOOLS_CONVERT_CONVERT_H_

#include <stdint.h>

#include <ostream>
#include <string>
#include <vector>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

struct ConvertOptions {
  std::string source;     // llama2.c .bin, .gguf file, or Hugging Face directory
  std::string tokenizer;  // llama2.c tokenizer.bin (required for llama2.c sources)
  fb::DType quant = fb::DType::F32;  // target for 2-D tensors; 1-D tensors stay F32
  // `--quant keep`: instead of `quant`, every 2-D tensor in the smallest encoding that holds its
  // source values exactly (see write_model in writer.h).
  bool keep = false;
  // A mixed-precision preset (apply_quant_preset: "q4k_m") applied after loading; "" = none.
  std::string preset;
  bool progress = false;             // progress bar on stderr for large inputs
  std::ostream* log = nullptr;       // per-tensor quantization error lines
  // Store NaN / infinite weights (and values the target encoding overflows to inf) instead of
  // refusing the tensor: such a model runs, but every activation they reach is NaN.
  bool allow_non_finite = false;
};

// What kind of checkpoint `path` is (by directory / magic bytes / extension).
// Ringlm: already a converted model file (refused with a message saying so).
enum class SourceKind { Unknown, Llama2c, Gguf, HuggingFace, Ringlm };
SourceKind detect_source(const std::string& path);
const char* source_kind_name(SourceKind k);

// Reads the source named by opts.source (dispatching on its kind) into `out`.
bool load_source(const ConvertOptions& opts, ModelData* out, std::string* err);

// Serialises `model` into the model-file bytes: size-prefixed FlatBuffer header, zero padding,
// then every tensor at a 64-aligned offset, in increasing offset order. 2-D tensors are stored
// as `quant`; 1-D tensors as F32. Does not run model verification (callers may build
// deliberately broken models); convert_to_file does. A non-finite weight (NaN, +-Inf, also a
// non-finite f16 scale of a raw Q8_0 / Q4_0 tensor, or a value the encoding overflows to inf)
// fails with an error naming the tensor and the first bad element unless `allow_non_finite`.
bool build_model_bytes(const ModelData& model, fb::DType quant, std::vector<uint8_t>* out,
                       std::string* err, std::ostream* log = nullptr, bool progress = false,
                       bool allow_non_finite = false, bool keep = false);

// Summary of one conversion (filled by convert_to_file when `stats` is non-null).
struct ConvertStats {
  uint32_t n_tensors = 0;
  uint32_t n_quantized = 0;   // tensors stored lossy (f16/q8/q4) from a different source type
  uint32_t n_raw_copied = 0;  // tensors copied without re-quantization (GGUF Q8_0/Q4_0, and
                              // the other exact repacks: Q5_0 / Q4_1 / Q5_1 / IQ4_NL / K-quants)
  // What happened to the tensors, counted by (source type, target, how): one entry per
  // distinct triple in first-seen order, e.g. {"Q5_0", "q8", "exact repack", 12}. "how" is
  // "exact copy" / "exact repack" (raw blocks), "exact" (a re-encoding that lost nothing) or
  // "re-quantized" (lossy).
  struct Action {
    std::string source, target, how;
    uint32_t count = 0;
  };
  std::vector<Action> actions;
  uint64_t file_bytes = 0;
  uint64_t weight_bytes = 0;
  double max_rel_rmse = 0;    // over lossy tensors: RMSE / RMS(source) (tensors holding
                              // non-finite values, --allow-non-finite, have no figure)
  double mean_rel_rmse = 0;
  std::string max_rel_rmse_tensor;
};

// load_source + streamed write to a temporary file next to `out_path`, verification of the
// written file with the runtime's model_open, then rename over `out_path`.
bool convert_to_file(const ConvertOptions& opts, const std::string& out_path, std::string* err);
bool convert_to_file(const ConvertOptions& opts, const std::string& out_path, std::string* err,
                     ConvertStats* stats);

// The write half of convert_to_file for a model already in memory (e.g. synthetic): streams
// `model` as opts.quant to a temporary file, verifies it, renames it to `out_path`.
bool write_model_file(const ModelData& model, const ConvertOptions& opts,
                      const std::string& out_path, std::string* err, ConvertStats* stats);

// Name used in messages and logs: "f32", "f16", "q8", "q4", "q5", "q4_1", "q5_1", "q4k", "q5k",
// "q6k".
const char* dtype_name(fb::DType t);
// Parses "f32" / "f16" / "q8" / "q4" / "q5" / "q4_1" / "q5_1" / "q4k" / "q5k" / "q6k" (also
// "q8_0", "q4_0", "q5_0", "q4_k", "q5_k", "q6_k");
// false if unknown.
bool parse_dtype(const std::string& s, fb::DType* out);

// Mixed-precision presets: most matrices in a base encoding, the ones quantization hurts most in
// more bits, by llama.cpp's rules for its *_K_M presets:
//   q4k_m   q4k; the output projection (the token embedding when it is tied to the output) in
//           q6k, and attention V and FFN down in q6k in the first and last eighth of the layers
//           and every third layer between (llama.cpp's use_more_bits), like Q4_K_M
//   q5k_m   the same with q5k for q4k, like Q5_K_M
// True when `name` is a preset: sets the base encoding and each 2-D tensor's target in `md`
// (md may be null: only the name is checked).
bool apply_quant_preset(const std::string& name, ModelData* md, fb::DType* base);
// "q4k_m, q5k_m": the preset names, for usage messages.
const char* quant_preset_names();

// One line summing up ConvertStats::actions: "12 Q5_0 -> q8 (exact repack), 5 F32 -> f32 (exact)".
std::string actions_summary(const ConvertStats& st);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_CONVERT_H_
