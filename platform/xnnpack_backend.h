// The optional XNNPACK backend (rlm_session_config.backend = "xnnpack"): f32 fully-connected
// operators for the F32 weight matrices, created at session init with every allocation routed
// into a region of the session block, and run on the session's own threads (never a pthreadpool).
//
// XNNPACK's allocator is process-global (xnn_initialize). ringlm installs one, once per process,
// that serves only the thread currently creating a session's operators: a bump allocator over
// that session's XnnArena (see xnnpack_backend.cc). Deallocation is a no-op (the session block is
// the caller's), reallocation of a live block fails. Consequences for an application:
//  - the first "xnnpack" session (or size query) of a process runs xnn_initialize, whose CPU
//    detection (cpuinfo) allocates its tables once with libc malloc; nothing after that does;
//  - the process must not also use XNNPACK directly (another xnn_initialize would replace the
//    allocator; ringlm notices it at its next init and fails with RLM_ERR_BACKEND).
//
// Without XNNPACK in the build (RINGLM_HAVE_XNNPACK undefined) every function here is a stub
// that reports it.
#ifndef RINGLM_PLATFORM_XNNPACK_BACKEND_H_
#define RINGLM_PLATFORM_XNNPACK_BACKEND_H_

#include <stddef.h>
#include <stdint.h>

namespace ringlm::internal {

// Where XNNPACK's allocations go while a session creates its operators.
struct XnnArena {
  uint8_t* base;     // region of the session block (64-aligned)
  size_t cap;        // its size: the bound the layout reserved
  size_t used;       // bytes handed out so far, alignment padding included
  uint32_t calls;    // allocations served
  size_t refused;    // size of the first request that did not fit (0: none)
  bool realloc_refused;  // XNNPACK asked to grow a live block (this allocator cannot)
};

// Upper bound on sizeof(struct xnn_operator) plus slack: 2112 bytes in Debian's 2022-02-16
// snapshot on x86-64 (measured: the first allocation of every create), rounded up generously
// so a different build of the same API fits too.
constexpr size_t kXnnOperatorBound = 8192;

// Whether this build has XNNPACK at all.
bool xnnpack_compiled();

// xnn_initialize with ringlm's allocator, once per process (pthread_once). true when XNNPACK is
// usable; otherwise *why names the reason (static string).
bool xnnpack_ready(const char** why);

// Upper bound of the session bytes one f32 fully-connected operator of `rows` outputs and `cols`
// inputs takes: the operator struct plus the packed weights with the largest tile XNNPACK uses
// for f32 on x86 / ARM (nr <= 64, kr * sr <= 16): round_up(rows, 64) x (round_up(cols, 16) + 1
// bias) floats, plus alignment and XNN_EXTRA_BYTES.
size_t xnnpack_f32_fc_bound(uint32_t rows, uint32_t cols);

// Creates an f32 fully-connected operator y(n, rows) = x(n, cols) · Wᵀ for W (rows, cols)
// row-major (used in place as XNNPACK's input: it packs a copy into `arena`), writing output rows
// with stride `out_stride` floats. false with a message in msg (cap bytes) on failure.
bool xnnpack_create_f32(XnnArena* arena, const float* w, uint32_t rows, uint32_t cols,
                        uint32_t out_stride, void** op, char* msg, size_t cap);

// y = x · Wᵀ for n rows of x (stride cols) on the calling thread (no thread pool). XNNPACK may
// read up to 16 bytes (XNN_EXTRA_BYTES) past the end of x; the session's activation buffers are
// followed by others, so that stays inside the session block.
void xnnpack_run_f32(void* op, const float* x, uint32_t n, float* y);

// Deletes an operator created by xnnpack_create_f32 (its memory is the session's: nothing is
// freed).
void xnnpack_delete(void* op);

}  // namespace ringlm::internal

#endif  // RINGLM_PLATFORM_XNNPACK_BACKEND_H_
