// sigmask.cpp: libgoro interposes pthread_sigmask and sigprocmask so that
// a goroutine changing its thread's signal mask does not switch
// asynchronous preemption off on that thread for good (issue 23 item 7).
//
// Why: the preemption handler (asyncpreempt.cpp save_and_redirect) only
// preempts a context whose signal mask is the thread's usual one
// (M.sigmask0), to stay out of a user's signal handler, where more signals
// are blocked. A goroutine that blocks SIGUSR1, or every signal (as code
// does around spawning a std::thread), changes the mask of the thread it
// runs on: every later preemption there would be refused, for every
// goroutine that ever runs on that thread, and with the preemption signal
// itself blocked no signal would even arrive.
//
// How: on a thread running a goroutine (an M with a curg), when the mask in
// force is the thread's usual one (not inside a signal handler of the
// program's own), the wrapper computes the new mask itself, keeps the
// preemption signal out of it, sets it with SIG_SETMASK and records it as
// M.sigmask0. Inside a signal handler (the mask in force differs from
// M.sigmask0) the call is passed on unchanged and M.sigmask0 is left
// alone: sigreturn restores the interrupted mask anyway. On plain threads
// and on g0 every call is passed on unchanged. The wrapper is goro's code,
// which the handler never preempts, so the goroutine cannot move to another
// thread between reading the mask and setting it; a preemption signal that
// arrives in between only sees a mask other than M.sigmask0 and is refused
// once (sysmon asks again).
//
// glibc's own internal mask changes (pthread_create, posix_spawn, fork)
// use internal aliases, not these symbols, and are left alone. As in
// oslock.cpp, the real functions are the next definitions (dlsym
// RTLD_NEXT: libc's, or a sanitizer's). Nothing here under TSan, where
// async preemption is off and TSan intercepts these calls itself.
#ifndef GORO_HAVE_TSAN

#include <dlfcn.h>
#include <signal.h>

#include <atomic>
#include <cstring>

#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/oslock_count.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {
namespace {

using sigmask_fn = int (*)(int, const sigset_t*, sigset_t*);

std::atomic<sigmask_fn> real_pthread_sigmask{nullptr};
std::atomic<sigmask_fn> real_sigprocmask{nullptr};

sigmask_fn real(std::atomic<sigmask_fn>& slot, const char* name) {
  sigmask_fn f = slot.load(std::memory_order_acquire);
  if (f == nullptr) {
    oslock_detail::resolve_one(f, name);
    slot.store(f, std::memory_order_release);
  }
  return f;
}

std::uint64_t low64(const sigset_t& s) {
  std::uint64_t v;
  std::memcpy(&v, &s, sizeof v);
  return v;
}

// The call on a goroutine's thread. how/set as pthread_sigmask's.
int masked_call(sigmask_fn fn, int how, const sigset_t* set, sigset_t* old) {
  M* mp = goro_tls_m;  // no goroutine switch inside: a direct read is fine
  if (mp == nullptr || mp->curg.load(std::memory_order_relaxed) == nullptr ||
      set == nullptr)
    return fn(how, set, old);
  if (how != SIG_BLOCK && how != SIG_UNBLOCK && how != SIG_SETMASK)
    return fn(how, set, old);  // its error, in its convention
  sigset_t cur;
  if (int r = fn(SIG_SETMASK, nullptr, &cur); r != 0) return r;
  if (low64(cur) != mp->sigmask0) return fn(how, set, old);  // in a handler
  sigset_t next;
  if (how == SIG_SETMASK) {
    next = *set;
  } else {
    next = cur;
    for (int s = 1; s < NSIG; s++) {
      if (sigismember(set, s) != 1) continue;
      if (how == SIG_BLOCK)
        sigaddset(&next, s);
      else
        sigdelset(&next, s);
    }
  }
  sigdelset(&next, preempt_sig);
  if (int r = fn(SIG_SETMASK, &next, nullptr); r != 0) return r;
  // The mask now in force becomes the usual one: read back, as libc keeps
  // its own signals (SIGCANCEL, SIGSETXID) out of any set. A preemption
  // signal in between sees a mask other than M.sigmask0 and is refused
  // once (sysmon asks again).
  sigset_t now;
  if (fn(SIG_SETMASK, nullptr, &now) == 0) {
    std::atomic_signal_fence(std::memory_order_seq_cst);
    mp->sigmask0 = low64(now);
    std::atomic_signal_fence(std::memory_order_seq_cst);
  }
  if (old != nullptr) *old = cur;
  return 0;
}

}  // namespace

void sigmask_init() {
  // Resolved at start-up rather than inside a first call; and the call
  // from asyncpreempt_init is what links this file in from libgoro.a,
  // whose wrappers nothing else references.
  (void)real(real_pthread_sigmask, "pthread_sigmask");
  (void)real(real_sigprocmask, "sigprocmask");
}

}  // namespace goro::rt

using namespace goro::rt;

extern "C" int pthread_sigmask(int how, const sigset_t* set, sigset_t* old) {
  return masked_call(real(real_pthread_sigmask, "pthread_sigmask"), how, set,
                     old);
}

extern "C" int sigprocmask(int how, const sigset_t* set, sigset_t* old) {
  return masked_call(real(real_sigprocmask, "sigprocmask"), how, set, old);
}

#else  // GORO_HAVE_TSAN

namespace goro::rt {
void sigmask_init() {}
}  // namespace goro::rt

#endif  // GORO_HAVE_TSAN
