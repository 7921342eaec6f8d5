#include "bench_grammar.h"

#include <math.h>
#include <time.h>

#include <algorithm>

#include "arena.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"
#include "model.h"

namespace {

using namespace ringlm::internal;

double now_us() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) * 1e6 + static_cast<double>(ts.tv_nsec) * 1e-3;
}

}  // namespace

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t k = static_cast<size_t>(ceil(q * static_cast<double>(v.size())));
  if (k > 0) --k;
  return v[std::min(k, v.size() - 1)];
}

bool replay_mask_times(const rlm_model* model, const rlm_grammar* grammar, uint32_t state_bytes,
                       uint32_t cache_bytes,
                       const std::vector<std::vector<int32_t>>& turns, uint32_t rounds,
                       MaskTimes* out, std::string* err) {
  const ModelImpl& m = *model_impl(model);
  const GrammarImpl& gi = *reinterpret_cast<const GrammarImpl*>(grammar);
  // The parse state and the mask stage's scratch, laid out as a session lays them out.
  const uint32_t vocab = m.hp.vocab_size;
  Arena measure(nullptr, 0);
  Matcher probe;
  MaskScratch probe_ms;
  matcher_layout(measure, gi.g, state_bytes, &probe);
  mask_scratch_layout(measure, vocab, m.hp.max_token_text, state_bytes, cache_bytes, &probe_ms);
  std::vector<uint8_t> mem(measure.used() + kArenaAlignment);
  void* base = mem.data() + (kArenaAlignment - reinterpret_cast<uintptr_t>(mem.data()) % kArenaAlignment) %
                                kArenaAlignment;
  Arena a(base, measure.used());
  Matcher state;
  MaskScratch ms;
  matcher_layout(a, gi.g, state_bytes, &state);
  mask_scratch_layout(a, vocab, m.hp.max_token_text, state_bytes, cache_bytes, &ms);
  ms.trial.g = gi.g;
  std::vector<float> logits(m.hp.vocab_size);
  auto is_end = [&m](int32_t id) { return model_is_end_token(m, id); };
  char msg[256] = "";
  ErrorSink sink{msg, sizeof msg};
  size_t n_tokens = 0;
  for (const auto& t : turns) n_tokens += t.size();
  out->us.assign(n_tokens, INFINITY);
  out->allowed = 0;
  for (uint32_t round = 0; round < std::max(rounds, 1u); ++round) {
    size_t k = 0;
    mask_cache_clear(&ms.cache, nullptr);
    for (const auto& turn : turns) {
      if (matcher_reset(&state, &sink) != RLM_OK) {
        *err = msg;
        return false;
      }
      for (int32_t token : turn) {
        std::fill(logits.begin(), logits.end(), 0.0f);
        const double t0 = now_us();
        Status st = grammar_mask(gi, state, &ms, logits.data(), is_end, &sink);
        bool accepted = false;
        if (st == RLM_OK && !model_is_end_token(m, token)) {
          st = grammar_accept_token(gi, &state, token, &accepted, &sink);
        } else {
          accepted = true;
        }
        const double dt = now_us() - t0;
        if (st != RLM_OK) {
          *err = msg;
          return false;
        }
        if (!accepted || logits[static_cast<size_t>(token)] == -INFINITY) {
          *err = "token " + std::to_string(token) + " of the run is not one the grammar allows";
          return false;
        }
        if (round == 0) {
          for (float x : logits) out->allowed += x != -INFINITY;
          out->hits = ms.cache.hits;
          out->misses = ms.cache.misses;
          out->derived = ms.derived;
          out->relaxed_walks = ms.derived - ms.derived_kept;
        }
        out->us[k] = std::min(out->us[k], dt);
        ++k;
      }
    }
  }
  return true;
}
