// The grammar's token table (runtime/grammar/token_table.h, #15): every token's mid-text bytes,
// the byte-sorted order and the shared-prefix lengths, on real vocabularies (SentencePiece
// tok512, GPT-2's byte-level 50k, Llama 3's 128k) and on the synthetic one.
#include "grammar/token_table.h"

#include <string.h>

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "convert/ir.h"
#include "convert/readers.h"
#include "convert/synthetic.h"
#include "convert/tiktoken.h"
#include "heap_counter.h"
#include "model_generated.h"
#include "testing.h"
#include "tokenizer.h"
#include "tokenizer/limits.h"

namespace {

using namespace ringlm::internal;
using ringlm_test::AlignedBuffer;

struct Table {
  std::vector<uint8_t> fb;  // tokenizer-only FlatBuffer
  const fb::Tokenizer* tok = nullptr;
  uint32_t vocab = 0;
  AlignedBuffer mem;
  TokenTable t;
};

void build(const conv::TokenizerData& d, Table* out) {
  out->fb = conv::tokenizer_only_buffer(d);
  out->tok = flatbuffers::GetRoot<fb::Tokenizer>(out->fb.data());
  out->vocab = static_cast<uint32_t>(d.pieces.size());
  char msg[256] = "";
  ErrorSink err{msg, sizeof msg};
  ASSERT_EQ(verify_tokenizer(out->tok, out->vocab, &err), RLM_OK) << msg;
  Arena measure(nullptr, 0);
  TokenTable mt;
  ASSERT_EQ(token_table_layout(measure, out->tok, out->vocab, &mt, &err), RLM_OK) << msg;
  out->mem.resize(measure.used());
  Arena a(out->mem.data(), out->mem.size());
  Status st = RLM_OK;
  const ringlm_test::HeapCalls heap =
      ringlm_test::count_heap([&] { st = token_table_layout(a, out->tok, out->vocab, &out->t, &err); });
  ASSERT_EQ(st, RLM_OK) << msg;
  if (ringlm_test::kHeapCounting) {
    EXPECT_EQ(heap.allocs, 0) << "the table is built in the caller's block only";
  }
  EXPECT_EQ(a.used(), measure.used());
  EXPECT_EQ(mt.max_len, out->t.max_len);
}

// Every property the mask walk relies on, checked against token_text directly.
void check(const Table& tb) {
  const TokenTable& t = tb.t;
  ASSERT_EQ(t.vocab, tb.vocab);
  const int32_t prev = tb.tok->bos_id() == 0 ? 1 : 0;
  std::vector<char> seen(t.vocab, 0);
  uint32_t empty = 0, longest = 0;
  for (uint32_t id = 0; id < t.vocab; ++id) {
    char buf[kMaxPieceBytes];
    const size_t n = token_text(tb.tok, prev, static_cast<int32_t>(id), buf, sizeof buf);
    ASSERT_EQ(t.length(static_cast<int32_t>(id)), n) << id;
    ASSERT_EQ(memcmp(t.data(static_cast<int32_t>(id)), buf, n), 0) << id;
    if (n == 0) ++empty;
    if (n > longest) longest = static_cast<uint32_t>(n);
  }
  EXPECT_EQ(t.n_empty, empty);
  EXPECT_EQ(t.max_len, longest);
  for (uint32_t i = 0; i < t.vocab; ++i) {
    const int32_t id = t.sorted[i];
    ASSERT_GE(id, 0);
    ASSERT_LT(static_cast<uint32_t>(id), t.vocab);
    ASSERT_FALSE(seen[id]) << "sorted is a permutation";
    seen[id] = 1;
    EXPECT_EQ(t.length(id) == 0, i < t.n_empty) << "empty tokens first";
    if (i == 0) {
      EXPECT_EQ(t.lcp[0], 0);
      continue;
    }
    const std::string a(reinterpret_cast<const char*>(t.data(t.sorted[i - 1])), t.length(t.sorted[i - 1]));
    const std::string b(reinterpret_cast<const char*>(t.data(id)), t.length(id));
    ASSERT_TRUE(a < b || (a == b && t.sorted[i - 1] < id)) << i;
    size_t l = 0;
    while (l < a.size() && l < b.size() && a[l] == b[l]) ++l;
    ASSERT_EQ(t.lcp[i], l) << i;
  }
}

TEST(TokenTable, SyntheticVocabulary) {
  conv::TokenizerData d;
  std::string err;
  ASSERT_TRUE(conv::synthetic_tokenizer(1000, &d, &err)) << err;
  Table tb;
  build(d, &tb);
  check(tb);
  // <unk>, <s>, </s> are control tokens: no bytes. The 256 byte tokens are one byte each.
  EXPECT_GE(tb.t.n_empty, 2u);
  EXPECT_EQ(tb.t.length(3 + 'a'), 1u);
  EXPECT_EQ(tb.t.data(3 + 'a')[0], 'a');
}

TEST(TokenTable, SentencePieceTok512) {
  const std::string path = ringlm_test::shared_path("models/stories260K/tok512.bin");
  if (path.empty()) GTEST_SKIP() << "../shared/models/stories260K/tok512.bin not found";
  conv::TokenizerData d;
  std::string err;
  ASSERT_TRUE(conv::read_llama2c_tokenizer(path, 512, &d, &err)) << err;
  Table tb;
  build(d, &tb);
  check(tb);
  // "▁" pieces add a space in mid-text.
  const int32_t the = token_lookup(tb.tok, "\xE2\x96\x81the", 6);
  ASSERT_GE(the, 0);
  EXPECT_EQ(std::string(reinterpret_cast<const char*>(tb.t.data(the)), tb.t.length(the)), " the");
}

TEST(TokenTable, ByteLevelGpt2AndLlama3) {
  const std::string gpt2 = ringlm_test::shared_path("tokenizers/vectors/ggml-vocab-gpt-2.gguf");
  const std::string llama3 = ringlm_test::shared_path("tokenizers/llama3/tokenizer.model");
  if (gpt2.empty() || llama3.empty()) GTEST_SKIP() << "../shared/tokenizers vocabularies not found";
  std::string err;
  {
    conv::TokenizerData d;
    ASSERT_TRUE(conv::read_gguf_tokenizer(gpt2, &d, &err)) << err;
    Table tb;
    build(d, &tb);
    check(tb);
    EXPECT_EQ(tb.vocab, 50257u);
    // GPT-2 "Ġworld" (995) is " world".
    EXPECT_EQ(std::string(reinterpret_cast<const char*>(tb.t.data(995)), tb.t.length(995)), " world");
  }
  if (ringlm_test::ringlm_bin() != ringlm_test::ringlm_bin_path()) {
    return;  // under qemu: 128k tokens are slow there, and the 50k table covers the same code
  }
  conv::TokenizerData d;
  ASSERT_TRUE(conv::read_tiktoken(llama3, &d, &err)) << err;
  Table tb;
  build(d, &tb);
  check(tb);
  EXPECT_GT(tb.vocab, 128000u);
}

}  // namespace
