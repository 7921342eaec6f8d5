// JSON config files and fields (see json_config.h).
#include "convert/json_config.h"

#include "convert/file_io.h"

namespace ringlm::internal {
namespace conv {

using json = nlohmann::json;

bool read_json_object(const std::string& path, json* out, std::string* err) {
  std::string text;
  if (!read_text_file(path, &text, err)) return false;
  try {
    *out = json::parse(text);
  } catch (const std::exception& e) {
    *err = "'" + path + "' is not valid JSON (" + e.what() + ")";
    return false;
  }
  if (!out->is_object()) {
    *err = "'" + path + "' is not a JSON object";
    return false;
  }
  return true;
}

bool json_u32(const json& cfg, const char* key, bool required, uint32_t* out, std::string* err) {
  if (!cfg.contains(key) || cfg[key].is_null()) {
    if (required) *err = std::string("missing '") + key + "'";
    return !required;
  }
  const json& v = cfg[key];
  if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > 0xffffffffll) {
    *err = std::string("'") + key + "' must be a non-negative integer";
    return false;
  }
  *out = static_cast<uint32_t>(v.get<int64_t>());
  return true;
}

bool json_float(const json& cfg, const char* key, float* out, std::string* err) {
  if (!cfg.contains(key) || cfg[key].is_null()) return true;
  if (!cfg[key].is_number()) {
    *err = std::string("'") + key + "' must be a number";
    return false;
  }
  *out = cfg[key].get<float>();
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
