#include "serve/server.h"

#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <random>
#include <thread>
#include <vector>

#include "cli_common.h"
#include "serve_chat_page.h"  // kChatPage: tools/serve/chat.html, embedded at build time

using json = nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// Counters for /metrics (Prometheus text format).
struct Metrics {
  std::mutex mu;
  std::map<std::pair<std::string, int>, uint64_t> requests;  // (endpoint, status) -> count
  std::atomic<uint64_t> prompt_tokens{0}, cached_tokens{0}, completion_tokens{0};
  std::atomic<uint64_t> cancelled{0}, rejected{0};
  double prefill_s = 0, decode_s = 0, last_tps = 0;  // under mu

  void count(const std::string& path, int status) {
    static const char* kKnown[] = {"/", "/health", "/metrics", "/v1/models", "/v1/chat/completions",
                                   "/v1/completions"};
    std::string ep = "other";  // unknown paths share one label: clients cannot grow the table
    for (const char* k : kKnown) {
      if (path == k) ep = k;
    }
    std::lock_guard<std::mutex> lock(mu);
    ++requests[{ep, status}];
  }
};

std::string random_id(const char* prefix) {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  char buf[64];
  snprintf(buf, sizeof(buf), "%s%016llx%08llx", prefix, static_cast<unsigned long long>(rng()),
           static_cast<unsigned long long>(rng() & 0xffffffffu));
  return buf;
}

// The bytes a token adds after `prev` (logprobs' "token" and "bytes").
std::string token_bytes(const rlm_model* m, int32_t prev, int32_t token) {
  char buf[256];
  size_t n = 0;
  if (rlm_token_text_after(m, prev, token, buf, sizeof(buf), &n) == RLM_OK) return std::string(buf, n);
  std::string big(n, '\0');
  if (n > 0 && rlm_token_text_after(m, prev, token, &big[0], big.size(), &n) == RLM_OK) {
    return big.substr(0, n);
  }
  return "";
}

json bytes_array(const std::string& s) {
  json a = json::array();
  for (unsigned char c : s) a.push_back(c);
  return a;
}

// A logprob for JSON: -inf (a token the model gives probability 0) is not valid JSON: -9999.
double finite_lp(float lp) { return isfinite(lp) ? lp : -9999.0; }

// A leased slot, released when the last owner (the handler, or the streaming provider that
// outlives it) lets go.
struct Lease {
  SlotPool* pool;
  Slot* slot;
  Lease(SlotPool* p, Slot* s) : pool(p), slot(s) {}
  ~Lease() { pool->release(slot); }
};

// One generation request, from its slot being configured to its last token.
struct Job {
  GenRequest req;
  std::shared_ptr<Lease> lease;
  std::vector<uint8_t> grammar_mem;
  rlm_grammar* grammar = nullptr;
  std::string id, model_id;
  long created = 0;
  // Results.
  std::string text;
  uint32_t n_gen = 0;
  long cached = 0;
  rlm_stop_reason stop = RLM_STOP_NONE;
  bool cancelled = false;
  bool streamed = false;  // the streaming provider has run
  rlm_status error = RLM_OK;
  std::string error_msg;
  double t_prefill = 0, t_decode = 0;
  json logprob_entries = json::array();  // chat: "content" entries
  json lp_tokens = json::array(), lp_values = json::array(), lp_top = json::array(),
       lp_offsets = json::array();        // completions' logprobs columns
};

struct Server {
  ServeOptions opt;
  const ServeModel* model = nullptr;
  SlotPool* pool = nullptr;
  Metrics metrics;
  GuardedServer http;
  explicit Server(const ServeOptions& o) : opt(o), http(o.http) {}

  void send_error(httplib::Response& res, const ApiError& e) {
    res.status = e.status;
    res.set_content(error_json(e), "application/json");
  }

  // Compiles the request's grammar (if any) against the model, in memory the job owns.
  bool compile_grammar(Job* job, ApiError* e) {
    const std::string& g = job->req.gbnf;
    if (g.empty()) return true;
    size_t size = 0;
    rlm_status st = rlm_grammar_memory(model->model, g.data(), g.size(), &size);
    if (st == RLM_OK) {
      job->grammar_mem.resize(size + 64);
      uint8_t* p = job->grammar_mem.data();
      p += (64 - reinterpret_cast<uintptr_t>(p) % 64) % 64;
      char msg[512] = "";
      st = rlm_grammar_compile(model->model, g.data(), g.size(), p, size, &job->grammar, msg,
                               sizeof(msg));
      if (st == RLM_OK) return true;
      e->message = std::string("grammar: ") + rlm_status_string(st) + ": " + msg;
    } else {
      e->message = std::string("grammar: ") + rlm_status_string(st);
    }
    e->status = 400;
    e->param = job->req.chat && !job->req.gbnf.empty() ? "grammar" : "response_format";
    return false;
  }

  // Applies the request's settings to its slot's session and queues the prompt after the reused
  // prefix. false with *e (400 for values the session refuses).
  bool configure(Job* job, ApiError* e) {
    Slot* slot = job->lease->slot;
    rlm_session* s = slot->s;
    const GenRequest& r = job->req;
    auto refuse = [&](const char* what, rlm_status st) {
      e->status = 400;
      e->message = std::string(what) + ": " + rlm_status_string(st) + ": " + rlm_session_error(s);
      return false;
    };
    rlm_status st;
    if ((st = rlm_session_set_sampling(s, &r.sampling)) != RLM_OK) return refuse("sampling", st);
    rlm_session_clear_stops(s);
    if (r.chat && model->eot >= 0) rlm_session_add_stop_token(s, model->eot);
    for (const std::string& stop : r.stops) {
      if ((st = rlm_session_add_stop_string(s, stop.data(), stop.size())) != RLM_OK) {
        e->param = "stop";
        return refuse("stop", st);
      }
    }
    rlm_session_set_max_tokens(s, r.max_tokens);
    rlm_session_set_ignore_eos(s, 0);
    if ((st = rlm_session_set_grammar(s, job->grammar)) != RLM_OK) return refuse("grammar", st);
    if ((st = rlm_session_set_logprobs(s, r.logprobs ? 1 : 0, r.top_logprobs ? slot->top : nullptr,
                                       r.top_logprobs)) != RLM_OK) {
      return refuse("logprobs", st);
    }
    job->cached = slot->prepare(r.prompt, opt.n_batch, &st);
    if (job->cached < 0) return refuse("prompt", st);
    return true;
  }

  // Runs the turn: one rlm_step per token, `emit(text, len, result)` after each (false = the
  // client is gone). Fills the job's results.
  template <typename Emit>
  void generate(Job* job, Emit emit) {
    Slot* slot = job->lease->slot;
    rlm_session* s = slot->s;
    rlm_step_result r;
    rlm_step_result_default(&r);
    const double t0 = now_s();
    double t_first = t0;
    int32_t prev = job->req.prompt.back();
    size_t offset = 0;
    for (;;) {
      if (slot->client_gone || pool->stopping()) {
        job->cancelled = true;
        break;
      }
      const rlm_status st = rlm_step(s, &r);
      if (st == RLM_ERR_CANCELLED) {
        job->cancelled = true;
        break;
      }
      if (st != RLM_OK) {
        job->error = st;
        job->error_msg = rlm_session_error(s);
        break;
      }
      if (job->n_gen == 0) t_first = now_s();
      ++job->n_gen;
      slot->tokens.push_back(r.token);
      if (job->req.logprobs) add_logprob(job, prev, r, offset);
      prev = r.token;
      offset += r.text_len;
      job->text.append(r.text, r.text_len);
      if (!emit(r.text, r.text_len, r)) {
        job->cancelled = true;
        break;
      }
      if (r.stop != RLM_STOP_NONE) break;
    }
    job->stop = r.stop;
    const double t1 = now_s();
    job->t_prefill = t_first - t0;
    job->t_decode = t1 - t_first;
    metrics.prompt_tokens += job->req.prompt.size();
    metrics.cached_tokens += job->cached > 0 ? static_cast<uint64_t>(job->cached) : 0;
    metrics.completion_tokens += job->n_gen;
    if (job->cancelled) ++metrics.cancelled;
    const double tps = job->n_gen > 1 && job->t_decode > 0 ? (job->n_gen - 1) / job->t_decode : 0;
    {
      std::lock_guard<std::mutex> lock(metrics.mu);
      metrics.prefill_s += job->t_prefill;
      metrics.decode_s += job->t_decode;
      if (tps > 0) metrics.last_tps = tps;
    }
    if (!opt.quiet) {
      fprintf(stderr,
              "ringlm serve: %s slot %d: prompt %zu tokens (%ld cached, %.1f ms), %u generated "
              "(%.1f tok/s), %s\n",
              job->id.c_str(), slot->index, job->req.prompt.size(), job->cached,
              1e3 * job->t_prefill, job->n_gen, tps,
              job->cancelled ? "cancelled" : job->error != RLM_OK ? rlm_status_string(job->error)
                                                                  : finish_reason(job->stop));
    }
  }

  void add_logprob(Job* job, int32_t prev, const rlm_step_result& r, size_t offset) {
    const rlm_model* m = model->model;
    const std::string tb = token_bytes(m, prev, r.token);
    const Slot* slot = job->lease->slot;
    if (job->req.chat) {
      json top = json::array();
      for (uint32_t i = 0; i < r.n_top && i < job->req.top_logprobs; ++i) {
        const std::string b = token_bytes(m, prev, slot->top[i].token);
        top.push_back({{"token", b}, {"logprob", finite_lp(slot->top[i].logprob)}, {"bytes", bytes_array(b)}});
      }
      job->logprob_entries.push_back(
          {{"token", tb}, {"logprob", finite_lp(r.logprob)}, {"bytes", bytes_array(tb)}, {"top_logprobs", top}});
    } else {
      job->lp_tokens.push_back(tb);
      job->lp_values.push_back(finite_lp(r.logprob));
      json top = json::object();
      for (uint32_t i = 0; i < r.n_top && i < job->req.top_logprobs; ++i) {
        top[token_bytes(m, prev, slot->top[i].token)] = finite_lp(slot->top[i].logprob);
      }
      job->lp_top.push_back(top);
      job->lp_offsets.push_back(offset);
    }
  }

  static const char* finish_reason(rlm_stop_reason stop) {
    return stop == RLM_STOP_MAX_TOKENS ? "length" : "stop";
  }

  json usage(const Job& job) const {
    return {{"prompt_tokens", job.req.prompt.size()},
            {"completion_tokens", job.n_gen},
            {"total_tokens", job.req.prompt.size() + job.n_gen},
            {"prompt_tokens_details", {{"cached_tokens", job.cached > 0 ? job.cached : 0}}}};
  }

  json logprobs_json(const Job& job) const {
    if (!job.req.logprobs) return nullptr;
    if (job.req.chat) return {{"content", job.logprob_entries}};
    return {{"tokens", job.lp_tokens},
            {"token_logprobs", job.lp_values},
            {"top_logprobs", job.req.top_logprobs ? job.lp_top : json(nullptr)},
            {"text_offset", job.lp_offsets}};
  }

  // A failed step (not a cancel): the request's fault when no token can be sampled or its grammar
  // outgrew the parse-state memory, else the server's.
  ApiError step_error(const Job& job) const {
    ApiError e;
    e.status = job.error == RLM_ERR_NO_CANDIDATES || job.error == RLM_ERR_CAPACITY ? 400 : 500;
    if (e.status == 500) e.type = "server_error";
    e.message = std::string("generation failed: ") + rlm_status_string(job.error) + ": " + job.error_msg;
    return e;
  }

  void handle_generate(const httplib::Request& hreq, httplib::Response& res, bool chat) {
    auto job = std::make_shared<Job>();
    ApiError e;
    if (!parse_request(hreq.body, chat, *model, &job->req, &e)) return send_error(res, e);
    if (!compile_grammar(job.get(), &e)) return send_error(res, e);
    SlotPool::Wait why;
    Slot* slot = pool->acquire(job->req.prompt, GuardedServer::current_socket(), &why);
    if (!slot) {
      ++metrics.rejected;
      e.status = why == SlotPool::Wait::kGone ? 499 : 503;
      e.type = "server_error";
      e.code = why == SlotPool::Wait::kBusy ? "server_busy" : "unavailable";
      e.message = why == SlotPool::Wait::kBusy
                      ? "all " + std::to_string(pool->size()) +
                            " slots are busy and the wait queue is full; retry later"
                      : why == SlotPool::Wait::kStopping ? "the server is shutting down"
                                                         : "the client went away";
      res.set_header("Retry-After", "1");
      return send_error(res, e);
    }
    job->lease = std::make_shared<Lease>(pool, slot);
    if (!configure(job.get(), &e)) return send_error(res, e);
    job->id = random_id(chat ? "chatcmpl-" : "cmpl-");
    job->model_id = model->id;
    job->created = static_cast<long>(time(nullptr));
    if (!job->req.stream) {
      generate(job.get(), [](const char*, size_t, const rlm_step_result&) { return true; });
      if (job->cancelled) {
        e.status = 499;
        e.message = "cancelled: the client went away";
        return send_error(res, e);
      }
      if (job->error != RLM_OK) return send_error(res, step_error(*job));
      json choice = {{"index", 0}, {"logprobs", logprobs_json(*job)},
                     {"finish_reason", finish_reason(job->stop)}};
      if (chat) {
        choice["message"] = {{"role", "assistant"}, {"content", job->text}};
      } else {
        choice["text"] = job->text;
      }
      json out = {{"id", job->id},
                  {"object", chat ? "chat.completion" : "text_completion"},
                  {"created", job->created},
                  {"model", job->model_id},
                  {"choices", json::array({choice})},
                  {"usage", usage(*job)}};
      res.set_content(dump(out), "application/json");
      return;
    }
    // Streamed: the provider runs after the headers are sent, on this thread; the job (and its
    // slot lease) lives as long as the response holds the provider.
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [this, job](size_t, httplib::DataSink& sink) {
          // httplib calls the provider until it calls sink.done() or returns false: the whole
          // reply is written in the first call, and a cancelled one (the client is gone) ends
          // the connection.
          if (job->streamed) return false;
          job->streamed = true;
          stream(job.get(), sink);
          return !job->cancelled;
        });
  }

  // Server-sent events: a first chunk with the role, one chunk per piece of text, a last one with
  // finish_reason, the usage chunk when asked (stream_options.include_usage), then [DONE].
  void stream(Job* job, httplib::DataSink& sink) {
    const bool chat = job->req.chat;
    const std::string head = "data: {\"id\":\"" + job->id + "\",\"object\":\"" +
                             (chat ? "chat.completion.chunk" : "text_completion") +
                             "\",\"created\":" + std::to_string(job->created) +
                             ",\"model\":" + json_string(job->model_id) + ",\"choices\":[";
    auto write = [&](const std::string& s) { return sink.write(s.data(), s.size()); };
    if (chat && !write(head + "{\"index\":0,\"delta\":{\"role\":\"assistant\",\"content\":\"\"},"
                              "\"logprobs\":null,\"finish_reason\":null}]}\n\n")) {
      job->lease->slot->client_gone = true;
    }
    size_t lp_done = 0;  // logprob entries already sent
    std::string chunk;
    // Events are written as they come while tokens are slower than kCoalesceSeconds apart (any
    // model of real size: each token is its own write); faster ones (a tiny model decodes
    // thousands a second) are gathered into one write per kCoalesceSeconds, so a socket write
    // per token does not cost a tenth of the decode. The first text goes out at once.
    constexpr double kCoalesceSeconds = 0.005;
    std::string pending;
    double last_flush = -1.0;
    auto flush = [&]() {
      if (pending.empty()) return true;
      const bool ok = write(pending);
      pending.clear();
      last_flush = now_s();
      return ok;
    };
    generate(job, [&](const char* text, size_t len, const rlm_step_result&) {
      const bool lp = job->req.logprobs;
      if (len == 0 && !lp) return true;  // text held back (a possible stop string, a split character)
      chunk.assign(head);  // reuses the buffer of the previous chunk
      chunk += "{\"index\":0,";
      chunk += chat ? "\"delta\":{\"content\":" : "\"text\":";
      append_json_string(&chunk, text, len);
      if (chat) chunk += "}";
      chunk += ",\"logprobs\":";
      if (lp) {
        json part;
        if (chat) {
          part = {{"content", json::array()}};
          for (; lp_done < job->logprob_entries.size(); ++lp_done) {
            part["content"].push_back(job->logprob_entries[lp_done]);
          }
        } else {
          part = {{"tokens", json::array()}, {"token_logprobs", json::array()},
                  {"top_logprobs", json::array()}, {"text_offset", json::array()}};
          for (; lp_done < job->lp_tokens.size(); ++lp_done) {
            part["tokens"].push_back(job->lp_tokens[lp_done]);
            part["token_logprobs"].push_back(job->lp_values[lp_done]);
            part["top_logprobs"].push_back(job->lp_top[lp_done]);
            part["text_offset"].push_back(job->lp_offsets[lp_done]);
          }
        }
        chunk += dump(part);
      } else {
        chunk += "null";
      }
      chunk += ",\"finish_reason\":null}]}\n\n";
      pending += chunk;
      if (last_flush < 0 || now_s() - last_flush >= kCoalesceSeconds) return flush();
      return true;
    });
    if (!flush()) job->lease->slot->client_gone = true;
    if (job->cancelled) return;  // nothing more to send to a client that is gone
    if (job->error != RLM_OK) {
      write("data: " + error_json(step_error(*job)) + "\n\n");
      sink.done();
      return;
    }
    json last = {{"index", 0}, {"logprobs", nullptr}, {"finish_reason", finish_reason(job->stop)}};
    if (chat) {
      last["delta"] = json::object();
    } else {
      last["text"] = "";
    }
    write(head + dump(last) + "]}\n\n");
    if (job->req.include_usage) {
      json u = {{"id", job->id}, {"object", chat ? "chat.completion.chunk" : "text_completion"},
                {"created", job->created}, {"model", job->model_id},
                {"choices", json::array()}, {"usage", usage(*job)}};
      write("data: " + dump(u) + "\n\n");
    }
    write("data: [DONE]\n\n");
    sink.done();
  }

  std::string metrics_text() {
    std::string o;
    auto line = [&](const char* name, const char* type, const char* help, const std::string& v) {
      o += std::string("# HELP ") + name + " " + help + "\n# TYPE " + name + " " + type + "\n" +
           name + " " + v + "\n";
    };
    auto num = [](double v) {
      char b[64];
      snprintf(b, sizeof(b), "%.6g", v);
      return std::string(b);
    };
    o += "# HELP ringlm_requests_total HTTP requests answered, by endpoint and status.\n"
         "# TYPE ringlm_requests_total counter\n";
    double prefill, decode, last;
    {
      std::lock_guard<std::mutex> lock(metrics.mu);
      for (const auto& kv : metrics.requests) {
        o += "ringlm_requests_total{endpoint=\"" + kv.first.first + "\",status=\"" +
             std::to_string(kv.first.second) + "\"} " + std::to_string(kv.second) + "\n";
      }
      prefill = metrics.prefill_s;
      decode = metrics.decode_s;
      last = metrics.last_tps;
    }
    line("ringlm_prompt_tokens_total", "counter", "Prompt tokens of generation requests.",
         std::to_string(metrics.prompt_tokens.load()));
    line("ringlm_prompt_tokens_cached_total", "counter",
         "Prompt tokens reused from a slot's KV cache instead of run.",
         std::to_string(metrics.cached_tokens.load()));
    line("ringlm_completion_tokens_total", "counter", "Tokens generated.",
         std::to_string(metrics.completion_tokens.load()));
    line("ringlm_prefill_seconds_total", "counter", "Time to the first token, summed.", num(prefill));
    line("ringlm_decode_seconds_total", "counter", "Time after the first token, summed.", num(decode));
    line("ringlm_decode_tokens_per_second", "gauge",
         "Decode speed of the last finished request (tokens after the first / time).", num(last));
    line("ringlm_requests_cancelled_total", "counter",
         "Generations stopped because the client went away (or the server stopped).",
         std::to_string(metrics.cancelled.load()));
    line("ringlm_requests_rejected_total", "counter",
         "Requests refused because every slot was busy and the queue full (503).",
         std::to_string(metrics.rejected.load()));
    line("ringlm_slots_total", "gauge", "Sessions (slots).", std::to_string(pool->size()));
    line("ringlm_slots_busy", "gauge", "Slots generating now.", std::to_string(pool->busy()));
    line("ringlm_queue_waiting", "gauge", "Requests waiting for a slot.", std::to_string(pool->waiting()));
    return o;
  }

  bool authorized(const httplib::Request& req) const {
    if (opt.api_key.empty()) return true;
    const std::string want = "Bearer " + opt.api_key;
    const std::string got = req.get_header_value("Authorization");
    // Compare every byte whatever the first difference (no early exit to time).
    unsigned diff = got.size() != want.size();
    for (size_t i = 0; i < want.size(); ++i) diff |= (i < got.size() ? got[i] : 0) ^ want[i];
    return diff == 0;
  }

  void routes() {
    http.set_pre_routing_handler([this](const httplib::Request& req, httplib::Response& res) {
      GuardedServer::head_done();
      // Bodies are refused before a byte of them is read: a declared length over the limit, or
      // a POST with neither a length nor chunked encoding (it would be read until the client
      // closes). The unread body makes the connection unusable: it closes after the answer.
      if (req.method == "POST" || req.method == "PUT" || req.method == "PATCH") {
        const bool chunked = req.get_header_value("Transfer-Encoding").find("chunked") != std::string::npos;
        const std::string len = req.get_header_value("Content-Length");
        ApiError e;
        e.status = 0;
        if (!chunked && len.empty()) {
          e.status = 411;
          e.message = "a request body needs a Content-Length (or chunked transfer encoding)";
        } else if (!len.empty() && (len.find_first_not_of("0123456789") != std::string::npos ||
                                    len.size() > 15)) {
          e.status = 400;
          e.message = "invalid Content-Length '" + len + "'";
        } else if (!len.empty() && std::stoull(len) > opt.http.max_body_bytes) {
          e.status = 413;
          e.message = "the request body is larger than " + std::to_string(opt.http.max_body_bytes) +
                      " bytes (--max-body-bytes)";
        }
        if (e.status != 0) {
          GuardedServer::close_after_response();
          res.set_header("Connection", "close");
          send_error(res, e);
          return httplib::Server::HandlerResponse::Handled;
        }
      }
      const bool api = req.path.rfind("/v1/", 0) == 0 || req.path == "/metrics";
      if (api && !authorized(req)) {
        ApiError e;
        e.status = 401;
        e.message = "missing or wrong API key (Authorization: Bearer KEY)";
        e.code = "invalid_api_key";
        send_error(res, e);
        return httplib::Server::HandlerResponse::Handled;
      }
      return httplib::Server::HandlerResponse::Unhandled;
    });
    http.Get("/", [](const httplib::Request&, httplib::Response& res) {
      // Everything the page needs is inline; it talks only to this server.
      res.set_header("Content-Security-Policy",
                     "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
                     "connect-src 'self'; img-src data:");
      res.set_content(kChatPage, sizeof(kChatPage) - 1, "text/html; charset=utf-8");
    });
    http.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"status", "ok"}, {"slots_total", pool->size()}, {"slots_busy", pool->busy()},
                {"queue_waiting", pool->waiting()}};
      res.set_content(dump(j), "application/json");
    });
    http.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
      res.set_content(metrics_text(), "text/plain; version=0.0.4");
    });
    http.Get("/v1/models", [this](const httplib::Request&, httplib::Response& res) {
      json j = {{"object", "list"},
                {"data", json::array({{{"id", model->id}, {"object", "model"}, {"created", 0},
                                       {"owned_by", "ringlm"}}})}};
      res.set_content(dump(j), "application/json");
    });
    http.Post("/v1/chat/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generate(req, res, true);
    });
    http.Post("/v1/completions", [this](const httplib::Request& req, httplib::Response& res) {
      handle_generate(req, res, false);
    });
    for (const char* p : {"/v1/chat/completions", "/v1/completions"}) {
      http.Get(p, [](const httplib::Request& req, httplib::Response& res) {
        res.status = 405;
        res.set_header("Allow", "POST");
        ApiError e;
        e.status = 405;
        e.message = "use POST for " + req.path;
        res.set_content(error_json(e), "application/json");
      });
    }
    // Bodies for httplib's own errors (malformed request, body too large, unknown path) and the
    // reading limits of GuardedServer, in the OpenAI shape.
    http.set_error_handler(httplib::Server::HandlerWithResponse(
        [this](const httplib::Request& req, httplib::Response& res) {
      const ReadCut cut = GuardedServer::read_cut();
      if (cut == ReadCut::kTimeout && res.status != 413) res.status = 408;
      if (cut == ReadCut::kHeadTooLarge) res.status = 431;
      if (cut == ReadCut::kBodyTooLarge && res.status == 400) res.status = 413;
      if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
      ApiError e;
      e.status = res.status;
      switch (res.status) {
        case 404: e.message = "no such endpoint: " + req.method + " " + req.path; break;
        case 408: e.message = "the request was not received within the time limit"; break;
        case 413:
          e.message = "the request body is larger than " + std::to_string(opt.http.max_body_bytes) + " bytes";
          break;
        case 414: e.message = "the request line is too long"; break;
        case 431:
          e.message = "the request line and headers are larger than " +
                      std::to_string(opt.http.max_head_bytes) + " bytes";
          break;
        default: e.message = "malformed HTTP request"; break;
      }
      if (res.status >= 500) e.type = "server_error";
      res.set_content(error_json(e), "application/json");
      return httplib::Server::HandlerResponse::Handled;
    }));
    http.set_exception_handler([this](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = "internal error";
      try {
        if (ep) std::rethrow_exception(ep);
      } catch (const std::exception& x) {
        e.message = std::string("internal error: ") + x.what();
      } catch (...) {
      }
      send_error(res, e);
    });
    http.set_logger([this](const httplib::Request& req, const httplib::Response& res) {
      metrics.count(req.path, res.status);
    });
  }
};

}  // namespace

void block_stop_signals() {
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &sigs, nullptr);
  signal(SIGPIPE, SIG_IGN);
}

int run_server(const ServeOptions& opt, const ServeModel& model, SlotPool* pool) {
  // SIGINT / SIGTERM end the server from a thread of our own (sigwait), not from a handler:
  // stopping httplib is not async-signal-safe. block_stop_signals ran before any thread started.
  sigset_t sigs;
  sigemptyset(&sigs);
  sigaddset(&sigs, SIGINT);
  sigaddset(&sigs, SIGTERM);
  block_stop_signals();

  Server srv(opt);
  srv.model = &model;
  srv.pool = pool;
  srv.routes();
  int port = opt.port;
  if (port == 0) {
    port = srv.http.bind_to_any_port(opt.host);
    if (port <= 0) {
      fprintf(stderr, "ringlm serve: cannot bind %s to any port\n", opt.host.c_str());
      return 1;
    }
  } else if (!srv.http.bind_to_port(opt.host, port)) {
    fprintf(stderr, "ringlm serve: cannot bind %s:%d (in use, or not an address of this machine)\n",
            opt.host.c_str(), port);
    return 1;
  }
  if (opt.host != "127.0.0.1" && opt.host != "::1" && opt.host != "localhost" && opt.api_key.empty()) {
    fprintf(stderr, "ringlm serve: warning: listening on %s without --api-key: anyone who can reach "
                    "this address can use the model\n", opt.host.c_str());
  }
  const bool v6 = opt.host.find(':') != std::string::npos;
  printf("ringlm serve: listening on http://%s%s%s:%d\n", v6 ? "[" : "", opt.host.c_str(),
         v6 ? "]" : "", port);
  fflush(stdout);

  std::atomic<bool> done{false};
  std::thread waiter([&] {
    int sig = 0;
    sigwait(&sigs, &sig);
    if (done) return;
    fprintf(stderr, "ringlm serve: %s, stopping\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    pool->stop();
    srv.http.stop();
  });
  const bool ok = srv.http.listen_after_bind();
  done = true;
  pool->stop();
  // Wake the signal thread if the server ended by itself.
  pthread_kill(waiter.native_handle(), SIGTERM);
  waiter.join();
  return ok ? 0 : 1;
}
