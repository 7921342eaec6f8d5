// Stop strings and the text stream: hold-back, earliest match, UTF-8 reassembly and
// sanitising, finish, budgets, and a randomised split property.
#include "stop.h"

#include <string.h>

#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "testing.h"

namespace {

using ringlm::internal::Arena;
using ringlm::internal::ErrorSink;
using ringlm::internal::StopStrings;
using ringlm::internal::TextStream;

const std::string kFffd = "\xEF\xBF\xBD";

// Stop strings and a stream in one real arena, sized by a measure pass.
struct Fixture {
  ringlm_test::AlignedBuffer mem;
  StopStrings stops{};
  TextStream stream{};
  explicit Fixture(uint32_t max_strings = 4, uint32_t budget = 64, uint32_t max_piece = 256) {
    Arena measure(nullptr, 0);
    ringlm::internal::stop_strings_layout(measure, max_strings, budget, &stops);
    ringlm::internal::text_stream_layout(measure, budget, max_piece, &stream);
    mem.resize(measure.used());
    Arena a(mem.data(), mem.size());
    ringlm::internal::stop_strings_layout(a, max_strings, budget, &stops);
    ringlm::internal::text_stream_layout(a, budget, max_piece, &stream);
    EXPECT_TRUE(a.ok());
    EXPECT_EQ(a.used(), measure.used());
  }
  void add(const std::string& s) {
    ASSERT_EQ(ringlm::internal::stop_strings_add(&stops, s.data(), s.size(), nullptr), RLM_OK) << s;
  }
  // Pushes one piece; returns the released text, sets *stopped.
  std::string push(const std::string& piece, bool* stopped) {
    const char* out = nullptr;
    size_t n = 12345;
    *stopped = ringlm::internal::text_stream_push(&stream, stops, piece.data(), piece.size(), &out, &n);
    EXPECT_NE(out, nullptr);
    return std::string(out, n);
  }
  std::string finish() {
    const char* out = nullptr;
    size_t n = 12345;
    ringlm::internal::text_stream_finish(&stream, stops, &out, &n);
    EXPECT_NE(out, nullptr);
    return std::string(out, n);
  }
};

struct Released {
  std::vector<std::string> released;  // per push, then the finish output if not stopped
  int stopped_at = -1;                // push index that matched, -1 if none
  std::string all() const {
    std::string s;
    for (const std::string& r : released) s += r;
    return s;
  }
};

// Pushes pieces until a stop; calls finish when no stop matched.
Released run(Fixture* f, const std::vector<std::string>& pieces, bool finish = true) {
  Released r;
  for (size_t i = 0; i < pieces.size(); ++i) {
    bool stopped = false;
    r.released.push_back(f->push(pieces[i], &stopped));
    if (stopped) {
      r.stopped_at = static_cast<int>(i);
      return r;
    }
  }
  if (finish) r.released.push_back(f->finish());
  return r;
}

using Strs = std::vector<std::string>;

// ---- Stop strings across pushes --------------------------------------------------------------

TEST(TextStream, StopInOnePush) {
  Fixture f;
  f.add("STOP");
  const Released r = run(&f, {"Hello ", "STOP", " more"});
  EXPECT_EQ(r.stopped_at, 1);
  EXPECT_EQ(r.released, (Strs{"Hello ", ""}));
}

TEST(TextStream, StopAcrossTwoPushes) {
  Fixture f;
  f.add("STOP");
  const Released r = run(&f, {"Hello ST", "OP world"});
  EXPECT_EQ(r.stopped_at, 1);
  EXPECT_EQ(r.released, (Strs{"Hello ", ""}));
}

TEST(TextStream, StopAcrossThreePushes) {
  Fixture f;
  f.add("STOP");
  const Released r = run(&f, {"Hello S", "TO", "P!"});
  EXPECT_EQ(r.stopped_at, 2);
  EXPECT_EQ(r.released, (Strs{"Hello ", "", ""}));
}

TEST(TextStream, FailedPartialMatchIsReleasedIntact) {
  Fixture f;
  f.add("STOP");
  const Released r = run(&f, {"Hello ST", "ART", " now S", "TOCK"});
  EXPECT_EQ(r.stopped_at, -1);
  EXPECT_EQ(r.released, (Strs{"Hello ", "START", " now ", "STOCK", ""}));
  EXPECT_EQ(r.all(), "Hello START now STOCK");
}

TEST(TextStream, OverlappingPrefixes) {
  {  // "aa" is held as a prefix of "aab"; "aaab" contains it at offset 1.
    Fixture f;
    f.add("aab");
    const Released r = run(&f, {"aa", "ab"});
    EXPECT_EQ(r.stopped_at, 1);
    EXPECT_EQ(r.released, (Strs{"", "a"}));
  }
  {  // The held suffix is the longest one: "aba" for "abab"; then "ababab" matches at 0.
    Fixture f;
    f.add("abab");
    const Released r = run(&f, {"xaba", "bab"});
    EXPECT_EQ(r.stopped_at, 1);
    EXPECT_EQ(r.released, (Strs{"x", ""}));
  }
  {  // The held part may shrink without being released all at once.
    Fixture f;
    f.add("abac");
    const Released r = run(&f, {"aba", "b", "d"});
    EXPECT_EQ(r.stopped_at, -1);
    EXPECT_EQ(r.released, (Strs{"", "ab", "abd", ""}));
  }
}

TEST(TextStream, StopInTheMiddleOfAPush) {
  Fixture f;
  f.add("END");
  const Released r = run(&f, {"Hi ", "there. END of text"});
  EXPECT_EQ(r.stopped_at, 1);
  EXPECT_EQ(r.released, (Strs{"Hi ", "there. "}));
}

TEST(TextStream, EarliestOfTwoStopStringsWins) {
  for (int order = 0; order < 2; ++order) {
    Fixture f;
    if (order == 0) {
      f.add("world");
      f.add("lo w");
    } else {
      f.add("lo w");
      f.add("world");
    }
    const Released r = run(&f, {"hel", "lo world"});
    EXPECT_EQ(r.stopped_at, 1);
    EXPECT_EQ(r.all(), "hel") << order;
  }
  // Both complete in the same push: the one starting earlier wins.
  {
    Fixture f;
    f.add("b");
    f.add("abc");
    const Released r = run(&f, {"xa", "bc"});
    EXPECT_EQ(r.stopped_at, 1);
    EXPECT_EQ(r.all(), "x");
  }
  // A stop string inside another one completes first: generation stops right there (stops are
  // eager; the stream never waits for a longer stop string that might still complete).
  {
    Fixture f;
    f.add("b");
    f.add("abc");
    const Released r = run(&f, {"xa", "b", "c"});
    EXPECT_EQ(r.stopped_at, 1);
    EXPECT_EQ(r.all(), "xa");
  }
}

TEST(TextStream, MultiByteStopString) {
  Fixture f;
  f.add("caf\xC3\xA9");  // "café"
  const Released r = run(&f, {"un caf", "\xC3", "\xA9 noir"});
  EXPECT_EQ(r.stopped_at, 2);
  EXPECT_EQ(r.released, (Strs{"un ", "", ""}));
  Fixture g;
  g.add("caf\xC3\xA9");
  const Released s = run(&g, {"caf", "\xC3", "\xA8"});  // "cafè": not a match
  EXPECT_EQ(s.stopped_at, -1);
  EXPECT_EQ(s.released, (Strs{"", "", "caf\xC3\xA8", ""}));
}

// ---- UTF-8 reassembly ------------------------------------------------------------------------

TEST(TextStream, CharacterSplitAcrossTwoPushes) {
  Fixture f;
  const Released r = run(&f, {"caf\xC3", "\xA9!"});
  EXPECT_EQ(r.released, (Strs{"caf", "\xC3\xA9!", ""}));
}

TEST(TextStream, CharacterSplitAcrossThreePushes) {
  Fixture f;
  const Released r = run(&f, {"\xE2", "\x82", "\xAC"});  // €
  EXPECT_EQ(r.released, (Strs{"", "", "\xE2\x82\xAC", ""}));
}

TEST(TextStream, FourByteEmojiByteByByte) {
  Fixture f;
  const Released r = run(&f, {"a", "\xF0", "\x9F", "\x98", "\x80", "b"});  // 😀
  EXPECT_EQ(r.released, (Strs{"a", "", "", "", "\xF0\x9F\x98\x80", "b", ""}));
}

TEST(TextStream, InvalidUtf8BecomesReplacementPerMaximalSubpart) {
  struct Case {
    const char* name;
    Strs pieces;
    std::string want;
  };
  const Case cases[] = {
      {"stray continuation", {"a\x80" "b"}, "a" + kFffd + "b"},
      {"lead then ASCII", {"\xC3("}, kFffd + "("},
      {"two of three, then ASCII", {"\xE2\x82("}, kFffd + "("},
      {"three of four, then ASCII", {"\xF0\x9F\x98("}, kFffd + "("},
      {"lead then lead", {"\xC3\xC3\xA9"}, kFffd + "\xC3\xA9"},
      {"overlong C0", {"\xC0\xAF"}, kFffd + kFffd},
      {"overlong E0", {"\xE0\x80\xAF"}, kFffd + kFffd + kFffd},
      {"surrogate", {"\xED\xA0\x80"}, kFffd + kFffd + kFffd},
      {"above U+10FFFF", {"\xF4\x90\x80\x80"}, kFffd + kFffd + kFffd + kFffd},
      {"F5", {"\xF5" "x"}, kFffd + "x"},
      {"FF", {"\xFF"}, kFffd},
      {"broken across pushes", {"\xE2\x82", "x"}, kFffd + "x"},
      {"broken by a lead across pushes", {"\xE2", "\xF0\x9F\x98\x80"},
       kFffd + "\xF0\x9F\x98\x80"},
      {"valid max code point", {"\xF4\x8F\xBF\xBF"}, "\xF4\x8F\xBF\xBF"},
      {"U+FFFD itself", {kFffd}, kFffd},
  };
  for (const Case& c : cases) {
    Fixture f;
    const Released r = run(&f, c.pieces);
    EXPECT_EQ(r.all(), c.want) << c.name;
  }
  // Released text is never held back for being invalid: it goes out in the same push.
  Fixture f;
  bool stopped = false;
  EXPECT_EQ(f.push("x\x80y", &stopped), "x" + kFffd + "y");
}

// ---- Finish ----------------------------------------------------------------------------------

TEST(TextStream, FinishReleasesHeldStopPrefix) {
  Fixture f;
  f.add("STOP");
  const Released r = run(&f, {"abc ST"});
  EXPECT_EQ(r.released, (Strs{"abc ", "ST"}));
}

TEST(TextStream, FinishTurnsTruncatedTailIntoReplacement) {
  Fixture f;
  const Released r = run(&f, {"ok\xE2\x82"});
  EXPECT_EQ(r.released, (Strs{"ok", kFffd}));
  Fixture g;
  g.add("STOP");
  const Released s = run(&g, {"x S", "\xF0\x9F"});
  EXPECT_EQ(s.released, (Strs{"x ", "", "S" + kFffd}));
  // The stream is empty afterwards.
  EXPECT_EQ(g.finish(), "");
  bool stopped = false;
  EXPECT_EQ(g.push("\xA9", &stopped), kFffd);  // not completing anything from before
}

TEST(TextStream, AfterAStopTheStreamIsEmpty) {
  Fixture f;
  f.add("STOP");
  bool stopped = false;
  EXPECT_EQ(f.push("a STOP b \xE2", &stopped), "a ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(f.finish(), "");
  EXPECT_EQ(f.push("ST", &stopped), "");
  EXPECT_FALSE(stopped);
  ringlm::internal::text_stream_reset(&f.stream);
  EXPECT_EQ(f.push("\x82\xAC", &stopped), kFffd + kFffd);  // reset dropped the held "ST"
  EXPECT_EQ(f.finish(), "");
}

TEST(TextStream, ResetDropsPendingAndPartialCharacter) {
  Fixture f;
  f.add("STOP");
  bool stopped = false;
  EXPECT_EQ(f.push("hi S", &stopped), "hi ");
  EXPECT_EQ(f.push("T\xE2\x82", &stopped), "");
  ringlm::internal::text_stream_reset(&f.stream);
  EXPECT_EQ(f.push("\xAC" "OP", &stopped), kFffd + "OP");
  EXPECT_FALSE(stopped);
}

TEST(TextStream, NoStopStringsReleasesEverythingSettled) {
  Fixture f;
  const Released r = run(&f, {"a", "bc", "\xC3", "\xA9"});
  EXPECT_EQ(r.released, (Strs{"a", "bc", "", "\xC3\xA9", ""}));
}

// ---- Capacity --------------------------------------------------------------------------------

// The worst case the buffer is sized for: a held prefix of budget - 1 bytes, a decoder holding
// 3 bytes, and a maximal piece of bytes that each become U+FFFD. ASan checks the bounds.
TEST(TextStream, WorstCaseFitsTheBuffer) {
  const uint32_t budget = 16, max_piece = 32;
  Fixture f(1, budget, max_piece);
  const std::string stop(budget, 'a');
  f.add(stop);
  bool stopped = false;
  EXPECT_EQ(f.push(std::string(budget - 1, 'a'), &stopped), "");
  EXPECT_EQ(f.push("\xF0\x9F\x98", &stopped), "");
  const std::string junk(max_piece, '\xFF');
  std::string want = std::string(budget - 1, 'a') + kFffd;
  for (uint32_t i = 0; i < max_piece; ++i) want += kFffd;
  EXPECT_EQ(f.push(junk, &stopped), want);
  EXPECT_FALSE(stopped);
  EXPECT_LE(want.size(), f.stream.cap);
  // A held prefix plus a truncated tail at finish.
  EXPECT_EQ(f.push(std::string(budget - 1, 'a') + "\xF0\x9F\x98", &stopped), "");
  EXPECT_EQ(f.finish(), std::string(budget - 1, 'a') + kFffd);
}

// The max-tokens step: a push and a finish in one step. Finish's output continues the push's
// in memory, so the session can report both as one span; worst case for the buffer: a maximal
// held prefix, a maximal piece of invalid bytes ending in a truncated 4-byte lead.
TEST(TextStream, FinishContinuesThePushOutput) {
  const uint32_t budget = 16, max_piece = 32;
  Fixture f(1, budget, max_piece);
  f.add(std::string(budget, 'a'));
  bool stopped = false;
  EXPECT_EQ(f.push(std::string(budget - 1, 'a'), &stopped), "");
  EXPECT_EQ(f.push("\xF0\x9F\x98", &stopped), "");
  const std::string piece = std::string(max_piece - 3, '\xFF') + "\xF0\x9F\x98";
  const char* a = nullptr;
  size_t an = 0;
  ASSERT_FALSE(ringlm::internal::text_stream_push(&f.stream, f.stops, piece.data(), piece.size(), &a, &an));
  const char* b = nullptr;
  size_t bn = 0;
  ringlm::internal::text_stream_finish(&f.stream, f.stops, &b, &bn);
  EXPECT_EQ(b, a + an);
  std::string want = std::string(budget - 1, 'a') + kFffd;
  for (uint32_t i = 0; i < max_piece - 3; ++i) want += kFffd;
  EXPECT_EQ(std::string(a, an), want);
  EXPECT_EQ(std::string(b, bn), kFffd);
  EXPECT_EQ(std::string(a, an + bn), want + kFffd);
  EXPECT_LE(an + bn, f.stream.cap);
  // The same with a held prefix that finish releases.
  Fixture g;
  g.add("STOP");
  ASSERT_FALSE(ringlm::internal::text_stream_push(&g.stream, g.stops, "go ST", 5, &a, &an));
  ringlm::internal::text_stream_finish(&g.stream, g.stops, &b, &bn);
  EXPECT_EQ(b, a + an);
  EXPECT_EQ(std::string(a, an + bn), "go ST");
  // And after a finish the next push starts clean.
  EXPECT_EQ(g.push("x", &stopped), "x");
}

// A push longer than max_piece_bytes is a caller bug: the excess is dropped, memory stays safe.
TEST(TextStream, OverlongPushIsClamped) {
  Fixture f(1, 8, 4);
  bool stopped = false;
  EXPECT_EQ(f.push("abcdefgh", &stopped), "abcd");
}

TEST(TextStream, LayoutMeasureEqualsReal) {
  for (uint32_t budget : {0u, 1u, 256u, 4096u}) {
    for (uint32_t piece : {1u, 256u}) {
      Arena measure(nullptr, 0);
      StopStrings s{};
      TextStream t{};
      ringlm::internal::stop_strings_layout(measure, 8, budget, &s);
      ringlm::internal::text_stream_layout(measure, budget, piece, &t);
      ASSERT_TRUE(measure.ok());
      EXPECT_EQ(t.cap, budget + 3 * (piece + 3));
      ringlm_test::AlignedBuffer mem(measure.used());
      Arena real(mem.data(), mem.size());
      ringlm::internal::stop_strings_layout(real, 8, budget, &s);
      ringlm::internal::text_stream_layout(real, budget, piece, &t);
      EXPECT_TRUE(real.ok());
      EXPECT_EQ(real.used(), measure.used());
      EXPECT_NE(t.buf, nullptr);
      EXPECT_EQ(s.count, 0u);
    }
  }
}

// ---- stop_strings_add ------------------------------------------------------------------------

TEST(StopStrings, AddErrors) {
  Fixture f(2, 10);
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "", 0, &err), RLM_ERR_INVALID_ARGUMENT);
  EXPECT_NE(msg[0], '\0');
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, nullptr, 3, &err), RLM_ERR_INVALID_ARGUMENT);
  const char* bad_utf8[] = {"\xE2\x82", "a\x80", "\xC0\xAF", "\xED\xA0\x80", "\xF5\x80\x80\x80"};
  for (const char* b : bad_utf8) {
    EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, b, strlen(b), &err), RLM_ERR_INVALID_UTF8) << b;
  }
  EXPECT_EQ(f.stops.count, 0u);
  EXPECT_EQ(f.stops.used, 0u);
  // Budget: 10 bytes. 11 does not fit; 6 + 4 fits exactly; then the count (2) is full.
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "0123456789a", 11, &err), RLM_ERR_CAPACITY);
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "\xC3\xA9t\xC3\xA9", 6, &err), RLM_OK);
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "abcde", 5, &err), RLM_ERR_CAPACITY);
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "abcd", 4, &err), RLM_OK);
  EXPECT_EQ(f.stops.used, 10u);
  EXPECT_EQ(f.stops.max_len, 6u);
  msg[0] = '\0';
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "z", 1, &err), RLM_ERR_CAPACITY);
  EXPECT_NE(msg[0], '\0');
  EXPECT_EQ(f.stops.count, 2u);
  // Clear frees both count and bytes.
  ringlm::internal::stop_strings_clear(&f.stops);
  EXPECT_EQ(f.stops.count, 0u);
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, "0123456789", 10, &err), RLM_OK);
  // Strings are copied: the caller's buffer can change.
  ringlm::internal::stop_strings_clear(&f.stops);
  char text[] = "END";
  EXPECT_EQ(ringlm::internal::stop_strings_add(&f.stops, text, 3, &err), RLM_OK);
  text[0] = 'X';
  const Released r = run(&f, {"the END"});
  EXPECT_EQ(r.stopped_at, 0);
  EXPECT_EQ(r.all(), "the ");
}

// ---- Property: any split of the token stream releases the same text --------------------------

// Splits `text` into pieces of 0..7 bytes (cutting through multi-byte characters freely).
Strs random_split(const std::string& text, std::mt19937* gen) {
  std::uniform_int_distribution<int> len(0, 7);
  Strs pieces;
  size_t i = 0;
  while (i < text.size()) {
    const size_t n = std::min<size_t>(static_cast<size_t>(len(*gen)), text.size() - i);
    pieces.push_back(text.substr(i, n));
    i += n;
  }
  return pieces;
}

// Checks the released chunks are each well-formed UTF-8 (so each push released whole
// characters only). Uses the library's own validator via stop_strings_add on a scratch set.
bool valid_utf8(const std::string& s) {
  if (s.empty()) return true;
  Fixture f(1, static_cast<uint32_t>(s.size()));
  return ringlm::internal::stop_strings_add(&f.stops, s.data(), s.size(), nullptr) == RLM_OK;
}

TEST(TextStream, AnySplitReleasesTheTextBeforeTheStop) {
  const std::string text =
      "Once upon a time, a caf\xC3\xA9 served \xE2\x82\xAC" "3 tea \xF0\x9F\x8D\xB5 to "
      "everyone.\n\nUser: what next?\n\nUser: again";
  const Strs stops = {"\n\nUser:", "\xF0\x9F\x8D\xB5 to x", "tea \xF0\x9F\x8D\xB5 tox"};
  const std::string want = text.substr(0, text.find("\n\nUser:"));
  std::mt19937 gen(20240611);
  for (int iter = 0; iter < 2000; ++iter) {
    Fixture f;
    for (const std::string& s : stops) f.add(s);
    const Released r = run(&f, random_split(text, &gen));
    ASSERT_GE(r.stopped_at, 0) << iter;
    ASSERT_EQ(r.all(), want) << iter;
    for (const std::string& chunk : r.released) ASSERT_TRUE(valid_utf8(chunk)) << iter;
  }
}

// Random texts over a small alphabet (so near-misses are everywhere), random stops, random
// splits, against the definition: the released text is the (sanitised) text up to the earliest
// occurrence of any stop string, or all of it.
TEST(TextStream, RandomTextsMatchTheDefinition) {
  const std::string alphabet[] = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC", "\x80", "\xF0\x9F"};
  const std::string sanitised[] = {"a", "b", "\xC3\xA9", "\xE2\x82\xAC", kFffd, kFffd};
  std::mt19937 gen(7);
  std::uniform_int_distribution<int> pick(0, 5);
  std::uniform_int_distribution<int> valid_pick(0, 3);
  int stopped = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    // Text: random symbols, each sanitising to a fixed form: "\xF0\x9F" (a truncated emoji) is
    // one U+FFFD whatever follows, except a continuation byte (which would extend it), so that
    // pair is not generated. At the very end it is U+FFFD through finish.
    std::string text, clean;
    const int n = 1 + static_cast<int>(gen() % 24);
    int prev = -1;
    for (int i = 0; i < n; ++i) {
      int s = pick(gen);
      if (prev == 5 && s == 4) s = 0;
      text += alphabet[s];
      clean += sanitised[s];
      prev = s;
    }
    Fixture f;
    const int n_stops = static_cast<int>(gen() % 3);
    Strs stops;
    for (int k = 0; k < n_stops; ++k) {
      std::string st;
      const int len = 1 + static_cast<int>(gen() % 4);
      for (int i = 0; i < len; ++i) st += alphabet[valid_pick(gen)];
      stops.push_back(st);
      f.add(st);
    }
    // Stops are eager (see EarliestOfTwoStopStringsWins): when one stop string sits inside
    // another, not at its end, which wins depends on the split. The definition below is
    // split-independent only without such pairs, so they are not generated.
    bool inner = false;
    for (const std::string& a : stops) {
      for (const std::string& b : stops) {
        const size_t at = a.find(b);
        if (&a != &b && at != std::string::npos && at + b.size() < a.size()) inner = true;
      }
    }
    if (inner) {
      --iter;
      continue;
    }
    size_t cut = std::string::npos;
    for (const std::string& st : stops) cut = std::min(cut, clean.find(st));
    const std::string want = cut == std::string::npos ? clean : clean.substr(0, cut);
    const Released r = run(&f, random_split(text, &gen));
    ASSERT_EQ(r.all(), want) << "iter " << iter;
    ASSERT_EQ(r.stopped_at >= 0, cut != std::string::npos) << "iter " << iter;
    for (const std::string& chunk : r.released) ASSERT_TRUE(valid_utf8(chunk)) << iter;
    stopped += r.stopped_at >= 0;
  }
  EXPECT_GT(stopped, 500);  // both outcomes well exercised
  EXPECT_LT(stopped, 2500);
}

}  // namespace
