#include "tokenizer_source.h"

#include <stdio.h>
#include <string.h>

#include <algorithm>

#include "convert/file_io.h"
#include "convert/ir.h"
#include "convert/readers.h"
#include "convert/tiktoken.h"
#include "tokenizer.h"

namespace {

using namespace ringlm::internal;

// The first `n` bytes of a regular file (fewer when it is shorter); false with *err when it
// cannot be opened or is not a regular file (a FIFO is refused, not waited on).
bool read_head(const std::string& path, size_t n, std::string* out, std::string* err) {
  const std::shared_ptr<conv::InputFile> f = conv::InputFile::open(path, err);
  if (!f) return false;
  out->assign(static_cast<size_t>(std::min<uint64_t>(n, f->size())), '\0');
  return out->empty() || f->read_at(0, &(*out)[0], out->size(), err);
}

// A llama2.c tokenizer.bin: int32 max_token_length, then (float score, int32 len, len bytes)
// records up to the end of the file. Returns the record count, 0 when the file is not one.
uint32_t llama2c_token_count(const std::string& path) {
  std::string err;
  const std::shared_ptr<conv::InputFile> f = conv::InputFile::open(path, &err);
  if (!f) return 0;
  conv::Cursor c(f.get(), 0);
  int32_t max_len = 0;
  if (!c.get(&max_len, &err) || max_len <= 0 || max_len > 4096) return 0;
  uint32_t n = 0;
  while (c.remaining() > 0) {
    int32_t len = 0;
    if (!c.skip(4, &err) || !c.get(&len, &err) || len < 0 || len > max_len ||
        !c.skip(static_cast<uint64_t>(len), &err)) {
      return 0;
    }
    if (++n > kMaxVocab) return 0;
  }
  return n;
}

bool build_table(const conv::TokenizerData& d, const std::string& kind, const std::string& path,
                 CliTokenizer* out, std::string* err) {
  out->table = conv::tokenizer_only_buffer(d);
  out->vocab = static_cast<uint32_t>(d.pieces.size());
  out->tok = flatbuffers::GetRoot<fb::Tokenizer>(out->table.data());
  out->source = kind;
  char msg[256] = {0};
  ErrorSink sink{msg, sizeof(msg)};
  if (verify_tokenizer(out->tok, out->vocab, &sink) != RLM_OK) {
    *err = kind + " vocabulary '" + path + "' is not usable: " + msg;
    return false;
  }
  return true;
}

}  // namespace

bool open_model_tokenizer(const std::string& path, CliTokenizer* out, std::string* err) {
  out->file.reset(new MappedFile);
  if (!out->file->open(path, err)) return false;
  out->model.reset(new rlm_model);
  if (rlm_model_open(out->file->data(), out->file->size(), out->model.get()) != RLM_OK) {
    *err = "model '" + path + "': " + rlm_model_error(out->model.get());
    return false;
  }
  out->tok = model_tokenizer(out->model.get(), &out->vocab);
  out->source = "model";
  return true;
}

namespace {

// A vocabulary file: `path` after the directory rule, its first 4 KiB in *head.
bool vocab_head(const std::string& path_in, std::string* path, std::string* head, std::string* err) {
  *path = path_in;
  if (conv::is_directory(*path)) {
    *path += "/tokenizer.json";
    if (!conv::file_exists(*path)) {
      *err = "directory '" + path_in + "' has no tokenizer.json";
      return false;
    }
  }
  std::string open_err;
  if (!read_head(*path, 4096, head, &open_err)) {
    *err = "vocabulary: " + open_err;
    return false;
  }
  return true;
}

bool is_model_file(const std::string& head) {
  return head.size() >= 12 && head.compare(8, 4, "RLM1") == 0;
}

// The readers by content; false with *err for a file none of them takes.
bool read_vocab_by_content(const std::string& path, const std::string& head,
                           conv::TokenizerData* d, std::string* kind, std::string* err) {
  if (head.size() >= 4 && head.compare(0, 4, "GGUF") == 0) {
    *kind = "GGUF";
    return conv::read_gguf_tokenizer(path, d, err);
  }
  size_t i = 0;
  while (i < head.size() && (head[i] == ' ' || head[i] == '\n' || head[i] == '\r' || head[i] == '\t'))
    ++i;
  if (i < head.size() && head[i] == '{') {
    *kind = "tokenizer.json";
    return conv::read_hf_tokenizer(path, d, err);
  }
  if (conv::looks_like_tiktoken(head.substr(0, head.find('\n')))) {
    *kind = "tiktoken";
    return conv::read_tiktoken(path, d, err);
  }
  if (const uint32_t n = llama2c_token_count(path)) {
    *kind = "llama2.c tokenizer";
    return conv::read_llama2c_tokenizer(path, n, d, err);
  }
  *err = "'" + path +
         "' is not a vocabulary this tool reads (GGUF, tokenizer.json, tiktoken rank file, "
         "llama2.c tokenizer.bin or a model file)";
  return false;
}

}  // namespace

bool read_vocab_data(const std::string& path_in, conv::TokenizerData* out, std::string* kind,
                     std::string* err) {
  std::string path, head;
  if (!vocab_head(path_in, &path, &head, err)) return false;
  if (is_model_file(head)) {
    *err = "'" + path + "' is a model file: give its source vocabulary (GGUF, tokenizer.json, "
           "tiktoken rank file or llama2.c tokenizer.bin)";
    return false;
  }
  return read_vocab_by_content(path, head, out, kind, err);
}

bool open_vocab_tokenizer(const std::string& path_in, CliTokenizer* out, std::string* err) {
  std::string path, head, kind;
  if (!vocab_head(path_in, &path, &head, err)) return false;
  if (is_model_file(head)) return open_model_tokenizer(path, out, err);
  conv::TokenizerData d;
  if (!read_vocab_by_content(path, head, &d, &kind, err)) return false;
  return build_table(d, kind, path, out, err);
}
