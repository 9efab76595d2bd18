// p.hpp: the processor, the right to run goroutines (Go's p). Run queue,
// G cache and goid cache are per P, so threads come and go without moving
// them (brief decision 1).
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/timers.hpp"
#include "runtime/trace.hpp"

namespace goro::rt {

struct M;

enum pstatus : std::uint32_t {
  p_idle = 0,
  p_running = 1,
  p_syscall = 2,
  p_gcstop = 3,
  p_dead = 4,
};

constexpr std::uint32_t runq_size = 256;

struct P {
  std::int32_t id = 0;
  std::atomic<std::uint32_t> status{p_idle};
  P* link = nullptr;           // idle P list
  std::atomic<M*> m{nullptr};  // back link to the M (null when idle)
  // Incremented on every dispatch that starts a new time slice (execute
  // without inheritTime). sysmon watches it to find long time slices.
  std::atomic<std::uint32_t> schedtick{0};  // owner-written, sysmon-read
  // Incremented on every syscall exit and P retake (sysmon watches it).
  std::atomic<std::uint32_t> syscalltick{0};
  std::uint32_t sysmon_syscalltick = 0;
  std::int64_t sysmon_syscallwhen = 0;
  // sysmon's last view of this P (Go's sysmontick).
  std::uint32_t sysmon_schedtick = 0;
  std::int64_t sysmon_schedwhen = 0;
  // When sysmon last asked this slice's goroutine to yield (0: not yet),
  // and how long it waits before asking again: from an eighth of a slice,
  // doubling up to a slice (sysmon.cpp retake), so a goroutine in code
  // where a request cannot take effect (libc, a lock) is signalled about
  // once a slice, not on every sysmon round.
  std::int64_t sysmon_askedwhen = 0;
  std::int64_t sysmon_askgap = 0;
  // sysmon's view of nrun for the long-running report. Unlike schedtick,
  // nrun moves on every dispatch, a runnext chain's included (its links
  // share one time slice), so an nrun unchanged since sysmon_nrunwhen
  // means one goroutine has been running all along.
  std::uint64_t sysmon_nrun = 0;
  std::int64_t sysmon_nrunwhen = 0;
  // The dispatch (nrun) whose goroutine sysmon reported as long-running.
  std::uint64_t sysmon_reported_nrun = ~std::uint64_t(0);
  // The CPU time of the P's thread (tid) when the run passed half the
  // threshold (-1: not sampled for this run): a report needs the thread
  // to have been on a CPU, not waiting for one (sysmon.cpp, long_run_due).
  std::int64_t sysmon_cpu = -1;
  std::int64_t sysmon_cpuwhen = 0;
  pid_t sysmon_cputid = 0;
  // sysmon's last sample of the thread's CPU clock for the blocked-call
  // check (blockedsyscall.cpp): the run (nrun) and thread it was taken in,
  // when, and the value (-1: none yet).
  std::uint64_t sysmon_blknrun = 0;
  pid_t sysmon_blktid = 0;
  std::int64_t sysmon_blkwhen = 0;
  std::int64_t sysmon_blkcpu = -1;
  // Since when the thread has been seen off the CPUs in this run (0: it
  // ran), and the run sysmon reported as blocked with waiters.
  std::int64_t sysmon_blksince = 0;
  std::uint64_t sysmon_blkreported = ~std::uint64_t(0);
  // How long the thread must have been off the CPUs for the next signal,
  // and the wait before the next sample.
  std::int64_t sysmon_blkbackoff = 0;
  std::int64_t sysmon_blkgap = 0;
  // sysmon asked this P to switch goroutines (preemptone). Cleared by the
  // next schedule(), which also ends a runnext chain's shared slice there
  // (schedule.cpp, yield_runnext).
  std::atomic<bool> preempt{false};

  // The local run queue: a 256-slot ring owned by this P. Only the owner
  // writes runqtail and the slots; anyone may advance runqhead by CAS
  // (stealing). Head and tail are free-running; the slot is x % 256.
  alignas(64) std::atomic<std::uint32_t> runqhead{0};
  std::atomic<std::uint32_t> runqtail{0};
  std::atomic<G*> runq[runq_size] = {};
  // The G to run next, ahead of the ring; it inherits the time slice.
  std::atomic<G*> runnext{nullptr};

  // This P's timers, on their own line: thieves take the heap lock while
  // the owner works on runnext and the ring.
  alignas(64) timers tm;

  // Dead Gs with stacks, reused last-in first-out: the per-P stack cache
  // (a new goroutine takes the stack that was freed last, still warm).
  alignas(64) g_list gfree;
  // Gs without a stack, for new goroutines (Go's gFree.noStack, per P).
  g_list gnostack;
  // goids handed out in batches of 16 (Go's goidcache).
  std::uint64_t goidcache = 0;
  std::uint64_t goidcacheend = 0;
  // Goroutines created minus exited on this P; written only by the owner
  // (relaxed load + store, no read-modify-write), summed by num_goroutine.
  std::atomic<std::int64_t> ngoroutines{0};
  // Statistics for goro::debug::per_p_stats (owner-written).
  std::atomic<std::uint64_t> nrun{0};      // goroutines dispatched
  std::atomic<std::uint64_t> nstolen{0};   // goroutines stolen by this P
  std::atomic<std::uint64_t> nsyscall{0};  // blocking calls entered here
  // The execution tracer's write position in this P's buffer (owner-only).
  trace_cursor trace;
};

// Owner-only counter update without a read-modify-write instruction.
inline void owner_add(std::atomic<std::int64_t>& c, std::int64_t d) {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}
inline void owner_add(std::atomic<std::uint64_t>& c, std::uint64_t d) {
  c.store(c.load(std::memory_order_relaxed) + d, std::memory_order_relaxed);
}

}  // namespace goro::rt
