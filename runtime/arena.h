// Bump allocator over caller memory.
//
// One Arena type serves both the size query and init (TFLM-style "one layout function"): with
// base == nullptr it only measures, so the layout code runs once for each and cannot drift.
// Offsets are computed from the base address's alignment as the session requires it
// (kArenaAlignment); the caller must pass memory aligned to that, which init checks.
#ifndef RINGLM_RUNTIME_ARENA_H_
#define RINGLM_RUNTIME_ARENA_H_

#include <stddef.h>
#include <stdint.h>

namespace ringlm::internal {

constexpr size_t kArenaAlignment = 64;

class Arena {
 public:
  // base may be null (measure mode). cap is ignored in measure mode.
  Arena(void* base, size_t cap) : base_(static_cast<uint8_t*>(base)), cap_(cap) {}

  // Reserves count * sizeof(T) bytes aligned to `align` (power of two, <= kArenaAlignment).
  // Returns null in measure mode or when the block overflows (then ok() is false).
  template <typename T>
  T* alloc(size_t count, size_t align = kArenaAlignment) {
    return static_cast<T*>(alloc_bytes(count, sizeof(T), align));
  }

  void* alloc_bytes(size_t count, size_t elem_size, size_t align) {
    size_t start = (used_ + (align - 1)) & ~(align - 1);
    if (start < used_ || (elem_size != 0 && count > (SIZE_MAX - start) / elem_size)) {
      overflow_ = true;
      return nullptr;
    }
    size_t end = start + count * elem_size;
    used_ = end;
    if (!base_ || end > cap_) return nullptr;
    return base_ + start;
  }

  // Reserves count_a * count_b elements, failing cleanly when the product overflows size_t
  // (hostile or huge configurations on 32-bit targets).
  void* alloc_2d(uint64_t count_a, uint64_t count_b, size_t elem_size, size_t align) {
    if (count_b != 0 && count_a > SIZE_MAX / count_b) {
      overflow_ = true;
      return nullptr;
    }
    return alloc_bytes(static_cast<size_t>(count_a * count_b), elem_size, align);
  }

  size_t used() const { return used_; }
  bool measuring() const { return base_ == nullptr; }
  // True when every reservation so far fits (always true in measure mode unless size_t wrapped).
  bool ok() const { return !overflow_ && (base_ == nullptr || used_ <= cap_); }
  bool overflowed() const { return overflow_; }

 private:
  uint8_t* base_;
  size_t cap_;
  size_t used_ = 0;
  bool overflow_ = false;
};

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_ARENA_H_
