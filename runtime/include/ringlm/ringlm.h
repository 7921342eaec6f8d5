/* ringlm: on-device text generation in caller-owned memory.
 *
 * The only public header. C99; no allocation anywhere behind it.
 *
 * Ownership, in one place:
 *  - Model bytes are borrowed: they must stay valid and unmodified while the rlm_model and every
 *    session opened on it are in use. Opening copies nothing.
 *  - rlm_model is caller storage (a stack or static variable is fine); it holds a verified view.
 *  - Session memory is borrowed for the life of the session; the rlm_session handle points into
 *    it (at its start). Call rlm_session_release() before reusing or freeing the memory (it joins
 *    the worker threads when n_threads > 1; with one thread it only invalidates the handle).
 *    rlm_session_init refuses memory that still holds a live session (RLM_ERR_BAD_STATE).
 *  - Pointers a call returns into session memory (step text, logits) stay valid until the next
 *    call that takes the same session.
 *
 * Threads: different sessions (even on one model) may be used from different threads at the
 * same time; one session must not be used by two threads at once. rlm_model is read-only
 * after open.
 *
 * Structs that may grow carry struct_size: set it with the matching *_default() function (or
 * to sizeof the struct); a size this library does not know returns RLM_ERR_STRUCT_SIZE. */
#ifndef RINGLM_RINGLM_H_
#define RINGLM_RINGLM_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(_WIN32)
#define RLM_API
#else
#define RLM_API __attribute__((visibility("default")))
#endif

/* Newest model file format version this library reads (it reads 1 to this). 2 adds the Q4K
 * weight encoding, 3 the Q6K one, 4 the Q5K and Q5 ones, 5 the Q4_1 and Q5_1 ones; writers write
 * the lowest version that holds the file. */
#define RLM_FORMAT_VERSION 5u

typedef enum rlm_status {
  RLM_OK = 0,
  RLM_ERR_INVALID_ARGUMENT = 1,   /* NULL pointer or argument out of range */
  RLM_ERR_STRUCT_SIZE = 2,        /* struct_size not one this library knows */
  RLM_ERR_BUFFER_TOO_SMALL = 3,   /* caller memory smaller than required */
  RLM_ERR_MISALIGNED = 4,         /* caller memory not aligned as required */
  RLM_ERR_BAD_STATE = 5,          /* call not valid in the session's current state */
  RLM_ERR_TOKEN_OUT_OF_RANGE = 6, /* token id < 0 or >= vocab size */
  RLM_ERR_INVALID_UTF8 = 7,       /* text argument is not valid UTF-8 */
  RLM_ERR_CAPACITY = 8,           /* a configured budget (prompt tokens, stop strings...) is full */
  RLM_ERR_REWIND = 9,             /* rewind target no longer held by the ring cache */
  RLM_ERR_THREADS = 10,           /* worker threads could not be started */
  RLM_ERR_NOT_FOUND = 11,         /* no such token piece / the model has no such entry */
  RLM_ERR_UNSUPPORTED = 12,       /* requested feature (e.g. a kernel ISA) not available here */
  RLM_ERR_BACKEND = 13,           /* a backend library failed at init (XNNPACK refused an
                                     operator, or needed more than the memory bound reserved) */
  RLM_ERR_NO_CANDIDATES = 14,     /* rlm_step: no token can be sampled, every logit is -inf or
                                     NaN after logit bias and penalties (all tokens banned, or
                                     the model produced NaN); see rlm_step */
  RLM_ERR_GRAMMAR = 15,           /* grammar (GBNF) or JSON Schema text invalid, or beyond a
                                     limit: the message names line:column and what was expected */
  /* Values are never renumbered; new statuses take the next free value of their group. */
  /* Model verification failures (rlm_model_open). */
  RLM_ERR_SNAPSHOT_CORRUPT = 16,  /* rlm_session_restore: not a snapshot, another version,
                                     truncated, or its bytes changed (checksum) */
  RLM_ERR_SNAPSHOT_MISMATCH = 17, /* rlm_session_restore: taken with another model, KV dtype,
                                     ring geometry or library build */
  RLM_ERR_CANCELLED = 18,         /* rlm_session_cancel stopped the call (see there) */
  RLM_ERR_MODEL_TRUNCATED = 20,   /* file shorter than its own headers say */
  RLM_ERR_MODEL_IDENTIFIER = 21,  /* not a ringlm model (file identifier) */
  RLM_ERR_MODEL_VERSION = 22,     /* format version this library does not read */
  RLM_ERR_MODEL_CORRUPT = 23,     /* FlatBuffer structure invalid */
  RLM_ERR_MODEL_HPARAMS = 24,     /* hyperparameters missing, zero, inconsistent or too large */
  RLM_ERR_MODEL_TENSOR = 25,      /* tensor missing, duplicated, wrong shape or dtype */
  RLM_ERR_MODEL_BOUNDS = 26,      /* tensor data outside the file or offset+size overflow */
  RLM_ERR_MODEL_OVERLAP = 27,     /* tensor data overlapping another tensor or the header */
  RLM_ERR_MODEL_ALIGNMENT = 28,   /* tensor data or model bytes not 64-byte aligned */
  RLM_ERR_MODEL_TOKENIZER = 29,   /* tokenizer tables inconsistent or token ids out of range */
  RLM_ERR_MODEL_UNSUPPORTED = 30, /* valid file, but a feature this build does not run */
  RLM_ERR_INTERNAL = 99
} rlm_status;

/* Static string naming the status, e.g. "RLM_ERR_BUFFER_TOO_SMALL". Never NULL.
 *
 * Messages (rlm_model_error, rlm_session_error, rlm_session_config_check) are for users, e.g.
 * "n_ctx 1 out of [2, 16777216]". A library built with RINGLM_ERROR_LOCATIONS=1 (by default the
 * builds without NDEBUG, i.e. CMake's Debug) prefixes them with the runtime source location of
 * the failed check ("session.cc:115: n_ctx 1 ..."); do not parse messages either way. */
RLM_API const char* rlm_status_string(rlm_status status);

/* ---------------------------------------------------------------------------------------------
 * Model
 * ------------------------------------------------------------------------------------------- */

/* Caller-provided storage for an opened model. Contents are private. */
typedef struct rlm_model {
  uint64_t opaque_[64];
} rlm_model;

/* Verifies `bytes` (the whole model file) and makes `model` a view over it. `bytes` must be
 * 64-byte aligned (mmap and the rlm_embed output are) and outlive the model and its sessions.
 * Copies nothing, allocates nothing. On failure, rlm_model_error() explains. */
RLM_API rlm_status rlm_model_open(const void* bytes, size_t size, rlm_model* model);

/* Message for the last failed rlm_model_open on this storage ("" if none). Never NULL. */
RLM_API const char* rlm_model_error(const rlm_model* model);

typedef struct rlm_model_info {
  uint32_t struct_size;
  uint32_t n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, max_context;
  int32_t bos_id, eos_id;
  uint32_t n_tensors;
  uint64_t weight_bytes; /* sum of tensor data sizes */
  /* Added with perplexity and the prompt cache: a struct_size that ends before it is accepted and
   * leaves it unwritten. */
  int32_t add_bos;       /* 1 when text fed to a session gets BOS first (the tokenizer's rule) */
} rlm_model_info;

RLM_API void rlm_model_info_default(rlm_model_info* info);
RLM_API rlm_status rlm_model_get_info(const rlm_model* model, rlm_model_info* info);

/* ---------------------------------------------------------------------------------------------
 * Session memory and lifetime
 * ------------------------------------------------------------------------------------------- */

/* KV cache precision. Q8: int8 values with one f32 scale per head and position (symmetric,
 * amax / 127), about half the bytes of F16 (head_dim 64: 68 bytes per head and position against
 * 128); the attention kernels read it directly. */
typedef enum rlm_kv_dtype { RLM_KV_F32 = 0, RLM_KV_F16 = 1, RLM_KV_Q8 = 2 } rlm_kv_dtype;

typedef struct rlm_session_config {
  uint32_t struct_size;
  uint32_t n_ctx;             /* KV ring slots; 0 = model max context */
  uint32_t n_sink;            /* attention-sink positions kept when the ring wraps (default 4) */
  rlm_kv_dtype kv_dtype;      /* default RLM_KV_F16 (it was RLM_KV_F32: set it to keep that) */
  uint32_t n_threads;         /* threads splitting each op, the caller's included (default 1, max
                                 64); workers start at init, spin briefly between ops and sleep
                                 when idle; results do not depend on the count */
  uint32_t n_batch;           /* max tokens per prefill pass; longer prompts run in chunks (64) */
  uint32_t max_pending;       /* prompt-token buffer (tokens fed but not yet run) (default 2048) */
  uint32_t max_text_bytes;    /* longest text one rlm_session_feed_text accepts (default 16384) */
  uint32_t stop_string_bytes; /* bytes for all stop strings together (default 256) */
  uint32_t max_stop_strings;  /* default 8 */
  uint32_t max_stop_tokens;   /* caller-added end tokens (default 8) */
  uint32_t penalty_window;    /* max repeat_last_n the session can honour (default 256) */
  uint32_t max_logit_bias;    /* entries of logit bias the session stores (default 16) */
  const char* kernels;        /* NULL = the fastest kernels this CPU runs; or force one of "ref",
                                 "avx2", "avx512", "neon", "dotprod", "i8mm", "armv7" (init fails
                                 with RLM_ERR_UNSUPPORTED if this CPU or build lacks it). Only
                                 read during init. */
  /* Added after the first release: a struct_size that ends before `backend` (an older header's
   * sizeof) is still accepted and means backend = NULL. */
  const char* backend;        /* NULL or "native": every matmul on `kernels`. "xnnpack": f32
                                 weight matrices on XNNPACK's f32 fully-connected operators (one
                                 per matrix and thread, run on the session's threads), the rest
                                 (f16, q8, q4 matrices, attention, norms) on `kernels`. XNNPACK
                                 packs its own copy of each f32 matrix into the session memory:
                                 the session grows by about the f32 weight bytes, and
                                 rlm_session_memory returns an upper bound, not the exact size.
                                 RLM_ERR_UNSUPPORTED when the build has no XNNPACK, it cannot
                                 initialise on this CPU, or the model has no f32 matrix;
                                 RLM_ERR_INVALID_ARGUMENT for an unknown name. The first
                                 "xnnpack" config of a process initialises XNNPACK, whose CPU
                                 detection (cpuinfo) allocates once with malloc; a process using
                                 this backend must not call xnn_initialize itself. */
  /* Added with speculative decoding: a struct_size that ends before `max_draft` means 0. */
  uint32_t max_draft;         /* most draft tokens one verification pass checks (default 0 =
                                 speculation off, no memory). The session then keeps the logits of
                                 1 + max_draft positions and an undo area of max_draft positions
                                 per layer, so a rejected draft never evicts a position the ring
                                 would otherwise hold. Must be < n_ctx - n_sink (and < the
                                 sliding window of models that have one); at most 64. */
  /* Added with grammars: a struct_size that ends before `grammar_state_bytes` means 0. */
  uint32_t grammar_state_bytes; /* memory for a grammar's parse state (default 0 = grammars off,
                                 no memory). The session keeps two states of this size (the
                                 committed one and the mask's trial copy). A grammar whose open
                                 parses outgrow it makes rlm_step fail with RLM_ERR_CAPACITY.
                                 0 or at least 4096; 256 KiB suits JSON. */
  /* Added with the mask cache: a struct_size that ends before it means 0. */
  uint32_t grammar_cache_bytes; /* memory for remembered grammar masks (default 0 = none): the
                                 mask of a parse state met before is reused instead of walking
                                 the vocabulary again (exactly the same mask). Each entry takes
                                 vocab_size / 8 + ~800 bytes (7 KiB for a 50k vocabulary); below
                                 one entry it holds none. At most 1 GiB. 1 MiB suits JSON. */
  /* Added with scoring: a struct_size that ends before it means 0. */
  uint32_t max_logit_rows;    /* positions one pass keeps the logits of, for rlm_session_score
                                 (default 0 = 1, or 1 + max_draft): scoring runs its tokens in
                                 passes of min(n_batch, this) positions. Each row costs
                                 vocab_size * 4 bytes. At most 4096. */
  /* Added with beam search: a struct_size that ends before `max_beams` means 0 for both. */
  uint32_t max_beams;         /* widest rlm_session_beam_search (default 0 = off, no memory; at
                                 most 16). The session then keeps max_beams logits rows, a batch
                                 of at least max_beams, and per beam max_beam_tokens K/V rows in
                                 every layer (the prompt's entries are shared, never copied). */
  uint32_t max_beam_tokens;   /* longest sequence a beam search generates (default 0 = 64 when
                                 max_beams > 0; at most 4096) */
} rlm_session_config;

RLM_API void rlm_session_config_default(rlm_session_config* config);

/* Bytes and alignment a session needs for this model and config: exact for the native backend,
 * an upper bound computed from the shapes for "xnnpack" (XNNPACK's allocations, made inside the
 * block at init, are not known in advance; init fails with RLM_ERR_BACKEND rather than overrun
 * it). Either way, init succeeds with exactly this many bytes. */
RLM_API rlm_status rlm_session_memory(const rlm_model* model, const rlm_session_config* config,
                                      size_t* bytes, size_t* alignment);

/* Why rlm_session_memory / rlm_session_init refuse `config` for `model`: the status they return
 * for it (RLM_OK: nothing to refuse) and, in `message` (cap bytes, NUL-terminated, may be NULL
 * when cap is 0), the reason. Allocates nothing beyond what the config itself implies (see
 * backend). */
RLM_API rlm_status rlm_session_config_check(const rlm_model* model,
                                            const rlm_session_config* config, char* message,
                                            size_t cap);

typedef struct rlm_session rlm_session;

/* Carves the session out of `memory` (borrowed; must outlive the session). Fails with
 * RLM_ERR_BUFFER_TOO_SMALL if `size` is below rlm_session_memory's answer, and
 * RLM_ERR_MISALIGNED if `memory` is not aligned to its alignment. Allocates nothing.
 * RLM_ERR_BAD_STATE when `memory` still holds a live session (initialised and not released):
 * carving over it would orphan its worker threads. That session stays intact and its
 * rlm_session_error says to call rlm_session_release first. The session records this in a
 * header at the start of the memory (a 64-bit magic plus the memory's own address), so memory
 * given to init for the first time may hold anything, and released memory initialises again.
 * On failure *session is NULL. */
RLM_API rlm_status rlm_session_init(const rlm_model* model, const rlm_session_config* config,
                                    void* memory, size_t size, rlm_session** session);

/* Message for the last failed call on this session ("" if none, or for NULL). Never NULL. For a
 * released session, a static message saying so. */
RLM_API const char* rlm_session_error(const rlm_session* session);

/* Ends the session: joins its worker threads (and deletes its XNNPACK operators). The memory may
 * be reused afterwards. Releasing a released session again returns RLM_OK and does nothing;
 * NULL or memory that never held a session is RLM_ERR_INVALID_ARGUMENT.
 *
 * Calls on a released session: while its memory is unchanged, every function taking the session
 * returns RLM_ERR_BAD_STATE (rlm_session_position returns 0). Once the memory is reused or
 * freed, the handle is dangling like any other pointer: do not use it. */
RLM_API rlm_status rlm_session_release(rlm_session* session);

/* What runs where in a session. */
typedef struct rlm_session_info {
  uint32_t struct_size;
  const char* kernels;       /* the native kernel table in use: "avx512", "neon", "ref", ... */
  const char* backend;       /* "native" or "xnnpack", as configured */
  /* Per weight type of the matmuls: "xnnpack", or the kernels name when they run natively. */
  const char* matmul_f32;
  const char* matmul_f16;
  const char* matmul_q8;
  const char* matmul_q4;
  uint32_t xnnpack_operators; /* XNNPACK operators created (matrices x threads with rows) */
  size_t xnnpack_reserved;   /* session bytes reserved for XNNPACK (the bound) */
  size_t xnnpack_used;       /* of which XNNPACK's allocations took */
} rlm_session_info;

RLM_API void rlm_session_info_default(rlm_session_info* info);
/* Fills `info` (strings are static). RLM_ERR_STRUCT_SIZE if info->struct_size is unknown. */
RLM_API rlm_status rlm_session_get_info(const rlm_session* session, rlm_session_info* info);

/* Forget everything: position 0, nothing pending, stops and sampling kept. */
RLM_API rlm_status rlm_session_reset(rlm_session* session);

/* ---------------------------------------------------------------------------------------------
 * Input
 * ------------------------------------------------------------------------------------------- */

/* Flags of rlm_tokenize_ex and rlm_session_feed_text_ex (bits of a uint32_t).
 *
 * RLM_TOKENIZE_PARSE_SPECIALS: text that spells a special token's piece (a control or
 * user-defined token of a byte-level vocabulary, e.g. "<|im_end|>", "<|eot_id|>") becomes that
 * token. Without it every byte is encoded as text, so a user cannot inject role or end-of-turn
 * tokens. The rule: parse specials only in text the application itself wrote (a template, its
 * own prompt); never in text a user typed or a client sent. SentencePiece vocabularies ignore
 * the flag: their control tokens never come from text.
 * RLM_TOKENIZE_ADD_BOS (rlm_tokenize_ex only): BOS first when the model has one.
 * Any other bit is RLM_ERR_INVALID_ARGUMENT (reserved for later flags). */
#define RLM_TOKENIZE_PARSE_SPECIALS 0x1u
#define RLM_TOKENIZE_ADD_BOS 0x2u

/* Tokenizes UTF-8 text inside the runtime and queues it. BOS is prepended per the model when
 * the session is at position 0 with nothing queued. Starts a new turn: the max-tokens count and
 * stop state restart. Parses special-token text (as rlm_session_feed_text_ex with
 * RLM_TOKENIZE_PARSE_SPECIALS): use the _ex form with flags 0 for untrusted text. `len` is at most
 * rlm_session_config.max_text_bytes and the tokens must fit max_pending (RLM_ERR_CAPACITY, nothing
 * queued). */
RLM_API rlm_status rlm_session_feed_text(rlm_session* session, const char* text, size_t len);

/* rlm_session_feed_text with `flags`: RLM_TOKENIZE_PARSE_SPECIALS or 0 (special-token text stays
 * text). BOS as for rlm_session_feed_text; RLM_TOKENIZE_ADD_BOS and unknown bits are
 * RLM_ERR_INVALID_ARGUMENT. */
RLM_API rlm_status rlm_session_feed_text_ex(rlm_session* session, const char* text, size_t len,
                                            uint32_t flags);

/* Queues token ids as given (no BOS added). Starts a new turn like feed_text. */
RLM_API rlm_status rlm_session_feed_tokens(rlm_session* session, const int32_t* tokens,
                                           size_t n);

/* ---------------------------------------------------------------------------------------------
 * Sampling and stops
 * ------------------------------------------------------------------------------------------- */

typedef struct rlm_logit_bias {
  int32_t token;
  float bias;
} rlm_logit_bias;

/* Stage order (each stage off at its neutral value): logit bias → repetition / frequency /
 * presence penalties over the last penalty_last_n tokens → DRY → temperature (0 = greedy argmax)
 * → top-n-sigma → top-k → softmax → typical-p → top-p → min-p → XTC → renormalise → draw with the
 * session RNG. Mirostat v2 (mirostat = 2) replaces top-n-sigma, top-k, typical-p, top-p, min-p and
 * XTC: after temperature it keeps the tokens whose surprise -log2 p is at most mu, draws, and
 * moves mu towards mirostat_tau (mu starts at 2 * tau; rlm_session_set_sampling and
 * rlm_session_reset restart it). XTC, when on, takes one extra RNG step per sampled token.
 * NaN logits count as -inf (never sampled). Any temperature > 0 is safe, however small: where
 * logit / temperature would overflow, the logits are shifted by their maximum first (the same
 * distribution), so a tiny temperature (1e-40) samples the argmax (exact ties share). When no
 * token is left (every logit -inf or NaN after bias and penalties), rlm_step returns
 * RLM_ERR_NO_CANDIDATES. */
typedef struct rlm_sampling {
  uint32_t struct_size;
  float temperature;        /* 0 = greedy (default 0.8) */
  int32_t top_k;            /* 0 = off (default 40) */
  float top_p;              /* 1 = off (default 0.95) */
  float min_p;              /* 0 = off (default 0.05) */
  float repeat_penalty;     /* 1 = off (default 1) */
  float frequency_penalty;  /* 0 = off */
  float presence_penalty;   /* 0 = off */
  int32_t penalty_last_n;   /* window of past tokens the penalties see (default 64) */
  uint64_t seed;            /* RNG seed (xorshift64*); set_sampling reseeds (default 0x5eed) */
  const rlm_logit_bias* logit_bias; /* copied in; NULL/0 = none */
  uint32_t n_logit_bias;
  /* Added with the extra samplers: a struct_size of the older header's sizeof (ending after
   * n_logit_bias) is still accepted; every field below then reads as its neutral default.
   * Zero is valid for each of them and turns its sampler off. */
  /* DRY ("Don't Repeat Yourself", as llama.cpp): a token that would extend a sequence already
   * seen in the last dry_penalty_last_n tokens (a repeat of n >= dry_allowed_length tokens) gets
   * logit -= dry_multiplier * dry_base^(n - dry_allowed_length). A token whose text contains a
   * sequence breaker ends a repeat and is never penalised. */
  float dry_multiplier;     /* >= 0; 0 = off (default 0) */
  float dry_base;           /* >= 1 when dry_multiplier > 0 (default 1.75) */
  int32_t dry_allowed_length; /* >= 0 (default 2) */
  int32_t dry_penalty_last_n; /* -1 = the session's penalty_window, 0 = off, else at most
                                 penalty_window (default -1) */
  const char* const* dry_sequence_breakers; /* NUL-terminated, non-empty, copied in: at most
                                 RLM_MAX_DRY_BREAKERS strings of RLM_DRY_BREAKER_BYTES bytes in
                                 all (default "\n", ":", "\"", "*"); NULL/0 = none */
  uint32_t n_dry_sequence_breakers;
  /* XTC (exclude top choices): with probability xtc_probability, drop every token with
   * p >= xtc_threshold except the least probable of them. */
  float xtc_probability;    /* [0, 1]; 0 = off (default 0) */
  float xtc_threshold;      /* [0, 1] (default 0.1; above 0.5 nothing can be dropped) */
  float typical_p;          /* locally typical sampling, [0, 1]; 0 or 1 = off (default 1) */
  float top_n_sigma;        /* keep logit >= max - n * sigma, >= 0; 0 = off (default 0) */
  int32_t mirostat;         /* 0 = off, 2 = Mirostat v2 (1 is not supported) (default 0) */
  float mirostat_tau;       /* target surprise in bits, >= 0 (default 5) */
  float mirostat_eta;       /* learning rate, >= 0 (default 0.1) */
} rlm_sampling;

#define RLM_MAX_DRY_BREAKERS 8
#define RLM_DRY_BREAKER_BYTES 64

RLM_API void rlm_sampling_default(rlm_sampling* sampling);
RLM_API rlm_status rlm_session_set_sampling(rlm_session* session, const rlm_sampling* sampling);

/* Extra end tokens and stop strings (copied into the session within the configured budgets). */
RLM_API rlm_status rlm_session_add_stop_token(rlm_session* session, int32_t token);
RLM_API rlm_status rlm_session_add_stop_string(rlm_session* session, const char* text,
                                               size_t len);
RLM_API rlm_status rlm_session_clear_stops(rlm_session* session);
/* Tokens generated per turn before RLM_STOP_MAX_TOKENS; 0 = unlimited. */
RLM_API rlm_status rlm_session_set_max_tokens(rlm_session* session, uint32_t max_tokens);
/* When non-zero, the model's own end tokens do not stop generation (caller-added ones do). */
RLM_API rlm_status rlm_session_set_ignore_eos(rlm_session* session, int ignore);

/* ---------------------------------------------------------------------------------------------
 * The step
 * ------------------------------------------------------------------------------------------- */

typedef enum rlm_stop_reason {
  RLM_STOP_NONE = 0,
  RLM_STOP_END_TOKEN = 1,
  RLM_STOP_STOP_STRING = 2,
  RLM_STOP_MAX_TOKENS = 3,
  RLM_STOP_GRAMMAR = 4    /* the grammar is complete and nothing may follow (rlm_session_set_grammar) */
} rlm_stop_reason;

typedef struct rlm_step_result {
  uint32_t struct_size;
  int32_t token;          /* the sampled token */
  uint32_t position;      /* absolute position the sampled token occupies */
  const char* text;       /* UTF-8 text this step releases; borrowed until the next call */
  size_t text_len;
  rlm_stop_reason stop;   /* != NONE: the turn ended; feed more input to continue */
  uint32_t n_evaluated;   /* tokens run through the model by this step (after a rewind with
                           * nothing fed, 1: the last kept position runs again for the logits
                           * of the next, and the position does not advance) */
  /* Added with log-probabilities: a struct_size that ends before `logprob` (an older header's
   * sizeof) is still accepted; those fields (and the top-n array) are then not written. Filled while
   * rlm_session_set_logprobs has turned them on; otherwise logprob and sampler_logprob are NAN
   * and n_top is 0. */
  float logprob;          /* log p(token) under the model: the log-softmax of the raw logits
                             (temperature 1; before grammar mask, bias, penalties and samplers) */
  float sampler_logprob;  /* log of the probability the sampler drew the token with: its final
                             distribution after every stage (0 for greedy: probability 1) */
  uint32_t n_top;         /* alternatives written to the rlm_session_set_logprobs array */
} rlm_step_result;

RLM_API void rlm_step_result_default(rlm_step_result* result);

/* One turn of the loop: run pending prompt tokens in batched passes (or the last sampled token),
 * sample in place on the logits, append, detect stops. Text that could begin a stop string or
 * that ends inside a UTF-8 character is held back and released when decided; a matched stop
 * string is never released. On error nothing is committed (position and text unchanged),
 * except for RLM_ERR_NO_CANDIDATES (no token can be sampled: every logit is -inf or NaN after
 * logit bias and penalties, e.g. all tokens banned): then what was pending has run, as by
 * rlm_session_eval, and the logits are left raw, so after rlm_session_set_sampling the next
 * rlm_step samples them without running the model again. `result` is untouched on error. */
RLM_API rlm_status rlm_step(rlm_session* session, rlm_step_result* result);

/* ---------------------------------------------------------------------------------------------
 * Log-probabilities and scoring
 * ------------------------------------------------------------------------------------------- */

typedef struct rlm_token_logprob {
  int32_t token;
  float logprob;          /* log-softmax of the raw logits (temperature 1) */
} rlm_token_logprob;

/* Turns log-probabilities in rlm_step_result on (enable != 0) or off. With `n_top` > 0, every
 * step also writes the n_top most probable tokens under the raw logits into `top` (caller-owned,
 * n_top entries, borrowed until logprobs are set again or the session is released), most
 * probable first, ties by lower id; rlm_step_result.n_top says how many (min(n_top, vocab)).
 * While on, a step keeps a copy of the raw logits (in session memory) and makes one more pass
 * over them; while off it costs nothing. RLM_ERR_INVALID_ARGUMENT for n_top > 0 with top NULL
 * or n_top > 4096. */
RLM_API rlm_status rlm_session_set_logprobs(rlm_session* session, int enable,
                                            rlm_token_logprob* top, uint32_t n_top);

/* Log-probabilities of `tokens` as the continuation of the sequence: logprobs[i] = log p(tokens[i]
 * | everything before it) under the raw logits (temperature 1, no bias, penalties or grammar),
 * computed in passes of min(n_batch, max_logit_rows) positions without sampling. The tokens are
 * appended to the sequence as if fed and run (pending input runs first), so scoring in pieces
 * gives the same values as scoring at once and rlm_step can continue after them; the turn
 * restarts as after feeding. The first token is scored against the logits of the position
 * before it: RLM_ERR_BAD_STATE when the sequence is empty (feed BOS or a prefix first).
 * `logprobs` (n floats), `logits` (n * vocab_size floats: row i is the raw distribution tokens[i]
 * was scored against) and `sum` (the sum of the n log-probabilities, in double) may each be NULL
 * (without `logprobs` and `sum` no log-sum-exp is computed: the passes alone run).
 * RLM_ERR_TOKEN_OUT_OF_RANGE for a token outside the vocabulary (nothing runs then);
 * RLM_ERR_CAPACITY at the position limit. */
RLM_API rlm_status rlm_session_score(rlm_session* session, const int32_t* tokens, size_t n,
                                     float* logprobs, float* logits, double* sum);

/* Cancels the calls running on the session now (rlm_step, rlm_session_eval, rlm_session_score,
 * rlm_session_beam_search): safe to call from any thread, also while such a call runs on another
 * (the one call on a session that is). The running call returns RLM_ERR_CANCELLED promptly:
 * within one layer of a forward pass (a pass that wraps the ring finishes first, so the ring
 * stays consistent), or between scoring passes and beam steps. The session stays valid at its
 * last committed position: prompt chunks that ran completely are committed and the rest stays
 * pending (a later rlm_step or rlm_session_eval runs it); a step samples nothing; scoring keeps
 * the tokens scored so far (appended); a beam search leaves the sequence as it was. No logits
 * are readable after a cancelled run. A cancel when no call is running has no effect on later
 * calls. */
RLM_API rlm_status rlm_session_cancel(rlm_session* session);

/* ---------------------------------------------------------------------------------------------
 * Snapshots and forks
 *
 * A snapshot is the state a session needs to continue exactly where it was: positions and the
 * live K/V entries (only those the ring holds for the positions so far, not the whole ring),
 * pending input, the sampling parameters, RNG and penalty history, the turn's stop state and
 * held-back text, the logits when readable. It is one position-independent block (host byte
 * order), versioned, checksummed, with a fingerprint of the model. Not included: a grammar, the
 * speculation drafter and the logprobs array (the caller's objects); a session with a grammar set
 * cannot be saved, and restore turns grammars off and ends a speculative pass. A restored or
 * forked session continues token for token as the original would (greedy and seeded sampling).
 * ------------------------------------------------------------------------------------------- */

/* Bytes rlm_session_save needs now (they grow with the position until the ring is full). */
RLM_API rlm_status rlm_session_snapshot_bytes(const rlm_session* session, size_t* bytes);

/* Writes the snapshot to out[0, cap); *n_out = its size. RLM_ERR_CAPACITY when cap is smaller
 * (*n_out then says how much is needed); RLM_ERR_UNSUPPORTED while a grammar is set. */
RLM_API rlm_status rlm_session_save(rlm_session* session, void* out, size_t cap, size_t* n_out);

/* Replaces the session's state with a snapshot's. The session may have another config if it is
 * compatible: the same KV dtype; a ring with room for every saved position, or (when the saved
 * ring had wrapped) the same n_ctx and n_sink; budgets (max_pending, penalty_window, stop
 * strings, logit bias) that hold what the snapshot holds. Errors leave the session unchanged:
 * RLM_ERR_SNAPSHOT_CORRUPT (not a snapshot, other version, truncated, checksum or values
 * invalid), RLM_ERR_SNAPSHOT_MISMATCH (other model, KV dtype, ring or build), RLM_ERR_CAPACITY
 * (a budget too small). */
RLM_API rlm_status rlm_session_restore(rlm_session* session, const void* in, size_t n);

/* A new session in `memory` (rlm_session_memory bytes for src's model and config, aligned as it
 * says) with src's config and state: the two then continue independently (other sampling, other
 * threads). Speculation, grammar and logprobs are not copied (set them on the fork). Ends a
 * speculative pass of src. Errors as rlm_session_init. Not concurrently with a call on src. */
RLM_API rlm_status rlm_session_fork(rlm_session* src, void* memory, size_t size,
                                    rlm_session** fork);

/* ---------------------------------------------------------------------------------------------
 * Beam search
 *
 * Keeps the n_beams most probable sequences (by the sum of their tokens' log-probabilities under
 * the raw logits, temperature 1) and returns the best finished ones. Each step runs every live
 * beam's last token in one batched pass (the weights are read once for all beams); from the
 * 2 * n_beams best tokens of each beam the n_beams best extensions by total log-probability
 * survive. An extension ending in an end token (the model's, unless ignore_eos, or one added with
 * rlm_session_add_stop_token) or completing a stop string finishes its sequence if it ranks
 * among the n_beams best; a sequence reaching max_tokens finishes too. Finished sequences are
 * ranked by score = logprob / n_tokens^length_penalty, and the search stops once it holds
 * n_beams finished sequences whose worst score beats the best score any live beam could still
 * reach (or when no beam is live). Width 1 with length_penalty 0 is greedy decoding, token for
 * token. Sampling parameters, grammars and speculation do not apply.
 *
 * The search runs after the sequence so far (pending input is run first) and leaves the
 * sequence as it was: feed the chosen result's tokens to continue from it. The prompt and the
 * search must fit the ring without wrapping: position + max_tokens <= n_ctx (and the sliding
 * window of models that have one), else RLM_ERR_CAPACITY.
 * ------------------------------------------------------------------------------------------- */

typedef struct rlm_beam_params {
  uint32_t struct_size;
  uint32_t n_beams;        /* width, 1 .. the session's max_beams (default 4) */
  uint32_t max_tokens;     /* tokens per sequence, 1 .. max_beam_tokens (default 0 = max_beam_tokens) */
  float length_penalty;    /* score = logprob / n_tokens^length_penalty (default 1; 0 = the sum) */
  uint32_t n_best;         /* results wanted, 1 .. n_beams (default 1) */
} rlm_beam_params;

RLM_API void rlm_beam_params_default(rlm_beam_params* params);

typedef struct rlm_beam_result {
  uint32_t struct_size;
  int32_t* tokens;         /* caller's buffer of `capacity` tokens (max_tokens suffices) */
  uint32_t capacity;
  uint32_t n_tokens;       /* out: the sequence's length (its end token included) */
  double logprob;          /* out: sum of its tokens' log-probabilities */
  double score;            /* out: logprob / n_tokens^length_penalty */
  rlm_stop_reason stop;    /* out: END_TOKEN, STOP_STRING (the tokens include the string) or MAX_TOKENS */
} rlm_beam_result;

RLM_API void rlm_beam_result_default(rlm_beam_result* result);

/* Runs a beam search and writes the n_best best finished sequences, best first, into
 * results[0, n_best) (*n_out = how many: n_best). RLM_ERR_BAD_STATE when the session has
 * max_beams 0 or the sequence is empty; RLM_ERR_INVALID_ARGUMENT for parameters out of range or
 * a result whose capacity is below a sequence it must hold (*n_out then says how many were
 * written); RLM_ERR_CAPACITY when the search does not fit the ring (see above). */
RLM_API rlm_status rlm_session_beam_search(rlm_session* session, const rlm_beam_params* params,
                                           rlm_beam_result* results, uint32_t* n_out);

/* Run pending tokens without sampling, leaving raw logits readable. A following rlm_step
 * samples from them without recomputing. */
RLM_API rlm_status rlm_session_eval(rlm_session* session);

/* Logits of the last evaluated position (vocab_size floats). After rlm_step they are the
 * sampler's working values (processed in place), before it (after rlm_session_eval, or a step
 * that returned RLM_ERR_NO_CANDIDATES) the raw model output. RLM_ERR_BAD_STATE when no position
 * has run since init, rlm_session_reset or rlm_session_rewind (any rewind, also to the current
 * position); feeding input does not drop them. */
RLM_API rlm_status rlm_session_logits(const rlm_session* session, const float** logits,
                                      size_t* n);

/* Tokens in the KV cache (the absolute position of the next token to run). */
RLM_API uint32_t rlm_session_position(const rlm_session* session);

/* Drop positions >= `position` (pending input and held-back text too), so a chat can reuse the
 * KV prefix. Allowed for any position <= the current one while the ring has not wrapped;
 * after a wrap, RLM_ERR_REWIND. rlm_step right after it (nothing fed) continues from there: it
 * runs position - 1 again for the next token's distribution (regenerate from a point). The
 * max-tokens count and stop strings start again; a grammar's parse state follows the position:
 * rewound into the turn's constrained output, the sentence continues from the tokens kept. */
RLM_API rlm_status rlm_session_rewind(rlm_session* session, uint32_t position);

/* ---------------------------------------------------------------------------------------------
 * Speculative decoding
 *
 * A drafter proposes up to n tokens after the last sampled one; rlm_step runs [last, d1..dn] in
 * one batched pass (the weights are read once for all rows) and keeps the logits of every row.
 * It then samples row 0 exactly as a plain step would, and while the sampled token equals the
 * next draft, the following rlm_step calls sample the next rows without running the model
 * (n_evaluated = 0). The first token that differs from the draft (or the token after the last
 * draft) ends the pass; draft positions past it are dropped from the cache and the ring slots
 * they had overwritten are restored. Every token is sampled by the same code, from the same
 * logits, history, RNG state and stops as plain decoding would use, so the output is identical
 * token for token to decoding without speculation, greedy or seeded sampling alike; only the
 * speed differs. Stops (end tokens, stop strings, max tokens) apply token by token: nothing
 * after a stop is released and the cache ends at the stop.
 * ------------------------------------------------------------------------------------------- */

typedef enum rlm_spec_mode {
  RLM_SPEC_OFF = 0,
  RLM_SPEC_DRAFT_MODEL = 1, /* a second session on a smaller model with the same vocabulary */
  RLM_SPEC_LOOKUP = 2       /* prompt lookup: the continuation of the latest earlier occurrence
                               of the last n tokens in the session's own history (prompt and
                               output: the positions the ring holds); no second model */
} rlm_spec_mode;

typedef struct rlm_speculation {
  uint32_t struct_size;
  rlm_spec_mode mode;    /* default RLM_SPEC_OFF */
  uint32_t n_max;        /* most draft tokens per pass; 0 = the session's max_draft (default 0).
                            The length adapts: shorter after a rejection, longer (up to n_max)
                            after a pass that accepted every draft. */
  float p_min;           /* draft model: stop drafting when its top probability falls below
                            (default 0.75) */
  rlm_session* draft;    /* draft model session (borrowed; caller memory and thread count of its
                            own). While set, this session drives it: do not use it directly.
                            Its model must have the same vocabulary (size and every piece), and
                            its config max_draft >= n_max - 1 (its own undo area). Clearing or
                            changing the speculation hands it back consistent; after releasing
                            the target without that, reset the draft before using it alone. */
  uint32_t ngram_min;    /* lookup: shortest suffix matched (default 2) */
  uint32_t ngram_max;    /* lookup: longest suffix matched, tried first (default 4; max 16) */
} rlm_speculation;

RLM_API void rlm_speculation_default(rlm_speculation* spec);

/* Sets (or with NULL / mode RLM_SPEC_OFF clears) the session's drafter. RLM_ERR_UNSUPPORTED when
 * the session was configured with max_draft 0; RLM_ERR_INVALID_ARGUMENT for a draft session
 * whose vocabulary differs (the message says what differs), that is this session itself or has
 * too small a max_draft, or for out-of-range numbers. Resets the statistics. */
RLM_API rlm_status rlm_session_set_speculation(rlm_session* session, const rlm_speculation* spec);

typedef struct rlm_spec_stats {
  uint32_t struct_size;
  uint64_t verify_passes;  /* passes of the target that checked at least one draft */
  uint64_t drafted;        /* draft tokens proposed (and run) */
  uint64_t accepted;       /* draft tokens that matched the sampled token */
  uint64_t draft_passes;   /* forward passes of the draft model */
} rlm_spec_stats;

RLM_API void rlm_spec_stats_default(rlm_spec_stats* stats);
/* Counters since the last rlm_session_set_speculation (or init). */
RLM_API rlm_status rlm_session_spec_stats(const rlm_session* session, rlm_spec_stats* stats);

/* ---------------------------------------------------------------------------------------------
 * Grammars (constrained decoding): only tokens that can continue a sentence of the grammar are
 * sampled. Grammars are GBNF, the format of llama.cpp's .gbnf files (README "Grammars (GBNF)");
 * JSON Schemas compile to GBNF first (rlm_json_schema_to_gbnf).
 * ------------------------------------------------------------------------------------------- */

typedef struct rlm_grammar rlm_grammar; /* opaque; lives in the memory given to compile */

/* Bytes rlm_grammar_compile needs for `len` bytes of GBNF against `model`'s vocabulary (an upper
 * bound from the text's length and the vocabulary), in *size. Alignment: 64. */
RLM_API rlm_status rlm_grammar_memory(const rlm_model* model, const char* gbnf, size_t len,
                                      size_t* size);
/* Compiles GBNF into `memory` (64-byte aligned, `size` >= rlm_grammar_memory's answer). The
 * grammar is read-only afterwards: any number of sessions on this model, on any threads, may use
 * it; it borrows the model and must not outlive it (nor its memory be reused) while a session
 * uses it. Errors: RLM_ERR_GRAMMAR / RLM_ERR_INVALID_UTF8 with "line L, column C: ..." in
 * `message` (cap bytes, NUL-terminated; may be NULL with cap 0), RLM_ERR_BUFFER_TOO_SMALL,
 * RLM_ERR_MISALIGNED. Allocates nothing. */
RLM_API rlm_status rlm_grammar_compile(const rlm_model* model, const char* gbnf, size_t len,
                                       void* memory, size_t size, rlm_grammar** grammar,
                                       char* message, size_t cap);
/* The built-in "any JSON value" grammar (GBNF, NUL-terminated, static). */
RLM_API const char* rlm_json_gbnf(void);
/* JSON Schema -> GBNF. Scratch: rlm_json_schema_scratch_bytes(schema, len) bytes, 64-aligned.
 * Writes the GBNF into out[0, cap) NUL-terminated; *out_len = its length (also when cap is too
 * small: then RLM_ERR_BUFFER_TOO_SMALL; out may be NULL with cap 0 to ask). Unsupported keywords
 * and invalid schemas: RLM_ERR_GRAMMAR (or RLM_ERR_INVALID_ARGUMENT for invalid JSON) with the
 * keyword and its JSON pointer in `message`. Supported subset: README "JSON Schema". */
RLM_API size_t rlm_json_schema_scratch_bytes(const char* schema, size_t len);
RLM_API rlm_status rlm_json_schema_to_gbnf(const char* schema, size_t len, void* scratch,
                                           size_t scratch_size, char* out, size_t cap,
                                           size_t* out_len, char* message, size_t message_cap);

/* Constrains the session's output to `grammar` (NULL: off). Each turn's output (the tokens
 * rlm_step samples after input was fed) must be a sentence of the grammar: before sampling,
 * every token that cannot continue it gets -inf, end tokens only where the grammar may end; the
 * turn stops with RLM_STOP_GRAMMAR once it is complete and nothing may follow. Feeding input
 * starts a new turn and the grammar again from its start (so do rewind and reset). Composes with
 * logit bias, penalties, every sampler, stop strings and speculative decoding (drafts the grammar
 * refuses are simply not accepted). RLM_ERR_BAD_STATE when the session has grammar_state_bytes 0;
 * RLM_ERR_INVALID_ARGUMENT for a grammar compiled against another model. Setting a grammar
 * (even the same one again) forgets the session's remembered masks. Costs: a walk over the
 * vocabulary for a parse state not met before, a lookup for one the cache remembers
 * (grammar_cache_bytes); `ringlm bench --grammar` measures both (README). */
RLM_API rlm_status rlm_session_set_grammar(rlm_session* session, const rlm_grammar* grammar);

/* ---------------------------------------------------------------------------------------------
 * Tokenizer
 * ------------------------------------------------------------------------------------------- */

/* Encodes text into `tokens` (capacity `cap`), BOS first when add_bos. *n_out receives the count;
 * RLM_ERR_CAPACITY if `cap` is too small (then *n_out is the count needed when known, else 0).
 * Uses `scratch` (at least rlm_tokenize_scratch_bytes(len) bytes, 8-aligned) for working state.
 * Parses special-token text (as rlm_tokenize_ex with RLM_TOKENIZE_PARSE_SPECIALS). */
RLM_API size_t rlm_tokenize_scratch_bytes(const rlm_model* model, size_t text_len);
RLM_API rlm_status rlm_tokenize(const rlm_model* model, const char* text, size_t len,
                                int add_bos, int32_t* tokens, size_t cap, size_t* n_out,
                                void* scratch, size_t scratch_size);

/* rlm_tokenize with `flags` (RLM_TOKENIZE_PARSE_SPECIALS | RLM_TOKENIZE_ADD_BOS, or 0: no BOS,
 * special-token text stays text) in place of add_bos. Unknown bits: RLM_ERR_INVALID_ARGUMENT. */
RLM_API rlm_status rlm_tokenize_ex(const rlm_model* model, const char* text, size_t len,
                                   uint32_t flags, int32_t* tokens, size_t cap, size_t* n_out,
                                   void* scratch, size_t scratch_size);

/* Bytes of one token's piece as text (after "▁" -> " " and <0xNN> -> byte); may be a partial
 * UTF-8 sequence. Returns RLM_ERR_CAPACITY if `cap` is too small (*n_out = bytes needed). */
RLM_API rlm_status rlm_token_to_bytes(const rlm_model* model, int32_t token, char* out,
                                      size_t cap, size_t* n_out);

/* The bytes `token` adds to a text when it follows `prev` (-1: at the start of a text, which is
 * rlm_token_to_bytes): differs from the piece only where the tokenizer's rules depend on the
 * position (SentencePiece drops the leading space of the first piece after BOS or at the start).
 * RLM_ERR_TOKEN_OUT_OF_RANGE for either id out of range (prev may be -1); RLM_ERR_CAPACITY as
 * rlm_token_to_bytes. */
RLM_API rlm_status rlm_token_text_after(const rlm_model* model, int32_t prev, int32_t token,
                                        char* out, size_t cap, size_t* n_out);

/* The id of the token whose piece is exactly `piece` (e.g. "<|im_end|>"), or RLM_ERR_NOT_FOUND. */
RLM_API rlm_status rlm_token_lookup(const rlm_model* model, const char* piece, size_t len,
                                    int32_t* id);

/* The chat template text the model file carries (borrowed from the model bytes; not
 * NUL-terminated), or RLM_ERR_NOT_FOUND when it has none. */
RLM_API rlm_status rlm_model_chat_template(const rlm_model* model, const char** text,
                                           size_t* len);

/* Whether generation normally ends at `token` (the model's EOS / EOT tokens). */
RLM_API int rlm_token_is_end(const rlm_model* model, int32_t token);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* RINGLM_RINGLM_H_ */
