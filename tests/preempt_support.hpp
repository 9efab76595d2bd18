// preempt_support.hpp: what the preemption tests share: call-free work in
// the test executable (the code signal preemption may interrupt) and
// goro::options for a GOMAXPROCS.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/runtime.hpp>

namespace goro_test {

// An LCG step: work the compiler cannot fold away.
constexpr std::uint64_t lcg_k = 6364136223846793005ULL;
constexpr std::uint64_t lcg_c = 1442695040888963407ULL;

// Call-free work for `us` microseconds: the clock is read through the
// vDSO, the loop itself is the executable's (preemptible); the empty asm
// keeps the compiler from folding the 4096 steps into one.
__attribute__((noinline)) inline std::uint64_t work_us(int us) {
  auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(us);
  std::uint64_t x = 1;
  while (std::chrono::steady_clock::now() < until)
    for (int i = 0; i < 4096; i++) {
      x = x * lcg_k + lcg_c;
      asm volatile("" : "+r"(x));
    }
  return x;
}

// A call-free loop until stop is set.
__attribute__((noinline)) inline std::uint64_t spin(
    const std::atomic<bool>& stop) {
  std::uint64_t x = 1;
  while (!stop.load(std::memory_order_relaxed)) x = x * lcg_k + lcg_c;
  return x;
}

inline goro::options procs(int n) {
  goro::options o;
  o.gomaxprocs = n;
  return o;
}

}  // namespace goro_test
