// The allocation-free JSON parser (runtime/grammar/json.h) and the JSON Schema → GBNF compiler
// (runtime/grammar/json_schema.h): parse results and errors with line:column, schemas → GBNF
// text, every unsupported keyword as a named error with its path, the integer-range generator
// checked value by value against std::regex, zero heap calls, size query == real use.
#include "grammar/json.h"
#include "grammar/json_schema.h"

#include <dirent.h>
#include <string.h>

#include <algorithm>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "heap_counter.h"
#include "testing.h"

namespace {

using ringlm::internal::Arena;
using ringlm::internal::ErrorSink;
using ringlm::internal::JsonDoc;
using ringlm::internal::JsonNode;
using ringlm::internal::kErrGrammar;
using ringlm::internal::kJsonNone;
namespace ri = ringlm::internal;

// ---- JSON parser ---------------------------------------------------------------------------

struct Parsed {
  rlm_status status = RLM_OK;
  std::string error;
  ringlm_test::AlignedBuffer mem;
  JsonDoc doc{};
  size_t measured = 0;
  size_t used = 0;
};

void parse(const std::string& text, Parsed* p) {
  // The text sits in a larger buffer followed by garbage: the parser must stop at len.
  std::string buf = text + "]]]\"garbage";
  Arena m(nullptr, 0);
  JsonDoc md;
  const rlm_status ms = ri::json_parse(buf.data(), text.size(), m, &md, nullptr);
  p->measured = m.used();
  p->mem.resize(std::max<size_t>(m.used(), 64));
  Arena a(p->mem.data(), p->mem.size());
  char eb[256] = "";
  ErrorSink err{eb, sizeof eb};
  p->status = ri::json_parse(buf.data(), text.size(), a, &p->doc, &err);
  p->used = a.used();
  p->error = eb;
  EXPECT_EQ(ms, p->status) << text;
  // The document must not point into the temporary buffer afterwards: tests only read nodes
  // and decoded strings (in p->mem); numbers' text spans are checked through offsets.
  p->doc.text = nullptr;
}

std::string str_of(const JsonDoc& d, uint32_t n) {
  return std::string(ri::json_str(d, d.nodes[n]), d.nodes[n].len);
}

TEST(Json, ParsesEveryKindInDocumentOrder) {
  Parsed p;
  parse(R"( {"a": [1, -2.50, 3e2, true, false, null], "b": {"c": "x\ty"}, "": 9223372036854775807,
            "m": -9223372036854775808, "big": 9223372036854775808, "z": 1.0} )", &p);
  ASSERT_EQ(p.status, RLM_OK) << p.error;
  EXPECT_EQ(p.used, p.measured);
  const JsonDoc& d = p.doc;
  ASSERT_EQ(d.count, 14u);
  EXPECT_EQ(d.nodes[0].type, ri::kJsonObject);
  EXPECT_EQ(d.nodes[0].count, 6u);
  const uint32_t a = ri::json_find(d, 0, "a");
  ASSERT_NE(a, kJsonNone);
  EXPECT_EQ(d.nodes[a].type, ri::kJsonArray);
  EXPECT_EQ(d.nodes[a].count, 6u);
  uint32_t e = d.nodes[a].first;
  EXPECT_TRUE(d.nodes[e].is_int);
  EXPECT_EQ(d.nodes[e].ival, 1);
  e = d.nodes[e].next;
  EXPECT_FALSE(d.nodes[e].is_int);  // -2.50
  EXPECT_EQ(d.nodes[e].len, 5u);
  e = d.nodes[e].next;
  EXPECT_FALSE(d.nodes[e].is_int);  // 3e2: exponents are never integers here
  e = d.nodes[e].next;
  EXPECT_EQ(d.nodes[e].type, ri::kJsonTrue);
  e = d.nodes[e].next;
  EXPECT_EQ(d.nodes[e].type, ri::kJsonFalse);
  e = d.nodes[e].next;
  EXPECT_EQ(d.nodes[e].type, ri::kJsonNull);
  EXPECT_EQ(d.nodes[e].next, kJsonNone);
  const uint32_t c = ri::json_find(d, ri::json_find(d, 0, "b"), "c");
  EXPECT_EQ(str_of(d, c), "x\ty");
  EXPECT_EQ(d.nodes[c].parent, ri::json_find(d, 0, "b"));
  const uint32_t empty_key = ri::json_find(d, 0, "");
  ASSERT_NE(empty_key, kJsonNone);
  EXPECT_TRUE(d.nodes[empty_key].is_int);
  EXPECT_EQ(d.nodes[empty_key].ival, INT64_MAX);
  EXPECT_EQ(d.nodes[ri::json_find(d, 0, "m")].ival, INT64_MIN);
  EXPECT_FALSE(d.nodes[ri::json_find(d, 0, "big")].is_int);
  EXPECT_TRUE(d.nodes[ri::json_find(d, 0, "z")].is_int);
  EXPECT_EQ(d.nodes[ri::json_find(d, 0, "z")].ival, 1);
}

TEST(Json, EscapesAndSurrogatePairsDecodeToUtf8) {
  Parsed p;
  parse(R"(["\u00e9\u20ac\ud83d\ude00", "\"\\\/\b\f\n\r\t", "caf\u00e9 \u0000 end", "ü€😀"])", &p);
  ASSERT_EQ(p.status, RLM_OK) << p.error;
  const JsonDoc& d = p.doc;
  uint32_t s = d.nodes[0].first;
  EXPECT_EQ(str_of(d, s), "\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80");
  s = d.nodes[s].next;
  EXPECT_EQ(str_of(d, s), "\"\\/\b\f\n\r\t");
  s = d.nodes[s].next;
  EXPECT_EQ(str_of(d, s), std::string("caf\xC3\xA9 \0 end", 11));
  s = d.nodes[s].next;
  EXPECT_EQ(str_of(d, s), "ü€😀");
}

TEST(Json, ErrorsNameLineAndColumn) {
  struct Case {
    const char* text;
    rlm_status status;
    const char* message;
  } cases[] = {
      {"{\"a\": 1,\n  \"b\" 2}", RLM_ERR_INVALID_ARGUMENT, "line 2, column 7: expected ':'"},
      {"[1, 2", RLM_ERR_INVALID_ARGUMENT, "line 1, column 6: expected ',' or ']'"},
      {"", RLM_ERR_INVALID_ARGUMENT, "line 1, column 1: unexpected end of input"},
      {"  \n\n tru", RLM_ERR_INVALID_ARGUMENT, "line 3, column 2: invalid literal"},
      {"{\"a\":1} x", RLM_ERR_INVALID_ARGUMENT, "unexpected characters after"},
      {"\"abc", RLM_ERR_INVALID_ARGUMENT, "unterminated string"},
      {"\"a\nb\"", RLM_ERR_INVALID_ARGUMENT, "control character"},
      {"\"\\q\"", RLM_ERR_INVALID_ARGUMENT, "line 1, column 3: invalid escape"},
      {"\"\\ud800\"", RLM_ERR_INVALID_ARGUMENT, "high surrogate not followed"},
      {"\"\\ud800\\u0041\"", RLM_ERR_INVALID_ARGUMENT, "not followed by a low surrogate"},
      {"\"\\udc00\"", RLM_ERR_INVALID_ARGUMENT, "lone low surrogate"},
      {"\"\\u12\"", RLM_ERR_INVALID_ARGUMENT, "truncated \\u escape"},
      {"\"\\u12x4\"", RLM_ERR_INVALID_ARGUMENT, "line 1, column 6: invalid hex digit"},
      {"\"\xff\"", RLM_ERR_INVALID_UTF8, "invalid UTF-8"},
      {"\"\xed\xa0\x80\"", RLM_ERR_INVALID_UTF8, "invalid UTF-8"},
      {"\"\xe2\x82\"", RLM_ERR_INVALID_UTF8, "UTF-8"},
      {"01", RLM_ERR_INVALID_ARGUMENT, "unexpected characters"},
      {"-", RLM_ERR_INVALID_ARGUMENT, "expected a digit"},
      {"1.", RLM_ERR_INVALID_ARGUMENT, "after '.'"},
      {"1e+", RLM_ERR_INVALID_ARGUMENT, "exponent"},
      {"{1: 2}", RLM_ERR_INVALID_ARGUMENT, "expected a string key"},
      {"[1,]", RLM_ERR_INVALID_ARGUMENT, "expected a value"},
      {"{\"a\":1,}", RLM_ERR_INVALID_ARGUMENT, "expected a string key"},
      {"'a'", RLM_ERR_INVALID_ARGUMENT, "expected a value"},
  };
  for (const Case& c : cases) {
    Parsed p;
    parse(c.text, &p);
    EXPECT_EQ(p.status, c.status) << c.text;
    EXPECT_NE(p.error.find(c.message), std::string::npos) << c.text << " -> " << p.error;
  }
}

TEST(Json, NestingLimit) {
  Parsed ok;
  parse(std::string(64, '[') + std::string(64, ']'), &ok);
  EXPECT_EQ(ok.status, RLM_OK) << ok.error;
  Parsed deep;
  parse(std::string(65, '[') + std::string(65, ']'), &deep);
  EXPECT_EQ(deep.status, RLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(deep.error.find("nesting deeper than 64"), std::string::npos) << deep.error;
  // A hostile depth does not recurse past the limit.
  Parsed hostile;
  parse(std::string(100000, '['), &hostile);
  EXPECT_EQ(hostile.status, RLM_ERR_INVALID_ARGUMENT);
}

TEST(Json, StopsAtLenWithoutTerminator) {
  // "[1,2]" cut at 4 bytes: the ']' after len must not be read.
  const char text[] = {'[', '1', ',', '2', ']'};
  Arena m(nullptr, 0);
  JsonDoc d;
  char eb[128];
  ErrorSink err{eb, sizeof eb};
  EXPECT_EQ(ri::json_parse(text, 4, m, &d, &err), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ri::json_parse(text, 5, m, &d, &err), RLM_OK);
  // A number at the very end of the input.
  const char num[] = {'1', '2', '3'};
  Arena m2(nullptr, 0);
  EXPECT_EQ(ri::json_parse(num, 2, m2, &d, &err), RLM_OK);
  EXPECT_EQ(ri::json_parse(nullptr, 0, m2, &d, &err), RLM_ERR_INVALID_ARGUMENT);
}

TEST(Json, TooSmallArenaIsNamed) {
  const std::string text = R"({"a": [1, 2, 3], "b": "xyz"})";
  Arena m(nullptr, 0);
  JsonDoc d;
  ASSERT_EQ(ri::json_parse(text.data(), text.size(), m, &d, nullptr), RLM_OK);
  ringlm_test::AlignedBuffer mem(m.used());
  Arena a(mem.data(), m.used() - 1);
  char eb[128] = "";
  ErrorSink err{eb, sizeof eb};
  EXPECT_EQ(ri::json_parse(text.data(), text.size(), a, &d, &err), RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(std::string(eb).find("too small"), std::string::npos);
}

// ---- schema compiler -----------------------------------------------------------------------

struct Compiled {
  rlm_status status = RLM_OK;
  std::string gbnf;
  std::string error;
};

Compiled compile(const std::string& schema) {
  Compiled c;
  const size_t need = ri::json_schema_scratch_bytes(schema.data(), schema.size());
  ringlm_test::AlignedBuffer mem(need);
  // Size query (out NULL, cap 0), then the real run into exactly that many bytes + NUL.
  char eb[512] = "";
  ErrorSink err{eb, sizeof eb};
  size_t len = 0;
  Arena a0(mem.data(), need);
  const rlm_status q = ri::json_schema_to_gbnf(schema.data(), schema.size(), a0, nullptr, 0, &len, &err);
  std::vector<char> out(len + 1, '\x7f');
  Arena a(mem.data(), need);
  size_t len2 = 0;
  c.status = ri::json_schema_to_gbnf(schema.data(), schema.size(), a, out.data(), out.size(), &len2, &err);
  c.error = eb;
  if (c.status == RLM_OK) {
    EXPECT_EQ(q, RLM_ERR_BUFFER_TOO_SMALL) << schema;
    EXPECT_EQ(len2, len) << schema;
    EXPECT_EQ(a.used(), need) << "measure-mode size differs from real use: " << schema;
    EXPECT_EQ(out[len], '\0');
    c.gbnf.assign(out.data(), len);
    EXPECT_EQ(c.gbnf.find('\0'), std::string::npos);
  } else {
    EXPECT_EQ(q, c.status) << schema;
    EXPECT_FALSE(c.error.empty()) << schema;
  }
  return c;
}

std::string ok(const std::string& schema) {
  const Compiled c = compile(schema);
  EXPECT_EQ(c.status, RLM_OK) << schema << "\n" << c.error;
  return c.gbnf;
}

void expect_error(const std::string& schema, rlm_status status, const std::string& message) {
  const Compiled c = compile(schema);
  EXPECT_EQ(c.status, status) << schema;
  EXPECT_NE(c.error.find(message), std::string::npos) << schema << " -> " << c.error;
}

const char kString[] = "string ::= \"\\\"\" char* \"\\\"\"\n";
const char kChar[] =
    "char ::= [^\"\\\\\\x7F\\x00-\\x1F] | \"\\\\\" ([\"\\\\/bfnrt] | \"u\" [0-9a-fA-F]{4})\n";
const char kWs[] = "ws ::= (\" \" | \"\\n\" [ \\t]{0,20})?\n";
const char kInteger[] = "integer ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15})\n";

TEST(JsonSchema, AnyValueForEmptySchemaAndTrue) {
  EXPECT_EQ(ok("{}"), ri::json_any_gbnf());
  EXPECT_EQ(ok("true"), ri::json_any_gbnf());
  EXPECT_EQ(ok(R"({"description": "anything", "$schema": "x"})"), ri::json_any_gbnf());
  const std::string any = ri::json_any_gbnf();
  EXPECT_EQ(any.rfind("root ::= value\n", 0), 0u);
  EXPECT_NE(any.find(kChar), std::string::npos);
  EXPECT_NE(any.find(kWs), std::string::npos);
}

TEST(JsonSchema, Primitives) {
  EXPECT_EQ(ok(R"({"type": "string"})"), std::string("root ::= string\n") + kString + kChar);
  EXPECT_EQ(ok(R"({"type": "integer"})"), std::string("root ::= integer\n") + kInteger);
  EXPECT_EQ(ok(R"({"type": "boolean"})"), "root ::= boolean\nboolean ::= \"true\" | \"false\"\n");
  EXPECT_EQ(ok(R"({"type": "null"})"), "root ::= null\nnull ::= \"null\"\n");
  EXPECT_NE(ok(R"({"type": "number"})").find("number ::= \"-\"? (\"0\" | [1-9] [0-9]{0,15}) (\".\" [0-9]{1,16})?"),
            std::string::npos);
  EXPECT_EQ(ok(R"({"type": ["string", "null"]})"),
            std::string("root ::= (string) | (null)\n") + kString + kChar + "null ::= \"null\"\n");
}

TEST(JsonSchema, ObjectRequiredAndOptionalInSchemaOrder) {
  const std::string g = ok(R"({"type": "object", "properties": {
      "name": {"type": "string"}, "age": {"type": "integer", "minimum": 0, "maximum": 150},
      "email": {"type": "string"}}, "required": ["name", "age"]})");
  EXPECT_EQ(g,
            "root ::= \"{\" ws root-name-kv \",\" ws root-age-kv (\",\" ws root-email-kv)? \"}\"\n"
            "root-name-kv ::= \"\\\"name\\\"\" ws \":\" ws string ws\n"
            "root-age-kv ::= \"\\\"age\\\"\" ws \":\" ws root-age ws\n"
            "root-email-kv ::= \"\\\"email\\\"\" ws \":\" ws string ws\n"
            "root-age ::= ([0-9] | [1-9] [0-9] | \"1\" ([0-4] [0-9] | \"5\" \"0\"))\n" +
                std::string(kString) + kChar + kWs);
}

TEST(JsonSchema, OptionalPrefixStaysLinear) {
  // a, b optional before the first required c, d optional after: H = a T1 | b T2 | c T3.
  const std::string g = ok(R"({"properties": {"a": {}, "b": {}, "c": {}, "d": {}},
                               "required": ["c"]})");
  EXPECT_NE(g.find("root ::= \"{\" ws (root-a-kv root-b-rest | root-b-kv root-c-rest | "
                   "root-c-kv (\",\" ws root-d-kv)?) \"}\"\n"),
            std::string::npos)
      << g;
  EXPECT_NE(g.find("root-b-rest ::= (\",\" ws root-b-kv)? root-c-rest\n"), std::string::npos) << g;
  EXPECT_NE(g.find("root-c-rest ::= \",\" ws root-c-kv (\",\" ws root-d-kv)?\n"), std::string::npos) << g;
  // All optional: the whole list is optional, no property may be repeated.
  const std::string all = ok(R"({"properties": {"x": {"type": "null"}, "y": {"type": "null"}}})");
  EXPECT_NE(all.find("root ::= \"{\" ws (root-x-kv root-y-rest | root-y-kv)? \"}\"\n"), std::string::npos) << all;
  EXPECT_NE(all.find("root-y-rest ::= (\",\" ws root-y-kv)?\n"), std::string::npos) << all;
  // 2000 optional properties: output grows linearly (a few rules per property).
  std::string big = R"({"type": "object", "properties": {)";
  for (int i = 0; i < 2000; ++i) big += (i ? ", \"p" : "\"p") + std::to_string(i) + "\": {\"type\": \"integer\"}";
  big += "}}";
  const std::string gb = ok(big);
  EXPECT_LT(gb.size(), 2000u * 200);
  EXPECT_EQ(std::count(gb.begin(), gb.end(), '\n'), 2000 * 2 - 1 + 1 + 2);  // kv + rest, root, integer, ws
}

// Hostile sizes stay linear: 5000 properties whose names all sanitize to the same rule name,
// every one required (name uniqueness and `required` lookups were quadratic once).
TEST(JsonSchema, ManyCollidingRequiredPropertiesStayFast) {
  std::string big = R"({"type": "object", "properties": {)";
  std::string req;
  for (int i = 0; i < 5000; ++i) {
    const std::string name = std::string(static_cast<size_t>(i % 7 + 1), '!') + std::to_string(i % 3 ? 0 : 1) +
                             std::string(static_cast<size_t>(i / 7), ' ');
    big += (i ? ", \"" : "\"") + name + "\": {\"type\": \"null\"}";
    req += (i ? ", \"" : "\"") + name + "\"";
  }
  big += "}, \"required\": [" + req + "]}";
  const std::string g = ok(big);
  EXPECT_NE(g.find("root-1-kv-2 ::= "), std::string::npos);
  EXPECT_EQ(std::count(g.begin(), g.end(), '?'), 1) << "every property required: only ws's ? left";
}

TEST(JsonSchema, AdditionalProperties) {
  // Absent with properties: only the declared keys.
  EXPECT_EQ(ok(R"({"properties": {"a": {"type": "integer"}}, "required": ["a"]})"),
            std::string("root ::= \"{\" ws root-a-kv \"}\"\n"
                        "root-a-kv ::= \"\\\"a\\\"\" ws \":\" ws integer ws\n") + kInteger + kWs);
  // A schema: further pairs after the declared ones.
  const std::string g = ok(R"({"properties": {"a": {"type": "integer"}}, "required": ["a"],
                               "additionalProperties": {"type": "string"}})");
  EXPECT_NE(g.find("root ::= \"{\" ws root-a-kv (\",\" ws root-additional-kv)* \"}\"\n"), std::string::npos) << g;
  EXPECT_NE(g.find("root-additional-kv ::= \"\\\"\" ([^a\\x22"), std::string::npos) << g;
  EXPECT_NE(g.find("\"\\\"\" ws \":\" ws string ws\n"), std::string::npos) << g;
  // Without declared properties the key is any string.
  EXPECT_NE(ok(R"({"type": "object", "additionalProperties": {"type": "integer"}})")
                .find("root-additional-kv ::= string ws \":\" ws integer ws\n"),
            std::string::npos);
  // No properties: {"type": "object"} is any object, additionalProperties false the empty one.
  EXPECT_NE(ok(R"({"type": "object"})").find("root ::= object\n"), std::string::npos);
  EXPECT_EQ(ok(R"({"type": "object", "additionalProperties": false})"),
            std::string("root ::= \"{\" ws \"}\"\n") + kWs);
  EXPECT_NE(ok(R"({"type": "object", "additionalProperties": true})")
                .find("root ::= \"{\" ws (root-additional-kv (\",\" ws root-additional-kv)*)? \"}\"\n"),
            std::string::npos);
}

// The key of an additional property never equals a declared name (so the object never holds a
// duplicate key): the key expression, made an ECMAScript regex, checked over many strings.
TEST(JsonSchema, AdditionalKeysExcludeDeclaredNames) {
  const std::vector<std::string> names = {"a", "ab", "ac", "bcd", "b", "id", "idx", "q\"x"};
  std::string schema = R"({"properties": {)";
  for (size_t i = 0; i < names.size(); ++i) {
    std::string esc;
    for (char c : names[i]) esc += c == '"' ? std::string("\\\"") : std::string(1, c);
    schema += (i ? ", \"" : "\"") + esc + "\": {}";
  }
  schema += R"(}, "additionalProperties": {"type": "integer"}})";
  const std::string g = ok(schema);
  const std::string head = "root-additional-kv ::= \"\\\"\" ";
  const size_t at = g.find(head);
  ASSERT_NE(at, std::string::npos) << g;
  const size_t end = g.find(" \"\\\"\" ws \":\"", at);
  ASSERT_NE(end, std::string::npos) << g;
  std::string re;
  bool in_class = false;
  for (size_t i = at + head.size(); i < end; ++i) {
    const char c = g[i];
    if (c == '[') in_class = true;
    if (c == ']') in_class = false;
    if (!in_class && (c == '"' || c == ' ')) continue;
    re += c;
  }
  const std::regex key(re);
  const char alphabet[] = {'a', 'b', 'c', 'd', 'i', 'x', 'q', 'z'};
  int checked = 0;
  for (int len = 0; len <= 4; ++len) {
    int total = 1;
    for (int k = 0; k < len; ++k) total *= 8;
    for (int code = 0; code < total; ++code) {
      std::string s;
      for (int k = 0, c = code; k < len; ++k, c /= 8) s += alphabet[c % 8];
      const bool declared = std::find(names.begin(), names.end(), s) != names.end();
      ASSERT_EQ(std::regex_match(s, key), !declared) << "key '" << s << "'\n" << re;
      ++checked;
    }
  }
  EXPECT_GT(checked, 4000);
  // Escapes, quotes and controls are not allowed in additional keys.
  EXPECT_FALSE(std::regex_match(std::string("z\\n"), key));
  EXPECT_FALSE(std::regex_match(std::string("z\""), key));
  // Names longer than 32 characters next to additionalProperties are refused, by name.
  expect_error(R"({"properties": {")" + std::string(33, 'n') + R"(": {}}, "additionalProperties": true})",
               kErrGrammar, "longer than 32 characters is not supported at /");
}

TEST(JsonSchema, Arrays) {
  EXPECT_EQ(ok(R"({"type": "array", "items": {"type": "integer"}})"),
            std::string("root ::= \"[\" ws (integer ws (\",\" ws integer ws)*)? \"]\"\n") + kInteger + kWs);
  EXPECT_NE(ok(R"({"type": "array", "items": {"type": "integer"}, "minItems": 2, "maxItems": 4})")
                .find("root ::= \"[\" ws integer ws (\",\" ws integer ws){1,3} \"]\"\n"),
            std::string::npos);
  EXPECT_NE(ok(R"({"items": {"type": "integer"}, "minItems": 1})")
                .find("root ::= \"[\" ws integer ws (\",\" ws integer ws)* \"]\"\n"),
            std::string::npos);
  EXPECT_NE(ok(R"({"items": {"type": "integer"}, "maxItems": 1})").find("root ::= \"[\" ws (integer ws)? \"]\"\n"),
            std::string::npos);
  EXPECT_NE(ok(R"({"type": "array", "maxItems": 0})").find("root ::= \"[\" ws \"]\"\n"), std::string::npos);
  // Arrays of objects: the item gets its own rule.
  const std::string g = ok(R"({"type": "array", "items": {"type": "object",
      "properties": {"id": {"type": "integer"}}, "required": ["id"]}})");
  EXPECT_NE(g.find("root ::= \"[\" ws (root-item ws (\",\" ws root-item ws)*)? \"]\"\n"), std::string::npos) << g;
  EXPECT_NE(g.find("root-item ::= \"{\" ws root-item-id-kv \"}\"\n"), std::string::npos) << g;
  // Tuples.
  const std::string t = ok(R"({"prefixItems": [{"type": "string"}, {"type": "integer"}]})");
  EXPECT_NE(t.find("root ::= \"[\" ws string ws \",\" ws integer ws \"]\"\n"), std::string::npos) << t;
  const std::string t2 = ok(R"({"prefixItems": [{"type": "string"}], "items": {"type": "null"}})");
  EXPECT_NE(t2.find("root ::= \"[\" ws string ws (\",\" ws null ws)* \"]\"\n"), std::string::npos) << t2;
}

TEST(JsonSchema, EnumAndConstAreCanonicalLiterals) {
  EXPECT_EQ(ok(R"({"enum": ["red", "green", 3, null, true]})"),
            "root ::= \"\\\"red\\\"\" | \"\\\"green\\\"\" | \"3\" | \"null\" | \"true\"\n");
  // Escapes re-serialized canonically; non-ASCII raw; objects compact in key order.
  EXPECT_EQ(ok(R"({"const": {"k": ["a\"b\\c\n\u0001\u00e9", 1.5, {}]}})"),
            "root ::= \"{\\\"k\\\":[\\\"a\\\\\\\"b\\\\\\\\c\\\\n\\\\u0001\xC3\xA9\\\",1.5,{}]}\"\n");
}

TEST(JsonSchema, AnyOfOneOfAllOf) {
  const std::string g = ok(R"({"anyOf": [{"type": "string", "maxLength": 3}, {"type": "integer"}]})");
  EXPECT_NE(g.find("root ::= root-0 | integer\n"), std::string::npos) << g;
  EXPECT_NE(g.find("root-0 ::= \"\\\"\" char{0,3} \"\\\"\"\n"), std::string::npos) << g;
  EXPECT_NE(ok(R"({"oneOf": [{"type": "boolean"}, {"type": "null"}]})").find("root ::= boolean | null\n"),
            std::string::npos);
  EXPECT_NE(ok(R"({"allOf": [{"type": "boolean"}]})").find("root ::= boolean\n"), std::string::npos);
}

TEST(JsonSchema, RefsAndRecursion) {
  const std::string g = ok(R"({"$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer"}, "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
      "required": ["value"]}}, "$ref": "#/$defs/node"})");
  EXPECT_NE(g.find("root ::= node\n"), std::string::npos) << g;
  EXPECT_NE(g.find("node ::= \"{\" ws node-value-kv (\",\" ws node-children-kv)? \"}\"\n"), std::string::npos) << g;
  EXPECT_NE(g.find("node-children ::= \"[\" ws (node ws (\",\" ws node ws)*)? \"]\"\n"), std::string::npos) << g;
  // "#" is the root itself; "definitions" and ~1 escapes work too.
  const std::string r = ok(R"({"type": "object", "properties": {"next": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}})");
  EXPECT_NE(r.find("root-next ::= root | null\n"), std::string::npos) << r;
  const std::string e = ok(R"({"definitions": {"a/b": {"type": "integer", "minimum": 1}}, "$ref": "#/definitions/a~1b"})");
  EXPECT_NE(e.find("root ::= a-b\n"), std::string::npos) << e;
  EXPECT_NE(e.find("a-b ::= ("), std::string::npos) << e;
  // A $defs entry named like a primitive gets a unique name.
  const std::string p = ok(R"({"$defs": {"string": {"type": "string", "minLength": 1}}, "$ref": "#/$defs/string"})");
  EXPECT_NE(p.find("root ::= string-2\n"), std::string::npos) << p;
}

TEST(JsonSchema, StringsLengthsFormatsPatterns) {
  EXPECT_NE(ok(R"({"type": "string", "minLength": 1, "maxLength": 8})").find("root ::= \"\\\"\" char{1,8} \"\\\"\"\n"),
            std::string::npos);
  EXPECT_NE(ok(R"({"type": "string", "minLength": 2})").find("root ::= \"\\\"\" char{2,} \"\\\"\"\n"), std::string::npos);
  for (const char* f : {"date", "time", "date-time", "uuid"}) {
    const std::string g = ok(std::string(R"({"type": "string", "format": ")") + f + "\"}");
    EXPECT_NE(g.find(std::string("root ::= \"\\\"\" ") + f + " \"\\\"\"\n"), std::string::npos) << g;
    EXPECT_NE(g.find(std::string("\n") + f + " ::= "), std::string::npos) << g;
  }
  // Unknown formats are annotations.
  EXPECT_NE(ok(R"({"type": "string", "format": "email"})").find("root ::= string\n"), std::string::npos);
  EXPECT_EQ(ok(R"({"type": "string", "pattern": "^[A-Z]{2}-\\d{3,5}(x|yz)?\\.\"$"})"),
            "root ::= \"\\\"\" ([A-Z]{2} \"-\" [0-9]{3,5} (\"x\" | \"yz\")? \".\\\\\\\"\") \"\\\"\"\n");
  EXPECT_EQ(ok(R"({"pattern": "^ab+c*.[^a-c]\\s$"})"),
            "root ::= \"\\\"\" (\"a\" \"b\"+ \"c\"* char [^a-c\\x22\\x5C\\x7F\\x00-\\x1F] "
            "([ ] | \"\\\\t\" | \"\\\\n\" | \"\\\\u000b\" | \"\\\\f\" | \"\\\\r\")) \"\\\"\"\n" +
                std::string(kChar));
  EXPECT_EQ(ok(R"({"pattern": "^(?:[a-z0-9_\\-]+)@é{1,}$"})"),
            "root ::= \"\\\"\" (([a-z0-9_\\x2D]+) \"@\" \"\xC3\xA9\"{1,}) \"\\\"\"\n");
}

TEST(JsonSchema, IntegerBounds) {
  EXPECT_EQ(ok(R"({"type": "integer", "minimum": -5, "exclusiveMaximum": 12})"),
            "root ::= (\"-\" ([1-5]) | [0-9] | \"1\" [0-1])\n");
  EXPECT_EQ(ok(R"({"type": "integer", "exclusiveMinimum": 0, "maximum": 9})"), "root ::= ([1-9])\n");
  // Draft 4 boolean form.
  EXPECT_EQ(ok(R"({"type": "integer", "minimum": 0, "exclusiveMinimum": true, "maximum": 9})"), "root ::= ([1-9])\n");
  EXPECT_EQ(ok(R"({"type": "integer", "minimum": 5.0, "maximum": 5})"), "root ::= (\"5\")\n");
  // Only a minimum: up to INT64_MAX.
  EXPECT_NE(ok(R"({"type": "integer", "minimum": 10})").find("root ::= ([1-9] [0-9] | [1-9] [0-9]{2,17} | "), std::string::npos);
}

TEST(JsonSchema, DeterministicAndRuleNamesSanitized) {
  const std::string s = R"({"properties": {"first name": {"type": "string", "minLength": 1},
      "first-name": {"type": "string", "minLength": 2}, "über": {"type": "string", "minLength": 3}}})";
  const std::string a = ok(s), b = ok(s);
  EXPECT_EQ(a, b);
  EXPECT_NE(a.find("root-first-name ::= "), std::string::npos) << a;
  EXPECT_NE(a.find("root-first-name-2 ::= "), std::string::npos) << a;
  EXPECT_NE(a.find("root-ber ::= "), std::string::npos) << a;
  EXPECT_NE(a.find("\"\\\"über\\\"\""), std::string::npos) << a;
}


TEST(JsonSchema, EveryUnsupportedKeywordIsNamedWithItsPath) {
  const char* kws[] = {
      "patternProperties", "propertyNames", "dependentRequired", "dependentSchemas",
      "dependencies", "minProperties", "maxProperties", "unevaluatedProperties",
      "unevaluatedItems", "additionalItems", "contains", "minContains", "maxContains",
      "uniqueItems", "not", "if", "then", "else", "multipleOf", "$dynamicRef", "$dynamicAnchor",
      "$recursiveRef", "$recursiveAnchor", "contentSchema"};
  for (const char* kw : kws) {
    const std::string schema = std::string(R"({"type": "object", "properties": {"a": {")") + kw +
                               R"(": {}}, "b~/": {"items": {")" + kw + R"(": 1}}}})";
    expect_error(schema, kErrGrammar, std::string("unsupported keyword \"") + kw + "\" at /properties/a");
    const std::string nested = std::string(R"({"type": "object", "properties": {"b~/": {"items": {")") +
                               kw + R"(": 1}}}})";
    expect_error(nested, kErrGrammar, std::string("unsupported keyword \"") + kw + "\" at /properties/b~0~1/items");
  }
}

TEST(JsonSchema, OtherErrorsAreNamed) {
  expect_error("{\"type\": \n \"object\",}", RLM_ERR_INVALID_ARGUMENT, "JSON line 2, column 11");
  expect_error(R"({"type": "strin"})", kErrGrammar, "unknown type in \"type\" at /");
  expect_error(R"({"type": ["string", "string"]})", kErrGrammar, "duplicate type");
  expect_error(R"({"$ref": "http://x/y.json"})", kErrGrammar, "only local");
  expect_error(R"({"$ref": "#/$defs/missing"})", kErrGrammar, "does not resolve");
  expect_error(R"({"$ref": "#"})", kErrGrammar, "circular");
  expect_error(R"({"$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})",
               kErrGrammar, "circular");
  expect_error(R"({"properties": {"a": {}}, "required": ["b"]})", kErrGrammar,
               "required property \"b\" is not in \"properties\" at /");
  expect_error(R"({"type": "number", "minimum": 0})", kErrGrammar, "bounds on type number");
  expect_error(R"({"type": "integer", "minimum": 0.5})", kErrGrammar, "\"minimum\" at /");
  expect_error(R"({"type": "integer", "minimum": 3, "maximum": 2})", kErrGrammar, "integer range is empty");
  expect_error(R"({"type": "integer", "exclusiveMaximum": -9223372036854775808})", kErrGrammar, "empty");
  expect_error(R"({"type": "string", "maxLength": 2001})", kErrGrammar, "exceeds the limit 2000");
  expect_error(R"({"pattern": "^a{2001}$"})", kErrGrammar, "above 2000");
  expect_error(R"({"type": "string", "minLength": -1})", kErrGrammar, "non-negative integer");
  expect_error(R"({"type": "string", "minLength": 3, "maxLength": 2})", kErrGrammar, "minLength greater");
  expect_error(R"({"enum": []})", kErrGrammar, "non-empty array: \"enum\"");
  expect_error(R"({"allOf": [{}, {}]})", kErrGrammar, "allOf");
  expect_error(R"({"anyOf": [{}], "minLength": 1})", kErrGrammar, "next to anyOf");
  expect_error(R"({"properties": {"a": false}})", kErrGrammar, "schema false (matches nothing) at /properties/a");
  expect_error("false", kErrGrammar, "(matches nothing) at /");
  expect_error(R"({"items": 3})", kErrGrammar, "at /items");
  expect_error(R"({"pattern": "abc"})", kErrGrammar, "anchored");
  expect_error(R"({"pattern": "^a\\$"})", kErrGrammar, "anchored");
  expect_error(R"({"pattern": "^(a$"})", kErrGrammar, "missing ')'");
  expect_error(R"({"pattern": "^a)$"})", kErrGrammar, "unbalanced");
  expect_error(R"({"pattern": "^(?=a)$"})", kErrGrammar, "lookaround");
  expect_error(R"({"pattern": "^(a)\\1$"})", kErrGrammar, "backreferences");
  expect_error(R"({"pattern": "^\\bx$"})", kErrGrammar, "\\b");
  expect_error(R"({"pattern": "^a**$"})", kErrGrammar, "nothing to repeat");
  expect_error(R"({"pattern": "^a|$"})", kErrGrammar, "empty alternative");
  expect_error(R"({"pattern": "^[z-a]$"})", kErrGrammar, "out of order");
  expect_error(R"({"pattern": "^[abc$"})", kErrGrammar, "unterminated");
  expect_error(R"({"pattern": "^a{3,1}$"})", kErrGrammar, "repetition");
  expect_error(R"({"pattern": "^a^b$"})", kErrGrammar, "anchors");
  expect_error(std::string(R"({"pattern": "^)") + std::string(40, '(') + "a" + std::string(40, ')') + "$\"}",
               kErrGrammar, "deeper than 32");
  expect_error(R"({"type": "string", "format": "date", "minLength": 3})", kErrGrammar, "minLength / maxLength");
}

TEST(JsonSchema, OutputBufferTooSmallReportsTheSize) {
  const std::string s = R"({"type": "array", "items": {"type": "integer"}})";
  const size_t need = ri::json_schema_scratch_bytes(s.data(), s.size());
  ringlm_test::AlignedBuffer mem(need);
  char out[16];
  size_t len = 0;
  char eb[256] = "";
  ErrorSink err{eb, sizeof eb};
  Arena a(mem.data(), need);
  EXPECT_EQ(ri::json_schema_to_gbnf(s.data(), s.size(), a, out, sizeof out, &len, &err), RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(len, ok(s).size());
  // Scratch one byte short.
  Arena small(mem.data(), need - 1);
  EXPECT_EQ(ri::json_schema_to_gbnf(s.data(), s.size(), small, nullptr, 0, &len, &err), RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(std::string(eb).find("scratch"), std::string::npos) << eb;
  // A measure-mode arena is refused rather than silently used.
  Arena measure(nullptr, 0);
  EXPECT_EQ(ri::json_schema_to_gbnf(s.data(), s.size(), measure, nullptr, 0, &len, &err), RLM_ERR_INVALID_ARGUMENT);
}

TEST(JsonSchema, ZeroHeapCallsDuringParseAndCompile) {
  if (!ringlm_test::kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  const std::string s = R"({"$defs": {"n": {"type": "object", "properties": {"v": {"type": "integer",
      "minimum": -40, "maximum": 1234}, "s": {"type": "string", "pattern": "^[a-z]+(-[0-9]{2})?$"},
      "d": {"type": "string", "format": "date-time"}, "e": {"enum": ["x", 1, {"k": null}]},
      "kids": {"type": "array", "items": {"$ref": "#/$defs/n"}, "maxItems": 4}},
      "required": ["v"], "additionalProperties": {"type": "boolean"}}}, "$ref": "#/$defs/n"})";
  static char out[1 << 14];
  alignas(64) static unsigned char mem[1 << 16];
  size_t need = 0, len = 0;
  rlm_status st = RLM_ERR_INTERNAL;
  const ringlm_test::HeapCalls calls = ringlm_test::count_heap([&] {
    need = ri::json_schema_scratch_bytes(s.data(), s.size());
    Arena a(mem, sizeof mem);
    st = ri::json_schema_to_gbnf(s.data(), s.size(), a, out, sizeof out, &len, nullptr);
  });
  ASSERT_LE(need, sizeof mem);
  EXPECT_EQ(st, RLM_OK);
  EXPECT_GT(len, 100u);
  EXPECT_EQ(calls.allocs, 0);
  EXPECT_EQ(calls.frees, 0);
  const ringlm_test::HeapCalls probe = ringlm_test::count_heap([] {
    void* volatile p = malloc(16);
    free(p);
  });
  EXPECT_EQ(probe.allocs, 1);
}

// ---- integer ranges ------------------------------------------------------------------------

// The generator emits literals "123", classes [a-b], [0-9]{n} / {m,n}, groups and |: drop the
// quotes and spaces and it is an ECMAScript regex.
std::regex range_regex(int64_t lo, int64_t hi, std::string* gbnf) {
  const size_t n = ri::json_schema_int_range(lo, hi, nullptr, 0);
  std::vector<char> buf(n + 1);
  EXPECT_EQ(ri::json_schema_int_range(lo, hi, buf.data(), buf.size()), n);
  gbnf->assign(buf.data(), n);
  std::string re;
  for (char c : *gbnf) {
    if (c == '"' || c == ' ') continue;
    re += c;
  }
  return std::regex(re);
}

void check_range(int64_t lo, int64_t hi, int64_t from, int64_t to) {
  std::string g;
  const std::regex re = range_regex(lo, hi, &g);
  for (int64_t v = from;; ++v) {
    const bool want = v >= lo && v <= hi;
    const std::string s = std::to_string(v);
    ASSERT_EQ(std::regex_match(s, re), want) << "[" << lo << ", " << hi << "] value " << v << "\n" << g;
    // Non-canonical forms are never matched.
    if (v >= 0) ASSERT_FALSE(std::regex_match("0" + s, re)) << g;
    if (v == 0) ASSERT_FALSE(std::regex_match("-0", re)) << g;
    if (v == to) break;
  }
}

TEST(IntRange, ExhaustiveOverSmallRanges) {
  const int64_t bounds[] = {-1001, -999, -120, -100, -99, -10, -9, -1, 0, 1, 5, 9, 10, 11, 19, 20,
                            99, 100, 101, 123, 199, 200, 999, 1000, 1009, 2345};
  for (int64_t lo : bounds) {
    for (int64_t hi : bounds) {
      if (lo > hi) continue;
      check_range(lo, hi, -1100, 2500);
    }
  }
}

TEST(IntRange, RandomRangesAndInt64Edges) {
  uint64_t state = 12345;
  auto rnd = [&] {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return state >> 33;
  };
  for (int k = 0; k < 60; ++k) {
    int64_t a = static_cast<int64_t>(rnd() % 200000) - 100000;
    int64_t b = static_cast<int64_t>(rnd() % 200000) - 100000;
    if (a > b) std::swap(a, b);
    check_range(a, b, a - 300, a + 300);
    check_range(a, b, b - 300, b + 300);
  }
  check_range(INT64_MIN, INT64_MAX, -2000, 2000);
  check_range(INT64_MIN, INT64_MAX, INT64_MAX - 500, INT64_MAX);
  check_range(INT64_MIN, INT64_MAX, INT64_MIN, INT64_MIN + 500);
  check_range(INT64_MIN, -5, INT64_MIN, INT64_MIN + 300);
  check_range(INT64_MIN + 7, 3, INT64_MIN, INT64_MIN + 300);
  check_range(10, INT64_MAX, -100, 1000);
  check_range(10, INT64_MAX, INT64_MAX - 300, INT64_MAX);
  check_range(INT64_MAX - 17, INT64_MAX, INT64_MAX - 300, INT64_MAX);
  check_range(999999999999LL, 1000000000123LL, 999999999000LL, 1000000000500LL);
}

// ---- the hand-written schemas of tests/data/json_schemas ----------------------------------

std::string data_dir() {
  std::string f = __FILE__;
  return f.substr(0, f.rfind('/')) + "/data/json_schemas";
}

TEST(JsonSchema, DataSchemasAllCompile) {
  DIR* dir = opendir(data_dir().c_str());
  ASSERT_NE(dir, nullptr) << data_dir();
  std::vector<std::string> names;
  while (dirent* e = readdir(dir)) {
    const std::string n = e->d_name;
    if (n.size() > 5 && n.compare(n.size() - 5, 5, ".json") == 0) names.push_back(n);
  }
  closedir(dir);
  std::sort(names.begin(), names.end());
  EXPECT_GE(names.size(), 8u);
  for (const std::string& n : names) {
    std::string text;
    ASSERT_TRUE(ringlm_test::read_file(data_dir() + "/" + n, &text)) << n;
    const Compiled c = compile(text);
    EXPECT_EQ(c.status, RLM_OK) << n << ": " << c.error;
    EXPECT_EQ(c.gbnf.rfind("root ::= ", 0), 0u) << n;
  }
}

}  // namespace
