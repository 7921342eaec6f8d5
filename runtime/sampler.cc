#include "sampler.h"

#include <float.h>
#include <math.h>
#include <stddef.h>
#include <string.h>

#include <algorithm>

#include "tokenizer.h"

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

inline bool is_breaker(const SamplerParams& p, int32_t t) {
  return p.dry_breaker_bits != nullptr && ((p.dry_breaker_bits[t >> 5] >> (t & 31)) & 1u) != 0;
}

// Stage 2b (DRY), in place after the penalties (s->window is free again). Leaves
// (token, logit before DRY) in s->dry[0, n) for restore_logits and returns n: one entry per
// penalised token, all distinct.
uint32_t apply_dry(float* logits, uint32_t vocab, const SamplerParams& p, const int32_t* recent,
                   size_t n_recent, SamplerScratch* s) {
  if (!(p.dry_multiplier > 0.0f) || p.dry_penalty_last_n <= 0 || !recent || n_recent == 0) {
    return 0;
  }
  size_t n = n_recent;
  if (n > static_cast<size_t>(p.dry_penalty_last_n)) n = static_cast<size_t>(p.dry_penalty_last_n);
  if (n > s->window_cap) n = s->window_cap;
  const size_t allowed = static_cast<size_t>(p.dry_allowed_length);
  if (n <= allowed) return 0;
  const int32_t* newest = recent + (n_recent - 1);  // newest[-i]: the token i places back
  const auto valid = [vocab](int32_t t) { return t >= 0 && static_cast<uint32_t>(t) < vocab; };
  // The repeat limit: no repeat reaches back across the newest breaker.
  size_t limit = n;
  for (size_t i = 0; i < n; ++i) {
    const int32_t t = newest[-static_cast<ptrdiff_t>(i)];
    if (valid(t) && is_breaker(p, t)) {
      limit = i;
      break;
    }
  }
  if (limit < allowed) return 0;
  // Z-algorithm over the reversed window: z[k] = longest j-run with r(k + j) == r(j).
  // [box_l, box_r) is the rightmost window match found so far: r(box_l + j) == r(j) for
  // j < box_r - box_l, so inside it z[k] starts from z[k - box_l].
  int32_t* z = s->window;
  const auto r = [newest](size_t i) { return newest[-static_cast<ptrdiff_t>(i)]; };
  size_t box_l = 0, box_r = 0;
  for (size_t k = 1; k < n; ++k) {
    size_t len = 0;
    if (k < box_r) {
      len = static_cast<size_t>(z[k - box_l]);
      if (len > box_r - k) len = box_r - k;
    }
    while (k + len < n && r(len) == r(k + len)) ++len;
    if (k + len > box_r) {
      box_l = k;
      box_r = k + len;
    }
    z[k] = static_cast<int32_t>(len);
  }
  // Every token that would extend a repeat of at least `allowed`, with that length.
  rlm_logit_bias* d = s->dry;
  uint32_t m = 0;
  for (size_t k = 1; k < n; ++k) {
    size_t len = static_cast<size_t>(z[k]);
    if (len > limit) len = limit;
    if (len < allowed) continue;
    const int32_t t = r(k - 1);
    if (!valid(t) || is_breaker(p, t)) continue;
    d[m++] = rlm_logit_bias{t, static_cast<float>(len)};  // exact: len <= 2^16
  }
  if (m == 0) return 0;
  std::sort(d, d + m, [](const rlm_logit_bias& a, const rlm_logit_bias& b) {
    return a.token < b.token || (a.token == b.token && a.bias > b.bias);
  });
  // llama.cpp's overflow guard: the exponent stays below log(FLT_MAX) / log(base).
  int max_exp = 0;
  if (p.dry_base > 1.000001f) max_exp = static_cast<int>(88.7228391f / logf(p.dry_base));
  uint32_t out = 0;
  for (uint32_t i = 0; i < m;) {
    uint32_t j = i + 1;
    while (j < m && d[j].token == d[i].token) ++j;
    const int32_t t = d[i].token;
    int e = static_cast<int>(d[i].bias) - p.dry_allowed_length;  // the largest length: first
    if (max_exp > 0 && e > max_exp) e = max_exp;
    const float penalty = static_cast<float>(static_cast<double>(p.dry_multiplier) *
                                             pow(static_cast<double>(p.dry_base), e));
    d[out++] = rlm_logit_bias{t, logits[t]};  // out <= i: overwrites an entry already read
    logits[t] -= penalty;
    i = j;
  }
  return out;
}

// Undoes stages 1-2b: DRY's changes (distinct tokens), then the saved bias and penalty changes
// newest first, so a token changed twice (two bias entries, or bias and a penalty) ends at its
// value before the first change.
void restore_logits(float* logits, const SamplerScratch* s, uint32_t n_saved, uint32_t n_dry) {
  for (uint32_t i = n_dry; i-- > 0;) logits[s->dry[i].token] = s->dry[i].bias;
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

// Stage 4b on the working logits (max m finite, no NaN).
void apply_top_n_sigma(float* x, uint32_t vocab, float n_sigma, float m) {
  double sum = 0.0;
  uint32_t count = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (x[i] != -INFINITY) {
      sum += x[i];
      ++count;
    }
  }
  const double mean = sum / count;  // count >= 1: the maximum is finite
  double acc = 0.0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (x[i] != -INFINITY) {
      const double d = x[i] - mean;
      acc += d * d;
    }
  }
  const double threshold =
      static_cast<double>(m) - static_cast<double>(n_sigma) * sqrt(acc / count);
  for (uint32_t i = 0; i < vocab; ++i) {
    if (static_cast<double>(x[i]) < threshold) x[i] = -INFINITY;
  }
}

// Typical-p's order: |-ln p - H| ascending, then candidate order. With p = e^(x - m) / S,
// -ln p - H = (ln S - H) - (x - m) = c - (x - m).
struct ByTypical {
  const float* x;
  double m, c;
  double score(int32_t a) const { return fabs(c - (static_cast<double>(x[a]) - m)); }
  bool operator()(int32_t a, int32_t b) const {
    const double sa = score(a), sb = score(b);
    return sa < sb || (sa == sb && ByLogitDesc{x}(a, b));
  }
};

// Stages 5-8b with typical-p or XTC on, or Mirostat v2 in place of 4b-8b, on working logits
// with maximum m: plain passes over a sorted candidate list. Fills idx/probs[0, n) in candidate
// order with weights (not yet renormalised) and returns n >= 1.
uint32_t candidates_extra(const float* x, uint32_t vocab, const SamplerParams& p, float m,
                          SamplerScratch* s, Rng* rng, float mu) {
  int32_t* idx = s->idx;
  float* probs = s->probs;
  uint32_t n = 0;
  if (p.mirostat == 2) {
    double sum = 0.0;
    for (uint32_t i = 0; i < vocab; ++i) sum += weight(x[i], m);
    // p >= 2^-mu  <=>  w >= S * 2^-mu; a prefix of the candidate order.
    const double threshold = sum * exp2(-static_cast<double>(mu));
    for (uint32_t i = 0; i < vocab; ++i) {
      const float w = weight(x[i], m);
      if (w > 0.0f && w >= threshold) idx[n++] = static_cast<int32_t>(i);
    }
    if (n == 0) idx[n++] = argmax(x, vocab);  // the first in candidate order
    sort_and_weigh(x, m, idx, probs, n);
    return n;
  }

  const uint32_t k =
      (p.top_k <= 0 || static_cast<uint32_t>(p.top_k) >= vocab) ? vocab
                                                                  : static_cast<uint32_t>(p.top_k);
  if (k < vocab) {
    select_top_k(x, vocab, k, idx);
    for (uint32_t j = 0; j < k; ++j) {  // weights are non-increasing: w > 0 is a prefix
      const float w = weight(x[idx[j]], m);
      if (!(w > 0.0f)) break;
      probs[n++] = w;
    }
  } else {
    for (uint32_t i = 0; i < vocab; ++i) {
      if (weight(x[i], m) > 0.0f) idx[n++] = static_cast<int32_t>(i);
    }
    sort_and_weigh(x, m, idx, probs, n);
  }

  if (p.typical_p > 0.0f && p.typical_p < 1.0f && m != INFINITY && n > 1) {
    double sum = 0.0;
    for (uint32_t j = 0; j < n; ++j) sum += probs[j];
    const double ln_sum = log(sum);
    double h = 0.0;  // H = Σ p (ln S - (x - m))
    for (uint32_t j = 0; j < n; ++j) {
      h += probs[j] / sum * (ln_sum - (static_cast<double>(x[idx[j]]) - m));
    }
    std::sort(idx, idx + n, ByTypical{x, m, ln_sum - h});
    double cum = 0.0;
    uint32_t cut = n;
    for (uint32_t j = 0; j < n; ++j) {
      cum += weight(x[idx[j]], m) / sum;
      if (cum > p.typical_p) {
        cut = j + 1;
        break;
      }
    }
    n = cut;
    sort_and_weigh(x, m, idx, probs, n);
  }

  if (p.top_p < 1.0f) {
    double sum = 0.0;
    for (uint32_t j = 0; j < n; ++j) sum += probs[j];
    const uint32_t cut = top_p_cut(probs, n, p.top_p, sum);
    if (cut != 0) n = cut;
  }

  if (p.min_p > 0.0f) {
    const float threshold = p.min_p * probs[0];  // probs[0]: the largest survivor
    uint32_t j = 1;
    while (j < n && probs[j] >= threshold) ++j;
    n = j;
  }

  if (p.xtc_probability > 0.0f && rng) {
    const float u = rng->next_float();
    if (u < p.xtc_probability && n >= 2) {
      double sum = 0.0;
      for (uint32_t j = 0; j < n; ++j) sum += probs[j];
      uint32_t above = 0;  // a prefix: p is non-increasing
      while (above < n && probs[above] / sum >= static_cast<double>(p.xtc_threshold)) ++above;
      if (above >= 2) {
        const uint32_t drop = above - 1;
        memmove(idx, idx + drop, (n - drop) * sizeof *idx);
        memmove(probs, probs + drop, (n - drop) * sizeof *probs);
        n -= drop;
      }
    }
  }
  return n;
}

// Stages 5-8 without typical-p, XTC or Mirostat, on working logits with maximum m, with the
// exact shortcuts the header describes. Fills idx/probs[0, n) in candidate order with weights
// (not yet renormalised) and returns n; or, with by_id non-null and no truncation stage, sets
// *by_id, leaves each token's weight in probs[token] and returns vocab.
uint32_t candidates_plain(const float* logits, uint32_t vocab, const SamplerParams& p, float m,
                          SamplerScratch* s, bool* by_id) {
  int32_t* idx = s->idx;
  float* probs = s->probs;
  uint32_t n = 0;
  // Min-p in weight units: w_max == 1, so p < min_p * p_max is w < min_p. Its survivors are a
  // prefix of the candidate order, as are top-p's, so applying min-p first (before sorting)
  // and then top-p against the full mass gives the shorter prefix: the documented result.
  const float min_p = p.min_p;
  const bool top_p_on = p.top_p < 1.0f;
  const uint32_t k =
      (p.top_k <= 0 || static_cast<uint32_t>(p.top_k) >= vocab) ? vocab
                                                                  : static_cast<uint32_t>(p.top_k);
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

  return n;
}

// Stages 1-9. Returns the survivor count in s->idx/s->probs; 0 when nothing can be sampled
// (every logit -inf or NaN after stage 2b), with stages 1-2b undone. When `by_id` is non-null
// and no truncation stage is active (no top-k, top-p 1, min-p 0, none of typical-p / XTC /
// Mirostat), skips sorting: sets *by_id, leaves
// each token's unnormalised weight in probs[token] and returns vocab (sample() draws from that
// in id order; the distribution is the same, only the walk order differs).
uint32_t candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                    const int32_t* recent, size_t n_recent, SamplerScratch* s, bool* by_id,
                    Rng* rng, float mu) {
  if (vocab > s->vocab) vocab = s->vocab;
  if (vocab == 0) return 0;
  const uint32_t n_saved = apply_bias_and_penalties(logits, vocab, p, recent, n_recent, s);
  const uint32_t n_dry = apply_dry(logits, vocab, p, recent, n_recent, s);

  int32_t* idx = s->idx;
  float* probs = s->probs;
  if (p.temperature == 0.0f) {
    const int32_t best = argmax(logits, vocab);
    if (best < 0) {
      restore_logits(logits, s, n_saved, n_dry);
      return 0;
    }
    idx[0] = best;
    probs[0] = 1.0f;
    return 1;
  }

  // The maximum before stage 4 (NaN never wins), which also decides "nothing to sample" before
  // the logits are divided (so stages 1-2b can still be undone), and the largest finite
  // magnitude: whether logit / T can overflow.
  const float t = p.temperature;
  float hi, amax;
  max_and_finite_abs_max(logits, vocab, &hi, &amax);
  if (hi == -INFINITY) {
    restore_logits(logits, s, n_saved, n_dry);
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

  // Stage 4b, then the stages that need the plain sorted list.
  if (p.top_n_sigma > 0.0f && m != INFINITY && p.mirostat != 2) {
    apply_top_n_sigma(logits, vocab, p.top_n_sigma, m);
  }
  uint32_t n = 0;
  if (p.mirostat == 2 || (p.typical_p > 0.0f && p.typical_p < 1.0f) || p.xtc_probability > 0.0f) {
    n = candidates_extra(logits, vocab, p, m, s, rng, mu);
  } else {
    n = candidates_plain(logits, vocab, p, m, s, by_id);
    if (by_id && *by_id) return vocab;
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
  // The size before the extra samplers: the struct ended after n_logit_bias (plus padding).
  constexpr size_t kAlign = alignof(rlm_sampling);
  constexpr size_t kV1Size =
      (offsetof(rlm_sampling, n_logit_bias) + sizeof(uint32_t) + kAlign - 1) / kAlign * kAlign;
  static_assert(kV1Size < sizeof(rlm_sampling), "the extra samplers come after the V1 fields");
  RLM_CHECK(s->struct_size == sizeof(rlm_sampling) || s->struct_size == kV1Size,
            RLM_ERR_STRUCT_SIZE, err,
            "rlm_sampling.struct_size is %u, expected %u (or an older %u)", s->struct_size,
            static_cast<unsigned>(sizeof(rlm_sampling)), static_cast<unsigned>(kV1Size));
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

  // The extra samplers: the caller's values, or the neutral defaults for an older struct.
  SamplerParams x{};
  x.dry_base = 1.75f;
  x.dry_allowed_length = 2;
  int32_t dry_last_n = -1;
  x.xtc_threshold = 0.1f;
  x.typical_p = 1.0f;
  x.mirostat_tau = 5.0f;
  x.mirostat_eta = 0.1f;
  const char* const* breakers = nullptr;
  uint32_t n_breakers = 0;
  if (s->struct_size == sizeof(rlm_sampling)) {
    x.dry_multiplier = s->dry_multiplier;
    x.dry_base = s->dry_base;
    x.dry_allowed_length = s->dry_allowed_length;
    dry_last_n = s->dry_penalty_last_n;
    breakers = s->dry_sequence_breakers;
    n_breakers = s->n_dry_sequence_breakers;
    x.xtc_probability = s->xtc_probability;
    x.xtc_threshold = s->xtc_threshold;
    x.typical_p = s->typical_p;
    x.top_n_sigma = s->top_n_sigma;
    x.mirostat = s->mirostat;
    x.mirostat_tau = s->mirostat_tau;
    x.mirostat_eta = s->mirostat_eta;
  }
  RLM_CHECK(x.dry_multiplier >= 0.0f && isfinite(x.dry_multiplier), RLM_ERR_INVALID_ARGUMENT, err,
            "dry_multiplier %g must be finite and >= 0 (0 = off)",
            static_cast<double>(x.dry_multiplier));
  // Every field below is valid at zero (a zeroed tail is neutral); dry_base matters only when
  // DRY is on.
  RLM_CHECK(x.dry_multiplier == 0.0f || (x.dry_base >= 1.0f && isfinite(x.dry_base)),
            RLM_ERR_INVALID_ARGUMENT, err, "dry_base %g must be finite and >= 1",
            static_cast<double>(x.dry_base));
  RLM_CHECK(x.dry_allowed_length >= 0, RLM_ERR_INVALID_ARGUMENT, err,
            "dry_allowed_length %d must be >= 0", x.dry_allowed_length);
  RLM_CHECK(
      dry_last_n >= -1 && (dry_last_n < 0 || static_cast<uint32_t>(dry_last_n) <= penalty_window),
      RLM_ERR_INVALID_ARGUMENT, err,
      "dry_penalty_last_n %d must be -1 (the whole window) or in [0, %u] (the session's "
      "penalty_window)",
      dry_last_n, penalty_window);
  x.dry_penalty_last_n = dry_last_n < 0 ? static_cast<int32_t>(penalty_window) : dry_last_n;
  RLM_CHECK(n_breakers <= kMaxDryBreakers, RLM_ERR_INVALID_ARGUMENT, err,
            "%u DRY sequence breakers, at most %u", n_breakers, kMaxDryBreakers);
  RLM_CHECK(n_breakers == 0 || breakers != nullptr, RLM_ERR_INVALID_ARGUMENT, err,
            "dry_sequence_breakers is NULL with n_dry_sequence_breakers %u", n_breakers);
  uint32_t bytes = 0;
  for (uint32_t i = 0; i < n_breakers; ++i) {
    RLM_CHECK(breakers[i] != nullptr, RLM_ERR_INVALID_ARGUMENT, err,
              "dry_sequence_breakers[%u] is NULL", i);
    const size_t len = strnlen(breakers[i], kDryBreakerBytes + 1);
    RLM_CHECK(len > 0, RLM_ERR_INVALID_ARGUMENT, err, "dry_sequence_breakers[%u] is empty", i);
    RLM_CHECK(bytes + len <= kDryBreakerBytes, RLM_ERR_INVALID_ARGUMENT, err,
              "DRY sequence breakers hold more than %u bytes in all", kDryBreakerBytes);
    memcpy(x.dry_breaker_text + bytes, breakers[i], len);
    x.dry_breaker_len[i] = static_cast<uint8_t>(len);
    bytes += static_cast<uint32_t>(len);
  }
  x.n_dry_breakers = n_breakers;
  RLM_CHECK(x.xtc_probability >= 0.0f && x.xtc_probability <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
            "xtc_probability %g must be in [0, 1] (0 = off)",
            static_cast<double>(x.xtc_probability));
  RLM_CHECK(x.xtc_threshold >= 0.0f && x.xtc_threshold <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
            "xtc_threshold %g must be in [0, 1]", static_cast<double>(x.xtc_threshold));
  RLM_CHECK(x.typical_p >= 0.0f && x.typical_p <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
            "typical_p %g must be in [0, 1] (0 and 1 = off)", static_cast<double>(x.typical_p));
  RLM_CHECK(x.top_n_sigma >= 0.0f && isfinite(x.top_n_sigma), RLM_ERR_INVALID_ARGUMENT, err,
            "top_n_sigma %g must be finite and >= 0 (0 = off)", static_cast<double>(x.top_n_sigma));
  RLM_CHECK(x.mirostat != 1, RLM_ERR_INVALID_ARGUMENT, err,
            "mirostat 1 (Mirostat v1) is not supported: use 2 (Mirostat v2) or 0 (off)");
  RLM_CHECK(x.mirostat == 0 || x.mirostat == 2, RLM_ERR_INVALID_ARGUMENT, err,
            "mirostat %d must be 0 (off) or 2 (Mirostat v2)", x.mirostat);
  RLM_CHECK(x.mirostat_tau >= 0.0f && isfinite(x.mirostat_tau), RLM_ERR_INVALID_ARGUMENT, err,
            "mirostat_tau %g must be finite and >= 0", static_cast<double>(x.mirostat_tau));
  RLM_CHECK(x.mirostat_eta >= 0.0f && isfinite(x.mirostat_eta), RLM_ERR_INVALID_ARGUMENT, err,
            "mirostat_eta %g must be finite and >= 0", static_cast<double>(x.mirostat_eta));

  *out = x;
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
  s->dry = a.alloc<rlm_logit_bias>(penalty_window, alignof(rlm_logit_bias));
  s->breaker_bits = penalty_window > 0 ? a.alloc<uint32_t>((static_cast<size_t>(vocab) + 31) / 32,
                                                           alignof(uint32_t))
                                       : nullptr;
}

namespace {

bool contains(const char* hay, size_t n, const char* needle, size_t len) {
  for (size_t i = 0; i + len <= n; ++i) {
    if (memcmp(hay + i, needle, len) == 0) return true;
  }
  return false;
}

}  // namespace

bool sampler_extra_params_valid(const SamplerParams& p, uint32_t penalty_window) {
  if (!(p.dry_multiplier >= 0.0f && isfinite(p.dry_multiplier))) return false;
  if (p.dry_multiplier != 0.0f && !(p.dry_base >= 1.0f && isfinite(p.dry_base))) return false;
  if (p.dry_allowed_length < 0 || p.dry_penalty_last_n < 0 ||
      static_cast<uint32_t>(p.dry_penalty_last_n) > penalty_window) {
    return false;
  }
  if (p.n_dry_breakers > kMaxDryBreakers) return false;
  uint32_t bytes = 0;
  for (uint32_t i = 0; i < p.n_dry_breakers; ++i) {
    if (p.dry_breaker_len[i] == 0) return false;
    bytes += p.dry_breaker_len[i];
  }
  return bytes <= kDryBreakerBytes && p.xtc_probability >= 0.0f && p.xtc_probability <= 1.0f &&
         p.xtc_threshold >= 0.0f && p.xtc_threshold <= 1.0f && p.typical_p >= 0.0f &&
         p.typical_p <= 1.0f && p.top_n_sigma >= 0.0f && isfinite(p.top_n_sigma) &&
         (p.mirostat == 0 || p.mirostat == 2) && p.mirostat_tau >= 0.0f &&
         isfinite(p.mirostat_tau) && p.mirostat_eta >= 0.0f && isfinite(p.mirostat_eta);
}

void sampler_build_dry_breakers(SamplerParams* p, const fb::Tokenizer* tok, uint32_t vocab,
                                char* piece, size_t piece_cap, SamplerScratch* s) {
  p->dry_breaker_bits = nullptr;
  if (!(p->dry_multiplier > 0.0f) || p->dry_penalty_last_n <= 0 || p->n_dry_breakers == 0 ||
      s->breaker_bits == nullptr) {
    return;
  }
  if (vocab > s->vocab) vocab = s->vocab;
  uint32_t* bits = s->breaker_bits;
  memset(bits, 0, (static_cast<size_t>(s->vocab) + 31) / 32 * sizeof *bits);
  for (uint32_t t = 0; t < vocab; ++t) {
    // prev -2: neither "no previous token" nor BOS, so the piece reads as in mid-text.
    size_t n = token_text(tok, -2, static_cast<int32_t>(t), piece, piece_cap);
    if (n > piece_cap) n = piece_cap;  // a smaller buffer than the contract: what fits
    const char* b = p->dry_breaker_text;
    for (uint32_t i = 0; i < p->n_dry_breakers; b += p->dry_breaker_len[i++]) {
      if (contains(piece, n, b, p->dry_breaker_len[i])) {
        bits[t >> 5] |= 1u << (t & 31);
        break;
      }
    }
  }
  p->dry_breaker_bits = bits;
}

uint32_t sampler_candidates(float* logits, uint32_t vocab, const SamplerParams& p,
                            const int32_t* recent, size_t n_recent, SamplerScratch* s, Rng* rng,
                            const float* mirostat_mu) {
  const float mu = mirostat_mu ? *mirostat_mu : 2.0f * p.mirostat_tau;
  return candidates(logits, vocab, p, recent, n_recent, s, nullptr, rng, mu);
}

int32_t sample(float* logits, uint32_t vocab, const SamplerParams& p, const int32_t* recent,
               size_t n_recent, Rng* rng, SamplerScratch* s, double* p_drawn, float* mirostat_mu) {
  bool by_id = false;
  const float mu = mirostat_mu ? *mirostat_mu : 2.0f * p.mirostat_tau;
  const uint32_t n = candidates(logits, vocab, p, recent, n_recent, s, &by_id, rng, mu);
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
  const double drawn = static_cast<double>(probs[last]) / total;
  if (p_drawn) *p_drawn = drawn;
  if (p.mirostat == 2 && mirostat_mu) {
    *mirostat_mu = static_cast<float>(static_cast<double>(*mirostat_mu) -
                                      static_cast<double>(p.mirostat_eta) *
                                          (-log2(drawn) - static_cast<double>(p.mirostat_tau)));
  }
  return by_id ? static_cast<int32_t>(last) : s->idx[last];
}

}  // namespace ringlm::internal
