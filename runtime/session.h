// A generation session: everything lives in one caller-provided block, carved by
// session_layout — the one layout function that serves both rlm_session_memory and
// rlm_session_init, so the size query and init cannot drift.
#ifndef RINGLM_RUNTIME_SESSION_H_
#define RINGLM_RUNTIME_SESSION_H_

#include <stddef.h>
#include <stdint.h>

#include "beam.h"
#include "grammar/compiled.h"
#include "grammar/matcher.h"
#include "model.h"
#include "sampler.h"
#include "speculation.h"
#include "stop.h"
#include "transformer.h"

namespace ringlm::internal {

// The session block starts with a header that says whether the memory holds a live session:
// magic == kSessionLive and self == the block's address from a successful rlm_session_init
// until rlm_session_release, which sets magic = kSessionReleased. The 64-bit magic and the
// self-pointer make it unlikely that memory handed to init for the first time (any garbage)
// reads as a live session, and a copy of a live session elsewhere does not either.
constexpr uint64_t kSessionLive = 0x52494e474c4d5331ull;      // "RINGLMS1"
constexpr uint64_t kSessionReleased = 0x52494e474c4d5330ull;  // "RINGLMS0"

struct SessionConfig {  // validated rlm_session_config
  uint32_t n_ctx, n_sink, n_threads, n_batch, max_pending, max_text_bytes;
  rlm_kv_dtype kv_dtype;
  uint32_t stop_string_bytes, max_stop_strings, max_stop_tokens, penalty_window, max_logit_bias;
  uint32_t max_draft;          // speculative verification budget (0 = off)
  uint32_t grammar_state_bytes;  // per grammar state (0 = grammars off)
  uint32_t grammar_cache_bytes;  // remembered masks (0 = none)
  uint32_t max_logit_rows;     // logits rows a scoring pass keeps (0 = as speculation needs)
  uint32_t max_beams;          // beam search width budget (0 = off)
  uint32_t max_beam_tokens;    // longest beam (set when max_beams > 0)
  const KernelTable* kernels;  // chosen for this CPU (or forced by the caller)
  bool xnnpack;                // backend "xnnpack": f32 matrices on XNNPACK operators
};

struct SessionImpl {
  uint64_t magic;                // kSessionLive / kSessionReleased (see above)
  const SessionImpl* self;       // this, while magic is either value
  const ModelImpl* model;        // borrowed; must outlive the session
  const fb::Tokenizer* tok;      // inside the model bytes
  SessionConfig cfg;
  Transformer tf;

  // Sequence. Positions [0, n_past) are in the KV ring.
  uint32_t n_past;
  int32_t* batch;                // (max_pending + 1): [last sampled token] + pending input
  uint32_t n_pending;            // pending input tokens, at batch + 1
  bool has_last;                 // batch[0] holds the last sampled token, not yet run
  bool logits_ready;             // tf.logits hold the raw output of the last run position
  bool logits_valid;             // tf.logits belong to position n_past - 1 (raw or, after a
                                 // step, the sampler's working values): rlm_session_logits
  int32_t prev_token;            // last token of the sequence (decode context), -1 at start
  uint32_t logits_row;           // row of tf.logits holding them (> 0 only in a verification pass)

  // Turn.
  bool turn_ended;               // a stop fired; feed input to continue
  uint32_t generated;            // tokens sampled this turn
  uint32_t max_tokens;           // 0 = unlimited
  bool ignore_eos;

  // Penalty window: the most recent tokens of the sequence, oldest first.
  int32_t* history;              // (penalty_window)
  uint32_t n_history;

  // Sampling.
  SamplerParams sp;
  rlm_logit_bias* bias;          // (max_logit_bias) copied from the caller
  Rng rng;
  float mirostat_mu;             // Mirostat v2 state: 2 * tau after set_sampling and reset
  SamplerScratch ss;

  // Stops and output text.
  StopStrings stops;
  TextStream stream;
  int32_t* stop_tokens;          // (max_stop_tokens) caller-added end tokens
  uint32_t n_stop_tokens;
  char* piece;                   // (model hp.max_token_text) one token's text
  void* tok_scratch;             // tokenizer working memory for max_text_bytes of text
  size_t tok_scratch_size;

  // Speculative decoding (cfg.max_draft > 0): the drafter and the pass being consumed.
  SpecState spec;

  // Grammar (cfg.grammar_state_bytes > 0): the compiled grammar (borrowed, null = off), the parse
  // state of this turn's output so far, and the mask stage's scratch (its trial state of the same
  // budget, a vocabulary bitset, the remembered masks of cfg.grammar_cache_bytes).
  const GrammarImpl* grammar;
  Matcher gstate;
  MaskScratch gmask;
  Status grammar_status;         // of the turn's matcher_reset: not RLM_OK = the step fails
  uint32_t grammar_start;        // position of the first token the grammar parsed this turn
                                 // (kNoGrammarStart until one is sampled): a rewind to a later
                                 // position replays the tokens between (session_rewind)

  // Log-probabilities (rlm_session_set_logprobs): on/off, the caller's top-n array (borrowed),
  // and a copy of the raw logits the step samples from, so the sampled token's raw logit
  // survives the sampler's in-place stages.
  bool logprobs;
  rlm_token_logprob* lp_top;     // (lp_n_top) caller-owned, or null
  uint32_t lp_n_top;
  float* lp_raw;                 // (vocab) raw logits of the step's position

  // Beam search (cfg.max_beams > 0).
  BeamSearch beam;

  // Cancellation: rlm_session_cancel (any thread) increments the counter (atomically); a call
  // records it at its start (cancel_base) and stops when it moves.
  uint32_t cancel_requests;
  uint32_t cancel_base;

  char error[256];
};

// The logits of position n_past - 1 (valid while logits_valid).
inline float* session_logits(const SessionImpl* s) {
  return s->tf.logits + static_cast<size_t>(s->logits_row) * s->model->hp.vocab_size;
}

Status session_config_from_abi(const ModelImpl& m, const rlm_session_config* c, SessionConfig* out,
                               ErrorSink* err);
// Bytes a session needs (measure-mode layout).
size_t session_bytes(const ModelImpl& m, const SessionConfig& c);
// Carves and initialises a session at `mem` (size already checked against session_bytes).
// RLM_ERR_THREADS when a worker could not start, RLM_ERR_BACKEND when XNNPACK failed (message
// in the carved session's error buffer); *out is set only on success.
Status session_create(const ModelImpl& m, const SessionConfig& c, void* mem, size_t size,
                      SessionImpl** out);

// Whether `mem` (at least sizeof(SessionImpl) bytes) holds a live / a released session header.
bool session_is_live(const void* mem);
bool session_is_released(const void* mem);

// Stops the session's worker threads and deletes its XNNPACK operators; the handle is invalid
// afterwards (its header reads as released).
void session_release(SessionImpl* s);
// Fills the kernels / backend / matmul fields of rlm_session_info (struct_size checked already).
void session_get_info(const SessionImpl* s, rlm_session_info* info);
void session_reset(SessionImpl* s);
Status session_feed_tokens(SessionImpl* s, const int32_t* tokens, size_t n, bool add_bos);
// parse_special: special-token text becomes its token (kTokenizeParseSpecial).
Status session_feed_text(SessionImpl* s, const char* text, size_t len, bool parse_special);
Status session_eval(SessionImpl* s);
// rlm_session_score (tokens checked here; the outputs may be null).
Status session_score(SessionImpl* s, const int32_t* tokens, size_t n, float* logprobs,
                     float* logits, double* sum);
// rlm_session_cancel: safe from any thread while another runs a call on the session.
void session_cancel(SessionImpl* s);
// Ends a speculative pass being consumed (draft positions dropped, overwritten slots restored).
void session_end_pass(SessionImpl* s);
// The draft model no longer holds any of the target's positions (their content changed).
void session_forget_draft(SessionImpl* s);
// rlm_session_beam_search (params and results checked by the caller's struct sizes only).
Status session_beam_search(SessionImpl* s, const rlm_beam_params* p, rlm_beam_result* results,
                           uint32_t* n_out);
// rlm_session_set_logprobs.
Status session_set_logprobs(SessionImpl* s, bool enable, rlm_token_logprob* top, uint32_t n_top);
Status session_step(SessionImpl* s, rlm_step_result* r);
Status session_rewind(SessionImpl* s, uint32_t position);
Status session_set_sampling(SessionImpl* s, const rlm_sampling* p);
// rlm_session_set_speculation: ends a pass being consumed first.
Status session_set_speculation(SessionImpl* s, const rlm_speculation* spec);
// rlm_session_set_grammar (null: off).
Status session_set_grammar(SessionImpl* s, const GrammarImpl* g);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_SESSION_H_
