#include "speculation.h"

#include <math.h>
#include <string.h>

#include "session.h"

namespace ringlm::internal {
namespace {

// The oldest position whose token the global ring still holds contiguously up to n_past: 0 before
// the ring wraps, n_past - window after (the sinks, older, are not contiguous with the rest).
uint64_t oldest_held(const KvRing& kv, uint64_t n_past) {
  const KvGeom& g = kv.geom[kKvGlobal];
  return n_past > g.n_ctx ? n_past - g.window : 0;
}

int32_t token_at(const KvRing& kv, uint64_t pos) {
  return kv.tokens[kv_slot(kv.geom[kKvGlobal], pos)];
}

// Prompt lookup: the latest earlier occurrence of the sequence's last n tokens (n from ngram_max
// down to ngram_min), and the max_n tokens that followed it. The sequence is the ring's tokens [lo, p) + last.
uint32_t propose_lookup(const SessionImpl* s, int32_t last, uint32_t max_n, int32_t* out) {
  const SpecState& sp = s->spec;
  const KvRing& kv = s->tf.kv;
  const uint64_t p = s->n_past;  // position of `last`
  const uint64_t lo = oldest_held(kv, p);
  auto seq = [&](uint64_t q) { return q == p ? last : token_at(kv, q); };
  const uint64_t len = p + 1 - lo;
  for (uint32_t n = sp.ngram_max; n >= sp.ngram_min; --n) {
    if (n >= len) continue;  // need the suffix and at least one earlier occurrence's successor
    const uint64_t key = p + 1 - n;  // suffix = seq[key, p]
    // Candidate starts from the latest (ending at p - 1) down to lo.
    for (uint64_t start = p - n; ; --start) {
      uint32_t i = 0;
      while (i < n && seq(start + i) == seq(key + i)) ++i;
      if (i == n) {
        // What followed; a match that overlaps the suffix (a repeating pattern) continues into
        // the tokens proposed so far, as a copy with overlap does.
        uint32_t m = 0;
        for (uint64_t q = start + n; m < max_n; ++q, ++m) {
          out[m] = q <= p ? seq(q) : out[q - p - 1];
        }
        return m;
      }
      if (start == lo) break;
    }
  }
  return 0;
}

// Runs tokens [from, to) of the target's ring followed by `last` through the draft session at
// draft positions continuing its own, with logits of the final token. Chunks of the draft's
// n_batch, staged through its batch buffer.
void draft_feed(SessionImpl* d, const KvRing& tkv, uint64_t from, uint64_t to, int32_t last,
                uint64_t* passes) {
  const uint32_t chunk_cap =
      d->cfg.n_batch < d->cfg.max_pending + 1 ? d->cfg.n_batch : d->cfg.max_pending + 1;
  uint64_t q = from;
  const uint64_t end = to + 1;  // `last` is the token at `to`
  while (q < end) {
    uint32_t n = 0;
    while (q < end && n < chunk_cap) {
      d->batch[n++] = q == to ? last : token_at(tkv, q);
      ++q;
    }
    forward(&d->tf, d->batch, n, d->n_past);
    d->n_past += n;
    ++*passes;
  }
}

// Greedy token of a draft row and its probability (NaN logits never win).
int32_t top_token(const float* logits, uint32_t vocab, float* prob) {
  int32_t best = -1;
  float mx = -INFINITY;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (logits[i] > mx) {
      mx = logits[i];
      best = static_cast<int32_t>(i);
    }
  }
  if (best < 0) {
    *prob = 0.0f;
    return -1;
  }
  double sum = 0.0;
  for (uint32_t i = 0; i < vocab; ++i) {
    if (logits[i] > -INFINITY) sum += exp(static_cast<double>(logits[i] - mx));  // NaN: false
  }
  *prob = static_cast<float>(1.0 / sum);
  return best;
}

// The draft's tentative positions of the last proposal: those whose tokens the target now holds
// at the same places (the drafts it accepted) become the draft's own; the rest get their ring
// slots back.
void draft_settle(SpecState* sp, uint64_t target_past, const KvRing& tkv) {
  SessionImpl* d = sp->draft;
  if (sp->draft_tent == 0) return;
  uint32_t keep = 0;
  if (sp->draft_held > 0 && !d->spec.active) {
    const uint64_t lo = oldest_held(tkv, target_past);
    while (keep < sp->draft_tent && sp->draft_held + keep < target_past &&
           sp->draft_held + keep >= lo &&
           token_at(tkv, sp->draft_held + keep) == token_at(d->tf.kv, d->n_past + keep)) {
      ++keep;
    }
  }
  kv_undo_restore(&d->tf.kv, d->n_past + keep);
  d->n_past += keep;
  sp->draft_held += keep;
  sp->draft_tent = 0;
}

// Draft model: bring the draft's cache to the target's positions [.., p) plus `last`, then draft
// greedily while its top probability is at least p_min. Draft tokens are run at tentative draft
// positions (saved in its undo area); the next proposal keeps the accepted ones (draft_settle).
uint32_t propose_draft(SessionImpl* s, int32_t last, uint32_t max_n, int32_t* out) {
  SpecState& sp = s->spec;
  SessionImpl* d = sp.draft;
  const KvRing& tkv = s->tf.kv;
  const uint64_t p = s->n_past;
  const uint64_t lo = oldest_held(tkv, p);
  draft_settle(&sp, p, tkv);
  // The draft must hold [from, held) exactly and nothing after it; otherwise start over from the
  // oldest position the target still holds (the draft only proposes: a shorter context costs
  // acceptance, never correctness).
  const bool consistent = sp.draft_held > 0 && sp.draft_held <= p && sp.draft_held >= lo &&
                          !d->spec.active &&
                          d->n_past == sp.draft_held - sp.draft_from;
  if (!consistent) {
    session_reset(d);
    sp.draft_from = lo;
    sp.draft_held = lo;
  }
  draft_feed(d, tkv, sp.draft_held, p, last, &sp.stats.draft_passes);
  sp.draft_held = p + 1;
  d->has_last = false;
  d->n_pending = 0;
  d->prev_token = last;

  const uint32_t vocab = d->model->hp.vocab_size;
  const uint64_t dpos = d->n_past;  // draft position of the first draft token
  if (max_n > 1) kv_undo_save(&d->tf.kv, dpos, max_n - 1);
  uint32_t n = 0, ran = 0;
  while (n < max_n) {
    float prob = 0.0f;
    const int32_t t = top_token(d->tf.logits, vocab, &prob);
    if (t < 0 || prob < sp.p_min) break;
    out[n++] = t;
    if (n == max_n) break;
    forward(&d->tf, &out[n - 1], 1, dpos + n - 1);
    ++ran;
    ++sp.stats.draft_passes;
  }
  sp.draft_tent = ran;
  if (ran == 0) kv_undo_restore(&d->tf.kv, dpos);  // nothing tentative: empty the area
  d->logits_ready = false;
  d->logits_valid = false;
  return n;
}

Status check_vocabulary(const SessionImpl* s, const SessionImpl* d, ErrorSink* err) {
  const uint32_t vt = s->model->hp.vocab_size, vd = d->model->hp.vocab_size;
  RLM_CHECK(vt == vd, RLM_ERR_INVALID_ARGUMENT, err,
            "draft model vocabulary differs: %u tokens, the target has %u", vd, vt);
  const auto* pt = s->tok->pieces();
  const auto* pd = d->tok->pieces();
  for (uint32_t i = 0; i < vt; ++i) {
    const auto* a = pt->Get(i);
    const auto* b = pd->Get(i);
    RLM_CHECK(a->size() == b->size() && memcmp(a->data(), b->data(), a->size()) == 0,
              RLM_ERR_INVALID_ARGUMENT, err,
              "draft model vocabulary differs at token %u: piece of %u bytes, the target's of %u "
              "bytes%s",
              i, b->size(), a->size(), a->size() == b->size() ? " (other bytes)" : "");
  }
  return RLM_OK;
}

}  // namespace

void spec_layout(Arena& a, uint32_t max_draft, SpecState* sp) {
  sp->tokens = max_draft > 0 ? a.alloc<int32_t>(max_draft + 1) : nullptr;
}

Status spec_set(SessionImpl* s, const rlm_speculation* spec, ErrorSink* err) {
  SpecState& sp = s->spec;
  rlm_speculation v;
  rlm_speculation_default(&v);
  if (spec) {
    RLM_CHECK(spec->struct_size == sizeof(rlm_speculation), RLM_ERR_STRUCT_SIZE, err,
              "rlm_speculation.struct_size %u, expected %zu", spec->struct_size,
              sizeof(rlm_speculation));
    v = *spec;
  }
  static_assert(sizeof(rlm_spec_mode) == sizeof(int), "C enum is int-sized");
  int mode;
  memcpy(&mode, &v.mode, sizeof mode);  // any int a C caller stored; validated before the cast
  RLM_CHECK(mode == RLM_SPEC_OFF || mode == RLM_SPEC_DRAFT_MODEL || mode == RLM_SPEC_LOOKUP,
            RLM_ERR_INVALID_ARGUMENT, err, "unknown speculation mode %d", mode);
  if (mode != RLM_SPEC_OFF) {
    RLM_CHECK(s->cfg.max_draft > 0, RLM_ERR_UNSUPPORTED, err,
              "speculation needs a session configured with max_draft > 0");
    const uint32_t n_max = v.n_max ? v.n_max : s->cfg.max_draft;
    RLM_CHECK(n_max <= s->cfg.max_draft, RLM_ERR_INVALID_ARGUMENT, err,
              "n_max %u above the session's max_draft %u", n_max, s->cfg.max_draft);
    v.n_max = n_max;
    if (mode == RLM_SPEC_LOOKUP) {
      RLM_CHECK(v.ngram_min >= 1 && v.ngram_min <= v.ngram_max && v.ngram_max <= kMaxLookupNgram,
                RLM_ERR_INVALID_ARGUMENT, err, "lookup n-gram %u:%u out of 1 <= min <= max <= %u",
                v.ngram_min, v.ngram_max, kMaxLookupNgram);
    } else {
      RLM_CHECK(v.p_min >= 0.0f && v.p_min <= 1.0f, RLM_ERR_INVALID_ARGUMENT, err,
                "p_min out of [0, 1]");
      SessionImpl* d = reinterpret_cast<SessionImpl*>(v.draft);
      RLM_CHECK(d != nullptr && session_is_live(d), RLM_ERR_INVALID_ARGUMENT, err,
                "draft model mode needs a live draft session");
      RLM_CHECK(d != s, RLM_ERR_INVALID_ARGUMENT, err,
                "the draft session must be another session than the target");
      RLM_CHECK(d->cfg.max_draft + 1 >= n_max, RLM_ERR_INVALID_ARGUMENT, err,
                "the draft session's max_draft %u is below n_max - 1 = %u (it runs its drafts "
                "tentatively in its own undo area)",
                d->cfg.max_draft, n_max - 1);
      RLM_CHECK(d->spec.mode == RLM_SPEC_OFF, RLM_ERR_INVALID_ARGUMENT, err,
                "the draft session speculates itself");
      RLM_RETURN_IF_ERROR(check_vocabulary(s, d, err));
    }
  }
  // The old draft session gets its tentative positions' slots back before it is let go.
  if (sp.draft && sp.draft_tent > 0 && session_is_live(sp.draft)) {
    kv_undo_restore(&sp.draft->tf.kv, sp.draft->n_past);
  }
  sp.draft_tent = 0;
  sp.mode = static_cast<rlm_spec_mode>(mode);
  sp.n_max = v.n_max;
  sp.n_cur = v.n_max;
  sp.p_min = v.p_min;
  sp.draft = mode == RLM_SPEC_DRAFT_MODEL ? reinterpret_cast<SessionImpl*>(v.draft) : nullptr;
  sp.ngram_min = v.ngram_min;
  sp.ngram_max = v.ngram_max;
  sp.draft_from = sp.draft_held = 0;
  rlm_spec_stats_default(&sp.stats);
  return RLM_OK;
}

Status spec_propose(SessionImpl* s, int32_t last, uint32_t max_n, int32_t* out, uint32_t* n_out,
                    ErrorSink* err) {
  const SpecState& sp = s->spec;
  if (sp.mode == RLM_SPEC_LOOKUP) {
    *n_out = propose_lookup(s, last, max_n, out);
    return RLM_OK;
  }
  RLM_CHECK(session_is_live(sp.draft), RLM_ERR_BAD_STATE, err,
            "the draft session was released; set speculation again");
  *n_out = propose_draft(s, last, max_n, out);
  return RLM_OK;
}

void spec_forget_from(SpecState* sp, uint64_t pos) {
  if (sp->draft_held > pos) sp->draft_held = 0;
}

}  // namespace ringlm::internal
