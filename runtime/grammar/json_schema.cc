#include "grammar/json_schema.h"

#include <string.h>

#include "grammar/json.h"

#include "unicode.h"

namespace ringlm::internal {

namespace {

// ---- the primitive rules ---------------------------------------------------------------------
// One definition of each body serves both json_any_gbnf() and the compiler's output, so the two
// cannot drift. Numbers are bounded (16 digits per part) so a model cannot emit digits forever.
#define RLM_GB_VALUE "object | array | string | number | boolean | null"
#define RLM_GB_OBJECT \
  "\"{\" ws ( string ws \":\" ws value ws ( \",\" ws string ws \":\" ws value ws )* )? \"}\""
#define RLM_GB_ARRAY "\"[\" ws ( value ws ( \",\" ws value ws )* )? \"]\""
#define RLM_GB_STRING "\"\\\"\" char* \"\\\"\""
#define RLM_GB_CHAR \
  "[^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})"
#define RLM_GB_NUMBER \
  "\"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})? ([eE] [-+]? [0-9]{1,16})?"
#define RLM_GB_INTEGER "\"-\"? (\"0\" | [1-9] [0-9]{0,15})"
#define RLM_GB_BOOLEAN "\"true\" | \"false\""
#define RLM_GB_NULL "\"null\""
#define RLM_GB_WS "(\" \" | \"\\n\" [ \\t]{0,20})?"
#define RLM_GB_DATE \
  "[0-9]{4} \"-\" (\"0\" [1-9] | \"1\" [0-2]) \"-\" (\"0\" [1-9] | [12] [0-9] | \"3\" [01])"
#define RLM_GB_TIME                                                                          \
  "([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9] \":\" [0-5] [0-9] (\".\" [0-9]{1,9})? (\"Z\" " \
  "| [+-] ([01] [0-9] | \"2\" [0-3]) \":\" [0-5] [0-9])"
#define RLM_GB_DATE_TIME "date \"T\" time"
#define RLM_GB_UUID                                                                       \
  "[0-9a-fA-F]{8} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" [0-9a-fA-F]{4} \"-\" " \
  "[0-9a-fA-F]{12}"

enum Prim : uint32_t {
  kPValue,
  kPObject,
  kPArray,
  kPString,
  kPChar,
  kPNumber,
  kPInteger,
  kPBoolean,
  kPNull,
  kPWs,
  kPDate,
  kPTime,
  kPDateTime,
  kPUuid,
  kPCount,
};

struct PrimDef {
  const char* name;
  const char* body;
  uint32_t deps;  // bit mask of Prim
};

constexpr uint32_t bit(Prim p) { return 1u << p; }

constexpr PrimDef kPrims[kPCount] = {
    {"value", RLM_GB_VALUE,
     bit(kPObject) | bit(kPArray) | bit(kPString) | bit(kPNumber) | bit(kPBoolean) | bit(kPNull)},
    {"object", RLM_GB_OBJECT, bit(kPWs) | bit(kPString) | bit(kPValue)},
    {"array", RLM_GB_ARRAY, bit(kPWs) | bit(kPValue)},
    {"string", RLM_GB_STRING, bit(kPChar)},
    {"char", RLM_GB_CHAR, 0},
    {"number", RLM_GB_NUMBER, 0},
    {"integer", RLM_GB_INTEGER, 0},
    {"boolean", RLM_GB_BOOLEAN, 0},
    {"null", RLM_GB_NULL, 0},
    {"ws", RLM_GB_WS, 0},
    {"date", RLM_GB_DATE, 0},
    {"time", RLM_GB_TIME, 0},
    {"date-time", RLM_GB_DATE_TIME, bit(kPDate) | bit(kPTime)},
    {"uuid", RLM_GB_UUID, 0},
};

// Exactly what the compiler writes for `{}`: root, then the closure of `value` in kPrims order.
constexpr char kAnyGbnf[] =
    "root ::= value\n"
    "value ::= " RLM_GB_VALUE "\n"
    "object ::= " RLM_GB_OBJECT "\n"
    "array ::= " RLM_GB_ARRAY "\n"
    "string ::= " RLM_GB_STRING "\n"
    "char ::= " RLM_GB_CHAR "\n"
    "number ::= " RLM_GB_NUMBER "\n"
    "boolean ::= " RLM_GB_BOOLEAN "\n"
    "null ::= " RLM_GB_NULL "\n"
    "ws ::= " RLM_GB_WS "\n";

// ---- output --------------------------------------------------------------------------------

// Counts every byte; stores those that fit. So one run answers the size query and writes.
struct Out {
  char* buf;
  size_t cap;
  size_t len;

  void put(char c) {
    if (len < cap) buf[len] = c;
    ++len;
  }
  void put(const char* s, size_t n) {
    for (size_t i = 0; i < n; ++i) put(s[i]);
  }
  void puts(const char* s) { put(s, strlen(s)); }
  void put_u64(uint64_t v) {
    char tmp[24];
    int n = 0;
    do {
      tmp[n++] = static_cast<char>('0' + v % 10);
      v /= 10;
    } while (v);
    while (n) put(tmp[--n]);
  }
  void put_hex2(uint32_t v) {
    static constexpr char kHex[] = "0123456789ABCDEF";
    put(kHex[(v >> 4) & 15]);
    put(kHex[v & 15]);
  }
};

// One byte inside a GBNF "literal": quote, backslash and control bytes escaped, the rest raw
// (UTF-8 passes through byte by byte).
void lit_byte(Out& o, uint8_t b) {
  switch (b) {
    case '"': o.puts("\\\""); return;
    case '\\': o.puts("\\\\"); return;
    case '\n': o.puts("\\n"); return;
    case '\r': o.puts("\\r"); return;
    case '\t': o.puts("\\t"); return;
    default: break;
  }
  if (b < 0x20 || b == 0x7F) {
    o.puts("\\x");
    o.put_hex2(b);
    return;
  }
  o.put(static_cast<char>(b));
}

// The JSON text of code point cp inside a JSON string, as canonical serialization writes it
// (escapes for quote, backslash, controls and DEL — DEL because `char` excludes it raw).
// Writes it as literal content (between GBNF quotes).
void json_cp_lit(Out& o, uint32_t cp) {
  char tmp[8];
  size_t n = 0;
  switch (cp) {
    case '"': tmp[n++] = '\\'; tmp[n++] = '"'; break;
    case '\\': tmp[n++] = '\\'; tmp[n++] = '\\'; break;
    case '\b': tmp[n++] = '\\'; tmp[n++] = 'b'; break;
    case '\f': tmp[n++] = '\\'; tmp[n++] = 'f'; break;
    case '\n': tmp[n++] = '\\'; tmp[n++] = 'n'; break;
    case '\r': tmp[n++] = '\\'; tmp[n++] = 'r'; break;
    case '\t': tmp[n++] = '\\'; tmp[n++] = 't'; break;
    default:
      if (cp < 0x20 || cp == 0x7F) {
        static constexpr char kHex[] = "0123456789abcdef";
        tmp[n++] = '\\';
        tmp[n++] = 'u';
        tmp[n++] = '0';
        tmp[n++] = '0';
        tmp[n++] = kHex[cp >> 4];
        tmp[n++] = kHex[cp & 15];
      } else {
        n = utf8_encode(cp, reinterpret_cast<uint8_t*>(tmp));
      }
  }
  for (size_t i = 0; i < n; ++i) lit_byte(o, static_cast<uint8_t>(tmp[i]));
}

// Decodes one code point of well-formed UTF-8 at s[*i] (json.cc validated every string).
uint32_t next_cp(const uint8_t* s, size_t n, size_t* i) {
  const uint8_t b = s[*i];
  size_t need = b < 0x80 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4;
  if (need > n - *i) need = n - *i;  // cannot happen for validated text; stay in bounds anyway
  uint32_t cp = need == 1 ? b : need == 2 ? (b & 0x1Fu) : need == 3 ? (b & 0x0Fu) : (b & 0x07u);
  for (size_t k = 1; k < need; ++k) cp = (cp << 6) | (s[*i + k] & 0x3Fu);
  *i += need;
  return cp;
}

bool json_special(uint32_t cp) { return cp < 0x20 || cp == '"' || cp == '\\' || cp == 0x7F; }

// A code point inside a GBNF [class]: metacharacters and controls as \xHH, the rest raw UTF-8.
void class_cp(Out& o, uint32_t cp) {
  if (cp < 0x20 || cp == 0x7F || cp == '[' || cp == ']' || cp == '\\' || cp == '-' || cp == '^' ||
      cp == '"') {
    o.puts("\\x");
    o.put_hex2(cp);
    return;
  }
  char tmp[4];
  const size_t n = utf8_encode(cp, reinterpret_cast<uint8_t*>(tmp));
  o.put(tmp, n);
}

// ---- integer ranges ------------------------------------------------------------------------

int u64_digits(uint64_t v, char* d) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  for (int i = 0; i < n; ++i) d[i] = tmp[n - 1 - i];
  return n;
}

void digit_class(Out& o, char x, char y) {
  if (x == y) {
    o.put('"');
    o.put(x);
    o.put('"');
  } else {
    o.put('[');
    o.put(x);
    o.put('-');
    o.put(y);
    o.put(']');
  }
}

void any_digits(Out& o, int r) {
  o.puts("[0-9]");
  if (r > 1) {
    o.put('{');
    o.put_u64(static_cast<uint64_t>(r));
    o.put('}');
  }
}

// Strings of exactly L digits between A and B (A <= B, same length, leading zeros allowed here:
// the callers only pass canonical bounds at the top). Writes one term (a sequence, alternatives
// grouped in parentheses). Recursion depth <= L <= 20; each level recurses into at most two
// branches that each only follow one bound, so the output is O(L^2).
void same_len(Out& o, const char* A, const char* B, int L) {
  int i = 0;
  while (i < L && A[i] == B[i]) ++i;
  if (i > 0) {
    o.put('"');
    o.put(A, static_cast<size_t>(i));
    o.put('"');
    if (i == L) return;
    o.put(' ');
  }
  const char x = A[i], y = B[i];
  const int r = L - i - 1;
  if (r == 0) {
    digit_class(o, x, y);
    return;
  }
  bool low_zero = true, high_nine = true;
  for (int k = i + 1; k < L; ++k) {
    low_zero &= A[k] == '0';
    high_nine &= B[k] == '9';
  }
  const char mid_lo = low_zero ? x : static_cast<char>(x + 1);
  const char mid_hi = high_nine ? y : static_cast<char>(y - 1);
  const int alts = (!low_zero) + (mid_lo <= mid_hi) + (!high_nine);
  if (alts > 1) o.put('(');
  bool first = true;
  char bound[24];
  if (!low_zero) {
    o.put('"');
    o.put(x);
    o.puts("\" ");
    memset(bound, '9', static_cast<size_t>(r));
    same_len(o, A + i + 1, bound, r);
    first = false;
  }
  if (mid_lo <= mid_hi) {
    if (!first) o.puts(" | ");
    digit_class(o, mid_lo, mid_hi);
    o.put(' ');
    any_digits(o, r);
    first = false;
  }
  if (!high_nine) {
    if (!first) o.puts(" | ");
    o.put('"');
    o.put(y);
    o.puts("\" ");
    memset(bound, '0', static_cast<size_t>(r));
    same_len(o, bound, B + i + 1, r);
  }
  if (alts > 1) o.put(')');
}

// Canonical decimals of [a, b] (a <= b): an alternation at top level.
void urange(Out& o, uint64_t a, uint64_t b) {
  char A[24], B[24], T[24];
  const int la = u64_digits(a, A), lb = u64_digits(b, B);
  if (la == lb) {
    same_len(o, A, B, la);
    return;
  }
  memset(T, '9', sizeof T);
  same_len(o, A, T, la);  // a .. 10^la - 1
  if (lb - la >= 2) {     // every number of la+1 .. lb-1 digits
    o.puts(" | [1-9] ");
    if (lb - la == 2) {
      any_digits(o, la);
    } else {
      o.puts("[0-9]{");
      o.put_u64(static_cast<uint64_t>(la));
      o.put(',');
      o.put_u64(static_cast<uint64_t>(lb - 2));
      o.put('}');
    }
  }
  o.puts(" | ");
  T[0] = '1';
  memset(T + 1, '0', sizeof T - 1);
  same_len(o, T, B, lb);  // 10^(lb-1) .. b
}

void int_range(Out& o, int64_t lo, int64_t hi) {
  bool first = true;
  if (lo < 0) {
    // Magnitudes as uint64 (INT64_MIN's does not fit int64).
    const uint64_t nb = static_cast<uint64_t>(-(lo + 1)) + 1;
    const uint64_t na = hi < 0 ? static_cast<uint64_t>(-(hi + 1)) + 1 : 1;
    o.puts("\"-\" (");
    urange(o, na, nb);
    o.put(')');
    first = false;
  }
  if (hi >= 0) {
    if (!first) o.puts(" | ");
    urange(o, lo < 0 ? 0 : static_cast<uint64_t>(lo), static_cast<uint64_t>(hi));
  }
}

// ---- the compiler --------------------------------------------------------------------------

constexpr size_t kMaxName = 48;  // longest rule name before a "-N" uniqueness suffix
constexpr size_t kNameSlot = kMaxName + 12;

enum RuleKind : uint8_t {
  kPrimRule,  // a primitive (names reserved; written at the end when used)
  kMain,      // the rule of schema node `node`
  kKv,        // one property: `"key" ws ":" ws value ws`; node = the property's schema node
  kRest,      // the properties from index j on, after at least one was written (see object())
  kAddKv,     // an additional property; node = the additionalProperties schema or kJsonNone
};

struct Rule {
  uint8_t kind;
  uint32_t node;
  uint32_t base;   // kKv: rule naming the property's value (the object's rule)
  uint32_t obj;    // kRest: the object schema node
  uint32_t j;      // kRest: first property index covered
  uint32_t first;  // kRest: the member node of property j
  uint32_t f;      // kRest: the last index with a kRest rule
  uint32_t k;      // kRest: number of properties
  uint32_t kv0;    // kRest: rule id of property 0's kKv (the k kKv rules are consecutive)
  uint32_t rest1;  // kRest: rule id of the kRest rule for j = 1 (consecutive up to f)
  uint32_t add;    // kRest: the kAddKv rule or kJsonNone
  uint32_t name_off;
  uint32_t name_len;
  uint32_t next_suffix;  // the next "-N" to try when another rule wants this rule's name
};

struct Tables {
  Rule* rules;
  uint32_t max_rules;
  char* names;
  uint32_t names_cap;
  uint32_t* hash;  // rule id + 1, 0 = empty; open addressing
  uint32_t hash_mask;
  uint32_t* node_rule;  // [doc.count] kMain rule of each schema node, or kJsonNone
  uint32_t* order;      // [doc.count] property members sorted by key (scratch of one object)
  uint8_t* required;    // [doc.count] 1 for a property member listed in its object's `required`
};

// Every schema node yields at most one kMain rule, every property one kKv and one kRest, every
// object one kAddKv: at most 3 per JSON node, plus the reserved primitive names.
void layout_tables(Arena& a, uint32_t n_nodes, Tables* t) {
  const uint64_t max_rules = 3ull * n_nodes + kPCount + 8;
  uint64_t hcap = 16;
  while (hcap < 2 * max_rules) hcap <<= 1;
  t->max_rules = static_cast<uint32_t>(max_rules);
  t->names_cap = static_cast<uint32_t>(max_rules * kNameSlot);
  t->rules = a.alloc<Rule>(max_rules, alignof(Rule));
  t->names = static_cast<char*>(a.alloc_2d(max_rules, kNameSlot, 1, 1));
  t->hash = a.alloc<uint32_t>(hcap, alignof(uint32_t));
  t->hash_mask = static_cast<uint32_t>(hcap - 1);
  t->node_rule = a.alloc<uint32_t>(n_nodes, alignof(uint32_t));
  t->order = a.alloc<uint32_t>(n_nodes, alignof(uint32_t));
  t->required = a.alloc<uint8_t>(n_nodes, 1);
}

// Longest declared property name (in characters) next to additionalProperties: the key grammar
// that excludes declared names nests one group per character.
constexpr uint32_t kMaxExcludedKey = 32;

uint32_t fnv(const char* s, size_t n) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < n; ++i) h = (h ^ static_cast<uint8_t>(s[i])) * 16777619u;
  return h;
}

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

// Keywords whose meaning the compiler does not implement: a schema using one is refused rather
// than compiled into a grammar that would produce invalid output.
constexpr const char* kUnsupported[] = {
    "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
    "dependencies", "minProperties", "maxProperties", "unevaluatedProperties",
    "unevaluatedItems", "additionalItems", "contains", "minContains", "maxContains",
    "uniqueItems", "not", "if", "then", "else", "multipleOf", "$dynamicRef", "$dynamicAnchor",
    "$recursiveRef", "$recursiveAnchor", "contentSchema",
};

// Keywords that only annotate (or hold definitions): never change the language.
constexpr const char* kAnnotations[] = {
    "$schema", "$id", "id", "$comment", "title", "description", "default", "examples",
    "deprecated", "readOnly", "writeOnly", "$defs", "definitions", "$anchor", "$vocabulary",
    "contentMediaType", "contentEncoding",
};

enum TypeBit : uint32_t {
  kTObject = 1,
  kTArray = 2,
  kTString = 4,
  kTNumber = 8,
  kTInteger = 16,
  kTBoolean = 32,
  kTNull = 64,
};

struct Compiler {
  const JsonDoc* d;
  Tables t;
  Out o;
  ErrorSink* err;
  uint32_t n_rules = 0;
  uint32_t names_used = 0;
  uint32_t prims = 0;  // Prim bits used
  char stem_buf_[kMaxName];  // the last $ref segment resolved (rule names use at most kMaxName)
  size_t stem_len_ = 0;

  const JsonNode& N(uint32_t i) const { return d->nodes[i]; }
  uint32_t find(uint32_t obj, const char* key) const { return json_find(*d, obj, key); }

  // JSON pointer of node i ("/" for the root), cut to fit buf.
  const char* path(uint32_t i, char* buf, size_t cap) const {
    uint32_t chain[kJsonMaxDepth + 2];
    uint32_t n = 0;
    for (uint32_t c = i; c != kJsonNone && c < d->count && n < kJsonMaxDepth + 2; c = N(c).parent) {
      chain[n++] = c;
    }
    Out p{buf, cap ? cap - 1 : 0, 0};
    for (uint32_t k = n; k-- > 0;) {
      const uint32_t c = chain[k];
      const uint32_t par = N(c).parent;
      if (par == kJsonNone) continue;
      p.put('/');
      if (N(par).type == kJsonObject) {
        const char* key = json_key(*d, N(c));
        for (uint32_t b = 0; b < N(c).key_len && b < 64; ++b) {
          if (key[b] == '~') p.puts("~0");
          else if (key[b] == '/') p.puts("~1");
          else if (static_cast<uint8_t>(key[b]) < 0x20) p.put('?');
          else p.put(key[b]);
        }
      } else {
        uint64_t idx = 0;
        for (uint32_t s = N(par).first; s != kJsonNone && s != c; s = N(s).next) ++idx;
        p.put_u64(idx);
      }
    }
    if (p.len == 0) p.put('/');
    if (cap) buf[p.len < cap ? p.len : cap - 1] = '\0';
    return buf;
  }

  Status fail_at(uint32_t node, const char* what, const char* kw) {
    char pb[160];
    RLM_SET_ERROR(err, "%s \"%s\" at %s", what, kw, path(node, pb, sizeof pb));
    return kErrGrammar;
  }

  Status false_schema(uint32_t node) {
    char pb[160];
    RLM_SET_ERROR(err, "schema false (matches nothing) at %s", path(node, pb, sizeof pb));
    return kErrGrammar;
  }

  // ---- rule names ----

  const char* name(uint32_t r) const { return t.names + t.rules[r].name_off; }

  // The rule named s[0, n), or kJsonNone.
  uint32_t lookup(const char* s, size_t n) const {
    for (uint32_t h = fnv(s, n) & t.hash_mask;; h = (h + 1) & t.hash_mask) {
      const uint32_t e = t.hash[h];
      if (e == 0) return kJsonNone;
      const Rule& r = t.rules[e - 1];
      if (r.name_len == n && memcmp(t.names + r.name_off, s, n) == 0) return e - 1;
    }
  }

  // New rule named [base "-"] sanitize(stem) [suffix], made unique. Fills only kind/node/name.
  Status new_rule(uint8_t kind, uint32_t node, uint32_t base, const char* stem, size_t stem_len,
                  const char* suffix, uint32_t* id) {
    RLM_CHECK(n_rules < t.max_rules, RLM_ERR_INTERNAL, err, "grammar rule table full (%u)",
              t.max_rules);
    char nm[kNameSlot];
    size_t n = 0;
    if (base != kJsonNone) {
      const size_t bl = t.rules[base].name_len < kMaxName ? t.rules[base].name_len : kMaxName;
      memcpy(nm, name(base), bl);
      n = bl;
      if (n < kMaxName) nm[n++] = '-';
    }
    const size_t stem_start = n;
    for (size_t i = 0; i < stem_len && n < kMaxName; ++i) {
      const char c = is_word(stem[i]) ? stem[i] : '-';
      if (c == '-' && (n == stem_start || nm[n - 1] == '-')) continue;
      nm[n++] = c;
    }
    while (n > stem_start && nm[n - 1] == '-') --n;
    if (n == stem_start && n < kMaxName) nm[n++] = 'x';
    for (const char* s = suffix; s && *s && n < kMaxName; ++s) nm[n++] = *s;
    size_t len = n;
    // Taken: append "-N", N starting where the last rule that wanted this name stopped, so many
    // properties sanitized to the same name cost O(1) each, not a scan over all their suffixes.
    const uint32_t owner = lookup(nm, len);
    if (owner != kJsonNone) {
      uint64_t k = t.rules[owner].next_suffix < 2 ? 2 : t.rules[owner].next_suffix;
      for (;; ++k) {
        Out tail{nm + n, kNameSlot - n, 0};
        tail.put('-');
        tail.put_u64(k);
        len = n + tail.len;
        if (lookup(nm, len) == kJsonNone) break;
      }
      t.rules[owner].next_suffix = static_cast<uint32_t>(k + 1);
    }
    Rule& r = t.rules[n_rules];
    memset(&r, 0, sizeof r);
    r.kind = kind;
    r.node = node;
    r.name_off = names_used;
    r.name_len = static_cast<uint32_t>(len);
    memcpy(t.names + names_used, nm, len);
    names_used += static_cast<uint32_t>(len);
    uint32_t h = fnv(nm, len) & t.hash_mask;
    while (t.hash[h] != 0) h = (h + 1) & t.hash_mask;
    t.hash[h] = n_rules + 1;
    *id = n_rules++;
    return RLM_OK;
  }

  void put_name(uint32_t r) { o.put(name(r), t.rules[r].name_len); }
  void put_prim(Prim p) {
    prims |= bit(p);
    o.puts(kPrims[p].name);
  }

  // ---- schema classification ----

  bool in_list(uint32_t member, const char* const* list, size_t n) const {
    const JsonNode& m = N(member);
    for (size_t i = 0; i < n; ++i) {
      const size_t l = strlen(list[i]);
      if (m.key_len == l && memcmp(json_key(*d, m), list[i], l) == 0) return true;
    }
    return false;
  }

  Status check_keywords(uint32_t s) {
    for (uint32_t c = N(s).first; c != kJsonNone; c = N(c).next) {
      if (in_list(c, kUnsupported, sizeof kUnsupported / sizeof kUnsupported[0])) {
        char kw[64];
        const size_t l = N(c).key_len < sizeof kw - 1 ? N(c).key_len : sizeof kw - 1;
        memcpy(kw, json_key(*d, N(c)), l);
        kw[l] = '\0';
        return fail_at(s, "unsupported keyword", kw);
      }
    }
    return RLM_OK;
  }

  // Whether schema object s has keys other than annotations and `except` (may be null).
  bool has_constraints(uint32_t s, const char* except) const {
    for (uint32_t c = N(s).first; c != kJsonNone; c = N(c).next) {
      if (in_list(c, kAnnotations, sizeof kAnnotations / sizeof kAnnotations[0])) continue;
      if (except && N(c).key_len == strlen(except) &&
          memcmp(json_key(*d, N(c)), except, N(c).key_len) == 0) {
        continue;
      }
      return true;
    }
    return false;
  }

  // The primitive a schema is equivalent to (true, {}, {"type": "string"}, ...), or kPCount.
  Prim simple(uint32_t s) const {
    const JsonNode& n = N(s);
    if (n.type == kJsonTrue) return kPValue;
    if (n.type != kJsonObject) return kPCount;
    if (!has_constraints(s, nullptr)) return kPValue;
    if (has_constraints(s, "type")) return kPCount;
    const uint32_t ty = find(s, "type");
    if (N(ty).type != kJsonString) return kPCount;
    static constexpr struct {
      const char* name;
      Prim p;
    } kSimple[] = {{"object", kPObject},   {"array", kPArray},     {"string", kPString},
                   {"number", kPNumber},   {"integer", kPInteger}, {"boolean", kPBoolean},
                   {"null", kPNull}};
    for (const auto& e : kSimple) {
      if (json_str_eq(*d, ty, e.name)) return e.p;
    }
    return kPCount;
  }

  // Follows $ref from s (s itself when it has none) to a schema without $ref. *stem / *stem_len
  // receive the last pointer segment of the last $ref followed (for naming).
  Status chase(uint32_t s, uint32_t* out, const char** stem, size_t* stem_len) {
    for (int hop = 0; hop < 32; ++hop) {
      if (N(s).type != kJsonObject) {
        *out = s;
        return RLM_OK;
      }
      const uint32_t ref = find(s, "$ref");
      if (ref == kJsonNone) {
        *out = s;
        return RLM_OK;
      }
      RLM_RETURN_IF_ERROR(check_keywords(s));
      if (N(ref).type != kJsonString) return fail_at(s, "$ref is not a string:", "$ref");
      uint32_t target;
      RLM_RETURN_IF_ERROR(resolve(s, ref, &target, stem, stem_len));
      s = target;
    }
    return fail_at(s, "$ref chain longer than 32 or circular:", "$ref");
  }

  // A local reference: "#" or "#/a/b" (JSON pointer, ~0 ~1 unescaped) from the document root.
  Status resolve(uint32_t s, uint32_t ref, uint32_t* out, const char** stem, size_t* stem_len) {
    const char* r = json_str(*d, N(ref));
    const size_t n = N(ref).len;
    char pb[160];
    if (n == 0 || r[0] != '#') {
      RLM_SET_ERROR(err, "unsupported $ref \"%.*s\" (only local \"#...\" references) at %s",
                    static_cast<int>(n < 80 ? n : 80), r, path(s, pb, sizeof pb));
      return kErrGrammar;
    }
    uint32_t cur = 0;
    *stem = "root";
    *stem_len = 4;
    size_t i = 1;
    if (i < n && r[i] != '/') {
      RLM_SET_ERROR(err, "unsupported $ref \"%.*s\" (anchors are not supported) at %s",
                    static_cast<int>(n < 80 ? n : 80), r, path(s, pb, sizeof pb));
      return kErrGrammar;
    }
    while (i < n) {
      ++i;  // '/'
      const size_t seg = i;
      while (i < n && r[i] != '/') ++i;
      // Unescape the segment into a small buffer (segments longer than it cannot match a key
      // we could compare cheaply; compare them raw when they hold no '~').
      char key[256];
      size_t kl = 0;
      bool too_long = false;
      for (size_t k = seg; k < i; ++k) {
        char c = r[k];
        if (c == '~' && k + 1 < i && (r[k + 1] == '0' || r[k + 1] == '1')) {
          c = r[k + 1] == '0' ? '~' : '/';
          ++k;
        }
        if (kl == sizeof key) {
          too_long = true;
          break;
        }
        key[kl++] = c;
      }
      uint32_t next = kJsonNone;
      if (!too_long && N(cur).type == kJsonObject) {
        next = json_find(*d, cur, key, kl);
      } else if (!too_long && N(cur).type == kJsonArray && kl > 0 && kl < 10) {
        uint64_t idx = 0;
        bool digits = true;
        for (size_t k = 0; k < kl; ++k) {
          digits &= key[k] >= '0' && key[k] <= '9';
          idx = idx * 10 + static_cast<uint64_t>(key[k] - '0');
        }
        if (digits) {
          next = N(cur).first;
          for (uint64_t k = 0; k < idx && next != kJsonNone; ++k) next = N(next).next;
        }
      }
      if (next == kJsonNone) {
        RLM_SET_ERROR(err, "$ref \"%.*s\" does not resolve at %s",
                      static_cast<int>(n < 80 ? n : 80), r, path(s, pb, sizeof pb));
        return kErrGrammar;
      }
      cur = next;
      // Named after the unescaped segment (a copy: `key` is local).
      stem_len_ = kl < sizeof stem_buf_ ? kl : sizeof stem_buf_;
      memcpy(stem_buf_, key, stem_len_);
      *stem = stem_buf_;
      *stem_len = stem_len_;
    }
    *out = cur;
    return RLM_OK;
  }

  // Writes a reference to schema s: a primitive's name, or the name of s's rule (created on first
  // use, named base-stem, and queued). $refs are followed first.
  Status ref(uint32_t s, uint32_t base, const char* stem, size_t stem_len) {
    uint32_t target;
    const uint32_t before = s;
    RLM_RETURN_IF_ERROR(chase(s, &target, &stem, &stem_len));
    if (target != before) base = kJsonNone;  // a $ref target is named by its own name
    if (N(target).type == kJsonFalse) return false_schema(target);
    if (t.node_rule[target] != kJsonNone) {
      put_name(t.node_rule[target]);
      return RLM_OK;
    }
    const Prim p = simple(target);
    if (p != kPCount) {
      put_prim(p);
      return RLM_OK;
    }
    uint32_t id;
    RLM_RETURN_IF_ERROR(new_rule(kMain, target, base, stem, stem_len, nullptr, &id));
    t.node_rule[target] = id;
    put_name(id);
    return RLM_OK;
  }
  Status ref(uint32_t s, uint32_t base, const char* stem) { return ref(s, base, stem, strlen(stem)); }
  Status ref_index(uint32_t s, uint32_t base, uint64_t i) {
    char num[24];
    Out tmp{num, sizeof num, 0};
    tmp.put_u64(i);
    return ref(s, base, num, tmp.len);
  }

  // ---- values as literals (enum / const) ----

  // Canonical compact JSON of node v, written as GBNF literal content. Depth <= kJsonMaxDepth.
  void json_lit(uint32_t v) {
    const JsonNode& n = N(v);
    switch (n.type) {
      case kJsonNull: o.puts("null"); return;
      case kJsonTrue: o.puts("true"); return;
      case kJsonFalse: o.puts("false"); return;
      case kJsonNumber:
        for (uint32_t i = 0; i < n.len; ++i) lit_byte(o, static_cast<uint8_t>(d->text[n.off + i]));
        return;
      case kJsonString: {
        lit_byte(o, '"');
        const uint8_t* s = reinterpret_cast<const uint8_t*>(json_str(*d, n));
        for (size_t i = 0; i < n.len;) json_cp_lit(o, next_cp(s, n.len, &i));
        lit_byte(o, '"');
        return;
      }
      case kJsonArray:
      case kJsonObject: {
        const bool obj = n.type == kJsonObject;
        o.put(obj ? '{' : '[');
        for (uint32_t c = n.first; c != kJsonNone; c = N(c).next) {
          if (c != n.first) o.put(',');
          if (obj) {
            lit_byte(o, '"');
            const uint8_t* s = reinterpret_cast<const uint8_t*>(json_key(*d, N(c)));
            for (size_t i = 0; i < N(c).key_len;) json_cp_lit(o, next_cp(s, N(c).key_len, &i));
            lit_byte(o, '"');
            o.put(':');
          }
          json_lit(c);
        }
        o.put(obj ? '}' : ']');
        return;
      }
      default: return;
    }
  }
  void value_lit(uint32_t v) {
    o.put('"');
    json_lit(v);
    o.put('"');
  }

  // ---- schema bodies ----

  // Reads a non-negative integer keyword (<= kMaxRepeat). *present false when absent.
  Status count_kw(uint32_t s, const char* kw, uint64_t* v, bool* present) {
    const uint32_t c = find(s, kw);
    *present = c != kJsonNone;
    if (!*present) return RLM_OK;
    if (N(c).type != kJsonNumber || !N(c).is_int || N(c).ival < 0) {
      return fail_at(s, "must be a non-negative integer:", kw);
    }
    if (static_cast<uint64_t>(N(c).ival) > kMaxRepeat) {
      char pb[160];
      RLM_SET_ERROR(err, "\"%s\" %lld exceeds the limit %llu at %s", kw,
                    static_cast<long long>(N(c).ival), static_cast<unsigned long long>(kMaxRepeat),
                    path(s, pb, sizeof pb));
      return kErrGrammar;
    }
    *v = static_cast<uint64_t>(N(c).ival);
    return RLM_OK;
  }

  // `{m,n}` style suffix for `item` repeated min..max times (max = UINT64_MAX: unbounded).
  void repeat_suffix(uint64_t mn, uint64_t mx) {
    if (mn == 0 && mx == UINT64_MAX) return o.put('*');
    if (mn == 1 && mx == UINT64_MAX) return o.put('+');
    if (mn == 0 && mx == 1) return o.put('?');
    o.put('{');
    o.put_u64(mn);
    if (mx != mn) {
      o.put(',');
      if (mx != UINT64_MAX) o.put_u64(mx);
    }
    o.put('}');
  }

  Status string_body(uint32_t s) {
    const uint32_t fmt = find(s, "format");
    const uint32_t pat = find(s, "pattern");
    uint64_t mn = 0, mx = UINT64_MAX;
    bool has_mn, has_mx;
    RLM_RETURN_IF_ERROR(count_kw(s, "minLength", &mn, &has_mn));
    RLM_RETURN_IF_ERROR(count_kw(s, "maxLength", &mx, &has_mx));
    if (!has_mx) mx = UINT64_MAX;
    if (has_mn && has_mx && mn > mx) return fail_at(s, "minLength greater than", "maxLength");
    Prim fp = kPCount;
    if (fmt != kJsonNone) {
      if (N(fmt).type != kJsonString) return fail_at(s, "must be a string:", "format");
      if (json_str_eq(*d, fmt, "date")) fp = kPDate;
      else if (json_str_eq(*d, fmt, "time")) fp = kPTime;
      else if (json_str_eq(*d, fmt, "date-time")) fp = kPDateTime;
      else if (json_str_eq(*d, fmt, "uuid")) fp = kPUuid;
      // Other formats are annotations (JSON Schema 2020-12 does not assert them): ignored.
    }
    if (pat != kJsonNone && N(pat).type != kJsonString) return fail_at(s, "must be a string:", "pattern");
    if ((fp != kPCount || pat != kJsonNone) && (has_mn || has_mx)) {
      return fail_at(s, "minLength / maxLength together with pattern or format is not supported:",
                     "pattern");
    }
    if (fp != kPCount && pat != kJsonNone) {
      return fail_at(s, "format together with pattern is not supported:", "pattern");
    }
    if (fp != kPCount) {
      o.puts("\"\\\"\" ");
      put_prim(fp);
      o.puts(" \"\\\"\"");
      return RLM_OK;
    }
    if (pat != kJsonNone) {
      o.puts("\"\\\"\" (");
      RLM_RETURN_IF_ERROR(pattern(s, pat));
      o.puts(") \"\\\"\"");
      return RLM_OK;
    }
    if (!has_mn && !has_mx) {
      put_prim(kPString);
      return RLM_OK;
    }
    o.puts("\"\\\"\" ");
    if (mx == 0) {
      o.puts("\"\\\"\"");
      return RLM_OK;
    }
    put_prim(kPChar);
    repeat_suffix(mn, mx);
    o.puts(" \"\\\"\"");
    return RLM_OK;
  }

  // Integer bound keyword: an integer (a zero fraction is fine) in int64.
  Status int_kw(uint32_t s, const char* kw, uint32_t c, int64_t* v) {
    if (N(c).type != kJsonNumber) return fail_at(s, "must be a number:", kw);
    if (!N(c).is_int) {
      return fail_at(s, "must be an integer within 64 bits for type integer:", kw);
    }
    *v = N(c).ival;
    return RLM_OK;
  }

  bool has_bounds(uint32_t s) const {
    return find(s, "minimum") != kJsonNone || find(s, "maximum") != kJsonNone ||
           find(s, "exclusiveMinimum") != kJsonNone || find(s, "exclusiveMaximum") != kJsonNone;
  }

  Status integer_body(uint32_t s) {
    if (!has_bounds(s)) {
      put_prim(kPInteger);
      return RLM_OK;
    }
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    bool empty = false;
    const uint32_t mn = find(s, "minimum"), mx = find(s, "maximum");
    const uint32_t emn = find(s, "exclusiveMinimum"), emx = find(s, "exclusiveMaximum");
    if (mn != kJsonNone) RLM_RETURN_IF_ERROR(int_kw(s, "minimum", mn, &lo));
    if (mx != kJsonNone) RLM_RETURN_IF_ERROR(int_kw(s, "maximum", mx, &hi));
    // Draft 4: exclusiveMinimum / exclusiveMaximum are booleans modifying minimum / maximum.
    if (emn != kJsonNone && (N(emn).type == kJsonTrue || N(emn).type == kJsonFalse)) {
      if (N(emn).type == kJsonTrue && mn != kJsonNone) {
        if (lo == INT64_MAX) empty = true;
        else ++lo;
      }
    } else if (emn != kJsonNone) {
      int64_t v = 0;
      RLM_RETURN_IF_ERROR(int_kw(s, "exclusiveMinimum", emn, &v));
      if (v == INT64_MAX) empty = true;
      else if (v + 1 > lo) lo = v + 1;
    }
    if (emx != kJsonNone && (N(emx).type == kJsonTrue || N(emx).type == kJsonFalse)) {
      if (N(emx).type == kJsonTrue && mx != kJsonNone) {
        if (hi == INT64_MIN) empty = true;
        else --hi;
      }
    } else if (emx != kJsonNone) {
      int64_t v = 0;
      RLM_RETURN_IF_ERROR(int_kw(s, "exclusiveMaximum", emx, &v));
      if (v == INT64_MIN) empty = true;
      else if (v - 1 < hi) hi = v - 1;
    }
    if (empty || lo > hi) return fail_at(s, "integer range is empty:", "minimum");
    o.put('(');
    int_range(o, lo, hi);
    o.put(')');
    return RLM_OK;
  }

  Status array_body(uint32_t s, uint32_t self) {
    uint32_t prefix = find(s, "prefixItems");
    uint32_t items = find(s, "items");
    if (items != kJsonNone && N(items).type == kJsonArray) {  // draft 4-7 tuple form
      if (prefix != kJsonNone) return fail_at(s, "items array together with", "prefixItems");
      prefix = items;
      items = kJsonNone;
    }
    if (prefix != kJsonNone && N(prefix).type != kJsonArray) {
      return fail_at(s, "must be an array:", "prefixItems");
    }
    if (prefix != kJsonNone && N(prefix).count == 0) prefix = kJsonNone;
    uint64_t mn = 0, mx = UINT64_MAX;
    bool has_mn, has_mx;
    RLM_RETURN_IF_ERROR(count_kw(s, "minItems", &mn, &has_mn));
    RLM_RETURN_IF_ERROR(count_kw(s, "maxItems", &mx, &has_mx));
    if (!has_mx) mx = UINT64_MAX;
    if (has_mn && has_mx && mn > mx) return fail_at(s, "minItems greater than", "maxItems");
    prims |= bit(kPWs);
    if (prefix != kJsonNone) {
      // The whole tuple, then (only when `items` is a schema) any number of further items.
      if (has_mn || has_mx) {
        return fail_at(s, "minItems / maxItems together with prefixItems is not supported:",
                       "prefixItems");
      }
      o.puts("\"[\" ws ");
      uint64_t i = 0;
      for (uint32_t c = N(prefix).first; c != kJsonNone; c = N(c).next, ++i) {
        if (i) o.puts(" \",\" ws ");
        RLM_RETURN_IF_ERROR(ref_index(c, self, i));
        o.puts(" ws");
      }
      if (items != kJsonNone && N(items).type != kJsonFalse) {
        o.puts(" (\",\" ws ");
        RLM_RETURN_IF_ERROR(ref(items, self, "item"));
        o.puts(" ws)*");
      }
      o.puts(" \"]\"");
      return RLM_OK;
    }
    if (items != kJsonNone && N(items).type == kJsonFalse) mx = 0;
    if (mx == 0) {
      o.puts("\"[\" ws \"]\"");
      return RLM_OK;
    }
    // "[" ws ( I ws ( "," ws I ws ){min-1,max-1} )? "]"  — the group optional when min is 0.
    o.puts("\"[\" ws ");
    if (mn == 0) o.put('(');
    if (items == kJsonNone) put_prim(kPValue);
    else RLM_RETURN_IF_ERROR(ref(items, self, "item"));
    o.puts(" ws");
    if (mx != 1) {
      o.puts(" (\",\" ws ");
      if (items == kJsonNone) put_prim(kPValue);
      else RLM_RETURN_IF_ERROR(ref(items, self, "item"));
      o.puts(" ws)");
      repeat_suffix(mn == 0 ? 0 : mn - 1, mx == UINT64_MAX ? UINT64_MAX : mx - 1);
    }
    if (mn == 0) o.puts(")?");
    o.puts(" \"]\"");
    return RLM_OK;
  }

  // Whether property member p (a child of `properties`) is listed in `required` (object_body
  // marks them first).
  bool required(uint32_t req, uint32_t p) const {
    (void)req;
    return t.required[p] != 0;
  }

  // Marks the members of `props` listed in `req`: the members sorted by key, then a binary search
  // per entry — O((k + r) log k), so a schema with thousands of properties stays fast.
  Status mark_required(uint32_t s, uint32_t props, uint32_t req) {
    uint32_t n = 0;
    if (props != kJsonNone) {
      for (uint32_t m = N(props).first; m != kJsonNone; m = N(m).next) t.order[n++] = m;
    }
    sort_keys(n);
    for (uint32_t r = N(req).first; r != kJsonNone; r = N(r).next) {
      if (N(r).type != kJsonString) return fail_at(s, "entries must be strings:", "required");
      const char* key = json_str(*d, N(r));
      const uint32_t kl = N(r).len;
      uint32_t lo = 0, hi = n;
      while (lo < hi) {  // first member whose key is not less than `key`
        const uint32_t mid = lo + (hi - lo) / 2;
        const JsonNode& m = N(t.order[mid]);
        const uint32_t ml = m.key_len < kl ? m.key_len : kl;
        const int c = ml ? memcmp(json_key(*d, m), key, ml) : 0;
        if (c < 0 || (c == 0 && m.key_len < kl)) lo = mid + 1;
        else hi = mid;
      }
      const bool found = lo < n && N(t.order[lo]).key_len == kl &&
                         (kl == 0 || memcmp(json_key(*d, N(t.order[lo])), key, kl) == 0);
      if (!found) {
        char pb[160];
        RLM_SET_ERROR(err, "required property \"%.*s\" is not in \"properties\" at %s",
                      static_cast<int>(kl < 64 ? kl : 64), key, path(s, pb, sizeof pb));
        return kErrGrammar;
      }
      // Duplicate keys in `properties`: every member with the name is required.
      for (uint32_t k = lo; k < n && N(t.order[k]).key_len == kl &&
                            (kl == 0 || memcmp(json_key(*d, N(t.order[k])), key, kl) == 0);
           ++k) {
        t.required[t.order[k]] = 1;
      }
    }
    return RLM_OK;
  }

  // One property written after another: `"," ws KV` (or that optional).
  void piece(uint32_t kv, bool req) {
    o.puts(req ? " \",\" ws " : " (\",\" ws ");
    put_name(kv);
    if (!req) o.puts(")?");
  }

  // The properties from index j on (member node m), after one was written: inline, rules
  // kRest for j in [1, f], the additional-properties tail at the end.
  void tail(uint32_t j, uint32_t m, uint32_t k, uint32_t f, uint32_t kv0, uint32_t rest1,
            uint32_t add, uint32_t req) {
    if (j >= 1 && j <= f && j < k) {
      o.put(' ');
      put_name(rest1 + j - 1);
      return;
    }
    for (; j < k && m != kJsonNone; ++j, m = N(m).next) piece(kv0 + j, required(req, m));
    if (add != kJsonNone) {
      o.puts(" (\",\" ws ");
      put_name(add);
      o.puts(")*");
    }
  }

  // Objects. Properties come in the schema's order; with P_i the key-value rule of property i,
  // the body is "{" ws H "}" where H chooses which property comes first: every optional one
  // before the first required one (index f) may be the first written, so
  //   H = P_0 T_1 | P_1 T_2 | ... | P_f T_{f+1}      (optional as a whole when none is required)
  //   T_j = ("," ws P_j)? T_{j+1}  (or without ? when required)
  // T_1..T_f are rules (each referenced twice), later tails are inline: the grammar stays linear
  // in the number of properties and every choice is decided by the next key.
  // additionalProperties: absent or false → no other keys (llama.cpp's choice too; JSON Schema's
  // default is true, but a generated object should have the declared shape); true / a schema →
  // any number of further "key": value pairs after the declared ones (the key any string).
  Status object_body(uint32_t s, uint32_t self) {
    const uint32_t props = find(s, "properties");
    const uint32_t req = find(s, "required");
    const uint32_t addl = find(s, "additionalProperties");
    if (props != kJsonNone && N(props).type != kJsonObject) {
      return fail_at(s, "must be an object:", "properties");
    }
    if (req != kJsonNone) {
      if (N(req).type != kJsonArray) return fail_at(s, "must be an array:", "required");
      RLM_RETURN_IF_ERROR(mark_required(s, props, req));
    }
    if (props == kJsonNone && addl == kJsonNone) {  // {"type": "object"}: any object
      put_prim(kPObject);
      return RLM_OK;
    }
    const uint32_t k = props == kJsonNone ? 0 : N(props).count;
    prims |= bit(kPWs);
    uint32_t add = kJsonNone;
    if (addl != kJsonNone && N(addl).type != kJsonFalse) {
      if (N(addl).type != kJsonTrue && N(addl).type != kJsonObject) {
        return fail_at(s, "must be a boolean or a schema:", "additionalProperties");
      }
      RLM_RETURN_IF_ERROR(new_rule(kAddKv, addl, self, "additional", 10, "-kv", &add));
      t.rules[add].obj = s;
    }
    // f: first required index, else the last property (all optional).
    uint32_t f = k == 0 ? 0 : k - 1;
    bool any_req = false;
    uint32_t kv0 = n_rules;
    {
      uint32_t i = 0;
      for (uint32_t m = k ? N(props).first : kJsonNone; m != kJsonNone; m = N(m).next, ++i) {
        uint32_t id;
        RLM_RETURN_IF_ERROR(new_rule(kKv, m, self, json_key(*d, N(m)), N(m).key_len, "-kv", &id));
        t.rules[id].base = self;
        if (!any_req && required(req, m)) {
          any_req = true;
          f = i;
        }
      }
    }
    const uint32_t rest1 = n_rules;
    {
      uint32_t i = 0;
      for (uint32_t m = k ? N(props).first : kJsonNone; m != kJsonNone && i <= f; m = N(m).next, ++i) {
        if (i == 0) continue;
        uint32_t id;
        RLM_RETURN_IF_ERROR(new_rule(kRest, s, self, json_key(*d, N(m)), N(m).key_len, "-rest", &id));
        Rule& r = t.rules[id];
        r.obj = s;
        r.j = i;
        r.first = m;
        r.f = f;
        r.k = k;
        r.kv0 = kv0;
        r.rest1 = rest1;
        r.add = add;
      }
    }
    o.puts("\"{\" ws ");
    if (k == 0) {
      if (add != kJsonNone) {
        o.puts("(");
        put_name(add);
        o.puts(" (\",\" ws ");
        put_name(add);
        o.puts(")*)? ");
      }
    } else {
      const bool group = f > 0 || !any_req;
      if (group) o.put('(');
      uint32_t i = 0;
      for (uint32_t m = N(props).first; m != kJsonNone && i <= f; m = N(m).next, ++i) {
        if (i) o.puts(" | ");
        put_name(kv0 + i);
        tail(i + 1, N(m).next, k, f, kv0, rest1, add, req);
      }
      if (!any_req && add != kJsonNone) {
        o.puts(" | ");
        put_name(add);
        o.puts(" (\",\" ws ");
        put_name(add);
        o.puts(")*");
      }
      if (group) o.put(')');
      if (!any_req) o.put('?');
      o.put(' ');
    }
    o.puts("\"}\"");
    return RLM_OK;
  }

  Status type_mask(uint32_t s, uint32_t* mask) {
    static constexpr struct {
      const char* name;
      uint32_t bit;
    } kTypes[] = {{"object", kTObject},   {"array", kTArray},     {"string", kTString},
                  {"number", kTNumber},   {"integer", kTInteger}, {"boolean", kTBoolean},
                  {"null", kTNull}};
    *mask = 0;
    const uint32_t ty = find(s, "type");
    if (ty == kJsonNone) {
      // Implied by the keywords present (a subset of what the schema allows, so still valid).
      if (find(s, "properties") != kJsonNone || find(s, "additionalProperties") != kJsonNone ||
          find(s, "required") != kJsonNone) {
        *mask |= kTObject;
      }
      if (find(s, "items") != kJsonNone || find(s, "prefixItems") != kJsonNone ||
          find(s, "minItems") != kJsonNone || find(s, "maxItems") != kJsonNone) {
        *mask |= kTArray;
      }
      if (find(s, "minLength") != kJsonNone || find(s, "maxLength") != kJsonNone ||
          find(s, "pattern") != kJsonNone || find(s, "format") != kJsonNone) {
        *mask |= kTString;
      }
      if (has_bounds(s)) *mask |= kTInteger;
      return RLM_OK;
    }
    const uint32_t first = N(ty).type == kJsonArray ? N(ty).first : ty;
    const bool list = N(ty).type == kJsonArray;
    if (list && N(ty).count == 0) return fail_at(s, "empty type list:", "type");
    for (uint32_t c = first; c != kJsonNone; c = list ? N(c).next : kJsonNone) {
      uint32_t b = 0;
      for (const auto& e : kTypes) {
        if (json_str_eq(*d, c, e.name)) b = e.bit;
      }
      if (b == 0) return fail_at(s, "unknown type in", "type");
      if (*mask & b) return fail_at(s, "duplicate type in", "type");
      *mask |= b;
    }
    // number and integer together: integer adds nothing.
    if ((*mask & kTNumber) && (*mask & kTInteger)) *mask &= ~static_cast<uint32_t>(kTInteger);
    return RLM_OK;
  }

  // The body of schema s's own rule `self` (a complete alternation).
  Status schema_body(uint32_t s, uint32_t self) {
    const JsonNode& n = N(s);
    if (n.type == kJsonTrue) {
      put_prim(kPValue);
      return RLM_OK;
    }
    if (n.type == kJsonFalse) return false_schema(s);
    if (n.type != kJsonObject) return fail_at(s, "schema must be an object or a boolean:", "type");
    RLM_RETURN_IF_ERROR(check_keywords(s));
    if (find(s, "$ref") != kJsonNone) {
      uint32_t target;
      const char* stem;
      size_t stem_len;
      RLM_RETURN_IF_ERROR(chase(s, &target, &stem, &stem_len));
      if (target == s || t.node_rule[target] == self) {
        return fail_at(s, "$ref refers to its own schema:", "$ref");
      }
      return ref(s, self, "ref");
    }
    const uint32_t cst = find(s, "const");
    if (cst != kJsonNone) {
      value_lit(cst);
      return RLM_OK;
    }
    const uint32_t en = find(s, "enum");
    if (en != kJsonNone) {
      if (N(en).type != kJsonArray || N(en).count == 0) {
        return fail_at(s, "must be a non-empty array:", "enum");
      }
      for (uint32_t c = N(en).first; c != kJsonNone; c = N(c).next) {
        if (c != N(en).first) o.puts(" | ");
        value_lit(c);
      }
      return RLM_OK;
    }
    const char* comb = nullptr;
    uint32_t alts = find(s, "anyOf");
    if (alts != kJsonNone) comb = "anyOf";
    if (alts == kJsonNone && (alts = find(s, "oneOf")) != kJsonNone) comb = "oneOf";
    if (alts != kJsonNone) {
      if (N(alts).type != kJsonArray || N(alts).count == 0) {
        return fail_at(s, "must be a non-empty array:", comb);
      }
      // Siblings would have to hold for every alternative: only annotations (and a `type`,
      // which the alternatives are expected to repeat) are accepted next to it.
      for (uint32_t c = n.first; c != kJsonNone; c = N(c).next) {
        if (c == alts || in_list(c, kAnnotations, sizeof kAnnotations / sizeof kAnnotations[0])) continue;
        if (N(c).key_len == 4 && memcmp(json_key(*d, N(c)), "type", 4) == 0) continue;
        char kw[64];
        const size_t l = N(c).key_len < sizeof kw - 1 ? N(c).key_len : sizeof kw - 1;
        memcpy(kw, json_key(*d, N(c)), l);
        kw[l] = '\0';
        return fail_at(s, comb[0] == 'a' ? "keyword next to anyOf is not supported:"
                                         : "keyword next to oneOf is not supported:", kw);
      }
      uint64_t i = 0;
      for (uint32_t c = N(alts).first; c != kJsonNone; c = N(c).next, ++i) {
        if (i) o.puts(" | ");
        RLM_RETURN_IF_ERROR(ref_index(c, self, i));
      }
      return RLM_OK;
    }
    const uint32_t all = find(s, "allOf");
    if (all != kJsonNone) {
      if (N(all).type != kJsonArray || N(all).count != 1 || has_constraints(s, "allOf")) {
        return fail_at(s, "only a single-schema allOf without sibling keywords is supported:",
                       "allOf");
      }
      return ref(N(all).first, self, "0");
    }
    uint32_t mask;
    RLM_RETURN_IF_ERROR(type_mask(s, &mask));
    if (mask == 0) {
      put_prim(kPValue);
      return RLM_OK;
    }
    if ((mask & kTNumber) && has_bounds(s)) {
      return fail_at(s, "bounds on type number are not supported (use type integer):", "minimum");
    }
    const bool several = (mask & (mask - 1)) != 0;
    bool first = true;
    for (uint32_t b = 1; b <= kTNull; b <<= 1) {
      if (!(mask & b)) continue;
      if (!first) o.puts(" | ");
      first = false;
      if (several) o.put('(');
      switch (b) {
        case kTObject: RLM_RETURN_IF_ERROR(object_body(s, self)); break;
        case kTArray: RLM_RETURN_IF_ERROR(array_body(s, self)); break;
        case kTString: RLM_RETURN_IF_ERROR(string_body(s)); break;
        case kTNumber: put_prim(kPNumber); break;
        case kTInteger: RLM_RETURN_IF_ERROR(integer_body(s)); break;
        case kTBoolean: put_prim(kPBoolean); break;
        case kTNull: put_prim(kPNull); break;
        default: break;
      }
      if (several) o.put(')');
    }
    return RLM_OK;
  }

  Status emit(uint32_t id) {
    const Rule r = t.rules[id];  // a copy: the body below appends rules to the table
    put_name(id);
    o.puts(" ::= ");
    switch (r.kind) {
      case kMain:
        RLM_RETURN_IF_ERROR(schema_body(r.node, id));
        break;
      case kKv: {
        const JsonNode& m = N(r.node);
        o.put('"');
        lit_byte(o, '"');
        const uint8_t* s = reinterpret_cast<const uint8_t*>(json_key(*d, m));
        for (size_t i = 0; i < m.key_len;) json_cp_lit(o, next_cp(s, m.key_len, &i));
        lit_byte(o, '"');
        o.puts("\" ws \":\" ws ");
        RLM_RETURN_IF_ERROR(ref(r.node, r.base, json_key(*d, m), m.key_len));
        o.puts(" ws");
        break;
      }
      case kRest: {
        const uint32_t req = find(r.obj, "required");
        // As piece(), without its leading space.
        const bool rq = required(req, r.first);
        o.puts(rq ? "\",\" ws " : "(\",\" ws ");
        put_name(r.kv0 + r.j);
        if (!rq) o.puts(")?");
        tail(r.j + 1, N(r.first).next, r.k, r.f, r.kv0, r.rest1, r.add, req);
        break;
      }
      case kAddKv:
        RLM_RETURN_IF_ERROR(additional_key(r.obj));
        o.puts(" ws \":\" ws ");
        if (N(r.node).type == kJsonTrue) put_prim(kPValue);
        else RLM_RETURN_IF_ERROR(ref(r.node, id, "value"));
        o.puts(" ws");
        break;
      default:
        break;
    }
    o.put('\n');
    return RLM_OK;
  }

  // ---- keys of additional properties ----
  //
  // An additional key must differ from every declared property name, or the object would hold
  // a duplicate key. Additional keys are written without escapes (so raw text equals the decoded
  // key, and a declared name cannot come back as "\u0061"-style spelling), and the grammar is a
  // trie over the declared names sorted by key: at each prefix, either a character that no name
  // continues with (then anything), or a name's next character (then the rest of the trie), or
  // the end — unless the prefix is itself a name. Names with characters JSON must escape cannot
  // collide with escape-free keys and are left out. Output is linear in the names' total length;
  // recursion and group nesting are one level per character, at most kMaxExcludedKey.

  bool key_less(uint32_t a, uint32_t b) const {
    const JsonNode& x = N(a);
    const JsonNode& y = N(b);
    const uint32_t m = x.key_len < y.key_len ? x.key_len : y.key_len;
    const int c = m ? memcmp(json_key(*d, x), json_key(*d, y), m) : 0;
    return c < 0 || (c == 0 && x.key_len < y.key_len);
  }

  // Heap sort of t.order[0, n) by key (no recursion, no allocation).
  void sort_keys(uint32_t n) {
    uint32_t* v = t.order;
    auto sift = [&](uint32_t root, uint32_t end) {
      for (;;) {
        uint32_t child = 2 * root + 1;
        if (child >= end) return;
        if (child + 1 < end && key_less(v[child], v[child + 1])) ++child;
        if (!key_less(v[root], v[child])) return;
        const uint32_t tmp = v[root];
        v[root] = v[child];
        v[child] = tmp;
        root = child;
      }
    };
    for (uint32_t i = n / 2; i-- > 0;) sift(i, n);
    for (uint32_t end = n; end > 1; --end) {
      const uint32_t tmp = v[0];
      v[0] = v[end - 1];
      v[end - 1] = tmp;
      sift(0, end - 1);
    }
  }

  // The code point of key `m` starting at byte `at` (< key_len); *next = the byte after it.
  uint32_t key_cp(uint32_t m, uint32_t at, uint32_t* next) const {
    size_t i = at;
    const uint32_t cp = next_cp(reinterpret_cast<const uint8_t*>(json_key(*d, N(m))), N(m).key_len, &i);
    *next = static_cast<uint32_t>(i);
    return cp;
  }

  // Keys t.order[lo, hi) share their first `at` bytes. Writes the group for the rest.
  void key_trie(uint32_t lo, uint32_t hi, uint32_t at) {
    bool terminal = false;
    while (lo < hi && N(t.order[lo]).key_len == at) {  // sorted: the shortest come first
      terminal = true;
      ++lo;
    }
    o.puts("([^");
    for (uint32_t i = lo; i < hi;) {
      uint32_t nx;
      const uint32_t cp = key_cp(t.order[i], at, &nx);
      class_cp(o, cp);
      while (i < hi && key_cp(t.order[i], at, &nx) == cp) ++i;
    }
    o.puts("\\x22\\x5C\\x7F\\x00-\\x1F] [^\\x22\\x5C\\x7F\\x00-\\x1F]*");
    for (uint32_t i = lo; i < hi;) {
      uint32_t nx;
      const uint32_t cp = key_cp(t.order[i], at, &nx);
      const uint32_t g = i;
      while (i < hi && key_cp(t.order[i], at, &nx) == cp) ++i;
      key_cp(t.order[g], at, &nx);  // the loop's last call may have read the next group
      o.puts(" | \"");
      json_cp_lit(o, cp);
      o.puts("\" ");
      key_trie(g, i, nx);
    }
    o.put(')');
    if (!terminal) o.put('?');
  }

  Status additional_key(uint32_t obj) {
    const uint32_t props = find(obj, "properties");
    uint32_t n = 0;
    if (props != kJsonNone) {
      for (uint32_t m = N(props).first; m != kJsonNone; m = N(m).next) {
        const uint8_t* k = reinterpret_cast<const uint8_t*>(json_key(*d, N(m)));
        bool plain = true;
        uint32_t chars = 0;
        for (size_t i = 0; i < N(m).key_len;) {
          plain &= !json_special(next_cp(k, N(m).key_len, &i));
          ++chars;
        }
        if (!plain) continue;
        if (chars > kMaxExcludedKey) {
          char pb[160];
          RLM_SET_ERROR(err,
                        "additionalProperties next to a property name longer than %u characters "
                        "is not supported at %s",
                        kMaxExcludedKey, path(obj, pb, sizeof pb));
          return kErrGrammar;
        }
        t.order[n++] = m;
      }
    }
    if (n == 0) {
      put_prim(kPString);
      return RLM_OK;
    }
    sort_keys(n);
    o.puts("\"\\\"\" ");
    key_trie(0, n, 0);
    o.puts(" \"\\\"\"");
    return RLM_OK;
  }

  // ---- pattern (regex subset) → GBNF expression ----
  Status pattern(uint32_t s, uint32_t pat);
};

// ---- regex subset ------------------------------------------------------------------------------
//
// Supported (ECMAScript syntax, the pattern anchored as ^...$): literal characters (any UTF-8),
// escaped metacharacters (\. \\ \/ \( ...), \n \t \r \f \v \0 \xHH \uHHHH, \d \w \s \D \W \S,
// `.` (any character, newline included), classes [abc] [a-z] [^...] (with the escapes above,
// except \D \W \S inside), groups ( ) and (?: ), alternation |, quantifiers * + ? {m} {m,}
// {m,n} (a lazy ? after one is accepted and means the same language). Anything else —
// backreferences, lookaround, \b, \p{..}, named groups, anchors inside — is a kErrGrammar naming
// the construct. The pattern applies to the decoded string while the grammar describes JSON
// text, so characters that JSON must escape (", \, controls) are written in their escaped form.
struct ClassSet {
  static constexpr int kMax = 64;
  uint32_t lo[kMax];
  uint32_t hi[kMax];
  int n = 0;
  bool neg = false;
  bool add(uint32_t a, uint32_t b) {
    if (n == kMax) return false;
    lo[n] = a;
    hi[n] = b;
    ++n;
    return true;
  }
};


void class_range(Out& o, uint32_t a, uint32_t b) {
  class_cp(o, a);
  if (b != a) {
    o.put('-');
    class_cp(o, b);
  }
}

// Emits a class as one GBNF term. Positive: the plain part as [..] (specials removed), plus
// each special character it contains as its JSON escape. Negative: [^ .. plus every special].
void emit_class(Out& o, const ClassSet& c) {
  if (c.neg) {
    o.puts("[^");
    for (int i = 0; i < c.n; ++i) class_range(o, c.lo[i], c.hi[i]);
    o.puts("\\x22\\x5C\\x7F\\x00-\\x1F]");
    return;
  }
  // Count the alternatives first (plain part non-empty? specials?) to decide on parentheses.
  bool plain = false;
  int specials = 0;
  for (uint32_t cp = 0; cp < 0x80; ++cp) {
    if (!json_special(cp)) continue;
    for (int i = 0; i < c.n; ++i) {
      if (cp >= c.lo[i] && cp <= c.hi[i]) {
        ++specials;
        break;
      }
    }
  }
  for (int i = 0; i < c.n && !plain; ++i) {
    for (uint32_t cp = c.lo[i]; cp <= c.hi[i]; ++cp) {
      if (!json_special(cp)) {
        plain = true;
        break;
      }
      if (cp >= 0x80) break;
    }
  }
  const bool group = (plain ? 1 : 0) + specials > 1;
  if (group) o.put('(');
  bool first = true;
  if (plain) {
    o.put('[');
    for (int i = 0; i < c.n; ++i) {
      // Sub-ranges between the specials (all of which are below 0x80).
      uint32_t cp = c.lo[i];
      while (cp <= c.hi[i]) {
        if (json_special(cp)) {
          ++cp;
          continue;
        }
        uint32_t end = cp;
        if (cp >= 0x80) {
          end = c.hi[i];
        } else {
          while (end + 1 <= c.hi[i] && !json_special(end + 1)) {
            ++end;
            if (end >= 0x80) {
              end = c.hi[i];
              break;
            }
          }
        }
        class_range(o, cp, end);
        if (end == c.hi[i]) break;
        cp = end + 1;
      }
    }
    o.put(']');
    first = false;
  }
  for (uint32_t cp = 0; cp < 0x80; ++cp) {
    if (!json_special(cp)) continue;
    bool in = false;
    for (int i = 0; i < c.n && !in; ++i) in = cp >= c.lo[i] && cp <= c.hi[i];
    if (!in) continue;
    if (!first) o.puts(" | ");
    first = false;
    o.put('"');
    json_cp_lit(o, cp);
    o.put('"');
  }
  if (group) o.put(')');
}

struct Regex {
  Compiler* c;
  uint32_t schema;
  const uint8_t* p;
  size_t n;
  size_t i = 0;
  uint32_t depth = 0;

  Status fail(const char* what) {
    char pb[160];
    RLM_SET_ERROR(c->err, "pattern: %s at offset %zu, in \"pattern\" at %s", what, i,
                  c->path(schema, pb, sizeof pb));
    return kErrGrammar;
  }
  bool more() const { return i < n; }
  uint8_t peek() const { return i < n ? p[i] : 0; }

  static int hexv(uint8_t ch) {
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
  }
  bool hex(int digits, uint32_t* v) {
    if (n - i < static_cast<size_t>(digits)) return false;
    *v = 0;
    for (int k = 0; k < digits; ++k) {
      const int h = hexv(p[i + k]);
      if (h < 0) return false;
      *v = *v * 16 + static_cast<uint32_t>(h);
    }
    i += static_cast<size_t>(digits);
    return true;
  }

  // After a '\\' (consumed): a single code point (*cp) or a class (*cls, returns kind 2).
  // Returns 1 for a code point, 2 for a class, 0 after an error.
  int escape(uint32_t* cp, ClassSet* cls, bool in_class, Status* st) {
    if (!more()) {
      *st = fail("trailing backslash");
      return 0;
    }
    const uint8_t e = p[i++];
    switch (e) {
      case 'n': *cp = '\n'; return 1;
      case 't': *cp = '\t'; return 1;
      case 'r': *cp = '\r'; return 1;
      case 'f': *cp = '\f'; return 1;
      case 'v': *cp = '\v'; return 1;
      case '0': *cp = 0; return 1;
      case 'x':
        if (!hex(2, cp)) {
          *st = fail("invalid \\x escape");
          return 0;
        }
        return 1;
      case 'u':
        if (!hex(4, cp) || (*cp >= 0xD800 && *cp <= 0xDFFF)) {
          *st = fail("invalid \\u escape (surrogates are not supported)");
          return 0;
        }
        return 1;
      case 'd': case 'w': case 's': case 'D': case 'W': case 'S': {
        const bool neg = e == 'D' || e == 'W' || e == 'S';
        if (neg && in_class) {
          *st = fail("\\D \\W \\S inside a class are not supported");
          return 0;
        }
        bool ok = true;
        if (e == 'd' || e == 'D') ok = cls->add('0', '9');
        if (e == 'w' || e == 'W') {
          ok = cls->add('0', '9') && cls->add('A', 'Z') && cls->add('_', '_') && cls->add('a', 'z');
        }
        if (e == 's' || e == 'S') ok = cls->add(' ', ' ') && cls->add('\t', '\r');
        if (!ok) {
          *st = fail("character class too large (64 ranges)");
          return 0;
        }
        if (neg) cls->neg = true;
        return 2;
      }
      case 'b':
        if (in_class) {
          *cp = '\b';
          return 1;
        }
        *st = fail("word boundary \\b is not supported");
        return 0;
      default:
        break;
    }
    if (e < 0x80 && !is_word(static_cast<char>(e)) && e != '_') {
      *cp = e;  // escaped punctuation
      return 1;
    }
    *st = fail("unsupported escape (backreferences, \\B, \\p{..}, \\c.. are not supported)");
    return 0;
  }

  Status klass() {
    ++i;  // '['
    ClassSet cls;
    if (peek() == '^') {
      cls.neg = true;
      ++i;
    }
    bool first = true;
    for (;;) {
      if (!more()) return fail("unterminated character class");
      if (p[i] == ']' && !first) {
        ++i;
        break;
      }
      first = false;
      uint32_t a;
      Status st = RLM_OK;
      if (p[i] == '\\') {
        ++i;
        ClassSet sub;
        const int kind = escape(&a, &sub, true, &st);
        if (kind == 0) return st;
        if (kind == 2) {
          for (int k = 0; k < sub.n; ++k) {
            if (!cls.add(sub.lo[k], sub.hi[k])) return fail("character class too large (64 ranges)");
          }
          continue;
        }
      } else {
        a = next_cp(p, n, &i);
      }
      uint32_t b = a;
      if (peek() == '-' && i + 1 < n && p[i + 1] != ']') {
        ++i;
        if (p[i] == '\\') {
          ++i;
          ClassSet sub;
          const int kind = escape(&b, &sub, true, &st);
          if (kind == 0) return st;
          if (kind == 2) return fail("a class escape cannot end a range");
        } else {
          b = next_cp(p, n, &i);
        }
        if (b < a) return fail("range out of order in character class");
      }
      if (!cls.add(a, b)) return fail("character class too large (64 ranges)");
    }
    if (cls.n == 0) return fail("empty character class");
    emit_class(c->o, cls);
    return RLM_OK;
  }

  bool read_int(uint64_t* v) {
    if (!more() || p[i] < '0' || p[i] > '9') return false;
    *v = 0;
    while (more() && p[i] >= '0' && p[i] <= '9') {
      if (*v > kMaxRepeat) return false;
      *v = *v * 10 + (p[i] - '0');
      ++i;
    }
    return true;
  }

  // A quantifier at i, if any: writes its GBNF suffix. *had set when one was present.
  Status quant(bool* had) {
    *had = false;
    const uint8_t q = peek();
    if (q == '*' || q == '+' || q == '?') {
      c->o.put(static_cast<char>(q));
      ++i;
      *had = true;
    } else if (q == '{') {
      const size_t save = i;
      ++i;
      uint64_t mn = 0, mx = 0;
      bool ok = read_int(&mn);
      bool unbounded = false;
      if (ok && peek() == ',') {
        ++i;
        if (peek() == '}') unbounded = true;
        else ok = read_int(&mx);
      } else {
        mx = mn;
      }
      ok = ok && peek() == '}';
      if (!ok) {
        i = save;  // not a quantifier: '{' is a literal (read by the caller)
        return RLM_OK;
      }
      ++i;
      if (mn > kMaxRepeat || (!unbounded && (mx > kMaxRepeat || mx < mn))) {
        return fail("repetition count out of order or above 2000 (kMaxRepeat)");
      }
      c->o.put('{');
      c->o.put_u64(mn);
      if (unbounded) {
        c->o.put(',');
      } else if (mx != mn) {
        c->o.put(',');
        c->o.put_u64(mx);
      }
      c->o.put('}');
      *had = true;
    }
    if (*had) {
      if (peek() == '?') ++i;  // lazy: same language
      const uint8_t q2 = peek();
      if (q2 == '*' || q2 == '+' || q2 == '?') return fail("nothing to repeat");
      if (q2 == '{') {
        bool again;
        const size_t save = i;
        const size_t save_len = c->o.len;
        RLM_RETURN_IF_ERROR(quant(&again));
        if (again) {
          c->o.len = save_len;
          i = save;
          return fail("nothing to repeat");
        }
      }
    }
    return RLM_OK;
  }

  bool quant_follows() const {
    const uint8_t q = peek();
    if (q == '*' || q == '+' || q == '?') return true;
    if (q != '{') return false;
    size_t k = i + 1;
    if (k >= n || p[k] < '0' || p[k] > '9') return false;
    while (k < n && p[k] >= '0' && p[k] <= '9') ++k;
    if (k < n && p[k] == ',') {
      ++k;
      while (k < n && p[k] >= '0' && p[k] <= '9') ++k;
    }
    return k < n && p[k] == '}';
  }

  // seq := (atom quant?)+ ; literal characters without a quantifier are merged into one literal.
  Status seq() {
    Out& o = c->o;
    bool lit_open = false;
    bool any = false;
    while (more() && p[i] != '|' && p[i] != ')') {
      const uint8_t ch = p[i];
      uint32_t cp = 0;
      ClassSet cls;
      if (ch == '(' || ch == '[' || ch == '.' || (ch == '\\' && i + 1 < n &&
          (p[i + 1] == 'd' || p[i + 1] == 'w' || p[i + 1] == 's' || p[i + 1] == 'D' ||
           p[i + 1] == 'W' || p[i + 1] == 'S'))) {
        if (lit_open) o.put('"');
        lit_open = false;
        if (any) o.put(' ');
        if (ch == '(') {
          ++i;
          if (peek() == '?') {
            if (i + 1 < n && p[i + 1] == ':') {
              i += 2;
            } else {
              return fail("lookaround and named groups are not supported");
            }
          }
          if (++depth > kPatternMaxDepth) return fail("groups nested deeper than 32");
          o.put('(');
          RLM_RETURN_IF_ERROR(alt());
          --depth;
          if (peek() != ')') return fail("missing ')'");
          ++i;
          o.put(')');
        } else if (ch == '[') {
          RLM_RETURN_IF_ERROR(klass());
        } else if (ch == '.') {
          ++i;
          c->put_prim(kPChar);
        } else {
          ++i;
          Status st = RLM_OK;
          uint32_t dummy;
          if (escape(&dummy, &cls, false, &st) != 2) return st;
          emit_class(o, cls);
        }
        bool had;
        RLM_RETURN_IF_ERROR(quant(&had));
        any = true;
        continue;
      }
      if (ch == '*' || ch == '+' || ch == '?') return fail("nothing to repeat");
      if (ch == '^' || ch == '$') return fail("anchors are only supported at the start and end");
      if (ch == '\\') {
        ++i;
        Status st = RLM_OK;
        if (escape(&cp, &cls, false, &st) != 1) return st;
      } else {
        cp = next_cp(p, n, &i);
      }
      const bool q = quant_follows();
      if (q || !lit_open) {
        if (lit_open) o.put('"');
        if (any) o.put(' ');
        o.put('"');
        lit_open = true;
      }
      json_cp_lit(o, cp);
      if (q) {
        o.put('"');
        lit_open = false;
        bool had;
        RLM_RETURN_IF_ERROR(quant(&had));
      }
      any = true;
    }
    if (lit_open) o.put('"');
    if (!any) return fail("empty alternative");
    return RLM_OK;
  }

  Status alt() {
    RLM_RETURN_IF_ERROR(seq());
    while (peek() == '|' && more()) {
      ++i;
      c->o.puts(" | ");
      RLM_RETURN_IF_ERROR(seq());
    }
    return RLM_OK;
  }
};

Status Compiler::pattern(uint32_t s, uint32_t pat) {
  const uint8_t* p = reinterpret_cast<const uint8_t*>(json_str(*d, N(pat)));
  size_t n = N(pat).len;
  Regex rx{this, s, p, n};
  // Anchored: ^ first, an unescaped $ last.
  size_t bs = 0;
  for (size_t k = n >= 1 ? n - 1 : 0; k-- > 0 && p[k] == '\\';) ++bs;
  if (n < 2 || p[0] != '^' || p[n - 1] != '$' || (bs & 1)) {
    return rx.fail("must be anchored as ^...$ (unanchored patterns are not supported)");
  }
  rx.i = 1;
  rx.n = n - 1;
  RLM_RETURN_IF_ERROR(rx.alt());
  if (rx.i != rx.n) return rx.fail("unbalanced ')'");
  return RLM_OK;
}

}  // namespace

size_t json_schema_scratch_bytes(const char* schema, size_t len) {
  Arena m(nullptr, 0);
  JsonDoc doc;
  if (json_parse(schema, len, m, &doc, nullptr) != RLM_OK) return kArenaAlignment;
  Tables t;
  layout_tables(m, doc.count, &t);
  return m.used();
}

Status json_schema_to_gbnf(const char* schema, size_t len, Arena& scratch, char* out, size_t cap,
                           size_t* len_out, ErrorSink* err) {
  clear_error(err);
  RLM_CHECK(len_out != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "len_out is NULL");
  *len_out = 0;
  RLM_CHECK(out != nullptr || cap == 0, RLM_ERR_INVALID_ARGUMENT, err, "out is NULL with cap > 0");
  RLM_CHECK(!scratch.measuring(), RLM_ERR_INVALID_ARGUMENT, err,
            "scratch arena has no memory (size it with json_schema_scratch_bytes)");
  JsonDoc doc;
  RLM_RETURN_IF_ERROR(json_parse(schema, len, scratch, &doc, err));
  Compiler c;
  c.d = &doc;
  c.err = err;
  c.o = Out{out, cap, 0};
  layout_tables(scratch, doc.count, &c.t);
  RLM_CHECK(scratch.ok() && c.t.node_rule != nullptr, RLM_ERR_BUFFER_TOO_SMALL, err,
            "schema scratch memory too small: %zu bytes needed", scratch.used());
  memset(c.t.hash, 0, (static_cast<size_t>(c.t.hash_mask) + 1) * sizeof(uint32_t));
  for (uint32_t i = 0; i < doc.count; ++i) c.t.node_rule[i] = kJsonNone;
  memset(c.t.required, 0, doc.count);
  // Reserve the primitive names (ids 0..kPCount-1) so no generated rule takes one.
  for (uint32_t p = 0; p < kPCount; ++p) {
    uint32_t id;
    const char* nm = kPrims[p].name;
    RLM_RETURN_IF_ERROR(c.new_rule(kPrimRule, kJsonNone, kJsonNone, nm, strlen(nm), nullptr, &id));
  }
  uint32_t root;
  RLM_RETURN_IF_ERROR(c.new_rule(kMain, 0, kJsonNone, "root", 4, nullptr, &root));
  c.t.node_rule[0] = root;
  for (uint32_t r = root; r < c.n_rules; ++r) RLM_RETURN_IF_ERROR(c.emit(r));
  // The primitives used, with their dependencies, in a fixed order.
  uint32_t need = c.prims;
  for (bool grew = true; grew;) {
    grew = false;
    for (uint32_t p = 0; p < kPCount; ++p) {
      if ((need & bit(static_cast<Prim>(p))) && (need | kPrims[p].deps) != need) {
        need |= kPrims[p].deps;
        grew = true;
      }
    }
  }
  for (uint32_t p = 0; p < kPCount; ++p) {
    if (!(need & bit(static_cast<Prim>(p)))) continue;
    c.o.puts(kPrims[p].name);
    c.o.puts(" ::= ");
    c.o.puts(kPrims[p].body);
    c.o.put('\n');
  }
  *len_out = c.o.len;
  RLM_CHECK(c.o.len < cap, RLM_ERR_BUFFER_TOO_SMALL, err,
            "GBNF output needs %zu bytes plus a NUL, the buffer has %zu", c.o.len, cap);
  out[c.o.len] = '\0';
  return RLM_OK;
}

const char* json_any_gbnf() { return kAnyGbnf; }

size_t json_schema_int_range(int64_t lo, int64_t hi, char* out, size_t cap) {
  Out o{out, cap, 0};
  if (lo <= hi) int_range(o, lo, hi);
  if (o.len < cap) out[o.len] = '\0';
  return o.len;
}

}  // namespace ringlm::internal
