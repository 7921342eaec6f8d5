// Shared by the converter targets: a source the reader accepted is converted to model bytes and
// must then verify (a converted model the runtime refuses is a converter bug) and run.
#ifndef RINGLM_FUZZ_FUZZ_CONVERT_COMMON_H_
#define RINGLM_FUZZ_FUZZ_CONVERT_COMMON_H_

#include "convert/convert.h"
#include "fuzz_common.h"

namespace ringlm_fuzz {

// Runs a reader. An exception escaping a reader is a failure (it would terminate `ringlm
// convert`): found here, nlohmann::json type errors in the Hugging Face readers
// (fuzz/regressions/hf/added-token-special-not-bool), now caught inside them.
template <typename F>
bool run_reader(F&& read, std::string*) {
  return read();
}

// Converts `md` as `q` (or --quant keep) and runs the result.
inline void convert_one(const ringlm::internal::conv::ModelData& md,
                        ringlm::internal::fb::DType q, bool keep) {
  std::vector<uint8_t> bytes;
  std::string err;
  if (!ringlm::internal::conv::build_model_bytes(md, q, &bytes, &err, nullptr, false, false,
                                                 keep)) {
    FUZZ_CHECK(!err.empty(), "build_model_bytes failed without a message");
    if (getenv("RINGLM_FUZZ_VERBOSE")) fprintf(stderr, "  refused: %s\n", err.c_str());
    // Refused (e.g. a NaN / infinite weight): what --allow-non-finite stores instead must still
    // verify and run (fuzz/regressions/llama2c/nan-weight-q8 reaches quantize_row_q8 this way).
    err.clear();
    if (!ringlm::internal::conv::build_model_bytes(md, q, &bytes, &err, nullptr, false,
                                         /*allow_non_finite=*/true, keep)) {
      FUZZ_CHECK(!err.empty(), "build_model_bytes failed without a message");
      return;
    }
  }
  static Aligned a;
  a.assign(bytes.data(), bytes.size());
  std::string msg;
  const rlm_status st = exercise_model(a.data(), a.size(), {1, 2, 3, 5, 8}, 4, &msg);
  FUZZ_CHECK(st == RLM_OK, "converted model (%s) does not verify: %s: %s",
             keep ? "keep" : ringlm::internal::conv::dtype_name(q), rlm_status_string(st),
             msg.c_str());
}

inline void convert_and_exercise(const ringlm::internal::conv::ModelData& md, uint8_t selector) {
  // Keep each input cheap: the weights are bounded by the input size anyway.
  uint64_t elems = 0;
  for (const auto& t : md.tensors) {
    uint64_t n = 1;
    for (uint64_t d : t.shape) n *= d;
    elems += n;
  }
  if (elems > (8u << 20)) return;
  // f32, f16, q8, q4, q4k (then q6k and q5k too), or --quant keep (selector % 6 == 5: each
  // tensor's smallest exact encoding). q6k and q5k ride along with q4k rather than taking selector
  // values of their own, so the inputs of fuzz/regressions keep reaching the encodings they were
  // found with.
  const ringlm::internal::fb::DType quants[6] = {
      ringlm::internal::fb::DType::F32, ringlm::internal::fb::DType::F16,
      ringlm::internal::fb::DType::Q8,  ringlm::internal::fb::DType::Q4,
      ringlm::internal::fb::DType::Q4K, ringlm::internal::fb::DType::F32};
  const ringlm::internal::fb::DType q = quants[selector % 6];
  const bool keep = selector % 6 == 5;
  convert_one(md, q, keep);
  if (q == ringlm::internal::fb::DType::Q4K) {
    convert_one(md, ringlm::internal::fb::DType::Q6K, false);
    convert_one(md, ringlm::internal::fb::DType::Q5K, false);
  }
}

}  // namespace ringlm_fuzz

#endif  // RINGLM_FUZZ_FUZZ_CONVERT_COMMON_H_
