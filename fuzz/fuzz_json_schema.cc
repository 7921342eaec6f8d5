// The JSON parser and the JSON Schema → GBNF compiler (runtime/grammar/) on arbitrary bytes.
//
// Input: the schema text. Properties:
//  - never crashes, hangs or reads past the input (ASan; the text is copied into a buffer of
//    exactly its size, not NUL-terminated);
//  - OK: the size query (out NULL, cap 0) reports the same length the real run writes, the text is
//    non-empty, NUL-free, starts with "root ::= " and is NUL-terminated; the scratch the size
//    function asks for is exactly what the run uses; the same input compiles to the same text;
//  - otherwise a named status (invalid JSON / UTF-8, or RLM_ERR_GRAMMAR) with a non-empty
//    message — never RLM_ERR_INTERNAL and never a too-small buffer when sized as asked.
#include <vector>

#include "fuzz_common.h"
#include "grammar/json_schema.h"

using ringlm::internal::Arena;
using ringlm::internal::ErrorSink;

namespace {

struct Run {
  rlm_status status;
  std::string text;
  std::string error;
  size_t used;
};

Run compile(const std::vector<char>& schema, size_t need, std::vector<uint64_t>& mem, bool size_query) {
  Run r;
  char eb[512];
  eb[0] = '\0';
  ErrorSink err{eb, sizeof eb};
  Arena a(mem.data(), need);
  size_t len = 12345;
  if (size_query) {
    r.status = ringlm::internal::json_schema_to_gbnf(schema.data(), schema.size(), a, nullptr, 0, &len, &err);
    r.text.assign(len, 'x');  // only the length matters
  } else {
    std::vector<char> out(1 << 20);
    r.status = ringlm::internal::json_schema_to_gbnf(schema.data(), schema.size(), a, out.data(), out.size(), &len, &err);
    if (r.status == RLM_OK) {
      FUZZ_CHECK(len < out.size() && out[len] == '\0', "output not NUL-terminated");
      r.text.assign(out.data(), len);
    }
  }
  r.error = eb;
  r.used = a.used();
  return r;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > 65536) return 0;
  const std::vector<char> schema(data, data + size);  // exactly `size` bytes: ASan sees overreads
  const size_t need = ringlm::internal::json_schema_scratch_bytes(schema.data(), schema.size());
  std::vector<uint64_t> mem(need / 8 + 1);
  const Run q = compile(schema, need, mem, true);
  const Run r = compile(schema, need, mem, false);
  const rlm_status kGrammar = ringlm::internal::kErrGrammar;
  if (q.status == RLM_ERR_BUFFER_TOO_SMALL) {
    FUZZ_CHECK(r.status == RLM_OK, "size query ok but real run: %s", r.error.c_str());
  } else {
    FUZZ_CHECK(q.status == r.status, "size query %d vs run %d", q.status, r.status);
  }
  if (r.status == RLM_OK) {
    FUZZ_CHECK(q.status == RLM_ERR_BUFFER_TOO_SMALL, "size query with cap 0 succeeded");
    FUZZ_CHECK(q.text.size() == r.text.size(), "size query %zu != written %zu", q.text.size(), r.text.size());
    FUZZ_CHECK(!r.text.empty() && r.text.compare(0, 9, "root ::= ") == 0, "output does not start with root");
    FUZZ_CHECK(r.text.find('\0') == std::string::npos, "NUL inside the output");
    FUZZ_CHECK(r.text.back() == '\n', "output does not end with a newline");
    FUZZ_CHECK(r.used == need, "scratch used %zu != measured %zu", r.used, need);
    const Run again = compile(schema, need, mem, false);
    FUZZ_CHECK(again.status == RLM_OK && again.text == r.text, "output not deterministic");
  } else {
    FUZZ_CHECK(r.status == RLM_ERR_INVALID_ARGUMENT || r.status == RLM_ERR_INVALID_UTF8 ||
                   r.status == kGrammar,
               "status %d (%s): %s", r.status, rlm_status_string(r.status), r.error.c_str());
    FUZZ_CHECK(!r.error.empty(), "error %d without a message", r.status);
  }
  return 0;
}
