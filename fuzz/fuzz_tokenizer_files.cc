// Tokenizer file readers on arbitrary bytes: byte 0 picks the format (tiktoken rank file,
// llama2.c tokenizer.bin with a vocab size from bytes 1-2, GGUF vocab, tokenizer.json). A reader
// fails with a message or returns a table that serialises and passes the runtime's
// verify_tokenizer, then encodes a fixed text.
#include "convert/readers.h"
#include "convert/tiktoken.h"
#include "fuzz_convert_common.h"
#include "model.h"
#include "tokenizer.h"

using namespace ringlm_fuzz;
namespace fb = ringlm::internal::fb;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const uint8_t kind = data[0] % 4;
  const uint32_t vocab = 1 + (data[1] | (data[2] << 8)) % 1024;
  const std::string path = scratch_dir() + "/tok.in";
  FUZZ_CHECK(write_file(path, std::string(reinterpret_cast<const char*>(data + 3), size - 3)), "write");
  ringlm::internal::conv::TokenizerData td;
  std::string err;
  bool ok = false;
  switch (kind) {
    case 0: ok = ringlm::internal::conv::read_tiktoken(path, &td, &err); break;
    case 1: ok = ringlm::internal::conv::read_llama2c_tokenizer(path, vocab, &td, &err); break;
    case 2: ok = ringlm::internal::conv::read_gguf_tokenizer(path, &td, &err); break;
    case 3:
      ok = run_reader([&] { return ringlm::internal::conv::read_hf_tokenizer(path, &td, &err); }, &err);
      break;
  }
  if (!ok) {
    FUZZ_CHECK(!err.empty(), "reader %u failed without a message", kind);
    return 0;
  }
  if (td.pieces.empty() || td.pieces.size() > (1u << 20)) return 0;
  ringlm::internal::conv::dedupe_merges(&td);
  const std::vector<uint8_t> buf = ringlm::internal::conv::tokenizer_only_buffer(td);
  const fb::Tokenizer* tok = flatbuffers::GetRoot<fb::Tokenizer>(buf.data());
  char e[256];
  ringlm::internal::ErrorSink es{e, sizeof e};
  const uint32_t n = static_cast<uint32_t>(td.pieces.size());
  const rlm_status vs = ringlm::internal::verify_tokenizer(tok, n, &es);
  if (vs != RLM_OK) {
    // The converter writes what the reader returned; the runtime must refuse it with a status,
    // which convert's verification reports. Record it for inspection under RINGLM_FUZZ_STRICT.
    if (getenv("RINGLM_FUZZ_STRICT")) FUZZ_CHECK(false, "reader %u table does not verify: %s", kind, e);
    return 0;
  }
  static const char kText[] = "Hello world, it's 2024! \xc3\xa9t\xc3\xa9 <|endoftext|> \xff";
  const size_t len = sizeof kText - 1;
  std::vector<uint8_t> scratch(ringlm::internal::tokenize_scratch_bytes(tok, len));
  std::vector<int32_t> ids(3 * len + 8);
  size_t n_out = 0;
  const rlm_status ts = ringlm::internal::tokenize_ex(tok, n, kText, len, ringlm::internal::kTokenizeParseSpecial | ringlm::internal::kTokenizeAddBos,
                                            ids.data(), ids.size(), &n_out, scratch.data(),
                                            scratch.size(), nullptr);
  FUZZ_CHECK(ts == RLM_OK, "tokenize on a verified table: %s", rlm_status_string(ts));
  char piece[ringlm::internal::kMaxPieceBytes];
  for (size_t i = 0; i < n_out; ++i) {
    FUZZ_CHECK(ids[i] >= 0 && static_cast<uint32_t>(ids[i]) < n, "id");
    ringlm::internal::token_text(tok, i ? ids[i - 1] : -1, ids[i], piece, sizeof piece);
  }
  return 0;
}
