#include "grammar/compiled.h"

#include <string.h>

#include <algorithm>

#include "model.h"
#include "model_generated.h"
#include "tokenizer.h"
#include "unicode.h"

namespace ringlm::internal {

namespace {

inline void set_bit(uint64_t* bits, int32_t id) {
  bits[static_cast<uint32_t>(id) >> 6] |= 1ull << (static_cast<uint32_t>(id) & 63);
}

// A transition of the walk's automaton: not known yet, rejected, to a state the automaton could
// not keep (the recognizer then checks the rest of the token), or to state (code - kNextState).
enum : uint8_t { kNextUnknown = 0, kNextReject = 1, kNextNone = 2, kNextState = 3 };
static_assert(kWalkStates + kNextState <= 256, "states fit a byte");

// Walk slot kinds (bits 56.. of a slot's key).
constexpr uint64_t kSlotInterval = 1ull << 56;  // (state, non-ASCII interval) -> next
constexpr uint64_t kSlotPartial = 2ull << 56;   // (state, final partial code point) -> viable
constexpr uint64_t kSlotTaken = 3ull << 56;     // (state, stacks taking a code point) -> next

// The interval of code point cp among the grammar's set boundaries.
uint32_t cp_interval(const GrammarImpl& gi, uint32_t cp) {
  uint32_t lo = 0, hi = gi.n_cp_bounds;
  while (lo < hi) {
    const uint32_t mid = (lo + hi) / 2;
    if (gi.cp_bounds[mid] <= cp) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

const uint32_t* state_key(const MaskScratch* ms, uint32_t id) {
  return ms->state_keys + ms->state_off[id];
}

// Where the next state's key may be written (matcher_key into it, then automaton_state), and
// the words left there.
uint32_t* free_key(MaskScratch* ms, uint32_t* cap) {
  *cap = kWalkKeyWords - ms->keys_used;
  return ms->state_keys + ms->keys_used;
}

uint64_t hash_words(const uint32_t* w, uint32_t n) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (uint32_t i = 0; i < n; ++i) {
    h ^= w[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

// The slot remembering `key` (claimed when new), or null when its probe run is full.
uint8_t* walk_slot(MaskScratch* ms, uint64_t key) {
  key |= static_cast<uint64_t>(ms->walk_epoch) << 40;
  uint32_t h = static_cast<uint32_t>((key * 0x9E3779B97F4A7C15ull) >> 40) & (kWalkSlots - 1);
  for (uint32_t probe = 0; probe < 16; ++probe, h = (h + 1) & (kWalkSlots - 1)) {
    if (ms->slot_key[h] == key) return &ms->slot_next[h];
    if ((ms->slot_key[h] >> 40 & 0xFFFF) != ms->walk_epoch) {  // free: from an older walk
      ms->slot_key[h] = key;
      ms->slot_next[h] = kNextUnknown;
      return &ms->slot_next[h];
    }
  }
  return nullptr;
}

// A new automaton (no states; the caller adds its roots), in a new epoch of the slots.
void automaton_begin(MaskScratch* ms) {
  ms->n_states = 0;
  ms->keys_used = 0;
  if (++ms->walk_epoch > 0xFFFF) {  // wrapped: start the epochs again from clear slots
    memset(ms->slot_key, 0, sizeof(uint64_t) * kWalkSlots);
    ms->walk_epoch = 1;
  }
  for (int r = 0; r < 2; ++r) ms->loop_sig[r] = ms->loop_known[r] = 0;
  ms->root_pending = ms->root_pending_len = ms->root_pending_need = ms->root_pending_lead = 0;
}

// The automaton state of key[0, len) (added when new, when there is room; the key may already
// be at free_key). kNextNone when it cannot be kept.
uint8_t automaton_state(MaskScratch* ms, const uint32_t* key, uint32_t len, uint64_t hash) {
  for (uint32_t id = 0; id < ms->n_states; ++id) {
    if (ms->state_hash[id] == hash && ms->state_len[id] == len &&
        memcmp(state_key(ms, id), key, len * sizeof(uint32_t)) == 0) {
      return static_cast<uint8_t>(kNextState + id);
    }
  }
  if (ms->n_states >= kWalkStates || len > kWalkKeyWords - ms->keys_used) return kNextNone;
  const uint32_t id = ms->n_states++;
  uint32_t* dst = ms->state_keys + ms->keys_used;
  if (dst != key) memcpy(dst, key, len * sizeof(uint32_t));
  ms->state_off[id] = ms->keys_used;
  ms->keys_used += len;
  ms->state_len[id] = len;
  ms->state_hash[id] = hash;
  memset(ms->ascii_next + id * 128, kNextUnknown, 128);
  return static_cast<uint8_t>(kNextState + id);
}

// The signature bits no state's loop is looked for in (no signatures: every bit; else the
// partial bit, which never loops).
uint64_t loop_bits_never(const GrammarImpl& gi, const MaskScratch* ms) {
  return ms->n_states > 0 && gi.n_ascii_classes && !ms->root_pending_len ? 1ull << kSigPartial
                                                                          : ~0ull;
}

// b[0, n) is a proper prefix of a valid UTF-8 sequence (a code point cut by the token's end).
bool utf8_partial(const uint8_t* b, size_t n) {
  const uint32_t need = utf8_sequence_length(b[0]);
  if (need < 2 || n >= need) return false;
  for (size_t i = 1; i < n; ++i) {
    if (!utf8_continuation_ok(b[0], static_cast<uint32_t>(i), b[i])) return false;
  }
  return true;
}

// Whether a token whose text ends inside a code point may continue from automaton state `from`:
// `len` of the code point's `need` bytes read, payload bits `value`, first byte `lead` (some
// stack's top set must take a code point those bytes can still become). Remembered per walk.
bool walk_partial(const GrammarImpl& gi, MaskScratch* ms, uint32_t from, uint32_t value,
                  uint32_t len, uint32_t need, uint8_t lead) {
  // (value, len, need) determine the lead byte; value < 2^15 (at most 3 + 6 + 6 bits).
  uint8_t* slot = walk_slot(ms, kSlotPartial | static_cast<uint64_t>(from) << 32 | value |
                                    len << 16 | need << 20);
  if (slot && *slot != kNextUnknown) return *slot == kNextState;
  uint32_t lo = 0, hi = 0;
  utf8_pending_range(value, len, need, lead, &lo, &hi);
  const uint32_t* key = state_key(ms, from);
  bool ok = false;
  for (uint32_t k = 0, at = 3; k < key[2] && !ok; ++k) {
    const uint32_t n = key[at++];
    ok = n && matcher_set_intersects(*gi.g, key[at + 2 * (n - 1)], lo, hi);
    at += 2 * n;
  }
  if (slot) *slot = ok ? kNextState : kNextReject;
  return ok;
}

// Bit k: the stack k of the state `key` (at most 32 stacks, no pending bytes) whose top set takes
// cp. False when the state has more stacks.
bool taking_stacks(const Grammar& g, const uint32_t* key, uint32_t cp, uint32_t* taken) {
  const uint32_t n_stacks = key[2];
  if (n_stacks > 32) return false;
  uint32_t at = 3, m = 0;
  for (uint32_t k = 0; k < n_stacks; ++k) {
    const uint32_t n = key[at++];
    if (n && matcher_set_takes(g, key[at + 2 * (n - 1)], cp)) m |= 1u << k;
    at += 2 * n;
  }
  *taken = m;
  return true;
}

Status walk_step(const GrammarImpl& gi, MaskScratch* ms, uint32_t from, uint32_t cp,
                 uint8_t* next, ErrorSink* err);

// Finds whether the code points of signature bits `need` (not yet known) lead automaton state
// `root` (0 or 1) to itself.
Status learn_loop_bits(const GrammarImpl& gi, MaskScratch* ms, uint32_t root, uint64_t need) {
  const uint8_t self = static_cast<uint8_t>(kNextState + root);
  for (uint64_t rest = need; rest; rest &= rest - 1) {
    const uint32_t bit = static_cast<uint32_t>(__builtin_ctzll(rest));
    bool loops = false;
    if (bit == kSigNonAscii) {
      // Every interval of non-ASCII code points must loop (checked up to 64 intervals).
      const uint32_t first = cp_interval(gi, 0x80), last = cp_interval(gi, 0x10FFFF);
      loops = last - first < 64;
      for (uint32_t j = first; loops && j <= last; ++j) {
        uint32_t rep = j == first ? 0x80 : gi.cp_bounds[j - 1];
        if (rep >= 0xD800 && rep <= 0xDFFF) rep = 0xE000;  // surrogates never occur
        if (cp_interval(gi, rep) != j) continue;           // an interval of surrogates only
        // Probes the tokens may never need (a token's walk may stop before the code point):
        // a budget overflow here only means "no loop"; a token that does need the code point
        // meets the overflow in its own step, as the recognizer alone would.
        uint8_t next = kNextUnknown;
        const Status st = walk_step(gi, ms, root, rep, &next, nullptr);
        if (st != RLM_OK && st != RLM_ERR_CAPACITY) return st;
        loops = st == RLM_OK && next == self;
      }
    } else if (bit < kSigPartial) {
      uint32_t rep = 0;
      while (rep < 128 && gi.ascii_class[rep] != bit) ++rep;
      if (rep < 128) {
        uint8_t next = kNextUnknown;
        const Status st = walk_step(gi, ms, root, rep, &next, nullptr);  // as above
        if (st != RLM_OK && st != RLM_ERR_CAPACITY) return st;
        loops = st == RLM_OK && next == self;
      }
    }
    ms->loop_known[root] |= 1ull << bit;
    if (loops) ms->loop_sig[root] |= 1ull << bit;
  }
  return RLM_OK;
}

// Where code point cp leads from automaton state `from` (a kNext* code), remembered per walk.
// A step depends on the code point only through the stacks whose top set takes it
// (matcher_set_takes), so it is remembered by those too: the code points of a state that the
// same stacks take (every letter inside a string, say) cost one recognizer step together. And
// an ASCII code point's step is the step of every code point of its interval (every set takes
// all of them or none), so the table gets them all at once.
Status walk_step(const GrammarImpl& gi, MaskScratch* ms, uint32_t from, uint32_t cp,
                 uint8_t* next, ErrorSink* err) {
  if (cp < 128 && ms->ascii_next[from * 128 + cp] != kNextUnknown) {
    *next = ms->ascii_next[from * 128 + cp];
    return RLM_OK;
  }
  const uint32_t interval = cp_interval(gi, cp);
  uint8_t* slot = cp < 128 ? &ms->ascii_next[from * 128 + cp]
                           : walk_slot(ms, kSlotInterval | static_cast<uint64_t>(from) << 32 |
                                               (static_cast<uint64_t>(interval) + 1));
  if (slot && *slot != kNextUnknown) {
    *next = *slot;
    return RLM_OK;
  }
  uint32_t taken = 0;
  uint8_t* by_taken = nullptr;
  uint8_t r = kNextUnknown;
  if (taking_stacks(*gi.g, state_key(ms, from), cp, &taken)) {
    if (taken == 0) r = kNextReject;
    else by_taken = walk_slot(ms, kSlotTaken | static_cast<uint64_t>(from) << 32 | taken);
    if (by_taken) r = *by_taken;
  }
  if (r == kNextUnknown) {
    Matcher* trial = &ms->trial;
    r = kNextNone;
    if (matcher_load_key(trial, state_key(ms, from), ms->state_len[from])) {
      bool ok = false;
      RLM_RETURN_IF_ERROR(matcher_accept_cp(trial, cp, &ok, err));
      uint32_t len = 0;
      uint64_t hash = 0;
      if (!ok) {
        r = kNextReject;
      } else {
        matcher_sort_stacks(trial);  // (so a state the step returns to is found again)
        uint32_t cap = 0;
        uint32_t* key = free_key(ms, &cap);
        if (matcher_key(*trial, key, cap, &len, &hash)) r = automaton_state(ms, key, len, hash);
      }
    }
    if (by_taken) *by_taken = r;
  }
  if (cp < 128) {
    const uint32_t lo = interval > 0 ? gi.cp_bounds[interval - 1] : 0;
    const uint32_t hi = interval < gi.n_cp_bounds ? gi.cp_bounds[interval] - 1 : 0x10FFFF;
    memset(ms->ascii_next + from * 128 + lo, r, (hi < 127 ? hi : 127) - lo + 1);
  } else if (slot) {
    *slot = r;
  }
  *next = r;
  return RLM_OK;
}

// Groups of at least this many tokens sharing a first byte are split by their second byte.
constexpr uint32_t kSecondByteMinGroup = 64;

// The bytes that may follow ASCII `byte` from the walk's root: the next bytes of the root's
// state after `byte` (none when it rejects the byte). False when the state after it cannot be
// kept as an automaton state (then nothing is ruled out).
bool second_bytes(const GrammarImpl& gi, MaskScratch* ms, uint32_t byte, uint64_t out[4],
                  ErrorSink* err) {
  out[0] = out[1] = out[2] = out[3] = 0;
  if (ms->n_states == 0 || ms->root_pending_len) return false;
  uint8_t next = kNextUnknown;
  if (walk_step(gi, ms, 0, byte, &next, err) != RLM_OK) return false;
  if (next == kNextReject) return true;
  if (next < kNextState) return false;  // kNextNone
  // Loading a state for its next bytes uses the trial matcher, which the walk reloads before
  // every use.
  const uint32_t id = next - kNextState;
  if (!matcher_load_key(&ms->trial, state_key(ms, id), ms->state_len[id])) return false;
  matcher_next_bytes(ms->trial, out);
  return true;
}

// Fills ascii_class (the ASCII intervals of gi.cp_bounds), every token's signature (see
// GrammarImpl; gi.n_ascii_classes 0 when there are more than kSigPartial classes) and the bit
// planes of the tokens' code point counts.
void token_signatures(GrammarImpl& gi, uint64_t* sig, uint8_t* cps, uint64_t* planes,
                      uint8_t* ascii_class) {
  uint32_t cls = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    if (c > 0 && cp_interval(gi, c) != cp_interval(gi, c - 1)) ++cls;
    ascii_class[c] = static_cast<uint8_t>(cls < kSigPartial ? cls : kSigPartial);
  }
  gi.n_ascii_classes = cls + 1 <= kSigPartial ? cls + 1 : 0;
  const TokenTable& t = gi.tokens;
  const uint32_t words = (t.vocab + 63) / 64;
  memset(planes, 0, sizeof(uint64_t) * kCpsPlanes * words);
  uint32_t max_cps = 0;
  for (uint32_t i = 0; i < t.vocab; ++i) {
    const uint8_t* b = t.sorted_bytes + t.sorted_off[i];
    const size_t n = t.sorted_off[i + 1] - t.sorted_off[i];
    uint64_t s = 0;
    uint32_t count = 0;
    for (size_t k = 0; k < n; ++count) {
      if (b[k] < 0x80) {
        s |= 1ull << ascii_class[b[k]];
        ++k;
        continue;
      }
      uint32_t cp = 0;
      const size_t len = utf8_decode(b + k, n - k, &cp);
      s |= 1ull << (cp == kInvalidCp ? kSigPartial : kSigNonAscii);
      k += len;
    }
    sig[i] = s;
    if (count > max_cps) max_cps = count;
    const uint32_t capped = count < kCpsCap ? count : kCpsCap;
    cps[i] = static_cast<uint8_t>(capped);
    const uint32_t id = static_cast<uint32_t>(t.sorted[i]);
    for (uint32_t p = 0; p < kCpsPlanes; ++p) {
      if (capped >> p & 1) planes[p * words + id / 64] |= 1ull << (id % 64);
    }
  }
  gi.max_cps = max_cps;
}

// The one layout: header, GBNF (its own bound), token table.
Status layout(Arena& a, const ModelImpl& model, const char* text, size_t len, GrammarImpl** out,
              ErrorSink* err) {
  GrammarImpl* gi = a.alloc<GrammarImpl>(1);
  const size_t gbnf = gbnf_bytes(len);
  RLM_CHECK(gbnf != SIZE_MAX, RLM_ERR_GRAMMAR, err, "grammar: %zu bytes of text, over the limit", len);
  void* gmem = a.alloc_bytes(gbnf, 1, kArenaAlignment);
  const uint32_t vocab = model.hp.vocab_size;
  const fb::Tokenizer* tok = model.root->tokenizer();
  TokenTable table;
  RLM_RETURN_IF_ERROR(token_table_layout(a, tok, vocab, &table, err));
  // Set boundaries: two per set item at most, and there are at most gbnf's element bound items.
  const size_t max_bounds = 2 * (4 * len + 16);
  uint32_t* bounds = a.alloc<uint32_t>(max_bounds);
  uint64_t* sig = a.alloc<uint64_t>(vocab);
  uint8_t* cps = a.alloc<uint8_t>(vocab);
  uint64_t* planes = a.alloc<uint64_t>(static_cast<size_t>(kCpsPlanes) * ((vocab + 63) / 64));
  uint8_t* ascii_class = a.alloc<uint8_t>(128);
  uint32_t* min_len = a.alloc<uint32_t>(len + 2);  // gbnf_bytes' bound on the rules
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && gi && gmem && bounds && sig && cps && planes && ascii_class && min_len,
            RLM_ERR_BUFFER_TOO_SMALL, err, "grammar: memory too small (%zu bytes needed)",
            a.used());
  Arena ga(gmem, gbnf);
  const Grammar* g = nullptr;
  RLM_RETURN_IF_ERROR(gbnf_compile(text, len, ga, &g, err));
  gi->self = gi;
  gi->model = &model;
  gi->g = g;
  gi->tokens = table;
  uint32_t n_bounds = 0;
  for (uint32_t e = 0; e < g->n_elems && n_bounds + 2 <= max_bounds; ++e) {
    const GbnfElem& el = g->elems[e];
    if (el.type != kChar && el.type != kCharNot && el.type != kCharAlt) continue;
    const uint32_t lo = el.value;
    const uint32_t hi = e + 1 < g->n_elems && g->elems[e + 1].type == kCharRngUpper
                            ? g->elems[e + 1].value
                            : el.value;
    bounds[n_bounds++] = lo;
    bounds[n_bounds++] = hi + 1;
  }
  std::sort(bounds, bounds + n_bounds);
  gi->n_cp_bounds = static_cast<uint32_t>(std::unique(bounds, bounds + n_bounds) - bounds);
  gi->cp_bounds = bounds;
  token_signatures(*gi, sig, cps, planes, ascii_class);
  gi->token_sig = sig;
  gi->token_cps = cps;
  gi->ascii_class = ascii_class;
  gi->cps_planes = planes;
  gbnf_min_lengths(*g, min_len);
  gi->rule_min_len = min_len;
  gi->magic = kGrammarMagic;
  *out = gi;
  return RLM_OK;
}

// One token's run through the walk's automaton, from automaton state `st` at byte `k`.
struct TokenRun {
  size_t k = 0;       // bytes read so far
  uint32_t st = 0;    // the automaton state there
  bool decided = false, accepted = false;
  size_t used = 0;    // when rejected: the index of the byte that failed
};

// Runs the automaton over the token b[0, n) from r->k: stops when the token is decided (accepted,
// or rejected at a byte), or at a code point whose state the automaton cannot keep or that is
// invalid UTF-8 (undecided: the recognizer goes on from r->st at r->k). With `path`, every code
// point boundary passed is appended to the walk's path.
Status run_automaton(const GrammarImpl& gi, MaskScratch* ms, const uint8_t* b, size_t n,
                     bool path, TokenRun* r, ErrorSink* err) {
  if (r->k == 0 && ms->root_pending_len) {
    // The walk's state ends inside a code point (automaton state 0 is the state without it):
    // the token's first bytes complete it, then it steps from state 0 by the whole code point.
    const uint32_t need = ms->root_pending_need, rem = need - ms->root_pending_len;
    uint32_t value = ms->root_pending;
    size_t j = 0;
    for (; j < rem && j < n; ++j) {
      if (!utf8_continuation_ok(ms->root_pending_lead, ms->root_pending_len + j, b[j])) {
        r->decided = true;
        r->used = j;
        return RLM_OK;
      }
      value = value << 6 | (b[j] & 0x3Fu);
    }
    if (j < rem) {  // still inside it
      r->decided = true;
      r->accepted = walk_partial(gi, ms, 0, value, ms->root_pending_len + static_cast<uint32_t>(n),
                                 need, ms->root_pending_lead);
      r->used = n;
      return RLM_OK;
    }
    uint8_t next = kNextUnknown;
    RLM_RETURN_IF_ERROR(walk_step(gi, ms, 0, value, &next, err));
    if (next == kNextReject) {
      r->decided = true;
      r->used = rem - 1;
      return RLM_OK;
    }
    if (next == kNextNone) return RLM_OK;  // the recognizer goes on from the state itself
    r->st = next - kNextState;
    r->k = rem;
    if (path) {
      ms->path_off[ms->n_path] = static_cast<uint16_t>(r->k);
      ms->path_state[ms->n_path] = static_cast<uint8_t>(r->st);
      ++ms->n_path;
    }
  }
  while (r->k < n) {
    const size_t k = r->k;
    uint32_t cp = b[k];
    size_t len = 1;
    uint8_t next = cp < 128 ? ms->ascii_next[r->st * 128 + cp] : static_cast<uint8_t>(kNextUnknown);
    if (next == kNextUnknown) {
      if (cp >= 128) len = utf8_decode(b + k, n - k, &cp);
      if (cp == kInvalidCp) {
        if (utf8_partial(b + k, n - k)) {
          // Cut by the token's end: allowed when some code point it starts may follow.
          const uint8_t lead = b[k];
          const uint32_t need = utf8_sequence_length(lead);
          uint32_t value = lead & (need == 2 ? 0x1Fu : need == 3 ? 0x0Fu : 0x07u);
          for (size_t i = k + 1; i < n; ++i) value = value << 6 | (b[i] & 0x3Fu);
          r->decided = true;
          r->accepted =
              walk_partial(gi, ms, r->st, value, static_cast<uint32_t>(n - k), need, lead);
          r->used = n;  // rejected as a whole: no skip
        }
        return RLM_OK;  // else invalid: the recognizer rejects it
      }
      RLM_RETURN_IF_ERROR(walk_step(gi, ms, r->st, cp, &next, err));
    }
    if (next == kNextReject) {
      r->decided = true;
      r->used = k + len - 1;
      return RLM_OK;
    }
    if (next == kNextNone) return RLM_OK;
    r->st = next - kNextState;
    r->k = k + len;
    if (path) {
      ms->path_off[ms->n_path] = static_cast<uint16_t>(r->k);
      ms->path_state[ms->n_path] = static_cast<uint8_t>(r->st);
      ++ms->n_path;
    }
  }
  r->decided = r->accepted = true;
  return RLM_OK;
}

// Decides a token the automaton left undecided: the recognizer checks the rest of it from the
// state reached (`state` itself when the walk has no automaton).
Status finish_token(const Matcher* state, MaskScratch* ms, const uint8_t* b, size_t n,
                    TokenRun* r, ErrorSink* err) {
  Matcher* trial = &ms->trial;
  // From the state itself: no automaton, or still at its pending bytes (state 0 lacks them).
  if (ms->n_states == 0 || (r->k == 0 && ms->root_pending_len)) matcher_copy(*state, trial);
  else matcher_load_key(trial, state_key(ms, r->st), ms->state_len[r->st]);
  size_t used_rest = 0;
  RLM_RETURN_IF_ERROR(
      matcher_accept_bytes(trial, b + r->k, n - r->k, &r->accepted, &used_rest, err));
  r->used = r->k + used_rest;
  // A partial UTF-8 character at the token's end must still be able to continue; a token that
  // completes the grammar (no stack left) is allowed.
  if (r->accepted && trial->pending_len != 0 && !matcher_viable(*trial)) {
    r->accepted = false;
    r->used = n;  // rejected as a whole: no skip
  }
  r->decided = true;
  return RLM_OK;
}

// The walk over sorted[begin, end) (tokens with bytes) from the automaton's state 0 (or, with no
// automaton, from *state): sets the bit of every token there that can continue the text (bits
// start at 0, by token id), and in `read` (when not null; by sorted position) the bit of those
// accepted by reading them rather than by their signature.
Status walk_range(const GrammarImpl& gi, const Matcher* state, MaskScratch* ms, uint32_t begin,
                  uint32_t end, uint64_t* bits, uint64_t* read, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  // The path holds a token's code point boundaries: a grammar compiled for a vocabulary with
  // longer tokens than the scratch was laid out for (another model) would overrun it.
  RLM_CHECK(t.max_len < ms->path_cap, RLM_ERR_INVALID_ARGUMENT, err,
            "grammar: its vocabulary has a %u-byte token, the session's scratch holds %u",
            t.max_len, ms->path_cap > 0 ? ms->path_cap - 1 : 0);
  // The path: the automaton states of the last token walked, at its code point boundaries
  // (byte offsets); a token resumes at the deepest one within the bytes it shares with that
  // token.
  ms->path_off[0] = 0;
  ms->path_state[0] = 0;
  ms->n_path = 1;
  const uint8_t* last = nullptr;  // the last token walked
  size_t last_n = 0;
  uint32_t i = begin;
  while (i < end) {
    // Tokens whose every code point leads the state back to itself: accepted unread (inside a
    // JSON string, nearly the whole vocabulary, hence a loop of their own).
    const uint64_t loops = ms->loop_sig[0];
    while (i < end && (gi.token_sig[i] & ~loops) == 0) set_bit(bits, t.sorted[i++]);
    if (i == end) break;
    const uint64_t unknown = gi.token_sig[i] & ~ms->loop_known[0];
    if (unknown) {
      RLM_RETURN_IF_ERROR(learn_loop_bits(gi, ms, 0, unknown));
      continue;  // this token again, its bits known
    }
    const int32_t id = t.sorted[i];
    const uint8_t* b = t.sorted_bytes + t.sorted_off[i];
    const size_t n = t.sorted_off[i + 1] - t.sorted_off[i];
    size_t common = 0;
    while (common < n && common < last_n && b[common] == last[common]) ++common;
    while (ms->n_path > 1 && ms->path_off[ms->n_path - 1] > common) --ms->n_path;
    last = b;  // this token sets the path
    last_n = n;
    TokenRun r;
    r.k = ms->path_off[ms->n_path - 1];
    r.st = ms->path_state[ms->n_path - 1];
    if (ms->n_states > 0) RLM_RETURN_IF_ERROR(run_automaton(gi, ms, b, n, true, &r, err));
    if (!r.decided) RLM_RETURN_IF_ERROR(finish_token(state, ms, b, n, &r, err));
    if (r.accepted) {
      set_bit(bits, id);
      if (read) set_bit(read, static_cast<int32_t>(i));
      ++i;
      continue;
    }
    ++i;
    const size_t used = r.used;
    if (used < n) {
      // Every following token that shares bytes [0, used] with this one fails at the same byte:
      // skip that run. Runs can be long (a space and a letter start thousands of tokens): after
      // a few steps, a binary search over the sorted bytes finds the run's end.
      uint32_t steps = 0;
      while (i < end && t.lcp[i] > used && steps < 16) ++i, ++steps;
      if (steps == 16 && i < end && t.lcp[i] > used) {
        uint32_t lo = i, hi = end;
        while (lo < hi) {
          const uint32_t mid = lo + (hi - lo) / 2;
          const uint32_t mlen = t.sorted_off[mid + 1] - t.sorted_off[mid];
          if (mlen > used && memcmp(t.sorted_bytes + t.sorted_off[mid], b, used + 1) == 0) {
            lo = mid + 1;
          } else {
            hi = mid;
          }
        }
        i = lo;
      }
    }
  }
  return RLM_OK;
}

// The walk over the whole vocabulary from the automaton's state 0 (or *state, see walk_range),
// whose first bytes are `first` (matcher_next_bytes).
Status walk_vocabulary(const GrammarImpl& gi, const Matcher* state, const uint64_t first[4],
                       MaskScratch* ms, uint64_t* bits, uint64_t* read, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  memset(bits, 0, sizeof(uint64_t) * ((t.vocab + 63) / 64));
  for (uint32_t i = 0; i < t.n_empty; ++i) set_bit(bits, t.sorted[i]);
  ms->loop_sig[0] = 0;
  ms->loop_known[0] = loop_bits_never(gi, ms);
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t i = t.first_begin[byte];
    const uint32_t end = t.first_begin[byte + 1];
    if (i == end) continue;
    // No open parse takes this byte: the whole group is out, unchecked.
    if (!(first[byte >> 6] >> (byte & 63) & 1)) continue;
    // A large group of an ASCII byte: the same one level down. The bytes the state after
    // `byte` takes rule out whole (byte, second byte) groups: a space starts a third of a 128k
    // vocabulary, and after one inside JSON whitespace only a few second bytes can follow.
    uint64_t second[4];
    if (byte < 128 && end - i >= kSecondByteMinGroup && second_bytes(gi, ms, byte, second, err)) {
      for (uint32_t k = t.first_two[byte]; k < t.first_two[byte + 1]; ++k) {
        const uint32_t b = t.two_begin[k], e = t.two_begin[k + 1];
        const uint32_t len = t.sorted_off[b + 1] - t.sorted_off[b];
        const uint32_t c = len >= 2 ? t.sorted_bytes[t.sorted_off[b] + 1] : 256;
        if (c < 256 && !(second[c >> 6] >> (c & 63) & 1)) continue;
        RLM_RETURN_IF_ERROR(walk_range(gi, state, ms, b, e, bits, read, err));
      }
      continue;
    }
    RLM_RETURN_IF_ERROR(walk_range(gi, state, ms, i, end, bits, read, err));
  }
  return RLM_OK;
}

// Bit k: token 64 w + k has more than r code points (r < kCpsCap).
inline uint64_t longer_than(const GrammarImpl& gi, uint32_t words, uint32_t w, uint32_t r) {
  uint64_t gt = 0, eq = ~0ull;
  for (uint32_t p = kCpsPlanes; p-- > 0;) {
    const uint64_t plane = gi.cps_planes[p * words + w];
    if (r >> p & 1) {
      eq &= plane;
    } else {
      gt |= eq & plane;
      eq &= ~plane;
    }
  }
  return gt;
}

// The chain of a derivation (compiled.h): from the state key[0, len) (E), the states that the
// code points of the signature bits `loop` (the relaxed state's loops) lead to, while each link
// sends every such code point to one same next link. *d: the chain's length (a token made of
// such code points is accepted exactly when it has at most *d), at most `limit` (the chain still
// going on then). False when the code points part ways (or a step outgrows the state budget:
// probes no token may need, so no error).
bool follow_chain(const GrammarImpl& gi, MaskScratch* ms, const uint32_t* key, uint32_t len,
                  uint64_t loop, uint32_t limit, uint32_t* d) {
  // A code point of each interval of the loop's bits (every set takes all of an interval or
  // none of it).
  uint32_t reps[kSigPartial + 64];
  uint32_t n_reps = 0;
  uint64_t seen = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    const uint32_t bit = gi.ascii_class[c];
    if (bit < kSigPartial && (loop >> bit & 1) && !(seen >> bit & 1)) {
      seen |= 1ull << bit;
      reps[n_reps++] = c;
    }
  }
  if (loop >> kSigNonAscii & 1) {  // learn_loop_bits: then at most 64 intervals, all looping
    const uint32_t first = cp_interval(gi, 0x80), last = cp_interval(gi, 0x10FFFF);
    if (last - first >= 64) return false;
    for (uint32_t j = first; j <= last; ++j) {
      uint32_t rep = j == first ? 0x80 : gi.cp_bounds[j - 1];
      if (rep >= 0xD800 && rep <= 0xDFFF) rep = 0xE000;
      if (cp_interval(gi, rep) == j) reps[n_reps++] = rep;
    }
  }
  Matcher* trial = &ms->trial;
  uint32_t* cur = ms->link_key[0];
  uint32_t* nxt = ms->link_key[1];
  uint32_t cur_len = len;
  memcpy(cur, key, len * sizeof(uint32_t));
  // The code points grouped by the stacks taking them (a step depends on nothing else), kept
  // while the links' stacks have the same tops.
  uint32_t tops[32], n_tops = UINT32_MAX;
  uint32_t group_taken[kSigPartial + 64], group_rep[kSigPartial + 64], n_groups = 0;
  for (uint32_t j = 0; j < limit; ++j) {
    const uint32_t n_stacks = cur[2];
    if (n_stacks > 32) return false;
    bool same = n_stacks == n_tops;
    {
      uint32_t at = 3;
      for (uint32_t k = 0; k < n_stacks; ++k) {
        const uint32_t n = cur[at++];
        const uint32_t top = n ? cur[at + 2 * (n - 1)] : UINT32_MAX;
        same = same && tops[k] == top;
        tops[k] = top;
        at += 2 * n;
      }
      n_tops = n_stacks;
    }
    if (!same) {
      n_groups = 0;
      bool any_refused = false;
      for (uint32_t q = 0; q < n_reps; ++q) {
        uint32_t taken = 0;
        taking_stacks(*gi.g, cur, reps[q], &taken);
        if (taken == 0) {
          any_refused = true;
          continue;
        }
        uint32_t g = 0;
        while (g < n_groups && group_taken[g] != taken) ++g;
        if (g == n_groups) {
          group_taken[n_groups] = taken;
          group_rep[n_groups++] = reps[q];
        }
      }
      if (n_groups == 0) {  // every one refused: the chain ends here
        *d = j;
        return true;
      }
      if (any_refused) return false;
    }
    uint32_t nxt_len = 0;
    for (uint32_t g = 0; g < n_groups; ++g) {
      if (!matcher_load_key(trial, cur, cur_len)) return false;
      bool ok = false;
      if (matcher_accept_cp(trial, group_rep[g], &ok, nullptr) != RLM_OK || !ok) return false;
      matcher_sort_stacks(trial);
      uint32_t* out = g == 0 ? nxt : ms->walk_key;
      uint32_t out_len = 0;
      uint64_t hash = 0;
      if (!matcher_key(*trial, out, kMaskKeyWords, &out_len, &hash)) return false;
      if (g == 0) {
        nxt_len = out_len;
      } else if (out_len != nxt_len || memcmp(out, nxt, out_len * sizeof(uint32_t)) != 0) {
        return false;
      }
    }
    uint32_t* t = cur;
    cur = nxt;
    nxt = t;
    cur_len = nxt_len;
  }
  *d = limit;
  return true;
}

// The mask of `state` derived from its relaxed state's (compiled.h) into ms->bits. *done false
// (nothing computed) when the state has nothing to relax or the derivation does not apply; the
// caller then walks the state.
Status derive_from_relaxed(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                           bool* done, ErrorSink* err) {
  *done = false;
  // No signatures: the relaxed walk would read every token, and so would the derivation.
  if (gi.n_ascii_classes == 0 || state.pending_len) return RLM_OK;
  Matcher* trial = &ms->trial;
  matcher_copy(state, trial);
  uint32_t room = 0;
  uint32_t q_len = 0;
  uint64_t q_hash = 0;
  if (!matcher_relax(trial, gi.rule_min_len, &room) ||
      !matcher_key(*trial, ms->relaxed_key, kMaskKeyWords, &q_len, &q_hash)) {
    return RLM_OK;
  }
  const TokenTable& t = gi.tokens;
  const uint32_t words = (t.vocab + 63) / 64;
  MaskCache& cache = ms->cache;
  // The read tokens' entry: the relaxed key with word 1 (pending length, need, lead: at most
  // 0x00FF0404 in a state's key) set to the tag.
  uint32_t* read_key = ms->walk_key;
  auto make_read_key = [&](uint64_t* hash) {
    memcpy(read_key, ms->relaxed_key, q_len * sizeof(uint32_t));
    read_key[1] = kMaskReadTag;
    *hash = hash_words(read_key, q_len);
  };
  uint64_t r_hash = 0;
  const uint64_t* kept_mask = nullptr;
  const uint64_t* kept_read = nullptr;
  if (cache.n_entries) {
    kept_mask = mask_cache_lookup(&cache, ms->relaxed_key, q_len, q_hash);
    make_read_key(&r_hash);
    kept_read = kept_mask ? mask_cache_lookup(&cache, read_key, q_len, r_hash) : nullptr;
  }
  const bool kept = kept_mask && kept_read;
  if (kept) {
    memcpy(ms->bits, kept_mask, sizeof(uint64_t) * words);
    memcpy(ms->read, kept_read, sizeof(uint64_t) * words);
  } else {
    // The relaxed state's walk. It reads tokens no parse of the state may take (its repetitions
    // go on past their max), so a budget overflow there is no error of the state's: the state
    // is then walked itself, which meets any overflow the state's own tokens do.
    automaton_begin(ms);
    automaton_state(ms, ms->relaxed_key, q_len, q_hash);
    uint64_t first[4];
    matcher_next_bytes(*trial, first);
    // Only a relaxed state that loops on something accepts tokens unread: else its walk reads
    // every token, as the state's own walk would, and the state is walked instead (the first
    // character of a string with a minLength, say: the relaxed state has yet no closing quote).
    ms->loop_known[0] = 1ull << kSigPartial;
    ms->loop_sig[0] = 0;
    const uint64_t all = ((1ull << gi.n_ascii_classes) - 1) | 1ull << kSigNonAscii;
    if (learn_loop_bits(gi, ms, 0, all & ~ms->loop_known[0]) != RLM_OK || ms->loop_sig[0] == 0) {
      return RLM_OK;
    }
    memset(ms->read, 0, sizeof(uint64_t) * words);
    if (walk_vocabulary(gi, nullptr, first, ms, ms->bits, ms->read, nullptr) != RLM_OK) {
      return RLM_OK;
    }
    if (cache.n_entries) {
      memcpy(mask_cache_insert(&cache, ms->relaxed_key, q_len, q_hash), ms->bits,
             sizeof(uint64_t) * words);
      make_read_key(&r_hash);
      memcpy(mask_cache_insert(&cache, read_key, q_len, r_hash), ms->read,
             sizeof(uint64_t) * words);
    }
  }
  // Every token is at most `room` code points: the relaxed state's mask is the state's.
  if (room >= gi.max_cps) {
    *done = true;
    ++ms->derived;
    ms->derived_kept += kept;
    return RLM_OK;
  }
  if (room > kCpsCap - 1) room = kCpsCap - 1;  // a smaller room is as exact (counts are capped)
  // The automaton for the long tokens: state 0 the state, state 1 the relaxed state.
  automaton_begin(ms);
  uint32_t e_len = 0;
  uint64_t e_hash = 0;
  matcher_copy(state, trial);
  matcher_sort_stacks(trial);  // automaton states have their stacks sorted
  if (!matcher_key(*trial, ms->state_keys, kMaskKeyWords, &e_len, &e_hash)) return RLM_OK;
  automaton_state(ms, ms->state_keys, e_len, e_hash);
  if (automaton_state(ms, ms->relaxed_key, q_len, q_hash) != kNextState + 1) return RLM_OK;
  ms->loop_known[0] = ms->loop_known[1] = 1ull << kSigPartial;
  // The relaxed state's loops, every bit: those the signatures of the tokens its walk accepted
  // unread are made of.
  const uint64_t all = ((1ull << gi.n_ascii_classes) - 1) | 1ull << kSigNonAscii;
  if (learn_loop_bits(gi, ms, 1, all & ~ms->loop_known[1]) != RLM_OK) return RLM_OK;
  const uint64_t loop = ms->loop_sig[1];
  uint32_t d = gi.max_cps;  // no such tokens: none refused for their length
  if (loop) {
    if (!follow_chain(gi, ms, ms->state_keys, e_len, loop, gi.max_cps, &d)) return RLM_OK;
    if (d < gi.max_cps && d >= kCpsCap) return RLM_OK;  // counts are capped below d
    // Every such token of at most `room` code points is accepted (matcher_relax): a shorter
    // chain would contradict it, so nothing here is trusted then.
    if (d < room) return RLM_OK;
  }
  uint64_t* bits = ms->bits;
  // The tokens the relaxed walk read, longer than the room: each checked from the state, in
  // sorted order, so a token resumes at the automaton state of the bytes it shares with the one
  // checked before it (the walk's path), and the tokens after a rejection that share the bytes
  // up to it are rejected unread. By the way, `read_id` gets the read tokens by id.
  uint64_t* read_id = ms->read_id;
  memset(read_id, 0, sizeof(uint64_t) * words);
  ms->path_off[0] = 0;
  ms->path_state[0] = 0;
  ms->n_path = 1;
  const uint8_t* prev = nullptr;  // the last token checked
  size_t prev_n = 0, refused_at = SIZE_MAX;  // and the byte it failed at (SIZE_MAX: none)
  for (uint32_t w = 0; w < words; ++w) {
    for (uint64_t rest = ms->read[w]; rest; rest &= rest - 1) {
      const uint32_t i = w * 64 + static_cast<uint32_t>(__builtin_ctzll(rest));
      const int32_t id = t.sorted[i];
      set_bit(read_id, id);
      const uint8_t* b = t.sorted_bytes + t.sorted_off[i];
      const size_t n = t.sorted_off[i + 1] - t.sorted_off[i];
      if (gi.token_cps[i] <= room) continue;  // as the relaxed state says
      size_t common = 0;
      while (common < n && common < prev_n && b[common] == prev[common]) ++common;
      prev = b;
      prev_n = n;
      if (refused_at != SIZE_MAX && common > refused_at) {
        bits[static_cast<uint32_t>(id) >> 6] &= ~(1ull << (static_cast<uint32_t>(id) & 63));
        continue;  // refused at the same byte (refused_at stays)
      }
      while (ms->n_path > 1 && ms->path_off[ms->n_path - 1] > common) --ms->n_path;
      TokenRun r;
      r.k = ms->path_off[ms->n_path - 1];
      r.st = ms->path_state[ms->n_path - 1];
      RLM_RETURN_IF_ERROR(run_automaton(gi, ms, b, n, true, &r, err));
      if (!r.decided) RLM_RETURN_IF_ERROR(finish_token(&state, ms, b, n, &r, err));
      refused_at = r.accepted || r.used >= n ? SIZE_MAX : r.used;
      if (!r.accepted) {
        bits[static_cast<uint32_t>(id) >> 6] &= ~(1ull << (static_cast<uint32_t>(id) & 63));
      }
    }
  }
  // The tokens it accepted unread, longer than the chain: refused.
  if (d < gi.max_cps) {
    for (uint32_t w = 0; w < words; ++w) {
      const uint64_t plain = bits[w] & ~read_id[w];
      if (plain) bits[w] &= ~(plain & longer_than(gi, words, w, d));
    }
  }
  *done = true;
  ++ms->derived;
  ms->derived_kept += kept;
  return RLM_OK;
}

}  // namespace

size_t grammar_bytes(const ModelImpl& model, size_t len) {
  Arena a(nullptr, 0);
  GrammarImpl* unused = nullptr;
  if (layout(a, model, nullptr, len, &unused, nullptr) != RLM_OK || a.overflowed()) return SIZE_MAX;
  return a.used();
}

Status grammar_compile(const ModelImpl& model, const char* text, size_t len, void* mem, size_t size,
                       GrammarImpl** out, ErrorSink* err) {
  RLM_CHECK(text != nullptr || len == 0, RLM_ERR_INVALID_ARGUMENT, err, "grammar: text is NULL");
  RLM_CHECK(mem != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "grammar: memory is NULL");
  RLM_CHECK(reinterpret_cast<uintptr_t>(mem) % kArenaAlignment == 0, RLM_ERR_MISALIGNED, err,
            "grammar: memory must be %zu-byte aligned", kArenaAlignment);
  const size_t need = grammar_bytes(model, len);
  RLM_CHECK(need != SIZE_MAX, RLM_ERR_GRAMMAR, err, "grammar: %zu bytes of text, over the limit", len);
  RLM_CHECK(size >= need, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: %zu bytes of memory, %zu needed (rlm_grammar_memory)", size, need);
  memset(mem, 0, sizeof(GrammarImpl));  // not a compiled grammar until the end
  Arena a(mem, size);
  return layout(a, model, text, len, out, err);
}

bool grammar_is_compiled(const void* p) {
  const GrammarImpl* gi = static_cast<const GrammarImpl*>(p);
  return gi != nullptr && gi->magic == kGrammarMagic && gi->self == gi;
}

Status grammar_accept_token(const GrammarImpl& gi, Matcher* state, int32_t token, bool* accepted,
                            ErrorSink* err) {
  size_t used = 0;
  return matcher_accept_bytes(state, gi.tokens.data(token), gi.tokens.length(token), accepted,
                              &used, err);
}

void mask_scratch_layout(Arena& a, uint32_t vocab, uint32_t max_token_text, size_t state_bytes,
                         size_t cache_bytes, MaskScratch* ms) {
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  matcher_layout(a, nullptr, state_bytes, &ms->trial);
  ms->bits = a.alloc<uint64_t>(words);
  ms->read = a.alloc<uint64_t>(words);
  ms->read_id = a.alloc<uint64_t>(words);
  ms->key = a.alloc<uint32_t>(kMaskKeyWords);
  ms->walk_key = a.alloc<uint32_t>(kMaskKeyWords);
  ms->relaxed_key = a.alloc<uint32_t>(kMaskKeyWords);
  for (uint32_t*& k : ms->link_key) k = a.alloc<uint32_t>(kMaskKeyWords);
  ms->state_keys = a.alloc<uint32_t>(kWalkKeyWords);
  ms->state_off = a.alloc<uint32_t>(kWalkStates);
  ms->state_len = a.alloc<uint32_t>(kWalkStates);
  ms->state_hash = a.alloc<uint64_t>(kWalkStates);
  ms->ascii_next = a.alloc<uint8_t>(kWalkStates * 128);
  ms->slot_key = a.alloc<uint64_t>(kWalkSlots);
  ms->walk_epoch = 0;  // every slot free (epoch 0) for the first walk's epoch 1
  if (ms->slot_key) memset(ms->slot_key, 0, sizeof(uint64_t) * kWalkSlots);
  ms->slot_next = a.alloc<uint8_t>(kWalkSlots);
  // A walk's path holds one entry per code point of a token, plus its root.
  ms->path_cap = max_token_text + 1;
  ms->path_state = a.alloc<uint8_t>(ms->path_cap);
  ms->path_off = a.alloc<uint16_t>(ms->path_cap);
  ms->derived = ms->derived_kept = 0;
  mask_cache_layout(a, vocab, cache_bytes, &ms->cache);
}

Status grammar_mask_bits(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                         uint64_t* bits, ErrorSink* err) {
  // The automaton starts with state 0 = `state` (none when its key does not fit: every token is
  // then checked by the recognizer from `state`). With a partial code point pending, state 0 is
  // the state without it and every token first completes it (run_automaton).
  automaton_begin(ms);
  uint32_t len = 0;
  uint64_t hash = 0;
  // Automaton states have their stacks sorted (matcher_sort_stacks), so a code point that leads
  // back to the same stacks is seen to.
  matcher_copy(state, &ms->trial);
  matcher_sort_stacks(&ms->trial);
  if (matcher_key(ms->trial, ms->state_keys, kWalkKeyWords, &len, &hash)) {
    ms->state_keys[0] = ms->state_keys[1] = 0;  // matcher_key: the pending bytes' words
    automaton_state(ms, ms->state_keys, len, hash_words(ms->state_keys, len));
    ms->root_pending = state.pending;
    ms->root_pending_len = state.pending_len;
    ms->root_pending_need = state.pending_need;
    ms->root_pending_lead = state.pending_lead;
  }
  uint64_t first[4];
  matcher_next_bytes(state, first);
  return walk_vocabulary(gi, &state, first, ms, bits, nullptr, err);
}

Status grammar_state_mask(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                          const uint64_t** out, ErrorSink* err) {
  MaskCache& cache = ms->cache;
  if (cache.owner != &gi) mask_cache_clear(&cache, &gi);
  uint32_t key_len = 0;
  uint64_t key_hash = 0;
  const bool keyed =
      cache.n_entries && matcher_key(state, ms->key, kMaskKeyWords, &key_len, &key_hash);
  if (keyed) {
    const uint64_t* kept = mask_cache_find(&cache, ms->key, key_len, key_hash);
    if (kept) {
      *out = kept;
      return RLM_OK;
    }
  }
  bool done = false;
  RLM_RETURN_IF_ERROR(derive_from_relaxed(gi, state, ms, &done, err));
  if (!done) RLM_RETURN_IF_ERROR(grammar_mask_bits(gi, state, ms, ms->bits, err));
  if (keyed) {
    memcpy(mask_cache_insert(&cache, ms->key, key_len, key_hash), ms->bits,
           sizeof(uint64_t) * cache.words);
  }
  *out = ms->bits;
  return RLM_OK;
}

void grammar_apply_bits(const uint64_t* bits, uint32_t vocab, float* logits) {
  const float neg_inf = -__builtin_inff();
  const uint32_t words = (vocab + 63) / 64;
  for (uint32_t w = 0; w < words; ++w) {
    uint64_t out = ~bits[w];
    const uint32_t base = w * 64;
    if (vocab - base < 64) out &= (1ull << (vocab - base)) - 1;
    if (out == 0) continue;
    if (out == ~0ull) {
      for (uint32_t k = 0; k < 64; ++k) logits[base + k] = neg_inf;
      continue;
    }
    while (out) {
      logits[base + static_cast<uint32_t>(__builtin_ctzll(out))] = neg_inf;
      out &= out - 1;
    }
  }
}

}  // namespace ringlm::internal
