// Read and STREAM-triad bandwidth (see bandwidth.h).
#include "bandwidth.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <thread>
#include <vector>

#include "cli_common.h"

namespace {

// Keeps the read loop's result alive.
std::atomic<uint64_t> g_sink{0};

__attribute__((noinline)) uint64_t read_sum(const uint64_t* __restrict p, size_t n) {
  // Eight independent accumulators: the loop is bound by loads, not by an add chain.
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    s0 += p[i];
    s1 += p[i + 1];
    s2 += p[i + 2];
    s3 += p[i + 3];
    s4 += p[i + 4];
    s5 += p[i + 5];
    s6 += p[i + 6];
    s7 += p[i + 7];
  }
  for (; i < n; ++i) s0 += p[i];
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7;
}

// The same sum over four equal parts of [p, p + n) read side by side, a 64-byte line of each
// in turn: four long sequential streams, as decode's strided row tiles read a matrix
// (kernels/tile.inc). On the Zen 5 host this measured 32-38 GB/s where one stream gave 30-34: the
// ceiling of decode is the faster of the two patterns.
__attribute__((noinline)) uint64_t read_sum4(const uint64_t* __restrict p, size_t n) {
  const size_t part = n / 4 / 8 * 8;  // whole lines per part
  const uint64_t* q[4] = {p, p + part, p + 2 * part, p + 3 * part};
  uint64_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0, s5 = 0, s6 = 0, s7 = 0;
  for (size_t i = 0; i < part; i += 8) {
    for (int k = 0; k < 4; ++k) {
      const uint64_t* l = q[k] + i;
      s0 += l[0];
      s1 += l[1];
      s2 += l[2];
      s3 += l[3];
      s4 += l[4];
      s5 += l[5];
      s6 += l[6];
      s7 += l[7];
    }
  }
  return s0 + s1 + s2 + s3 + s4 + s5 + s6 + s7 + read_sum(p + 4 * part, n - 4 * part);
}

__attribute__((noinline)) void triad(double* __restrict a, const double* __restrict b,
                                     const double* __restrict c, double s, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}

// Runs fn(t, begin, end) on `threads` threads over [0, n) split evenly; returns wall seconds from
// the release of all (already started) threads to the last one's finish.
template <typename F>
double run_split(uint32_t threads, size_t n, F fn) {
  std::atomic<uint32_t> ready{0};
  std::atomic<bool> go{false};
  std::vector<std::thread> pool;
  pool.reserve(threads);
  for (uint32_t t = 0; t < threads; ++t) {
    const size_t b = n * t / threads, e = n * (t + 1) / threads;
    pool.emplace_back([&, t, b, e] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) {
      }
      fn(t, b, e);
    });
  }
  while (ready.load() != threads) {
  }
  const double t0 = now_s();
  go.store(true, std::memory_order_release);
  for (std::thread& th : pool) th.join();
  return now_s() - t0;
}

}  // namespace

bool measure_bandwidth(size_t bytes, uint32_t threads, int reps, BandwidthResult* out) {
  *out = BandwidthResult();
  out->threads = threads;
  if (threads == 0 || reps < 1) return false;
  const size_t n = (bytes / 64) * 8;  // uint64 / double elements, whole cache lines
  if (n < 8 * threads) return false;
  const size_t sz = n * 8;
  void* pa = aligned_alloc(64, sz);
  void* pb = aligned_alloc(64, sz);
  void* pc = aligned_alloc(64, sz);
  if (!pa || !pb || !pc) {
    free(pa);
    free(pb);
    free(pc);
    return false;
  }
  double* a = static_cast<double*>(pa);
  double* b = static_cast<double*>(pb);
  double* c = static_cast<double*>(pc);
  // First touch by the thread that will stream the slice (page placement on NUMA hosts).
  run_split(threads, n, [&](uint32_t, size_t s, size_t e) {
    for (size_t i = s; i < e; ++i) {
      a[i] = 0.0;
      b[i] = 1.0;
      c[i] = 2.0;
    }
  });
  const uint64_t* ru = static_cast<const uint64_t*>(pb);
  double best_read = 0, best_read4 = 0, best_triad = 0;
  for (int r = 0; r <= reps; ++r) {  // r == 0: untimed warm-up
    const double tr = run_split(threads, n, [&](uint32_t, size_t s, size_t e) {
      g_sink.fetch_add(read_sum(ru + s, e - s), std::memory_order_relaxed);
    });
    const double tr4 = run_split(threads, n, [&](uint32_t, size_t s, size_t e) {
      g_sink.fetch_add(read_sum4(ru + s, e - s), std::memory_order_relaxed);
    });
    const double tt = run_split(threads, n, [&](uint32_t, size_t s, size_t e) {
      triad(a + s, b + s, c + s, 3.0, e - s);
    });
    if (r == 0) continue;
    if (tr > 0) best_read = std::max(best_read, static_cast<double>(sz) / tr * 1e-9);
    if (tr4 > 0) best_read4 = std::max(best_read4, static_cast<double>(sz) / tr4 * 1e-9);
    if (tt > 0) best_triad = std::max(best_triad, 3.0 * static_cast<double>(sz) / tt * 1e-9);
  }
  free(pa);
  free(pb);
  free(pc);
  out->read1_gbs = best_read;
  out->read4_gbs = best_read4;
  out->read_gbs = std::max(best_read, best_read4);
  out->triad_gbs = best_triad;
  return true;
}
