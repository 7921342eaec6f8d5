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

// Bounded repetitions with fewer repetitions left stay exact in the relaxed root (it serves only
// tokens of at most `room` code points, so a small room would leave it little to do).
constexpr uint32_t kRelaxMinRoom = 4;
static_assert(kWalkStates + kNextState <= 256, "states fit a byte");

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
  return ms->state_keys + static_cast<size_t>(id) * kMaskKeyWords;
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

// b[0, n) is a proper prefix of a valid UTF-8 sequence (a code point cut by the token's end).
bool utf8_partial(const uint8_t* b, size_t n) {
  const uint32_t need = utf8_sequence_length(b[0]);
  if (need < 2 || n >= need) return false;
  for (size_t i = 1; i < n; ++i) {
    if (!utf8_continuation_ok(b[0], static_cast<uint32_t>(i), b[i])) return false;
  }
  return true;
}

// Whether a token ending in the partial code point b[0, n) (utf8_partial) may continue from
// automaton state `from`, remembered per walk.
bool walk_partial(MaskScratch* ms, uint32_t from, const uint8_t* b, size_t n) {
  uint32_t packed = 0;
  for (size_t i = 0; i < n; ++i) packed |= static_cast<uint32_t>(b[i]) << (8 * i);
  uint8_t* slot = walk_slot(ms, (2ull << 56 | static_cast<uint64_t>(from) << 32 | packed) + 1);
  if (slot && *slot != kNextUnknown) return *slot == kNextState;
  bool ok = false;
  if (matcher_load_key(&ms->trial, state_key(ms, from), ms->state_len[from])) {
    size_t used = 0;
    // Bytes that only start a code point never expand the state: no budget error here.
    ok = matcher_accept_bytes(&ms->trial, b, n, &ok, &used, nullptr) == RLM_OK && ok &&
         matcher_viable(ms->trial);
  }
  if (slot) *slot = ok ? kNextState : kNextReject;
  return ok;
}

Status walk_step(const GrammarImpl& gi, MaskScratch* ms, uint32_t from, uint32_t cp,
                 uint8_t* next, ErrorSink* err);

// Finds whether the code points of signature bits `need` (not yet known) lead automaton state
// `root` to itself.
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
Status walk_step(const GrammarImpl& gi, MaskScratch* ms, uint32_t from, uint32_t cp,
                 uint8_t* next, ErrorSink* err) {
  uint8_t* slot = cp < 128 ? &ms->ascii_next[from * 128 + cp]
                           : walk_slot(ms, (1ull << 56 | static_cast<uint64_t>(from) << 32 |
                                            cp_interval(gi, cp)) + 1);
  if (slot && *slot != kNextUnknown) {
    *next = *slot;
    return RLM_OK;
  }
  Matcher* trial = &ms->trial;
  uint8_t r = kNextNone;
  if (matcher_load_key(trial, state_key(ms, from), ms->state_len[from])) {
    bool ok = false;
    RLM_RETURN_IF_ERROR(matcher_accept_cp(trial, cp, &ok, err));
    uint32_t len = 0;
    uint64_t hash = 0;
    if (!ok) {
      r = kNextReject;
    } else if (matcher_key(*trial, ms->walk_key, kMaskKeyWords, &len, &hash)) {
      for (uint32_t id = 0; id < ms->n_states; ++id) {
        if (ms->state_hash[id] == hash && ms->state_len[id] == len &&
            memcmp(state_key(ms, id), ms->walk_key, len * sizeof(uint32_t)) == 0) {
          r = static_cast<uint8_t>(kNextState + id);
          break;
        }
      }
      if (r == kNextNone && ms->n_states < kWalkStates) {
        const uint32_t id = ms->n_states++;
        memcpy(ms->state_keys + static_cast<size_t>(id) * kMaskKeyWords, ms->walk_key,
               len * sizeof(uint32_t));
        ms->state_len[id] = len;
        ms->state_hash[id] = hash;
        memset(ms->ascii_next + id * 128, kNextUnknown, 128);
        r = static_cast<uint8_t>(kNextState + id);
      }
    }
  }
  if (slot) *slot = r;
  *next = r;
  return RLM_OK;
}

// Groups of at least this many tokens sharing a first byte are split by their second byte.
constexpr uint32_t kSecondByteMinGroup = 64;

// The bytes that may follow ASCII `byte` from the walk's roots (root 0: the state; root 1, when
// the walk has one: its relaxed form): the union of the next bytes of each root's state after
// `byte`. False when a state after it cannot be kept as an automaton state (then nothing is
// ruled out). A root that rejects `byte` adds nothing: every token it serves starting with the
// byte is rejected anyway.
bool second_bytes(const GrammarImpl& gi, MaskScratch* ms, uint32_t room, uint32_t byte,
                  uint64_t out[4], ErrorSink* err) {
  out[0] = out[1] = out[2] = out[3] = 0;
  if (ms->n_states == 0) return false;
  const uint32_t roots = room ? 2 : 1;  // grammar_mask_bits: a room means root 1 is relaxed
  uint32_t after[2];
  uint32_t n_after = 0;
  for (uint32_t r = 0; r < roots; ++r) {
    uint8_t next = kNextUnknown;
    if (walk_step(gi, ms, r, byte, &next, err) != RLM_OK) return false;
    if (next == kNextReject) continue;
    if (next < kNextState) return false;  // kNextNone
    after[n_after++] = next - kNextState;
  }
  // walk_step may have added states; loading one for its next bytes uses the trial matcher,
  // which the walk reloads before every use.
  for (uint32_t j = 0; j < n_after; ++j) {
    if (!matcher_load_key(&ms->trial, state_key(ms, after[j]), ms->state_len[after[j]])) {
      return false;
    }
    uint64_t nb[4];
    matcher_next_bytes(ms->trial, nb);
    for (int w = 0; w < 4; ++w) out[w] |= nb[w];
  }
  return true;
}

// Fills ascii_class (the ASCII intervals of gi.cp_bounds) and every token's signature (see
// GrammarImpl), gi.n_ascii_classes 0 when there are more than kSigPartial classes.
void token_signatures(GrammarImpl& gi, uint64_t* sig, uint8_t* cps, uint8_t* ascii_class) {
  uint32_t cls = 0;
  for (uint32_t c = 0; c < 128; ++c) {
    if (c > 0 && cp_interval(gi, c) != cp_interval(gi, c - 1)) ++cls;
    ascii_class[c] = static_cast<uint8_t>(cls < kSigPartial ? cls : kSigPartial);
  }
  gi.n_ascii_classes = cls + 1 <= kSigPartial ? cls + 1 : 0;
  const TokenTable& t = gi.tokens;
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
    cps[i] = static_cast<uint8_t>(count < 255 ? count : 255);
  }
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
  uint8_t* ascii_class = a.alloc<uint8_t>(128);
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && gi && gmem && bounds && sig && cps && ascii_class, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: memory too small (%zu bytes needed)", a.used());
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
  token_signatures(*gi, sig, cps, ascii_class);
  gi->token_cps = cps;
  gi->token_sig = sig;
  gi->ascii_class = ascii_class;
  gi->magic = kGrammarMagic;
  *out = gi;
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
  matcher_layout(a, nullptr, state_bytes, &ms->trial);
  ms->bits = a.alloc<uint64_t>((static_cast<size_t>(vocab) + 63) / 64);
  ms->key = a.alloc<uint32_t>(kMaskKeyWords);
  ms->walk_key = a.alloc<uint32_t>(kMaskKeyWords);
  ms->state_keys = a.alloc<uint32_t>(static_cast<size_t>(kWalkStates) * kMaskKeyWords);
  ms->state_len = a.alloc<uint32_t>(kWalkStates);
  ms->state_hash = a.alloc<uint64_t>(kWalkStates);
  ms->ascii_next = a.alloc<uint8_t>(kWalkStates * 128);
  ms->slot_key = a.alloc<uint64_t>(kWalkSlots);
  ms->walk_epoch = 0;  // every slot free (epoch 0) for the first walk's epoch 1
  if (ms->slot_key) memset(ms->slot_key, 0, sizeof(uint64_t) * kWalkSlots);
  ms->slot_next = a.alloc<uint8_t>(kWalkSlots);
  // A walk's path holds one entry per code point of a token, plus its root.
  ms->path_cap = max_token_text + 1;
  for (uint32_t r = 0; r < 2; ++r) {
    ms->path_state[r] = a.alloc<uint8_t>(ms->path_cap);
    ms->path_off[r] = a.alloc<uint16_t>(ms->path_cap);
  }
  mask_cache_layout(a, vocab, cache_bytes, &ms->cache);
}

Status grammar_mask_bits(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                         uint64_t* bits, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  memset(bits, 0, sizeof(uint64_t) * ((t.vocab + 63) / 64));
  for (uint32_t i = 0; i < t.n_empty; ++i) set_bit(bits, t.sorted[i]);
  // The automaton starts with state 0 = `state` (none when its key does not fit: every token is
  // then checked by the recognizer from `state`).
  ms->n_states = 0;
  if (!state.pending_len &&
      matcher_key(state, ms->state_keys, kMaskKeyWords, &ms->state_len[0], &ms->state_hash[0])) {
    ms->n_states = 1;
    memset(ms->ascii_next, kNextUnknown, 128);
    if (++ms->walk_epoch > 0xFFFF) {  // wrapped: start the epochs again from clear slots
      memset(ms->slot_key, 0, sizeof(uint64_t) * kWalkSlots);
      ms->walk_epoch = 1;
    }
  }
  // Root 1: the state with its bounded repetitions relaxed, for tokens of at most `room` code
  // points (worth it from 2: the relaxed state then loops inside a bounded string).
  uint32_t room = 0;
  if (ms->n_states == 1) {
    matcher_copy(state, &ms->trial);
    room = matcher_relax(&ms->trial, kRelaxMinRoom);
    if (room >= 2 && matcher_key(ms->trial, ms->state_keys + kMaskKeyWords, kMaskKeyWords,
                                 &ms->state_len[1], &ms->state_hash[1])) {
      ms->n_states = 2;
      memset(ms->ascii_next + 128, kNextUnknown, 128);
    } else {
      room = 0;
    }
  }
  for (int r = 0; r < 2; ++r) {
    ms->loop_sig[r] = 0;
    // No signatures (too many classes) or no automaton: no bit is ever found.
    ms->loop_known[r] = ms->n_states > 0 && gi.n_ascii_classes ? 1ull << kSigPartial : ~0ull;
  }
  uint64_t first[4];
  matcher_next_bytes(state, first);
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t i = t.first_begin[byte];
    const uint32_t end = t.first_begin[byte + 1];
    if (i == end) continue;
    // No open parse takes this byte: the whole group is out, unchecked.
    if (!(first[byte >> 6] >> (byte & 63) & 1)) continue;
    // A large group of an ASCII byte: the same one level down. The bytes the automaton's states
    // after `byte` take (from each root) rule out whole (byte, second byte) groups: a space
    // starts a third of a 128k vocabulary, and after one inside JSON whitespace only a few
    // second bytes can follow.
    uint64_t second[4];
    if (byte < 128 && end - i >= kSecondByteMinGroup &&
        second_bytes(gi, ms, room, byte, second, err)) {
      for (uint32_t k = t.first_two[byte]; k < t.first_two[byte + 1]; ++k) {
        const uint32_t b = t.two_begin[k], e = t.two_begin[k + 1];
        const uint32_t len = t.sorted_off[b + 1] - t.sorted_off[b];
        const uint32_t c = len >= 2 ? t.sorted_bytes[t.sorted_off[b] + 1] : 256;
        if (c < 256 && !(second[c >> 6] >> (c & 63) & 1)) continue;
        RLM_RETURN_IF_ERROR(grammar_mask_range(gi, state, ms, room, b, e, bits, err));
      }
      continue;
    }
    RLM_RETURN_IF_ERROR(grammar_mask_range(gi, state, ms, room, i, end, bits, err));
  }
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

Status grammar_mask_range(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                          uint32_t room, uint32_t begin, uint32_t end, uint64_t* bits,
                          ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  // The path holds a token's code point boundaries: a grammar compiled for a vocabulary with
  // longer tokens than the scratch was laid out for (another model) would overrun it.
  RLM_CHECK(t.max_len < ms->path_cap, RLM_ERR_INVALID_ARGUMENT, err,
            "grammar: its vocabulary has a %u-byte token, the session's scratch holds %u",
            t.max_len, ms->path_cap > 0 ? ms->path_cap - 1 : 0);
  Matcher* trial = &ms->trial;
  // Per root: path, the automaton states of the last token walked from it, at its code point
  // boundaries (byte offsets); a token resumes at the deepest one within the bytes it shares
  // with that token. shared[root]: those bytes (the least lcp since: tokens accepted by their
  // signature, skipped, or of the other root leave the path as it was).
  uint32_t shared[2] = {0, 0};
  for (uint32_t r = 0; r < 2; ++r) {
    ms->path_off[r][0] = 0;
    ms->path_state[r][0] = static_cast<uint8_t>(r);
    ms->n_path[r] = 1;
  }
  uint32_t i = begin;
  while (i < end) {
    const int32_t id = t.sorted[i];
    if (i > begin) {
      const uint32_t l = t.lcp[i];
      if (l < shared[0]) shared[0] = l;
      if (l < shared[1]) shared[1] = l;
    }
    const uint32_t root = room && gi.token_cps[i] <= room ? 1 : 0;
    uint16_t* path_off = ms->path_off[root];
    uint8_t* path_state = ms->path_state[root];
    uint32_t& n_path = ms->n_path[root];
    // Every code point of the token leads the root back to itself: accepted unread.
    const uint64_t sig = gi.token_sig[i];
    const uint64_t unknown = sig & ~ms->loop_known[root];
    if (unknown) RLM_RETURN_IF_ERROR(learn_loop_bits(gi, ms, root, unknown));
    if ((sig & ~ms->loop_sig[root]) == 0) {
      set_bit(bits, id);
      ++i;
      continue;
    }
    const uint8_t* b = t.sorted_bytes + t.sorted_off[i];
    const size_t n = t.sorted_off[i + 1] - t.sorted_off[i];
    while (n_path > 1 && path_off[n_path - 1] > shared[root]) --n_path;
    shared[root] = static_cast<uint32_t>(n);  // this token sets the path
    size_t k = path_off[n_path - 1];
    uint32_t st = path_state[n_path - 1];
    bool decided = false, accepted = false;
    size_t used = 0;  // on rejection: the index of the byte that failed
    if (ms->n_states > 0) {
      while (k < n) {
        uint32_t cp = b[k];
        size_t len = 1;
        uint8_t next = cp < 128 ? ms->ascii_next[st * 128 + cp] : static_cast<uint8_t>(kNextUnknown);
        if (next == kNextUnknown) {
          if (cp >= 128) len = utf8_decode(b + k, n - k, &cp);
          if (cp == kInvalidCp) {
            if (utf8_partial(b + k, n - k)) {
              // Cut by the token's end: allowed when some code point it starts may follow.
              decided = true;
              accepted = walk_partial(ms, st, b + k, n - k);
              used = n;  // rejected as a whole: no skip
            }
            break;  // else invalid: the recognizer rejects it
          }
          RLM_RETURN_IF_ERROR(walk_step(gi, ms, st, cp, &next, err));
        }
        if (next == kNextReject) {
          decided = true;
          used = k + len - 1;
          break;
        }
        if (next == kNextNone) break;
        st = next - kNextState;
        k += len;
        path_off[n_path] = static_cast<uint16_t>(k);
        path_state[n_path] = static_cast<uint8_t>(st);
        ++n_path;
      }
      if (!decided && k == n) decided = accepted = true;
    }
    if (!decided) {
      // The recognizer checks the rest of the token from the state reached so far.
      if (st == 0 && root == 0) matcher_copy(state, trial);
      else matcher_load_key(trial, state_key(ms, st), ms->state_len[st]);
      size_t used_rest = 0;
      RLM_RETURN_IF_ERROR(matcher_accept_bytes(trial, b + k, n - k, &accepted, &used_rest, err));
      used = k + used_rest;
      // A partial UTF-8 character at the token's end must still be able to continue; a token
      // that completes the grammar (no stack left) is allowed.
      if (accepted && trial->pending_len != 0 && !matcher_viable(*trial)) {
        accepted = false;
        used = n;  // rejected as a whole: no skip below
      }
    }
    ++i;
    if (accepted) {
      set_bit(bits, id);
      continue;
    }
    if (used < n) {
      // Every following token that shares bytes [0, used] with this one fails at the same byte:
      // skip that run (a relaxed root accepts at least what the state accepts, so its rejections
      // hold for the state too). Runs can be long (a space and a letter start thousands of
      // tokens): after a few steps, a binary search over the sorted bytes finds the run's end.
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
      // Every lcp in the run is above `used`: the paths stay valid up to used + 1 bytes.
      for (uint32_t& sh : shared) {
        if (sh > used + 1) sh = static_cast<uint32_t>(used + 1);
      }
    }
  }
  return RLM_OK;
}

}  // namespace ringlm::internal
