// ringlm grammar: compile GBNF grammars and JSON Schemas (#15) and check texts against them.
//   ringlm grammar --from-schema S.json        print the GBNF a schema compiles to
//   ringlm grammar --json                      print the built-in "any JSON value" grammar
//   ringlm grammar check (G.gbnf | --json-schema S.json | --json) [--input TEXT | --file F]
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "ringlm/ringlm.h"

namespace {

using namespace ringlm::internal;

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm grammar --from-schema SCHEMA.json   print the GBNF the schema compiles to\n"
          "       ringlm grammar --json                      print the \"any JSON value\" grammar\n"
          "       ringlm grammar check (GRAMMAR.gbnf | --json-schema SCHEMA.json | --json)\n"
          "                            [--input TEXT | --file PATH] [--state-bytes N]\n"
          "\n"
          "check compiles the grammar (GBNF, the format of llama.cpp's .gbnf files; or a JSON\n"
          "Schema, or any JSON value) and feeds it the text, printing one line:\n"
          "  complete                 the text is a whole sentence of the grammar (exit 0)\n"
          "  complete (nothing may follow)   ... and no continuation exists (exit 0)\n"
          "  valid prefix             the text can still be continued into one (exit 3)\n"
          "  rejected at byte N       byte N (0-based) cannot continue the text (exit 4)\n"
          "A grammar or schema error prints its line and column (exit 1). The text is --input TEXT,\n"
          "or the bytes of --file PATH ('-' for standard input); without either, standard input.\n"
          "--state-bytes N: the recognizer's memory (default 1048576; sessions configure theirs).\n");
}

bool read_file(const std::string& path, std::string* out) {
  std::string err;
  if (!read_text_input(path, kMaxTextFileBytes, out, &err)) {
    fprintf(stderr, "ringlm grammar: %s\n", err.c_str());
    return false;
  }
  return true;
}

// GBNF text of a schema, or an error printed.
bool schema_to_gbnf(const std::string& schema, std::string* gbnf) {
  std::vector<uint8_t> scratch(json_schema_scratch_bytes(schema.data(), schema.size()) + 64);
  char msg[512] = "";
  ErrorSink err{msg, sizeof msg};
  // 64-byte alignment for the arena.
  uint8_t* base = scratch.data();
  const size_t skew = (64 - reinterpret_cast<uintptr_t>(base) % 64) % 64;
  size_t len = 0;
  {
    Arena a(base + skew, scratch.size() - skew);
    const Status st = json_schema_to_gbnf(schema.data(), schema.size(), a, nullptr, 0, &len, &err);
    if (st != RLM_ERR_BUFFER_TOO_SMALL && st != RLM_OK) {
      fprintf(stderr, "ringlm grammar: schema: %s (%s)\n", msg, rlm_status_string(st));
      return false;
    }
  }
  gbnf->assign(len + 1, '\0');
  Arena a(base + skew, scratch.size() - skew);
  const Status st = json_schema_to_gbnf(schema.data(), schema.size(), a, &(*gbnf)[0], len + 1, &len, &err);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm grammar: schema: %s (%s)\n", msg, rlm_status_string(st));
    return false;
  }
  gbnf->resize(len);
  return true;
}

struct Aligned {
  std::vector<uint8_t> bytes;
  uint8_t* data = nullptr;
  size_t size = 0;
  void resize(size_t n) {
    bytes.assign(n + 64, 0);
    const size_t skew = (64 - reinterpret_cast<uintptr_t>(bytes.data()) % 64) % 64;
    data = bytes.data() + skew;
    size = n;
  }
};

int check(const std::string& gbnf, const std::string& what, const std::string& text,
          size_t state_bytes) {
  Aligned gmem;
  gmem.resize(gbnf_bytes(gbnf.size()));
  Arena ga(gmem.data, gmem.size);
  char msg[512] = "";
  ErrorSink err{msg, sizeof msg};
  const Grammar* g = nullptr;
  Status st = gbnf_compile(gbnf.data(), gbnf.size(), ga, &g, &err);
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm grammar: %s: %s (%s)\n", what.c_str(), msg, rlm_status_string(st));
    return 1;
  }
  Arena measure(nullptr, 0);
  Matcher tmp;
  matcher_layout(measure, g, state_bytes, &tmp);
  Aligned smem;
  smem.resize(measure.used());
  Arena sa(smem.data, smem.size);
  Matcher m;
  matcher_layout(sa, g, state_bytes, &m);
  st = matcher_reset(&m, &err);
  bool accepted = false;
  size_t used = 0;
  if (st == RLM_OK) {
    st = matcher_accept_bytes(&m, reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                              &accepted, &used, &err);
  }
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm grammar: %s (%s) at byte %zu\n", msg, rlm_status_string(st), used);
    return 1;
  }
  if (!accepted) {
    printf("rejected at byte %zu\n", used);
    return 4;
  }
  if (matcher_can_end(m)) {
    printf(matcher_is_done(m) ? "complete (nothing may follow)\n" : "complete\n");
    return 0;
  }
  printf("valid prefix\n");
  return 3;
}

}  // namespace

int cmd_grammar(int argc, char** argv) {
  std::string from_schema, grammar_file, schema_file, input, input_file;
  bool json = false, check_mode = false, have_input = false, have_file = false;
  size_t state_bytes = 1 << 20;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* flag) -> const char* {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm grammar: %s needs a value\n", flag);
        return nullptr;
      }
      return argv[++i];
    };
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "check") && i == 1) {
      check_mode = true;
    } else if (!strcmp(a, "--from-schema")) {
      const char* v = value(a);
      if (!v) return 2;
      from_schema = v;
    } else if (!strcmp(a, "--json-schema")) {
      const char* v = value(a);
      if (!v) return 2;
      schema_file = v;
    } else if (!strcmp(a, "--json")) {
      json = true;
    } else if (!strcmp(a, "--input")) {
      const char* v = value(a);
      if (!v) return 2;
      input = v;
      have_input = true;
    } else if (!strcmp(a, "--file")) {
      const char* v = value(a);
      if (!v) return 2;
      input_file = v;
      have_file = true;
    } else if (!strcmp(a, "--state-bytes")) {
      const char* v = value(a);
      uint32_t n = 0;
      if (!v || !parse_u32(v, &n) || n < kMatcherMinBytes) {
        fprintf(stderr, "ringlm grammar: --state-bytes needs a number >= %zu\n", kMatcherMinBytes);
        return 2;
      }
      state_bytes = n;
    } else if (a[0] == '-' && a[1] != '\0') {
      fprintf(stderr, "ringlm grammar: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else if (check_mode && grammar_file.empty()) {
      grammar_file = a;
    } else {
      fprintf(stderr, "ringlm grammar: unexpected argument '%s'\n\n", a);
      usage(stderr);
      return 2;
    }
  }
  if (!check_mode) {
    if (json == !from_schema.empty() || !grammar_file.empty() || !schema_file.empty() ||
        have_input || have_file) {
      fprintf(stderr, "ringlm grammar: give one of --from-schema SCHEMA.json, --json, or check ...\n\n");
      usage(stderr);
      return 2;
    }
    if (json) {
      fputs(json_any_gbnf(), stdout);
      fputc('\n', stdout);
      return 0;
    }
    std::string schema, gbnf;
    if (!read_file(from_schema, &schema) || !schema_to_gbnf(schema, &gbnf)) return 1;
    fwrite(gbnf.data(), 1, gbnf.size(), stdout);
    if (gbnf.empty() || gbnf.back() != '\n') fputc('\n', stdout);
    return 0;
  }
  const int sources = !grammar_file.empty() + !schema_file.empty() + json;
  if (sources != 1 || (have_input && have_file) || !from_schema.empty()) {
    fprintf(stderr, "ringlm grammar check: give exactly one of GRAMMAR.gbnf, --json-schema "
                    "SCHEMA.json or --json, and at most one of --input / --file\n\n");
    usage(stderr);
    return 2;
  }
  std::string gbnf, what;
  if (json) {
    gbnf = json_any_gbnf();
    what = "json";
  } else if (!schema_file.empty()) {
    std::string schema;
    if (!read_file(schema_file, &schema) || !schema_to_gbnf(schema, &gbnf)) return 1;
    what = schema_file;
  } else {
    if (!read_file(grammar_file, &gbnf)) return 1;
    what = grammar_file;
  }
  std::string text = input;
  if (!have_input && !read_file(have_file ? input_file : "-", &text)) return 1;
  return check(gbnf, what, text, state_bytes);
}
