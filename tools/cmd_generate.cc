// ringlm generate: stream a continuation of a prompt to stdout.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <errno.h>
#include <stdint.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "mapped_file.h"
#include "prompt_cache.h"
#include "ringlm/ringlm.h"
#include "grammar_flags.h"
#include "speculation_flags.h"
#include "ringlm/ringlm.hpp"

namespace {

const char kUsage[] =
    "usage: ringlm generate -m MODEL (-p PROMPT | -f FILE | --prompt-ids \"1 2 3\") [options]\n"
    "\n"
    "Streams only the generated continuation to stdout; one stats line on stderr.\n"
    "\n"
    "  -m, --model FILE        model file (.rlm, from `ringlm convert`)\n"
    "  -p, --prompt TEXT       prompt text (BOS added per the model). Linux caps one argument at\n"
    "                          128 KiB: use -f for longer prompts\n"
    "  -f, --file FILE         prompt from a file ('-' = standard input), up to 64 MiB\n"
    "      --no-special        prompt text that spells a special token (<|im_end|>) stays text;\n"
    "                          by default it becomes that token (byte-level vocabularies)\n"
    "      --prompt-ids IDS    prompt as space-separated token ids (no BOS added)\n"
    "  -n, --n-predict N       max tokens to generate (default 256; 0 or -1 = until a stop)\n"
    "      --stop STR          stop string (repeatable); never printed\n"
    "      --ignore-eos        keep generating past the model's end tokens\n"
    "      --print-ids         print generated token ids (space-separated) instead of text\n"
    "      --logprobs N        print one JSON object per generated token instead of text:\n"
    "                          {\"token\", \"text\" (the token's piece; bytes that are not\n"
    "                          valid UTF-8 become U+FFFD), \"bytes\" (the piece's exact bytes),\n"
    "                          \"logprob\" (log-softmax of the raw logits, temperature 1),\n"
    "                          \"sampler_logprob\" (log of the probability the sampler drew it\n"
    "                          with), \"top\": the N most probable tokens [{token, text, bytes,\n"
    "                          logprob}]} (N = 0..4096; 0 = no alternatives)\n"
    "      --beams B           beam search of width B (1..16) instead of sampling: the most\n"
    "                          probable sequence of up to -n tokens (which must be given) by\n"
    "                          total log-probability; sampling flags do not apply\n"
    "      --length-penalty A  beam score = logprob / length^A (default 1; 0 = the plain sum)\n"
    "      --n-best N          print the N best finished sequences (1..B, default 1), each after\n"
    "                          a line with its rank, score, log-probability and stop reason\n"
    "      --prompt-cache FILE restore the prefilled prompt from FILE when the tokens it holds\n"
    "                          begin this prompt (then only the rest runs); after prefill, save\n"
    "                          the session there (rlm_session_save) when it ran new tokens. A\n"
    "                          cache of another model or config is reported and ignored\n"
    "      --compare-plain     with --draft / --lookup: generate again without speculation\n"
    "                          (not printed) and report its decode speed, the speed-up and\n"
    "                          whether the tokens are identical\n"
    "  -h, --help              this help\n";

const char* stop_name(rlm_stop_reason r) {
  switch (r) {
    case RLM_STOP_NONE: return "none";
    case RLM_STOP_END_TOKEN: return "end-token";
    case RLM_STOP_STOP_STRING: return "stop-string";
    case RLM_STOP_MAX_TOKENS: return "max-tokens";
    case RLM_STOP_GRAMMAR: return "grammar";
  }
  return "?";
}

bool parse_ids(const char* s, std::vector<int32_t>* out) {
  const char* p = s;
  while (*p) {
    while (*p == ' ' || *p == ',' || *p == '\t' || *p == '\n') ++p;
    if (!*p) break;
    char* end = nullptr;
    long v = strtol(p, &end, 10);
    if (end == p || v < INT32_MIN || v > INT32_MAX) return false;
    out->push_back(static_cast<int32_t>(v));
    p = end;
  }
  return !out->empty();
}

// A JSON number, or null for NaN / infinities (JSON has no such numbers): %.9g round-trips a
// float.
std::string json_number(float v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  snprintf(buf, sizeof buf, "%.9g", static_cast<double>(v));
  return buf;
}

// Appends "token":ID,"text":"...","bytes":[...] for `token` after `prev` to *out: the bytes it
// adds to the text there, exact, and as a JSON string with invalid UTF-8 replaced by U+FFFD (a
// JSON string must be Unicode).
void append_token_json(const rlm_model* model, int32_t prev, int32_t token, std::string* out) {
  char piece[256];
  size_t n = 0;
  if (rlm_token_text_after(model, prev, token, piece, sizeof piece, &n) != RLM_OK) n = 0;
  *out += "\"token\":" + std::to_string(token) + ",\"text\":\"";
  size_t i = 0;
  while (i < n) {
    const unsigned char c = static_cast<unsigned char>(piece[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    bool valid = len > 0 && i + len <= n && (len == 1 || c >= 0xc2) && c <= 0xf4;
    for (size_t k = 1; valid && k < len; ++k) {
      valid = (static_cast<unsigned char>(piece[i + k]) & 0xc0) == 0x80;
    }
    if (valid && len == 3) {  // no overlongs or surrogates
      const unsigned char d = static_cast<unsigned char>(piece[i + 1]);
      valid = !(c == 0xe0 && d < 0xa0) && !(c == 0xed && d >= 0xa0);
    } else if (valid && len == 4) {
      const unsigned char d = static_cast<unsigned char>(piece[i + 1]);
      valid = !(c == 0xf0 && d < 0x90) && !(c == 0xf4 && d >= 0x90);
    }
    if (!valid) {
      *out += "\xef\xbf\xbd";  // U+FFFD
      ++i;
      continue;
    }
    if (len > 1) {
      out->append(piece + i, len);
    } else if (c == '"' || c == '\\') {
      *out += '\\';
      *out += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      char esc[8];
      snprintf(esc, sizeof esc, "\\u%04x", c);
      *out += esc;
    } else {
      *out += static_cast<char>(c);
    }
    i += len;
  }
  *out += "\",\"bytes\":[";
  for (size_t k = 0; k < n; ++k) {
    if (k) *out += ',';
    *out += std::to_string(static_cast<unsigned char>(piece[k]));
  }
  *out += ']';
}

int fail(const char* what, rlm_status st, const char* msg) {
  fprintf(stderr, "ringlm generate: %s: %s%s%s\n", what, rlm_status_string(st), *msg ? ": " : "",
          msg);
  return 1;
}

// The text `tokens` add after `prev`, cut before the first stop string when `stop` says one
// ended it.
std::string beam_text(const rlm_model* model, int32_t prev, const std::vector<int32_t>& tokens,
                      rlm_stop_reason stop, const std::vector<std::string>& stops) {
  std::string text;
  char piece[256];
  for (int32_t t : tokens) {
    size_t n = 0;
    if (rlm_token_text_after(model, prev, t, piece, sizeof piece, &n) == RLM_OK) text.append(piece, n);
    prev = t;
  }
  if (stop == RLM_STOP_STOP_STRING) {
    size_t cut = text.size();
    for (const std::string& s : stops) cut = std::min(cut, text.find(s));
    text.resize(cut);
  }
  return text;
}

// generate --beams: one beam search after the prompt, the n_best results printed.
int run_beams(const rlm_model* model, rlm_session_config cfg, uint32_t beams, uint32_t n_predict,
              float length_penalty, uint32_t n_best, const std::vector<std::string>& stops,
              bool ignore_eos, bool have_prompt, const std::string& prompt, uint32_t feed_flags,
              const std::vector<int32_t>& prompt_ids, bool print_ids) {
  cfg.max_beams = beams;
  cfg.max_beam_tokens = n_predict;
  CliSession session;
  if (!session.open("generate", model, cfg, nullptr)) return 1;
  rlm_session* s = session.get();
  for (const std::string& stop : stops) {
    const rlm_status st = rlm_session_add_stop_string(s, stop.data(), stop.size());
    if (st != RLM_OK) return fail("stop string", st, rlm_session_error(s));
  }
  rlm_session_set_ignore_eos(s, ignore_eos ? 1 : 0);
  rlm_status st = have_prompt
                      ? rlm_session_feed_text_ex(s, prompt.data(), prompt.size(), feed_flags)
                      : rlm_session_feed_tokens(s, prompt_ids.data(), prompt_ids.size());
  if (st != RLM_OK) return fail("prompt", st, rlm_session_error(s));
  // The prompt's last token: the first generated token's text can depend on it.
  int32_t prev = prompt_ids.empty() ? -1 : prompt_ids.back();
  if (have_prompt) {
    std::vector<int32_t> ids;
    std::string e;
    if (tokenize_text(model, prompt, feed_flags | RLM_TOKENIZE_ADD_BOS, &ids, &e) && !ids.empty()) {
      prev = ids.back();
    }
  }
  rlm_beam_params p;
  rlm_beam_params_default(&p);
  p.n_beams = beams;
  p.max_tokens = n_predict;
  p.length_penalty = length_penalty;
  p.n_best = n_best;
  std::vector<std::vector<int32_t>> bufs(n_best, std::vector<int32_t>(n_predict));
  std::vector<rlm_beam_result> res(n_best);
  for (uint32_t i = 0; i < n_best; ++i) {
    rlm_beam_result_default(&res[i]);
    res[i].tokens = bufs[i].data();
    res[i].capacity = n_predict;
  }
  uint32_t n = 0;
  const double t0 = now_s();
  st = rlm_session_beam_search(s, &p, res.data(), &n);
  const double dt = now_s() - t0;
  if (st != RLM_OK) return fail("beam search", st, rlm_session_error(s));
  for (uint32_t i = 0; i < n; ++i) {
    const std::vector<int32_t> toks(res[i].tokens, res[i].tokens + res[i].n_tokens);
    if (n_best > 1) {
      printf("[%u] score %.6f | logprob %.6f | %u tokens | stop %s\n", i + 1, res[i].score,
             res[i].logprob, res[i].n_tokens, stop_name(res[i].stop));
    }
    if (print_ids) {
      for (size_t k = 0; k < toks.size(); ++k) printf(k ? " %d" : "%d", toks[k]);
      printf("\n");
    } else {
      const std::string text = beam_text(model, prev, toks, res[i].stop, stops);
      fwrite(text.data(), 1, text.size(), stdout);
      if (n_best > 1) printf("\n");
    }
  }
  fflush(stdout);
  fprintf(stderr, "\n[beam search: %u beams | %u tokens best | %.3f s | session %zu bytes | stop %s]\n",
          beams, n ? res[0].n_tokens : 0, dt, session.bytes(), n ? stop_name(res[0].stop) : "none");
  return 0;
}

}  // namespace

int cmd_generate(int argc, char** argv) {
  std::string model_path, prompt;
  bool have_prompt = false, print_ids = false, ignore_eos = false, parse_special = true;
  int n_prompt_sources = 0;  // -p, -f and --prompt-ids given (exactly one allowed)
  std::string prompt_file;
  std::vector<int32_t> prompt_ids;
  std::vector<std::string> stops;
  uint32_t n_predict = 256;
  SpecFlags spec;
  GrammarFlags grammar_flags;
  bool compare_plain = false;
  bool logprobs = false;
  uint32_t n_logprobs = 0;
  std::string prompt_cache;
  uint32_t beams = 0, n_best = 1;
  float length_penalty = 1.0f;
  bool beam_flag_given = false;
  SessionFlags flags;
  rlm_sampling& sp = flags.sampling;
  rlm_session_config& cfg = flags.config;

  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool handled = false;
    if (!parse_session_flag("generate", argc, argv, &i, &flags, &handled)) return 2;
    if (handled) continue;
    if (!parse_spec_flag("generate", argc, argv, &i, &spec, &handled)) return 2;
    if (handled) continue;
    if (!parse_grammar_flag("generate", argc, argv, &i, &grammar_flags, &handled)) return 2;
    if (handled) continue;
    auto need = [&](const char* name) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm generate: %s needs a value\n", name);
        return nullptr;
      }
      return argv[++i];
    };
    const char* v = nullptr;
    bool ok = true;
    if (a == "-h" || a == "--help") {
      printf("%s%s%s%s", kUsage, kSessionFlagsHelp, kSpecFlagsHelp, kGrammarFlagsHelp);
      return 0;
    } else if (a == "-m" || a == "--model") {
      if (!(v = need("-m"))) return 2;
      model_path = v;
    } else if (a == "-p" || a == "--prompt") {
      if (!(v = need("-p"))) return 2;
      prompt = v;
      have_prompt = true;
      ++n_prompt_sources;
    } else if (a == "-f" || a == "--file") {
      if (!(v = need("-f"))) return 2;
      prompt_file = v;
      have_prompt = true;
      ++n_prompt_sources;
    } else if (a == "--no-special" || a == "--no-specials") {
      parse_special = false;
    } else if (a == "--prompt-ids") {
      if (!(v = need("--prompt-ids"))) return 2;
      ok = parse_ids(v, &prompt_ids);
      ++n_prompt_sources;
    } else if (a == "-n" || a == "--n-predict") {
      if (!(v = need("-n"))) return 2;
      ok = parse_n_predict(v, &n_predict);
    } else if (a == "--stop") {
      if (!(v = need("--stop"))) return 2;
      stops.push_back(v);
    } else if (a == "--ignore-eos") {
      ignore_eos = true;
    } else if (a == "--print-ids") {
      print_ids = true;
    } else if (a == "--logprobs") {
      if (!(v = need("--logprobs"))) return 2;
      ok = parse_u32(v, &n_logprobs) && n_logprobs <= 4096;
      logprobs = ok;
    } else if (a == "--compare-plain") {
      compare_plain = true;
    } else if (a == "--prompt-cache") {
      if (!(v = need("--prompt-cache"))) return 2;
      prompt_cache = v;
    } else if (a == "--beams") {
      if (!(v = need("--beams"))) return 2;
      ok = parse_u32(v, &beams) && beams >= 1 && beams <= 16;
    } else if (a == "--length-penalty") {
      if (!(v = need("--length-penalty"))) return 2;
      ok = parse_f32(v, &length_penalty) && std::isfinite(length_penalty);
      beam_flag_given = true;
    } else if (a == "--n-best") {
      if (!(v = need("--n-best"))) return 2;
      ok = parse_u32(v, &n_best) && n_best >= 1;
      beam_flag_given = true;
    } else {
      fprintf(stderr, "ringlm generate: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
    if (!ok) {
      fprintf(stderr, "ringlm generate: bad value '%s' for %s\n", v ? v : "", a.c_str());
      return 2;
    }
  }
  if (model_path.empty() || n_prompt_sources != 1) {
    fprintf(stderr,
            "ringlm generate: need -m MODEL and exactly one of -p / -f / --prompt-ids\n%s",
            kUsage);
    return 2;
  }
  if (!spec_flags_check("generate", spec)) return 2;
  if (!grammar_flags_check("generate", grammar_flags)) return 2;
  grammar_flags_apply(grammar_flags, &cfg);
  if (beam_flag_given && beams == 0) {
    fprintf(stderr, "ringlm generate: --length-penalty and --n-best need --beams\n");
    return 2;
  }
  if (beams > 0) {
    const char* clash = logprobs ? "--logprobs" : compare_plain ? "--compare-plain"
                        : spec.any() ? "--draft / --lookup" : grammar_flags.any() ? "a grammar"
                        : nullptr;
    if (clash) {
      fprintf(stderr, "ringlm generate: --beams does not combine with %s\n", clash);
      return 2;
    }
    if (n_predict == 0) {
      fprintf(stderr, "ringlm generate: --beams needs -n N (the longest sequence, 1..4096)\n");
      return 2;
    }
    if (n_best > beams) {
      fprintf(stderr, "ringlm generate: --n-best %u above --beams %u\n", n_best, beams);
      return 2;
    }
    if (n_predict > 4096) {
      fprintf(stderr, "ringlm generate: -n %u above 4096 with --beams\n", n_predict);
      return 2;
    }
  }
  if (logprobs && print_ids) {
    fprintf(stderr, "ringlm generate: --logprobs and --print-ids are exclusive\n");
    return 2;
  }
  if (compare_plain && !spec.any()) {
    fprintf(stderr, "ringlm generate: --compare-plain needs --draft or --lookup\n");
    return 2;
  }
  if (spec.any()) cfg.max_draft = spec.draft_max;
  finish_session_flags(&flags);
  std::string err;
  if (!prompt_file.empty() && !read_text_input(prompt_file, kMaxTextFileBytes, &prompt, &err)) {
    fprintf(stderr, "ringlm generate: -f: %s\n", err.c_str());
    return 1;
  }
  const uint32_t feed_flags = parse_special ? RLM_TOKENIZE_PARSE_SPECIALS : 0u;
  size_t stop_bytes = 0;
  for (const std::string& s : stops) stop_bytes += s.size();
  if (stop_bytes > cfg.stop_string_bytes) cfg.stop_string_bytes = static_cast<uint32_t>(stop_bytes);
  if (stops.size() > cfg.max_stop_strings) cfg.max_stop_strings = static_cast<uint32_t>(stops.size());

  MappedFile file;
  if (!file.open(model_path, &err)) {
    fprintf(stderr, "ringlm generate: %s\n", err.c_str());
    return 1;
  }
  ringlm::Result<ringlm::Model> model = ringlm::Model::open(file.data(), file.size());
  if (!model) return fail("model", model.code(), model.message());
  if (!check_session_flags("generate", model->get(), cfg)) return 2;
  CliGrammar grammar;
  if (grammar_flags.any() && !grammar.compile("generate", grammar_flags, model->get())) return 1;

  // The whole prompt is queued by one feed: the session's text and token budgets grow to fit it
  // (the runtime tokenizes it in the session's scratch, about 40 bytes per prompt byte). The
  // token count is measured here first (with BOS, an upper bound of what the feed queues); a
  // byte can become several tokens (byte fallback), so the byte count is no bound.
  if (have_prompt) {
    if (prompt.size() > cfg.max_text_bytes) {
      if (prompt.size() > kMaxTextFileBytes) {
        fprintf(stderr, "ringlm generate: prompt of %zu bytes above the limit of %zu\n",
                prompt.size(), kMaxTextFileBytes);
        return 1;
      }
      cfg.max_text_bytes = static_cast<uint32_t>(prompt.size());
    }
    std::vector<int32_t> ids;
    if (!tokenize_text(model->get(), prompt, feed_flags | RLM_TOKENIZE_ADD_BOS, &ids, &err)) {
      fprintf(stderr, "ringlm generate: prompt: %s\n", err.c_str());
      return 1;
    }
    if (ids.size() > cfg.max_pending) {
      if (ids.size() > 0xffffffu) {  // rlm_session_config's max_pending limit
        fprintf(stderr, "ringlm generate: prompt of %zu tokens above the limit of %u\n",
                ids.size(), 0xffffffu);
        return 1;
      }
      cfg.max_pending = static_cast<uint32_t>(ids.size());
    }
  }
  if (prompt_ids.size() > cfg.max_pending) cfg.max_pending = static_cast<uint32_t>(prompt_ids.size());

  // One generation: a session of `c` in tool-owned memory, the prompt, steps to a stop. With
  // `emit` the text (or ids) goes to stdout and the stats line to stderr; --compare-plain runs
  // it a second time, quietly, without speculation.
  struct RunResult {
    std::vector<int32_t> tokens;
    uint32_t n_prompt = 0, n_decode = 0, decode_passes = 0;
    double t_prefill = 0, t_decode = 0;
    size_t bytes = 0;
    rlm_stop_reason stop = RLM_STOP_NONE;
    std::string spec_stats;
  };
  auto run = [&](const rlm_session_config& c, bool speculate, bool emit, RunResult* out) -> int {
    ringlm::Result<ringlm::MemoryRequirement> need = ringlm::Session::memory_required(*model, c);
    if (!need) {
      char why[256];
      rlm_session_config_check(model->get(), &c, why, sizeof why);
      return fail("session config", need.code(), why);
    }
    const size_t bytes = need->bytes;
    // The tool owns the session memory; the runtime only borrows it.
    ringlm::AlignedMemory mem(need->alignment, bytes);
    if (!mem) {
      fprintf(stderr, "ringlm generate: cannot allocate %zu bytes\n", bytes);
      return 1;
    }
    ringlm::Result<ringlm::Session> session =
        ringlm::Session::create(*model, mem.data(), bytes, c);
    if (!session) return fail("session", session.code(), "");
    ringlm::Session& s = *session;
    CliDrafter drafter;
    if (speculate && !drafter.start("generate", spec, s.get(), c)) return 1;
    ringlm::Status st = s.set_sampling(sp);
    if (!st) return fail("sampling", st.code(), st.message());
    if (grammar.get()) {
      const rlm_status gs = rlm_session_set_grammar(s.get(), grammar.get());
      if (gs != RLM_OK) return fail("grammar", gs, rlm_session_error(s.get()));
    }
    for (const std::string& stop : stops) {
      if (!(st = s.add_stop_string(stop))) return fail("stop string", st.code(), st.message());
    }
    std::vector<rlm_token_logprob> top(n_logprobs);
    if (emit && logprobs) {
      st = s.set_logprobs(true, top.data(), n_logprobs);
      if (!st) return fail("logprobs", st.code(), st.message());
    }
    (void)s.set_max_tokens(n_predict);
    (void)s.set_ignore_eos(ignore_eos);
    double cache_s = 0;  // restore + prefill of the rest, with --prompt-cache
    uint32_t cache_run = 0;
    if (emit && !prompt_cache.empty()) {
      // The prompt's tokens as the feed would queue them, BOS per the model.
      std::vector<int32_t> ids = prompt_ids;
      if (have_prompt) {
        std::string e;
        rlm_model_info mi;
        rlm_model_info_default(&mi);
        rlm_model_get_info(model->get(), &mi);
        if (!tokenize_text(model->get(), prompt,
                           feed_flags | (mi.add_bos ? RLM_TOKENIZE_ADD_BOS : 0u), &ids, &e)) {
          return fail("prompt", RLM_ERR_INVALID_ARGUMENT, e.c_str());
        }
      }
      const double t0 = now_s();
      const uint32_t reused = prompt_cache_restore(prompt_cache, s.get(), ids);
      const std::vector<int32_t> rest(ids.begin() + reused, ids.end());
      st = s.feed_tokens(rest.data(), rest.size());
      if (st) st = s.eval();
      if (!st) return fail("prompt", st.code(), st.message());
      cache_s = now_s() - t0;
      cache_run = static_cast<uint32_t>(rest.size());
      fprintf(stderr, "ringlm generate: prompt cache %s: %u of %zu prompt tokens restored, %u run\n",
              prompt_cache.c_str(), reused, ids.size(), cache_run);
      if (!rest.empty()) prompt_cache_save(prompt_cache, s.get(), ids);
    } else {
      st = have_prompt ? s.feed(prompt, feed_flags)
                       : s.feed_tokens(prompt_ids.data(), prompt_ids.size());
      if (!st) return fail("prompt", st.code(), st.message());
    }

    uint32_t n_gen = 0;
    bool first = true;
    // The token before each generated one (its text can depend on it): the prompt's last.
    int32_t prev = -1;
    if (logprobs) {
      std::vector<int32_t> ids = prompt_ids;
      if (have_prompt) {
        std::string e;
        if (!tokenize_text(model->get(), prompt, feed_flags | RLM_TOKENIZE_ADD_BOS, &ids, &e)) {
          ids.clear();
        }
      }
      if (!ids.empty()) prev = ids.back();
    }
    for (;;) {
      const double t0 = now_s();
      ringlm::Result<ringlm::StepResult> r = s.step();
      const double dt = now_s() - t0;
      if (!r) return fail("step", r.code(), r.message());  // ~Session releases, ~mem frees
      if (first) {
        out->n_prompt = r->n_evaluated + cache_run;
        out->t_prefill = dt + cache_s;
        first = false;
        const uint32_t n_ctx = c.n_ctx ? c.n_ctx : model->info()->max_context;
        if (emit && out->n_prompt > n_ctx) {
          fprintf(stderr,
                  "ringlm generate: warning: the prompt's %u tokens exceed the context (--ctx "
                  "%u): the model sees its first %u (--sinks) and its last %u tokens only\n",
                  out->n_prompt, n_ctx, c.n_sink, n_ctx - c.n_sink);
        }
      } else {
        out->t_decode += dt;
        if (r->n_evaluated > 0) ++out->decode_passes;
      }
      ++n_gen;
      out->tokens.push_back(r->token);
      const int32_t prev_token = prev;
      prev = r->token;
      if (!emit) {
      } else if (logprobs) {
        std::string line = "{";
        append_token_json(model->get(), prev_token, r->token, &line);
        line += ",\"logprob\":" + json_number(r->logprob);
        line += ",\"sampler_logprob\":" + json_number(r->sampler_logprob) + ",\"top\":[";
        for (uint32_t k = 0; k < r->n_top; ++k) {
          line += k ? ",{" : "{";
          append_token_json(model->get(), prev_token, top[k].token, &line);
          line += ",\"logprob\":" + json_number(top[k].logprob) + "}";
        }
        line += "]}\n";
        fwrite(line.data(), 1, line.size(), stdout);
      } else if (print_ids) {
        if (r->stop != RLM_STOP_END_TOKEN) printf(n_gen > 1 ? " %d" : "%d", r->token);
      } else if (!r->text.empty()) {
        fwrite(r->text.data(), 1, r->text.size(), stdout);
      }
      if (emit) fflush(stdout);
      out->stop = r->stop;
      if (out->stop != RLM_STOP_NONE) break;
    }
    out->n_decode = n_gen > 1 ? n_gen - 1 : 0;
    out->bytes = bytes + drafter.draft_bytes();
    if (speculate) out->spec_stats = drafter.stats(s.get());
    return 0;
  };

  if (beams > 0) {
    return run_beams(model->get(), cfg, beams, n_predict, length_penalty, n_best, stops,
                     ignore_eos, have_prompt, prompt, feed_flags, prompt_ids, print_ids);
  }
  RunResult res;
  if (int rc = run(cfg, spec.any(), true, &res)) return rc;
  if (print_ids) printf("\n");
  fflush(stdout);
  std::string spec_part;
  if (spec.any()) {
    char buf[96];
    snprintf(buf, sizeof buf, " | %.2f tokens per target pass",
             res.decode_passes ? static_cast<double>(res.n_decode) / res.decode_passes : 0.0);
    spec_part = " | " + res.spec_stats + buf;
  }
  const double decode_tps = res.t_decode > 0 ? res.n_decode / res.t_decode : 0.0;
  fprintf(stderr,
          "\n[prompt tokens %u | prefill %.1f tok/s | first token %.1f ms | decode %.1f tok/s (%u "
          "tokens)%s | session %zu bytes | stop %s]\n",
          res.n_prompt, res.t_prefill > 0 ? res.n_prompt / res.t_prefill : 0.0,
          1e3 * res.t_prefill, decode_tps, res.n_decode, spec_part.c_str(), res.bytes,
          stop_name(res.stop));
  if (compare_plain) {
    rlm_session_config plain_cfg = cfg;
    plain_cfg.max_draft = 0;
    RunResult p;
    if (int rc = run(plain_cfg, false, false, &p)) return rc;
    const double plain_tps = p.t_decode > 0 ? p.n_decode / p.t_decode : 0.0;
    fprintf(stderr, "[plain decode %.1f tok/s (%u tokens) | speed-up %.2fx | tokens %s]\n",
            plain_tps, p.n_decode, plain_tps > 0 ? decode_tps / plain_tps : 0.0,
            p.tokens == res.tokens ? "identical" : "DIFFERENT");
    if (p.tokens != res.tokens) return 1;
  }
  return 0;
}
