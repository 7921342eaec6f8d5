#include "grammar/json.h"

#include <string.h>

#include "unicode.h"

namespace ringlm::internal {

namespace {

// One pass over the text. The counting pass (fill == false) writes nothing and only counts nodes
// and decoded string bytes; the fill pass (same code) writes them. Both passes see the same
// text, so the fill pass produces exactly the counted amounts and never writes past them.
struct Parser {
  const char* p;
  size_t len;
  size_t pos = 0;
  bool fill = false;
  JsonNode* nodes = nullptr;
  char* strings = nullptr;
  uint32_t n_nodes = 0;
  uint32_t n_str = 0;
  ErrorSink* err = nullptr;
  Status status = RLM_OK;

  // Records the first error with its line and column (computed only here: errors are rare).
  void fail(Status s, const char* what) {
    if (status != RLM_OK) return;
    status = s;
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos && i < len; ++i) {
      if (p[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    RLM_SET_ERROR(err, "JSON line %zu, column %zu: %s", line, col, what);
  }

  bool at_end() const { return pos >= len; }
  uint8_t peek() const { return pos < len ? static_cast<uint8_t>(p[pos]) : 0; }

  void skip_ws() {
    while (pos < len && (p[pos] == ' ' || p[pos] == '\t' || p[pos] == '\n' || p[pos] == '\r')) ++pos;
  }

  bool literal(const char* word) {
    const size_t n = strlen(word);
    if (len - pos < n || memcmp(p + pos, word, n) != 0) {
      fail(RLM_ERR_INVALID_ARGUMENT, "invalid literal (expected true, false or null)");
      return false;
    }
    pos += n;
    return true;
  }

  uint32_t new_node(uint8_t type, uint32_t parent) {
    const uint32_t i = n_nodes++;
    if (fill) {
      JsonNode& n = nodes[i];
      memset(&n, 0, sizeof n);
      n.type = type;
      n.parent = parent;
      n.next = kJsonNone;
      n.first = kJsonNone;
    }
    return i;
  }

  void put_byte(uint8_t b) {
    if (fill) strings[n_str] = static_cast<char>(b);
    ++n_str;
  }
  void put_cp(uint32_t cp) {
    uint8_t b[4];
    const size_t len = utf8_encode(cp, b);
    for (size_t k = 0; k < len; ++k) put_byte(b[k]);
  }

  // Four hex digits at pos (advances past them).
  bool hex4(uint32_t* out) {
    if (len - pos < 4) {
      fail(RLM_ERR_INVALID_ARGUMENT, "truncated \\u escape");
      return false;
    }
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      const char c = p[pos + i];
      uint32_t d;
      if (c >= '0' && c <= '9') d = static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') d = static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') d = static_cast<uint32_t>(c - 'A' + 10);
      else {
        pos += static_cast<size_t>(i);
        fail(RLM_ERR_INVALID_ARGUMENT, "invalid hex digit in \\u escape");
        return false;
      }
      v = v * 16 + d;
    }
    pos += 4;
    *out = v;
    return true;
  }

  // A string at pos (which holds '"'); appends the decoded bytes, sets *off / *n.
  bool string(uint32_t* off, uint32_t* n) {
    ++pos;  // opening quote
    *off = n_str;
    for (;;) {
      if (at_end()) {
        fail(RLM_ERR_INVALID_ARGUMENT, "unterminated string");
        return false;
      }
      const uint8_t c = static_cast<uint8_t>(p[pos]);
      if (c == '"') {
        ++pos;
        break;
      }
      if (c < 0x20) {
        fail(RLM_ERR_INVALID_ARGUMENT, "control character in string (must be escaped)");
        return false;
      }
      if (c == '\\') {
        ++pos;
        if (at_end()) {
          fail(RLM_ERR_INVALID_ARGUMENT, "unterminated escape");
          return false;
        }
        const char e = p[pos++];
        switch (e) {
          case '"': put_byte('"'); break;
          case '\\': put_byte('\\'); break;
          case '/': put_byte('/'); break;
          case 'b': put_byte('\b'); break;
          case 'f': put_byte('\f'); break;
          case 'n': put_byte('\n'); break;
          case 'r': put_byte('\r'); break;
          case 't': put_byte('\t'); break;
          case 'u': {
            uint32_t cp;
            if (!hex4(&cp)) return false;
            if (cp >= 0xDC00 && cp <= 0xDFFF) {
              pos -= 6;
              fail(RLM_ERR_INVALID_ARGUMENT, "lone low surrogate in \\u escape");
              return false;
            }
            if (cp >= 0xD800 && cp <= 0xDBFF) {
              uint32_t lo = 0;
              if (len - pos < 2 || p[pos] != '\\' || p[pos + 1] != 'u') {
                fail(RLM_ERR_INVALID_ARGUMENT, "high surrogate not followed by a \\u low surrogate");
                return false;
              }
              pos += 2;
              if (!hex4(&lo)) return false;
              if (lo < 0xDC00 || lo > 0xDFFF) {
                pos -= 6;
                fail(RLM_ERR_INVALID_ARGUMENT, "high surrogate not followed by a low surrogate");
                return false;
              }
              cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            }
            put_cp(cp);
            break;
          }
          default:
            --pos;
            fail(RLM_ERR_INVALID_ARGUMENT, "invalid escape in string");
            return false;
        }
        continue;
      }
      if (c < 0x80) {
        put_byte(c);
        ++pos;
        continue;
      }
      // Raw UTF-8: well-formed sequences only (Unicode Table 3-7).
      size_t need;
      uint8_t lo = 0x80, hi = 0xBF;
      if (c >= 0xC2 && c <= 0xDF) need = 2;
      else if (c >= 0xE0 && c <= 0xEF) need = 3;
      else if (c >= 0xF0 && c <= 0xF4) need = 4;
      else {
        fail(RLM_ERR_INVALID_UTF8, "invalid UTF-8 in string");
        return false;
      }
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
      if (len - pos < need) {
        fail(RLM_ERR_INVALID_UTF8, "truncated UTF-8 in string");
        return false;
      }
      for (size_t k = 1; k < need; ++k) {
        const uint8_t b = static_cast<uint8_t>(p[pos + k]);
        const bool ok = k == 1 ? (b >= lo && b <= hi) : (b >= 0x80 && b <= 0xBF);
        if (!ok) {
          fail(RLM_ERR_INVALID_UTF8, "invalid UTF-8 in string");
          return false;
        }
      }
      for (size_t k = 0; k < need; ++k) put_byte(static_cast<uint8_t>(p[pos + k]));
      pos += need;
    }
    *n = n_str - *off;
    return true;
  }

  // A number at pos: -? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?
  bool number(uint32_t node) {
    const size_t start = pos;
    bool neg = false;
    if (peek() == '-') {
      neg = true;
      ++pos;
    }
    if (at_end() || peek() < '0' || peek() > '9') {
      fail(RLM_ERR_INVALID_ARGUMENT, "expected a digit");
      return false;
    }
    uint64_t mag = 0;
    bool fits = true;
    if (peek() == '0') {
      ++pos;
    } else {
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        const uint64_t d = static_cast<uint64_t>(peek() - '0');
        if (mag > (UINT64_MAX - d) / 10) fits = false;
        else mag = mag * 10 + d;
        ++pos;
      }
    }
    bool integral = true;
    if (peek() == '.') {
      ++pos;
      if (at_end() || peek() < '0' || peek() > '9') {
        fail(RLM_ERR_INVALID_ARGUMENT, "expected a digit after '.'");
        return false;
      }
      while (!at_end() && peek() >= '0' && peek() <= '9') {
        if (peek() != '0') integral = false;
        ++pos;
      }
    }
    if (peek() == 'e' || peek() == 'E') {
      integral = false;
      ++pos;
      if (peek() == '+' || peek() == '-') ++pos;
      if (at_end() || peek() < '0' || peek() > '9') {
        fail(RLM_ERR_INVALID_ARGUMENT, "expected a digit in the exponent");
        return false;
      }
      while (!at_end() && peek() >= '0' && peek() <= '9') ++pos;
    }
    if (fill) {
      JsonNode& n = nodes[node];
      n.off = static_cast<uint32_t>(start);
      n.len = static_cast<uint32_t>(pos - start);
      const uint64_t lim = neg ? (uint64_t{1} << 63) : (uint64_t{1} << 63) - 1;
      if (integral && fits && mag <= lim) {
        n.is_int = 1;
        n.ival = neg ? static_cast<int64_t>(0 - mag) : static_cast<int64_t>(mag);
      }
    }
    return true;
  }

  // A value at pos (whitespace skipped before); returns its node index or kJsonNone on error.
  uint32_t value(uint32_t parent, uint32_t depth) {
    skip_ws();
    if (at_end()) {
      fail(RLM_ERR_INVALID_ARGUMENT, "unexpected end of input (expected a value)");
      return kJsonNone;
    }
    const char c = p[pos];
    if (c == '{' || c == '[') {
      if (depth >= kJsonMaxDepth) {
        fail(RLM_ERR_INVALID_ARGUMENT, "nesting deeper than 64 arrays / objects");
        return kJsonNone;
      }
      const bool obj = c == '{';
      const uint32_t self = new_node(obj ? kJsonObject : kJsonArray, parent);
      ++pos;
      skip_ws();
      const char close = obj ? '}' : ']';
      if (peek() == static_cast<uint8_t>(close)) {
        ++pos;
        return self;
      }
      uint32_t prev = kJsonNone, count = 0;
      for (;;) {
        uint32_t koff = 0, klen = 0;
        if (obj) {
          skip_ws();
          if (peek() != '"') {
            fail(RLM_ERR_INVALID_ARGUMENT, "expected a string key in object");
            return kJsonNone;
          }
          if (!string(&koff, &klen)) return kJsonNone;
          skip_ws();
          if (peek() != ':') {
            fail(RLM_ERR_INVALID_ARGUMENT, "expected ':' after object key");
            return kJsonNone;
          }
          ++pos;
        }
        const uint32_t child = value(self, depth + 1);
        if (child == kJsonNone) return kJsonNone;
        ++count;
        if (fill) {
          nodes[child].key_off = koff;
          nodes[child].key_len = klen;
          if (prev == kJsonNone) nodes[self].first = child;
          else nodes[prev].next = child;
        }
        prev = child;
        skip_ws();
        if (peek() == ',' && !at_end()) {
          ++pos;
          continue;
        }
        if (peek() == static_cast<uint8_t>(close) && !at_end()) {
          ++pos;
          break;
        }
        fail(RLM_ERR_INVALID_ARGUMENT, obj ? "expected ',' or '}' in object" : "expected ',' or ']' in array");
        return kJsonNone;
      }
      if (fill) nodes[self].count = count;
      return self;
    }
    if (c == '"') {
      const uint32_t self = new_node(kJsonString, parent);
      uint32_t off = 0, n = 0;
      if (!string(&off, &n)) return kJsonNone;
      if (fill) {
        nodes[self].off = off;
        nodes[self].len = n;
      }
      return self;
    }
    if (c == '-' || (c >= '0' && c <= '9')) {
      const uint32_t self = new_node(kJsonNumber, parent);
      return number(self) ? self : kJsonNone;
    }
    if (c == 't') return literal("true") ? new_node(kJsonTrue, parent) : kJsonNone;
    if (c == 'f') return literal("false") ? new_node(kJsonFalse, parent) : kJsonNone;
    if (c == 'n') return literal("null") ? new_node(kJsonNull, parent) : kJsonNone;
    fail(RLM_ERR_INVALID_ARGUMENT, "expected a value");
    return kJsonNone;
  }

  Status document() {
    if (value(kJsonNone, 0) == kJsonNone) return status;
    skip_ws();
    if (!at_end()) {
      fail(RLM_ERR_INVALID_ARGUMENT, "unexpected characters after the JSON value");
      return status;
    }
    return RLM_OK;
  }
};

}  // namespace

Status json_parse(const char* text, size_t len, Arena& a, JsonDoc* doc, ErrorSink* err) {
  memset(doc, 0, sizeof *doc);
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "JSON text is NULL");
  RLM_CHECK(len <= kJsonMaxText, RLM_ERR_INVALID_ARGUMENT, err,
            "JSON text of %zu bytes is too long (max %zu)", len, kJsonMaxText);
  Parser count{text, len};
  count.err = err;
  RLM_RETURN_IF_ERROR(count.document());

  doc->text = text;
  doc->text_len = len;
  doc->count = count.n_nodes;
  doc->strings_len = count.n_str;
  JsonNode* nodes = a.alloc<JsonNode>(count.n_nodes, alignof(JsonNode));
  char* strings = a.alloc<char>(count.n_str, 1);
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && nodes != nullptr, RLM_ERR_BUFFER_TOO_SMALL, err,
            "JSON scratch memory too small (%zu bytes needed so far)", a.used());

  Parser fill{text, len};
  fill.fill = true;
  fill.nodes = nodes;
  fill.strings = strings;
  fill.err = err;
  const Status s = fill.document();
  RLM_CHECK(s == RLM_OK && fill.n_nodes == count.n_nodes && fill.n_str == count.n_str,
            RLM_ERR_INTERNAL, err, "JSON fill pass disagrees with the counting pass");
  doc->nodes = nodes;
  doc->strings = strings;
  return RLM_OK;
}

uint32_t json_find(const JsonDoc& d, uint32_t obj, const char* key, size_t key_len) {
  if (obj >= d.count || d.nodes[obj].type != kJsonObject) return kJsonNone;
  for (uint32_t c = d.nodes[obj].first; c != kJsonNone; c = d.nodes[c].next) {
    const JsonNode& n = d.nodes[c];
    if (n.key_len == key_len && memcmp(d.strings + n.key_off, key, key_len) == 0) return c;
  }
  return kJsonNone;
}

uint32_t json_find(const JsonDoc& d, uint32_t obj, const char* key) {
  return json_find(d, obj, key, strlen(key));
}

bool json_str_eq(const JsonDoc& d, uint32_t n, const char* s, size_t len) {
  if (n >= d.count || d.nodes[n].type != kJsonString) return false;
  return d.nodes[n].len == len && memcmp(d.strings + d.nodes[n].off, s, len) == 0;
}

bool json_str_eq(const JsonDoc& d, uint32_t n, const char* s) {
  return json_str_eq(d, n, s, strlen(s));
}

}  // namespace ringlm::internal
