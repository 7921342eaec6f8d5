// The SentencePiece encoder (see spm.h).
#include "tokenizer/spm.h"

#include <string.h>

namespace ringlm::internal {
namespace tkz {
namespace {

// Length of the valid UTF-8 sequence starting at s[0] (n > 0 bytes available), or 1 when the
// byte does not start one (invalid bytes are symbols of their own).
size_t utf8_char_len(const uint8_t* s, size_t n) {
  const uint8_t c = s[0];
  if (c < 0x80) return 1;
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return 1;
  }
  if (n < len) return 1;
  if (s[1] < lo || s[1] > hi) return 1;
  for (size_t i = 2; i < len; ++i) {
    if (s[i] < 0x80 || s[i] > 0xBF) return 1;
  }
  return len;
}

}  // namespace

void spm_scratch_layout(Arena* a, size_t len, SpmScratch* s) {
  const size_t n_sym = len + 1;       // one per byte at most, plus the "▁" prefix
  const size_t n_text = 3 * len + 3;  // every byte may become "▁"
  s->syms = a->alloc<Sym>(n_sym, alignof(Sym));
  s->keys = a->alloc<uint64_t>(n_sym, alignof(uint64_t));
  s->norm = a->alloc<uint8_t>(n_text, 1);
}

void spm_encode(const fb::Tokenizer* tok, int32_t unk, const uint8_t* text, size_t len,
                const SpmScratch& s, TokenOut* out) {
  if (len == 0) return;  // no dummy prefix for empty text
  Sym* syms = s.syms;
  uint8_t* norm = s.norm;

  // 1. Normalise.
  static const uint8_t kSpace[3] = {0xE2, 0x96, 0x81};  // "▁"
  size_t nn = 0;
  if (tok->add_space_prefix()) {
    memcpy(norm, kSpace, 3);
    nn = 3;
  }
  for (size_t i = 0; i < len; ++i) {
    const uint8_t c = text[i];
    if (c == ' ') {
      memcpy(norm + nn, kSpace, 3);
      nn += 3;
    } else {
      norm[nn++] = c;
    }
  }

  // 2. Split into characters.
  int32_t n_sym = 0;
  for (size_t off = 0; off < nn;) {
    const size_t cl = utf8_char_len(norm + off, nn - off);
    Sym& sym = syms[n_sym];
    sym.prev = n_sym - 1;
    sym.next = off + cl < nn ? n_sym + 1 : -1;
    sym.start = static_cast<uint32_t>(off);
    sym.n = static_cast<uint32_t>(cl);
    sym.id = find_piece(tok, norm + off, cl, kTypeMergeable);
    sym.pair_id = -1;
    sym.heap_pos = -1;
    ++n_sym;
    off += cl;
  }

  // 3. Merge.
  const bool use_merges = tok->merges() && tok->merges()->size() > 0;
  bpe_merge(tok, use_merges, norm, syms, s.keys, n_sym);

  // 4. Emit.
  for (int32_t i = 0; i >= 0; i = syms[i].next) {
    const Sym& sym = syms[i];
    if (sym.id >= 0) {
      out->push(sym.id);
      continue;
    }
    if (!tok->byte_fallback()) {
      if (unk >= 0) out->push(unk);
      continue;
    }
    for (uint32_t k = 0; k < sym.n; ++k) {
      const int32_t b = find_byte_token(tok, norm[sym.start + k]);
      if (b >= 0) {
        out->push(b);
      } else if (unk >= 0) {
        out->push(unk);
      }
    }
  }
}

}  // namespace tkz
}  // namespace ringlm::internal
