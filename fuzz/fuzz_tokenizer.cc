// Tokenizer encode/decode over real vocabularies from ../shared (built once at start):
// SentencePiece (stories260K's tok512, Llama 2's 32000, llama-spm GGUF, TinyStories'
// tokenizer.json) and byte-level (GPT-2 GGUF with each pre-tokenizer, Llama 3 tiktoken).
// Input: byte 0 picks the table, byte 1 flags and capacity, the rest is the text. Properties:
//  - encoding succeeds with the documented scratch, ids in range, deterministic;
//  - capacity: exactly n fits, n - 1 gives RLM_ERR_CAPACITY with *n_out = n; a smaller scratch
//    fails cleanly or works (ASan sees any overrun: buffers are exactly sized);
//  - round trip: decoding the ids gives back the text (byte-level: any bytes, also with special
//    tokens parsed and rendered; SentencePiece with byte fallback: any text without U+2581);
//  - pre-tokenizer words are non-empty and cover the text in order.
#include <memory>

#include "convert/readers.h"
#include "convert/tiktoken.h"
#include "fuzz_common.h"
#include "model.h"
#include "tokenizer.h"

using namespace ringlm_fuzz;
namespace fb = ringlm::internal::fb;

namespace {

struct Table {
  std::string name;
  std::vector<uint8_t> buf;
  const fb::Tokenizer* tok = nullptr;
  uint32_t vocab = 0;
  bool byte_level = false;
  bool round_trip = false;  // decode(encode(text)) == text is a property of this table
};

std::vector<Table>* tables;

bool has_all_byte_tokens(const ringlm::internal::conv::TokenizerData& t) {
  int found = 0;
  for (size_t i = 0; i < t.pieces.size(); ++i) {
    if (t.types[i] == fb::TokenType::Byte) ++found;
  }
  return found >= 256;
}

void add_table(const std::string& name, const ringlm::internal::conv::TokenizerData& td) {
  Table t;
  t.name = name;
  t.buf = ringlm::internal::conv::tokenizer_only_buffer(td);
  t.tok = flatbuffers::GetRoot<fb::Tokenizer>(t.buf.data());
  t.vocab = static_cast<uint32_t>(td.pieces.size());
  t.byte_level = td.kind == fb::TokenizerKind::ByteLevel;
  t.round_trip = t.byte_level || (td.byte_fallback && has_all_byte_tokens(td));
  char e[256];
  ringlm::internal::ErrorSink err{e, sizeof e};
  if (ringlm::internal::verify_tokenizer(t.tok, t.vocab, &err) != RLM_OK) {
    fprintf(stderr, "fuzz_tokenizer: %s does not verify: %s\n", name.c_str(), e);
    abort();
  }
  tables->push_back(std::move(t));
  // tokenizer_only_buffer moved: re-point at the stored vector.
  tables->back().tok = flatbuffers::GetRoot<fb::Tokenizer>(tables->back().buf.data());
}

void build_tables() {
  tables = new std::vector<Table>();
  const std::string dir = shared_dir();
  if (dir.empty()) {
    fprintf(stderr, "fuzz_tokenizer: no ../shared: nothing to fuzz\n");
    return;
  }
  using namespace ringlm::internal::conv;
  std::string err;
  TokenizerData td;
  if (read_llama2c_tokenizer(dir + "/models/stories260K/tok512.bin", 512, &td, &err))
    add_table("tok512", td);
  td = TokenizerData();
  if (read_llama2c_tokenizer(dir + "/tokenizers/llama2/tokenizer.bin", 32000, &td, &err))
    add_table("llama2", td);
  td = TokenizerData();
  if (read_gguf_tokenizer(dir + "/tokenizers/vectors/ggml-vocab-llama-spm.gguf", &td, &err))
    add_table("llama-spm", td);
  td = TokenizerData();
  if (read_hf_tokenizer(dir + "/models/tinystories-656k/tokenizer.json", &td, &err))
    add_table("tinystories-json", td);
  td = TokenizerData();
  if (read_gguf_tokenizer(dir + "/tokenizers/vectors/ggml-vocab-gpt-2.gguf", &td, &err)) {
    const fb::PreTokenizer pres[] = {fb::PreTokenizer::Gpt2, fb::PreTokenizer::Llama3,
                                     fb::PreTokenizer::Qwen2, fb::PreTokenizer::StarCoder,
                                     fb::PreTokenizer::None, fb::PreTokenizer::Llama3Merges};
    for (fb::PreTokenizer p : pres) {
      td.pre_tokenizer = p;
      add_table(std::string("gpt2/") + fb::EnumNamePreTokenizer(p), td);
    }
  }
  td = TokenizerData();
  if (getenv("RINGLM_FUZZ_NO_LLAMA3") == nullptr &&
      read_tiktoken(dir + "/tokenizers/llama3/tokenizer.model", &td, &err))
    add_table("llama3", td);
  if (tables->empty()) fprintf(stderr, "fuzz_tokenizer: no tables: %s\n", err.c_str());
}

std::string decode(const Table& t, const int32_t* ids, size_t n, uint32_t flags) {
  std::string s;
  char buf[ringlm::internal::kMaxPieceBytes];
  int32_t prev = -1;
  for (size_t i = 0; i < n; ++i) {
    const size_t m = ringlm::internal::token_text_ex(t.tok, prev, ids[i], flags, buf, sizeof buf);
    FUZZ_CHECK(m <= sizeof buf, "piece of %zu bytes", m);
    s.append(buf, m);
    prev = ids[i];
  }
  return s;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  build_tables();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (!tables) build_tables();
  if (tables->empty() || size < 2) return 0;
  const Table& t = (*tables)[data[0] % tables->size()];
  const uint8_t mode = data[1];
  const char* text = reinterpret_cast<const char*>(data + 2);
  const size_t len = size - 2;
  if (len > 4096) return 0;
  uint32_t flags = 0;
  if (mode & 1) flags |= ringlm::internal::kTokenizeAddBos;
  if (mode & 2) flags |= ringlm::internal::kTokenizeParseSpecial;

  const size_t scratch_need = ringlm::internal::tokenize_scratch_bytes(t.tok, len);
  FUZZ_CHECK(scratch_need != SIZE_MAX, "scratch");
  std::vector<uint8_t> scratch(scratch_need);
  std::vector<int32_t> ids(3 * len + 8);
  size_t n = 0;
  rlm_status st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text, len, flags, ids.data(), ids.size(), &n,
                                      scratch.data(), scratch.size(), nullptr);
  FUZZ_CHECK(st == RLM_OK, "%s: tokenize: %s (len %zu)", t.name.c_str(), rlm_status_string(st), len);
  FUZZ_CHECK(n <= ids.size(), "n_out");
  for (size_t i = 0; i < n; ++i) {
    FUZZ_CHECK(ids[i] >= 0 && static_cast<uint32_t>(ids[i]) < t.vocab, "id %d", ids[i]);
  }

  // Exact capacity, one less, and a repeat (deterministic).
  {
    std::vector<int32_t> exact(n);
    size_t n2 = 0;
    st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text, len, flags, n ? exact.data() : nullptr, n, &n2,
                             scratch.data(), scratch.size(), nullptr);
    FUZZ_CHECK(st == RLM_OK && n2 == n && (n == 0 || memcmp(exact.data(), ids.data(), n * 4) == 0),
               "%s: not deterministic / exact capacity failed", t.name.c_str());
    if (n > 0) {
      std::vector<int32_t> small(n - 1);
      size_t n3 = 0;
      st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text, len, flags, n > 1 ? small.data() : nullptr,
                               n - 1, &n3, scratch.data(), scratch.size(), nullptr);
      FUZZ_CHECK(st == RLM_ERR_CAPACITY && n3 == n, "%s: capacity n-1: %s n_out %zu (need %zu)",
                 t.name.c_str(), rlm_status_string(st), n3, n);
    }
  }
  // A smaller scratch: a clean failure or the same result.
  if (scratch_need > 0 && (mode & 0x80)) {
    const size_t smaller = (scratch_need * (mode & 0x70)) >> 7;
    std::vector<uint8_t> sc(smaller);
    std::vector<int32_t> out(n + 4);
    size_t n4 = 0;
    st = ringlm::internal::tokenize_ex(t.tok, t.vocab, text, len, flags, out.data(), out.size(), &n4,
                             smaller ? sc.data() : nullptr, smaller, nullptr);
    FUZZ_CHECK(st == RLM_ERR_BUFFER_TOO_SMALL ||
                   (st == RLM_OK && n4 == n && memcmp(out.data(), ids.data(), n * 4) == 0),
               "%s: smaller scratch: %s", t.name.c_str(), rlm_status_string(st));
  }

  // Round trip (without BOS: it decodes to nothing anyway, but keeps `prev` honest).
  if (t.round_trip && !(flags & ringlm::internal::kTokenizeAddBos)) {
    const std::string in(text, len);
    bool applies = true;
    if (!t.byte_level) {
      applies = in.find("\xE2\x96\x81") == std::string::npos;  // U+2581 decodes to a space
    }
    if (applies) {
      const uint32_t dflags = (flags & ringlm::internal::kTokenizeParseSpecial) ? ringlm::internal::kTokenTextSpecial : 0;
      const std::string back = decode(t, ids.data(), n, dflags);
      FUZZ_CHECK(back == in, "%s: round trip differs (flags %u): %zu bytes in, %zu out",
                 t.name.c_str(), flags, in.size(), back.size());
    }
  }

  // Pre-tokenizer words.
  if (t.byte_level) {
    std::vector<uint32_t> ends(len + 1);
    const size_t words = ringlm::internal::pretokenize(t.tok->pre_tokenizer(), text, len, ends.data(), ends.size());
    FUZZ_CHECK(words <= len, "words %zu > len %zu", words, len);
    uint32_t prev = 0;
    for (size_t i = 0; i < words; ++i) {
      FUZZ_CHECK(ends[i] > prev, "empty or unordered word %zu", i);
      prev = ends[i];
    }
    FUZZ_CHECK(prev == len, "words do not cover the text");
  }
  return 0;
}
