#include "serve/openai_api.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include <condition_variable>
#include <mutex>
#include <random>
#include <nlohmann/json.hpp>

#include "cli_common.h"

using json = nlohmann::json;

namespace {

// Thrown by the parser callback when the body nests deeper than kMaxJsonDepth.
struct TooDeep {};

// Tokenizing a text needs about 40 bytes of scratch per byte: long prompts take turns, so that a
// burst of large bodies cannot hold (threads x body x 40) bytes at once.
class TokenizeGate {
 public:
  explicit TokenizeGate(size_t bytes) : big_(bytes >= kBig) {
    if (!big_) return;
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [] { return running_ < kMaxBig; });
    ++running_;
  }
  ~TokenizeGate() {
    if (!big_) return;
    std::lock_guard<std::mutex> lock(mu_);
    --running_;
    cv_.notify_one();
  }

 private:
  static constexpr size_t kBig = 64 << 10;
  static constexpr int kMaxBig = 2;
  static std::mutex mu_;
  static std::condition_variable cv_;
  static int running_;
  bool big_;
};
std::mutex TokenizeGate::mu_;
std::condition_variable TokenizeGate::cv_;
int TokenizeGate::running_ = 0;

bool fail(ApiError* e, const std::string& param, const std::string& msg,
          const std::string& code = "") {
  e->status = 400;
  e->type = "invalid_request_error";
  e->param = param;
  e->message = msg;
  e->code = code;
  return false;
}

bool tokenize(const ServeModel& m, const std::string& text, uint32_t flags,
              std::vector<int32_t>* out, ApiError* e) {
  std::string err;
  TokenizeGate gate(text.size());
  if (!tokenize_text(m.model, text, flags, out, &err)) return fail(e, "", "tokenizer: " + err);
  return true;
}

// Field readers: absent or null leaves *out as it is and succeeds; a value of the wrong type or
// out of range fails with the field named.
bool get_number(const json& j, const char* key, double lo, double hi, double* out, ApiError* e) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number()) return fail(e, key, std::string("'") + key + "' must be a number");
  const double v = it->get<double>();
  if (!(v >= lo && v <= hi)) {
    char buf[160];
    snprintf(buf, sizeof(buf), "'%s' is %g; it must be in [%g, %g]", key, v, lo, hi);
    return fail(e, key, buf);
  }
  *out = v;
  return true;
}

bool get_int(const json& j, const char* key, double lo, double hi, double* out, ApiError* e) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_number() || (it->is_number_float() && it->get<double>() != floor(it->get<double>()))) {
    return fail(e, key, std::string("'") + key + "' must be an integer");
  }
  return get_number(j, key, lo, hi, out, e);
}

bool get_bool(const json& j, const char* key, bool* out, ApiError* e) {
  auto it = j.find(key);
  if (it == j.end() || it->is_null()) return true;
  if (!it->is_boolean()) return fail(e, key, std::string("'") + key + "' must be true or false");
  *out = it->get<bool>();
  return true;
}

// A message's content: a string, or an array of {"type": "text", "text": ...} parts (joined).
bool content_text(const json& c, const std::string& param, std::string* out, ApiError* e) {
  if (c.is_null()) return true;
  if (c.is_string()) {
    *out = c.get<std::string>();
    return true;
  }
  if (!c.is_array()) return fail(e, param, "'" + param + "' must be a string or an array of text parts");
  for (const json& part : c) {
    if (!part.is_object() || !part.contains("type") || part["type"] != "text" ||
        !part.contains("text") || !part["text"].is_string()) {
      return fail(e, param, "only text content parts ({\"type\": \"text\", \"text\": ...}) are supported");
    }
    *out += part["text"].get<std::string>();
  }
  return true;
}

// Tokens of the chat segments: template markers by their exact piece, text without parsing
// special tokens (a client's text can never become a role or end-of-turn token).
bool segments_to_ids(const ServeModel& m, const std::vector<ChatSegment>& segs,
                     std::vector<int32_t>* ids, ApiError* e) {
  std::vector<int32_t> out;
  for (const ChatSegment& seg : segs) {
    if (seg.special) {
      int32_t id;
      if (rlm_token_lookup(m.model, seg.text.data(), seg.text.size(), &id) != RLM_OK) {
        e->status = 500;
        e->type = "server_error";
        e->message = "the model's vocabulary has no token '" + seg.text + "' its chat template needs";
        return false;
      }
      ids->push_back(id);
      continue;
    }
    if (seg.text.empty()) continue;
    if (!tokenize(m, seg.text, 0, &out, e)) return false;
    ids->insert(ids->end(), out.begin(), out.end());
  }
  return true;
}

// messages -> prompt tokens. With a chat template: the system text (system / developer messages
// before the first user message), then user turns each followed by its assistant reply and the
// end-of-turn token, ending with a user turn and the assistant header — the same tokens
// `ringlm chat` has in its cache after the same exchange. Consecutive messages of one role are
// joined with a newline. Without a template (a base model): the contents in order, as one text.
bool render_messages(const json& msgs, const ServeModel& m, std::vector<int32_t>* ids,
                     ApiError* e) {
  if (!msgs.is_array() || msgs.empty()) {
    return fail(e, "messages", "'messages' must be a non-empty array of messages");
  }
  struct Msg {
    std::string role, text;
  };
  std::vector<Msg> list;
  for (size_t i = 0; i < msgs.size(); ++i) {
    const json& msg = msgs[i];
    const std::string p = "messages[" + std::to_string(i) + "]";
    if (!msg.is_object()) return fail(e, p, "'" + p + "' must be an object");
    auto r = msg.find("role");
    if (r == msg.end() || !r->is_string()) return fail(e, p + ".role", "'" + p + ".role' must be a string");
    std::string role = r->get<std::string>();
    if (role == "developer") role = "system";
    if (role != "system" && role != "user" && role != "assistant") {
      return fail(e, p + ".role", "role '" + role +
                                      "' is not supported (system, developer, user, assistant)");
    }
    if (msg.contains("tool_calls") && !msg["tool_calls"].is_null() &&
        !(msg["tool_calls"].is_array() && msg["tool_calls"].empty())) {
      return fail(e, p + ".tool_calls", "tool calls are not supported");
    }
    auto c = msg.find("content");
    if (c == msg.end()) return fail(e, p + ".content", "'" + p + ".content' is missing");
    std::string text;
    if (!content_text(*c, p + ".content", &text, e)) return false;
    if (!list.empty() && list.back().role == role) {
      list.back().text += "\n" + text;
    } else {
      list.push_back({role, text});
    }
  }
  ids->clear();
  if (!m.chat_template) {
    std::string all;
    for (const Msg& x : list) all += x.text;
    return tokenize(m, all, RLM_TOKENIZE_ADD_BOS, ids, e);
  }
  std::string system;
  size_t i = 0;
  if (list[0].role == "system") {
    system = list[0].text;
    i = 1;
  }
  if (i >= list.size() || list[i].role != "user") {
    return fail(e, "messages", "the conversation must start with a user message (after the system message)");
  }
  if (list.back().role != "user") {
    return fail(e, "messages", "the last message must be a user message (continuing an assistant message is not supported)");
  }
  if (chat_wants_bos(m.format) && m.bos_id >= 0) ids->push_back(m.bos_id);
  bool first = true;
  std::vector<int32_t> reply;
  for (; i < list.size(); ++i) {
    const Msg& x = list[i];
    if (x.role == "system") {
      return fail(e, "messages", "a system message must come before the first user message");
    }
    if (x.role == "user") {
      if (!segments_to_ids(m, chat_render_turn(m.format, system, x.text, first, !first), ids, e)) {
        return false;
      }
      first = false;
    } else {  // assistant: its reply, closed by the end-of-turn token
      if (!tokenize(m, x.text, 0, &reply, e)) return false;
      ids->insert(ids->end(), reply.begin(), reply.end());
      if (m.eot >= 0) ids->push_back(m.eot);
    }
  }
  return true;
}

bool completion_prompt(const json& p, const ServeModel& m, std::vector<int32_t>* ids, ApiError* e) {
  const char* kShape = "'prompt' must be a string, an array of one string, or an array of token ids";
  const json* v = &p;
  if (p.is_array() && p.size() == 1 && (p[0].is_string() || p[0].is_array())) v = &p[0];
  if (v->is_string()) return tokenize(m, v->get<std::string>(), RLM_TOKENIZE_ADD_BOS, ids, e);
  if (!v->is_array() || v->empty()) return fail(e, "prompt", kShape);
  ids->clear();
  for (const json& t : *v) {
    if (!t.is_number_integer()) return fail(e, "prompt", kShape);
    const int64_t id = t.get<int64_t>();
    if (id < 0 || id >= static_cast<int64_t>(m.vocab)) {
      return fail(e, "prompt", "token id " + std::to_string(id) + " is outside the vocabulary (0.." +
                                   std::to_string(m.vocab - 1) + ")");
    }
    ids->push_back(static_cast<int32_t>(id));
  }
  return true;
}

bool parse_stops(const json& j, const ServeModel& m, std::vector<std::string>* out, ApiError* e) {
  auto it = j.find("stop");
  if (it == j.end() || it->is_null()) return true;
  std::vector<std::string> v;
  if (it->is_string()) {
    v.push_back(it->get<std::string>());
  } else if (it->is_array()) {
    for (const json& s : *it) {
      if (!s.is_string()) return fail(e, "stop", "'stop' must be a string or an array of strings");
      v.push_back(s.get<std::string>());
    }
  } else {
    return fail(e, "stop", "'stop' must be a string or an array of strings");
  }
  size_t bytes = 0;
  for (const std::string& s : v) {
    if (s.empty()) return fail(e, "stop", "stop strings must not be empty");
    bytes += s.size();
  }
  if (v.size() > m.max_stop_strings || bytes > m.stop_string_bytes) {
    return fail(e, "stop", "at most " + std::to_string(m.max_stop_strings) + " stop strings of " +
                               std::to_string(m.stop_string_bytes) + " bytes in all");
  }
  *out = std::move(v);
  return true;
}

// response_format and grammar -> GBNF text ("" = none).
bool parse_constraint(const json& j, const ServeModel& m, std::string* gbnf, ApiError* e) {
  std::string schema;  // JSON Schema text, when one is given
  bool json_any = false;
  auto rf = j.find("response_format");
  if (rf != j.end() && !rf->is_null()) {
    if (!rf->is_object() || !rf->contains("type") || !(*rf)["type"].is_string()) {
      return fail(e, "response_format", "'response_format' must be an object with a 'type'");
    }
    const std::string type = (*rf)["type"].get<std::string>();
    if (type == "json_object") {
      json_any = true;
    } else if (type == "json_schema") {
      auto js = rf->find("json_schema");
      if (js == rf->end() || !js->is_object() || !js->contains("schema") ||
          !((*js)["schema"].is_object() || (*js)["schema"].is_boolean())) {
        return fail(e, "response_format.json_schema",
                    "'response_format.json_schema.schema' must be a JSON Schema object");
      }
      schema = (*js)["schema"].dump();
      if (schema.size() > kMaxGrammarBytes) {
        return fail(e, "response_format.json_schema",
                    "the JSON Schema is " + std::to_string(schema.size()) + " bytes; the limit is " +
                        std::to_string(kMaxGrammarBytes));
      }
    } else if (type != "text") {
      return fail(e, "response_format.type", "response_format type '" + type +
                                                 "' is not supported (text, json_object, json_schema)");
    }
  }
  auto g = j.find("grammar");
  const bool has_grammar = g != j.end() && !g->is_null();
  if (has_grammar && !g->is_string()) return fail(e, "grammar", "'grammar' must be a GBNF string");
  if (has_grammar && (json_any || !schema.empty())) {
    return fail(e, "grammar", "give either 'grammar' or a JSON 'response_format', not both");
  }
  if (!has_grammar && !json_any && schema.empty()) return true;
  if (!m.grammars) {
    e->status = 400;
    e->param = has_grammar ? "grammar" : "response_format";
    e->message = "constrained output is off on this server (started with --grammar-state-bytes 0)";
    return false;
  }
  if (has_grammar) {
    *gbnf = g->get<std::string>();
    if (gbnf->empty()) return fail(e, "grammar", "'grammar' is empty");
    if (gbnf->size() > kMaxGrammarBytes) {
      return fail(e, "grammar", "the grammar is " + std::to_string(gbnf->size()) +
                                    " bytes; the limit is " + std::to_string(kMaxGrammarBytes));
    }
    return true;
  }
  if (json_any) {
    *gbnf = rlm_json_gbnf();
    return true;
  }
  std::vector<uint8_t> scratch(rlm_json_schema_scratch_bytes(schema.data(), schema.size()) + 64);
  void* aligned = scratch.data() + ((64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64);
  char msg[512] = "";
  size_t len = 0;
  rlm_status st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), aligned, scratch.size() - 64,
                                          nullptr, 0, &len, msg, sizeof(msg));
  if (st == RLM_ERR_BUFFER_TOO_SMALL) {
    gbnf->assign(len + 1, '\0');
    st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), aligned, scratch.size() - 64,
                                 &(*gbnf)[0], gbnf->size(), &len, msg, sizeof(msg));
    gbnf->resize(len);
  }
  if (st != RLM_OK) {
    return fail(e, "response_format.json_schema",
                std::string("JSON Schema: ") + rlm_status_string(st) + ": " + msg);
  }
  if (gbnf->size() > kMaxGrammarBytes) {
    return fail(e, "response_format.json_schema",
                "the JSON Schema compiles to " + std::to_string(gbnf->size()) +
                    " bytes of GBNF; the limit is " + std::to_string(kMaxGrammarBytes));
  }
  return true;
}

}  // namespace

namespace {

// Length of the valid UTF-8 sequence at s[0, n) (1..4), 0 when it is not one (a stray
// continuation byte, an overlong form, a surrogate, above U+10FFFF, or cut short).
size_t utf8_len(const unsigned char* s, size_t n) {
  const unsigned char c = s[0];
  size_t len;
  uint32_t cp;
  if (c >= 0xc2 && c <= 0xdf) {
    len = 2;
    cp = c & 0x1f;
  } else if (c >= 0xe0 && c <= 0xef) {
    len = 3;
    cp = c & 0x0f;
  } else if (c >= 0xf0 && c <= 0xf4) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (n < len) return 0;
  for (size_t i = 1; i < len; ++i) {
    if ((s[i] & 0xc0) != 0x80) return 0;
    cp = (cp << 6) | (s[i] & 0x3f);
  }
  if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) ||
      (len == 4 && (cp < 0x10000 || cp > 0x10ffff))) {
    return 0;
  }
  return len;
}

}  // namespace

void append_json_string(std::string* out, const char* text, size_t n) {
  const unsigned char* s = reinterpret_cast<const unsigned char*>(text);
  out->push_back('"');
  for (size_t i = 0; i < n;) {
    const unsigned char c = s[i];
    if (c >= 0x80) {
      const size_t len = utf8_len(s + i, n - i);
      if (len == 0) {
        out->append("\xef\xbf\xbd");  // U+FFFD for a byte that is not valid UTF-8
        ++i;
      } else {
        out->append(text + i, len);
        i += len;
      }
      continue;
    }
    switch (c) {
      case '"': out->append("\\\""); break;
      case '\\': out->append("\\\\"); break;
      case '\n': out->append("\\n"); break;
      case '\r': out->append("\\r"); break;
      case '\t': out->append("\\t"); break;
      default:
        if (c < 0x20) {
          char buf[8];
          snprintf(buf, sizeof(buf), "\\u%04x", c);
          out->append(buf);
        } else {
          out->push_back(static_cast<char>(c));
        }
    }
    ++i;
  }
  out->push_back('"');
}

std::string json_string(const std::string& s) {
  std::string out;
  out.reserve(s.size() + 2);
  append_json_string(&out, s.data(), s.size());
  return out;
}

std::string error_json(const ApiError& e) {
  json j = {{"error",
             {{"message", e.message},
              {"type", e.type},
              {"param", e.param.empty() ? json(nullptr) : json(e.param)},
              {"code", e.code.empty() ? json(nullptr) : json(e.code)}}}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

bool parse_request(const std::string& body, bool chat, const ServeModel& m, GenRequest* out,
                   ApiError* e) {
  json j;
  try {
    j = json::parse(body, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxJsonDepth) throw TooDeep();
      return true;
    });
  } catch (const TooDeep&) {
    return fail(e, "", "the request body nests deeper than " + std::to_string(kMaxJsonDepth) + " levels");
  } catch (const json::exception& x) {
    // nlohmann's messages name the byte offset and what was wrong (including invalid UTF-8).
    return fail(e, "", std::string("the request body is not valid JSON: ") + x.what());
  }
  if (!j.is_object()) return fail(e, "", "the request body must be a JSON object");
  out->chat = chat;

  // Things this server does not do: refused rather than silently ignored.
  double n = 1;
  if (!get_int(j, "n", 1, 1, &n, e)) {
    e->message = "only n = 1 is supported";
    return false;
  }
  if (!chat) {
    double best_of = 1;
    if (!get_int(j, "best_of", 1, 1, &best_of, e)) {
      e->message = "only best_of = 1 is supported";
      return false;
    }
    bool echo = false;
    if (!get_bool(j, "echo", &echo, e)) return false;
    if (echo) return fail(e, "echo", "echo is not supported");
    auto sfx = j.find("suffix");
    if (sfx != j.end() && !sfx->is_null() && !(sfx->is_string() && sfx->get<std::string>().empty())) {
      return fail(e, "suffix", "suffix is not supported");
    }
  }
  for (const char* k : {"tools", "functions"}) {
    auto it = j.find(k);
    if (it != j.end() && !it->is_null() && !(it->is_array() && it->empty())) {
      return fail(e, k, std::string(k) + " (function calling) is not supported");
    }
  }
  auto model = j.find("model");
  if (model != j.end() && !model->is_null() && !model->is_string()) {
    return fail(e, "model", "'model' must be a string");
  }

  if (!get_bool(j, "stream", &out->stream, e)) return false;
  auto so = j.find("stream_options");
  if (so != j.end() && !so->is_null()) {
    if (!so->is_object()) return fail(e, "stream_options", "'stream_options' must be an object");
    if (!get_bool(*so, "include_usage", &out->include_usage, e)) return false;
  }

  // The prompt.
  if (chat) {
    auto msgs = j.find("messages");
    if (msgs == j.end()) return fail(e, "messages", "'messages' is missing");
    if (!render_messages(*msgs, m, &out->prompt, e)) return false;
  } else {
    auto p = j.find("prompt");
    if (p == j.end() || p->is_null()) return fail(e, "prompt", "'prompt' is missing");
    if (!completion_prompt(*p, m, &out->prompt, e)) return false;
  }
  if (out->prompt.empty()) return fail(e, chat ? "messages" : "prompt", "the prompt is empty");
  const size_t n_prompt = out->prompt.size();
  if (n_prompt >= m.n_ctx) {
    return fail(e, chat ? "messages" : "prompt",
                "the prompt is " + std::to_string(n_prompt) +
                    " tokens; this server's context is " + std::to_string(m.n_ctx) +
                    " tokens (prompt and completion together)",
                "context_length_exceeded");
  }
  const uint32_t room = m.n_ctx - static_cast<uint32_t>(n_prompt);

  // The completion's length.
  double max_tokens = -1;
  if (!get_int(j, "max_completion_tokens", 1, 1e12, &max_tokens, e)) return false;
  if (max_tokens < 0 && !get_int(j, "max_tokens", 1, 1e12, &max_tokens, e)) return false;
  if (max_tokens > room) {
    return fail(e, j.contains("max_completion_tokens") ? "max_completion_tokens" : "max_tokens",
                "max_tokens " + std::to_string(static_cast<uint64_t>(max_tokens)) +
                    " does not fit: the context is " + std::to_string(m.n_ctx) + " tokens and the prompt " +
                    std::to_string(n_prompt),
                "context_length_exceeded");
  }
  if (max_tokens > 0) {
    out->max_tokens = static_cast<uint32_t>(max_tokens);
  } else {
    out->max_tokens = m.default_max_tokens > 0 && m.default_max_tokens < room ? m.default_max_tokens : room;
  }

  // Sampling: the server's defaults, then the request's fields.
  out->sampling = m.defaults;
  double v = out->sampling.temperature;
  if (!get_number(j, "temperature", 0, 2, &v, e)) return false;
  out->sampling.temperature = static_cast<float>(v);
  v = out->sampling.top_p;
  if (!get_number(j, "top_p", 0, 1, &v, e)) return false;
  out->sampling.top_p = static_cast<float>(v);
  if (out->sampling.top_p <= 0) return fail(e, "top_p", "'top_p' must be above 0");
  v = out->sampling.top_k;
  if (!get_int(j, "top_k", 0, 1e9, &v, e)) return false;  // llama.cpp's extension
  out->sampling.top_k = static_cast<int32_t>(v);
  v = out->sampling.min_p;
  if (!get_number(j, "min_p", 0, 1, &v, e)) return false;
  out->sampling.min_p = static_cast<float>(v);
  v = out->sampling.frequency_penalty;
  if (!get_number(j, "frequency_penalty", -2, 2, &v, e)) return false;
  out->sampling.frequency_penalty = static_cast<float>(v);
  v = out->sampling.presence_penalty;
  if (!get_number(j, "presence_penalty", -2, 2, &v, e)) return false;
  out->sampling.presence_penalty = static_cast<float>(v);
  double seed = -1;
  if (!get_int(j, "seed", -9.2e18, 1.8e19, &seed, e)) return false;
  auto sj = j.find("seed");
  if (sj != j.end() && !sj->is_null()) {
    out->sampling.seed = sj->is_number_unsigned() ? sj->get<uint64_t>()
                                                  : static_cast<uint64_t>(sj->get<int64_t>());
  } else if (!m.seed_fixed) {
    static std::mutex mu;
    static std::mt19937_64 rng{std::random_device{}()};
    std::lock_guard<std::mutex> lock(mu);
    out->sampling.seed = rng();
  }
  // logit_bias: {"token id": bias in [-100, 100]} (-100 bans the token, as OpenAI documents).
  out->logit_bias.clear();
  auto lb = j.find("logit_bias");
  if (lb != j.end() && !lb->is_null()) {
    if (!lb->is_object()) return fail(e, "logit_bias", "'logit_bias' must be an object of token id: bias");
    if (lb->size() > m.max_logit_bias) {
      return fail(e, "logit_bias", "at most " + std::to_string(m.max_logit_bias) + " logit_bias entries");
    }
    for (auto it = lb->begin(); it != lb->end(); ++it) {
      uint32_t id = 0;
      if (!parse_u32(it.key().c_str(), &id) || id >= m.vocab) {
        return fail(e, "logit_bias", "logit_bias key '" + it.key() + "' is not a token id of this model");
      }
      if (!it.value().is_number() || !(it.value().get<double>() >= -100 && it.value().get<double>() <= 100)) {
        return fail(e, "logit_bias", "logit_bias values must be numbers in [-100, 100]");
      }
      const double b = it.value().get<double>();
      out->logit_bias.push_back({static_cast<int32_t>(id), b <= -100 ? -INFINITY : static_cast<float>(b)});
    }
  }
  // A request's logit_bias replaces the server's --logit-bias entries; without one they stay.
  if (lb != j.end() && !lb->is_null()) {
    out->sampling.logit_bias = out->logit_bias.empty() ? nullptr : out->logit_bias.data();
    out->sampling.n_logit_bias = static_cast<uint32_t>(out->logit_bias.size());
  }

  if (!parse_stops(j, m, &out->stops, e)) return false;
  if (!parse_constraint(j, m, &out->gbnf, e)) return false;

  // Log-probabilities: chat takes logprobs (bool) + top_logprobs; completions an integer logprobs.
  auto lp = j.find("logprobs");
  if (chat) {
    if (!get_bool(j, "logprobs", &out->logprobs, e)) return false;
    double top = 0;
    if (!get_int(j, "top_logprobs", 0, kMaxTopLogprobs, &top, e)) return false;
    if (top > 0 && !out->logprobs) return fail(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    out->top_logprobs = static_cast<uint32_t>(top);
  } else if (lp != j.end() && !lp->is_null()) {
    double top = 0;
    if (!get_int(j, "logprobs", 0, kMaxTopLogprobs, &top, e)) return false;
    out->logprobs = true;
    out->top_logprobs = static_cast<uint32_t>(top);
  }
  return true;
}
