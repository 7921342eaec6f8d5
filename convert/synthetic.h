// Synthetic models: random weights in the exact shape of a real model, for benchmarking without
// the checkpoint. The shape comes from a Hugging Face config.json (or a built-in name); weights
// are deterministic pseudo-random (a counter-based hash, so any tensor regenerates independently
// and, generated directly in the target encoding, a 1 B-parameter model builds in seconds:
// SyntheticOptions::direct); the tokenizer is a synthetic
// SentencePiece vocabulary of vocab_size pieces so text prompts work (through byte fallback).
#ifndef RINGLM_TOOLS_CONVERT_SYNTHETIC_H_
#define RINGLM_TOOLS_CONVERT_SYNTHETIC_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

struct SyntheticOptions {
  // false: the config's own family (llama, mistral, qwen2, qwen3, gemma2, gemma3, phi3, with
  // their biases, qk-norm, Gemma norms / soft-caps / sliding-window layers, rope scaling: what
  // the converter's family reader derives from it); configs it refuses fail.
  // true: the Llama-family equivalent of the same dimensions (no biases / qk-norm / Gemma extras /
  // sliding windows / rope scaling), also for configs the family reader refuses as long as the
  // dimensions are there; every dropped feature (or the refusal) is listed in *ignored.
  bool as_llama = false;
  // Non-zero: use this many layers instead of the config's (tests, quick runs).
  uint32_t n_layers_override = 0;
  // Standard deviation of the matrix weights; 0 = the config's initializer_range, else 0.02.
  float weight_std = 0.0f;
  // Also attach each matrix in the file encoding `direct_type` (TensorData raw data, generated
  // directly), so writing the model as that type needs no float tensor and no quantization pass.
  // The weights are the same either way for f32 / f16 / q8 (q8 is exact: see synthetic.cc); q4
  // holds round(v / 16) of the same integers.
  bool direct = false;
  fb::DType direct_type = fb::DType::Q8;
  // Non-null: the model's tokenizer instead of the synthetic vocabulary (a real vocabulary read
  // from a file, for benchmarks whose cost depends on it: grammar masks, sampling over 128k
  // tokens). Its size replaces the config's vocab_size (embedding and output rows). Borrowed:
  // must outlive the synthetic_* call; it is copied into the ModelData.
  const TokenizerData* vocab = nullptr;
  // Receives one line per feature the Llama-shaped model ignores (only with as_llama).
  std::vector<std::string>* ignored = nullptr;
  // Receives a display name: the config's directory name (or the built-in name), with
  // " (as llama)" when features were dropped.
  std::string* name = nullptr;
};

// Builds a random-weight model of the shape `config_json_path` (or the directory holding it)
// describes: every architecture field the config gives, as families.h's hf_config_arch reads it
// (hidden_size, num_hidden_layers, num_attention_heads, num_key_value_heads (default: heads),
// head_dim (default: hidden / heads or the family's), intermediate_size, vocab_size,
// max_position_embeddings, rope_theta, rms_norm_eps, tie_word_embeddings, activation,
// model_type / architectures -> family and the family's extras), and the family's tensors
// (families.h family_tensor_specs). Tensors load lazily (each load regenerates its values from
// (seed, tensor index, element index)).
bool synthetic_from_hf_config(const std::string& config_json_path, uint32_t seed, ModelData* out,
                              std::string* err);
bool synthetic_from_hf_config(const std::string& config_json_path, uint32_t seed,
                              const SyntheticOptions& opts, ModelData* out, std::string* err);

// Built-in shapes usable without a file. Currently: "smollm2-135m" (dim 576, 30 layers, 9 heads,
// 3 kv heads, ffn 1536, vocab 49152, rope_theta 1e5, tied, ctx 2048).
std::vector<std::string> synthetic_builtin_names();
bool synthetic_builtin(const std::string& name, uint32_t seed, const SyntheticOptions& opts,
                       ModelData* out, std::string* err);

// `spec` is a built-in name or a path to a config.json (or a directory holding one).
bool synthetic_model(const std::string& spec, uint32_t seed, const SyntheticOptions& opts,
                     ModelData* out, std::string* err);

// The Llama-family shape a synthetic model is built from (exposed for tests and the bench).
struct SyntheticShape {
  std::string name;  // provenance / display name
  ModelData::Arch arch;
  float weight_std = 0.02f;
};

// Random weights + synthetic tokenizer for `shape` (arch.vocab_size >= 259; with opts.vocab,
// that vocabulary and its size instead); of `opts`, only direct / direct_type / vocab apply here.
bool synthetic_from_shape(const SyntheticShape& shape, uint32_t seed, const SyntheticOptions& opts,
                          ModelData* out, std::string* err);

// The synthetic vocabulary: <unk>, <s>, </s>, the 256 byte tokens <0x00>..<0xFF>, then distinct
// "▁tokN" pieces up to vocab_size. bos 1, eos 2, unk 0.
bool synthetic_tokenizer(uint32_t vocab_size, TokenizerData* out, std::string* err);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_SYNTHETIC_H_
