#include "platform/threads.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <sched.h>
#include <unistd.h>

namespace ringlm {
namespace {

// A waiting thread first spins (the next op of a decode step arrives within microseconds), then
// yields its core (another thread of this process may need it: more threads than cores, or a
// loaded machine), and a worker finally sleeps on the futex, so an idle session costs no CPU.
constexpr uint32_t kSpinIterations = 1u << 11;
constexpr uint32_t kYieldIterations = 1u << 8;

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__) || defined(__arm__)
  __asm__ __volatile__("yield");
#endif
}

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr,
          nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, 0x7fffffff, nullptr,
          nullptr, 0);
}

void* worker_main(void* p) {
  const WorkerArg* arg = static_cast<const WorkerArg*>(p);
  ThreadPool* pool = arg->pool;
  const uint32_t index = arg->index;
  // Generation is 0 until thread_pool_start returns, so no job can be missed.
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
    if (index != 0) pool->job(pool->ctx, index, pool->n_threads);
    pool->pending.fetch_sub(1, std::memory_order_acq_rel);
  }
}

}  // namespace

void thread_pool_layout(Arena& a, uint32_t n_threads, ThreadPool** pool) {
  *pool = a.alloc<ThreadPool>(1);
  const uint32_t workers = n_threads > 1 ? n_threads - 1 : 0;
  uint8_t* stacks =
      static_cast<uint8_t*>(a.alloc_2d(workers, kWorkerStackBytes, 1, kArenaAlignment));
  if (*pool) (*pool)->stacks = stacks;
}

bool thread_pool_start(ThreadPool* pool, uint32_t n_threads) {
  pool->n_threads = n_threads;
  pool->started = 0;
  pool->generation.store(0, std::memory_order_relaxed);
  pool->pending.store(0, std::memory_order_relaxed);
  pool->sleepers.store(0, std::memory_order_relaxed);
  pool->quit.store(false, std::memory_order_relaxed);
  pool->job = nullptr;
  pool->ctx = nullptr;
  pool->workers[0] = pthread_self();
  for (uint32_t i = 1; i < n_threads; ++i) {
    pthread_attr_t attr;
    if (pthread_attr_init(&attr) != 0) break;
    pthread_attr_setstack(&attr, pool->stacks + static_cast<size_t>(i - 1) * kWorkerStackBytes,
                          kWorkerStackBytes);
    pool->args[i].pool = pool;
    pool->args[i].index = i;
    const int rc = pthread_create(&pool->workers[i], &attr, worker_main, &pool->args[i]);
    pthread_attr_destroy(&attr);
    if (rc != 0) break;
    ++pool->started;
  }
  if (pool->started + 1 != n_threads) {
    thread_pool_stop(pool);
    return false;
  }
  return true;
}

void thread_pool_run(ThreadPool* pool, ThreadJob job, void* ctx) {
  if (pool == nullptr || pool->n_threads <= 1) {
    job(ctx, 0, 1);
    return;
  }
  pool->job = job;
  pool->ctx = ctx;
  pool->pending.store(pool->n_threads - 1, std::memory_order_release);
  pool->generation.fetch_add(1, std::memory_order_seq_cst);
  if (pool->sleepers.load(std::memory_order_seq_cst) > 0) futex_wake_all(&pool->generation);
  job(ctx, 0, pool->n_threads);
  for (uint32_t spins = 0; pool->pending.load(std::memory_order_acquire) != 0; ++spins) {
    if (spins < kSpinIterations) {
      cpu_relax();
    } else {
      sched_yield();
    }
  }
}

void thread_pool_stop(ThreadPool* pool) {
  if (pool == nullptr || pool->started == 0) return;
  pool->quit.store(true, std::memory_order_release);
  pool->generation.fetch_add(1, std::memory_order_acq_rel);
  futex_wake_all(&pool->generation);
  for (uint32_t i = 1; i <= pool->started; ++i) pthread_join(pool->workers[i], nullptr);
  pool->started = 0;
}

}  // namespace ringlm
