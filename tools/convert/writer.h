// Streaming form of build_model_bytes (used by convert_to_file to write straight to disk).
#ifndef RINGLM_TOOLS_CONVERT_WRITER_H_
#define RINGLM_TOOLS_CONVERT_WRITER_H_

#include <functional>
#include <ostream>
#include <string>

#include "convert/convert.h"

namespace ringlm {
namespace conv {

// Receives the file bytes in order; returns false (with *err) to abort.
using ByteSink = std::function<bool(const void* data, uint64_t n, std::string* err)>;

bool write_model(const ModelData& model, fb::DType quant, const ByteSink& sink, std::string* err,
                 std::ostream* log, bool progress, ConvertStats* stats);

}  // namespace conv
}  // namespace ringlm

#endif  // RINGLM_TOOLS_CONVERT_WRITER_H_
