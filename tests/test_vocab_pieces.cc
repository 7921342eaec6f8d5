// Vocabularies as users get them (issue #18):
//  - pieces longer than the 256 bytes the format used to allow (code models' vocabularies hold
//    runs of spaces, tabs or dashes of several hundred bytes) convert, verify, tokenize, decode
//    and run through a session, a grammar mask and DRY; buffers holding one token's text are
//    sized by the model's longest piece (a model whose pieces fit 256 bytes keeps its layout);
//    the verifier's bound (kMaxPieceBytes) is still enforced;
//  - tokenizer.ggml.pre: every name llama.cpp knows is either split exactly as llama.cpp splits
//    it or refused naming it; unknown and missing names are refused too.
#include <stdint.h>
#include <string.h>

#include <memory>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "convert/pre_tokenizers.h"
#include "convert/readers.h"
#include "fixtures.h"
#include "gtest/gtest.h"
#include "model_writers.h"
#include "ringlm/ringlm.h"
#include "testing.h"
#include "tokenizer/limits.h"

namespace {

using namespace ringlm::internal;
using ringlm_test::AlignedBuffer;
using ringlm_test::GgufWriter;
using ringlm_test::write_temp;

bool contains(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}

// GPT-2's byte -> character map (bytes_to_unicode): printable Latin-1 bytes stand for
// themselves, the other 68 bytes for U+0100 + their rank; as UTF-8.
std::string gpt2_char(uint8_t b) {
  auto printable = [](int c) { return (c >= '!' && c <= '~') || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE); };
  uint32_t cp = b;
  if (!printable(b)) {
    uint32_t rank = 0;
    for (int c = 0; c < b; ++c) rank += !printable(c);
    cp = 256 + rank;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::string repeat(const std::string& s, size_t n) {
  std::string r;
  for (size_t i = 0; i < n; ++i) r += s;
  return r;
}

// A byte-level vocabulary: the 256 byte pieces (ids = byte values), <|endoftext|> (256), the
// dash runs "-" x 2^k for k = 1..10 built by merges (ids 257..266; the last is 1024 bytes), and
// a 300-space piece without merges (id 267, 600 bytes as GPT-2 characters).
constexpr int32_t kDashes1024 = 266, kSpaces300 = 267;

conv::TokenizerData long_piece_vocab(fb::PreTokenizer pre) {
  conv::TokenizerData t;
  t.kind = fb::TokenizerKind::ByteLevel;
  t.pre_tokenizer = pre;
  t.add_bos = false;
  t.add_space_prefix = false;
  t.byte_fallback = false;
  for (int b = 0; b < 256; ++b) {
    t.pieces.push_back(gpt2_char(static_cast<uint8_t>(b)));
    t.types.push_back(fb::TokenType::Normal);
  }
  t.pieces.push_back("<|endoftext|>");
  t.types.push_back(fb::TokenType::Control);
  t.eos_id = 256;
  t.end_ids = {256};
  uint32_t prev = '-';
  for (int k = 1; k <= 10; ++k) {
    const uint32_t id = static_cast<uint32_t>(t.pieces.size());
    t.pieces.push_back(std::string(size_t{1} << k, '-'));
    t.types.push_back(fb::TokenType::Normal);
    t.merges.push_back({prev, prev, id});
    prev = id;
  }
  t.pieces.push_back(repeat(gpt2_char(' '), 300));
  t.types.push_back(fb::TokenType::Normal);
  return t;
}

// A random-weight Llama whose vocabulary is `t`.
conv::ModelData model_with_vocab(const conv::TokenizerData& t) {
  ringlm_test::RandomModelShape shape;
  conv::ModelData md = ringlm_test::random_model_data(shape);
  md.tokenizer = t;
  const uint64_t V = t.pieces.size();
  md.arch.vocab_size = static_cast<uint32_t>(V);
  for (conv::TensorData& td : md.tensors) {
    if (td.role != fb::TensorRole::TokenEmbedding) continue;
    td.shape = {V, shape.dim};
    td.load_f32 = ringlm_test::random_weights(td.shape, false, 77);
  }
  return md;
}

std::vector<int32_t> tokenize(const rlm_model* m, const std::string& text) {
  std::vector<uint8_t> scratch(rlm_tokenize_scratch_bytes(m, text.size()) + 8);
  std::vector<int32_t> ids(text.size() + 8);
  size_t n = 0;
  void* s = scratch.data() + (8 - reinterpret_cast<uintptr_t>(scratch.data()) % 8) % 8;
  EXPECT_EQ(rlm_tokenize_ex(m, text.data(), text.size(), 0, ids.data(), ids.size(), &n, s,
                            scratch.size() - 8),
            RLM_OK);
  ids.resize(n);
  return ids;
}

struct Session {
  AlignedBuffer mem;
  rlm_session* s = nullptr;
  ~Session() {
    if (s) rlm_session_release(s);
  }
  bool init(const rlm_model* m, const rlm_session_config& c) {
    size_t bytes = 0, align = 0;
    if (rlm_session_memory(m, &c, &bytes, &align) != RLM_OK) return false;
    mem.resize(bytes);
    return rlm_session_init(m, &c, mem.data(), bytes, &s) == RLM_OK;
  }
};

// Greedy sampling with `bias` on tokens.
rlm_status set_bias(rlm_session* s, const std::vector<rlm_logit_bias>& bias, bool dry = false) {
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  sp.temperature = 0.0f;
  sp.logit_bias = bias.data();
  sp.n_logit_bias = static_cast<uint32_t>(bias.size());
  if (dry) sp.dry_multiplier = 1.0f;
  return rlm_session_set_sampling(s, &sp);
}

class LongPieces : public ::testing::TestWithParam<fb::PreTokenizer> {};

TEST_P(LongPieces, ConvertVerifyTokenizeDecodeAndRun) {
  const fb::PreTokenizer pre = GetParam();
  std::vector<uint8_t> bytes;
  std::string err;
  ASSERT_TRUE(conv::build_model_bytes(model_with_vocab(long_piece_vocab(pre)), fb::DType::F32,
                                      &bytes, &err))
      << err;
  ringlm_test::OpenedModel m;
  m.bytes.assign(bytes.data(), bytes.size());
  ASSERT_TRUE(m.open(&err)) << err;  // was: "piece 266 missing or longer than 256 bytes"

  // Tokenize: merges build the 1024-dash piece; Llama 3's ignore_merges finds whole words.
  const std::string dashes(1024, '-');
  EXPECT_EQ(tokenize(&m.model, dashes), (std::vector<int32_t>{kDashes1024}));
  EXPECT_EQ(tokenize(&m.model, dashes + "-"), (std::vector<int32_t>{kDashes1024, '-'}));
  const std::vector<int32_t> spaced = tokenize(&m.model, "a" + std::string(300, ' '));
  if (pre == fb::PreTokenizer::Llama3) {
    EXPECT_EQ(spaced, (std::vector<int32_t>{'a', kSpaces300}));  // the word is a token
  } else {
    EXPECT_EQ(spaced.size(), 301u);  // no merges for spaces: one byte token each
  }

  // Decode: the whole piece, and the size needed when the buffer is one byte short.
  std::vector<char> buf(2048);
  size_t n = 0;
  ASSERT_EQ(rlm_token_to_bytes(&m.model, kDashes1024, buf.data(), 1024, &n), RLM_OK);
  EXPECT_EQ(std::string(buf.data(), n), dashes);
  EXPECT_EQ(rlm_token_to_bytes(&m.model, kDashes1024, buf.data(), 1023, &n), RLM_ERR_CAPACITY);
  EXPECT_EQ(n, 1024u);
  ASSERT_EQ(rlm_token_text_after(&m.model, 'a', kSpaces300, buf.data(), buf.size(), &n), RLM_OK);
  EXPECT_EQ(std::string(buf.data(), n), std::string(300, ' '));

  // A session: the sampled 1024-byte token's text comes out whole (stop strings set, so the
  // text passes through the hold-back stream), with DRY scanning every token's text.
  rlm_session_config c;
  rlm_session_config_default(&c);
  c.n_ctx = 64;
  c.grammar_state_bytes = 64 * 1024;
  Session s;
  ASSERT_TRUE(s.init(&m.model, c));
  ASSERT_EQ(rlm_session_add_stop_string(s.s, "STOP", 4), RLM_OK);
  const int32_t a = 'a';
  ASSERT_EQ(rlm_session_feed_tokens(s.s, &a, 1), RLM_OK);
  ASSERT_EQ(set_bias(s.s, {{kDashes1024, 1e4f}}, /*dry=*/true), RLM_OK);
  rlm_step_result r;
  rlm_step_result_default(&r);
  std::string text;
  for (int i = 0; i < 2; ++i) {
    ASSERT_EQ(rlm_step(s.s, &r), RLM_OK) << rlm_session_error(s.s);
    EXPECT_EQ(r.token, kDashes1024);
    text.append(r.text, r.text_len);
  }
  EXPECT_EQ(text, dashes + dashes);

  // A grammar of dashes: the mask walks the 1024-byte token (and refuses the 300 spaces the
  // bias prefers).
  const std::string gbnf = "root ::= \"-\"+";
  size_t gsize = 0;
  ASSERT_EQ(rlm_grammar_memory(&m.model, gbnf.data(), gbnf.size(), &gsize), RLM_OK);
  AlignedBuffer gmem(gsize);
  rlm_grammar* g = nullptr;
  char msg[256];
  ASSERT_EQ(rlm_grammar_compile(&m.model, gbnf.data(), gbnf.size(), gmem.data(), gsize, &g, msg,
                                sizeof msg),
            RLM_OK)
      << msg;
  ASSERT_EQ(rlm_session_reset(s.s), RLM_OK);
  ASSERT_EQ(rlm_session_set_grammar(s.s, g), RLM_OK);
  ASSERT_EQ(rlm_session_feed_tokens(s.s, &a, 1), RLM_OK);
  ASSERT_EQ(set_bias(s.s, {{kSpaces300, 2e4f}, {kDashes1024, 1e4f}}), RLM_OK);
  ASSERT_EQ(rlm_step(s.s, &r), RLM_OK) << rlm_session_error(s.s);
  EXPECT_EQ(r.token, kDashes1024);
  EXPECT_EQ(std::string(r.text, r.text_len), dashes);
}

INSTANTIATE_TEST_SUITE_P(Pre, LongPieces,
                         ::testing::Values(fb::PreTokenizer::Gpt2, fb::PreTokenizer::Llama3));

// Buffers follow the longest piece: the same vocabulary with its long pieces cut to 256 bytes
// needs less session memory; the 256-byte floor keeps shorter vocabularies' layouts as before.
TEST(LongPiecesLayout, SessionMemoryGrowsWithTheLongestPieceOnly) {
  auto memory = [](const conv::TokenizerData& t) {
    std::vector<uint8_t> bytes;
    std::string err;
    EXPECT_TRUE(conv::build_model_bytes(model_with_vocab(t), fb::DType::F32, &bytes, &err)) << err;
    ringlm_test::OpenedModel m;
    m.bytes.assign(bytes.data(), bytes.size());
    EXPECT_TRUE(m.open(&err)) << err;
    rlm_session_config c;
    rlm_session_config_default(&c);
    c.n_ctx = 64;
    size_t n = 0, align = 0;
    EXPECT_EQ(rlm_session_memory(&m.model, &c, &n, &align), RLM_OK);
    return n;
  };
  conv::TokenizerData longest = long_piece_vocab(fb::PreTokenizer::Gpt2);
  conv::TokenizerData cut = longest, shorter = longest;
  for (std::string& p : cut.pieces) p = p.substr(0, 256);
  for (std::string& p : shorter.pieces) p = p.substr(0, 100);
  // Cutting leaves duplicate pieces; keep them apart for the sorted table.
  for (size_t i = 257; i < cut.pieces.size(); ++i) {
    cut.pieces[i] = cut.pieces[i].substr(0, 255) + static_cast<char>('a' + i % 26);
    shorter.pieces[i] = shorter.pieces[i].substr(0, 99) + static_cast<char>('a' + i % 26);
  }
  cut.merges.clear();
  shorter.merges.clear();
  const size_t m_long = memory(longest), m_cut = memory(cut), m_short = memory(shorter);
  EXPECT_GT(m_long, m_cut);
  EXPECT_EQ(m_cut, m_short);  // both at the 256-byte floor
}

// The verifier still bounds a piece (the grammar table's 16-bit offsets): one byte more is a
// named error.
TEST(LongPiecesLayout, APieceOverTheBoundIsRefused) {
  conv::TokenizerData t = long_piece_vocab(fb::PreTokenizer::Gpt2);
  t.pieces[kSpaces300] = std::string(kMaxPieceBytes + 1, 'x');
  std::vector<uint8_t> bytes;
  std::string err;
  ASSERT_TRUE(conv::build_model_bytes(model_with_vocab(t), fb::DType::F32, &bytes, &err)) << err;
  AlignedBuffer buf;
  buf.assign(bytes.data(), bytes.size());
  rlm_model m;
  EXPECT_EQ(rlm_model_open(buf.data(), buf.size(), &m), RLM_ERR_MODEL_TOKENIZER);
  EXPECT_TRUE(contains(rlm_model_error(&m), "piece 267 is 65536 bytes long, more than the 65535 "
                                            "a piece may have"))
      << rlm_model_error(&m);
}

// ---- GGUF vocabularies ------------------------------------------------------------------------

// A vocabulary-only GGUF (no tensors) of `t`: tokens, types, merges as "left right" strings.
std::string vocab_gguf(const conv::TokenizerData& t, const char* pre) {
  GgufWriter w;
  w.kv_str("general.architecture", "llama");
  w.kv_str("tokenizer.ggml.model", t.kind == fb::TokenizerKind::ByteLevel ? "gpt2" : "llama");
  if (pre) w.kv_str("tokenizer.ggml.pre", pre);
  w.kv_strs("tokenizer.ggml.tokens", t.pieces);
  std::vector<int32_t> types;
  for (fb::TokenType ty : t.types) types.push_back(ty == fb::TokenType::Control ? 3 : 1);
  w.kv_i32s("tokenizer.ggml.token_type", types);
  std::vector<std::string> merges;
  for (const auto& m : t.merges) merges.push_back(t.pieces[m.left] + " " + t.pieces[m.right]);
  if (!merges.empty()) w.kv_strs("tokenizer.ggml.merges", merges);
  if (t.eos_id >= 0) w.kv_u32("tokenizer.ggml.eos_token_id", static_cast<uint32_t>(t.eos_id));
  if (t.bos_id >= 0) w.kv_u32("tokenizer.ggml.bos_token_id", static_cast<uint32_t>(t.bos_id));
  return w.finish();
}


// A vocabulary-only GGUF with a 1024-byte piece: `ringlm tokenize --vocab` reads it (it used to
// fail "piece 266 missing or longer than 256 bytes").
TEST(LongPiecesGguf, VocabOnlyFileTokenizesThroughTheCli) {
  const std::string path =
      write_temp("long.gguf", vocab_gguf(long_piece_vocab(fb::PreTokenizer::Gpt2), "gpt-2"));
  std::string out;
  const std::string text = write_temp("dashes.txt", std::string(1024, '-'));
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " + path +
                                         " --file " + text + " 2>&1",
                                     &out),
            0)
      << out;
  EXPECT_EQ(out, "266\n");
  ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " detokenize --vocab " + path +
                                         " 266 266 2>&1",
                                     &out),
            0)
      << out;
  EXPECT_EQ(out, std::string(2048, '-'));
}

// tokenizer.ggml.pre: the names llama.cpp knows are read as their exact split or refused by
// name; unknown names and a missing key are refused. SentencePiece vocabularies ignore the key,
// as llama.cpp does.
TEST(GgufPreTokenizers, EveryNameLlamaCppKnowsIsExactOrRefusedByName) {
  const conv::TokenizerData t = long_piece_vocab(fb::PreTokenizer::Gpt2);
  size_t exact = 0, refused = 0;
  for (const conv::PreTokenizerName& p : conv::llama_cpp_pre_tokenizer_names()) {
    SCOPED_TRACE(p.name);
    conv::TokenizerData got;
    std::string err;
    const bool ok = conv::read_gguf_tokenizer(write_temp("pre.gguf", vocab_gguf(t, p.name)), &got,
                                              &err);
    EXPECT_EQ(ok, p.implemented) << err;
    if (ok) {
      EXPECT_EQ(got.pre_tokenizer, p.pre);
      ++exact;
    } else {
      EXPECT_TRUE(contains(err, "its pre-tokenizer '" + std::string(p.name) +
                                    "' is not supported: llama.cpp splits text for it by "))
          << err;
      ++refused;
    }
  }
  printf("[pre-tokenizers] %zu names llama.cpp knows: %zu split exactly, %zu refused by name\n",
         exact + refused, exact, refused);
  // The list, by the names llama.cpp's converter writes for those models.
  for (const char* name : {"gpt-2", "llama-bpe", "qwen2", "starcoder", "smollm", "falcon",
                           "deepseek-llm", "deepseek-coder", "deepseek-v3", "mpt", "refact",
                           "command-r", "olmo", "dbrx", "smaug-bpe", "poro-chat", "chatglm-bpe",
                           "viking", "jais", "tekken", "bloom", "gpt3-finnish", "exaone",
                           "chameleon", "minerva-7b", "gpt-4o"}) {
    bool listed = false;
    for (const conv::PreTokenizerName& p : conv::llama_cpp_pre_tokenizer_names())
      listed |= !strcmp(p.name, name);
    EXPECT_TRUE(listed) << name;
  }
  std::string err;
  conv::TokenizerData got;
  EXPECT_FALSE(conv::read_gguf_tokenizer(write_temp("pre.gguf", vocab_gguf(t, "frobnicate")), &got,
                                         &err));
  EXPECT_TRUE(contains(err, "its pre-tokenizer 'frobnicate' is not one llama.cpp knows")) << err;
  EXPECT_FALSE(conv::read_gguf_tokenizer(write_temp("pre.gguf", vocab_gguf(t, nullptr)), &got,
                                         &err));
  EXPECT_TRUE(contains(err, "has no tokenizer.ggml.pre: llama.cpp would then split text with its "
                            "'default' pre-tokenizer"))
      << err;
  // SentencePiece: llama.cpp reads no pre-tokenizer for it.
  conv::TokenizerData spm;
  spm.kind = fb::TokenizerKind::SentencePiece;
  spm.pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81" "a"};
  spm.types = {fb::TokenType::Unknown, fb::TokenType::Control, fb::TokenType::Control,
               fb::TokenType::Normal};
  EXPECT_TRUE(conv::read_gguf_tokenizer(write_temp("spm.gguf", vocab_gguf(spm, "default")), &got,
                                        &err))
      << err;
}

// Llama 3's split with and without ignore_merges: "abc" is a token, but the merges (b c first,
// then nothing joins a + bc) never build it. llama-bpe takes the word whole; smaug-bpe and
// glm4 (llama.cpp: no ignore_merges) go through the merges; glm4 also has no BOS token.
TEST(GgufPreTokenizers, Llama3SplitWithAndWithoutIgnoreMerges) {
  conv::TokenizerData t = long_piece_vocab(fb::PreTokenizer::Gpt2);
  auto add = [&](const std::string& p) {
    t.pieces.push_back(p);
    t.types.push_back(fb::TokenType::Normal);
    return static_cast<uint32_t>(t.pieces.size() - 1);
  };
  const uint32_t bc = add("bc"), ab = add("ab"), abc = add("abc"), bos = add("<s>");
  t.types[bos] = fb::TokenType::Control;
  t.merges.push_back({'b', 'c', bc});  // rank first
  t.merges.push_back({'a', 'b', ab});
  t.bos_id = static_cast<int32_t>(bos);
  for (const char* pre : {"llama-bpe", "smaug-bpe", "glm4"}) {
    SCOPED_TRACE(pre);
    std::string path = write_temp("l3.gguf", vocab_gguf(t, pre));
    conv::TokenizerData got;
    std::string err;
    ASSERT_TRUE(conv::read_gguf_tokenizer(path, &got, &err)) << err;
    const bool whole = !strcmp(pre, "llama-bpe");
    EXPECT_EQ(got.pre_tokenizer, whole ? fb::PreTokenizer::Llama3 : fb::PreTokenizer::Llama3Merges);
    std::string out;
    ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " + path +
                                           " abc 2>&1",
                                       &out),
              0)
        << out;
    EXPECT_EQ(out, whole ? std::to_string(abc) + "\n" : "97 " + std::to_string(bc) + "\n");
  }
  // glm4: llama.cpp has no BOS token for it.
  conv::TokenizerData got;
  std::string err;
  ASSERT_TRUE(conv::read_gguf_tokenizer(write_temp("glm4.gguf", vocab_gguf(t, "glm4")), &got, &err))
      << err;
  EXPECT_EQ(got.bos_id, -1);
  EXPECT_FALSE(got.add_bos);
}

// A name llama.cpp gives StarCoder's split (command-r) cuts digits one by one before the merges;
// GPT-2's (gpt-2) keeps "2024" one word, which the "2" + "0" merge then joins. Through the CLI.
TEST(GgufPreTokenizers, CommandRSplitsDigitsOneByOneGpt2DoesNot) {
  conv::TokenizerData t = long_piece_vocab(fb::PreTokenizer::Gpt2);
  const uint32_t id20 = static_cast<uint32_t>(t.pieces.size());
  t.pieces.push_back("20");
  t.types.push_back(fb::TokenType::Normal);
  t.merges.push_back({'2', '0', id20});
  for (const char* pre : {"command-r", "gpt-2"}) {
    const std::string path = write_temp("digits.gguf", vocab_gguf(t, pre));
    std::string out;
    ASSERT_EQ(ringlm_test::run_command(ringlm_test::ringlm_bin() + " tokenize --vocab " + path +
                                           " 2024 2>&1",
                                       &out),
              0)
        << out;
    EXPECT_EQ(out, !strcmp(pre, "gpt-2") ? std::to_string(id20) + " 50 52\n" : "50 48 50 52\n")
        << pre;
  }
}

}  // namespace
