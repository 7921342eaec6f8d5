// Hostile model files against ringlm::internal::model_open: every mutation must be refused with its
// specific status (never a crash, never a read outside the buffer), and anything accepted must be
// a model whose every tensor and table can be used safely.
//
// Mutated models are built two ways: by editing the converter IR (ModelData) and re-running the
// writer, and by extracting the FlatBuffer header of a good file into plain structs, editing
// them, and re-serialising (with the original tensor data placed at a fixed base so that offsets
// stay meaningful). Every open copies the bytes into an exactly-sized 64-aligned heap block, so
// the sanitizer build catches any read past the end.
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "fixtures.h"
#include "gtest/gtest.h"
#include "model.h"
#include "quant.h"
#include "tokenizer.h"

namespace {

using namespace ringlm::internal;
using conv::ModelData;
using conv::TensorData;
using fb::DType;
using fb::TensorRole;

// ---- a small synthetic model -----------------------------------------------------------------

using ringlm_test::RandomModelShape;

// The shape of the models here: 2 layers of dim 32 (4 heads, 2 kv heads), ffn 48, 64 positions.
RandomModelShape small_shape(bool tied = false) {
  RandomModelShape s;
  s.dim = 32;
  s.ffn_dim = 48;
  s.max_context = 64;
  s.tied = tied;
  return s;
}

// A model of `s` with its own 16-piece vocabulary (merges, a byte piece) and N(0, 0.1) weights
// (norms N(1, 0.1)).
ModelData make_model(const RandomModelShape& s = small_shape()) {
  ModelData md;
  md.arch = ringlm_test::llama_arch(s);
  conv::TokenizerData& t = md.tokenizer;
  t.pieces = {"<unk>", "<s>", "</s>", "\xE2\x96\x81", "a", "b", "c", "ab",
              "\xE2\x96\x81" "a", "<0x0A>", "bc", "abc", "d", "e", "de", "\xE2\x96\x81" "ab"};
  t.types.assign(t.pieces.size(), fb::TokenType::Normal);
  t.types[0] = fb::TokenType::Unknown;
  t.types[1] = t.types[2] = fb::TokenType::Control;
  t.types[9] = fb::TokenType::Byte;
  t.scores.assign(t.pieces.size(), 0.0f);
  t.merges = {{4, 5, 7}, {5, 6, 10}, {7, 6, 11}, {3, 4, 8}, {12, 13, 14}, {8, 5, 15}};
  t.unk_id = 0;
  t.bos_id = 1;
  t.eos_id = 2;
  t.end_ids = {2};
  md.arch.vocab_size = static_cast<uint32_t>(t.pieces.size());
  const uint64_t V = md.arch.vocab_size, D = s.dim, hd = s.dim / s.n_heads;
  const uint64_t Q = s.n_heads * hd, KV = s.n_kv_heads * hd, F = s.ffn_dim;
  uint32_t seed = 1;
  auto add = [&](const std::string& name, TensorRole role, int32_t layer, std::vector<uint64_t> shape) {
    TensorData td;
    td.name = name;
    td.role = role;
    td.layer = layer;
    td.shape = shape;
    const uint32_t sd = seed++;
    const bool vec = shape.size() == 1;
    td.load_f32 = [shape, sd, vec](std::vector<float>* out, std::string*) {
      size_t n = 1;
      for (uint64_t d : shape) n *= d;
      std::mt19937 rng(sd);
      std::normal_distribution<float> dist(vec ? 1.0f : 0.0f, 0.1f);
      out->resize(n);
      for (float& v : *out) v = dist(rng);
      return true;
    };
    md.tensors.push_back(std::move(td));
  };
  add("embed", TensorRole::TokenEmbedding, -1, {V, D});
  for (uint32_t l = 0; l < s.n_layers; ++l) {
    const int32_t li = static_cast<int32_t>(l);
    const std::string p = "l" + std::to_string(l) + ".";
    add(p + "attn_norm", TensorRole::AttnNorm, li, {D});
    add(p + "wq", TensorRole::Wq, li, {Q, D});
    add(p + "wk", TensorRole::Wk, li, {KV, D});
    add(p + "wv", TensorRole::Wv, li, {KV, D});
    add(p + "wo", TensorRole::Wo, li, {D, Q});
    add(p + "ffn_norm", TensorRole::FfnNorm, li, {D});
    add(p + "gate", TensorRole::FfnGate, li, {F, D});
    add(p + "down", TensorRole::FfnDown, li, {D, F});
    add(p + "up", TensorRole::FfnUp, li, {F, D});
  }
  add("out_norm", TensorRole::OutputNorm, -1, {D});
  if (!s.tied) add("output", TensorRole::Output, -1, {V, D});
  md.source = "synthetic";
  return md;
}

std::vector<uint8_t> build(const ModelData& md, DType q = DType::Q8) {
  std::vector<uint8_t> bytes;
  std::string err;
  EXPECT_TRUE(conv::build_model_bytes(md, q, &bytes, &err)) << err;
  return bytes;
}

// ---- opening in an exactly-sized block, and checking what was accepted -----------------------

struct Block {
  void* p = nullptr;
  ~Block() { free(p); }
};

// Everything an accepted model lets a caller do must stay inside the buffer.
void check_usable(const ModelImpl& m, const uint8_t* base, size_t size) {
  ASSERT_NE(m.root, nullptr);
  const uint8_t* end = base + size;
  volatile uint8_t sink = 0;
  for (const fb::Tensor* t : *m.root->tensors()) {
    const WeightView v = model_weight(m, t);
    const uint8_t* d = static_cast<const uint8_t*>(v.data);
    ASSERT_GE(d, base);
    ASSERT_LE(t->size(), static_cast<uint64_t>(end - d));
    ASSERT_EQ(tensor_data_bytes(v.type, v.rows, v.cols), t->size());
    if (v.scales) {
      const uint8_t* s = reinterpret_cast<const uint8_t*>(v.scales);
      ASSERT_GE(s, d);
      ASSERT_LE(s + static_cast<uint64_t>(v.rows) * (v.row_stride / 32) * 2, d + t->size());
    }
    for (uint64_t i = 0; i < t->size(); i += 61) sink = sink + d[i];
    if (t->size()) sink = sink + d[t->size() - 1];
  }
  const Hparams& h = m.hp;
  EXPECT_TRUE(model_weight(m, TensorRole::TokenEmbedding, -1).present());
  EXPECT_TRUE(model_weight(m, TensorRole::OutputNorm, -1).present());
  EXPECT_EQ(model_weight(m, TensorRole::Output, -1).present(), !h.tied_embeddings);
  for (uint32_t l = 0; l < h.n_layers; ++l) {
    for (TensorRole r : {TensorRole::AttnNorm, TensorRole::Wq, TensorRole::Wk, TensorRole::Wv,
                         TensorRole::Wo, TensorRole::FfnNorm, TensorRole::FfnGate,
                         TensorRole::FfnDown, TensorRole::FfnUp}) {
      EXPECT_TRUE(model_weight(m, r, static_cast<int32_t>(l)).present());
    }
  }
  // The tokenizer: every piece decodes, and text encodes, within caller buffers.
  const fb::Tokenizer* tok = m.root->tokenizer();
  char buf[kMaxPieceBytes + 8];
  for (uint32_t id = 0; id < h.vocab_size; ++id) {
    const size_t n = token_text(tok, id ? static_cast<int32_t>(id - 1) : -1, static_cast<int32_t>(id),
                                buf, sizeof buf);
    EXPECT_LE(n, kMaxPieceBytes);
  }
  static const char kText[] = "abc de\nab \xF0\x9F\x98\x80 zz";
  const size_t len = sizeof kText - 1;
  std::vector<uint8_t> scratch(tokenize_scratch_bytes(tok, len) + 8);
  std::vector<int32_t> ids(4 * len + 8);
  size_t n_ids = 0;
  char e[256];
  ErrorSink es{e, sizeof e};
  const Status st = tokenize(tok, h.vocab_size, kText, len, true, ids.data(), ids.size(), &n_ids,
                             scratch.data(), scratch.size(), &es);
  if (st == RLM_OK) {
    for (size_t i = 0; i < n_ids; ++i) {
      EXPECT_GE(ids[i], 0);
      EXPECT_LT(ids[i], static_cast<int32_t>(h.vocab_size));
    }
  }
  (void)sink;
}

struct OpenResult {
  Status status;
  std::string error;
};

OpenResult open_exact(const uint8_t* bytes, size_t size, bool check = true) {
  Block b;
  EXPECT_EQ(posix_memalign(&b.p, 64, size ? size : 1), 0);
  if (size) memcpy(b.p, bytes, size);
  std::unique_ptr<ModelImpl> m(new ModelImpl());
  const Status s = model_open(b.p, size, m.get());
  OpenResult r{s, m->error};
  if (s == RLM_OK) {
    if (check) check_usable(*m, static_cast<const uint8_t*>(b.p), size);
  } else {
    EXPECT_EQ(m->root, nullptr) << "failed open must not leave a usable root";
    EXPECT_NE(r.error, "") << "failed open must explain";
  }
  return r;
}

OpenResult open_exact(const std::vector<uint8_t>& v, bool check = true) {
  return open_exact(v.data(), v.size(), check);
}

#define EXPECT_STATUS(bytes, want)                                                         \
  do {                                                                                     \
    const OpenResult r_ = open_exact(bytes);                                               \
    EXPECT_EQ(r_.status, want) << "got " << rlm_status_string(r_.status) << ": " << r_.error; \
  } while (0)

// ---- the header as plain structs -------------------------------------------------------------

struct RawArch {
  uint8_t family, rope_style, rope_scaling, activation;
  uint32_t n_layers, dim, n_heads, n_kv_heads, head_dim, ffn_dim, vocab_size, max_context;
  uint32_t rope_original_context, sliding_window;
  float rope_theta, rope_scaling_factor, rope_low, rope_high, norm_eps, norm_weight_offset,
      embedding_scale, attn_softcap, final_softcap, query_pre_attn_scalar, rope_theta_local;
  bool tied, qkv_bias, qk_norm;
};

struct RawTok {
  uint8_t kind, pre;
  bool has_pieces = true, has_types = true, has_scores = true, has_sorted = true, has_merges = true,
       has_end = true;
  std::vector<std::string> pieces;
  std::vector<uint8_t> types;
  std::vector<float> scores;
  std::vector<uint32_t> sorted;
  std::vector<fb::Merge> merges;
  std::vector<int32_t> end_ids;
  int32_t bos, eos, unk, pad;
  bool add_bos, add_space_prefix, byte_fallback;
};

struct RawTensor {
  std::string name;
  uint8_t role, dtype;
  int32_t layer;
  bool has_shape = true;
  std::vector<uint64_t> shape;
  uint32_t group_size;
  uint64_t offset, size;
};

struct Header {
  std::string identifier = "RLM1";
  uint32_t format_version;
  bool has_arch = true, has_tok = true, has_tensors = true;
  RawArch arch;
  RawTok tok;
  std::vector<RawTensor> tensors;
  uint64_t data_base;          // absolute offset where `data` starts in the rebuilt file
  std::vector<uint8_t> data;   // original tensor data region (+ anything appended)

  uint64_t end() const { return data_base + data.size(); }
  RawTensor* find(TensorRole role, int32_t layer) {
    for (RawTensor& t : tensors)
      if (t.role == static_cast<uint8_t>(role) && t.layer == layer) return &t;
    return nullptr;
  }
  size_t index(TensorRole role, int32_t layer) { return static_cast<size_t>(find(role, layer) - tensors.data()); }
  // Moves tensor `i` to the end of the list and of the file with fresh zeroed data of `size`
  // bytes, so that shape/dtype edits do not collide with neighbours.
  RawTensor& relocate(size_t i, uint64_t size) {
    RawTensor t = tensors[i];
    tensors.erase(tensors.begin() + static_cast<long>(i));
    data.resize(align_up(data.size(), 64), 0);
    t.offset = data_base + data.size();
    t.size = size;
    data.resize(data.size() + size, 0);
    tensors.push_back(t);
    return tensors.back();
  }
};

constexpr uint64_t kHeaderRoom = 64 * 1024;

Header extract(const std::vector<uint8_t>& file) {
  flatbuffers::Verifier v(file.data(), flatbuffers::ReadScalar<uint32_t>(file.data()) + 4ull);
  EXPECT_TRUE(fb::VerifySizePrefixedModelBuffer(v));
  const fb::Model* m = fb::GetSizePrefixedModel(file.data());
  Header h;
  h.format_version = m->format_version();
  const fb::Architecture* a = m->arch();
  h.arch = RawArch{static_cast<uint8_t>(a->family()), static_cast<uint8_t>(a->rope_style()),
                   static_cast<uint8_t>(a->rope_scaling()), static_cast<uint8_t>(a->activation()),
                   a->n_layers(), a->dim(), a->n_heads(), a->n_kv_heads(), a->head_dim(),
                   a->ffn_dim(), a->vocab_size(), a->max_context(), a->rope_original_context(),
                   a->sliding_window(), a->rope_theta(), a->rope_scaling_factor(),
                   a->rope_low_freq_factor(), a->rope_high_freq_factor(), a->norm_eps(),
                   a->norm_weight_offset(), a->embedding_scale(), a->attn_logit_softcap(),
                   a->final_logit_softcap(), a->query_pre_attn_scalar(), a->rope_theta_local(),
                   a->tied_embeddings(), a->qkv_bias(), a->qk_norm()};
  const fb::Tokenizer* t = m->tokenizer();
  RawTok& r = h.tok;
  r.kind = static_cast<uint8_t>(t->kind());
  r.pre = static_cast<uint8_t>(t->pre_tokenizer());
  for (const auto* s : *t->pieces()) r.pieces.push_back(s->str());
  for (auto x : *t->types()) r.types.push_back(static_cast<uint8_t>(x));
  for (float x : *t->scores()) r.scores.push_back(x);
  for (uint32_t x : *t->sorted_ids()) r.sorted.push_back(x);
  for (const fb::Merge* mg : *t->merges()) r.merges.push_back(*mg);
  for (int32_t x : *t->end_ids()) r.end_ids.push_back(x);
  r.bos = t->bos_id();
  r.eos = t->eos_id();
  r.unk = t->unk_id();
  r.pad = t->pad_id();
  r.add_bos = t->add_bos();
  r.add_space_prefix = t->add_space_prefix();
  r.byte_fallback = t->byte_fallback();
  uint64_t first = UINT64_MAX;
  for (const fb::Tensor* x : *m->tensors()) first = std::min<uint64_t>(first, x->offset());
  const uint64_t header_end = flatbuffers::ReadScalar<uint32_t>(file.data()) + 4ull;
  h.data_base = align_up(header_end + kHeaderRoom, 64);
  for (const fb::Tensor* x : *m->tensors()) {
    RawTensor rt;
    rt.name = x->name()->str();
    rt.role = static_cast<uint8_t>(x->role());
    rt.dtype = static_cast<uint8_t>(x->dtype());
    rt.layer = x->layer();
    for (uint64_t d : *x->shape()) rt.shape.push_back(d);
    rt.group_size = x->group_size();
    rt.offset = x->offset() - first + h.data_base;
    rt.size = x->size();
    h.tensors.push_back(rt);
  }
  h.data.assign(file.begin() + static_cast<long>(first), file.end());
  return h;
}

std::vector<uint8_t> assemble(const Header& h) {
  flatbuffers::FlatBufferBuilder fbb(1 << 16);
  const RawTok& r = h.tok;
  flatbuffers::Offset<fb::Tokenizer> tok;
  if (h.has_tok) {
    std::vector<flatbuffers::Offset<flatbuffers::String>> ps;
    for (const auto& p : r.pieces) ps.push_back(fbb.CreateString(p));
    auto pieces = fbb.CreateVector(ps);
    auto types = fbb.CreateVector(reinterpret_cast<const fb::TokenType*>(r.types.data()), r.types.size());
    auto scores = fbb.CreateVector(r.scores);
    auto sorted = fbb.CreateVector(r.sorted);
    auto merges = fbb.CreateVectorOfStructs(r.merges);
    auto ends = fbb.CreateVector(r.end_ids);
    fb::TokenizerBuilder b(fbb);
    b.add_kind(static_cast<fb::TokenizerKind>(r.kind));
    b.add_pre_tokenizer(static_cast<fb::PreTokenizer>(r.pre));
    if (r.has_pieces) b.add_pieces(pieces);
    if (r.has_types) b.add_types(types);
    if (r.has_scores) b.add_scores(scores);
    if (r.has_sorted) b.add_sorted_ids(sorted);
    if (r.has_merges) b.add_merges(merges);
    if (r.has_end) b.add_end_ids(ends);
    b.add_bos_id(r.bos);
    b.add_eos_id(r.eos);
    b.add_unk_id(r.unk);
    b.add_pad_id(r.pad);
    b.add_add_bos(r.add_bos);
    b.add_add_space_prefix(r.add_space_prefix);
    b.add_byte_fallback(r.byte_fallback);
    tok = b.Finish();
  }
  std::vector<flatbuffers::Offset<fb::Tensor>> ts;
  for (const RawTensor& t : h.tensors) {
    auto name = fbb.CreateString(t.name);
    auto shape = fbb.CreateVector(t.shape);
    fb::TensorBuilder b(fbb);
    b.add_name(name);
    b.add_role(static_cast<TensorRole>(t.role));
    b.add_layer(t.layer);
    if (t.has_shape) b.add_shape(shape);
    b.add_dtype(static_cast<DType>(t.dtype));
    b.add_group_size(t.group_size);
    b.add_offset(t.offset);
    b.add_size(t.size);
    ts.push_back(b.Finish());
  }
  auto tensors = fbb.CreateVector(ts);
  flatbuffers::Offset<fb::Architecture> arch;
  if (h.has_arch) {
    const RawArch& a = h.arch;
    fb::ArchitectureBuilder b(fbb);
    b.add_family(static_cast<fb::Family>(a.family));
    b.add_n_layers(a.n_layers);
    b.add_dim(a.dim);
    b.add_n_heads(a.n_heads);
    b.add_n_kv_heads(a.n_kv_heads);
    b.add_head_dim(a.head_dim);
    b.add_ffn_dim(a.ffn_dim);
    b.add_vocab_size(a.vocab_size);
    b.add_max_context(a.max_context);
    b.add_rope_theta(a.rope_theta);
    b.add_rope_style(static_cast<fb::RopeStyle>(a.rope_style));
    b.add_rope_scaling(static_cast<fb::RopeScaling>(a.rope_scaling));
    b.add_rope_scaling_factor(a.rope_scaling_factor);
    b.add_rope_low_freq_factor(a.rope_low);
    b.add_rope_high_freq_factor(a.rope_high);
    b.add_rope_original_context(a.rope_original_context);
    b.add_norm_eps(a.norm_eps);
    b.add_tied_embeddings(a.tied);
    b.add_activation(static_cast<fb::Activation>(a.activation));
    b.add_qkv_bias(a.qkv_bias);
    b.add_qk_norm(a.qk_norm);
    b.add_norm_weight_offset(a.norm_weight_offset);
    b.add_embedding_scale(a.embedding_scale);
    b.add_attn_logit_softcap(a.attn_softcap);
    b.add_final_logit_softcap(a.final_softcap);
    b.add_query_pre_attn_scalar(a.query_pre_attn_scalar);
    b.add_sliding_window(a.sliding_window);
    b.add_rope_theta_local(a.rope_theta_local);
    arch = b.Finish();
  }
  fb::ModelBuilder mb(fbb);
  mb.add_format_version(h.format_version);
  if (h.has_arch) mb.add_arch(arch);
  if (h.has_tok) mb.add_tokenizer(tok);
  if (h.has_tensors) mb.add_tensors(tensors);
  fbb.FinishSizePrefixed(mb.Finish(), h.identifier.c_str());
  std::vector<uint8_t> out(fbb.GetBufferPointer(), fbb.GetBufferPointer() + fbb.GetSize());
  EXPECT_LE(out.size(), h.data_base) << "mutated header outgrew kHeaderRoom";
  out.resize(h.data_base, 0);
  out.insert(out.end(), h.data.begin(), h.data.end());
  return out;
}

// A mutation of the header of a good Q8 model, expected to fail with `want`.
void expect_header_mutation(const std::function<void(Header&)>& mutate, Status want,
                            const RandomModelShape& s = small_shape(), DType q = DType::Q8) {
  Header h = extract(build(make_model(s), q));
  mutate(h);
  const OpenResult r = open_exact(assemble(h));
  EXPECT_EQ(r.status, want) << "got " << rlm_status_string(r.status) << ": " << r.error;
}

// ---- baseline --------------------------------------------------------------------------------

TEST(ModelVerify, GoodModelsOpenAndRebuildRoundTrips) {
  for (DType q : {DType::F32, DType::F16, DType::Q8, DType::Q4, DType::Q5, DType::Q4_1, DType::Q5_1,
                  DType::Q4K, DType::Q5K, DType::Q6K}) {
    for (bool tied : {false, true}) {
      const std::vector<uint8_t> file = build(make_model(small_shape(tied)), q);
      EXPECT_STATUS(file, RLM_OK);
      EXPECT_STATUS(assemble(extract(file)), RLM_OK);  // the harness itself changes nothing
    }
  }
}

TEST(ModelVerify, BadArguments) {
  const std::vector<uint8_t> file = build(make_model());
  std::unique_ptr<ModelImpl> m(new ModelImpl());
  EXPECT_EQ(model_open(nullptr, file.size(), m.get()), RLM_ERR_INVALID_ARGUMENT);
  // Misaligned base pointer.
  Block b;
  ASSERT_EQ(posix_memalign(&b.p, 64, file.size() + 64), 0);
  memcpy(static_cast<uint8_t*>(b.p) + 8, file.data(), file.size());
  EXPECT_EQ(model_open(static_cast<uint8_t*>(b.p) + 8, file.size(), m.get()), RLM_ERR_MODEL_ALIGNMENT);
  EXPECT_EQ(m->root, nullptr);
}

// ---- truncation ------------------------------------------------------------------------------

TEST(ModelVerify, TruncationAtEverySectionBoundary) {
  for (DType q : {DType::Q8, DType::F32}) {
    const std::vector<uint8_t> file = build(make_model(), q);
    const uint64_t fb_size = flatbuffers::ReadScalar<uint32_t>(file.data());
    const uint64_t header_end = fb_size + 4;
    const fb::Model* root = fb::GetSizePrefixedModel(file.data());
    std::vector<uint64_t> lengths;
    for (uint64_t l = 0; l <= header_end + 256 && l < file.size(); ++l) lengths.push_back(l);
    for (uint64_t l = header_end; l < file.size(); l += 97) lengths.push_back(l);
    for (const fb::Tensor* t : *root->tensors()) {
      for (uint64_t l : {t->offset() - 1, t->offset(), t->offset() + 1, t->offset() + t->size() - 1,
                         t->offset() + t->size(), t->offset() + t->size() + 1}) {
        if (l < file.size()) lengths.push_back(l);
      }
    }
    lengths.push_back(file.size() - 1);
    for (uint64_t l : lengths) {
      const Status want = l < 8 || l < header_end ? RLM_ERR_MODEL_TRUNCATED : RLM_ERR_MODEL_BOUNDS;
      const OpenResult r = open_exact(file.data(), static_cast<size_t>(l));
      ASSERT_EQ(r.status, want) << "length " << l << " of " << file.size() << ": " << r.error;
    }
    EXPECT_STATUS(file, RLM_OK);
  }
}

// ---- flipped bytes ---------------------------------------------------------------------------

TEST(ModelVerify, FlippedBytesNeverCrash) {
  const std::vector<uint8_t> files[] = {build(make_model(), DType::Q8),
                                        build(make_model(small_shape(true)), DType::Q4),
                                        build(make_model(), DType::F16)};
  std::mt19937_64 rng(20240601);
  int ok = 0, refused = 0;
  const int kTrials = 12000;
  std::vector<uint8_t> f;
  for (int trial = 0; trial < kTrials; ++trial) {
    const std::vector<uint8_t>& file = files[trial % 3];
    const uint64_t header_end = flatbuffers::ReadScalar<uint32_t>(file.data()) + 4ull;
    f = file;
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int k = 0; k < flips; ++k) {
      // Mostly the metadata (where the structure is), sometimes anywhere.
      const uint64_t range = trial % 10 == 0 ? f.size() : header_end;
      const size_t at = static_cast<size_t>(rng() % range);
      switch (rng() % 3) {
        case 0: f[at] ^= static_cast<uint8_t>(1u << (rng() % 8)); break;
        case 1: f[at] = static_cast<uint8_t>(rng()); break;
        default: f[at] = (rng() & 1) ? 0xff : 0x00; break;
      }
    }
    const OpenResult r = open_exact(f);  // accepted models are exercised by check_usable
    if (::testing::Test::HasFatalFailure()) FAIL() << "trial " << trial;
    (r.status == RLM_OK ? ok : refused)++;
  }
  printf("[ fuzz     ] %d mutated files: %d accepted and usable, %d refused\n", kTrials, ok, refused);
  EXPECT_GT(refused, 0);
}

TEST(ModelVerify, RandomGarbageWithValidPrefixIsRefused) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<uint8_t> f(64 + rng() % 4096);
    for (auto& b : f) b = static_cast<uint8_t>(rng());
    const uint32_t n = static_cast<uint32_t>(f.size() - 4 - rng() % 32);
    memcpy(f.data(), &n, 4);
    memcpy(f.data() + 8, "RLM1", 4);
    const OpenResult r = open_exact(f);
    EXPECT_NE(r.status, RLM_OK);
  }
}

// ---- file-level fields -----------------------------------------------------------------------

TEST(ModelVerify, WrongIdentifier) {
  expect_header_mutation([](Header& h) { h.identifier = "RLM2"; }, RLM_ERR_MODEL_IDENTIFIER);
  expect_header_mutation([](Header& h) { h.identifier = "GGUF"; }, RLM_ERR_MODEL_IDENTIFIER);
  // A GGUF or any other file: not ours.
  // The kind of file is checked before the size prefix (issue #12): "GGUF" used to be read as a
  // huge size prefix and reported as RLM_ERR_MODEL_TRUNCATED ("header says 1179993927 bytes").
  std::vector<uint8_t> gguf(4096, 0);
  memcpy(gguf.data(), "GGUF\x03\0\0\0", 8);
  OpenResult r = open_exact(gguf);
  EXPECT_EQ(r.status, RLM_ERR_MODEL_IDENTIFIER) << r.error;
  EXPECT_NE(r.error.find("GGUF"), std::string::npos) << r.error;
  EXPECT_NE(r.error.find("ringlm convert"), std::string::npos) << r.error;
  for (size_t n : {4, 7, 8, 11, 12}) {  // even a GGUF too short for a header says what it is
    EXPECT_EQ(open_exact(gguf.data(), n).status, RLM_ERR_MODEL_IDENTIFIER) << n;
  }
  // Any other file (a llama2.c checkpoint starts with its int32 dim): identifier missing, not
  // "truncated", whatever its first word says about the size.
  std::vector<uint8_t> other(4096, 0);
  const int32_t llama2c_header[7] = {288, 768, 6, 6, 6, 32000, 256};
  memcpy(other.data(), llama2c_header, sizeof llama2c_header);
  r = open_exact(other);
  EXPECT_EQ(r.status, RLM_ERR_MODEL_IDENTIFIER) << r.error;
  EXPECT_NE(r.error.find("RLM1"), std::string::npos) << r.error;
  const uint32_t huge = 0xfffffff0u;
  memcpy(other.data(), &huge, 4);
  EXPECT_STATUS(other, RLM_ERR_MODEL_IDENTIFIER);
  std::vector<uint8_t> small(64, 0);
  small[0] = 4;  // fb_size 4: too small to hold an identifier
  EXPECT_STATUS(small, RLM_ERR_MODEL_IDENTIFIER);
}

TEST(ModelVerify, WrongVersion) {
  expect_header_mutation([](Header& h) { h.format_version = RLM_FORMAT_VERSION + 1; }, RLM_ERR_MODEL_VERSION);
  // Every version opens; a q4k tensor needs version 2 (version 1 readers do not know it).
  expect_header_mutation([](Header& h) { h.format_version = 2; }, RLM_OK);
  expect_header_mutation([](Header& h) { h.format_version = 1; }, RLM_OK);
  expect_header_mutation([](Header& h) { h.format_version = 2; }, RLM_OK, small_shape(), DType::Q4K);
  expect_header_mutation([](Header& h) { h.format_version = 1; }, RLM_ERR_MODEL_TENSOR, small_shape(),
                         DType::Q4K);
  // A q6k tensor needs version 3.
  expect_header_mutation([](Header& h) { h.format_version = 3; }, RLM_OK, small_shape(), DType::Q6K);
  expect_header_mutation([](Header& h) { h.format_version = 2; }, RLM_ERR_MODEL_TENSOR, small_shape(),
                         DType::Q6K);
  // A q5k or q5 tensor needs version 4.
  for (DType q : {DType::Q5K, DType::Q5}) {
    expect_header_mutation([](Header& h) { h.format_version = 4; }, RLM_OK, small_shape(), q);
    expect_header_mutation([](Header& h) { h.format_version = 3; }, RLM_ERR_MODEL_TENSOR, small_shape(), q);
  }
  // A q4_1 or q5_1 tensor needs version 5.
  for (DType q : {DType::Q4_1, DType::Q5_1}) {
    expect_header_mutation([](Header& h) { h.format_version = 5; }, RLM_OK, small_shape(), q);
    expect_header_mutation([](Header& h) { h.format_version = 4; }, RLM_ERR_MODEL_TENSOR, small_shape(), q);
  }
  expect_header_mutation([](Header& h) { h.format_version = 0; }, RLM_ERR_MODEL_VERSION);
  expect_header_mutation([](Header& h) { h.format_version = 0xffffffffu; }, RLM_ERR_MODEL_VERSION);
}

TEST(ModelVerify, SizePrefixAndStructure) {
  std::vector<uint8_t> file = build(make_model());
  std::vector<uint8_t> f = file;
  const uint32_t huge = 0xfffffff0u;
  memcpy(f.data(), &huge, 4);
  EXPECT_STATUS(f, RLM_ERR_MODEL_TRUNCATED);
  // Root offset pointing outside the FlatBuffer: the verifier refuses it.
  f = file;
  const uint32_t root = 0x7ffffff0u;
  memcpy(f.data() + 4, &root, 4);
  EXPECT_STATUS(f, RLM_ERR_MODEL_CORRUPT);
  // A valid FlatBuffer missing whole tables.
  expect_header_mutation([](Header& h) { h.has_arch = false; }, RLM_ERR_MODEL_HPARAMS);
  expect_header_mutation([](Header& h) { h.has_tensors = false; }, RLM_ERR_MODEL_TENSOR);
  expect_header_mutation([](Header& h) { h.tensors.clear(); }, RLM_ERR_MODEL_TENSOR);
  expect_header_mutation([](Header& h) { h.has_tok = false; }, RLM_ERR_MODEL_TOKENIZER);
}

// ---- hyperparameters -------------------------------------------------------------------------

TEST(ModelVerify, HugeOrInconsistentHyperparameters) {
  const auto H = RLM_ERR_MODEL_HPARAMS;
  expect_header_mutation([](Header& h) { h.arch.dim = 1u << 20; }, H);
  expect_header_mutation([](Header& h) { h.arch.dim = 0xffffffffu; }, H);
  expect_header_mutation([](Header& h) { h.arch.n_layers = 0; }, H);
  expect_header_mutation([](Header& h) { h.arch.n_layers = 1u << 30; }, H);
  expect_header_mutation([](Header& h) { h.arch.n_heads = 0xffffffffu; }, H);
  expect_header_mutation([](Header& h) { h.arch.n_kv_heads = 0; }, H);
  expect_header_mutation([](Header& h) { h.arch.n_kv_heads = 3; }, H);  // 4 % 3 != 0
  expect_header_mutation([](Header& h) { h.arch.head_dim = 7; }, H);    // odd
  expect_header_mutation([](Header& h) { h.arch.head_dim = 1u << 20; }, H);
  expect_header_mutation([](Header& h) { h.arch.ffn_dim = 0xffffffffu; }, H);
  expect_header_mutation([](Header& h) { h.arch.vocab_size = 0; }, H);
  expect_header_mutation([](Header& h) { h.arch.vocab_size = 1u << 31; }, H);
  expect_header_mutation([](Header& h) { h.arch.max_context = 0; }, H);
  expect_header_mutation([](Header& h) { h.arch.max_context = 0xffffffffu; }, H);
  expect_header_mutation([](Header& h) { h.arch.rope_theta = 0; }, H);
  expect_header_mutation([](Header& h) { h.arch.rope_theta = NAN; }, H);
  expect_header_mutation([](Header& h) { h.arch.norm_eps = NAN; }, H);
  expect_header_mutation([](Header& h) { h.arch.norm_eps = -1; }, H);
  expect_header_mutation([](Header& h) { h.arch.rope_style = 9; }, H);
  // Large but within limits: the tensors then no longer match.
  expect_header_mutation([](Header& h) { h.arch.n_layers = 1024; }, RLM_ERR_MODEL_TENSOR);
  expect_header_mutation([](Header& h) { h.arch.vocab_size = 1u << 20; }, RLM_ERR_MODEL_TENSOR);
}

TEST(ModelVerify, UnsupportedFeatures) {
  // Enum values no build knows.
  const auto U = RLM_ERR_MODEL_UNSUPPORTED;
  expect_header_mutation([](Header& h) { h.arch.family = 200; }, U);
  expect_header_mutation([](Header& h) { h.arch.activation = 9; }, U);
  expect_header_mutation([](Header& h) { h.arch.rope_scaling = 9; }, U);
  // Feature flags whose tensors this file does not have: refused either as unsupported by the
  // build or, where the build runs the feature, as missing tensors.
  for (auto mutate : {+[](Header& h) { h.arch.qkv_bias = true; },
                      +[](Header& h) { h.arch.qk_norm = true; }}) {
    Header h = extract(build(make_model()));
    mutate(h);
    const OpenResult r = open_exact(assemble(h));
    EXPECT_TRUE(r.status == RLM_ERR_MODEL_UNSUPPORTED || r.status == RLM_ERR_MODEL_TENSOR)
        << rlm_status_string(r.status) << ": " << r.error;
  }
}

// ---- tensor descriptors ----------------------------------------------------------------------

TEST(ModelVerify, OffsetsPastTheEnd) {
  const auto B = RLM_ERR_MODEL_BOUNDS;
  expect_header_mutation([](Header& h) { h.tensors.back().offset = align_up(h.end() + 64, 64); }, B);
  expect_header_mutation([](Header& h) { h.tensors.back().offset = align_up(h.end() - h.tensors.back().size + 1, 64); }, B);
  expect_header_mutation([](Header& h) { h.tensors.back().offset = 1ull << 62; }, B);
  // offset + size would wrap around 2^64.
  expect_header_mutation([](Header& h) { h.tensors.back().offset = UINT64_MAX & ~63ull; }, B);
  expect_header_mutation([](Header& h) { h.tensors[0].offset = UINT64_MAX - 63; }, B);
  // A huge shape with the matching (huge) size: in-range dimensions, data far past the end.
  expect_header_mutation([](Header& h) {
    RawTensor& t = h.tensors.back();
    t.shape = {1ull << 31, 1ull << 20};
    t.size = tensor_data_bytes(static_cast<WeightType>(t.dtype), t.shape[0], t.shape[1]);
  }, B);
}

TEST(ModelVerify, OverlappingTensors) {
  const auto O = RLM_ERR_MODEL_OVERLAP;
  // Second tensor starts inside the first.
  expect_header_mutation([](Header& h) { h.tensors[1].offset = h.tensors[0].offset + 64; }, O);
  // Same data for two tensors.
  expect_header_mutation([](Header& h) { h.tensors[2].offset = h.tensors[1].offset; }, O);
  // Out of order (the format requires increasing offsets).
  expect_header_mutation([](Header& h) { std::swap(h.tensors[3], h.tensors[4]); }, O);
  // Data inside the metadata.
  expect_header_mutation([](Header& h) { h.tensors[0].offset = 64; }, O);
  expect_header_mutation([](Header& h) { h.tensors[0].offset = 0; }, O);
}

TEST(ModelVerify, MisalignedOffset) {
  const auto A = RLM_ERR_MODEL_ALIGNMENT;
  expect_header_mutation([](Header& h) { h.tensors[0].offset += 4; }, A);
  expect_header_mutation([](Header& h) { h.tensors.back().offset += 32; }, A);
  expect_header_mutation([](Header& h) { h.tensors[5].offset += 1; }, A);
}

TEST(ModelVerify, WrongTensorSizeDtypeShape) {
  const auto T = RLM_ERR_MODEL_TENSOR;
  expect_header_mutation([](Header& h) { h.tensors[0].size -= 1; }, T);
  expect_header_mutation([](Header& h) { h.tensors[1].size += 64; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].size = UINT64_MAX; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].size = 0; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].dtype = 10; }, T);  // no such dtype
  expect_header_mutation([](Header& h) { h.tensors[0].role = 250; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].group_size = 16; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].has_shape = false; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].shape = {}; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].shape.insert(h.tensors[0].shape.begin(), 1); }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].shape[0] = 0; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].shape[1] = 1ull << 32; }, T);
  // A shape that disagrees with the hyperparameters, with a size that matches the shape.
  expect_header_mutation([](Header& h) {
    const size_t i = h.index(TensorRole::Wq, 1);
    RawTensor t = h.tensors[i];
    RawTensor& r = h.relocate(i, tensor_data_bytes(static_cast<WeightType>(t.dtype), t.shape[0] + 1, t.shape[1]));
    r.shape[0] += 1;
  }, T);
  // A norm vector stored quantized (vectors must be f32), size consistent.
  expect_header_mutation([](Header& h) {
    const size_t i = h.index(TensorRole::FfnNorm, 0);
    const uint64_t n = h.tensors[i].shape[0];
    RawTensor& r = h.relocate(i, tensor_data_bytes(WeightType::Q8, 1, n));
    r.dtype = static_cast<uint8_t>(DType::Q8);
    r.group_size = 32;
  }, T);
  // An embedding stored with the wrong (transposed) shape.
  expect_header_mutation([](Header& h) {
    RawTensor& t = h.tensors[0];
    std::swap(t.shape[0], t.shape[1]);
    h.relocate(0, tensor_data_bytes(static_cast<WeightType>(t.dtype), t.shape[0], t.shape[1]));
  }, T);
}

TEST(ModelVerify, MissingDuplicateAndExtraTensors) {
  const auto T = RLM_ERR_MODEL_TENSOR;
  // Missing: through the IR.
  for (TensorRole role : {TensorRole::TokenEmbedding, TensorRole::OutputNorm, TensorRole::Output,
                          TensorRole::Wk, TensorRole::FfnUp, TensorRole::AttnNorm}) {
    ModelData md = make_model();
    const int32_t layer = role == TensorRole::TokenEmbedding || role == TensorRole::OutputNorm ||
                                  role == TensorRole::Output ? -1 : 1;
    auto it = std::find_if(md.tensors.begin(), md.tensors.end(), [&](const TensorData& t) {
      return t.role == role && t.layer == layer;
    });
    ASSERT_NE(it, md.tensors.end());
    md.tensors.erase(it);
    const OpenResult r = open_exact(build(md));
    EXPECT_EQ(r.status, T) << fb::EnumNameTensorRole(role) << ": " << r.error;
    EXPECT_NE(r.error.find("missing"), std::string::npos) << r.error;
  }
  // Duplicate: the same role and layer twice, separate data.
  {
    ModelData md = make_model();
    md.tensors.push_back(md.tensors[3]);
    const OpenResult r = open_exact(build(md));
    EXPECT_EQ(r.status, T) << r.error;
    EXPECT_NE(r.error.find("appears 2 times"), std::string::npos) << r.error;
  }
  // A role this family does not use, and a layer out of range.
  {
    ModelData md = make_model();
    TensorData bq = md.tensors[1];  // a norm vector of dim
    bq.role = TensorRole::Bq;
    bq.layer = 0;
    md.tensors.push_back(bq);
    EXPECT_STATUS(build(md), T);
  }
  expect_header_mutation([](Header& h) { h.tensors[1].layer = 2; }, T);   // == n_layers
  expect_header_mutation([](Header& h) { h.tensors[1].layer = -5; }, T);
  expect_header_mutation([](Header& h) { h.tensors[1].layer = INT32_MAX; }, T);
  expect_header_mutation([](Header& h) { h.tensors[0].layer = 0; }, T);  // global role in a layer
  // Tied embeddings with an Output tensor present / untied without one.
  expect_header_mutation([](Header& h) { h.arch.tied = true; }, T);
  expect_header_mutation([](Header& h) { h.arch.tied = false; }, T, small_shape(true));
}

// ---- tokenizer -------------------------------------------------------------------------------

TEST(ModelVerify, TokenIdsOutOfRange) {
  const auto K = RLM_ERR_MODEL_TOKENIZER;
  const int32_t V = 16;
  expect_header_mutation([&](Header& h) { h.tok.bos = V; }, K);
  expect_header_mutation([&](Header& h) { h.tok.eos = -2; }, K);
  expect_header_mutation([&](Header& h) { h.tok.unk = V + 100; }, K);
  expect_header_mutation([&](Header& h) { h.tok.pad = INT32_MIN; }, K);
  expect_header_mutation([&](Header& h) { h.tok.end_ids = {2, V}; }, K);
  expect_header_mutation([&](Header& h) { h.tok.end_ids = {-1}; }, K);
  expect_header_mutation([&](Header& h) { h.tok.sorted[3] = V; }, K);
  expect_header_mutation([&](Header& h) { h.tok.sorted[0] = 0xffffffffu; }, K);
  expect_header_mutation([&](Header& h) { h.tok.merges[0] = fb::Merge(V, 1, 2, 0); }, K);
  expect_header_mutation([&](Header& h) { h.tok.merges[2] = fb::Merge(h.tok.merges[2].left(), h.tok.merges[2].right(), 1000, 2); }, K);
}

TEST(ModelVerify, TokenizerTablesInconsistent) {
  const auto K = RLM_ERR_MODEL_TOKENIZER;
  expect_header_mutation([](Header& h) { h.tok.pieces.pop_back(); }, K);
  expect_header_mutation([](Header& h) { h.tok.pieces.push_back("x"); }, K);
  expect_header_mutation([](Header& h) { h.tok.has_pieces = false; }, K);
  expect_header_mutation([](Header& h) { h.tok.types.pop_back(); }, K);
  expect_header_mutation([](Header& h) { h.tok.has_types = false; }, K);
  expect_header_mutation([](Header& h) { h.tok.types[4] = 77; }, K);
  expect_header_mutation([](Header& h) { h.tok.scores.resize(5); }, K);
  expect_header_mutation([](Header& h) { h.tok.has_sorted = false; }, K);
  expect_header_mutation([](Header& h) { std::swap(h.tok.sorted[0], h.tok.sorted[15]); }, K);
  expect_header_mutation([](Header& h) { h.tok.pieces[5] = std::string(kMaxPieceBytes + 1, 'b'); }, K);
  expect_header_mutation([](Header& h) { std::swap(h.tok.merges[0], h.tok.merges[5]); }, K);
  expect_header_mutation([](Header& h) { h.tok.merges.push_back(h.tok.merges.back()); }, K);
  expect_header_mutation([](Header& h) { h.tok.kind = 9; }, K);
  expect_header_mutation([](Header& h) { h.tok.pre = 99; }, K);
  // Missing optional tables are fine.
  const auto OK = RLM_OK;
  expect_header_mutation([](Header& h) { h.tok.has_scores = false; }, OK);
  expect_header_mutation([](Header& h) { h.tok.has_merges = false; }, OK);
  expect_header_mutation([](Header& h) { h.tok.has_end = false; }, OK);
}

}  // namespace
