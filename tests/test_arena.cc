// Unit tests for the bump allocator behind the one layout function (runtime/arena.h): measure mode
// and carve mode must agree byte for byte, alignment holds, and overflow fails cleanly.
#include "arena.h"

#include <stdint.h>

#include <vector>

#include <gtest/gtest.h>

namespace ringlm::internal {
namespace {

// A layout of mixed element sizes and alignments, the shape of a session's carve.
void layout(Arena& a, uint8_t** p0, float** p1, uint64_t** p2, void** p3) {
  *p0 = a.alloc<uint8_t>(3, 1);
  *p1 = a.alloc<float>(17);
  *p2 = a.alloc<uint64_t>(5, 8);
  *p3 = a.alloc_2d(7, 9, 2, kArenaAlignment);
}

// `bytes` of kArenaAlignment-aligned memory inside *storage.
uint8_t* aligned_block(size_t bytes, std::vector<uint64_t>* storage) {
  storage->assign(bytes / 8 + kArenaAlignment / 8 + 1, 0);
  uint8_t* base = reinterpret_cast<uint8_t*>(storage->data());
  return base + (kArenaAlignment - reinterpret_cast<uintptr_t>(base) % kArenaAlignment) %
                    kArenaAlignment;
}

TEST(Arena, MeasureEqualsCarve) {
  Arena measure(nullptr, 0);
  uint8_t* p0;
  float* p1;
  uint64_t* p2;
  void* p3;
  layout(measure, &p0, &p1, &p2, &p3);
  EXPECT_TRUE(measure.measuring());
  EXPECT_TRUE(measure.ok());
  EXPECT_EQ(p0, nullptr);
  EXPECT_EQ(p3, nullptr);
  const size_t need = measure.used();
  EXPECT_GT(need, 3u + 17 * 4 + 5 * 8 + 7 * 9 * 2 - 1);

  std::vector<uint64_t> storage;
  uint8_t* base = aligned_block(need, &storage);
  Arena carve(base, need);
  layout(carve, &p0, &p1, &p2, &p3);
  EXPECT_TRUE(carve.ok());
  EXPECT_FALSE(carve.measuring());
  EXPECT_EQ(carve.used(), need);
  ASSERT_NE(p0, nullptr);
  ASSERT_NE(p3, nullptr);
  EXPECT_EQ(p0, base);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p1) % kArenaAlignment, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p2) % 8, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p3) % kArenaAlignment, 0u);
  // Regions are disjoint and in order.
  EXPECT_GE(reinterpret_cast<uint8_t*>(p1), p0 + 3);
  EXPECT_GE(reinterpret_cast<uint8_t*>(p2), reinterpret_cast<uint8_t*>(p1 + 17));
  EXPECT_GE(static_cast<uint8_t*>(p3), reinterpret_cast<uint8_t*>(p2 + 5));
  EXPECT_LE(static_cast<uint8_t*>(p3) + 7 * 9 * 2, base + need);
}

TEST(Arena, OneByteShortFailsWithoutWritingPastTheEnd) {
  Arena measure(nullptr, 0);
  uint8_t* p0;
  float* p1;
  uint64_t* p2;
  void* p3;
  layout(measure, &p0, &p1, &p2, &p3);
  const size_t need = measure.used();
  std::vector<uint64_t> storage;
  uint8_t* base = aligned_block(need, &storage);
  Arena carve(base, need - 1);
  layout(carve, &p0, &p1, &p2, &p3);
  EXPECT_FALSE(carve.ok());
  EXPECT_FALSE(carve.overflowed());  // too small is not a size_t overflow
  EXPECT_EQ(p3, nullptr);            // the reservation that does not fit is refused
  EXPECT_NE(p2, nullptr);            // the ones before it still fit
}

TEST(Arena, SizeOverflowIsCleanFailure) {
  Arena a(nullptr, 0);
  EXPECT_EQ(a.alloc<uint64_t>(SIZE_MAX / 4), nullptr);
  EXPECT_TRUE(a.overflowed());
  EXPECT_FALSE(a.ok());

  Arena b(nullptr, 0);
  EXPECT_EQ(b.alloc_2d(UINT64_MAX / 2, 3, 1, 1), nullptr);
  EXPECT_TRUE(b.overflowed());

  Arena c(nullptr, 0);
  c.alloc_bytes(SIZE_MAX - 10, 1, 1);
  EXPECT_FALSE(c.overflowed());
  c.alloc_bytes(1, 1, kArenaAlignment);  // rounding the start up wraps
  EXPECT_TRUE(c.overflowed());
}

TEST(Arena, ZeroCountReservesNothingButAligns) {
  Arena a(nullptr, 0);
  a.alloc<uint8_t>(1, 1);
  EXPECT_EQ(a.used(), 1u);
  a.alloc<float>(0);
  EXPECT_EQ(a.used(), kArenaAlignment);
  EXPECT_TRUE(a.ok());
}

}  // namespace
}  // namespace ringlm::internal
