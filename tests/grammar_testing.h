// Helpers shared by the grammar tests and fuzz_grammar_mask (#15), without GoogleTest: the test
// schemas, schema -> GBNF through the C ABI, printable bytes, and a parse state as words written
// independently of the runtime's matcher_key (an oracle must not share a bug with what it checks).
#ifndef RINGLM_TESTS_GRAMMAR_TESTING_H_
#define RINGLM_TESTS_GRAMMAR_TESTING_H_

#include <stdint.h>
#include <stdio.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "grammar/matcher.h"
#include "ringlm/ringlm.h"
#include "testing.h"

namespace ringlm_test {

// tests/data/json_schemas/<name> ("" when it cannot be read).
inline std::string schema_file(const std::string& name) {
  const std::string here = __FILE__;
  std::ifstream f(here.substr(0, here.rfind('/')) + "/data/json_schemas/" + name);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The GBNF a schema compiles to (rlm_json_schema_to_gbnf's size query, then the text). On an
// error: "" with *err = status name and message.
inline std::string schema_to_gbnf(const std::string& schema, std::string* err) {
  AlignedBuffer scratch(rlm_json_schema_scratch_bytes(schema.data(), schema.size()));
  size_t len = 0;
  char msg[256] = "";
  rlm_status st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), scratch.data(),
                                          scratch.size(), nullptr, 0, &len, msg, sizeof msg);
  if (st == RLM_ERR_BUFFER_TOO_SMALL) {
    std::string out(len + 1, '\0');
    st = rlm_json_schema_to_gbnf(schema.data(), schema.size(), scratch.data(), scratch.size(),
                                 &out[0], out.size(), &len, msg, sizeof msg);
    if (st == RLM_OK) {
      out.resize(len);
      return out;
    }
  }
  *err = std::string(rlm_status_string(st)) + ": " + msg;
  return "";
}

// GBNF compiled against a model in memory it owns (exactly rlm_grammar_memory's bytes): st and
// msg say how the compile went.
struct CompiledGrammar {
  AlignedBuffer mem;
  rlm_grammar* g = nullptr;
  rlm_status st = RLM_OK;
  std::string msg;
  CompiledGrammar(const rlm_model* model, const std::string& gbnf) {
    size_t need = 0;
    st = rlm_grammar_memory(model, gbnf.data(), gbnf.size(), &need);
    if (st != RLM_OK) return;
    mem.resize(need);
    char m[512] = "";
    st = rlm_grammar_compile(model, gbnf.data(), gbnf.size(), mem.data(), need, &g, m, sizeof m);
    msg = m;
  }
};

// Bytes as printable text: ASCII as is, the rest (and \ ") as \xHH.
inline std::string escape_bytes(const uint8_t* p, size_t n) {
  std::string s;
  char buf[8];
  for (size_t i = 0; i < n; ++i) {
    if (p[i] >= 0x20 && p[i] < 0x7F && p[i] != '\\' && p[i] != '"') {
      s += static_cast<char>(p[i]);
    } else {
      snprintf(buf, sizeof buf, "\\x%02X", p[i]);
      s += buf;
    }
  }
  return s;
}

// The state as words (pending bytes, every stack's frames).
inline std::vector<uint32_t> state_words(const ringlm::internal::Matcher& m) {
  std::vector<uint32_t> w = {m.pending, m.pending_len, m.pending_need, m.pending_lead,
                             m.cur.n_stacks};
  for (uint32_t k = 0; k < m.cur.n_stacks; ++k) {
    w.push_back(m.cur.len[k]);
    for (uint32_t j = 0; j < m.cur.len[k]; ++j) {
      const ringlm::internal::MatchFrame& f = m.cur.frames[m.cur.off[k] + j];
      w.push_back(f.pos);
      w.push_back(f.count);
    }
  }
  return w;
}

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_GRAMMAR_TESTING_H_
