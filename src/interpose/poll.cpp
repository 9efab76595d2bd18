// poll.cpp: poll, ppoll, select and pselect, interposed: in a goroutine, a
// wait with a timeout parks the goroutine on the network poller (libpq,
// libcurl and hiredis's connect with a timeout wait in poll on their own
// non-blocking sockets).
//
// The answer is always the kernel's: each round asks poll(2) with a zero
// timeout, and only when nothing is ready parks until one of the
// descriptors has an event, the timeout passes or one is closed, then asks
// again. A descriptor epoll cannot watch (a regular file is always ready
// anyway) makes the call the real one. The signal mask of ppoll/pselect
// applies to the zero-timeout rounds only: a parked goroutine takes no
// signals (they go to the process's other threads). Timeouts are measured
// on the monotonic clock; select updates its timeval with the time left,
// as Linux's does.
#undef _FORTIFY_SOURCE
#include <poll.h>
#include <sys/select.h>

#include <climits>
#include <memory>

#include "interpose/hook.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/san.hpp"

using goro::rt::nanotime;
using goro::rt::sys::real;
using namespace goro::rt::interpose;

namespace goro::rt::interpose {
// Referenced by init(): links this file's definitions (see hook.cpp).
void link_poll() {}
}  // namespace goro::rt::interpose

// Nothing is interposed under TSan (real.hpp).
#ifndef GORO_HAVE_TSAN

namespace goro::rt::interpose {
namespace {

std::uint32_t epoll_events(short ev) {
  std::uint32_t r = 0;
  if ((ev & (POLLIN | POLLRDNORM | POLLRDBAND)) != 0) r |= EPOLLIN;
  if ((ev & (POLLOUT | POLLWRNORM | POLLWRBAND)) != 0) r |= EPOLLOUT;
  if ((ev & POLLPRI) != 0) r |= EPOLLPRI;
  if ((ev & POLLRDHUP) != 0) r |= EPOLLRDHUP;
  return r;
}

constexpr int small_poll = 16;  // waiters on the stack up to this many

// poll with a timeout in a goroutine. deadline: absolute nanotime(), 0
// for none (wait forever). zero: one round of the real call.
template <class Zero>
int poll_wait(pollfd* fds, nfds_t n, std::int64_t deadline, Zero zero) {
  fd_waiter small[small_poll];
  std::unique_ptr<fd_waiter[]> big;
  fd_waiter* ws = small;
  if (n > small_poll) {
    big.reset(new fd_waiter[n]);
    ws = big.get();
  }
  for (;;) {
    int m = 0;
    for (nfds_t i = 0; i < n; i++) {
      if (fds[i].fd < 0) continue;
      fd_entry* e = entry(fds[i].fd);
      if (e == nullptr) return -2;  // a number beyond the table
      fd_waiter& x = ws[m++];
      x = fd_waiter{};
      x.fd = fds[i].fd;
      x.e = e;
      x.events = epoll_events(fds[i].events);
      x.seq = e->evseq.load(std::memory_order_acquire);
    }
    int r = zero();
    if (r != 0) return r;
    if (deadline != 0 && nanotime() >= deadline) return 0;
    if (!can_park()) return -2;
    int why =
        m == 0 ? wait_fds(nullptr, 0, deadline) : wait_fds(ws, m, deadline);
    if (why == wait_timeout) return zero();
    if (why == wait_not_pollable) return -2;
    // wait_io, wait_closed (the next round reports POLLNVAL): ask again.
  }
}

std::int64_t deadline_after(const timespec* ts) {
  if (ts == nullptr) return 0;
  std::int64_t ns = std::int64_t(ts->tv_sec) * 1000000000 + ts->tv_nsec;
  if (ts->tv_sec > (INT64_MAX / 1000000000 - 1)) return 0;  // forever
  return nanotime() + (ns <= 0 ? 0 : ns);
}

bool bad_timespec(const timespec* ts) {
  return ts != nullptr &&
         (ts->tv_sec < 0 || ts->tv_nsec < 0 || ts->tv_nsec >= 1000000000);
}

// select as poll: one pollfd per descriptor in any of the sets.
int select_impl(int nfds, fd_set* r, fd_set* w, fd_set* x,
                std::int64_t deadline, const sigset_t* mask) {
  std::unique_ptr<pollfd[]> fds(new pollfd[std::size_t(nfds)]);
  nfds_t n = 0;
  for (int fd = 0; fd < nfds; fd++) {
    short ev = 0;
    if (r != nullptr && FD_ISSET(fd, r)) ev |= POLLIN;
    if (w != nullptr && FD_ISSET(fd, w)) ev |= POLLOUT;
    if (x != nullptr && FD_ISSET(fd, x)) ev |= POLLPRI;
    if (ev != 0) fds[n++] = pollfd{fd, ev, 0};
  }
  // Each round is the real select with a zero timeout, on copies of the
  // caller's sets, so that results and errors are the kernel's.
  fd_set r0, w0, x0;
  if (r != nullptr) r0 = *r;
  if (w != nullptr) w0 = *w;
  if (x != nullptr) x0 = *x;
  auto zero = [&] {
    if (r != nullptr) *r = r0;
    if (w != nullptr) *w = w0;
    if (x != nullptr) *x = x0;
    timespec ts{0, 0};
    return real().pselect(nfds, r, w, x, &ts, mask);
  };
  int res = poll_wait(fds.get(), n, deadline, zero);
  if (res == -2) {
    // The caller's sets again, for the real call.
    if (r != nullptr) *r = r0;
    if (w != nullptr) *w = w0;
    if (x != nullptr) *x = x0;
  }
  return res;
}

}  // namespace
}  // namespace goro::rt::interpose

extern "C" {

int poll(pollfd* fds, nfds_t n, int timeout) {
  if (!active() || timeout == 0 || n > nfds_t(INT_MAX))
    return real().poll(fds, n, timeout);
  std::int64_t deadline =
      timeout < 0 ? 0 : nanotime() + std::int64_t(timeout) * 1000000;
  int r = poll_wait(fds, n, deadline, [&] { return real().poll(fds, n, 0); });
  if (r != -2) return r;
  // Not for the poller: the real call, with what remains of the timeout.
  int left = -1;
  if (deadline != 0) {
    std::int64_t ns = deadline - nanotime();
    left = ns <= 0 ? 0 : int((ns + 999999) / 1000000);
  }
  return real().poll(fds, n, left);
}

int ppoll(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask) {
  if (!active() || bad_timespec(ts) || n > nfds_t(INT_MAX) ||
      (ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0))
    return real().ppoll(fds, n, ts, mask);
  std::int64_t deadline = deadline_after(ts);
  timespec zero_ts{0, 0};
  int r = poll_wait(fds, n, deadline,
                    [&] { return real().ppoll(fds, n, &zero_ts, mask); });
  if (r != -2) return r;
  if (deadline == 0) return real().ppoll(fds, n, nullptr, mask);
  std::int64_t ns = deadline - nanotime();
  if (ns < 0) ns = 0;
  timespec left{time_t(ns / 1000000000), long(ns % 1000000000)};
  return real().ppoll(fds, n, &left, mask);
}

int select(int nfds, fd_set* r, fd_set* w, fd_set* x, timeval* tv) {
  if (!active() || nfds < 0 || nfds > FD_SETSIZE ||
      (tv != nullptr &&
       (tv->tv_sec < 0 || tv->tv_usec < 0 || tv->tv_usec >= 1000000)) ||
      (tv != nullptr && tv->tv_sec == 0 && tv->tv_usec == 0))
    return real().select(nfds, r, w, x, tv);
  std::int64_t deadline = 0;
  if (tv != nullptr)
    deadline = nanotime() + std::int64_t(tv->tv_sec) * 1000000000 +
               std::int64_t(tv->tv_usec) * 1000;
  int res = select_impl(nfds, r, w, x, deadline, nullptr);
  if (res == -2) {
    if (tv != nullptr) {
      std::int64_t ns = deadline - nanotime();
      if (ns < 0) ns = 0;
      tv->tv_sec = time_t(ns / 1000000000);
      tv->tv_usec = suseconds_t(ns % 1000000000 / 1000);
    }
    return real().select(nfds, r, w, x, tv);
  }
  if (tv != nullptr) {
    // Linux writes back the time not slept.
    std::int64_t ns = deadline - nanotime();
    if (ns < 0 || res == 0) ns = 0;
    tv->tv_sec = time_t(ns / 1000000000);
    tv->tv_usec = suseconds_t(ns % 1000000000 / 1000);
  }
  return res;
}

int pselect(int nfds, fd_set* r, fd_set* w, fd_set* x, const timespec* ts,
            const sigset_t* mask) {
  if (!active() || nfds < 0 || nfds > FD_SETSIZE || bad_timespec(ts) ||
      (ts != nullptr && ts->tv_sec == 0 && ts->tv_nsec == 0))
    return real().pselect(nfds, r, w, x, ts, mask);
  std::int64_t deadline = deadline_after(ts);
  int res = select_impl(nfds, r, w, x, deadline, mask);
  if (res != -2) return res;
  if (deadline == 0) return real().pselect(nfds, r, w, x, nullptr, mask);
  std::int64_t ns = deadline - nanotime();
  if (ns < 0) ns = 0;
  timespec left{time_t(ns / 1000000000), long(ns % 1000000000)};
  return real().pselect(nfds, r, w, x, &left, mask);
}

// The fortified variants (-D_FORTIFY_SOURCE).
void __chk_fail(void) __attribute__((noreturn));

int __poll_chk(pollfd* fds, nfds_t n, int timeout, size_t fdslen) {
  if (fdslen / sizeof *fds < n) __chk_fail();
  return poll(fds, n, timeout);
}

int __ppoll_chk(pollfd* fds, nfds_t n, const timespec* ts, const sigset_t* mask,
                size_t fdslen) {
  if (fdslen / sizeof *fds < n) __chk_fail();
  return ppoll(fds, n, ts, mask);
}

}  // extern "C"
#endif  // GORO_HAVE_TSAN
