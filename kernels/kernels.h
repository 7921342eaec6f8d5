// The kernel contract: every numeric inner loop the forward pass runs, as a table of function
// pointers chosen at session init (the scalar reference, or an ISA table per CPU feature, #5).
//
// This header is all the kernels know of the rest of ringlm, and it holds plain data only: types
// of <stdint.h> level (weight encodings, views, the table) and function declarations, no inline
// function and no other include. The per-ISA files (kernels/x86, kernels/arm) are compiled with
// wider -m flags than the rest; an inline function they shared with the runtime could be emitted
// by them and picked by the linker for every caller (kernels/isa.h, kernels/CMakeLists.txt).
//
// Conventions: row-major; a matmul computes y(n, w.rows) = x(n, w.cols) · Wᵀ for output rows
// [r0, r1) only (so a thread pool can split rows), with y's row stride = w.rows. Quantized
// weights take activations quantized per 32-group to int8 (QuantActs); the int32 dot product of a
// group is scaled by both group scales, accumulated in float in group order.
#ifndef RINGLM_KERNELS_KERNELS_H_
#define RINGLM_KERNELS_KERNELS_H_

#include <stddef.h>
#include <stdint.h>

namespace ringlm::internal {

// ---- Weight encodings (schema/model.fbs "TENSOR DATA ENCODINGS") ------------------------------
// Q8/Q4 values come in groups of kQuantGroup along a row, one f16 scale per group.
constexpr uint32_t kQuantGroup = 32;

// Matches fb::DType values; kept here so neither the kernels nor quant.h need the generated schema.
enum class WeightType : uint8_t {
  F32 = 0, F16 = 1, Q8 = 2, Q4 = 3, Q4K = 4, Q6K = 5, Q5K = 6, Q5 = 7, Q4_1 = 8, Q5_1 = 9
};

// Q5 (GGUF Q5_0's values): unsigned 5-bit q in [0, 31] per value, value = (q - 16) * scale with
// an f16 scale per group (as Q8/Q4). Planes: the low 4 bits as Q4K's nibbles; the fifth bits as
// Q5K's (below); the scales.

// Q4_1 / Q5_1 (GGUF Q4_1's / Q5_1's values): unsigned q in [0, 15] / [0, 31] per value, value =
// d * q + m with an f16 d and an f16 m per group. Planes: the low 4 bits as Q4K's nibbles; Q5_1:
// the fifth bits as Q5's; the (d, m) pairs, interleaved per group.

// Q4K groups come 8 to a super-block (GGUF Q4_K's 256 values): one (d, dmin) pair of f16 per
// super-block, a 6-bit scale and min per group (the last super-block of a row may be short): a
// row of row_stride values has (row_stride / 32 + 7) / 8 super-blocks.
constexpr uint32_t kQ4kSuperGroups = 8;

// Q6K (GGUF Q6_K's values): 6-bit q in [0, 63] per value, an int8 scale per 16 values, one f16 d
// per super-block of 8 groups (as Q4K; the last may be short). value = (d * sc) * (q - 32).
// Planes: the low 4 bits as Q4K's nibbles (so a group's first 16 values, its first sub-block,
// are the low nibbles of its 16 bytes, the other 16 the high nibbles); the high 2 bits, 8 bytes
// per group, byte j holding those of values j, j + 8, j + 16, j + 24 at bits 0-1, 2-3, 4-5, 6-7;
// d per super-block; sc per super-block, two per group (its first and second 16 values).
constexpr uint32_t kQ6kSubsPerSuper = 2 * kQ4kSuperGroups;

// Q5K (GGUF Q5_K's values): Q4K with a fifth bit, q in [0, 31]; value = (d * sc) * q - (dmin * m)
// as Q4K. Planes: Q4K's low nibbles; the fifth bits, 4 bytes per group, bit k of byte j holding
// value 4k + j's (a 4-byte broadcast gives every lane its byte: one variable shift per lane
// remains, NEON's vshl / AVX2's vpsrlvd per 4 lanes); Q4K's (d, dmin) and sc/m planes.

// One weight matrix (or vector) as the kernels see it. Pointers borrow the model bytes.
struct WeightView {
  const void* data = nullptr;        // F32/F16: values; Q8: int8 qs; Q4/Q4K/Q5K/Q6K/Q5/Q4_1/
                                     // Q5_1: packed nibbles
  const uint16_t* scales = nullptr;  // Q8/Q4/Q5: f16 scale per 32-group, (rows, row_stride / 32);
                                     // Q4_1/Q5_1: f16 (d, m) per 32-group, (rows, row_stride / 32,
                                     // 2);
                                     // Q4K/Q5K: f16 (d, dmin) per super-block, (rows, supers, 2);
                                     // Q6K: f16 d per super-block, (rows, supers)
  const uint8_t* subs = nullptr;     // Q4K/Q5K: per super-block sc[8] then m[8], (rows, supers,
                                     // 16);
                                     // Q6K: int8 sc per 16 values, (rows, supers, 16)
  const uint8_t* high = nullptr;     // Q6K: the high 2 bits, (rows, row_stride / 4);
                                     // Q5K/Q5/Q5_1: the fifth bits, (rows, row_stride / 8)
  WeightType type = WeightType::F32;
  uint32_t rows = 0;                 // output features (1 for vectors)
  uint32_t cols = 0;                 // input features
  uint32_t row_stride = 0;           // stored values per row: cols, or padded_cols for Q8/Q4
  bool present() const;              // data != nullptr (out of line: kernels.cc)
};

// A matmul's `n` may carry this bit: compute every token row bit for bit as a one-token call
// (n == 1) computes it. Speculative verification needs it (each row of a verification pass must
// equal plain decode, or greedy output could flip at a near-tie). Tables whose tiles are
// shape-invariant (tile.inc: kShapeInvariant; the x86 ones) run their ordinary prefill tiles;
// the others walk row blocks of kExactRowBlock rows token by token through their decode path, so
// a block's weights come from memory once and from cache for the other tokens.
constexpr uint32_t kMatmulExactRows = 0x80000000u;
constexpr uint32_t kExactRowBlock = 32;  // a multiple of every decode row tile (4, 8)
// Positions per tile of a tiled key operand (attn_dot_tiled): one AVX-512 vector of f32 lanes.
constexpr uint32_t kAttnTile = 16;

// Activations quantized for Q8/Q4/Q4K/Q5K/Q6K/Q5/Q4_1/Q5_1 matmuls.
struct QuantActs {
  const int8_t* qs;     // (n, stride) int8, zero past the logical cols
  const float* scales;  // (n, stride / 32); the runtime rounds them to f16 (as llama.cpp's Q8_0
                        // blocks; runtime/matmul.cc round_act_scales) after quantize_acts, with
                        // qs those of the unrounded scale
  uint32_t stride;      // padded cols (multiple of 32)
  // (n, stride / 32) scales[g] * (sum of group g's qs), for the min term of Q4K, Q5K, Q4_1 and
  // Q5_1; only the runs that hold such a matrix fill it (null otherwise).
  const float* sums = nullptr;
};


struct KernelTable {
  const char* name;
  // y(n, rows) = x(n, cols) · Wᵀ over rows [r0, r1). x row stride = w.cols.
  void (*matmul_f32)(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
  void (*matmul_f16)(const WeightView& w, const float* x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
  void (*matmul_q8)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
  void (*matmul_q4)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
  // Q4K: per group g of super-block s, value = (d_s * sc_g) * q - (dmin_s * m_g), so a row's dot
  // product is sum_g isum_g * ((d_s * sc_g) * xscale_g) - sum_g (dmin_s * m_g) * x.sums_g, with
  // isum_g the exact int32 dot product of the unsigned nibbles and the int8 activations.
  void (*matmul_q4k)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
  // Q6K: per group g of super-block s with sub-blocks a (values 0-15) and b (16-31), a row's dot
  // product is sum_g (sc_a * isum_a + sc_b * isum_b) * (d_s * xscale_g), with isum the exact
  // int32 dot product of (q - 32) and the int8 activations over the sub-block (x.sums unused).
  void (*matmul_q6k)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
  // Q5K: as Q4K, with q = nibble | 16 * fifth bit in [0, 31].
  void (*matmul_q5k)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                     uint32_t r1);
  // Q5: as Q8/Q4 (per group the exact int32 dot product, times w_scale * x_scale), with the
  // values q - 16, q = nibble | 16 * fifth bit in [0, 31].
  void (*matmul_q5)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                    uint32_t r1);
  // Q4_1: per group g, value = d_g * q + m_g, so a row's dot product is
  // sum_g (d_g * xscale_g) * isum_g + sum_g m_g * x.sums_g, with isum_g the exact int32 dot
  // product of the unsigned nibbles q in [0, 15] and the int8 activations (accumulated in float
  // in group order, the min term as Q4K's).
  void (*matmul_q4_1)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1);
  // Q5_1: as Q4_1, with q = nibble | 16 * fifth bit in [0, 31].
  void (*matmul_q5_1)(const WeightView& w, const QuantActs& x, uint32_t n, float* y, uint32_t r0,
                      uint32_t r1);
  // x(n, cols) -> qs(n, stride), scales(n, stride/32); symmetric, amax/127 per group.
  void (*quantize_acts)(const float* x, uint32_t n, uint32_t cols, uint32_t stride, int8_t* qs,
                        float* scales);
  // out = w * x / sqrt(mean(x²) + eps), one row of `size`.
  void (*rmsnorm)(float* out, const float* x, const float* w, uint32_t size, float eps);
  // In-place softmax over `size` values (size >= 1); returns log(sum of exp(x)), as max + log of
  // the sum of exp(x - max) it divided by: attention merges the softmaxes of chunks of positions
  // with it, and needs no second pass over the scores for their max.
  float (*softmax)(float* x, uint32_t size);
  // a(i) = silu(a(i)) * b(i)
  void (*swiglu)(float* a, const float* b, uint32_t size);
  // Attention scores: out[j] = scale * dot(q, k_j) for j < n_rows, k_j = row j of head_dim
  // values at k_rows + j * row_stride_elems (f16 when k_f16, else f32).
  void (*attn_dot)(const float* q, const void* k_rows, uint32_t row_stride_elems, uint32_t n_rows,
                   uint32_t head_dim, bool k_f16, float scale, float* out);
  // Weighted sum of value rows, added to out: out[i] += sum_j w[j] * v_j[i], each out[i] one
  // chain of multiply-adds continuing from its value, rows in order (out unchanged when
  // n_rows == 0). Attention walks the cache in blocks of rows for all heads (the runtime's
  // attend) and zeroes out before the first: the blocks give what one call over every row gives.
  // Rows laid out as for attn_dot.
  void (*attn_accum)(const float* w, const void* v_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool v_f16, float* out);
  // The same over int8 rows with one f32 scale per row (the q8 KV cache): row j's head_dim
  // values are k_rows + j * row_stride_bytes, its scale s_j the float at
  // (const uint8_t*)k_scales + j * row_stride_bytes (4-byte aligned), and its value i is
  // s_j * k_j[i]. out[j] = scale * s_j * dot(q, k_j).
  void (*attn_dot_q8)(const float* q, const int8_t* k_rows, const float* k_scales,
                      uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim, float scale,
                      float* out);
  // out[i] += sum_j (w[j] * s_j) * v_j[i], continuing out as attn_accum does.
  void (*attn_accum_q8)(const float* w, const int8_t* v_rows, const float* v_scales,
                        uint32_t row_stride_bytes, uint32_t n_rows, uint32_t head_dim, float* out);
  // attn_dot for the n_q queries of the heads sharing one KV head (query t at q + t * head_dim,
  // its scores at out + t * out_stride), and attn_accum for them (weights of query t at
  // w + t * w_stride, output at out + t * head_dim): every result equals the one-query call's
  // bit for bit; a table may load each row once for all queries.
  void (*attn_dot_n)(const float* q, uint32_t n_q, const void* k_rows, uint32_t row_stride_elems,
                     uint32_t n_rows, uint32_t head_dim, bool k_f16, float scale, float* out,
                     uint32_t out_stride);
  void (*attn_accum_n)(const float* w, uint32_t n_q, uint32_t w_stride, const void* v_rows,
                       uint32_t row_stride_elems, uint32_t n_rows, uint32_t head_dim, bool v_f16,
                       float* out);
  // Attention scores over keys stored in tiles of kAttnTile positions (the f32 / f16 key cache):
  // in tile t, at k_tiles + t * tile_stride_elems (elements: f16 when k_f16, else f32), column i
  // of the position j = t * kAttnTile + lane is element i * kAttnTile + lane. For each of the n_q
  // queries (query u at q + u * head_dim) and each j in [j0, j1):
  //   out[u * out_stride + j] = scale * (even + odd),
  // even = sum of q[i] * k_j[i] over the even i, odd over the odd i, each one chain of
  // multiply-adds in order of i (head_dim even). Other entries of out are left as they are. The
  // tiles that [j0, j1) touches are read whole: lanes outside it may hold anything (their results
  // are dropped). Why tiles: a tile's column is one vector load and a score a broadcast multiply-
  // add per column, with no horizontal sum; a row-major key needs one per row, which took about
  // 40 % of the score time at depth 2,048 (SmolLM2-135M shape, AVX-512). Every result equals the
  // n_q = 1 call's bit for bit.
  void (*attn_dot_tiled)(const float* q, uint32_t n_q, const void* k_tiles,
                         uint32_t tile_stride_elems, uint32_t j0, uint32_t j1, uint32_t head_dim,
                         bool k_f16, float scale, float* out, uint32_t out_stride);
  // out[i] = x[i] as IEEE binary16, rounded to nearest even (overflow to infinity, subnormals
  // kept); a NaN becomes 0x7e00 with its sign (no payload), bit for bit what scalar.h's
  // f32_to_fp16 gives (the f16 KV cache's rows: a snapshot or a test compares them exactly).
  void (*f32_to_f16)(const float* x, uint16_t* out, uint32_t n);
};

// The scalar reference: the numerical oracle every ISA kernel is tested against.
const KernelTable* kernels_ref();

// ---- Per-CPU selection (kernels/select.cc) --------------------------------------------
// Tables compiled into this build for the target architecture: x86-64 "avx512", "avx2";
// aarch64 "i8mm", "dotprod", "neon"; 32-bit ARM "armv7"; always "ref". Every table is a const
// static: the pointers stay valid for the life of the program.
struct CpuFeatures;  // platform/cpu_features.h

// The best table the CPU can run; with override_name (non-null, non-empty) exactly that table, or
// nullptr when it is unknown, not compiled for this architecture or not runnable on this CPU.
const KernelTable* kernels_select(const CpuFeatures& cpu, const char* override_name);

// The tables the CPU can run, best first (ref last). Writes up to `cap`; returns how many exist.
size_t kernels_available(const CpuFeatures& cpu, const KernelTable** out, size_t cap);

// Every table compiled for this architecture, runnable or not (for tests: skip, saying why).
size_t kernels_compiled(const KernelTable** out, size_t cap);

}  // namespace ringlm::internal

#endif  // RINGLM_KERNELS_KERNELS_H_
