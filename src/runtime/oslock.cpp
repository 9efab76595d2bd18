// oslock.cpp: libgoro interposes the pthread lock functions to count, per
// goroutine, the OS locks it holds (G.oslocks).
//
// Why: a goroutine interrupted by the preemption signal inside a std::mutex
// critical section would stay pinned to its thread (asyncpreempt.cpp) with
// the mutex held; a goroutine scheduled next on that thread that takes the
// same mutex blocks the thread in the kernel, and the holder can never run
// again to release it. So the signal handler refuses to preempt while
// G.oslocks > 0 and leaves G.preempt set; the unlock that brings the count
// back to zero performs the preemption at once (oslock_preempt_point).
//
// How: libgoro defines pthread_mutex_lock, pthread_rwlock_wrlock, ... (every
// acquire and release of the three lock kinds). In a program linked with
// the static libgoro they are the executable's own definitions; with the
// shared libgoro they precede libc's in the global symbol lookup order. In
// both cases every call through the PLT lands here: the user's inline
// std::mutex/std::shared_mutex code, libstdc++, other shared objects.
// Calls inside libc itself use libc's internal aliases and are not
// counted; those are never preempted anyway (the
// handler only preempts the main executable's code). Each wrapper forwards
// to the next definition (dlsym RTLD_NEXT: libc's, or a sanitizer's).
//
// The count is the goroutine's, not the thread's: a goroutine that
// blocks with a lock held and resumes on another thread (a bug the
// diagnostics report) carries its count along. It is only written by the
// goroutine itself on its own thread and read by the signal handler on the
// same thread, so relaxed accesses suffice; the increment happens before
// the lock is taken and the decrement after it is released, so the handler
// sees a non-zero count whenever the lock is held. Unbalanced unlocks (a
// lock released by another goroutine than the one that took it) never take
// the count below zero; the taker's count stays raised, which only makes
// it non-preemptible by signal (it still yields at its next runtime entry).
//
// Cost on a plain thread: one TLS read and a branch per call; in a
// goroutine, a load and a store of G.oslocks more.
//
// The locks that are not pthread lock calls (static-initialisation guards,
// pthread_once, stdio's flockfile, C11 mutexes...) are counted the same
// way by oslock_hidden.cpp.
#include "runtime/oslock.hpp"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_set>

#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/oslock_count.hpp"
#include "runtime/panic.hpp"
#include "runtime/proc.hpp"
#include "runtime/san.hpp"
#include "runtime/tls.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

void oslock_park_report(G* gp, int reason) {
  if (debug.oslockpark <= 0) return;
  std::string trace = goroutine_trace(gp);
  static std::mutex mu;
  static std::unordered_set<std::string>* seen =
      new std::unordered_set<std::string>;
  {
    std::lock_guard<std::mutex> lk(mu);
    if (debug.oslockpark == 1 && !seen->insert(trace).second) return;
  }
  char head[320];
  std::snprintf(
      head, sizeof head,
      "goro: goroutine %llu parks [%s] while holding %d OS lock(s) (a "
      "std::mutex or other pthread lock): the unlock may run on another "
      "thread, and a goroutine on this thread taking the same lock blocks "
      "it for good. Use goro::mutex across blocking operations.\n",
      static_cast<unsigned long long>(gp->goid),
      wait_reason_string(static_cast<wait_reason>(reason)),
      int(gp->oslocks.load(std::memory_order_relaxed)));
  std::fputs(head, stderr);
  std::fputs(trace.c_str(), stderr);
  std::fputs("\n", stderr);
  std::fflush(stderr);
  if (debug.oslockpark >= 2)
    fatal(
        "goroutine parked while holding an OS lock (GORO_DEBUG=oslockpark=2)");
}

}  // namespace goro::rt

#ifndef GORO_HAVE_TSAN

namespace goro::rt {
namespace {

using namespace oslock_detail;

// The real functions, resolved once (a racing double resolution stores the
// same values).
struct real_fns {
  int (*mutex_lock)(pthread_mutex_t*);
  int (*mutex_trylock)(pthread_mutex_t*);
  int (*mutex_timedlock)(pthread_mutex_t*, const timespec*);
  int (*mutex_clocklock)(pthread_mutex_t*, clockid_t, const timespec*);
  int (*mutex_unlock)(pthread_mutex_t*);
  int (*rw_rdlock)(pthread_rwlock_t*);
  int (*rw_tryrdlock)(pthread_rwlock_t*);
  int (*rw_timedrdlock)(pthread_rwlock_t*, const timespec*);
  int (*rw_clockrdlock)(pthread_rwlock_t*, clockid_t, const timespec*);
  int (*rw_wrlock)(pthread_rwlock_t*);
  int (*rw_trywrlock)(pthread_rwlock_t*);
  int (*rw_timedwrlock)(pthread_rwlock_t*, const timespec*);
  int (*rw_clockwrlock)(pthread_rwlock_t*, clockid_t, const timespec*);
  int (*rw_unlock)(pthread_rwlock_t*);
  int (*spin_lock)(pthread_spinlock_t*);
  int (*spin_trylock)(pthread_spinlock_t*);
  int (*spin_unlock)(pthread_spinlock_t*);
};
real_fns real;
std::atomic<bool> resolved{false};
thread_local bool resolving = false;

__attribute__((noinline)) void resolve() {
  if (resolving)
    die("fatal error: goro: dlsym took a pthread lock while goro resolved "
        "the real lock functions\n");
  resolving = true;
  resolve_one(real.mutex_lock, "pthread_mutex_lock");
  resolve_one(real.mutex_trylock, "pthread_mutex_trylock");
  resolve_one(real.mutex_timedlock, "pthread_mutex_timedlock");
  resolve_one(real.mutex_clocklock, "pthread_mutex_clocklock");
  resolve_one(real.mutex_unlock, "pthread_mutex_unlock");
  resolve_one(real.rw_rdlock, "pthread_rwlock_rdlock");
  resolve_one(real.rw_tryrdlock, "pthread_rwlock_tryrdlock");
  resolve_one(real.rw_timedrdlock, "pthread_rwlock_timedrdlock");
  resolve_one(real.rw_clockrdlock, "pthread_rwlock_clockrdlock");
  resolve_one(real.rw_wrlock, "pthread_rwlock_wrlock");
  resolve_one(real.rw_trywrlock, "pthread_rwlock_trywrlock");
  resolve_one(real.rw_timedwrlock, "pthread_rwlock_timedwrlock");
  resolve_one(real.rw_clockwrlock, "pthread_rwlock_clockwrlock");
  resolve_one(real.rw_unlock, "pthread_rwlock_unlock");
  resolve_one(real.spin_lock, "pthread_spin_lock");
  resolve_one(real.spin_trylock, "pthread_spin_trylock");
  resolve_one(real.spin_unlock, "pthread_spin_unlock");
  resolving = false;
  resolved.store(true, std::memory_order_release);
}

inline const real_fns& fns() {
  if (__builtin_expect(!resolved.load(std::memory_order_acquire), 0)) resolve();
  return real;
}

// Acquire that can fail routinely (try, timed): count first, undo on
// failure (EOWNERDEAD from a robust mutex means the lock was acquired).
template <class L, class... A>
__attribute__((always_inline)) inline int acquire(int (*fn)(L*, A...), L* l,
                                                  A... a) {
  G* gp = cur();
  if (gp != nullptr) inc(gp);
  int rc = fn(l, a...);
  if (gp != nullptr && rc != 0 && rc != EOWNERDEAD) undo_inc(gp);
  return rc;
}

// Blocking acquire: count, then a tail call. A failed lock (an invalid or
// error-checking mutex already held) leaves the count raised: the
// goroutine is then only preempted cooperatively until it exits, the
// price of keeping the common path a jump.
template <class L>
__attribute__((always_inline)) inline int acquire_blocking(int (*fn)(L*),
                                                           L* l) {
  if (G* gp = cur(); gp != nullptr) inc(gp);
  return fn(l);
}

// Release: uncount, then a tail call unless a deferred preemption is due.
template <class L>
__attribute__((always_inline)) inline int release(int (*fn)(L*), L* l,
                                                  void* ra) {
  G* gp = cur();
  if (gp == nullptr || !dec(gp)) return fn(l);
  int rc = fn(l);
  oslock_preempt_point(gp, ra);
  return rc;
}

}  // namespace

void oslock_init() {
  (void)fns();
  oslock_hidden_init();
}
bool oslock_counting() { return true; }

}  // namespace goro::rt

using goro::rt::acquire;
using goro::rt::acquire_blocking;
using goro::rt::fns;
using goro::rt::release;

#define GORO_EXPORT extern "C" __attribute__((visibility("default")))

GORO_EXPORT int pthread_mutex_lock(pthread_mutex_t* m) {
  return acquire_blocking(fns().mutex_lock, m);
}
GORO_EXPORT int pthread_mutex_trylock(pthread_mutex_t* m) {
  return acquire(fns().mutex_trylock, m);
}
GORO_EXPORT int pthread_mutex_timedlock(pthread_mutex_t* m, const timespec* t) {
  return acquire(fns().mutex_timedlock, m, t);
}
GORO_EXPORT int pthread_mutex_clocklock(pthread_mutex_t* m, clockid_t c,
                                        const timespec* t) {
  return acquire(fns().mutex_clocklock, m, c, t);
}
GORO_EXPORT int pthread_mutex_unlock(pthread_mutex_t* m) {
  return release(fns().mutex_unlock, m, __builtin_return_address(0));
}

GORO_EXPORT int pthread_rwlock_rdlock(pthread_rwlock_t* l) {
  return acquire_blocking(fns().rw_rdlock, l);
}
GORO_EXPORT int pthread_rwlock_tryrdlock(pthread_rwlock_t* l) {
  return acquire(fns().rw_tryrdlock, l);
}
GORO_EXPORT int pthread_rwlock_timedrdlock(pthread_rwlock_t* l,
                                           const timespec* t) {
  return acquire(fns().rw_timedrdlock, l, t);
}
GORO_EXPORT int pthread_rwlock_clockrdlock(pthread_rwlock_t* l, clockid_t c,
                                           const timespec* t) {
  return acquire(fns().rw_clockrdlock, l, c, t);
}
GORO_EXPORT int pthread_rwlock_wrlock(pthread_rwlock_t* l) {
  return acquire_blocking(fns().rw_wrlock, l);
}
GORO_EXPORT int pthread_rwlock_trywrlock(pthread_rwlock_t* l) {
  return acquire(fns().rw_trywrlock, l);
}
GORO_EXPORT int pthread_rwlock_timedwrlock(pthread_rwlock_t* l,
                                           const timespec* t) {
  return acquire(fns().rw_timedwrlock, l, t);
}
GORO_EXPORT int pthread_rwlock_clockwrlock(pthread_rwlock_t* l, clockid_t c,
                                           const timespec* t) {
  return acquire(fns().rw_clockwrlock, l, c, t);
}
GORO_EXPORT int pthread_rwlock_unlock(pthread_rwlock_t* l) {
  return release(fns().rw_unlock, l, __builtin_return_address(0));
}

GORO_EXPORT int pthread_spin_lock(pthread_spinlock_t* l) {
  return acquire_blocking(fns().spin_lock, l);
}
GORO_EXPORT int pthread_spin_trylock(pthread_spinlock_t* l) {
  return acquire(fns().spin_trylock, l);
}
GORO_EXPORT int pthread_spin_unlock(pthread_spinlock_t* l) {
  return release(fns().spin_unlock, l, __builtin_return_address(0));
}

#else  // GORO_HAVE_TSAN

namespace goro::rt {
void oslock_init() { oslock_hidden_init(); }
bool oslock_counting() { return false; }
}  // namespace goro::rt

#endif
