// oslock_hidden.cpp: the locks that are not pthread lock calls but block a
// second taker in the kernel all the same, counted in G.oslocks like
// oslock.cpp's pthread locks (see there for why and how).
//
// Each holds a lock across code of the program's own, which async
// preemption may interrupt:
//  - __cxa_guard_acquire/release/abort: a function-local static's
//    initialisation (its constructor runs between acquire and release; a
//    second thread reaching the static waits on a futex). Only first-time
//    or racing initialisations get here: g++ checks the guard's byte inline
//    first.
//  - pthread_once (also std::call_once, through libstdc++'s inline
//    __gthread_once) and C11 call_once: the initialiser runs inside, and a
//    second caller waits for it.
//  - flockfile/ftrylockfile/funlockfile: a stdio stream's lock held across
//    the program's code; every stdio call on the stream waits for it.
//  - C11 mtx_lock/mtx_trylock/mtx_timedlock/mtx_unlock: glibc forwards them
//    to its pthread mutex internally, past oslock.cpp's wrappers.
// What is deliberately not counted is listed in docs/guide.md (Preemption,
// OS locks).
//
// A wrapper around a call that runs the program's code (pthread_once,
// call_once) counts for the whole call and gives the count
// back if the code throws or the thread is cancelled through it.
#include "runtime/oslock.hpp"
#include "runtime/san.hpp"

#ifndef GORO_HAVE_TSAN

#include <cxxabi.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <threads.h>
#include <time.h>

#include <atomic>

#include "runtime/oslock_count.hpp"

namespace goro::rt {
namespace {

using namespace oslock_detail;
using guard_t = __cxxabiv1::__guard;

// The real functions, resolved once (a racing double resolution stores the
// same values).
struct hidden_fns {
  int (*guard_acquire)(guard_t*);
  void (*guard_release)(guard_t*);
  void (*guard_abort)(guard_t*);
  int (*once)(pthread_once_t*, void (*)());
  void (*c11_once)(once_flag*, void (*)());
  void (*flock)(FILE*);
  int (*ftrylock)(FILE*);
  void (*funlock)(FILE*);
  int (*mtx_lock)(mtx_t*);
  int (*mtx_trylock)(mtx_t*);
  int (*mtx_timedlock)(mtx_t*, const timespec*);
  int (*mtx_unlock)(mtx_t*);
};
hidden_fns real;
std::atomic<bool> resolved{false};
thread_local bool resolving = false;

__attribute__((noinline)) void resolve() {
  // dlsym initialising a static of its own or taking a stream lock (a
  // malloc of the program's, say) would come back here.
  if (resolving)
    die("fatal error: goro: dlsym initialised a static or took a stdio lock "
        "while goro resolved the real functions\n");
  resolving = true;
  resolve_one(real.guard_acquire, "__cxa_guard_acquire");
  resolve_one(real.guard_release, "__cxa_guard_release");
  resolve_one(real.guard_abort, "__cxa_guard_abort");
  resolve_one(real.once, "pthread_once");
  resolve_one(real.c11_once, "call_once");
  resolve_one(real.flock, "flockfile");
  resolve_one(real.ftrylock, "ftrylockfile");
  resolve_one(real.funlock, "funlockfile");
  resolve_one(real.mtx_lock, "mtx_lock");
  resolve_one(real.mtx_trylock, "mtx_trylock");
  resolve_one(real.mtx_timedlock, "mtx_timedlock");
  resolve_one(real.mtx_unlock, "mtx_unlock");
  resolving = false;
  resolved.store(true, std::memory_order_release);
}

inline const hidden_fns& fns() {
  if (__builtin_expect(!resolved.load(std::memory_order_acquire), 0)) resolve();
  return real;
}

// After a release (or the end of a call that held a lock): drops the
// count, and preempts if that was the last lock and a preemption waits.
__attribute__((always_inline)) inline void released(G* gp, void* ra) {
  if (dec(gp)) oslock_preempt_point(gp, ra);
}

// Holds the count across a call that runs the program's code; gives it
// back without preempting if that code throws or the thread is cancelled.
struct held {
  G* gp;
  explicit held(G* g) : gp(g) { inc(gp); }
  held(const held&) = delete;
  held& operator=(const held&) = delete;
  // The normal return: drop the count, the deferred preemption if due.
  __attribute__((always_inline)) void done(void* ra) {
    G* g = gp;
    gp = nullptr;
    released(g, ra);
  }
  ~held() {
    if (gp != nullptr) (void)dec(gp);
  }
};

}  // namespace

void oslock_hidden_init() { (void)fns(); }

}  // namespace goro::rt

using namespace goro::rt::oslock_detail;
using goro::rt::fns;
using goro::rt::G;
using goro::rt::held;
using goro::rt::released;

#define GORO_EXPORT extern "C" __attribute__((visibility("default")))

// ---- static-initialisation guards (libstdc++'s ABI, namespace as there)

namespace __cxxabiv1 {

GORO_EXPORT int __cxa_guard_acquire(__guard* g) {
  G* gp = cur();
  if (gp == nullptr) return fns().guard_acquire(g);
  inc(gp);
  // 0: initialised meanwhile (by another thread), nothing held. A throw
  // (recursive initialisation) leaves the count raised: the program ends.
  int rc = fns().guard_acquire(g);
  if (rc == 0) released(gp, __builtin_return_address(0));
  return rc;
}

GORO_EXPORT void __cxa_guard_release(__guard* g) noexcept {
  G* gp = cur();
  fns().guard_release(g);
  if (gp != nullptr) released(gp, __builtin_return_address(0));
}

GORO_EXPORT void __cxa_guard_abort(__guard* g) noexcept {
  // Called while the constructor's exception unwinds: drop the count, no
  // preemption here.
  G* gp = cur();
  fns().guard_abort(g);
  if (gp != nullptr) (void)dec(gp);
}

}  // namespace __cxxabiv1

// ---- once

GORO_EXPORT int pthread_once(pthread_once_t* o, void (*init)()) {
  G* gp = cur();
  if (gp == nullptr) return fns().once(o, init);
  held h(gp);
  int rc = fns().once(o, init);
  h.done(__builtin_return_address(0));
  return rc;
}

GORO_EXPORT void call_once(once_flag* o, void (*init)()) {
  G* gp = cur();
  if (gp == nullptr) return fns().c11_once(o, init);
  held h(gp);
  fns().c11_once(o, init);
  h.done(__builtin_return_address(0));
}

// ---- stdio stream locks

GORO_EXPORT void flockfile(FILE* f) noexcept {
  if (G* gp = cur(); gp != nullptr) inc(gp);
  fns().flock(f);
}

GORO_EXPORT int ftrylockfile(FILE* f) noexcept {
  G* gp = cur();
  if (gp != nullptr) inc(gp);
  int rc = fns().ftrylock(f);
  if (gp != nullptr && rc != 0) undo_inc(gp);
  return rc;
}

GORO_EXPORT void funlockfile(FILE* f) noexcept {
  G* gp = cur();
  if (gp == nullptr || !dec(gp)) return fns().funlock(f);
  fns().funlock(f);
  goro::rt::oslock_preempt_point(gp, __builtin_return_address(0));
}

// ---- C11 mutexes

GORO_EXPORT int mtx_lock(mtx_t* m) {
  if (G* gp = cur(); gp != nullptr) inc(gp);
  return fns().mtx_lock(m);
}

GORO_EXPORT int mtx_trylock(mtx_t* m) {
  G* gp = cur();
  if (gp != nullptr) inc(gp);
  int rc = fns().mtx_trylock(m);
  if (gp != nullptr && rc != thrd_success) undo_inc(gp);
  return rc;
}

GORO_EXPORT int mtx_timedlock(mtx_t* __restrict m,
                              const timespec* __restrict t) {
  G* gp = cur();
  if (gp != nullptr) inc(gp);
  int rc = fns().mtx_timedlock(m, t);
  if (gp != nullptr && rc != thrd_success) undo_inc(gp);
  return rc;
}

GORO_EXPORT int mtx_unlock(mtx_t* m) {
  G* gp = cur();
  if (gp == nullptr || !dec(gp)) return fns().mtx_unlock(m);
  int rc = fns().mtx_unlock(m);
  goro::rt::oslock_preempt_point(gp, __builtin_return_address(0));
  return rc;
}

#else  // GORO_HAVE_TSAN

namespace goro::rt {
void oslock_hidden_init() {}
}  // namespace goro::rt

#endif
