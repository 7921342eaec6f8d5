// Speculative decoding: the drafters (prompt lookup, a draft-model session) and the state of a
// verification pass. The step that runs and consumes a pass is session.cc's (session_step); this
// pair proposes drafts, checks a drafter at set-up and keeps the counters.
//
// Exactness (why the output equals plain decoding): a verification pass runs [last, d1..dn] in
// one batched pass, and every row of its logits equals a one-token pass at that position
// (forward's contract). rlm_step then samples row 0 with the plain sampler; while the token
// equals the next draft, the following steps sample the next rows (the draft's K/V is the
// sampled token's). Each token is therefore sampled from the logits, history, RNG state and stops
// plain decoding would have at that point. The cost of a wrong draft is only the rows computed
// for nothing, never a different token; the KV undo area (kv_ring.h) gives back the slots the
// rejected positions overwrote.
#ifndef RINGLM_RUNTIME_SPECULATION_H_
#define RINGLM_RUNTIME_SPECULATION_H_

#include <stdint.h>

#include "arena.h"
#include "ringlm/ringlm.h"
#include "status.h"

namespace ringlm::internal {

struct SessionImpl;

constexpr uint32_t kMaxDraft = 64;
constexpr uint32_t kMaxLookupNgram = 16;

struct SpecState {
  // Drafter (rlm_session_set_speculation), validated.
  rlm_spec_mode mode;     // RLM_SPEC_OFF: every step is a plain step
  uint32_t n_max;         // <= cfg.max_draft
  uint32_t n_cur;         // adaptive draft length in [1, n_max]
  float p_min;
  SessionImpl* draft;     // borrowed draft-model session (RLM_SPEC_DRAFT_MODEL)
  uint32_t ngram_min, ngram_max;

  // The verification pass being consumed. tokens[0] is the token the pass ran at position
  // base = n_past - 1 - row; tokens[1..n] are its drafts, whose K/V sit at base + 1.. with the
  // slots they overwrote saved in the ring's undo area. Logits row i (Transformer::logits)
  // belongs to position base + i.
  bool active;
  uint32_t row;           // the row the next step samples (positions up to base + row are kept)
  uint32_t n;             // drafts in the pass
  int32_t* tokens;        // (1 + max_draft) [last, d1..dn]

  // Draft model: its cache holds the target's positions [draft_from, draft_held) at draft
  // positions [0, draft_held - draft_from). draft_held == 0 means nothing is held. After a
  // proposal, its draft tokens but the last sit at the draft's tentative positions
  // [n_past, n_past + draft_tent) (the draft's undo area holds what they overwrote): the next
  // proposal keeps those the target accepted instead of running them again.
  uint64_t draft_from, draft_held;
  uint32_t draft_tent;

  rlm_spec_stats stats;
};

// Reserves the pass's token buffer (max_draft 0: nothing).
void spec_layout(Arena& a, uint32_t max_draft, SpecState* sp);

// Validates `spec` (NULL = off) for session `s` and stores it; resets the counters. The session
// must not be in an active pass (the caller ends it first).
Status spec_set(SessionImpl* s, const rlm_speculation* spec, ErrorSink* err);

// Proposes up to `max_n` drafts to follow `last` (the sampled token at position s->n_past, not yet
// run) into out[0..n); returns n (0: nothing worth checking). The draft model may run; an error
// (the draft session was released) is returned as a Status with *n_out untouched.
Status spec_propose(SessionImpl* s, int32_t last, uint32_t max_n, int32_t* out, uint32_t* n_out,
                    ErrorSink* err);

// The target's positions below `pos` changed (rewind, reset): the draft no longer holds them.
void spec_forget_from(SpecState* sp, uint64_t pos);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_SPECULATION_H_
