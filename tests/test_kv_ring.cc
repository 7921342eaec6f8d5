// Unit tests for the KV ring's slot arithmetic and layout (runtime/kv_ring.h): which slot holds a
// position, how many slots a query sees, when the ring has wrapped, per-layer offsets for
// mixed global / sliding-window layers, and the rows of each dtype (q8 quantization).
#include "kv_ring.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

#include <algorithm>
#include <random>
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
  kv_ring_layout(measure, 4, local, 10, 2, 4, kv_dim, kv_dim, RLM_KV_F16, 0, &m);
  ASSERT_TRUE(measure.ok());
  std::vector<uint64_t> storage(measure.used() / 8 + 16);
  uint8_t* base = reinterpret_cast<uint8_t*>(storage.data());
  base += (kArenaAlignment - reinterpret_cast<uintptr_t>(base) % kArenaAlignment) % kArenaAlignment;
  Arena carve(base, measure.used());
  KvRing r{};
  kv_ring_layout(carve, 4, local, 10, 2, 4, kv_dim, kv_dim, RLM_KV_F16, 0, &r);
  ASSERT_TRUE(carve.ok());
  EXPECT_EQ(carve.used(), measure.used());
  EXPECT_EQ(r.geom[kKvGlobal].window, 8u);
  EXPECT_EQ(r.geom[kKvLocal].n_sink, 0u);
  EXPECT_EQ(r.geom[kKvLocal].n_ctx, 4u);
  EXPECT_EQ(r.row_bytes, kv_dim * 2u);
  // Each layer's slots rounded up to whole key tiles (10 and 4 slots take 16 rows each).
  const uint64_t expect_off[4] = {0, 16 * r.row_bytes, 32 * r.row_bytes, 48 * r.row_bytes};
  for (uint32_t l = 0; l < 4; ++l) {
    EXPECT_EQ(r.layer_kind[l], local[l] ? kKvLocal : kKvGlobal);
    EXPECT_EQ(r.layer_off[l], expect_off[l]) << "layer " << l;
  }
  // K and V each hold 64 slots of kv_dim f16 values, disjoint.
  EXPECT_GE(static_cast<uint8_t*>(r.v), static_cast<uint8_t*>(r.k) + 64 * kv_dim * 2);
  // The local ring (4 slots) wraps first.
  EXPECT_FALSE(kv_wrapped(r, 4));
  EXPECT_TRUE(kv_wrapped(r, 5));
  // Without local layers only the global ring counts.
  Arena m2(nullptr, 0);
  KvRing g{};
  uint8_t kinds[2];
  uint64_t offs[2];
  kv_ring_layout(m2, 2, nullptr, 10, 2, 4, kv_dim, kv_dim, RLM_KV_F32, 0, &g);
  g.layer_kind = kinds;
  g.layer_off = offs;
  kinds[0] = kinds[1] = kKvGlobal;
  EXPECT_FALSE(kv_wrapped(g, 10));
  EXPECT_TRUE(kv_wrapped(g, 11));
}

TEST(KvRing, RowBytesPerDtype) {
  // SmolLM2-135M: 3 KV heads of 64.
  EXPECT_EQ(kv_row_bytes(RLM_KV_F32, 192, 64), 768u);
  EXPECT_EQ(kv_row_bytes(RLM_KV_F16, 192, 64), 384u);
  EXPECT_EQ(kv_row_bytes(RLM_KV_Q8, 192, 64), 192u + 3 * 4);
  // Values padded to 4 bytes so the scales stay aligned: 2 heads of 7 -> 14 + 2 pad + 2 scales.
  EXPECT_EQ(kv_row_bytes(RLM_KV_Q8, 14, 7), 16u + 8);
  EXPECT_EQ(kv_scale_offset(14, 1), 20u);
  EXPECT_EQ(kv_head_offset(RLM_KV_Q8, 1, 7), 7u);
  EXPECT_EQ(kv_head_offset(RLM_KV_F16, 1, 7), 14u);
}

TEST(KvRing, Q8RowsRoundTripWithinHalfAStep) {
  std::mt19937 rng(5);
  std::normal_distribution<float> nd(0.0f, 3.0f);
  const uint32_t hd = 7, heads = 3, kv_dim = hd * heads;
  std::vector<float> x(kv_dim), y(kv_dim);
  for (int round = 0; round < 50; ++round) {
    for (float& v : x) v = nd(rng);
    if (round == 1) std::fill(x.begin(), x.begin() + hd, 0.0f);  // an all-zero head
    std::vector<uint8_t> row(kv_row_bytes(RLM_KV_Q8, kv_dim, hd), 0xee);
    kv_encode_row(nullptr, RLM_KV_Q8, kv_dim, hd, x.data(), row.data());
    // Padding bytes are written (a snapshot of the row holds defined bytes).
    for (uint32_t i = kv_dim; i < kv_scale_offset(kv_dim, 0); ++i) EXPECT_EQ(row[i], 0u);
    kv_decode_row(RLM_KV_Q8, kv_dim, hd, row.data(), y.data());
    for (uint32_t h = 0; h < heads; ++h) {
      float amax = 0;
      for (uint32_t i = 0; i < hd; ++i) amax = std::max(amax, fabsf(x[h * hd + i]));
      float scale;
      memcpy(&scale, row.data() + kv_scale_offset(kv_dim, h), 4);
      EXPECT_FLOAT_EQ(scale, amax / 127.0f);
      for (uint32_t i = 0; i < hd; ++i) {
        EXPECT_LE(fabsf(y[h * hd + i] - x[h * hd + i]), 0.5f * scale * 1.0001f + 1e-30f);
        // The largest magnitude of each head is exact up to float rounding (code +-127).
        if (fabsf(x[h * hd + i]) == amax && amax > 0) EXPECT_NEAR(y[h * hd + i], x[h * hd + i], amax * 1e-6f);
      }
    }
  }
}

TEST(KvRing, Q8NonFiniteHeadStoresZeros) {
  const uint32_t hd = 4, kv_dim = 8;
  const float x[8] = {1.0f, NAN, 2.0f, 3.0f, 0.5f, -0.25f, 0.125f, 1.0f};
  std::vector<uint8_t> row(kv_row_bytes(RLM_KV_Q8, kv_dim, hd));
  kv_encode_row(nullptr, RLM_KV_Q8, kv_dim, hd, x, row.data());
  float y[8];
  kv_decode_row(RLM_KV_Q8, kv_dim, hd, row.data(), y);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_NEAR(y[i], x[i], 0.5f / 127);
  const float inf[8] = {INFINITY, 0, 0, 0, 1, 1, 1, 1};
  kv_encode_row(nullptr, RLM_KV_Q8, kv_dim, hd, inf, row.data());
  kv_decode_row(RLM_KV_Q8, kv_dim, hd, row.data(), y);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(y[i], 0.0f);
  for (int i = 4; i < 8; ++i) EXPECT_EQ(y[i], 1.0f);
}

// Tiled planes (f32 / f16): a stored slot reads back as the row kv_encode_row gives, column c of
// slot s sits where the kernels look for it (keys: attn_dot_tiled; values: a head's 16 rows
// head_dim apart), and the reference kernels over the tiles equal the row kernels over the same
// rows (keys: the sums in another order, 1e-6 relative; values: the same chains, bit for bit).
TEST(KvRing, TiledPlanesRoundTripAndKernels) {
  const uint32_t kv_dim = 12, hd = 4, slots = 37;
  for (KvPlane plane : {kKvKeys, kKvValues}) {
    for (rlm_kv_dtype dt : {RLM_KV_F32, RLM_KV_F16, RLM_KV_Q8}) {
      SCOPED_TRACE(testing::Message() << "plane " << int{plane} << " dtype " << dt);
      const size_t row = kv_row_bytes(dt, kv_dim, hd);
      std::vector<uint8_t> seq(kv_slots_stored(slots) * row, 0xcd), rows(slots * row);
      std::vector<float> x(kv_dim);
      for (uint32_t s = 0; s < slots; ++s) {
        for (uint32_t c = 0; c < kv_dim; ++c) {
          x[c] = 0.01f * static_cast<float>((s * 7 + c * 3) % 23) - 0.1f;
        }
        kv_store_slot(nullptr, plane, dt, kv_dim, hd, x.data(), seq.data(), s);
        kv_encode_row(nullptr, dt, kv_dim, hd, x.data(), rows.data() + s * row);
      }
      std::vector<uint8_t> got(row);
      for (uint32_t s = 0; s < slots; ++s) {
        kv_slot_get(plane, dt, kv_dim, hd, seq.data(), s, got.data());
        ASSERT_EQ(0, memcmp(got.data(), rows.data() + s * row, row)) << "slot " << s;
      }
      // put then get at another slot; move by a delta lands on the same slot of the other copy.
      kv_slot_put(plane, dt, kv_dim, hd, seq.data(), 3, rows.data() + 30 * row);
      kv_slot_get(plane, dt, kv_dim, hd, seq.data(), 3, got.data());
      EXPECT_EQ(0, memcmp(got.data(), rows.data() + 30 * row, row));
      std::vector<uint8_t> twin(seq.size() * 2, 0);
      memcpy(twin.data(), seq.data(), seq.size());
      kv_slot_move(plane, dt, kv_dim, hd, twin.data(), 5, static_cast<ptrdiff_t>(seq.size()));
      kv_slot_get(plane, dt, kv_dim, hd, twin.data() + seq.size(), 5, got.data());
      EXPECT_EQ(0, memcmp(got.data(), rows.data() + 5 * row, row));
      if (!kv_tiled(dt)) continue;
      kv_slot_put(plane, dt, kv_dim, hd, seq.data(), 3, rows.data() + 3 * row);
      const size_t elem = dt == RLM_KV_F16 ? 2 : 4;
      const KernelTable* ref = kernels_ref();
      // Slot 20, column 5 (head 1, i 1): tile 1.
      const size_t at = plane == kKvKeys ? 16 * kv_dim + 5 * 16 + 4 : 16 * kv_dim + (1 * 16 + 4) * hd + 1;
      EXPECT_EQ(0, memcmp(seq.data() + at * elem, rows.data() + 20 * row + 5 * elem, elem));
      std::vector<float> q(hd);
      for (uint32_t i = 0; i < hd; ++i) q[i] = 0.3f * static_cast<float>(i) - 0.4f;
      for (uint32_t h = 0; h < kv_dim / hd; ++h) {
        if (plane == kKvKeys) {
          std::vector<float> tiled(slots, -7.0f), by_row(slots);
          // Slots [2, 33) only: the others keep their -7.
          ref->attn_dot_tiled(q.data(), 1, seq.data() + h * hd * kAttnTile * elem,
                              kAttnTile * kv_dim, 2, 33, hd, dt == RLM_KV_F16, 0.5f, tiled.data(), 0);
          ref->attn_dot(q.data(), rows.data() + h * hd * elem, kv_dim, slots, hd,
                        dt == RLM_KV_F16, 0.5f, by_row.data());
          for (uint32_t s = 0; s < slots; ++s) {
            if (s < 2 || s >= 33) {
              EXPECT_EQ(tiled[s], -7.0f) << s;
            } else {
              EXPECT_NEAR(tiled[s], by_row[s], 1e-6f * (1.0f + fabsf(by_row[s])))
                  << "head " << h << " slot " << s;
            }
          }
        } else {
          // Tile by tile, head h's rows head_dim apart: the row walk's chains, bit for bit.
          std::vector<float> w(slots), tiled(hd, 0.25f), by_row(hd, 0.25f);
          for (uint32_t s = 0; s < slots; ++s) w[s] = 0.05f * static_cast<float>(s % 9);
          for (uint32_t t = 0; t * kAttnTile < slots; ++t) {
            const uint32_t n = slots - t * kAttnTile < kAttnTile ? slots - t * kAttnTile : kAttnTile;
            ref->attn_accum(w.data() + t * kAttnTile,
                            seq.data() + (t * kAttnTile * kv_dim + h * hd * kAttnTile) * elem, hd, n,
                            hd, dt == RLM_KV_F16, tiled.data());
          }
          ref->attn_accum(w.data(), rows.data() + h * hd * elem, kv_dim, slots, hd,
                          dt == RLM_KV_F16, by_row.data());
          EXPECT_EQ(0, memcmp(tiled.data(), by_row.data(), hd * sizeof(float))) << "head " << h;
        }
      }
    }
  }
}

}  // namespace
}  // namespace ringlm::internal

