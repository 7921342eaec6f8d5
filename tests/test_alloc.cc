// The runtime is allocation-free: (1) its shared library imports no allocator symbol at all;
// (2) with every heap call counted (heap_counter.h), open + size query + init + feed + step +
// rewind make none.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <regex>

#include <gtest/gtest.h>

#include "fixtures.h"
#include "heap_counter.h"

using namespace ringlm_test;

TEST(Alloc, SharedLibraryImportsNoAllocator) {
  std::string out;
  const std::string cmd = std::string("nm -D --undefined-only '") + RINGLM_LIB_PATH + "'";
  ASSERT_EQ(run_command(cmd, &out), 0) << cmd;
  ASSERT_FALSE(out.empty());
  const std::regex banned(
      R"(\b(malloc|calloc|realloc|free|posix_memalign|aligned_alloc|memalign|valloc|pvalloc|strdup|strndup|_Znwm|_Znam|_Znwj|_Znaj|_ZdlPv\w*|_ZdaPv\w*|_ZnwmSt\w*|_ZnamSt\w*|__cxa_allocate_exception|__cxa_throw)\b)");
  std::smatch m;
  EXPECT_FALSE(std::regex_search(out, m, banned)) << "imports " << m.str() << "\n" << out;
  // And no C++ runtime dependency at all (no exceptions, RTTI or iostreams).
  EXPECT_EQ(out.find("_ZTV"), std::string::npos) << out;
  EXPECT_EQ(out.find("__gxx_personality"), std::string::npos) << out;
}

TEST(Alloc, InitFeedStepMakeZeroHeapCalls) {
  if (!kHeapCounting) GTEST_SKIP() << "no heap counting under ThreadSanitizer";
  AlignedBuffer bytes;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(random_model(shape, ringlm::internal::fb::DType::Q8, &bytes, &err)) << err;
  rlm_session_config cfg;
  rlm_session_config_default(&cfg);
  cfg.n_ctx = 32;
  AlignedBuffer mem(1 << 22);
  rlm_model model;
  rlm_session* s = nullptr;
  rlm_sampling sp;
  rlm_sampling_default(&sp);
  rlm_step_result r;
  rlm_step_result_default(&r);
  size_t need = 0;

  rlm_status st_open, st_mem, st_init, st_samp, st_stop, st_feed, st_rew;
  int steps_ok = 0;
  const HeapCalls calls = count_heap([&] {
    st_open = rlm_model_open(bytes.data(), bytes.size(), &model);
    st_mem = rlm_session_memory(&model, &cfg, &need, nullptr);
    st_init = rlm_session_init(&model, &cfg, mem.data(), mem.size(), &s);
    st_samp = s ? rlm_session_set_sampling(s, &sp) : RLM_ERR_INTERNAL;
    st_stop = s ? rlm_session_add_stop_string(s, "zz", 2) : RLM_ERR_INTERNAL;
    st_feed = s ? rlm_session_feed_text(s, "allocation free", 15) : RLM_ERR_INTERNAL;
    for (int i = 0; s && i < 100; ++i) {
      // Past the 32-slot ring several times over.
      if (rlm_step(s, &r) == RLM_OK) ++steps_ok;
      if (r.stop != RLM_STOP_NONE) rlm_session_feed_text(s, "again", 5);
    }
    st_rew = s ? rlm_session_rewind(s, rlm_session_position(s)) : RLM_ERR_INTERNAL;
  });

  ASSERT_EQ(st_open, RLM_OK);
  ASSERT_EQ(st_mem, RLM_OK);
  ASSERT_LE(need, mem.size());
  ASSERT_EQ(st_init, RLM_OK);
  EXPECT_EQ(st_samp, RLM_OK);
  EXPECT_EQ(st_stop, RLM_OK);
  EXPECT_EQ(st_feed, RLM_OK);
  EXPECT_EQ(st_rew, RLM_OK);
  EXPECT_EQ(steps_ok, 100);
  EXPECT_EQ(calls.allocs, 0) << "heap allocations during open/init/feed/step";
  EXPECT_EQ(calls.frees, 0) << "heap frees during open/init/feed/step";
  // The counter itself works (otherwise the zeros above prove nothing).
  const HeapCalls probe = count_heap([] {
    void* volatile p = malloc(16);
    free(p);
  });
  EXPECT_EQ(probe.allocs, 1);
  EXPECT_EQ(probe.frees, 1);
}
