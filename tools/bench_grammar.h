// `ringlm bench --grammar` (#15): the cost of the grammar's token mask on its own. The tokens a
// grammar-constrained run produced are replayed through the mask stage the step runs (the same
// internal functions, on a copy of the parse state), timing each token's mask + accept, so the
// figures are the grammar's alone: no forward pass, no sampling.
#ifndef RINGLM_TOOLS_BENCH_GRAMMAR_H_
#define RINGLM_TOOLS_BENCH_GRAMMAR_H_

#include <stdint.h>

#include <string>
#include <vector>

#include "ringlm/ringlm.h"

struct MaskTimes {
  std::vector<double> us;  // per token: mask + accept, microseconds
  uint64_t allowed = 0;    // tokens the masks allowed, summed over the replayed steps
  uint64_t hits = 0, misses = 0;  // remembered masks used / computed (one round)
  // Of the computed ones: derived from a relaxed state's masks (grammar/compiled.h), and the
  // relaxed states walked for them (the others were remembered).
  uint64_t derived = 0, relaxed_walks = 0;
};

// Replays `turns` (each from the grammar's start; every token must be one the grammar allows,
// i.e. output of a session with this grammar) with a parse state of `state_bytes` and a mask
// cache of `cache_bytes`, kept across the turns as a session keeps it. `rounds` times over, each
// from an empty cache (the per-token figure is the smallest of the rounds: the least disturbed).
// False with *err set when a token is refused or the state budget is exceeded.
bool replay_mask_times(const rlm_model* model, const rlm_grammar* grammar, uint32_t state_bytes,
                       uint32_t cache_bytes,
                       const std::vector<std::vector<int32_t>>& turns, uint32_t rounds,
                       MaskTimes* out, std::string* err);

// Percentile q (0..1) of v (nearest rank; v need not be sorted). 0 for an empty v.
double percentile(std::vector<double> v, double q);

#endif  // RINGLM_TOOLS_BENCH_GRAMMAR_H_
