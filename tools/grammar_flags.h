// Grammar flags of `generate` (and later `chat`), #15: --grammar FILE.gbnf, --json-schema FILE,
// --json, --grammar-state-bytes N. Reads the grammar, converts a schema to GBNF, compiles it
// against the model in tool-owned memory, and sets it on sessions.
#ifndef RINGLM_TOOLS_GRAMMAR_FLAGS_H_
#define RINGLM_TOOLS_GRAMMAR_FLAGS_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

struct GrammarFlags {
  std::string gbnf_file, schema_file;
  bool json = false;
  uint32_t state_bytes = 0;  // 0: the default below when a grammar is given
  uint32_t cache_bytes = 0;  // --grammar-cache-bytes (with cache_given; else the default below)
  bool cache_given = false;
  bool any() const { return !gbnf_file.empty() || !schema_file.empty() || json; }
};

constexpr uint32_t kDefaultGrammarStateBytes = 1u << 20;
constexpr uint32_t kDefaultGrammarCacheBytes = 4u << 20;

// Sets the session config's grammar budgets from the flags (when a grammar is given).
void grammar_flags_apply(const GrammarFlags& f, rlm_session_config* cfg);

extern const char kGrammarFlagsHelp[];

// Consumes argv[*i] when it is a grammar flag (sets *handled); false on a bad value (message
// printed with `verb`).
bool parse_grammar_flag(const char* verb, int argc, char** argv, int* i, GrammarFlags* f,
                        bool* handled);

// At most one grammar source; prints "ringlm VERB: ..." and returns false otherwise.
bool grammar_flags_check(const char* verb, const GrammarFlags& f);

// A grammar compiled against a model, in memory this object owns.
class CliGrammar {
 public:
  // Reads / converts / compiles; false with the message printed ("ringlm VERB: ...").
  bool compile(const char* verb, const GrammarFlags& f, const rlm_model* model);
  const rlm_grammar* get() const { return grammar_; }
  size_t bytes() const { return size_; }
  // Seconds of the schema conversion (when a schema) and of rlm_grammar_compile.
  double compile_s() const { return compile_s_; }

 private:
  std::vector<uint8_t> mem_;
  size_t size_ = 0;
  double compile_s_ = 0;
  rlm_grammar* grammar_ = nullptr;
};

#endif  // RINGLM_TOOLS_GRAMMAR_FLAGS_H_
