// A grammar compiled against a model's vocabulary (#15): what rlm_grammar points at. The GBNF
// elements (gbnf.h) and the vocabulary's token table (token_table.h) in one caller block, laid out
// by one function for the size query and the compile. Read-only after compile: any number of
// sessions on the same model, on any threads, may use it at once.
//
// The token mask (grammar_mask): a walk over the byte-sorted vocabulary: a token is allowed when
// the recognizer takes all its bytes from the session's state and can still continue (a partial
// UTF-8 character at its end included). Tokens whose first byte no open parse can take are ruled
// out by their first byte alone; a token rejected at byte k rules out, without a check, every
// following token that shares its first k + 1 bytes. The walk's cost grows with the vocabulary
// and with the tokens the state allows; the session remembers the masks of the states it meets
// (mask_cache.h), so a state met again costs a lookup and a pass over the logits.
#ifndef RINGLM_RUNTIME_GRAMMAR_COMPILED_H_
#define RINGLM_RUNTIME_GRAMMAR_COMPILED_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "arena.h"
#include "grammar/gbnf.h"
#include "grammar/mask_cache.h"
#include "grammar/matcher.h"
#include "grammar/token_table.h"
#include "status.h"
#include "tokenizer/limits.h"

namespace ringlm::internal {

struct ModelImpl;

constexpr uint64_t kGrammarMagic = 0x52494e474c4d4731ull;  // "RINGLMG1"

struct GrammarImpl {
  uint64_t magic;            // kGrammarMagic once compiled
  const GrammarImpl* self;   // this: a copy elsewhere is not a compiled grammar
  const ModelImpl* model;    // borrowed: the vocabulary it was compiled against
  const Grammar* g;          // in the block
  TokenTable tokens;         // in the block
  // Every code point where some character set of the grammar starts or stops matching, sorted
  // (n_cp_bounds of them): code points between two neighbours are matched alike by every set,
  // so the mask walk remembers what a code point does by its interval, not by its value.
  const uint32_t* cp_bounds; // in the block
  uint32_t n_cp_bounds;
  // Token signatures, in sorted order (tokens.sorted): bit c (< kSigPartial) when the token has an
  // ASCII byte of class c (ascii_class: the ASCII intervals of cp_bounds, kSigPartial of them at
  // most, else signatures are off: n_ascii_classes 0); kSigPartial when it has invalid UTF-8 or
  // ends inside a code point; kSigNonAscii when it has a (complete) non-ASCII code point. A
  // state whose every code point in the token's classes leads back to itself accepts the token
  // without reading its bytes: inside a JSON string, nearly the whole vocabulary.
  const uint64_t* token_sig;  // (vocab) in the block
  const uint8_t* ascii_class; // (128)
  uint32_t n_ascii_classes;
  const uint8_t* token_cps;   // (vocab) code points per token, sorted order (255: 255 or more)
};

constexpr uint32_t kSigPartial = 62;
constexpr uint32_t kSigNonAscii = 63;

// Bytes grammar_compile needs for `len` bytes of GBNF against `model` (an upper bound).
size_t grammar_bytes(const ModelImpl& model, size_t len);

// Compiles GBNF `text` into `mem` (64-byte aligned, `size` bytes). *out on success.
Status grammar_compile(const ModelImpl& model, const char* text, size_t len, void* mem, size_t size,
                       GrammarImpl** out, ErrorSink* err);

// Whether `p` points at a compiled grammar.
bool grammar_is_compiled(const void* p);

// Scratch of the mask stage, one per session (laid out next to its parse state): the trial
// matcher the walk checks tokens with, a vocabulary bitset, and the remembered masks.
// The walk runs a small automaton built as it goes: the states the tokens' code points lead to
// (up to kWalkStates, kept as matcher keys) and the transitions found so far, so a (state, code
// point) pair is checked by the recognizer once per walk however many tokens contain it.
constexpr uint32_t kWalkStates = 48;
constexpr uint32_t kWalkSlots = 4096;  // transitions of non-ASCII code points (by interval)

struct MaskScratch {
  Matcher trial;
  uint64_t* bits = nullptr;  // (ceil(vocab / 64)) bit id: token id may follow
  uint32_t* key = nullptr;   // (kMaskKeyWords) the mask's state key (the cache's)
  uint32_t* walk_key = nullptr;  // (kMaskKeyWords) the walk's scratch key
  MaskCache cache;           // n_entries 0: none
  // The walk's automaton. State 0 is the state the mask is for.
  uint32_t* state_keys = nullptr;  // (kWalkStates, kMaskKeyWords)
  uint32_t* state_len = nullptr;   // (kWalkStates)
  uint64_t* state_hash = nullptr;  // (kWalkStates)
  uint32_t n_states = 0;
  uint8_t* ascii_next = nullptr;   // (kWalkStates, 128) transition on an ASCII code point
  uint64_t* slot_key = nullptr;    // (kWalkSlots) what a slot is for (0: free): a non-ASCII
                                   // code point's interval, or a token's final partial code
                                   // point, from a state
  uint32_t walk_epoch = 0;         // keys carry the walk's epoch (bits 40..55), so a new walk
                                   // needs no clearing: older slots are simply free
  uint8_t* slot_next = nullptr;    // (kWalkSlots) its transition (a partial code point:
                                   // kNextState when it can continue, kNextReject if not)
  // Per root (0: the state; 1: its relaxed copy, matcher_relax): the signature bits whose code
  // points lead the root back to itself, among the bits found so far (found as tokens need them).
  uint64_t loop_sig[2] = {0, 0};
  uint64_t loop_known[2] = {0, 0};
  // Per root: the last token's automaton states at its code point boundaries (byte offsets).
  uint8_t* path_state[2] = {nullptr, nullptr};  // (path_cap) each
  uint16_t* path_off[2] = {nullptr, nullptr};   // (path_cap) each
  uint32_t n_path[2] = {0, 0};
  uint32_t path_cap = 0;  // the longest token text the layout was made for, + 1
};

// Lays out MaskScratch for `vocab` tokens whose texts are at most `max_token_text` bytes (the
// model's Hparams::max_token_text), a trial matcher of `state_bytes` and a cache of
// `cache_bytes` (0: none). After a real layout, trial.g must be set before use.
void mask_scratch_layout(Arena& a, uint32_t vocab, uint32_t max_token_text, size_t state_bytes,
                         size_t cache_bytes, MaskScratch* ms);

// The walk: bits[id] = 1 for every token with bytes that can continue the text from `state` (a
// partial UTF-8 character at its end included), 0 for the others; bits of tokens without bytes
// are set to 1 (grammar_mask decides them). RLM_ERR_CAPACITY when a check outgrows the budget.
Status grammar_mask_bits(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                         uint64_t* bits, ErrorSink* err);

// logits[id] = -inf where bit id of `bits` is 0 (ids < vocab).
void grammar_apply_bits(const uint64_t* bits, uint32_t vocab, float* logits);

// The mask stage: sets logits[id] = -inf for every token that cannot continue the text from
// `state`; tokens with no bytes (control tokens) are allowed only when `is_end(id)` and the
// grammar can end here. The mask of a state met before comes from the cache (exactly the mask
// the walk would give); otherwise the walk computes it and the cache keeps it.
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms, float* logits,
                    IsEnd is_end, ErrorSink* err);

// Advances `state` by the bytes of `token` (a token the mask allowed). *accepted false when the
// grammar refuses it (the state is then unchanged).
Status grammar_accept_token(const GrammarImpl& gi, Matcher* state, int32_t token, bool* accepted,
                            ErrorSink* err);

// The walk over sorted[begin, end) (tokens with bytes): sets the bit of every token there that
// can continue the text from `state` (bits start at 0).
// A token of at most `room` code points (room > 0) is walked from automaton root 1, the state's
// relaxed copy (matcher_relax: exact for such tokens); the others from root 0, the state.
Status grammar_mask_range(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                          uint32_t room, uint32_t begin, uint32_t end, uint64_t* bits,
                          ErrorSink* err);

// ---- implementation of the template ----
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms, float* logits,
                    IsEnd is_end, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  MaskCache& cache = ms->cache;
  if (cache.owner != &gi) mask_cache_clear(&cache, &gi);
  uint32_t key_len = 0;
  uint64_t key_hash = 0;
  const bool keyed =
      cache.n_entries && matcher_key(state, ms->key, kMaskKeyWords, &key_len, &key_hash);
  const uint64_t* bits = keyed ? mask_cache_find(&cache, ms->key, key_len, key_hash) : nullptr;
  if (!bits) {
    RLM_RETURN_IF_ERROR(grammar_mask_bits(gi, state, ms, ms->bits, err));
    bits = ms->bits;
    if (keyed) {
      uint64_t* kept = mask_cache_insert(&cache, ms->key, key_len, key_hash);
      memcpy(kept, ms->bits, sizeof(uint64_t) * cache.words);
    }
  }
  grammar_apply_bits(bits, t.vocab, logits);
  const bool can_end = matcher_can_end(state);
  const float neg_inf = -__builtin_inff();
  for (uint32_t i = 0; i < t.n_empty; ++i) {
    const int32_t id = t.sorted[i];
    if (!(can_end && is_end(id))) logits[id] = neg_inf;
  }
  return RLM_OK;
}

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_COMPILED_H_
