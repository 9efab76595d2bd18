// preempt.hpp: cooperative preemption requests and checks.
#pragma once

#include "runtime/checkdead.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

// Yields the running goroutine to the global run queue (a preemption).
void gopreempt();
// Asks the goroutine running on pp to yield (Go's preemptone).
bool preemptone(P* pp);

// Entry to a channel operation or select: a plain thread is counted for
// deadlock detection (checkdead.cpp), a goroutine honours a pending
// preemption request. One TLS read for both.
inline void runtime_entry() {
  M* mp = getm();
  if (mp == nullptr) {
    note_extern_thread();
    return;
  }
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp != nullptr && gp->preempt.load(std::memory_order_relaxed)) gopreempt();
}

// The check at every runtime entry: one relaxed load when nothing is asked.
inline void preempt_check() {
  G* gp = getg();
  if (gp != nullptr && gp->preempt.load(std::memory_order_relaxed)) gopreempt();
}

// Go's forcePreemptNS: the time slice.
constexpr std::int64_t force_preempt_ns = 10 * 1000 * 1000;

}  // namespace goro::rt
