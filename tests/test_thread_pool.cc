// The session thread pool (platform/threads.h, issue #12): every part of a job runs exactly once,
// whichever threads run it; results do not depend on the thread count; a worker that is delayed
// while holding a part does not keep the caller from finishing the rest; stop / restart, one
// thread, bad memory. No timing assertions: waits that could hang on a broken pool are bounded
// (a deadlock guard, not a measurement) and fail the test when they run out.
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include <gtest/gtest.h>

#include "platform/threads.h"

namespace {

using ringlm::internal::kMaxThreads;
using ringlm::internal::kThreadPoolAlignment;
using ringlm::internal::thread_pool_bytes;
using ringlm::internal::thread_pool_run;
using ringlm::internal::thread_pool_start;
using ringlm::internal::thread_pool_stop;
using ringlm::internal::thread_pool_threads;
using ringlm::internal::thread_share;
using ringlm::internal::ThreadPool;

// Pool memory from the heap (the runtime carves it from the session block).
struct PoolMemory {
  void* mem = nullptr;
  size_t size = 0;
  explicit PoolMemory(uint32_t n_threads) {
    size = thread_pool_bytes(n_threads);
    mem = aligned_alloc(kThreadPoolAlignment,
                        (size + kThreadPoolAlignment - 1) / kThreadPoolAlignment *
                            kThreadPoolAlignment);
  }
  ~PoolMemory() { free(mem); }
  PoolMemory(const PoolMemory&) = delete;
  PoolMemory& operator=(const PoolMemory&) = delete;
};

// Waits until pred() holds, for at most ~20 s (a guard against a deadlocked pool).
template <typename Pred>
bool wait_for(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!pred()) {
    if (std::chrono::steady_clock::now() > until) return false;
    std::this_thread::yield();
  }
  return true;
}

// Counts how often each part ran, and checks each slot runs one part at a time.
struct CountJob {
  std::vector<std::atomic<uint32_t>> runs;
  std::atomic<uint32_t> busy[kMaxThreads];
  std::atomic<uint32_t> bad_slot{0}, overlap{0}, bad_n{0};
  uint32_t n_threads = 0, n_parts = 0;
  explicit CountJob(uint32_t parts) : runs(parts), n_parts(parts) {
    for (auto& r : runs) r.store(0);
    for (auto& b : busy) b.store(0);
  }
  static void fn(void* ctx, uint32_t part, uint32_t n_parts, uint32_t slot) {
    CountJob* j = static_cast<CountJob*>(ctx);
    if (n_parts != j->n_parts || part >= n_parts) {
      j->bad_n.fetch_add(1);
      return;
    }
    if (slot >= j->n_threads) {
      j->bad_slot.fetch_add(1);
      return;
    }
    if (j->busy[slot].exchange(1) != 0) j->overlap.fetch_add(1);
    j->runs[part].fetch_add(1);
    j->busy[slot].store(0);
  }
};

TEST(ThreadPool, EveryPartRunsExactlyOnce) {
  for (uint32_t n : {1u, 2u, 3u, 4u}) {
    SCOPED_TRACE(n);
    PoolMemory m(n);
    ThreadPool* pool = thread_pool_start(m.mem, m.size, n);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(thread_pool_threads(pool), n);
    // Many jobs back to back: a worker late for one job must not claim parts of the next.
    for (int round = 0; round < 200; ++round) {
      for (uint32_t parts : {1u, 2u, 3u, 7u, 16u, 100u}) {
        CountJob job(parts);
        job.n_threads = n;
        thread_pool_run(pool, CountJob::fn, &job, parts);
        for (uint32_t p = 0; p < parts; ++p) ASSERT_EQ(job.runs[p].load(), 1u) << "part " << p;
        ASSERT_EQ(job.bad_slot.load(), 0u);
        ASSERT_EQ(job.overlap.load(), 0u);
        ASSERT_EQ(job.bad_n.load(), 0u);
      }
    }
    // Zero parts: nothing runs.
    CountJob none(1);
    none.n_threads = n;
    thread_pool_run(pool, CountJob::fn, &none, 0);
    EXPECT_EQ(none.runs[0].load(), 0u);
    thread_pool_stop(pool);
  }
}

// out[i] = a function of i and of the blocks' order within each part (a running sum restarted
// at each block boundary), computed per part over thread_share ranges: the result must be the
// same for every thread count and part count, because parts keep block boundaries.
struct SumJob {
  const float* in;
  float* out;
  uint32_t total;
  static constexpr uint32_t kBlock = 16;
  static void fn(void* ctx, uint32_t part, uint32_t n_parts, uint32_t /*slot*/) {
    const SumJob* j = static_cast<const SumJob*>(ctx);
    uint32_t b, e;
    thread_share(j->total, kBlock, part, n_parts, &b, &e);
    float acc = 0;
    for (uint32_t i = b; i < e; ++i) {
      if (i % kBlock == 0) acc = 0;
      acc = acc * 0.999f + j->in[i] * 1.0001f;
      j->out[i] = acc;
    }
  }
};

TEST(ThreadPool, ResultsIndependentOfThreadAndPartCount) {
  const uint32_t total = 16 * 37 + 5;
  std::vector<float> in(total);
  uint32_t x = 12345;
  for (float& v : in) {
    x = x * 1103515245u + 12345u;
    v = static_cast<float>(x >> 8) / 16777216.0f - 0.5f;
  }
  std::vector<float> ref(total, 0.0f);
  SumJob r{in.data(), ref.data(), total};
  SumJob::fn(&r, 0, 1, 0);
  for (uint32_t n : {1u, 2u, 3u, 5u}) {
    PoolMemory m(n);
    ThreadPool* pool = thread_pool_start(m.mem, m.size, n);
    ASSERT_NE(pool, nullptr);
    for (uint32_t parts : {1u, 2u, 3u, 8u, 38u, 64u}) {
      for (int rep = 0; rep < 20; ++rep) {
        std::vector<float> out(total, -1.0f);
        SumJob j{in.data(), out.data(), total};
        thread_pool_run(pool, SumJob::fn, &j, parts);
        ASSERT_EQ(memcmp(out.data(), ref.data(), total * sizeof(float)), 0)
            << "threads " << n << " parts " << parts;
      }
    }
    thread_pool_stop(pool);
  }
}

// Part run by a worker blocks until the caller has run every other part: the caller must take
// the parts a static split would have given the worker. With a pool that waits for each thread's
// share, the worker's wait never ends (the guard fails the test instead of hanging).
struct HoldJob {
  uint32_t n_parts = 0;
  std::atomic<uint32_t> worker_holds{0};   // a worker claimed a part and is blocked in it
  std::atomic<uint32_t> caller_parts{0};   // parts the caller (slot 0) finished
  std::atomic<uint32_t> worker_parts{0};
  std::atomic<uint32_t> guard_expired{0};
  static void fn(void* ctx, uint32_t /*part*/, uint32_t n_parts, uint32_t slot) {
    HoldJob* j = static_cast<HoldJob*>(ctx);
    if (slot == 0) {
      // The first part the caller runs waits until a worker holds one (so the scenario happens).
      if (j->caller_parts.load() == 0 && !wait_for([&] { return j->worker_holds.load() > 0; }))
        j->guard_expired.fetch_add(1);
      j->caller_parts.fetch_add(1);
      return;
    }
    // Only the first part any worker claims blocks; later ones (if any) run straight through.
    if (j->worker_holds.fetch_add(1) == 0) {
      if (!wait_for([&] { return j->caller_parts.load() == n_parts - 1; }))
        j->guard_expired.fetch_add(1);
    }
    j->worker_parts.fetch_add(1);
  }
};

TEST(ThreadPool, DelayedWorkerDoesNotBlockTheRest) {
  PoolMemory m(2);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 2);
  ASSERT_NE(pool, nullptr);
  for (int round = 0; round < 5; ++round) {
    HoldJob job;
    job.n_parts = 16;
    thread_pool_run(pool, HoldJob::fn, &job, job.n_parts);
    EXPECT_EQ(job.guard_expired.load(), 0u);
    EXPECT_EQ(job.worker_parts.load(), 1u);
    EXPECT_EQ(job.caller_parts.load(), 15u);
  }
  thread_pool_stop(pool);
}

// A worker that sleeps in its part (descheduled, in effect) while the caller finishes the rest;
// then the pool goes on with the next jobs as usual.
TEST(ThreadPool, SleepingWorkerThenNormalJobs) {
  PoolMemory m(3);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 3);
  ASSERT_NE(pool, nullptr);
  struct SleepJob {
    std::atomic<uint32_t> runs[32];
    std::atomic<uint32_t> slept{0};
    std::atomic<uint32_t> caller_started{0}, guard_expired{0};
    static void fn(void* ctx, uint32_t part, uint32_t, uint32_t slot) {
      SleepJob* j = static_cast<SleepJob*>(ctx);
      if (slot == 0 && j->caller_started.fetch_add(1) == 0) {
        // Make sure a worker is in the job (and asleep in it) before the caller goes on.
        if (!wait_for([&] { return j->slept.load() > 0; })) j->guard_expired.fetch_add(1);
      }
      if (slot != 0 && j->slept.fetch_add(1) == 0) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
      j->runs[part].fetch_add(1);
    }
  };
  for (int round = 0; round < 5; ++round) {
    SleepJob job;
    for (auto& r : job.runs) r.store(0);
    thread_pool_run(pool, SleepJob::fn, &job, 32);
    for (uint32_t p = 0; p < 32; ++p) EXPECT_EQ(job.runs[p].load(), 1u) << p;
    EXPECT_EQ(job.guard_expired.load(), 0u);
    CountJob next(9);
    next.n_threads = 3;
    thread_pool_run(pool, CountJob::fn, &next, 9);
    for (uint32_t p = 0; p < 9; ++p) EXPECT_EQ(next.runs[p].load(), 1u) << p;
  }
  thread_pool_stop(pool);
}

// Runs while workers are asleep on their futex (idle long enough to stop spinning).
TEST(ThreadPool, WakesSleepingWorkers) {
  PoolMemory m(2);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 2);
  ASSERT_NE(pool, nullptr);
  for (int round = 0; round < 3; ++round) {
    std::this_thread::sleep_for(std::chrono::milliseconds(30));
    CountJob job(64);
    job.n_threads = 2;
    thread_pool_run(pool, CountJob::fn, &job, 64);
    for (uint32_t p = 0; p < 64; ++p) EXPECT_EQ(job.runs[p].load(), 1u) << p;
  }
  thread_pool_stop(pool);
}

TEST(ThreadPool, StopAndRestart) {
  PoolMemory m(3);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 3);
  ASSERT_NE(pool, nullptr);
  CountJob a(10);
  a.n_threads = 3;
  thread_pool_run(pool, CountJob::fn, &a, 10);
  for (uint32_t p = 0; p < 10; ++p) EXPECT_EQ(a.runs[p].load(), 1u);
  thread_pool_stop(pool);
  thread_pool_stop(pool);  // idempotent
  // A stopped pool runs jobs on the caller alone.
  EXPECT_EQ(thread_pool_threads(pool), 1u);
  CountJob b(10);
  b.n_threads = 1;
  thread_pool_run(pool, CountJob::fn, &b, 10);
  for (uint32_t p = 0; p < 10; ++p) EXPECT_EQ(b.runs[p].load(), 1u);
  EXPECT_EQ(b.bad_slot.load(), 0u);
  // Restarted in the same memory, with another thread count.
  for (uint32_t n : {2u, 3u}) {
    pool = thread_pool_start(m.mem, m.size, n);
    ASSERT_NE(pool, nullptr);
    EXPECT_EQ(thread_pool_threads(pool), n);
    CountJob c(50);
    c.n_threads = n;
    for (int r = 0; r < 20; ++r) {
      for (auto& x : c.runs) x.store(0);
      thread_pool_run(pool, CountJob::fn, &c, 50);
      for (uint32_t p = 0; p < 50; ++p) ASSERT_EQ(c.runs[p].load(), 1u);
    }
    EXPECT_EQ(c.bad_slot.load(), 0u);
    thread_pool_stop(pool);
  }
  thread_pool_stop(nullptr);
}

TEST(ThreadPool, OneThreadAndNullPoolRunInOrderOnTheCaller) {
  struct OrderJob {
    std::vector<uint32_t> seen;
    std::vector<uint32_t> slots;
    static void fn(void* ctx, uint32_t part, uint32_t, uint32_t slot) {
      OrderJob* j = static_cast<OrderJob*>(ctx);
      j->seen.push_back(part);
      j->slots.push_back(slot);
    }
  };
  PoolMemory m(1);
  EXPECT_EQ(thread_pool_bytes(1), m.size);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 1);
  ASSERT_NE(pool, nullptr);
  EXPECT_EQ(thread_pool_threads(pool), 1u);
  for (ThreadPool* p : {pool, static_cast<ThreadPool*>(nullptr)}) {
    OrderJob j;
    thread_pool_run(p, OrderJob::fn, &j, 5);
    EXPECT_EQ(j.seen, (std::vector<uint32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(j.slots, (std::vector<uint32_t>(5, 0)));
  }
  EXPECT_EQ(thread_pool_threads(nullptr), 1u);
  thread_pool_stop(pool);
}

TEST(ThreadPool, MemoryContract) {
  // More threads need more memory (the workers' stacks).
  EXPECT_GT(thread_pool_bytes(2), thread_pool_bytes(1));
  EXPECT_GT(thread_pool_bytes(4), thread_pool_bytes(2));
  PoolMemory m(2);
  EXPECT_EQ(thread_pool_start(m.mem, m.size - 1, 2), nullptr);        // one byte short
  EXPECT_EQ(thread_pool_start(nullptr, m.size, 2), nullptr);
  EXPECT_EQ(thread_pool_start(static_cast<char*>(m.mem) + 8, m.size - 8, 1), nullptr);  // misaligned
  EXPECT_EQ(thread_pool_start(m.mem, m.size, 0), nullptr);
  EXPECT_EQ(thread_pool_start(m.mem, SIZE_MAX, kMaxThreads + 1), nullptr);
  ThreadPool* pool = thread_pool_start(m.mem, m.size, 2);
  ASSERT_NE(pool, nullptr);
  thread_pool_stop(pool);
}

}  // namespace
