#include "grammar/matcher.h"

#include <string.h>

#include <algorithm>

#include "unicode.h"

namespace ringlm::internal {

namespace {

uint64_t hash_frames(const MatchFrame* f, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  for (uint32_t k = 0; k < n; ++k) {
    h ^= f[k].pos;
    h *= 0x100000001b3ull;
    h ^= f[k].count + 0x9e3779b9u;
    h *= 0x100000001b3ull;
  }
  return h ? h : 1;  // 0 marks a free slot in `seen`
}

// The item at p of a character set: a code point or a range, [*lo, *hi]. Returns the next item.
const GbnfElem* set_item(const GbnfElem* p, uint32_t* lo, uint32_t* hi) {
  *lo = *hi = p->value;
  if (p[1].type == kCharRngUpper) {
    *hi = p[1].value;
    return p + 2;
  }
  return p + 1;
}

// Does the set starting at e take code point cp? *after: the element past the set.
bool set_matches(const GbnfElem* e, uint32_t cp, uint32_t* after_len) {
  if (e->type == kCharAny) {
    *after_len = 1;
    return true;
  }
  const bool negated = e->type == kCharNot;
  bool found = false;
  const GbnfElem* p = e;
  do {
    uint32_t a = 0, b = 0;
    p = set_item(p, &a, &b);
    if (a <= cp && cp <= b) found = true;
  } while (p->type == kCharAlt);
  *after_len = static_cast<uint32_t>(p - e);
  return found != negated;
}

// Could the set starting at e take some code point in [lo, hi]? (For a pending partial code
// point.) A negated set takes one unless its items together cover the whole range.
bool set_intersects(const GbnfElem* e, uint32_t lo, uint32_t hi) {
  if (e->type == kCharAny) return true;
  const bool negated = e->type == kCharNot;
  // Negated: advance `next` (the least code point of [lo, hi] not yet known to be excluded)
  // past every item that covers it, until no item does (a gap: some code point is taken) or the
  // range is exhausted. Sets are short, so the repeated scans cost little.
  uint32_t next = lo;
  for (bool moved = true; moved;) {
    moved = false;
    const GbnfElem* p = e;
    do {
      uint32_t a = 0, b = 0;
      p = set_item(p, &a, &b);
      if (!negated) {
        if (a <= hi && lo <= b) return true;
      } else if (a <= next && next <= b) {
        if (b >= hi) return false;  // covered to the end
        next = b + 1;
        moved = true;
      }
    } while (p->type == kCharAlt);
  }
  return negated;
}

struct Expander {
  Matcher* m;
  const Grammar* g;
  ErrorSink* err;
  bool full = false;

  void clear_seen() {
    for (uint32_t k = 0; k < m->n_seen_used; ++k) m->seen[m->seen_used[k]] = 0;
    m->n_seen_used = 0;
  }

  // true when the configuration was new (and is now recorded).
  bool first_visit(uint64_t h) {
    uint32_t mask = m->seen_cap - 1, k = static_cast<uint32_t>(h) & mask;
    for (uint32_t probe = 0; probe < m->seen_cap; ++probe, k = (k + 1) & mask) {
      if (m->seen[k] == h) return false;
      if (m->seen[k] == 0) {
        m->seen[k] = h;
        m->seen_used[m->n_seen_used++] = k;
        return true;
      }
    }
    full = true;  // the table is full: the budget is exhausted
    return false;
  }

  // Appends frames f[0, n) as a stack of `s` (dedup against its stacks when `dedup`).
  bool push_stack(StackSet* s, const MatchFrame* f, uint32_t n, bool dedup) {
    const uint64_t h = hash_frames(f, n);
    if (dedup) {
      for (uint32_t k = 0; k < s->n_stacks; ++k) {
        if (s->hash[k] == h && s->len[k] == n &&
            memcmp(s->frames + s->off[k], f, n * sizeof(MatchFrame)) == 0) {
          return true;
        }
      }
    }
    if (s->n_stacks >= m->cap_stacks || s->n_frames + n > m->cap_frames) {
      full = true;
      return false;
    }
    memcpy(s->frames + s->n_frames, f, n * sizeof(MatchFrame));
    s->off[s->n_stacks] = s->n_frames;
    s->len[s->n_stacks] = n;
    s->hash[s->n_stacks] = h;
    s->n_frames += n;
    ++s->n_stacks;
    return true;
  }

  // Appends configuration f[0, n) to todo, its top frame replaced by `top`.
  bool push_todo(const MatchFrame* f, uint32_t n, MatchFrame top) {
    StackSet& todo = m->todo;
    if (todo.n_stacks >= m->cap_stacks || todo.n_frames + n > m->cap_frames) {
      full = true;
      return false;
    }
    MatchFrame* d = todo.frames + todo.n_frames;
    memcpy(d, f, (n - 1) * sizeof(MatchFrame));
    d[n - 1] = top;
    todo.off[todo.n_stacks] = todo.n_frames;
    todo.len[todo.n_stacks] = n;
    ++todo.n_stacks;
    todo.n_frames += n;
    return true;
  }

  // For each alternative of `rule`: a todo entry = w[0, len) plus a frame at the alternative's
  // first element.
  void push_alternatives(const MatchFrame* w, uint32_t len, uint32_t rule) {
    uint32_t pos = g->rule_start[rule];
    for (;;) {
      if (!push_todo(w, len + 1, MatchFrame{pos, 0})) return;
      while (g->elems[pos].type != kAlt && g->elems[pos].type != kEnd) ++pos;
      if (g->elems[pos].type == kEnd) return;
      ++pos;
    }
  }

  // Expands configuration f[0, n) (n >= 1) into terminal-topped (or empty) stacks of m->next.
  // Depth first over a todo list; each popped configuration is copied into `work`, and todo's
  // frames shrink back as entries are popped (LIFO), so the list holds only live entries.
  void expand(const MatchFrame* f, uint32_t n) {
    StackSet& todo = m->todo;
    todo.n_frames = todo.n_stacks = 0;
    if (!push_todo(f, n, f[n - 1])) return;
    MatchFrame* w = m->work;
    while (todo.n_stacks > 0 && !full) {
      const uint32_t k = --todo.n_stacks;
      uint32_t len = todo.len[k];
      memcpy(w, todo.frames + todo.off[k], len * sizeof(MatchFrame));
      todo.n_frames = todo.off[k];
      for (;;) {
        if (len == 0) {
          push_stack(&m->next, w, 0, true);
          break;
        }
        const GbnfElem& e = g->elems[w[len - 1].pos];
        if (e.type >= kChar && e.type <= kCharAny) {
          push_stack(&m->next, w, len, true);
          break;
        }
        if (!first_visit(hash_frames(w, len))) break;
        if (e.type == kEnd || e.type == kAlt) {
          --len;  // the rule is done: continue in the caller's frame
          continue;
        }
        if (e.type == kRuleRef) {
          // Continue after the reference once the rule is done; one configuration per
          // alternative of the rule.
          w[len - 1] = MatchFrame{w[len - 1].pos + 1, 0};
          push_alternatives(w, len, e.value);
          break;
        }
        // kRepeat: another repetition (below max) and/or moving past it (at least min, or the
        // body can match nothing, which makes min reachable without input).
        const uint32_t c = w[len - 1].count;
        const bool relaxed = (c & kRepeatRelaxed) != 0;
        const bool can_skip = relaxed || c >= e.min || g->nullable[e.value];
        const bool can_repeat = relaxed || c < e.max;
        if (relaxed) {
          if (!push_todo(w, len, MatchFrame{w[len - 1].pos + 1, 0})) break;
          push_alternatives(w, len, e.value);
          break;
        }
        if (can_repeat) {
          if (can_skip && !push_todo(w, len, MatchFrame{w[len - 1].pos + 1, 0})) break;
          // Unbounded: only "min reached" matters, so the count saturates at min. Equal parses
          // then have equal stacks (one stack inside a long string, not one per length), which
          // keeps the set small and lets masks be reused across positions.
          w[len - 1].count = e.max == kGbnfRepeatInf && c + 1 > e.min ? e.min : c + 1;
          push_alternatives(w, len, e.value);
          break;
        }
        w[len - 1] = MatchFrame{w[len - 1].pos + 1, 0};
      }
    }
  }
};

void swap_sets(Matcher* m) {
  StackSet t = m->cur;
  m->cur = m->next;
  m->next = t;
}


}  // namespace

void matcher_layout(Arena& a, const Grammar* g, size_t state_bytes, Matcher* m) {
  if (state_bytes < kMatcherMinBytes) state_bytes = kMatcherMinBytes;
  // Per stack: 3 sets x (off 4 + len 4 + hash 8 + 8 frames x 8) + work 8 frames x 8 + seen
  // 2 x (8 + 4) = 328 bytes.
  uint32_t stacks = static_cast<uint32_t>(state_bytes / 328);
  uint32_t seen = 1;
  while (seen < 2 * stacks) seen <<= 1;
  m->g = g;
  m->cap_stacks = stacks;
  m->cap_frames = 8 * stacks;
  StackSet* sets[3] = {&m->cur, &m->next, &m->todo};
  for (StackSet* s : sets) {
    s->frames = a.alloc<MatchFrame>(m->cap_frames, 8);
    s->off = a.alloc<uint32_t>(stacks, 8);
    s->len = a.alloc<uint32_t>(stacks, 8);
    s->hash = a.alloc<uint64_t>(stacks, 8);
    s->n_frames = s->n_stacks = 0;
  }
  m->work = a.alloc<MatchFrame>(m->cap_frames, 8);
  m->seen = a.alloc<uint64_t>(seen, 8);
  m->seen_used = a.alloc<uint32_t>(seen, 8);
  m->n_seen_used = 0;
  m->seen_cap = seen;
  if (m->seen) memset(m->seen, 0, sizeof(uint64_t) * seen);  // then cleared slot by slot
  m->pending = 0;
  m->pending_len = m->pending_need = m->pending_lead = 0;
}

Status matcher_reset(Matcher* m, ErrorSink* err) {
  m->next.n_frames = m->next.n_stacks = 0;
  m->pending = 0;
  m->pending_len = m->pending_need = m->pending_lead = 0;
  Expander x{m, m->g, err};
  x.clear_seen();
  // Each alternative of root as its own one-frame configuration: when it ends, the stack is
  // empty (the grammar is complete).
  uint32_t pos = m->g->rule_start[m->g->root];
  for (;;) {
    const MatchFrame f{pos, 0};
    x.expand(&f, 1);
    if (x.full) break;
    while (m->g->elems[pos].type != kAlt && m->g->elems[pos].type != kEnd) ++pos;
    if (m->g->elems[pos].type == kEnd) break;
    ++pos;
  }
  RLM_CHECK(!x.full, RLM_ERR_CAPACITY, err,
            "grammar state budget (%u stacks, %u frames) exceeded at the start", m->cap_stacks,
            m->cap_frames);
  swap_sets(m);
  return RLM_OK;
}

Status matcher_accept_cp(Matcher* m, uint32_t cp, bool* accepted, ErrorSink* err) {
  *accepted = false;
  m->next.n_frames = m->next.n_stacks = 0;
  Expander x{m, m->g, err};
  x.clear_seen();
  const StackSet& cur = m->cur;
  for (uint32_t k = 0; k < cur.n_stacks && !x.full; ++k) {
    const uint32_t len = cur.len[k];
    if (len == 0) continue;
    const MatchFrame* f = cur.frames + cur.off[k];
    uint32_t after = 0;
    if (!set_matches(m->g->elems + f[len - 1].pos, cp, &after)) continue;
    // The stack with its top moved past the set (built in `work`; expand copies it to todo
    // before it reuses `work`).
    memcpy(m->work, f, len * sizeof(MatchFrame));
    m->work[len - 1] = MatchFrame{f[len - 1].pos + after, 0};
    x.expand(m->work, len);
  }
  RLM_CHECK(!x.full, RLM_ERR_CAPACITY, err,
            "grammar state budget (%u stacks, %u frames) exceeded: the grammar keeps too many "
            "parses open here; give it more state memory",
            m->cap_stacks, m->cap_frames);
  if (m->next.n_stacks == 0) return RLM_OK;  // rejected: cur unchanged
  swap_sets(m);
  *accepted = true;
  return RLM_OK;
}

Status matcher_accept_bytes(Matcher* m, const uint8_t* bytes, size_t n, bool* accepted,
                            size_t* n_used, ErrorSink* err) {
  size_t k = 0;
  Status st = RLM_OK;
  for (; k < n; ++k) {
    const uint8_t b = bytes[k];
    if (m->pending_len == 0) {
      const uint32_t need = utf8_sequence_length(b);
      if (need == 0) break;  // not a UTF-8 lead byte
      if (need == 1) {
        bool ok = false;
        st = matcher_accept_cp(m, b, &ok, err);
        if (st != RLM_OK || !ok) break;
        continue;
      }
      m->pending = b & (need == 2 ? 0x1Fu : need == 3 ? 0x0Fu : 0x07u);
      m->pending_len = 1;
      m->pending_need = static_cast<uint8_t>(need);
      m->pending_lead = b;
      if (!matcher_viable(*m)) {
        m->pending = 0;
        m->pending_len = m->pending_need = m->pending_lead = 0;
        break;
      }
      continue;
    }
    if (!utf8_continuation_ok(m->pending_lead, m->pending_len, b)) break;
    const uint32_t saved = m->pending;
    const uint8_t saved_len = m->pending_len;
    const uint32_t value = (saved << 6) | (b & 0x3Fu);
    if (saved_len + 1u == m->pending_need) {
      const uint8_t saved_need = m->pending_need, saved_lead = m->pending_lead;
      m->pending = 0;
      m->pending_len = m->pending_need = m->pending_lead = 0;
      bool ok = false;
      st = matcher_accept_cp(m, value, &ok, err);
      if (st != RLM_OK || !ok) {
        m->pending = saved;
        m->pending_len = saved_len;
        m->pending_need = saved_need;
        m->pending_lead = saved_lead;
        break;
      }
      continue;
    }
    m->pending = value;
    m->pending_len = static_cast<uint8_t>(saved_len + 1);
    if (!matcher_viable(*m)) {
      m->pending = saved;
      m->pending_len = saved_len;
      break;
    }
  }
  *n_used = k;
  *accepted = st == RLM_OK && k == n;
  return st;
}

bool matcher_can_end(const Matcher& m) {
  if (m.pending_len) return false;
  for (uint32_t k = 0; k < m.cur.n_stacks; ++k) {
    if (m.cur.len[k] == 0) return true;
  }
  return false;
}

bool matcher_is_done(const Matcher& m) {
  if (m.pending_len) return false;
  for (uint32_t k = 0; k < m.cur.n_stacks; ++k) {
    if (m.cur.len[k] != 0) return false;
  }
  return m.cur.n_stacks > 0;
}

void utf8_pending_range(uint32_t value, uint32_t len, uint32_t need, uint8_t lead, uint32_t* lo,
                        uint32_t* hi) {
  const uint32_t rem = need - len;
  *lo = value << (6 * rem);
  *hi = *lo | ((1u << (6 * rem)) - 1);
  // A lead byte alone leaves the low bits free, but not below the sequence length's smallest
  // code point (E0 starts U+0800..U+0FFF, not U+0000..U+0FFF: overlong forms are invalid).
  const uint32_t min_cp = need == 2 ? 0x80u : need == 3 ? 0x800u : 0x10000u;
  if (*lo < min_cp) *lo = min_cp;
  // ED starts U+D000..U+D7FF only (surrogates are not UTF-8), F4 U+100000..U+10FFFF.
  if (lead == 0xED && *hi > 0xD7FF) *hi = 0xD7FF;
  if (lead == 0xF4 && *hi > 0x10FFFF) *hi = 0x10FFFF;
}

bool matcher_set_intersects(const Grammar& g, uint32_t pos, uint32_t lo, uint32_t hi) {
  return set_intersects(g.elems + pos, lo, hi);
}

bool matcher_viable(const Matcher& m) {
  uint32_t lo = 0, hi = 0;
  if (m.pending_len) {
    utf8_pending_range(m.pending, m.pending_len, m.pending_need, m.pending_lead, &lo, &hi);
  }
  for (uint32_t k = 0; k < m.cur.n_stacks; ++k) {
    const uint32_t len = m.cur.len[k];
    if (len == 0) continue;
    if (!m.pending_len) return true;
    if (set_intersects(m.g->elems + m.cur.frames[m.cur.off[k] + len - 1].pos, lo, hi)) return true;
  }
  return false;
}

namespace {

void set_byte_range(uint64_t out[4], uint32_t lo, uint32_t hi) {
  for (uint32_t b = lo; b <= hi; ++b) out[b >> 6] |= 1ull << (b & 63);
}

// Lead bytes of the UTF-8 encodings of code points [lo, hi].
void add_lead_bytes(uint64_t out[4], uint32_t lo, uint32_t hi) {
  struct Band {
    uint32_t lo, hi, shift, tag;
  };
  static constexpr Band kBands[] = {{0, 0x7F, 0, 0},
                                    {0x80, 0x7FF, 6, 0xC0},
                                    {0x800, 0xFFFF, 12, 0xE0},
                                    {0x10000, 0x10FFFF, 18, 0xF0}};
  for (const Band& band : kBands) {
    const uint32_t a = lo > band.lo ? lo : band.lo, b = hi < band.hi ? hi : band.hi;
    if (a > b) continue;
    set_byte_range(out, band.tag | (a >> band.shift), band.tag | (b >> band.shift));
  }
}

}  // namespace

void matcher_next_bytes(const Matcher& m, uint64_t out[4]) {
  out[0] = out[1] = out[2] = out[3] = 0;
  if (m.pending_len) {
    out[0] = out[1] = out[2] = out[3] = ~0ull;
    return;
  }
  for (uint32_t k = 0; k < m.cur.n_stacks; ++k) {
    const uint32_t len = m.cur.len[k];
    if (len == 0) continue;
    const GbnfElem* e = m.g->elems + m.cur.frames[m.cur.off[k] + len - 1].pos;
    if (e->type == kCharAny || e->type == kCharNot) {
      // Every lead byte; a negated set's ASCII exclusions are applied below per stack.
      uint64_t ascii[2] = {~0ull, ~0ull};
      if (e->type == kCharNot) {
        const GbnfElem* p = e;
        do {
          uint32_t a = 0, b = 0;
          p = set_item(p, &a, &b);
          for (uint32_t c = a; c <= b && c < 0x80; ++c) ascii[c >> 6] &= ~(1ull << (c & 63));
        } while (p->type == kCharAlt);
      }
      out[0] |= ascii[0];
      out[1] |= ascii[1];
      add_lead_bytes(out, 0x80, 0x10FFFF);
      continue;
    }
    const GbnfElem* p = e;
    do {
      uint32_t a = 0, b = 0;
      p = set_item(p, &a, &b);
      add_lead_bytes(out, a, b);
    } while (p->type == kCharAlt);
  }
}

bool matcher_key(const Matcher& m, uint32_t* key, uint32_t cap, uint32_t* len, uint64_t* hash) {
  // [pending, pending_len | need << 8 | lead << 16, n_stacks, (len, (pos, count) x len) ...]
  const StackSet& s = m.cur;
  if (3 + static_cast<uint64_t>(s.n_stacks) + 2ull * s.n_frames > cap) return false;
  uint32_t n = 0;
  key[n++] = m.pending;
  key[n++] = m.pending_len | static_cast<uint32_t>(m.pending_need) << 8 |
             static_cast<uint32_t>(m.pending_lead) << 16;
  key[n++] = s.n_stacks;
  for (uint32_t k = 0; k < s.n_stacks; ++k) {
    key[n++] = s.len[k];
    const MatchFrame* f = s.frames + s.off[k];
    for (uint32_t j = 0; j < s.len[k]; ++j) {
      key[n++] = f[j].pos;
      key[n++] = f[j].count;
    }
  }
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < n; ++i) {
    h ^= key[i];
    h *= 0x100000001b3ull;
  }
  *len = n;
  *hash = h;
  return true;
}

bool matcher_load_key(Matcher* m, const uint32_t* key, uint32_t len) {
  if (len < 3) return false;
  const uint32_t n_stacks = key[2];
  if (n_stacks > m->cap_stacks || len - 3 - n_stacks > 2ull * m->cap_frames) return false;
  StackSet& s = m->cur;
  uint32_t at = 3, frames = 0;
  for (uint32_t k = 0; k < n_stacks; ++k) {
    const uint32_t n = key[at++];
    if (at + 2ull * n > len || frames + n > m->cap_frames) return false;
    s.off[k] = frames;
    s.len[k] = n;
    for (uint32_t j = 0; j < n; ++j, at += 2) {
      s.frames[frames + j] = MatchFrame{key[at], key[at + 1]};
    }
    s.hash[k] = hash_frames(s.frames + frames, n);
    frames += n;
  }
  s.n_stacks = n_stacks;
  s.n_frames = frames;
  m->pending = key[0];
  m->pending_len = static_cast<uint8_t>(key[1]);
  m->pending_need = static_cast<uint8_t>(key[1] >> 8);
  m->pending_lead = static_cast<uint8_t>(key[1] >> 16);
  return true;
}

bool matcher_relax(Matcher* m, const uint32_t* min_len, uint32_t* room_out) {
  uint64_t room = UINT64_MAX;
  StackSet& s = m->cur;
  uint32_t kept = 0, frames = 0;  // stacks kept so far (compacted in place) and their frames
  for (uint32_t k = 0; k < s.n_stacks; ++k) {
    MatchFrame* f = s.frames + s.off[k];
    const uint32_t n = s.len[k];
    for (uint32_t j = 0; j < n; ++j) {
      const GbnfElem& e = m->g->elems[f[j].pos];
      const uint32_t c = f[j].count;
      if (e.type != kRepeat || e.max == kGbnfRepeatInf || (c & kRepeatRelaxed) || c < e.min ||
          e.max - e.min < 2) {
        continue;
      }
      const uint64_t per = min_len && min_len[e.value] > 1 ? min_len[e.value] : 1;
      const uint64_t r = static_cast<uint64_t>(e.max - c) * per;
      if (r < room) room = r;
      f[j].count = kRepeatRelaxed;
    }
    const uint64_t h = hash_frames(f, n);
    bool dup = false;
    for (uint32_t q = 0; q < kept && !dup; ++q) {
      dup = s.hash[q] == h && s.len[q] == n &&
            memcmp(s.frames + s.off[q], f, n * sizeof(MatchFrame)) == 0;
    }
    if (dup) continue;
    if (frames != s.off[k]) memmove(s.frames + frames, f, n * sizeof(MatchFrame));
    s.off[kept] = frames;
    s.len[kept] = n;
    s.hash[kept] = h;
    frames += n;
    ++kept;
  }
  s.n_stacks = kept;
  s.n_frames = frames;
  if (room != UINT64_MAX) matcher_sort_stacks(m);  // states equal but for counts: one key
  *room_out = room == UINT64_MAX ? 0 : room < UINT32_MAX ? static_cast<uint32_t>(room) : UINT32_MAX;
  return room != UINT64_MAX;
}

void matcher_sort_stacks(Matcher* m) {
  StackSet& s = m->cur;
  // Sorted through the next set, which only a step uses: its `len` holds the order first.
  StackSet& o = m->next;
  uint32_t* order = o.len;
  for (uint32_t k = 0; k < s.n_stacks; ++k) order[k] = k;
  std::sort(order, order + s.n_stacks, [&s](uint32_t a, uint32_t b) {
    if (s.hash[a] != s.hash[b]) return s.hash[a] < s.hash[b];
    if (s.len[a] != s.len[b]) return s.len[a] < s.len[b];
    return memcmp(s.frames + s.off[a], s.frames + s.off[b], s.len[a] * sizeof(MatchFrame)) < 0;
  });
  for (uint32_t j = 0; j < s.n_stacks; ++j) o.off[j] = order[j];  // frees `len` for the copy
  o.n_frames = 0;
  for (uint32_t j = 0; j < s.n_stacks; ++j) {
    const uint32_t k = o.off[j];
    memcpy(o.frames + o.n_frames, s.frames + s.off[k], s.len[k] * sizeof(MatchFrame));
    o.hash[j] = s.hash[k];
    o.len[j] = s.len[k];
    o.off[j] = o.n_frames;
    o.n_frames += s.len[k];
  }
  o.n_stacks = s.n_stacks;
  swap_sets(m);
}

bool matcher_set_takes(const Grammar& g, uint32_t pos, uint32_t cp) {
  uint32_t after = 0;
  return set_matches(g.elems + pos, cp, &after);
}

bool matcher_same_state(const Matcher& a, const Matcher& b) {
  if (a.pending != b.pending || a.pending_len != b.pending_len ||
      a.pending_need != b.pending_need || a.pending_lead != b.pending_lead ||
      a.cur.n_stacks != b.cur.n_stacks || a.cur.n_frames != b.cur.n_frames) {
    return false;
  }
  for (uint32_t k = 0; k < a.cur.n_stacks; ++k) {
    if (a.cur.len[k] != b.cur.len[k] || a.cur.hash[k] != b.cur.hash[k] ||
        memcmp(a.cur.frames + a.cur.off[k], b.cur.frames + b.cur.off[k],
               a.cur.len[k] * sizeof(MatchFrame)) != 0) {
      return false;
    }
  }
  return true;
}

void matcher_copy(const Matcher& from, Matcher* to) {
  to->cur.n_frames = from.cur.n_frames;
  to->cur.n_stacks = from.cur.n_stacks;
  memcpy(to->cur.frames, from.cur.frames, from.cur.n_frames * sizeof(MatchFrame));
  memcpy(to->cur.off, from.cur.off, from.cur.n_stacks * sizeof(uint32_t));
  memcpy(to->cur.len, from.cur.len, from.cur.n_stacks * sizeof(uint32_t));
  memcpy(to->cur.hash, from.cur.hash, from.cur.n_stacks * sizeof(uint64_t));
  to->pending = from.pending;
  to->pending_len = from.pending_len;
  to->pending_need = from.pending_need;
  to->pending_lead = from.pending_lead;
}

}  // namespace ringlm::internal
