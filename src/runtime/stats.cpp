// stats.cpp: goro::stats(), the runtime's counters for a service to export
// (Go's runtime/metrics /sched/* and what schedtrace prints).
//
// No stop-the-world: the goroutine counts come from one walk over allgs
// (each G's status and wait reason are atomic or written before its status
// is published), queue lengths from the rings' atomic head and tail,
// thread counts from sched's fields under sched.lock for a moment, timer
// counts under each P's timer lock. The numbers are each right at the
// moment they were read; together they are a snapshot, not a cut.
#include "runtime/stats.hpp"

#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <goro/stats.hpp>

#include "runtime/g.hpp"
#include "runtime/mstart.hpp"
#include "runtime/p.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

stat_counters stats_counters;

namespace {

constexpr int n_reasons = 64;  // > the number of wait_reason values

struct g_count {
  std::int64_t by_status[8] = {};
  std::int64_t by_reason[n_reasons] = {};
};

void count_g(G* gp, void* arg) {
  auto* c = static_cast<g_count*>(arg);
  std::uint32_t st = readgstatus(gp);
  if (st < 8) c->by_status[st]++;
  if (st == g_waiting) {
    int r = int(gp->waitreason.load(std::memory_order_relaxed));
    if (r >= 0 && r < n_reasons) c->by_reason[r]++;
  }
}

}  // namespace
}  // namespace goro::rt

namespace goro {

runtime_stats stats() {
  using namespace rt;
  detail::ensure_started(nullptr);
  runtime_stats s;

  g_count c;
  forallg(count_g, &c);
  s.runnable = c.by_status[g_runnable];
  s.running = c.by_status[g_running];
  s.in_syscall = c.by_status[g_syscall];
  s.waiting = c.by_status[g_waiting];
  s.goroutines = s.runnable + s.running + s.in_syscall + s.waiting;
  for (int r = 0; r < n_reasons; r++) {
    if (c.by_reason[r] == 0) continue;
    const char* name = wait_reason_string(wait_reason(r));
    s.waiting_by_reason.emplace_back(*name ? name : "unknown", c.by_reason[r]);
  }
  s.netpoll_waiting = c.by_reason[int(wait_reason::io_wait)];
  // One M per goroutine in a blocking call.
  s.threads_in_syscall = int(s.in_syscall);

  {
    lock_guard lk(sched.lock);
    s.threads = mcount();
    s.threads_idle = sched.nmidle;
    s.global_runq = sched.runq.size;
    // Counters of every P ever created, so they never go down when
    // gomaxprocs shrinks (allp only grows, under sched.lock).
    for (std::int32_t i = 0; i < 1024 && allp[i] != nullptr; i++) {
      P* pp = allp[i];
      s.goroutines_run += pp->nrun.load(std::memory_order_relaxed);
      s.steals += pp->nstolen.load(std::memory_order_relaxed);
      s.syscalls += pp->nsyscall.load(std::memory_order_relaxed);
    }
  }
  s.threads_spinning = sched.nmspinning.load(std::memory_order_relaxed);
  s.gomaxprocs = gomaxprocs_now();
  s.procs_idle = sched.npidle.load(std::memory_order_relaxed);

  for (std::int32_t i = 0; i < s.gomaxprocs; i++) {
    P* pp = allp[i];
    std::int64_t len = runqlen(pp);
    if (pp->runnext.load(std::memory_order_relaxed) != nullptr) len++;
    s.local_runq.push_back(len);
    s.local_runq_total += len;
    {
      lock_guard tl(pp->tm.lock);
      s.timers += std::int64_t(pp->tm.heap.size());
    }
  }
  s.handoffs = stats_counters.handoffs.load(std::memory_order_relaxed);
  s.preempt_requests =
      stats_counters.preempt_requests.load(std::memory_order_relaxed);
  s.preempted_cooperative =
      stats_counters.preempted_coop.load(std::memory_order_relaxed);
  debug::preempt_stats ps = debug::read_preempt_stats();
  s.preempted_async = ps.preempted;
  s.preempt_signals = ps.signals_sent;
  return s;
}

}  // namespace goro
