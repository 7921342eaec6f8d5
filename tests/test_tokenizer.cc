// Runtime tokenizer: llama.cpp conformance vectors (Llama 2 SentencePiece vocab), stories260K
// round trips, byte fallback, decode rules, merges-ranked BPE, capacity/scratch errors, a
// differential check against a naive O(n^2) reference encoder, and verify_tokenizer rejecting
// hostile tables.
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <limits>
#include <map>
#include <memory>
#include <numeric>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "convert/ir.h"
#include "model.h"
#include "testing.h"
#include "tokenizer.h"
#include "tokenizer_vectors.h"

namespace {

using ringlm::internal::ErrorSink;
using ringlm::internal::Status;
using ringlm::internal::conv::TokenizerData;
using namespace tokvec;  // the tokenizer tests' helpers (Table, encode, enc, ...)
namespace fb = ringlm::internal::fb;

const char kSpaceMark[] = "\xE2\x96\x81";  // "▁"

// llama2.c's tokenizer.bin stores pieces with "▁" already turned into " " (its export script
// does t.replace('▁', ' ')); the model format keeps SentencePiece's "▁". Map them back.
void llama2c_pieces_to_spm(TokenizerData* t) {
  for (size_t i = 0; i < t->pieces.size(); ++i) {
    if (t->types[i] != fb::TokenType::Normal) continue;
    std::string& p = t->pieces[i];
    std::string q;
    for (char c : p) {
      if (c == ' ') {
        q += kSpaceMark;
      } else {
        q += c;
      }
    }
    p = q;
  }
}

bool load_llama2c(const std::string& rel, uint32_t vocab, Table* out, TokenizerData* data) {
  const std::string path = ringlm_test::shared_path(rel);
  if (path.empty()) return false;
  TokenizerData d;
  std::string err;
  if (!ringlm::internal::conv::read_llama2c_tokenizer(path, vocab, &d, &err)) {
    ADD_FAILURE() << err;
    return false;
  }
  llama2c_pieces_to_spm(&d);
  *out = make_table(d);
  if (data) *data = d;
  return true;
}

std::string decode(const Table& t, const std::vector<int32_t>& ids, int32_t prev = -1) {
  std::string s;
  for (int32_t id : ids) {
    char buf[ringlm::internal::kMaxPieceBytes];
    const size_t n = ringlm::internal::token_text(t.tok(), prev, id, buf, sizeof(buf));
    EXPECT_LE(n, sizeof(buf));
    s.append(buf, std::min(n, sizeof(buf)));
    prev = id;
  }
  return s;
}

// ---------------------------------------------------------------------------------------------
// Naive reference: llama2.c's encode (rescan every pair each round: best score, leftmost) over
// UTF-8 characters, with the same normalisation and type rules. O(n^2); only for comparison.

bool valid_utf8_at(const std::string& s, size_t i, size_t* len) {
  const unsigned char c = s[i];
  size_t n;
  unsigned lo = 0x80, hi = 0xBF;
  if (c < 0x80) {
    *len = 1;
    return true;
  } else if (c >= 0xC2 && c <= 0xDF) {
    n = 2;
  } else if (c >= 0xE0 && c <= 0xEF) {
    n = 3;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
  } else if (c >= 0xF0 && c <= 0xF4) {
    n = 4;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
  } else {
    return false;
  }
  if (i + n > s.size()) return false;
  if (static_cast<unsigned char>(s[i + 1]) < lo || static_cast<unsigned char>(s[i + 1]) > hi)
    return false;
  for (size_t k = 2; k < n; ++k) {
    const unsigned char d = s[i + k];
    if (d < 0x80 || d > 0xBF) return false;
  }
  *len = n;
  return true;
}

struct ReferenceIndex {
  const TokenizerData* data = nullptr;
  size_t vocab = 0;
  std::map<std::string, int32_t> normal;  // piece -> first id of a mergeable type
  std::map<std::string, int32_t> bytes;   // "<0xNN>" -> first byte token
};

const ReferenceIndex& reference_index(const TokenizerData& d) {
  static ReferenceIndex cache;
  if (cache.data != &d || cache.vocab != d.pieces.size()) {
    cache = ReferenceIndex();
    cache.data = &d;
    cache.vocab = d.pieces.size();
    for (size_t i = d.pieces.size(); i-- > 0;) {
      if (d.types[i] == fb::TokenType::Normal || d.types[i] == fb::TokenType::UserDefined)
        cache.normal[d.pieces[i]] = static_cast<int32_t>(i);
      if (d.types[i] == fb::TokenType::Byte) cache.bytes[d.pieces[i]] = static_cast<int32_t>(i);
    }
  }
  return cache;
}

std::vector<int32_t> reference_encode(const TokenizerData& d, const std::string& text) {
  const ReferenceIndex& index = reference_index(d);
  const std::map<std::string, int32_t>& normal = index.normal;
  const std::map<std::string, int32_t>& bytes = index.bytes;
  auto lookup = [&](const std::string& p) -> int32_t {
    auto it = normal.find(p);
    return it == normal.end() ? -1 : it->second;
  };
  std::vector<int32_t> out;
  if (text.empty()) return out;
  std::string norm = d.add_space_prefix ? kSpaceMark : "";
  for (char c : text) {
    if (c == ' ') {
      norm += kSpaceMark;
    } else {
      norm += c;
    }
  }
  std::vector<std::string> syms;
  for (size_t i = 0; i < norm.size();) {
    size_t n = 1;
    if (!valid_utf8_at(norm, i, &n)) n = 1;
    syms.push_back(norm.substr(i, n));
    i += n;
  }
  for (;;) {
    float best = -1e30f;
    int best_i = -1;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      const int32_t id = lookup(syms[i] + syms[i + 1]);
      if (id >= 0 && (best_i < 0 || d.scores[id] > best)) {
        best = d.scores[id];
        best_i = static_cast<int>(i);
      }
    }
    if (best_i < 0) break;
    syms[best_i] += syms[best_i + 1];
    syms.erase(syms.begin() + best_i + 1);
  }
  for (const std::string& s : syms) {
    const int32_t id = lookup(s);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    for (unsigned char c : s) {
      char b[8];
      snprintf(b, sizeof(b), "<0x%02X>", c);
      auto it = bytes.find(b);
      const int32_t bid = it == bytes.end() ? -1 : it->second;
      if (bid >= 0) {
        out.push_back(bid);
      } else if (d.unk_id >= 0) {
        out.push_back(d.unk_id);
      }
    }
  }
  return out;
}

// ---------------------------------------------------------------------------------------------

class Llama2Vocab : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    table_ = new Table;
    data_ = new TokenizerData;
    if (!load_llama2c("tokenizers/llama2/tokenizer.bin", 32000, table_, data_)) {
      delete table_;
      table_ = nullptr;
    }
  }
  static void TearDownTestSuite() {
    delete table_;
    delete data_;
    table_ = nullptr;
    data_ = nullptr;
  }
  void SetUp() override {
    if (!table_) GTEST_SKIP() << "../shared/tokenizers/llama2/tokenizer.bin not available";
    char msg[256] = {0};
    ErrorSink err{msg, sizeof(msg)};
    ASSERT_EQ(ringlm::internal::verify_tokenizer(table_->tok(), table_->vocab, &err), RLM_OK) << msg;
  }
  static Table* table_;
  static TokenizerData* data_;
};
Table* Llama2Vocab::table_ = nullptr;
TokenizerData* Llama2Vocab::data_ = nullptr;

TEST_F(Llama2Vocab, LlamaCppConformanceVectors) {
  tokvec::Vectors v;
  std::string why;
  if (!tokvec::load_vectors("ggml-vocab-llama-spm", &v, &why)) GTEST_SKIP() << why;
  const std::vector<std::string>& texts = v.texts;
  const std::vector<std::vector<int32_t>>& expected = v.ids;
  ASSERT_EQ(texts.size(), 46u);

  size_t pass = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const std::vector<int32_t> got = enc(*table_, texts[i]);
    if (got == expected[i]) {
      ++pass;
    } else {
      ADD_FAILURE() << "vector " << i << " '" << texts[i] << "'\n  expected" << join(expected[i])
                    << "\n  got     " << join(got);
    }
    // Decoding after BOS drops exactly the dummy-prefix space, so the round trip is exact.
    std::vector<int32_t> with_bos = enc(*table_, texts[i], true);
    ASSERT_FALSE(with_bos.empty());
    EXPECT_EQ(with_bos[0], 1);
    EXPECT_EQ(decode(*table_, std::vector<int32_t>(with_bos.begin() + 1, with_bos.end()), 1),
              texts[i])
        << "round trip of vector " << i;
  }
  printf("llama-spm conformance: %zu/%zu vectors match llama.cpp\n", pass, texts.size());
  EXPECT_EQ(pass, texts.size());
}

TEST_F(Llama2Vocab, KnownIdsAndBos) {
  EXPECT_EQ(enc(*table_, "Hello world"), (std::vector<int32_t>{15043, 3186}));
  EXPECT_EQ(enc(*table_, "Hello world", true), (std::vector<int32_t>{1, 15043, 3186}));
  EXPECT_EQ(enc(*table_, "", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(enc(*table_, "").empty());
}

TEST_F(Llama2Vocab, ByteFallbackForEmojiAndInvalidUtf8) {
  // U+1F600 (F0 9F 98 80) is not a Llama 2 piece: "▁" then four byte tokens (<0xNN> = 3 + NN).
  EXPECT_EQ(enc(*table_, "\xF0\x9F\x98\x80"),
            (std::vector<int32_t>{29871, 3 + 0xF0, 3 + 0x9F, 3 + 0x98, 3 + 0x80}));
  // Invalid UTF-8: a lone continuation byte, a truncated sequence, an overlong, 0xFF.
  const std::string bad = "a\x80" "b\xE2\x96" "c\xC0\xAF\xFF";
  const std::vector<int32_t> ids = enc(*table_, bad);
  EXPECT_EQ(ids, reference_encode(*data_, bad));
  EXPECT_EQ(decode(*table_, ids), bad);  // the bytes come back exactly
  // Every byte value alone round-trips.
  for (int b = 0; b < 256; ++b) {
    const std::string s(1, static_cast<char>(b));
    EXPECT_EQ(decode(*table_, enc(*table_, s)), s) << b;
  }
  // Text that spells a control or byte piece never becomes that token.
  const std::vector<int32_t> s = enc(*table_, "<s></s><0x41><unk>");
  for (int32_t id : s) {
    EXPECT_GT(id, 258) << "encoded to a reserved token";
  }
  EXPECT_EQ(decode(*table_, s), "<s></s><0x41><unk>");
}

TEST_F(Llama2Vocab, DecodeRules) {
  char buf[16];
  // Control tokens: nothing.
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), -1, 1, buf, sizeof(buf)), 0u);
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), 5, 2, buf, sizeof(buf)), 0u);
  // Byte tokens: the byte.
  ASSERT_EQ(ringlm::internal::token_text(table_->tok(), 5, 3 + 0x0A, buf, sizeof(buf)), 1u);
  EXPECT_EQ(buf[0], '\n');
  ASSERT_EQ(ringlm::internal::token_text(table_->tok(), 1, 3 + 0x20, buf, sizeof(buf)), 1u);
  EXPECT_EQ(buf[0], ' ');  // a byte token's space is real, not the dummy prefix
  // Unknown: SentencePiece's " ⁇ ".
  ASSERT_EQ(ringlm::internal::token_text(table_->tok(), 1, 0, buf, sizeof(buf)), 5u);
  EXPECT_EQ(std::string(buf, 5), " \xE2\x81\x87 ");
  // "▁Hello" (15043): " Hello" mid-text, "Hello" right after BOS or at the start.
  EXPECT_EQ(decode(*table_, {15043}, 3186), " Hello");
  EXPECT_EQ(decode(*table_, {15043}, 1), "Hello");
  EXPECT_EQ(decode(*table_, {15043}, -1), "Hello");
  EXPECT_EQ(decode(*table_, {1, 15043, 3186}), "Hello world");
  // Only one space is dropped: "▁▁" (259) after BOS is " ".
  EXPECT_EQ(decode(*table_, {259}, 1), " ");
  // Short output buffers: min(cap, needed) written, needed returned.
  memset(buf, 'x', sizeof(buf));
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), 3186, 15043, buf, 3), 6u);
  EXPECT_EQ(std::string(buf, 4), " Hex");
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), 3186, 15043, nullptr, 0), 6u);
  // Out of range: nothing.
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), -1, 32000, buf, sizeof(buf)), 0u);
  EXPECT_EQ(ringlm::internal::token_text(table_->tok(), -1, -5, buf, sizeof(buf)), 0u);
  // Lookup by piece bytes.
  EXPECT_EQ(ringlm::internal::token_lookup(table_->tok(), "\xE2\x96\x81Hello", 8), 15043);
  EXPECT_EQ(ringlm::internal::token_lookup(table_->tok(), "<s>", 3), -1);  // llama2.c spells it "\n<s>\n"
  EXPECT_EQ(ringlm::internal::token_lookup(table_->tok(), "<0x0A>", 6), 13);
  EXPECT_EQ(ringlm::internal::token_lookup(table_->tok(), "no such piece", 13), -1);
}

TEST_F(Llama2Vocab, CapacityAndScratchErrors) {
  const std::string text = "Hello world, this is a test.";
  const std::vector<int32_t> full = enc(*table_, text, true);
  ASSERT_GT(full.size(), 3u);
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(table_->tok(), text.size()));
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  for (size_t cap : {size_t{0}, size_t{1}, full.size() - 1}) {
    std::vector<int32_t> out(cap + 4, -7);
    size_t n = 12345;
    msg[0] = 0;
    EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                               cap ? out.data() : nullptr, cap, &n, scratch.data(), scratch.size(),
                               &err),
              RLM_ERR_CAPACITY);
    EXPECT_EQ(n, full.size()) << "needed count reported";
    EXPECT_NE(msg[0], 0);
    for (size_t i = 0; i < cap; ++i) EXPECT_EQ(out[i], full[i]);
    for (size_t i = cap; i < out.size(); ++i) EXPECT_EQ(out[i], -7) << "wrote past cap";
  }
  // Exactly enough.
  std::vector<int32_t> out(full.size());
  size_t n = 0;
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                             out.data(), out.size(), &n, scratch.data(), scratch.size(), &err),
            RLM_OK);
  EXPECT_EQ(out, full);
  // Scratch one byte short, and none.
  msg[0] = 0;
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                             out.data(), out.size(), &n, scratch.data(), scratch.size() - 1, &err),
            RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_NE(msg[0], 0);
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                             out.data(), out.size(), &n, nullptr, 0, &err),
            RLM_ERR_BUFFER_TOO_SMALL);
  // Misaligned scratch works (the size includes alignment slack).
  std::vector<uint8_t> big(scratch.size() + 1);
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                             out.data(), out.size(), &n, big.data() + 1, scratch.size(), &err),
            RLM_OK);
  EXPECT_EQ(out, full);
  // Null text with a length, null n_out.
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, nullptr, 3, true, out.data(),
                             out.size(), &n, scratch.data(), scratch.size(), &err),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                             out.data(), out.size(), nullptr, scratch.data(), scratch.size(), &err),
            RLM_ERR_INVALID_ARGUMENT);
  // Empty text with null pointer is fine.
  EXPECT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, nullptr, 0, false, out.data(),
                             out.size(), &n, scratch.data(), scratch.size(), &err),
            RLM_OK);
  EXPECT_EQ(n, 0u);
}

TEST_F(Llama2Vocab, MatchesNaiveReferenceOnRandomText) {
  std::mt19937 rng(1234);
  const char* words[] = {"the", " ", "  ", "Hello", "world", "\n", "\t", "ing", "é", "ü",
                         "日本", "\xF0\x9F\x98\x80", "don't", "3.14", "::", "<s>", "\xFF",
                         "\xE2\x96\x81", "tion", "a", "zz", "Z", ",", "!"};
  const size_t n_words = sizeof(words) / sizeof(words[0]);
  for (int iter = 0; iter < 60; ++iter) {
    std::string s;
    const int len = static_cast<int>(rng() % 25);
    for (int k = 0; k < len; ++k) s += words[rng() % n_words];
    EXPECT_EQ(enc(*table_, s), reference_encode(*data_, s)) << "'" << s << "'";
  }
}

TEST_F(Llama2Vocab, LongTextTiming) {
  // Not an assertion: prints the time to encode ~10 KB of English (a figure for the report).
  const std::string para =
      "Once upon a time, in a small village at the edge of a great forest, there lived an old "
      "clockmaker who repaired the watches of everyone in town. Every morning he opened his "
      "shutters, wound the big clock on the wall, and waited for the first customer. ";
  std::string text;
  while (text.size() < 10 * 1024) text += para;
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(table_->tok(), text.size()));
  std::vector<int32_t> out(text.size() + 1);
  size_t n = 0;
  const int reps = 5;
  double best = 1e9;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(ringlm::internal::tokenize(table_->tok(), table_->vocab, text.data(), text.size(), true,
                               out.data(), out.size(), &n, scratch.data(), scratch.size(),
                               nullptr),
              RLM_OK);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best = std::min(best, ms);
  }
  printf("encode %zu bytes -> %zu tokens: best of %d %.3f ms (scratch %zu bytes)\n", text.size(),
         n, reps, best, scratch.size());
  out.resize(n);
  EXPECT_EQ(decode(*table_, std::vector<int32_t>(out.begin() + 1, out.end()), 1), text);
}

// ---------------------------------------------------------------------------------------------

TEST(Stories260K, RoundTripAndKnownIds) {
  Table t;
  TokenizerData d;
  if (!load_llama2c("models/stories260K/tok512.bin", 512, &t, &d))
    GTEST_SKIP() << "../shared/models/stories260K/tok512.bin not available";
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  ASSERT_EQ(ringlm::internal::verify_tokenizer(t.tok(), t.vocab, &err), RLM_OK) << msg;

  const std::vector<int32_t> ids = enc(t, "Once upon a time", true);
  printf("tok512 \"Once upon a time\":%s\n", join(ids).c_str());
  ASSERT_GE(ids.size(), 2u);
  EXPECT_EQ(ids[0], 1);
  EXPECT_EQ(decode(t, std::vector<int32_t>(ids.begin() + 1, ids.end()), 1), "Once upon a time");
  EXPECT_EQ(decode(t, ids), "Once upon a time");
  // The naive reference (llama2.c's algorithm) agrees.
  EXPECT_EQ(std::vector<int32_t>(ids.begin() + 1, ids.end()),
            reference_encode(d, "Once upon a time"));
  // Known ids: "▁Once" 403, "▁upon" 407, "▁a" 261, "▁time" 378 in tok512.
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 403, 407, 261, 378}));

  const std::string story =
      "Lily's mom said, \"Lily, let's go to the park.\" Lily was sad and didn't know what to do.";
  const std::vector<int32_t> s = enc(t, story, true);
  EXPECT_EQ(decode(t, s), story);
  EXPECT_EQ(std::vector<int32_t>(s.begin() + 1, s.end()), reference_encode(d, story));
}

// ---------------------------------------------------------------------------------------------
// Hand-built tables.

// Pieces: 0 <unk>, 1 <s>, 2 </s>, 3..258 <0x00>..<0xFF>, then the given normal pieces.
TokenizerData small_vocab(const std::vector<std::string>& normal) {
  TokenizerData d;
  d.pieces = {"<unk>", "<s>", "</s>"};
  d.types = {fb::TokenType::Unknown, fb::TokenType::Control, fb::TokenType::Control};
  for (int b = 0; b < 256; ++b) {
    char p[8];
    snprintf(p, sizeof(p), "<0x%02X>", b);
    d.pieces.push_back(p);
    d.types.push_back(fb::TokenType::Byte);
  }
  for (const std::string& p : normal) {
    d.pieces.push_back(p);
    d.types.push_back(fb::TokenType::Normal);
  }
  d.unk_id = 0;
  d.bos_id = 1;
  d.eos_id = 2;
  d.end_ids = {2};
  return d;
}

int32_t id_of(const TokenizerData& d, const std::string& p) {
  for (size_t i = 0; i < d.pieces.size(); ++i)
    if (d.pieces[i] == p) return static_cast<int32_t>(i);
  ADD_FAILURE() << "no piece " << p;
  return -1;
}

TEST(MergesTable, EncodesByRank) {
  // Characters a, b, c and "▁"; merges by rank make the outcome differ from any score order:
  //   rank 0: b + c -> bc ; rank 1: a + b -> ab ; rank 2: a + bc -> abc ; rank 3: ▁ + abc
  const std::string sp = kSpaceMark;
  TokenizerData d = small_vocab({sp, "a", "b", "c", "ab", "bc", "abc", sp + "abc", "ca"});
  d.add_space_prefix = true;
  auto M = [&](const std::string& l, const std::string& r, const std::string& res) {
    d.merges.push_back({static_cast<uint32_t>(id_of(d, l)), static_cast<uint32_t>(id_of(d, r)),
                        static_cast<uint32_t>(id_of(d, res))});
  };
  M("b", "c", "bc");
  M("a", "b", "ab");
  M("a", "bc", "abc");
  M(sp, "abc", sp + "abc");
  M("c", "a", "ca");  // lowest priority
  const Table t = make_table(d);
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  ASSERT_EQ(ringlm::internal::verify_tokenizer(t.tok(), t.vocab, &err), RLM_OK) << msg;

  // "abc": b+c first (rank 0), then a+bc, then ▁+abc.
  EXPECT_EQ(enc(t, "abc"), (std::vector<int32_t>{id_of(d, sp + "abc")}));
  // "ab": a+b (rank 1); ▁ + ab has no merge.
  EXPECT_EQ(enc(t, "ab"), (std::vector<int32_t>{id_of(d, sp), id_of(d, "ab")}));
  // "cabc": c+a (rank 4) loses to b+c (rank 0) -> c a bc -> c abc (rank 2) ; c+a gone.
  EXPECT_EQ(enc(t, "cabc"),
            (std::vector<int32_t>{id_of(d, sp), id_of(d, "c"), id_of(d, "abc")}));
  // "ca": only c+a.
  EXPECT_EQ(enc(t, "ca"), (std::vector<int32_t>{id_of(d, sp), id_of(d, "ca")}));
  // Unknown character: byte fallback (x = 0x78).
  EXPECT_EQ(enc(t, "xa"), (std::vector<int32_t>{id_of(d, sp), 3 + 'x', id_of(d, "a")}));
  // A space inside: "▁" pieces, no merge with a following "ab" (no ▁+ab merge).
  EXPECT_EQ(enc(t, "abc ab"),
            (std::vector<int32_t>{id_of(d, sp + "abc"), id_of(d, sp), id_of(d, "ab")}));
  EXPECT_EQ(decode(t, enc(t, "abc ab", true)), "abc ab");
}

TEST(ScoreTable, TiesGoLeftAndNoSpacePrefix) {
  // Equal scores: the leftmost pair merges first. "aaa" -> "aa" "a".
  TokenizerData d = small_vocab({"a", "aa"});
  d.scores.assign(d.pieces.size(), 0.0f);
  d.add_space_prefix = false;
  const Table t = make_table(d);
  EXPECT_EQ(enc(t, "aaa"), (std::vector<int32_t>{id_of(d, "aa"), id_of(d, "a")}));
  EXPECT_EQ(enc(t, "aaaa"), (std::vector<int32_t>{id_of(d, "aa"), id_of(d, "aa")}));
  // No "▁" prefix, but spaces still become "▁" (no such piece here: byte fallback of its bytes).
  EXPECT_EQ(enc(t, "a a"), (std::vector<int32_t>{id_of(d, "a"), 3 + 0xE2, 3 + 0x96, 3 + 0x81,
                                                 id_of(d, "a")}));
  // Without add_space_prefix nothing is stripped at the start.
  EXPECT_EQ(decode(t, enc(t, "a a")), "a\xE2\x96\x81" "a");
  // Higher score wins over position: "abc" with bc scoring higher than ab.
  TokenizerData e = small_vocab({"a", "b", "c", "ab", "bc"});
  e.scores.assign(e.pieces.size(), 0.0f);
  e.scores[id_of(e, "ab")] = -2.0f;
  e.scores[id_of(e, "bc")] = -1.0f;
  e.add_space_prefix = false;
  const Table te = make_table(e);
  EXPECT_EQ(enc(te, "abc"), (std::vector<int32_t>{id_of(e, "a"), id_of(e, "bc")}));
  e.scores[id_of(e, "ab")] = 0.5f;
  const Table te2 = make_table(e);
  EXPECT_EQ(enc(te2, "abc"), (std::vector<int32_t>{id_of(e, "ab"), id_of(e, "c")}));
}

TEST(ScoreTable, NoByteFallbackUsesUnk) {
  TokenizerData d = small_vocab({"a"});
  d.scores.assign(d.pieces.size(), 0.0f);
  d.add_space_prefix = false;
  d.byte_fallback = false;
  Table t = make_table(d);
  // One unk per unknown character.
  EXPECT_EQ(enc(t, "a\xC3\xA9" "a"), (std::vector<int32_t>{id_of(d, "a"), 0, id_of(d, "a")}));
  // Byte fallback on but no byte pieces and no unk: the character is dropped.
  TokenizerData e;
  e.pieces = {"a", "b"};
  e.types = {fb::TokenType::Normal, fb::TokenType::Normal};
  e.add_space_prefix = false;
  t = make_table(e);
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  ASSERT_EQ(ringlm::internal::verify_tokenizer(t.tok(), t.vocab, &err), RLM_OK) << msg;
  EXPECT_EQ(enc(t, "axb"), (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(enc(t, "ab", true), (std::vector<int32_t>{0, 1}));  // no BOS in this table
}

// ---------------------------------------------------------------------------------------------
// verify_tokenizer against hostile tables. RawTable holds the vectors as they go on disk so a
// test can corrupt any of them.

struct RawTable {
  std::vector<std::string> pieces;
  std::vector<float> scores;
  std::vector<uint8_t> types;
  std::vector<fb::Merge> merges;
  std::vector<uint32_t> sorted_ids;
  int32_t bos = 1, eos = 2, unk = 0, pad = -1;
  std::vector<int32_t> end_ids = {2};
  uint8_t kind = 0;

  Table build() const {
    flatbuffers::FlatBufferBuilder fbb;
    std::vector<flatbuffers::Offset<flatbuffers::String>> ps;
    for (const auto& p : pieces) ps.push_back(fbb.CreateString(p));
    auto pv = fbb.CreateVector(ps);
    auto sv = fbb.CreateVector(scores);
    auto tv = fbb.CreateVector(reinterpret_cast<const fb::TokenType*>(types.data()), types.size());
    auto mv = fbb.CreateVectorOfStructs(merges);
    auto iv = fbb.CreateVector(sorted_ids);
    auto ev = fbb.CreateVector(end_ids);
    fbb.Finish(fb::CreateTokenizer(fbb, static_cast<fb::TokenizerKind>(kind), pv, sv, tv, mv, iv,
                                   bos, eos, unk, pad, ev));
    Table t;
    t.buf.assign(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
    t.vocab = static_cast<uint32_t>(pieces.size());
    return t;
  }
};

RawTable valid_raw() {
  RawTable r;
  r.pieces = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xE2\x96\x81"};
  r.types = {1, 2, 2, 0, 0, 0, 0};
  r.scores = {0, 0, 0, -1, -2, -3, -4};
  r.sorted_ids.resize(r.pieces.size());
  std::iota(r.sorted_ids.begin(), r.sorted_ids.end(), 0u);
  std::stable_sort(r.sorted_ids.begin(), r.sorted_ids.end(),
                   [&](uint32_t a, uint32_t b) { return r.pieces[a] < r.pieces[b]; });
  r.merges = {fb::Merge(3, 4, 5, 0), fb::Merge(6, 3, 3, 1)};
  return r;
}

Status verify(const RawTable& r, uint32_t vocab_delta = 0, std::string* message = nullptr) {
  const Table t = r.build();
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  const Status s = ringlm::internal::verify_tokenizer(t.tok(), t.vocab + vocab_delta, &err);
  if (s != RLM_OK) EXPECT_NE(msg[0], 0) << "no message";
  if (message) *message = msg;
  return s;
}

TEST(VerifyTokenizer, AcceptsValidTable) {
  std::string m;
  EXPECT_EQ(verify(valid_raw(), 0, &m), RLM_OK) << m;
  RawTable r = valid_raw();
  r.scores.clear();  // scores may be empty
  EXPECT_EQ(verify(r), RLM_OK);
  r.merges.clear();
  EXPECT_EQ(verify(r), RLM_OK);
}

TEST(VerifyTokenizer, RejectsHostileTables) {
  const Status kBad = RLM_ERR_MODEL_TOKENIZER;
  std::string m;
  EXPECT_EQ(verify(valid_raw(), 1, &m), kBad);  // piece count != vocab_size
  EXPECT_NE(m.find("pieces"), std::string::npos) << m;
  EXPECT_EQ(verify(valid_raw(), static_cast<uint32_t>(-7)), kBad);  // vocab_size 0
  // One change to a valid table each.
  const std::pair<const char*, void (*)(RawTable&)> mutations[] = {
      {"types shorter than pieces", [](RawTable& r) { r.types.pop_back(); }},
      {"unknown token type", [](RawTable& r) { r.types[3] = 6; }},
      {"scores shorter than pieces", [](RawTable& r) { r.scores.pop_back(); }},
      {"sorted_ids shorter than pieces", [](RawTable& r) { r.sorted_ids.pop_back(); }},
      {"sorted_ids empty", [](RawTable& r) { r.sorted_ids.clear(); }},
      {"sorted_ids out of range", [](RawTable& r) { r.sorted_ids[2] = 7; }},
      {"piece too long",
       [](RawTable& r) { r.pieces[3] = std::string(ringlm::internal::kMaxPieceBytes + 1, 'a'); }},
      // A duplicate (left, right): merges not strictly ordered.
      {"duplicate merge", [](RawTable& r) { r.merges.push_back(r.merges.back()); }},
      {"end id out of range", [](RawTable& r) { r.end_ids = {2, 7}; }},
      {"end id negative", [](RawTable& r) { r.end_ids = {-1}; }},
      {"unknown kind", [](RawTable& r) { r.kind = 9; }},
  };
  for (const auto& mu : mutations) {
    RawTable r = valid_raw();
    mu.second(r);
    EXPECT_EQ(verify(r), kBad) << mu.first;
  }
  {
    RawTable r = valid_raw();
    std::swap(r.sorted_ids[1], r.sorted_ids[4]);  // unsorted
    EXPECT_EQ(verify(r, 0, &m), kBad);
    EXPECT_NE(m.find("sorted_ids"), std::string::npos) << m;
  }
  for (int field = 0; field < 3; ++field) {
    RawTable r = valid_raw();
    fb::Merge& mg = r.merges[0];
    mg = fb::Merge(field == 0 ? 7 : mg.left(), field == 1 ? 99 : mg.right(),
                   field == 2 ? 0x80000000u : mg.result(), mg.rank());
    EXPECT_EQ(verify(r, 0, &m), kBad) << field;
    EXPECT_NE(m.find("merge"), std::string::npos) << m;
  }
  {
    RawTable r = valid_raw();
    std::swap(r.merges[0], r.merges[1]);  // unsorted
    EXPECT_EQ(verify(r, 0, &m), kBad);
    EXPECT_NE(m.find("ordered"), std::string::npos) << m;
  }
  for (int which = 0; which < 4; ++which) {
    for (int32_t bad : {7, -2, 1 << 30}) {
      RawTable r = valid_raw();
      int32_t* f[] = {&r.bos, &r.eos, &r.unk, &r.pad};
      *f[which] = bad;
      EXPECT_EQ(verify(r), kBad) << which << " " << bad;
    }
  }
}

TEST(VerifyTokenizer, VerifiedTablesAreSafeForAnyInput) {
  // Odd but valid tables (duplicate pieces, empty pieces, merge results that are not the
  // concatenation, NaN scores) must still encode and decode anything without crashing.
  RawTable r = valid_raw();
  r.pieces[4] = "a";  // duplicate of 3
  r.pieces[0] = "";   // empty piece
  r.scores[5] = std::numeric_limits<float>::quiet_NaN();
  r.sorted_ids.resize(r.pieces.size());
  std::iota(r.sorted_ids.begin(), r.sorted_ids.end(), 0u);
  std::stable_sort(r.sorted_ids.begin(), r.sorted_ids.end(),
                   [&](uint32_t a, uint32_t b) { return r.pieces[a] < r.pieces[b]; });
  r.merges = {fb::Merge(3, 3, 2, 5), fb::Merge(6, 3, 6, 0)};  // a+a -> </s>, ▁+a -> ▁
  std::mt19937 rng(7);
  for (int with_merges = 0; with_merges < 2; ++with_merges) {
    RawTable q = r;
    if (!with_merges) q.merges.clear();
    const Table t = q.build();
    char msg[256] = {0};
    ErrorSink err{msg, sizeof(msg)};
    ASSERT_EQ(ringlm::internal::verify_tokenizer(t.tok(), t.vocab, &err), RLM_OK) << msg;
    for (int iter = 0; iter < 200; ++iter) {
      std::string s(rng() % 40, '\0');
      for (char& c : s) c = "aab \xE2\x96\x81\xFF\x80"[rng() % 9];
      std::vector<int32_t> ids;
      const uint32_t bos = (iter & 1) ? ringlm::internal::kTokenizeAddBos : 0u;
      ASSERT_EQ(encode(t, s, ringlm::internal::kTokenizeParseSpecial | bos, &ids), RLM_OK);
      for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < static_cast<int32_t>(t.vocab));
      decode(t, ids);
    }
  }
}

}  // namespace
