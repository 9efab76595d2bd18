// schedtrace.cpp: GORO_DEBUG=schedtrace=N[,scheddetail=1] output, field
// for field as Go 1.21+ prints it (proc.go schedtrace).
#include <cstdio>
#include <string>

#include "runtime/nanotime.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

void print_g(G* gp, void*) {
  std::uint32_t st = readgstatus(gp);
  if (st == g_dead) return;
  M* mp = gp->m;
  std::fprintf(stderr, "  G%llu: status=%u(%s) m=", (unsigned long long)gp->goid,
               st, st == g_waiting ? wait_reason_string(gp->waitreason) : "");
  if (mp)
    std::fprintf(stderr, "%lld", (long long)mp->id);
  else
    std::fprintf(stderr, "nil");
  std::fprintf(stderr, " lockedm=nil\n");
}

}  // namespace

void schedtrace(bool detailed) {
  std::int64_t now = nanotime();
  std::string line;
  lock_guard lk(sched.lock);
  std::int32_t n = nprocs();
  std::fprintf(stderr,
               "SCHED %lldms: gomaxprocs=%d idleprocs=%d threads=%d "
               "spinningthreads=%d needspinning=%u idlethreads=%d "
               "runqueue=%d",
               (long long)((now - runtime_init_time) / 1000000), n,
               sched.npidle.load(), mcount(), sched.nmspinning.load(),
               sched.needspinning.load(), sched.nmidle, sched.runq.size);
  if (detailed) {
    std::fprintf(stderr,
                 " gcwaiting=%s nmidlelocked=%d stopwait=0 sysmonwait=false\n",
                 sched.gcwaiting.load() ? "true" : "false", sched.nmidlelocked);
  }
  for (std::int32_t i = 0; i < n; i++) {
    P* pp = allp[i];
    std::uint32_t len = runqlen(pp);
    if (detailed) {
      M* mp = pp->m.load(std::memory_order_relaxed);
      std::fprintf(stderr,
                   "  P%d: status=%u schedtick=%u syscalltick=%u m=", i,
                   pp->status.load(), pp->schedtick.load(), pp->syscalltick.load());
      if (mp)
        std::fprintf(stderr, "%lld", (long long)mp->id);
      else
        std::fprintf(stderr, "nil");
      std::fprintf(stderr, " runqsize=%u gfreecnt=%d timerslen=0\n", len,
                   pp->gfree.size);
    } else {
      std::fprintf(stderr, "%s%u", i == 0 ? " [" : " ", len);
      if (i == n - 1) std::fprintf(stderr, "]\n");
    }
  }
  if (!detailed) {
    if (n == 0) std::fprintf(stderr, " []\n");
    std::fflush(stderr);
    return;
  }
  for (M* mp = allm; mp; mp = mp->alllink) {
    P* pp = mp->p;
    std::fprintf(stderr, "  M%lld: p=", (long long)mp->id);
    if (pp)
      std::fprintf(stderr, "%d", pp->id);
    else
      std::fprintf(stderr, "nil");
    std::fprintf(stderr, " curg=");
    if (G* gp = mp->curg.load())
      std::fprintf(stderr, "%llu", (unsigned long long)gp->goid);
    else
      std::fprintf(stderr, "nil");
    std::fprintf(stderr,
                 " mallocing=0 throwing=0 preemptoff= locks=%d dying=0 "
                 "spinning=%s blocked=%s lockedg=nil\n",
                 mp->locks, mp->spinning ? "true" : "false",
                 mp->blocked ? "true" : "false");
  }
  forallg(print_g, nullptr);
  std::fflush(stderr);
}

}  // namespace goro::rt
