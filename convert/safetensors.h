// safetensors: 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__": {..}},
// then the data (offsets relative to 8 + N). Every entry is validated against the file size
// (begin <= end inside the data section, end - begin == dtype size x shape) and no two tensors
// of a file may share bytes.
#ifndef RINGLM_TOOLS_CONVERT_SAFETENSORS_H_
#define RINGLM_TOOLS_CONVERT_SAFETENSORS_H_

#include <stdint.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "convert/file_io.h"

namespace ringlm::internal {
namespace conv {

struct SafetensorsEntry {
  std::string dtype;            // "F32", "F16", "BF16", ... (as in the file)
  std::vector<uint64_t> shape;
  uint64_t offset = 0;          // absolute file offset
  uint64_t bytes = 0;
  std::shared_ptr<InputFile> file;
};

// Adds every tensor of the safetensors file at `path` to `out` (name -> entry); a name already
// present is an error (shards must not repeat tensors).
bool read_safetensors_header(const std::string& path,
                             std::map<std::string, SafetensorsEntry>* out, std::string* err);

// Loads an F32 / F16 / BF16 entry as floats; other dtypes are an error naming the dtype.
bool load_safetensors_f32(const SafetensorsEntry& e, const std::string& name,
                          std::vector<float>* out, std::string* err);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_SAFETENSORS_H_
