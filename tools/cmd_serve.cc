// ringlm serve: an OpenAI-compatible HTTP server with a chat page (tools/serve/).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>

#include "commands.h"

#ifndef RINGLM_HAVE_SERVE
// Builds without cpp-httplib for the target (the ARM cross builds): the verb exists and says so.
int cmd_serve(int, char**) {
  fprintf(stderr,
          "ringlm serve: this build has no HTTP server (it was built without cpp-httplib; on "
          "Debian: apt-get install libcpp-httplib-dev, then build again)\n");
  return 1;
}
#else

#include "cli_common.h"
#include "convert/chat_template.h"
#include "mapped_file.h"
#include "ringlm/ringlm.h"
#include "serve/server.h"
#include "speculation_flags.h"

namespace {

const char kUsage[] =
    "usage: ringlm serve -m MODEL [--host 127.0.0.1] [--port 8080] [--slots N] [options]\n"
    "\n"
    "An OpenAI-compatible HTTP server: POST /v1/chat/completions and /v1/completions (streamed\n"
    "with \"stream\": true), GET /v1/models, /health, /metrics (Prometheus), and a chat page at /.\n"
    "Each slot is one session; all of them are carved at start from one block of memory. A\n"
    "request waits for a free slot in a queue of --queue places, beyond which it gets 503. A\n"
    "slot keeps its KV cache: a request whose prompt begins like the slot's last conversation\n"
    "runs only its new tokens. A client that disconnects cancels its generation.\n"
    "Without a chat template (a base model such as stories260K) the messages' contents are\n"
    "joined into one plain-text prompt.\n"
    "\n"
    "  -m, --model FILE        model file\n"
    "      --host ADDR         address to listen on (default 127.0.0.1: this machine only;\n"
    "                          0.0.0.0 = every interface: give --api-key then)\n"
    "      --port N            port (default 8080; 0 = any free port, printed)\n"
    "      --slots N           parallel sessions, 1..64 (default 1)\n"
    "      --queue N           requests that may wait for a slot, 0..4096 (default 8)\n"
    "      --api-key KEY       require 'Authorization: Bearer KEY' on /v1/ and /metrics\n"
    "      --api-key-file F    the same, the key read from file F (first line)\n"
    "      --alias NAME        the model's name in responses (default: the file name)\n"
    "      --template NAME     chatml | llama3 | gemma | phi3 | plain (default: the model's\n"
    "                          template when recognised, else plain)\n"
    "  -n, --n-predict N       completion tokens when a request gives no max_tokens (default 0:\n"
    "                          up to the end of the context)\n"
    "      --grammar-state-bytes N  per-slot grammar parse state for response_format / grammar\n"
    "                          (default 262144; 0 = constrained output off)\n"
    "      --grammar-cache-bytes N  per-slot memory for remembered grammar masks (default 1048576)\n"
    "      --max-body-bytes N  largest request body (default 1048576; larger: 413)\n"
    "      --max-header-bytes N  request line + headers (default 16384; larger: 431)\n"
    "      --request-timeout S seconds to receive a whole request (default 10; then 408)\n"
    "      --keep-alive S      idle seconds a connection is kept between requests (default 5)\n"
    "      --write-timeout S   seconds a client may stall reading a reply (default 10)\n"
    "      --http-threads N    connections served at once (default slots + queue + 4, at most\n"
    "                          256)\n"
    "      --quiet             no log line per request on stderr\n"
    "  -h, --help              this help\n"
    "\n"
    "Sampling flags set the defaults of requests that do not give a value (temperature, top_p\n"
    "and seed are a request's own fields; without a seed each request gets a random one unless\n"
    "--seed is given). Session flags (-c, -t, --kv ...) apply to every slot.\n";

// Seconds for the HTTP limits: a positive decimal.
bool parse_seconds(const char* s, double* out) {
  float v = 0;
  if (!parse_f32(s, &v) || !(v > 0) || v > 86400) return false;
  *out = v;
  return true;
}

std::string base_name(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

int cmd_serve(int argc, char** argv) {
  std::string model_path, alias, tmpl, key_file;
  ServeOptions opt;
  uint32_t slots = 1, queue = 8, n_predict = 0, http_threads = 0;
  uint32_t grammar_state = 256 << 10, grammar_cache = 1 << 20;
  bool seed_fixed = false;
  SessionFlags flags;
  SpecFlags spec;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "-s" || a == "--seed") && i + 1 < argc) seed_fixed = strcmp(argv[i + 1], "-1") != 0;
    bool handled = false;
    if (!parse_session_flag("serve", argc, argv, &i, &flags, &handled)) return 2;
    if (handled) continue;
    if (!parse_spec_flag("serve", argc, argv, &i, &spec, &handled)) return 2;
    if (handled) continue;
    const char* v = nullptr;
    auto value = [&]() {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm serve: %s needs a value\n", a.c_str());
        return false;
      }
      v = argv[++i];
      return true;
    };
    auto bad = [&](const char* what) {
      fprintf(stderr, "ringlm serve: bad value '%s' for %s (%s)\n", v ? v : "", a.c_str(), what);
      return 2;
    };
    uint32_t u = 0;
    if (a == "-h" || a == "--help") {
      printf("%s%s%s", kUsage, kSessionFlagsHelp, kSpecFlagsHelp);
      return 0;
    } else if (a == "-m" || a == "--model") {
      if (!value()) return 2;
      model_path = v;
    } else if (a == "--host") {
      if (!value()) return 2;
      opt.host = v;
      if (opt.host.empty()) return bad("an IP address");
    } else if (a == "--port") {
      if (!value()) return 2;
      if (!parse_u32(v, &u) || u > 65535) return bad("0..65535");
      opt.port = static_cast<int>(u);
    } else if (a == "--slots") {
      if (!value()) return 2;
      if (!parse_u32(v, &slots) || slots < 1 || slots > 64) return bad("1..64");
    } else if (a == "--queue") {
      if (!value()) return 2;
      if (!parse_u32(v, &queue) || queue > 4096) return bad("0..4096");
    } else if (a == "--api-key") {
      if (!value()) return 2;
      opt.api_key = v;
      if (opt.api_key.empty()) return bad("a non-empty key");
    } else if (a == "--api-key-file") {
      if (!value()) return 2;
      key_file = v;
    } else if (a == "--alias") {
      if (!value()) return 2;
      alias = v;
      if (alias.empty()) return bad("a non-empty name");
    } else if (a == "--template") {
      if (!value()) return 2;
      tmpl = v;
    } else if (a == "-n" || a == "--n-predict") {
      if (!value()) return 2;
      if (!parse_n_predict(v, &n_predict)) return bad("a token count; 0 or -1 = to the end of the context");
    } else if (a == "--grammar-state-bytes") {
      if (!value()) return 2;
      if (!parse_u32(v, &grammar_state) || (grammar_state != 0 && grammar_state < 4096)) {
        return bad("0, or at least 4096");
      }
    } else if (a == "--grammar-cache-bytes") {
      if (!value()) return 2;
      if (!parse_u32(v, &grammar_cache) || grammar_cache > (1u << 30)) return bad("0..1073741824");
    } else if (a == "--max-body-bytes") {
      if (!value()) return 2;
      if (!parse_u32(v, &u) || u < 1024) return bad("at least 1024");
      opt.http.max_body_bytes = u;
    } else if (a == "--max-header-bytes") {
      if (!value()) return 2;
      if (!parse_u32(v, &u) || u < 1024 || u > (64u << 20)) return bad("1024..67108864");
      opt.http.max_head_bytes = u;
    } else if (a == "--request-timeout") {
      if (!value()) return 2;
      if (!parse_seconds(v, &opt.http.request_timeout_s)) return bad("seconds, above 0");
    } else if (a == "--keep-alive") {
      if (!value()) return 2;
      if (!parse_seconds(v, &opt.http.keep_alive_s)) return bad("seconds, above 0");
    } else if (a == "--write-timeout") {
      if (!value()) return 2;
      if (!parse_seconds(v, &opt.http.write_timeout_s)) return bad("seconds, above 0");
    } else if (a == "--http-threads") {
      if (!value()) return 2;
      if (!parse_u32(v, &http_threads) || http_threads < 2 || http_threads > 1024) return bad("2..1024");
    } else if (a == "--quiet") {
      opt.quiet = true;
    } else {
      fprintf(stderr, "ringlm serve: unknown option '%s' (ringlm serve --help lists them)\n", a.c_str());
      return 2;
    }
  }
  if (model_path.empty()) {
    fprintf(stderr, "ringlm serve: need -m MODEL\n%s", kUsage);
    return 2;
  }
  if (!spec_flags_check("serve", spec)) return 2;
  if (!spec.draft_path.empty()) {
    fprintf(stderr, "ringlm serve: --draft is not supported by the server; --lookup is\n");
    return 2;
  }
  if (!key_file.empty()) {
    std::string text, err;
    if (!read_text_input(key_file, 4096, &text, &err)) {
      fprintf(stderr, "ringlm serve: --api-key-file: %s\n", err.c_str());
      return 2;
    }
    opt.api_key = text.substr(0, text.find_first_of("\r\n"));
    if (opt.api_key.empty()) {
      fprintf(stderr, "ringlm serve: --api-key-file: '%s' has an empty first line\n", key_file.c_str());
      return 2;
    }
  }
  finish_session_flags(&flags);

  MappedFile file;
  std::string err;
  if (!file.open(model_path, &err)) {
    fprintf(stderr, "ringlm serve: %s\n", err.c_str());
    return 1;
  }
  rlm_model model;
  rlm_status st = rlm_model_open(file.data(), file.size(), &model);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm serve: %s: %s\n", rlm_status_string(st), rlm_model_error(&model));
    return 1;
  }
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&model, &info);

  ServeModel sm;
  sm.model = &model;
  sm.id = alias.empty() ? base_name(model_path) : alias;
  if (tmpl == "plain") {
    sm.chat_template = false;
  } else if (!tmpl.empty()) {
    if (!chat_format_parse(tmpl, &sm.format)) {
      fprintf(stderr, "ringlm serve: unknown template '%s' (chatml, llama3, gemma, phi3, plain)\n",
              tmpl.c_str());
      return 2;
    }
    sm.chat_template = true;
  } else {
    const char* t = nullptr;
    size_t tlen = 0;
    sm.chat_template = rlm_model_chat_template(&model, &t, &tlen) == RLM_OK &&
                       chat_format_detect(std::string(t, tlen), &sm.format);
  }
  if (sm.chat_template) {
    const char* piece = chat_end_of_turn(sm.format);
    if (rlm_token_lookup(&model, piece, strlen(piece), &sm.eot) != RLM_OK) {
      fprintf(stderr, "ringlm serve: warning: no '%s' token; replies end at the model's end tokens\n",
              piece);
      sm.eot = -1;
    }
  }

  rlm_session_config& cfg = flags.config;
  if (!check_session_flags("serve", &model, cfg)) return 2;
  const uint32_t n_ctx = cfg.n_ctx ? cfg.n_ctx : info.max_context;
  // A prompt is queued at once (it is at most the context) and never wraps the ring: prompt and
  // completion together stay within n_ctx, so prefix reuse can always rewind.
  cfg.max_pending = n_ctx;
  cfg.max_stop_strings = 8;
  cfg.stop_string_bytes = 1024;
  cfg.max_logit_bias = 300;
  cfg.grammar_state_bytes = grammar_state;
  cfg.grammar_cache_bytes = grammar_state ? grammar_cache : 0;
  if (spec.lookup) cfg.max_draft = spec.draft_max;
  sm.n_ctx = n_ctx;
  sm.vocab = info.vocab_size;
  sm.bos_id = info.bos_id;
  sm.default_max_tokens = n_predict;
  sm.grammars = grammar_state > 0;
  sm.max_stop_strings = cfg.max_stop_strings;
  sm.stop_string_bytes = cfg.stop_string_bytes;
  sm.max_logit_bias = cfg.max_logit_bias;
  sm.defaults = flags.sampling;
  sm.seed_fixed = seed_fixed;
  opt.n_batch = cfg.n_batch;
  // Every connection being served holds a thread (idle ones cost an unused stack): enough for
  // the slots, the queue and a few health / metrics / page requests, at most 256 by default.
  opt.http.http_threads = http_threads ? http_threads : std::min<uint32_t>(slots + queue + 4, 256);

  block_stop_signals();
  SlotPool pool;
  if (!pool.open(&model, cfg, slots, queue, &err)) {
    fprintf(stderr, "ringlm serve: %s\n", err.c_str());
    return 1;
  }
  if (spec.lookup) {
    rlm_speculation sp;
    rlm_speculation_default(&sp);
    sp.mode = RLM_SPEC_LOOKUP;
    sp.n_max = spec.draft_max;
    sp.ngram_min = spec.ngram_min;
    sp.ngram_max = spec.ngram_max;
    if (!pool.set_speculation(&sp, &err)) {
      fprintf(stderr, "ringlm serve: --lookup: %s\n", err.c_str());
      return 1;
    }
  }
  fprintf(stderr,
          "ringlm serve: %s (%s), context %u, %u slot%s x %zu bytes in one block of %zu bytes, "
          "queue %u, %u thread%s per slot%s\n",
          sm.id.c_str(), sm.chat_template ? chat_format_name(sm.format) : "plain text, no chat template",
          n_ctx, slots, slots == 1 ? "" : "s", pool.session_bytes(), pool.block_bytes(), queue,
          cfg.n_threads, cfg.n_threads == 1 ? "" : "s", opt.api_key.empty() ? "" : ", API key required");
  return run_server(opt, sm, &pool);
}

#endif  // RINGLM_HAVE_SERVE
