// tcpsock.cpp: stream connections and listeners, TCP and Unix (Go's
// net/tcpsock.go, tcpsock_posix.go, fd_unix.go's accept; the EMFILE
// back-off is net/http's Server.Serve).
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <goro/net.hpp>
#include <goro/runtime.hpp>
#include <goro/time.hpp>

#include "net/fd_internal.hpp"
#include "net/sock.hpp"

namespace goro::net {

namespace {

// Out of descriptors: wait instead of failing or spinning. A goroutine
// sleeps (parks); a plain thread sleeps its thread.
void backoff_sleep(std::chrono::milliseconds d) {
  if (goro::goroutine_id() != 0) {
    goro::sleep(d);
  } else {
    struct timespec ts {
      static_cast<time_t>(d.count() / 1000),
          static_cast<long>(d.count() % 1000) * 1000000
    };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  }
}

}  // namespace

conn listener::accept() {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  std::chrono::milliseconds delay{0};
  for (;;) {
    int ns;
    int err = 0;
    {
      goro::detail::fd_io io(s, 'r');
      goro::detail::fd_prepare(s, 'r', "accept");
      for (;;) {
        ns =
            ::accept4(s->sysfd, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (ns >= 0) break;
        err = errno;
        // EINTR, and a connection reset before we took it: try the next.
        if (err == EINTR || err == ECONNABORTED) continue;
        if (err == EAGAIN) {
          goro::detail::fd_wait(s, 'r', "accept");
          continue;
        }
        break;
      }
    }  // (dropping the reference may close the listener and clobber errno)
    if (ns < 0) {
      if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
        detail::throw_errno(err, "accept");
      // Temporary: back off 5 ms, doubling to 1 s, and retry.
      delay = delay.count() == 0 ? std::chrono::milliseconds(5) : delay * 2;
      if (delay > std::chrono::seconds(1)) delay = std::chrono::seconds(1);
      backoff_sleep(delay);
      continue;
    }
    goro::fd f;
    try {
      f = goro::fd(ns);
    } catch (...) {
      ::close(ns);
      throw;
    }
    conn c(std::move(f));
    int one = 1;
    // TCP_NODELAY on TCP connections (Go's default); harmless failure on
    // Unix sockets, which have no Nagle.
    (void)setsockopt(ns, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
  }
}

addr listener::addr() const {
  return detail::sockname(const_cast<goro::fd&>(fd_), false);
}

addr conn::local_addr() const {
  return detail::sockname(const_cast<goro::fd&>(fd_), false);
}
addr conn::remote_addr() const {
  return detail::sockname(const_cast<goro::fd&>(fd_), true);
}

// These hold a reference while they use the descriptor, so a concurrent
// close() cannot hand its number to someone else in between.
void conn::close_read() {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_ref ref(s);
  if (::shutdown(s->sysfd, SHUT_RD) != 0)
    detail::throw_errno(errno, "shutdown");
}

void conn::close_write() {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_ref ref(s);
  if (::shutdown(s->sysfd, SHUT_WR) != 0)
    detail::throw_errno(errno, "shutdown");
}

void conn::set_no_delay(bool on) {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_ref ref(s);
  int v = on ? 1 : 0;
  if (setsockopt(s->sysfd, IPPROTO_TCP, TCP_NODELAY, &v, sizeof v) != 0)
    detail::throw_errno(errno, "setsockopt");
}

}  // namespace goro::net
