// lock.cpp: futex wrappers, the slow path of the runtime mutex, timed notes.
#include "runtime/lock.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/nanotime.hpp"
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"
#include "runtime/tls.hpp"

extern "C" {
__thread int goro_tls_nlocks __attribute__((tls_model("initial-exec"))) = 0;
}

namespace goro::rt {

namespace {

// The runtime's own waits make their system calls here, in goro's code,
// not through libc's syscall(): the preemption handler hands off a
// goroutine's P only from a call outside goro's code (blockedsyscall.cpp),
// and a runtime wait on a goroutine's stack (a contended runtime lock, a
// dump waiting for a traceback) must keep its P.
long raw_syscall4(long nr, long a1, long a2, long a3, long a4) {
  long ret;
  register long r10 asm("r10") = a4;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10)
               : "rcx", "r11", "memory");
  return ret;
}

}  // namespace

void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t val,
                std::int64_t ns) {
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (ns >= 0) {
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    tsp = &ts;
  }
  raw_syscall4(SYS_futex, long(addr), FUTEX_WAIT_PRIVATE, long(val), long(tsp));
}

void futex_wake(std::atomic<std::uint32_t>* addr, int count) {
  raw_syscall4(SYS_futex, long(addr), FUTEX_WAKE_PRIVATE, count, 0);
}

void osyield() { raw_syscall4(SYS_sched_yield, 0, 0, 0, 0); }

void mutex::lock_slow() {
  // Go's lock2: spin a little (the holder is probably running on another
  // CPU), yield once, then sleep. The state goes to `sleeping` whenever we
  // may have to sleep so that unlock knows to wake someone.
  std::uint32_t wait = key_.exchange(locked, std::memory_order_acquire);
  if (wait == 0) return;
  for (;;) {
    for (int i = 0; i < 4; i++) {
      while (key_.load(std::memory_order_relaxed) == 0) {
        std::uint32_t expect = 0;
        if (key_.compare_exchange_weak(expect, wait, std::memory_order_acquire))
          return;
      }
      procyield(30);
    }
    for (int i = 0; i < 1; i++) {
      while (key_.load(std::memory_order_relaxed) == 0) {
        std::uint32_t expect = 0;
        if (key_.compare_exchange_weak(expect, wait, std::memory_order_acquire))
          return;
      }
      osyield();
    }
    // Sleep. Once we have slept, we must leave the key as `sleeping` when
    // we acquire, since other sleepers may remain.
    wait = sleeping;
    if (key_.exchange(sleeping, std::memory_order_acquire) == 0) return;
    futex_wait(&key_, sleeping, -1);
  }
}

#ifdef GORO_LOCKRANK
// The runtime locks this thread holds, in acquisition order. A plain
// thread_local is right here: locks are never held across a goroutine
// switch (that is what this checks), and these functions never switch.
namespace {
struct held_locks {
  static constexpr int max = 16;
  mutex* locks[max];
  int n = 0;
  // Locks of an equal-rank run (a select's channels: dynamic_select may
  // lock hundreds) beyond `max`: counted, not recorded, so they are not
  // checked for double acquisition; their rank is the innermost one's.
  int extra = 0;
  lock_rank extra_rank{};
};
thread_local held_locks held;

bool rank_allows_equal(lock_rank r) {
  return r == lock_rank::hchan || r == lock_rank::timers;
}
}  // namespace

void lockrank_acquire(mutex* l) {
  held_locks& h = held;
  for (int i = 0; i < h.n; i++) {
    lock_rank r = h.locks[i]->rank();
    if (h.locks[i] == l)
      fatalf("lock ordering problem: lock %p (rank %d) acquired twice",
             static_cast<void*>(l), int(r));
    if (r > l->rank() || (r == l->rank() && !rank_allows_equal(r)))
      fatalf(
          "lock ordering problem: acquiring lock %p of rank %d while "
          "holding lock %p of rank %d",
          static_cast<void*>(l), int(l->rank()), static_cast<void*>(h.locks[i]),
          int(r));
  }
  if (h.n == held_locks::max) {
    if (!rank_allows_equal(l->rank()) || h.locks[h.n - 1]->rank() != l->rank())
      fatal("lockrank: too many locks held");
    h.extra++;
    h.extra_rank = l->rank();
  } else {
    h.locks[h.n++] = l;
  }
  if (M* mp = getm()) mp->locks++;
}

void lockrank_release(mutex* l) {
  held_locks& h = held;
  for (int i = h.n - 1; i >= 0; i--) {
    if (h.locks[i] != l) continue;
    for (int k = i; k + 1 < h.n; k++) h.locks[k] = h.locks[k + 1];
    h.n--;
    if (M* mp = getm()) mp->locks--;
    return;
  }
  if (h.extra > 0 && h.extra_rank == l->rank()) {
    h.extra--;
    if (M* mp = getm()) mp->locks--;
    return;
  }
  fatalf(
      "lockrank: unlock of lock %p (rank %d) that this thread does not "
      "hold",
      static_cast<void*>(l), int(l->rank()));
}

void lockrank_assert_none(const char* where) {
  held_locks& h = held;
  if (h.n == 0 && h.extra == 0 && goro_tls_nlocks == 0) return;
  if (h.n == 0)
    fatalf("%s: runtime lock count %d (recorded none)", where, goro_tls_nlocks);
  fatalf("%s: holding locks (%d runtime locks held, innermost rank %d)", where,
         h.n, int(h.locks[h.n - 1]->rank()));
}
#endif

bool note::tsleep(std::int64_t ns) {
  if (ns < 0) {
    sleep();
    return true;
  }
  std::int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    std::int64_t left = deadline - nanotime();
    if (left <= 0) return false;
    futex_wait(&key_, 0, left);
  }
  return true;
}

}  // namespace goro::rt
