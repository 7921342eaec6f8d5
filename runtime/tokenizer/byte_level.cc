// The byte-level BPE encoder (see byte_level.h).
#include "tokenizer/byte_level.h"

#include <string.h>

#include "tokenizer/limits.h"
#include "tokenizer/pretokenizer.h"
#include "unicode.h"

namespace ringlm::internal {
namespace tkz {
namespace {

// Upper bound of special tokens by type (pieces not looked at), O(vocab).
uint32_t count_special_types(const fb::Tokenizer* tok) {
  const auto* types = tok ? tok->types() : nullptr;
  if (!types) return 0;
  uint32_t n = 0;
  const uint32_t count = types->size();
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t t = static_cast<uint32_t>(types->Get(i));
    if (t < 32 && ((1u << t) & kTypeSpecial)) ++n;
  }
  return n;
}

// Order of special ids: piece bytes, then id.
inline bool special_less(const fb::Tokenizer* tok, uint32_t a, uint32_t b) {
  const flatbuffers::String* pb = piece_of(tok, b);
  const int c = compare_piece(piece_of(tok, a), reinterpret_cast<const uint8_t*>(pb->data()),
                              pb->size());
  return c != 0 ? c < 0 : a < b;
}

void sort_specials(const fb::Tokenizer* tok, uint32_t* v, uint32_t n) {
  auto sift = [&](uint32_t root, uint32_t size) {
    const uint32_t x = v[root];
    for (;;) {
      uint32_t child = 2 * root + 1;
      if (child >= size) break;
      if (child + 1 < size && special_less(tok, v[child], v[child + 1])) ++child;
      if (!special_less(tok, x, v[child])) break;
      v[root] = v[child];
      root = child;
    }
    v[root] = x;
  };
  for (uint32_t i = n / 2; i-- > 0;) sift(i, n);
  for (uint32_t end = n; end > 1; --end) {
    const uint32_t t = v[0];
    v[0] = v[end - 1];
    v[end - 1] = t;
    sift(0, end - 1);
  }
}

// The special tokens of a table, sorted, and the longest-match search over them.
struct SpecialMatcher {
  const fb::Tokenizer* tok;
  const uint32_t* specials;  // (n_specials) sorted by piece bytes then id
  uint32_t n_specials;
  size_t max_special;        // longest special piece, in bytes
  uint32_t first_bytes[8];   // bitmap of the first bytes of special pieces

  // Collects the special tokens with non-empty pieces into buf[0, buf_cap) and sorts them.
  void collect(uint32_t* buf, uint32_t buf_cap) {
    const uint32_t vocab = tok->pieces()->size();
    uint32_t n = 0;
    for (uint32_t id = 0; id < vocab && n < buf_cap; ++id) {
      if ((type_bit(tok, id) & kTypeSpecial) && piece_of(tok, id)->size() > 0) buf[n++] = id;
    }
    sort_specials(tok, buf, n);
    specials = buf;
    n_specials = n;
    max_special = 0;
    memset(first_bytes, 0, sizeof(first_bytes));
    for (uint32_t i = 0; i < n; ++i) {
      const flatbuffers::String* p = piece_of(tok, buf[i]);
      const size_t m = p->size() < kMaxPieceBytes ? p->size() : kMaxPieceBytes;
      if (m > max_special) max_special = m;
      const uint8_t b = static_cast<uint8_t>(p->data()[0]);
      first_bytes[b >> 5] |= 1u << (b & 31);
    }
  }

  bool may_start(uint8_t b) const { return (first_bytes[b >> 5] >> (b & 31)) & 1u; }

  // The lowest-id special token whose piece is the longest prefix of s[0, n), or -1.
  int32_t match(const uint8_t* s, size_t n, size_t* match_len) const {
    size_t x = n < max_special ? n : max_special;
    while (x > 0) {
      uint32_t lo = 0, hi = n_specials;  // first piece > s[0, x)
      while (lo < hi) {
        const uint32_t mid = lo + (hi - lo) / 2;
        if (compare_piece(piece_of(tok, specials[mid]), s, x) <= 0) {
          lo = mid + 1;
        } else {
          hi = mid;
        }
      }
      if (lo == 0) return -1;
      const flatbuffers::String* p = piece_of(tok, specials[lo - 1]);
      const uint8_t* pd = reinterpret_cast<const uint8_t*>(p->data());
      const size_t pn = p->size();
      size_t l = 0;
      while (l < pn && l < x && pd[l] == s[l]) ++l;
      if (l == pn) {  // a prefix of the text: the longest one left
        if (l == 0) return -1;
        uint32_t j = lo - 1;
        while (j > 0 && compare_piece(piece_of(tok, specials[j - 1]), pd, pn) == 0) --j;
        *match_len = l;
        return static_cast<int32_t>(specials[j]);
      }
      if (l >= x) return -1;  // cannot happen for a sorted list
      x = l;  // no prefix of s[0, x) is longer than the common part
    }
    return -1;
  }
};

struct Encoder {
  const fb::Tokenizer* tok;
  int32_t* byte_ids;  // (256) -2: not looked up yet
  Sym* syms;          // (longest word)
  uint64_t* keys;     // (longest word)
  bool ignore_merges;
  bool has_merges;
  int32_t unk;
  TokenOut* out;

  int32_t byte_id(uint8_t b) {
    int32_t& id = byte_ids[b];
    if (id == -2) {
      uint8_t u[2];
      const size_t n = gpt2_byte_to_utf8(b, u);
      id = find_piece(tok, u, n, kTypeMergeable);
    }
    return id;
  }
  void emit_byte(uint8_t b) {
    const int32_t id = byte_id(b);
    if (id >= 0) {
      out->push(id);
    } else if (unk >= 0) {
      out->push(unk);
    }
  }

  void word(const uint8_t* w, size_t n) {
    if (n == 1) {
      emit_byte(w[0]);
      return;
    }
    // Llama 3: a word that is a token is that token (its GPT-2 form is at least n bytes, so a
    // longer word than any piece may be cannot be one).
    if (ignore_merges && n <= kMaxPieceBytes) {
      const int32_t id = find_piece_gpt2(tok, w, n, kTypeMergeable);
      if (id >= 0) {
        out->push(id);
        return;
      }
    }
    if (!has_merges) {
      for (size_t k = 0; k < n; ++k) emit_byte(w[k]);
      return;
    }
    const int32_t ns = static_cast<int32_t>(n);
    for (int32_t k = 0; k < ns; ++k) {
      Sym& s = syms[k];
      s.prev = k - 1;
      s.next = k + 1 < ns ? k + 1 : -1;
      s.start = static_cast<uint32_t>(k);
      s.n = 1;
      s.id = byte_id(w[k]);
      s.pair_id = -1;
      s.heap_pos = -1;
    }
    bpe_merge(tok, true, w, syms, keys, ns);
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      const Sym& s = syms[i];
      if (s.id >= 0) {
        out->push(s.id);
      } else {
        for (uint32_t k = 0; k < s.n; ++k) emit_byte(w[s.start + k]);
      }
    }
  }

  // Text without special tokens: pre-tokenizer words, each encoded.
  void fragment(fb::PreTokenizer pre, const uint8_t* s, size_t n) {
    for (size_t p = 0; p < n;) {
      const size_t q = next_word(pre, s, p, n);
      word(s + p, q - p);
      p = q;
    }
  }
};

}  // namespace

void byte_level_scratch_layout(Arena* a, const fb::Tokenizer* tok, size_t len,
                               ByteLevelScratch* s) {
  s->n_special_cap = count_special_types(tok);
  s->byte_ids = a->alloc<int32_t>(256, alignof(int32_t));
  s->specials = a->alloc<uint32_t>(s->n_special_cap, alignof(uint32_t));
  s->syms = a->alloc<Sym>(len, alignof(Sym));
  s->keys = a->alloc<uint64_t>(len, alignof(uint64_t));
}

void byte_level_encode(const fb::Tokenizer* tok, int32_t unk, const uint8_t* text, size_t len,
                       bool parse_special, const ByteLevelScratch& s, TokenOut* out) {
  for (int i = 0; i < 256; ++i) s.byte_ids[i] = -2;
  Encoder enc;
  enc.tok = tok;
  enc.byte_ids = s.byte_ids;
  enc.syms = s.syms;
  enc.keys = s.keys;
  enc.ignore_merges = tok->pre_tokenizer() == fb::PreTokenizer::Llama3;
  enc.has_merges = tok->merges() && tok->merges()->size() > 0;
  enc.unk = unk;
  enc.out = out;
  const fb::PreTokenizer pre = tok->pre_tokenizer();

  size_t start = 0;
  if (parse_special && len > 0) {
    SpecialMatcher sm;
    sm.tok = tok;
    sm.collect(s.specials, s.n_special_cap);
    if (sm.n_specials > 0) {
      for (size_t i = 0; i < len;) {
        size_t m = 0;
        const int32_t id = sm.may_start(text[i]) ? sm.match(text + i, len - i, &m) : -1;
        if (id < 0) {
          ++i;
          continue;
        }
        enc.fragment(pre, text + start, i - start);
        out->push(id);
        i += m;
        start = i;
      }
    }
  }
  enc.fragment(pre, text + start, len - start);
}

}  // namespace tkz
}  // namespace ringlm::internal
