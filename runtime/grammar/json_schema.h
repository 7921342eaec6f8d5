// JSON Schema → GBNF, allocation-free (issue #15).
//
// The compiler parses the schema (json.h) into caller scratch memory and writes GBNF text whose
// language is JSON text valid against the schema (for the supported subset; see README.md,
// "JSON Schema"). Everything runs in caller memory: the scratch block (sized by
// json_schema_scratch_bytes, a measure-mode run of the same layout code) and the output buffer.
// Nothing recurses deeper than the JSON nesting limit (kJsonMaxDepth) or the pattern group limit
// (kPatternMaxDepth); work and output are linear in the schema size (each schema node becomes at
// most one rule; $ref targets are shared rules, so recursive schemas become recursive rules).
//
// Conventions of the generated grammar (deterministic: the same schema gives the same text):
//  - `root` is the first rule; rules follow in breadth-first order of first use, then the
//    primitive rules used (value, object, array, string, char, number, integer, boolean, null,
//    ws, date, time, date-time, uuid), in that fixed order;
//  - rule names come from the path: `root-name` for property "name" of the root object,
//    `root-item` for array items, `root-0` for tuple item / alternative 0, a $defs entry by its
//    name; characters outside [a-zA-Z0-9] become '-', long names are cut at 48 characters, and a
//    name already taken gets "-2", "-3", ... appended;
//  - whitespace: `ws ::= (" " | "\n" [ \t]{0,20})?` — nothing, one space, or a newline and up to
//    20 spaces / tabs of indentation — exactly one `ws` in every gap between tokens inside
//    objects and arrays ("{" ws ... "}", after keys, after ":", around ","), none before or
//    after the root value, so the grammar is complete the moment the value closes.
#ifndef RINGLM_RUNTIME_GRAMMAR_JSON_SCHEMA_H_
#define RINGLM_RUNTIME_GRAMMAR_JSON_SCHEMA_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

// The status of every schema error (ringlm.h RLM_ERR_GRAMMAR).
constexpr Status kErrGrammar = RLM_ERR_GRAMMAR;

// Deepest group nesting in a `pattern` regex.
constexpr uint32_t kPatternMaxDepth = 32;
// Largest repetition count accepted anywhere (minItems / maxItems / minLength / maxLength and
// regex {m,n}): a GBNF recognizer may expand {m,n} into n copies, and llama.cpp's grammar parser
// (whose files ours reads) refuses or drops bounds above 2000 (MAX_REPETITION_THRESHOLD).
constexpr uint64_t kMaxRepeat = 2000;

// Scratch bytes json_schema_to_gbnf needs for this schema (parsed nodes, rule table, names).
// Invalid JSON still gives a size (the compile then reports the parse error).
size_t json_schema_scratch_bytes(const char* schema, size_t len);

// Writes the GBNF for `schema` (len bytes of UTF-8 JSON, not necessarily NUL-terminated) into
// out[0, cap), NUL-terminated. *len_out = length of the text without the NUL, also when cap is
// too small (then RLM_ERR_BUFFER_TOO_SMALL: call again with cap >= *len_out + 1; out may be NULL
// with cap 0 as a size query). `scratch` must hold json_schema_scratch_bytes(schema, len) bytes
// (a fresh Arena over a 64-byte-aligned block; a smaller one is RLM_ERR_BUFFER_TOO_SMALL).
// Errors: invalid JSON → RLM_ERR_INVALID_ARGUMENT / RLM_ERR_INVALID_UTF8 with line and column;
// unsupported keywords, formats or patterns, unresolvable $ref, inconsistent bounds →
// kErrGrammar with a message naming the keyword and its JSON pointer, e.g.
// `unsupported keyword "patternProperties" at /properties/a`.
Status json_schema_to_gbnf(const char* schema, size_t len, Arena& scratch, char* out, size_t cap,
                           size_t* len_out, ErrorSink* err);

// The built-in "any JSON value" grammar (`root ::= value` plus the primitive rules), a constant
// NUL-terminated string. The same text json_schema_to_gbnf writes for `{}` or `true`.
const char* json_any_gbnf();

// The integer range generator on its own (exposed for tests): writes a GBNF alternation (no
// surrounding parentheses) of literals, digit classes, [0-9]{n} and groups that matches exactly
// the canonical decimal forms of the integers in [lo, hi] (lo <= hi; "-0" and leading zeros are
// never matched). Writes at most cap bytes (NUL-terminated when it fits) and returns the length
// of the full text.
size_t json_schema_int_range(int64_t lo, int64_t hi, char* out, size_t cap);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_GRAMMAR_JSON_SCHEMA_H_
