// One reader per checkpoint format; each fills a ModelData whose tensors load lazily from the
// source file. Errors name the file and what is wrong or unsupported.
#ifndef RINGLM_TOOLS_CONVERT_READERS_H_
#define RINGLM_TOOLS_CONVERT_READERS_H_

#include <functional>
#include <string>
#include <vector>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

// llama2.c legacy (v0) float checkpoint + llama2.c tokenizer.bin.
bool read_llama2c(const std::string& path, const std::string& tokenizer_path, ModelData* out,
                  std::string* err);

// GGUF v2/v3 of a supported family (general.architecture llama, mistral, qwen2, qwen3, gemma2,
// gemma3, phi3: see families.h); tensors of the types ggml_quants.h reads (F32, F16, BF16, the
// 32-value quants, the K-quants, IQ4_NL / IQ4_XS). A file without tensors (a vocabulary-only GGUF)
// is refused: read its tokenizer with read_gguf_tokenizer.
bool read_gguf(const std::string& path, ModelData* out, std::string* err);

// Only the tokenizer of a GGUF (any architecture; vocab-only files included).
bool read_gguf_tokenizer(const std::string& path, TokenizerData* out, std::string* err);

// Every tensor of a GGUF file as stored, in file order, without any model mapping (any
// architecture): name, ggml type, dimensions (ne[0], the row length, first) and a loader giving
// all its values as float32 exactly as ggml dequantizes them. The file is checked as read_gguf
// checks it (bounds, alignment, overlap, block multiples); for a type the converter does not read
// the loader fails with a message naming the tensor and the type.
struct GgufTensor {
  std::string name;
  uint32_t type = 0;
  std::vector<uint64_t> ne;
  std::function<bool(std::vector<float>* out, std::string* err)> load_f32;
};
bool read_gguf_tensors(const std::string& path, std::vector<GgufTensor>* out, std::string* err);

// Hugging Face directory of a supported family (config.json "model_type"; see families.h):
// config.json, model.safetensors (or a sharded
// model.safetensors.index.json), tokenizer.json, tokenizer_config.json, generation_config.json.
bool read_hf(const std::string& dir, ModelData* out, std::string* err);

// Only the tokenizer of a Hugging Face tokenizer.json (model type BPE; ByteLevel or
// SentencePiece-style), as read_hf reads it: added_tokens special -> Control, others ->
// UserDefined; BOS from the post-processor template when it starts with a special token.
bool read_hf_tokenizer(const std::string& path, TokenizerData* out, std::string* err);

// Drops repeated (left, right) merges, keeping the first (lowest rank): the model format stores
// merges strictly ordered by (left, right), so a pair may appear only once.
void dedupe_merges(TokenizerData* t);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_READERS_H_
