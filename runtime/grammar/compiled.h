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
//
// States inside bounded repetitions (a JSON string's `char{0,40}`: every character is a new
// count, so a new state) are not walked each: their mask is derived from the mask of the
// relaxed state (matcher_relax: the counts dropped, so one state for every count, walked once and
// remembered) and the room R (code points the state surely takes like the relaxed one):
//  - a token of at most R code points: as the relaxed state says;
//  - a longer token whose code points all lead the relaxed state back to itself (the relaxed
//    walk accepted it by its signature): from the state, such code points step through one chain
//    of states E, E1, E2, ... whatever they are (checked: every such code point leads each link
//    to the same next one), so the token is accepted exactly when its length is at most D, the
//    chain's length; the chain is followed once per state (about R steps);
//  - a longer token the relaxed walk accepted by reading it (a quote, an escape, a partial
//    character...: a few thousand in a 128k vocabulary, fewer the longer): checked on its own.
// Tokens the relaxed state refuses are refused (it accepts a superset). Per state: the chain,
// bit operations over the vocabulary (code point counts are kept as bit planes by token id) and
// the long read tokens, in sorted order, instead of a walk over every token. The relaxed
// state's mask and read tokens are remembered in the session's cache (mask_cache.h).
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
  // Code points per token (each byte of invalid UTF-8 or of a partial character counting as
  // one), capped at kCpsCap: in sorted order, and by token id as bit planes (bit k of
  // cps_planes[p * words + w] is bit p of the count of token 64 w + k, words = ceil(vocab / 64),
  // so "longer than R" is a few bit operations per 64 tokens). max_cps: the largest count
  // (uncapped).
  const uint8_t* token_cps;    // (vocab)
  const uint64_t* cps_planes;  // (kCpsPlanes, words)
  uint32_t max_cps;
  // Per rule: a lower bound of its shortest match in code points (gbnf_min_lengths), for the
  // room of a relaxed repetition (matcher_relax).
  const uint32_t* rule_min_len;  // (g->n_rules)
};

constexpr uint32_t kCpsPlanes = 8;
constexpr uint32_t kCpsCap = (1u << kCpsPlanes) - 1;

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
// matcher the walk checks tokens with, vocabulary bitsets, and the remembered masks.
// The walk runs a small automaton built as it goes: the states the tokens' code points lead to
// (up to kWalkStates, kept as matcher keys) and the transitions found so far. A step depends on
// the code point only through the stacks whose top takes it, so a (state, those stacks) pair is
// checked by the recognizer once per walk however many code points and tokens lead through it.
// A state with a partial character pending is walked the same way: automaton state 0 is the
// state without it, and every token first completes the character.
constexpr uint32_t kWalkStates = 48;
constexpr uint32_t kWalkKeyWords = kWalkStates * kMaskKeyWords;  // their keys, together
constexpr uint32_t kWalkSlots = 4096;  // transitions of non-ASCII code points (by interval)

struct MaskScratch {
  Matcher trial;
  uint64_t* bits = nullptr;  // (ceil(vocab / 64)) bit id: token id may follow
  uint32_t* key = nullptr;   // (kMaskKeyWords) the mask's state key (the cache's)
  uint32_t* walk_key = nullptr;  // (kMaskKeyWords) the walk's scratch key
  MaskCache cache;           // n_entries 0: none
  // The walk's automaton. State 0 is the state the mask is for.
  uint32_t* state_keys = nullptr;  // (kWalkKeyWords) their keys, one after the other (a state
                                   // too deep for the cache's keys still has an automaton)
  uint32_t* state_off = nullptr;   // (kWalkStates) where each key starts
  uint32_t keys_used = 0;
  uint32_t* state_len = nullptr;   // (kWalkStates)
  uint64_t* state_hash = nullptr;  // (kWalkStates)
  uint32_t n_states = 0;
  uint8_t* ascii_next = nullptr;   // (kWalkStates, 128) transition on an ASCII code point
  uint64_t* slot_key = nullptr;    // (kWalkSlots) what a slot is for (0: free): a non-ASCII
                                   // code point's interval, a token's final partial code
                                   // point, or the stacks taking a code point, from a state
  uint32_t walk_epoch = 0;         // keys carry the walk's epoch (bits 40..55), so a new walk
                                   // needs no clearing: older slots are simply free
  uint8_t* slot_next = nullptr;    // (kWalkSlots) its transition (a partial code point:
                                   // kNextState when it can continue, kNextReject if not)
  // Per automaton state 0 and 1 (a walk's root; a derivation's relaxed state): the signature
  // bits whose code points lead the state back to itself, among the bits found so far (found as
  // tokens need them).
  uint64_t loop_sig[2] = {0, 0};
  uint64_t loop_known[2] = {0, 0};
  // The walk's state's pending bytes (matcher.h), automaton state 0 being the state without them.
  uint32_t root_pending = 0;
  uint8_t root_pending_len = 0, root_pending_need = 0, root_pending_lead = 0;
  // The last token's automaton states at its code point boundaries (byte offsets).
  uint8_t* path_state = nullptr;  // (path_cap)
  uint16_t* path_off = nullptr;   // (path_cap)
  uint32_t n_path = 0;
  uint32_t path_cap = 0;  // the longest token text the layout was made for, + 1
  // Derivations from a relaxed state: the tokens its walk accepted by reading them (not by their
  // signature; bit i: sorted[i]) and the same by token id, and the keys of the relaxed state and
  // of the chain's links.
  uint64_t* read = nullptr;       // (ceil(vocab / 64))
  uint64_t* read_id = nullptr;    // (ceil(vocab / 64))
  uint32_t* relaxed_key = nullptr;  // (kMaskKeyWords)
  uint32_t* link_key[2] = {nullptr, nullptr};  // (kMaskKeyWords) each
  // Masks derived (not walked), and of them those whose relaxed state's masks were remembered
  // (the others walked the relaxed state first). For benchmarks and tests.
  uint64_t derived = 0, derived_kept = 0;
};

// Lays out MaskScratch for `vocab` tokens whose texts are at most `max_token_text` bytes (the
// model's Hparams::max_token_text), a trial matcher of `state_bytes` and a cache of
// `cache_bytes` (0: none). After a real layout, trial.g must be set before use.
void mask_scratch_layout(Arena& a, uint32_t vocab, uint32_t max_token_text, size_t state_bytes,
                         size_t cache_bytes, MaskScratch* ms);

// The walk: bits[id] = 1 for every token with bytes that can continue the text from `state` (a
// partial UTF-8 character at its end included), 0 for the others; bits of tokens without bytes
// are set to 1 (grammar_mask decides them). RLM_ERR_CAPACITY when a check outgrows the budget.
// Every token is walked from `state` itself (no derivation from a relaxed state).
Status grammar_mask_bits(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                         uint64_t* bits, ErrorSink* err);

// The same set of tokens, as the mask stage computes it: remembered (ms->cache), derived from
// the relaxed state's masks, or walked. *bits points at the mask (in the cache or ms->bits),
// valid until the next call with `ms`.
Status grammar_state_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                          const uint64_t** bits, ErrorSink* err);

// logits[id] = -inf where bit id of `bits` is 0 (ids < vocab).
void grammar_apply_bits(const uint64_t* bits, uint32_t vocab, float* logits);

// The mask stage: sets logits[id] = -inf for every token that cannot continue the text from
// `state`; tokens with no bytes (control tokens) are allowed only when `is_end(id)` and the
// grammar can end here. The mask of a state met before comes from the cache (exactly the mask
// the walk would give); otherwise it is computed (grammar_state_mask) and the cache keeps it.
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms, float* logits,
                    IsEnd is_end, ErrorSink* err);

// Advances `state` by the bytes of `token` (a token the mask allowed). *accepted false when the
// grammar refuses it (the state is then unchanged).
Status grammar_accept_token(const GrammarImpl& gi, Matcher* state, int32_t token, bool* accepted,
                            ErrorSink* err);

// ---- implementation of the template ----
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms, float* logits,
                    IsEnd is_end, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  const uint64_t* bits = nullptr;
  RLM_RETURN_IF_ERROR(grammar_state_mask(gi, state, ms, &bits, err));
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
