#include "session.h"

#include <math.h>
#include <string.h>

#include "logprobs.h"
#include "platform/cpu_features.h"
#include "platform/xnnpack_backend.h"
#include "tokenizer.h"

namespace ringlm::internal {
namespace {

constexpr uint32_t kMaxBatch = 4096;
constexpr uint32_t kMaxPendingLimit = 1u << 24;
constexpr uint32_t kMaxTextBytes = 1u << 26;
constexpr uint32_t kMaxStopBytes = 1u << 20;
constexpr uint32_t kMaxStopCount = 1024;
constexpr uint32_t kMaxPenaltyWindow = 1u << 16;
constexpr uint32_t kMaxGrammarState = 1u << 28;
constexpr uint32_t kMaxGrammarCache = 1u << 30;
// Positions are uint32 in the ABI; stop short of wrapping them.
constexpr uint64_t kMaxPosition = 0xfffffff0u;

// Every buffer of a session, in one place. `s` may be a stack temporary in measure mode: only
// sizes and (null) pointers are written to it then.
void session_layout(Arena& a, const ModelImpl& m, const SessionConfig& c, SessionImpl* s) {
  // A beam step runs every beam in one pass with the logits of each.
  transformer_layout(a, m.hp, c.n_ctx, c.n_sink, c.kv_dtype,
                     c.n_batch > c.max_beams ? c.n_batch : c.max_beams, c.n_threads, c.max_draft,
                     c.max_logit_rows > c.max_beams ? c.max_logit_rows : c.max_beams,
                     &s->tf);
  matmul_backend_layout(a, m, c.xnnpack, &s->tf.mm);
  s->batch = static_cast<int32_t*>(a.alloc_2d(1, static_cast<uint64_t>(c.max_pending) + 1,
                                              sizeof(int32_t), kArenaAlignment));
  s->history = a.alloc<int32_t>(c.penalty_window > 0 ? c.penalty_window : 1);
  s->bias = a.alloc<rlm_logit_bias>(c.max_logit_bias > 0 ? c.max_logit_bias : 1);
  sampler_layout(a, m.hp.vocab_size, c.penalty_window, c.max_logit_bias, &s->ss);
  stop_strings_layout(a, c.max_stop_strings, c.stop_string_bytes, &s->stops);
  text_stream_layout(a, c.stop_string_bytes, m.hp.max_token_text, &s->stream);
  s->stop_tokens = a.alloc<int32_t>(c.max_stop_tokens > 0 ? c.max_stop_tokens : 1);
  s->piece = a.alloc<char>(m.hp.max_token_text);
  s->tok_scratch_size = tokenize_scratch_bytes(m.root->tokenizer(), c.max_text_bytes);
  s->tok_scratch = a.alloc_bytes(s->tok_scratch_size, 1, kArenaAlignment);
  spec_layout(a, c.max_draft, &s->spec);
  s->lp_raw = a.alloc<float>(m.hp.vocab_size);
  beam_layout(a, m.hp, c.kv_dtype, c.max_beams, c.max_beam_tokens, c.stop_string_bytes, &s->beam);
  if (c.grammar_state_bytes > 0) {
    matcher_layout(a, nullptr, c.grammar_state_bytes, &s->gstate);
    mask_scratch_layout(a, m.hp.vocab_size, m.hp.max_token_text, c.grammar_state_bytes,
                        c.grammar_cache_bytes, &s->gmask);
  }
}

constexpr uint32_t kNoGrammarStart = UINT32_MAX;

// The grammar state at the start of a turn's output.
void grammar_begin(SessionImpl* s) {
  s->grammar_start = kNoGrammarStart;
  if (!s->grammar) return;
  ErrorSink err{s->error, sizeof s->error};
  s->grammar_status = matcher_reset(&s->gstate, &err);
}

bool is_stop_token(const SessionImpl* s, int32_t token) {
  if (!s->ignore_eos && model_is_end_token(*s->model, token)) return true;
  for (uint32_t i = 0; i < s->n_stop_tokens; ++i) {
    if (s->stop_tokens[i] == token) return true;
  }
  return false;
}

// After grammar_begin: the parse state of the grammar's sentence as it stood at `position`, by
// accepting the tokens the ring holds at [start, position) again. The grammar state follows the
// KV position, so a rewind into a constrained output continues its sentence. A token the grammar
// does not take (an end token, input fed in between) leaves the fresh state of grammar_begin.
void grammar_replay(SessionImpl* s, uint32_t start, uint32_t position) {
  if (!s->grammar || s->grammar_status != RLM_OK || start >= position) return;
  const KvRing& kv = s->tf.kv;
  const KvGeom& g = kv.geom[kKvGlobal];
  ErrorSink err{s->error, sizeof s->error};
  for (uint32_t p = start; p < position; ++p) {
    const int32_t token = kv.tokens[kv_slot(g, p)];
    bool accepted = false;
    if (is_stop_token(s, token) ||
        grammar_accept_token(*s->grammar, &s->gstate, token, &accepted, &err) != RLM_OK ||
        !accepted) {
      grammar_begin(s);
      return;
    }
  }
  s->grammar_start = start;
}

void history_push(SessionImpl* s, int32_t token) {
  const uint32_t cap = s->cfg.penalty_window;
  if (cap == 0) return;
  if (s->n_history == cap) {
    memmove(s->history, s->history + 1, (cap - 1) * sizeof(int32_t));
    --s->n_history;
  }
  s->history[s->n_history++] = token;
}

// A new turn: the max-tokens count, the stop state and the held-back text restart.
void grammar_begin(SessionImpl* s);

void begin_turn(SessionImpl* s) {
  s->turn_ended = false;
  s->generated = 0;
  text_stream_reset(&s->stream);
  grammar_begin(s);
}

// Whether rlm_session_cancel was called since the running call began.
bool cancel_requested(const SessionImpl* s) {
  return __atomic_load_n(&s->cancel_requests, __ATOMIC_ACQUIRE) != s->cancel_base;
}

// A cancelled run_pending: the first `done` tokens of [last] + pending ran; commit them and keep
// the rest pending. The logits are not those of a committed position's run to the end: not
// readable.
void commit_partial(SessionImpl* s, uint32_t done) {
  if (done == 0) return;
  const int32_t* toks = s->has_last ? s->batch : s->batch + 1;
  s->prev_token = toks[done - 1];
  uint32_t from_pending = done;
  if (s->has_last) {
    s->has_last = false;
    --from_pending;
  }
  memmove(s->batch + 1, s->batch + 1 + from_pending,
          (s->n_pending - from_pending) * sizeof(int32_t));
  s->n_pending -= from_pending;
  s->n_past += done;
  s->logits_ready = false;
  s->logits_valid = false;
  s->logits_row = 0;
}

// Runs the batch ([last] + pending) through the model in chunks of n_batch.
Status run_pending(SessionImpl* s, uint32_t* n_run, ErrorSink* err) {
  const int32_t* toks = s->has_last ? s->batch : s->batch + 1;
  const uint32_t total = s->n_pending + (s->has_last ? 1u : 0u);
  *n_run = 0;
  if (total == 0) return RLM_OK;
  RLM_CHECK(static_cast<uint64_t>(s->n_past) + total <= kMaxPosition, RLM_ERR_CAPACITY, err,
            "position limit reached (%u tokens)", s->n_past);
  // Cancellable between layers (forward) and chunks: chunks that completed are committed, the
  // rest stays pending.
  s->tf.cancel = &s->cancel_requests;
  s->tf.cancel_base = s->cancel_base;
  for (uint32_t off = 0; off < total; off += s->cfg.n_batch) {
    const uint32_t n = total - off < s->cfg.n_batch ? total - off : s->cfg.n_batch;
    if (cancel_requested(s) ||
        !forward(&s->tf, toks + off, n, static_cast<uint64_t>(s->n_past) + off)) {
      s->tf.cancel = nullptr;
      commit_partial(s, off);
      *n_run = off;
      RLM_SET_ERROR(err, "cancelled after %u of %u tokens (they are committed; the rest is "
                         "still pending)", off, total);
      return RLM_ERR_CANCELLED;
    }
  }
  s->tf.cancel = nullptr;
  s->n_past += total;
  s->prev_token = toks[total - 1];
  s->n_pending = 0;
  s->has_last = false;
  s->logits_ready = true;
  s->logits_valid = true;
  s->logits_row = 0;
  *n_run = total;
  return RLM_OK;
}

// Ends the verification pass being consumed: draft positions from n_past on are dropped and the
// ring slots they overwrote get their positions back. The logits row stays readable.
void spec_end(SessionImpl* s) {
  if (!s->spec.active) return;
  kv_undo_restore(&s->tf.kv, s->n_past);
  s->spec.active = false;
}

// "Runs" the last sampled token of an active pass: its K/V is in the ring, its logits are the
// next row. What run_pending does for it, without the model.
bool spec_take_row(SessionImpl* s) {
  if (!s->spec.active || !s->has_last || s->n_pending > 0) return false;
  ++s->n_past;
  ++s->spec.row;
  s->logits_row = s->spec.row;
  s->prev_token = s->batch[0];
  s->has_last = false;
  s->logits_ready = true;
  s->logits_valid = true;
  return true;
}

// Starts a verification pass when a drafter is set and the step would run only the last sampled
// token: [last, d1..dn] run in one pass at n_past with the logits of every row. No drafts (the
// drafter found none, or max_tokens leaves room for one token only): nothing happens and the step
// runs plainly.
Status verify_pass(SessionImpl* s, uint32_t* n_run, ErrorSink* err) {
  SpecState& sp = s->spec;
  uint32_t k = sp.n_cur;
  if (s->max_tokens != 0) {
    const uint32_t left = s->max_tokens > s->generated ? s->max_tokens - s->generated : 0;
    if (left <= k) k = left > 0 ? left - 1 : 0;  // the pass yields up to k + 1 tokens
  }
  if (static_cast<uint64_t>(s->n_past) + k + 1 > kMaxPosition) k = 0;
  if (k == 0) return RLM_OK;
  const int32_t last = s->batch[0];
  uint32_t n = 0;
  RLM_RETURN_IF_ERROR(spec_propose(s, last, k, sp.tokens + 1, &n, err));
  if (n == 0) return RLM_OK;
  sp.tokens[0] = last;
  const uint64_t p = s->n_past;
  kv_undo_save(&s->tf.kv, p + 1, n);
  forward(&s->tf, sp.tokens, n + 1, p, n + 1);
  s->n_past = static_cast<uint32_t>(p + 1);
  s->prev_token = last;
  s->has_last = false;
  s->logits_ready = true;
  s->logits_valid = true;
  s->logits_row = 0;
  sp.active = true;
  sp.row = 0;
  sp.n = n;
  ++sp.stats.verify_passes;
  sp.stats.drafted += n;
  *n_run = n + 1;
  return RLM_OK;
}

// After the step sampled `token` from row sp.row of an active pass: when the token is the next
// draft, the pass goes on (its K/V at n_past and the logits of row + 1 are the token's); the
// session's state stays exactly the plain one (the token is the last sampled, not yet run, at
// position n_past), and spec_take_row uses the row instead of running the model. Else the pass
// ends. A token that stopped the turn ends it too (plain decoding would not have run it).
void spec_after_sample(SessionImpl* s, int32_t token, bool stopped) {
  SpecState& sp = s->spec;
  if (!stopped && sp.row < sp.n && token == sp.tokens[sp.row + 1]) {
    ++sp.stats.accepted;
    return;
  }
  const bool all = sp.row == sp.n;
  spec_end(s);
  if (stopped) return;
  // Adapt: longer after a pass that accepted every draft, shorter after a rejection.
  if (all) {
    sp.n_cur = sp.n_cur + 2 < sp.n_max ? sp.n_cur + 2 : sp.n_max;
  } else if (sp.n_cur > 1) {
    --sp.n_cur;
  }
}

}  // namespace

Status session_config_from_abi(const ModelImpl& m, const rlm_session_config* c,
                               SessionConfig* out, ErrorSink* err) {
  // Sizes this library knows: the current struct, and the first release's (ending before
  // `backend`); fields past a caller's struct_size read as their defaults.
  constexpr size_t kV1Size = offsetof(rlm_session_config, backend);
  constexpr size_t kV2Size = offsetof(rlm_session_config, max_draft);
  constexpr size_t kV3Size = offsetof(rlm_session_config, grammar_state_bytes);
  constexpr size_t kV4Size = offsetof(rlm_session_config, grammar_cache_bytes);
  constexpr size_t kV5Size = offsetof(rlm_session_config, max_logit_rows);
  constexpr size_t kV6Size = offsetof(rlm_session_config, max_beams);
  RLM_CHECK(c->struct_size == sizeof(rlm_session_config) || c->struct_size == kV1Size ||
                c->struct_size == kV2Size || c->struct_size == kV3Size ||
                c->struct_size == kV4Size || c->struct_size == kV5Size ||
                c->struct_size == kV6Size,
            RLM_ERR_STRUCT_SIZE, err,
            "rlm_session_config.struct_size %u, expected %zu (or an older %zu, %zu, %zu, %zu, "
            "%zu or %zu)",
            c->struct_size, sizeof(rlm_session_config), kV6Size, kV5Size, kV4Size, kV3Size,
            kV2Size, kV1Size);
  const char* backend = c->struct_size >= offsetof(rlm_session_config, backend) + sizeof(char*)
                            ? c->backend
                            : nullptr;
  SessionConfig k;
  k.n_ctx = c->n_ctx ? c->n_ctx : m.hp.max_context;
  k.n_sink = c->n_sink;
  // A C caller may store any int in the enum field; reading an out-of-range value as the C++
  // enum type is undefined, so read the raw integer and validate it first.
  static_assert(sizeof(rlm_kv_dtype) == sizeof(int), "C enum is int-sized");
  int kv_raw;
  memcpy(&kv_raw, &c->kv_dtype, sizeof kv_raw);
  k.n_threads = c->n_threads;
  k.n_batch = c->n_batch;
  k.max_pending = c->max_pending;
  k.max_text_bytes = c->max_text_bytes;
  k.stop_string_bytes = c->stop_string_bytes;
  k.max_stop_strings = c->max_stop_strings;
  k.max_stop_tokens = c->max_stop_tokens;
  k.penalty_window = c->penalty_window;
  k.max_logit_bias = c->max_logit_bias;
  k.max_draft = c->struct_size >= offsetof(rlm_session_config, max_draft) + sizeof(uint32_t)
                    ? c->max_draft
                    : 0;
  k.grammar_state_bytes =
      c->struct_size >= offsetof(rlm_session_config, grammar_state_bytes) + sizeof(uint32_t)
          ? c->grammar_state_bytes
          : 0;
  k.grammar_cache_bytes =
      c->struct_size >= offsetof(rlm_session_config, grammar_cache_bytes) + sizeof(uint32_t)
          ? c->grammar_cache_bytes
          : 0;
  k.max_logit_rows =
      c->struct_size >= offsetof(rlm_session_config, max_logit_rows) + sizeof(uint32_t)
          ? c->max_logit_rows
          : 0;
  RLM_CHECK(k.max_logit_rows <= kMaxBatch, RLM_ERR_INVALID_ARGUMENT, err,
            "max_logit_rows %u above %u", k.max_logit_rows, kMaxBatch);
  const bool has_beams =
      c->struct_size >= offsetof(rlm_session_config, max_beam_tokens) + sizeof(uint32_t);
  k.max_beams = has_beams ? c->max_beams : 0;
  k.max_beam_tokens = has_beams ? c->max_beam_tokens : 0;
  RLM_CHECK(k.max_beams <= kMaxBeams, RLM_ERR_INVALID_ARGUMENT, err, "max_beams %u above %u",
            k.max_beams, kMaxBeams);
  RLM_CHECK(k.max_beam_tokens <= kMaxBeamTokens, RLM_ERR_INVALID_ARGUMENT, err,
            "max_beam_tokens %u above %u", k.max_beam_tokens, kMaxBeamTokens);
  if (k.max_beams == 0) k.max_beam_tokens = 0;
  else if (k.max_beam_tokens == 0) k.max_beam_tokens = 64;
  RLM_CHECK(k.grammar_cache_bytes <= kMaxGrammarCache, RLM_ERR_INVALID_ARGUMENT, err,
            "grammar_cache_bytes %u: at most %u", k.grammar_cache_bytes, kMaxGrammarCache);
  RLM_CHECK(k.grammar_cache_bytes == 0 || k.grammar_state_bytes > 0, RLM_ERR_INVALID_ARGUMENT, err,
            "grammar_cache_bytes %u without grammar_state_bytes (grammars are off)",
            k.grammar_cache_bytes);
  RLM_CHECK(k.grammar_state_bytes == 0 ||
                (k.grammar_state_bytes >= kMatcherMinBytes && k.grammar_state_bytes <= kMaxGrammarState),
            RLM_ERR_INVALID_ARGUMENT, err, "grammar_state_bytes %u: 0 or in [%zu, %u]",
            k.grammar_state_bytes, kMatcherMinBytes, kMaxGrammarState);
  RLM_CHECK(k.n_ctx >= 2 && k.n_ctx <= kMaxContext, RLM_ERR_INVALID_ARGUMENT, err,
            "n_ctx %u out of [2, %u]", k.n_ctx, kMaxContext);
  RLM_CHECK(k.n_sink < k.n_ctx, RLM_ERR_INVALID_ARGUMENT, err, "n_sink %u must be < n_ctx %u",
            k.n_sink, k.n_ctx);
  RLM_CHECK(kv_raw == RLM_KV_F32 || kv_raw == RLM_KV_F16 || kv_raw == RLM_KV_Q8,
            RLM_ERR_INVALID_ARGUMENT, err, "unknown kv_dtype %d (f32 0, f16 1, q8 2)", kv_raw);
  k.kv_dtype = static_cast<rlm_kv_dtype>(kv_raw);
  RLM_CHECK(k.n_threads >= 1 && k.n_threads <= kMaxThreads, RLM_ERR_INVALID_ARGUMENT, err,
            "n_threads %u out of [1, %u]", k.n_threads, kMaxThreads);
  RLM_CHECK(k.n_batch >= 1 && k.n_batch <= kMaxBatch, RLM_ERR_INVALID_ARGUMENT, err,
            "n_batch %u out of [1, %u]", k.n_batch, kMaxBatch);
  RLM_CHECK(k.max_pending >= 1 && k.max_pending <= kMaxPendingLimit, RLM_ERR_INVALID_ARGUMENT,
            err, "max_pending %u out of [1, %u]", k.max_pending, kMaxPendingLimit);
  RLM_CHECK(k.max_text_bytes <= kMaxTextBytes, RLM_ERR_INVALID_ARGUMENT, err,
            "max_text_bytes %u above %u", k.max_text_bytes, kMaxTextBytes);
  RLM_CHECK(k.stop_string_bytes <= kMaxStopBytes && k.max_stop_strings <= kMaxStopCount &&
                k.max_stop_tokens <= kMaxStopCount,
            RLM_ERR_INVALID_ARGUMENT, err, "stop budgets too large");
  RLM_CHECK(k.penalty_window <= kMaxPenaltyWindow, RLM_ERR_INVALID_ARGUMENT, err,
            "penalty_window %u above %u", k.penalty_window, kMaxPenaltyWindow);
  RLM_CHECK(k.max_logit_bias <= m.hp.vocab_size, RLM_ERR_INVALID_ARGUMENT, err,
            "max_logit_bias %u above vocab size", k.max_logit_bias);
  RLM_CHECK(k.max_draft <= kMaxDraft, RLM_ERR_INVALID_ARGUMENT, err, "max_draft %u above %u",
            k.max_draft, kMaxDraft);
  // Draft positions overwrite window slots (saved in the undo area): they must be distinct from
  // each other and from the position before them.
  RLM_CHECK(k.max_draft == 0 || k.max_draft < k.n_ctx - k.n_sink, RLM_ERR_INVALID_ARGUMENT, err,
            "max_draft %u must be below the ring window n_ctx - n_sink = %u", k.max_draft,
            k.n_ctx - k.n_sink);
  RLM_CHECK(k.max_draft == 0 || !m.hp.has_local_layers || k.max_draft < m.hp.sliding_window,
            RLM_ERR_INVALID_ARGUMENT, err, "max_draft %u must be below the sliding window %u",
            k.max_draft, m.hp.sliding_window);
  k.kernels = kernels_select(cpu_features_detect(), c->kernels);
  RLM_CHECK(k.kernels != nullptr, RLM_ERR_UNSUPPORTED, err,
            "kernels '%s' are not available on this CPU / build", c->kernels ? c->kernels : "");
  k.xnnpack = backend != nullptr && strcmp(backend, "xnnpack") == 0;
  RLM_CHECK(backend == nullptr || k.xnnpack || strcmp(backend, "native") == 0,
            RLM_ERR_INVALID_ARGUMENT, err, "unknown backend '%s' (native, xnnpack)", backend);
  if (k.xnnpack) {
    const char* why = "";
    RLM_CHECK(xnnpack_ready(&why), RLM_ERR_UNSUPPORTED, err, "backend xnnpack: %s", why);
    RLM_CHECK(matmul_xnnpack_matrices(m) > 0, RLM_ERR_UNSUPPORTED, err,
              "backend xnnpack: the model has no f32 weight matrix (XNNPACK runs f32 matrices "
              "only; f16, q8 and q4 ones stay on the native kernels)");
  }
  *out = k;
  return RLM_OK;
}

size_t session_bytes(const ModelImpl& m, const SessionConfig& c) {
  Arena a(nullptr, 0);
  a.alloc<SessionImpl>(1);
  SessionImpl tmp;
  memset(static_cast<void*>(&tmp), 0, sizeof tmp);
  session_layout(a, m, c, &tmp);
  return a.overflowed() ? SIZE_MAX : a.used();
}

Status session_create(const ModelImpl& m, const SessionConfig& c, void* mem, size_t size,
                      SessionImpl** out) {
  Arena a(mem, size);
  SessionImpl* s = a.alloc<SessionImpl>(1);
  if (!s) return RLM_ERR_BUFFER_TOO_SMALL;
  memset(static_cast<void*>(s), 0, sizeof *s);
  session_layout(a, m, c, s);
  if (!a.ok()) return RLM_ERR_BUFFER_TOO_SMALL;
  s->model = &m;
  s->tok = m.root->tokenizer();
  s->cfg = c;
  s->tf.k = c.kernels;
  transformer_bind(m, &s->tf);
  rlm_sampling def;
  rlm_sampling_default(&def);
  // The default window must fit the configured one.
  if (def.penalty_last_n > static_cast<int32_t>(c.penalty_window)) {
    def.penalty_last_n = static_cast<int32_t>(c.penalty_window);
  }
  ErrorSink err{s->error, sizeof s->error};
  RLM_RETURN_IF_ERROR(sampler_params_from_abi(&def, m.hp.vocab_size, c.penalty_window,
                                              c.max_logit_bias, &s->sp, &err));
  s->rng.seed(def.seed);
  rlm_spec_stats_default(&s->spec.stats);
  session_reset(s);
  RLM_RETURN_IF_ERROR(matmul_backend_create(&s->tf.mm, &err));
  if (c.n_threads > 1 &&
      !(s->tf.pool = thread_pool_start(s->tf.pool_memory, thread_pool_bytes(c.n_threads),
                                       c.n_threads))) {
    matmul_backend_release(&s->tf.mm);
    return RLM_ERR_THREADS;
  }
  s->self = s;
  s->magic = kSessionLive;
  *out = s;
  return RLM_OK;
}

bool session_is_live(const void* mem) {
  const SessionImpl* s = static_cast<const SessionImpl*>(mem);
  return s->magic == kSessionLive && s->self == s;
}

bool session_is_released(const void* mem) {
  const SessionImpl* s = static_cast<const SessionImpl*>(mem);
  return s->magic == kSessionReleased && s->self == s;
}

void session_release(SessionImpl* s) {
  if (s->cfg.n_threads > 1) thread_pool_stop(s->tf.pool);
  matmul_backend_release(&s->tf.mm);
  s->magic = kSessionReleased;
}

void session_get_info(const SessionImpl* s, rlm_session_info* info) {
  MatmulInfo mi;
  matmul_info(s->tf.mm, &mi);
  info->kernels = s->tf.k->name;
  info->backend = s->cfg.xnnpack ? "xnnpack" : "native";
  info->matmul_f32 = mi.f32;
  info->matmul_f16 = mi.f16;
  info->matmul_q8 = mi.q8;
  info->matmul_q4 = mi.q4;
  info->xnnpack_operators = mi.xnnpack_operators;
  info->xnnpack_reserved = mi.xnnpack_reserved;
  info->xnnpack_used = mi.xnnpack_used;
}

void session_reset(SessionImpl* s) {
  spec_end(s);
  spec_forget_from(&s->spec, 0);
  s->n_past = 0;
  s->logits_row = 0;
  s->n_pending = 0;
  s->has_last = false;
  s->logits_ready = false;
  s->logits_valid = false;
  s->prev_token = -1;
  s->n_history = 0;
  s->mirostat_mu = 2.0f * s->sp.mirostat_tau;
  begin_turn(s);
}

Status session_feed_tokens(SessionImpl* s, const int32_t* tokens, size_t n, bool add_bos) {
  ErrorSink err{s->error, sizeof s->error};
  const int32_t vocab = static_cast<int32_t>(s->model->hp.vocab_size);
  for (size_t i = 0; i < n; ++i) {
    RLM_CHECK(tokens[i] >= 0 && tokens[i] < vocab, RLM_ERR_TOKEN_OUT_OF_RANGE, &err,
              "token %d at index %zu out of [0, %d)", tokens[i], i, vocab);
  }
  const int32_t bos = s->tok->bos_id();
  const bool with_bos = add_bos && bos >= 0;
  const size_t need = n + (with_bos ? 1 : 0);
  RLM_CHECK(need <= s->cfg.max_pending - s->n_pending, RLM_ERR_CAPACITY, &err,
            "%zu tokens do not fit: %u of max_pending %u already queued", need, s->n_pending,
            s->cfg.max_pending);
  spec_end(s);
  int32_t* dst = s->batch + 1 + s->n_pending;
  if (with_bos) *dst++ = bos;
  if (n) memcpy(dst, tokens, n * sizeof(int32_t));
  for (size_t i = 0; i < need; ++i) history_push(s, s->batch[1 + s->n_pending + i]);
  s->n_pending += static_cast<uint32_t>(need);
  begin_turn(s);
  return RLM_OK;
}

Status session_feed_text(SessionImpl* s, const char* text, size_t len, bool parse_special) {
  ErrorSink err{s->error, sizeof s->error};
  RLM_CHECK(len <= s->cfg.max_text_bytes, RLM_ERR_CAPACITY, &err,
            "text of %zu bytes above max_text_bytes %u", len, s->cfg.max_text_bytes);
  const bool at_start = s->n_past == 0 && !s->has_last && s->n_pending == 0;
  const bool add_bos = at_start && s->tok->add_bos() && s->tok->bos_id() >= 0;
  size_t n = 0;
  int32_t* dst = s->batch + 1 + s->n_pending;
  const uint32_t flags =
      (add_bos ? kTokenizeAddBos : 0u) | (parse_special ? kTokenizeParseSpecial : 0u);
  RLM_RETURN_IF_ERROR(tokenize_ex(s->tok, s->model->hp.vocab_size, text, len, flags, dst,
                                  s->cfg.max_pending - s->n_pending, &n, s->tok_scratch,
                                  s->tok_scratch_size, &err));
  spec_end(s);
  for (size_t i = 0; i < n; ++i) history_push(s, dst[i]);
  s->n_pending += static_cast<uint32_t>(n);
  begin_turn(s);
  return RLM_OK;
}

Status session_eval(SessionImpl* s) {
  ErrorSink err{s->error, sizeof s->error};
  s->cancel_base = __atomic_load_n(&s->cancel_requests, __ATOMIC_ACQUIRE);
  if (spec_take_row(s)) return RLM_OK;
  uint32_t n_run = 0;
  return run_pending(s, &n_run, &err);
}

namespace {

// The raw logits of the last position of a non-empty sequence, ready in row 0 (logits_ready):
// runs what is pending, or keeps the raw logits already there, or (after a step's in-place
// sampling consumed them, or a rewind) runs the last position again: its K/V slot is the newest,
// so writing it again changes nothing.
Status prepare_raw_logits(SessionImpl* s, ErrorSink* err) {
  spec_end(s);
  uint32_t n_run = 0;
  if (s->has_last || s->n_pending > 0) {
    RLM_RETURN_IF_ERROR(run_pending(s, &n_run, err));
  } else if (!s->logits_ready || s->logits_row != 0) {
    const int32_t last = s->prev_token;
    forward(&s->tf, &last, 1, static_cast<uint64_t>(s->n_past) - 1);
    s->logits_row = 0;
    s->logits_ready = true;
    s->logits_valid = true;
  }
  return RLM_OK;
}

}  // namespace

void session_cancel(SessionImpl* s) {
  __atomic_fetch_add(&s->cancel_requests, 1u, __ATOMIC_RELEASE);
}

void session_end_pass(SessionImpl* s) { spec_end(s); }

void session_forget_draft(SessionImpl* s) { spec_forget_from(&s->spec, 0); }

Status session_score(SessionImpl* s, const int32_t* tokens, size_t n, float* logprobs,
                     float* logits, double* sum) {
  ErrorSink err{s->error, sizeof s->error};
  s->cancel_base = __atomic_load_n(&s->cancel_requests, __ATOMIC_ACQUIRE);
  const uint32_t vocab = s->model->hp.vocab_size;
  for (size_t i = 0; i < n; ++i) {
    RLM_CHECK(tokens[i] >= 0 && static_cast<uint32_t>(tokens[i]) < vocab,
              RLM_ERR_TOKEN_OUT_OF_RANGE, &err, "token %d at index %zu out of [0, %u)", tokens[i],
              i, vocab);
  }
  RLM_CHECK(s->n_past > 0 || s->has_last || s->n_pending > 0, RLM_ERR_BAD_STATE, &err,
            "nothing to score against: the sequence is empty (feed BOS or a prefix first)");
  RLM_CHECK(static_cast<uint64_t>(s->n_past) + s->n_pending + (s->has_last ? 1u : 0u) + n <=
                kMaxPosition,
            RLM_ERR_CAPACITY, &err, "position limit reached (%u tokens)", s->n_past);
  if (sum) *sum = 0.0;
  if (n == 0) return RLM_OK;
  RLM_RETURN_IF_ERROR(prepare_raw_logits(s, &err));
  s->logits_ready = false;  // consumed below; the last pass's row replaces them
  double total = 0.0;
  const bool want_lp = logprobs != nullptr || sum != nullptr;
  const float* row = session_logits(s);  // predicts tokens[0]
  const uint32_t rows_max = s->tf.n_logit_rows < s->cfg.n_batch ? s->tf.n_logit_rows
                                                                  : s->cfg.n_batch;
  const size_t row_bytes = static_cast<size_t>(vocab) * sizeof(float);
  size_t done = n;
  for (size_t i = 0; i < n;) {
    if (i > 0 && cancel_requested(s)) {  // between passes: tokens[0, i) are scored and appended
      done = i;
      break;
    }
    // Score tokens[i] against `row`, then run tokens[i, i + m) to get the rows for the next m.
    // (Without logprobs or sum asked for, no log-sum-exp: the passes alone, e.g. to time them.)
    if (want_lp) {
      const float lp = token_logprob(row, tokens[i], log_sum_exp(row, vocab));
      if (logprobs) logprobs[i] = lp;
      total += static_cast<double>(lp);
    }
    if (logits) memcpy(logits + i * vocab, row, row_bytes);
    const uint32_t m = n - i < rows_max ? static_cast<uint32_t>(n - i) : rows_max;
    forward(&s->tf, tokens + i, m, s->n_past, m);
    s->n_past += m;
    for (uint32_t j = 0; j < m; ++j) history_push(s, tokens[i + j]);
    for (uint32_t j = 0; j + 1 < m; ++j) {
      const float* r = s->tf.logits + static_cast<size_t>(j) * vocab;
      if (want_lp) {
        const float lpj = token_logprob(r, tokens[i + j + 1], log_sum_exp(r, vocab));
        if (logprobs) logprobs[i + j + 1] = lpj;
        total += static_cast<double>(lpj);
      }
      if (logits) memcpy(logits + (i + j + 1) * vocab, r, row_bytes);
    }
    i += m;
    // The last row predicts what follows: keep it as the session's raw logits (row 0).
    if (m > 1) memmove(s->tf.logits, s->tf.logits + static_cast<size_t>(m - 1) * vocab, row_bytes);
    row = s->tf.logits;
  }
  s->prev_token = tokens[done - 1];
  s->logits_row = 0;
  s->logits_ready = true;
  s->logits_valid = true;
  if (sum) *sum = total;
  begin_turn(s);
  RLM_CHECK(done == n, RLM_ERR_CANCELLED, &err,
            "cancelled after scoring %zu of %zu tokens (those are appended)", done, n);
  return RLM_OK;
}

Status session_beam_search(SessionImpl* s, const rlm_beam_params* p, rlm_beam_result* results,
                           uint32_t* n_out) {
  ErrorSink err{s->error, sizeof s->error};
  s->cancel_base = __atomic_load_n(&s->cancel_requests, __ATOMIC_ACQUIRE);
  BeamSearch& b = s->beam;
  *n_out = 0;
  RLM_CHECK(s->cfg.max_beams > 0, RLM_ERR_BAD_STATE, &err,
            "the session was configured with max_beams 0 (no memory for beams)");
  const uint32_t width = p->n_beams;
  const uint32_t max_tokens = p->max_tokens ? p->max_tokens : b.max_len;
  const float alpha = p->length_penalty;
  RLM_CHECK(width >= 1 && width <= b.max_beams, RLM_ERR_INVALID_ARGUMENT, &err,
            "n_beams %u out of [1, max_beams %u]", width, b.max_beams);
  RLM_CHECK(max_tokens <= b.max_len, RLM_ERR_INVALID_ARGUMENT, &err,
            "max_tokens %u above max_beam_tokens %u", max_tokens, b.max_len);
  RLM_CHECK(p->n_best >= 1 && p->n_best <= width, RLM_ERR_INVALID_ARGUMENT, &err,
            "n_best %u out of [1, n_beams %u]", p->n_best, width);
  RLM_CHECK(isfinite(alpha), RLM_ERR_INVALID_ARGUMENT, &err, "length_penalty is not finite");
  for (uint32_t i = 0; i < p->n_best; ++i) {
    RLM_CHECK(results[i].struct_size == sizeof(rlm_beam_result), RLM_ERR_STRUCT_SIZE, &err,
              "results[%u].struct_size %u, expected %zu", i, results[i].struct_size,
              sizeof(rlm_beam_result));
    RLM_CHECK(results[i].capacity == 0 || results[i].tokens != nullptr,
              RLM_ERR_INVALID_ARGUMENT, &err, "results[%u]: capacity %u with no buffer", i,
              results[i].capacity);
  }
  RLM_CHECK(s->n_past > 0 || s->has_last || s->n_pending > 0, RLM_ERR_BAD_STATE, &err,
            "nothing to continue: the sequence is empty (feed a prompt first)");
  const uint64_t prefix = static_cast<uint64_t>(s->n_past) + s->n_pending + (s->has_last ? 1 : 0);
  const KvRing& kv = s->tf.kv;
  uint32_t slots = kv.geom[kKvGlobal].n_ctx;
  if (s->model->hp.has_local_layers && kv.geom[kKvLocal].n_ctx < slots) {
    slots = kv.geom[kKvLocal].n_ctx;
  }
  RLM_CHECK(prefix + max_tokens <= slots, RLM_ERR_CAPACITY, &err,
            "beam search needs position %llu + max_tokens %u within the ring's %u slots (no "
            "wrap)",
            static_cast<unsigned long long>(prefix), max_tokens, slots);
  RLM_RETURN_IF_ERROR(prepare_raw_logits(s, &err));

  const uint32_t vocab = s->model->hp.vocab_size;
  const uint32_t P = s->n_past;
  const bool stops = s->stops.count > 0;
  // Step 0: one live beam (slot 0, empty) whose logits are the prefix's.
  b.n_live = 1;
  b.live[0] = 0;
  b.len = 0;
  b.sum[0] = 0.0;
  b.n_fin = 0;
  text_stream_reset(&b.text[0]);
  const float* rows = session_logits(s);
  for (;;) {
    uint32_t n_cand = 0;
    for (uint32_t r = 0; r < b.n_live; ++r) {
      // The row's best tokens by logit, then their log-probabilities from the kernels'
      // softmax of a copy (vectorized: a scalar log-sum-exp of a 50k row costs a tenth of a
      // decode step per beam).
      const float* row = rows + static_cast<size_t>(r) * vocab;
      const uint32_t k = top_logprobs(row, vocab, NAN, 2 * width, b.top);
      memcpy(s->lp_raw, row, vocab * sizeof(float));
      s->tf.k->softmax(s->lp_raw, vocab);
      for (uint32_t i = 0; i < k; ++i) {
        const float lp = logf(s->lp_raw[b.top[i].token]);
        if (!isfinite(lp)) continue;
        b.cand[n_cand++] = {b.sum[b.live[r]] + lp, lp, b.top[i].token, r};
      }
    }
    beam_sort(b.cand, n_cand);
    uint32_t n_next = 0;
    for (uint32_t i = 0; i < n_cand && n_next < width; ++i) {
      const BeamCandidate& c = b.cand[i];
      const uint32_t ps = b.live[c.parent];
      int32_t* seq = b.tokens + static_cast<size_t>(ps) * b.max_len;
      rlm_stop_reason stop = RLM_STOP_NONE;
      if (is_stop_token(s, c.token)) {
        stop = RLM_STOP_END_TOKEN;
      } else if (stops) {
        const int32_t prev = b.len ? seq[b.len - 1] : s->prev_token;
        const size_t n = token_text(s->tok, prev, c.token, s->piece, s->model->hp.max_token_text);
        text_stream_copy(b.text[ps], &b.probe);
        const char* out = nullptr;
        size_t out_len = 0;
        if (text_stream_push(&b.probe, s->stops, s->piece, n, &out, &out_len)) {
          stop = RLM_STOP_STOP_STRING;
        }
      }
      if (stop != RLM_STOP_NONE) {
        // Finished: kept only when it ranks among the width best extensions. Row `len` of the
        // parent's slot is free until the next beams are placed.
        if (i < width) {
          seq[b.len] = c.token;
          beam_finish(&b, width, seq, b.len + 1, c.total, alpha, stop);
        }
        continue;
      }
      b.next_parent[n_next] = c.parent;
      b.next_token[n_next] = c.token;
      b.next_sum[n_next] = c.total;
      ++n_next;
    }
    if (n_next == 0) break;
    // Place the next beams (forks copy their parent first), then append each one's token.
    beam_assign_slots(&b, n_next, s->model->hp);
    for (uint32_t j = 0; j < n_next; ++j) {
      const uint32_t slot = b.next_slot[j];
      int32_t* seq = b.tokens + static_cast<size_t>(slot) * b.max_len;
      if (stops) {
        const int32_t prev = b.len ? seq[b.len - 1] : s->prev_token;
        const size_t n =
            token_text(s->tok, prev, b.next_token[j], s->piece, s->model->hp.max_token_text);
        const char* out = nullptr;
        size_t out_len = 0;
        text_stream_push(&b.text[slot], s->stops, s->piece, n, &out, &out_len);
      }
      seq[b.len] = b.next_token[j];
      b.sum[slot] = b.next_sum[j];
      b.live[j] = slot;
    }
    b.n_live = n_next;
    ++b.len;
    if (b.len == max_tokens) {
      for (uint32_t j = 0; j < b.n_live; ++j) {
        const uint32_t slot = b.live[j];
        beam_finish(&b, width, b.tokens + static_cast<size_t>(slot) * b.max_len, b.len,
                    b.sum[slot], alpha, RLM_STOP_MAX_TOKENS);
      }
      break;
    }
    if (b.n_fin == width) {
      // Done when the worst kept hypothesis beats the best any live beam can still reach.
      double best = -INFINITY;
      for (uint32_t j = 0; j < b.n_live; ++j) {
        const double bound = beam_bound(b.sum[b.live[j]], b.len, max_tokens, alpha);
        if (bound > best) best = bound;
      }
      if (b.fin_score[beam_worst(b)] >= best) break;
    }
    if (cancel_requested(s)) {
      s->logits_ready = s->logits_valid = false;
      RLM_SET_ERROR(&err, "beam search cancelled after %u steps (the sequence is unchanged)",
                    b.len);
      return RLM_ERR_CANCELLED;
    }
    // One pass for every live beam: its newest token at position P + len - 1, row len - 1.
    const BeamStep step{&b.kv, b.live, b.len - 1, P};
    forward(&s->tf, b.next_token, b.n_live, static_cast<uint64_t>(P) + b.len - 1, b.n_live,
            &step);
    rows = s->tf.logits;
  }
  // The sequence is as before; the logits rows now hold the beams'.
  s->logits_ready = false;
  s->logits_valid = false;
  s->logits_row = 0;

  // Best first: selection by score, then the earlier kept on ties.
  const uint32_t n = p->n_best < b.n_fin ? p->n_best : b.n_fin;
  for (uint32_t i = 0; i < n; ++i) {
    uint32_t best = i;
    for (uint32_t j = i + 1; j < b.n_fin; ++j) {
      if (b.fin_score[j] > b.fin_score[best]) best = j;
    }
    if (best != i) {
      // Swap entries i and best (tokens via the tail rows: swap element-wise).
      int32_t* ti = b.fin_tokens + static_cast<size_t>(i) * b.max_len;
      int32_t* tb = b.fin_tokens + static_cast<size_t>(best) * b.max_len;
      const uint32_t m = b.fin_len[i] > b.fin_len[best] ? b.fin_len[i] : b.fin_len[best];
      for (uint32_t t = 0; t < m; ++t) {
        const int32_t x = ti[t];
        ti[t] = tb[t];
        tb[t] = x;
      }
      const uint32_t l = b.fin_len[i];
      b.fin_len[i] = b.fin_len[best];
      b.fin_len[best] = l;
      const double su = b.fin_sum[i];
      b.fin_sum[i] = b.fin_sum[best];
      b.fin_sum[best] = su;
      const double sc = b.fin_score[i];
      b.fin_score[i] = b.fin_score[best];
      b.fin_score[best] = sc;
      const rlm_stop_reason st = b.fin_stop[i];
      b.fin_stop[i] = b.fin_stop[best];
      b.fin_stop[best] = st;
    }
    rlm_beam_result& r = results[i];
    RLM_CHECK(b.fin_len[i] <= r.capacity, RLM_ERR_INVALID_ARGUMENT, &err,
              "results[%u]: capacity %u below the sequence's %u tokens", i, r.capacity,
              b.fin_len[i]);
    memcpy(r.tokens, b.fin_tokens + static_cast<size_t>(i) * b.max_len,
           b.fin_len[i] * sizeof(int32_t));
    r.n_tokens = b.fin_len[i];
    r.logprob = b.fin_sum[i];
    r.score = b.fin_score[i];
    r.stop = b.fin_stop[i];
    *n_out = i + 1;
  }
  return RLM_OK;
}

Status session_set_logprobs(SessionImpl* s, bool enable, rlm_token_logprob* top, uint32_t n_top) {
  ErrorSink err{s->error, sizeof s->error};
  RLM_CHECK(n_top <= kMaxTopLogprobs, RLM_ERR_INVALID_ARGUMENT, &err, "n_top %u above %u", n_top,
            kMaxTopLogprobs);
  RLM_CHECK(n_top == 0 || top != nullptr, RLM_ERR_INVALID_ARGUMENT, &err,
            "n_top %u with a null array", n_top);
  s->logprobs = enable;
  s->lp_top = enable ? top : nullptr;
  s->lp_n_top = enable ? n_top : 0;
  return RLM_OK;
}

Status session_step(SessionImpl* s, rlm_step_result* r) {
  ErrorSink err{s->error, sizeof s->error};
  s->cancel_base = __atomic_load_n(&s->cancel_requests, __ATOMIC_ACQUIRE);
  RLM_CHECK(!s->turn_ended || s->n_pending > 0, RLM_ERR_BAD_STATE, &err,
            "the turn has ended (stop reason reported); feed input to continue");
  RLM_CHECK(s->logits_ready || s->has_last || s->n_pending > 0 || s->n_past > 0,
            RLM_ERR_BAD_STATE, &err, "nothing to run: feed a prompt first");
  uint32_t n_run = 0;
  if (!spec_take_row(s)) {
    if (!s->logits_ready && !s->has_last && s->n_pending == 0) {
      // After a rewind (nothing pending, no logits): the last kept position runs again for the
      // distribution of the next one, so generation continues from the rewound point.
      RLM_RETURN_IF_ERROR(prepare_raw_logits(s, &err));
      n_run = 1;
    } else {
      if (s->spec.mode != RLM_SPEC_OFF && s->has_last && s->n_pending == 0 && !s->logits_ready) {
        RLM_RETURN_IF_ERROR(verify_pass(s, &n_run, &err));
      }
      if (!s->spec.active) RLM_RETURN_IF_ERROR(run_pending(s, &n_run, &err));
    }
  }

  // Sample in place on the logits, then append. With no candidates the sampler has left the
  // logits raw: the state is that of rlm_session_eval (input run, logits ready), so a step with
  // other sampling parameters samples them without running the model again.
  // Log-probabilities are of the raw logits: keep them before the mask and the sampler's
  // in-place stages change them (one copy and one pass, only while logprobs are on).
  const uint32_t vocab = s->model->hp.vocab_size;
  double lse = NAN;
  if (s->logprobs) {
    memcpy(s->lp_raw, session_logits(s), vocab * sizeof(float));
    lse = log_sum_exp(s->lp_raw, vocab);
  }
  if (s->grammar) {
    RLM_RETURN_IF_ERROR(s->grammar_status);
    // The grammar's mask goes first: bias, penalties and samplers see only what it allows.
    RLM_RETURN_IF_ERROR(grammar_mask(*s->grammar, s->gstate, &s->gmask, session_logits(s),
                                     [s](int32_t id) { return is_stop_token(s, id); }, &err));
  }
  double p_drawn = NAN;
  const int32_t token = sample(session_logits(s), vocab, s->sp, s->history, s->n_history, &s->rng,
                               &s->ss, &p_drawn, &s->mirostat_mu);
  RLM_CHECK(token >= 0, RLM_ERR_NO_CANDIDATES, &err,
            "no token can be sampled: every logit is -inf or NaN after logit bias and penalties "
            "(all tokens banned, or the model produced NaN)");
  s->logits_ready = false;
  s->batch[0] = token;
  s->has_last = true;
  history_push(s, token);
  ++s->generated;
  if (s->grammar && s->grammar_start == kNoGrammarStart) s->grammar_start = s->n_past;

  r->token = token;
  r->position = s->n_past;
  r->n_evaluated = n_run;
  r->stop = RLM_STOP_NONE;
  r->text = nullptr;
  r->text_len = 0;
  if (r->struct_size >= sizeof(rlm_step_result)) {
    r->logprob = NAN;
    r->sampler_logprob = NAN;
    r->n_top = 0;
    if (s->logprobs) {
      r->logprob = token_logprob(s->lp_raw, token, lse);
      r->sampler_logprob = static_cast<float>(log(p_drawn));
      r->n_top = top_logprobs(s->lp_raw, vocab, lse, s->lp_n_top, s->lp_top);
    }
  }
  const int32_t prev = s->prev_token;
  s->prev_token = token;
  bool grammar_done = false;
  if (s->grammar && !is_stop_token(s, token)) {
    bool accepted = false;
    RLM_RETURN_IF_ERROR(grammar_accept_token(*s->grammar, &s->gstate, token, &accepted, &err));
    RLM_CHECK(accepted, RLM_ERR_INTERNAL, &err, "grammar: token %d passed the mask but not the parser",
              token);
    grammar_done = matcher_is_done(s->gstate);
  }
  if (is_stop_token(s, token)) {
    text_stream_finish(&s->stream, s->stops, &r->text, &r->text_len);
    r->stop = RLM_STOP_END_TOKEN;
  } else {
    const size_t n = token_text(s->tok, prev, token, s->piece, s->model->hp.max_token_text);
    if (text_stream_push(&s->stream, s->stops, s->piece, n, &r->text, &r->text_len)) {
      r->stop = RLM_STOP_STOP_STRING;
    } else if (s->max_tokens != 0 && s->generated >= s->max_tokens) {
      // finish() releases the held-back tail right after what push() just released
      // (tail == r->text + r->text_len), so the two are one contiguous span.
      const char* tail = nullptr;
      size_t tail_len = 0;
      const bool matched = text_stream_finish(&s->stream, s->stops, &tail, &tail_len);
      if (r->text_len == 0) r->text = tail;
      r->text_len += tail_len;
      r->stop = matched ? RLM_STOP_STOP_STRING : RLM_STOP_MAX_TOKENS;
    }
    if (r->stop == RLM_STOP_NONE && grammar_done) {
      // Complete, and nothing may follow: release the held-back tail as max_tokens does.
      const char* tail = nullptr;
      size_t tail_len = 0;
      const bool matched = text_stream_finish(&s->stream, s->stops, &tail, &tail_len);
      if (r->text_len == 0) r->text = tail;
      r->text_len += tail_len;
      r->stop = matched ? RLM_STOP_STOP_STRING : RLM_STOP_GRAMMAR;
    }
  }
  s->turn_ended = r->stop != RLM_STOP_NONE;
  if (s->spec.active) spec_after_sample(s, token, s->turn_ended);
  return RLM_OK;
}

Status session_rewind(SessionImpl* s, uint32_t position) {
  ErrorSink err{s->error, sizeof s->error};
  RLM_CHECK(position <= s->n_past, RLM_ERR_INVALID_ARGUMENT, &err,
            "rewind to %u beyond position %u", position, s->n_past);
  RLM_CHECK(!kv_wrapped(s->tf.kv, s->n_past) || position == s->n_past, RLM_ERR_REWIND, &err,
            "the ring has wrapped (position %u > %u slots): earlier positions are overwritten",
            s->n_past, s->tf.kv.geom[kKvGlobal].n_ctx);
  spec_end(s);
  spec_forget_from(&s->spec, position);
  const uint32_t grammar_start = s->grammar_start;
  s->n_past = position;
  s->n_pending = 0;
  s->has_last = false;
  s->logits_ready = false;
  s->logits_valid = false;  // even at the same position: they may be the sampler's working values
  // Rebuild the decode context and penalty window from the tokens the ring still holds.
  const KvRing& kv = s->tf.kv;
  const KvGeom& g = kv.geom[kKvGlobal];
  s->prev_token = position > 0 ? kv.tokens[kv_slot(g, position - 1)] : -1;
  s->n_history = 0;
  const uint32_t w = s->cfg.penalty_window;
  for (uint32_t p = position > w ? position - w : 0; p < position; ++p) {
    history_push(s, kv.tokens[kv_slot(g, p)]);
  }
  begin_turn(s);
  if (grammar_start != kNoGrammarStart && position > grammar_start) {
    grammar_replay(s, grammar_start, position);
  }
  return RLM_OK;
}

Status session_set_speculation(SessionImpl* s, const rlm_speculation* spec) {
  ErrorSink err{s->error, sizeof s->error};
  spec_end(s);
  return spec_set(s, spec, &err);
}

Status session_set_grammar(SessionImpl* s, const GrammarImpl* g) {
  ErrorSink err{s->error, sizeof s->error};
  if (g == nullptr) {
    s->grammar = nullptr;
    return RLM_OK;
  }
  RLM_CHECK(s->cfg.grammar_state_bytes > 0, RLM_ERR_BAD_STATE, &err,
            "the session was configured with grammar_state_bytes 0 (no memory for a grammar)");
  RLM_CHECK(g->model == s->model, RLM_ERR_INVALID_ARGUMENT, &err,
            "the grammar was compiled against another model's vocabulary");
  s->grammar = g;
  s->gstate.g = s->gmask.trial.g = g->g;
  // Remembered masks belong to the grammar set before, even when the new one sits at its
  // address (a buffer compiled again): forget them.
  mask_cache_clear(&s->gmask.cache, g);
  // The grammar applies to what is sampled from now on (the turn's output so far is not
  // re-parsed), and from the start of every later turn.
  grammar_begin(s);
  if (s->grammar_status != RLM_OK) {
    const Status st = s->grammar_status;
    s->grammar = nullptr;
    return st;
  }
  return RLM_OK;
}

Status session_set_sampling(SessionImpl* s, const rlm_sampling* p) {
  ErrorSink err{s->error, sizeof s->error};
  SamplerParams sp;
  RLM_RETURN_IF_ERROR(sampler_params_from_abi(p, s->model->hp.vocab_size, s->cfg.penalty_window,
                                              s->cfg.max_logit_bias, &sp, &err));
  if (sp.n_logit_bias) memcpy(s->bias, p->logit_bias, sp.n_logit_bias * sizeof(rlm_logit_bias));
  sp.logit_bias = s->bias;
  sampler_build_dry_breakers(&sp, s->tok, s->model->hp.vocab_size, s->piece,
                             s->model->hp.max_token_text, &s->ss);
  s->sp = sp;
  s->rng.seed(p->seed);
  s->mirostat_mu = 2.0f * sp.mirostat_tau;
  return RLM_OK;
}

}  // namespace ringlm::internal
