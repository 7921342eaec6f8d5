// GBNF grammars (#15): the format of llama.cpp's grammars (grammars/README.md there), parsed and
// compiled into the caller's memory, allocation-free.
//
// Syntax: rules `name ::= body` (names [a-zA-Z0-9-]+, `root` is the start; a body may continue on
// the next lines inside parentheses and after `::=` or `|`), alternatives `|`, sequences,
// grouping `( )`, postfix `*` `+` `?` `{m}` `{m,}` `{m,n}`, literals "..." and character classes
// [...] / [^...] (ranges a-z) with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH,
// `.` (any code point), `#` comments to the end of the line. The text must be valid UTF-8.
//
// Compiled form: a flat array of elements; rule r starts at rule_start[r], its alternatives are
// separated by kAlt and the rule ends with kEnd. A character set is one element kChar / kCharNot
// followed by kCharRngUpper (makes the previous value a range) and kCharAlt items; `.` is
// kCharAny. Groups become generated rules (kRuleRef); a repeated item becomes one kRepeat
// element over a rule (the group's, the referenced one's, or a generated one holding the item),
// so `x{0,1000}` stays one element: the recognizer counts repetitions, nothing is expanded.
//
// Errors (RLM_ERR_GRAMMAR) say "line L, column C: ..." (1-based, columns in bytes): syntax,
// unterminated literal / class / group, undefined rule (named, where first used), a rule
// defined twice, no `root`, left recursion (direct, indirect, or behind a prefix that can match
// nothing), an unbounded repetition of something that can match nothing, counts over
// kGbnfMaxRepeat or m > n, groups nested deeper than kGbnfMaxNesting. Invalid UTF-8 is
// RLM_ERR_INVALID_UTF8 (with its line and column). Nothing recurses deeper than kGbnfMaxNesting.
#ifndef RINGLM_RUNTIME_GRAMMAR_GBNF_H_
#define RINGLM_RUNTIME_GRAMMAR_GBNF_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

constexpr uint32_t kGbnfMaxNesting = 64;     // nested groups
constexpr uint32_t kGbnfMaxRepeat = 2000;    // m, n of {m,n} (llama.cpp's limit)
constexpr uint32_t kGbnfRepeatInf = UINT32_MAX;
constexpr size_t kGbnfMaxText = 1u << 24;    // grammar text bytes (16 MiB)

enum GbnfType : uint8_t {
  kEnd = 0,        // end of a rule
  kAlt,            // start of the next alternative
  kRuleRef,        // value: rule id
  kChar,           // value: code point (starts a set)
  kCharNot,        // value: code point (starts a negated set)
  kCharRngUpper,   // value: upper end of a range whose lower end is the previous element's
  kCharAlt,        // value: another code point of the set
  kCharAny,        // any code point
  kRepeat,         // value: body rule; min, max (max kGbnfRepeatInf: unbounded)
};

struct GbnfElem {
  uint8_t type;
  uint8_t pad[3];
  uint32_t value;
  uint32_t min, max;  // kRepeat only
  uint32_t src;       // byte offset in the text it came from (for messages)
};

// Read-only after compile: any number of recognizers on any threads may use it. Every pointer is
// into the compile's block.
struct Grammar {
  const GbnfElem* elems = nullptr;    // (n_elems)
  uint32_t n_elems = 0;
  const uint32_t* rule_start = nullptr;  // (n_rules) index of the rule's first element
  const uint8_t* nullable = nullptr;     // (n_rules) the rule can match the empty string
  const uint32_t* name_off = nullptr;    // (n_rules) name in `text`; generated rules: their
  const uint32_t* name_len = nullptr;    //   item's source text (name_len may be 0)
  uint32_t n_rules = 0;
  uint32_t root = 0;
  const char* text = nullptr;  // a copy of the source (not NUL-terminated)
  uint32_t text_len = 0;
};

// Bytes gbnf_compile needs at most for a text of `len` bytes (an upper bound from the length
// alone: elements <= 4 per byte, rules <= 1 per byte, plus the parser's scratch), or SIZE_MAX
// when len is over kGbnfMaxText.
size_t gbnf_bytes(size_t len);

// Parses and compiles `text` (len bytes, need not be NUL-terminated) into `a`; *out points into
// it. With an arena smaller than gbnf_bytes(len) the compile may fail with
// RLM_ERR_BUFFER_TOO_SMALL. Allocates nothing.
Status gbnf_compile(const char* text, size_t len, Arena& a, const Grammar** out, ErrorSink* err);

// out[r] (n_rules entries) = a lower bound of the code points of rule r's shortest match (0 for a
// nullable rule; saturates at kGbnfMinLenCap). Iterates r = min over its alternatives of the sum
// of their items (a set: 1; a reference: its rule's value; a repetition: min x its body's) from
// 0 upwards, so every pass gives lower bounds, and stops when nothing changes (the exact
// lengths, for every rule whose matches are finite) or after kGbnfMinLenPasses passes.
constexpr uint32_t kGbnfMinLenCap = 1u << 20;
constexpr uint32_t kGbnfMinLenPasses = 32;
void gbnf_min_lengths(const Grammar& g, uint32_t* out);

// "line L, column C" of byte offset `off` in the grammar's text, into buf (NUL-terminated).
void gbnf_where(const char* text, size_t len, size_t off, char* buf, size_t cap);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_GBNF_H_
