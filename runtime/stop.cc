#include "stop.h"

#include <string.h>

namespace ringlm::internal {

namespace {

constexpr uint8_t kReplacement[3] = {0xEF, 0xBF, 0xBD};  // U+FFFD in UTF-8

// Sequence length for a lead byte (Unicode Table 3-7), 0 if it cannot start a sequence
// (continuation bytes 80..BF, overlong leads C0/C1, F5..FF).
inline uint8_t lead_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

// Whether `b` may follow seq[0..have) (have >= 1). Only the second byte has lead-specific
// ranges; they exclude overlongs (E0, F0), surrogates (ED) and values above U+10FFFF (F4).
inline bool continues(const uint8_t* seq, uint8_t have, uint8_t b) {
  uint8_t lo = 0x80, hi = 0xBF;
  if (have == 1) {
    switch (seq[0]) {
      case 0xE0: lo = 0xA0; break;
      case 0xED: hi = 0x9F; break;
      case 0xF0: lo = 0x90; break;
      case 0xF4: hi = 0x8F; break;
      default: break;
    }
  }
  return b >= lo && b <= hi;
}

// Feeds one byte. Writes the bytes it settles to out (at most 6: a U+FFFD for the broken
// sequence, then `b` decoded afresh as ASCII or a U+FFFD) and returns their count; *invalid
// is set when a U+FFFD was produced.
size_t utf8_feed(Utf8Decoder* d, uint8_t b, uint8_t* out, bool* invalid) {
  size_t n = 0;
  if (d->have > 0) {
    if (continues(d->seq, d->have, b)) {
      d->seq[d->have++] = b;
      if (d->have < d->need) return 0;
      memcpy(out, d->seq, d->need);
      n = d->need;
      d->have = 0;
      return n;
    }
    // Maximal subpart ends before b: one U+FFFD for it, then b starts over.
    memcpy(out, kReplacement, 3);
    n = 3;
    *invalid = true;
    d->have = 0;
  }
  const uint8_t len = lead_length(b);
  if (len == 1) {
    out[n++] = b;
  } else if (len == 0) {
    memcpy(out + n, kReplacement, 3);
    n += 3;
    *invalid = true;
  } else {
    d->seq[0] = b;
    d->have = 1;
    d->need = len;
  }
  return n;
}

}  // namespace

bool utf8_valid(const char* text, size_t len) {
  Utf8Decoder d{};
  bool invalid = false;
  uint8_t tmp[6];
  for (size_t i = 0; i < len && !invalid; ++i) {
    utf8_feed(&d, static_cast<uint8_t>(text[i]), tmp, &invalid);
  }
  return !invalid && d.have == 0;
}

namespace {

// Moves the held text to the front, dropping what the previous call returned.
void compact(TextStream* t) {
  if (t->released == 0) return;
  memmove(t->buf, t->buf + t->released, t->len - t->released);
  t->len -= t->released;
  t->released = 0;
}

// Appends settled bytes; never writes past cap (cannot fail when the caller keeps the
// contracts the capacity was computed from).
void append(TextStream* t, const uint8_t* p, size_t n) {
  if (n > t->cap - t->len) n = t->cap - t->len;
  memcpy(t->buf + t->len, p, n);
  t->len += static_cast<uint32_t>(n);
}

}  // namespace

void stop_strings_layout(Arena& a, uint32_t max_strings, uint32_t byte_budget, StopStrings* s) {
  s->bytes = a.alloc<char>(byte_budget, 1);
  s->offset = a.alloc<uint32_t>(max_strings, alignof(uint32_t));
  s->length = a.alloc<uint32_t>(max_strings, alignof(uint32_t));
  s->max_strings = max_strings;
  s->byte_budget = byte_budget;
  stop_strings_clear(s);
}

Status stop_strings_add(StopStrings* s, const char* text, size_t len, ErrorSink* err) {
  RLM_CHECK(text != nullptr && len > 0, RLM_ERR_INVALID_ARGUMENT, err,
            "stop string is empty or NULL");
  RLM_CHECK(utf8_valid(text, len), RLM_ERR_INVALID_UTF8, err,
            "stop string is not valid UTF-8");
  RLM_CHECK(s->count < s->max_strings, RLM_ERR_CAPACITY, err,
            "already %u stop strings (max_stop_strings)", s->max_strings);
  RLM_CHECK(len <= s->byte_budget - s->used, RLM_ERR_CAPACITY, err,
            "stop string of %zu bytes does not fit: %u of %u bytes left (stop_string_bytes)", len,
            s->byte_budget - s->used, s->byte_budget);
  memcpy(s->bytes + s->used, text, len);
  s->offset[s->count] = s->used;
  s->length[s->count] = static_cast<uint32_t>(len);
  ++s->count;
  s->used += static_cast<uint32_t>(len);
  if (len > s->max_len) s->max_len = static_cast<uint32_t>(len);
  return RLM_OK;
}

void stop_strings_clear(StopStrings* s) {
  s->count = 0;
  s->used = 0;
  s->max_len = 0;
}

void text_stream_layout(Arena& a, uint32_t stop_byte_budget, uint32_t max_piece_bytes,
                        TextStream* t) {
  // See TextStream: held text < stop_byte_budget, plus <= 3 * (max_piece_bytes + 3) settled per
  // push. Computed in 64 bits and saturated so absurd budgets fail the arena, not wrap.
  uint64_t cap = static_cast<uint64_t>(stop_byte_budget) +
                 3 * (static_cast<uint64_t>(max_piece_bytes) + 3);
  if (cap > UINT32_MAX) cap = UINT32_MAX;
  t->buf = a.alloc<char>(static_cast<size_t>(cap), 1);
  t->cap = static_cast<uint32_t>(cap);
  t->max_piece = max_piece_bytes;
  text_stream_reset(t);
}

void text_stream_copy(const TextStream& from, TextStream* to) {
  if (&from == to) return;
  if (from.len) memcpy(to->buf, from.buf, from.len);
  to->len = from.len;
  to->released = from.released;
  to->dec = from.dec;
}

void text_stream_reset(TextStream* t) {
  t->len = 0;
  t->released = 0;
  t->dec = Utf8Decoder{};
}

bool text_stream_push(TextStream* t, const StopStrings& stops, const char* bytes, size_t n,
                      const char** out, size_t* out_len) {
  compact(t);
  if (n > t->max_piece) n = t->max_piece;
  uint8_t tmp[6];
  bool invalid = false;
  for (size_t i = 0; i < n; ++i) {
    const uint8_t b = static_cast<uint8_t>(bytes[i]);
    if (t->dec.have == 0 && b < 0x80) {  // ASCII fast path
      append(t, &b, 1);
      continue;
    }
    append(t, tmp, utf8_feed(&t->dec, b, tmp, &invalid));
  }

  const char* text = t->buf;
  const uint32_t len = t->len;
  *out = t->buf;

  // Earliest occurrence of any stop string. The held text alone holds no complete match (the
  // previous call would have stopped), but a match may start anywhere in it.
  for (uint32_t i = 0; i < len; ++i) {
    for (uint32_t k = 0; k < stops.count; ++k) {
      const uint32_t sl = stops.length[k];
      if (sl <= len - i && memcmp(text + i, stops.bytes + stops.offset[k], sl) == 0) {
        *out_len = i;
        // Everything from the match on is dropped; the returned prefix stays in place until
        // the next call compacts (nothing is held, so that just empties the buffer).
        t->released = i;
        t->len = i;
        t->dec = Utf8Decoder{};
        return true;
      }
    }
  }

  // Longest suffix that is a proper prefix of some stop string (shorter than max_len).
  uint32_t hold = 0;
  const uint32_t longest = stops.max_len > 0 ? stops.max_len - 1 : 0;
  for (uint32_t start = len > longest ? len - longest : 0; start < len && hold == 0; ++start) {
    const uint32_t tail = len - start;
    for (uint32_t k = 0; k < stops.count; ++k) {
      if (stops.length[k] > tail &&
          memcmp(text + start, stops.bytes + stops.offset[k], tail) == 0) {
        hold = tail;
        break;
      }
    }
  }
  t->released = len - hold;
  *out_len = t->released;
  return false;
}

bool text_stream_finish(TextStream* t, const StopStrings& stops, const char** out,
                        size_t* out_len) {
  // No compaction: the output continues the previous call's output in memory (see stop.h).
  // It fits: the decoder's held bytes were part of the last push's input, which the capacity
  // already budgets at 3 output bytes each, and their U+FFFD is at most 3 bytes.
  const bool replaced = t->dec.have > 0;
  if (replaced) append(t, kReplacement, 3);
  t->dec = Utf8Decoder{};
  *out = t->buf + t->released;
  // The U+FFFD may complete a stop string that starts in the held text (released text was
  // already proven not to start one), so match again before releasing.
  if (replaced) {
    for (uint32_t i = t->released; i < t->len; ++i) {
      for (uint32_t k = 0; k < stops.count; ++k) {
        const uint32_t sl = stops.length[k];
        if (sl <= t->len - i && memcmp(t->buf + i, stops.bytes + stops.offset[k], sl) == 0) {
          *out_len = i - t->released;
          t->len = i;
          t->released = i;
          return true;
        }
      }
    }
  }
  *out_len = t->len - t->released;
  t->released = t->len;
  return false;
}

}  // namespace ringlm::internal
