// `ringlm VERB ...`: one executable, one verb per tools/cmd_*.cc.
#include <stdio.h>
#include <string.h>

#include "commands.h"
#include "ringlm/ringlm.h"

namespace {

struct Verb {
  const char* name;
  int (*run)(int, char**);
  const char* summary;
};

const Verb kVerbs[] = {
    {"convert", cmd_convert, "convert llama2.c / GGUF / Hugging Face checkpoints to a model file"},
    {"inspect", cmd_inspect, "verify a model file and print its contents"},
    {"generate", cmd_generate, "generate text from a prompt"},
    {"chat", cmd_chat, "interactive chat with a chat model (keeps the KV prefix across turns)"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"detokenize", cmd_detokenize, "print the text of token ids"},
    {"embed", cmd_embed, "write a model as a C source file (aligned array) to link into a program"},
    {"grammar", cmd_grammar, "check texts against a GBNF grammar / JSON Schema; print a schema's GBNF"},
    {"perplexity", cmd_perplexity, "perplexity of a text (llama.cpp's method); KL divergence vs a base model"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server with streaming and a chat page"},
    {"bench", cmd_bench, "measure prefill / decode speed (model file or synthetic shape)"},
};

#ifndef RINGLM_VERSION
#error "RINGLM_VERSION (the CMake project version) is defined by tools/CMakeLists.txt"
#endif

void usage(FILE* f) {
  fprintf(f,
          "usage: ringlm VERB [options]   (ringlm VERB --help for a verb's options)\n"
          "       ringlm --version\n\nverbs:\n");
  for (const Verb& v : kVerbs) fprintf(f, "  %-10s %s\n", v.name, v.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
    usage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V")) {
    printf("ringlm %s (model format %u)\n", RINGLM_VERSION, RLM_FORMAT_VERSION);
    return 0;
  }
  for (const Verb& v : kVerbs) {
    if (!strcmp(argv[1], v.name)) return v.run(argc - 1, argv + 1);
  }
  fprintf(stderr, "ringlm: unknown verb '%s'\n\n", argv[1]);
  usage(stderr);
  return 2;
}
