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

size_t token_text_ex(const fb::Tokenizer* tok, int32_t prev, int32_t token, uint32_t flags,
                     char* out, size_t cap) {
  if (!tok || !tok->pieces() || token < 0 ||
      static_cast<uint32_t>(token) >= tok->pieces()->size()) {
    return 0;
  }
  const flatbuffers::String* p = tok->pieces()->Get(static_cast<uint32_t>(token));
  const uint8_t* s = reinterpret_cast<const uint8_t*>(p->data());
  size_t n = p->size();
  if (n > kMaxPieceBytes) n = kMaxPieceBytes;
  const uint32_t tb = type_bit(tok, static_cast<uint32_t>(token));
  const bool byte_level = tok->kind() == fb::TokenizerKind::ByteLevel;

  uint8_t buf[kMaxPieceBytes];
  size_t m = 0;
  if (tb & kTypeByte) {
    auto hex = [](uint8_t c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      return -1;
    };
    if (n == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' && s[5] == '>' && hex(s[3]) >= 0 &&
        hex(s[4]) >= 0) {
      buf[m++] = static_cast<uint8_t>(hex(s[3]) * 16 + hex(s[4]));
    } else {
      memcpy(buf, s, n);  // not of the <0xNN> form: its text as-is
      m = n;
    }
  } else if (tb & kTypeControl) {
    if (flags & kTokenTextSpecial) {  // its piece text; else nothing
      memcpy(buf, s, n);
      m = n;
    }
  } else if (byte_level) {
    if (tb & (kTypeNormal | kTypeUnknown)) {
      // GPT-2 characters back to bytes; anything else is copied as it is.
      for (size_t i = 0; i < n;) {
        uint32_t cp;
        const size_t cl = utf8_decode(s + i, n - i, &cp);
        const int b = cp == kInvalidCp ? -1 : gpt2_cp_to_byte(cp);
        if (b >= 0) {
          buf[m++] = static_cast<uint8_t>(b);
        } else {
          memcpy(buf + m, s + i, cl);
          m += cl;
        }
        i += cl;
      }
    } else if (tb & kTypeUserDefined) {
      memcpy(buf, s, n);
      m = n;
    }
  } else if (tb & kTypeUnknown) {
    // SentencePiece's unk surface (DecodeIds prints " ⁇ " for unknown pieces).
    static const uint8_t kUnk[5] = {' ', 0xE2, 0x81, 0x87, ' '};
    memcpy(buf, kUnk, sizeof(kUnk));
    m = sizeof(kUnk);
  } else if (tb & kTypeMergeable) {
    for (size_t i = 0; i < n;) {
      if (i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
        buf[m++] = ' ';
        i += 3;
      } else {
        buf[m++] = s[i++];
      }
    }
    // SentencePiece drops the dummy-prefix space of the first piece of a text.
    const bool at_start = prev == -1 || (tok->bos_id() >= 0 && prev == tok->bos_id());
    if (at_start && tok->add_space_prefix() && m > 0 && buf[0] == ' ') {
      memmove(buf, buf + 1, m - 1);
      --m;
    }
  }
  // Unused tokens (and control tokens without kTokenTextSpecial) contribute nothing.
  if (out) memcpy(out, buf, m < cap ? m : cap);
  return m;
}

}  // namespace ringlm::internal
