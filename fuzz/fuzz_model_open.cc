// rlm_model_open on arbitrary bytes. The open must either verify the file or fail with a named
// status and a message; a model that verifies must then be safe to use: every token's text,
// tokenization, and a small session stepping over token ids taken from the input (through the
// ring's wrap: n_ctx 8, sinks 2).
#include "fuzz_common.h"

using namespace ringlm_fuzz;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Aligned buf;
  buf.assign(data, size);
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 4 <= size && ids.size() < 8; i += size / 8 + 4) {
    int32_t v;
    memcpy(&v, data + size - 4 - i, 4);
    ids.push_back(v & 0x7fffffff);
  }
  const rlm_status st = exercise_model(buf.data(), size, ids, 10);
  // The named statuses only.
  FUZZ_CHECK(st == RLM_OK || st == RLM_ERR_INVALID_ARGUMENT ||
                 (st >= RLM_ERR_MODEL_TRUNCATED && st <= RLM_ERR_MODEL_UNSUPPORTED),
             "status %d", st);
  // A misaligned view of the same bytes is refused before anything is read.
  if (size > 0) {
    static Aligned shifted;
    shifted.resize_fill(size + 1, 0);
    memcpy(shifted.data() + 1, data, size);
    rlm_model m;
    FUZZ_CHECK(rlm_model_open(shifted.data() + 1, size, &m) == RLM_ERR_MODEL_ALIGNMENT,
               "misaligned open");
  }
  return 0;
}
