// The GBNF parser and the recognizer (runtime/grammar/gbnf.h, matcher.h), #15.
//
// Input: [budget byte][split byte] then the grammar text, a 0xFF byte, and the text to check
// (without a 0xFF the whole rest is the grammar and the text is empty). Properties:
//  - compile either succeeds or returns RLM_ERR_GRAMMAR / RLM_ERR_INVALID_UTF8 with a message
//    naming "line L, column C" (never a crash, a read past the input, or a hang);
//  - the recognizer never overruns its budget: a set that does not fit is RLM_ERR_CAPACITY;
//  - feeding the text in one call or in pieces of `split` bytes gives the same verdict (bytes
//    consumed, accepted, complete, done), unless the budget ran out in either.
#include <string.h>

#include <vector>

#include "arena.h"
#include "fuzz_common.h"
#include "grammar/gbnf.h"
#include "grammar/matcher.h"

using namespace ringlm::internal;

namespace {

struct Verdict {
  Status st = RLM_OK;
  bool accepted = false;
  size_t used = 0;
  bool can_end = false, done = false;
};

Verdict run(const Grammar* g, size_t budget, const uint8_t* text, size_t n, size_t split,
            std::vector<uint8_t>* mem) {
  Arena measure(nullptr, 0);
  Matcher tmp;
  matcher_layout(measure, g, budget, &tmp);
  mem->assign(measure.used() + 64, 0);
  uint8_t* base = mem->data() + (64 - reinterpret_cast<uintptr_t>(mem->data()) % 64) % 64;
  Arena a(base, measure.used());
  Matcher m;
  matcher_layout(a, g, budget, &m);
  FUZZ_CHECK(a.ok() && a.used() == measure.used(), "matcher layout differs from its measure");
  Verdict v;
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  v.st = matcher_reset(&m, &err);
  if (v.st != RLM_OK) {
    FUZZ_CHECK(v.st == RLM_ERR_CAPACITY && msg[0], "reset: status %d '%s'", v.st, msg);
    return v;
  }
  v.accepted = true;
  for (size_t k = 0; k < n && v.accepted; k += split) {
    const size_t len = n - k < split ? n - k : split;
    size_t used = 0;
    v.st = matcher_accept_bytes(&m, text + k, len, &v.accepted, &used, &err);
    v.used += used;
    if (v.st != RLM_OK) {
      FUZZ_CHECK(v.st == RLM_ERR_CAPACITY && msg[0], "accept: status %d '%s'", v.st, msg);
      return v;
    }
  }
  v.can_end = matcher_can_end(m);
  v.done = matcher_is_done(m);
  FUZZ_CHECK(!v.done || v.can_end, "done but not complete");
  return v;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const size_t budget = kMatcherMinBytes + (static_cast<size_t>(data[0]) << 10);
  const size_t split = 1 + data[1] % 7;
  data += 2;
  size -= 2;
  const uint8_t* sep = static_cast<const uint8_t*>(memchr(data, 0xFF, size));
  const size_t glen = sep ? static_cast<size_t>(sep - data) : size;
  const uint8_t* text = sep ? sep + 1 : data + size;
  const size_t tlen = sep ? size - glen - 1 : 0;
  // The grammar in a buffer of exactly its size: a read past it is an ASan report.
  std::vector<char> gtext(data, data + glen);
  std::vector<uint8_t> gmem(gbnf_bytes(glen) + 64);
  uint8_t* base = gmem.data() + (64 - reinterpret_cast<uintptr_t>(gmem.data()) % 64) % 64;
  Arena a(base, gbnf_bytes(glen));
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  const Grammar* g = nullptr;
  const Status st = gbnf_compile(glen ? gtext.data() : nullptr, glen, a, &g, &err);
  if (st != RLM_OK) {
    FUZZ_CHECK(st == RLM_ERR_GRAMMAR || st == RLM_ERR_INVALID_UTF8, "compile status %d '%s'", st, msg);
    FUZZ_CHECK(strstr(msg, "line ") != nullptr && strstr(msg, "column ") != nullptr,
               "message without a location: '%s'", msg);
    return 0;
  }
  std::vector<uint8_t> m1, m2;
  const Verdict whole = run(g, budget, text, tlen, tlen ? tlen : 1, &m1);
  const Verdict parts = run(g, budget, text, tlen, split, &m2);
  if (whole.st != RLM_OK || parts.st != RLM_OK) return 0;
  FUZZ_CHECK(whole.accepted == parts.accepted && whole.used == parts.used &&
                 whole.can_end == parts.can_end && whole.done == parts.done,
             "split %zu: whole (%d, %zu, %d, %d) vs parts (%d, %zu, %d, %d)", split, whole.accepted,
             whole.used, whole.can_end, whole.done, parts.accepted, parts.used, parts.can_end,
             parts.done);
  return 0;
}
