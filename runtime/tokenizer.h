// Tokenizer over the model file's tables: encode text to ids and decode ids to bytes, writing
// only into caller buffers (no allocation, no global state).
#ifndef RINGLM_RUNTIME_TOKENIZER_H_
#define RINGLM_RUNTIME_TOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "model_generated.h"
#include "status.h"

namespace ringlm {

// Structural checks of the tokenizer tables, run once by model_open: table sizes equal
// vocab_size, every id (bos/eos/unk/pad/end ids/sorted ids/merges) in range, piece lengths in
// [0, kMaxPieceBytes], sorted_ids ordered, merges ordered by (left, right).
Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab_size, ErrorSink* err);

// Scratch bytes tokenize() needs for a text of `text_len` bytes.
size_t tokenize_scratch_bytes(const fb::Tokenizer* tok, size_t text_len);

// Encodes UTF-8 `text` into `out` (capacity `cap`), BOS first when add_bos and the model has
// one. RLM_ERR_CAPACITY when cap is too small; RLM_ERR_BUFFER_TOO_SMALL when scratch is.
// Invalid UTF-8 is encoded byte-wise through byte fallback (never rejected here).
Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err);

// The bytes `token` contributes to text when it follows `prev` (-1 for none): "▁" becomes " ",
// <0xNN> byte tokens become that byte, control tokens become nothing, and a leading space right
// after BOS is dropped (SentencePiece add_space_prefix). Writes min(cap, needed) bytes and
// returns the number needed (at most kMaxPieceBytes). `token` must be in range.
size_t token_text(const fb::Tokenizer* tok, int32_t prev, int32_t token, char* out, size_t cap);

}  // namespace ringlm

#endif  // RINGLM_RUNTIME_TOKENIZER_H_
