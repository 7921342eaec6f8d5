// The ByteLevel pre-tokenizers (see pretokenizer.h and tokenizer.h).
#include "tokenizer/pretokenizer.h"

#include "tokenizer.h"
#include "unicode.h"

namespace ringlm::internal {
namespace tkz {
namespace {

// Character classes as the pre-tokenizers read them; None is "outside the text being split".
enum class Cls : uint8_t { Other, Letter, Number, Space, None };

struct Splitter {
  const uint8_t* s;
  size_t end;         // the text being split is s[0, end)
  bool digits_alone;  // StarCoder: \p{N} characters are boundaries (read as None)

  Cls raw(size_t p, size_t* len) const {
    if (p >= end) {
      *len = 0;
      return Cls::None;
    }
    return static_cast<Cls>(utf8_class(s + p, end - p, len));
  }
  Cls at(size_t p, size_t* len) const {
    const Cls c = raw(p, len);
    return (digits_alone && c == Cls::Number) ? Cls::None : c;
  }
  Cls at(size_t p) const {
    size_t len;
    return at(p, &len);
  }
  bool is_byte(size_t p, uint8_t b) const { return p < end && s[p] == b; }
  bool is_crlf(size_t p) const { return p < end && (s[p] == '\r' || s[p] == '\n'); }
};

inline uint8_t ascii_lower(uint8_t c) { return (c >= 'A' && c <= 'Z') ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d (case-insensitive when `fold`): the match length at p, or 0.
size_t contraction(const Splitter& sp, size_t p, bool fold) {
  if (!sp.is_byte(p, '\'') || p + 1 >= sp.end) return 0;
  const uint8_t a = fold ? ascii_lower(sp.s[p + 1]) : sp.s[p + 1];
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (p + 2 >= sp.end) return 0;
  const uint8_t b = fold ? ascii_lower(sp.s[p + 2]) : sp.s[p + 2];
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// End of the word at p (p < end) for
// 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
size_t gpt2_word(const Splitter& sp, size_t p) {
  if (const size_t n = contraction(sp, p, false)) return p + n;
  size_t l0, len;
  const Cls c0 = sp.at(p, &l0);
  const bool space = sp.s[p] == ' ';
  const Cls c2 = space ? sp.at(p + 1) : c0;
  if (c2 == Cls::Letter || c2 == Cls::Number || c2 == Cls::Other) {  //  ?X+
    size_t q = p + (space ? 1 : 0);
    while (sp.at(q, &len) == c2) q += len;
    return q;
  }
  size_t q = p, last = p, n = 0;
  while (sp.at(q, &len) == Cls::Space) {
    last = q;
    q += len;
    ++n;
  }
  if (n > 1 && sp.at(q) != Cls::None) return last;  // \s+(?!\S): leave the last one
  if (n > 0) return q;                               // \s+
  return p + (l0 ? l0 : 1);
}

// End of the word at p (p < end) for (max_digits 3: Llama3, 1: Qwen2)
// (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,max}| ?[^\s\p{L}\p{N}]+[\r\n]*|
// \s*[\r\n]+|\s+(?!\S)|\s+
size_t llama3_word(const Splitter& sp, size_t p, uint32_t max_digits) {
  if (const size_t n = contraction(sp, p, true)) return p + n;
  size_t l0, len;
  const Cls c0 = sp.at(p, &l0);
  if (l0 == 0) return p + 1;
  if (!sp.is_crlf(p) && c0 != Cls::Number) {  // [^\r\n\p{L}\p{N}]?\p{L}+
    if (c0 == Cls::Letter || sp.at(p + l0) == Cls::Letter) {
      size_t q = p + l0;
      while (sp.at(q, &len) == Cls::Letter) q += len;
      return q;
    }
  }
  if (c0 == Cls::Number) {  // \p{N}{1,max}
    size_t q = p;
    for (uint32_t k = 0; k < max_digits && sp.at(q, &len) == Cls::Number; ++k) q += len;
    return q;
  }
  const bool space = sp.s[p] == ' ';
  const Cls c2 = space ? sp.at(p + 1) : c0;
  if (c2 == Cls::Other) {  //  ?[^\s\p{L}\p{N}]+[\r\n]*
    size_t q = p + (space ? 1 : 0);
    while (sp.at(q, &len) == Cls::Other) q += len;
    while (sp.is_crlf(q)) ++q;
    return q;
  }
  size_t q = p, last = p, n = 0, crlf_end = 0;
  while (sp.at(q, &len) == Cls::Space) {
    if (sp.is_crlf(q)) crlf_end = q + 1;
    last = q;
    q += len;
    ++n;
  }
  if (crlf_end) return crlf_end;                     // \s*[\r\n]+
  if (n > 1 && sp.at(q) != Cls::None) return last;  // \s+(?!\S)
  if (n > 0) return q;                               // \s+
  return p + l0;
}

}  // namespace

// End of the pre-tokenizer word starting at p in s[0, end), in (p, end].
size_t next_word(fb::PreTokenizer pre, const uint8_t* s, size_t p, size_t end) {
  Splitter sp{s, end, false};
  size_t q;
  switch (pre) {
    case fb::PreTokenizer::Gpt2:
      q = gpt2_word(sp, p);
      break;
    case fb::PreTokenizer::Llama3:
    case fb::PreTokenizer::Llama3Merges:
      q = llama3_word(sp, p, 3);
      break;
    case fb::PreTokenizer::Qwen2:
      q = llama3_word(sp, p, 1);
      break;
    case fb::PreTokenizer::StarCoder: {
      size_t len;
      if (sp.raw(p, &len) == Cls::Number) {
        q = p + len;
      } else {
        sp.digits_alone = true;
        q = gpt2_word(sp, p);
      }
      break;
    }
    default:
      q = end;
      break;
  }
  if (q <= p) q = p + 1;  // defensive: always progress
  return q < end ? q : end;
}

}  // namespace tkz

size_t pretokenize(fb::PreTokenizer pre, const char* text, size_t len, uint32_t* ends,
                   size_t cap) {
  if (!text || len > kMaxTokenizeText) return 0;
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text);
  size_t n = 0;
  for (size_t p = 0; p < len;) {
    const size_t q = tkz::next_word(pre, s, p, len);
    if (ends && n < cap) ends[n] = static_cast<uint32_t>(q);
    ++n;
    p = q;
  }
  return n;
}

}  // namespace ringlm::internal
