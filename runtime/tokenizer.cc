// BPE over the model's tokenizer tables, with no allocation: SentencePiece-style (below) and
// GPT-2 style byte-level (see BYTE-LEVEL further down and tokenizer.h).
//
// ENCODE (tokenize, SentencePiece tables)
//   1. Normalise: for SentencePiece tables every ' ' becomes "▁" (U+2581), as llama.cpp does for
//      every SPM vocab; with add_space_prefix a "▁" is also prepended (not for empty text).
//   2. Split into symbols, one per UTF-8 character. Validation is strict (no overlongs,
//      surrogates or code points above U+10FFFF); every byte that does not start a valid
//      sequence is a 1-byte symbol of its own, so invalid input still encodes (byte fallback).
//   3. Merge: the symbols form a doubly linked list; every adjacent pair that can merge sits in
//      an indexed binary min-heap keyed by its left symbol (a symbol has at most one pair: with
//      its right neighbour). Priority:
//        merges present: rank of (left id, right id) in Tokenizer.merges (binary search);
//        else:           score of the vocab piece equal to the concatenated bytes (higher first);
//      ties go to the leftmost pair (llama.cpp's llm_bigram_spm comparator). Merging updates at
//      most three heap entries, so a text of n characters costs O(n log n) heap work and
//      O(n log V) piece look-ups. This pops the same pair sequence as llama.cpp's
//      llm_tokenizer_spm_session (a priority queue with stale entries skipped).
//   4. Emit: each remaining symbol's id; a symbol that is not a vocab piece becomes one <0xNN>
//      token per byte (byte_fallback), else unk_id (one per missing byte, or one per symbol when
//      byte_fallback is off); with neither, the symbol is dropped.
//   Only Normal and UserDefined pieces take part in merging and look-up, as in SentencePiece
//   (control, unknown, byte and unused pieces are reserved): the text "<s>" never becomes BOS.
//
// PIECE LOOK-UP: binary search in sorted_ids (ids ordered by piece bytes, memcmp on the common
// prefix, shorter first), then a scan over the run of equal pieces for an acceptable type.
//
// SCRATCH LAYOUT (8-aligned, from the caller): Sym[len + 1], heap keys uint64[len + 1],
// normalised text uint8[3 * len + 3] (+ alignment slack). 39 bytes per input byte.
//
// BYTE-LEVEL (ByteLevel tables; the rules are in tokenizer.h)
//   Special tokens: the ids of Control/UserDefined tokens are collected into scratch and sorted
//   by piece bytes (heap sort, ties by id), with a bitmap of their first bytes. At a text
//   position whose byte is in the bitmap, the longest special piece that prefixes the text is
//   found by narrowing binary searches: take the greatest piece <= the candidate text x; if it
//   is a prefix of x it is the answer, else no prefix of x is longer than their common prefix,
//   so x shrinks to it and the search repeats (at most a few rounds).
//   Pre-tokenizer: next_word() is a state machine per regex that decodes UTF-8 on the fly with
//   bounded lookahead (one character, or one whitespace run), so splitting is O(len).
//   Words: symbols are the word's bytes, each with the id of its GPT-2 character piece (looked
//   up once per byte value per call and cached in scratch); merging is the SentencePiece heap
//   above keyed by merge rank, over one word at a time.
//   Scratch: int32[256] byte ids, uint32[n_special] special ids, Sym[len], uint64[len] heap keys.
#include "tokenizer.h"

#include <string.h>

#include "model.h"
#include "unicode.h"

namespace ringlm {

namespace {

using fb::TokenType;

// Text longer than this is refused (keeps every index and offset within int32).
constexpr size_t kMaxTokenizeText = size_t{1} << 28;

// Type bits for look-ups.
constexpr uint32_t kTypeMergeable = (1u << static_cast<uint32_t>(TokenType::Normal)) |
                                    (1u << static_cast<uint32_t>(TokenType::UserDefined));
constexpr uint32_t kTypeByte = 1u << static_cast<uint32_t>(TokenType::Byte);

inline int compare_piece(const flatbuffers::String* p, const uint8_t* s, size_t n) {
  const size_t pn = p->size();
  const size_t m = pn < n ? pn : n;
  const int c = m ? memcmp(p->data(), s, m) : 0;
  if (c != 0) return c;
  return pn < n ? -1 : (pn > n ? 1 : 0);
}

inline uint32_t type_bit(const fb::Tokenizer* tok, uint32_t id) {
  const auto* types = tok->types();
  if (!types || id >= types->size()) return 0;
  const uint32_t t = static_cast<uint32_t>(types->Get(id));
  return t < 32 ? 1u << t : 0;
}

// First id (in sorted_ids order) whose piece equals s[0, n) and whose type is in `type_mask`,
// or -1.
int32_t find_piece(const fb::Tokenizer* tok, const uint8_t* s, size_t n, uint32_t type_mask) {
  const auto* sorted = tok->sorted_ids();
  const auto* pieces = tok->pieces();
  if (!sorted || !pieces) return -1;
  const uint32_t count = sorted->size();
  const uint32_t vocab = pieces->size();
  uint32_t lo = 0, hi = count;  // lower bound
  while (lo < hi) {
    const uint32_t mid = lo + (hi - lo) / 2;
    const uint32_t id = sorted->Get(mid);
    if (id >= vocab) return -1;  // unverified table: never index out of range
    if (compare_piece(pieces->Get(id), s, n) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (uint32_t i = lo; i < count; ++i) {
    const uint32_t id = sorted->Get(i);
    if (id >= vocab || compare_piece(pieces->Get(id), s, n) != 0) break;
    if (type_bit(tok, id) & type_mask) return static_cast<int32_t>(id);
  }
  return -1;
}

int32_t find_byte_token(const fb::Tokenizer* tok, uint8_t b) {
  static const char kHex[] = "0123456789ABCDEF";
  const uint8_t piece[6] = {'<', '0', 'x', static_cast<uint8_t>(kHex[b >> 4]),
                            static_cast<uint8_t>(kHex[b & 15]), '>'};
  return find_piece(tok, piece, sizeof(piece), kTypeByte);
}

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

// A run of the normalised text: one UTF-8 character at first, a merged piece later.
struct Sym {
  int32_t prev;     // -1: none
  int32_t next;     // -1: none
  uint32_t start;   // byte offset in the normalised text
  uint32_t n;       // byte length; 0 once merged into its left neighbour
  int32_t id;       // vocab id of the run, -1 when it is not a piece
  int32_t pair_id;  // id the run merged with `next` would become (valid while in the heap)
  int32_t heap_pos; // index in the heap, -1 when the pair with `next` cannot merge
};

// Maps a float to a uint32 that orders the same way (for finite values; -0 equals +0).
inline uint32_t float_order(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Min-heap of 64-bit keys (priority << 32 | left symbol index) with positions kept in Sym.
struct Heap {
  uint64_t* keys;
  uint32_t size;
  Sym* syms;

  static uint32_t sym_of(uint64_t key) { return static_cast<uint32_t>(key & 0xFFFFFFFFu); }

  void place(uint32_t pos, uint64_t key) {
    keys[pos] = key;
    syms[sym_of(key)].heap_pos = static_cast<int32_t>(pos);
  }
  void sift_up(uint32_t pos, uint64_t key) {
    while (pos > 0) {
      const uint32_t parent = (pos - 1) / 2;
      if (keys[parent] <= key) break;
      place(pos, keys[parent]);
      pos = parent;
    }
    place(pos, key);
  }
  void sift_down(uint32_t pos, uint64_t key) {
    for (;;) {
      uint32_t child = 2 * pos + 1;
      if (child >= size) break;
      if (child + 1 < size && keys[child + 1] < keys[child]) ++child;
      if (keys[child] >= key) break;
      place(pos, keys[child]);
      pos = child;
    }
    place(pos, key);
  }
  void push(uint64_t key) { sift_up(size++, key); }
  // Sets (or replaces) the key of symbol `s`'s pair.
  void set(uint32_t s, uint64_t key) {
    const int32_t pos = syms[s].heap_pos;
    if (pos < 0) {
      push(key);
      return;
    }
    const uint64_t old = keys[pos];
    if (key < old) {
      sift_up(static_cast<uint32_t>(pos), key);
    } else {
      sift_down(static_cast<uint32_t>(pos), key);
    }
  }
  void remove(uint32_t s) {
    const int32_t pos = syms[s].heap_pos;
    if (pos < 0) return;
    syms[s].heap_pos = -1;
    const uint64_t last = keys[--size];
    if (static_cast<uint32_t>(pos) == size) return;
    const uint32_t p = static_cast<uint32_t>(pos);
    if (last < keys[p]) {
      sift_up(p, last);
    } else {
      sift_down(p, last);
    }
  }
};

struct Encoder {
  const fb::Tokenizer* tok;
  const uint8_t* text;
  Sym* syms;
  Heap heap;
  bool use_merges;

  // Computes whether symbol s can merge with its right neighbour and updates the heap.
  void refresh_pair(int32_t s) {
    if (s < 0) return;
    Sym& a = syms[s];
    const int32_t r = a.next;
    uint64_t priority = 0;
    int32_t result = -1;
    if (r >= 0) {
      const Sym& b = syms[r];
      if (use_merges) {
        if (a.id >= 0 && b.id >= 0) {
          const auto* merges = tok->merges();
          const uint32_t la = static_cast<uint32_t>(a.id), rb = static_cast<uint32_t>(b.id);
          uint32_t lo = 0, hi = merges->size();
          while (lo < hi) {
            const uint32_t mid = lo + (hi - lo) / 2;
            const fb::Merge* m = merges->Get(mid);
            if (m->left() < la || (m->left() == la && m->right() < rb)) {
              lo = mid + 1;
            } else {
              hi = mid;
            }
          }
          if (lo < merges->size()) {
            const fb::Merge* m = merges->Get(lo);
            if (m->left() == la && m->right() == rb && m->result() < tok->pieces()->size()) {
              result = static_cast<int32_t>(m->result());
              priority = m->rank();
            }
          }
        }
      } else {
        const size_t n = static_cast<size_t>(a.n) + b.n;
        if (n <= kMaxPieceBytes) {
          result = find_piece(tok, text + a.start, n, kTypeMergeable);
          if (result >= 0) {
            const auto* scores = tok->scores();
            const float score = (scores && static_cast<uint32_t>(result) < scores->size())
                                    ? scores->Get(static_cast<uint32_t>(result))
                                    : 0.0f;
            priority = ~float_order(score) & 0xFFFFFFFFu;  // higher score first
          }
        }
      }
    }
    if (result < 0) {
      heap.remove(static_cast<uint32_t>(s));
      return;
    }
    a.pair_id = result;
    heap.set(static_cast<uint32_t>(s), (priority << 32) | static_cast<uint32_t>(s));
  }

  void run() {
    while (heap.size > 0) {
      const uint32_t l = Heap::sym_of(heap.keys[0]);
      heap.remove(l);
      Sym& a = syms[l];
      const int32_t r = a.next;
      if (r < 0) continue;  // cannot happen: a pair always has a right symbol
      Sym& b = syms[r];
      heap.remove(static_cast<uint32_t>(r));
      a.n += b.n;
      a.id = a.pair_id;
      b.n = 0;
      a.next = b.next;
      if (b.next >= 0) syms[b.next].prev = static_cast<int32_t>(l);
      refresh_pair(a.prev);
      refresh_pair(static_cast<int32_t>(l));
    }
  }
};

// Appends `id` to the output, counting past the capacity.
inline void emit(int32_t id, int32_t* out, size_t cap, size_t* count) {
  if (*count < cap) out[*count] = id;
  ++*count;
}

constexpr size_t align8(size_t n) { return (n + 7) & ~size_t{7}; }

// ---- byte-level BPE -------------------------------------------------------------------------

constexpr uint32_t kTypeSpecial = (1u << static_cast<uint32_t>(TokenType::Control)) |
                                  (1u << static_cast<uint32_t>(TokenType::UserDefined));
constexpr uint32_t kTypeControl = 1u << static_cast<uint32_t>(TokenType::Control);
constexpr uint32_t kTypeUserDefined = 1u << static_cast<uint32_t>(TokenType::UserDefined);
constexpr uint32_t kTypeUnknown = 1u << static_cast<uint32_t>(TokenType::Unknown);
constexpr uint32_t kTypeNormal = 1u << static_cast<uint32_t>(TokenType::Normal);

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

size_t byte_level_scratch_bytes(size_t text_len, uint32_t n_special) {
  return 8 + align8(256 * sizeof(int32_t)) + align8(size_t{n_special} * sizeof(uint32_t)) +
         align8(text_len * sizeof(Sym)) + align8(text_len * sizeof(uint64_t));
}

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

// End of the pre-tokenizer word starting at p in s[0, end), in (p, end].
size_t next_word(fb::PreTokenizer pre, const uint8_t* s, size_t p, size_t end) {
  Splitter sp{s, end, false};
  size_t q;
  switch (pre) {
    case fb::PreTokenizer::Gpt2:
      q = gpt2_word(sp, p);
      break;
    case fb::PreTokenizer::Llama3:
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

inline const flatbuffers::String* piece_of(const fb::Tokenizer* tok, uint32_t id) {
  return tok->pieces()->Get(id);
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

struct ByteLevelEncoder {
  const fb::Tokenizer* tok;
  int32_t* byte_ids;  // [256]; -2: not looked up yet
  const uint32_t* specials;
  uint32_t n_specials;
  size_t max_special;
  uint32_t first_bytes[8];
  Sym* syms;
  uint64_t* keys;
  bool ignore_merges;
  bool has_merges;
  int32_t unk;
  int32_t* out;
  size_t cap;
  size_t count;

  int32_t byte_id(uint8_t b) {
    int32_t& id = byte_ids[b];
    if (id == -2) {
      uint8_t u[2];
      const size_t n = gpt2_byte_to_utf8(b, u);
      id = find_piece(tok, u, n, kTypeMergeable);
    }
    return id;
  }
  void emit_id(int32_t id) { emit(id, out, cap, &count); }
  void emit_byte(uint8_t b) {
    const int32_t id = byte_id(b);
    if (id >= 0) {
      emit_id(id);
    } else if (unk >= 0) {
      emit_id(unk);
    }
  }

  void collect_specials(uint32_t* buf, uint32_t buf_cap) {
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

  bool may_start_special(uint8_t b) const { return (first_bytes[b >> 5] >> (b & 31)) & 1u; }

  // The lowest-id special token whose piece is the longest prefix of s[0, n), or -1.
  int32_t match_special(const uint8_t* s, size_t n, size_t* match_len) const {
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

  void word(const uint8_t* w, size_t n) {
    if (n == 1) {
      emit_byte(w[0]);
      return;
    }
    if (ignore_merges && n <= kMaxPieceBytes) {
      uint8_t buf[2 * kMaxPieceBytes];
      size_t m = 0;
      for (size_t k = 0; k < n; ++k) m += gpt2_byte_to_utf8(w[k], buf + m);
      if (m <= kMaxPieceBytes) {
        const int32_t id = find_piece(tok, buf, m, kTypeMergeable);
        if (id >= 0) {
          emit_id(id);
          return;
        }
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
    Encoder enc;
    enc.tok = tok;
    enc.text = w;
    enc.syms = syms;
    enc.heap.keys = keys;
    enc.heap.size = 0;
    enc.heap.syms = syms;
    enc.use_merges = true;
    for (int32_t k = 0; k + 1 < ns; ++k) enc.refresh_pair(k);
    enc.run();
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      const Sym& s = syms[i];
      if (s.id >= 0) {
        emit_id(s.id);
      } else {
        for (uint32_t k = 0; k < s.n; ++k) emit_byte(w[s.start + k]);
      }
    }
  }

  void fragment(fb::PreTokenizer pre, const uint8_t* s, size_t n) {
    for (size_t p = 0; p < n;) {
      const size_t q = next_word(pre, s, p, n);
      word(s + p, q - p);
      p = q;
    }
  }

  void encode(fb::PreTokenizer pre, const uint8_t* text, size_t len, bool parse_special) {
    size_t start = 0;
    if (parse_special && n_specials > 0) {
      for (size_t i = 0; i < len;) {
        size_t m = 0;
        const int32_t id =
            may_start_special(text[i]) ? match_special(text + i, len - i, &m) : -1;
        if (id < 0) {
          ++i;
          continue;
        }
        fragment(pre, text + start, i - start);
        emit_id(id);
        i += m;
        start = i;
      }
    }
    fragment(pre, text + start, len - start);
  }
};

}  // namespace

Status verify_tokenizer(const fb::Tokenizer* tok, uint32_t vocab, ErrorSink* err) {
  RLM_CHECK(tok != nullptr, RLM_ERR_MODEL_TOKENIZER, err, "model has no tokenizer");
  RLM_CHECK(vocab > 0 && vocab <= kMaxVocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer vocab_size %u outside [1, %u]", vocab, kMaxVocab);
  RLM_CHECK(static_cast<uint32_t>(tok->kind()) <=
                static_cast<uint32_t>(fb::TokenizerKind::MAX),
            RLM_ERR_MODEL_TOKENIZER, err, "unknown tokenizer kind %u",
            static_cast<unsigned>(tok->kind()));
  RLM_CHECK(static_cast<uint32_t>(tok->pre_tokenizer()) <=
                static_cast<uint32_t>(fb::PreTokenizer::MAX),
            RLM_ERR_MODEL_TOKENIZER, err, "unknown pre-tokenizer %u",
            static_cast<unsigned>(tok->pre_tokenizer()));
  RLM_CHECK(tok->pieces() && tok->pieces()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer has %u pieces, vocab_size is %u",
            tok->pieces() ? tok->pieces()->size() : 0u, vocab);
  RLM_CHECK(tok->types() && tok->types()->size() == vocab, RLM_ERR_MODEL_TOKENIZER, err,
            "tokenizer has %u token types, vocab_size is %u",
            tok->types() ? tok->types()->size() : 0u, vocab);
  RLM_CHECK(!tok->scores() || tok->scores()->size() == 0 || tok->scores()->size() == vocab,
            RLM_ERR_MODEL_TOKENIZER, err, "tokenizer has %u scores, vocab_size is %u",
            tok->scores()->size(), vocab);
  RLM_CHECK(tok->sorted_ids() && tok->sorted_ids()->size() == vocab, RLM_ERR_MODEL_TOKENIZER,
            err, "tokenizer has %u sorted ids, vocab_size is %u",
            tok->sorted_ids() ? tok->sorted_ids()->size() : 0u, vocab);
  const auto* pieces = tok->pieces();
  for (uint32_t i = 0; i < vocab; ++i) {
    const flatbuffers::String* s = pieces->Get(i);
    RLM_CHECK(s != nullptr && s->size() <= kMaxPieceBytes, RLM_ERR_MODEL_TOKENIZER, err,
              "piece %u missing or longer than %u bytes", i, kMaxPieceBytes);
    const uint32_t t = static_cast<uint32_t>(tok->types()->Get(i));
    RLM_CHECK(t <= static_cast<uint32_t>(TokenType::MAX), RLM_ERR_MODEL_TOKENIZER, err,
              "token %u has unknown type %u", i, t);
  }
  auto id_ok = [vocab](int32_t id) { return id >= -1 && id < static_cast<int32_t>(vocab); };
  RLM_CHECK(id_ok(tok->bos_id()) && id_ok(tok->eos_id()) && id_ok(tok->unk_id()) &&
                id_ok(tok->pad_id()),
            RLM_ERR_MODEL_TOKENIZER, err, "special token id out of range (bos %d eos %d unk %d pad %d)",
            tok->bos_id(), tok->eos_id(), tok->unk_id(), tok->pad_id());
  if (tok->end_ids()) {
    for (int32_t id : *tok->end_ids()) {
      RLM_CHECK(id >= 0 && id < static_cast<int32_t>(vocab), RLM_ERR_MODEL_TOKENIZER, err,
                "end token id %d out of range", id);
    }
  }
  const auto* sorted = tok->sorted_ids();
  for (uint32_t i = 0; i < vocab; ++i) {
    const uint32_t id = sorted->Get(i);
    RLM_CHECK(id < vocab, RLM_ERR_MODEL_TOKENIZER, err, "sorted id %u at %u out of range", id, i);
    if (i > 0) {
      const flatbuffers::String* a = pieces->Get(sorted->Get(i - 1));
      const flatbuffers::String* b = pieces->Get(id);
      RLM_CHECK(compare_piece(a, reinterpret_cast<const uint8_t*>(b->data()), b->size()) <= 0,
                RLM_ERR_MODEL_TOKENIZER, err, "sorted_ids not ordered by piece bytes at %u", i);
    }
  }
  if (tok->merges()) {
    const auto* merges = tok->merges();
    for (uint32_t i = 0; i < merges->size(); ++i) {
      const fb::Merge* m = merges->Get(i);
      RLM_CHECK(m->left() < vocab && m->right() < vocab && m->result() < vocab,
                RLM_ERR_MODEL_TOKENIZER, err, "merge %u (%u + %u -> %u) id out of range", i,
                m->left(), m->right(), m->result());
      if (i > 0) {
        const fb::Merge* p = merges->Get(i - 1);
        RLM_CHECK(p->left() < m->left() || (p->left() == m->left() && p->right() < m->right()),
                  RLM_ERR_MODEL_TOKENIZER, err,
                  "merges not strictly ordered by (left, right) at %u", i);
      }
    }
  }
  return RLM_OK;
}

size_t tokenize_scratch_bytes(const fb::Tokenizer* tok, size_t text_len) {
  if (text_len > kMaxTokenizeText) return SIZE_MAX;
  if (tok && tok->kind() == fb::TokenizerKind::ByteLevel) {
    return byte_level_scratch_bytes(text_len, count_special_types(tok));
  }
  const size_t n_sym = text_len + 1;       // one per byte at most, plus the "▁" prefix
  const size_t n_text = 3 * text_len + 3;  // every byte may become "▁"
  return 8 + align8(n_sym * sizeof(Sym)) + align8(n_sym * sizeof(uint64_t)) + align8(n_text);
}

size_t pretokenize(fb::PreTokenizer pre, const char* text, size_t len, uint32_t* ends,
                   size_t cap) {
  if (!text || len > kMaxTokenizeText) return 0;
  const uint8_t* s = reinterpret_cast<const uint8_t*>(text);
  size_t n = 0;
  for (size_t p = 0; p < len;) {
    const size_t q = next_word(pre, s, p, len);
    if (ends && n < cap) ends[n] = static_cast<uint32_t>(q);
    ++n;
    p = q;
  }
  return n;
}

Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err) {
  return tokenize_ex(tok, vocab_size, text, len,
                     kTokenizeParseSpecial | (add_bos ? kTokenizeAddBos : 0u), out, cap, n_out,
                     scratch, scratch_size, err);
}

Status tokenize_ex(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                   uint32_t flags, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                   size_t scratch_size, ErrorSink* err) {
  RLM_CHECK(n_out != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "n_out is null");
  *n_out = 0;
  RLM_CHECK(tok != nullptr && tok->pieces() && tok->pieces()->size() == vocab_size &&
                tok->sorted_ids() && tok->sorted_ids()->size() == vocab_size && tok->types() &&
                tok->types()->size() == vocab_size,
            RLM_ERR_MODEL_TOKENIZER, err, "tokenizer tables missing or not verified");
  RLM_CHECK(tok->kind() == fb::TokenizerKind::SentencePiece ||
                tok->kind() == fb::TokenizerKind::ByteLevel,
            RLM_ERR_MODEL_UNSUPPORTED, err, "tokenizer kind %u is not implemented",
            static_cast<unsigned>(tok->kind()));
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "text is null");
  RLM_CHECK(out != nullptr || cap == 0, RLM_ERR_INVALID_ARGUMENT, err, "output is null");
  RLM_CHECK(len <= kMaxTokenizeText, RLM_ERR_INVALID_ARGUMENT, err,
            "text of %zu bytes is longer than %zu", len, kMaxTokenizeText);
  const size_t need = tokenize_scratch_bytes(tok, len);
  RLM_CHECK(scratch != nullptr && scratch_size >= need, RLM_ERR_BUFFER_TOO_SMALL, err,
            "tokenize needs %zu scratch bytes, got %zu", need, scratch ? scratch_size : 0);
  const bool add_bos = (flags & kTokenizeAddBos) != 0;

  if (tok->kind() == fb::TokenizerKind::ByteLevel) {
    size_t count = 0;
    if (add_bos && tok->bos_id() >= 0 && tok->bos_id() < static_cast<int32_t>(vocab_size)) {
      emit(tok->bos_id(), out, cap, &count);
    }
    uint8_t* base = static_cast<uint8_t*>(scratch);
    base += (8 - (reinterpret_cast<uintptr_t>(base) & 7)) & 7;
    int32_t* byte_ids = reinterpret_cast<int32_t*>(base);
    base += align8(256 * sizeof(int32_t));
    for (int i = 0; i < 256; ++i) byte_ids[i] = -2;
    const uint32_t n_special_cap = count_special_types(tok);
    uint32_t* specials = reinterpret_cast<uint32_t*>(base);
    base += align8(size_t{n_special_cap} * sizeof(uint32_t));
    Sym* syms = reinterpret_cast<Sym*>(base);
    base += align8(len * sizeof(Sym));
    uint64_t* keys = reinterpret_cast<uint64_t*>(base);

    ByteLevelEncoder enc;
    enc.tok = tok;
    enc.byte_ids = byte_ids;
    enc.specials = specials;
    enc.n_specials = 0;
    enc.max_special = 0;
    memset(enc.first_bytes, 0, sizeof(enc.first_bytes));
    enc.syms = syms;
    enc.keys = keys;
    enc.ignore_merges = tok->pre_tokenizer() == fb::PreTokenizer::Llama3;
    enc.has_merges = tok->merges() && tok->merges()->size() > 0;
    enc.unk = tok->unk_id() < static_cast<int32_t>(vocab_size) ? tok->unk_id() : -1;
    enc.out = out;
    enc.cap = cap;
    enc.count = count;
    const bool parse_special = (flags & kTokenizeParseSpecial) != 0;
    if (parse_special && len > 0) enc.collect_specials(specials, n_special_cap);
    enc.encode(tok->pre_tokenizer(), reinterpret_cast<const uint8_t*>(text), len,
               parse_special);
    count = enc.count;
    *n_out = count;
    RLM_CHECK(count <= cap, RLM_ERR_CAPACITY, err, "text needs %zu tokens, capacity is %zu",
              count, cap);
    return RLM_OK;
  }

  size_t count = 0;
  if (add_bos && tok->bos_id() >= 0 && tok->bos_id() < static_cast<int32_t>(vocab_size)) {
    emit(tok->bos_id(), out, cap, &count);
  }

  if (len > 0) {
    // Carve the scratch buffer.
    uint8_t* base = static_cast<uint8_t*>(scratch);
    base += (8 - (reinterpret_cast<uintptr_t>(base) & 7)) & 7;
    const size_t n_sym_max = len + 1;
    Sym* syms = reinterpret_cast<Sym*>(base);
    base += align8(n_sym_max * sizeof(Sym));
    uint64_t* keys = reinterpret_cast<uint64_t*>(base);
    base += align8(n_sym_max * sizeof(uint64_t));
    uint8_t* norm = base;

    // 1. Normalise.
    static const uint8_t kSpace[3] = {0xE2, 0x96, 0x81};  // "▁"
    size_t nn = 0;
    if (tok->add_space_prefix()) {
      memcpy(norm, kSpace, 3);
      nn = 3;
    }
    for (size_t i = 0; i < len; ++i) {
      const uint8_t c = static_cast<uint8_t>(text[i]);
      if (c == ' ') {
        memcpy(norm + nn, kSpace, 3);
        nn += 3;
      } else {
        norm[nn++] = c;
      }
    }

    // 2. Split into characters.
    Encoder enc;
    enc.tok = tok;
    enc.text = norm;
    enc.syms = syms;
    enc.heap.keys = keys;
    enc.heap.size = 0;
    enc.heap.syms = syms;
    enc.use_merges = tok->merges() && tok->merges()->size() > 0;
    int32_t n_sym = 0;
    for (size_t off = 0; off < nn;) {
      const size_t cl = utf8_char_len(norm + off, nn - off);
      Sym& s = syms[n_sym];
      s.prev = n_sym - 1;
      s.next = off + cl < nn ? n_sym + 1 : -1;
      s.start = static_cast<uint32_t>(off);
      s.n = static_cast<uint32_t>(cl);
      s.id = find_piece(tok, norm + off, cl, kTypeMergeable);
      s.pair_id = -1;
      s.heap_pos = -1;
      ++n_sym;
      off += cl;
    }

    // 3. Merge.
    for (int32_t i = 0; i + 1 < n_sym; ++i) enc.refresh_pair(i);
    enc.run();

    // 4. Emit.
    const int32_t unk = tok->unk_id() < static_cast<int32_t>(vocab_size) ? tok->unk_id() : -1;
    for (int32_t i = 0; i >= 0; i = syms[i].next) {
      const Sym& s = syms[i];
      if (s.id >= 0) {
        emit(s.id, out, cap, &count);
        continue;
      }
      if (!tok->byte_fallback()) {
        if (unk >= 0) emit(unk, out, cap, &count);
        continue;
      }
      for (uint32_t k = 0; k < s.n; ++k) {
        const int32_t b = find_byte_token(tok, norm[s.start + k]);
        if (b >= 0) {
          emit(b, out, cap, &count);
        } else if (unk >= 0) {
          emit(unk, out, cap, &count);
        }
      }
    }
  }

  *n_out = count;
  RLM_CHECK(count <= cap, RLM_ERR_CAPACITY, err, "text needs %zu tokens, capacity is %zu", count,
            cap);
  return RLM_OK;
}

int32_t token_lookup(const fb::Tokenizer* tok, const char* piece, size_t len) {
  if (!tok || (!piece && len)) return -1;
  return find_piece(tok, reinterpret_cast<const uint8_t*>(piece), len, ~0u);
}

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

}  // namespace ringlm
