// Hugging Face import (safetensors + tokenizer.json): input = the files of a model directory,
// joined by the file separator, in this order: config.json, model.safetensors, tokenizer.json,
// tokenizer_config.json, generation_config.json, model.safetensors.index.json,
// model-00001-of-00002.safetensors. An empty section means the file is absent. read_hf fails
// with a message or returns a model that converts to bytes that verify and run; read_hf_tokenizer
// runs on tokenizer.json alone.
#include <dirent.h>

#include "convert/readers.h"
#include "fuzz_convert_common.h"

using namespace ringlm_fuzz;

namespace {

const char* const kNames[] = {"config.json",
                              "model.safetensors",
                              "tokenizer.json",
                              "tokenizer_config.json",
                              "generation_config.json",
                              "model.safetensors.index.json",
                              "model-00001-of-00002.safetensors"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::vector<std::string> parts = split_sections(data, size, file_separator());
  const std::string dir = scratch_dir() + "/hf";
  mkdir(dir.c_str(), 0700);
  for (size_t i = 0; i < sizeof kNames / sizeof kNames[0]; ++i) {
    const std::string path = dir + "/" + kNames[i];
    unlink(path.c_str());
    if (i < parts.size() && !parts[i].empty()) FUZZ_CHECK(write_file(path, parts[i]), "write");
  }
  std::string err;
  if (parts.size() > 2 && !parts[2].empty()) {
    ringlm::internal::conv::TokenizerData td;
    if (!run_reader([&] { return ringlm::internal::conv::read_hf_tokenizer(dir + "/tokenizer.json", &td, &err); }, &err)) {
      FUZZ_CHECK(!err.empty(), "read_hf_tokenizer failed without a message");
    }
  }
  ringlm::internal::conv::ModelData md;
  err.clear();
  if (!run_reader([&] { return ringlm::internal::conv::read_hf(dir, &md, &err); }, &err)) {
    FUZZ_CHECK(!err.empty(), "read_hf failed without a message");
    if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  rejected: %s\n", err.c_str());
    return 0;
  }
  if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  accepted: %u tensors\n", static_cast<unsigned>(md.tensors.size()));
  convert_and_exercise(md, size ? data[size - 1] : 0);
  return 0;
}
