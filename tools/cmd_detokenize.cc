// ringlm detokenize (-m MODEL | --vocab FILE) [--special] IDS...
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "commands.h"
#include "tokenizer.h"
#include "tokenizer_source.h"

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm detokenize (-m MODEL | --vocab FILE) [--special] IDS...\n"
          "\n"
          "Prints the text of the token ids as raw bytes (nothing added, no newline). IDS are\n"
          "decimal ids, as separate arguments or in one argument separated by spaces or commas\n"
          "(the output of ringlm tokenize works).\n"
          "\n"
          "options:\n"
          "  -m, --model MODEL  use the tokenizer of a ringlm model file\n"
          "  --vocab FILE       use a vocabulary without a model (as for ringlm tokenize: GGUF,\n"
          "                     tokenizer.json, tiktoken rank file, llama2.c tokenizer.bin)\n"
          "  --special          print control tokens as their text (e.g. <|eot_id|>); by default\n"
          "                     they print nothing, as in generated text\n"
          "  -h, --help         this text\n"
          "\n"
          "Exit status: 0 success, 1 failure (unreadable vocabulary, id out of range), 2 usage.\n");
}

// Appends the ids in `arg` (decimal, separated by spaces, tabs, newlines or commas).
bool parse_ids(const char* arg, std::vector<long long>* ids) {
  const char* p = arg;
  for (;;) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r' || *p == ',') ++p;
    if (*p == '\0') return true;
    char* end = nullptr;
    errno = 0;
    const long long v = strtoll(p, &end, 10);
    if (end == p || errno != 0 ||
        (*end != '\0' && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r' &&
         *end != ',')) {
      return false;
    }
    ids->push_back(v);
    p = end;
  }
}

}  // namespace

int cmd_detokenize(int argc, char** argv) {
  std::string model_path, vocab_path;
  bool special = false;
  std::vector<long long> ids;
  bool have_ids = false;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
      usage(stdout);
      return 0;
    } else if (!strcmp(a, "-m") || !strcmp(a, "--model") || !strcmp(a, "--vocab")) {
      if (i + 1 >= argc) {
        fprintf(stderr, "ringlm detokenize: %s needs a value\n", a);
        return 2;
      }
      (strcmp(a, "--vocab") ? model_path : vocab_path) = argv[++i];
    } else if (!strcmp(a, "--special")) {
      special = true;
    } else if (a[0] == '-' && !(a[1] >= '0' && a[1] <= '9')) {
      fprintf(stderr, "ringlm detokenize: unknown option '%s'\n\n", a);
      usage(stderr);
      return 2;
    } else {
      if (!parse_ids(a, &ids)) {
        fprintf(stderr, "ringlm detokenize: '%s' is not a list of token ids\n", a);
        return 2;
      }
      have_ids = true;
    }
  }
  if (model_path.empty() == vocab_path.empty()) {
    fprintf(stderr, "ringlm detokenize: give exactly one of -m MODEL or --vocab FILE\n\n");
    usage(stderr);
    return 2;
  }
  if (!have_ids) {
    fprintf(stderr, "ringlm detokenize: no token ids given\n\n");
    usage(stderr);
    return 2;
  }

  CliTokenizer t;
  std::string err;
  if (!open_cli_tokenizer(model_path, vocab_path, &t, &err)) {
    fprintf(stderr, "ringlm detokenize: %s\n", err.c_str());
    return 1;
  }
  for (long long id : ids) {
    if (id < 0 || id >= static_cast<long long>(t.vocab)) {
      fprintf(stderr, "ringlm detokenize: token id %lld is out of range [0, %u)\n", id, t.vocab);
      return 1;
    }
  }
  std::string text;
  int32_t prev = -1;
  const uint32_t flags = special ? ringlm::internal::kTokenTextSpecial : 0u;
  for (long long id : ids) {
    const int32_t tok = static_cast<int32_t>(id);
    // Size first: a piece may be up to kMaxPieceBytes long.
    const size_t n = ringlm::internal::token_text_ex(t.tok, prev, tok, flags, nullptr, 0);
    const size_t at = text.size();
    text.resize(at + n);
    ringlm::internal::token_text_ex(t.tok, prev, tok, flags, n ? &text[at] : nullptr, n);
    prev = tok;
  }
  if (fwrite(text.data(), 1, text.size(), stdout) != text.size() || fflush(stdout) != 0) {
    fprintf(stderr, "ringlm detokenize: cannot write the output\n");
    return 1;
  }
  return 0;
}
