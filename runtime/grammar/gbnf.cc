#include "grammar/gbnf.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "unicode.h"

namespace ringlm::internal {

namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr Status kErrGrammar = RLM_ERR_GRAMMAR;

bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct Parser {
  const char* s = nullptr;  // the block's copy of the text
  size_t n = 0;
  size_t i = 0;
  ErrorSink* err = nullptr;
  Status st = RLM_OK;

  GbnfElem* out = nullptr;  // finished rules, appended whole
  uint32_t out_n = 0, out_cap = 0;
  GbnfElem* stage = nullptr;  // elements of the rules being parsed (nested groups on top)
  uint32_t stage_n = 0, stage_cap = 0;
  uint32_t* rule_start = nullptr;  // kNone until defined
  uint32_t* name_off = nullptr;
  uint32_t* name_len = nullptr;
  uint32_t* first_use = nullptr;  // offset of the first reference (for "undefined rule")
  uint8_t* named = nullptr;       // 1: a named rule (looked up by name), 0: generated
  uint32_t n_rules = 0, rules_cap = 0;
  uint32_t depth = 0;

  bool ok() const { return st == RLM_OK; }

  void fail(size_t off, Status status, const char* fmt, ...) __attribute__((format(printf, 4, 5))) {
    if (st != RLM_OK) return;
    st = status;
    char msg[200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    char where[48];
    gbnf_where(s, n, off, where, sizeof where);
    RLM_SET_ERROR(err, "grammar: %s: %s", where, msg);
  }

  bool at(char c) const { return i < n && s[i] == c; }

  // Spaces, tabs and comments; newlines (and \r) too when `newlines`.
  void skip_space(bool newlines) {
    while (i < n) {
      const char c = s[i];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++i;
      } else if (c == '#') {
        while (i < n && s[i] != '\n' && s[i] != '\r') ++i;
      } else {
        return;
      }
    }
  }

  bool emit(uint8_t type, uint32_t value, size_t src, uint32_t min = 0, uint32_t max = 0) {
    if (stage_n >= stage_cap) {
      fail(src, RLM_ERR_BUFFER_TOO_SMALL, "the grammar's memory is full");
      return false;
    }
    GbnfElem& e = stage[stage_n++];
    e.type = type;
    e.pad[0] = e.pad[1] = e.pad[2] = 0;
    e.value = value;
    e.min = min;
    e.max = max;
    e.src = static_cast<uint32_t>(src);
    return true;
  }

  uint32_t new_rule(size_t name_at, size_t len, bool is_named) {
    if (n_rules >= rules_cap) {
      fail(name_at, RLM_ERR_BUFFER_TOO_SMALL, "the grammar's memory is full (rules)");
      return kNone;
    }
    const uint32_t id = n_rules++;
    rule_start[id] = kNone;
    name_off[id] = static_cast<uint32_t>(name_at);
    name_len[id] = static_cast<uint32_t>(len);
    first_use[id] = kNone;
    named[id] = is_named ? 1 : 0;
    return id;
  }

  uint32_t lookup(size_t at, size_t len) {
    for (uint32_t r = 0; r < n_rules; ++r) {
      if (named[r] && name_len[r] == len && memcmp(s + name_off[r], s + at, len) == 0) return r;
    }
    return new_rule(at, len, true);
  }

  // Moves stage[mark, stage_n) + kEnd into the finished rules as rule `id`.
  void finish_rule(uint32_t id, uint32_t mark, size_t src) {
    if (!emit(kEnd, 0, src)) return;
    const uint32_t count = stage_n - mark;
    if (out_n + count > out_cap) {
      fail(src, RLM_ERR_BUFFER_TOO_SMALL, "the grammar's memory is full");
      return;
    }
    memcpy(out + out_n, stage + mark, count * sizeof(GbnfElem));
    rule_start[id] = out_n;
    out_n += count;
    stage_n = mark;
  }

  // One character of a literal or class (escapes decoded) at s[i]; advances.
  bool parse_char(uint32_t* cp) {
    const size_t start = i;
    if (s[i] == '\\') {
      if (i + 1 >= n) {
        fail(start, kErrGrammar, "escape at the end of the text");
        return false;
      }
      const char e = s[i + 1];
      i += 2;
      int digits = 0;
      switch (e) {
        case 'n': *cp = '\n'; return true;
        case 'r': *cp = '\r'; return true;
        case 't': *cp = '\t'; return true;
        case '\\': case '"': case '[': case ']': case '-': case '\'': *cp = static_cast<uint8_t>(e); return true;
        case 'x': digits = 2; break;
        case 'u': digits = 4; break;
        case 'U': digits = 8; break;
        default:
          fail(start, kErrGrammar, "unknown escape '\\%c' (expected \\n \\r \\t \\\\ \\\" \\[ \\] \\- \\xHH \\uHHHH \\UHHHHHHHH)",
               e >= 0x20 && e < 0x7f ? e : '?');
          return false;
      }
      uint32_t v = 0;
      for (int k = 0; k < digits; ++k) {
        const int h = i < n ? hex_value(s[i]) : -1;
        if (h < 0) {
          fail(i, kErrGrammar, "expected %d hex digits after '\\%c'", digits, e);
          return false;
        }
        v = v * 16 + static_cast<uint32_t>(h);
        ++i;
      }
      if (v > 0x10FFFF) {
        fail(start, kErrGrammar, "code point U+%X is above U+10FFFF", v);
        return false;
      }
      *cp = v;
      return true;
    }
    const size_t len = utf8_decode(reinterpret_cast<const uint8_t*>(s + i), n - i, cp);
    if (*cp == kInvalidCp) {
      fail(i, RLM_ERR_INVALID_UTF8, "invalid UTF-8");
      return false;
    }
    i += len;
    return true;
  }

  void parse_literal() {
    const size_t start = i++;
    while (ok() && i < n && s[i] != '"') {
      if (s[i] == '\n' || s[i] == '\r') break;
      uint32_t cp;
      if (!parse_char(&cp)) return;
      emit(kChar, cp, start);
    }
    if (!ok()) return;
    if (!at('"')) return fail(start, kErrGrammar, "unterminated string literal (expected '\"')");
    ++i;
  }

  void parse_class() {
    const size_t start = i++;
    uint8_t first = kChar;
    if (at('^')) {
      first = kCharNot;
      ++i;
    }
    bool any = false;
    while (ok() && i < n && s[i] != ']') {
      if (s[i] == '\n' || s[i] == '\r') break;
      uint32_t lo;
      if (!parse_char(&lo)) return;
      emit(any ? static_cast<uint8_t>(kCharAlt) : first, lo, start);
      any = true;
      if (i + 1 < n && s[i] == '-' && s[i + 1] != ']') {
        ++i;
        uint32_t hi;
        if (!parse_char(&hi)) return;
        if (hi < lo) return fail(start, kErrGrammar, "character range end U+%04X is below its start U+%04X", hi, lo);
        emit(kCharRngUpper, hi, start);
      }
    }
    if (!ok()) return;
    if (!at(']')) return fail(start, kErrGrammar, "unterminated character class (expected ']')");
    if (!any) return fail(start, kErrGrammar, "empty character class");
    ++i;
  }

  bool parse_count(uint32_t* v) {
    if (i >= n || s[i] < '0' || s[i] > '9') {
      fail(i, kErrGrammar, "expected a number");
      return false;
    }
    uint64_t x = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9') {
      x = x * 10 + static_cast<uint64_t>(s[i] - '0');
      if (x > kGbnfMaxRepeat) {
        fail(i, kErrGrammar, "repetition count above %u", kGbnfMaxRepeat);
        return false;
      }
      ++i;
    }
    *v = static_cast<uint32_t>(x);
    return true;
  }

  // A postfix operator at s[i] applied to the item stage[item, stage_n).
  void parse_postfix(uint32_t item) {
    const size_t start = i;
    uint32_t min = 0, max = kGbnfRepeatInf;
    const char c = s[i++];
    if (c == '*') {
    } else if (c == '+') {
      min = 1;
    } else if (c == '?') {
      max = 1;
    } else {  // '{'
      skip_space(false);
      if (!parse_count(&min)) return;
      skip_space(false);
      if (at(',')) {
        ++i;
        skip_space(false);
        if (!at('}')) {
          if (!parse_count(&max)) return;
          skip_space(false);
        }
      } else {
        max = min;
      }
      if (!at('}')) return fail(i, kErrGrammar, "expected '}' to close the repetition count");
      ++i;
      if (max != kGbnfRepeatInf && min > max) return fail(start, kErrGrammar, "repetition {%u,%u}: minimum above maximum", min, max);
    }
    uint32_t body;
    if (stage_n - item == 1 && stage[item].type == kRuleRef) {
      body = stage[item].value;
      stage_n = item;
    } else {
      body = new_rule(stage[item].src, start - stage[item].src, false);
      if (!ok()) return;
      finish_rule(body, item, start);
      if (!ok()) return;
    }
    emit(kRepeat, body, start, min, max);
  }

  void parse_alternates(bool nested);

  void parse_sequence(bool nested) {
    uint32_t item = kNone;  // where the last item starts in stage
    while (ok() && i < n) {
      const char c = s[i];
      const uint32_t here = stage_n;
      if (c == '"') {
        parse_literal();
        item = here;
      } else if (c == '[') {
        parse_class();
        item = here;
      } else if (is_word(c)) {
        const size_t at_ = i;
        while (i < n && is_word(s[i])) ++i;
        const uint32_t r = lookup(at_, i - at_);
        if (!ok()) return;
        if (first_use[r] == kNone) first_use[r] = static_cast<uint32_t>(at_);
        emit(kRuleRef, r, at_);
        item = here;
      } else if (c == '(') {
        const size_t start = i++;
        if (++depth > kGbnfMaxNesting) return fail(start, kErrGrammar, "groups nested deeper than %u", kGbnfMaxNesting);
        const uint32_t g = new_rule(start, 0, false);
        if (!ok()) return;
        skip_space(true);
        const uint32_t mark = stage_n;
        parse_alternates(true);
        if (!ok()) return;
        if (!at(')')) return fail(start, kErrGrammar, "unterminated group (expected ')')");
        ++i;
        name_len[g] = static_cast<uint32_t>(i - start);
        finish_rule(g, mark, start);
        --depth;
        emit(kRuleRef, g, start);
        item = here;
      } else if (c == '.') {
        emit(kCharAny, 0, i++);
        item = here;
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (item == kNone) return fail(i, kErrGrammar, "'%c' with nothing before it to repeat", c);
        parse_postfix(item);
      } else {
        return;
      }
      skip_space(nested);
    }
  }
};

void Parser::parse_alternates(bool nested) {
  parse_sequence(nested);
  while (ok() && at('|')) {
    emit(kAlt, 0, i);
    ++i;
    skip_space(true);
    parse_sequence(nested);
  }
}

// Scratch of the analysis passes.
struct Analysis {
  uint32_t* alt_rule;   // (n_alts) rule of each alternative
  uint32_t* alt_need;   // (n_alts) symbols that still have to turn nullable
  uint8_t* alt_dead;    // (n_alts) holds a terminal
  uint32_t* occ_start;  // (n_rules + 1) occurrences of rule r: occ[occ_start[r], occ_start[r+1])
  uint32_t* occ;        // (elements) alternatives depending on a rule, with multiplicity
  uint32_t* queue;      // (n_rules) rules turned nullable, to propagate
};

// A symbol the nullability of an alternative depends on: the rule, or kNone (none: a kRepeat
// with min 0 is nullable whatever its body).
uint32_t depends_on(const GbnfElem& e) {
  if (e.type == kRuleRef) return e.value;
  if (e.type == kRepeat && e.min > 0) return e.value;
  return kNone;
}

bool is_terminal(uint8_t t) { return t >= kChar && t <= kCharAny; }

}  // namespace

void gbnf_min_lengths(const Grammar& g, uint32_t* out) {
  for (uint32_t r = 0; r < g.n_rules; ++r) out[r] = 0;
  for (uint32_t pass = 0; pass < kGbnfMinLenPasses; ++pass) {
    bool changed = false;
    for (uint32_t r = 0; r < g.n_rules; ++r) {
      uint64_t best = kGbnfMinLenCap, sum = 0;
      for (uint32_t k = g.rule_start[r];; ++k) {
        const GbnfElem& e = g.elems[k];
        if (e.type == kEnd || e.type == kAlt) {
          if (sum < best) best = sum;
          if (e.type == kEnd) break;
          sum = 0;
          continue;
        }
        // A set counts once, at its first element (kCharRngUpper / kCharAlt continue it).
        if (e.type == kChar || e.type == kCharNot || e.type == kCharAny) sum += 1;
        else if (e.type == kRuleRef) sum += out[e.value];
        else if (e.type == kRepeat) sum += static_cast<uint64_t>(e.min) * out[e.value];
        if (sum > kGbnfMinLenCap) sum = kGbnfMinLenCap;
      }
      if (best > out[r]) {
        out[r] = static_cast<uint32_t>(best);
        changed = true;
      }
    }
    if (!changed) break;
  }
}

void gbnf_where(const char* text, size_t len, size_t off, char* buf, size_t cap) {
  size_t line = 1, col = 1;
  for (size_t k = 0; k < off && k < len; ++k) {
    if (text[k] == '\n') {
      ++line;
      col = 1;
    } else {
      ++col;
    }
  }
  snprintf(buf, cap, "line %zu, column %zu", line, col);
}

size_t gbnf_bytes(size_t len) {
  if (len > kGbnfMaxText) return SIZE_MAX;
  const size_t elems = 4 * len + 16, rules = len + 2;
  // text, out + stage elements, per-rule arrays (start, name off/len, first use, named, nullable,
  // DFS colour and cursor), analysis arrays (per element: alternative arrays x3 + occurrences;
  // per rule: occ_start, queue), alignment slack.
  return len + 2 * elems * sizeof(GbnfElem) + rules * (4 * 4 + 2 + 4 * 4) +
         elems * (4 + 4 + 1 + 4) + (rules + 1) * 4 + rules * 4 + 64 * 32 + sizeof(Grammar);
}

Status gbnf_compile(const char* text, size_t len, Arena& a, const Grammar** out, ErrorSink* err) {
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "grammar: text is NULL");
  RLM_CHECK(len <= kGbnfMaxText, kErrGrammar, err, "grammar: %zu bytes, over the limit of %zu",
            len, kGbnfMaxText);
  const size_t elems = 4 * len + 16, rules = len + 2;
  Grammar* g = a.alloc<Grammar>(1);
  char* copy = a.alloc<char>(len ? len : 1, 1);
  Parser p;
  p.out = a.alloc<GbnfElem>(elems);
  p.stage = a.alloc<GbnfElem>(elems);
  p.rule_start = a.alloc<uint32_t>(rules);
  p.name_off = a.alloc<uint32_t>(rules);
  p.name_len = a.alloc<uint32_t>(rules);
  p.first_use = a.alloc<uint32_t>(rules);
  p.named = a.alloc<uint8_t>(rules);
  uint8_t* nullable = a.alloc<uint8_t>(rules);
  RLM_CHECK(a.ok() && g && copy && p.out && p.stage && p.rule_start && p.name_off && p.name_len &&
                p.first_use && p.named && nullable,
            RLM_ERR_BUFFER_TOO_SMALL, err, "grammar: memory too small (%zu bytes needed at least)",
            gbnf_bytes(len));
  if (len) memcpy(copy, text, len);
  p.s = copy;
  p.n = len;
  p.err = err;
  p.out_cap = p.stage_cap = static_cast<uint32_t>(elems);
  p.rules_cap = static_cast<uint32_t>(rules);

  // ---- parse ----
  p.skip_space(true);
  while (p.ok() && p.i < p.n) {
    const size_t start = p.i;
    if (!is_word(p.s[p.i])) {
      p.fail(p.i, kErrGrammar, "expected a rule name");
      break;
    }
    while (p.i < p.n && is_word(p.s[p.i])) ++p.i;
    const uint32_t id = p.lookup(start, p.i - start);
    if (!p.ok()) break;
    if (p.rule_start[id] != kNone) {
      p.fail(start, kErrGrammar, "rule '%.*s' is defined twice", static_cast<int>(p.i - start), p.s + start);
      break;
    }
    p.name_off[id] = static_cast<uint32_t>(start);  // the definition, for messages
    p.skip_space(false);
    if (p.i + 3 > p.n || memcmp(p.s + p.i, "::=", 3) != 0) {
      p.fail(p.i, kErrGrammar, "expected '::=' after rule name '%.*s'", static_cast<int>(p.name_len[id]),
             p.s + start);
      break;
    }
    p.i += 3;
    p.skip_space(true);
    const uint32_t mark = p.stage_n;
    p.parse_alternates(false);
    if (!p.ok()) break;
    if (p.i < p.n && p.s[p.i] != '\n' && p.s[p.i] != '\r') {
      const char c = p.s[p.i];
      p.fail(p.i, kErrGrammar, c == ')' ? "unmatched ')'" : "unexpected '%c' (expected an item, '|' or the end of the line)",
             c >= 0x20 && c < 0x7f ? c : '?');
      break;
    }
    // The rule's definition may be preceded in rule_start by a use: mark it defined now.
    p.finish_rule(id, mark, start);
    p.skip_space(true);
  }
  if (!p.ok()) return p.st;
  for (uint32_t r = 0; r < p.n_rules; ++r) {
    if (p.rule_start[r] == kNone) {
      p.fail(p.first_use[r] != kNone ? p.first_use[r] : p.name_off[r], kErrGrammar,
             "undefined rule '%.*s'", static_cast<int>(p.name_len[r]), p.s + p.name_off[r]);
      return p.st;
    }
  }
  uint32_t root = kNone;
  for (uint32_t r = 0; r < p.n_rules; ++r) {
    if (p.named[r] && p.name_len[r] == 4 && memcmp(p.s + p.name_off[r], "root", 4) == 0) root = r;
  }
  if (root == kNone) {
    p.fail(len, kErrGrammar, "no rule named 'root' (the start of the grammar)");
    return p.st;
  }

  // ---- nullable rules: Horn-clause propagation, linear in the elements ----
  const GbnfElem* e = p.out;
  const uint32_t n_el = p.out_n, n_rules = p.n_rules;
  uint32_t n_alts = 0;
  for (uint32_t k = 0; k < n_el; ++k) n_alts += e[k].type == kAlt || e[k].type == kEnd;
  Analysis an;
  an.alt_rule = a.alloc<uint32_t>(n_alts);
  an.alt_need = a.alloc<uint32_t>(n_alts);
  an.alt_dead = a.alloc<uint8_t>(n_alts);
  an.occ_start = a.alloc<uint32_t>(n_rules + 1);
  an.occ = a.alloc<uint32_t>(n_el ? n_el : 1);
  an.queue = a.alloc<uint32_t>(n_rules);
  RLM_CHECK(a.ok() && an.alt_rule && an.alt_need && an.alt_dead && an.occ_start && an.occ && an.queue,
            RLM_ERR_BUFFER_TOO_SMALL, err, "grammar: memory too small for the analysis");
  // Rules in element order: rule_start is increasing by construction? Not for named rules
  // defined after their groups; walk each rule from its start instead.
  memset(nullable, 0, n_rules);
  for (uint32_t r = 0; r <= n_rules; ++r) an.occ_start[r] = 0;
  uint32_t alt = 0;
  for (uint32_t r = 0; r < n_rules; ++r) {
    for (uint32_t k = p.rule_start[r];; ++k) {
      if (e[k].type == kAlt || e[k].type == kEnd) {
        ++alt;
        if (e[k].type == kEnd) break;
        continue;
      }
      const uint32_t d = depends_on(e[k]);
      if (d != kNone) ++an.occ_start[d + 1];
    }
  }
  for (uint32_t r = 0; r < n_rules; ++r) an.occ_start[r + 1] += an.occ_start[r];
  // Fill (occ_start[r] as a moving cursor, restored after).
  alt = 0;
  for (uint32_t r = 0; r < n_rules; ++r) {
    an.alt_rule[alt] = r;
    an.alt_need[alt] = 0;
    an.alt_dead[alt] = 0;
    for (uint32_t k = p.rule_start[r];; ++k) {
      if (e[k].type == kAlt || e[k].type == kEnd) {
        ++alt;
        if (e[k].type == kEnd) break;
        an.alt_rule[alt] = r;
        an.alt_need[alt] = 0;
        an.alt_dead[alt] = 0;
        continue;
      }
      if (is_terminal(e[k].type)) {
        // A set is several elements; only its first counts (kCharAlt / kCharRngUpper follow it).
        if (e[k].type != kCharAlt && e[k].type != kCharRngUpper) an.alt_dead[alt] = 1;
        continue;
      }
      const uint32_t d = depends_on(e[k]);
      if (d != kNone) {
        an.occ[an.occ_start[d]++] = alt;
        ++an.alt_need[alt];
      }
    }
  }
  for (uint32_t r = n_rules; r > 0; --r) an.occ_start[r] = an.occ_start[r - 1];
  an.occ_start[0] = 0;
  uint32_t q_head = 0, q_tail = 0;
  for (uint32_t k = 0; k < n_alts; ++k) {
    const uint32_t r = an.alt_rule[k];
    if (!an.alt_dead[k] && an.alt_need[k] == 0 && !nullable[r]) {
      nullable[r] = 1;
      an.queue[q_tail++] = r;
    }
  }
  while (q_head < q_tail) {
    const uint32_t r = an.queue[q_head++];
    for (uint32_t o = an.occ_start[r]; o < an.occ_start[r + 1]; ++o) {
      const uint32_t k = an.occ[o];
      if (--an.alt_need[k] == 0 && !an.alt_dead[k] && !nullable[an.alt_rule[k]]) {
        nullable[an.alt_rule[k]] = 1;
        an.queue[q_tail++] = an.alt_rule[k];
      }
    }
  }
  for (uint32_t k = 0; k < n_el; ++k) {
    if (e[k].type == kRepeat && e[k].max == kGbnfRepeatInf && nullable[e[k].value]) {
      p.fail(e[k].src, kErrGrammar, "unbounded repetition of an expression that can match nothing");
      return p.st;
    }
  }

  // ---- left recursion: a cycle of rules each at the left edge of the previous ----
  // Iterative DFS; the frame of rule r is its cursor k into its elements and whether the cursor
  // is still in the left edge of the current alternative. Colours reuse alt_dead's memory? No:
  // their own arrays, from the analysis scratch (queue: the DFS stack; alt_need: cursors).
  uint8_t* colour = a.alloc<uint8_t>(n_rules);
  uint32_t* cursor = a.alloc<uint32_t>(n_rules);
  uint8_t* edge = a.alloc<uint8_t>(n_rules);  // 1 while the cursor is in a left edge
  RLM_CHECK(a.ok() && colour && cursor && edge, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: memory too small for the analysis");
  memset(colour, 0, n_rules);
  uint32_t* stack = an.queue;
  for (uint32_t start = 0; start < n_rules; ++start) {
    if (colour[start]) continue;
    uint32_t sp = 0;
    stack[sp++] = start;
    colour[start] = 1;
    cursor[start] = p.rule_start[start];
    edge[start] = 1;
    while (sp > 0) {
      const uint32_t r = stack[sp - 1];
      uint32_t& k = cursor[r];
      const GbnfElem& el = e[k];
      if (el.type == kEnd) {
        colour[r] = 2;
        --sp;
        continue;
      }
      ++k;
      if (el.type == kAlt) {
        edge[r] = 1;
        continue;
      }
      if (!edge[r]) continue;
      if (el.type != kRuleRef && el.type != kRepeat) {
        edge[r] = 0;  // a terminal ends the left edge
        continue;
      }
      const uint32_t t = el.value;
      const bool passes = el.type == kRuleRef ? nullable[t] != 0 : (el.min == 0 || nullable[t]);
      if (!passes) edge[r] = 0;
      if (colour[t] == 1) {
        p.fail(el.src, kErrGrammar, "left recursion: rule '%.*s' can reach itself without consuming input",
               static_cast<int>(p.name_len[t]), p.s + p.name_off[t]);
        return p.st;
      }
      if (colour[t] == 0) {
        colour[t] = 1;
        cursor[t] = p.rule_start[t];
        edge[t] = 1;
        stack[sp++] = t;
      }
    }
  }

  g->elems = p.out;
  g->n_elems = p.out_n;
  g->rule_start = p.rule_start;
  g->nullable = nullable;
  g->name_off = p.name_off;
  g->name_len = p.name_len;
  g->n_rules = n_rules;
  g->root = root;
  g->text = copy;
  g->text_len = static_cast<uint32_t>(len);
  *out = g;
  return RLM_OK;
}

}  // namespace ringlm::internal
