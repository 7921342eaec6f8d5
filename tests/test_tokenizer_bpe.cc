// Byte-level BPE tokenizer: llama.cpp conformance vectors (GPT-2 vocab from its GGUF, Llama 3
// vocab from Meta's tiktoken file), Llama 3 special tokens, pre-tokenizer splits for every kind,
// invalid UTF-8, decode rules, capacity/scratch errors, random round trips, and the
// `ringlm tokenize` / `ringlm detokenize` CLI.
#include <gtest/gtest.h>
#include <stdio.h>
#include <string.h>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "convert/ir.h"
#include "convert/readers.h"
#include "convert/tiktoken.h"
#include "model.h"
#include "testing.h"
#include "tokenizer.h"
#include "tokenizer_vectors.h"
#include "unicode.h"

namespace {

using ringlm::internal::ErrorSink;
using ringlm::internal::Status;
using ringlm::internal::conv::TokenizerData;
using namespace tokvec;  // the tokenizer tests' helpers (Table, encode, enc, ...)
namespace fb = ringlm::internal::fb;

// ---- helpers --------------------------------------------------------------------------------

std::vector<int32_t> enc_plain(const Table& t, const std::string& text) {
  std::vector<int32_t> ids;
  EXPECT_EQ(encode(t, text, 0, &ids), RLM_OK);
  return ids;
}

std::string decode(const Table& t, const std::vector<int32_t>& ids, uint32_t flags = 0) {
  std::string s;
  int32_t prev = -1;
  for (int32_t id : ids) {
    char buf[ringlm::internal::kMaxPieceBytes];
    const size_t n = ringlm::internal::token_text_ex(t.tok(), prev, id, flags, buf, sizeof(buf));
    EXPECT_LE(n, sizeof(buf));
    s.append(buf, std::min(n, sizeof(buf)));
    prev = id;
  }
  return s;
}

std::vector<std::string> split(fb::PreTokenizer pre, const std::string& text) {
  std::vector<uint32_t> ends(text.size() + 1);
  const size_t n = ringlm::internal::pretokenize(pre, text.data(), text.size(), ends.data(), ends.size());
  EXPECT_LE(n, text.size());
  std::vector<std::string> words;
  uint32_t start = 0;
  for (size_t i = 0; i < n && i < ends.size(); ++i) {
    EXPECT_GT(ends[i], start);
    words.push_back(text.substr(start, ends[i] - start));
    start = ends[i];
  }
  EXPECT_EQ(start, text.size());
  return words;
}

std::string show(const std::vector<std::string>& words) {
  std::string s;
  for (const std::string& w : words) {
    s += "[";
    for (unsigned char c : w) {
      if (c == '\n') s += "\\n";
      else if (c == '\r') s += "\\r";
      else if (c == '\t') s += "\\t";
      else s += static_cast<char>(c);
    }
    s += "]";
  }
  return s;
}

bool verified(const Table& t) {
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  const Status s = ringlm::internal::verify_tokenizer(t.tok(), t.vocab, &err);
  EXPECT_EQ(s, RLM_OK) << msg;
  return s == RLM_OK;
}

// Runs the conformance vectors `name` on `t`; every vector must match and decode back.
void run_vectors(const Table& t, const std::string& name) {
  tokvec::Vectors v;
  std::string why;
  if (!tokvec::load_vectors(name, &v, &why)) GTEST_SKIP() << why;
  ASSERT_EQ(v.texts.size(), 46u);
  size_t pass = 0;
  for (size_t i = 0; i < v.texts.size(); ++i) {
    const std::vector<int32_t> got = enc(t, v.texts[i]);
    if (got == v.ids[i]) {
      ++pass;
    } else {
      ADD_FAILURE() << name << " vector " << i << " '" << v.texts[i] << "'\n  expected"
                    << tokvec::join(v.ids[i]) << "\n  got     " << tokvec::join(got);
    }
    EXPECT_EQ(decode(t, got), v.texts[i]) << "round trip of vector " << i;
  }
  printf("%s conformance: %zu/%zu vectors match llama.cpp\n", name.c_str(), pass,
         v.texts.size());
  EXPECT_EQ(pass, v.texts.size());
}

// ---- vocabularies (loaded once) -------------------------------------------------------------

struct Loaded {
  bool tried = false;
  bool ok = false;
  std::string why;
  TokenizerData data;
  Table table;
};

Loaded& gpt2() {
  static Loaded l;
  if (!l.tried) {
    l.tried = true;
    const std::string path = ringlm_test::shared_path("tokenizers/vectors/ggml-vocab-gpt-2.gguf");
    if (path.empty()) {
      l.why = "../shared/tokenizers/vectors/ggml-vocab-gpt-2.gguf not available";
    } else if (!ringlm::internal::conv::read_gguf_tokenizer(path, &l.data, &l.why)) {
      ADD_FAILURE() << l.why;
    } else {
      l.table = tokvec::make_table(l.data);
      l.ok = true;
    }
  }
  return l;
}

Loaded& llama3() {
  static Loaded l;
  if (!l.tried) {
    l.tried = true;
    const std::string path = ringlm_test::shared_path("tokenizers/llama3/tokenizer.model");
    if (path.empty()) {
      l.why = "../shared/tokenizers/llama3/tokenizer.model not available";
    } else if (!ringlm::internal::conv::read_tiktoken(path, &l.data, &l.why)) {
      ADD_FAILURE() << l.why;
    } else {
      l.table = tokvec::make_table(l.data);
      l.ok = true;
    }
  }
  return l;
}

#define REQUIRE_VOCAB(l)                  \
  do {                                    \
    if (!(l).ok) GTEST_SKIP() << (l).why; \
    ASSERT_TRUE(verified((l).table));     \
  } while (0)

// ---- GPT-2 ----------------------------------------------------------------------------------

TEST(Gpt2Vocab, ReaderGivesByteLevelTable) {
  Loaded& l = gpt2();
  REQUIRE_VOCAB(l);
  EXPECT_EQ(l.data.kind, fb::TokenizerKind::ByteLevel);
  EXPECT_EQ(l.data.pre_tokenizer, fb::PreTokenizer::Gpt2);
  EXPECT_EQ(l.data.pieces.size(), 50257u);
  EXPECT_GT(l.data.merges.size(), 49000u);
  EXPECT_EQ(l.data.pieces[50256], "<|endoftext|>");
  EXPECT_EQ(l.data.types[50256], fb::TokenType::Control);
}

TEST(Gpt2Vocab, LlamaCppConformanceVectors) {
  Loaded& l = gpt2();
  REQUIRE_VOCAB(l);
  run_vectors(l.table, "ggml-vocab-gpt-2");
}

TEST(Gpt2Vocab, KnownIdsAndSpecialToken) {
  Loaded& l = gpt2();
  REQUIRE_VOCAB(l);
  EXPECT_EQ(enc(l.table, "Hello world"), (std::vector<int32_t>{15496, 995}));
  // <|endoftext|> is the one Control token: matched in text when parsing specials.
  EXPECT_EQ(enc(l.table, "a<|endoftext|>b"), (std::vector<int32_t>{64, 50256, 65}));
  const std::vector<int32_t> plain = enc_plain(l.table, "<|endoftext|>");
  EXPECT_GT(plain.size(), 1u);
  EXPECT_EQ(decode(l.table, plain), "<|endoftext|>");
  // GPT-2 has no BOS: add_bos adds nothing.
  EXPECT_EQ(l.data.bos_id, 50256);
}

// ---- Llama 3 (tiktoken) ---------------------------------------------------------------------

TEST(Llama3Vocab, ReaderDerivesMergesAndSpecials) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  EXPECT_EQ(l.data.kind, fb::TokenizerKind::ByteLevel);
  EXPECT_EQ(l.data.pre_tokenizer, fb::PreTokenizer::Llama3);
  ASSERT_EQ(l.data.pieces.size(), 128256u);
  EXPECT_EQ(l.data.bos_id, 128000);
  EXPECT_EQ(l.data.eos_id, 128001);
  EXPECT_EQ(l.data.end_ids, (std::vector<int32_t>{128001, 128008, 128009}));
  EXPECT_TRUE(l.data.add_bos);
  EXPECT_EQ(l.data.pieces[128000], "<|begin_of_text|>");
  EXPECT_EQ(l.data.pieces[128006], "<|start_header_id|>");
  EXPECT_EQ(l.data.pieces[128009], "<|eot_id|>");
  EXPECT_EQ(l.data.pieces[128255], "<|reserved_special_token_247|>");
  EXPECT_EQ(l.data.pieces[220], "\xC4\xA0");  // " " as GPT-2's U+0120
  // One merge per multi-byte token that tiktoken's BPE reaches in two parts: 127066 of the
  // 127744 (the rest are produced whole by the Llama3 whole-word look-up).
  EXPECT_EQ(l.data.merges.size(), 127066u);
  for (size_t i = 1; i < 300; ++i) {  // merges in rank order, each result built of lower ranks
    const auto& m = l.data.merges[i];
    EXPECT_LT(l.data.merges[i - 1].result, m.result);
    EXPECT_LT(m.left, m.result);
    EXPECT_LT(m.right, m.result);
  }
}

TEST(Llama3Vocab, LlamaCppConformanceVectors) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  run_vectors(l.table, "ggml-vocab-llama-bpe");
}

TEST(Llama3Vocab, SpecialTokensRoundTrip) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  for (int32_t id = 128000; id < 128256; ++id) {
    const std::string& text = l.data.pieces[static_cast<size_t>(id)];
    ASSERT_EQ(enc(l.table, text), (std::vector<int32_t>{id})) << text;
    // Control tokens decode to nothing by default, to their text with kTokenTextSpecial.
    EXPECT_EQ(decode(l.table, {id}), "");
    EXPECT_EQ(decode(l.table, {id}, ringlm::internal::kTokenTextSpecial), text);
    // Without special parsing the text is ordinary text (and decodes back to itself).
    const std::vector<int32_t> plain = enc_plain(l.table, text);
    EXPECT_GT(plain.size(), 1u);
    EXPECT_EQ(decode(l.table, plain), text);
  }
}

TEST(Llama3Vocab, ChatTemplateText) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  const std::string text =
      "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi there<|eot_id|>"
      "<|start_header_id|>assistant<|end_header_id|>\n\n";
  const std::vector<int32_t> ids = enc(l.table, text);
  EXPECT_EQ(ids, (std::vector<int32_t>{128000, 128006, 882, 128007, 271, 13347, 1070, 128009,
                                       128006, 78191, 128007, 271}));
  EXPECT_EQ(decode(l.table, ids, ringlm::internal::kTokenTextSpecial), text);
  EXPECT_EQ(decode(l.table, ids), "user\n\nHi thereassistant\n\n");
  // BOS from the flag, then the text.
  EXPECT_EQ(enc(l.table, "Hello", true), (std::vector<int32_t>{128000, 9906}));
  EXPECT_EQ(enc(l.table, "", true), (std::vector<int32_t>{128000}));
  EXPECT_TRUE(enc(l.table, "").empty());
  // A special token glued to text, and an incomplete one (ordinary text).
  EXPECT_EQ(enc(l.table, "x<|eot_id|>y"), (std::vector<int32_t>{87, 128009, 88}));
  const std::vector<int32_t> partial = enc(l.table, "<|eot_id|");
  EXPECT_EQ(std::count(partial.begin(), partial.end(), 128009), 0);
  EXPECT_EQ(decode(l.table, partial), "<|eot_id|");
}

TEST(Llama3Vocab, LongTextTiming) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  const std::string para =
      "The quick brown fox jumps over the lazy dog. In 1999, 42 researchers couldn't agree "
      "on whether it's a \"fox\" or a wolf; they'd argued for 3.14159 hours!\n"
      "Tokenizers split text into words, then merge byte pairs by rank until none is left.\n";
  std::string text;
  while (text.size() < 10240) text += para;
  text.resize(10240);
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(l.table.tok(), text.size()));
  std::vector<int32_t> ids(text.size() + 1);
  size_t n = 0;
  double best_ms = 1e9;
  for (int rep = 0; rep < 5; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    ASSERT_EQ(ringlm::internal::tokenize(l.table.tok(), l.table.vocab, text.data(), text.size(), false,
                               ids.data(), ids.size(), &n, scratch.data(), scratch.size(),
                               nullptr),
              RLM_OK);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    best_ms = std::min(best_ms, ms);
  }
  ids.resize(n);
  printf("llama3: 10 KiB of English -> %zu tokens in %.2f ms (best of 5); scratch %zu bytes\n", n,
         best_ms, scratch.size());
  EXPECT_EQ(decode(l.table, ids), text);
}

// ---- random round trips on real vocabularies ------------------------------------------------

std::string random_text(std::mt19937* rng, size_t max_len) {
  static const char* const kAtoms[] = {
      " ",    "  ",  "\t", "\n", "\r\n", "a",  "Z",   "hello", "'s", "'LL", "'re", "0",  "123",
      "4567", ".",   "!!", "é",  "ß",    "日本", "語", "🙂",    "👍🏽", "\xC2\xA0", "\xE3\x80\x80",
      "\xFF", "\xC3", "\xE2\x82", "<|",  "|>",   "<|eot_id|>", "<|endoftext|>", "x\xF0\x9F", "½",
      "Ⅻ",  "\x85", "\xCD\x8F", "\xD9\xA3", "‍",    "\xEF\xBB\xBF", "\0"};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAtoms) / sizeof(kAtoms[0]) - 1);
  std::uniform_int_distribution<size_t> len(0, max_len);
  std::uniform_int_distribution<int> byte(0, 255);
  std::string s;
  const size_t n = len(*rng);
  for (size_t i = 0; i < n; ++i) {
    const size_t k = pick(*rng);
    if (k == 0 && byte(*rng) < 40) {
      s += static_cast<char>(byte(*rng));  // any byte
    } else if (std::string(kAtoms[k]).empty()) {
      s += '\0';
    } else {
      s += kAtoms[k];
    }
  }
  return s;
}

void random_round_trips(const Table& t, uint32_t seed) {
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 400; ++iter) {
    const std::string text = random_text(&rng, 40);
    std::vector<int32_t> ids;
    ASSERT_EQ(encode(t, text, ringlm::internal::kTokenizeParseSpecial, &ids), RLM_OK);
    for (int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<uint32_t>(id) < t.vocab);
    ASSERT_EQ(decode(t, ids, ringlm::internal::kTokenTextSpecial), text) << tokvec::join(ids);
    ASSERT_EQ(encode(t, text, 0, &ids), RLM_OK);
    ASSERT_EQ(decode(t, ids), text);
  }
}

TEST(Gpt2Vocab, RandomTextRoundTripsIncludingInvalidUtf8) {
  Loaded& l = gpt2();
  REQUIRE_VOCAB(l);
  random_round_trips(l.table, 1);
}

TEST(Llama3Vocab, RandomTextRoundTripsIncludingInvalidUtf8) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  random_round_trips(l.table, 2);
}

TEST(Llama3Vocab, InvalidUtf8IsKeptByteForByte) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  for (const std::string text :
       {std::string("\xFF"), std::string("abc\xC3"), std::string("\xE2\x82 x"),
        std::string("\xED\xA0\x80"), std::string("\xC0\x80\xF5\x80\x80\x80"),
        std::string("1\xFF" "2\xFE" "3"), std::string("\xF0\x9F\x98", 3) + "\xF0\x9F\x98\x80"}) {
    const std::vector<int32_t> ids = enc(l.table, text);
    EXPECT_FALSE(ids.empty());
    EXPECT_EQ(decode(l.table, ids), text);
  }
}

// ---- capacity and scratch -------------------------------------------------------------------

TEST(Llama3Vocab, CapacityAndScratchErrors) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  const fb::Tokenizer* tok = l.table.tok();
  const std::string text = "Hello world, this is a test.";
  const std::vector<int32_t> full = enc(l.table, text, true);
  ASSERT_GT(full.size(), 3u);

  // Too small an output: RLM_ERR_CAPACITY, the count needed, and the prefix written.
  std::vector<int32_t> ids;
  EXPECT_EQ(encode(l.table, text, ringlm::internal::kTokenizeAddBos | ringlm::internal::kTokenizeParseSpecial, &ids,
                   2),
            RLM_ERR_CAPACITY);
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(tok, text.size()));
  std::vector<int32_t> out(3, -7);
  size_t n = 0;
  char msg[256] = {0};
  ErrorSink err{msg, sizeof(msg)};
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), true, out.data(), 2,
                             &n, scratch.data(), scratch.size(), &err),
            RLM_ERR_CAPACITY);
  EXPECT_EQ(n, full.size());
  EXPECT_EQ(out[0], full[0]);
  EXPECT_EQ(out[1], full[1]);
  EXPECT_EQ(out[2], -7);  // nothing past cap
  EXPECT_NE(strstr(msg, "capacity"), nullptr) << msg;

  // Capacity 0 with a null output counts.
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), false, nullptr, 0, &n,
                             scratch.data(), scratch.size(), &err),
            RLM_ERR_CAPACITY);
  EXPECT_EQ(n, full.size() - 1);

  // Scratch one byte short, or missing.
  out.assign(full.size(), 0);
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), true, out.data(),
                             out.size(), &n, scratch.data(), scratch.size() - 1, &err),
            RLM_ERR_BUFFER_TOO_SMALL);
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), true, out.data(),
                             out.size(), &n, nullptr, 0, &err),
            RLM_ERR_BUFFER_TOO_SMALL);
  // Exactly enough scratch works, at any alignment the caller's buffer has... as long as the
  // size covers the alignment slack the estimate includes.
  std::vector<uint8_t> big(scratch.size() + 16);
  for (size_t off = 0; off < 8; ++off) {
    EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), true, out.data(),
                               out.size(), &n, big.data() + off, scratch.size(), &err),
              RLM_OK)
        << msg;
    EXPECT_EQ(std::vector<int32_t>(out.begin(), out.begin() + static_cast<long>(n)), full);
  }
  // Scratch grows with the text and the special tokens, not with the vocab's normal pieces.
  const size_t s0 = ringlm::internal::tokenize_scratch_bytes(tok, 0);
  EXPECT_LE(s0, 8 + 1024 + 256 * 4 + 8u);
  EXPECT_LE(ringlm::internal::tokenize_scratch_bytes(tok, 1000), s0 + 40 * 1000);
  EXPECT_EQ(ringlm::internal::tokenize_scratch_bytes(tok, (size_t{1} << 28) + 1), SIZE_MAX);
  // Null n_out / text / tables.
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, text.data(), text.size(), true, out.data(),
                             out.size(), nullptr, scratch.data(), scratch.size(), &err),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab, nullptr, 3, true, out.data(), out.size(), &n,
                             scratch.data(), scratch.size(), &err),
            RLM_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ringlm::internal::tokenize(tok, l.table.vocab + 1, text.data(), text.size(), true, out.data(),
                             out.size(), &n, scratch.data(), scratch.size(), &err),
            RLM_ERR_MODEL_TOKENIZER);
}

// ---- pre-tokenizers -------------------------------------------------------------------------

using W = std::vector<std::string>;

TEST(PreTokenizer, Gpt2) {
  const auto P = fb::PreTokenizer::Gpt2;
  EXPECT_EQ(split(P, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(split(P, "I'm you're we'LL it's"),
            (W{"I", "'m", " you", "'re", " we", "'", "LL", " it", "'s"}));
  EXPECT_EQ(split(P, "'s's"), (W{"'s", "'s"}));
  EXPECT_EQ(split(P, "a1 22 333 4444 55555 666666 7777777"),
            (W{"a", "1", " 22", " 333", " 4444", " 55555", " 666666", " 7777777"}));
  EXPECT_EQ(split(P, "   Hello"), (W{"  ", " Hello"}));
  EXPECT_EQ(split(P, "Hello   "), (W{"Hello", "   "}));
  EXPECT_EQ(split(P, "a \t\tb"), (W{"a", " \t", "\t", "b"}));
  EXPECT_EQ(split(P, "x\r\n\r\ny"), (W{"x", "\r\n\r", "\n", "y"}));
  EXPECT_EQ(split(P, "hi!!! ??"), (W{"hi", "!!!", " ??"}));
  EXPECT_EQ(split(P, "Привет мир日本語"), (W{"Привет", " мир日本語"}));
  EXPECT_EQ(split(P, "🙂🙂 👍"), (W{"🙂🙂", " 👍"}));
  EXPECT_EQ(split(P, "½Ⅻ x²"), (W{"½Ⅻ", " x", "²"}));
  EXPECT_EQ(split(P, "a\xC2\xA0" "b"), (W{"a", "\xC2\xA0", "b"}));  // NBSP is \s
  EXPECT_EQ(split(P, "\xFF\xFEz"), (W{"\xFF\xFE", "z"}));            // invalid bytes: Other
  EXPECT_TRUE(split(P, "").empty());
}

TEST(PreTokenizer, Llama3) {
  const auto P = fb::PreTokenizer::Llama3;
  EXPECT_EQ(split(P, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(split(P, "I'M you'Re WE'LL it's"),
            (W{"I", "'M", " you", "'Re", " WE", "'LL", " it", "'s"}));
  EXPECT_EQ(split(P, "1 22 333 4444 55555 666666 7777777"),
            (W{"1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55", " ", "666", "666",
               " ", "777", "777", "7"}));
  EXPECT_EQ(split(P, "   Hello"), (W{"  ", " Hello"}));
  EXPECT_EQ(split(P, "\tHello"), (W{"\tHello"}));
  EXPECT_EQ(split(P, "(hello) $5"), (W{"(hello", ")", " $", "5"}));
  EXPECT_EQ(split(P, "x\r\n\r\ny"), (W{"x", "\r\n\r\n", "y"}));
  EXPECT_EQ(split(P, "x  \n  \n  y"), (W{"x", "  \n  \n", " ", " y"}));
  EXPECT_EQ(split(P, "end.\n\nNext"), (W{"end", ".\n\n", "Next"}));
  EXPECT_EQ(split(P, "a   "), (W{"a", "   "}));
  EXPECT_EQ(split(P, "日本語のテキスト"), (W{"日本語のテキスト"}));
  EXPECT_EQ(split(P, "Привет, мир!"), (W{"Привет", ",", " мир", "!"}));
  EXPECT_EQ(split(P, "🙂🙂 👍!"), (W{"🙂🙂", " 👍!"}));
  EXPECT_EQ(split(P, "\xFF" "abc"), (W{"\xFF" "abc"}));  // an invalid byte is [^\r\n\p{L}\p{N}]
  EXPECT_EQ(split(P, "x'"), (W{"x", "'"}));
}

TEST(PreTokenizer, Qwen2) {
  const auto P = fb::PreTokenizer::Qwen2;
  EXPECT_EQ(split(P, "a 1234567"), (W{"a", " ", "1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split(P, "I'VE 12 apples\r\n"), (W{"I", "'VE", " ", "1", "2", " apples", "\r\n"}));
  EXPECT_EQ(split(P, "  Hello"), (W{" ", " Hello"}));
}

TEST(PreTokenizer, StarCoder) {
  const auto P = fb::PreTokenizer::StarCoder;
  EXPECT_EQ(split(P, "a 1234567"), (W{"a", " ", "1", "2", "3", "4", "5", "6", "7"}));
  EXPECT_EQ(split(P, "x  12y"), (W{"x", "  ", "1", "2", "y"}));  // digits end the space run
  EXPECT_EQ(split(P, "I'm 3 cats' toys"),
            (W{"I", "'m", " ", "3", " cats", "'", " toys"}));
  EXPECT_EQ(split(P, "v2.0 ½"), (W{"v", "2", ".", "0", " ", "½"}));
  EXPECT_EQ(split(P, "   Hello"), (W{"  ", " Hello"}));
}

TEST(PreTokenizer, NoneKeepsTextWhole) {
  EXPECT_EQ(split(fb::PreTokenizer::None, "a b  c 1"), (W{"a b  c 1"}));
}

// Unicode classes and the GPT-2 byte map.
TEST(Unicode, ClassesAndByteMap) {
  using ringlm::internal::CpClass;
  EXPECT_EQ(ringlm::internal::cp_class('a'), CpClass::Letter);
  EXPECT_EQ(ringlm::internal::cp_class('7'), CpClass::Number);
  EXPECT_EQ(ringlm::internal::cp_class(' '), CpClass::Space);
  EXPECT_EQ(ringlm::internal::cp_class('\v'), CpClass::Space);
  EXPECT_EQ(ringlm::internal::cp_class(0x1C), CpClass::Other);  // not White_Space (str.isspace says yes)
  EXPECT_EQ(ringlm::internal::cp_class(0x85), CpClass::Space);
  EXPECT_EQ(ringlm::internal::cp_class(0x3000), CpClass::Space);
  EXPECT_EQ(ringlm::internal::cp_class(0x200B), CpClass::Other);  // zero width space is not \s
  EXPECT_EQ(ringlm::internal::cp_class(0x65E5), CpClass::Letter);  // 日
  EXPECT_EQ(ringlm::internal::cp_class(0xBD), CpClass::Number);    // ½
  EXPECT_EQ(ringlm::internal::cp_class(0x0301), CpClass::Other);   // combining acute (Mn)
  EXPECT_EQ(ringlm::internal::cp_class(0x1F642), CpClass::Other);  // 🙂
  EXPECT_EQ(ringlm::internal::cp_class(0x10FFFF), CpClass::Other);
  EXPECT_EQ(ringlm::internal::cp_class(0x110000), CpClass::Other);
  EXPECT_STREQ(ringlm::internal::unicode_tables_version(), "14.0.0");
  int seen[0x144] = {0};
  for (int b = 0; b < 256; ++b) {
    const uint32_t cp = ringlm::internal::gpt2_byte_to_cp(static_cast<uint8_t>(b));
    ASSERT_LT(cp, 0x144u);
    EXPECT_EQ(seen[cp]++, 0) << "byte " << b;
    EXPECT_EQ(ringlm::internal::gpt2_cp_to_byte(cp), b);
  }
  EXPECT_EQ(ringlm::internal::gpt2_byte_to_cp(' '), 0x120u);   // Ġ
  EXPECT_EQ(ringlm::internal::gpt2_byte_to_cp('\n'), 0x10Au);  // Ċ
  EXPECT_EQ(ringlm::internal::gpt2_cp_to_byte(0x144), -1);
  EXPECT_EQ(ringlm::internal::gpt2_cp_to_byte(0x20), -1);
}

// ---- a small synthetic table ----------------------------------------------------------------

std::string g(const std::string& raw) {  // raw bytes -> GPT-2 characters
  std::string s;
  for (unsigned char b : raw) {
    uint8_t u[2];
    s.append(reinterpret_cast<const char*>(u), ringlm::internal::gpt2_byte_to_utf8(b, u));
  }
  return s;
}

int32_t id_of(const TokenizerData& d, const std::string& piece) {
  for (size_t i = 0; i < d.pieces.size(); ++i)
    if (d.pieces[i] == piece) return static_cast<int32_t>(i);
  return -1;
}

// All 256 byte characters, a few merges, specials and a user-defined token.
TokenizerData tiny_table(bool all_bytes = true) {
  TokenizerData d;
  d.kind = fb::TokenizerKind::ByteLevel;
  d.pre_tokenizer = fb::PreTokenizer::Gpt2;
  d.add_space_prefix = false;
  d.byte_fallback = false;
  auto add = [&](const std::string& p, fb::TokenType t = fb::TokenType::Normal) {
    d.pieces.push_back(p);
    d.types.push_back(t);
    return static_cast<uint32_t>(d.pieces.size() - 1);
  };
  for (int b = 0; b < 256; ++b) {
    if (!all_bytes && b == 'q') continue;
    add(g(std::string(1, static_cast<char>(b))));
  }
  auto merge = [&](const std::string& l, const std::string& r) {
    const int32_t li = id_of(d, g(l)), ri = id_of(d, g(r));
    const uint32_t res = add(g(l + r));
    d.merges.push_back({static_cast<uint32_t>(li), static_cast<uint32_t>(ri), res});
  };
  merge("l", "o");    // rank 0
  merge("h", "e");    // rank 1
  merge("he", "l");   // rank 2
  merge("hel", "lo");  // rank 3 -> never reached: "l"+"o" went first
  merge("hel", "l");  // rank 4
  merge("hell", "o");  // rank 5
  merge(" ", "w");    // rank 6
  d.bos_id = static_cast<int32_t>(add("<s>", fb::TokenType::Control));
  add("<|a|>", fb::TokenType::Control);
  add("<|a|><|b|>", fb::TokenType::Control);  // longer special wins at the same position
  add("<|b|>", fb::TokenType::Control);
  add("<|b|>", fb::TokenType::Control);        // duplicate: the lower id is used
  add("<think>", fb::TokenType::UserDefined);  // raw text, decodes as itself
  add("", fb::TokenType::Control);             // empty: never matched
  d.eos_id = d.bos_id;
  d.end_ids = {d.bos_id};
  return d;
}

TEST(TinyByteLevel, MergesByRankAndLeftmost) {
  const TokenizerData d = tiny_table();
  const Table t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  // "hello": l+o (rank 0) first, then h+e, he+l -> "hel" "lo": rank 3 merges them.
  EXPECT_EQ(enc(t, "hello"), (std::vector<int32_t>{id_of(d, g("hello"))}));
  EXPECT_EQ(enc(t, "hell"), (std::vector<int32_t>{id_of(d, g("hell"))}));
  EXPECT_EQ(enc(t, "lolo"), (std::vector<int32_t>{id_of(d, g("lo")), id_of(d, g("lo"))}));
  EXPECT_EQ(enc(t, " w"), (std::vector<int32_t>{id_of(d, g(" w"))}));
  EXPECT_EQ(enc(t, "x  w"),
            (std::vector<int32_t>{id_of(d, "x"), id_of(d, g(" ")), id_of(d, g(" w"))}));
  EXPECT_EQ(decode(t, enc(t, "hello  world\n")), "hello  world\n");
}

TEST(TinyByteLevel, SpecialTokenMatching) {
  const TokenizerData d = tiny_table();
  const Table t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  const int32_t a = id_of(d, "<|a|>"), ab = id_of(d, "<|a|><|b|>"), b = id_of(d, "<|b|>");
  const int32_t think = id_of(d, "<think>"), bos = d.bos_id;
  EXPECT_EQ(enc(t, "<|a|>"), (std::vector<int32_t>{a}));
  EXPECT_EQ(enc(t, "<|a|><|b|>"), (std::vector<int32_t>{ab}));
  EXPECT_EQ(enc(t, "<|a|><|b|><|b|>"), (std::vector<int32_t>{ab, b}));
  EXPECT_EQ(enc(t, "<|b|><|a|>"), (std::vector<int32_t>{b, a}));
  EXPECT_EQ(enc(t, "<s><think>"), (std::vector<int32_t>{bos, think}));
  EXPECT_EQ(enc(t, "<|a|", true), (std::vector<int32_t>{bos, id_of(d, "<"), id_of(d, "|"),
                                                        id_of(d, "a"), id_of(d, "|")}));
  // Decode: control -> nothing (or its text), user-defined -> its raw text.
  EXPECT_EQ(decode(t, {a, think, b}), "<think>");
  EXPECT_EQ(decode(t, {a, think, b}, ringlm::internal::kTokenTextSpecial), "<|a|><think><|b|>");
  // Without special parsing every byte is text.
  std::vector<int32_t> ids = enc_plain(t, "<s>");
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of(d, "<"), id_of(d, "s"), id_of(d, ">")}));
}

TEST(TinyByteLevel, MissingByteCharacterBecomesUnkOrNothing) {
  TokenizerData d = tiny_table(false);  // no piece for 'q'
  Table t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  // "aqa" is one word: a, (q dropped), a.
  const std::vector<int32_t> ids = enc(t, "aqa");
  EXPECT_EQ(ids, (std::vector<int32_t>{id_of(d, "a"), id_of(d, "a")}));
  d.unk_id = id_of(d, "<think>");
  d.types[static_cast<size_t>(d.unk_id)] = fb::TokenType::Unknown;
  t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  EXPECT_EQ(enc(t, "aqa"), (std::vector<int32_t>{id_of(d, "a"), d.unk_id, id_of(d, "a")}));
  EXPECT_EQ(enc(t, "q"), (std::vector<int32_t>{d.unk_id}));
}

TEST(TinyByteLevel, NoMergesAndNoSplit) {
  TokenizerData d = tiny_table();
  d.merges.clear();
  d.pre_tokenizer = fb::PreTokenizer::None;
  const Table t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  EXPECT_EQ(enc(t, "he"), (std::vector<int32_t>{id_of(d, "h"), id_of(d, "e")}));
  EXPECT_EQ(decode(t, enc(t, "any text\xFF")), "any text\xFF");
}

TEST(TinyByteLevel, DecodeOfPiecesOutsideTheAlphabet) {
  TokenizerData d = tiny_table();
  d.pieces.push_back("x\xE2\x96\x81y\xFF");  // U+2581 and an invalid byte: copied as they are
  d.types.push_back(fb::TokenType::Normal);
  d.pieces.push_back(g("\xE6\x97\xA5"));  // 日 as three byte characters
  d.types.push_back(fb::TokenType::Normal);
  d.pieces.push_back("<unused_1>");
  d.types.push_back(fb::TokenType::Unused);
  const Table t = tokvec::make_table(d);
  ASSERT_TRUE(verified(t));
  const int32_t n = static_cast<int32_t>(d.pieces.size());
  EXPECT_EQ(decode(t, {n - 3}), "x\xE2\x96\x81y\xFF");
  EXPECT_EQ(decode(t, {n - 2}), "\xE6\x97\xA5");
  EXPECT_EQ(decode(t, {n - 1}), "");
  EXPECT_EQ(decode(t, {n}), "");
  EXPECT_EQ(decode(t, {-1}), "");
  // token_text writes at most cap bytes and returns the full length.
  char buf[2] = {'#', '#'};
  EXPECT_EQ(ringlm::internal::token_text(t.tok(), -1, n - 2, buf, 1), 3u);
  EXPECT_EQ(buf[0], '\xE6');
  EXPECT_EQ(buf[1], '#');
}

// Random tables that pass verify_tokenizer (odd pieces, types, merges and pre-tokenizers) must
// encode and decode any text without reading out of bounds (run under ASan/UBSan).
TEST(TinyByteLevel, RandomVerifiedTablesAreSafeForAnyInput) {
  std::mt19937 rng(11);
  const char kAlphabet[] = "ab <|>'\n\r\t1\xC4\xA0\xC3\xFF\x80\xE6\x97\xA5";
  const size_t kAlpha = sizeof(kAlphabet) - 1;
  for (int table = 0; table < 60; ++table) {
    TokenizerData d;
    d.kind = fb::TokenizerKind::ByteLevel;
    d.pre_tokenizer = static_cast<fb::PreTokenizer>(rng() % 5);
    const size_t n = 1 + rng() % 40;
    for (size_t i = 0; i < n; ++i) {
      std::string p(rng() % (i == 0 ? 300 : 6), '\0');
      if (p.size() > ringlm::internal::kMaxPieceBytes) p.resize(ringlm::internal::kMaxPieceBytes);
      for (char& c : p) c = kAlphabet[rng() % kAlpha];
      if (rng() % 3 == 0) p = g(std::string(1, static_cast<char>(rng() % 256)));
      d.pieces.push_back(p);
      d.types.push_back(static_cast<fb::TokenType>(rng() % 6));
    }
    std::vector<std::pair<uint32_t, uint32_t>> seen;
    for (size_t m = 0, count = rng() % 60; m < count; ++m) {
      const uint32_t l = rng() % n, r = rng() % n;
      if (std::find(seen.begin(), seen.end(), std::make_pair(l, r)) != seen.end()) continue;
      seen.emplace_back(l, r);
      d.merges.push_back({l, r, static_cast<uint32_t>(rng() % n)});
    }
    d.bos_id = static_cast<int32_t>(rng() % n);
    d.unk_id = rng() % 2 ? static_cast<int32_t>(rng() % n) : -1;
    const Table t = tokvec::make_table(d);
    ASSERT_TRUE(verified(t));
    for (int iter = 0; iter < 60; ++iter) {
      std::string text(rng() % 48, '\0');
      for (char& c : text) c = kAlphabet[rng() % kAlpha];
      if (iter % 7 == 0 && !d.pieces.empty()) text += d.pieces[rng() % n] + d.pieces[rng() % n];
      for (uint32_t flags = 0; flags < 4; ++flags) {
        std::vector<int32_t> ids;
        ASSERT_EQ(encode(t, text, flags, &ids, 4 * text.size() + 4), RLM_OK);
        for (int32_t id : ids) ASSERT_TRUE(id >= 0 && static_cast<uint32_t>(id) < t.vocab);
        decode(t, ids);
        decode(t, ids, ringlm::internal::kTokenTextSpecial);
      }
    }
  }
}

// ---- Hugging Face tokenizer.json (byte-level) -----------------------------------------------

// A byte-level tokenizer.json from the tiny table: vocab, merges as "a b" strings, added tokens,
// and the given pre-tokenizer / post-processor nodes.
std::string write_tokenizer_json(const std::string& dir, const nlohmann::json& pre,
                                 const nlohmann::json& post) {
  using nlohmann::json;
  const TokenizerData d = tiny_table();
  json vocab = json::object();
  json added = json::array();
  for (size_t i = 0; i < d.pieces.size(); ++i) {
    if (d.pieces[i].empty()) continue;
    if (d.types[i] == fb::TokenType::Normal) {
      vocab[d.pieces[i]] = i;
    } else if (!vocab.contains(d.pieces[i])) {
      added.push_back({{"id", i},
                       {"content", d.pieces[i]},
                       {"special", d.types[i] == fb::TokenType::Control}});
    }
  }
  json merges = json::array();
  for (const auto& m : d.merges) merges.push_back(d.pieces[m.left] + " " + d.pieces[m.right]);
  json j = {{"version", "1.0"},
            {"added_tokens", added},
            {"pre_tokenizer", pre},
            {"post_processor", post},
            {"decoder", {{"type", "ByteLevel"}}},
            {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", merges}}}};
  const std::string path = dir + "/tokenizer.json";
  std::ofstream(path) << j.dump();
  return path;
}

TEST(HfTokenizerJson, ByteLevelReaderAndPreTokenizerDetection) {
  using nlohmann::json;
  const std::string dir = ringlm_test::temp_dir();
  const json byte_level = {{"type", "ByteLevel"}, {"add_prefix_space", false},
                           {"use_regex", false}};
  const json split_llama3 = {
      {"type", "Split"},
      {"pattern",
       {{"Regex",
         "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| "
         "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"}}},
      {"behavior", "Isolated"}};
  json split_qwen2 = split_llama3;
  split_qwen2["pattern"]["Regex"] =
      "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| "
      "?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
  const json digits = {{"type", "Digits"}, {"individual_digits", true}};
  const json post_llama3 = {
      {"type", "Sequence"},
      {"processors",
       {{{"type", "ByteLevel"}},
        {{"type", "TemplateProcessing"},
         {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                     {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}}}}}};
  const json no_post = nullptr;
  struct Case {
    json pre, post;
    fb::PreTokenizer want;
    bool bos;
  } cases[] = {
      {{{"type", "Sequence"}, {"pretokenizers", {split_llama3, byte_level}}}, post_llama3,
       fb::PreTokenizer::Llama3, true},
      {{{"type", "Sequence"}, {"pretokenizers", {split_qwen2, byte_level}}}, no_post,
       fb::PreTokenizer::Qwen2, false},
      {{{"type", "Sequence"}, {"pretokenizers", {digits, byte_level}}}, no_post,
       fb::PreTokenizer::StarCoder, false},
      {byte_level, no_post, fb::PreTokenizer::Gpt2, false},
  };
  const TokenizerData tiny = tiny_table();
  for (const Case& c : cases) {
    const std::string path = write_tokenizer_json(dir, c.pre, c.post);
    TokenizerData d;
    std::string err;
    ASSERT_TRUE(ringlm::internal::conv::read_hf_tokenizer(path, &d, &err)) << err;
    EXPECT_EQ(d.kind, fb::TokenizerKind::ByteLevel);
    EXPECT_EQ(d.pre_tokenizer, c.want);
    EXPECT_EQ(d.add_bos, c.bos);
    EXPECT_EQ(d.bos_id, c.bos ? tiny.bos_id : -1);
    ASSERT_EQ(d.pieces.size(), tiny.pieces.size() - 1);  // the empty piece is left out
    EXPECT_EQ(d.types[static_cast<size_t>(id_of(tiny, "<|a|>"))], fb::TokenType::Control);
    EXPECT_EQ(d.types[static_cast<size_t>(id_of(tiny, "<think>"))], fb::TokenType::UserDefined);
    const Table t = tokvec::make_table(d);
    ASSERT_TRUE(verified(t));
    // (tiny has "hello" twice; a JSON vocab keeps one, so ids come from what was read.)
    EXPECT_EQ(enc(t, "hello<|a|><think>"),
              (std::vector<int32_t>{id_of(d, g("hello")), id_of(tiny, "<|a|>"),
                                    id_of(tiny, "<think>")}));
    // The same through the CLI, given the directory.
    std::string out;
    ASSERT_EQ(ringlm_test::run_command(
                  ringlm_test::ringlm_bin() + " tokenize --vocab " + dir + " 'hello<|a|>'", &out),
              0);
    EXPECT_EQ(out, std::to_string(id_of(d, g("hello"))) + " " +
                       std::to_string(id_of(tiny, "<|a|>")) + "\n");
  }
}

// ---- CLI ------------------------------------------------------------------------------------

std::string shq(const std::string& s) {  // single-quoted for the shell
  std::string q = "'";
  for (char c : s) {
    if (c == '\'') q += "'\\''";
    else q += c;
  }
  return q + "'";
}

std::vector<int32_t> parse_ids(const std::string& s) {
  std::vector<int32_t> ids;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\n')) ++i;
    if (i >= s.size()) break;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\n') ++j;
    ids.push_back(std::stoi(s.substr(i, j - i)));
    i = j;
  }
  return ids;
}

TEST(Cli, TokenizeMatchesLibraryGpt2) {
  Loaded& l = gpt2();
  REQUIRE_VOCAB(l);
  const std::string vocab = ringlm_test::shared_path("tokenizers/vectors/ggml-vocab-gpt-2.gguf");
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(
                ringlm_test::ringlm_bin() + " tokenize --vocab " + shq(vocab) + " \"Hello world\"",
                &out),
            0);
  EXPECT_EQ(out, "15496 995\n");
  EXPECT_EQ(parse_ids(out), enc(l.table, "Hello world"));

  // --file reads the text byte for byte (newlines, invalid UTF-8 and all).
  const std::string text = "Line one\n\tLine two: 12345 \xFF\xFE!\n";
  const std::string path = ringlm_test::temp_dir() + "/text.bin";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " +
                                         shq(vocab) + " --file " + shq(path),
                                     &out),
            0);
  const std::vector<int32_t> ids = parse_ids(out);
  EXPECT_EQ(ids, enc(l.table, text));

  // detokenize prints the raw bytes back.
  std::string cmd = ringlm_test::ringlm_bin() + " detokenize --vocab " + shq(vocab);
  for (int32_t id : ids) cmd += " " + std::to_string(id);
  ASSERT_EQ(ringlm_test::run_command(cmd, &out), 0);
  EXPECT_EQ(out, text);
}

TEST(Cli, TokenizeTiktokenAndSpecials) {
  Loaded& l = llama3();
  REQUIRE_VOCAB(l);
  const std::string vocab = ringlm_test::shared_path("tokenizers/llama3/tokenizer.model");
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " +
                                         shq(vocab) + " --bos " + shq("<|eot_id|>Hello world"),
                                     &out),
            0);
  EXPECT_EQ(parse_ids(out), (std::vector<int32_t>{128000, 128009, 9906, 1917}));
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " +
                                         shq(vocab) + " --no-special " + shq("<|eot_id|>"),
                                     &out),
            0);
  EXPECT_EQ(parse_ids(out), enc_plain(l.table, "<|eot_id|>"));
  // (detokenize without --special, which drops control tokens, is covered with GPT-2 above.)
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " detokenize --special --vocab " +
                                         shq(vocab) + " 128000 9906 1917 128009",
                                     &out),
            0);
  EXPECT_EQ(out, "<|begin_of_text|>Hello world<|eot_id|>");
}

TEST(Cli, TokenizeLlama2TokenizerBin) {
  const std::string vocab = ringlm_test::shared_path("tokenizers/llama2/tokenizer.bin");
  if (vocab.empty()) GTEST_SKIP() << "../shared/tokenizers/llama2/tokenizer.bin not available";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --bos --vocab " +
                                         shq(vocab) + " \"Hello world\"",
                                     &out),
            0);
  EXPECT_EQ(out, "1 15043 3186\n");
  ASSERT_EQ(ringlm_test::run_command(
                ringlm_test::ringlm_bin() + " detokenize --vocab " + shq(vocab) + " 1 15043 3186",
                &out),
            0);
  EXPECT_EQ(out, "Hello world");
}

TEST(Cli, TokenizeWithModelFile) {
  const std::string ckpt = ringlm_test::shared_path("models/stories260K/stories260K.bin");
  const std::string tok = ringlm_test::shared_path("models/stories260K/tok512.bin");
  if (ckpt.empty() || tok.empty()) GTEST_SKIP() << "../shared/models/stories260K not available";
  const std::string bin = ringlm_test::ringlm_bin();
  const std::string model = ringlm_test::temp_dir() + "/stories260K.rlm";
  std::string out;
  ASSERT_EQ(ringlm_test::run_command(bin + " convert " + shq(ckpt) + " --tokenizer " + shq(tok) +
                                         " -q -o " + shq(model),
                                     &out),
            0);
  const std::string text = "Once upon a time, Lily saw a big cat.";
  std::string by_model, by_vocab, by_model_as_vocab;
  ASSERT_EQ(ringlm_test::run_command(bin + " tokenize --bos -m " + shq(model) + " " + shq(text),
                                     &by_model),
            0);
  ASSERT_EQ(ringlm_test::run_command(bin + " tokenize --bos --vocab " + shq(tok) + " " + shq(text),
                                     &by_vocab),
            0);
  ASSERT_EQ(ringlm_test::run_command(
                bin + " tokenize --bos --vocab " + shq(model) + " " + shq(text), &by_model_as_vocab),
            0);
  EXPECT_EQ(by_model, by_vocab);
  EXPECT_EQ(by_model, by_model_as_vocab);
  const std::vector<int32_t> ids = parse_ids(by_model);
  ASSERT_GT(ids.size(), 3u);
  EXPECT_EQ(ids[0], 1);  // BOS
  ASSERT_EQ(ringlm_test::run_command(bin + " detokenize -m " + shq(model) + " " + shq(by_model),
                                     &out),
            0);
  EXPECT_EQ(out, text);
}

TEST(Cli, UsageAndFailures) {
  const std::string bin = ringlm_test::ringlm_bin();
  std::string out;
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --help", &out), 0);
  EXPECT_NE(out.find("usage: ringlm tokenize"), std::string::npos);
  EXPECT_EQ(ringlm_test::run_command(bin + " detokenize --help", &out), 0);
  EXPECT_NE(out.find("usage: ringlm detokenize"), std::string::npos);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --vocab x 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize -m a --vocab b t 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --bogus --vocab b t 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --vocab b t u 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " detokenize --vocab b 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " detokenize --vocab b 1x 2>/dev/null", &out), 2);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --vocab /nonexistent/v.gguf t 2>/dev/null",
                                     &out),
            1);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize -m /nonexistent/m.rlm t 2>/dev/null", &out),
            1);
  const std::string junk = ringlm_test::temp_dir() + "/junk.txt";
  {
    std::ofstream f(junk);
    f << "not a vocabulary\n";
  }
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --vocab " + shq(junk) + " t 2>/dev/null",
                                     &out),
            1);
  EXPECT_EQ(ringlm_test::run_command(bin + " tokenize --vocab " + shq(junk) +
                                         " --file /nonexistent/f 2>/dev/null",
                                     &out),
            1);
  const std::string gpt2v = ringlm_test::shared_path("tokenizers/vectors/ggml-vocab-gpt-2.gguf");
  if (!gpt2v.empty()) {
    EXPECT_EQ(ringlm_test::run_command(bin + " detokenize --vocab " + shq(gpt2v) +
                                           " 1 99999999 2>/dev/null",
                                       &out),
              1);
  }
}

}  // namespace
