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

#include "interpose/real.hpp"
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
  try {
    return accept_loop();
  } catch (const std::system_error&) {
    // Go names the listener's own address ("accept tcp 127.0.0.1:80: ...").
    op_error::info i = detail::sock_info(fd_, "accept");
    i.address = i.source;
    i.source = {};
    if (net_ != nullptr) i.net = net_;  // also after close
    if (i.address.size() == 0) i.address = laddr_;
    detail::rethrow_as_op(std::move(i));
  }
}

conn listener::accept_loop() {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  std::chrono::milliseconds delay{0};
  for (;;) {
    int ns;
    int err = 0;
    sockaddr_storage peer{};
    socklen_t plen = 0;
    {
      goro::detail::fd_io io(s, 'r');
      goro::detail::fd_prepare(s, 'r', "accept");
      for (;;) {
        // The peer's address comes with the connection, for free.
        plen = sizeof peer;
        ns = goro::rt::sys::real().accept4(s->sysfd,
                                           reinterpret_cast<sockaddr*>(&peer),
                                           &plen, SOCK_NONBLOCK | SOCK_CLOEXEC);
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
    conn c(std::move(f), net::addr(reinterpret_cast<sockaddr*>(&peer), plen),
           net_ != nullptr ? net_ : std::string_view());
    int one = 1;
    // TCP_NODELAY on TCP connections (Go's default); harmless failure on
    // Unix sockets, which have no Nagle.
    (void)setsockopt(ns, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return c;
  }
}

addr listener::addr() const {
  if (laddr_.size() != 0 && fd_) return laddr_;
  return detail::sockname(const_cast<goro::fd&>(fd_), false);
}

addr conn::local_addr() const {
  return detail::sockname(const_cast<goro::fd&>(fd_), false);
}
addr conn::remote_addr() const {
  if (raddr_.size() != 0) return raddr_;
  return detail::sockname(const_cast<goro::fd&>(fd_), true);
}

conn::conn(goro::fd f, const net::addr& remote, std::string_view network)
    : fd_(std::move(f)),
      raddr_(remote),
      net_(detail::static_net_name(network)) {}

void conn::fail(const char* op) {
  op_error::info i = detail::sock_info(fd_, op);
  if (raddr_.size() != 0) i.address = raddr_;  // also after a reset
  if (net_ != nullptr) i.net = net_;           // also after close
  detail::rethrow_as_op(std::move(i));
}

// The fast paths are goro::fd's; only a failure pays for naming itself
// (the addresses are read then, see sock_info).
std::size_t conn::read(void* buf, std::size_t n) {
  try {
    return fd_.read(buf, n);
  } catch (const std::system_error&) {
    fail("read");
  }
}

std::size_t conn::read_full(void* buf, std::size_t n) {
  try {
    return fd_.read_full(buf, n);
  } catch (const std::system_error&) {
    fail("read");
  }
}

std::size_t conn::write(const void* buf, std::size_t n) {
  try {
    return fd_.write(buf, n);
  } catch (const std::system_error&) {
    fail("write");
  }
}

namespace {

// The iovecs still to send, from bufs[i] at offset off, in a batch of at
// most `max` entries (a bounded stack array: goroutine stacks are small).
std::size_t next_batch(std::span<const iovec> bufs, std::size_t i,
                       std::size_t off, iovec* out, std::size_t max) {
  std::size_t k = 0;
  for (; i < bufs.size() && k < max; i++, off = 0) {
    if (bufs[i].iov_len == off) continue;  // empty (or done) buffers
    out[k].iov_base = static_cast<char*>(bufs[i].iov_base) + off;
    out[k].iov_len = bufs[i].iov_len - off;
    k++;
  }
  return k;
}

}  // namespace

std::size_t conn::write_buffers(std::span<const iovec> bufs) {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  std::size_t done = 0;
  try {
    goro::detail::fd_io io(s, 'w');
    goro::detail::fd_prepare(s, 'w', "writev");
    std::size_t i = 0, off = 0;  // the next byte to send: bufs[i] + off
    constexpr std::size_t batch = 64;
    iovec iov[batch];
    for (;;) {
      std::size_t k = next_batch(bufs, i, off, iov, batch);
      if (k == 0) break;
      msghdr m{};
      m.msg_iov = iov;
      m.msg_iovlen = k;
      // sendmsg, not writev: MSG_NOSIGNAL (EPIPE, never SIGPIPE).
      ssize_t r = goro::rt::sys::real().sendmsg(s->sysfd, &m, MSG_NOSIGNAL);
      if (r < 0) {
        if (errno == EINTR) continue;
        if (errno != EAGAIN)
          throw goro::io_error(std::error_code(errno, std::system_category()),
                               "writev");
        goro::detail::fd_wait(s, 'w', "writev");
        continue;
      }
      done += std::size_t(r);
      // Advance past what went out.
      for (std::size_t left = std::size_t(r); left > 0;) {
        std::size_t room = bufs[i].iov_len - off;
        if (left < room) {
          off += left;
          left = 0;
        } else {
          left -= room;
          i++;
          off = 0;
        }
      }
    }
  } catch (goro::io_error& e) {
    goro::detail::set_transferred(e, done);
    fail("write");
  } catch (const std::system_error&) {
    fail("write");
  }
  return done;
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

namespace goro::net {

namespace {

void conn_setopt(goro::fd& f, int level, int opt, const void* v,
                 socklen_t len) {
  goro::detail::fd_state* s = goro::detail::state_of(f);
  goro::detail::fd_ref ref(s);
  if (setsockopt(s->sysfd, level, opt, v, len) != 0)
    detail::throw_errno(errno, "setsockopt");
}

}  // namespace

void conn::set_linger(int sec) {
  linger l{};
  l.l_onoff = sec >= 0;
  l.l_linger = sec >= 0 ? sec : 0;
  conn_setopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
}

void conn::set_keep_alive(bool on) {
  int v = on ? 1 : 0;
  conn_setopt(fd_, SOL_SOCKET, SO_KEEPALIVE, &v, sizeof v);
}

void conn::set_keep_alive_period(std::chrono::nanoseconds d) {
  // Whole seconds, rounded up (Go's roundDurationUp), at least 1.
  using std::chrono::seconds;
  std::int64_t ns = d.count() > 0 ? d.count() : 1;
  std::int64_t secs = ns / 1000000000 + (ns % 1000000000 != 0);
  int v = secs > INT32_MAX ? INT32_MAX : int(secs);
  conn_setopt(fd_, IPPROTO_TCP, TCP_KEEPINTVL, &v, sizeof v);
  conn_setopt(fd_, IPPROTO_TCP, TCP_KEEPIDLE, &v, sizeof v);
}

}  // namespace goro::net
