// llama2.c import: input = checkpoint, file separator, tokenizer.bin. read_llama2c fails with a
// message or returns a model that converts to bytes that verify and run.
#include "convert/readers.h"
#include "fuzz_convert_common.h"

using namespace ringlm_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = split_sections(data, size, file_separator());
  const std::string ckpt = scratch_dir() + "/model.bin";
  const std::string tok = scratch_dir() + "/tokenizer.bin";
  FUZZ_CHECK(write_file(ckpt, parts[0]), "write");
  FUZZ_CHECK(write_file(tok, parts.size() > 1 ? parts[1] : std::string()), "write");
  ringlm::internal::conv::ModelData md;
  std::string err;
  if (!ringlm::internal::conv::read_llama2c(ckpt, tok, &md, &err)) {
    FUZZ_CHECK(!err.empty(), "read_llama2c failed without a message");
    if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  rejected: %s\n", err.c_str());
    return 0;
  }
  if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  accepted: %u tensors\n", static_cast<unsigned>(md.tensors.size()));
  convert_and_exercise(md, size ? data[size - 1] : 0);
  return 0;
}
