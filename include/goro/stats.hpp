// stats.hpp: runtime counters a service can export (Go's runtime/metrics
// and the numbers schedtrace prints), read without stopping the world.
//
//   goro::runtime_stats s = goro::stats();
//   metrics.gauge("goroutines", s.goroutines);
//   metrics.counter("goro_steals_total", s.steals);
//
// A snapshot, not a consistent cut: each number is read on its own (atomic
// or racy reads of counters that other threads keep changing), so sums may
// differ by the few goroutines that changed state while stats() ran, as in
// Go's schedtrace. Cost: a walk over every goroutine ever created (O(Gs),
// under the lock that guards that list; about 1 ms per million) for the
// per-state counts, and each P's timer lock and sched.lock for a moment.
// Starts the runtime if it is not running.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace goro {

struct runtime_stats {
  // Goroutines now, by state (Go's _G* states).
  std::int64_t goroutines = 0;  // alive: runnable + running + syscall + waiting
  std::int64_t runnable = 0;    // queued, waiting for a P
  std::int64_t running = 0;     // on a thread now
  std::int64_t in_syscall = 0;  // in a blocking call (goro::blocking)
  std::int64_t waiting = 0;     // parked
  // The parked ones by wait reason (Go's names: "chan receive", "sleep",
  // "IO wait", "sync.Mutex.Lock", ...); reasons with no goroutine left out.
  std::vector<std::pair<std::string, std::int64_t>> waiting_by_reason;

  // Threads (Ms) and processors (Ps), now.
  int threads = 0;             // threads the runtime has (sysmon included)
  int threads_idle = 0;        // parked with nothing to do
  int threads_spinning = 0;    // out of work, looking for some
  int threads_in_syscall = 0;  // running a goroutine's blocking call
  int gomaxprocs = 0;
  int procs_idle = 0;  // Ps with no thread

  // Run queues, now.
  std::int64_t global_runq = 0;          // the global run queue's length
  std::vector<std::int64_t> local_runq;  // per P: ring + runnext
  std::int64_t local_runq_total = 0;     // their sum

  // Timers and the network poller, now.
  std::int64_t timers = 0;           // timers pending in the Ps' heaps
  std::int64_t netpoll_waiting = 0;  // goroutines parked on a descriptor

  // Since the runtime started (monotonic counters).
  std::uint64_t goroutines_run = 0;         // dispatches (execute) on all Ps
  std::uint64_t steals = 0;                 // goroutines stolen between Ps
  std::uint64_t syscalls = 0;               // blocking calls entered
  std::uint64_t handoffs = 0;               // Ps handed off from blocking calls
  std::uint64_t preempt_requests = 0;       // sysmon asked a goroutine to yield
  std::uint64_t preempted_cooperative = 0;  // yielded at a safe point
  std::uint64_t preempted_async = 0;        // interrupted by signal
  std::uint64_t preempt_signals = 0;        // preemption signals sent
};

// A snapshot of the counters above (see the top of this file for what
// "snapshot" means and what it costs).
runtime_stats stats();

}  // namespace goro
