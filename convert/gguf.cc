// GGUF (v2/v3) reader: a small parser that checks every length and count against the file size,
// then maps the architectures of families.h (llama, qwen2, qwen3, gemma2, gemma3, phi3) onto the
// IR with llama.cpp's key and tensor conventions.
//
// File: magic "GGUF", uint32 version, uint64 tensor_count, uint64 kv_count, kv_count metadata
// entries (gguf string key, uint32 value type, value), tensor_count tensor infos (name, uint32
// n_dims, uint64 ne[n_dims] with ne[0] the fastest-varying (cols), uint32 ggml type, uint64
// offset relative to the data section), padding to general.alignment (default 32), data.
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <map>
#include <functional>
#include <memory>

#include "convert/families.h"
#include "convert/file_io.h"
#include "convert/ggml_quants.h"
#include "convert/ggml_repack.h"
#include "convert/pre_tokenizers.h"
#include "convert/readers.h"
#include "kernels/scalar.h"
#include "model.h"
#include "quant.h"

namespace ringlm::internal {
namespace conv {
namespace {

enum GgufType : uint32_t {
  kU8 = 0, kI8 = 1, kU16 = 2, kI16 = 3, kU32 = 4, kI32 = 5, kF32 = 6, kBool = 7, kString = 8,
  kArray = 9, kU64 = 10, kI64 = 11, kF64 = 12
};

const char* gguf_type_name(uint32_t t) {
  static const char* const names[] = {"uint8", "int8",   "uint16", "int16", "uint32",
                                      "int32", "float32", "bool",  "string", "array",
                                      "uint64", "int64", "float64"};
  return t < 13 ? names[t] : "unknown";
}

uint64_t scalar_size(uint32_t t) {
  switch (t) {
    case kU8: case kI8: case kBool: return 1;
    case kU16: case kI16: return 2;
    case kU32: case kI32: case kF32: return 4;
    case kU64: case kI64: case kF64: return 8;
    default: return 0;
  }
}

struct Value {
  uint32_t type = 0;
  // Scalars (the field matching `type`'s category is set).
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  std::string s;
  // Arrays: element type and values of the matching category.
  uint32_t arr_type = 0;
  uint64_t arr_count = 0;
  std::vector<std::string> strs;
  std::vector<int64_t> ints;
  std::vector<double> floats;
  bool is_int() const {
    return type == kU8 || type == kI8 || type == kU16 || type == kI16 || type == kU32 ||
           type == kI32 || type == kU64 || type == kI64;
  }
};

struct TensorInfo {
  std::string name;
  std::vector<uint64_t> ne;
  uint32_t type = 0;
  uint64_t offset = 0;  // absolute, after parsing
  uint64_t bytes = 0;
};

struct Gguf {
  std::shared_ptr<InputFile> file;
  uint32_t version = 0;
  std::map<std::string, Value> kv;
  std::vector<TensorInfo> tensors;
  uint64_t alignment = 32;
  uint64_t data_start = 0;

  const Value* get(const std::string& k) const {
    auto it = kv.find(k);
    return it == kv.end() ? nullptr : &it->second;
  }
};

class Parser {
 public:
  Parser(const InputFile* f, std::string* err) : c_(f, 0), err_(err), path_(f->path()) {}

  bool str(std::string* out) {
    uint64_t n;
    if (!c_.get(&n, err_)) return false;
    if (n > c_.remaining()) {
      *err_ = "GGUF '" + path_ + "': string of " + std::to_string(n) + " bytes at offset " +
              std::to_string(c_.pos()) + " runs past the end of the file";
      return false;
    }
    out->resize(static_cast<size_t>(n));
    return c_.read(out->empty() ? nullptr : &(*out)[0], n, err_);
  }

  bool scalar(uint32_t t, Value* v) {
    switch (t) {
      case kU8: { uint8_t x; if (!c_.get(&x, err_)) return false; v->u = x; v->i = x; v->f = x; return true; }
      case kI8: { int8_t x; if (!c_.get(&x, err_)) return false; v->i = x; v->u = static_cast<uint64_t>(x); v->f = x; return true; }
      case kU16: { uint16_t x; if (!c_.get(&x, err_)) return false; v->u = x; v->i = x; v->f = x; return true; }
      case kI16: { int16_t x; if (!c_.get(&x, err_)) return false; v->i = x; v->u = static_cast<uint64_t>(x); v->f = x; return true; }
      case kU32: { uint32_t x; if (!c_.get(&x, err_)) return false; v->u = x; v->i = x; v->f = x; return true; }
      case kI32: { int32_t x; if (!c_.get(&x, err_)) return false; v->i = x; v->u = static_cast<uint64_t>(x); v->f = x; return true; }
      case kU64: { uint64_t x; if (!c_.get(&x, err_)) return false; v->u = x; v->i = static_cast<int64_t>(x); v->f = static_cast<double>(x); return true; }
      case kI64: { int64_t x; if (!c_.get(&x, err_)) return false; v->i = x; v->u = static_cast<uint64_t>(x); v->f = static_cast<double>(x); return true; }
      case kF32: { float x; if (!c_.get(&x, err_)) return false; v->f = x; return true; }
      case kF64: { double x; if (!c_.get(&x, err_)) return false; v->f = x; return true; }
      case kBool: {
        uint8_t x;
        if (!c_.get(&x, err_)) return false;
        v->u = v->i = (x != 0);
        return true;
      }
      case kString: return str(&v->s);
      default:
        *err_ = "GGUF '" + path_ + "': unknown metadata value type " + std::to_string(t) +
                " at offset " + std::to_string(c_.pos());
        return false;
    }
  }

  bool value(uint32_t t, Value* v, int depth) {
    v->type = t;
    if (t != kArray) return scalar(t, v);
    uint32_t at;
    uint64_t n;
    if (!c_.get(&at, err_) || !c_.get(&n, err_)) return false;
    const uint64_t min_elem = at == kString ? 8 : at == kArray ? 12 : scalar_size(at);
    if (min_elem == 0) {
      *err_ = "GGUF '" + path_ + "': unknown array element type " + std::to_string(at);
      return false;
    }
    if (n > c_.remaining() / min_elem) {
      *err_ = "GGUF '" + path_ + "': array of " + std::to_string(n) + " " + gguf_type_name(at) +
              " at offset " + std::to_string(c_.pos()) + " runs past the end of the file";
      return false;
    }
    v->arr_type = at;
    v->arr_count = n;
    if (at == kArray) {
      if (depth > 4) {
        *err_ = "GGUF '" + path_ + "': arrays nested too deeply";
        return false;
      }
      for (uint64_t k = 0; k < n; ++k) {  // nested arrays: parsed and dropped
        Value inner;
        if (!value(kArray, &inner, depth + 1)) return false;
      }
      return true;
    }
    if (at == kString) {
      v->strs.resize(static_cast<size_t>(n));
      for (uint64_t k = 0; k < n; ++k) {
        if (!str(&v->strs[k])) return false;
      }
      return true;
    }
    const bool is_float = at == kF32 || at == kF64;
    if (is_float) v->floats.resize(static_cast<size_t>(n));
    else v->ints.resize(static_cast<size_t>(n));
    for (uint64_t k = 0; k < n; ++k) {
      Value e;
      if (!scalar(at, &e)) return false;
      if (is_float) v->floats[k] = e.f;
      else v->ints[k] = e.i;
    }
    return true;
  }

  Cursor& cursor() { return c_; }

 private:
  Cursor c_;
  std::string* err_;
  std::string path_;
};

bool parse_gguf(const std::string& path, Gguf* g, std::string* err) {
  g->file = InputFile::open(path, err);
  if (!g->file) return false;
  Parser p(g->file.get(), err);
  Cursor& c = p.cursor();
  uint32_t magic;
  uint64_t n_tensors, n_kv;
  if (!c.get(&magic, err)) return false;
  if (magic != 0x46554747u) {  // "GGUF"
    *err = "'" + path + "' is not a GGUF file (bad magic)";
    return false;
  }
  if (!c.get(&g->version, err)) return false;
  if (g->version != 2 && g->version != 3) {
    *err = "GGUF '" + path + "': version " + std::to_string(g->version) +
           " is not supported (2 and 3 are; big-endian files are not)";
    return false;
  }
  if (!c.get(&n_tensors, err) || !c.get(&n_kv, err)) return false;
  // Each kv is at least 8 (key length) + 4 (type) + 1 bytes; each tensor info at least 8+4+8+4+8.
  if (n_kv > c.remaining() / 13 || n_tensors > c.remaining() / 32) {
    *err = "GGUF '" + path + "': header claims " + std::to_string(n_kv) + " metadata entries and " +
           std::to_string(n_tensors) + " tensors, more than the file can hold";
    return false;
  }
  for (uint64_t k = 0; k < n_kv; ++k) {
    std::string key;
    uint32_t type;
    if (!p.str(&key) || !c.get(&type, err)) return false;
    Value v;
    if (!p.value(type, &v, 0)) {
      *err += " (metadata key '" + key + "')";
      return false;
    }
    g->kv[key] = std::move(v);
  }
  if (const Value* a = g->get("general.alignment")) {
    // Any power of two up to 1 MiB (llama.cpp writes 32; some writers 64 or a page size).
    if (!a->is_int() || a->u == 0 || a->u > (1u << 20) || (a->u & (a->u - 1)) != 0) {
      *err = "GGUF '" + path + "': general.alignment must be a power of two up to 1048576 (is " +
             (!a->is_int()          ? std::string("of type ") + gguf_type_name(a->type)
              : a->type == kU64 ? std::to_string(a->u)
                                : std::to_string(a->i)) + ")";
      return false;
    }
    g->alignment = a->u;
  }
  for (uint64_t k = 0; k < n_tensors; ++k) {
    TensorInfo t;
    uint32_t n_dims;
    if (!p.str(&t.name) || !c.get(&n_dims, err)) return false;
    if (n_dims < 1 || n_dims > 4) {
      *err = "GGUF '" + path + "': tensor '" + t.name + "' has " + std::to_string(n_dims) +
             " dimensions";
      return false;
    }
    t.ne.resize(n_dims);
    uint64_t n = 1;
    for (uint32_t d = 0; d < n_dims; ++d) {
      if (!c.get(&t.ne[d], err)) return false;
      if (t.ne[d] == 0 || t.ne[d] >= (1ull << 32) || n > (1ull << 40) / t.ne[d]) {
        *err = "GGUF '" + path + "': tensor '" + t.name + "' has a dimension out of range";
        return false;
      }
      n *= t.ne[d];
    }
    if (!c.get(&t.type, err) || !c.get(&t.offset, err)) return false;
    // Every type of known block size is sized (and so bounds- and overlap-checked below), read
    // or not; a type of unknown size keeps bytes = 0 and is refused if the tensor is used.
    uint32_t bv, bb;
    if (ggml_block_geometry(t.type, &bv, &bb)) {
      std::string why;
      if (!ggml_tensor_bytes(t.type, t.ne[0], n, &t.bytes, &why)) {
        *err = "GGUF '" + path + "': tensor '" + t.name + "' (" + ggml_type_name(t.type) +
               "): " + why;
        return false;
      }
    }
    g->tensors.push_back(std::move(t));
  }
  g->data_start = align_up(c.pos(), g->alignment);
  const uint64_t fsize = g->file->size();
  if (!g->tensors.empty() && g->data_start > fsize) {
    *err = "GGUF '" + path + "' is truncated: the data section would start at " +
           std::to_string(g->data_start) + ", past the end of the file (" + std::to_string(fsize) +
           " bytes)";
    return false;
  }
  // The layout rules llama.cpp's writer follows and the model verifier enforces on our own
  // files: every offset a multiple of general.alignment, every tensor inside the data section,
  // no two tensors sharing bytes. A patched offset would otherwise convert silently into a model
  // whose weights are another tensor's bytes (or padding), which then generates garbage.
  for (TensorInfo& t : g->tensors) {
    if (t.offset % g->alignment != 0) {
      *err = "GGUF '" + path + "': tensor '" + t.name + "' data offset " +
             std::to_string(t.offset) + " is not a multiple of general.alignment (" +
             std::to_string(g->alignment) + ")";
      return false;
    }
    if (t.bytes == 0) continue;  // a type of unknown size: reported if the tensor is used
    const uint64_t avail = fsize - g->data_start;
    if (t.offset > avail || t.bytes > avail - t.offset) {
      *err = "GGUF '" + path + "': tensor '" + t.name + "' data [" + std::to_string(t.offset) +
             ", +" + std::to_string(t.bytes) + ") lies outside the file (truncated?)";
      return false;
    }
    t.offset += g->data_start;
  }
  // GGUF does not require the directory to be in offset order: sort a copy of the (sized)
  // extents; then each must start at or after the furthest end seen so far.
  std::vector<const TensorInfo*> by_offset;
  for (const TensorInfo& t : g->tensors)
    if (t.bytes != 0) by_offset.push_back(&t);
  std::stable_sort(by_offset.begin(), by_offset.end(),
                   [](const TensorInfo* a, const TensorInfo* b) { return a->offset < b->offset; });
  const TensorInfo* furthest = nullptr;
  for (const TensorInfo* t : by_offset) {
    if (furthest && t->offset < furthest->offset + furthest->bytes) {
      *err = "GGUF '" + path + "': tensor '" + t->name + "' data [" +
             std::to_string(t->offset - g->data_start) + ", +" + std::to_string(t->bytes) +
             ") overlaps tensor '" + furthest->name + "' [" +
             std::to_string(furthest->offset - g->data_start) + ", +" +
             std::to_string(furthest->bytes) + ")";
      return false;
    }
    if (!furthest || t->offset + t->bytes > furthest->offset + furthest->bytes) furthest = t;
  }
  return true;
}

// ---- metadata helpers -----------------------------------------------------------------------

bool get_uint(const Gguf& g, const std::string& key, bool required, uint64_t* out,
              std::string* err) {
  const Value* v = g.get(key);
  if (!v) {
    if (required) *err = "GGUF '" + g.file->path() + "': missing metadata key '" + key + "'";
    return !required;
  }
  if (!v->is_int() || (v->i < 0 && v->type != kU64)) {
    *err = "GGUF '" + g.file->path() + "': metadata '" + key + "' must be a non-negative integer (is " +
           gguf_type_name(v->type) + ")";
    return false;
  }
  *out = v->u;
  return true;
}

bool get_u32(const Gguf& g, const std::string& key, bool required, uint32_t* out,
             std::string* err) {
  uint64_t v = *out;
  if (!get_uint(g, key, required, &v, err)) return false;
  if (v > 0xffffffffull) {
    *err = "GGUF '" + g.file->path() + "': metadata '" + key + "' = " + std::to_string(v) +
           " is too large";
    return false;
  }
  *out = static_cast<uint32_t>(v);
  return true;
}

bool get_float(const Gguf& g, const std::string& key, float* out, std::string* err) {
  const Value* v = g.get(key);
  if (!v) return true;
  if (v->type != kF32 && v->type != kF64 && !v->is_int()) {
    *err = "GGUF '" + g.file->path() + "': metadata '" + key + "' must be a number";
    return false;
  }
  *out = static_cast<float>(v->f);
  return true;
}

bool get_string(const Gguf& g, const std::string& key, std::string* out, std::string* err) {
  const Value* v = g.get(key);
  if (!v) return true;
  if (v->type != kString) {
    *err = "GGUF '" + g.file->path() + "': metadata '" + key + "' must be a string";
    return false;
  }
  *out = v->s;
  return true;
}

bool get_bool(const Gguf& g, const std::string& key, bool* out) {
  const Value* v = g.get(key);
  if (!v || (v->type != kBool && !v->is_int())) return false;
  *out = v->u != 0;
  return true;
}

// A token id key: absent or 0xFFFFFFFF (llama.cpp's "none") -> -1; otherwise must be < vocab.
bool get_token_id(const Gguf& g, const std::string& key, uint32_t vocab, int32_t* out,
                  std::string* err) {
  const Value* v = g.get(key);
  if (!v) return true;
  if (!v->is_int()) {
    *err = "GGUF '" + g.file->path() + "': metadata '" + key + "' must be an integer";
    return false;
  }
  if (v->i == -1 || v->u == 0xffffffffull) {
    *out = -1;
    return true;
  }
  if (v->i < 0 || v->u >= vocab) {
    *err = "GGUF '" + g.file->path() + "': " + key + " = " + std::to_string(v->i) +
           " is out of range for a vocabulary of " + std::to_string(vocab);
    return false;
  }
  *out = static_cast<int32_t>(v->u);
  return true;
}

fb::TokenType map_token_type(int64_t t) {
  switch (t) {
    case 2: return fb::TokenType::Unknown;
    case 3: return fb::TokenType::Control;
    case 4: return fb::TokenType::UserDefined;
    case 5: return fb::TokenType::Unused;
    case 6: return fb::TokenType::Byte;
    default: return fb::TokenType::Normal;  // 1 normal, 0 undefined
  }
}

bool is_byte_piece(const std::string& p) {
  return p.size() == 6 && p.compare(0, 3, "<0x") == 0 && p[5] == '>' &&
         isxdigit(static_cast<unsigned char>(p[3])) && isxdigit(static_cast<unsigned char>(p[4]));
}

// Splits a merge "a b" into two vocabulary ids whose concatenation is also in the vocabulary.
bool parse_merge(const std::string& m, const std::map<std::string, uint32_t>& vocab,
                 TokenizerData::Merge* out) {
  for (size_t sp = m.find(' '); sp != std::string::npos; sp = m.find(' ', sp + 1)) {
    auto l = vocab.find(m.substr(0, sp));
    auto r = vocab.find(m.substr(sp + 1));
    if (l == vocab.end() || r == vocab.end()) continue;
    auto res = vocab.find(l->first + r->first);
    if (res == vocab.end()) continue;
    *out = {l->second, r->second, res->second};
    return true;
  }
  return false;
}

bool gguf_tokenizer(const Gguf& g, TokenizerData* out, std::string* err) {
  const std::string& path = g.file->path();
  std::string model;
  if (!get_string(g, "tokenizer.ggml.model", &model, err)) return false;
  const Value* tokens = g.get("tokenizer.ggml.tokens");
  if (!tokens || tokens->type != kArray || tokens->arr_type != kString) {
    *err = "GGUF '" + path + "' has no tokenizer.ggml.tokens string array";
    return false;
  }
  TokenizerData t;
  if (model == "llama" || model.empty()) {
    t.kind = fb::TokenizerKind::SentencePiece;
    t.byte_fallback = true;
    t.add_space_prefix = true;
    t.add_bos = true;
  } else if (model == "gpt2") {
    t.kind = fb::TokenizerKind::ByteLevel;
    t.byte_fallback = false;
    t.add_space_prefix = false;
    t.add_bos = false;
  } else {
    *err = "GGUF '" + path + "': tokenizer model '" + model +
           "' is not supported (only 'llama' SentencePiece and 'gpt2' byte-level BPE)";
    return false;
  }
  const uint32_t n = static_cast<uint32_t>(tokens->strs.size());
  if (n == 0 || n > kMaxVocab) {
    *err = "GGUF '" + path + "': vocabulary of " + std::to_string(n) + " tokens is out of range";
    return false;
  }
  t.pieces = tokens->strs;
  if (const Value* s = g.get("tokenizer.ggml.scores")) {
    if (s->type != kArray || s->arr_count != n || (s->arr_type != kF32 && s->arr_type != kF64)) {
      *err = "GGUF '" + path + "': tokenizer.ggml.scores must be " + std::to_string(n) + " floats";
      return false;
    }
    t.scores.assign(s->floats.begin(), s->floats.end());
  }
  if (const Value* ty = g.get("tokenizer.ggml.token_type")) {
    if (ty->type != kArray || ty->arr_count != n || ty->ints.size() != n) {
      *err = "GGUF '" + path + "': tokenizer.ggml.token_type must be " + std::to_string(n) +
             " integers";
      return false;
    }
    for (int64_t v : ty->ints) t.types.push_back(map_token_type(v));
  } else {
    // Same rules as llama2.c tokenizers.
    for (const std::string& p : t.pieces) {
      fb::TokenType type = fb::TokenType::Normal;
      if (p == "<unk>") type = fb::TokenType::Unknown;
      else if (p == "<s>" || p == "</s>" || p == "\n<s>\n" || p == "\n</s>\n")
        type = fb::TokenType::Control;
      else if (t.kind == fb::TokenizerKind::SentencePiece && is_byte_piece(p))
        type = fb::TokenType::Byte;
      t.types.push_back(type);
    }
  }
  if (const Value* m = g.get("tokenizer.ggml.merges")) {
    if (m->type != kArray || m->arr_type != kString) {
      *err = "GGUF '" + path + "': tokenizer.ggml.merges must be a string array";
      return false;
    }
    std::map<std::string, uint32_t> vocab;
    for (uint32_t i = 0; i < n; ++i) vocab.emplace(t.pieces[i], i);
    t.merges.reserve(m->strs.size());
    for (size_t r = 0; r < m->strs.size(); ++r) {
      TokenizerData::Merge mg;
      if (!parse_merge(m->strs[r], vocab, &mg)) {
        *err = "GGUF '" + path + "': merge " + std::to_string(r) + " '" + m->strs[r] +
               "' does not name two tokens whose concatenation is a token";
        return false;
      }
      t.merges.push_back(mg);
    }
    dedupe_merges(&t);
  }
  if (!get_token_id(g, "tokenizer.ggml.bos_token_id", n, &t.bos_id, err) ||
      !get_token_id(g, "tokenizer.ggml.eos_token_id", n, &t.eos_id, err) ||
      !get_token_id(g, "tokenizer.ggml.unknown_token_id", n, &t.unk_id, err) ||
      !get_token_id(g, "tokenizer.ggml.padding_token_id", n, &t.pad_id, err)) {
    return false;
  }
  if (t.eos_id >= 0) t.end_ids.push_back(t.eos_id);
  for (const char* k : {"tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"}) {
    int32_t id = -1;
    if (!get_token_id(g, k, n, &id, err)) return false;
    if (id >= 0 && std::find(t.end_ids.begin(), t.end_ids.end(), id) == t.end_ids.end())
      t.end_ids.push_back(id);
  }
  get_bool(g, "tokenizer.ggml.add_bos_token", &t.add_bos);
  get_bool(g, "tokenizer.ggml.add_space_prefix", &t.add_space_prefix);
  std::string pre;
  if (!get_string(g, "tokenizer.ggml.pre", &pre, err)) return false;
  if (t.kind == fb::TokenizerKind::ByteLevel) {
    // Only a split ringlm implements exactly is accepted (convert/pre_tokenizers.h); llama.cpp
    // reads tokenizer.ggml.pre for byte-level vocabularies only.
    std::string why;
    bool no_bos = false;
    if (!gguf_pre_tokenizer(pre, &t.pre_tokenizer, &no_bos, &why)) {
      *err = "GGUF '" + path + "': " + why;
      return false;
    }
    if (no_bos) {  // llama.cpp sets no BOS token for these, whatever the keys say
      t.bos_id = -1;
      t.add_bos = false;
    }
    if (t.pre_tokenizer == fb::PreTokenizer::Llama3 && !g.get("tokenizer.ggml.add_bos_token"))
      t.add_bos = true;
  }
  *out = std::move(t);
  return true;
}

// ---- tensor loading -------------------------------------------------------------------------

using fb::TensorRole;

}  // namespace

bool read_gguf_tokenizer(const std::string& path, TokenizerData* out, std::string* err) {
  Gguf g;
  if (!parse_gguf(path, &g, err)) return false;
  return gguf_tokenizer(g, out, err);
}

namespace {

// The model shape: layers, widths, heads, context, RoPE base and head geometry. `p` is the
// architecture's key prefix ("llama.").
bool gguf_shape(const Gguf& g, const std::string& path, const std::string& p,
                ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  uint32_t ctx = 0;
  if (!get_u32(g, p + "block_count", true, &a.n_layers, err) ||
      !get_u32(g, p + "embedding_length", true, &a.dim, err) ||
      !get_u32(g, p + "feed_forward_length", true, &a.ffn_dim, err) ||
      !get_u32(g, p + "attention.head_count", true, &a.n_heads, err) ||
      !get_u32(g, p + "context_length", false, &ctx, err)) {
    return false;
  }
  a.n_kv_heads = a.n_heads;
  if (!get_u32(g, p + "attention.head_count_kv", false, &a.n_kv_heads, err)) return false;
  a.max_context = ctx ? ctx : 2048;
  a.rope_theta = 10000.0f;
  a.norm_eps = 1e-5f;
  if (!get_float(g, p + "rope.freq_base", &a.rope_theta, err) ||
      !get_float(g, p + "attention.layer_norm_rms_epsilon", &a.norm_eps, err)) {
    return false;
  }
  if (a.n_heads == 0 || a.n_layers == 0) {
    *err = "GGUF '" + path + "': block_count and head_count must be positive";
    return false;
  }
  // Bounded before anything is sized by it (per-layer flags and tensor lists): a crafted
  // block_count of 2^28 made the reader allocate gigabytes (found by fuzz_gguf).
  if (a.n_layers > kMaxLayers) {
    *err = "GGUF '" + path + "': block_count " + std::to_string(a.n_layers) +
           " exceeds the runtime's limit of " + std::to_string(kMaxLayers) + " layers";
    return false;
  }
  a.head_dim = a.dim / a.n_heads;
  if (!get_u32(g, p + "attention.key_length", false, &a.head_dim, err)) return false;
  if (!g.get(p + "attention.key_length") && a.dim % a.n_heads != 0) {
    *err = "GGUF '" + path + "': embedding_length " + std::to_string(a.dim) +
           " is not a multiple of head_count " + std::to_string(a.n_heads) +
           " and attention.key_length is absent";
    return false;
  }
  uint32_t value_length = a.head_dim;
  if (!get_u32(g, p + "attention.value_length", false, &value_length, err)) return false;
  if (value_length != a.head_dim) {
    *err = "GGUF '" + path + "': attention.value_length != key_length is not supported";
    return false;
  }
  uint32_t rope_dims = a.head_dim;
  if (!get_u32(g, p + "rope.dimension_count", false, &rope_dims, err)) return false;
  if (rope_dims != a.head_dim) {
    *err = "GGUF '" + path + "': partial rotary embedding (rope.dimension_count " +
           std::to_string(rope_dims) + " != head_dim " + std::to_string(a.head_dim) +
           ") is not supported";
    return false;
  }
  return true;
}

// RoPE scaling, and refusing what the runtime does not run (mixture of experts).
bool gguf_rope_scaling(const Gguf& g, const std::string& path, const std::string& p,
                       ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  // RoPE scaling: linear (Gemma 3 global layers, some Llamas); Llama 3's rule arrives as the
  // rope_freqs tensor (per-frequency divisors), not as a scaling type.
  std::string scaling;
  if (!get_string(g, p + "rope.scaling.type", &scaling, err)) return false;
  if (scaling == "linear") {
    float factor = 1.0f;
    if (!get_float(g, p + "rope.scaling.factor", &factor, err)) return false;
    if (!g.get(p + "rope.scaling.factor") &&
        !get_float(g, p + "rope.scale_linear", &factor, err))
      return false;
    if (!(factor >= 1.0f && factor <= 1024.0f)) {
      *err = "GGUF '" + path + "': linear RoPE scaling factor " + std::to_string(factor) +
             " out of [1, 1024]";
      return false;
    }
    if (factor != 1.0f) {
      a.rope_scaling = fb::RopeScaling::Linear;
      a.rope_scaling_factor = factor;
    }
  } else if (!scaling.empty() && scaling != "none") {
    *err = "GGUF '" + path + "': RoPE scaling '" + scaling + "' is not supported (linear is)";
    return false;
  }
  if (g.get(p + "expert_count")) {
    uint64_t experts = 0;
    if (get_uint(g, p + "expert_count", false, &experts, err) && experts > 0) {
      *err = "GGUF '" + path + "': mixture-of-experts models are not supported";
      return false;
    }
  }
  return true;
}

// What the family fixes: QKV bias, QK-norm, Gemma's activation, scales and soft-caps.
bool gguf_family_options(const Gguf& g, const std::string& p, fb::Family family,
                         ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  const bool gemma = family == fb::Family::Gemma2 || family == fb::Family::Gemma3;
  a.qkv_bias = family == fb::Family::Qwen2;
  a.qk_norm = family == fb::Family::Qwen3 || family == fb::Family::Gemma3;
  if (gemma) {
    // llama.cpp's Gemma: GELU (tanh) gate, embeddings scaled by sqrt(n_embd), norms stored with
    // the + 1 already added by its converter, attention scale from the model size (27B:
    // n_embd / n_head, else head_dim, as its hparams code derives it).
    a.activation = fb::Activation::GeluTanh;
    a.embedding_scale = static_cast<float>(sqrt(static_cast<double>(a.dim)));
    const bool is_27b = (family == fb::Family::Gemma2 && a.n_layers == 46) ||
                        (family == fb::Family::Gemma3 && a.n_layers == 62);
    a.query_pre_attn_scalar =
        static_cast<float>(is_27b ? a.dim / a.n_heads : a.head_dim);
    a.attn_logit_softcap = family == fb::Family::Gemma2 ? 50.0f : 0.0f;
    a.final_logit_softcap = family == fb::Family::Gemma2 ? 30.0f : 0.0f;
    if (!get_float(g, p + "attn_logit_softcapping", &a.attn_logit_softcap, err) ||
        !get_float(g, p + "final_logit_softcapping", &a.final_logit_softcap, err))
      return false;
  }
  return true;
}

// Sliding-window layers: which layers attend within the window, and their RoPE base.
bool gguf_sliding_window(const Gguf& g, const std::string& path, const std::string& p,
                         fb::Family family, ModelData::Arch* arch, std::string* err) {
  ModelData::Arch& a = *arch;
  uint32_t window = family == fb::Family::Gemma2 ? 4096 : 0;
  if (!get_u32(g, p + "attention.sliding_window", false, &window, err)) return false;
  std::vector<bool> local(a.n_layers, false);
  if (window > 0) {
    if (family == fb::Family::Gemma2) {
      for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = l % 2 == 0;  // even layers local
    } else if (family == fb::Family::Gemma3) {
      uint32_t pattern = 6;
      if (const Value* v = g.get(p + "attention.sliding_window_pattern")) {
        if (!v->is_int() || v->u == 0 || v->u > 0xffffffffull) {
          *err = "GGUF '" + path + "': " + p +
                 "attention.sliding_window_pattern must be a positive integer";
          return false;
        }
        pattern = static_cast<uint32_t>(v->u);
      }
      for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = (l + 1) % pattern != 0;
      a.rope_theta_local = 10000.0f;  // llama.cpp's fixed Gemma 3 local base
      if (!get_float(g, p + "rope.freq_base_swa", &a.rope_theta_local, err)) return false;
    } else {
      // Phi-3 (and Mistral-style llama files): every layer attends within the window, as
      // the Hugging Face model does.
      for (uint32_t l = 0; l < a.n_layers; ++l) local[l] = true;
    }
  }
  bool any = false;
  for (bool b : local) any |= b;
  if (any) {
    a.sliding_window = window;
    a.layer_is_local = local;
  }
  return true;
}

// Reads a tensor of `type` (one ggml_dequantize reads) at [offset, offset + bytes) of `f` as
// n float32 values, exactly as ggml dequantizes them.
std::function<bool(std::vector<float>*, std::string*)> f32_loader(std::shared_ptr<InputFile> f,
                                                                   uint32_t type, uint64_t offset,
                                                                   uint64_t bytes, uint64_t n) {
  return [f, type, offset, bytes, n](std::vector<float>* dst, std::string* e) {
    dst->resize(static_cast<size_t>(n));
    if (type == kGgmlF32) return f->read_at(offset, dst->data(), bytes, e);
    std::vector<uint8_t> raw(static_cast<size_t>(bytes));
    if (!f->read_at(offset, raw.data(), bytes, e)) return false;
    if (!ggml_dequantize(type, raw.data(), n, dst->data())) {
      *e = "internal: ggml type " + ggml_type_name(type) + " is not readable";
      return false;
    }
    return true;
  };
}

// A tensor of a type the converter cannot read, named with the tensor: IQ1 / IQ2 / IQ3 and
// ternary types need codebooks the converter does not carry; Q8_K / Q8_1 are ggml's internal
// activation types; integer and F64 tensors are no weights of a supported model.
std::string unreadable_type_error(const std::string& path, const TensorInfo& ti) {
  return "GGUF '" + path + "': tensor '" + ti.name + "' has type " + ggml_type_name(ti.type) +
         ", which the converter does not read (it reads " + ggml_readable_types() + ")";
}

// One GGUF tensor as a source tensor: its role, shape and loaders (float32, and for the types
// ggml_repack.h maps exactly onto a ringlm encoding - q8, q4, q5, q4_1, q5_1, q4k, q5k, q6k -
// the repacked blocks, stored without re-quantization).
bool gguf_tensor(const Gguf& g, const std::string& path, const std::string& arch,
                 fb::Family family, const ModelData::Arch& a, const TensorInfo& ti,
                 TensorData* out, SourceRole* role, std::string* err) {
  TensorData& t = *out;
  t.name = ti.name;
  if (ti.name == "rope_factors_long.weight" || ti.name == "rope_factors_short.weight") {
    *err = "GGUF '" + path + "': tensor '" + ti.name +
           "': long-context LongRoPE factors (Phi-3 128k) are not supported";
    return false;
  }
  SourceRole& r = *role;
  if (!gguf_tensor_role(family, ti.name, &r)) {
    *err = "GGUF '" + path + "': tensor '" + ti.name + "' is not part of a supported " + arch +
           " model";
    return false;
  }
  t.role = r.role;
  t.layer = r.layer;
  if (t.layer >= static_cast<int32_t>(a.n_layers)) {
    *err = "GGUF '" + path + "': tensor '" + ti.name + "' is beyond block_count " +
           std::to_string(a.n_layers);
    return false;
  }
  if (ti.bytes == 0 || !ggml_type_readable(ti.type)) {
    *err = unreadable_type_error(path, ti);
    return false;
  }
  // Squeeze trailing unit dimensions; then ne = (cols[, rows]).
  std::vector<uint64_t> ne = ti.ne;
  while (ne.size() > 1 && ne.back() == 1) ne.pop_back();
  if (ne.size() > 2) {
    *err = "GGUF '" + path + "': tensor '" + ti.name + "' has more than 2 dimensions";
    return false;
  }
  const uint64_t cols = ne[0];
  const uint64_t rows = ne.size() == 2 ? ne[1] : 1;
  const bool matrix = ne.size() == 2;
  if (matrix) t.shape = {rows, cols};
  else t.shape = {cols};
  const uint32_t type = ti.type;
  const uint64_t offset = ti.offset, bytes = ti.bytes, n = rows * cols;
  t.source_type = ggml_type_name(type);
  t.load_f32 = f32_loader(g.file, type, offset, bytes, n);
  fb::DType repack = fb::DType::F32;
  if (matrix && ggml_exact_repack_target(type, &repack) && cols % kQuantGroup == 0) {
    t.has_raw = true;
    t.raw_type = repack;
    t.load_raw = [f = g.file, type, offset, bytes, rows, cols](std::vector<uint8_t>* dst, std::string* e) {
      std::vector<uint8_t> raw(static_cast<size_t>(bytes));
      if (!f->read_at(offset, raw.data(), bytes, e)) return false;
      ggml_repack(type, raw.data(), rows, cols, dst);
      return true;
    };
    fb::DType alt = fb::DType::F32;
    if (ggml_alt_repack_target(type, &alt)) {  // e.g. Q5_0 for --quant q8: exact too
      t.has_raw_as_only = true;
      t.raw_as_only = alt;
      t.load_raw_as = [f = g.file, type, offset, bytes, rows, cols](fb::DType to, std::vector<uint8_t>* dst,
                                                                     std::string* e) {
        std::vector<uint8_t> raw(static_cast<size_t>(bytes));
        if (!f->read_at(offset, raw.data(), bytes, e)) return false;
        ggml_repack_to(type, to, raw.data(), rows, cols, dst);
        return true;
      };
    }
  }
  return true;
}

// The tokenizer must cover the embedding: a longer one is refused, a shorter one padded with
// unused pieces.
bool gguf_fit_vocabulary(const std::string& path, uint32_t vocab_size, TokenizerData* tokenizer,
                         std::string* err) {
  TokenizerData& tok = *tokenizer;
  if (tok.pieces.size() > vocab_size) {
    *err = "GGUF '" + path + "': tokenizer has " + std::to_string(tok.pieces.size()) +
           " tokens but the model's vocabulary is " + std::to_string(vocab_size);
    return false;
  }
  while (tok.pieces.size() < vocab_size) {
    tok.pieces.push_back("<unused_" + std::to_string(tok.pieces.size()) + ">");
    tok.types.push_back(fb::TokenType::Unused);
    if (!tok.scores.empty()) tok.scores.push_back(-1e9f);
  }
  return true;
}

}  // namespace

bool read_gguf_tensors(const std::string& path, std::vector<GgufTensor>* out, std::string* err) {
  Gguf g;
  if (!parse_gguf(path, &g, err)) return false;
  std::vector<GgufTensor> list;
  for (const TensorInfo& ti : g.tensors) {
    GgufTensor t;
    t.name = ti.name;
    t.type = ti.type;
    t.ne = ti.ne;
    uint64_t n = 1;
    for (uint64_t d : ti.ne) n *= d;  // bounded by parse_gguf (< 2^40)
    if (ti.bytes == 0 || !ggml_type_readable(ti.type)) {
      const std::string msg = unreadable_type_error(path, ti);
      t.load_f32 = [msg](std::vector<float>*, std::string* e) {
        *e = msg;
        return false;
      };
    } else {
      t.load_f32 = f32_loader(g.file, ti.type, ti.offset, ti.bytes, n);
    }
    list.push_back(std::move(t));
  }
  *out = std::move(list);
  return true;
}

bool read_gguf(const std::string& path, ModelData* out, std::string* err) {
  auto g = std::make_shared<Gguf>();
  if (!parse_gguf(path, g.get(), err)) return false;
  std::string arch;
  if (!get_string(*g, "general.architecture", &arch, err)) return false;
  if (arch.empty()) {
    *err = "GGUF '" + path + "' has no general.architecture";
    return false;
  }
  fb::Family family;
  if (!gguf_family(arch, &family)) {
    *err = "GGUF '" + path + "': architecture '" + arch +
           "' is not supported by the converter (supported: llama, qwen2, qwen3, gemma2, "
           "gemma3, phi3)";
    return false;
  }
  ModelData m;
  m.source = path;
  auto& a = m.arch;
  a.family = family;
  a.activation = fb::Activation::SiLU;
  // llama.cpp's converter permutes GGUF "llama" q/k rows into interleaved pairs; the other
  // families keep Hugging Face's order and llama.cpp runs them with NEOX RoPE.
  a.rope_style = family == fb::Family::Llama ? fb::RopeStyle::Interleaved : fb::RopeStyle::Neox;
  const std::string p = arch + ".";
  if (!gguf_shape(*g, path, p, &a, err) || !gguf_rope_scaling(*g, path, p, &a, err) ||
      !gguf_family_options(*g, p, family, &a, err) ||
      !gguf_sliding_window(*g, path, p, family, &a, err)) {
    return false;
  }
  if (!gguf_tokenizer(*g, &m.tokenizer, err)) return false;
  std::string tmpl;
  if (!get_string(*g, "tokenizer.chat_template", &tmpl, err)) return false;
  m.chat_template = tmpl;

  // Tensors.
  bool has_output = false;
  uint32_t emb_rows = 0;
  for (const TensorInfo& ti : g->tensors) {
    TensorData t;
    SourceRole r;
    if (!gguf_tensor(*g, path, arch, family, a, ti, &t, &r, err)) return false;
    if (t.role == TensorRole::Output) has_output = true;
    if (t.role == TensorRole::TokenEmbedding) emb_rows = static_cast<uint32_t>(t.shape[0]);
    if (!add_source_tensor(a, r, std::move(t), &m.tensors, err)) {
      *err = "GGUF '" + path + "': " + *err;
      return false;
    }
  }
  // A tensorless GGUF (the vocabulary-only files llama.cpp ships for tokenizer tests) would
  // convert into a model with no weights, which no runtime can open.
  if (g->tensors.empty()) {
    *err = "GGUF '" + path + "' has no tensors (a vocabulary-only file is a tokenizer, not a model)";
    return false;
  }
  if (emb_rows == 0) {
    *err = "GGUF '" + path + "' has no token_embd.weight";
    return false;
  }
  a.vocab_size = emb_rows;
  uint32_t kv_vocab = 0;
  if (!get_u32(*g, p + "vocab_size", false, &kv_vocab, err)) return false;
  if (kv_vocab && kv_vocab != a.vocab_size) {
    *err = "GGUF '" + path + "': " + p + "vocab_size " + std::to_string(kv_vocab) +
           " differs from the token embedding's " + std::to_string(a.vocab_size) + " rows";
    return false;
  }
  a.tied_embeddings = !has_output;
  if (!check_family_tensors(m, gguf_tensor_name, err)) {
    *err = "GGUF '" + path + "': " + *err;
    return false;
  }
  if (!gguf_fit_vocabulary(path, a.vocab_size, &m.tokenizer, err)) return false;
  *out = std::move(m);
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
