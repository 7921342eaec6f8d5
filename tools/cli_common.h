// Flags shared by the verbs that run a session (generate, chat): sampling and session config.
#ifndef RINGLM_TOOLS_CLI_COMMON_H_
#define RINGLM_TOOLS_CLI_COMMON_H_

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

struct SessionFlags {
  rlm_sampling sampling;
  rlm_session_config config;
  std::vector<rlm_logit_bias> logit_bias;
  // --dry-sequence-breaker: once given, these replace the defaults (empty: none).
  bool dry_breakers_given = false;
  std::vector<std::string> dry_breakers;
  std::vector<const char*> dry_breaker_ptrs;  // into dry_breakers (finish_session_flags)
  SessionFlags() {
    rlm_sampling_default(&sampling);
    rlm_session_config_default(&config);
  }
};

// Help text for the flags parse_session_flag understands.
extern const char kSessionFlagsHelp[];

// If argv[*i] is one of the shared flags, consumes it (and its value), sets *handled and
// returns false on a bad value (message printed, prefixed with `verb`). Otherwise *handled=false.
bool parse_session_flag(const char* verb, int argc, char** argv, int* i, SessionFlags* f,
                        bool* handled);

// Applies f.logit_bias and f.dry_breakers to f.sampling (pointers into f) — call after parsing,
// before use, and not again after copying f.
void finish_session_flags(SessionFlags* f);

// Flag values that name a CLI flag in their messages, checked before the runtime sees the
// config (its own messages name rlm_session_config fields): --ctx >= 2, --sinks < --ctx (or the
// model's context), --threads in [1, 64]. Prints "ringlm VERB: ..." and returns false on a problem.
bool check_session_flags(const char* verb, const rlm_model* model,
                         const rlm_session_config& cfg);

// --seed: a decimal in [0, 2^64), or -1 for a random seed (*random = true). Anything else
// (other negatives, overflow, trailing text) is false.
bool parse_seed(const char* s, uint64_t* out, bool* random);

// -n: a u32, or -1 meaning unlimited (0, the session's "no limit").
bool parse_n_predict(const char* s, uint32_t* out);

// Largest text file `generate -f` and `tokenize --file` read: 64 MiB (rlm_session_config's
// max_text_bytes limit).
constexpr size_t kMaxTextFileBytes = size_t{64} << 20;

// Reads the bytes of `path` ("-": standard input, which may be a pipe) into *out, at most
// max_bytes. Other paths must be regular files (a device such as /dev/zero, a directory or a
// FIFO is refused). false with *err set ("cannot open ...", "... is not a regular file",
// "... is larger than N bytes").
bool read_text_input(const std::string& path, size_t max_bytes, std::string* out,
                     std::string* err);

// rlm_tokenize_ex into *out (replaced), the buffer grown to the count the runtime reports;
// scratch on the heap. false with *err set on failure.
bool tokenize_text(const rlm_model* model, const std::string& text, uint32_t flags,
                   std::vector<int32_t>* out, std::string* err);

// A session in memory the tool owns (one aligned block from the C library's allocator); the
// runtime only borrows it. The one open sequence of the verbs that run a session on the C ABI
// (chat, bench): size query, allocation, init, sampling.
class CliSession {
 public:
  CliSession() = default;
  ~CliSession() { close(); }
  CliSession(const CliSession&) = delete;
  CliSession& operator=(const CliSession&) = delete;

  // Sizes the block for `config` (a refused config is reported with rlm_session_config_check's
  // reason), allocates it, initialises the session and applies `sampling` (may be null). On
  // failure prints "ringlm VERB: ..." to stderr and returns false; the object stays closed.
  bool open(const char* verb, const rlm_model* model, const rlm_session_config& config,
            const rlm_sampling* sampling);
  // Releases the session (joining its workers) and frees the block. Idempotent.
  void close();

  rlm_session* get() const { return s_; }
  size_t bytes() const { return bytes_; }  // the session block's size

 private:
  rlm_session* s_ = nullptr;
  void* mem_ = nullptr;
  size_t bytes_ = 0;
};

bool parse_u32(const char* s, uint32_t* out);

// Monotonic seconds, for the tools' timings.
double now_s();
bool parse_f32(const char* s, float* out);

// "f32", "f16" or "q8" (--kv); false for anything else. kv_dtype_name is the inverse.
bool parse_kv_dtype(const char* s, rlm_kv_dtype* out);
const char* kv_dtype_name(rlm_kv_dtype dtype);

#endif  // RINGLM_TOOLS_CLI_COMMON_H_
