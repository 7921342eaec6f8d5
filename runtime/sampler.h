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
//  2b. DRY               (dry_multiplier > 0 and a DRY window N = min(n_recent, dry_penalty_last_n,
//                        window_cap) > dry_allowed_length; llama.cpp's llama_sampler_dry): with
//                        r(i) the token i places back (r(0) the newest), the repeat limit L is
//                        the smallest i whose r(i) is a breaker token (N if none); nothing
//                        happens when L < dry_allowed_length. For each k in [1, N), z(k) is the
//                        length of the longest match r(k + j) == r(j), j < z, k + j < N
//                        (Z-algorithm over the reversed window). When n = min(z(k), L) >=
//                        dry_allowed_length, the token r(k - 1) that followed that earlier
//                        occurrence would extend the repeat: each such token t in [0, vocab)
//                        that is not a breaker gets, once, with n its largest such length:
//                          logit -= dry_multiplier * dry_base^min(n - allowed, E)
//                        (in float64, as llama.cpp, rounded to float; E =
//                        int(88.7228391f / logf(dry_base)) when dry_base > 1.000001, else no
//                        cap). A breaker token is one whose text (token_text, as in
//                        mid-text) contains one of the breaker strings: the session builds a
//                        vocab bitset of them (sampler_build_dry_breakers) when DRY is set with
//                        breakers. Unlike llama.cpp, a breaker string that no single token
//                        contains (split over several tokens) does not break a sequence.
//   3. temperature 0     greedy: argmax of the logits so far, lowest id on ties; NaN counts as
//                        −inf. Nothing below runs and the RNG is not advanced.
//   4. temperature       logits[i] /= temperature (NaN results become −inf). When that would
//                        overflow (some finite |logit| / temperature > FLT_MAX: a tiny
//                        temperature such as 1e-40, or huge biased logits), the logits are
//                        shifted by their maximum first, (logit − max) / temperature: the same
//                        softmax, and no finite logit becomes +inf. As temperature → 0 this
//                        tends to greedy (exact ties at the maximum share the probability). If
//                        the maximum is +inf (a forced token), the other logits become −inf.
//  4b. top-n-sigma       (top_n_sigma > 0 and a finite maximum m): with sigma the population
//                        standard deviation (float64) of the finite working logits,
//                        logit < m - top_n_sigma * sigma becomes -inf. (Unlike llama.cpp, where
//                        top-n-sigma replaces the other truncations, the stages below still run.)
//   5. top-k             keep the k largest (0, or k >= vocab, = off): one pass with a
//                        size-k heap for k <= 1024 (nth_element beyond), then a sort of the
//                        k survivors; never a full sort of the vocab.
//   6. softmax           w = exp(logit − max), max-subtracted; with a +inf max, w = 1 for the
//                        +inf logits and 0 for the rest; p = w / Σw over the top-k survivors.
//  6b. typical-p         (0 < typical_p < 1 and a finite maximum; Meister et al., llama.cpp's
//                        llama_sampler_typical): over the softmax p of the top-k survivors,
//                        H = -Σ p ln p; candidates taken by |-ln p - H| ascending (then
//                        candidate order) are kept up to and including the first at which the
//                        cumulative p exceeds typical_p; they go back to candidate order. The
//                        stages below see p renormalised over these survivors (min-p's p_max is
//                        then the largest survivor's).
//   7. top-p             keep the smallest prefix (by descending p) whose cumulative p >= top_p,
//                        at least one token (1 = off).
//   8. min-p             drop p < min_p * p_max (0 = off). Tokens whose p is exactly 0 are
//                        always dropped, so a banned token is never a candidate.
//  8b. XTC               (xtc_probability > 0; llama.cpp's xtc): u = rng.next_float(); when
//                        u < xtc_probability and at least two survivors have renormalised
//                        p >= xtc_threshold, all of those but the last in candidate order (the
//                        least probable; the highest id among equals) are dropped. u is drawn
//                        on every call that gets here, so XTC takes one extra RNG step per
//                        sampled token, before the draw's.
//   9. renormalise       p /= Σp over the survivors.
//  10. draw              u = rng.next_float() in [0, 1); walk the survivors in candidate order
//                        and return the first whose cumulative p exceeds u * Σp. When no stage
//                        truncates (no top-k, top-p 1, min-p 0) sample() skips sorting the
//                        whole vocab and walks in token-id order instead: same distribution, a
//                        different (still deterministic) map from u to token.
// Mirostat v2 (mirostat == 2 and temperature > 0; Basu et al., llama.cpp's
// llama_sampler_mirostat_v2) replaces stages 4b-8b: after stage 4, softmax over every token;
// keep the tokens with p >= 2^-mu (surprise -log2 p <= mu: a prefix of the candidate order; the
// first token if none), renormalise, draw as in stage 10, then
// mu -= mirostat_eta * (-log2 p_drawn - mirostat_tau) with p_drawn the drawn token's
// renormalised p (float64, stored as float). mu is the caller's state (the session's: 2 * tau
// after set_sampling and reset); without it 2 * tau is used and nothing is updated. Stages 1-2b
// still apply (llama.cpp's mirostat chain has no penalties or DRY).
// Typical-p, XTC and Mirostat sort every candidate with weight > 0 (no pruning shortcut); with
// all three off and top-n-sigma / DRY off, results are bit-identical to the pipeline without
// them.
//
// Candidate order everywhere: working logit descending, then token id ascending. That is a
// strict total order (NaN is gone by then), so every result is deterministic for a given seed,
// and probabilities come out non-increasing.
//
// No candidates: if every logit is −inf or NaN after stage 2b (all tokens banned by the bias,
// penalties or DRY that reached −inf, or NaN from the model), nothing can be sampled. Greedy and
// sampling alike then report it (sample() returns -1, sampler_candidates() 0) and undo stages
// 1-2b, so the logits are left exactly as they came in (the session reports
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

namespace fb {
struct Tokenizer;
}

constexpr uint32_t kMaxDryBreakers = RLM_MAX_DRY_BREAKERS;
constexpr uint32_t kDryBreakerBytes = RLM_DRY_BREAKER_BYTES;

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
  // Extra samplers: each is off at zero (value-initialised params) and at its ABI neutral value.
  float dry_multiplier;        // >= 0; 0 = off
  float dry_base;              // >= 1 when dry_multiplier > 0
  int32_t dry_allowed_length;  // >= 0
  int32_t dry_penalty_last_n;  // [0, penalty_window] (the ABI's -1 resolved); 0 = off
  uint32_t n_dry_breakers;     // [0, kMaxDryBreakers]
  uint8_t dry_breaker_len[kMaxDryBreakers];   // each >= 1
  char dry_breaker_text[kDryBreakerBytes];    // the breakers, concatenated (no terminators)
  const uint32_t* dry_breaker_bits;  // vocab bitset of breaker tokens the owner keeps; null = none
  float xtc_probability;       // [0, 1]; 0 = off
  float xtc_threshold;         // [0, 1]
  float typical_p;             // [0, 1]; on only inside (0, 1)
  float top_n_sigma;           // >= 0; 0 = off
  int32_t mirostat;            // 0 = off, 2 = v2
  float mirostat_tau;          // >= 0
  float mirostat_eta;          // >= 0
};

// Checks `s` against the session's limits and fills *out (untouched on failure):
//   struct_size == sizeof(rlm_sampling), or the older size ending after n_logit_bias (the
//   extra samplers then take their neutral defaults)             else RLM_ERR_STRUCT_SIZE
//   temperature >= 0 and finite; top_k >= 0; top_p in (0, 1]; min_p in [0, 1];
//   repeat_penalty > 0 and finite; frequency/presence penalties finite;
//   penalty_last_n in [0, penalty_window]; n_logit_bias <= max_bias; logit_bias non-null when
//   n_logit_bias > 0; every bias token in [0, vocab) and bias not NaN (±inf allowed);
//   dry_multiplier >= 0 and finite; dry_base >= 1 and finite when dry_multiplier > 0;
//   dry_allowed_length >= 0;
//   dry_penalty_last_n in [-1, penalty_window]; at most kMaxDryBreakers breakers (array non-null
//   when n > 0), each non-null and non-empty, kDryBreakerBytes in all; xtc_probability and
//   xtc_threshold in [0, 1]; typical_p in [0, 1]; top_n_sigma >= 0 and finite; mirostat 0 or 2;
//   mirostat_tau and mirostat_eta >= 0 and finite             else RLM_ERR_INVALID_ARGUMENT.
// Zero is valid for every extra field and means off, so a zeroed tail is neutral.
// Does not copy the bias array: out->logit_bias == s->logit_bias. Copies the breaker strings;
// out->dry_breaker_bits is null (see sampler_build_dry_breakers).
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
  uint32_t saved_cap;     // max_bias + window_cap: every change stages 1-2 can make (DRY: dry)
  rlm_logit_bias* dry;    // [window_cap] DRY: (token, repeat length), then (token, old logit)
  uint32_t* breaker_bits; // [(vocab + 31) / 32] when window_cap > 0, else null: the session's
                          // DRY breaker tokens (sampler_build_dry_breakers; the one member
                          // that persists between calls)
};

// Whether the extra-sampler fields of `p` (e.g. SamplerParams read back as raw bytes) keep the
// rules sampler_params_from_abi enforces, with dry_penalty_last_n already resolved to
// [0, penalty_window]. Does not look at dry_breaker_bits: a pointer never survives a copy
// between sessions; call sampler_build_dry_breakers after such a copy.
bool sampler_extra_params_valid(const SamplerParams& p, uint32_t penalty_window);

// Sets p->dry_breaker_bits: null when DRY is off or has no breakers; otherwise s->breaker_bits
// (null too without a window), filled with the tokens of [0, vocab) whose text (token_text after
// a token that is not BOS) contains one of p's breakers. `piece`: `piece_cap` bytes of scratch,
// at least the longest token text (the model's Hparams::max_token_text). One pass over the vocab.
void sampler_build_dry_breakers(SamplerParams* p, const fb::Tokenizer* tok, uint32_t vocab,
                                char* piece, size_t piece_cap, SamplerScratch* s);

// Reserves the scratch for `vocab` tokens, a penalty window of up to `penalty_window` (DRY's
// too: window_cap more entries and, when penalty_window > 0, the vocab/8-byte breaker bitset)
// and up to `max_bias` logit-bias entries (params with more bias entries still sample
// correctly, but the logits are then not fully restored when nothing can be sampled). Works in
// measure mode (pointers then null); never touches the reserved memory.
void sampler_layout(Arena& a, uint32_t vocab, uint32_t penalty_window, uint32_t max_bias,
                    SamplerScratch* s);

// Runs the pipeline on `logits` (vocab floats, modified in place: bias, penalties and
// temperature are applied to them) and draws a token. `recent` holds the last n_recent tokens
// fed or generated, oldest first; only the newest min(n_recent, penalty_last_n, window_cap)
// are used and ids outside [0, vocab) are ignored. `vocab` above s->vocab is clamped to it
// (a caller bug; clamping keeps memory safe). Returns -1 when vocab is 0 or nothing can be
// sampled (see "No candidates": the logits are then as they came in and `rng` is not advanced).
// Otherwise advances `rng` by exactly one step unless temperature is 0 (two with XTC on).
// `p_drawn` (optional) receives the probability the returned token was drawn with: its
// renormalised survivor probability over the sum the draw walked (1 for greedy).
// `mirostat_mu` (optional): Mirostat v2's state, read and updated when p.mirostat == 2.
int32_t sample(float* logits, uint32_t vocab, const SamplerParams& p, const int32_t* recent,
               size_t n_recent, Rng* rng, SamplerScratch* s, double* p_drawn = nullptr,
               float* mirostat_mu = nullptr);

// The same pipeline up to the draw: leaves the survivors in s->idx[0, n) / s->probs[0, n) in
// candidate order, renormalised, and returns n: >= 1, or 0 when vocab is 0 or nothing can be
// sampled (logits then as they came in). With temperature 0 the single survivor is the greedy
// token with p = 1. XTC runs only when `rng` is given (taking its step); Mirostat reads
// `mirostat_mu` (2 * tau when null) and does not update it.
uint32_t sampler_candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                            const int32_t* recent, size_t n_recent, SamplerScratch* s,
                            Rng* rng = nullptr, const float* mirostat_mu = nullptr);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_SAMPLER_H_
