// Verbs of the `ringlm` tool. Each returns the process exit status: 0 success, 1 failure of the
// operation (message on stderr), 2 bad usage.
#ifndef RINGLM_TOOLS_COMMANDS_H_
#define RINGLM_TOOLS_COMMANDS_H_

int cmd_convert(int argc, char** argv);
int cmd_inspect(int argc, char** argv);
int cmd_generate(int argc, char** argv);
int cmd_chat(int argc, char** argv);
int cmd_tokenize(int argc, char** argv);
int cmd_detokenize(int argc, char** argv);
int cmd_bench(int argc, char** argv);
int cmd_embed(int argc, char** argv);
int cmd_grammar(int argc, char** argv);
int cmd_perplexity(int argc, char** argv);
int cmd_serve(int argc, char** argv);

#endif  // RINGLM_TOOLS_COMMANDS_H_
