// The BPE merge core (see bpe.h).
#include "tokenizer/bpe.h"

#include <string.h>

#include "tokenizer/limits.h"
#include "tokenizer/pieces.h"

namespace ringlm::internal {
namespace tkz {
namespace {

// Maps a float to a uint32 that orders the same way (for finite values; -0 equals +0).
inline uint32_t float_order(float f) {
  if (f == 0.0f) f = 0.0f;
  uint32_t u;
  memcpy(&u, &f, sizeof(u));
  return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

// Min-heap of 64-bit keys (priority << 32 | left symbol index) with positions kept in Sym.
struct Heap {
  uint64_t* keys;  // (number of symbols) the heap array
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

struct Merger {
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

}  // namespace

void bpe_merge(const fb::Tokenizer* tok, bool use_merges, const uint8_t* text, Sym* syms,
               uint64_t* keys, int32_t n) {
  Merger m;
  m.tok = tok;
  m.text = text;
  m.syms = syms;
  m.heap.keys = keys;
  m.heap.size = 0;
  m.heap.syms = syms;
  m.use_merges = use_merges;
  for (int32_t i = 0; i + 1 < n; ++i) m.refresh_pair(i);
  m.run();
}

}  // namespace tkz
}  // namespace ringlm::internal
