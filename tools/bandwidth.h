// Memory bandwidth probes for `ringlm bench`: how fast this machine can stream bytes from DRAM,
// the ceiling a memory-bound decode step is compared against.
#ifndef RINGLM_TOOLS_BANDWIDTH_H_
#define RINGLM_TOOLS_BANDWIDTH_H_

#include <stddef.h>
#include <stdint.h>

struct BandwidthResult {
  uint32_t threads = 0;
  double read_gbs = 0;   // sum over a read-only buffer (bytes read / s, 1e9): the faster of
  double read1_gbs = 0;  // one sequential stream per thread
  double read4_gbs = 0;  // and four streams per thread (its slice's quarters side by side)
  double triad_gbs = 0;  // STREAM triad a[i] = b[i] + s * c[i] (3 x 8 bytes per element / s)
};

// Measures with `threads` threads (each streams its own contiguous slice) over buffers of
// `bytes` each (the read tests use one buffer, the triad three), best of `reps` timed runs after
// one untimed pass that also faults the pages in. Buffers should be far larger than the last-level
// cache (256 MiB is). Returns false (zeros) if the memory cannot be allocated.
bool measure_bandwidth(size_t bytes, uint32_t threads, int reps, BandwidthResult* out);

#endif  // RINGLM_TOOLS_BANDWIDTH_H_
