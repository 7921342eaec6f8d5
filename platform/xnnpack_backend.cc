#include "platform/xnnpack_backend.h"

#include <stdio.h>

#if defined(RINGLM_HAVE_XNNPACK)
#include <math.h>
#include <pthread.h>
#include <xnnpack.h>
#endif

namespace ringlm::internal {

size_t xnnpack_f32_fc_bound(uint32_t rows, uint32_t cols) {
  const uint64_t n = (static_cast<uint64_t>(rows) + 63) / 64 * 64;
  const uint64_t k = (static_cast<uint64_t>(cols) + 15) / 16 * 16 + 1;
  const uint64_t bytes = kXnnOperatorBound + n * k * sizeof(float) + 64 + 16;
  return bytes > SIZE_MAX ? SIZE_MAX : static_cast<size_t>(bytes);
}

#if defined(RINGLM_HAVE_XNNPACK)
static_assert(XNN_EXTRA_BYTES <= 16, "the bound and the activation padding assume 16");

namespace {

// The one mutable static of libringlm besides the init-once state below. XNNPACK's API forces a
// process-global allocator (xnn_initialize copies it into its global parameters), so the
// allocator cannot carry a per-session context; this pointer supplies it: the session being
// initialised on this thread sets it around its operator creation and clears it after.
// thread_local keeps concurrent inits of different sessions (on different threads) apart. With no
// arena set, every allocation fails (nothing else in the process may allocate through it).
// initial-exec: a plain TLS slot, no __tls_get_addr (which may allocate in a dlopen'ed library).
#if defined(__GLIBC__)
__attribute__((tls_model("initial-exec")))
#endif
thread_local XnnArena* t_arena = nullptr;

void* bump(size_t align, size_t size) {
  XnnArena* a = t_arena;
  if (!a) return nullptr;
  if (align < 16) align = 16;
  if ((align & (align - 1)) != 0) return nullptr;
  const uintptr_t base = reinterpret_cast<uintptr_t>(a->base);
  const uintptr_t at = (base + a->used + (align - 1)) & ~static_cast<uintptr_t>(align - 1);
  const size_t start = static_cast<size_t>(at - base);
  if (start > a->cap || size > a->cap - start) {
    if (a->refused == 0) a->refused = size ? size : 1;
    return nullptr;
  }
  a->used = start + size;
  ++a->calls;
  return a->base + start;
}

void* xa_allocate(void*, size_t size) { return bump(16, size); }

void* xa_reallocate(void*, void* pointer, size_t size) {
  if (pointer == nullptr) return bump(16, size);
  if (t_arena) t_arena->realloc_refused = true;
  return nullptr;  // the block's size is unknown here; XNNPACK keeps the old block on NULL
}

void xa_deallocate(void*, void*) {}

void* xa_aligned_allocate(void*, size_t alignment, size_t size) { return bump(alignment, size); }

void xa_aligned_deallocate(void*, void*) {}

const xnn_allocator kAllocator = {nullptr, xa_allocate, xa_reallocate, xa_deallocate,
                                  xa_aligned_allocate, xa_aligned_deallocate};

// Init-once state: written only inside pthread_once, read after it.
pthread_once_t g_once = PTHREAD_ONCE_INIT;
xnn_status g_init_status = xnn_status_uninitialized;

void init_once() { g_init_status = xnn_initialize(&kAllocator); }

const char* status_name(xnn_status s) {
  switch (s) {
    case xnn_status_success: return "success";
    case xnn_status_uninitialized: return "uninitialized";
    case xnn_status_invalid_parameter: return "invalid parameter";
    case xnn_status_invalid_state: return "invalid state";
    case xnn_status_unsupported_parameter: return "unsupported parameter";
    case xnn_status_unsupported_hardware: return "unsupported hardware";
    case xnn_status_out_of_memory: return "out of memory";
  }
  return "unknown status";
}

}  // namespace

bool xnnpack_compiled() { return true; }

bool xnnpack_ready(const char** why) {
  pthread_once(&g_once, init_once);
  if (g_init_status == xnn_status_success) return true;
  if (why) {
    *why = g_init_status == xnn_status_unsupported_hardware
               ? "xnn_initialize failed: unsupported hardware"
               : g_init_status == xnn_status_out_of_memory
                     ? "xnn_initialize failed: out of memory (cpuinfo could not initialise)"
                     : "xnn_initialize failed";
  }
  return false;
}

bool xnnpack_create_f32(XnnArena* arena, const float* w, uint32_t rows, uint32_t cols,
                        uint32_t out_stride, void** op, char* msg, size_t cap) {
  *op = nullptr;
  const uint32_t calls0 = arena->calls;
  xnn_operator_t o = nullptr;
  t_arena = arena;
  const xnn_status st = xnn_create_fully_connected_nc_f32(
      cols, rows, cols, out_stride, w, nullptr, -INFINITY, INFINITY, 0, &o);
  t_arena = nullptr;
  if (st != xnn_status_success) {
    if (arena->refused) {
      snprintf(msg, cap,
               "XNNPACK operator (%u x %u): its allocation of %zu bytes exceeds the %zu-byte bound "
               "reserved for XNNPACK (%zu used)",
               rows, cols, arena->refused, arena->cap, arena->used);
    } else if (arena->realloc_refused) {
      snprintf(msg, cap, "XNNPACK operator (%u x %u): XNNPACK asked to reallocate a block", rows,
               cols);
    } else {
      snprintf(msg, cap, "xnn_create_fully_connected_nc_f32 (%u x %u): %s", rows, cols,
               status_name(st));
    }
    return false;
  }
  if (arena->calls == calls0) {
    // Created without a single call to our allocator: XNNPACK's global allocator was replaced
    // (another xnn_initialize in this process). Its memory is not ours to keep.
    xnn_delete_operator(o);
    snprintf(msg, cap,
             "XNNPACK's allocator was replaced by another xnn_initialize in this process; the "
             "xnnpack backend needs XNNPACK to itself");
    return false;
  }
  *op = o;
  return true;
}

void xnnpack_run_f32(void* op, const float* x, uint32_t n, float* y) {
  xnn_operator_t o = static_cast<xnn_operator_t>(op);
  // Both only fail on invalid arguments (a null operator, n == 0), which callers never pass.
  xnn_setup_fully_connected_nc_f32(o, n, x, y, nullptr);
  xnn_run_operator(o, nullptr);
}

void xnnpack_delete(void* op) {
  if (op) xnn_delete_operator(static_cast<xnn_operator_t>(op));
}

#else  // !RINGLM_HAVE_XNNPACK

bool xnnpack_compiled() { return false; }

bool xnnpack_ready(const char** why) {
  if (why) *why = "this build has no XNNPACK (configured with RINGLM_XNNPACK=OFF, or xnnpack.h / "
                  "libXNNPACK not found for the target)";
  return false;
}

bool xnnpack_create_f32(XnnArena*, const float*, uint32_t, uint32_t, uint32_t, void** op,
                        char* msg, size_t cap) {
  *op = nullptr;
  snprintf(msg, cap, "this build has no XNNPACK");
  return false;
}

void xnnpack_run_f32(void*, const float*, uint32_t, float*) {}

void xnnpack_delete(void*) {}

#endif  // RINGLM_HAVE_XNNPACK

}  // namespace ringlm::internal
