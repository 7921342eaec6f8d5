// Streaming form of build_model_bytes (used by convert_to_file to write straight to disk).
#ifndef RINGLM_TOOLS_CONVERT_WRITER_H_
#define RINGLM_TOOLS_CONVERT_WRITER_H_

#include <functional>
#include <ostream>
#include <string>

#include "convert/convert.h"

namespace ringlm::internal {
namespace conv {

// Receives the file bytes in order; returns false (with *err) to abort.
using ByteSink = std::function<bool(const void* data, uint64_t n, std::string* err)>;

// Called once the layout is known, before the first byte goes to the sink, with the exact file
// size; returning false (with *err) aborts without writing anything.
using PlanCheck = std::function<bool(uint64_t file_bytes, std::string* err)>;

// Non-finite values (NaN, +-Inf) in a source tensor, in the f16 scales of a raw Q8_0 / Q4_0
// copy, or produced by the encoding (a finite value beyond f16's range) fail the write with an
// error naming the tensor and the first affected element, unless `allow_non_finite`.
//
// 2-D tensors are stored as `quant`, except with `keep`: each in the smallest encoding that
// holds its source values exactly, chosen per tensor:
//   - the raw blocks when the source has an exact repack (TensorData::has_raw: GGUF Q8_0,
//     IQ4_NL -> q8; Q4_0 -> q4; Q5_0 -> q5; Q4_1 -> q4_1; Q5_1 -> q5_1; Q4_K -> q4k; Q5_K ->
//     q5k; Q6_K, Q3_K -> q6k);
//   - else f16 when every value is an f16 value (always for an F16 source; F32, BF16 and
//     dequantized types are checked value by value, which reads such a tensor twice);
//   - else f32.
// `log` gets one line per tensor (source type, target, and what was done: exact copy / repack,
// exact, or the re-quantization error); `stats->actions` counts them.
bool write_model(const ModelData& model, fb::DType quant, const ByteSink& sink, std::string* err,
                 std::ostream* log, bool progress, ConvertStats* stats,
                 const PlanCheck& plan_check = nullptr, bool allow_non_finite = false,
                 bool keep = false);

// write_model into the open file descriptor `fd` at its current position, through a 4 MiB
// buffer; interrupted (EINTR) and short writes are resumed. A failed write sets *err to
// "<write_error>: <strerror(errno)>", so the caller names the destination. Neither syncs nor
// closes `fd`; on failure what was written stays there. When `fd` is a file on a file system
// that reports its free space and the model is larger than that, nothing is written and *err
// says how much is needed: a model that cannot fit fails at once, not after hundreds of GB.
bool write_model_to_fd(const ModelData& model, fb::DType quant, int fd,
                       const std::string& write_error, std::string* err,
                       std::ostream* log = nullptr, bool progress = false,
                       ConvertStats* stats = nullptr, bool allow_non_finite = false,
                       bool keep = false);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_WRITER_H_
