// tls.hpp: the runtime's thread-local state.
//
// A goroutine can park on one thread and resume on another, so the address
// of a thread_local computed before a switch may belong to the wrong thread
// after it (brief decision 7). The compiler is allowed to cache that address
// (it assumes a function stays on one thread), so the runtime never touches
// its TLS through a normal thread_local access in code that can switch:
// getm() reads the slot with a volatile asm the compiler can neither cache
// nor move across the calls that switch goroutines.
#pragma once

#include "runtime/m.hpp"

extern "C" {
// The M running on this thread; null on plain threads. Initial-exec TLS so
// the read is one instruction pair, also from the shared library.
extern __thread goro::rt::M* goro_tls_m
    __attribute__((tls_model("initial-exec")));
}

namespace goro::rt {

inline M* getm() {
  M* mp;
  asm volatile(
      "movq goro_tls_m@gottpoff(%%rip), %0\n\t"
      "movq %%fs:(%0), %0"
      : "=r"(mp)
      :
      : "memory");
  return mp;
}

// The goroutine running on this thread, or null (g0 or a plain thread).
inline G* getg() {
  M* mp = getm();
  return mp ? mp->curg.load(std::memory_order_relaxed) : nullptr;
}

}  // namespace goro::rt
