#include "grammar/mask_cache.h"

#include <string.h>

namespace ringlm::internal {

size_t mask_cache_entry_bytes(uint32_t vocab) {
  const size_t words = (static_cast<size_t>(vocab) + 63) / 64;
  return words * 8 + kMaskKeyWords * 4 + 4 + 8 + 1;
}

void mask_cache_layout(Arena& a, uint32_t vocab, size_t bytes, MaskCache* c) {
  const size_t per = mask_cache_entry_bytes(vocab);
  // Alignment padding of the five arrays: at most 5 x 64 bytes.
  const size_t n = bytes > 5 * kArenaAlignment ? (bytes - 5 * kArenaAlignment) / per : 0;
  c->n_entries = n > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(n);
  c->words = (vocab + 63) / 64;
  c->bits = c->n_entries ? a.alloc<uint64_t>(static_cast<size_t>(c->n_entries) * c->words) : nullptr;
  c->keys = c->n_entries ? a.alloc<uint32_t>(static_cast<size_t>(c->n_entries) * kMaskKeyWords) : nullptr;
  c->key_len = c->n_entries ? a.alloc<uint32_t>(c->n_entries) : nullptr;
  c->key_hash = c->n_entries ? a.alloc<uint64_t>(c->n_entries) : nullptr;
  c->referenced = c->n_entries ? a.alloc<uint8_t>(c->n_entries) : nullptr;
  if (c->key_len) mask_cache_clear(c, nullptr);
}

void mask_cache_clear(MaskCache* c, const void* owner) {
  if (c->n_entries) {
    memset(c->key_len, 0, sizeof(uint32_t) * c->n_entries);
    memset(c->referenced, 0, c->n_entries);
  }
  c->hand = 0;
  c->owner = owner;
  c->hits = c->misses = 0;
}

const uint64_t* mask_cache_lookup(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash) {
  for (uint32_t e = 0; e < c->n_entries; ++e) {
    if (c->key_len[e] == len && c->key_hash[e] == hash &&
        memcmp(c->keys + static_cast<size_t>(e) * kMaskKeyWords, key, len * sizeof(uint32_t)) == 0) {
      c->referenced[e] = 1;
      return c->bits + static_cast<size_t>(e) * c->words;
    }
  }
  return nullptr;
}

const uint64_t* mask_cache_find(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash) {
  const uint64_t* bits = mask_cache_lookup(c, key, len, hash);
  ++(bits ? c->hits : c->misses);
  return bits;
}

uint64_t* mask_cache_insert(MaskCache* c, const uint32_t* key, uint32_t len, uint64_t hash) {
  if (c->n_entries == 0) return nullptr;
  // Clock: the first entry from the hand that is free or not referenced since the last sweep.
  uint32_t e = c->hand;
  while (c->key_len[e] != 0 && c->referenced[e]) {
    c->referenced[e] = 0;
    e = (e + 1) % c->n_entries;
  }
  c->hand = (e + 1) % c->n_entries;
  memcpy(c->keys + static_cast<size_t>(e) * kMaskKeyWords, key, len * sizeof(uint32_t));
  c->key_len[e] = len;
  c->key_hash[e] = hash;
  c->referenced[e] = 1;
  return c->bits + static_cast<size_t>(e) * c->words;
}

}  // namespace ringlm::internal
