// Limits shared by the model verifier (model.cc) and the tokenizer (runtime/tokenizer*): a
// verified model's tokenizer stays within them, so tokenizer code sizes stack buffers and
// index types by them. Here, not in model.h, so the tokenizer does not include the model (and
// tools get them without runtime internals).
#ifndef RINGLM_RUNTIME_TOKENIZER_LIMITS_H_
#define RINGLM_RUNTIME_TOKENIZER_LIMITS_H_

#include <stddef.h>
#include <stdint.h>

namespace ringlm::internal {

// Tokens in a vocabulary (vocab_size in [1, kMaxVocab]).
constexpr uint32_t kMaxVocab = 1u << 20;

// Bytes of one token's piece; token_text never produces more (callers' piece buffers).
constexpr uint32_t kMaxPieceBytes = 256;

// Longest text tokenize accepts, in bytes: keeps every symbol index and byte offset within
// int32 (and the scratch size well inside size_t).
constexpr size_t kMaxTokenizeText = size_t{1} << 28;

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_LIMITS_H_
