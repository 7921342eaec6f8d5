// The C ABI: argument checks and status mapping only; the logic lives in model/session.
#include <stddef.h>
#include <string.h>

#include "model.h"
#include "ringlm/ringlm.h"
#include "grammar/compiled.h"
#include "grammar/json_schema.h"
#include "session.h"
#include "snapshot.h"
#include "tokenizer.h"

using namespace ringlm::internal;

namespace {

// A session handle is usable when it is non-null and its header says live (rlm_session_init
// succeeded on that memory and rlm_session_release has not run since).
SessionImpl* as_session(rlm_session* s) {
  return s && session_is_live(s) ? reinterpret_cast<SessionImpl*>(s) : nullptr;
}
const SessionImpl* as_session(const rlm_session* s) {
  return s && session_is_live(s) ? reinterpret_cast<const SessionImpl*>(s) : nullptr;
}

// The status of a call given a handle that is not live: RLM_ERR_BAD_STATE for a released
// session (its memory still holds the released header), RLM_ERR_INVALID_ARGUMENT for NULL or
// memory that never held a session.
rlm_status not_live(const rlm_session* s) {
  return s && session_is_released(s) ? RLM_ERR_BAD_STATE : RLM_ERR_INVALID_ARGUMENT;
}

// Resolves `handle` for an entry point: `s` is the live session, or the function returns the
// handle's status (see not_live) before looking at its other arguments.
#define RLM_SESSION_OR_RETURN(s, handle)           \
  SessionImpl* const s = as_session(handle);       \
  if (!s) return not_live(handle)
#define RLM_CONST_SESSION_OR_RETURN(s, handle)     \
  const SessionImpl* const s = as_session(handle); \
  if (!s) return not_live(handle)

// A model is usable once rlm_model_open succeeded on it.
const ModelImpl* as_model(const rlm_model* m) {
  const ModelImpl* impl = m ? model_impl(m) : nullptr;
  return impl && impl->root ? impl : nullptr;
}

}  // namespace

extern "C" {

rlm_status rlm_model_open(const void* bytes, size_t size, rlm_model* model) {
  if (!model) return RLM_ERR_INVALID_ARGUMENT;
  return model_open(bytes, size, model_impl(model));
}

const char* rlm_model_error(const rlm_model* model) {
  return model ? model_impl(model)->error : "";
}

void rlm_model_info_default(rlm_model_info* info) {
  if (!info) return;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

rlm_status rlm_model_get_info(const rlm_model* model, rlm_model_info* info) {
  const ModelImpl* m = as_model(model);
  if (!m || !info) return RLM_ERR_INVALID_ARGUMENT;
  const bool v2 = info->struct_size == sizeof *info;
  if (!v2 && info->struct_size != offsetof(rlm_model_info, add_bos)) return RLM_ERR_STRUCT_SIZE;
  const Hparams& h = m->hp;
  if (v2) {
    const fb::Tokenizer* tok = m->root->tokenizer();
    info->add_bos = tok->add_bos() && tok->bos_id() >= 0 ? 1 : 0;
  }
  info->n_layers = h.n_layers;
  info->dim = h.dim;
  info->n_heads = h.n_heads;
  info->n_kv_heads = h.n_kv_heads;
  info->head_dim = h.head_dim;
  info->ffn_dim = h.ffn_dim;
  info->vocab_size = h.vocab_size;
  info->max_context = h.max_context;
  info->bos_id = m->root->tokenizer()->bos_id();
  info->eos_id = m->root->tokenizer()->eos_id();
  info->n_tensors = m->n_tensors;
  info->weight_bytes = m->weight_bytes;
  return RLM_OK;
}

void rlm_session_config_default(rlm_session_config* c) {
  if (!c) return;
  memset(c, 0, sizeof *c);
  c->struct_size = sizeof *c;
  c->n_ctx = 0;
  c->n_sink = 4;
  c->kv_dtype = RLM_KV_F16;
  c->n_threads = 1;
  c->n_batch = 64;
  c->max_pending = 2048;
  c->max_text_bytes = 16384;
  c->stop_string_bytes = 256;
  c->max_stop_strings = 8;
  c->max_stop_tokens = 8;
  c->penalty_window = 256;
  c->max_logit_bias = 16;
}

rlm_status rlm_session_memory(const rlm_model* model, const rlm_session_config* config,
                              size_t* bytes, size_t* alignment) {
  const ModelImpl* m = as_model(model);
  if (!m || !config || !bytes) return RLM_ERR_INVALID_ARGUMENT;
  SessionConfig c;
  RLM_RETURN_IF_ERROR(session_config_from_abi(*m, config, &c, nullptr));
  const size_t n = session_bytes(*m, c);
  if (n == SIZE_MAX) return RLM_ERR_INVALID_ARGUMENT;  // does not fit the address space
  *bytes = n;
  if (alignment) *alignment = kArenaAlignment;
  return RLM_OK;
}

rlm_status rlm_session_init(const rlm_model* model, const rlm_session_config* config,
                            void* memory, size_t size, rlm_session** session) {
  const ModelImpl* m = as_model(model);
  if (!m || !config || !memory || !session) return RLM_ERR_INVALID_ARGUMENT;
  *session = nullptr;
  SessionConfig c;
  RLM_RETURN_IF_ERROR(session_config_from_abi(*m, config, &c, nullptr));
  if (reinterpret_cast<uintptr_t>(memory) % kArenaAlignment != 0) return RLM_ERR_MISALIGNED;
  const size_t need = session_bytes(*m, c);
  if (need == SIZE_MAX) return RLM_ERR_INVALID_ARGUMENT;
  if (size < need) return RLM_ERR_BUFFER_TOO_SMALL;
  // Carving over a live session would orphan its worker threads (they keep running on this
  // memory) and its XNNPACK operators. The memory is at least sizeof(SessionImpl) here.
  if (session_is_live(memory)) {
    SessionImpl* live = static_cast<SessionImpl*>(memory);
    ErrorSink err{live->error, sizeof live->error};
    RLM_SET_ERROR(&err,
                  "rlm_session_init: this memory holds a live session; call "
                  "rlm_session_release on it first");
    return RLM_ERR_BAD_STATE;
  }
  SessionImpl* s = nullptr;
  RLM_RETURN_IF_ERROR(session_create(*m, c, memory, size, &s));
  *session = reinterpret_cast<rlm_session*>(s);
  return RLM_OK;
}

rlm_status rlm_session_config_check(const rlm_model* model, const rlm_session_config* config,
                                    char* message, size_t cap) {
  if (message && cap) message[0] = '\0';
  const ModelImpl* m = as_model(model);
  if (!m || !config || (!message && cap)) return RLM_ERR_INVALID_ARGUMENT;
  ErrorSink err{message, cap};
  SessionConfig c;
  return session_config_from_abi(*m, config, &c, &err);
}

void rlm_session_info_default(rlm_session_info* info) {
  if (!info) return;
  memset(info, 0, sizeof *info);
  info->struct_size = sizeof *info;
}

rlm_status rlm_session_get_info(const rlm_session* session, rlm_session_info* info) {
  RLM_CONST_SESSION_OR_RETURN(s, session);
  if (!info) return RLM_ERR_INVALID_ARGUMENT;
  if (info->struct_size != sizeof *info) return RLM_ERR_STRUCT_SIZE;
  session_get_info(s, info);
  return RLM_OK;
}

const char* rlm_session_error(const rlm_session* session) {
  const SessionImpl* s = as_session(session);
  if (s) return s->error;
  // A released session's memory is the caller's again: read its header, never write it.
  return not_live(session) == RLM_ERR_BAD_STATE
             ? "the session was released (rlm_session_release); initialise it again to use it"
             : "";
}

rlm_status rlm_session_release(rlm_session* session) {
  SessionImpl* s = as_session(session);
  if (!s) {
    const rlm_status st = not_live(session);
    return st == RLM_ERR_BAD_STATE ? RLM_OK : st;  // releasing twice is harmless
  }
  session_release(s);
  return RLM_OK;
}

rlm_status rlm_session_reset(rlm_session* session) {
  RLM_SESSION_OR_RETURN(s, session);
  session_reset(s);
  return RLM_OK;
}

rlm_status rlm_session_feed_text(rlm_session* session, const char* text, size_t len) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!text && len) return RLM_ERR_INVALID_ARGUMENT;
  return session_feed_text(s, text ? text : "", len, true);
}

rlm_status rlm_session_feed_text_ex(rlm_session* session, const char* text, size_t len,
                                    uint32_t flags) {
  RLM_SESSION_OR_RETURN(s, session);
  if ((!text && len) || (flags & ~RLM_TOKENIZE_PARSE_SPECIALS) != 0) {
    return RLM_ERR_INVALID_ARGUMENT;
  }
  return session_feed_text(s, text ? text : "", len, (flags & RLM_TOKENIZE_PARSE_SPECIALS) != 0);
}

rlm_status rlm_session_feed_tokens(rlm_session* session, const int32_t* tokens, size_t n) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!tokens && n) return RLM_ERR_INVALID_ARGUMENT;
  return session_feed_tokens(s, tokens, n, false);
}

void rlm_sampling_default(rlm_sampling* p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->temperature = 0.8f;
  p->top_k = 40;
  p->top_p = 0.95f;
  p->min_p = 0.05f;
  p->repeat_penalty = 1.0f;
  p->frequency_penalty = 0.0f;
  p->presence_penalty = 0.0f;
  p->penalty_last_n = 64;
  p->seed = 0x5eed;
  // The extra samplers, each off (llama.cpp's defaults for their other parameters).
  static const char* const kDryBreakers[] = {"\n", ":", "\"", "*"};
  p->dry_multiplier = 0.0f;
  p->dry_base = 1.75f;
  p->dry_allowed_length = 2;
  p->dry_penalty_last_n = -1;
  p->dry_sequence_breakers = kDryBreakers;
  p->n_dry_sequence_breakers = 4;
  p->xtc_probability = 0.0f;
  p->xtc_threshold = 0.1f;
  p->typical_p = 1.0f;
  p->top_n_sigma = 0.0f;
  p->mirostat = 0;
  p->mirostat_tau = 5.0f;
  p->mirostat_eta = 0.1f;
}

void rlm_speculation_default(rlm_speculation* spec) {
  if (!spec) return;
  memset(spec, 0, sizeof *spec);
  spec->struct_size = sizeof *spec;
  spec->mode = RLM_SPEC_OFF;
  spec->n_max = 0;
  spec->p_min = 0.75f;
  spec->draft = nullptr;
  spec->ngram_min = 2;
  spec->ngram_max = 4;
}

rlm_status rlm_session_set_speculation(rlm_session* session, const rlm_speculation* spec) {
  RLM_SESSION_OR_RETURN(s, session);
  return session_set_speculation(s, spec);
}

void rlm_spec_stats_default(rlm_spec_stats* stats) {
  if (!stats) return;
  memset(stats, 0, sizeof *stats);
  stats->struct_size = sizeof *stats;
}

rlm_status rlm_session_spec_stats(const rlm_session* session, rlm_spec_stats* stats) {
  RLM_CONST_SESSION_OR_RETURN(s, session);
  if (!stats) return RLM_ERR_INVALID_ARGUMENT;
  if (stats->struct_size != sizeof *stats) return RLM_ERR_STRUCT_SIZE;
  *stats = s->spec.stats;
  return RLM_OK;
}

rlm_status rlm_grammar_memory(const rlm_model* model, const char* gbnf, size_t len, size_t* size) {
  const ModelImpl* m = as_model(model);
  if (!m || !size || (!gbnf && len)) return RLM_ERR_INVALID_ARGUMENT;
  *size = grammar_bytes(*m, len);
  return *size == SIZE_MAX ? RLM_ERR_GRAMMAR : RLM_OK;
}

rlm_status rlm_grammar_compile(const rlm_model* model, const char* gbnf, size_t len, void* memory,
                               size_t size, rlm_grammar** grammar, char* message, size_t cap) {
  ErrorSink err{message, message ? cap : 0};
  clear_error(&err);
  const ModelImpl* m = as_model(model);
  RLM_CHECK(m && grammar, RLM_ERR_INVALID_ARGUMENT, &err, "grammar: NULL model or output pointer");
  GrammarImpl* g = nullptr;
  RLM_RETURN_IF_ERROR(grammar_compile(*m, gbnf, len, memory, size, &g, &err));
  *grammar = reinterpret_cast<rlm_grammar*>(g);
  return RLM_OK;
}

const char* rlm_json_gbnf(void) { return json_any_gbnf(); }

size_t rlm_json_schema_scratch_bytes(const char* schema, size_t len) {
  if (!schema && len) return 0;
  return json_schema_scratch_bytes(schema, len);
}

rlm_status rlm_json_schema_to_gbnf(const char* schema, size_t len, void* scratch,
                                   size_t scratch_size, char* out, size_t cap, size_t* out_len,
                                   char* message, size_t message_cap) {
  ErrorSink err{message, message ? message_cap : 0};
  clear_error(&err);
  RLM_CHECK((schema || !len) && out_len && (out || !cap) && scratch, RLM_ERR_INVALID_ARGUMENT, &err,
            "json schema: NULL argument");
  RLM_CHECK(reinterpret_cast<uintptr_t>(scratch) % kArenaAlignment == 0, RLM_ERR_MISALIGNED, &err,
            "json schema: scratch must be %zu-byte aligned", kArenaAlignment);
  Arena a(scratch, scratch_size);
  return json_schema_to_gbnf(schema, len, a, out, cap, out_len, &err);
}

rlm_status rlm_session_set_grammar(rlm_session* session, const rlm_grammar* grammar) {
  RLM_SESSION_OR_RETURN(s, session);
  if (grammar && !grammar_is_compiled(grammar)) return RLM_ERR_INVALID_ARGUMENT;
  return session_set_grammar(s, reinterpret_cast<const GrammarImpl*>(grammar));
}

rlm_status rlm_session_set_sampling(rlm_session* session, const rlm_sampling* sampling) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!sampling) return RLM_ERR_INVALID_ARGUMENT;
  if (sampling->struct_size != sizeof *sampling) return RLM_ERR_STRUCT_SIZE;
  return session_set_sampling(s, sampling);
}

rlm_status rlm_session_add_stop_token(rlm_session* session, int32_t token) {
  RLM_SESSION_OR_RETURN(s, session);
  if (token < 0 || token >= static_cast<int32_t>(s->model->hp.vocab_size)) {
    return RLM_ERR_TOKEN_OUT_OF_RANGE;
  }
  if (s->n_stop_tokens >= s->cfg.max_stop_tokens) return RLM_ERR_CAPACITY;
  s->stop_tokens[s->n_stop_tokens++] = token;
  return RLM_OK;
}

rlm_status rlm_session_add_stop_string(rlm_session* session, const char* text, size_t len) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!text) return RLM_ERR_INVALID_ARGUMENT;
  ErrorSink err{s->error, sizeof s->error};
  return stop_strings_add(&s->stops, text, len, &err);
}

rlm_status rlm_session_clear_stops(rlm_session* session) {
  RLM_SESSION_OR_RETURN(s, session);
  stop_strings_clear(&s->stops);
  s->n_stop_tokens = 0;
  return RLM_OK;
}

rlm_status rlm_session_set_max_tokens(rlm_session* session, uint32_t max_tokens) {
  RLM_SESSION_OR_RETURN(s, session);
  s->max_tokens = max_tokens;
  return RLM_OK;
}

rlm_status rlm_session_set_ignore_eos(rlm_session* session, int ignore) {
  RLM_SESSION_OR_RETURN(s, session);
  s->ignore_eos = ignore != 0;
  return RLM_OK;
}

void rlm_step_result_default(rlm_step_result* r) {
  if (!r) return;
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
  r->token = -1;
}

rlm_status rlm_step(rlm_session* session, rlm_step_result* result) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!result) return RLM_ERR_INVALID_ARGUMENT;
  // The first release's result ended before `logprob`; session_step writes only what fits.
  if (result->struct_size != sizeof *result &&
      result->struct_size != offsetof(rlm_step_result, logprob)) {
    return RLM_ERR_STRUCT_SIZE;
  }
  return session_step(s, result);
}

rlm_status rlm_session_cancel(rlm_session* session) {
  RLM_SESSION_OR_RETURN(s, session);
  session_cancel(s);
  return RLM_OK;
}

rlm_status rlm_session_snapshot_bytes(const rlm_session* session, size_t* bytes) {
  RLM_CONST_SESSION_OR_RETURN(s, session);
  if (!bytes) return RLM_ERR_INVALID_ARGUMENT;
  *bytes = snapshot_bytes(s);
  return RLM_OK;
}

rlm_status rlm_session_save(rlm_session* session, void* out, size_t cap, size_t* n_out) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!n_out || (!out && cap)) return RLM_ERR_INVALID_ARGUMENT;
  return snapshot_save(s, out, cap, n_out);
}

rlm_status rlm_session_restore(rlm_session* session, const void* in, size_t n) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!in && n) return RLM_ERR_INVALID_ARGUMENT;
  return snapshot_restore(s, in, n);
}

rlm_status rlm_session_fork(rlm_session* src, void* memory, size_t size, rlm_session** fork) {
  RLM_SESSION_OR_RETURN(s, src);
  if (!memory || !fork) return RLM_ERR_INVALID_ARGUMENT;
  *fork = nullptr;
  if (reinterpret_cast<uintptr_t>(memory) % kArenaAlignment != 0) return RLM_ERR_MISALIGNED;
  const size_t need = session_bytes(*s->model, s->cfg);
  if (size < need) return RLM_ERR_BUFFER_TOO_SMALL;
  // The fork's block must not overlap src's (nor hold another live session).
  const uintptr_t a = reinterpret_cast<uintptr_t>(memory), b = reinterpret_cast<uintptr_t>(s);
  if ((a < b + need && b < a + need) || session_is_live(memory)) return RLM_ERR_BAD_STATE;
  SessionImpl* d = nullptr;
  RLM_RETURN_IF_ERROR(session_create(*s->model, s->cfg, memory, size, &d));
  session_copy_state(s, d);
  *fork = reinterpret_cast<rlm_session*>(d);
  return RLM_OK;
}

void rlm_beam_params_default(rlm_beam_params* p) {
  if (!p) return;
  memset(p, 0, sizeof *p);
  p->struct_size = sizeof *p;
  p->n_beams = 4;
  p->max_tokens = 0;
  p->length_penalty = 1.0f;
  p->n_best = 1;
}

void rlm_beam_result_default(rlm_beam_result* r) {
  if (!r) return;
  memset(r, 0, sizeof *r);
  r->struct_size = sizeof *r;
}

rlm_status rlm_session_beam_search(rlm_session* session, const rlm_beam_params* params,
                                   rlm_beam_result* results, uint32_t* n_out) {
  RLM_SESSION_OR_RETURN(s, session);
  if (!params || !results || !n_out) return RLM_ERR_INVALID_ARGUMENT;
  if (params->struct_size != sizeof *params) return RLM_ERR_STRUCT_SIZE;
  return session_beam_search(s, params, results, n_out);
}

rlm_status rlm_session_set_logprobs(rlm_session* session, int enable, rlm_token_logprob* top,
                                    uint32_t n_top) {
  RLM_SESSION_OR_RETURN(s, session);
  return session_set_logprobs(s, enable != 0, top, n_top);
}

rlm_status rlm_session_score(rlm_session* session, const int32_t* tokens, size_t n,
                             float* logprobs, float* logits, double* sum) {
  RLM_SESSION_OR_RETURN(s, session);
  if (n > 0 && !tokens) return RLM_ERR_INVALID_ARGUMENT;
  return session_score(s, tokens, n, logprobs, logits, sum);
}

rlm_status rlm_session_eval(rlm_session* session) {
  RLM_SESSION_OR_RETURN(s, session);
  return session_eval(s);
}

rlm_status rlm_session_logits(const rlm_session* session, const float** logits, size_t* n) {
  RLM_CONST_SESSION_OR_RETURN(s, session);
  if (!logits || !n) return RLM_ERR_INVALID_ARGUMENT;
  if (!s->logits_valid) {
    // The error buffer is the one mutable part of a session a const call may write (the
    // session memory itself is the caller's, never const).
    SessionImpl* w = const_cast<SessionImpl*>(s);
    ErrorSink err{w->error, sizeof w->error};
    RLM_SET_ERROR(&err,
                  "no logits: nothing has run since init, reset or rewind (feed input, then "
                  "rlm_session_eval or rlm_step)");
    return RLM_ERR_BAD_STATE;
  }
  *logits = session_logits(s);
  *n = s->model->hp.vocab_size;
  return RLM_OK;
}

uint32_t rlm_session_position(const rlm_session* session) {
  const SessionImpl* s = as_session(session);
  return s ? s->n_past : 0;
}

rlm_status rlm_session_rewind(rlm_session* session, uint32_t position) {
  RLM_SESSION_OR_RETURN(s, session);
  return session_rewind(s, position);
}

size_t rlm_tokenize_scratch_bytes(const rlm_model* model, size_t text_len) {
  const ModelImpl* m = as_model(model);
  return m ? tokenize_scratch_bytes(m->root->tokenizer(), text_len) : 0;
}

rlm_status rlm_tokenize(const rlm_model* model, const char* text, size_t len, int add_bos,
                        int32_t* tokens, size_t cap, size_t* n_out, void* scratch,
                        size_t scratch_size) {
  const ModelImpl* m = as_model(model);
  if (!m || (!text && len) || (!tokens && cap) || !n_out) return RLM_ERR_INVALID_ARGUMENT;
  if (scratch && reinterpret_cast<uintptr_t>(scratch) % 8 != 0) return RLM_ERR_MISALIGNED;
  return tokenize(m->root->tokenizer(), m->hp.vocab_size, text ? text : "", len, add_bos != 0,
                  tokens, cap, n_out, scratch, scratch_size, nullptr);
}

rlm_status rlm_tokenize_ex(const rlm_model* model, const char* text, size_t len, uint32_t flags,
                           int32_t* tokens, size_t cap, size_t* n_out, void* scratch,
                           size_t scratch_size) {
  const ModelImpl* m = as_model(model);
  constexpr uint32_t kKnown = RLM_TOKENIZE_PARSE_SPECIALS | RLM_TOKENIZE_ADD_BOS;
  if (!m || (!text && len) || (!tokens && cap) || !n_out || (flags & ~kKnown) != 0) {
    return RLM_ERR_INVALID_ARGUMENT;
  }
  if (scratch && reinterpret_cast<uintptr_t>(scratch) % 8 != 0) return RLM_ERR_MISALIGNED;
  const uint32_t f = ((flags & RLM_TOKENIZE_PARSE_SPECIALS) ? kTokenizeParseSpecial : 0u) |
                     ((flags & RLM_TOKENIZE_ADD_BOS) ? kTokenizeAddBos : 0u);
  return tokenize_ex(m->root->tokenizer(), m->hp.vocab_size, text ? text : "", len, f, tokens,
                     cap, n_out, scratch, scratch_size, nullptr);
}

rlm_status rlm_token_to_bytes(const rlm_model* model, int32_t token, char* out, size_t cap,
                              size_t* n_out) {
  const ModelImpl* m = as_model(model);
  if (!m || (!out && cap) || !n_out) return RLM_ERR_INVALID_ARGUMENT;
  if (token < 0 || token >= static_cast<int32_t>(m->hp.vocab_size)) {
    return RLM_ERR_TOKEN_OUT_OF_RANGE;
  }
  const size_t n = token_text(m->root->tokenizer(), -1, token, out, cap);
  *n_out = n;
  return n <= cap ? RLM_OK : RLM_ERR_CAPACITY;
}

rlm_status rlm_token_text_after(const rlm_model* model, int32_t prev, int32_t token, char* out,
                                size_t cap, size_t* n_out) {
  const ModelImpl* m = as_model(model);
  if (!m || (!out && cap) || !n_out) return RLM_ERR_INVALID_ARGUMENT;
  const int32_t vocab = static_cast<int32_t>(m->hp.vocab_size);
  if (token < 0 || token >= vocab || prev < -1 || prev >= vocab) {
    return RLM_ERR_TOKEN_OUT_OF_RANGE;
  }
  const size_t n = token_text(m->root->tokenizer(), prev, token, out, cap);
  *n_out = n;
  return n <= cap ? RLM_OK : RLM_ERR_CAPACITY;
}

rlm_status rlm_token_lookup(const rlm_model* model, const char* piece, size_t len,
                            int32_t* id) {
  const ModelImpl* m = as_model(model);
  if (!m || (!piece && len) || !id) return RLM_ERR_INVALID_ARGUMENT;
  const int32_t found = token_lookup(m->root->tokenizer(), piece ? piece : "", len);
  if (found < 0) return RLM_ERR_NOT_FOUND;
  *id = found;
  return RLM_OK;
}

rlm_status rlm_model_chat_template(const rlm_model* model, const char** text, size_t* len) {
  const ModelImpl* m = as_model(model);
  if (!m || !text || !len) return RLM_ERR_INVALID_ARGUMENT;
  const flatbuffers::String* t = m->root->chat_template();
  if (!t || t->size() == 0) return RLM_ERR_NOT_FOUND;
  *text = t->c_str();
  *len = t->size();
  return RLM_OK;
}

int rlm_token_is_end(const rlm_model* model, int32_t token) {
  const ModelImpl* m = as_model(model);
  return m && model_is_end_token(*m, token) ? 1 : 0;
}

}  // extern "C"
