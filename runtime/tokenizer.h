// Tokenizer over the model file's tables: encode text to ids and decode ids to bytes, writing
// only into caller buffers (no allocation, no global state).
#ifndef RINGLM_RUNTIME_TOKENIZER_H_
#define RINGLM_RUNTIME_TOKENIZER_H_

#include <stddef.h>
#include <stdint.h>

#include "model_generated.h"
#include "status.h"

namespace ringlm {

// Structural checks of the tokenizer tables, run once by model_open: vocab_size in
// [1, kMaxVocab], kind / pre-tokenizer / token types known, pieces, types and sorted_ids have
// vocab_size entries and scores none or vocab_size, piece lengths in [0, kMaxPieceBytes], every
// id (bos/eos/unk/pad/end ids/sorted ids/merge left, right and result) in range, sorted_ids
// non-decreasing by piece bytes, merges strictly ordered by (left, right). Once it passes,
// tokenize() and token_text() are memory-safe for any input.
Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab_size, ErrorSink* err);

// Scratch bytes tokenize() needs for a text of `text_len` bytes (about 39 per byte; any
// alignment). SIZE_MAX when the text is too long to encode (over 256 MiB).
size_t tokenize_scratch_bytes(const fb::Tokenizer* tok, size_t text_len);

// Encodes UTF-8 `text` into `out` (capacity `cap`), BOS first when `add_bos` and the model has
// one (the caller decides; Tokenizer.add_bos is the model's default for it). SentencePiece BPE
// as llama.cpp's llm_tokenizer_spm: spaces become "▁", a "▁" is prepended to non-empty text when
// add_space_prefix, then pairs merge by merge rank (merges present) or piece score; characters
// that end up outside the vocab become <0xNN> byte tokens (byte_fallback), else unk. Only
// Normal and UserDefined pieces are produced by merging, so text never encodes to a control
// token. RLM_ERR_CAPACITY when cap is too small (*n_out = the count needed);
// RLM_ERR_BUFFER_TOO_SMALL when scratch is; RLM_ERR_MODEL_UNSUPPORTED for ByteLevel tables.
// Invalid UTF-8 is encoded byte-wise through byte fallback (never rejected here).
Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err);

// The bytes `token` contributes to text when it follows `prev` (-1 for none): "▁" becomes " ",
// <0xNN> byte tokens become that byte, control and unused tokens become nothing, unknown
// tokens become " ⁇ " (SentencePiece's unk surface), and when add_space_prefix a leading space
// of a normal piece at the start of a text (prev == bos_id, or prev == -1) is dropped
// (SentencePiece's dummy-prefix rule). Writes min(cap, needed) bytes and returns the number
// needed (at most kMaxPieceBytes); 0 for a token out of range.
size_t token_text(const fb::Tokenizer* tok, int32_t prev, int32_t token, char* out, size_t cap);

// The id of a piece by its exact bytes (any token type; the lowest id among duplicates), or -1.
int32_t token_lookup(const fb::Tokenizer* tok, const char* piece, size_t len);

}  // namespace ringlm

#endif  // RINGLM_RUNTIME_TOKENIZER_H_
