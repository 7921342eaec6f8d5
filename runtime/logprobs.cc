#include "logprobs.h"

#include <math.h>

namespace ringlm::internal {

double log_sum_exp(const float* logits, uint32_t n) {
  float m = -INFINITY;
  for (uint32_t i = 0; i < n; ++i) {
    if (logits[i] > m) m = logits[i];  // NaN compares false: skipped
  }
  if (m == -INFINITY || m == INFINITY) return m;
  double sum = 0.0;
  for (uint32_t i = 0; i < n; ++i) {
    const float v = logits[i];
    if (v > -INFINITY) sum += static_cast<double>(expf(v - m));  // NaN and −inf add nothing
  }
  return static_cast<double>(m) + log(sum);
}

float token_logprob(const float* logits, int32_t token, double lse) {
  if (!isfinite(lse)) return NAN;
  return static_cast<float>(static_cast<double>(logits[token]) - lse);
}

namespace {

// (logit a, id ia) ranks before (logit b, id ib): larger logit, then lower id; NaN last.
inline bool ranks_before(float a, int32_t ia, float b, int32_t ib) {
  if (a != a) return false;
  if (b != b) return true;
  return a > b || (a == b && ia < ib);
}

}  // namespace

uint32_t top_logprobs(const float* logits, uint32_t n, double lse, uint32_t n_top,
                      rlm_token_logprob* out) {
  const uint32_t k = n_top < n ? n_top : n;
  if (k == 0) return 0;
  // out[0, filled) holds the best so far in rank order; the raw logit of entry j is
  // logits[out[j].token], so no second array is needed.
  uint32_t filled = 0;
  // Once the list is full, the worst kept logit as a local: ids only grow along the scan, so a
  // later token ranks before the worst exactly when its logit is larger (a NaN never is), and
  // the common case is one compare (a beam step scans every beam's row: 4 x 49k logits).
  float worst_v = NAN;
  for (uint32_t i = 0; i < n; ++i) {
    const float v = logits[i];
    const int32_t id = static_cast<int32_t>(i);
    if (filled == k) {
      if (worst_v == worst_v ? !(v > worst_v)
                             : !ranks_before(v, id, worst_v, out[k - 1].token)) {
        continue;
      }
      --filled;  // the worst drops out
    }
    uint32_t j = filled;
    while (j > 0 && ranks_before(v, id, logits[out[j - 1].token], out[j - 1].token)) {
      out[j] = out[j - 1];
      --j;
    }
    out[j].token = id;
    ++filled;
    if (filled == k) worst_v = logits[out[k - 1].token];
  }
  for (uint32_t j = 0; j < k; ++j) out[j].logprob = token_logprob(logits, out[j].token, lse);
  return k;
}

}  // namespace ringlm::internal
