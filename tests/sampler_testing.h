// Shared by the sampler tests: sampler scratch in a real arena.
#ifndef RINGLM_TESTS_SAMPLER_TESTING_H_
#define RINGLM_TESTS_SAMPLER_TESTING_H_

#include <stdint.h>

#include <gtest/gtest.h>

#include "sampler.h"
#include "testing.h"

namespace ringlm_test {

// Scratch in a real arena, sized by a measure pass (the way the session does it).
struct SamplerScratchBuffer {
  AlignedBuffer mem;
  ringlm::internal::SamplerScratch s{};
  SamplerScratchBuffer(uint32_t vocab, uint32_t window, uint32_t max_bias = 8) {
    ringlm::internal::Arena measure(nullptr, 0);
    ringlm::internal::sampler_layout(measure, vocab, window, max_bias, &s);
    mem.resize(measure.used());
    ringlm::internal::Arena a(mem.data(), mem.size());
    ringlm::internal::sampler_layout(a, vocab, window, max_bias, &s);
    EXPECT_TRUE(a.ok());
  }
};

}  // namespace ringlm_test

#endif  // RINGLM_TESTS_SAMPLER_TESTING_H_
