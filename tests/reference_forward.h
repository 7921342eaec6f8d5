// A float64 reference forward pass of the decoder families ringlm runs, written from the
// published Hugging Face modeling code (modeling_llama / qwen2 / qwen3 / gemma2 / gemma3 / phi3)
// and their config classes, independently of the runtime and of the converter's mapping.
//
// Input is the *source* checkpoint: its config.json and a ModelData whose tensors carry the
// Hugging Face names ("model.layers.0.self_attn.q_proj.weight", Phi-3's fused qkv_proj /
// gate_up_proj, Gemma norm weights as the w of (1 + w)); each tensor is read once with
// load_f32 and widened to double. Attention is full causal attention over every position
// (no ring), with the sliding-window mask on local layers (a query at i sees keys j with
// i - window < j <= i). Returns the logits of every position from `first` on.
#ifndef RINGLM_TESTS_REFERENCE_FORWARD_H_
#define RINGLM_TESTS_REFERENCE_FORWARD_H_

#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "../convert/ir.h"

namespace ringlm_test {

// What the reference read from the config (for test messages).
struct ReferenceInfo {
  std::string family;                // "llama", "qwen2", "qwen3", "gemma2", "gemma3", "phi3"
  std::vector<bool> layer_is_local;  // per layer
  uint32_t sliding_window = 0;
};

// logits->at(p - first) = the logits (vocab_size) after tokens[0..p], for p in [first, n).
bool reference_forward(const nlohmann::json& config, const ringlm::internal::conv::ModelData& checkpoint,
                       const std::vector<int32_t>& tokens, size_t first,
                       std::vector<std::vector<double>>* logits, std::string* err,
                       ReferenceInfo* info = nullptr);

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_REFERENCE_FORWARD_H_
