// The byte-level BPE encoder (TokenizerKind::ByteLevel, GPT-2 style; the rules are in
// tokenizer.h):
//   Special tokens: the ids of Control/UserDefined tokens are collected into scratch and sorted
//   by piece bytes (heap sort, ties by id), with a bitmap of their first bytes. At a text
//   position whose byte is in the bitmap, the longest special piece that prefixes the text is
//   found by narrowing binary searches: take the greatest piece <= the candidate text x; if it
//   is a prefix of x it is the answer, else no prefix of x is longer than their common prefix,
//   so x shrinks to it and the search repeats (at most a few rounds).
//   Pre-tokenizer: next_word() (pretokenizer.h) splits the text between special tokens.
//   Words: symbols are the word's bytes, each with the id of its GPT-2 character piece (looked
//   up once per byte value per call and cached in scratch); merging is bpe_merge (bpe.h) keyed
//   by merge rank, over one word at a time.
#ifndef RINGLM_RUNTIME_TOKENIZER_BYTE_LEVEL_H_
#define RINGLM_RUNTIME_TOKENIZER_BYTE_LEVEL_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "model_generated.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pieces.h"

namespace ringlm::internal {
namespace tkz {

// Working memory of one encode of a text of len bytes: 36 bytes per text byte, 4 per
// Control/UserDefined token and 1 KiB (+ alignment).
struct ByteLevelScratch {
  int32_t* byte_ids;       // (256) id of each byte's GPT-2 character piece; -2: not looked up
  uint32_t* specials;      // (n_special_cap) special ids, sorted by piece bytes then id
  uint32_t n_special_cap;  // Control/UserDefined tokens in the table (an upper bound: pieces
                           // are not looked at)
  Sym* syms;               // (len) one per byte of the longest word
  uint64_t* keys;          // (len) merge heap
};

// Reserves (measure mode) or carves ByteLevelScratch for a text of `len` bytes. Scans the
// token types once to count the special tokens: O(vocab).
void byte_level_scratch_layout(Arena* a, const fb::Tokenizer* tok, size_t len,
                               ByteLevelScratch* s);

// Appends the ids of text[0, len) to `out`. Special-token text becomes its token only when
// `parse_special`. `unk`: the table's unk_id, -1 for none.
void byte_level_encode(const fb::Tokenizer* tok, int32_t unk, const uint8_t* text, size_t len,
                       bool parse_special, const ByteLevelScratch& s, TokenOut* out);

}  // namespace tkz
}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_BYTE_LEVEL_H_
