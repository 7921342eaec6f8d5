#include "unicode.h"

namespace ringlm::internal {

namespace {

#include "unicode_tables.inc"

constexpr uint32_t kNumRanges = sizeof(kCpClassRanges) / sizeof(kCpClassRanges[0]);

// ASCII classes, so the common case needs no search.
constexpr CpClass ascii_class(uint32_t c) {
  return (c >= '0' && c <= '9')                              ? CpClass::Number
         : ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')) ? CpClass::Letter
         : (c == ' ' || (c >= 0x09 && c <= 0x0D))             ? CpClass::Space
                                                              : CpClass::Other;
}

}  // namespace

const char* unicode_tables_version() { return RINGLM_UNICODE_VERSION; }

CpClass cp_class(uint32_t cp) {
  if (cp < 0x80) return ascii_class(cp);
  if (cp > 0x10FFFF) return CpClass::Other;
  // Last entry whose start <= cp (entry 0 starts at 0).
  uint32_t lo = 0, hi = kNumRanges;
  while (hi - lo > 1) {
    const uint32_t mid = lo + (hi - lo) / 2;
    if ((kCpClassRanges[mid] >> 2) <= cp) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return static_cast<CpClass>(kCpClassRanges[lo] & 3);
}

size_t utf8_encode(uint32_t cp, uint8_t out[4]) {
  if (cp < 0x80) {
    out[0] = static_cast<uint8_t>(cp);
    return 1;
  }
  if (cp < 0x800) {
    out[0] = static_cast<uint8_t>(0xC0 | (cp >> 6));
    out[1] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = static_cast<uint8_t>(0xE0 | (cp >> 12));
    out[1] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
    out[2] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = static_cast<uint8_t>(0xF0 | (cp >> 18));
  out[1] = static_cast<uint8_t>(0x80 | ((cp >> 12) & 0x3F));
  out[2] = static_cast<uint8_t>(0x80 | ((cp >> 6) & 0x3F));
  out[3] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
  return 4;
}

uint32_t utf8_sequence_length(uint8_t b) {
  if (b < 0x80) return 1;
  if (b >= 0xC2 && b <= 0xDF) return 2;
  if (b >= 0xE0 && b <= 0xEF) return 3;
  if (b >= 0xF0 && b <= 0xF4) return 4;
  return 0;
}

bool utf8_continuation_ok(uint8_t lead, uint32_t idx, uint8_t b) {
  uint8_t lo = 0x80, hi = 0xBF;
  if (idx == 1) {
    if (lead == 0xE0) lo = 0xA0;
    if (lead == 0xED) hi = 0x9F;
    if (lead == 0xF0) lo = 0x90;
    if (lead == 0xF4) hi = 0x8F;
  }
  return b >= lo && b <= hi;
}

size_t utf8_decode(const uint8_t* s, size_t n, uint32_t* cp) {
  const uint8_t c = s[0];
  if (c < 0x80) {
    *cp = c;
    return 1;
  }
  size_t len;
  uint8_t lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  uint32_t v;
  if (c >= 0xC2 && c <= 0xDF) {
    len = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    v = c & 0x0F;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    len = 4;
    v = c & 0x07;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    *cp = kInvalidCp;
    return 1;
  }
  if (n < len || s[1] < lo || s[1] > hi) {
    *cp = kInvalidCp;
    return 1;
  }
  v = (v << 6) | (s[1] & 0x3F);
  for (size_t i = 2; i < len; ++i) {
    if (s[i] < 0x80 || s[i] > 0xBF) {
      *cp = kInvalidCp;
      return 1;
    }
    v = (v << 6) | (s[i] & 0x3F);
  }
  *cp = v;
  return len;
}

CpClass utf8_class(const uint8_t* s, size_t n, size_t* len) {
  if (s[0] < 0x80) {
    *len = 1;
    return ascii_class(s[0]);
  }
  uint32_t cp;
  *len = utf8_decode(s, n, &cp);
  return cp == kInvalidCp ? CpClass::Other : cp_class(cp);
}

}  // namespace ringlm::internal
