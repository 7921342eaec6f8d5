// SentencePiece-style BPE over the model's tokenizer tables, with no allocation.
//
// ENCODE (tokenize)
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
#include "tokenizer.h"

#include <string.h>

#include "model.h"

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
  const size_t n_sym = text_len + 1;       // one per byte at most, plus the "▁" prefix
  const size_t n_text = 3 * text_len + 3;  // every byte may become "▁"
  return 8 + align8(n_sym * sizeof(Sym)) + align8(n_sym * sizeof(uint64_t)) + align8(n_text);
}

Status tokenize(const fb::Tokenizer* tok, uint32_t vocab_size, const char* text, size_t len,
                bool add_bos, int32_t* out, size_t cap, size_t* n_out, void* scratch,
                size_t scratch_size, ErrorSink* err) {
  RLM_CHECK(n_out != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "n_out is null");
  *n_out = 0;
  RLM_CHECK(tok != nullptr && tok->pieces() && tok->pieces()->size() == vocab_size &&
                tok->sorted_ids() && tok->sorted_ids()->size() == vocab_size && tok->types() &&
                tok->types()->size() == vocab_size,
            RLM_ERR_MODEL_TOKENIZER, err, "tokenizer tables missing or not verified");
  RLM_CHECK(tok->kind() == fb::TokenizerKind::SentencePiece, RLM_ERR_MODEL_UNSUPPORTED, err,
            "tokenizer kind %u is not implemented", static_cast<unsigned>(tok->kind()));
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "text is null");
  RLM_CHECK(out != nullptr || cap == 0, RLM_ERR_INVALID_ARGUMENT, err, "output is null");
  RLM_CHECK(len <= kMaxTokenizeText, RLM_ERR_INVALID_ARGUMENT, err,
            "text of %zu bytes is longer than %zu", len, kMaxTokenizeText);
  const size_t need = tokenize_scratch_bytes(tok, len);
  RLM_CHECK(scratch != nullptr && scratch_size >= need, RLM_ERR_BUFFER_TOO_SMALL, err,
            "tokenize needs %zu scratch bytes, got %zu", need, scratch ? scratch_size : 0);

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
  if (!tok || !tok->pieces() || token < 0 ||
      static_cast<uint32_t>(token) >= tok->pieces()->size()) {
    return 0;
  }
  const flatbuffers::String* p = tok->pieces()->Get(static_cast<uint32_t>(token));
  const uint8_t* s = reinterpret_cast<const uint8_t*>(p->data());
  size_t n = p->size();
  if (n > kMaxPieceBytes) n = kMaxPieceBytes;
  const uint32_t tb = type_bit(tok, static_cast<uint32_t>(token));

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
  } else if (tb & (1u << static_cast<uint32_t>(TokenType::Unknown))) {
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
  // Control and unused tokens contribute nothing.
  if (out) memcpy(out, buf, m < cap ? m : cap);
  return m;
}

}  // namespace ringlm
