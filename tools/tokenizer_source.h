// The tokenizer `ringlm tokenize` / `ringlm detokenize` work with: a model file's (-m), or one
// built in memory from a vocabulary file (--vocab), so no model is needed.
#ifndef RINGLM_TOOLS_TOKENIZER_SOURCE_H_
#define RINGLM_TOOLS_TOKENIZER_SOURCE_H_

#include <stdint.h>

#include <memory>
#include <string>
#include <vector>

#include "convert/ir.h"
#include "mapped_file.h"
#include "model_generated.h"
#include "ringlm/ringlm.h"

struct CliTokenizer {
  const ringlm::internal::fb::Tokenizer* tok = nullptr;
  uint32_t vocab = 0;
  std::string source;  // what it was read as ("GGUF", "tiktoken", ...), for messages

  // Storage behind `tok`.
  std::unique_ptr<MappedFile> file;
  std::unique_ptr<rlm_model> model;
  std::vector<uint8_t> table;  // a tokenizer-only FlatBuffer (root fb::Tokenizer)
};

// Opens a model file (verified as rlm_model_open does) and uses its tokenizer.
bool open_model_tokenizer(const std::string& path, CliTokenizer* out, std::string* err);

// Reads a vocabulary, recognised by content: a GGUF (vocab-only files included), a Hugging Face
// tokenizer.json (or a directory holding one), a tiktoken rank file (Llama 3's
// tokenizer.model), a llama2.c tokenizer.bin, or a ringlm model file. The table is built in
// memory and checked with verify_tokenizer.
bool open_vocab_tokenizer(const std::string& path, CliTokenizer* out, std::string* err);

// Reads a vocabulary file as open_vocab_tokenizer recognises it (not a model file), into the
// converter's form, e.g. for a synthetic model's --vocab; *kind names what it was read as.
bool read_vocab_data(const std::string& path, ringlm::internal::conv::TokenizerData* out,
                     std::string* kind, std::string* err);

// The tokenizer of -m MODEL when `model_path` is given, else of --vocab FILE.
inline bool open_cli_tokenizer(const std::string& model_path, const std::string& vocab_path,
                               CliTokenizer* out, std::string* err) {
  return model_path.empty() ? open_vocab_tokenizer(vocab_path, out, err)
                            : open_model_tokenizer(model_path, out, err);
}

#endif  // RINGLM_TOOLS_TOKENIZER_SOURCE_H_
