// Piece look-ups over sorted_ids (see pieces.h).
#include "tokenizer/pieces.h"

#include "tokenizer.h"

namespace ringlm::internal {
namespace tkz {

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

}  // namespace tkz

int32_t token_lookup(const fb::Tokenizer* tok, const char* piece, size_t len) {
  if (!tok || (!piece && len)) return -1;
  return tkz::find_piece(tok, reinterpret_cast<const uint8_t*>(piece), len, ~0u);
}

}  // namespace ringlm::internal
