// The vocabulary as a grammar sees it (#15): the bytes every token adds to the text, and the
// tokens sorted by those bytes so that tokens sharing a prefix are neighbours. A mask walk runs
// through `sorted` once, keeping one parser state per prefix depth: a token costs only the bytes
// past the prefix it shares with the one before it (`lcp`), and when a prefix is rejected every
// following token that extends it is skipped by scanning `lcp` alone.
//
// Built once per compiled grammar into the caller's block (one layout function for the size
// query and the build); read-only afterwards, so any number of sessions on any threads may share
// it. Owns nothing: every pointer is into the block.
#ifndef RINGLM_RUNTIME_GRAMMAR_TOKEN_TABLE_H_
#define RINGLM_RUNTIME_GRAMMAR_TOKEN_TABLE_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

namespace fb {
struct Tokenizer;
}

struct TokenTable {
  uint32_t vocab = 0;
  const uint8_t* bytes = nullptr;    // (total) every token's bytes, by id, concatenated
  const uint32_t* offset = nullptr;  // (vocab + 1) token id's bytes: [offset[id], offset[id + 1])
  const int32_t* sorted = nullptr;   // (vocab) ids ordered by their bytes (memcmp order, a prefix
                                     // before its extensions; ties by id), empty tokens first
  const uint8_t* sorted_bytes = nullptr;  // (total) the same bytes in sorted order, so a walk
  const uint32_t* sorted_off = nullptr;   // (vocab + 1) reads them in sequence: sorted[i]'s are
                                          // [sorted_off[i], sorted_off[i + 1])
  const uint16_t* lcp = nullptr;     // (vocab) lcp[i]: bytes sorted[i] shares with sorted[i - 1]
                                     // (lcp[0] = 0)
  const uint32_t* first_begin = nullptr;  // (257) tokens starting with byte b:
                                          // sorted[first_begin[b], first_begin[b + 1])
  // Tokens grouped by their first two bytes (a one-byte token alone in its group), so a walk
  // can rule out a whole (first byte, second byte) group from the state after the first byte:
  // group k is sorted[two_begin[k], two_begin[k + 1]); first byte b's groups are
  // k in [first_two[b], first_two[b + 1]).
  const uint32_t* two_begin = nullptr;  // (n_two + 1)
  const uint32_t* first_two = nullptr;  // (257)
  uint32_t n_two = 0;
  uint32_t n_empty = 0;              // tokens with no bytes (control tokens...): sorted[0, n_empty)
  uint32_t max_len = 0;              // longest token, bytes (<= kMaxPieceBytes)

  uint32_t length(int32_t id) const { return offset[id + 1] - offset[id]; }
  const uint8_t* data(int32_t id) const { return bytes + offset[id]; }
};

// Lays out (and, with a real arena, builds) the table of `tok` (verified, vocab_size entries).
// A token's bytes are what it adds in the middle of a text (tokenizer.h token_text after a
// non-BOS token): SentencePiece's dummy-prefix rule at the very start of a text is not applied.
// RLM_ERR_BUFFER_TOO_SMALL when the arena is short (with a real arena); nothing is allocated.
Status token_table_layout(Arena& a, const fb::Tokenizer* tok, uint32_t vocab_size, TokenTable* out,
                          ErrorSink* err);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_TOKEN_TABLE_H_
