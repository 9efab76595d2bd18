// netpoll_epoll.cpp: the Linux poller: one epoll instance plus an eventfd
// that breaks a blocked epoll_wait (Go 1.21+'s netpollBreak).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "runtime/mstart.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {
int epfd = -1;
int breakfd = -1;
// 1 while a break is pending in the eventfd: repeated breaks coalesce.
std::atomic<std::uint32_t> wake_sig{0};
}  // namespace

void netpollinit() {
  epfd = epoll_create1(EPOLL_CLOEXEC);
  if (epfd < 0) fatal("runtime: netpollinit failed (epoll_create1)");
  breakfd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (breakfd < 0) fatal("runtime: netpollinit failed (eventfd)");
  struct epoll_event ev {};
  ev.events = EPOLLIN;
  ev.data.ptr = &breakfd;
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, breakfd, &ev) != 0)
    fatal("runtime: netpollinit failed (epoll_ctl)");
}

bool netpollinited() { return epfd >= 0; }

bool netpoll_any_waiters() { return false; }

void netpollbreak() {
  std::uint32_t zero = 0;
  if (!wake_sig.compare_exchange_strong(zero, 1)) return;
  std::uint64_t one = 1;
  for (;;) {
    ssize_t n = write(breakfd, &one, sizeof one);
    if (n == sizeof one || errno == EAGAIN) return;
    if (errno != EINTR) fatal("runtime: netpollbreak write failed");
  }
}

g_queue netpoll(std::int64_t delay) {
  g_queue ready;
  if (epfd < 0) return ready;
  // Go's rounding: sub-millisecond waits become 1 ms, longer ones are
  // truncated (the caller re-checks timers after waking early).
  int waitms;
  if (delay < 0)
    waitms = -1;
  else if (delay == 0)
    waitms = 0;
  else if (delay < 1000000)
    waitms = 1;
  else if (delay < 1000000000000000LL)
    waitms = int(delay / 1000000);
  else
    waitms = 1000000000;
  struct epoll_event events[128];
  for (;;) {
    int n = epoll_wait(epfd, events, 128, waitms);
    if (n < 0) {
      if (errno != EINTR) fatal("runtime: epoll_wait failed");
      if (waitms > 0) return ready;  // let the caller recompute timers
      continue;
    }
    for (int i = 0; i < n; i++) {
      if (events[i].data.ptr == &breakfd) {
        if (delay != 0) {
          // A blocking poll consumes the break; a non-blocking one leaves
          // it for the poller it was meant for.
          std::uint64_t v;
          ssize_t r = read(breakfd, &v, sizeof v);
          (void)r;
          wake_sig.store(0);
        }
        continue;
      }
      // (descriptor readiness: with goro::net)
    }
    return ready;
  }
}

void wake_netpoller(std::int64_t when) {
  if (sched.last_poll.load() == 0) {
    // An M sleeps in netpoll; break it if it would sleep past `when`.
    std::int64_t until = sched.poll_until.load();
    if (until == 0 || until > when) netpollbreak();
  } else {
    // Nobody polls: get an M to service the new timer.
    wakep();
  }
}

}  // namespace goro::rt
