// The tensor manifest (runtime/tensor_manifest.h): the one list of a model's tensors, used by
// model_open's verifier and by the converter (convert/families.cc family_tensor_specs).
#include "tensor_manifest.h"

#include <set>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

#include "convert/families.h"

namespace ringlm::internal {
namespace {

using R = fb::TensorRole;

ManifestShape shape(bool bias, bool qk, bool post, bool tied) {
  return ManifestShape{3, 64, 96, 32, 16, 172, 512, bias, qk, post, tied};
}

TEST(TensorManifest, LayerEntriesFollowTheFlags) {
  for (int bits = 0; bits < 16; ++bits) {
    const bool bias = bits & 1, qk = bits & 2, post = bits & 4, tied = bits & 8;
    const ManifestShape s = shape(bias, qk, post, tied);
    ManifestEntry e[kManifestMaxLayer];
    const uint32_t n = manifest_layer(s, 2, e);
    EXPECT_EQ(n, 9u + (bias ? 3 : 0) + (qk ? 2 : 0) + (post ? 2 : 0));
    ASSERT_LE(n, kManifestMaxLayer);
    std::set<int> roles;
    for (uint32_t i = 0; i < n; ++i) {
      EXPECT_EQ(e[i].layer, 2);
      EXPECT_TRUE(e[i].required);
      EXPECT_TRUE(roles.insert(static_cast<int>(e[i].role)).second) << "duplicate role";
      // Norms are vectors; matrices are (out, in).
      if (e[i].norm) EXPECT_EQ(e[i].rows, 0u);
    }
    // Shapes from the hyperparameters: wq (q_dim, dim), wo (dim, q_dim), down (dim, ffn).
    using Dims = std::pair<uint64_t, uint64_t>;
    for (uint32_t i = 0; i < n; ++i) {
      const Dims d{e[i].rows, e[i].cols};
      if (e[i].role == R::Wq) EXPECT_EQ(d, Dims(96, 64));
      if (e[i].role == R::Wo) EXPECT_EQ(d, Dims(64, 96));
      if (e[i].role == R::FfnDown) EXPECT_EQ(d, Dims(64, 172));
      if (e[i].role == R::QNorm) EXPECT_EQ(e[i].cols, 16u);
      if (e[i].role == R::Bk) EXPECT_EQ(e[i].cols, 32u);
    }
    ManifestEntry g[kManifestMaxGlobal];
    const uint32_t ng = manifest_globals(s, g);
    EXPECT_EQ(ng, tied ? 3u : 4u);
    EXPECT_EQ(g[0].role, R::TokenEmbedding);
    EXPECT_EQ(g[ng - 1].role, R::RopeFreqs);
    EXPECT_FALSE(g[ng - 1].required);
  }
}

// The converter writes exactly the manifest's required tensors (embedding first, the layers in
// forward order, then the final norm and output), with the same shapes.
TEST(TensorManifest, ConverterSpecsAreTheManifest) {
  conv::ModelData::Arch a;
  a.family = fb::Family::Gemma2;  // post-norms
  a.n_layers = 2;
  a.dim = 64;
  a.n_heads = 4;
  a.n_kv_heads = 2;
  a.head_dim = 16;
  a.ffn_dim = 128;
  a.vocab_size = 300;
  a.qk_norm = true;
  a.tied_embeddings = true;
  const std::vector<conv::TensorSpec> specs = conv::family_tensor_specs(a);
  const ManifestShape s{2, 64, 64, 32, 16, 128, 300, false, true, true, true};
  std::vector<std::pair<int, int32_t>> want;
  ManifestEntry e[kManifestMaxLayer];
  manifest_globals(s, e);
  want.push_back({static_cast<int>(e[0].role), e[0].layer});
  for (uint32_t l = 0; l < 2; ++l) {
    const uint32_t n = manifest_layer(s, l, e);
    for (uint32_t i = 0; i < n; ++i) want.push_back({static_cast<int>(e[i].role), e[i].layer});
  }
  want.push_back({static_cast<int>(R::OutputNorm), -1});
  ASSERT_EQ(specs.size(), want.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    EXPECT_EQ(std::make_pair(static_cast<int>(specs[i].role), specs[i].layer), want[i]) << i;
  }
}

}  // namespace
}  // namespace ringlm::internal
