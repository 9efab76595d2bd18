// checkdead.cpp: deadlock detection (Go's checkdead).
//
// Counted in threads, not goroutines: if no M is running (all idle, idle
// while locked, or system threads like sysmon) and no plain thread that
// has used the runtime is outside it, nothing can ever make progress,
// unless a timer is pending. Threads that never called into goro do not
// count, as Go does not count threads it did not create. Then, if goroutines
// still wait: "all goroutines are asleep - deadlock!"; if none is left because
// main called goexit: "no goroutines (main called goro::goexit) - deadlock!".
// Detection is armed while a goro::run is in progress (a library runtime idles
// legitimately otherwise).
#include "runtime/checkdead.hpp"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/panic.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/stackshrink.hpp"
#include "runtime/tls.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

namespace {

// A plain thread that used the runtime counts in nextern until it exits.
struct extern_registration {
  bool counted = false;
  ~extern_registration() {
    if (counted) sched.nextern.fetch_sub(1);
  }
};
thread_local extern_registration extern_reg;

struct gcount {
  int waiting = 0;
  int running = 0;
  G* first_running = nullptr;  // for the debug-build report
};

void count_g(G* gp, void* arg) {
  auto* c = static_cast<gcount*>(arg);
  switch (readgstatus(gp)) {
    case g_waiting:
      c->waiting++;
      break;
    case g_runnable:
    case g_running:
    case g_syscall:
      if (c->running++ == 0) c->first_running = gp;
      break;
    default:
      break;
  }
}

// Threads in this process (the num_threads field of /proc/self/stat), or
// -1 if unknown.
int os_thread_count() {
  FILE* f = std::fopen("/proc/self/stat", "r");
  if (f == nullptr) return -1;
  char buf[1024];
  std::size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = 0;
  // The command name (field 2) may contain spaces; skip past its ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  int field = 2;
  for (; *p && field < 20; p++)
    if (*p == ' ') field++;
  return std::atoi(p);
}

// A thread the runtime does not know yet (not an M, not a plain thread
// blocked in the runtime). sched.lock held.
bool unknown_threads_exist() {
  int threads = os_thread_count();
#ifdef GORO_HAVE_TSAN
  threads -= 1;  // TSan's own background thread
#endif
  threads -= stackshrink_threads();  // the stack fault handler
  return threads < 0 || threads > mcount() + sched.nextern_blocked.load();
}

// When the verdict was first reached while threads goro does not know
// existed (0: not now). sched.lock held.
std::int64_t dead_since = 0;
// How long such a verdict must hold: a plain thread that is about to use
// goro (started to send on a channel) does so well within it.
constexpr std::int64_t unknown_thread_grace = 1000LL * 1000 * 1000;

bool any_timers() {
  for (std::int32_t i = 0; i < gomaxprocs_now(); i++)
    if (allp[i]->tm.min_when.load() != 0) return true;
  return false;
}

}  // namespace

void note_extern_thread() {
  if (!extern_reg.counted) {
    extern_reg.counted = true;
    sched.nextern.fetch_add(1);
  }
}

void extern_block_begin() {
  note_extern_thread();
  sched.nextern_blocked.fetch_add(1);
  // This thread might have been the last thing running. Without a
  // goro::run in progress there is no verdict to reach: skip the lock.
  if (sched.main_active.load(std::memory_order_relaxed) == 0) return;
  lock_guard lk(sched.lock);
  checkdead();
}

void extern_block_end() { sched.nextern_blocked.fetch_sub(1); }

void checkdead() {
  if (sched.main_active.load() == 0) return;
  // Plain threads (beyond those blocked in the runtime) may still act.
  if (sched.nextern.load() != sched.nextern_blocked.load()) {
    dead_since = 0;
    return;
  }
  std::int32_t run = mcount() - sched.nmidle - sched.nmidlelocked - sched.nmsys;
  if (run > 0) {
    dead_since = 0;
    return;
  }
  if (run < 0)
    fatalf(
        "checkdead: inconsistent counts run=%d nmidle=%d nmidlelocked=%d "
        "mcount=%d nmsys=%d",
        run, sched.nmidle, sched.nmidlelocked, mcount(), sched.nmsys);
#ifdef NDEBUG
  // A pending timer will wake someone. O(P), so before the O(G) walk below
  // (a goexit verdict then waits until the timers have fired). Debug builds
  // walk first, for the runnable-g check.
  if (any_timers()) return;
#endif
  gcount c;
  forallg(count_g, &c);
  if (c.running > 0) {
    // No thread runs, yet a goroutine is runnable: nobody will ever run
    // it. Go treats this as the runtime's own bug ("checkdead: runnable
    // g"), and so do debug builds, where it is how a lost wake-up shows.
    // Release builds keep going (a plain thread may still wake an M).
#ifndef NDEBUG
    // Unless a thread the runtime does not know yet (a plain thread that
    // has not blocked in it) is readying it right now.
    if (unknown_threads_exist()) return;
    G* gp = c.first_running;
    std::fprintf(stderr, "runtime: checkdead: find g %llu in status %u\n",
                 static_cast<unsigned long long>(gp->goid),
                 unsigned(readgstatus(gp)));
    sched.lock.unlock();
    fatal("checkdead: runnable g");
#else
    return;
#endif
  }
  if (c.waiting == 0) {
    if (sched.main_goexited.load()) {
      sched.lock.unlock();
      fatal_dump("no goroutines (main called goro::goexit) - deadlock!");
    }
    return;
  }
  // A pending timer will wake someone.
  if (any_timers()) return;
  // Threads that never called into goro do not count (Go ignores threads
  // it did not create): a logger or a library's worker must not hide a
  // deadlock. A plain thread that has used goro counts as running (it may
  // still send) unless it is blocked inside goro (nextern_blocked, above).
  // One that is just starting to use goro gets a grace period: with
  // unknown threads present the verdict must hold for a second (sysmon
  // re-checks every 100 ms while everything is idle).
  if (unknown_threads_exist()) {
    std::int64_t now = nanotime();
    if (dead_since == 0) dead_since = now;
    if (now - dead_since < unknown_thread_grace) return;
  }
  dead_since = 0;
  sched.lock.unlock();
  fatal_dump("all goroutines are asleep - deadlock!");
}

}  // namespace goro::rt
