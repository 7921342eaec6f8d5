// The BPE merge core both encoders share: symbols in a doubly linked list, every adjacent pair
// that can merge in an indexed binary min-heap keyed by its left symbol (a symbol has at most
// one pair: with its right neighbour). Priority:
//   merges present: rank of (left id, right id) in Tokenizer.merges (binary search);
//   else:           score of the vocab piece equal to the concatenated bytes (higher first);
// ties go to the leftmost pair (llama.cpp's llm_bigram_spm comparator). Merging updates at most
// three heap entries, so n symbols cost O(n log n) heap work and O(n log V) piece look-ups.
// This pops the same pair sequence as llama.cpp's llm_tokenizer_spm_session (a priority queue
// with stale entries skipped). Only Normal and UserDefined pieces are merge results.
//
// Memory: the caller's Sym[n] and uint64_t[n] heap keys (from the tokenize scratch layout).
#ifndef RINGLM_RUNTIME_TOKENIZER_BPE_H_
#define RINGLM_RUNTIME_TOKENIZER_BPE_H_

#include <stddef.h>
#include <stdint.h>

#include "model_generated.h"

namespace ringlm::internal {
namespace tkz {

// A run of the text being merged: one character (or byte) at first, a merged piece later.
struct Sym {
  int32_t prev;      // -1: none
  int32_t next;      // -1: none
  uint32_t start;    // byte offset in the text
  uint32_t n;        // byte length; 0 once merged into its left neighbour
  int32_t id;        // vocab id of the run, -1 when it is not a piece
  int32_t pair_id;   // id the run merged with `next` would become (valid while in the heap)
  int32_t heap_pos;  // index in the heap, -1 when the pair with `next` cannot merge
};

// Merges the symbols syms[0, n) (n >= 1; linked 0 -> 1 -> ... -> n-1 in text order, each with
// its id, pair_id and heap_pos -1) over `text` until no adjacent pair can merge. By merge rank
// when `use_merges`, else by piece score. Afterwards the live symbols are the list from
// syms[0] (syms[0] is never merged away). keys: uint64_t[n], heap storage.
void bpe_merge(const fb::Tokenizer* tok, bool use_merges, const uint8_t* text, Sym* syms,
               uint64_t* keys, int32_t n);

}  // namespace tkz
}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_BPE_H_
