// schedtrace.cpp: GORO_DEBUG=schedtrace=N[,scheddetail=1] output, field
// for field as Go 1.21+ prints it (proc.go schedtrace).
#include "runtime/schedtrace.hpp"

#include <cstdarg>
#include <cstdio>
#include <string>

#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/sysmon.hpp"

namespace goro::rt {

void schedtrace_locked(bool detailed, std::int64_t now);

namespace {

// The trace is built in a buffer and written with one call, so its lines
// do not interleave with other output on stderr.
std::string* out = nullptr;

__attribute__((format(printf, 2, 3))) int trace_printf(FILE*, const char* fmt,
                                                       ...) {
  char buf[512];
  va_list ap;
  va_start(ap, fmt);
  int n = std::vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  if (out != nullptr && n > 0)
    out->append(buf,
                std::size_t(n) < sizeof buf ? std::size_t(n) : sizeof buf - 1);
  return n;
}

void print_g(G* gp, void*) {
  std::uint32_t st = readgstatus(gp);
  if (st == g_dead) return;
  M* mp = gp->m;
  trace_printf(
      stderr, "  G%llu: status=%u(%s) m=", (unsigned long long)gp->goid, st,
      st == g_waiting
          ? wait_reason_string(gp->waitreason.load(std::memory_order_relaxed))
          : "");
  if (mp)
    trace_printf(stderr, "%lld", (long long)mp->id);
  else
    trace_printf(stderr, "nil");
  if (M* lm = gp->lockedm)
    trace_printf(stderr, " lockedm=%lld\n", (long long)lm->id);
  else
    trace_printf(stderr, " lockedm=nil\n");
}

}  // namespace

void schedtrace(bool detailed) {
  std::int64_t now = nanotime();
  std::string text;
  out = &text;
  schedtrace_locked(detailed, now);
  out = nullptr;
  std::fwrite(text.data(), 1, text.size(), stderr);
  std::fflush(stderr);
}

void schedtrace_locked(bool detailed, std::int64_t now) {
  lock_guard lk(sched.lock);
  std::int32_t n = gomaxprocs_now();
  trace_printf(stderr,
               "SCHED %lldms: gomaxprocs=%d idleprocs=%d threads=%d "
               "spinningthreads=%d needspinning=%u idlethreads=%d "
               "runqueue=%d",
               (long long)((now - runtime_init_time) / 1000000), n,
               sched.npidle.load(), mcount(), sched.nmspinning.load(),
               sched.needspinning.load(), sched.nmidle, sched.runq.size);
  if (detailed) {
    trace_printf(stderr,
                 " gcwaiting=%s nmidlelocked=%d stopwait=%d sysmonwait=%s\n",
                 sched.gcwaiting.load() ? "true" : "false", sched.nmidlelocked,
                 sched.stopwait, sysmonwait.load() ? "true" : "false");
  }
  for (std::int32_t i = 0; i < n; i++) {
    P* pp = allp[i];
    std::uint32_t len = runqlen(pp);
    if (detailed) {
      M* mp = pp->m.load(std::memory_order_relaxed);
      trace_printf(stderr, "  P%d: status=%u schedtick=%u syscalltick=%u m=", i,
                   pp->status.load(), pp->schedtick.load(),
                   pp->syscalltick.load());
      if (mp)
        trace_printf(stderr, "%lld", (long long)mp->id);
      else
        trace_printf(stderr, "nil");
      std::size_t ntimers;
      {
        // timers (rank 50) after sched (40): allowed.
        lock_guard tl(pp->tm.lock);
        ntimers = pp->tm.heap.size();
      }
      trace_printf(stderr, " runqsize=%u gfreecnt=%d timerslen=%zu\n", len,
                   pp->gfree.size, ntimers);
    } else {
      trace_printf(stderr, "%s%u", i == 0 ? " [" : " ", len);
      if (i == n - 1) trace_printf(stderr, "]\n");
    }
  }
  if (!detailed) {
    if (n == 0) trace_printf(stderr, " []\n");
    return;
  }
  for (M* mp = allm; mp; mp = mp->alllink) {
    P* pp = mp->p;
    trace_printf(stderr, "  M%lld: p=", (long long)mp->id);
    if (pp)
      trace_printf(stderr, "%d", pp->id);
    else
      trace_printf(stderr, "nil");
    trace_printf(stderr, " curg=");
    if (G* gp = mp->curg.load())
      trace_printf(stderr, "%llu", (unsigned long long)gp->goid);
    else
      trace_printf(stderr, "nil");
    trace_printf(stderr,
                 " mallocing=0 throwing=0 preemptoff= locks=%d dying=0 "
                 "spinning=%s blocked=%s lockedg=",
                 mp->locks, mp->spinning ? "true" : "false",
                 mp->blocked ? "true" : "false");
    if (G* lg = mp->lockedg)
      trace_printf(stderr, "%llu\n", (unsigned long long)lg->goid);
    else
      trace_printf(stderr, "nil\n");
  }
  forallg(print_g, nullptr);
}

}  // namespace goro::rt
