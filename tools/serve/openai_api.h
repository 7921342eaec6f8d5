// OpenAI-compatible request parsing and response shapes for `ringlm serve`: a request body
// becomes a GenRequest (prompt tokens, sampling, stops, grammar, logprobs) or an ApiError with the
// HTTP status and OpenAI's error object. Pure functions of the body and the model: no session,
// no socket.
#ifndef RINGLM_TOOLS_SERVE_OPENAI_API_H_
#define RINGLM_TOOLS_SERVE_OPENAI_API_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "convert/chat_template.h"
#include "ringlm/ringlm.h"

// Most top_logprobs / logprobs alternatives a request may ask for (OpenAI's limit).
constexpr uint32_t kMaxTopLogprobs = 20;
// Longest grammar a request may bring: GBNF text (given, or compiled from a JSON Schema) and
// JSON Schema text. A compiled grammar takes about 300 bytes per byte of GBNF (64 KiB: ~19 MB,
// per request while it runs).
constexpr size_t kMaxGrammarBytes = 64 << 10;
// Deepest JSON nesting a request body may have (a JSON Schema fits easily; a 100,000-deep array
// does not reach the recursive parts of the JSON library).
constexpr int kMaxJsonDepth = 64;

// What the server knows about its model, for parsing requests.
struct ServeModel {
  const rlm_model* model = nullptr;
  std::string id;             // the model name in responses and /v1/models
  bool chat_template = false; // false: messages are joined as plain text (a base model)
  ChatFormat format = ChatFormat::ChatML;
  int32_t eot = -1;           // the format's end-of-turn token, -1 when none
  uint32_t n_ctx = 0;         // context per slot: prompt + completion must fit
  uint32_t vocab = 0;
  int32_t bos_id = -1;
  uint32_t default_max_tokens = 0;  // -n: completion length when a request gives none (0 = the rest
                                    // of the context)
  bool grammars = false;      // sessions have grammar memory (response_format, grammar)
  uint32_t max_stop_strings = 0, stop_string_bytes = 0, max_logit_bias = 0;
  rlm_sampling defaults;      // the server's sampling flags: what a request does not set
  bool seed_fixed = false;    // --seed given: requests without a seed use it (else a random one)
};

struct ApiError {
  int status = 400;
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;          // the request field at fault ("" = none)
  std::string code;           // e.g. "context_length_exceeded" ("" = none)
};

// The OpenAI error object: {"error": {"message", "type", "param", "code"}}.
std::string error_json(const ApiError& e);

struct GenRequest {
  bool chat = true;           // /v1/chat/completions (else /v1/completions)
  bool stream = false;
  bool include_usage = false; // stream_options.include_usage
  std::vector<int32_t> prompt;
  uint32_t max_tokens = 0;    // resolved: >= 1, prompt + max_tokens <= n_ctx
  rlm_sampling sampling;      // logit_bias: into `logit_bias` when the request has one, else the
                              // server defaults' (set_sampling copies it)
  std::vector<rlm_logit_bias> logit_bias;
  std::vector<std::string> stops;
  std::string gbnf;           // "" = unconstrained
  bool logprobs = false;
  uint32_t top_logprobs = 0;
};

// Parses and checks a request body (chat: /v1/chat/completions, else /v1/completions). false
// with *err filled (4xx) when the request is malformed, asks for something this server does not
// do (n > 1, tools, echo ...), or does not fit the context.
bool parse_request(const std::string& body, bool chat, const ServeModel& m, GenRequest* out,
                   ApiError* err);

// JSON string literal of `s` (quotes included); invalid UTF-8 becomes U+FFFD. The append form
// is the streaming path's: one pass, no temporary.
std::string json_string(const std::string& s);
void append_json_string(std::string* out, const char* s, size_t n);

#endif  // RINGLM_TOOLS_SERVE_OPENAI_API_H_
