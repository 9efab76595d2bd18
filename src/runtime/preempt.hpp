// preempt.hpp: cooperative preemption requests and checks.
#pragma once

#include <atomic>
#include <cstdint>

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

// Every other call into goro that a plain thread can make (ch.len(),
// making a channel, goro::go, a wait_group, a timer): counts the thread as
// using goro, so checkdead does not mistake it for an unrelated thread
// while it works before its next channel operation. One TLS read on Ms.
inline void plain_thread_entry() {
  if (getm() == nullptr) note_extern_thread();
}

// The check at every runtime entry: one relaxed load when nothing is asked.
inline void preempt_check() {
  G* gp = getg();
  if (gp != nullptr && gp->preempt.load(std::memory_order_relaxed)) gopreempt();
}

// Go's forcePreemptNS, the time slice: a goroutine that has run this long
// is asked to yield (and interrupted, with async preemption). 10 ms as in
// Go unless options::time_slice or GORO_TIMESLICE says otherwise.
constexpr std::int64_t default_time_slice_ns = 10 * 1000 * 1000;
constexpr std::int64_t min_time_slice_ns = 100 * 1000;
constexpr std::int64_t max_time_slice_ns = 10LL * 1000 * 1000 * 1000;
extern std::atomic<std::int64_t> time_slice_ns;
// Start-up: opt_ns (options::time_slice, 0: unset), else GORO_TIMESLICE
// (a duration such as 1ms, 500us, 2s; malformed or out of range is a fatal
// error), else the default.
void timeslice_init(std::int64_t opt_ns);
// Why ns cannot be a time slice, or null.
const char* time_slice_problem(std::int64_t ns);

}  // namespace goro::rt
