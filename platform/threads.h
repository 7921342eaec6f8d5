// A fixed pool of worker threads created at session init, for splitting one op across cores.
//
// The pool lives in session memory (its struct and the workers' stacks are carved from the
// arena, so the size query accounts for them). run() hands every thread the same job with its
// index; it returns when all are done. Workers spin briefly between jobs (a decode step issues
// hundreds of small jobs back to back) and then sleep on a futex, so an idle session costs no
// CPU. No allocation, no locks, no thread creation after init.
//
// Note: glibc's pthread_create allocates the new thread's TLS bookkeeping internally; that
// happens once, at init, inside libc. Steps never allocate.
#ifndef RINGLM_PLATFORM_THREADS_H_
#define RINGLM_PLATFORM_THREADS_H_

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include <atomic>

#include "runtime/arena.h"

namespace ringlm {

constexpr uint32_t kMaxThreads = 64;
#if defined(__SANITIZE_THREAD__)
// ThreadSanitizer keeps ~900 KiB of per-thread state at the top of a caller-provided stack and
// fails pthread_create below that (the tsan suite).
constexpr size_t kWorkerStackBytes = 2 * 1024 * 1024;
#else
constexpr size_t kWorkerStackBytes = 256 * 1024;
#endif

// fn(ctx, index, n): the job for thread `index` of `n` (index 0 is the caller's thread).
using ThreadJob = void (*)(void* ctx, uint32_t index, uint32_t n);

struct ThreadPool;
struct WorkerArg {
  ThreadPool* pool;
  uint32_t index;
};

struct ThreadPool {
  uint32_t n_threads;              // including the caller's thread
  uint32_t started;                // workers successfully started
  pthread_t workers[kMaxThreads];
  WorkerArg args[kMaxThreads];     // what each worker is started with
  uint8_t* stacks;                 // (n_threads - 1, kWorkerStackBytes)
  alignas(64) std::atomic<uint32_t> generation;  // bumped per job; futex word
  alignas(64) std::atomic<uint32_t> pending;     // workers still running the current job
  alignas(64) std::atomic<uint32_t> sleepers;
  std::atomic<bool> quit;
  ThreadJob job;
  void* ctx;
};

// Reserves the pool and the workers' stacks (measure mode allowed).
void thread_pool_layout(Arena& a, uint32_t n_threads, ThreadPool** pool);
// Starts n_threads - 1 workers. false if a thread could not be created (then none run).
bool thread_pool_start(ThreadPool* pool, uint32_t n_threads);
// Runs job on every thread, the caller being index 0; returns when all are done.
void thread_pool_run(ThreadPool* pool, ThreadJob job, void* ctx);
// Stops and joins the workers. Idempotent.
void thread_pool_stop(ThreadPool* pool);

// The share [*b, *e) of `total` items for thread `index` of `n`, in whole blocks of `block`
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

}  // namespace ringlm

#endif  // RINGLM_PLATFORM_THREADS_H_
