// A small allocation-free JSON parser (RFC 8259) for the schema compiler (json_schema.h).
//
// The text is parsed into a flat array of nodes in caller memory (an Arena). One layout code path
// serves the size query and the real parse: the parser first scans the text once without writing
// anything, counting nodes and decoded string bytes (and rejecting invalid JSON), then reserves
// exactly that much from the arena and, when the arena has memory, parses again filling the
// nodes. So a measure-mode arena (base nullptr) run followed by a real run over a block of
// measure.used() bytes always fits.
//
// Input contract: `text` need not be NUL-terminated; nothing past text[len) is read.
// Strings must be valid UTF-8 (raw bytes) and escapes are decoded to UTF-8 (\uXXXX surrogate
// pairs combined; a lone surrogate is an error). Decoded strings may contain NUL (\u0000), so
// they are always (offset, length) spans. Nesting of arrays/objects is limited to
// kJsonMaxDepth; the parser recurses at most that deep. Errors name line and column (1-based;
// the column counts bytes) and what was expected.
#ifndef RINGLM_RUNTIME_GRAMMAR_JSON_H_
#define RINGLM_RUNTIME_GRAMMAR_JSON_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

// Deepest nesting of arrays / objects accepted (the root value is depth 1 if it is a container).
constexpr uint32_t kJsonMaxDepth = 64;
// Longest text accepted (offsets are 32-bit).
constexpr size_t kJsonMaxText = (size_t{1} << 31) - 1;
constexpr uint32_t kJsonNone = 0xFFFFFFFFu;

enum JsonType : uint8_t {
  kJsonNull,
  kJsonFalse,
  kJsonTrue,
  kJsonNumber,
  kJsonString,
  kJsonArray,
  kJsonObject,
};

// One value. Nodes are stored in document order (pre-order), the root at index 0; the children of
// an array / object are linked through `next` starting at `first`.
struct JsonNode {
  uint8_t type;     // JsonType
  uint8_t is_int;   // numbers: the value is an integer in int64 range (ival holds it). Integers
                    // may be written with a zero fraction ("3.00") but not with an exponent.
  uint32_t parent;  // kJsonNone for the root
  uint32_t next;    // next sibling, kJsonNone for the last
  uint32_t first;   // arrays / objects: first child (kJsonNone when empty)
  uint32_t count;   // arrays / objects: number of children
  uint32_t key_off; // members of an object: the decoded key, in JsonDoc::strings
  uint32_t key_len;
  uint32_t off;     // strings: decoded value in JsonDoc::strings; numbers: the source text span
  uint32_t len;
  int64_t ival;
};

struct JsonDoc {
  const char* text;  // the parsed text (numbers point into it)
  size_t text_len;
  JsonNode* nodes;   // [count]; null after a measure-mode parse
  uint32_t count;
  char* strings;     // decoded keys and string values, back to back (no terminators)
  uint32_t strings_len;
};

// Parses text[0, len) into `a`. In measure mode (a.measuring()) it validates the text and reserves
// the space only: doc->nodes / strings stay null, doc->count is set. Errors: invalid JSON →
// RLM_ERR_INVALID_ARGUMENT with "JSON line L, column C: ..."; invalid UTF-8 in a string →
// RLM_ERR_INVALID_UTF8; the arena too small → RLM_ERR_BUFFER_TOO_SMALL.
Status json_parse(const char* text, size_t len, Arena& a, JsonDoc* doc, ErrorSink* err);

// Helpers over a parsed document.
inline const char* json_str(const JsonDoc& d, const JsonNode& n) { return d.strings + n.off; }
inline const char* json_key(const JsonDoc& d, const JsonNode& n) { return d.strings + n.key_off; }
// Child of object `obj` whose key equals key[0, key_len), or kJsonNone (first match wins).
uint32_t json_find(const JsonDoc& d, uint32_t obj, const char* key, size_t key_len);
uint32_t json_find(const JsonDoc& d, uint32_t obj, const char* key);  // NUL-terminated key
// Whether string node `n` equals s[0, len).
bool json_str_eq(const JsonDoc& d, uint32_t n, const char* s, size_t len);
bool json_str_eq(const JsonDoc& d, uint32_t n, const char* s);  // NUL-terminated s

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_JSON_H_
