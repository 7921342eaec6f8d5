// The matmul backend layer: every matrix product of the forward pass, y = x · Wᵀ for a matrix
// named by its slot (layer, role), goes through matmul_run. Each slot is backed either by the
// model's weight view, run by the session's kernel table, or by a backend's operators (XNNPACK:
// matmul_xnnpack.h); the caller does not know which. The layer splits a run's rows into parts for
// the session's thread pool (platform/threads.h).
//
// The one entry point is "run these matrices on these n rows of activations": a prefill batch,
// a multi-token verification pass (speculative decoding, #14) or rows of several sequences
// (beams, #16) are all just n rows. The matrices of one run share their input, which is
// quantized once when a Q8/Q4/Q4K matrix needs it.
//
// Results do not depend on the thread count or the scheduling: rows are split in whole blocks of
// kRowBlock, each row is computed by the same kernel code whichever part holds it, and XNNPACK's
// operators are sliced the same way once at init.
#ifndef RINGLM_RUNTIME_MATMUL_H_
#define RINGLM_RUNTIME_MATMUL_H_

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "kernels/kernels.h"
#include "matmul_xnnpack.h"
#include "model.h"
#include "platform/threads.h"
#include "status.h"

namespace ringlm::internal {

// The matrices of the forward pass: per layer Wq .. Down, then the output projection (the token
// embedding when the model ties them).
enum class MatRole : uint8_t { Wq, Wk, Wv, Wo, Gate, Up, Down, Output };
constexpr uint32_t kMatLayerRoles = 7;  // Wq .. Down

// A matrix by name. `layer` is ignored for MatRole::Output.
struct MatSlot {
  uint32_t layer;
  MatRole role;
};

// The output projection's slot.
constexpr MatSlot kMatOutput{0, MatRole::Output};

// Most matrices in one run: Q, K and V share their input.
constexpr uint32_t kMatMaxRun = 3;

// Rows are split across threads in blocks of this many, so every thread count sees the same
// block boundaries and each row is computed by the same kernel code path: results do not depend
// on the thread count.
constexpr uint32_t kRowBlock = 16;
// A parallel job is split into up to this many parts per thread, claimed by whichever thread is
// free (see platform/threads.h): a thread that is descheduled on a busy device then delays the
// job by at most the part it holds, and the others take the rest. More parts cost more claims.
constexpr uint32_t kPartsPerThread = 4;

// Parts for a job of `units` indivisible units (row blocks, heads) on `n_threads`.
inline uint32_t job_parts(uint32_t units, uint32_t n_threads) {
  const uint32_t most = n_threads * kPartsPerThread;
  return units < most ? (units ? units : 1) : most;
}

struct Matmuls {
  const KernelTable* k;     // the session's kernels (set by matmul_bind)
  ThreadPool* const* pool;  // where the session keeps its pool (started after the layer's init;
                            // null pool: one thread)
  uint32_t n_threads;
  uint32_t n_layers;
  uint32_t n_slots;         // n_layers * kMatLayerRoles + 1 (the output projection last)
  WeightView* w;            // (n_slots) every slot's matrix, views into the model bytes
  int8_t* xq;               // (n_batch, act_stride) a run's input, quantized (Q8/Q4 matrices)
  float* xqs;               // (n_batch, act_stride / 32) their scales
  float* xsum;              // (n_batch, act_stride / 32) scale * sum of each group (runs with a
                            // Q4K, Q5K, Q4_1 or Q5_1 matrix)
  uint32_t act_stride;      // padded max(cols) of every matrix
  MatmulXnnpack xnn;        // zero unless the session's backend is "xnnpack"
  bool exact_rows;          // runs compute each row exactly as a one-row run (kMatmulExactRows):
                            // set by forward for a speculative verification pass
};

// Reserves the slot table and the quantized-activation scratch for runs of up to n_batch rows
// from `a` (measure mode allowed). `pool` is read at every run.
void matmul_layout(Arena& a, const Hparams& hp, uint32_t n_batch, uint32_t n_threads,
                   ThreadPool* const* pool, Matmuls* mm);

// Resolves every slot's weight view from a verified model (init only; never fails after
// model_open) and takes the kernel table.
void matmul_bind(const ModelImpl& m, const KernelTable* k, Matmuls* mm);

// Matrices of a verified model the XNNPACK backend would take (F32 ones).
uint32_t matmul_xnnpack_matrices(const ModelImpl& m);

// Backend "xnnpack" (when `xnnpack`): reserves the operator table and XNNPACK's region, an upper
// bound computed from the shapes, from `a` (measure mode allowed). Call after matmul_layout.
void matmul_backend_layout(Arena& a, const ModelImpl& m, bool xnnpack, Matmuls* mm);

// Creates the backend's operators (init, after matmul_bind, on the caller's thread). On failure
// (RLM_ERR_BACKEND) the ones created are deleted again. Nothing to do for the native backend.
Status matmul_backend_create(Matmuls* mm, ErrorSink* err);

// Deletes the backend's operators (after the pool's workers are joined). Idempotent.
void matmul_backend_release(Matmuls* mm);

// y[i](n, rows_i) = x(n, cols) · W_iᵀ for the `count` (1 .. kMatMaxRun) matrices `slots`, which
// share cols and the input x (n rows of stride cols, n <= n_batch); y[i] row-major, stride rows_i.
// One job on the thread pool when it is worth splitting. XNNPACK may read 16 bytes past the end
// of x (platform/xnnpack_backend.h): x must not end the session block.
void matmul_run(Matmuls* mm, const float* x, uint32_t n, const MatSlot* slots, float* const* y,
                uint32_t count);

// The same with braced lists: matmul_run(mm, x, n, {{l, MatRole::Gate}, {l, MatRole::Up}},
// {gate_out, up_out}).
template <uint32_t N>
inline void matmul_run(Matmuls* mm, const float* x, uint32_t n, const MatSlot (&slots)[N],
                       float* const (&y)[N]) {
  static_assert(N >= 1 && N <= kMatMaxRun, "1 .. kMatMaxRun matrices per run");
  matmul_run(mm, x, n, slots, y, N);
}

// One matrix: y(n, rows) = x(n, cols) · Wᵀ.
inline void linear(Matmuls* mm, MatSlot slot, const float* x, uint32_t n, float* y) {
  matmul_run(mm, x, n, &slot, &y, 1);
}

// Who runs the matrices (rlm_session_info's matmul_* and xnnpack_* fields).
struct MatmulInfo {
  const char* f32;          // "xnnpack" when any F32 matrix runs on it, else the kernels' name
  const char* f16;
  const char* q8;
  const char* q4;
  uint32_t xnnpack_operators;
  size_t xnnpack_reserved;  // bytes of the session block set aside for XNNPACK
  size_t xnnpack_used;      // bytes of it XNNPACK took
};
void matmul_info(const Matmuls& mm, MatmulInfo* info);

}  // namespace ringlm::internal

#endif  // RINGLM_RUNTIME_MATMUL_H_
