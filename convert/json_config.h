// Reading the JSON files that come with a checkpoint or describe a model shape (config.json,
// tokenizer_config.json, generation_config.json, ...): whole-file parsing and typed fields, each
// failure with a message naming the file or the key.
#ifndef RINGLM_TOOLS_CONVERT_JSON_CONFIG_H_
#define RINGLM_TOOLS_CONVERT_JSON_CONFIG_H_

#include <stdint.h>

#include <nlohmann/json.hpp>
#include <string>

namespace ringlm::internal {
namespace conv {

// Parses the file `path` into *out; false with *err (naming `path`) when it cannot be read, is
// not valid JSON, or is valid JSON but not an object.
bool read_json_object(const std::string& path, nlohmann::json* out, std::string* err);

// cfg[key] as a uint32. Absent or null: true with *out untouched, unless `required` (false,
// "missing 'key'"). Present: must be an integer in [0, 2^32 - 1], else false with *err.
bool json_u32(const nlohmann::json& cfg, const char* key, bool required, uint32_t* out,
              std::string* err);

// cfg[key] as a float. Absent or null: true with *out untouched. Present: must be a number,
// else false with *err.
bool json_float(const nlohmann::json& cfg, const char* key, float* out, std::string* err);

}  // namespace conv
}  // namespace ringlm::internal

#endif  // RINGLM_TOOLS_CONVERT_JSON_CONFIG_H_
