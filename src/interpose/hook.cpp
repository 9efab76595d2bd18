// hook.cpp: the checks and waits every interposed call shares (hook.hpp).
#include "interpose/hook.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/m.hpp"
#include "runtime/nanotime.hpp"

namespace goro::rt::interpose {

std::atomic<bool> enabled{true};

void link_fd_io();
void link_fd_sock();
void link_poll();
void link_sleep();

void init(bool on) {
  enabled.store(on, std::memory_order_relaxed);
  (void)sys::real();
  // With the static libgoro, these references pull every file of
  // interposed calls into the program: its own code may call none of the
  // interposed functions, a shared library's calls do not pull archive
  // members, and under ASan libasan.so, which the linker sees first,
  // already defines read, poll... (the program's definitions then come
  // first at run time, and forward to ASan's interceptors).
  link_fd_io();
  link_fd_sock();
  link_poll();
  link_sleep();
}

__attribute__((noinline)) int* errno_here() {
  int* p = &errno;
  asm volatile("" : "+r"(p));
  return p;
}

bool can_park() {
  M* mp = getm();
  if (mp == nullptr) return false;
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp == nullptr) return false;
  // On the goroutine's own stack: not g0, not a signal stack.
  auto sp = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  if (sp < gp->stk.lo || sp >= gp->stk.hi) return false;
  // No runtime lock (goro's own code calling out) and no OS lock (a
  // std::mutex held across the call: the goroutine would resume on
  // another thread with it held; it keeps its thread, as before).
  if (mp->locks != 0 || goro_tls_nlocks != 0) return false;
  if (gp->oslocks.load(std::memory_order_relaxed) != 0) return false;
  // Inside goro::blocking the program asked for a thread-blocking call
  // with the processor handed off: that is what it gets.
  if (gp->syscall_depth != 0) return false;
  // A user's signal handler runs with more signals blocked than the
  // thread started with (its own, at least).
  std::uint64_t cur = 0;
  if (syscall(SYS_rt_sigprocmask, SIG_BLOCK, nullptr, &cur, sizeof cur) != 0)
    return false;
  return cur == mp->sigmask0;
}

bool nonblocking(int fd) {
  int fl = ::fcntl(fd, F_GETFL);
  return fl >= 0 && (fl & O_NONBLOCK) != 0;
}

std::int64_t sock_deadline(int fd, int optname) {
  timeval tv{};
  socklen_t len = sizeof tv;
  if (::getsockopt(fd, SOL_SOCKET, optname, &tv, &len) != 0) return 0;
  std::int64_t ns = std::int64_t(tv.tv_sec) * 1000000000 + tv.tv_usec * 1000;
  return ns <= 0 ? 0 : nanotime() + ns;
}

int wait_one(int fd, fd_entry* e, std::uint32_t events, std::uint32_t seq,
             std::int64_t deadline) {
  fd_waiter x;
  x.fd = fd;
  x.e = e;
  x.events = events;
  x.seq = seq;
  return wait_fds(&x, 1, deadline);
}

}  // namespace goro::rt::interpose
