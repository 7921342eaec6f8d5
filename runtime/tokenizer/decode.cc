// Decoding: the bytes a token contributes to text (token_text; rules in tokenizer.h).
#include <string.h>

#include "tokenizer.h"
#include "tokenizer/pieces.h"
#include "unicode.h"

namespace ringlm::internal {

using namespace tkz;

size_t token_text(const fb::Tokenizer* tok, int32_t prev, int32_t token, char* out, size_t cap) {
  return token_text_ex(tok, prev, token, 0, out, cap);
}

namespace {

// Where a token's text goes: out[0, cap) is written, the count goes on past cap so the caller
// learns the size needed. No intermediate buffer, so a piece of any verified length decodes.
struct TextOut {
  char* out;
  size_t cap;
  size_t n = 0;
  // SentencePiece at the start of a text: the first byte is dropped if it is a space.
  bool drop_leading_space = false;

  void byte(uint8_t b) {
    if (drop_leading_space) {
      drop_leading_space = false;
      if (b == ' ') return;
    }
    if (out && n < cap) out[n] = static_cast<char>(b);
    ++n;
  }
  void bytes(const uint8_t* s, size_t k) {
    for (size_t i = 0; i < k; ++i) byte(s[i]);
  }
};

}  // namespace

size_t token_text_ex(const fb::Tokenizer* tok, int32_t prev, int32_t token, uint32_t flags,
                     char* out, size_t cap) {
  if (!tok || !tok->pieces() || token < 0 ||
      static_cast<uint32_t>(token) >= tok->pieces()->size()) {
    return 0;
  }
  const flatbuffers::String* p = tok->pieces()->Get(static_cast<uint32_t>(token));
  const uint8_t* s = reinterpret_cast<const uint8_t*>(p->data());
  const size_t n = p->size();
  const uint32_t tb = type_bit(tok, static_cast<uint32_t>(token));
  const bool byte_level = tok->kind() == fb::TokenizerKind::ByteLevel;

  TextOut o{out, cap};
  if (tb & kTypeByte) {
    auto hex = [](uint8_t c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hex(s[3]) >= 0 &&
        hex(s[4]) >= 0) {
      o.byte(static_cast<uint8_t>(hex(s[3]) * 16 + hex(s[4])));
    } else {
      o.bytes(s, n);  // not of the <0xNN> form: its text as-is
    }
  } else if (tb & kTypeControl) {
    if (flags & kTokenTextSpecial) o.bytes(s, n);  // its piece text; else nothing
  } else if (byte_level) {
    if (tb & (kTypeNormal | kTypeUnknown)) {
      // GPT-2 characters back to bytes; anything else is copied as it is.
      for (size_t i = 0; i < n;) {
        uint32_t cp;
        const size_t cl = utf8_decode(s + i, n - i, &cp);
        const int b = cp == kInvalidCp ? -1 : gpt2_cp_to_byte(cp);
        if (b >= 0) {
          o.byte(static_cast<uint8_t>(b));
        } else {
          o.bytes(s + i, cl);
        }
        i += cl;
      }
    } else if (tb & kTypeUserDefined) {
      o.bytes(s, n);
    }
  } else if (tb & kTypeUnknown) {
    // SentencePiece's unk surface (DecodeIds prints " ⁇ " for unknown pieces).
    static const uint8_t kUnk[5] = {' ', 0xE2, 0x81, 0x87, ' '};
    o.bytes(kUnk, sizeof(kUnk));
  } else if (tb & kTypeMergeable) {
    // SentencePiece drops the dummy-prefix space of the first piece of a text.
    const bool at_start = prev == -1 || (tok->bos_id() >= 0 && prev == tok->bos_id());
    o.drop_leading_space = at_start && tok->add_space_prefix();
    for (size_t i = 0; i < n;) {
      if (i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
        o.byte(' ');
        i += 3;
      } else {
        o.byte(s[i++]);
      }
    }
  }
  // Unused tokens (and control tokens without kTokenTextSpecial) contribute nothing.
  return o.n;
}

}  // namespace ringlm::internal
