#include "grammar/compiled.h"

#include <string.h>

#include "model.h"
#include "model_generated.h"
#include "tokenizer.h"
#include "unicode.h"

namespace ringlm::internal {

namespace {

inline void clear_bit(uint64_t* bits, int32_t id) {
  bits[static_cast<uint32_t>(id) >> 6] &= ~(1ull << (static_cast<uint32_t>(id) & 63));
}

// What one code point does to the walk's state: unknown yet, leads back to the same state,
// rejected, or leads elsewhere.
enum : uint8_t { kCpUnknown = 0, kCpLoop, kCpReject, kCpOther };

// The effect of code point cp on `state` (no partial code point pending), remembered per walk.
Status cp_effect(const Matcher& state, MaskScratch* ms, uint32_t cp, uint8_t* cls,
                 ErrorSink* err) {
  uint8_t* slot = nullptr;
  if (cp < 128) {
    slot = &ms->cp_ascii[cp];
  } else {
    uint32_t h = (cp * 2654435761u) >> 23 & (kCpMemo - 1);
    for (uint32_t probe = 0; probe < 8; ++probe, h = (h + 1) & (kCpMemo - 1)) {
      if (ms->cp_key[h] == cp + 1) {
        slot = &ms->cp_class[h];
        break;
      }
      if (ms->cp_key[h] == 0) {
        ms->cp_key[h] = cp + 1;
        ms->cp_class[h] = kCpUnknown;
        slot = &ms->cp_class[h];
        break;
      }
    }
  }
  if (slot && *slot != kCpUnknown) {
    *cls = *slot;
    return RLM_OK;
  }
  matcher_copy(state, &ms->trial);
  bool ok = false;
  RLM_RETURN_IF_ERROR(matcher_accept_cp(&ms->trial, cp, &ok, err));
  *cls = !ok ? kCpReject : matcher_same_state(ms->trial, state) ? kCpLoop : kCpOther;
  if (slot) *slot = *cls;
  return RLM_OK;
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
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && gi && gmem, RLM_ERR_BUFFER_TOO_SMALL, err,
            "grammar: memory too small (%zu bytes needed)", a.used());
  Arena ga(gmem, gbnf);
  const Grammar* g = nullptr;
  RLM_RETURN_IF_ERROR(gbnf_compile(text, len, ga, &g, err));
  gi->self = gi;
  gi->model = &model;
  gi->g = g;
  gi->tokens = table;
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

void mask_scratch_layout(Arena& a, uint32_t vocab, size_t state_bytes, size_t cache_bytes,
                         MaskScratch* ms) {
  matcher_layout(a, nullptr, state_bytes, &ms->trial);
  ms->bits = a.alloc<uint64_t>((static_cast<size_t>(vocab) + 63) / 64);
  ms->key = a.alloc<uint32_t>(kMaskKeyWords);
  ms->cp_ascii = a.alloc<uint8_t>(128);
  ms->cp_key = a.alloc<uint32_t>(kCpMemo);
  ms->cp_class = a.alloc<uint8_t>(kCpMemo);
  mask_cache_layout(a, vocab, cache_bytes, &ms->cache);
}

Status grammar_mask_bits(const GrammarImpl& gi, const Matcher& state, MaskScratch* ms,
                         uint64_t* bits, ErrorSink* err) {
  const TokenTable& t = gi.tokens;
  memset(bits, 0xFF, sizeof(uint64_t) * ((t.vocab + 63) / 64));
  memset(ms->cp_ascii, kCpUnknown, 128);
  memset(ms->cp_key, 0, sizeof(uint32_t) * kCpMemo);
  uint64_t first[4];
  matcher_next_bytes(state, first);
  for (uint32_t byte = 0; byte < 256; ++byte) {
    uint32_t i = t.first_begin[byte];
    const uint32_t end = t.first_begin[byte + 1];
    if (i == end) continue;
    if (!(first[byte >> 6] >> (byte & 63) & 1)) {
      // No open parse takes this byte: the whole group is out, unchecked.
      for (; i < end; ++i) clear_bit(bits, t.sorted[i]);
      continue;
    }
    RLM_RETURN_IF_ERROR(grammar_mask_range(t, state, ms, i, end, bits, err));
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

Status grammar_mask_range(const TokenTable& t, const Matcher& state, MaskScratch* ms,
                          uint32_t begin, uint32_t end, uint64_t* bits, ErrorSink* err) {
  Matcher* trial = &ms->trial;
  uint32_t i = begin;
  while (i < end) {
    const int32_t id = t.sorted[i];
    const uint8_t* b = t.data(id);
    const size_t n = t.length(id);
    // Fast path: code points that lead from the state back to itself (a JSON string's ordinary
    // characters, a repetition's loop) cost a table lookup each; the token's remaining bytes are
    // checked from the state at the first code point that does something else.
    size_t k = 0;
    bool decided = false, accepted = false;
    size_t used = 0;  // on rejection: the index of the byte that failed
    if (!state.pending_len) {
      while (k < n) {
        uint32_t cp = 0;
        const size_t len = utf8_decode(b + k, n - k, &cp);
        if (cp == kInvalidCp) break;  // invalid or cut at the token's end: the matcher decides
        uint8_t cls = kCpUnknown;
        RLM_RETURN_IF_ERROR(cp_effect(state, ms, cp, &cls, err));
        if (cls == kCpLoop) {
          k += len;
          continue;
        }
        if (cls == kCpReject) {
          decided = true;
          used = k + len - 1;
        }
        break;
      }
      if (k == n) decided = accepted = true;
    }
    if (!decided) {
      matcher_copy(state, trial);
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
    if (accepted) continue;
    clear_bit(bits, id);
    if (used < n) {
      // Every following token that shares bytes [0, used] with this one fails at the same byte.
      while (i < end && t.lcp[i] > used) clear_bit(bits, t.sorted[i++]);
    }
  }
  return RLM_OK;
}

}  // namespace ringlm::internal
