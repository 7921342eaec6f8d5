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

// Bytes of one token's piece: the bound the verifier enforces. Real vocabularies stay far below
// it (their longest pieces, runs of spaces, tabs or dashes in code models' vocabularies, are a
// few hundred bytes; GPT-2's is 128), and it keeps the 16-bit offsets of the grammar's token
// table (runtime/grammar/token_table.h) exact. Nothing is sized by it: buffers that hold one
// token's text are sized per model, see token_text_bytes().
constexpr uint32_t kMaxPieceBytes = 65535;

// The least size of a buffer holding one token's text (session, beams, DRY, grammar walks):
// such buffers hold max(kPieceTextFloor, the model's longest piece) bytes, so a model whose
// pieces fit the floor (every model the 256-byte limit of format 1 accepted) keeps the same
// session layout and size.
constexpr uint32_t kPieceTextFloor = 256;

// Bytes of the longest text token_text() can produce for a tokenizer whose longest piece is
// `longest_piece` bytes: a token's text is never longer than its piece, except SentencePiece's
// unknown-token surface " \xE2\x81\x87 " (5 bytes), which the floor covers.
inline uint32_t token_text_bytes(uint32_t longest_piece) {
  return longest_piece > kPieceTextFloor ? longest_piece : kPieceTextFloor;
}

// Longest text tokenize accepts, in bytes: keeps every symbol index and byte offset within
// int32 (and the scratch size well inside size_t).
constexpr size_t kMaxTokenizeText = size_t{1} << 28;

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_LIMITS_H_
