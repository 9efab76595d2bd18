// Go's testing.AllocsPerRun for the ports of Go's tests: a replaced global
// operator new that counts allocations while counting is on. Include it
// from ONE translation unit of a test executable (it defines the
// replacement). Not under sanitizers, which own operator new: there
// alloc_counting_available is false.
#pragma once

#include <atomic>
#include <cstdlib>
#include <new>
#include <string>

#include "test_support.hpp"

namespace goro_test {

inline std::atomic<bool> g_alloc_counting{false};
inline std::atomic<long> g_allocs{0};
constexpr bool alloc_counting_available = !GORO_TEST_SANITIZED;

// Allocations (by any thread) while fn runs.
template <class F>
long allocs_during(F&& fn) {
  const long before = g_allocs.load();
  g_alloc_counting.store(true);
  fn();
  g_alloc_counting.store(false);
  return g_allocs.load() - before;
}

// True when the counter sees an allocation it must see (a self-check, so
// that a zero count means something).
inline bool alloc_counter_works() {
  return allocs_during([] {
           std::string s(1000, 'x');
           asm volatile("" : : "r"(s.data()) : "memory");
         }) > 0;
}

}  // namespace goro_test

#if !GORO_TEST_SANITIZED
namespace goro_test {
// Called through a pointer so that GCC does not pair the replaced operator
// new with free() at inlined delete sites (-Wmismatched-new-delete).
inline void (*volatile g_free)(void*) = std::free;
}  // namespace goro_test
// Relaxed: the count is only read after the measured code, by the same
// goroutine that turned counting on and off (seq_cst stores/loads there).
void* operator new(std::size_t n) {
  if (goro_test::g_alloc_counting.load(std::memory_order_relaxed))
    goro_test::g_allocs.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { goro_test::g_free(p); }
void operator delete(void* p, std::size_t) noexcept { goro_test::g_free(p); }
#endif
