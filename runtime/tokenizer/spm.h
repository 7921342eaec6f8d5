// The SentencePiece encoder (TokenizerKind::SentencePiece; the rules are in tokenizer.h):
//   1. Normalise: every ' ' becomes "▁" (U+2581), as llama.cpp does for every SPM vocab; with
//      add_space_prefix a "▁" is also prepended (not for empty text).
//   2. Split into symbols, one per UTF-8 character. Validation is strict (no overlongs,
//      surrogates or code points above U+10FFFF); every byte that does not start a valid
//      sequence is a 1-byte symbol of its own, so invalid input still encodes (byte fallback).
//   3. Merge: bpe_merge (bpe.h), by merge rank when the table has merges, else by piece score.
//   4. Emit: each remaining symbol's id; a symbol that is not a vocab piece becomes one <0xNN>
//      token per byte (byte_fallback), else unk_id (one per missing byte, or one per symbol when
//      byte_fallback is off); with neither, the symbol is dropped.
//   Only Normal and UserDefined pieces take part in merging and look-up, as in SentencePiece
//   (control, unknown, byte and unused pieces are reserved): the text "<s>" never becomes BOS.
#ifndef RINGLM_RUNTIME_TOKENIZER_SPM_H_
#define RINGLM_RUNTIME_TOKENIZER_SPM_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "model_generated.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pieces.h"

namespace ringlm::internal {
namespace tkz {

// Working memory of one encode of a text of len bytes: 39 bytes per text byte (+ alignment).
struct SpmScratch {
  Sym* syms;       // (len + 1) one per character at most, plus the "▁" prefix
  uint64_t* keys;  // (len + 1) merge heap
  uint8_t* norm;   // (3 * len + 3) normalised text: every byte may become "▁" (3 bytes)
};

// Reserves (measure mode) or carves SpmScratch for a text of `len` bytes.
void spm_scratch_layout(Arena* a, size_t len, SpmScratch* s);

// Appends the ids of text[0, len) to `out` (steps 1-4). `unk`: the table's unk_id, -1 for none.
void spm_encode(const fb::Tokenizer* tok, int32_t unk, const uint8_t* text, size_t len,
                const SpmScratch& s, TokenOut* out);

}  // namespace tkz
}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_SPM_H_
