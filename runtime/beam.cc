#include "beam.h"

#include <math.h>
#include <string.h>

#include "tokenizer.h"

namespace ringlm::internal {

void beam_layout(Arena& a, const Hparams& hp, rlm_kv_dtype kv_dtype, uint32_t max_beams,
                 uint32_t max_len, uint32_t stop_bytes, BeamSearch* b) {
  b->max_beams = max_beams;
  b->max_len = max_len;
  b->n_live = b->n_fin = b->len = 0;
  beam_kv_layout(a, hp, kv_dtype, max_beams, max_len, &b->kv);
  if (max_beams == 0) return;
  const uint32_t nb = max_beams;
  b->tokens = a.alloc<int32_t>(static_cast<size_t>(nb) * max_len);
  b->sum = a.alloc<double>(nb);
  b->text = a.alloc<TextStream>(nb);
  for (uint32_t i = 0; i < nb; ++i) {
    TextStream tmp;
    text_stream_layout(a, stop_bytes, hp.max_token_text, b->text ? &b->text[i] : &tmp);
  }
  b->live = a.alloc<uint32_t>(nb);
  b->next_slot = a.alloc<uint32_t>(nb);
  b->next_parent = a.alloc<uint32_t>(nb);
  b->next_token = a.alloc<int32_t>(nb);
  b->next_sum = a.alloc<double>(nb);
  b->slot_taken = a.alloc<uint8_t>(nb);
  b->cand = a.alloc<BeamCandidate>(static_cast<size_t>(nb) * 2 * nb);
  b->top = a.alloc<rlm_token_logprob>(2 * nb);
  text_stream_layout(a, stop_bytes, hp.max_token_text, &b->probe);
  b->fin_tokens = a.alloc<int32_t>(static_cast<size_t>(nb) * max_len);
  b->fin_len = a.alloc<uint32_t>(nb);
  b->fin_sum = a.alloc<double>(nb);
  b->fin_score = a.alloc<double>(nb);
  b->fin_stop = a.alloc<rlm_stop_reason>(nb);
}

double beam_score(double sum, uint32_t len, float alpha) {
  if (alpha == 0.0f || len == 0) return sum;
  return sum / pow(static_cast<double>(len), static_cast<double>(alpha));
}

double beam_bound(double sum, uint32_t len, uint32_t max_len, float alpha) {
  const uint32_t m = alpha > 0.0f ? max_len : len + 1;
  return beam_score(sum, m, alpha);
}

uint32_t beam_worst(const BeamSearch& b) {
  uint32_t w = 0;
  for (uint32_t i = 1; i < b.n_fin; ++i) {
    if (b.fin_score[i] < b.fin_score[w]) w = i;
  }
  return w;
}

bool beam_finish(BeamSearch* b, uint32_t width, const int32_t* tokens, uint32_t n, double sum,
                 float alpha, rlm_stop_reason stop) {
  const double score = beam_score(sum, n, alpha);
  uint32_t at = b->n_fin;
  if (b->n_fin == width) {
    at = beam_worst(*b);
    if (!(score > b->fin_score[at])) return false;  // ties keep the earlier (better-ranked) one
  } else {
    ++b->n_fin;
  }
  memcpy(b->fin_tokens + static_cast<size_t>(at) * b->max_len, tokens, n * sizeof(int32_t));
  b->fin_len[at] = n;
  b->fin_sum[at] = sum;
  b->fin_score[at] = score;
  b->fin_stop[at] = stop;
  return true;
}

namespace {

bool before(const BeamCandidate& x, const BeamCandidate& y) {
  if (x.total != y.total) return x.total > y.total;
  if (x.parent != y.parent) return x.parent < y.parent;
  return x.token < y.token;
}

}  // namespace

void beam_sort(BeamCandidate* cand, uint32_t n) {
  for (uint32_t i = 1; i < n; ++i) {
    const BeamCandidate c = cand[i];
    uint32_t j = i;
    while (j > 0 && before(c, cand[j - 1])) {
      cand[j] = cand[j - 1];
      --j;
    }
    cand[j] = c;
  }
}

void beam_assign_slots(BeamSearch* b, uint32_t n_next, const Hparams& hp) {
  memset(b->slot_taken, 0, b->max_beams);
  // First children keep their parent's slot.
  for (uint32_t j = 0; j < n_next; ++j) {
    const uint32_t slot = b->live[b->next_parent[j]];
    if (!b->slot_taken[slot]) {
      b->slot_taken[slot] = 1;
      b->next_slot[j] = slot;
    } else {
      b->next_slot[j] = UINT32_MAX;
    }
  }
  // The other children fork into free slots (copies read only kept slots: safe in any order).
  uint32_t free_slot = 0;
  for (uint32_t j = 0; j < n_next; ++j) {
    if (b->next_slot[j] != UINT32_MAX) continue;
    while (b->slot_taken[free_slot]) ++free_slot;  // n_next <= max_beams: one is free
    b->slot_taken[free_slot] = 1;
    const uint32_t from = b->live[b->next_parent[j]];
    b->next_slot[j] = free_slot;
    memcpy(b->tokens + static_cast<size_t>(free_slot) * b->max_len,
           b->tokens + static_cast<size_t>(from) * b->max_len, b->len * sizeof(int32_t));
    beam_kv_copy(b->kv, hp, from, free_slot, b->len);
    text_stream_copy(b->text[from], &b->text[free_slot]);
  }
}

}  // namespace ringlm::internal
