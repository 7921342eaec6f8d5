// Piece-table look-ups shared by the encoders, verification and decoding: piece order, token
// type bits, the piece -> id search over sorted_ids, and the output sink every encoder appends
// to. Internal to runtime/tokenizer* (tools use runtime/tokenizer.h).
//
// PIECE LOOK-UP: binary search in sorted_ids (ids ordered by piece bytes, memcmp on the common
// prefix, shorter first), then a scan over the run of equal pieces for an acceptable type.
#ifndef RINGLM_RUNTIME_TOKENIZER_PIECES_H_
#define RINGLM_RUNTIME_TOKENIZER_PIECES_H_

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "model_generated.h"

namespace ringlm::internal {
namespace tkz {

// Type bits (1 << TokenType) for look-up masks.
constexpr uint32_t type_mask(fb::TokenType t) { return 1u << static_cast<uint32_t>(t); }
constexpr uint32_t kTypeNormal = type_mask(fb::TokenType::Normal);
constexpr uint32_t kTypeUnknown = type_mask(fb::TokenType::Unknown);
constexpr uint32_t kTypeControl = type_mask(fb::TokenType::Control);
constexpr uint32_t kTypeUserDefined = type_mask(fb::TokenType::UserDefined);
constexpr uint32_t kTypeByte = type_mask(fb::TokenType::Byte);
// Pieces merging and look-up produce (SentencePiece's rule; the others are reserved).
constexpr uint32_t kTypeMergeable = kTypeNormal | kTypeUserDefined;
// ByteLevel special tokens (kTokenizeParseSpecial).
constexpr uint32_t kTypeSpecial = kTypeControl | kTypeUserDefined;

// Order of pieces: memcmp on the common prefix, then shorter first. <0, 0, >0 as p <, ==, > s.
inline int compare_piece(const flatbuffers::String* p, const uint8_t* s, size_t n) {
  const size_t pn = p->size();
  const size_t m = pn < n ? pn : n;
  const int c = m ? memcmp(p->data(), s, m) : 0;
  if (c != 0) return c;
  return pn < n ? -1 : (pn > n ? 1 : 0);
}

// The type bit of token `id`, 0 when the types table lacks it or the type is not < 32.
inline uint32_t type_bit(const fb::Tokenizer* tok, uint32_t id) {
  const auto* types = tok->types();
  if (!types || id >= types->size()) return 0;
  const uint32_t t = static_cast<uint32_t>(types->Get(id));
  return t < 32 ? 1u << t : 0;
}

// Piece of a verified id (id < vocab_size).
inline const flatbuffers::String* piece_of(const fb::Tokenizer* tok, uint32_t id) {
  return tok->pieces()->Get(id);
}

// First id (in sorted_ids order) whose piece equals s[0, n) and whose type is in `type_mask`,
// or -1. Safe on unverified tables (never indexes out of range). O(log V) + the run of equal
// pieces.
int32_t find_piece(const fb::Tokenizer* tok, const uint8_t* s, size_t n, uint32_t type_mask);

// find_piece for the GPT-2 character form of the bytes w[0, n) (each byte as its 1- or 2-byte
// UTF-8 character, unicode.h gpt2_byte_to_utf8), compared as it is produced: no buffer, so a
// word of any length is looked up.
int32_t find_piece_gpt2(const fb::Tokenizer* tok, const uint8_t* w, size_t n, uint32_t type_mask);

// The Byte-type token "<0xNN>" of byte b, or -1.
int32_t find_byte_token(const fb::Tokenizer* tok, uint8_t b);

// Where an encoder appends ids: ids[0, cap) is written, count goes on past cap so the caller
// learns the size needed (RLM_ERR_CAPACITY).
struct TokenOut {
  int32_t* ids;  // (cap) caller's output
  size_t cap;
  size_t count;  // ids produced so far, may exceed cap

  void push(int32_t id) {
    if (count < cap) ids[count] = id;
    ++count;
  }
};

}  // namespace tkz
}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_TOKENIZER_PIECES_H_
