// ringlm chat: an interactive conversation that keeps the KV prefix across turns.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "convert/chat_template.h"
#include "cli_common.h"
#include "grammar_flags.h"
#include "speculation_flags.h"
#include "commands.h"
#include "mapped_file.h"
#include "prompt_cache.h"
#include "ringlm/ringlm.h"

namespace {

const char kUsage[] =
    "usage: ringlm chat -m MODEL [options]\n"
    "\n"
    "Reads one user message per line from stdin and streams each reply to stdout (followed by a\n"
    "newline). The conversation stays in the KV cache: each turn runs only its new tokens.\n"
    "Replies end at the family's end-of-turn token (<|im_end|>, <|eot_id|>, <end_of_turn>,\n"
    "<|end|>), the model's end tokens, or -n tokens.\n"
    "Commands: /undo drops the last exchange (rewinds the KV cache), /reset starts over,\n"
    "/quit ends (so does end of input).\n"
    "User lines and --system are plain text: text that spells a special token (\"<|im_end|>\")\n"
    "is encoded as text, never as that token; only the template's own markers are specials.\n"
    "A message that does not fit (--max-prompt) or whose turn fails is reported on stderr and\n"
    "skipped: the conversation rewinds to before it and goes on with the next line. The exit\n"
    "status is then 1 (after all input), else 0.\n"
    "\n"
    "  -m, --model FILE        model file\n"
    "      --system TEXT       system prompt\n"
    "      --template NAME     chatml | llama3 | gemma | phi3 (default: from the model's template)\n"
    "  -n, --n-predict N       max tokens per reply (default 512; 0 or -1 = until end of turn)\n"
    "      --max-prompt N      max tokens one message adds, template markers included (default:\n"
    "                          the context, --ctx)\n"
    "      --prompt-cache FILE the first turn's tokens (template, --system, first message) are\n"
    "                          a prompt as for generate --prompt-cache: the longest beginning\n"
    "                          they share with the tokens saved in FILE is restored and only the\n"
    "                          rest runs; after its prefill the turn is saved there. A run with\n"
    "                          the same --system then skips it. Later turns are not cached\n"
    "      --stats             per-turn token counts and time to the first token on stderr\n"
    "  -h, --help              this help\n";

struct Chat {
  const rlm_model* model;
  rlm_session* s;
  ChatFormat format;
  std::string system;
  uint32_t max_prompt;        // tokens one turn may add
  uint32_t n_ctx;             // KV ring slots, for the "outgrew the context" warning
  bool stats;
  int32_t eot;                // the format's end-of-turn token, -1 if the vocabulary lacks it
  // The settings the session was given (a --prompt-cache restore replaces them: see
  // reapply_settings).
  const rlm_sampling* sampling = nullptr;
  uint32_t n_predict = 0;
  const rlm_grammar* grammar = nullptr;
  std::string prompt_cache = {};  // --prompt-cache FILE, "" = none
  bool cache_tried = false;   // the cache serves the process's first turn only
  bool after_reply = false;   // the last reply ended with the end-of-turn token
  bool warned_wrap = false;
  // Turn starts, for /undo and for rewinding a failed turn: position and after_reply before it.
  struct Mark {
    uint32_t position;
    bool after_reply;
  };
  std::vector<Mark> marks = {};
};

// Tokenizes the rendered segments: template markers by exact piece, text (user lines, the system
// prompt) with the model's tokenizer without special-token parsing, so text that spells a marker
// stays text.
bool segments_to_ids(const rlm_model* m, const std::vector<ChatSegment>& segs,
                     std::vector<int32_t>* ids, std::string* err) {
  std::vector<int32_t> out;
  for (const ChatSegment& seg : segs) {
    if (seg.special) {
      int32_t id;
      if (rlm_token_lookup(m, seg.text.data(), seg.text.size(), &id) != RLM_OK) {
        *err = "the model's vocabulary has no token '" + seg.text + "'";
        return false;
      }
      ids->push_back(id);
      continue;
    }
    if (seg.text.empty()) continue;
    if (!tokenize_text(m, seg.text, 0, &out, err)) return false;
    ids->insert(ids->end(), out.begin(), out.end());
  }
  return true;
}

// Drops everything after `m` (a turn start): the KV positions, pending input, and the sampled
// end-of-turn token that closed the reply before it, which is queued again when the reply had
// ended with it (it had been sampled but not yet run when the mark was taken). After the ring
// has wrapped a rewind is impossible: the conversation starts over instead.
void rewind_to(Chat* c, const Chat::Mark& m) {
  if (rlm_session_rewind(c->s, m.position) != RLM_OK) {
    fprintf(stderr, "ringlm chat: cannot rewind (%s); the conversation starts over\n",
            rlm_session_error(c->s));
    rlm_session_reset(c->s);
    c->marks.clear();
    c->after_reply = false;
    return;
  }
  c->after_reply = m.after_reply;
  if (m.after_reply && c->eot >= 0) rlm_session_feed_tokens(c->s, &c->eot, 1);
}

// A restored snapshot brings the saved run's sampling (and RNG), stops and max tokens and turns
// the grammar off: give the session this run's again. They were accepted at startup, so these
// calls cannot fail. set_sampling reseeds the RNG as at startup; prefill draws nothing from it,
// so the reply is sampled exactly as without the cache.
void reapply_settings(Chat* c) {
  rlm_session_set_sampling(c->s, c->sampling);
  rlm_session_clear_stops(c->s);
  if (c->eot >= 0) rlm_session_add_stop_token(c->s, c->eot);
  rlm_session_set_max_tokens(c->s, c->n_predict);
  rlm_session_set_ignore_eos(c->s, 0);
  if (c->grammar) rlm_session_set_grammar(c->s, c->grammar);
}

// One exchange. false when the message was skipped (reported on stderr; the session is as it
// was before the message).
bool run_turn(Chat* c, const std::string& user) {
  const bool first = rlm_session_position(c->s) == 0 && c->marks.empty();
  std::vector<int32_t> ids;
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(c->model, &info);
  if (first && chat_wants_bos(c->format) && info.bos_id >= 0) ids.push_back(info.bos_id);
  // A reply cut short (max tokens) is closed with the end-of-turn token, as the template
  // expects every assistant message to end with it.
  bool after_reply = c->after_reply;
  if (!first && !after_reply && c->eot >= 0) {
    ids.push_back(c->eot);
    after_reply = true;
  }
  std::string err;
  if (!segments_to_ids(c->model, chat_render_turn(c->format, c->system, user, first,
                                                  after_reply), &ids, &err)) {
    fprintf(stderr, "ringlm chat: %s; message skipped\n", err.c_str());
    return false;
  }
  if (ids.size() > c->max_prompt) {
    fprintf(stderr,
            "ringlm chat: message of %zu tokens (template included) is longer than --max-prompt "
            "%u; skipped\n",
            ids.size(), c->max_prompt);
    return false;
  }
  const Chat::Mark mark{rlm_session_position(c->s), c->after_reply};
  const double t0 = now_s();
  // --prompt-cache: the first turn's tokens are the prompt; `cached` of them come from the file.
  const bool use_cache = first && !c->prompt_cache.empty() && !c->cache_tried;
  uint32_t cached = 0;
  if (use_cache) {
    c->cache_tried = true;
    cached = prompt_cache_restore(c->prompt_cache, c->s, ids);
    reapply_settings(c);
  }
  rlm_status st = rlm_session_feed_tokens(c->s, ids.data() + cached, ids.size() - cached);
  if (st != RLM_OK) {  // nothing was queued: the session is unchanged, but for a restore
    fprintf(stderr, "ringlm chat: %s: %s; message skipped\n", rlm_status_string(st),
            rlm_session_error(c->s));
    if (cached > 0) rewind_to(c, mark);
    return false;
  }
  c->marks.push_back(mark);
  // Reports a failed run of the turn and rewinds to before it.
  auto drop_turn = [&](rlm_status why) {
    fprintf(stderr, "\nringlm chat: %s: %s; turn dropped\n", rlm_status_string(why),
            rlm_session_error(c->s));
    c->marks.pop_back();
    rewind_to(c, mark);
    fputc('\n', stdout);
    fflush(stdout);
    return false;
  };
  uint32_t evaluated = 0, generated = 0;
  if (use_cache) {
    // Prefill now rather than in the first step: the cache is saved from the prefilled session,
    // before anything is sampled (as generate does).
    if ((st = rlm_session_eval(c->s)) != RLM_OK) return drop_turn(st);
    evaluated = static_cast<uint32_t>(ids.size() - cached);
    fprintf(stderr, "ringlm chat: prompt cache %s: %u of %zu prompt tokens restored, %u run\n",
            c->prompt_cache.c_str(), cached, ids.size(), evaluated);
    if (evaluated > 0) {
      // A snapshot cannot hold a grammar: it is set again right after (its state restarts, as
      // at any turn's start; nothing of this turn has been sampled).
      if (c->grammar) rlm_session_set_grammar(c->s, nullptr);
      prompt_cache_save(c->prompt_cache, c->s, ids);
      if (c->grammar) rlm_session_set_grammar(c->s, c->grammar);
    }
  }
  rlm_step_result r;
  rlm_step_result_default(&r);
  double first_token_s = 0;  // from the message to its first token: restore and save included
  do {
    st = rlm_step(c->s, &r);
    if (st != RLM_OK) return drop_turn(st);
    if (generated == 0) first_token_s = now_s() - t0;
    evaluated += r.n_evaluated;
    ++generated;
    fwrite(r.text, 1, r.text_len, stdout);
    fflush(stdout);
  } while (r.stop == RLM_STOP_NONE);
  fputc('\n', stdout);
  fflush(stdout);
  c->after_reply = r.stop == RLM_STOP_END_TOKEN;
  const uint32_t pos = rlm_session_position(c->s);
  if (pos > c->n_ctx && !c->warned_wrap) {
    c->warned_wrap = true;
    fprintf(stderr,
            "ringlm chat: warning: the conversation (%u tokens) is longer than --ctx %u: the model "
            "now sees its first positions (--sinks) and the most recent ones; earlier turns can "
            "no longer be undone\n",
            pos, c->n_ctx);
  }
  if (c->stats) {
    const char* why = r.stop == RLM_STOP_END_TOKEN    ? "end-of-turn"
                      : r.stop == RLM_STOP_MAX_TOKENS ? "max-tokens"
                      : r.stop == RLM_STOP_GRAMMAR    ? "grammar"
                                                      : "stop-string";
    fprintf(stderr,
            "[turn: %zu new tokens, %u run, %u generated, position %u, stop %s] [first token %.1f "
            "ms]\n",
            ids.size(), evaluated, generated, pos, why, 1e3 * first_token_s);
  }
  return true;
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  std::string model_path, system, tmpl_name, prompt_cache;
  uint32_t n_predict = 512, max_prompt = 0;
  bool stats = false;
  SpecFlags spec;
  GrammarFlags grammar_flags;
  SessionFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool handled = false;
    if (!parse_session_flag("chat", argc, argv, &i, &flags, &handled)) return 2;
    if (handled) continue;
    if (!parse_spec_flag("chat", argc, argv, &i, &spec, &handled)) return 2;
    if (handled) continue;
    if (!parse_grammar_flag("chat", argc, argv, &i, &grammar_flags, &handled)) return 2;
    if (handled) continue;
    auto value = [&](std::string* out) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm chat: %s needs a value\n", a.c_str());
        return false;
      }
      *out = argv[++i];
      return true;
    };
    std::string v;
    if (a == "-h" || a == "--help") {
      printf("%s%s%s%s", kUsage, kSessionFlagsHelp, kSpecFlagsHelp, kGrammarFlagsHelp);
      return 0;
    } else if (a == "-m" || a == "--model") {
      if (!value(&model_path)) return 2;
    } else if (a == "--system") {
      if (!value(&system)) return 2;
    } else if (a == "--template") {
      if (!value(&tmpl_name)) return 2;
    } else if (a == "-n" || a == "--n-predict") {
      if (!value(&v) || !parse_n_predict(v.c_str(), &n_predict)) {
        fprintf(stderr, "ringlm chat: bad value for -n\n");
        return 2;
      }
    } else if (a == "--max-prompt") {
      if (!value(&v) || !parse_u32(v.c_str(), &max_prompt) || max_prompt == 0) {
        fprintf(stderr, "ringlm chat: bad value for --max-prompt (a token count >= 1)\n");
        return 2;
      }
    } else if (a == "--prompt-cache") {
      if (!value(&prompt_cache)) return 2;
      if (prompt_cache.empty()) {
        fprintf(stderr, "ringlm chat: --prompt-cache needs a file name\n");
        return 2;
      }
    } else if (a == "--stats") {
      stats = true;
    } else {
      fprintf(stderr, "ringlm chat: unknown option '%s'\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model_path.empty()) {
    fprintf(stderr, "ringlm chat: need -m MODEL\n%s", kUsage);
    return 2;
  }
  if (!spec_flags_check("chat", spec)) return 2;
  if (spec.any()) flags.config.max_draft = spec.draft_max;
  if (!grammar_flags_check("chat", grammar_flags)) return 2;
  grammar_flags_apply(grammar_flags, &flags.config);
  finish_session_flags(&flags);

  MappedFile file;
  std::string err;
  if (!file.open(model_path, &err)) {
    fprintf(stderr, "ringlm chat: %s\n", err.c_str());
    return 1;
  }
  rlm_model model;
  rlm_status st = rlm_model_open(file.data(), file.size(), &model);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm chat: %s: %s\n", rlm_status_string(st), rlm_model_error(&model));
    return 1;
  }
  ChatFormat format;
  if (!tmpl_name.empty()) {
    if (!chat_format_parse(tmpl_name, &format)) {
      fprintf(stderr, "ringlm chat: unknown template '%s'\n", tmpl_name.c_str());
      return 2;
    }
  } else {
    const char* t = nullptr;
    size_t tlen = 0;
    if (rlm_model_chat_template(&model, &t, &tlen) != RLM_OK ||
        !chat_format_detect(std::string(t, tlen), &format)) {
      fprintf(stderr,
              "ringlm chat: the model carries no chat template this tool recognises; pass "
              "--template chatml|llama3|gemma|phi3\n");
      return 1;
    }
  }

  if (!check_session_flags("chat", &model, flags.config)) return 2;
  // Every reply is a sentence of the grammar (each turn starts it again).
  CliGrammar grammar;
  if (grammar_flags.any() && !grammar.compile("chat", grammar_flags, &model)) return 1;
  rlm_model_info info;
  rlm_model_info_default(&info);
  rlm_model_get_info(&model, &info);
  const uint32_t n_ctx = flags.config.n_ctx ? flags.config.n_ctx : info.max_context;
  // One turn's tokens are queued at once: the prompt buffer holds the longest message allowed,
  // plus the end-of-turn token /undo or a dropped turn queues again before it.
  if (max_prompt == 0) max_prompt = n_ctx;
  if (max_prompt > (1u << 24) - 1) {
    fprintf(stderr, "ringlm chat: --max-prompt %u above %u\n", max_prompt, (1u << 24) - 1);
    return 2;
  }
  flags.config.max_pending = max_prompt + 1;
  CliSession session;
  if (!session.open("chat", &model, flags.config, nullptr)) return 1;
  rlm_session* s = session.get();
  CliDrafter drafter;
  if (spec.any() && !drafter.start("chat", spec, s, flags.config)) return 1;
  if (grammar.get() && (st = rlm_session_set_grammar(s, grammar.get())) != RLM_OK) {
    fprintf(stderr, "ringlm chat: grammar: %s: %s\n", rlm_status_string(st), rlm_session_error(s));
    return 1;
  }
  int rc = 0;
  if ((st = rlm_session_set_sampling(s, &flags.sampling)) != RLM_OK) {  // a bad flag value
    fprintf(stderr, "ringlm chat: sampling: %s: %s\n", rlm_status_string(st), rlm_session_error(s));
    rc = 2;
  }
  int32_t eot = -1;
  const char* eot_piece = chat_end_of_turn(format);
  if (rc == 0 && rlm_token_lookup(&model, eot_piece, strlen(eot_piece), &eot) == RLM_OK) {
    rlm_session_add_stop_token(s, eot);
  } else if (rc == 0) {
    fprintf(stderr, "ringlm chat: warning: no '%s' token; replies end at the model's end tokens\n",
            eot_piece);
  }
  rlm_session_set_max_tokens(s, n_predict);

  Chat chat{&model, s, format, system, max_prompt, n_ctx, stats, eot};
  chat.sampling = &flags.sampling;
  chat.n_predict = n_predict;
  chat.grammar = grammar.get();
  chat.prompt_cache = prompt_cache;
  bool skipped = false;
  const bool tty = isatty(0);
  std::string line;
  while (rc == 0) {
    if (tty) fputs("> ", stderr);
    if (!std::getline(std::cin, line)) break;
    if (line == "/quit") break;
    if (line == "/reset") {
      rlm_session_reset(s);
      chat.marks.clear();
      chat.after_reply = false;
      continue;
    }
    if (line == "/undo") {
      if (chat.marks.empty()) {
        fprintf(stderr, "ringlm chat: nothing to undo\n");
        continue;
      }
      const Chat::Mark m = chat.marks.back();
      if ((st = rlm_session_rewind(s, m.position)) != RLM_OK) {
        fprintf(stderr, "ringlm chat: cannot undo: %s: %s\n", rlm_status_string(st),
                rlm_session_error(s));
        continue;
      }
      chat.marks.pop_back();
      // The reply end token that closed the turn before was dropped with the rewind only when it
      // had not been run yet; rerunning it is part of the next turn's input.
      chat.after_reply = m.after_reply;
      if (m.after_reply && eot >= 0) rlm_session_feed_tokens(s, &eot, 1);
      continue;
    }
    if (!run_turn(&chat, line)) skipped = true;
  }
  return rc != 0 ? rc : skipped ? 1 : 0;
}
