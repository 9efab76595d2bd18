// netpoll_epoll.cpp: the Linux poller: one epoll instance, descriptors
// registered once and edge-triggered, plus an eventfd that breaks a
// blocked epoll_wait (Go 1.21+'s netpollBreak).
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "interpose/fd_poll.hpp"
#include "interpose/real.hpp"
#include "runtime/mstart.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"
#include "runtime/testhook.hpp"

namespace goro::rt {

namespace {
int epfd = -1;
int breakfd = -1;
// 1 while a break is pending in the eventfd: repeated breaks coalesce.
std::atomic<std::uint32_t> wake_sig{0};
// epoll_pwait2 (Linux 5.11+) takes a timespec: sub-millisecond waits
// without rounding up to 1 ms. Cleared on ENOSYS.
std::atomic<bool> have_pwait2{true};

// The epoll user data: the poll_desc pointer (47 bits on x86-64 user
// space) tagged with the low 16 bits of its fdseq in the top 16.
constexpr int tag_shift = 48;
std::uint64_t tagged(poll_desc* pd) {
  return reinterpret_cast<std::uint64_t>(pd) |
         (std::uint64_t(pd_info_tag(pd->info.load(std::memory_order_relaxed)))
          << tag_shift);
}

// Records whether this event is EPOLLERR alone, if the event is for pd's
// current registration. False for a stale event (the descriptor was closed
// and pd reused since it was queued). The check and the store are one CAS:
// see poll_desc.info.
bool set_event_err(poll_desc* pd, std::uint32_t tag, bool err) {
  std::uint32_t x = pd->info.load(std::memory_order_relaxed);
  for (;;) {
    if (pd_info_tag(x) != tag) return false;
    std::uint32_t next = err ? (x | pd_info_everr) : (x & ~pd_info_everr);
    if (next == x) return true;
    // Release: a reader that sees the flag (check_err's acquire load) sees
    // what the poller knew before it.
    if (pd->info.compare_exchange_weak(x, next, std::memory_order_release,
                                       std::memory_order_relaxed))
      return true;
  }
}

int epoll_wait_ns(struct epoll_event* events, int max, std::int64_t delay,
                  int waitms) {
  if (delay > 0 && delay < 1000000 &&
      have_pwait2.load(std::memory_order_relaxed)) {
#ifdef SYS_epoll_pwait2
    struct timespec ts {
      0, long(delay)
    };
    long n = syscall(SYS_epoll_pwait2, epfd, events, max, &ts, nullptr, 0);
    if (n >= 0 || errno != ENOSYS) return int(n);
#endif
    have_pwait2.store(false, std::memory_order_relaxed);
  }
  return epoll_wait(epfd, events, max, waitms);
}
}  // namespace

int netpollopen(int fd, poll_desc* pd) {
  struct epoll_event ev {};
  ev.events = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
  ev.data.u64 = tagged(pd);
  if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0) return 0;
  // An interposed call waited on this descriptor before goro::fd wrapped
  // it: goro::fd's registration replaces that one.
  if (errno == EEXIST && interpose::forget_registration(fd) &&
      epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) == 0)
    return 0;
  return errno;
}

int netpoll_ctl(int op, int fd, std::uint32_t events, std::uint64_t data) {
  struct epoll_event ev {};
  ev.events = events;
  ev.data.u64 = data;
  return epoll_ctl(epfd, op, fd, &ev) == 0 ? 0 : errno;
}

void netpollclose(int fd) {
  struct epoll_event ev {};
  // ENOENT/EBADF: the caller closed or never registered it; nothing to do.
  (void)epoll_ctl(epfd, EPOLL_CTL_DEL, fd, &ev);
}

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

void netpollbreak() {
  std::uint32_t zero = 0;
  if (!wake_sig.compare_exchange_strong(zero, 1)) return;
  std::uint64_t one = 1;
  for (;;) {
    ssize_t n = sys::real().write(breakfd, &one, sizeof one);
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
    int n = epoll_wait_ns(events, 128, delay, waitms);
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
          ssize_t r = sys::real().read(breakfd, &v, sizeof v);
          (void)r;
          wake_sig.store(0);
        }
        continue;
      }
      std::uint32_t ev = events[i].events;
      std::uint64_t data = events[i].data.u64;
      if ((data & interpose::hook_data_tag) != 0) {
        // A one-shot registration of an interposed call's wait.
        interpose::netpoll_event(data, ev, &ready);
        continue;
      }
      int mode = 0;
      if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR)) mode += 'r';
      if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR)) mode += 'w';
      if (mode == 0) continue;
      auto* pd = reinterpret_cast<poll_desc*>(
          data & ((std::uint64_t{1} << tag_shift) - 1));
      // Stale: the descriptor was closed and its poll_desc reused since
      // this event was queued. A close and reuse right after this check
      // only gives the new descriptor a spurious readiness, which costs its
      // next I/O attempt one EAGAIN (readiness is a hint, never trusted).
      run_test_hook(testhooks.netpoll_event, pd);
      if (!set_event_err(pd, std::uint32_t(data >> tag_shift), ev == EPOLLERR))
        continue;
      netpollready(&ready, pd, mode);
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
