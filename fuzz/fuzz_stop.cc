// The stop-string matcher and the UTF-8 text stream (runtime/stop.h) against a reference.
//
// Input: stop strings (some invalid, refused), a byte budget, a max piece size, then the bytes of
// a generation split into random pushes. Properties:
//  - every released chunk is valid UTF-8;
//  - without a stop: the released text equals the reference decoding of all bytes (U+FFFD per
//    maximal subpart) and holds no stop string before the final flush;
//  - with a stop: the released text is a prefix of the reference decoding, followed there by a
//    stop string, and holds no stop string itself;
//  - split independence: the same bytes pushed one byte at a time give the same text and stop
//    outcome whenever no stop string occurs inside another other than at its end (stop.h's
//    documented exception).
#include <vector>

#include "fuzz_common.h"
#include "stop.h"

using namespace ringlm_fuzz;
using ringlm::internal::Arena;
using ringlm::internal::StopStrings;
using ringlm::internal::TextStream;

namespace {

const char kFFFD[] = "\xEF\xBF\xBD";

// Reference streaming decoder (Unicode "maximal subpart" substitution), written independently
// of stop.cc. final: an incomplete sequence at the end becomes U+FFFD (else it is not output).
std::string ref_decode(const std::string& s, bool final) {
  std::string out;
  const uint8_t* p = reinterpret_cast<const uint8_t*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    const uint8_t b = p[i];
    if (b < 0x80) {
      out += static_cast<char>(b);
      ++i;
      continue;
    }
    size_t len = 0;
    uint8_t lo = 0x80, hi = 0xBF;
    if (b >= 0xC2 && b <= 0xDF) len = 2;
    else if (b >= 0xE0 && b <= 0xEF) len = 3;
    else if (b >= 0xF0 && b <= 0xF4) len = 4;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
    if (len == 0) {
      out += kFFFD;
      ++i;
      continue;
    }
    size_t j = 1;
    while (j < len && i + j < n) {
      const uint8_t c = p[i + j];
      const bool ok = j == 1 ? (c >= lo && c <= hi) : (c >= 0x80 && c <= 0xBF);
      if (!ok) break;
      ++j;
    }
    if (j == len) {
      out.append(s, i, len);
      i += len;
    } else if (i + j == n) {
      if (final) out += kFFFD;
      i = n;
    } else {
      out += kFFFD;
      i += j;
    }
  }
  return out;
}

struct Outcome {
  std::string text;
  bool stopped = false;
  size_t stop_push = 0;      // index of the push that stopped
  std::string pushed;        // bytes pushed up to and including the stopping push
  std::string before_finish; // released text before the final flush (no stop)
  bool at_finish = false;    // the stop came from the final flush
};

Outcome run(const std::vector<std::string>& stops_in, uint32_t budget, uint32_t max_strings,
            uint32_t max_piece, const std::vector<std::string>& pushes,
            std::vector<std::string>* accepted) {
  Arena measure(nullptr, 0);
  StopStrings st0;
  TextStream ts0;
  ringlm::internal::stop_strings_layout(measure, max_strings, budget, &st0);
  ringlm::internal::text_stream_layout(measure, budget, max_piece, &ts0);
  static Aligned mem;
  mem.resize_fill(measure.used(), 0xCC);
  Arena a(mem.data(), measure.used());
  StopStrings stops;
  TextStream ts;
  ringlm::internal::stop_strings_layout(a, max_strings, budget, &stops);
  ringlm::internal::text_stream_layout(a, budget, max_piece, &ts);
  FUZZ_CHECK(a.ok(), "arena");
  char errbuf[256];
  ringlm::internal::ErrorSink err{errbuf, sizeof errbuf};
  for (const std::string& s : stops_in) {
    const rlm_status r = ringlm::internal::stop_strings_add(&stops, s.data(), s.size(), &err);
    if (r == RLM_OK) {
      FUZZ_CHECK(!s.empty() && valid_utf8(s.data(), s.size()), "accepted a bad stop string");
      if (accepted) accepted->push_back(s);
    } else if (r == RLM_ERR_INVALID_UTF8) {
      FUZZ_CHECK(!valid_utf8(s.data(), s.size()), "refused a valid stop string");
    } else {
      FUZZ_CHECK(r == RLM_ERR_INVALID_ARGUMENT || r == RLM_ERR_CAPACITY, "add status %d", r);
    }
  }
  Outcome o;
  for (size_t k = 0; k < pushes.size(); ++k) {
    const char* out = nullptr;
    size_t len = 0;
    o.pushed += pushes[k];
    const bool hit = ringlm::internal::text_stream_push(&ts, stops, pushes[k].data(), pushes[k].size(), &out, &len);
    FUZZ_CHECK(out != nullptr, "null output");
    FUZZ_CHECK(valid_utf8(out, len), "push released invalid UTF-8");
    o.text.append(out, len);
    if (hit) {
      o.stopped = true;
      o.stop_push = k;
      return o;
    }
  }
  o.before_finish = o.text;
  const char* out = nullptr;
  size_t len = 0;
  if (ringlm::internal::text_stream_finish(&ts, stops, &out, &len)) {
    o.stopped = true;  // the end-of-turn U+FFFD completed a stop string
    o.at_finish = true;
    o.stop_push = pushes.size();
  }
  FUZZ_CHECK(valid_utf8(out, len), "finish released invalid UTF-8");
  o.text.append(out, len);
  return o;
}

bool contains_any(const std::string& t, const std::vector<std::string>& stops) {
  for (const std::string& s : stops) {
    if (t.find(s) != std::string::npos) return true;
  }
  return false;
}

// stop.h's exception: some stop string occurs inside another other than as its suffix.
bool nested_stops(const std::vector<std::string>& stops) {
  for (const std::string& a : stops) {
    for (const std::string& b : stops) {
      if (a == b || b.size() > a.size()) continue;
      for (size_t at = a.find(b); at != std::string::npos; at = a.find(b, at + 1)) {
        if (at + b.size() != a.size()) return true;
      }
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  Reader in(data, size);
  const uint32_t n_stops = in.range(0, 5);
  const uint32_t budget = in.range(0, 40);
  const uint32_t max_strings = in.range(0, 5);
  const uint32_t max_piece = in.range(1, 24);
  std::vector<std::string> stops;
  for (uint32_t i = 0; i < n_stops; ++i) stops.push_back(in.bytes(10));
  // The generated bytes and their split into pushes of at most max_piece bytes.
  const std::string splits = in.bytes(64);
  const std::string text = in.rest();
  std::vector<std::string> pushes;
  size_t at = 0, k = 0;
  while (at < text.size()) {
    size_t len = splits.empty() ? 1 : static_cast<uint8_t>(splits[k++ % splits.size()]) % (max_piece + 1);
    if (len > text.size() - at) len = text.size() - at;
    pushes.push_back(text.substr(at, len));  // empty pushes included
    at += len;
    if (pushes.size() > 4 * text.size() + 16) break;
  }
  for (; at < text.size(); at += max_piece) pushes.push_back(text.substr(at, max_piece));
  std::vector<std::string> accepted;
  const Outcome o = run(stops, budget, max_strings, max_piece, pushes, &accepted);

  if (!o.stopped) {
    const std::string ref = ref_decode(o.pushed, true);
    FUZZ_CHECK(o.text == ref, "released text differs from the reference decoding");
    FUZZ_CHECK(!contains_any(o.before_finish, accepted), "a stop string was released");
    // The final flush's U+FFFD must not complete a stop string either (found by this target:
    // fuzz/regressions/stop/finish-fffd-completes-stop).
    FUZZ_CHECK(!contains_any(o.text, accepted), "the final flush released a stop string");
    FUZZ_CHECK(!contains_any(ref_decode(o.pushed, false), accepted), "a complete stop string did not stop");
  } else {
    const std::string settled = ref_decode(o.pushed, o.at_finish);
    FUZZ_CHECK(settled.compare(0, o.text.size(), o.text) == 0, "stopped text is not a prefix");
    FUZZ_CHECK(!contains_any(o.text, accepted), "a stop string was released before the stop");
    bool follows = false;
    for (const std::string& s : accepted) {
      follows |= settled.compare(o.text.size(), s.size(), s) == 0;
    }
    FUZZ_CHECK(follows, "no stop string where the stream stopped");
  }

  // Split independence: one byte per push.
  if (!nested_stops(accepted)) {
    std::vector<std::string> bytes;
    for (char c : text) bytes.push_back(std::string(1, c));
    const Outcome b = run(stops, budget, max_strings, max_piece, bytes, nullptr);
    FUZZ_CHECK(b.stopped == o.stopped, "stop outcome depends on the split");
    FUZZ_CHECK(b.text == o.text, "released text depends on the split");
  }
  return 0;
}
