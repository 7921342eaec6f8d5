// ringlm.hpp: header-only C++17 RAII wrapper over the C ABI in ringlm.h.
//
// No exceptions (works with -fno-exceptions -fno-rtti), no allocation except in the two helpers
// marked "tools only" (AlignedMemory and Session::allocate). Every fallible call returns a
// Status or a Result<T>: a status code, its name (rlm_status_string) and a message, plus the
// value on success.
//
//   auto model = ringlm::Model::open(bytes, size);          // bytes: mmap'd file, 64-aligned
//   if (!model) { fprintf(stderr, "%s: %s\n", model.status_name(), model.message()); ... }
//   ringlm::SessionConfig cfg;                              // rlm_session_config + defaults
//   cfg.n_ctx = 256;
//   auto need = ringlm::Session::memory_required(*model, cfg);   // {bytes, alignment}
//   alignas(64) static unsigned char arena[8 << 20];        // caller memory, borrowed
//   auto session = ringlm::Session::create(*model, arena, sizeof arena, cfg);
//   session->set_sampling(ringlm::Sampling::greedy());
//   session->generate("Once upon a time", [](std::string_view text) { fwrite(...); });
//
// Lifetimes are those of the C ABI: the model bytes outlive the Model; a Model outlives its
// Sessions and never moves (it is neither copyable nor movable: the runtime's sessions point at
// its storage; Model::open builds it in place inside the returned Result); session memory
// outlives the Session, which is movable. ~Session calls rlm_session_release (and frees the
// memory when the Session owns it). The text of a StepResult is borrowed until the next call
// on the same session.
#ifndef RINGLM_RINGLM_HPP_
#define RINGLM_RINGLM_HPP_

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <new>
#include <string_view>
#include <type_traits>
#include <utility>

#include "ringlm.h"

namespace ringlm {

// A status code with its name and a message ("" when there is none). Messages from the runtime
// are borrowed from the model or session storage (valid until the next call on it).
class Status {
 public:
  constexpr Status() noexcept = default;
  constexpr Status(rlm_status code, const char* message = "") noexcept  // NOLINT: implicit
      : code_(code), message_(message ? message : "") {}

  constexpr bool ok() const noexcept { return code_ == RLM_OK; }
  constexpr explicit operator bool() const noexcept { return ok(); }
  constexpr rlm_status code() const noexcept { return code_; }
  // "RLM_OK", "RLM_ERR_BUFFER_TOO_SMALL", ...
  const char* name() const noexcept { return rlm_status_string(code_); }
  constexpr const char* message() const noexcept { return message_; }

 private:
  rlm_status code_ = RLM_OK;
  const char* message_ = "";
};

namespace detail {
struct InPlace {};
}  // namespace detail

// Status plus a value when ok(): an `expected`-like holder without exceptions. Access the value
// only when ok() (checked with an assert-like trap in debug builds via the caller's discipline;
// the wrapper never reads it otherwise). Movable when T is.
template <class T>
class [[nodiscard]] Result {
 public:
  // An error (code must not be RLM_OK).
  Result(rlm_status code, const char* message = "") noexcept  // NOLINT: implicit
      : status_(code, message) {}
  Result(Status st) noexcept : status_(st) {}  // NOLINT: implicit
  // A value.
  Result(T&& v) noexcept : has_(true) { new (&storage_) T(std::move(v)); }  // NOLINT
  Result(const T& v) noexcept : has_(true) { new (&storage_) T(v); }        // NOLINT
  // Builds the value in place, then lets `f(T&)` decide the status (the value is kept either
  // way, so a message pointing into it stays valid). Used for non-movable types (Model).
  template <class F, class... A>
  Result(detail::InPlace, F&& f, A&&... args) noexcept : has_(true) {
    T* v = new (&storage_) T(std::forward<A>(args)...);
    status_ = f(*v);
  }

  Result(Result&& o) noexcept : status_(o.status_), has_(o.has_) {
    if (has_) new (&storage_) T(std::move(*o.ptr()));
  }
  Result& operator=(Result&& o) noexcept {
    if (this != &o) {
      reset();
      status_ = o.status_;
      has_ = o.has_;
      if (has_) new (&storage_) T(std::move(*o.ptr()));
    }
    return *this;
  }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  ~Result() { reset(); }

  bool ok() const noexcept { return status_.ok(); }
  explicit operator bool() const noexcept { return ok(); }
  const Status& status() const noexcept { return status_; }
  rlm_status code() const noexcept { return status_.code(); }
  const char* status_name() const noexcept { return status_.name(); }
  const char* message() const noexcept { return status_.message(); }

  // Only when ok().
  T& value() & noexcept { return *ptr(); }
  const T& value() const& noexcept { return *ptr(); }
  T&& value() && noexcept { return std::move(*ptr()); }
  T& operator*() & noexcept { return *ptr(); }
  const T& operator*() const& noexcept { return *ptr(); }
  T&& operator*() && noexcept { return std::move(*ptr()); }
  T* operator->() noexcept { return ptr(); }
  const T* operator->() const noexcept { return ptr(); }

 private:
  T* ptr() noexcept { return std::launder(reinterpret_cast<T*>(&storage_)); }
  const T* ptr() const noexcept { return std::launder(reinterpret_cast<const T*>(&storage_)); }
  void reset() noexcept {
    if (has_) ptr()->~T();
    has_ = false;
  }

  Status status_;
  bool has_ = false;
  alignas(T) unsigned char storage_[sizeof(T)];
};

// The C structs with their defaults filled in; usable wherever the C struct is expected.
struct SessionConfig : rlm_session_config {
  SessionConfig() noexcept : rlm_session_config() { rlm_session_config_default(this); }
};

struct Sampling : rlm_sampling {
  Sampling() noexcept : rlm_sampling() { rlm_sampling_default(this); }
  // Temperature 0: argmax, lowest id on ties (all other stages at their defaults).
  static Sampling greedy() noexcept {
    Sampling s;
    s.temperature = 0.0f;
    return s;
  }
};

struct ModelInfo : rlm_model_info {
  ModelInfo() noexcept : rlm_model_info() { rlm_model_info_default(this); }
};

// Bytes and alignment a session needs (rlm_session_memory).
struct MemoryRequirement {
  size_t bytes = 0;
  size_t alignment = 0;
};

// One step's outcome; `text` is borrowed until the next call on the session.
struct StepResult {
  int32_t token = -1;
  uint32_t position = 0;
  std::string_view text;
  rlm_stop_reason stop = RLM_STOP_NONE;
  uint32_t n_evaluated = 0;
  // While Session::set_logprobs is on (else NAN, NAN, 0): see rlm_step_result.
  float logprob = 0.0f;
  float sampler_logprob = 0.0f;
  uint32_t n_top = 0;

  bool done() const noexcept { return stop != RLM_STOP_NONE; }
};

// A verified view over model bytes (which it borrows). Not copyable, not movable: sessions
// point at its storage. Obtain one with Model::open; it lives inside the returned Result.
class Model {
 public:
  // Verifies `bytes` (64-byte aligned, e.g. mmap'd or an aligned embedded array) in place.
  // On failure message() explains (the text lives in the Result's storage).
  static Result<Model> open(const void* bytes, size_t size) noexcept {
    return Result<Model>(
        detail::InPlace{},
        [bytes, size](Model& m) {
          const rlm_status st = rlm_model_open(bytes, size, &m.model_);
          return st == RLM_OK ? Status() : Status(st, rlm_model_error(&m.model_));
        });
  }

  Model() noexcept : model_() {}  // an unopened model; use Model::open
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  Model(Model&&) = delete;
  Model& operator=(Model&&) = delete;

  Result<ModelInfo> info() const noexcept {
    ModelInfo info;
    const rlm_status st = rlm_model_get_info(&model_, &info);
    if (st != RLM_OK) return Result<ModelInfo>(st);
    return Result<ModelInfo>(info);
  }

  // Bytes of one token's piece as text (may be a partial UTF-8 sequence); a view into `buf`.
  Result<std::string_view> token_text(int32_t token, char* buf, size_t cap) const noexcept {
    size_t n = 0;
    const rlm_status st = rlm_token_to_bytes(&model_, token, buf, cap, &n);
    if (st != RLM_OK) return Result<std::string_view>(st);
    return Result<std::string_view>(std::string_view(buf, n));
  }

  // Scratch bytes tokenize() needs for a text of `text_len` bytes (0 for an unopened model).
  size_t tokenize_scratch_bytes(size_t text_len) const noexcept {
    return rlm_tokenize_scratch_bytes(&model_, text_len);
  }

  // rlm_tokenize_ex: `flags` is RLM_TOKENIZE_PARSE_SPECIALS | RLM_TOKENIZE_ADD_BOS or 0 (0 for
  // text a user or client supplied: special-token text stays text). Writes up to `cap` ids and
  // the count to *n_out; RLM_ERR_CAPACITY when cap is too small (*n_out = the count needed).
  // `scratch`: tokenize_scratch_bytes(text.size()) bytes, 8-aligned.
  Status tokenize(std::string_view text, uint32_t flags, int32_t* tokens, size_t cap,
                  size_t* n_out, void* scratch, size_t scratch_size) const noexcept {
    const rlm_status st = rlm_tokenize_ex(&model_, text.data(), text.size(), flags, tokens, cap,
                                          n_out, scratch, scratch_size);
    return st == RLM_OK ? Status() : Status(st);
  }

  const rlm_model* get() const noexcept { return &model_; }

 private:
  rlm_model model_;
};

// Owning, aligned heap block (std::aligned_alloc). For tools, tests and desktop programs only:
// on a device, give the session memory the app already owns (static array, mmap, a Java direct
// buffer...). Empty (data() == nullptr) when the allocation fails.
class AlignedMemory {
 public:
  AlignedMemory() noexcept = default;
  AlignedMemory(size_t alignment, size_t bytes) noexcept {
    if (alignment == 0) alignment = alignof(max_align_t);
    const size_t rounded = (bytes + alignment - 1) / alignment * alignment;  // aligned_alloc rule
#if defined(__ANDROID__) && defined(__ANDROID_API__) && __ANDROID_API__ < 28
    void* p = nullptr;
    data_ = posix_memalign(&p, alignment, rounded ? rounded : alignment) == 0 ? p : nullptr;
#else
    data_ = std::aligned_alloc(alignment, rounded ? rounded : alignment);
#endif
    size_ = data_ ? bytes : 0;
  }
  AlignedMemory(AlignedMemory&& o) noexcept : data_(o.data_), size_(o.size_) {
    o.data_ = nullptr;
    o.size_ = 0;
  }
  AlignedMemory& operator=(AlignedMemory&& o) noexcept {
    if (this != &o) {
      free(data_);
      data_ = o.data_;
      size_ = o.size_;
      o.data_ = nullptr;
      o.size_ = 0;
    }
    return *this;
  }
  AlignedMemory(const AlignedMemory&) = delete;
  AlignedMemory& operator=(const AlignedMemory&) = delete;
  ~AlignedMemory() { free(data_); }

  explicit operator bool() const noexcept { return data_ != nullptr; }
  void* data() const noexcept { return data_; }
  size_t size() const noexcept { return size_; }  // the bytes asked for

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// A grammar compiled against a model's vocabulary (rlm_grammar_compile, README "Grammars"), in
// memory it borrows (compile) or owns (allocate*, tools only). Read-only once compiled: any
// number of sessions on the model may use it, on any threads; it must outlive them and the
// model must outlive it. Not copyable, not movable (sessions point into its memory and its error
// message lives in it): it lives inside the returned Result.
class Grammar {
 public:
  // Bytes compile() needs for this GBNF (64-byte alignment).
  static Result<size_t> memory_required(const Model& model, std::string_view gbnf) noexcept {
    size_t n = 0;
    const rlm_status st = rlm_grammar_memory(model.get(), gbnf.data(), gbnf.size(), &n);
    if (st != RLM_OK) return Result<size_t>(st);
    return Result<size_t>(n);
  }

  // Compiles into `memory` (borrowed, 64-byte aligned, memory_required bytes). Errors carry
  // "line L, column C: ..." in message(). Allocates nothing.
  static Result<Grammar> compile(const Model& model, std::string_view gbnf, void* memory,
                                 size_t size) noexcept {
    return Result<Grammar>(detail::InPlace{}, [&](Grammar& g) {
      return g.build(model, gbnf, memory, size);
    });
  }

  // Tools only: allocates the memory (AlignedMemory) and owns it.
  static Result<Grammar> allocate(const Model& model, std::string_view gbnf) noexcept {
    return Result<Grammar>(detail::InPlace{}, [&](Grammar& g) { return g.own(model, gbnf); });
  }

  // Tools only: a JSON Schema (README "JSON Schema") converted to GBNF, then allocate().
  static Result<Grammar> allocate_json_schema(const Model& model,
                                              std::string_view schema) noexcept {
    return Result<Grammar>(detail::InPlace{}, [&](Grammar& g) -> Status {
      AlignedMemory scratch(64, rlm_json_schema_scratch_bytes(schema.data(), schema.size()));
      if (!scratch) return Status(RLM_ERR_BUFFER_TOO_SMALL, "cannot allocate schema scratch");
      size_t len = 0;
      rlm_status st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), scratch.data(),
                                              scratch.size(), nullptr, 0, &len, g.msg_,
                                              sizeof g.msg_);
      if (st != RLM_ERR_BUFFER_TOO_SMALL) return Status(st, g.msg_);  // (RLM_OK is impossible)
      AlignedMemory text(1, len + 1);
      if (!text) return Status(RLM_ERR_BUFFER_TOO_SMALL, "cannot allocate the schema's GBNF");
      st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), scratch.data(), scratch.size(),
                                   static_cast<char*>(text.data()), len + 1, &len, g.msg_,
                                   sizeof g.msg_);
      if (st != RLM_OK) return Status(st, g.msg_);
      return g.own(model, std::string_view(static_cast<const char*>(text.data()), len));
    });
  }

  Grammar() noexcept = default;  // not compiled; use compile / allocate
  Grammar(const Grammar&) = delete;
  Grammar& operator=(const Grammar&) = delete;
  Grammar(Grammar&&) = delete;
  Grammar& operator=(Grammar&&) = delete;

  const rlm_grammar* get() const noexcept { return g_; }
  explicit operator bool() const noexcept { return g_ != nullptr; }

 private:
  Status build(const Model& model, std::string_view gbnf, void* memory, size_t size) noexcept {
    const rlm_status st = rlm_grammar_compile(model.get(), gbnf.data(), gbnf.size(), memory,
                                              size, &g_, msg_, sizeof msg_);
    return st == RLM_OK ? Status() : Status(st, msg_);
  }
  Status own(const Model& model, std::string_view gbnf) noexcept {
    Result<size_t> need = memory_required(model, gbnf);
    if (!need) return need.status();
    owned_ = AlignedMemory(64, *need);
    if (!owned_) return Status(RLM_ERR_BUFFER_TOO_SMALL, "cannot allocate grammar memory");
    return build(model, gbnf, owned_.data(), *need);
  }

  rlm_grammar* g_ = nullptr;
  AlignedMemory owned_;
  char msg_[256] = "";
};

// A generation session in memory it borrows (create) or owns (allocate, tools only).
// Movable; one thread at a time.
class Session {
 public:
  static Result<MemoryRequirement> memory_required(
      const Model& model, const rlm_session_config& config = SessionConfig()) noexcept {
    MemoryRequirement m;
    const rlm_status st = rlm_session_memory(model.get(), &config, &m.bytes, &m.alignment);
    if (st != RLM_OK) return Result<MemoryRequirement>(st);
    return Result<MemoryRequirement>(m);
  }

  // Carves the session out of `memory` (borrowed: must outlive the Session and be aligned as
  // memory_required says). Allocates nothing.
  static Result<Session> create(const Model& model, void* memory, size_t size,
                                const rlm_session_config& config = SessionConfig()) noexcept {
    rlm_session* s = nullptr;
    const rlm_status st = rlm_session_init(model.get(), &config, memory, size, &s);
    if (st != RLM_OK) return Result<Session>(st);
    return Result<Session>(Session(s, AlignedMemory(), size));
  }

  // Tools only: allocates exactly the memory the session needs (AlignedMemory) and owns it.
  // RLM_ERR_BUFFER_TOO_SMALL with message "cannot allocate session memory" when the heap says no.
  static Result<Session> allocate(const Model& model,
                                  const rlm_session_config& config = SessionConfig()) noexcept {
    Result<MemoryRequirement> need = memory_required(model, config);
    if (!need) return Result<Session>(need.status());
    AlignedMemory mem(need->alignment, need->bytes);
    if (!mem) return Result<Session>(RLM_ERR_BUFFER_TOO_SMALL, "cannot allocate session memory");
    rlm_session* s = nullptr;
    const rlm_status st = rlm_session_init(model.get(), &config, mem.data(), need->bytes, &s);
    if (st != RLM_OK) return Result<Session>(st);
    return Result<Session>(Session(s, std::move(mem), need->bytes));
  }

  Session() noexcept = default;  // empty; assign a created one
  Session(Session&& o) noexcept
      : s_(std::exchange(o.s_, nullptr)), owned_(std::move(o.owned_)),
        bytes_(std::exchange(o.bytes_, 0)) {}
  Session& operator=(Session&& o) noexcept {
    if (this != &o) {
      release();
      s_ = std::exchange(o.s_, nullptr);
      owned_ = std::move(o.owned_);
      bytes_ = std::exchange(o.bytes_, 0);
    }
    return *this;
  }
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;
  ~Session() { release(); }

  // rlm_session_release (joins worker threads); then the memory may be reused. Idempotent.
  void release() noexcept {
    if (s_) rlm_session_release(s_);
    s_ = nullptr;
    owned_ = AlignedMemory();
    bytes_ = 0;
  }

  explicit operator bool() const noexcept { return s_ != nullptr; }
  rlm_session* get() const noexcept { return s_; }
  size_t memory_bytes() const noexcept { return bytes_; }
  bool owns_memory() const noexcept { return static_cast<bool>(owned_); }
  // Message for the last failed call ("" if none).
  const char* error() const noexcept { return s_ ? rlm_session_error(s_) : ""; }

  // Input: text is tokenized in the runtime (BOS per the model at position 0). This form parses
  // special-token text (rlm_session_feed_text); for text a user or client supplied, use
  // feed(text, 0) so "<|im_end|>" typed by a user stays text.
  Status feed(std::string_view text) noexcept {
    return check(rlm_session_feed_text(s_, text.data(), text.size()));
  }
  // rlm_session_feed_text_ex: flags RLM_TOKENIZE_PARSE_SPECIALS or 0.
  Status feed(std::string_view text, uint32_t flags) noexcept {
    return check(rlm_session_feed_text_ex(s_, text.data(), text.size(), flags));
  }
  Status feed_tokens(const int32_t* tokens, size_t n) noexcept {
    return check(rlm_session_feed_tokens(s_, tokens, n));
  }

  Result<StepResult> step() noexcept {
    rlm_step_result r;
    rlm_step_result_default(&r);
    const rlm_status st = rlm_step(s_, &r);
    if (st != RLM_OK) return Result<StepResult>(st, error());
    StepResult out;
    out.token = r.token;
    out.position = r.position;
    out.text = std::string_view(r.text ? r.text : "", r.text_len);
    out.stop = r.stop;
    out.n_evaluated = r.n_evaluated;
    out.logprob = r.logprob;
    out.sampler_logprob = r.sampler_logprob;
    out.n_top = r.n_top;
    return Result<StepResult>(out);
  }

  // Log-probabilities in every StepResult; `top` (n_top entries, borrowed while set) receives the
  // n_top most probable tokens of each step (rlm_session_set_logprobs).
  Status set_logprobs(bool enable, rlm_token_logprob* top = nullptr, uint32_t n_top = 0) noexcept {
    return check(rlm_session_set_logprobs(s_, enable ? 1 : 0, top, n_top));
  }
  // rlm_session_beam_search: the params.n_best best sequences into results[0, *n_out) (the
  // caller's buffers; the session's config needs max_beams > 0).
  Status beam_search(const rlm_beam_params& params, rlm_beam_result* results,
                     uint32_t* n_out) noexcept {
    return check(rlm_session_beam_search(s_, &params, results, n_out));
  }
  // rlm_session_score: log-probabilities of `tokens` after the sequence (appended to it). Any
  // output may be null; `logits` takes n * vocab_size floats.
  Status score(const int32_t* tokens, size_t n, float* logprobs, float* logits = nullptr,
               double* sum = nullptr) noexcept {
    return check(rlm_session_score(s_, tokens, n, logprobs, logits, sum));
  }

  // Feeds `prompt` and steps until a stop, calling `on_text` with each step's output. The
  // callback takes (std::string_view) or (const StepResult&) and returns void, or bool (false
  // ends the turn early: the result is then RLM_STOP_NONE). Returns the stop reason.
  template <class F>
  Result<rlm_stop_reason> generate(std::string_view prompt, F&& on_text) noexcept {
    Status st = feed(prompt);
    if (!st) return Result<rlm_stop_reason>(st);
    return resume(std::forward<F>(on_text));
  }

  // Like generate, without feeding anything (continue after feed()/feed_tokens()).
  template <class F>
  Result<rlm_stop_reason> resume(F&& on_text) noexcept {
    for (;;) {
      Result<StepResult> r = step();
      if (!r) return Result<rlm_stop_reason>(r.status());
      if (!deliver(on_text, *r)) return Result<rlm_stop_reason>(RLM_STOP_NONE);
      if (r->done()) return Result<rlm_stop_reason>(r->stop);
    }
  }

  Status eval() noexcept { return check(rlm_session_eval(s_)); }

  struct Logits {
    const float* data = nullptr;
    size_t size = 0;
  };
  Result<Logits> logits() const noexcept {
    Logits l;
    const rlm_status st = rlm_session_logits(s_, &l.data, &l.size);
    if (st != RLM_OK) return Result<Logits>(st, error());
    return Result<Logits>(l);
  }

  // Sampling and stops.
  Status set_sampling(const rlm_sampling& sampling) noexcept {
    return check(rlm_session_set_sampling(s_, &sampling));
  }
  Status add_stop_string(std::string_view text) noexcept {
    return check(rlm_session_add_stop_string(s_, text.data(), text.size()));
  }
  Status add_stop_token(int32_t token) noexcept {
    return check(rlm_session_add_stop_token(s_, token));
  }
  Status clear_stops() noexcept { return check(rlm_session_clear_stops(s_)); }
  Status set_max_tokens(uint32_t n) noexcept { return check(rlm_session_set_max_tokens(s_, n)); }
  // Speculative decoding (the session's config needs max_draft > 0); nullptr turns it off. A
  // draft session in `spec.draft` is borrowed and driven by this session while set.
  Status set_speculation(const rlm_speculation* spec) noexcept {
    return check(rlm_session_set_speculation(s_, spec));
  }
  Result<rlm_spec_stats> spec_stats() const noexcept {
    rlm_spec_stats st;
    rlm_spec_stats_default(&st);
    const rlm_status code = rlm_session_spec_stats(s_, &st);
    if (code != RLM_OK) return Result<rlm_spec_stats>(code, rlm_session_error(s_));
    return Result<rlm_spec_stats>(st);
  }
  // Constrains each turn's output to `grammar` (borrowed while set; nullptr turns it off). The
  // session's config needs grammar_state_bytes > 0 (and grammar_cache_bytes for remembered masks).
  Status set_grammar(const Grammar* grammar) noexcept {
    return check(rlm_session_set_grammar(s_, grammar ? grammar->get() : nullptr));
  }
  Status set_ignore_eos(bool ignore) noexcept {
    return check(rlm_session_set_ignore_eos(s_, ignore ? 1 : 0));
  }

  // Position and history.
  uint32_t position() const noexcept { return rlm_session_position(s_); }
  Status rewind(uint32_t position) noexcept { return check(rlm_session_rewind(s_, position)); }
  Status reset() noexcept { return check(rlm_session_reset(s_)); }

 private:
  Session(rlm_session* s, AlignedMemory owned, size_t bytes) noexcept
      : s_(s), owned_(std::move(owned)), bytes_(bytes) {}

  Status check(rlm_status st) const noexcept {
    return st == RLM_OK ? Status() : Status(st, error());
  }

  template <class F>
  static bool deliver(F& f, const StepResult& r) {
    if constexpr (std::is_invocable_v<F&, const StepResult&>) {
      if constexpr (std::is_same_v<std::invoke_result_t<F&, const StepResult&>, bool>) {
        return f(r);
      } else {
        f(r);
        return true;
      }
    } else {
      static_assert(std::is_invocable_v<F&, std::string_view>,
                    "generate callback takes (std::string_view) or (const StepResult&)");
      if constexpr (std::is_same_v<std::invoke_result_t<F&, std::string_view>, bool>) {
        return f(r.text);
      } else {
        f(r.text);
        return true;
      }
    }
  }

  rlm_session* s_ = nullptr;
  AlignedMemory owned_;
  size_t bytes_ = 0;
};

}  // namespace ringlm

#endif  // RINGLM_RINGLM_HPP_
