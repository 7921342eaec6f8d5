// The converter's in-memory model: what every reader (llama2.c, GGUF, Hugging Face) produces and
// the writer consumes. Tensor data is loaded lazily, one tensor at a time, so converting a
// multi-GB checkpoint never holds more than one tensor in float.
#ifndef RINGLM_TOOLS_CONVERT_IR_H_
#define RINGLM_TOOLS_CONVERT_IR_H_

#include <stdint.h>

#include <functional>
#include <string>
#include <vector>

#include "model_generated.h"

namespace ringlm::internal {
namespace conv {

struct TokenizerData {
  fb::TokenizerKind kind = fb::TokenizerKind::SentencePiece;
  std::vector<std::string> pieces;  // id -> piece bytes
  std::vector<float> scores;        // id -> score (may be empty when merges are given)
  std::vector<fb::TokenType> types; // id -> type
  // BPE merges in rank order (index = rank): (left id, right id, result id).
  struct Merge {
    uint32_t left, right, result;
  };
  std::vector<Merge> merges;
  int32_t bos_id = -1, eos_id = -1, unk_id = -1, pad_id = -1;
  std::vector<int32_t> end_ids;  // all tokens that end generation (EOS first)
  bool add_bos = true;
  bool add_space_prefix = true;
  bool byte_fallback = true;
  fb::PreTokenizer pre_tokenizer = fb::PreTokenizer::None;
};

// A source tensor. Exactly one of load_f32 / raw is used by the writer:
//  - load_f32 fills `out` with rows * cols floats (row-major) in the source's values;
//  - raw (raw_type Q8/Q4/Q5/Q4_1/Q5_1/Q4K/Q5K/Q6K) is already in the file encoding, holding
//    exactly the values load_f32 gives, and is copied as-is when the target type equals raw_type
//    (GGUF Q8_0 / Q4_0 blocks, and Q5_0, Q4_1, Q5_1, IQ4_NL and K-quant blocks repacked, import
//    without re-quantization); load_f32 must still be set for any other target.
struct TensorData {
  std::string name;
  fb::TensorRole role;
  int32_t layer = -1;
  std::vector<uint64_t> shape;  // (rows, cols) or (n)
  std::function<bool(std::vector<float>* out, std::string* err)> load_f32;
  bool has_raw = false;
  fb::DType raw_type = fb::DType::F32;
  std::function<bool(std::vector<uint8_t>* out, std::string* err)> load_raw;
  // Synthetic weights only: generated straight into whatever encoding the writer asks for (a
  // mixed preset's per-tensor targets included), so no float tensor is made and quantized.
  // Used for a 2-D tensor with cols % 32 == 0 whenever load_raw does not match the target.
  std::function<bool(fb::DType type, std::vector<uint8_t>* out, std::string* err)> load_raw_as;
  // If set, the only types load_raw_as makes (GGUF Q5_0: q8 as well as its raw q5); unset: any.
  fb::DType raw_as_only = fb::DType::F32;
  bool has_raw_as_only = false;
  // How the source stores the tensor ("F32", "F16", "BF16", "Q4_K", ...), for the converter's
  // per-tensor report; "F32" when a reader does not say.
  std::string source_type = "F32";
  // A mixed preset's encoding for this 2-D tensor (apply_quant_preset), used instead of the
  // conversion's --quant type.
  bool has_target = false;
  fb::DType target = fb::DType::F32;
};

struct GenerationData {
  bool present = false;
  float temperature = 0.8f;
  int32_t top_k = 40;
  float top_p = 0.95f;
  float min_p = 0.05f;
  float repeat_penalty = 1.0f;
  uint32_t max_tokens = 0;
};

struct ModelData {
  struct Arch {
    fb::Family family = fb::Family::Llama;
    uint32_t n_layers = 0, dim = 0, n_heads = 0, n_kv_heads = 0, head_dim = 0, ffn_dim = 0;
    uint32_t vocab_size = 0, max_context = 0;
    float rope_theta = 10000.0f;
    fb::RopeStyle rope_style = fb::RopeStyle::Interleaved;
    float norm_eps = 1e-5f;
    bool tied_embeddings = false;
    fb::Activation activation = fb::Activation::SiLU;
    // Later families (schema/model.fbs Architecture documents each).
    fb::RopeScaling rope_scaling = fb::RopeScaling::None;
    float rope_scaling_factor = 1.0f;
    float rope_low_freq_factor = 1.0f;
    float rope_high_freq_factor = 4.0f;
    uint32_t rope_original_context = 0;
    bool qkv_bias = false;
    bool qk_norm = false;
    float embedding_scale = 1.0f;
    float attn_logit_softcap = 0.0f;
    float final_logit_softcap = 0.0f;
    float query_pre_attn_scalar = 0.0f;
    uint32_t sliding_window = 0;
    std::vector<bool> layer_is_local;  // empty or n_layers entries
    float rope_theta_local = 0.0f;
  } arch;
  TokenizerData tokenizer;
  std::vector<TensorData> tensors;
  GenerationData generation;
  std::string chat_template;
  std::string source;  // provenance: the source path
};

// Serialises the tokenizer into `fbb`: pieces, scores, types, sorted_ids (ids ordered by piece
// bytes) and merges sorted by (left, right) with their ranks. Returns the table offset.
flatbuffers::Offset<fb::Tokenizer> build_tokenizer(flatbuffers::FlatBufferBuilder& fbb,
                                                   const TokenizerData& tok);

// A standalone size-prefixed Tokenizer-only buffer is not a model; tests that need just a
// tokenizer table use this: a FlatBuffer whose root is fb::Tokenizer (no identifier).
std::vector<uint8_t> tokenizer_only_buffer(const TokenizerData& tok);

// llama2.c tokenizer.bin: int32 max_token_length, then per token: float score, int32 len, bytes.
// Spaces in pieces become "▁" again (llama2.c's export had replaced them). Types: <unk> -> Unknown, <s> / </s> (also "\n<s>\n" forms) -> Control, <0xNN> -> Byte.
// bos = 1, eos = 2, unk = 0 (llama2.c's fixed ids). `vocab_size` is the number of entries to read.
bool read_llama2c_tokenizer(const std::string& path, uint32_t vocab_size, TokenizerData* out,
                            std::string* err);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_IR_H_
