// Log-probabilities of raw logits: the log-softmax at temperature 1, and the n most probable
// tokens. Used by the step (rlm_session_set_logprobs) and by scoring (rlm_session_score); pure
// functions over one row of vocab logits, no state and no memory of their own.
#ifndef RINGLM_RUNTIME_LOGPROBS_H_
#define RINGLM_RUNTIME_LOGPROBS_H_

#include <stddef.h>
#include <stdint.h>

#include "ringlm/ringlm.h"

namespace ringlm::internal {

// The most top-n alternatives a session reports per step.
constexpr uint32_t kMaxTopLogprobs = 4096;

// log Σ exp(logits[i]) over the row, computed as max + log Σ exp(logits[i] − max) with the sum in
// double. NaN logits count as −inf (never a candidate). Returns −inf when every logit is −inf or
// NaN, +inf when some logit is +inf.
double log_sum_exp(const float* logits, uint32_t n);

// log p(token) = logits[token] − lse, as float; NaN when lse is not finite or the logit is NaN.
float token_logprob(const float* logits, int32_t token, double lse);

// Writes the k = min(n_top, n) largest logits as (token, logprob) into out, by logit descending,
// then token id ascending (NaN never precedes a number), and returns k. One pass over the row
// with a sorted insertion into out: O(n) when k is small. With lse NaN the logprobs are NaN (a
// ranking only).
uint32_t top_logprobs(const float* logits, uint32_t n, double lse, uint32_t n_top,
                      rlm_token_logprob* out);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_LOGPROBS_H_
