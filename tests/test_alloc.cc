// The runtime is allocation-free: (1) its shared library imports no allocator symbol at all;
// (2) with the allocator interposed, open + size query + init + feed + step + eval + rewind make
// zero heap calls.
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>

#include <atomic>
#include <regex>

#include <gtest/gtest.h>

#include "fixtures.h"

using namespace ringlm_test;

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RINGLM_SANITIZER_BUILD 1
#else
#define RINGLM_SANITIZER_BUILD 0
#endif

#if !RINGLM_SANITIZER_BUILD
// Counting interposers. glibc resolves malloc & co. to the executable's definitions first, so
// every allocation in the process (runtime, libstdc++ operator new) lands here.
extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);
}
static std::atomic<bool> g_counting{false};
static std::atomic<long> g_calls{0};
static inline void count() {
  if (g_counting.load(std::memory_order_relaxed)) g_calls.fetch_add(1);
}
extern "C" void* malloc(size_t n) {
  count();
  return __libc_malloc(n);
}
extern "C" void* calloc(size_t a, size_t b) {
  count();
  return __libc_calloc(a, b);
}
extern "C" void* realloc(void* p, size_t n) {
  count();
  return __libc_realloc(p, n);
}
extern "C" void free(void* p) {
  if (p) count();
  __libc_free(p);
}
extern "C" int posix_memalign(void** out, size_t align, size_t n) {
  count();
  *out = __libc_memalign(align, n);
  return *out ? 0 : 12;
}
extern "C" void* aligned_alloc(size_t align, size_t n) {
  count();
  return __libc_memalign(align, n);
}
#endif

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
#if RINGLM_SANITIZER_BUILD
  GTEST_SKIP() << "allocator interposition conflicts with the sanitizer's own allocator";
#else
  AlignedBuffer bytes;
  std::string err;
  RandomModelShape shape;
  ASSERT_TRUE(random_model(shape, ringlm::fb::DType::Q8, &bytes, &err)) << err;
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

  g_calls = 0;
  g_counting = true;
  rlm_status st_open = rlm_model_open(bytes.data(), bytes.size(), &model);
  rlm_status st_mem = rlm_session_memory(&model, &cfg, &need, nullptr);
  rlm_status st_init = rlm_session_init(&model, &cfg, mem.data(), mem.size(), &s);
  rlm_status st_samp = s ? rlm_session_set_sampling(s, &sp) : RLM_ERR_INTERNAL;
  rlm_status st_stop = s ? rlm_session_add_stop_string(s, "zz", 2) : RLM_ERR_INTERNAL;
  rlm_status st_feed = s ? rlm_session_feed_text(s, "allocation free", 15) : RLM_ERR_INTERNAL;
  int steps_ok = 0;
  for (int i = 0; s && i < 100; ++i) {
    // Past the 32-slot ring several times over.
    if (rlm_step(s, &r) == RLM_OK) ++steps_ok;
    if (r.stop != RLM_STOP_NONE) rlm_session_feed_text(s, "again", 5);
  }
  rlm_status st_rew = s ? rlm_session_rewind(s, rlm_session_position(s)) : RLM_ERR_INTERNAL;
  g_counting = false;
  const long calls = g_calls.load();

  ASSERT_EQ(st_open, RLM_OK);
  ASSERT_EQ(st_mem, RLM_OK);
  ASSERT_LE(need, mem.size());
  ASSERT_EQ(st_init, RLM_OK);
  EXPECT_EQ(st_samp, RLM_OK);
  EXPECT_EQ(st_stop, RLM_OK);
  EXPECT_EQ(st_feed, RLM_OK);
  EXPECT_EQ(st_rew, RLM_OK);
  EXPECT_EQ(steps_ok, 100);
  EXPECT_EQ(calls, 0) << "heap calls during open/init/feed/step";
  // The interposer itself works (otherwise the zero above proves nothing).
  g_calls = 0;
  g_counting = true;
  void* volatile p = malloc(16);
  free(p);
  g_counting = false;
  EXPECT_EQ(g_calls.load(), 2);
#endif
}
