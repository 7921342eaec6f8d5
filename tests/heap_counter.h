// Counting the process's heap calls, for the tests that prove the runtime allocation-free.
//
// Include this header in one source file of a test executable, and only of an executable that
// wants every heap call counted: it DEFINES the process's allocator entry points.
//  - Normal builds interpose malloc / calloc / realloc / free / memalign / aligned_alloc /
//    posix_memalign and every operator new / delete, forwarding to glibc's __libc_* functions
//    (glibc resolves these names to the executable's definitions first, so the runtime's and
//    libstdc++'s calls land here).
//  - Under ASan the sanitizer owns malloc, so the counts come from its allocator hooks
//    (__sanitizer_install_malloc_and_free_hooks), which see malloc, calloc, realloc and new alike.
//  - Under TSan nothing is interposed (it would take malloc away from the sanitizer) and nothing
//    is counted: kHeapCounting is false, and tests skip.
#ifndef RINGLM_TESTS_HEAP_COUNTER_H_
#define RINGLM_TESTS_HEAP_COUNTER_H_

#include <stddef.h>

#include <atomic>
#include <new>

#if defined(__SANITIZE_ADDRESS__)
#define RINGLM_HEAP_COUNTER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define RINGLM_HEAP_COUNTER_ASAN 1
#endif
#endif
#ifndef RINGLM_HEAP_COUNTER_ASAN
#define RINGLM_HEAP_COUNTER_ASAN 0
#endif

#if defined(__SANITIZE_THREAD__)
#define RINGLM_HEAP_COUNTER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define RINGLM_HEAP_COUNTER_TSAN 1
#endif
#endif
#ifndef RINGLM_HEAP_COUNTER_TSAN
#define RINGLM_HEAP_COUNTER_TSAN 0
#endif

namespace ringlm_test {

// Whether count_heap counts anything in this build.
constexpr bool kHeapCounting = !RINGLM_HEAP_COUNTER_TSAN;

struct HeapCalls {
  long allocs = 0;  // malloc, calloc, realloc, memalign family, operator new (all forms)
  long frees = 0;   // free and operator delete of non-null pointers
};

namespace heap_counter {
inline std::atomic<bool> counting{false};
inline std::atomic<long> allocs{0};
inline std::atomic<long> frees{0};
inline void count_alloc() {
  if (counting.load(std::memory_order_relaxed)) allocs.fetch_add(1, std::memory_order_relaxed);
}
inline void count_free(const volatile void* p) {
  if (p && counting.load(std::memory_order_relaxed)) frees.fetch_add(1, std::memory_order_relaxed);
}
}  // namespace heap_counter

// The heap calls the whole process makes while `fn` runs (from any thread).
template <typename F>
HeapCalls count_heap(F&& fn) {
  heap_counter::allocs = 0;
  heap_counter::frees = 0;
  heap_counter::counting = true;
  fn();
  heap_counter::counting = false;
  HeapCalls c;
  c.allocs = heap_counter::allocs.load();
  c.frees = heap_counter::frees.load();
  return c;
}

}  // namespace ringlm_test

#if RINGLM_HEAP_COUNTER_ASAN
// From <sanitizer/allocator_interface.h> (not installed with every compiler).
extern "C" int __sanitizer_install_malloc_and_free_hooks(
    void (*malloc_hook)(const volatile void*, size_t), void (*free_hook)(const volatile void*));

namespace {
void asan_malloc_hook(const volatile void*, size_t) { ringlm_test::heap_counter::count_alloc(); }
void asan_free_hook(const volatile void* p) { ringlm_test::heap_counter::count_free(p); }
struct InstallHooks {
  InstallHooks() { __sanitizer_install_malloc_and_free_hooks(asan_malloc_hook, asan_free_hook); }
} g_install_hooks;
}  // namespace

#elif !RINGLM_HEAP_COUNTER_TSAN  // interpose the allocator

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void __libc_free(void*);
void* __libc_memalign(size_t, size_t);

void* malloc(size_t n) {
  ringlm_test::heap_counter::count_alloc();
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t s) {
  ringlm_test::heap_counter::count_alloc();
  return __libc_calloc(n, s);
}
void* realloc(void* p, size_t n) {
  ringlm_test::heap_counter::count_alloc();
  return __libc_realloc(p, n);
}
void free(void* p) {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void* memalign(size_t a, size_t n) {
  ringlm_test::heap_counter::count_alloc();
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  ringlm_test::heap_counter::count_alloc();
  return __libc_memalign(a, n);
}
int posix_memalign(void** out, size_t a, size_t n) {
  ringlm_test::heap_counter::count_alloc();
  void* p = __libc_memalign(a, n);
  if (!p) return 12;  // ENOMEM
  *out = p;
  return 0;
}
}  // extern "C"

void* operator new(size_t n) {
  ringlm_test::heap_counter::count_alloc();
  void* p = __libc_malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n) {
  ringlm_test::heap_counter::count_alloc();
  void* p = __libc_malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new(size_t n, const std::nothrow_t&) noexcept {
  ringlm_test::heap_counter::count_alloc();
  return __libc_malloc(n ? n : 1);
}
void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  ringlm_test::heap_counter::count_alloc();
  return __libc_malloc(n ? n : 1);
}
void* operator new(size_t n, std::align_val_t a) {
  ringlm_test::heap_counter::count_alloc();
  void* p = __libc_memalign(static_cast<size_t>(a), n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void* operator new[](size_t n, std::align_val_t a) {
  ringlm_test::heap_counter::count_alloc();
  void* p = __libc_memalign(static_cast<size_t>(a), n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
void operator delete(void* p) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete[](void* p) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete(void* p, size_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete[](void* p, size_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete(void* p, size_t, std::align_val_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  ringlm_test::heap_counter::count_free(p);
  __libc_free(p);
}
#endif  // RINGLM_HEAP_COUNTER_ASAN / TSAN

#endif  // RINGLM_TESTS_HEAP_COUNTER_H_
