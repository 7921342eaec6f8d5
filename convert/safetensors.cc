#include "convert/safetensors.h"

#include <string.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "kernels/scalar.h"

namespace ringlm::internal {
namespace conv {
namespace {

uint64_t dtype_size(const std::string& d) {
  if (d == "F64" || d == "I64" || d == "U64") return 8;
  if (d == "F32" || d == "I32" || d == "U32") return 4;
  if (d == "F16" || d == "BF16" || d == "I16" || d == "U16") return 2;
  if (d == "I8" || d == "U8" || d == "BOOL" || d == "F8_E4M3" || d == "F8_E5M2") return 1;
  return 0;
}

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

}  // namespace

bool read_safetensors_header(const std::string& path,
                             std::map<std::string, SafetensorsEntry>* out, std::string* err) {
  std::shared_ptr<InputFile> f = InputFile::open(path, err);
  if (!f) return false;
  uint64_t n = 0;
  if (f->size() < 8) {
    *err = "safetensors '" + path + "' is too short (" + std::to_string(f->size()) + " bytes)";
    return false;
  }
  if (!f->read_at(0, &n, 8, err)) return false;
  if (n < 2 || n > kMaxHeaderBytes || n > f->size() - 8) {
    *err = "safetensors '" + path + "': header length " + std::to_string(n) +
           " is invalid for a " + std::to_string(f->size()) + "-byte file";
    return false;
  }
  std::string text(static_cast<size_t>(n), '\0');
  if (!f->read_at(8, &text[0], n, err)) return false;
  const uint64_t data_start = 8 + n;
  const uint64_t data_bytes = f->size() - data_start;
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const std::exception& e) {
    *err = "safetensors '" + path + "': header is not valid JSON (" + e.what() + ")";
    return false;
  }
  if (!j.is_object()) {
    *err = "safetensors '" + path + "': header is not a JSON object";
    return false;
  }
  // (begin, end, name) of every non-empty tensor of this file, for the overlap check below.
  struct Extent {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Extent> extents;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const nlohmann::json& v = it.value();
    auto bad = [&](const std::string& what) {
      *err = "safetensors '" + path + "': tensor '" + name + "': " + what;
      return false;
    };
    if (!v.is_object() || !v.contains("dtype") || !v["dtype"].is_string() ||
        !v.contains("shape") || !v["shape"].is_array() || !v.contains("data_offsets") ||
        !v["data_offsets"].is_array() || v["data_offsets"].size() != 2) {
      return bad("malformed entry (needs dtype, shape, data_offsets)");
    }
    SafetensorsEntry e;
    e.dtype = v["dtype"].get<std::string>();
    e.file = f;
    uint64_t numel = 1;
    for (const auto& d : v["shape"]) {
      if (!d.is_number_unsigned()) return bad("shape entries must be non-negative integers");
      const uint64_t x = d.get<uint64_t>();
      if (x >= (1ull << 40) || (x && numel > (1ull << 50) / x)) return bad("shape too large");
      numel *= x;
      e.shape.push_back(x);
    }
    const auto& o = v["data_offsets"];
    if (!o[0].is_number_unsigned() || !o[1].is_number_unsigned())
      return bad("data_offsets must be non-negative integers");
    const uint64_t b = o[0].get<uint64_t>(), en = o[1].get<uint64_t>();
    if (b > en || en > data_bytes)
      return bad("data_offsets [" + std::to_string(b) + ", " + std::to_string(en) +
                 ") outside the " + std::to_string(data_bytes) + "-byte data section (truncated?)");
    const uint64_t es = dtype_size(e.dtype);
    if (es == 0) return bad("unknown dtype '" + e.dtype + "'");
    if (en - b != numel * es)
      return bad("data is " + std::to_string(en - b) + " bytes, shape and dtype need " +
                 std::to_string(numel * es));
    e.offset = data_start + b;
    e.bytes = en - b;
    if (out->count(name)) return bad("appears in more than one file");
    if (en > b) extents.push_back({b, en, name});
    (*out)[name] = std::move(e);
  }
  // Two tensors sharing bytes is a corrupt (or crafted) header: the safetensors writers refuse
  // shared storage, so a converted model would get one tensor's values under another's name.
  std::stable_sort(extents.begin(), extents.end(),
                   [](const Extent& x, const Extent& y) { return x.begin < y.begin; });
  const Extent* furthest = nullptr;
  for (const Extent& x : extents) {
    if (furthest && x.begin < furthest->end) {
      *err = "safetensors '" + path + "': tensor '" + x.name + "': data_offsets [" +
             std::to_string(x.begin) + ", " + std::to_string(x.end) + ") overlap tensor '" +
             furthest->name + "' [" + std::to_string(furthest->begin) + ", " +
             std::to_string(furthest->end) + ")";
      return false;
    }
    if (!furthest || x.end > furthest->end) furthest = &x;
  }
  return true;
}

bool load_safetensors_f32(const SafetensorsEntry& e, const std::string& name,
                          std::vector<float>* out, std::string* err) {
  if (e.dtype != "F32" && e.dtype != "F16" && e.dtype != "BF16") {
    *err = "tensor '" + name + "' has dtype " + e.dtype +
           ", which the converter does not read (F32, F16 and BF16 are supported)";
    return false;
  }
  if (e.dtype == "F32") {
    out->resize(static_cast<size_t>(e.bytes / 4));
    return e.file->read_at(e.offset, out->data(), e.bytes, err);
  }
  std::vector<uint16_t> h(static_cast<size_t>(e.bytes / 2));
  if (!e.file->read_at(e.offset, h.data(), e.bytes, err)) return false;
  out->resize(h.size());
  if (e.dtype == "F16") {
    for (size_t i = 0; i < h.size(); ++i) (*out)[i] = fp16_to_f32(h[i]);
  } else {
    for (size_t i = 0; i < h.size(); ++i) {
      const uint32_t bits = static_cast<uint32_t>(h[i]) << 16;
      memcpy(&(*out)[i], &bits, 4);
    }
  }
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
