// Source dispatch and convert_to_file (temp file, verification with the runtime, rename).
#include "convert/convert.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <set>

#include "convert/file_io.h"
#include "convert/output_file.h"
#include "convert/readers.h"
#include "convert/writer.h"
#include "model.h"

namespace ringlm::internal {
namespace conv {

SourceKind detect_source(const std::string& path) {
  if (is_directory(path)) return SourceKind::HuggingFace;
  std::string err;
  std::shared_ptr<InputFile> f = InputFile::open(path, &err);
  if (!f) return SourceKind::Unknown;
  uint8_t magic[12] = {0};
  const bool have_magic = f->size() >= 4 && f->read_at(0, magic, f->size() >= 12 ? 12 : 4, &err);
  if (have_magic && memcmp(magic, "GGUF", 4) == 0) return SourceKind::Gguf;
  // A ringlm model file: a size-prefixed FlatBuffer with the identifier at bytes 8..11.
  if (have_magic && f->size() >= 12 && memcmp(magic + 8, "RLM1", 4) == 0) return SourceKind::Ringlm;
  auto ends_with = [&](const char* suf) {
    const size_t n = strlen(suf);
    return path.size() >= n && path.compare(path.size() - n, n, suf) == 0;
  };
  if (ends_with(".gguf")) return SourceKind::Gguf;  // bad magic: the reader says so
  if (ends_with("config.json") || ends_with(".safetensors") || ends_with(".safetensors.index.json"))
    return SourceKind::HuggingFace;
  // Anything else is read as a llama2.c checkpoint (usually ".bin"; the files have no magic):
  // its reader checks the header against the file size and says what does not fit.
  return SourceKind::Llama2c;
}

const char* source_kind_name(SourceKind k) {
  switch (k) {
    case SourceKind::Llama2c: return "llama2.c";
    case SourceKind::Gguf: return "GGUF";
    case SourceKind::HuggingFace: return "Hugging Face";
    case SourceKind::Ringlm: return "ringlm model";
    case SourceKind::Unknown: break;
  }
  return "unknown";
}

bool load_source(const ConvertOptions& opts, ModelData* out, std::string* err) {
  if (opts.source.empty()) {
    *err = "no source given";
    return false;
  }
  switch (detect_source(opts.source)) {
    case SourceKind::Llama2c:
      return read_llama2c(opts.source, opts.tokenizer, out, err);
    case SourceKind::Gguf:
      return read_gguf(opts.source, out, err);
    case SourceKind::HuggingFace:
      return read_hf(opts.source, out, err);
    case SourceKind::Ringlm:
      *err = "'" + opts.source +
             "' is already a ringlm model file (identifier RLM1); it needs no conversion "
             "(`ringlm inspect` shows what it holds)";
      return false;
    case SourceKind::Unknown:
      break;
  }
  // Unknown: missing, unreadable, or not a regular file (a FIFO, device, ...): say which.
  if (!InputFile::open(opts.source, err)) {
  } else {
    *err = "'" + opts.source +
           "' is not a supported source (expected a llama2.c .bin checkpoint, a .gguf file, or a "
           "Hugging Face model directory)";
  }
  return false;
}

void dedupe_merges(TokenizerData* t) {
  std::set<std::pair<uint32_t, uint32_t>> seen;
  std::vector<TokenizerData::Merge> kept;
  kept.reserve(t->merges.size());
  for (const TokenizerData::Merge& m : t->merges) {
    if (seen.insert({m.left, m.right}).second) kept.push_back(m);
  }
  t->merges.swap(kept);
}

namespace {

// Maps the written file and runs the runtime's verification over it.
bool verify_file(const std::string& path, std::string* err) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    *err = "cannot reopen '" + path + "' for verification: " + strerror(errno);
    return false;
  }
  struct stat st;
  if (fstat(fd, &st) != 0 || st.st_size <= 0) {
    ::close(fd);
    *err = "written file is empty";
    return false;
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) {
    *err = std::string("mmap failed: ") + strerror(errno);
    return false;
  }
  ModelImpl* m = new ModelImpl();
  const Status s = model_open(p, size, m);
  if (s != RLM_OK) {
    *err = std::string("the converted model fails verification: ") + rlm_status_string(s) + ": " +
           m->error;
  }
  delete m;
  munmap(p, size);
  return s == RLM_OK;
}

}  // namespace

bool convert_to_file(const ConvertOptions& opts, const std::string& out_path, std::string* err) {
  return convert_to_file(opts, out_path, err, nullptr);
}

bool convert_to_file(const ConvertOptions& opts, const std::string& out_path, std::string* err,
                     ConvertStats* stats) {
  ModelData model;
  if (!load_source(opts, &model, err)) return false;
  if (!opts.preset.empty()) {
    fb::DType base;
    if (!apply_quant_preset(opts.preset, &model, &base)) {
      *err = "unknown quantization preset '" + opts.preset + "' (" + quant_preset_names() + ")";
      return false;
    }
    ConvertOptions o = opts;
    o.quant = base;
    return write_model_file(model, o, out_path, err, stats);
  }
  return write_model_file(model, opts, out_path, err, stats);
}

const char* quant_preset_names() { return "q4k_m, q5k_m"; }

bool apply_quant_preset(const std::string& name, ModelData* md, fb::DType* base) {
  if (name == "q4k_m") {
    *base = fb::DType::Q4K;
  } else if (name == "q5k_m") {
    *base = fb::DType::Q5K;
  } else {
    return false;
  }
  if (!md) return true;
  const bool tied = md->arch.tied_embeddings;
  const int32_t n = static_cast<int32_t>(md->arch.n_layers);
  // llama.cpp's use_more_bits: the first and last eighth of the layers and every third between.
  auto more_bits = [n](int32_t i) {
    return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
  };
  for (TensorData& t : md->tensors) {
    if (t.shape.size() != 2) continue;
    using R = fb::TensorRole;
    const bool output = t.role == R::Output || (tied && t.role == R::TokenEmbedding);
    const bool more = output || ((t.role == R::Wv || t.role == R::FfnDown) && more_bits(t.layer));
    t.has_target = true;
    t.target = more ? fb::DType::Q6K : *base;
  }
  return true;
}

bool write_model_file(const ModelData& model, const ConvertOptions& opts,
                      const std::string& out_path, std::string* err, ConvertStats* stats) {
  // Refuses a non-regular, symlinked or read-only target before writing (output_file.h), and
  // removes the temporary file on failure or SIGINT / SIGTERM.
  TempOutput tmp;
  if (!tmp.create(out_path, err)) return false;
  ConvertStats local;
  bool ok = write_model_to_fd(model, opts.quant, tmp.fd(), "write to '" + tmp.path() + "' failed",
                              err, opts.log, opts.progress, stats ? stats : &local,
                              opts.allow_non_finite, opts.keep);
  ok = ok && tmp.close(err) && verify_file(tmp.path(), err) && tmp.commit(err);
  return ok;  // on failure ~TempOutput removes the temporary file
}

}  // namespace conv
}  // namespace ringlm::internal
