#include "model.h"

#include <math.h>
#include <string.h>

#include "tensor_manifest.h"
#include "tokenizer.h"

namespace ringlm::internal {
namespace {

using fb::TensorRole;

bool is_quant(WeightType t) {
  return t == WeightType::Q8 || t == WeightType::Q4 || t == WeightType::Q4K ||
         t == WeightType::Q6K || t == WeightType::Q5K || t == WeightType::Q5 ||
         t == WeightType::Q4_1 || t == WeightType::Q5_1;
}

// The manifest input of verified hyperparameters.
ManifestShape manifest_shape(const Hparams& h) {
  return ManifestShape{h.n_layers, h.dim,      h.q_dim,    h.kv_dim,  h.head_dim,   h.ffn_dim,
                       h.vocab_size, h.qkv_bias, h.qk_norm, h.post_norms, h.tied_embeddings};
}

bool finite_nonneg(float x) { return x == x && x >= 0.0f && x < 1e30f; }

Status check_hparams(const fb::Architecture* a, Hparams* h, ErrorSink* err) {
  RLM_CHECK(a != nullptr, RLM_ERR_MODEL_HPARAMS, err, "model has no architecture table");
  h->family = a->family();
  h->n_layers = a->n_layers();
  h->dim = a->dim();
  h->n_heads = a->n_heads();
  h->n_kv_heads = a->n_kv_heads();
  h->head_dim = a->head_dim();
  h->ffn_dim = a->ffn_dim();
  h->vocab_size = a->vocab_size();
  h->max_context = a->max_context();
  h->rope_theta = a->rope_theta();
  h->norm_eps = a->norm_eps();
  h->rope_style = a->rope_style();
  h->tied_embeddings = a->tied_embeddings();
#define RANGE(v, hi) \
  RLM_CHECK((v) >= 1 && (v) <= (hi), RLM_ERR_MODEL_HPARAMS, err, #v " = %u out of [1, %u]", (v), (hi))
  RANGE(h->n_layers, kMaxLayers);
  RANGE(h->dim, kMaxDim);
  RANGE(h->n_heads, kMaxHeads);
  RANGE(h->n_kv_heads, kMaxHeads);
  RANGE(h->head_dim, kMaxHeadDim);
  RANGE(h->ffn_dim, kMaxFfn);
  RANGE(h->vocab_size, kMaxVocab);
  RANGE(h->max_context, kMaxContext);
#undef RANGE
  RLM_CHECK(h->n_heads % h->n_kv_heads == 0, RLM_ERR_MODEL_HPARAMS, err,
            "n_heads %u not a multiple of n_kv_heads %u", h->n_heads, h->n_kv_heads);
  RLM_CHECK(h->head_dim % 2 == 0, RLM_ERR_MODEL_HPARAMS, err, "head_dim %u is odd", h->head_dim);
  h->q_dim = h->n_heads * h->head_dim;
  h->kv_dim = h->n_kv_heads * h->head_dim;
  RLM_CHECK(h->q_dim <= kMaxDim * 4, RLM_ERR_MODEL_HPARAMS, err, "n_heads * head_dim too large");
  RLM_CHECK(h->rope_theta > 0.0f && h->rope_theta < 1e12f, RLM_ERR_MODEL_HPARAMS, err,
            "rope_theta %g out of range", static_cast<double>(h->rope_theta));
  RLM_CHECK(h->norm_eps >= 0.0f && h->norm_eps < 1.0f, RLM_ERR_MODEL_HPARAMS, err,
            "norm_eps %g out of range", static_cast<double>(h->norm_eps));
  RLM_CHECK(static_cast<uint32_t>(h->rope_style) <= static_cast<uint32_t>(fb::RopeStyle::MAX),
            RLM_ERR_MODEL_HPARAMS, err, "unknown rope_style %u", (unsigned)h->rope_style);

  h->activation = a->activation();
  RLM_CHECK(static_cast<uint32_t>(h->family) <= static_cast<uint32_t>(fb::Family::MAX),
            RLM_ERR_MODEL_UNSUPPORTED, err, "unknown model family %u", (unsigned)h->family);
  RLM_CHECK(static_cast<uint32_t>(h->activation) <= static_cast<uint32_t>(fb::Activation::MAX),
            RLM_ERR_MODEL_UNSUPPORTED, err, "unknown activation %u", (unsigned)h->activation);
  h->rope_scaling = a->rope_scaling();
  h->rope_factor = a->rope_scaling_factor();
  h->rope_low_freq_factor = a->rope_low_freq_factor();
  h->rope_high_freq_factor = a->rope_high_freq_factor();
  h->rope_original_context = a->rope_original_context();
  RLM_CHECK(static_cast<uint32_t>(h->rope_scaling) <= static_cast<uint32_t>(fb::RopeScaling::MAX),
            RLM_ERR_MODEL_UNSUPPORTED, err, "unknown rope scaling %u", (unsigned)h->rope_scaling);
  if (h->rope_scaling != fb::RopeScaling::None) {
    RLM_CHECK(h->rope_factor >= 1.0f && h->rope_factor <= 1024.0f, RLM_ERR_MODEL_HPARAMS, err,
              "rope scaling factor %g out of [1, 1024]", (double)h->rope_factor);
  }
  if (h->rope_scaling == fb::RopeScaling::Llama3) {
    RLM_CHECK(h->rope_original_context >= 1 && h->rope_low_freq_factor > 0.0f &&
                  h->rope_high_freq_factor > h->rope_low_freq_factor &&
                  h->rope_high_freq_factor < 1e6f,
              RLM_ERR_MODEL_HPARAMS, err, "llama3 rope scaling parameters inconsistent");
  }
  h->rope_theta_local = a->rope_theta_local() > 0.0f ? a->rope_theta_local() : h->rope_theta;
  RLM_CHECK(h->rope_theta_local < 1e12f, RLM_ERR_MODEL_HPARAMS, err, "rope_theta_local too large");
  h->qkv_bias = a->qkv_bias();
  h->qk_norm = a->qk_norm();
  h->post_norms = h->family == fb::Family::Gemma2 || h->family == fb::Family::Gemma3;
  // The converter bakes Gemma's (1 + w) into the stored norm weights; a file that asks the
  // reader to add an offset is from a writer this reader does not know.
  RLM_CHECK(a->norm_weight_offset() == 0.0f, RLM_ERR_MODEL_UNSUPPORTED, err,
            "norm_weight_offset %g: norm weights must be stored with the offset applied",
            (double)a->norm_weight_offset());
  h->embedding_scale = a->embedding_scale();
  RLM_CHECK(finite_nonneg(h->embedding_scale) && h->embedding_scale > 0.0f, RLM_ERR_MODEL_HPARAMS,
            err, "embedding_scale out of range");
  const float qpas = a->query_pre_attn_scalar();
  RLM_CHECK(finite_nonneg(qpas), RLM_ERR_MODEL_HPARAMS, err, "query_pre_attn_scalar out of range");
  h->attn_scale = 1.0f / sqrtf(qpas > 0.0f ? qpas : static_cast<float>(h->head_dim));
  h->attn_softcap = a->attn_logit_softcap();
  h->final_softcap = a->final_logit_softcap();
  RLM_CHECK(finite_nonneg(h->attn_softcap) && finite_nonneg(h->final_softcap),
            RLM_ERR_MODEL_HPARAMS, err, "soft-cap values out of range");
  h->sliding_window = a->sliding_window();
  h->layer_is_local = nullptr;
  h->has_local_layers = false;
  if (const auto* local = a->layer_is_local()) {
    RLM_CHECK(local->size() == 0 || local->size() == h->n_layers, RLM_ERR_MODEL_HPARAMS, err,
              "layer_is_local has %u entries for %u layers", local->size(), h->n_layers);
    if (local->size() == h->n_layers) {
      h->layer_is_local = reinterpret_cast<const uint8_t*>(local->data());
      for (uint32_t l = 0; l < h->n_layers; ++l) h->has_local_layers |= h->layer_is_local[l] != 0;
    }
  }
  if (h->has_local_layers) {
    RLM_CHECK(h->sliding_window >= 1 && h->sliding_window <= kMaxContext, RLM_ERR_MODEL_HPARAMS,
              err, "local layers need a sliding_window in [1, %u]", kMaxContext);
  }
  return RLM_OK;
}

// Checks one tensor descriptor in isolation: dtype, shape, size, alignment, bounds.
Status check_tensor(const fb::Tensor* t, uint32_t index, uint32_t version, uint64_t header_end,
                    uint64_t file_size, ErrorSink* err) {
  RLM_CHECK(t != nullptr, RLM_ERR_MODEL_CORRUPT, err, "tensor %u is null", index);
  const char* name = t->name() ? t->name()->c_str() : "?";
  RLM_CHECK(static_cast<uint32_t>(t->dtype()) <= static_cast<uint32_t>(fb::DType::MAX),
            RLM_ERR_MODEL_TENSOR, err, "tensor %u (%s): unknown dtype %u", index, name,
            (unsigned)t->dtype());
  RLM_CHECK(static_cast<uint32_t>(t->role()) <= static_cast<uint32_t>(TensorRole::MAX),
            RLM_ERR_MODEL_TENSOR, err, "tensor %u (%s): unknown role %u", index, name,
            (unsigned)t->role());
  const auto* shape = t->shape();
  RLM_CHECK(shape && (shape->size() == 1 || shape->size() == 2), RLM_ERR_MODEL_TENSOR, err,
            "tensor %u (%s): rank must be 1 or 2", index, name);
  // FlatBuffers' verifier aligns a vector's length word (4 bytes) but not its elements: a
  // crafted file can place the uint64 dims at an address that is 4- but not 8-aligned, and
  // reading them would be a misaligned load (UB; a fault on strict-alignment CPUs).
  RLM_CHECK(reinterpret_cast<uintptr_t>(shape->data()) % alignof(uint64_t) == 0,
            RLM_ERR_MODEL_CORRUPT, err, "tensor %u (%s): shape vector misaligned", index, name);
  const uint64_t rows = shape->size() == 2 ? shape->Get(0) : 1;
  const uint64_t cols = shape->Get(shape->size() - 1);
  RLM_CHECK(rows >= 1 && cols >= 1 && rows < (1ull << 32) && cols < (1ull << 32),
            RLM_ERR_MODEL_TENSOR, err, "tensor %u (%s): dimension out of range", index, name);
  const WeightType wt = static_cast<WeightType>(t->dtype());
  RLM_CHECK(wt != WeightType::Q4K || version >= 2, RLM_ERR_MODEL_TENSOR, err,
            "tensor %u (%s): dtype Q4K needs format version 2, the file says %u", index, name,
            version);
  RLM_CHECK(wt != WeightType::Q6K || version >= 3, RLM_ERR_MODEL_TENSOR, err,
            "tensor %u (%s): dtype Q6K needs format version 3, the file says %u", index, name,
            version);
  RLM_CHECK((wt != WeightType::Q5K && wt != WeightType::Q5) || version >= 4, RLM_ERR_MODEL_TENSOR,
            err, "tensor %u (%s): dtype %s needs format version 4, the file says %u", index, name,
            wt == WeightType::Q5 ? "Q5" : "Q5K", version);
  RLM_CHECK((wt != WeightType::Q4_1 && wt != WeightType::Q5_1) || version >= 5,
            RLM_ERR_MODEL_TENSOR, err,
            "tensor %u (%s): dtype %s needs format version 5, the file says %u", index, name,
            wt == WeightType::Q4_1 ? "Q4_1" : "Q5_1", version);
  if (is_quant(wt)) {
    RLM_CHECK(t->group_size() == kQuantGroup, RLM_ERR_MODEL_TENSOR, err,
              "tensor %u (%s): group_size %u, expected %u", index, name, t->group_size(),
              kQuantGroup);
  }
  const uint64_t expect = tensor_data_bytes(wt, rows, cols);
  RLM_CHECK(expect != 0 && t->size() == expect, RLM_ERR_MODEL_TENSOR, err,
            "tensor %u (%s): size %llu, shape and dtype need %llu", index, name,
            (unsigned long long)t->size(), (unsigned long long)expect);
  RLM_CHECK(t->offset() % kTensorAlignment == 0, RLM_ERR_MODEL_ALIGNMENT, err,
            "tensor %u (%s): offset %llu not %llu-byte aligned", index, name,
            (unsigned long long)t->offset(), (unsigned long long)kTensorAlignment);
  RLM_CHECK(t->offset() <= file_size && t->size() <= file_size - t->offset(),
            RLM_ERR_MODEL_BOUNDS, err,
            "tensor %u (%s): data [%llu, +%llu) outside the %llu-byte file", index, name,
            (unsigned long long)t->offset(), (unsigned long long)t->size(),
            (unsigned long long)file_size);
  RLM_CHECK(t->offset() >= header_end, RLM_ERR_MODEL_OVERLAP, err,
            "tensor %u (%s): data overlaps the header", index, name);
  return RLM_OK;
}

uint32_t count_tensor(const fb::Model* root, TensorRole role, int32_t layer) {
  uint32_t n = 0;
  for (const fb::Tensor* t : *root->tensors()) n += (t->role() == role && t->layer() == layer);
  return n;
}

Status check_expected(const ModelImpl& m, const ManifestEntry& e, ErrorSink* err) {
  const uint32_t n = count_tensor(m.root, e.role, e.layer);
  RLM_CHECK(n <= 1, RLM_ERR_MODEL_TENSOR, err, "tensor %s (layer %d) appears %u times",
            fb::EnumNameTensorRole(e.role), e.layer, n);
  if (n == 0) {
    RLM_CHECK(!e.required, RLM_ERR_MODEL_TENSOR, err, "tensor %s (layer %d) is missing",
              fb::EnumNameTensorRole(e.role), e.layer);
    return RLM_OK;
  }
  const fb::Tensor* t = model_find_tensor(m, e.role, e.layer);
  const auto* shape = t->shape();
  const bool ok = e.rows == 0
                      ? (shape->size() == 1 && shape->Get(0) == e.cols)
                      : (shape->size() == 2 && shape->Get(0) == e.rows && shape->Get(1) == e.cols);
  RLM_CHECK(ok, RLM_ERR_MODEL_TENSOR, err, "tensor %s (layer %d): shape does not match the hyperparameters",
            fb::EnumNameTensorRole(e.role), e.layer);
  if (e.rows == 0) {
    RLM_CHECK(t->dtype() == fb::DType::F32, RLM_ERR_MODEL_TENSOR, err,
              "vector tensor %s (layer %d) must be f32", fb::EnumNameTensorRole(e.role), e.layer);
  }
  return RLM_OK;
}

Status open_and_verify(const void* bytes, size_t size, ModelImpl* out, ErrorSink* err) {
  RLM_CHECK(bytes != nullptr, RLM_ERR_INVALID_ARGUMENT, err, "model bytes are null");
  RLM_CHECK(reinterpret_cast<uintptr_t>(bytes) % kTensorAlignment == 0, RLM_ERR_MODEL_ALIGNMENT,
            err, "model bytes must be %llu-byte aligned", (unsigned long long)kTensorAlignment);
  const uint8_t* p = static_cast<const uint8_t*>(bytes);
  // What kind of file this is comes first, each read inside `size`: a GGUF's magic read as a
  // size prefix would otherwise be reported as a truncated model ("header says 1179993927
  // bytes"). A ringlm file is a size-prefixed FlatBuffer: u32 size, u32 root offset, then the
  // identifier at bytes 8..11. Shorter files fall through to the truncation checks.
  RLM_CHECK(size < 4 || memcmp(p, "GGUF", 4) != 0, RLM_ERR_MODEL_IDENTIFIER, err,
            "this is a GGUF file, not a ringlm model: convert it with `ringlm convert`");
  RLM_CHECK(size < 12 || memcmp(p + 8, fb::ModelIdentifier(), 4) == 0, RLM_ERR_MODEL_IDENTIFIER,
            err,
            "not a ringlm model file (identifier \"%s\" missing at byte 8); llama2.c, GGUF and "
            "Hugging Face checkpoints are converted with `ringlm convert`",
            fb::ModelIdentifier());
  RLM_CHECK(size >= 8, RLM_ERR_MODEL_TRUNCATED, err, "file is %zu bytes, too short for a header",
            size);
  const uint64_t fb_size = flatbuffers::ReadScalar<uint32_t>(p);
  RLM_CHECK(fb_size + 4 <= size, RLM_ERR_MODEL_TRUNCATED, err,
            "header says %llu bytes of metadata, file has %zu", (unsigned long long)fb_size, size);
  RLM_CHECK(fb_size >= 8 && flatbuffers::BufferHasIdentifier(p, fb::ModelIdentifier(), true),
            RLM_ERR_MODEL_IDENTIFIER, err, "not a ringlm model (identifier is not \"%s\")",
            fb::ModelIdentifier());
  flatbuffers::Verifier verifier(p, static_cast<size_t>(fb_size + 4));
  RLM_CHECK(fb::VerifySizePrefixedModelBuffer(verifier), RLM_ERR_MODEL_CORRUPT, err,
            "model metadata failed FlatBuffer verification");
  const fb::Model* root = fb::GetSizePrefixedModel(p);
  const uint32_t version = root->format_version();
  RLM_CHECK(version >= 1 && version <= kFormatVersion, RLM_ERR_MODEL_VERSION, err,
            "format version %u, this library reads 1 to %u", version, kFormatVersion);

  out->bytes = p;
  out->size = size;
  Hparams& h = out->hp;
  RLM_RETURN_IF_ERROR(check_hparams(root->arch(), &h, err));
  RLM_CHECK(root->tensors() != nullptr && root->tensors()->size() > 0, RLM_ERR_MODEL_TENSOR, err,
            "model has no tensors");

  // Tensors are stored in increasing offset order (a format rule), so one pass proves that no
  // two overlap and that none overlaps the header.
  const uint64_t header_end = fb_size + 4;
  uint64_t prev_end = header_end;
  uint64_t total = 0;
  uint32_t index = 0;
  for (const fb::Tensor* t : *root->tensors()) {
    RLM_RETURN_IF_ERROR(check_tensor(t, index, version, header_end, size, err));
    RLM_CHECK(t->offset() >= prev_end, RLM_ERR_MODEL_OVERLAP, err,
              "tensor %u (%s): data overlaps the previous tensor", index,
              t->name() ? t->name()->c_str() : "?");
    RLM_CHECK(t->layer() >= -1 && t->layer() < static_cast<int32_t>(h.n_layers),
              RLM_ERR_MODEL_TENSOR, err, "tensor %u: layer %d out of range", index, t->layer());
    prev_end = t->offset() + t->size();
    total += t->size();
    ++index;
  }
  out->root = root;
  out->n_tensors = index;
  out->weight_bytes = total;

  // Every tensor the family needs, once, with the right shape; nothing it does not use.
  uint32_t expected = 0;
  const ManifestShape shape = manifest_shape(h);
  ManifestEntry entries[kManifestMaxLayer > kManifestMaxGlobal ? kManifestMaxLayer
                                                                : kManifestMaxGlobal];
  for (uint32_t g = 0; g <= h.n_layers; ++g) {  // the model-wide tensors, then layer g - 1
    const uint32_t n = g == 0 ? manifest_globals(shape, entries)
                              : manifest_layer(shape, g - 1, entries);
    for (uint32_t i = 0; i < n; ++i) {
      RLM_RETURN_IF_ERROR(check_expected(*out, entries[i], err));
      expected += count_tensor(root, entries[i].role, entries[i].layer);
    }
  }
  if (h.tied_embeddings) {
    RLM_CHECK(count_tensor(root, TensorRole::Output, -1) == 0, RLM_ERR_MODEL_TENSOR, err,
              "tied embeddings but an Output tensor is present");
  }
  RLM_CHECK(expected == out->n_tensors, RLM_ERR_MODEL_TENSOR, err,
            "model has %u tensors this family does not use", out->n_tensors - expected);

  // RoPE frequency factors divide the frequencies: they must be finite and positive.
  if (const fb::Tensor* rf = model_find_tensor(*out, TensorRole::RopeFreqs, -1)) {
    const uint8_t* d = p + rf->offset();
    for (uint32_t i = 0; i < h.head_dim / 2; ++i) {
      float f;
      memcpy(&f, d + 4 * i, 4);
      RLM_CHECK(f > 0.0f && f < 1e30f, RLM_ERR_MODEL_HPARAMS, err,
                "rope_freqs[%u] = %g is not a positive finite factor", i, (double)f);
    }
  }

  uint32_t longest_piece = 0;
  RLM_RETURN_IF_ERROR(verify_tokenizer(root->tokenizer(), h.vocab_size, err, &longest_piece));
  h.max_token_text = token_text_bytes(longest_piece);
  return RLM_OK;
}

}  // namespace

Status model_open(const void* bytes, size_t size, ModelImpl* out) {
  memset(out, 0, sizeof *out);
  ErrorSink es{out->error, sizeof out->error};
  const Status s = open_and_verify(bytes, size, out, &es);
  if (s != RLM_OK) {
    // The checks after the tensor pass need out->root set; a failed open must not leave it
    // (the C ABI treats a non-null root as "opened").
    out->root = nullptr;
    return s;
  }
  clear_error(&es);
  return RLM_OK;
}

const fb::Tensor* model_find_tensor(const ModelImpl& m, fb::TensorRole role, int32_t layer) {
  if (!m.root || !m.root->tensors()) return nullptr;
  for (const fb::Tensor* t : *m.root->tensors()) {
    if (t->role() == role && t->layer() == layer) return t;
  }
  return nullptr;
}

const fb::Tokenizer* model_tokenizer(const rlm_model* model, uint32_t* vocab_size) {
  const ModelImpl* m = model ? model_impl(model) : nullptr;
  const bool open = m && m->root;
  if (vocab_size) *vocab_size = open ? m->hp.vocab_size : 0;
  return open ? m->root->tokenizer() : nullptr;
}

bool model_is_end_token(const ModelImpl& m, int32_t token) {
  const fb::Tokenizer* tok = m.root->tokenizer();
  if (token >= 0 && token == tok->eos_id()) return true;
  if (const auto* ends = tok->end_ids()) {
    for (int32_t id : *ends) {
      if (id == token) return true;
    }
  }
  return false;
}

WeightView model_weight(const ModelImpl& m, const fb::Tensor* t) {
  WeightView v;
  if (!t) return v;
  const auto* shape = t->shape();
  v.type = static_cast<WeightType>(t->dtype());
  v.rows = shape->size() == 2 ? static_cast<uint32_t>(shape->Get(0)) : 1u;
  v.cols = static_cast<uint32_t>(shape->Get(shape->size() - 1));
  v.data = m.bytes + t->offset();
  if (is_quant(v.type)) {
    v.row_stride = static_cast<uint32_t>(padded_cols(v.cols));
    v.scales = reinterpret_cast<const uint16_t*>(
        m.bytes + t->offset() + quant_scales_offset(v.type, v.rows, v.cols));
    if (v.type == WeightType::Q4K) v.subs = m.bytes + t->offset() + q4k_subs_offset(v.rows, v.cols);
    if (v.type == WeightType::Q6K) {
      v.high = m.bytes + t->offset() + q6k_high_offset(v.rows, v.cols);
      v.subs = m.bytes + t->offset() + q6k_subs_offset(v.rows, v.cols);
    }
    if (v.type == WeightType::Q5K) {
      v.high = m.bytes + t->offset() + q5k_high_offset(v.rows, v.cols);
      v.subs = m.bytes + t->offset() + q5k_subs_offset(v.rows, v.cols);
    }
    if (v.type == WeightType::Q5 || v.type == WeightType::Q5_1) {
      v.high = m.bytes + t->offset() + q5k_high_offset(v.rows, v.cols);
    }
  } else {
    v.row_stride = v.cols;
  }
  return v;
}

}  // namespace ringlm::internal
