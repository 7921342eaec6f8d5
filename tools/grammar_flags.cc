#include "grammar_flags.h"

#include <stdio.h>
#include <string.h>

#include "cli_common.h"

const char kGrammarFlagsHelp[] =
    "\n"
    "grammars (constrained output, README \"Grammars (GBNF)\"):\n"
    "      --grammar FILE      output must be a sentence of this GBNF grammar (llama.cpp's format)\n"
    "      --json-schema FILE  output must be JSON valid against this schema (README \"JSON Schema\")\n"
    "      --json              output must be one JSON value\n"
    "      --grammar-state-bytes N  the parse state's memory (default 1048576; the session\n"
    "                          holds two)\n"
    "      --grammar-cache-bytes N  memory for remembered masks (default 4194304; 0 = none):\n"
    "                          a parse state met again reuses its mask instead of checking\n"
    "                          the vocabulary (about vocab/8 + 800 bytes per state)\n"
    "  The turn stops (stop reason \"grammar\") once the grammar is complete and nothing may\n"
    "  follow; end tokens are allowed only where it may end.\n";

bool parse_grammar_flag(const char* verb, int argc, char** argv, int* i, GrammarFlags* f,
                        bool* handled) {
  const char* a = argv[*i];
  *handled = true;
  auto value = [&]() -> const char* {
    if (*i + 1 >= argc) {
      fprintf(stderr, "ringlm %s: %s needs a value\n", verb, a);
      return nullptr;
    }
    return argv[++*i];
  };
  if (!strcmp(a, "--grammar") || !strcmp(a, "--grammar-file")) {
    const char* v = value();
    if (!v) return false;
    f->gbnf_file = v;
  } else if (!strcmp(a, "--json-schema") || !strcmp(a, "-j")) {
    const char* v = value();
    if (!v) return false;
    f->schema_file = v;
  } else if (!strcmp(a, "--json")) {
    f->json = true;
  } else if (!strcmp(a, "--grammar-state-bytes")) {
    const char* v = value();
    if (!v) return false;
    if (!parse_u32(v, &f->state_bytes) || f->state_bytes < 4096) {
      fprintf(stderr, "ringlm %s: bad value '%s' for --grammar-state-bytes (at least 4096)\n", verb, v);
      return false;
    }
  } else if (!strcmp(a, "--grammar-cache-bytes")) {
    const char* v = value();
    if (!v) return false;
    if (!parse_u32(v, &f->cache_bytes) || f->cache_bytes > (1u << 30)) {
      fprintf(stderr, "ringlm %s: bad value '%s' for --grammar-cache-bytes (0 to 1073741824)\n",
              verb, v);
      return false;
    }
    f->cache_given = true;
  } else {
    *handled = false;
  }
  return true;
}

bool grammar_flags_check(const char* verb, const GrammarFlags& f) {
  const int n = !f.gbnf_file.empty() + !f.schema_file.empty() + f.json;
  if (n > 1) {
    fprintf(stderr, "ringlm %s: give one of --grammar, --json-schema and --json\n", verb);
    return false;
  }
  if (n == 0 && (f.state_bytes || f.cache_given)) {
    fprintf(stderr, "ringlm %s: --grammar-state-bytes and --grammar-cache-bytes go with a grammar\n",
            verb);
    return false;
  }
  return true;
}

void grammar_flags_apply(const GrammarFlags& f, rlm_session_config* cfg) {
  if (!f.any()) return;
  cfg->grammar_state_bytes = f.state_bytes ? f.state_bytes : kDefaultGrammarStateBytes;
  cfg->grammar_cache_bytes = f.cache_given ? f.cache_bytes : kDefaultGrammarCacheBytes;
}

bool CliGrammar::compile(const char* verb, const GrammarFlags& f, const rlm_model* model) {
  std::string text, err;
  if (f.json) {
    text = rlm_json_gbnf();
  } else if (!read_text_input(f.any() && !f.gbnf_file.empty() ? f.gbnf_file : f.schema_file,
                              kMaxTextFileBytes, &text, &err)) {
    fprintf(stderr, "ringlm %s: %s: %s\n", verb, f.gbnf_file.empty() ? "--json-schema" : "--grammar",
            err.c_str());
    return false;
  }
  char msg[512] = "";
  const double t0 = now_s();
  if (!f.schema_file.empty()) {
    std::vector<uint8_t> scratch(rlm_json_schema_scratch_bytes(text.data(), text.size()) + 64);
    uint8_t* base = scratch.data() + (64 - reinterpret_cast<uintptr_t>(scratch.data()) % 64) % 64;
    const size_t scratch_size = scratch.size() - static_cast<size_t>(base - scratch.data());
    size_t len = 0;
    rlm_status st = rlm_json_schema_to_gbnf(text.data(), text.size(), base, scratch_size, nullptr, 0,
                                            &len, msg, sizeof msg);
    std::string gbnf;
    if (st == RLM_ERR_BUFFER_TOO_SMALL) {
      gbnf.assign(len + 1, '\0');
      st = rlm_json_schema_to_gbnf(text.data(), text.size(), base, scratch_size, &gbnf[0],
                                   gbnf.size(), &len, msg, sizeof msg);
      gbnf.resize(len);
    }
    if (st != RLM_OK) {
      fprintf(stderr, "ringlm %s: --json-schema %s: %s (%s)\n", verb, f.schema_file.c_str(), msg,
              rlm_status_string(st));
      return false;
    }
    text = gbnf;
  }
  size_t need = 0;
  rlm_status st = rlm_grammar_memory(model, text.data(), text.size(), &need);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm %s: grammar: %s\n", verb, rlm_status_string(st));
    return false;
  }
  mem_.assign(need + 64, 0);
  uint8_t* base = mem_.data() + (64 - reinterpret_cast<uintptr_t>(mem_.data()) % 64) % 64;
  size_ = need;
  st = rlm_grammar_compile(model, text.data(), text.size(), base, need, &grammar_, msg, sizeof msg);
  compile_s_ = now_s() - t0;
  if (st != RLM_OK) {
    const std::string& what = !f.gbnf_file.empty() ? f.gbnf_file : !f.schema_file.empty() ? f.schema_file : "--json";
    fprintf(stderr, "ringlm %s: %s: %s (%s)\n", verb, what.c_str(), msg, rlm_status_string(st));
    return false;
  }
  return true;
}
