// Stop strings and the generated-text stream.
//
// The session pushes each generated token's bytes (possibly part of a UTF-8 character) into a
// TextStream, which releases only text that is settled:
//  - UTF-8: bytes are decoded as they arrive. A complete, well-formed character is settled; a
//    well-formed but incomplete sequence at the end waits for the next push. Ill-formed input
//    becomes U+FFFD, one per maximal subpart (Unicode 15, §3.9 "U+FFFD substitution of maximal
//    subparts", the WHATWG decoder's behaviour): a byte that cannot start a sequence is one
//    U+FFFD; a valid lead followed by a byte that cannot continue it is one U+FFFD for the lead
//    and the continuations so far, and the offending byte is then decoded afresh. So released
//    text is always valid UTF-8, and stop strings are matched against that sanitised text.
//  - Stops: if any stop string occurs in the pending (settled, unreleased) text, the earliest
//    occurrence wins: the text before it is released, it and everything after are dropped, and
//    push returns true. Otherwise the longest suffix of the pending text that is a proper prefix
//    of some stop string is held back and everything before it released — exactly the text
//    that can no longer become part of a stop string.
//    Stops are eager: the stream stops on the first push after which any stop string is
//    complete and never waits for a longer one that might still complete. So the released text
//    is independent of how the text was split into pushes, except when one stop string occurs
//    inside another other than at its end (stops "b" and "abc" on "xabc": "xa" when "b" arrives
//    before "c", "x" when "bc" arrives together).
#ifndef RINGLM_RUNTIME_STOP_H_
#define RINGLM_RUNTIME_STOP_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "status.h"

namespace ringlm::internal {

// Up to max_strings stop strings, copied into a byte budget shared by all of them.
struct StopStrings {
  char* bytes;        // [byte_budget] the strings back to back, no terminators
  uint32_t* offset;   // [max_strings] start of string i in bytes
  uint32_t* length;   // [max_strings] length of string i (> 0)
  uint32_t count;     // strings stored
  uint32_t used;      // bytes used in `bytes`
  uint32_t max_len;   // longest stored string (0 when count == 0)
  uint32_t max_strings;
  uint32_t byte_budget;
};

// Reserves the storage; leaves the set empty. Works in measure mode (never touches memory).
void stop_strings_layout(Arena& a, uint32_t max_strings, uint32_t byte_budget, StopStrings* s);

// Copies text[0, len) in. Errors (nothing stored): text NULL or len 0 → RLM_ERR_INVALID_ARGUMENT;
// not well-formed UTF-8 → RLM_ERR_INVALID_UTF8; already max_strings strings, or the bytes do
// not fit in what is left of byte_budget → RLM_ERR_CAPACITY. Duplicates are allowed.
Status stop_strings_add(StopStrings* s, const char* text, size_t len, ErrorSink* err);
void stop_strings_clear(StopStrings* s);

// Streaming UTF-8 decoder state: the bytes of a well-formed but incomplete sequence.
struct Utf8Decoder {
  uint8_t seq[4];
  uint8_t have;  // bytes in seq (0 = between characters)
  uint8_t need;  // total length of the sequence being collected
};

// Pending text and per-step output in one buffer:
//   buf[0, released)     text already returned; the last call's output is its tail (valid
//                        until the next call starts)
//   buf[released, len)   held back: settled UTF-8 that is a proper prefix of a stop string
// A push first moves the held text to the front, appends newly settled text, and returns a
// prefix of buf; finish returns buf[released, len) (plus a U+FFFD) without moving anything.
// Capacity (from layout) = stop_byte_budget + 3 * (max_piece_bytes + 3): the held text is a
// proper prefix of a stop string (< stop_byte_budget bytes), and one push settles at most the
// decoder's <= 3 held bytes plus the piece's bytes, each input byte becoming at most 3 output
// bytes (U+FFFD). A finish right after a push fits too: the bytes the decoder still holds were
// counted in that push's budget (3 each) but not yet written, and their U+FFFD is 3 bytes.
struct TextStream {
  char* buf;          // [cap] see above
  uint32_t cap;
  uint32_t len;
  uint32_t released;
  uint32_t max_piece;  // bytes one push may carry; more are dropped (a caller bug)
  Utf8Decoder dec;
};

// max_piece_bytes: the most bytes one push can carry (the session passes the tokenizer's
// maximum piece length). stop_byte_budget: the StopStrings budget the stream will be used
// with. Works in measure mode. The stream starts empty (text_stream_reset state).
void text_stream_layout(Arena& a, uint32_t stop_byte_budget, uint32_t max_piece_bytes,
                        TextStream* t);

// Drops everything pending, including a partial UTF-8 character (new turn / rewind).
void text_stream_reset(TextStream* t);

// Whether text[0, len) is well-formed UTF-8 (complete sequences only).
bool utf8_valid(const char* text, size_t len);

// Makes *to the same stream as `from` (both laid out with the same budgets): the held text and
// the decoder state. A beam that forks continues its parent's text this way.
void text_stream_copy(const TextStream& from, TextStream* to);

// Appends bytes[0, n) (n <= max_piece_bytes) and releases what is settled (see the top of this
// file) in (*out, *out_len): a pointer into t's buffer, valid until the next call on t; never
// null. Returns true when a stop string matched: the released text is everything before it,
// and the stream is then empty (as after text_stream_reset). `stops` must have been laid out
// with at most the stop_byte_budget given to text_stream_layout.
bool text_stream_push(TextStream* t, const StopStrings& stops, const char* bytes, size_t n,
                      const char** out, size_t* out_len);

// End of turn (end token / max tokens): releases everything pending, a truncated UTF-8
// sequence at the end as one U+FFFD. The stream is then empty.
// Guarantee for a push and a finish in the same step (the max-tokens case): finish moves
// nothing, so its output starts exactly where the push's output ended (*out == push_out +
// push_len) and the push's output stays valid; the two can be reported as one span
// (push_out, push_len + finish_len).
// Returns true when the U+FFFD that replaces an incomplete tail completes a stop string: then only
// the text before it is released.
bool text_stream_finish(TextStream* t, const StopStrings& stops, const char** out,
                        size_t* out_len);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_STOP_H_
