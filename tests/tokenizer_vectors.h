// Helpers the tokenizer tests share: llama.cpp's conformance vector files (NAME.gguf.inp /
// NAME.gguf.out under ../shared/tokenizers/vectors), tokenizer tables in their own buffer, and
// encoding through them.
#ifndef RINGLM_TESTS_TOKENIZER_VECTORS_H_
#define RINGLM_TESTS_TOKENIZER_VECTORS_H_

#include <gtest/gtest.h>
#include <stdint.h>

#include <sstream>
#include <string>
#include <vector>

#include "convert/ir.h"
#include "model_generated.h"
#include "testing.h"
#include "tokenizer.h"

namespace tokvec {

// One vocab's conformance vectors: texts[i] encodes (no BOS) to ids[i].
struct Vectors {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> ids;
};

// Parses llama.cpp's test-tokenizer-0 files: the .inp file holds strings each terminated by
// "\n__ggml_vocab_test__\n"; the .out file holds one line of space-separated ids per string.
// False with *why when the files are absent or malformed.
inline bool parse_vectors(const std::string& in_text, const std::string& out_text, Vectors* v,
                          std::string* why) {
  const std::string sep = "\n__ggml_vocab_test__\n";
  v->texts.clear();
  v->ids.clear();
  size_t pos = 0;
  for (;;) {
    const size_t at = in_text.find(sep, pos);
    if (at == std::string::npos) break;
    v->texts.push_back(in_text.substr(pos, at - pos));
    pos = at + sep.size();
  }
  if (pos != in_text.size()) {
    *why = "trailing text after the last separator";
    return false;
  }
  std::istringstream lines(out_text);
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream ls(line);
    std::vector<int32_t> ids;
    int32_t id;
    while (ls >> id) ids.push_back(id);
    v->ids.push_back(ids);
  }
  if (v->ids.size() != v->texts.size()) {
    *why = std::to_string(v->texts.size()) + " texts but " + std::to_string(v->ids.size()) +
           " id lines";
    return false;
  }
  return true;
}

// Loads tokenizers/vectors/NAME.gguf.{inp,out}; false with *why when absent or malformed.
inline bool load_vectors(const std::string& name, Vectors* v, std::string* why) {
  const std::string inp = ringlm_test::shared_path("tokenizers/vectors/" + name + ".gguf.inp");
  const std::string outp = ringlm_test::shared_path("tokenizers/vectors/" + name + ".gguf.out");
  if (inp.empty() || outp.empty()) {
    *why = name + " conformance vectors not available";
    return false;
  }
  std::string in_text, out_text;
  if (!ringlm_test::read_file(inp, &in_text) || !ringlm_test::read_file(outp, &out_text)) {
    *why = "cannot read " + name + " conformance vectors";
    return false;
  }
  return parse_vectors(in_text, out_text, v, why);
}

// A tokenizer table in its own FlatBuffer (root fb::Tokenizer).
struct Table {
  std::vector<uint8_t> buf;
  uint32_t vocab = 0;
  const ringlm::internal::fb::Tokenizer* tok() const {
    return flatbuffers::GetRoot<ringlm::internal::fb::Tokenizer>(buf.data());
  }
};

inline Table make_table(const ringlm::internal::conv::TokenizerData& d) {
  Table t;
  t.buf = ringlm::internal::conv::tokenizer_only_buffer(d);
  t.vocab = static_cast<uint32_t>(d.pieces.size());
  return t;
}

// tokenize_ex of `text` with `flags` into *ids, with room for `cap` ids (SIZE_MAX: enough for any
// text, one per byte plus BOS and the space prefix). *ids holds the ids on success and is empty on
// failure; *msg (when given) receives the error message.
inline ringlm::internal::Status encode(const Table& t, const std::string& text, uint32_t flags,
                             std::vector<int32_t>* ids, size_t cap = SIZE_MAX,
                             std::string* msg = nullptr) {
  if (cap == SIZE_MAX) cap = text.size() + 2;
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(t.tok(), text.size()));
  ids->assign(cap, -7);
  size_t n = 0;
  char buf[256] = {0};
  ringlm::internal::ErrorSink err{buf, sizeof(buf)};
  const ringlm::internal::Status s = ringlm::internal::tokenize_ex(t.tok(), t.vocab, text.data(), text.size(), flags,
                                               ids->data(), cap, &n, scratch.data(),
                                               scratch.size(), &err);
  if (msg) *msg = buf;
  ids->resize(s == RLM_OK ? n : 0);
  return s;
}

// `text` encoded as rlm_tokenize encodes it: special tokens parsed, BOS first when `bos`. A
// failure is a test failure (and gives no ids).
inline std::vector<int32_t> enc(const Table& t, const std::string& text, bool bos = false) {
  std::vector<int32_t> ids;
  std::string msg;
  EXPECT_EQ(encode(t, text, ringlm::internal::kTokenizeParseSpecial | (bos ? ringlm::internal::kTokenizeAddBos : 0u),
                   &ids, SIZE_MAX, &msg),
            RLM_OK)
      << "'" << text << "': " << msg;
  return ids;
}

inline std::string join(const std::vector<int32_t>& v) {
  std::string s;
  for (int32_t x : v) s += " " + std::to_string(x);
  return s;
}

}  // namespace tokvec

#endif  // RINGLM_TESTS_TOKENIZER_VECTORS_H_
