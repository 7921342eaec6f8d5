// Opening a model allocates nothing and copies nothing: every heap entry point is counted while
// model_open / rlm_model_open run (successful and failing opens), and every tensor view points
// into the caller's buffer.
//
// Counting: heap_counter.h (this binary interposes the C allocator and every operator new /
// delete; under ASan, the sanitizer's allocator hooks count).
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "convert/convert.h"
#include "gtest/gtest.h"
#include "heap_counter.h"
#include "model.h"
#include "ringlm/ringlm.h"
#include "testing.h"

namespace {

using namespace ringlm::internal;
using ringlm_test::AlignedBuffer;
using ringlm_test::count_heap;

conv::ModelData tiny_model(bool tied) {
  conv::ModelData md;
  const uint32_t D = 32, L = 2, H = 4, KV = 2, F = 40, V = 8;
  md.arch.n_layers = L;
  md.arch.dim = D;
  md.arch.n_heads = H;
  md.arch.n_kv_heads = KV;
  md.arch.head_dim = D / H;
  md.arch.ffn_dim = F;
  md.arch.vocab_size = V;
  md.arch.max_context = 32;
  md.arch.tied_embeddings = tied;
  md.tokenizer.pieces = {"<unk>", "<s>", "</s>", "a", "b", "ab", "\xE2\x96\x81", "\xE2\x96\x81" "a"};
  md.tokenizer.types.assign(V, fb::TokenType::Normal);
  md.tokenizer.scores.assign(V, 0.0f);
  md.tokenizer.merges = {{3, 4, 5}, {6, 3, 7}};
  md.tokenizer.bos_id = 1;
  md.tokenizer.eos_id = 2;
  md.tokenizer.end_ids = {2};
  uint32_t seed = 1;
  auto add = [&](fb::TensorRole role, int32_t layer, std::vector<uint64_t> shape) {
    conv::TensorData t;
    t.name = fb::EnumNameTensorRole(role);
    t.role = role;
    t.layer = layer;
    t.shape = shape;
    const uint32_t s = seed++;
    t.load_f32 = [shape, s](std::vector<float>* out, std::string*) {
      size_t n = 1;
      for (uint64_t d : shape) n *= d;
      std::mt19937 rng(s);
      std::uniform_real_distribution<float> u(-1, 1);
      out->resize(n);
      for (float& v : *out) v = u(rng);
      return true;
    };
    md.tensors.push_back(std::move(t));
  };
  using R = fb::TensorRole;
  add(R::TokenEmbedding, -1, {V, D});
  for (uint32_t l = 0; l < L; ++l) {
    const int32_t li = static_cast<int32_t>(l);
    add(R::AttnNorm, li, {D});
    add(R::Wq, li, {D, D});
    add(R::Wk, li, {KV * D / H, D});
    add(R::Wv, li, {KV * D / H, D});
    add(R::Wo, li, {D, D});
    add(R::FfnNorm, li, {D});
    add(R::FfnGate, li, {F, D});
    add(R::FfnDown, li, {D, F});
    add(R::FfnUp, li, {F, D});
  }
  add(R::OutputNorm, -1, {D});
  if (!tied) add(R::Output, -1, {V, D});
  return md;
}

// Models to open: synthetic ones in every dtype, plus real ones when ../shared has them.
std::vector<std::pair<std::string, std::vector<uint8_t>>> models() {
  std::vector<std::pair<std::string, std::vector<uint8_t>>> out;
  std::string err;
  for (fb::DType q : {fb::DType::F32, fb::DType::F16, fb::DType::Q8, fb::DType::Q4}) {
    for (bool tied : {false, true}) {
      std::vector<uint8_t> bytes;
      EXPECT_TRUE(conv::build_model_bytes(tiny_model(tied), q, &bytes, &err)) << err;
      out.emplace_back(std::string("tiny-") + conv::dtype_name(q) + (tied ? "-tied" : ""), bytes);
    }
  }
  struct Real {
    const char* src;
    const char* tok;
    fb::DType q;
  };
  const Real reals[] = {
      {"models/stories260K/stories260K.bin", "models/stories260K/tok512.bin", fb::DType::Q8},
      {"models/tinystories-656k/TinyStories-656K-Q8_0.gguf", "", fb::DType::Q4},
      {"models/tinystories-656k", "", fb::DType::F32}};
  for (const Real& r : reals) {
    conv::ConvertOptions o;
    o.source = ringlm_test::shared_path(r.src);
    o.tokenizer = r.tok[0] ? ringlm_test::shared_path(r.tok) : "";
    if (o.source.empty() || (r.tok[0] && o.tokenizer.empty())) continue;
    conv::ModelData md;
    std::vector<uint8_t> bytes;
    if (conv::load_source(o, &md, &err) && conv::build_model_bytes(md, r.q, &bytes, &err))
      out.emplace_back(r.src, bytes);
    else
      ADD_FAILURE() << r.src << ": " << err;
  }
  return out;
}

TEST(ModelOpenNoAlloc, CounterSeesAllocations) {
  if (!ringlm_test::kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  // The hooks are live: a malloc and an operator new inside the window are counted.
  void* (*volatile m)(size_t) = malloc;
  void (*volatile f)(void*) = free;
  void* (*volatile nw)(size_t) = &::operator new;
  void (*volatile dl)(void*) = &::operator delete;
  auto c = count_heap([&] {
    void* p = m(24);
    f(p);
    void* q = nw(40);
    dl(q);
  });
  EXPECT_EQ(c.allocs, 2);
  EXPECT_EQ(c.frees, 2);
}

TEST(ModelOpenNoAlloc, OpenAllocatesNothingAndPointsIntoTheBuffer) {
  if (!ringlm_test::kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  for (const auto& mb : models()) {
    SCOPED_TRACE(mb.first);
    AlignedBuffer buf;
    buf.assign(mb.second.data(), mb.second.size());
    std::unique_ptr<ModelImpl> impl(new ModelImpl());
    std::unique_ptr<rlm_model> cm(new rlm_model());
    Status s1 = RLM_ERR_INTERNAL, s2 = RLM_ERR_INTERNAL, s3 = RLM_ERR_INTERNAL;
    rlm_model_info info;
    rlm_model_info_default(&info);
    auto c = count_heap([&] {
      s1 = model_open(buf.data(), buf.size(), impl.get());
      s2 = rlm_model_open(buf.data(), buf.size(), cm.get());
      s3 = rlm_model_get_info(cm.get(), &info);
    });
    ASSERT_EQ(s1, RLM_OK) << impl->error;
    ASSERT_EQ(s2, RLM_OK) << rlm_model_error(cm.get());
    ASSERT_EQ(s3, RLM_OK);
    EXPECT_EQ(c.allocs, 0) << "heap allocations during model open";
    EXPECT_EQ(c.frees, 0) << "heap frees during model open";

    // Views borrow the caller's bytes: data and scales lie inside [buf, buf + size).
    const uint8_t* lo = buf.data();
    const uint8_t* hi = buf.data() + buf.size();
    EXPECT_EQ(impl->bytes, lo);
    EXPECT_GE(reinterpret_cast<const uint8_t*>(impl->root), lo);
    EXPECT_LT(reinterpret_cast<const uint8_t*>(impl->root), hi);
    uint32_t n = 0;
    auto c2 = count_heap([&] {
      for (const fb::Tensor* t : *impl->root->tensors()) {
        const WeightView v = model_weight(*impl, t);
        const uint8_t* d = static_cast<const uint8_t*>(v.data);
        EXPECT_GE(d, lo);
        EXPECT_LE(d + t->size(), hi);
        EXPECT_EQ(reinterpret_cast<uintptr_t>(d) % 64, 0u);
        if (v.scales) {
          const uint8_t* sc = reinterpret_cast<const uint8_t*>(v.scales);
          EXPECT_GT(sc, d);
          EXPECT_LE(sc + static_cast<size_t>(v.rows) * (v.row_stride / 32) * 2, d + t->size());
        }
        const WeightView by_role = model_weight(*impl, t->role(), t->layer());
        EXPECT_EQ(by_role.data, v.data);
        ++n;
      }
    });
    EXPECT_EQ(n, impl->n_tensors);
    EXPECT_EQ(c2.allocs, 0) << "heap allocations while viewing tensors";
  }
}

TEST(ModelOpenNoAlloc, FailedOpensAllocateNothing) {
  if (!ringlm_test::kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  std::string err;
  std::vector<uint8_t> good;
  ASSERT_TRUE(conv::build_model_bytes(tiny_model(false), fb::DType::Q8, &good, &err)) << err;
  std::mt19937 rng(11);
  AlignedBuffer buf;
  std::unique_ptr<ModelImpl> impl(new ModelImpl());
  long allocs = 0;
  int refused = 0;
  const uint64_t header_end = flatbuffers::ReadScalar<uint32_t>(good.data()) + 4ull;
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<uint8_t> f = good;
    size_t size = f.size();
    if (trial % 3 == 0) size = rng() % f.size();                      // truncated
    else f[rng() % header_end] ^= static_cast<uint8_t>(1 + rng() % 255);  // corrupted
    buf.assign(f.data(), size);
    Status s = RLM_OK;
    allocs += count_heap([&] { s = model_open(buf.data(), size, impl.get()); }).allocs;
    refused += s != RLM_OK;
  }
  EXPECT_EQ(allocs, 0);
  EXPECT_GT(refused, 100);
}

}  // namespace
