#include "sampler.h"

#include <float.h>
#include <math.h>

#include <algorithm>

namespace ringlm::internal {

namespace {

// Top-k up to this size selects with a heap (one pass, O(vocab log k) worst case, ~O(vocab)
// typical); larger k uses nth_element (O(vocab) average) and sorts the k.
constexpr uint32_t kHeapTopKMax = 1024;

// Candidate order: larger working logit first, then lower id. Callers guarantee no NaN in the
// logits they compare (stage 4 replaces NaN by −inf), so this is a strict total order and
// nth_element/sort results do not depend on the algorithm's internals.
struct ByLogitDesc {
  const float* x;
  bool operator()(int32_t a, int32_t b) const {
    return x[a] > x[b] || (x[a] == x[b] && a < b);
  }
};

// Unnormalised softmax weight of logit `v` given the maximum `m` (m not −inf, not NaN).
inline float weight(float v, float m) {
  if (m == INFINITY) return v == INFINITY ? 1.0f : 0.0f;
  return expf(v - m);
}

// Stages 1-2: bias and penalties, in place. Each entry's value before it changes is appended to
// s->saved (at most s->saved_cap entries; the session sizes it for max_logit_bias plus the
// penalty window) so restore_logits() can undo the stages. Returns the number saved.
uint32_t apply_bias_and_penalties(float* logits, uint32_t vocab, const SamplerParams& p,
                                  const int32_t* recent, size_t n_recent, SamplerScratch* s) {
  rlm_logit_bias* saved = s->saved;
  const uint32_t cap = s->saved_cap;
  uint32_t n_saved = 0;
  for (uint32_t i = 0; i < p.n_logit_bias; ++i) {
    const int32_t t = p.logit_bias[i].token;
    if (t < 0 || static_cast<uint32_t>(t) >= vocab) continue;
    if (n_saved < cap) saved[n_saved++] = rlm_logit_bias{t, logits[t]};
    logits[t] += p.logit_bias[i].bias;
  }

  const bool any_penalty = p.repeat_penalty != 1.0f || p.frequency_penalty != 0.0f ||
                           p.presence_penalty != 0.0f;
  if (!any_penalty || p.penalty_last_n <= 0 || !recent || n_recent == 0) return n_saved;
  size_t n = n_recent;
  if (n > static_cast<size_t>(p.penalty_last_n)) n = static_cast<size_t>(p.penalty_last_n);
  if (n > s->window_cap) n = s->window_cap;
  // Newest n tokens, sorted, so each distinct token is one run and its length is its count.
  int32_t* w = s->window;
  for (size_t i = 0; i < n; ++i) w[i] = recent[n_recent - n + i];
  std::sort(w, w + n);
  for (size_t i = 0; i < n;) {
    size_t j = i + 1;
    while (j < n && w[j] == w[i]) ++j;
    const int32_t t = w[i];
    const float count = static_cast<float>(j - i);
    i = j;
    if (t < 0 || static_cast<uint32_t>(t) >= vocab) continue;
    float v = logits[t];
    if (n_saved < cap) saved[n_saved++] = rlm_logit_bias{t, v};
    if (p.repeat_penalty != 1.0f) v = v > 0.0f ? v / p.repeat_penalty : v * p.repeat_penalty;
    if (p.frequency_penalty != 0.0f) v -= p.frequency_penalty * count;
    if (p.presence_penalty != 0.0f) v -= p.presence_penalty;
    logits[t] = v;
  }
  return n_saved;
}

// Undoes stages 1-2: newest first, so a token changed twice (two bias entries, or bias and a
// penalty) ends at its value before the first change.
void restore_logits(float* logits, const SamplerScratch* s, uint32_t n_saved) {
  for (uint32_t i = n_saved; i-- > 0;) logits[s->saved[i].token] = s->saved[i].bias;
}

// Stage 3: lowest id among the maxima; NaN never wins (it compares false). Returns -1 when
// every logit is -inf or NaN.
int32_t argmax(const float* logits, uint32_t vocab) {
  int32_t best = 0;
  float best_v = -INFINITY;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (logits[i] > best_v) {
      best_v = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  return best_v == -INFINITY ? -1 : best;
}

// The maximum of x[0, n) ignoring NaN (-inf when all are -inf or NaN) and the largest |x| over
// the finite values (0 if none), in one pass. Eight independent lanes so the compiler can
// vectorise it (a single running max is a loop-carried dependency it will not reorder without
// -ffast-math). Only the sign of a zero maximum can depend on the order, which no caller sees
// (hi only enters as x - hi and hi / T).
void max_and_finite_abs_max(const float* x, uint32_t n, float* hi_out, float* amax_out) {
  constexpr uint32_t kLanes = 8;
  float hi[kLanes], am[kLanes];
  for (uint32_t j = 0; j < kLanes; ++j) {
    hi[j] = -INFINITY;
    am[j] = 0.0f;
  }
  uint32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (uint32_t j = 0; j < kLanes; ++j) {
      const float v = x[i + j];
      const float a = fabsf(v);
      hi[j] = v > hi[j] ? v : hi[j];              // false for NaN
      am[j] = a > am[j] && a <= FLT_MAX ? a : am[j];  // false for inf and NaN
    }
  }
  for (; i < n; ++i) {
    const float v = x[i];
    const float a = fabsf(v);
    hi[0] = v > hi[0] ? v : hi[0];
    am[0] = a > am[0] && a <= FLT_MAX ? a : am[0];
  }
  for (uint32_t j = 1; j < kLanes; ++j) {
    hi[0] = hi[j] > hi[0] ? hi[j] : hi[0];
    am[0] = am[j] > am[0] ? am[j] : am[0];
  }
  *hi_out = hi[0];
  *amax_out = am[0];
}

// Stage 5 selection: the k best (k < vocab) in candidate order into idx[0, k).
void select_top_k(const float* x, uint32_t vocab, uint32_t k, int32_t* idx) {
  const ByLogitDesc cmp{x};
  if (k <= kHeapTopKMax) {
    // One pass with a heap of the k best so far, worst at the root: almost every token is
    // rejected by a single comparison with the root's value. Ids arrive in increasing order,
    // so a token equal to the root's value is the worse of the two (higher id): reject it.
    for (uint32_t i = 0; i < k; ++i) idx[i] = static_cast<int32_t>(i);
    std::make_heap(idx, idx + k, cmp);
    float worst = x[idx[0]];
    for (uint32_t i = k; i < vocab; ++i) {
      if (x[i] > worst) {
        std::pop_heap(idx, idx + k, cmp);
        idx[k - 1] = static_cast<int32_t>(i);
        std::push_heap(idx, idx + k, cmp);
        worst = x[idx[0]];
      }
    }
    std::sort_heap(idx, idx + k, cmp);  // ascending in cmp = best first
    return;
  }
  for (uint32_t i = 0; i < vocab; ++i) idx[i] = static_cast<int32_t>(i);
  std::nth_element(idx, idx + (k - 1), idx + vocab, cmp);
  std::sort(idx, idx + k, cmp);
}

// Stage 7 on candidates [0, n) whose weights are in probs: the smallest prefix whose
// cumulative weight reaches top_p * sum_all. Returns its length, or 0 if it is never reached
// (possible only through rounding or when [0, n) is a pruned subset).
uint32_t top_p_cut(const float* probs, uint32_t n, float top_p, double sum_all) {
  const double target = static_cast<double>(top_p) * sum_all;
  double cum = 0.0;
  for (uint32_t j = 0; j < n; ++j) {
    cum += probs[j];
    if (cum >= target) return j + 1;
  }
  return 0;
}

// Sorts idx[0, n) into candidate order and writes their weights to probs[0, n).
void sort_and_weigh(const float* x, float m, int32_t* idx, float* probs, uint32_t n) {
  std::sort(idx, idx + n, ByLogitDesc{x});
  // Recomputed rather than read back: probs may hold per-id weights that this overwrites.
  for (uint32_t j = 0; j < n; ++j) probs[j] = weight(x[idx[j]], m);
}

// Stages 1-9. Returns the survivor count in s->idx/s->probs; 0 when nothing can be sampled
// (every logit -inf or NaN after stage 2), with stages 1-2 undone. When `by_id` is non-null and no
// truncation stage is active (no top-k, top-p 1, min-p 0), skips sorting: sets *by_id, leaves
// each token's unnormalised weight in probs[token] and returns vocab (sample() draws from that
// in id order; the distribution is the same, only the walk order differs).
uint32_t candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                    const int32_t* recent, size_t n_recent, SamplerScratch* s, bool* by_id) {
  if (vocab > s->vocab) vocab = s->vocab;
  if (vocab == 0) return 0;
  const uint32_t n_saved = apply_bias_and_penalties(logits, vocab, p, recent, n_recent, s);

  int32_t* idx = s->idx;
  float* probs = s->probs;
  if (p.temperature == 0.0f) {
    const int32_t best = argmax(logits, vocab);
    if (best < 0) {
      restore_logits(logits, s, n_saved);
      return 0;
    }
    idx[0] = best;
    probs[0] = 1.0f;
    return 1;
  }

  // The maximum before stage 4 (NaN never wins), which also decides "nothing to sample" before
  // the logits are divided (so stages 1-2 can still be undone), and the largest finite
  // magnitude: whether logit / T can overflow.
  const float t = p.temperature;
  float hi, amax;
  max_and_finite_abs_max(logits, vocab, &hi, &amax);
  if (hi == -INFINITY) {
    restore_logits(logits, s, n_saved);
    return 0;
  }

  // Stage 4. Division rounds monotonically, so the maximum of logit / T is hi / T exactly.
  float m;
  if (amax / t <= FLT_MAX) {
    for (uint32_t i = 0; i < vocab; ++i) {
      const float v = logits[i] / t;
      logits[i] = v == v ? v : -INFINITY;
    }
    m = hi / t;
  } else if (hi == INFINITY) {
    // Only the +inf (forced) tokens have weight; a finite logit / T overflowing to +inf must not
    // join them.
    for (uint32_t i = 0; i < vocab; ++i) logits[i] = logits[i] == INFINITY ? INFINITY : -INFINITY;
    m = INFINITY;
  } else {
    // Some finite logit / T overflows (a tiny T, or huge logits): shift by the maximum first.
    // The softmax is the same; the shifted values are <= 0, so nothing overflows to +inf, and
    // a value that underflows to -inf had weight 0 anyway.
    for (uint32_t i = 0; i < vocab; ++i) {
      const float v = (logits[i] - hi) / t;
      logits[i] = v == v ? v : -INFINITY;
    }
    m = 0.0f;
  }

  // Min-p in weight units: w_max == 1, so p < min_p * p_max is w < min_p. Its survivors are a
  // prefix of the candidate order, as are top-p's, so applying min-p first (before sorting)
  // and then top-p against the full mass gives the shorter prefix: the documented result.
  const float min_p = p.min_p;
  const bool top_p_on = p.top_p < 1.0f;
  const uint32_t k =
      (p.top_k <= 0 || static_cast<uint32_t>(p.top_k) >= vocab) ? vocab
                                                                  : static_cast<uint32_t>(p.top_k);
  uint32_t n = 0;
  if (k < vocab) {
    select_top_k(logits, vocab, k, idx);
    double sum_all = 0.0;  // Σw over the top-k survivors: top-p's denominator
    for (uint32_t j = 0; j < k; ++j) {
      const float w = weight(logits[idx[j]], m);
      sum_all += w;
      if (w > 0.0f && w >= min_p && n == j) probs[n++] = w;
    }
    if (top_p_on) {
      const uint32_t cut = top_p_cut(probs, n, p.top_p, sum_all);
      if (cut != 0) n = cut;
    }
  } else if (top_p_on) {
    // Every weight is needed for Σw. A token with p < (1 - top_p) / (vocab - 1) cannot be in
    // the nucleus (if it were, it and everything after it would hold more than 1 - top_p of
    // the mass in fewer than vocab tokens each below that bound), so only tokens above it
    // (with a margin for rounding) are sorted; the maximum (w == 1) always is. Correctness does
    // not rest on the bound: the kept tokens are a prefix of the candidate order, so a cut
    // found among them is the true cut, and when none is found the fallback sorts them all.
    double sum_all = 0.0;
    for (uint32_t i = 0; i < vocab; ++i) sum_all += (probs[i] = weight(logits[i], m));
    const float bound = vocab > 1
        ? static_cast<float>((1.0 - p.top_p) * sum_all / (vocab - 1) * (1.0 - 1e-3))
        : 0.0f;
    bool pruned = false;
    for (uint32_t i = 0; i < vocab; ++i) {
      const float w = probs[i];
      if (w <= 0.0f || w < min_p) continue;
      if (w < bound && w < 1.0f) {
        pruned = true;
        continue;
      }
      idx[n++] = static_cast<int32_t>(i);
    }
    sort_and_weigh(logits, m, idx, probs, n);
    uint32_t cut = top_p_cut(probs, n, p.top_p, sum_all);
    if (cut == 0 && pruned) {
      // Rounding kept the cut out of reach of the pruned set: redo without the bound.
      n = 0;
      for (uint32_t i = 0; i < vocab; ++i) {
        const float w = weight(logits[i], m);
        if (w > 0.0f && w >= min_p) idx[n++] = static_cast<int32_t>(i);
      }
      sort_and_weigh(logits, m, idx, probs, n);
      cut = top_p_cut(probs, n, p.top_p, sum_all);
    }
    if (cut != 0) n = cut;
  } else if (min_p > 0.0f || !by_id) {
    // No Σw needed. Tokens far below the min-p threshold in logit space (w = e^(x - m), with
    // a margin of 0.01 in the exponent, far above expf/logf error) skip the exp.
    const float lo = min_p > 0.0f ? logf(min_p) - 0.01f : -INFINITY;
    for (uint32_t i = 0; i < vocab; ++i) {
      const float x = logits[i];
      if (m != INFINITY && x - m < lo) continue;
      const float w = weight(x, m);
      if (w > 0.0f && w >= min_p) idx[n++] = static_cast<int32_t>(i);
    }
    sort_and_weigh(logits, m, idx, probs, n);
  } else {
    for (uint32_t i = 0; i < vocab; ++i) probs[i] = weight(logits[i], m);
    *by_id = true;
    return vocab;
  }

  // Stage 9.
  double kept = 0.0;
  for (uint32_t j = 0; j < n; ++j) kept += probs[j];
  const float inv = static_cast<float>(1.0 / kept);
  for (uint32_t j = 0; j < n; ++j) probs[j] *= inv;
  return n;
}

}  // namespace

Status sampler_params_from_abi(const rlm_sampling* s, uint32_t vocab, uint32_t penalty_window,
                               uint32_t max_bias, SamplerParams* out, ErrorSink* err) {
  RLM_CHECK(s != nullptr && out != nullptr, RLM_ERR_INVALID_ARGUMENT, err,
            "sampling parameters are NULL");
  RLM_CHECK(s->struct_size == sizeof(rlm_sampling), RLM_ERR_STRUCT_SIZE, err,
            "rlm_sampling.struct_size is %u, expected %u", s->struct_size,
            static_cast<unsigned>(sizeof(rlm_sampling)));
  // Written so NaN fails every check (comparisons with NaN are false).
  RLM_CHECK(s->temperature >= 0.0f && isfinite(s->temperature), RLM_ERR_INVALID_ARGUMENT, err,
            "temperature %g must be finite and >= 0", static_cast<double>(s->temperature));
  RLM_CHECK(s->top_k >= 0, RLM_ERR_INVALID_ARGUMENT, err, "top_k %d must be >= 0 (0 = off)",
            s->top_k);
  RLM_CHECK(s->top_p > 0.0f && s->top_p <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
            "top_p %g must be in (0, 1]", static_cast<double>(s->top_p));
  RLM_CHECK(s->min_p >= 0.0f && s->min_p <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
            "min_p %g must be in [0, 1]", static_cast<double>(s->min_p));
  RLM_CHECK(s->repeat_penalty > 0.0f && isfinite(s->repeat_penalty), RLM_ERR_INVALID_ARGUMENT,
            err, "repeat_penalty %g must be finite and > 0 (1 = off)",
            static_cast<double>(s->repeat_penalty));
  RLM_CHECK(isfinite(s->frequency_penalty), RLM_ERR_INVALID_ARGUMENT, err,
            "frequency_penalty must be finite");
  RLM_CHECK(isfinite(s->presence_penalty), RLM_ERR_INVALID_ARGUMENT, err,
            "presence_penalty must be finite");
  RLM_CHECK(s->penalty_last_n >= 0 && static_cast<uint32_t>(s->penalty_last_n) <= penalty_window,
            RLM_ERR_INVALID_ARGUMENT, err,
            "penalty_last_n %d must be in [0, %u] (the session's penalty_window)",
            s->penalty_last_n, penalty_window);
  RLM_CHECK(s->n_logit_bias <= max_bias, RLM_ERR_INVALID_ARGUMENT, err,
            "%u logit bias entries, the session holds at most %u (max_logit_bias)",
            s->n_logit_bias, max_bias);
  RLM_CHECK(s->n_logit_bias == 0 || s->logit_bias != nullptr, RLM_ERR_INVALID_ARGUMENT, err,
            "logit_bias is NULL with n_logit_bias %u", s->n_logit_bias);
  for (uint32_t i = 0; i < s->n_logit_bias; ++i) {
    const rlm_logit_bias& b = s->logit_bias[i];
    RLM_CHECK(b.token >= 0 && static_cast<uint32_t>(b.token) < vocab, RLM_ERR_INVALID_ARGUMENT,
              err, "logit_bias[%u].token %d out of range [0, %u)", i, b.token, vocab);
    RLM_CHECK(!isnan(b.bias), RLM_ERR_INVALID_ARGUMENT, err, "logit_bias[%u].bias is NaN", i);
  }
  out->temperature = s->temperature;
  out->top_k = s->top_k;
  out->top_p = s->top_p;
  out->min_p = s->min_p;
  out->repeat_penalty = s->repeat_penalty;
  out->frequency_penalty = s->frequency_penalty;
  out->presence_penalty = s->presence_penalty;
  out->penalty_last_n = s->penalty_last_n;
  out->seed = s->seed;
  out->logit_bias = s->n_logit_bias ? s->logit_bias : nullptr;
  out->n_logit_bias = s->n_logit_bias;
  return RLM_OK;
}

void Rng::seed(uint64_t s) { state = s ? s : 0x9E3779B97F4A7C15ull; }

uint64_t Rng::next_u64() {
  uint64_t x = state;
  x ^= x >> 12;
  x ^= x << 25;
  x ^= x >> 27;
  state = x;
  return x * 0x2545F4914F6CDD1Dull;
}

float Rng::next_float() {
  return static_cast<float>(next_u64() >> 40) * (1.0f / 16777216.0f);
}

void sampler_layout(Arena& a, uint32_t vocab, uint32_t penalty_window, uint32_t max_bias,
                    SamplerScratch* s) {
  s->idx = a.alloc<int32_t>(vocab);
  s->probs = a.alloc<float>(vocab);
  s->window = a.alloc<int32_t>(penalty_window, alignof(int32_t));
  const uint64_t saved = static_cast<uint64_t>(max_bias) + penalty_window;
  s->saved = a.alloc<rlm_logit_bias>(static_cast<size_t>(saved), alignof(rlm_logit_bias));
  s->vocab = vocab;
  s->window_cap = penalty_window;
  s->saved_cap = static_cast<uint32_t>(saved);
}

uint32_t sampler_candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                            const int32_t* recent, size_t n_recent, SamplerScratch* s) {
  return candidates(logits, vocab, p, recent, n_recent, s, nullptr);
}

int32_t sample(float* logits, uint32_t vocab, const SamplerParams& p, const int32_t* recent,
               size_t n_recent, Rng* rng, SamplerScratch* s, double* p_drawn) {
  bool by_id = false;
  const uint32_t n = candidates(logits, vocab, p, recent, n_recent, s, &by_id);
  if (n == 0) return -1;
  if (p.temperature == 0.0f) {
    if (p_drawn) *p_drawn = 1.0;
    return s->idx[0];
  }
  // Walk against u * Σp rather than u so float rounding in the (re)normalised sum cannot leave
  // u beyond the last cumulative value; the last token with p > 0 is the fallback all the same.
  const float u = rng->next_float();
  const float* probs = s->probs;
  double total = 0.0;
  for (uint32_t j = 0; j < n; ++j) total += probs[j];
  const double target = static_cast<double>(u) * total;
  double cum = 0.0;
  uint32_t last = 0;
  for (uint32_t j = 0; j < n; ++j) {
    if (probs[j] <= 0.0f) continue;
    cum += probs[j];
    last = j;
    if (target < cum) break;
  }
  // The walk draws token `last` with probability probs[last] / total.
  if (p_drawn) *p_drawn = static_cast<double>(probs[last]) / total;
  return by_id ? static_cast<int32_t>(last) : s->idx[last];
}

}  // namespace ringlm::internal
