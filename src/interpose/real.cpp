// real.cpp: resolves the real versions of the interposed calls (real.hpp).
#include "interpose/real.hpp"

#include <dlfcn.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>

#include "runtime/san.hpp"

namespace goro::rt::sys {

real_fns real_table;
std::atomic<bool> real_resolved{false};

namespace {

#ifndef GORO_HAVE_TSAN
template <class F>
void resolve_one(F& slot, const char* name) {
  // RTLD_NEXT: the first definition after the object that holds this code
  // (the executable with libgoro.a, libgoro.so otherwise).
  void* p = dlsym(RTLD_NEXT, name);
  if (p == nullptr) {
    // No next definition: the C library lacks it. Nothing can stand in.
    std::fprintf(stderr, "fatal error: goro: no real %s to forward to\n", name);
    std::abort();
  }
  slot = reinterpret_cast<F>(p);
}
#define GORO_REAL(f) resolve_one(t.f, #f)
#else
#define GORO_REAL(f) t.f = &::f
#endif

}  // namespace

// The first caller resolves; a thread that comes in meanwhile waits for it
// (dlsym allocates, takes the loader's lock and makes no interposed call).
void resolve_real() {
  static std::atomic<int> state{0};  // 0 not started, 1 resolving
  int expect = 0;
  if (!state.compare_exchange_strong(expect, 1)) {
    while (!real_resolved.load(std::memory_order_acquire)) sched_yield();
    return;
  }
  real_fns t;
  GORO_REAL(read);
  GORO_REAL(write);
  GORO_REAL(readv);
  GORO_REAL(writev);
  GORO_REAL(recv);
  GORO_REAL(recvfrom);
  GORO_REAL(recvmsg);
  GORO_REAL(recvmmsg);
  GORO_REAL(send);
  GORO_REAL(sendto);
  GORO_REAL(sendmsg);
  GORO_REAL(sendmmsg);
  GORO_REAL(connect);
  GORO_REAL(accept);
  GORO_REAL(accept4);
  GORO_REAL(poll);
  GORO_REAL(ppoll);
  GORO_REAL(select);
  GORO_REAL(pselect);
  GORO_REAL(close);
  GORO_REAL(dup2);
  GORO_REAL(dup3);
  GORO_REAL(socket);
  GORO_REAL(socketpair);
  GORO_REAL(pipe);
  GORO_REAL(pipe2);
  GORO_REAL(nanosleep);
  GORO_REAL(clock_nanosleep);
  GORO_REAL(usleep);
  GORO_REAL(sleep);
  real_table = t;
  real_resolved.store(true, std::memory_order_release);
}

}  // namespace goro::rt::sys
