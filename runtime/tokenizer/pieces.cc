// Piece look-ups over sorted_ids (see pieces.h).
#include "tokenizer/pieces.h"

#include "tokenizer.h"
#include "unicode.h"

namespace ringlm::internal {
namespace tkz {
namespace {

// compare_piece against the GPT-2 character form of w[0, n), produced byte by byte.
int compare_piece_gpt2(const flatbuffers::String* p, const uint8_t* w, size_t n) {
  const uint8_t* ps = reinterpret_cast<const uint8_t*>(p->data());
  const size_t pn = p->size();
  size_t i = 0;
  for (size_t k = 0; k < n; ++k) {
    uint8_t c[2];
    const size_t cl = gpt2_byte_to_utf8(w[k], c);
    for (size_t t = 0; t < cl; ++t, ++i) {
      if (i == pn) return -1;  // the piece is a proper prefix: shorter first
      if (ps[i] != c[t]) return ps[i] < c[t] ? -1 : 1;
    }
  }
  return i < pn ? 1 : 0;
}

// Lower bound of the key in sorted_ids by `cmp(piece)` (<0, 0, >0 as piece <, ==, > key), then
// the first id of the run of equal pieces whose type is in `type_mask`.
template <typename Cmp>
int32_t find_with(const fb::Tokenizer* tok, const Cmp& cmp, uint32_t type_mask) {
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
    if (cmp(pieces->Get(id)) < 0) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  for (uint32_t i = lo; i < count; ++i) {
    const uint32_t id = sorted->Get(i);
    if (id >= vocab || cmp(pieces->Get(id)) != 0) break;
    if (type_bit(tok, id) & type_mask) return static_cast<int32_t>(id);
  }
  return -1;
}

}  // namespace

int32_t find_piece(const fb::Tokenizer* tok, const uint8_t* s, size_t n, uint32_t type_mask) {
  return find_with(
      tok, [s, n](const flatbuffers::String* p) { return compare_piece(p, s, n); }, type_mask);
}

int32_t find_piece_gpt2(const fb::Tokenizer* tok, const uint8_t* w, size_t n,
                        uint32_t type_mask) {
  return find_with(
      tok, [w, n](const flatbuffers::String* p) { return compare_piece_gpt2(p, w, n); },
      type_mask);
}

int32_t find_byte_token(const fb::Tokenizer* tok, uint8_t b) {
  static const char kHex[] = "0123456789ABCDEF";
  const uint8_t piece[6] = {'<', '0', 'x', static_cast<uint8_t>(kHex[b >> 4]),
                            static_cast<uint8_t>(kHex[b & 15]), '>'};
  return find_piece(tok, piece, sizeof(piece), kTypeByte);
}

}  // namespace tkz

int32_t token_lookup(const fb::Tokenizer* tok, const char* piece, size_t len) {
  if (!tok || (!piece && len)) return -1;
  return tkz::find_piece(tok, reinterpret_cast<const uint8_t*>(piece), len, ~0u);
}

}  // namespace ringlm::internal
