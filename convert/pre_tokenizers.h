// The pre-tokenizer names llama.cpp reads from a GGUF's tokenizer.ggml.pre (byte-level BPE
// vocabularies, tokenizer.ggml.model "gpt2") and what the converter does with each: a name whose
// split ringlm implements exactly maps to that fb::PreTokenizer; every other name — known to
// llama.cpp with a split ringlm does not implement, or not known at all — is refused with a
// message naming it, never converted with a different split (which would tokenize text into
// other tokens than the model was trained on, silently).
#ifndef RINGLM_CONVERT_PRE_TOKENIZERS_H_
#define RINGLM_CONVERT_PRE_TOKENIZERS_H_

#include <string>
#include <vector>

#include "model_generated.h"

namespace ringlm::internal {
namespace conv {

// The pre-tokenizer for tokenizer.ggml.pre `name` ("" when the key is absent): true with *out
// set (and *no_bos: the vocabulary has no BOS token for this name), or false with *why naming
// `name` and why it is refused.
bool gguf_pre_tokenizer(const std::string& name, fb::PreTokenizer* out, bool* no_bos,
                        std::string* why);

// Every name llama.cpp recognises, in its order, with whether ringlm implements it (for tests
// and documentation).
struct PreTokenizerName {
  const char* name;
  bool implemented;
  fb::PreTokenizer pre;  // when implemented
  const char* note;      // when not: how llama.cpp splits instead
  bool no_bos = false;   // llama.cpp drops the vocabulary's BOS token for it (ChatGLM / GLM-4)
};
const std::vector<PreTokenizerName>& llama_cpp_pre_tokenizer_names();

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_CONVERT_PRE_TOKENIZERS_H_
