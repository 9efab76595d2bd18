// sysmon.cpp: the system monitor, a thread without a P (Go's sysmon).
// It asks goroutines that have run a whole time slice (10 ms) to yield,
// retakes Ps from threads blocked in syscalls, returns idle stack memory to
// the OS, prints schedtrace, and retries deadlock detection while idle.
#include "runtime/sysmon.hpp"

#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

#include "runtime/asyncpreempt.hpp"
#include "runtime/blockedsyscall.hpp"
#include "runtime/checkdead.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/preempt.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedtrace.hpp"
#include "runtime/schedule.hpp"
#include "runtime/stack.hpp"
#include "runtime/stackshrink.hpp"
#include "runtime/symtab.hpp"
#include "runtime/syscall.hpp"
#include "runtime/timers.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

std::atomic<bool> sysmonwait{false};
note sysmonnote;

namespace {

// A goroutine has run for debug.longrunning ms without reaching a safe
// point (preemption was asked for a slice ago): say so once, with where the
// last preemption signal found it, instead of letting it starve the others
// silently. Racy reads of another M's state: a diagnostic.
// nrun: the P's dispatch count when sysmon began timing this run.
void report_long_running(P* pp, std::uint64_t nrun, std::int64_t ran_ns) {
  M* mp = pp->m.load(std::memory_order_acquire);
  G* gp = mp != nullptr ? mp->curg.load(std::memory_order_acquire) : nullptr;
  if (gp == nullptr) return;
  // The goroutine may have switched since sysmon read nrun, and its G may
  // even be reused by a new goroutine: goid is read atomically (the
  // spawner stores it the same way) and only trusted if the P's nrun has
  // not moved meanwhile, so the report never names the wrong goroutine.
  // (execute counts a dispatch before its release store of curg: a curg
  // seen here that is newer than the run being timed comes with an nrun
  // that has moved.)
  std::uint64_t goid = __atomic_load_n(&gp->goid, __ATOMIC_RELAXED);
  std::atomic_thread_fence(std::memory_order_acquire);
  if (pp->nrun.load(std::memory_order_relaxed) != nrun) return;
  std::uintptr_t pc = mp->sig_pc.load(std::memory_order_relaxed);
  int why = static_cast<int>(mp->sig_why.load(std::memory_order_relaxed));
  // Indexed by sig_reject.
  static const char* const whys[sig_reject_count] = {
      "", " (in code that is not preemptible: goro's, a shared library's)",
      " (holding an OS lock)", " (inside a goro::preempt_guard)",
      " (holding a runtime lock: e.g. a move constructor a channel calls)"};
  static_assert(int(sig_reject::none) == 0 &&
                int(sig_reject::not_preemptible_pc) == 1 &&
                int(sig_reject::os_lock) == 2 && int(sig_reject::guard) == 3 &&
                int(sig_reject::runtime_lock) == 4 &&
                int(sig_reject::runtime_lock) + 1 == sig_reject_count);
  std::string where;
  if (pc != 0) {
    symbol_info si = symbolize(pc);
    char hex[32];
    std::snprintf(hex, sizeof hex, "pc=%#lx", static_cast<unsigned long>(pc));
    where = std::string(" (last seen at ") +
            (si.function.empty() ? std::string(hex) : si.function) +
            (si.object.empty() ? std::string() : " in " + si.object) + ")";
  }
  std::fprintf(stderr,
               "goro: goroutine %llu has run %lld ms without a safe point%s%s;"
               " other goroutines on its processor wait "
               "(GORO_DEBUG=longrunning=N sets the threshold in ms, 0 off)\n",
               static_cast<unsigned long long>(goid),
               static_cast<long long>(ran_ns / 1000000), where.c_str(),
               why >= 0 && why < sig_reject_count ? whys[why] : "");
  std::fflush(stderr);
}

// Whether the goroutine timed on pp (dispatch r, running since
// pp->sysmon_nrunwhen) is to be reported now: it has run the threshold,
// and its thread was on a CPU for at least a quarter of the time since the
// run passed half the threshold. A thread the OS kept off the CPUs holds
// its P up too, but the goroutine is not the cause and "has run N ms" would
// not be true: the goroutine of a P whose thread is descheduled mid-switch
// (a spawn chain whose links each run for 100 ns) was reported on an
// overloaded machine, while its thread had run almost none of that time. A
// quarter still reports a spinning goroutine whose thread shares a CPU
// with three others.
bool long_run_due(P* pp, std::int64_t now, std::int64_t limit) {
  std::int64_t ran = now - pp->sysmon_nrunwhen;
  if (ran < limit / 2) return false;
  M* mp = pp->m.load(std::memory_order_acquire);
  pid_t tid =
      mp != nullptr ? __atomic_load_n(&mp->procid, __ATOMIC_RELAXED) : 0;
  if (pp->sysmon_cpu < 0 || pp->sysmon_cputid != tid) {
    pp->sysmon_cpu = thread_cpu_ns(tid);
    pp->sysmon_cpuwhen = now;
    pp->sysmon_cputid = tid;
    return false;
  }
  std::int64_t window = now - pp->sysmon_cpuwhen;
  if (ran < limit || window < limit / 2) return false;
  std::int64_t cpu = thread_cpu_ns(tid);
  if (cpu < 0 || (cpu - pp->sysmon_cpu) * 4 >= window) return true;
  // Mostly off the CPUs: look at the next half threshold.
  pp->sysmon_cpu = cpu;
  pp->sysmon_cpuwhen = now;
  return false;
}

// A request that has not taken effect is first repeated after
// slice / first_reask_divisor (then the gap doubles up to a slice).
constexpr std::int64_t first_reask_divisor = 8;

// Go's retake, the time-slice part: a P whose schedtick has not moved for
// a whole time slice runs one goroutine (or a runnext chain sharing one
// slice) for too long; ask it to yield. Returns the number of Ps retaken
// from syscalls, which is what resets sysmon's back-off.
int retake(std::int64_t now, std::int64_t* next_slice_end) {
  int n = 0;
  std::int64_t slice = time_slice_ns.load(std::memory_order_relaxed);
  std::int32_t np = gomaxprocs_now();
  for (std::int32_t i = 0; i < np; i++) {
    P* pp = allp[i];
    std::uint32_t s = pp->status.load(std::memory_order_acquire);
    bool sysretake = false;
    if (s == p_running || s == p_syscall) {
      std::uint32_t t = pp->schedtick.load(std::memory_order_relaxed);
      std::uint64_t r = pp->nrun.load(std::memory_order_relaxed);
      if (pp->sysmon_schedtick != t) {
        pp->sysmon_schedtick = t;
        pp->sysmon_schedwhen = now;
        pp->sysmon_askedwhen = 0;
        pp->sysmon_askgap = slice / first_reask_divisor;
      }
      // Go's rule: a P whose schedtick has not moved for a slice is asked
      // to switch. A runnext chain (a spawn chain, a pair handing off
      // through channels) shares the slice, as in Go; the request is
      // honoured at the chain's next switch (schedule's yield_runnext), or
      // at the goroutine's next safe point. Until then it is repeated,
      // each request possibly a signal, after an eighth of a slice, then a
      // quarter, a half, and from then on once a slice, not on every round:
      // a goroutine that was only passing through code a request cannot
      // interrupt is caught again soon, one that stays there (libc's
      // memset, an OS lock) is signalled about once a slice.
      std::int64_t end = pp->sysmon_askedwhen != 0
                             ? pp->sysmon_askedwhen + pp->sysmon_askgap
                             : pp->sysmon_schedwhen + slice;
      if (s == p_running && (*next_slice_end == 0 || end < *next_slice_end))
        *next_slice_end = end;
      // The long-running report times one goroutine's run, not the time
      // slice: a runnext chain shares a slice but reaches safe points.
      if (pp->sysmon_nrun != r) {
        pp->sysmon_nrun = r;
        pp->sysmon_nrunwhen = now;
        pp->sysmon_cpu = -1;
      }
      if (s == p_running && blocked_handoff_on.load(std::memory_order_relaxed))
        sysmon_check_blocked(pp, r, pp->sysmon_nrunwhen, now);
      if (debug.longrunning > 0 && s == p_running &&
          pp->sysmon_reported_nrun != r &&
          long_run_due(pp, now, std::int64_t(debug.longrunning) * 1000000)) {
        pp->sysmon_reported_nrun = r;
        report_long_running(pp, r, now - pp->sysmon_nrunwhen);
      }
      if (end <= now) {
        // A request that found no goroutine (the thread between two, on
        // g0) is made again at the next round.
        if (preemptone(pp)) {
          if (pp->sysmon_askedwhen != 0)
            pp->sysmon_askgap = std::min(2 * pp->sysmon_askgap, slice);
          pp->sysmon_askedwhen = now;
        }
        // In a syscall, preemptone does nothing: retake the P instead.
        sysretake = true;
      }
    }
    if (s != p_syscall) continue;
    // A P in a syscall for a whole sysmon tick (>= 20 us)...
    std::uint32_t t = pp->syscalltick.load(std::memory_order_relaxed);
    if (!sysretake && pp->sysmon_syscalltick != t) {
      pp->sysmon_syscalltick = t;
      pp->sysmon_syscallwhen = now;
      continue;
    }
    // ...is retaken only if useful: it has queued work, or nobody is
    // spinning or idle to take new work, or it has been 10 ms (so sysmon
    // can go to deep sleep).
    if (runqempty(pp) && sched.nmspinning.load() + sched.npidle.load() > 0 &&
        pp->sysmon_syscallwhen + 10 * 1000 * 1000 > now)
      continue;
    // While sysmon holds the P it counts as a running thread (Go's retake
    // does the same with nmidlelocked): the M we take it from may leave
    // its syscall meanwhile, queue its goroutine, go idle and run
    // checkdead; with sysmon not counted, that goroutine would look
    // runnable with no thread running.
    {
      lock_guard lk(sched.lock);
      incidlelocked(-1);
    }
    std::uint32_t expect = p_syscall;
    if (pp->status.compare_exchange_strong(expect, p_idle)) {
      n++;
      pp->syscalltick.store(t + 1, std::memory_order_relaxed);
      handoffp(pp);
    }
    {
      lock_guard lk(sched.lock);
      incidlelocked(1);
    }
  }
  return n;
}

// Idle stacks are returned to the OS in bounded batches: once a second
// while busy, and on every deep-sleep round while idle, so a burst of deep
// goroutines does not pin memory for long and sysmon never stalls on it.
constexpr std::int64_t scavenge_period = 1000LL * 1000 * 1000;
constexpr std::size_t scavenge_batch = 512;

void* sysmon(void*) {
  std::int64_t lasttrace = 0;
  std::int64_t lastscavenge = nanotime();
  int idle = 0;  // rounds in which sysmon found nothing to do
  std::int64_t delay = 0;
  // The earliest end of a slice of a goroutine that retake saw running
  // across two looks; 0: none.
  std::int64_t next_slice_end = 0;
  for (;;) {
    // Go's back-off: 20 us, doubling after 1 ms of idling, up to 10 ms.
    if (idle == 0)
      delay = 20;
    else if (idle > 50)
      delay *= 2;
    if (delay > 10 * 1000) delay = 10 * 1000;
    // While any P runs goroutines: wake when the earliest slice ends, and
    // at least ten times per slice (a goroutine that starts after a look
    // is only seen at the next one: it is preempted within 1.1 slices of
    // starting). Go's back-off alone lets a goroutine run up to two slices:
    // with 10 ms that is what puts Go's ticker p99 at 26-40 ms next to
    // call-free hogs, as a P's timers only run when its goroutine yields.
    // The price: up to 1000 wake-ups a second (10 ms slice) while busy.
    std::int64_t sleep_us = delay;
    if (next_slice_end != 0) {
      std::int64_t cap = time_slice_ns.load(std::memory_order_relaxed) / 10000;
      std::int64_t until = (next_slice_end - nanotime()) / 1000;
      if (until < cap) cap = until;
      if (cap < 20) cap = 20;
      if (sleep_us > cap) sleep_us = cap;
    }
    // While tracing, a round at least every millisecond: each one ends the
    // bursts of records that skip the clock (trace.hpp, trace_epoch), which
    // bounds the error of an interpolated time. Up to 1000 wake-ups a
    // second, only while a trace is taken.
    if (tracing() && sleep_us > 1000) sleep_us = 1000;
    usleep(useconds_t(sleep_us));
    trace_tick();
    coarse_clock_update();
    sigquit_check();
    std::int64_t now = nanotime();
    if (debug.schedtrace <= 0 && sched.npidle.load() == gomaxprocs_now()) {
      // Everything is idle: sleep deeply until startm wakes us (Go's
      // sysmonwait), instead of polling every 10 ms.
      // Idle: release idle stacks in small batches for as long as nothing
      // else needs sysmon (each batch is ~1 ms of madvise).
      while (sched.npidle.load() == gomaxprocs_now() &&
             scavenge_stacks(scavenge_batch) == scavenge_batch) {
      }
      stackshrink_release();
      lastscavenge = now;
      sched.lock.lock();
      if (sched.npidle.load() == gomaxprocs_now()) {
        sysmonwait.store(true);
        sched.lock.unlock();
        // Sleep until the next timer (work resumes then) but at most
        // 100 ms while a goro::run is active, so deadlock detection is
        // retried (e.g. after a foreign thread exits), else a minute.
        std::int64_t sleep = sched.main_active.load() > 0
                                 ? 100LL * 1000 * 1000
                                 : 60LL * 1000 * 1000 * 1000;
        std::int64_t next = timer_sleep_until();
        if (next != 0 && next - now < sleep)
          sleep = next - now > 0 ? next - now : 0;
        (void)sysmonnote.tsleep(sleep);
        // Re-check also when woken: checkdead decides from the state it
        // sees under sched.lock (any M running, a runnable G, a timer or a
        // running plain thread means no verdict), so an extra call is
        // harmless, and a wake-up must not skip the re-check that ends the
        // one-second grace for threads goro does not know.
        if (sched.main_active.load() > 0) {
          lock_guard lk(sched.lock);
          checkdead();
        }
        coarse_clock_update();
        sigquit_check();
        sched.lock.lock();
        sysmonwait.store(false);
        sysmonnote.clear();
        idle = 0;
        delay = 20;
        now = nanotime();
      }
      sched.lock.unlock();
    }
    // Poll the network if nobody has for 10 ms (every P busy running):
    // otherwise ready descriptors would wait until some P runs dry.
    std::int64_t lastpoll = sched.last_poll.load();
    if (netpollinited() && lastpoll != 0 && lastpoll + 10 * 1000 * 1000 < now) {
      sched.last_poll.compare_exchange_strong(lastpoll, now);
      g_queue list = netpoll(0);
      trace_netpoll(list.head, list.size);
      if (!list.empty()) {
        // Counted as a running M while injecting (Go's sysmon does the
        // same): injectglist may start Ms, and checkdead must not see the
        // readied goroutines with no thread running.
        {
          lock_guard lk(sched.lock);
          incidlelocked(-1);
        }
        injectglist(&list);
        {
          lock_guard lk(sched.lock);
          incidlelocked(1);
        }
      }
    }
    next_slice_end = 0;
    if (retake(now, &next_slice_end) != 0)
      idle = 0;
    else
      idle++;
    if (now - lastscavenge >= scavenge_period) {
      lastscavenge = now;
      scavenge_stacks(scavenge_batch);
    }
    stackshrink_release();  // at most once a second
    if (debug.schedtrace > 0 &&
        lasttrace + std::int64_t(debug.schedtrace) * 1000000 <= now) {
      lasttrace = now;
      schedtrace(debug.scheddetail > 0);
    }
  }
  return nullptr;
}

}  // namespace

void sysmon_wake_if_waiting() {
  // Lock-free (callers may hold sched.lock): whoever flips the flag wakes
  // sysmon. A wake-up that arrives after sysmon woke by itself leaves the
  // note set, which only shortens its next deep sleep.
  bool waiting = true;
  // seq_cst load: goro::run pairs it with its store to main_active.
  if (sysmonwait.load() && sysmonwait.compare_exchange_strong(waiting, false))
    sysmonnote.wakeup();
}

void sysmon_start() {
  {
    lock_guard lk(sched.lock);
    mreserve_id();
    sched.nmsys++;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  if (pthread_create(&t, &attr, sysmon, nullptr) != 0)
    fatal("sysmon: pthread_create");
  pthread_attr_destroy(&attr);
}

}  // namespace goro::rt
