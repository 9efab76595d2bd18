// mstart.cpp: OS threads (Ms) and their parking: newm, mstart, startm,
// stopm, wakep, the idle M and idle P lists, acquirep/releasep.
#include "runtime/mstart.hpp"

#include <cxxabi.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "runtime/asyncpreempt.hpp"
#include "runtime/checkdead.hpp"
#include "runtime/coarseclock.hpp"
#include "runtime/panic.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/sysmon.hpp"
#include "runtime/testhook.hpp"
#include "runtime/tls.hpp"

extern "C" {
__thread goro::rt::M* goro_tls_m __attribute__((tls_model("initial-exec"))) =
    nullptr;
}

namespace goro::rt {

M* allm = nullptr;

namespace {

constexpr std::size_t m_stack_size = 512 * 1024;

[[noreturn]] void mstart1(M* mp) {
  // The scheduler stack (g0) is this thread's own stack. mcall restarts
  // the scheduler a little below this frame every time.
  char here;
  mp->g0_sp = reinterpret_cast<void*>(
      (reinterpret_cast<std::uintptr_t>(&here) - 512) & ~std::uintptr_t(15));
  pthread_attr_t attr;
  if (pthread_getattr_np(pthread_self(), &attr) == 0) {
    void* addr;
    std::size_t size;
    pthread_attr_getstack(&attr, &addr, &size);
    mp->g0_lo = addr;
    mp->g0_size = size;
    pthread_attr_destroy(&attr);
  }
#ifdef GORO_HAVE_TSAN
  mp->tsan_g0_fiber = __tsan_get_current_fiber();
#endif
  if (mp->nextp) {
    acquirep(mp->nextp);
    mp->nextp = nullptr;
  }
  mp->spinning = mp->spinning_at_start;
  schedule();
}

void* mstart(void* arg) {
  M* mp = static_cast<M*>(arg);
  goro_tls_m = mp;
  mp->procid = pid_t(syscall(SYS_gettid));
  mp->eh_globals = abi::__cxa_get_globals();
  minit_signals();
  minit_asyncpreempt(mp);
  mstart1(mp);
}

}  // namespace

std::int64_t mreserve_id() {
  if (sched.mnext + 1 < sched.mnext) fatal("runtime: thread ID overflow");
  std::int64_t id = sched.mnext++;
  if (mcount() > sched.maxmcount) {
    std::fprintf(stderr, "runtime: program exceeds %d-thread limit\n",
                 sched.maxmcount);
    fatal("thread exhaustion");
  }
  return id;
}

std::int32_t mcount() { return std::int32_t(sched.mnext - sched.nmfreed); }

void newm(P* pp, bool spinning, std::int64_t id) {
  M* mp = new M;
  mp->id = id;
  mp->nextp = pp;
  mp->spinning_at_start = spinning;
  mp->rand_state = std::uint64_t(id) * 0x9E3779B97F4A7C15ULL ^
                   std::uint64_t(reinterpret_cast<std::uintptr_t>(mp));
  {
    lock_guard lk(sched.lock);
    mp->alllink = allm;
    allm = mp;
  }
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, m_stack_size);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  // New threads must not inherit the creator's signal mask oddities; the
  // runtime's threads take no asynchronous signals except those it wants.
  int err = pthread_create(&mp->thread, &attr, mstart, mp);
  pthread_attr_destroy(&attr);
  if (err != 0) {
    std::fprintf(stderr, "runtime: failed to create new OS thread (%s)\n",
                 std::strerror(err));
    fatal("newosproc");
  }
}

void acquirep(P* pp) {
  M* mp = getm();
  if (mp->p != nullptr || pp->m.load(std::memory_order_relaxed) != nullptr ||
      pp->status.load(std::memory_order_relaxed) != p_idle)
    fatal("acquirep: invalid p state");
  mp->p = pp;
  // Release: sysmon reads pp->m with acquire and then looks inside the M.
  pp->m.store(mp, std::memory_order_release);
  pp->status.store(p_running, std::memory_order_relaxed);
  trace_proc_m(pp);
  // A P starts running: sysmon must watch it again if it sleeps deeply.
  if (sysmonwait.load(std::memory_order_relaxed)) sysmon_wake_if_waiting();
}

P* releasep() {
  M* mp = getm();
  P* pp = mp->p;
  if (pp == nullptr || pp->m.load(std::memory_order_relaxed) != mp ||
      pp->status.load(std::memory_order_relaxed) != p_running)
    fatal("releasep: invalid p state");
  trace_proc_stop(pp);
  mp->p = nullptr;
  pp->m.store(nullptr, std::memory_order_relaxed);
  pp->status.store(p_idle, std::memory_order_relaxed);
  return pp;
}

void pidleput(P* pp) {
  if (!runqempty(pp)) fatal("pidleput: P has non-empty run queue");
  {
    // An idle P keeps its timer-mask bit while its heap holds timers, so
    // thieves still run them. Timers can be added to an idle P (from a
    // thread with no P: a plain thread or a goroutine in a blocking
    // region), so the emptiness check and the clear happen under the heap
    // lock, which timer_add also holds while it sets the bit.
    lock_guard lk(pp->tm.lock);
    bool no_timers = pp->tm.heap.empty();
    run_test_hook(testhooks.pidleput_timers, pp, 0);
    if (no_timers) timerpmask.clear(pp->id);
  }
  run_test_hook(testhooks.pidleput_timers, pp, 1);
  idlepmask.set(pp->id);
  pp->link = sched.pidle;
  sched.pidle = pp;
  sched.npidle.fetch_add(1);
}

P* pidleget() {
  P* pp = sched.pidle;
  if (pp != nullptr) {
    // The P may get timers again once someone runs on it.
    timerpmask.set(pp->id);
    idlepmask.clear(pp->id);
    sched.pidle = pp->link;
    sched.npidle.fetch_sub(1);
  }
  return pp;
}

P* pidleget_spinning() {
  P* pp = pidleget();
  // Work was found but there is no idle P to run it: ask the next M that
  // is about to drop its P to spin instead (Go's needspinning).
  if (pp == nullptr) sched.needspinning.store(1);
  return pp;
}

void mput(M* mp) {
  mp->schedlink = sched.midle;
  sched.midle = mp;
  sched.nmidle++;
  checkdead();
}

M* mget() {
  M* mp = sched.midle;
  if (mp != nullptr) {
    sched.midle = mp->schedlink;
    sched.nmidle--;
  }
  return mp;
}

void stopm() {
  M* mp = getm();
  if (mp->p != nullptr) fatal("stopm holding p");
  if (mp->spinning) fatal("stopm spinning");
  {
    lock_guard lk(sched.lock);
    mput(mp);
  }
  lockrank_assert_none("stopm");
  mp->blocked = true;  // shown by scheddetail
  mp->park.sleep();
  mp->park.clear();
  mp->blocked = false;
  coarse_clock_update();  // back from a sleep: a slow path anyway
  acquirep(mp->nextp);
  mp->nextp = nullptr;
}

void startm(P* pp, bool spinning) {
  sysmon_wake_if_waiting();
  sched.lock.lock();
  if (pp == nullptr) {
    pp = pidleget();
    if (pp == nullptr) {
      sched.lock.unlock();
      if (spinning) {
        // The caller counted us as spinning; undo it.
        if (sched.nmspinning.fetch_sub(1) - 1 < 0)
          fatal("startm: negative nmspinning");
      }
      return;
    }
  }
  M* nmp = mget();
  if (nmp == nullptr) {
    // Reserve the id (so deadlock detection counts the new M as running)
    // before dropping the lock to create the thread.
    std::int64_t id = mreserve_id();
    sched.lock.unlock();
    newm(pp, spinning, id);
    return;
  }
  sched.lock.unlock();
  if (nmp->spinning) fatal("startm: m is spinning");
  if (nmp->nextp != nullptr) fatal("startm: m has p");
  if (spinning && !runqempty(pp)) fatal("startm: p has runnable gs");
  nmp->spinning = spinning;
  nmp->nextp = pp;  // ownership of pp passes to nmp
  nmp->park.wakeup();
}

void wakep() {
  // Start a spinner only if nobody spins already: a spinner that finds
  // work wakes the next one (resetspinning), so wake-ups chain without
  // thundering herds. There is deliberately no bare "no idle P" early
  // return (Go 1.19 had one): with no idle P, pidleget_spinning sets
  // needspinning, and the next M about to give up its P spins instead.
  // Returning early without it would let that M go idle while this work
  // waits with nobody spinning (Go 1.21 fixed this; so do we).
  if (sched.nmspinning.load() != 0) return;
  // Fast path for the common busy case (every P running, notably at
  // GOMAXPROCS=1): if needspinning is already set, the next M that gives
  // up its P will spin and find our work, so there is nothing to add. Go
  // 1.21 takes sched.lock here every time; a fence does instead. It orders
  // our work's publication (made before wakep) before the load, against
  // become_spinning's seq_cst store of 0 followed by its search of the
  // queues: either we see 0 (and take the slow path below) or the spinner
  // sees our work.
  if (sched.npidle.load(std::memory_order_relaxed) == 0) {
    std::atomic_thread_fence(std::memory_order_seq_cst);
    if (sched.needspinning.load(std::memory_order_relaxed) == 1) return;
  }
  std::int32_t zero = 0;
  if (!sched.nmspinning.compare_exchange_strong(zero, 1)) return;
  P* pp;
  {
    lock_guard lk(sched.lock);
    pp = pidleget_spinning();
    if (pp == nullptr) {
      if (sched.nmspinning.fetch_sub(1) - 1 < 0)
        fatal("wakep: negative nmspinning");
      return;
    }
  }
  startm(pp, true);
}

}  // namespace goro::rt
