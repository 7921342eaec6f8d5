// Model families shared by the Hugging Face and GGUF readers (and synthetic models): which
// hyperparameters a family's config carries and what they mean here, which source tensors it has
// and what role each plays, and which options are refused.
//
// Conventions (schema/model.fbs documents the fields):
//  - Hugging Face checkpoints apply RoPE with rotate_half: RopeStyle::Neox, q/k never permuted.
//    GGUF "llama" q/k rows were permuted by llama.cpp's converter into interleaved pairs:
//    RopeStyle::Interleaved. Every other GGUF family here is Neox and unpermuted.
//  - Gemma RMSNorm multiplies by (1 + w). The model file stores the (1 + w); the HF reader adds
//    the 1 (in float32); llama.cpp's GGUF writer already added it.
//  - Phi-3's fused qkv_proj / gate_up_proj (GGUF attn_qkv / ffn_up with 2 * ffn rows) are split
//    into Wq/Wk/Wv and FfnGate/FfnUp (gate first, as HF's chunk(2) and ggml's swiglu read them).
#ifndef RINGLM_TOOLS_CONVERT_FAMILIES_H_
#define RINGLM_TOOLS_CONVERT_FAMILIES_H_

#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "convert/ir.h"

namespace ringlm::internal {
namespace conv {

// The family named by a config's model_type (or, without one, its first architectures entry):
// llama / mistral -> Llama, qwen2, qwen3, gemma2, gemma3 / gemma3_text, phi3. false for
// anything else; *name receives what was looked at (for messages).
bool hf_family(const nlohmann::json& cfg, fb::Family* family, std::string* name);

// Fills every architecture field a Hugging Face config.json determines for its family
// (vocab_size from the config; tied_embeddings from tie_word_embeddings or the family's
// default). Unknown families and options the runtime does not implement (partial rotary, MoE,
// longrope / yarn / dynamic RoPE scaling, MLP or output biases, ...) fail with a message naming
// them. Messages do not name the file: the caller prefixes it.
bool hf_config_arch(const nlohmann::json& cfg, ModelData::Arch* a, std::string* err);

// GGUF general.architecture -> family (llama, qwen2, qwen3, gemma2, gemma3, phi3).
bool gguf_family(const std::string& arch, fb::Family* family);

// How one source tensor maps onto model tensors.
enum class Split : uint8_t {
  None,    // the tensor itself
  Qkv,     // fused (q_dim + 2 * kv_dim, dim): rows Wq, then Wk, then Wv
  GateUp,  // fused (2 * ffn_dim, dim): rows FfnGate, then FfnUp
};
struct SourceRole {
  fb::TensorRole role = fb::TensorRole::TokenEmbedding;
  int32_t layer = -1;
  Split split = Split::None;
  bool norm = false;  // an RMSNorm weight (Gemma's 1 + w applies to HF sources)
};

// Source tensor name -> role for `family`; false if that family has no tensor of that name.
bool hf_tensor_role(fb::Family family, const std::string& name, SourceRole* out);
bool gguf_tensor_role(fb::Family family, const std::string& name, SourceRole* out);

// The Hugging Face / GGUF name of (role, layer) in `family`, for messages and synthetic models.
std::string hf_tensor_name(fb::Family family, fb::TensorRole role, int32_t layer);
std::string gguf_tensor_name(fb::Family family, fb::TensorRole role, int32_t layer);

// Appends to `out` the model tensors source tensor `t` stands for (t.role / t.layer / t.shape
// must already be the source's): `t` itself, or for a fused tensor its row slices, each loading
// the fused tensor and copying its rows. A fused tensor whose rows do not add up to what `a`
// implies is an error naming it.
bool add_source_tensor(const ModelData::Arch& a, const SourceRole& r, TensorData t,
                       std::vector<TensorData>* out, std::string* err);

// Wraps t's load_f32 so that every value becomes 1 + value (float32), for Gemma norm weights.
void add_one_on_load(TensorData* t);

// The tensors a model of `a` needs (and may have), with shapes, in file order: the embedding,
// per layer the family's tensors, the output norm and (untied) the output head.
struct TensorSpec {
  fb::TensorRole role;
  int32_t layer;
  std::vector<uint64_t> shape;
  bool required;
  bool norm;  // an RMSNorm weight (initialise around 1), else a matrix or bias
};
std::vector<TensorSpec> family_tensor_specs(const ModelData::Arch& a);

// Checks that every required tensor of `m.arch` is present exactly once with its shape, and none
// the family does not use; the message names the first offender with `name_of(role, layer)`.
bool check_family_tensors(const ModelData& m,
                          std::string (*name_of)(fb::Family, fb::TensorRole, int32_t),
                          std::string* err);

// "llama", "qwen2", ... as used in messages.
const char* family_display_name(fb::Family f);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_FAMILIES_H_
