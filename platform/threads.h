// A fixed pool of worker threads started at session init, for splitting one op across cores.
//
// A job is split into parts; thread_pool_run runs every part exactly once, on whichever thread
// claims it first, the caller's thread included. Parts are claimed from one counter tagged with
// the job's generation, so a worker that wakes late cannot claim a part of a later job. The
// caller claims parts like any worker and, when none is left, waits only for parts other threads
// have claimed and not yet finished — never for a worker that has not woken up: on a busy device
// (background processes, big.LITTLE, more threads than free cores) a descheduled worker costs at
// most the part it holds, and a worker that never runs costs nothing but its share of the
// speed-up.
//
// Which thread runs a part is a matter of scheduling, so results must not depend on it: a part
// computes a fixed range of the output (thread_share of the part index, not of the thread), and
// per-thread scratch is indexed by the executing thread's slot (0 = the caller, 1.. = workers).
//
// Waiting: a worker spins briefly between jobs (a decode step issues hundreds of small jobs back
// to back), yields, then sleeps on a futex, so an idle session costs no CPU. The caller spins
// briefly for claimed parts, then sleeps on a futex too (its core going idle lets the kernel
// migrate a preempted worker there instead of both fighting for one core).
//
// The pool lives in memory the caller provides (thread_pool_bytes; the session carves it from
// its block, so its size query accounts for it): the pool's state and the workers' stacks. No
// allocation, no locks, no thread creation after start.
//
// Note: glibc's pthread_create allocates the new thread's TLS bookkeeping internally; that
// happens once, at start, inside libc. Jobs never allocate.
#ifndef RINGLM_PLATFORM_THREADS_H_
#define RINGLM_PLATFORM_THREADS_H_

#include <stddef.h>
#include <stdint.h>

namespace ringlm::internal {

constexpr uint32_t kMaxThreads = 64;
#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer keeps ~900 KiB of per-thread state at the top of a caller-provided stack and
// fails pthread_create below that (the tsan suite).
constexpr size_t kWorkerStackBytes = 2 * 1024 * 1024;
#else
constexpr size_t kWorkerStackBytes = 256 * 1024;
#endif
// Alignment thread_pool_start needs of its memory.
constexpr size_t kThreadPoolAlignment = 64;
// Most parts one job may have.
constexpr uint32_t kMaxParts = 1u << 20;

// fn(ctx, part, n_parts, slot): part `part` of `n_parts`, run by the thread in `slot`
// (0 = the caller's thread, 1 .. n_threads - 1 = workers). No two parts run at the same time in
// one slot, so a slot may own scratch memory; the part must not otherwise depend on the slot.
using ThreadJob = void (*)(void* ctx, uint32_t part, uint32_t n_parts, uint32_t slot);

struct ThreadPool;  // opaque; lives in the memory given to thread_pool_start

// Bytes of memory a pool of n_threads (1 .. kMaxThreads; the caller's thread included) needs:
// its state and the stacks of its n_threads - 1 workers.
size_t thread_pool_bytes(uint32_t n_threads);

// Starts n_threads - 1 workers in `memory` (aligned to kThreadPoolAlignment, `size` >=
// thread_pool_bytes(n_threads)). The memory belongs to the pool until thread_pool_stop returns.
// Returns the pool, or null if the memory does not fit or a thread could not be created (then
// none runs). n_threads == 1 gives a pool without workers (thread_pool_run runs on the caller).
ThreadPool* thread_pool_start(void* memory, size_t size, uint32_t n_threads);

// Runs job for parts 0 .. n_parts - 1 (n_parts <= kMaxParts), each exactly once, the caller
// taking part; returns when all are done. A null pool runs them in order on the caller (slot 0).
// One caller at a time per pool.
void thread_pool_run(ThreadPool* pool, ThreadJob job, void* ctx, uint32_t n_parts);

// The pool's thread count (the caller's thread included); 1 for a null pool.
uint32_t thread_pool_threads(const ThreadPool* pool);

// Stops and joins the workers. Idempotent; null is allowed.
void thread_pool_stop(ThreadPool* pool);

// The share [*b, *e) of `total` items for part `index` of `n`, in whole blocks of `block`
// (so every split keeps the same block boundaries and results do not depend on n).
inline void thread_share(uint32_t total, uint32_t block, uint32_t index, uint32_t n, uint32_t* b,
                         uint32_t* e) {
  const uint32_t blocks = (total + block - 1) / block;
  const uint32_t per = blocks / n, extra = blocks % n;
  const uint32_t first = index * per + (index < extra ? index : extra);
  const uint32_t count = per + (index < extra ? 1 : 0);
  const uint64_t lo = static_cast<uint64_t>(first) * block;
  const uint64_t hi = static_cast<uint64_t>(first + count) * block;
  *b = lo < total ? static_cast<uint32_t>(lo) : total;
  *e = hi < total ? static_cast<uint32_t>(hi) : total;
}

}  // namespace ringlm::internal

#endif  // RINGLM_PLATFORM_THREADS_H_
