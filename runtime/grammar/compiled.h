// A grammar compiled against a model's vocabulary (#15): what rlm_grammar points at. The GBNF
// elements (gbnf.h) and the vocabulary's token table (token_table.h) in one caller block, laid out
// by one function for the size query and the compile. Read-only after compile: any number of
// sessions on the same model, on any threads, may use it at once.
//
// The token mask (grammar_mask) is the reference walk over the byte-sorted vocabulary: a token is
// allowed when the recognizer takes all its bytes from the session's state and can still
// continue (a partial UTF-8 character at its end included); a token rejected at byte k rules out,
// without a check, every following token that shares its first k + 1 bytes. Its cost grows with
// the vocabulary and the state; the per-state precomputed token classes that make it O(1) in the
// common case are the next step of #15.
#ifndef RINGLM_RUNTIME_GRAMMAR_COMPILED_H_
#define RINGLM_RUNTIME_GRAMMAR_COMPILED_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"
#include "grammar/token_table.h"
#include "status.h"

namespace ringlm::internal {

struct ModelImpl;

constexpr uint64_t kGrammarMagic = 0x52494e474c4d4731ull;  // "RINGLMG1"

struct GrammarImpl {
  uint64_t magic;            // kGrammarMagic once compiled
  const GrammarImpl* self;   // this: a copy elsewhere is not a compiled grammar
  const ModelImpl* model;    // borrowed: the vocabulary it was compiled against
  const Grammar* g;          // in the block
  TokenTable tokens;         // in the block
};

// Bytes grammar_compile needs for `len` bytes of GBNF against `model` (an upper bound).
size_t grammar_bytes(const ModelImpl& model, size_t len);

// Compiles GBNF `text` into `mem` (64-byte aligned, `size` bytes). *out on success.
Status grammar_compile(const ModelImpl& model, const char* text, size_t len, void* mem, size_t size,
                       GrammarImpl** out, ErrorSink* err);

// Whether `p` points at a compiled grammar.
bool grammar_is_compiled(const void* p);

// Sets logits[id] = -inf for every token that cannot continue the text from `state`; tokens with
// no bytes (control tokens) are allowed only when `is_end(id)` and the grammar can end here.
// `trial` is scratch laid out like `state` (same grammar, same budget). RLM_ERR_CAPACITY when a
// token's check outgrows the budget.
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, Matcher* trial, float* logits,
                    IsEnd is_end, ErrorSink* err);

// Advances `state` by the bytes of `token` (a token the mask allowed). *accepted false when the
// grammar refuses it (the state is then unchanged).
Status grammar_accept_token(const GrammarImpl& gi, Matcher* state, int32_t token, bool* accepted,
                            ErrorSink* err);

// ---- implementation of the template ----
template <class IsEnd>
Status grammar_mask(const GrammarImpl& gi, const Matcher& state, Matcher* trial, float* logits,
                    IsEnd is_end, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  const bool can_end = matcher_can_end(state);
  const float neg_inf = -__builtin_inff();
  uint32_t i = 0;
  for (; i < t.n_empty; ++i) {
    const int32_t id = t.sorted[i];
    if (!(can_end && is_end(id))) logits[id] = neg_inf;
  }
  while (i < t.vocab) {
    const int32_t id = t.sorted[i];
    matcher_copy(state, trial);
    bool accepted = false;
    size_t used = 0;
    RLM_RETURN_IF_ERROR(matcher_accept_bytes(trial, t.data(id), t.length(id), &accepted, &used, err));
    // A partial UTF-8 character at the token's end must still be able to continue; a token that
    // completes the grammar (no stack left) is allowed.
    if (accepted && (trial->pending_len == 0 || matcher_viable(*trial))) {
      ++i;
      continue;
    }
    logits[id] = neg_inf;
    ++i;
    if (!accepted) {
      // Every following token that shares bytes [0, used] with this one fails at the same byte.
      while (i < t.vocab && t.lcp[i] > used) logits[t.sorted[i++]] = neg_inf;
    }
  }
  return RLM_OK;
}

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_COMPILED_H_
