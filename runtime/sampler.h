// Token sampler: turns one position's logits into a token id, in place, in arena scratch.
//
// Pipeline (the order rlm_sampling documents; each stage is skipped at its neutral value):
//   1. logit bias        logits[t] += bias for every entry (−inf bans t, +inf forces it).
//   2. penalties         over the last penalty_last_n tokens, once per distinct token t with
//                        count c > 0 in that window:
//                          repetition (CTRL / llama.cpp): logit > 0 → logit /= repeat_penalty,
//                                                         else         logit *= repeat_penalty
//                          frequency:                     logit -= frequency_penalty * c
//                          presence:                      logit -= presence_penalty
//                        (in exactly this order, as three separate float operations).
//   3. temperature 0     greedy: argmax of the logits so far, lowest id on ties; NaN counts as
//                        −inf. Nothing below runs and the RNG is not advanced.
//   4. temperature       logits[i] /= temperature (NaN results become −inf). When that would
//                        overflow (some finite |logit| / temperature > FLT_MAX: a tiny
//                        temperature such as 1e-40, or huge biased logits), the logits are
//                        shifted by their maximum first, (logit − max) / temperature: the same
//                        softmax, and no finite logit becomes +inf. As temperature → 0 this
//                        tends to greedy (exact ties at the maximum share the probability). If
//                        the maximum is +inf (a forced token), the other logits become −inf.
//   5. top-k             keep the k largest (0, or k >= vocab, = off): one pass with a
//                        size-k heap for k <= 1024 (nth_element beyond), then a sort of the
//                        k survivors; never a full sort of the vocab.
//   6. softmax           w = exp(logit − max), max-subtracted; with a +inf max, w = 1 for the
//                        +inf logits and 0 for the rest; p = w / Σw over the top-k survivors.
//   7. top-p             keep the smallest prefix (by descending p) whose cumulative p >= top_p,
//                        at least one token (1 = off).
//   8. min-p             drop p < min_p * p_max (0 = off). Tokens whose p is exactly 0 are
//                        always dropped, so a banned token is never a candidate.
//   9. renormalise       p /= Σp over the survivors.
//  10. draw              u = rng.next_float() in [0, 1); walk the survivors in candidate order
//                        and return the first whose cumulative p exceeds u * Σp. When no stage
//                        truncates (no top-k, top-p 1, min-p 0) sample() skips sorting the
//                        whole vocab and walks in token-id order instead: same distribution, a
//                        different (still deterministic) map from u to token.
// Candidate order everywhere: working logit descending, then token id ascending. That is a
// strict total order (NaN is gone by then), so every result is deterministic for a given seed,
// and probabilities come out non-increasing.
//
// No candidates: if every logit is −inf or NaN after stage 2 (all tokens banned by the bias,
// penalties that reached −inf, or NaN from the model), nothing can be sampled. Greedy and
// sampling alike then report it (sample() returns -1, sampler_candidates() 0) and undo stages
// 1-2, so the logits are left exactly as they came in (the session reports
// RLM_ERR_NO_CANDIDATES and can sample the same logits again with other parameters). The check
// rides on the maximum the pipeline computes anyway (argmax, or the softmax maximum), so it
// costs no extra pass. Otherwise the maximum is a candidate with weight 1, so no later stage
// (top-k >= 1, top-p keeping at least one, min-p <= 1) can leave nothing.
//
// Exact shortcuts (results equal the documented order; tests compare against a plain
// implementation): min-p and top-p each keep a prefix of the candidate order, so min-p (a
// threshold on w, as p_max has w = 1) is applied before sorting and top-p then measures against
// Σw over all top-k survivors. Without top-k, top-p also prunes tokens with
// p < (1 − top_p) / (vocab − 1) before sorting (no such token can be in the nucleus; a rounding
// miss falls back to sorting without the bound), and min-p without top-p skips the exp for
// tokens well below its threshold in logit space.
//
// Penalty counts come from a sorted copy of the window (at most penalty_window tokens) rather
// than a vocab-sized count table, so no per-call O(vocab) clear and no state between calls.
#ifndef RINGLM_RUNTIME_SAMPLER_H_
#define RINGLM_RUNTIME_SAMPLER_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

// Validated copy of rlm_sampling. logit_bias points at memory the owner keeps alive (the
// session repoints it at its own copy; sampler_params_from_abi leaves it at the caller's array).
struct SamplerParams {
  float temperature;        // >= 0, finite; 0 = greedy
  int32_t top_k;            // >= 0; 0 or >= vocab = off
  float top_p;              // (0, 1]; 1 = off
  float min_p;              // [0, 1]; 0 = off
  float repeat_penalty;     // > 0, finite; 1 = off
  float frequency_penalty;  // finite; 0 = off
  float presence_penalty;   // finite; 0 = off
  int32_t penalty_last_n;   // [0, penalty_window]; 0 = no penalties
  uint64_t seed;
  const rlm_logit_bias* logit_bias;  // [n_logit_bias]
  uint32_t n_logit_bias;
};

// Checks `s` against the session's limits and fills *out (untouched on failure):
//   struct_size == sizeof(rlm_sampling)                          else RLM_ERR_STRUCT_SIZE
//   temperature >= 0 and finite; top_k >= 0; top_p in (0, 1]; min_p in [0, 1];
//   repeat_penalty > 0 and finite; frequency/presence penalties finite;
//   penalty_last_n in [0, penalty_window]; n_logit_bias <= max_bias; logit_bias non-null when
//   n_logit_bias > 0; every bias token in [0, vocab) and bias not NaN (±inf allowed)
//                                                                else RLM_ERR_INVALID_ARGUMENT.
// Does not copy the bias array: out->logit_bias == s->logit_bias.
Status sampler_params_from_abi(const rlm_sampling* s, uint32_t vocab, uint32_t penalty_window,
                               uint32_t max_bias, SamplerParams* out, ErrorSink* err);

// xorshift64* (Vigna, "An experimental exploration of Marsaglia's xorshift generators,
// scrambled", 2016), exactly:
//   seed(s):      state = (s == 0) ? 0x9E3779B97F4A7C15 : s     (xorshift state must be != 0)
//   next_u64():   x = state; x ^= x >> 12; x ^= x << 25; x ^= x >> 27; state = x;
//                 return x * 0x2545F4914F6CDD1D
//   next_float(): (next_u64() >> 40) * 2^-24   — the top 24 bits, so exact in float, in [0, 1)
// The seed is used as the state directly (no scrambling), so nearby small seeds (1, 2, ...)
// give correlated first few outputs; acceptable for sampling, and it keeps the stream
// reproducible from the documented formula alone.
struct Rng {
  uint64_t state;
  void seed(uint64_t s);
  uint64_t next_u64();
  float next_float();
};

// Per-session working memory, reused by every call (nothing is allocated per call, and nothing
// in it carries state from one call to the next).
struct SamplerScratch {
  int32_t* idx;      // [vocab] candidate token ids; after a call, [0, n) are the survivors
  float* probs;      // [vocab] parallel to idx: survivors' renormalised probabilities
  int32_t* window;   // [window_cap] sorted copy of the penalty window
  rlm_logit_bias* saved;  // [saved_cap] (token, value before stage 1-2 changed it)
  uint32_t vocab;
  uint32_t window_cap;
  uint32_t saved_cap;     // max_bias + window_cap: every change stages 1-2 can make
};

// Reserves the scratch for `vocab` tokens, a penalty window of up to `penalty_window` and up to
// `max_bias` logit-bias entries (params with more bias entries still sample correctly, but
// the logits are then not fully restored when nothing can be sampled). Works in measure mode
// (pointers then null); never touches the reserved memory.
void sampler_layout(Arena& a, uint32_t vocab, uint32_t penalty_window, uint32_t max_bias,
                    SamplerScratch* s);

// Runs the pipeline on `logits` (vocab floats, modified in place: bias, penalties and
// temperature are applied to them) and draws a token. `recent` holds the last n_recent tokens
// fed or generated, oldest first; only the newest min(n_recent, penalty_last_n, window_cap)
// are used and ids outside [0, vocab) are ignored. `vocab` above s->vocab is clamped to it
// (a caller bug; clamping keeps memory safe). Returns -1 when vocab is 0 or nothing can be
// sampled (see "No candidates": the logits are then as they came in and `rng` is not advanced).
// Otherwise advances `rng` by exactly one step unless temperature is 0. `p_drawn` (optional)
// receives the probability the returned token was drawn with: its renormalised survivor
// probability over the sum the draw walked (1 for greedy).
int32_t sample(float* logits, uint32_t vocab, const SamplerParams& p, const int32_t* recent,
               size_t n_recent, Rng* rng, SamplerScratch* s, double* p_drawn = nullptr);

// The same pipeline up to the draw: leaves the survivors in s->idx[0, n) / s->probs[0, n) in
// candidate order, renormalised, and returns n: >= 1, or 0 when vocab is 0 or nothing can be
// sampled (logits then as they came in). With temperature 0 the single survivor is the greedy
// token with p = 1.
uint32_t sampler_candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                            const int32_t* recent, size_t n_recent, SamplerScratch* s);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_SAMPLER_H_
