#include "grammar/token_table.h"

#include <string.h>

#include <algorithm>

#include "model_generated.h"
#include "tokenizer.h"
#include "tokenizer/limits.h"

namespace ringlm::internal {

static_assert(kMaxPieceBytes <= 0xFFFF, "lcp and the mask walk's path offsets are 16-bit");

namespace {

// A token id that is not BOS, as `prev` for token_text: the bytes a token adds mid-text.
int32_t mid_text_prev(const fb::Tokenizer* tok, uint32_t vocab) {
  const int32_t bos = tok->bos_id();
  return bos == 0 && vocab > 1 ? 1 : 0;
}

// Orders token ids by their bytes (memcmp, a prefix first), ties by id.
struct ByBytes {
  const uint8_t* bytes;
  const uint32_t* offset;
  bool operator()(int32_t a, int32_t b) const {
    const uint32_t la = offset[a + 1] - offset[a], lb = offset[b + 1] - offset[b];
    const int c = memcmp(bytes + offset[a], bytes + offset[b], la < lb ? la : lb);
    if (c != 0) return c < 0;
    if (la != lb) return la < lb;
    return a < b;
  }
};

// A token's two-byte group key: its first two bytes, or 65536 + its byte when it has one.
uint32_t two_key(const uint8_t* b, uint32_t len) {
  return len >= 2 ? (static_cast<uint32_t>(b[0]) << 8 | b[1]) : 65536u + b[0];
}

}  // namespace

Status token_table_layout(Arena& a, const fb::Tokenizer* tok, uint32_t vocab, TokenTable* out,
                          ErrorSink* err) {
  RLM_CHECK(tok != nullptr && vocab > 0, RLM_ERR_INVALID_ARGUMENT, err,
            "token table: no tokenizer");
  const int32_t prev = mid_text_prev(tok, vocab);
  // Total bytes and the number of two-byte groups first, in both modes: the table's size depends
  // on them. (The groups are counted from each token's first two bytes.)
  uint64_t total = 0;
  uint32_t max_len = 0;
  uint64_t seen[(65536 + 256) / 64] = {};  // two-byte group keys met
  uint32_t n_two = 0;
  for (uint32_t id = 0; id < vocab; ++id) {
    char head[2];  // token_text writes the first bytes and returns the whole size
    const size_t n = token_text(tok, prev, static_cast<int32_t>(id), head, sizeof head);
    total += n;
    if (n > max_len) max_len = static_cast<uint32_t>(n);
    if (n == 0) continue;
    const uint32_t key = two_key(reinterpret_cast<const uint8_t*>(head), static_cast<uint32_t>(n));
    if (!(seen[key >> 6] >> (key & 63) & 1)) {
      seen[key >> 6] |= 1ull << (key & 63);
      ++n_two;
    }
  }
  RLM_CHECK(total <= UINT32_MAX, RLM_ERR_MODEL_TOKENIZER, err,
            "token table: the vocabulary's text is %llu bytes (over 4 GiB)",
            static_cast<unsigned long long>(total));
  uint8_t* bytes = a.alloc<uint8_t>(static_cast<size_t>(total), 1);
  uint32_t* offset = a.alloc<uint32_t>(static_cast<size_t>(vocab) + 1);
  int32_t* sorted = a.alloc<int32_t>(vocab);
  uint8_t* sorted_bytes = a.alloc<uint8_t>(static_cast<size_t>(total), 1);
  uint32_t* sorted_off = a.alloc<uint32_t>(static_cast<size_t>(vocab) + 1);
  uint16_t* lcp = a.alloc<uint16_t>(vocab);
  uint32_t* first_begin = a.alloc<uint32_t>(257);
  uint32_t* two_begin = a.alloc<uint32_t>(static_cast<size_t>(n_two) + 1);
  uint32_t* first_two = a.alloc<uint32_t>(257);
  out->vocab = vocab;
  out->max_len = max_len;
  out->n_two = n_two;
  if (a.measuring()) return RLM_OK;
  RLM_CHECK(a.ok() && bytes && offset && sorted && sorted_bytes && sorted_off && lcp && first_begin &&
                two_begin && first_two,
            RLM_ERR_BUFFER_TOO_SMALL, err,
            "token table: the grammar's memory is too small (%zu bytes used so far)", a.used());

  uint32_t at = 0;
  for (uint32_t id = 0; id < vocab; ++id) {
    offset[id] = at;
    at += static_cast<uint32_t>(
        token_text(tok, prev, static_cast<int32_t>(id), reinterpret_cast<char*>(bytes + at),
                   static_cast<size_t>(total - at)));
    sorted[id] = static_cast<int32_t>(id);
  }
  offset[vocab] = at;
  std::sort(sorted, sorted + vocab, ByBytes{bytes, offset});
  uint32_t n_empty = 0;
  for (uint32_t i = 0; i < vocab; ++i) {
    const int32_t id = sorted[i];
    if (offset[id + 1] == offset[id]) ++n_empty;
    uint32_t l = 0;
    if (i > 0) {
      const int32_t p = sorted[i - 1];
      const uint32_t lp = offset[p + 1] - offset[p], li = offset[id + 1] - offset[id];
      const uint32_t m = lp < li ? lp : li;
      while (l < m && bytes[offset[p] + l] == bytes[offset[id] + l]) ++l;
    }
    lcp[i] = static_cast<uint16_t>(l);  // <= kMaxPieceBytes, which fits 16 bits
  }
  // Empty tokens sort first; then tokens are grouped by their first byte.
  uint32_t i = n_empty;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    first_begin[byte] = i;
    while (i < vocab && bytes[offset[sorted[i]]] == byte) ++i;
  }
  first_begin[256] = vocab;
  uint32_t so = 0;
  for (uint32_t k = 0; k < vocab; ++k) {
    const int32_t id = sorted[k];
    const uint32_t len = offset[id + 1] - offset[id];
    sorted_off[k] = so;
    memcpy(sorted_bytes + so, bytes + offset[id], len);
    so += len;
  }
  sorted_off[vocab] = so;
  // Two-byte groups in sorted order (keys of equal first bytes are contiguous there).
  uint32_t k = 0;
  for (uint32_t j = n_empty; j < vocab; ++j) {
    const uint32_t len = sorted_off[j + 1] - sorted_off[j];
    const uint32_t key = two_key(sorted_bytes + sorted_off[j], len);
    const uint32_t prev_key =
        j > n_empty ? two_key(sorted_bytes + sorted_off[j - 1], sorted_off[j] - sorted_off[j - 1])
                    : UINT32_MAX;
    if (key != prev_key) two_begin[k++] = j;
  }
  RLM_CHECK(k == n_two, RLM_ERR_INTERNAL, err, "token table: %u two-byte groups, counted %u", k,
            n_two);
  two_begin[n_two] = vocab;
  k = 0;
  for (uint32_t byte = 0; byte < 256; ++byte) {
    first_two[byte] = k;
    while (k < n_two && sorted_bytes[sorted_off[two_begin[k]]] == byte) ++k;
  }
  first_two[256] = n_two;
  out->two_begin = two_begin;
  out->first_two = first_two;
  out->sorted_bytes = sorted_bytes;
  out->sorted_off = sorted_off;
  out->bytes = bytes;
  out->first_begin = first_begin;
  out->offset = offset;
  out->sorted = sorted;
  out->lcp = lcp;
  out->n_empty = n_empty;
  return RLM_OK;
}

}  // namespace ringlm::internal
