// The matmul layer's XNNPACK backend (rlm_session_config.backend = "xnnpack"): per slot of the
// layer (matmul.h), the slot's F32 matrix as one XNNPACK operator per session thread, each owning
// that thread's row slice (the native path's slices: kRowBlock blocks), created at init in a
// region of the session block. The thin wrapper over XNNPACK itself is
// platform/xnnpack_backend.h; this file keeps the operator table. Only matmul.cc calls it.
#ifndef RINGLM_RUNTIME_MATMUL_XNNPACK_H_
#define RINGLM_RUNTIME_MATMUL_XNNPACK_H_

#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "platform/xnnpack_backend.h"
#include "status.h"

namespace ringlm::internal {

struct MatmulXnnpack {
  void** ops;           // (n_slots, n_threads); null: empty slice, or the slot runs natively
  uint8_t* on;          // (n_slots) 1 = the slot's matrix runs on XNNPACK
  uint32_t n_slots;     // the layer's slot count; 0 = backend unused (all zero)
  uint32_t n_threads;   // the session's thread count: the operators' slicing
  uint32_t n_matrices;  // slots on XNNPACK
  uint32_t n_ops;       // operators created
  XnnArena arena;
};

// Whether XNNPACK takes matrix `w` (a present F32 matrix).
bool matmul_xnnpack_takes(const WeightView& w);

// Session bytes the operators of `w` take at most (xnnpack_f32_fc_bound per non-empty slice),
// 0 unless matmul_xnnpack_takes(w). 64-bit so a hostile shape on a 32-bit target overflows the
// arena cleanly.
uint64_t matmul_xnnpack_bound(const WeightView& w, uint32_t n_threads);

// Zeroes *x, then reserves the operator table for n_slots slots and an XNNPACK region of `bound`
// bytes (the sum of matmul_xnnpack_bound over the slots) from `a` (measure mode allowed).
void matmul_xnnpack_layout(Arena& a, uint32_t n_slots, uint32_t n_threads, uint64_t bound,
                           MatmulXnnpack* x);

// Clears the table and the region's counters before the slots' operators are created.
void matmul_xnnpack_begin(MatmulXnnpack* x);

// Creates the operators of slot `slot` for matrix `w` (matmul_xnnpack_takes(w)). On failure
// (RLM_ERR_BACKEND, XNNPACK's message in err) every operator created so far is deleted again.
Status matmul_xnnpack_create(MatmulXnnpack* x, uint32_t slot, const WeightView& w,
                             ErrorSink* err);

// Deletes every operator (after the session's workers are joined). Idempotent.
void matmul_xnnpack_release(MatmulXnnpack* x);

// The operators of slot `slot` (one per session thread), or null when it runs natively.
inline void* const* matmul_xnnpack_ops(const MatmulXnnpack& x, uint32_t slot) {
  return x.n_slots && x.on[slot] ? x.ops + static_cast<size_t>(slot) * x.n_threads : nullptr;
}

// y(n, rows) = x(n, cols) · Wᵀ for the operators `ops` of part `part` of `n_parts`: the
// operators' slices are spread over the parts (one each when n_parts == n_threads, all of them
// for one part). Runs on the calling thread.
void matmul_xnnpack_run(const MatmulXnnpack& x, void* const* ops, uint32_t rows, const float* in,
                        uint32_t n, float* y, uint32_t part, uint32_t n_parts);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_MATMUL_XNNPACK_H_
