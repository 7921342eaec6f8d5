// ringlm tokenize (-m MODEL | --vocab FILE) [--bos] [--no-special] [--file PATH | TEXT]
#include <stdio.h>
#include <string.h>

#include <string>
#include <vector>

#include "cli_common.h"
#include "commands.h"
#include "tokenizer.h"
#include "tokenizer_source.h"

namespace {

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm tokenize (-m MODEL | --vocab FILE) [--bos] [--no-special]\n"
          "                       [--file PATH | [--] TEXT]\n"
          "\n"
          "Prints the token ids of TEXT (its bytes exactly as given), space-separated on one line.\n"
          "\n"
          "options:\n"
          "  -m, --model MODEL  use the tokenizer of a ringlm model file\n"
          "  --vocab FILE       use a vocabulary without a model, recognised by content: a GGUF\n"
          "                     (vocab-only files too), a Hugging Face tokenizer.json (or its\n"
          "                     directory), a tiktoken rank file (Llama 3's tokenizer.model) or a\n"
          "                     llama2.c tokenizer.bin\n"
          "  --bos              put the BOS token first (when the vocabulary has one)\n"
          "  --no-special       text such as <|eot_id|> stays text (by default, byte-level\n"
          "                     vocabularies turn control / user-defined token text into that token);\n"
          "                     --no-specials is the same\n"
          "  --file PATH        tokenize the bytes of PATH ('-' for standard input) instead of TEXT:\n"
          "                     a regular file or standard input, at most 64 MiB\n"
          "  -h, --help         this text\n"
          "\n"
          "Exit status: 0 success, 1 failure (unreadable vocabulary or file), 2 usage error.\n");
}

}  // namespace

int cmd_tokenize(int argc, char** argv) {
  std::string model_path, vocab_path, file_path, text;
  bool have_text = false, have_file = false, bos = false, special = true, options_done = false;
  auto need_value = [&](int& i, const char* opt, std::string* dst) {
    if (i + 1 >= argc) {
      fprintf(stderr, "ringlm tokenize: %s needs a value\n", opt);
      return false;
    }
    *dst = argv[++i];
    return true;
  };
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    if (!options_done && a[0] == '-' && a[1] != '\0') {
      if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
        usage(stdout);
        return 0;
      } else if (!strcmp(a, "-m") || !strcmp(a, "--model")) {
        if (!need_value(i, a, &model_path)) return 2;
      } else if (!strcmp(a, "--vocab")) {
        if (!need_value(i, a, &vocab_path)) return 2;
      } else if (!strcmp(a, "--file")) {
        if (!need_value(i, a, &file_path)) return 2;
        have_file = true;
      } else if (!strcmp(a, "--bos")) {
        bos = true;
      } else if (!strcmp(a, "--no-special") || !strcmp(a, "--no-specials")) {
        special = false;
      } else if (!strcmp(a, "--")) {
        options_done = true;
      } else {
        fprintf(stderr, "ringlm tokenize: unknown option '%s'\n\n", a);
        usage(stderr);
        return 2;
      }
      continue;
    }
    if (have_text) {
      fprintf(stderr, "ringlm tokenize: one TEXT only (quote it)\n");
      return 2;
    }
    text = a;
    have_text = true;
  }
  if (model_path.empty() == vocab_path.empty()) {
    fprintf(stderr, "ringlm tokenize: give exactly one of -m MODEL or --vocab FILE\n\n");
    usage(stderr);
    return 2;
  }
  if (have_text == have_file) {
    fprintf(stderr, "ringlm tokenize: give exactly one of TEXT or --file PATH\n\n");
    usage(stderr);
    return 2;
  }
  std::string read_err;
  if (have_file && !read_text_input(file_path, kMaxTextFileBytes, &text, &read_err)) {
    fprintf(stderr, "ringlm tokenize: --file: %s\n", read_err.c_str());
    return 1;
  }

  CliTokenizer t;
  std::string err;
  if (!open_cli_tokenizer(model_path, vocab_path, &t, &err)) {
    fprintf(stderr, "ringlm tokenize: %s\n", err.c_str());
    return 1;
  }
  const size_t scratch_bytes = ringlm::internal::tokenize_scratch_bytes(t.tok, text.size());
  if (scratch_bytes == SIZE_MAX) {
    fprintf(stderr, "ringlm tokenize: text of %zu bytes is too long\n", text.size());
    return 1;
  }
  std::vector<uint8_t> scratch(scratch_bytes);
  std::vector<int32_t> ids(text.size() + 8);
  const uint32_t flags =
      (bos ? ringlm::internal::kTokenizeAddBos : 0u) | (special ? ringlm::internal::kTokenizeParseSpecial : 0u);
  char msg[256] = {0};
  ringlm::internal::ErrorSink sink{msg, sizeof(msg)};
  size_t n = 0;
  rlm_status st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text.data(), text.size(), flags, ids.data(),
                                      ids.size(), &n, scratch.data(), scratch.size(), &sink);
  if (st == RLM_ERR_CAPACITY) {
    ids.resize(n);
    st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text.data(), text.size(), flags, ids.data(),
                             ids.size(), &n, scratch.data(), scratch.size(), &sink);
  }
  if (st != RLM_OK) {
    fprintf(stderr, "ringlm tokenize: %s\n", msg);
    return 1;
  }
  std::string line;
  for (size_t i = 0; i < n; ++i) {
    if (i) line += ' ';
    line += std::to_string(ids[i]);
  }
  line += '\n';
  if (fwrite(line.data(), 1, line.size(), stdout) != line.size() || fflush(stdout) != 0) {
    fprintf(stderr, "ringlm tokenize: cannot write the output\n");
    return 1;
  }
  return 0;
}
