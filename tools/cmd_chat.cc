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
#include "commands.h"
#include "mapped_file.h"
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
    "\n"
    "  -m, --model FILE        model file\n"
    "      --system TEXT       system prompt\n"
    "      --template NAME     chatml | llama3 | gemma | phi3 (default: from the model's template)\n"
    "  -n, --n-predict N       max tokens per reply (default 512)\n"
    "      --stats             per-turn token counts and speed on stderr\n"
    "  -h, --help              this help\n";

struct Chat {
  const rlm_model* model;
  rlm_session* s;
  ChatFormat format;
  std::string system;
  uint32_t max_reply;
  bool stats;
  int32_t eot;                // the format's end-of-turn token, -1 if the vocabulary lacks it
  bool after_reply = false;   // the last reply ended with the end-of-turn token
  // Turn starts, for /undo: position and after_reply before the turn.
  struct Mark {
    uint32_t position;
    bool after_reply;
  };
  std::vector<Mark> marks;
};

// Tokenizes the rendered segments: specials by exact piece, text with the model's tokenizer.
bool segments_to_ids(const rlm_model* m, const std::vector<ChatSegment>& segs,
                     std::vector<int32_t>* ids, std::string* err) {
  std::vector<unsigned char> scratch;
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
    scratch.resize(rlm_tokenize_scratch_bytes(m, seg.text.size()) + 8);
    void* aligned = scratch.data() + ((8 - reinterpret_cast<uintptr_t>(scratch.data()) % 8) % 8);
    std::vector<int32_t> out(seg.text.size() + 8);
    size_t n = 0;
    rlm_status st = rlm_tokenize(m, seg.text.data(), seg.text.size(), 0, out.data(), out.size(),
                                 &n, aligned, scratch.size() - 8);
    if (st != RLM_OK) {
      *err = std::string("tokenize: ") + rlm_status_string(st);
      return false;
    }
    ids->insert(ids->end(), out.begin(), out.begin() + static_cast<long>(n));
  }
  return true;
}

int run_turn(Chat* c, const std::string& user) {
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
    fprintf(stderr, "ringlm chat: %s\n", err.c_str());
    return 1;
  }
  c->marks.push_back(Chat::Mark{rlm_session_position(c->s), c->after_reply});
  rlm_status st = rlm_session_feed_tokens(c->s, ids.data(), ids.size());
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm chat: %s: %s\n", rlm_status_string(st), rlm_session_error(c->s));
    c->marks.pop_back();
    return 1;
  }
  rlm_step_result r;
  rlm_step_result_default(&r);
  uint32_t evaluated = 0, generated = 0;
  do {
    st = rlm_step(c->s, &r);
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm chat: %s: %s\n", rlm_status_string(st), rlm_session_error(c->s));
      return 1;
    }
    evaluated += r.n_evaluated;
    ++generated;
    fwrite(r.text, 1, r.text_len, stdout);
    fflush(stdout);
  } while (r.stop == RLM_STOP_NONE);
  fputc('\n', stdout);
  fflush(stdout);
  c->after_reply = r.stop == RLM_STOP_END_TOKEN;
  if (c->stats) {
    const char* why = r.stop == RLM_STOP_END_TOKEN    ? "end-of-turn"
                      : r.stop == RLM_STOP_MAX_TOKENS ? "max-tokens"
                                                      : "stop-string";
    fprintf(stderr, "[turn: %zu new tokens, %u run, %u generated, position %u, stop %s]\n",
            ids.size(), evaluated, generated, rlm_session_position(c->s), why);
  }
  return 0;
}

}  // namespace

int cmd_chat(int argc, char** argv) {
  std::string model_path, system, tmpl_name;
  uint32_t n_predict = 512;
  bool stats = false;
  SessionFlags flags;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    bool handled = false;
    if (!parse_session_flag("chat", argc, argv, &i, &flags, &handled)) return 2;
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
      printf("%s%s", kUsage, kSessionFlagsHelp);
      return 0;
    } else if (a == "-m" || a == "--model") {
      if (!value(&model_path)) return 2;
    } else if (a == "--system") {
      if (!value(&system)) return 2;
    } else if (a == "--template") {
      if (!value(&tmpl_name)) return 2;
    } else if (a == "-n" || a == "--n-predict") {
      if (!value(&v) || !parse_u32(v.c_str(), &n_predict)) {
        fprintf(stderr, "ringlm chat: bad value for -n\n");
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

  size_t bytes = 0, align = 0;
  if ((st = rlm_session_memory(&model, &flags.config, &bytes, &align)) != RLM_OK) {
    char why[256];
    rlm_session_config_check(&model, &flags.config, why, sizeof why);
    fprintf(stderr, "ringlm chat: session config: %s%s%s\n", rlm_status_string(st),
            *why ? ": " : "", why);
    return 1;
  }
  void* mem = aligned_alloc(align, (bytes + align - 1) / align * align);
  rlm_session* s = nullptr;
  if (!mem || (st = rlm_session_init(&model, &flags.config, mem, bytes, &s)) != RLM_OK) {
    fprintf(stderr, "ringlm chat: session: %s\n", mem ? rlm_status_string(st) : "out of memory");
    free(mem);
    return 1;
  }
  int rc = 0;
  if ((st = rlm_session_set_sampling(s, &flags.sampling)) != RLM_OK) {
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

  Chat chat{&model, s, format, system, n_predict, stats, eot, false, {}};
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
    rc = run_turn(&chat, line);
  }
  rlm_session_release(s);
  free(mem);
  return rc;
}
