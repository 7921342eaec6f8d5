#include "matmul.h"

#include <string.h>

#include "kernels/scalar.h"
#include "quant.h"

namespace ringlm::internal {
namespace {

// When a matmul job is worth splitting across threads. Prefill is compute-bound: it pays once
// the job has this many multiply-adds (weights x tokens; ~0.1 ms on one core), below which the
// hand-off costs more than it saves (stories260K, 2 threads: prefill 4 % slower at 2^16).
constexpr uint64_t kMinParallelMacs = 1u << 22;
// Decode is bandwidth-bound: a second core adds bandwidth once the job streams this many weight
// bytes, more than a core's L2 keeps between tokens (smaller models run from cache, where the
// split only adds the hand-off).
constexpr uint64_t kMinParallelBytes = 1u << 18;

uint32_t max3(uint32_t a, uint32_t b, uint32_t c) {
  uint32_t m = a > b ? a : b;
  return m > c ? m : c;
}

uint32_t slot_index(uint32_t n_layers, MatSlot s) {
  return s.role == MatRole::Output ? n_layers * kMatLayerRoles
                                   : s.layer * kMatLayerRoles + static_cast<uint32_t>(s.role);
}

// The matrix of slot index `slot`, from the model.
WeightView slot_weight(const ModelImpl& m, uint32_t slot) {
  using R = fb::TensorRole;
  if (slot == m.hp.n_layers * kMatLayerRoles) {
    return m.hp.tied_embeddings ? model_weight(m, R::TokenEmbedding, -1)
                                : model_weight(m, R::Output, -1);
  }
  static const R kRoles[kMatLayerRoles] = {R::Wq, R::Wk, R::Wv, R::Wo,
                                           R::FfnGate, R::FfnUp, R::FfnDown};
  const int32_t layer = static_cast<int32_t>(slot / kMatLayerRoles);
  return model_weight(m, kRoles[slot % kMatLayerRoles], layer);
}

bool is_quant(const WeightView& w) {
  return w.type == WeightType::Q8 || w.type == WeightType::Q4 || w.type == WeightType::Q4K ||
         w.type == WeightType::Q6K || w.type == WeightType::Q5K || w.type == WeightType::Q5 ||
         w.type == WeightType::Q4_1 || w.type == WeightType::Q5_1;
}

// Whether w's matmul takes the activation sums (QuantActs.sums): the min terms of Q4K, Q5K,
// Q4_1 and Q5_1.
bool needs_sums(const WeightView& w) {
  return w.type == WeightType::Q4K || w.type == WeightType::Q5K || w.type == WeightType::Q4_1 ||
         w.type == WeightType::Q5_1;
}

// The activations' group scales rounded to f16, as GGUF's Q8_0 blocks hold them: llama.cpp
// quantizes activations into such blocks for Q8_0 / Q4_0 / Q5_0 weights (and Q8_1, also f16, for
// Q4_1 / Q5_1), so the same file gives the same dot products here, not ones 2^-12 apart per group
// that flip greedy text at its near-ties (#18: TinyStories-656K's Q6_K file, all Q8_0 at its
// width, followed llama.cpp's text for 65 characters with float scales, to the end with these).
// The int8 values stay those of the unrounded scale, as llama.cpp's. Scales outside f16's normal
// range keep their float value: a subnormal f16 would lose the scale's precision, an overflow
// make it infinite (llama.cpp rounds them anyway; a model there is degenerate).
void round_act_scales(float* scales, size_t count) {
  constexpr float kMinNormal = 6.103515625e-05f;  // 2^-14
  constexpr float kMaxHalf = 65504.0f;
  for (size_t i = 0; i < count; ++i) {
    const float s = scales[i];
    if (s >= kMinNormal && s <= kMaxHalf) scales[i] = fp16_to_f32(f32_to_fp16(s));
  }
}

// Bytes a matmul reads of `w` (values and, for the quantized types, their scale planes).
uint64_t weight_bytes(const WeightView& w) {
  const uint64_t n = static_cast<uint64_t>(w.rows) * w.row_stride;
  switch (w.type) {
    case WeightType::F32: return 4 * n;
    case WeightType::F16: return 2 * n;
    case WeightType::Q8: return n + n / kQuantGroup * 2;
    case WeightType::Q4: return n / 2 + n / kQuantGroup * 2;
    case WeightType::Q5: return n / 2 + n / 8 + n / kQuantGroup * 2;
    case WeightType::Q4_1: return n / 2 + n / kQuantGroup * 4;
    case WeightType::Q5_1: return n / 2 + n / 8 + n / kQuantGroup * 4;
    case WeightType::Q4K: return n / 2 + static_cast<uint64_t>(w.rows) * q4k_supers(w.cols) * 20;
    case WeightType::Q6K:
      return n / 2 + n / 4 + static_cast<uint64_t>(w.rows) * q6k_supers(w.cols) * 18;
    case WeightType::Q5K:
      return n / 2 + n / 8 + static_cast<uint64_t>(w.rows) * q4k_supers(w.cols) * 20;
  }
  return n;
}

// y(n, w.rows) = x(n, w.cols) · Wᵀ for rows [r0, r1). `qa` holds x quantized when w is Q8/Q4.
void linear_rows(const KernelTable* k, const WeightView& w, const float* x, const QuantActs& qa,
                 uint32_t n, float* y, uint32_t r0, uint32_t r1) {
  if (r0 >= r1) return;
  switch (w.type) {
    case WeightType::F32:
      k->matmul_f32(w, x, n, y, r0, r1);
      break;
    case WeightType::F16:
      k->matmul_f16(w, x, n, y, r0, r1);
      break;
    case WeightType::Q8:
      k->matmul_q8(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q4:
      k->matmul_q4(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q4K:
      k->matmul_q4k(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q6K:
      k->matmul_q6k(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q5K:
      k->matmul_q5k(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q5:
      k->matmul_q5(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q4_1:
      k->matmul_q4_1(w, qa, n, y, r0, r1);
      break;
    case WeightType::Q5_1:
      k->matmul_q5_1(w, qa, n, y, r0, r1);
      break;
  }
}

struct RunJob {
  const Matmuls* mm;
  const float* x;
  uint32_t n;
  QuantActs qa;
  uint32_t count;
  const WeightView* w[kMatMaxRun];
  float* y[kMatMaxRun];
  void* const* ops[kMatMaxRun];  // per matrix: its XNNPACK operators, or null (native)
};

// Part `part` of `n_parts`: the same share of every matrix's row blocks, whichever thread runs it.
void run_job(void* ctx, uint32_t part, uint32_t n_parts, uint32_t /*slot*/) {
  const RunJob* j = static_cast<const RunJob*>(ctx);
  for (uint32_t i = 0; i < j->count; ++i) {
    if (j->ops[i]) {
      if (j->mm->exact_rows) {
        // Row by row through the operator: XNNPACK promises nothing about rows of a batch.
        const WeightView& w = *j->w[i];
        for (uint32_t t = 0; t < j->n; ++t) {
          matmul_xnnpack_run(j->mm->xnn, j->ops[i], w.rows, j->x + static_cast<size_t>(t) * w.cols,
                             1, j->y[i] + static_cast<size_t>(t) * w.rows, part, n_parts);
        }
        continue;
      }
      matmul_xnnpack_run(j->mm->xnn, j->ops[i], j->w[i]->rows, j->x, j->n, j->y[i], part, n_parts);
      continue;
    }
    uint32_t r0, r1;
    thread_share(j->w[i]->rows, kRowBlock, part, n_parts, &r0, &r1);
    const uint32_t n = j->mm->exact_rows && j->n > 1 ? j->n | kMatmulExactRows : j->n;
    linear_rows(j->mm->k, *j->w[i], j->x, j->qa, n, j->y[i], r0, r1);
  }
}

}  // namespace

void matmul_layout(Arena& a, const Hparams& hp, uint32_t n_batch, uint32_t n_threads,
                   ThreadPool* const* pool, Matmuls* mm) {
  mm->k = kernels_ref();  // matmul_bind takes the session's table
  mm->pool = pool;
  mm->n_threads = n_threads;
  mm->n_layers = hp.n_layers;
  mm->n_slots = hp.n_layers * kMatLayerRoles + 1;
  mm->w = a.alloc<WeightView>(mm->n_slots, alignof(WeightView));
  mm->act_stride = static_cast<uint32_t>(padded_cols(max3(hp.dim, hp.q_dim, hp.ffn_dim)));
  mm->xq = static_cast<int8_t*>(a.alloc_2d(n_batch, mm->act_stride, 1, kArenaAlignment));
  mm->xqs = static_cast<float*>(
      a.alloc_2d(n_batch, mm->act_stride / kQuantGroup, sizeof(float), kArenaAlignment));
  mm->xsum = static_cast<float*>(
      a.alloc_2d(n_batch, mm->act_stride / kQuantGroup, sizeof(float), kArenaAlignment));
}

void matmul_bind(const ModelImpl& m, const KernelTable* k, Matmuls* mm) {
  mm->k = k;
  for (uint32_t slot = 0; slot < mm->n_slots; ++slot) mm->w[slot] = slot_weight(m, slot);
}

uint32_t matmul_xnnpack_matrices(const ModelImpl& m) {
  uint32_t count = 0;
  const uint32_t n_slots = m.hp.n_layers * kMatLayerRoles + 1;
  for (uint32_t slot = 0; slot < n_slots; ++slot) {
    count += matmul_xnnpack_takes(slot_weight(m, slot));
  }
  return count;
}

void matmul_backend_layout(Arena& a, const ModelImpl& m, bool xnnpack, Matmuls* mm) {
  memset(static_cast<void*>(&mm->xnn), 0, sizeof mm->xnn);
  if (!xnnpack) return;
  // From the model, not mm->w: in measure mode the slot table is not there.
  uint64_t bound = 0;
  for (uint32_t slot = 0; slot < mm->n_slots; ++slot) {
    bound += matmul_xnnpack_bound(slot_weight(m, slot), mm->n_threads);
  }
  matmul_xnnpack_layout(a, mm->n_slots, mm->n_threads, bound, &mm->xnn);
}

Status matmul_backend_create(Matmuls* mm, ErrorSink* err) {
  MatmulXnnpack* x = &mm->xnn;
  if (x->n_slots == 0) return RLM_OK;
  matmul_xnnpack_begin(x);
  for (uint32_t slot = 0; slot < mm->n_slots; ++slot) {
    if (!matmul_xnnpack_takes(mm->w[slot])) continue;
    RLM_RETURN_IF_ERROR(matmul_xnnpack_create(x, slot, mm->w[slot], err));
  }
  return RLM_OK;
}

void matmul_backend_release(Matmuls* mm) { matmul_xnnpack_release(&mm->xnn); }

void matmul_run(Matmuls* mm, const float* x, uint32_t n, const MatSlot* slots, float* const* y,
                uint32_t count) {
  RunJob job{mm, x, n, QuantActs{}, count, {}, {}, {}};
  bool need = false, need_sums = false, all_xnn = true;
  uint64_t weights = 0, bytes = 0;
  uint32_t blocks = 0;  // of the tallest matrix
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t slot = slot_index(mm->n_layers, slots[i]);
    const WeightView& w = mm->w[slot];
    job.w[i] = &w;
    job.y[i] = y[i];
    job.ops[i] = matmul_xnnpack_ops(mm->xnn, slot);
    need |= is_quant(w);
    need_sums |= needs_sums(w);
    all_xnn = all_xnn && job.ops[i];
    weights += static_cast<uint64_t>(w.rows) * w.cols;
    bytes += weight_bytes(w);
    const uint32_t b = (w.rows + kRowBlock - 1) / kRowBlock;
    blocks = b > blocks ? b : blocks;
  }
  if (need) {
    // Once for every matrix of the run: they share x and its cols.
    const uint32_t cols = job.w[0]->cols;
    const uint32_t stride = static_cast<uint32_t>(padded_cols(cols));
    mm->k->quantize_acts(x, n, cols, stride, mm->xq, mm->xqs);
    round_act_scales(mm->xqs, static_cast<size_t>(n) * (stride / kQuantGroup));
    job.qa = QuantActs{mm->xq, mm->xqs, stride};
    if (need_sums) {
      // The min term of Q4K, Q5K, Q4_1 and Q5_1: each group's scale times the sum of its int8
      // values (n * stride adds, against rows times that in the matmul).
      const uint32_t groups = stride / kQuantGroup;
      for (size_t i = 0; i < static_cast<size_t>(n) * groups; ++i) {
        const int8_t* q = mm->xq + i * kQuantGroup;
        int32_t sum = 0;
        for (uint32_t j = 0; j < kQuantGroup; ++j) sum += q[j];
        mm->xsum[i] = mm->xqs[i] * static_cast<float>(sum);
      }
      job.qa.sums = mm->xsum;
    }
  }
  const uint32_t nt = mm->n_threads;
  if (nt > 1 && (weights * n >= kMinParallelMacs || bytes >= kMinParallelBytes)) {
    // XNNPACK matrices come in one pre-sliced operator per session thread: those are the parts.
    const uint32_t parts = all_xnn ? nt : job_parts(blocks, nt);
    thread_pool_run(*mm->pool, run_job, &job, parts);
  } else {
    run_job(&job, 0, 1, 0);
  }
}

void matmul_info(const Matmuls& mm, MatmulInfo* info) {
  const char* native = mm.k->name;
  info->f32 = mm.xnn.n_matrices > 0 ? "xnnpack" : native;
  info->f16 = native;
  info->q8 = native;
  info->q4 = native;
  info->xnnpack_operators = mm.xnn.n_ops;
  info->xnnpack_reserved = mm.xnn.arena.cap;
  info->xnnpack_used = mm.xnn.arena.used;
}

}  // namespace ringlm::internal
