// Remembered token masks (#15): a session's small table from a parse state to the set of tokens
// its mask allows, so a state met again costs a lookup instead of a vocabulary walk.
//
// Why it pays: a constrained output spends most tokens in few states. Inside a JSON string every
// character leads back to the same state (unbounded repetitions count only up to their minimum,
// matcher.h), and a schema's fixed parts (keys, punctuation) recur in every object and every
// turn. The key is the whole state (every stack's frames and any pending partial code point),
// compared exactly on a hit, so a remembered mask is the mask the walk would compute.
//
// Besides the masks of states, entries hold what masks are derived from (compiled.h): the mask of
// a relaxed state (its key has relaxed counts, which no state the mask stage is asked for has)
// and the tokens its walk read (key word 1 set to kMaskReadTag, which no state's key has there).
//
// Memory: in the session's block (rlm_session_config.grammar_cache_bytes), split into entries
// of one vocabulary bitset (vocab / 8 bytes) plus a key of up to kMaskKeyWords words; a state
// with a longer key is not remembered (its mask is computed each time). Replacement: clock
// (second chance). Owns nothing; not shared between sessions (each session has its own).
#ifndef RINGLM_RUNTIME_GRAMMAR_MASK_CACHE_H_
#define RINGLM_RUNTIME_GRAMMAR_MASK_CACHE_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "grammar/matcher.h"

namespace ringlm::internal {

constexpr uint32_t kMaskKeyWords = 192;  // key words per entry (768 bytes)
constexpr uint32_t kMaskReadTag = 0xFFFFFFFFu;

struct MaskCache {
  uint32_t n_entries = 0;        // 0: no cache
  uint32_t words = 0;            // bitset words per mask: ceil(vocab / 64)
  uint64_t* bits = nullptr;      // (n_entries, words) mask e: bits + e * words
  uint32_t* keys = nullptr;      // (n_entries, kMaskKeyWords)
  uint32_t* key_len = nullptr;   // (n_entries) 0: free
  uint64_t* key_hash = nullptr;  // (n_entries)
  uint8_t* referenced = nullptr; // (n_entries) clock bits
  uint32_t hand = 0;
  const void* owner = nullptr;   // the grammar the masks belong to (a new one clears them)
  uint64_t hits = 0, misses = 0;
};

// Bytes of one entry for a vocabulary of `vocab` tokens.
size_t mask_cache_entry_bytes(uint32_t vocab);

// Lays out a cache of as many entries as `bytes` holds (none when below one entry).
void mask_cache_layout(Arena& a, uint32_t vocab, size_t bytes, MaskCache* c);

// Forgets every mask; `owner` is the grammar the next ones belong to.
void mask_cache_clear(MaskCache* c, const void* owner);

// The remembered mask of this key, or null (counted in hits / misses).
const uint64_t* mask_cache_find(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash);

// The same, not counted: for the masks of relaxed states that masks of states are derived from
// (compiled.h), so hits and misses stay those of the states the mask stage is asked for.
const uint64_t* mask_cache_lookup(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash);

// An entry for this key (replacing one by the clock): its mask bits, to be filled by the caller.
uint64_t* mask_cache_insert(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_MASK_CACHE_H_
