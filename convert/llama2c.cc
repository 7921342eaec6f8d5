// llama2.c legacy (version 0) float checkpoint reader.
//
// Layout: 7 x int32 header (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
// vocab_size < 0 means the classifier is stored separately at the end), then float32 arrays:
// token_embedding (vocab, dim), rms_att (L, dim), wq (L, dim, dim), wk (L, kv_dim, dim),
// wv (L, kv_dim, dim), wo (L, dim, dim), rms_ffn (L, dim), w1 (L, hidden, dim),
// w2 (L, dim, hidden), w3 (L, hidden, dim), rms_final (dim), freq_cis_real (seq, head_size / 2),
// freq_cis_imag (seq, head_size / 2), [wcls (vocab, dim)]. Matrices are (out, in) row-major.
#include <stdint.h>
#include <string.h>

#include <memory>

#include "convert/file_io.h"
#include "convert/readers.h"
#include "model.h"

namespace ringlm::internal {
namespace conv {
namespace {

constexpr uint32_t kLlama2cMagicV1 = 0x616b3432;  // "ak42": llama2.c export version 1/2

struct Section {
  std::string name;
  fb::TensorRole role;
  int32_t layer;
  uint64_t rows, cols;  // rows == 0: vector
  uint64_t offset;      // bytes
};

}  // namespace

bool read_llama2c(const std::string& path, const std::string& tokenizer_path, ModelData* out,
                  std::string* err) {
  std::shared_ptr<InputFile> f = InputFile::open(path, err);
  if (!f) return false;
  int32_t hdr[7];
  if (f->size() < sizeof hdr) {
    *err = "'" + path + "' is too short for a llama2.c checkpoint header (" +
           std::to_string(f->size()) + " bytes)";
    return false;
  }
  if (!f->read_at(0, hdr, sizeof hdr, err)) return false;
  if (static_cast<uint32_t>(hdr[0]) == kLlama2cMagicV1) {
    *err = "'" + path + "': llama2.c export version " + std::to_string(hdr[1]) +
           " (\"ak42\" header) is not supported; export with --version 0 (legacy float format)";
    return false;
  }
  const int64_t dim = hdr[0], hidden = hdr[1], n_layers = hdr[2], n_heads = hdr[3],
                n_kv_heads = hdr[4], seq_len = hdr[6];
  const int64_t vocab_raw = hdr[5];
  const bool shared = vocab_raw > 0;
  const int64_t vocab = vocab_raw < 0 ? -vocab_raw : vocab_raw;
  auto bad = [&](const std::string& what) {
    *err = "'" + path + "': not a llama2.c checkpoint (" + what + "; header dim=" +
           std::to_string(dim) + " hidden_dim=" + std::to_string(hidden) + " n_layers=" +
           std::to_string(n_layers) + " n_heads=" + std::to_string(n_heads) + " n_kv_heads=" +
           std::to_string(n_kv_heads) + " vocab_size=" + std::to_string(vocab_raw) +
           " seq_len=" + std::to_string(seq_len) + ")";
    return false;
  };
  auto in = [](int64_t v, int64_t hi) { return v >= 1 && v <= hi; };
  if (!in(dim, kMaxDim)) return bad("dim out of range");
  if (!in(hidden, kMaxFfn)) return bad("hidden_dim out of range");
  if (!in(n_layers, kMaxLayers)) return bad("n_layers out of range");
  if (!in(n_heads, kMaxHeads) || !in(n_kv_heads, kMaxHeads)) return bad("head counts out of range");
  if (!in(vocab, kMaxVocab)) return bad("vocab_size out of range");
  if (!in(seq_len, kMaxContext)) return bad("seq_len out of range");
  if (dim % n_heads != 0) return bad("dim is not a multiple of n_heads");
  if (n_heads % n_kv_heads != 0) return bad("n_heads is not a multiple of n_kv_heads");
  const int64_t head_size = dim / n_heads;
  if (head_size % 2 != 0) return bad("head size is odd");
  const int64_t kv_dim = head_size * n_kv_heads;

  // Every section's offset, in file order. All products are < 2^62 given the limits above.
  std::vector<Section> sec;
  uint64_t off = sizeof hdr;
  auto add = [&](const std::string& name, fb::TensorRole role, int32_t layer, uint64_t rows,
                 uint64_t cols) {
    sec.push_back({name, role, layer, rows, cols, off});
    off += (rows ? rows : 1) * cols * 4;
  };
  using R = fb::TensorRole;
  const uint64_t L = static_cast<uint64_t>(n_layers);
  auto per_layer = [&](const char* name, R role, uint64_t rows, uint64_t cols) {
    for (uint64_t l = 0; l < L; ++l) {
      add(std::string(name) + "." + std::to_string(l), role, static_cast<int32_t>(l), rows, cols);
    }
  };
  add("token_embedding_table", R::TokenEmbedding, -1, vocab, dim);
  per_layer("rms_att_weight", R::AttnNorm, 0, dim);
  per_layer("wq", R::Wq, dim, dim);
  per_layer("wk", R::Wk, kv_dim, dim);
  per_layer("wv", R::Wv, kv_dim, dim);
  per_layer("wo", R::Wo, dim, dim);
  per_layer("rms_ffn_weight", R::FfnNorm, 0, dim);
  per_layer("w1", R::FfnGate, hidden, dim);
  per_layer("w2", R::FfnDown, dim, hidden);
  per_layer("w3", R::FfnUp, hidden, dim);
  add("rms_final_weight", R::OutputNorm, -1, 0, dim);
  off += 2 * static_cast<uint64_t>(seq_len) * static_cast<uint64_t>(head_size / 2) * 4;  // freq_cis
  if (!shared) add("wcls", R::Output, -1, vocab, dim);
  if (off != f->size()) {
    *err = "'" + path + "': llama2.c header implies " + std::to_string(off) +
           " bytes (dim=" + std::to_string(dim) + " hidden_dim=" + std::to_string(hidden) +
           " n_layers=" + std::to_string(n_layers) + " n_heads=" + std::to_string(n_heads) +
           " n_kv_heads=" + std::to_string(n_kv_heads) + " vocab_size=" +
           std::to_string(vocab_raw) + " seq_len=" + std::to_string(seq_len) + "), file has " +
           std::to_string(f->size()) + (off > f->size() ? " (truncated?)" : " (trailing data?)");
    return false;
  }

  ModelData m;
  m.source = path;
  m.arch.family = fb::Family::Llama;
  m.arch.n_layers = static_cast<uint32_t>(n_layers);
  m.arch.dim = static_cast<uint32_t>(dim);
  m.arch.n_heads = static_cast<uint32_t>(n_heads);
  m.arch.n_kv_heads = static_cast<uint32_t>(n_kv_heads);
  m.arch.head_dim = static_cast<uint32_t>(head_size);
  m.arch.ffn_dim = static_cast<uint32_t>(hidden);
  m.arch.vocab_size = static_cast<uint32_t>(vocab);
  m.arch.max_context = static_cast<uint32_t>(seq_len);
  m.arch.rope_theta = 10000.0f;
  m.arch.rope_style = fb::RopeStyle::Interleaved;
  m.arch.norm_eps = 1e-5f;
  m.arch.tied_embeddings = shared;
  m.arch.activation = fb::Activation::SiLU;

  for (const Section& s : sec) {
    TensorData t;
    t.name = s.name;
    t.role = s.role;
    t.layer = s.layer;
    if (s.rows) t.shape = {s.rows, s.cols};
    else t.shape = {s.cols};
    const uint64_t n = (s.rows ? s.rows : 1) * s.cols;
    const uint64_t offset = s.offset;
    t.load_f32 = [f, offset, n](std::vector<float>* dst, std::string* e) {
      dst->resize(static_cast<size_t>(n));
      return f->read_at(offset, dst->data(), n * 4, e);
    };
    m.tensors.push_back(std::move(t));
  }

  if (tokenizer_path.empty()) {
    *err = "llama2.c checkpoint '" + path + "' has no tokenizer: pass --tokenizer tokenizer.bin";
    return false;
  }
  if (!read_llama2c_tokenizer(tokenizer_path, m.arch.vocab_size, &m.tokenizer, err)) return false;
  // llama2.c's export turned SentencePiece's "\u2581" into ' ' (t.replace('\u2581', ' ')); the
  // model format keeps "\u2581" like every SentencePiece vocabulary (and GGUF) does.
  for (size_t i = 0; i < m.tokenizer.pieces.size(); ++i) {
    if (m.tokenizer.types[i] != fb::TokenType::Normal &&
        m.tokenizer.types[i] != fb::TokenType::UserDefined)
      continue;
    std::string& piece = m.tokenizer.pieces[i];
    if (piece.find(' ') == std::string::npos) continue;
    std::string q;
    for (char c : piece) {
      if (c == ' ') q += "\xe2\x96\x81";
      else q += c;
    }
    piece = q;
  }
  m.tokenizer.add_bos = true;
  m.tokenizer.add_space_prefix = true;
  m.tokenizer.byte_fallback = true;
  *out = std::move(m);
  return true;
}

}  // namespace conv
}  // namespace ringlm::internal
