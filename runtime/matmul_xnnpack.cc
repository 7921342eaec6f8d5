#include "matmul_xnnpack.h"

#include <string.h>

#include "matmul.h"
#include "platform/threads.h"

namespace ringlm::internal {

bool matmul_xnnpack_takes(const WeightView& w) {
  return w.present() && w.type == WeightType::F32;
}

uint64_t matmul_xnnpack_bound(const WeightView& w, uint32_t n_threads) {
  if (!matmul_xnnpack_takes(w)) return 0;
  uint64_t bound = 0;
  for (uint32_t i = 0; i < n_threads; ++i) {
    uint32_t r0, r1;
    thread_share(w.rows, kRowBlock, i, n_threads, &r0, &r1);
    if (r0 < r1) bound += xnnpack_f32_fc_bound(r1 - r0, w.cols);
  }
  return bound;
}

void matmul_xnnpack_layout(Arena& a, uint32_t n_slots, uint32_t n_threads, uint64_t bound,
                           MatmulXnnpack* x) {
  memset(static_cast<void*>(x), 0, sizeof *x);
  x->n_slots = n_slots;
  x->n_threads = n_threads;
  x->ops = static_cast<void**>(a.alloc_2d(n_slots, n_threads, sizeof(void*), kArenaAlignment));
  x->on = a.alloc<uint8_t>(n_slots);
  x->arena.base = static_cast<uint8_t*>(a.alloc_2d(1, bound, 1, kArenaAlignment));
  x->arena.cap = static_cast<size_t>(bound);
}

void matmul_xnnpack_begin(MatmulXnnpack* x) {
  memset(x->ops, 0, static_cast<size_t>(x->n_slots) * x->n_threads * sizeof(void*));
  memset(x->on, 0, x->n_slots);
  x->n_matrices = 0;
  x->n_ops = 0;
  x->arena.used = 0;
  x->arena.calls = 0;
  x->arena.refused = 0;
  x->arena.realloc_refused = false;
}

Status matmul_xnnpack_create(MatmulXnnpack* x, uint32_t slot, const WeightView& w,
                             ErrorSink* err) {
  const uint32_t nt = x->n_threads;
  char msg[200];
  for (uint32_t i = 0; i < nt; ++i) {
    uint32_t r0, r1;
    thread_share(w.rows, kRowBlock, i, nt, &r0, &r1);
    if (r0 >= r1) continue;
    const float* rows = static_cast<const float*>(w.data) + static_cast<size_t>(r0) * w.row_stride;
    void** op = &x->ops[static_cast<size_t>(slot) * nt + i];
    if (!xnnpack_create_f32(&x->arena, rows, r1 - r0, w.cols, w.rows, op, msg, sizeof msg)) {
      matmul_xnnpack_release(x);
      RLM_CHECK(false, RLM_ERR_BACKEND, err, "%s", msg);
    }
    ++x->n_ops;
  }
  x->on[slot] = 1;
  ++x->n_matrices;
  return RLM_OK;
}

void matmul_xnnpack_release(MatmulXnnpack* x) {
  if (x->n_slots == 0 || !x->ops) return;
  const size_t n = static_cast<size_t>(x->n_slots) * x->n_threads;
  for (size_t i = 0; i < n; ++i) {
    xnnpack_delete(x->ops[i]);
    x->ops[i] = nullptr;
  }
  memset(x->on, 0, x->n_slots);
  x->n_ops = 0;
}

void matmul_xnnpack_run(const MatmulXnnpack& x, void* const* ops, uint32_t rows, const float* in,
                        uint32_t n, float* y, uint32_t part, uint32_t n_parts) {
  const uint32_t nt = x.n_threads;
  uint32_t s0, s1;
  thread_share(nt, 1, part, n_parts, &s0, &s1);
  for (uint32_t s = s0; s < s1; ++s) {
    void* op = ops[s];
    if (!op) continue;  // empty slice
    uint32_t r0, r1;
    thread_share(rows, kRowBlock, s, nt, &r0, &r1);
    xnnpack_run_f32(op, in, n, y + r0);
  }
}

}  // namespace ringlm::internal
