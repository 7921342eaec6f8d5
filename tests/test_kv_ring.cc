// Unit tests for the KV ring's slot arithmetic and layout (runtime/kv_ring.h): which slot holds a
// position, how many slots a query sees, when the ring has wrapped, and per-layer offsets for
// mixed global / sliding-window layers.
#include "kv_ring.h"

#include <stdint.h>

#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace ringlm::internal {
namespace {

TEST(KvRing, SinksStayAndWindowWraps) {
  const KvGeom g{8, 2, 6};
  for (uint64_t p = 0; p < 2; ++p) EXPECT_EQ(kv_slot(g, p), p);
  EXPECT_EQ(kv_slot(g, 2), 2u);
  EXPECT_EQ(kv_slot(g, 7), 7u);
  EXPECT_EQ(kv_slot(g, 8), 2u);   // overwrites position 2 (= 8 - window)
  EXPECT_EQ(kv_slot(g, 13), 7u);
  EXPECT_EQ(kv_slot(g, 14), 2u);
  // A position far past 2^32 still maps into the window (64-bit positions).
  const uint64_t far = (uint64_t{1} << 40) + 5;
  EXPECT_EQ(kv_slot(g, far), 2u + static_cast<uint32_t>((far - 2) % 6));
}

TEST(KvRing, LastWindowPositionsOccupyDistinctSlots) {
  const KvGeom g{16, 4, 12};
  for (uint64_t end = 16; end < 200; end += 7) {
    std::set<uint32_t> slots;
    for (uint64_t p = 0; p < g.n_sink; ++p) slots.insert(kv_slot(g, p));
    for (uint64_t p = end - g.window; p < end; ++p) slots.insert(kv_slot(g, p));
    EXPECT_EQ(slots.size(), g.n_ctx) << "end " << end;  // sinks + last window fill every slot
    EXPECT_LT(*slots.rbegin(), g.n_ctx);
  }
}

TEST(KvRing, VisibleGrowsThenSaturates) {
  const KvGeom g{8, 2, 6};
  EXPECT_EQ(kv_visible(g, 0), 1u);
  EXPECT_EQ(kv_visible(g, 6), 7u);
  EXPECT_EQ(kv_visible(g, 7), 8u);
  EXPECT_EQ(kv_visible(g, 8), 8u);
  EXPECT_EQ(kv_visible(g, uint64_t{1} << 50), 8u);
}

TEST(KvRing, NoSinksIsAPlainRing) {
  const KvGeom g{5, 0, 5};
  for (uint64_t p = 0; p < 30; ++p) EXPECT_EQ(kv_slot(g, p), p % 5);
}

TEST(KvRing, LayoutOffsetsAndWrapPerLayerKind) {
  // Layers 1 and 3 are sliding-window layers with 4 slots; the others are global with 10.
  const uint8_t local[4] = {0, 1, 0, 1};
  const uint32_t kv_dim = 3;
  Arena measure(nullptr, 0);
  KvRing m{};
  kv_ring_layout(measure, 4, local, 10, 2, 4, kv_dim, RLM_KV_F16, 0, &m);
  ASSERT_TRUE(measure.ok());
  std::vector<uint64_t> storage(measure.used() / 8 + 16);
  uint8_t* base = reinterpret_cast<uint8_t*>(storage.data());
  base += (kArenaAlignment - reinterpret_cast<uintptr_t>(base) % kArenaAlignment) % kArenaAlignment;
  Arena carve(base, measure.used());
  KvRing r{};
  kv_ring_layout(carve, 4, local, 10, 2, 4, kv_dim, RLM_KV_F16, 0, &r);
  ASSERT_TRUE(carve.ok());
  EXPECT_EQ(carve.used(), measure.used());
  EXPECT_EQ(r.geom[kKvGlobal].window, 8u);
  EXPECT_EQ(r.geom[kKvLocal].n_sink, 0u);
  EXPECT_EQ(r.geom[kKvLocal].n_ctx, 4u);
  const uint64_t expect_off[4] = {0, 10 * kv_dim, 14 * kv_dim, 24 * kv_dim};
  for (uint32_t l = 0; l < 4; ++l) {
    EXPECT_EQ(r.layer_kind[l], local[l] ? kKvLocal : kKvGlobal);
    EXPECT_EQ(r.layer_off[l], expect_off[l]) << "layer " << l;
  }
  // K and V each hold 28 slots of kv_dim f16 values, disjoint.
  EXPECT_GE(static_cast<uint8_t*>(r.v), static_cast<uint8_t*>(r.k) + 28 * kv_dim * 2);
  // The local ring (4 slots) wraps first.
  EXPECT_FALSE(kv_wrapped(r, 4));
  EXPECT_TRUE(kv_wrapped(r, 5));
  // Without local layers only the global ring counts.
  Arena m2(nullptr, 0);
  KvRing g{};
  uint8_t kinds[2];
  uint64_t offs[2];
  kv_ring_layout(m2, 2, nullptr, 10, 2, 4, kv_dim, RLM_KV_F32, 0, &g);
  g.layer_kind = kinds;
  g.layer_off = offs;
  kinds[0] = kinds[1] = kKvGlobal;
  EXPECT_FALSE(kv_wrapped(g, 10));
  EXPECT_TRUE(kv_wrapped(g, 11));
}

}  // namespace
}  // namespace ringlm::internal
