// GGUF import: read_gguf (model) and read_gguf_tokenizer on an arbitrary file. Either reader
// fails with a message or returns data; an accepted model converts (f32/f16/q8/q4 or --quant
// keep by the last input byte, mod 5) to bytes that verify and run (fuzz_convert_common.h).
// The block types' dequantizers on their own: fuzz_ggml_quants.cc.
#include "convert/readers.h"
#include "fuzz_convert_common.h"

using namespace ringlm_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = scratch_dir() + "/in.gguf";
  FUZZ_CHECK(write_file(path, std::string(reinterpret_cast<const char*>(data), size)), "write");
  std::string err;
  ringlm::internal::conv::TokenizerData td;
  if (!ringlm::internal::conv::read_gguf_tokenizer(path, &td, &err)) FUZZ_CHECK(!err.empty(), "no message");
  ringlm::internal::conv::ModelData md;
  err.clear();
  if (!ringlm::internal::conv::read_gguf(path, &md, &err)) {
    FUZZ_CHECK(!err.empty(), "read_gguf failed without a message");
    if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  rejected: %s\n", err.c_str());
    return 0;
  }
  if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  accepted: %u tensors\n", static_cast<unsigned>(md.tensors.size()));
  convert_and_exercise(md, size ? data[size - 1] : 0);
  return 0;
}
