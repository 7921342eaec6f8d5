#include "platform/threads.h"

// Sleeping waits use Linux's futex (Linux, Android). Elsewhere (Darwin: iOS, macOS), or with
// RINGLM_NO_FUTEX defined, a waiter naps in short sleeps and re-checks its word instead: the same
// protocol, a little more idle CPU and wake-up latency, no private system call.
#if defined(__linux__) && !defined(RINGLM_NO_FUTEX)
#define RINGLM_FUTEX 1
#include <linux/futex.h>
#include <sys/syscall.h>
#endif

#include <pthread.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <new>

namespace ringlm::internal {

struct ThreadPool;

namespace {

struct WorkerArg {
  ThreadPool* pool;
  uint32_t slot;
};

}  // namespace

struct ThreadPool {
  uint32_t n_threads;              // including the caller's thread
  uint32_t started;                // workers running (0 after thread_pool_stop)
  uint8_t* stacks;                 // (n_threads - 1, kWorkerStackBytes), after this struct
  pthread_t workers[kMaxThreads];
  WorkerArg args[kMaxThreads];     // what each worker is started with
  // The current job. Written by the caller only while no part of any job is claimed and
  // unfinished; read by a thread only after it claimed a part of that job (the claim's acquire
  // pairs with the caller's release of `claim`).
  ThreadJob job;
  void* ctx;
  uint32_t n_parts;
  // Bumped per job (and by stop): what workers wait on, and the futex word they sleep on.
  alignas(64) std::atomic<uint32_t> generation;
  // (generation << 32) | parts not yet claimed. A claim is a compare-exchange that keeps the
  // tag, so a thread holding an older generation can never claim a part of a newer job.
  alignas(64) std::atomic<uint64_t> claim;
  // Parts of the current job finished (each thread adds its count once it finds no part left);
  // the futex word the caller sleeps on.
  alignas(64) std::atomic<uint32_t> done;
  std::atomic<uint32_t> caller_waiting;
  alignas(64) std::atomic<uint32_t> sleepers;
  std::atomic<bool> quit;
};

namespace {

// A worker between jobs first spins (the next op of a decode step arrives within microseconds),
// then yields its core (another thread may need it: more threads than cores, a loaded machine),
// and finally sleeps on the futex, so an idle session costs no CPU.
constexpr uint32_t kSpinIterations = 1u << 11;
constexpr uint32_t kYieldIterations = 1u << 8;
// How long the caller spins for parts other threads hold before it sleeps. Long enough to cover
// a part that is running (a prefill part is ~0.1 ms), short enough that a worker preempted while
// holding a part does not keep the caller's core busy: a sleeping caller leaves its core idle, and
// the kernel then moves the preempted worker there.
constexpr int64_t kCallerSpinNs = 100 * 1000;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

int64_t now_ns() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

#if defined(RINGLM_FUTEX)
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wake(std::atomic<uint32_t>* word, int count) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, count, nullptr,
          nullptr, 0);
}
#else
// Returns after a nap of up to 50 us, or at once when *word no longer holds `expected` (a
// futex may wake spuriously too: every caller re-checks its condition in a loop).
void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  if (word->load(std::memory_order_acquire) != expected) return;
  const struct timespec nap = {0, 50 * 1000};
  nanosleep(&nap, nullptr);
}

void futex_wake(std::atomic<uint32_t>*, int) {}  // sleepers notice the change within a nap
#endif

size_t state_bytes() {
  return (sizeof(ThreadPool) + kThreadPoolAlignment - 1) / kThreadPoolAlignment *
         kThreadPoolAlignment;
}

// Claims and runs parts of job `gen` in `slot` until none is left; returns how many it ran and,
// if it ran any, the job's part count in *n_parts (read while holding a claim: once this thread's
// parts are counted done, the caller may already be writing the next job).
uint32_t run_parts(ThreadPool* pool, uint32_t gen, uint32_t slot, uint32_t* n_parts) {
  uint32_t ran = 0;
  uint64_t cur = pool->claim.load(std::memory_order_acquire);
  for (;;) {
    const uint32_t left = static_cast<uint32_t>(cur);
    if (static_cast<uint32_t>(cur >> 32) != gen || left == 0) break;
    if (!pool->claim.compare_exchange_weak(cur, cur - 1, std::memory_order_acq_rel,
                                           std::memory_order_acquire)) {
      continue;  // `cur` reloaded
    }
    const uint32_t n = pool->n_parts;
    *n_parts = n;
    pool->job(pool->ctx, n - left, n, slot);
    ++ran;
    cur = pool->claim.load(std::memory_order_acquire);
  }
  return ran;
}

void* worker_main(void* p) {
  const WorkerArg* arg = static_cast<const WorkerArg*>(p);
  ThreadPool* pool = arg->pool;
  const uint32_t slot = arg->slot;
  // Generation is 0 until the first job, so no job can be missed; a job missed because this
  // worker slept through it was done by the caller.
  uint32_t seen = 0;
  for (;;) {
    uint32_t g;
    uint32_t spins = 0;
    while ((g = pool->generation.load(std::memory_order_acquire)) == seen) {
      if (pool->quit.load(std::memory_order_acquire)) return nullptr;
      ++spins;
      if (spins < kSpinIterations) {
        cpu_relax();
      } else if (spins < kSpinIterations + kYieldIterations) {
        sched_yield();
      } else {
        // Dekker handshake with thread_pool_run: sleepers++ then re-check generation here,
        // generation++ then check sleepers there; seq_cst so one side always sees the other.
        pool->sleepers.fetch_add(1, std::memory_order_seq_cst);
        if (pool->generation.load(std::memory_order_seq_cst) == seen &&
            !pool->quit.load(std::memory_order_acquire)) {
          futex_wait(&pool->generation, seen);
        }
        pool->sleepers.fetch_sub(1, std::memory_order_acq_rel);
        spins = 0;
      }
    }
    seen = g;
    if (pool->quit.load(std::memory_order_acquire)) return nullptr;
    uint32_t n_parts = 0;
    const uint32_t ran = run_parts(pool, g, slot, &n_parts);
    if (ran == 0) continue;
    // Handshake with the caller's sleep: done += ran then check caller_waiting here,
    // caller_waiting = 1 then re-check done there (seq_cst). Only the add that completes the job
    // wakes: until then another thread still holds a part and will add after this one.
    const uint32_t d = pool->done.fetch_add(ran, std::memory_order_seq_cst) + ran;
    if (d == n_parts && pool->caller_waiting.load(std::memory_order_seq_cst) != 0) {
      futex_wake(&pool->done, 1);
    }
  }
}

}  // namespace

size_t thread_pool_bytes(uint32_t n_threads) {
  const size_t workers = n_threads > 1 ? n_threads - 1 : 0;
  return state_bytes() + workers * kWorkerStackBytes;
}

ThreadPool* thread_pool_start(void* memory, size_t size, uint32_t n_threads) {
  if (memory == nullptr || n_threads == 0 || n_threads > kMaxThreads ||
      reinterpret_cast<uintptr_t>(memory) % kThreadPoolAlignment != 0 ||
      size < thread_pool_bytes(n_threads)) {
    return nullptr;
  }
  ThreadPool* pool = new (memory) ThreadPool;
  pool->n_threads = n_threads;
  pool->started = 0;
  pool->stacks = static_cast<uint8_t*>(memory) + state_bytes();
  pool->job = nullptr;
  pool->ctx = nullptr;
  pool->n_parts = 0;
  pool->generation.store(0, std::memory_order_relaxed);
  pool->claim.store(0, std::memory_order_relaxed);
  pool->done.store(0, std::memory_order_relaxed);
  pool->caller_waiting.store(0, std::memory_order_relaxed);
  pool->sleepers.store(0, std::memory_order_relaxed);
  pool->quit.store(false, std::memory_order_relaxed);
  pool->workers[0] = pthread_self();
  for (uint32_t i = 1; i < n_threads; ++i) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) break;
    pthread_attr_setstack(&attr, pool->stacks + static_cast<size_t>(i - 1) * kWorkerStackBytes,
                          kWorkerStackBytes);
    pool->args[i].pool = pool;
    pool->args[i].slot = i;
    const int rc = pthread_create(&pool->workers[i], &attr, worker_main, &pool->args[i]);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    ++pool->started;
  }
  if (pool->started + 1 != n_threads) {
    thread_pool_stop(pool);
    return nullptr;
  }
  return pool;
}

uint32_t thread_pool_threads(const ThreadPool* pool) {
  return pool != nullptr && pool->started > 0 ? pool->n_threads : 1;
}

void thread_pool_run(ThreadPool* pool, ThreadJob job, void* ctx, uint32_t n_parts) {
  if (pool == nullptr || pool->started == 0 || n_parts <= 1) {
    for (uint32_t p = 0; p < n_parts; ++p) job(ctx, p, n_parts, 0);
    return;
  }
  // Every part of the previous job is finished (the caller waited for them), so no thread reads
  // these fields now; a late worker of an older job fails its tagged claim before reading them.
  pool->job = job;
  pool->ctx = ctx;
  pool->n_parts = n_parts;
  pool->done.store(0, std::memory_order_relaxed);
  const uint32_t gen = pool->generation.load(std::memory_order_relaxed) + 1;
  pool->claim.store(static_cast<uint64_t>(gen) << 32 | n_parts, std::memory_order_release);
  pool->generation.store(gen, std::memory_order_seq_cst);
  if (pool->sleepers.load(std::memory_order_seq_cst) > 0) {
    futex_wake(&pool->generation, static_cast<int>(pool->n_threads));
  }
  uint32_t unused;
  const uint32_t mine = run_parts(pool, gen, 0, &unused);
  if (pool->done.fetch_add(mine, std::memory_order_acq_rel) + mine == n_parts) return;
  // What is left was claimed by workers and is running (or its worker was preempted): spin for a
  // while, then sleep until the worker that finishes the last part wakes us.
  const int64_t t0 = now_ns();
  for (uint32_t spins = 0;; ++spins) {
    const uint32_t d = pool->done.load(std::memory_order_acquire);
    if (d == n_parts) return;
    if ((spins & 63) != 63 || now_ns() - t0 < kCallerSpinNs) {
      cpu_relax();
      continue;
    }
    pool->caller_waiting.store(1, std::memory_order_seq_cst);
    const uint32_t again = pool->done.load(std::memory_order_seq_cst);
    if (again != n_parts) futex_wait(&pool->done, again);
    pool->caller_waiting.store(0, std::memory_order_relaxed);
  }
}

void thread_pool_stop(ThreadPool* pool) {
  if (pool == nullptr || pool->started == 0) return;
  pool->quit.store(true, std::memory_order_release);
  pool->generation.fetch_add(1, std::memory_order_acq_rel);
  futex_wake(&pool->generation, 0x7fffffff);
  for (uint32_t i = 1; i <= pool->started; ++i) pthread_join(pool->workers[i], nullptr);
  pool->started = 0;
}

}  // namespace ringlm::internal
