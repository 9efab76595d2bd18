// fd_io.cpp: read, write and the socket send/receive calls, interposed
// (Go's internal/poll FD.Read/Write for descriptors goro did not open):
// in a goroutine, a call that would block parks the goroutine on the
// network poller instead of its thread (hook.hpp). What the caller sees is
// the kernel's: the same results, errno values and partial counts, EAGAIN
// where the caller made the descriptor non-blocking or SO_RCVTIMEO /
// SO_SNDTIMEO expired, never an EINTR the kernel would not give.
//
// read/write/readv/writev on a socket become recv/send/recvmsg/sendmsg
// with MSG_DONTWAIT: the same operation (recv with no flags is read), but
// it cannot block, and the descriptor's flags stay the caller's. A send
// on a blocking stream socket returns once every byte is out, so partial
// sends continue after a wait, as the kernel's blocking send does.
// recvmmsg/sendmmsg wait for the first message's readiness, then make the
// real call.
#undef _FORTIFY_SOURCE
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <memory>

#include "interpose/hook.hpp"
#include "runtime/san.hpp"

using goro::rt::interpose::active;
using goro::rt::interpose::entry;
using goro::rt::interpose::fd_entry;
using goro::rt::interpose::fd_kind;
using goro::rt::interpose::kind_of;
using goro::rt::sys::real;

namespace goro::rt::interpose {
// Referenced by init(): links this file's definitions (see hook.cpp).
void link_fd_io() {}
}  // namespace goro::rt::interpose

// Nothing is interposed under TSan (real.hpp).
#ifndef GORO_HAVE_TSAN

namespace goro::rt::interpose {
namespace {

// The iovecs that remain of `iov` after its first `done` bytes: a copy
// only when the first ones were partly sent.
class iov_rest {
 public:
  iov_rest(const iovec* iov, int cnt) : iov_(iov), cnt_(cnt) {}
  // The remainder after `done` bytes; *n receives its count.
  const iovec* after(std::size_t done, int* n) {
    int i = 0;
    while (i < cnt_ && done >= iov_[i].iov_len) done -= iov_[i++].iov_len;
    *n = cnt_ - i;
    if (done == 0 || i == cnt_) return iov_ + i;
    iovec* buf = small_;
    if (*n > int(std::size(small_))) {
      if (!big_) big_.reset(new iovec[std::size_t(cnt_)]);
      buf = big_.get();
    }
    std::copy(iov_ + i, iov_ + cnt_, buf);
    buf[0].iov_base = static_cast<char*>(buf[0].iov_base) + done;
    buf[0].iov_len -= done;
    return buf;
  }

 private:
  const iovec* iov_;
  int cnt_;
  iovec small_[8];
  std::unique_ptr<iovec[]> big_;
};

std::size_t iov_total(const iovec* iov, int cnt) {
  std::size_t t = 0;
  for (int i = 0; i < cnt; i++) t += iov[i].iov_len;
  return t;
}

// MSG_WAITALL on a blocking stream socket: the kernel waits for all n
// bytes (or EOF, an error, a timeout). A datagram socket ignores it.
bool is_stream(int fd) {
  int type = 0;
  socklen_t len = sizeof type;
  return ::getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) == 0 &&
         type == SOCK_STREAM;
}

ssize_t recv_impl(int fd, fd_entry* e, void* buf, std::size_t n, int flags,
                  sockaddr* from, socklen_t* fromlen) {
  auto once = [&](char* p, std::size_t len, int extra) -> long {
    return real().recvfrom(fd, p, len, (flags & ~MSG_WAITALL) | extra, from,
                           fromlen);
  };
  auto* p = static_cast<char*>(buf);
  long r = sock_read(
      fd, e, flags, [&](int extra) { return once(p, n, extra); },
      [&] { return real().recvfrom(fd, p, n, flags, from, fromlen); });
  if ((flags & MSG_WAITALL) == 0 || (flags & MSG_DONTWAIT) != 0 || r <= 0 ||
      std::size_t(r) >= n || !is_stream(fd))
    return r;
  // The rest of a MSG_WAITALL read, as the kernel would wait for it.
  std::size_t got = std::size_t(r);
  while (got < n) {
    long m = sock_read(
        fd, e, 0, [&](int extra) { return once(p + got, n - got, extra); },
        [&] {
          return real().recvfrom(fd, p + got, n - got, flags, from, fromlen);
        });
    if (m <= 0) break;  // EOF, an error or a timeout: what came so far
    got += std::size_t(m);
  }
  return ssize_t(got);
}

ssize_t send_impl(int fd, fd_entry* e, const void* buf, std::size_t n,
                  int flags, const sockaddr* to, socklen_t tolen) {
  const auto* p = static_cast<const char*>(buf);
  return sock_write(
      fd, e, flags, n,
      [&](int extra, std::size_t done) {
        return real().sendto(fd, p + done, n - done, flags | extra, to, tolen);
      },
      [&](std::size_t done) {
        return real().sendto(fd, p + done, n - done, flags, to, tolen);
      });
}

ssize_t sendmsg_impl(int fd, fd_entry* e, const msghdr* msg, int flags) {
  iov_rest rest(msg->msg_iov, int(msg->msg_iovlen));
  // Ancillary data goes out with the first byte only.
  auto part = [&](std::size_t done) {
    msghdr m = *msg;
    int n = 0;
    m.msg_iov = const_cast<iovec*>(rest.after(done, &n));
    m.msg_iovlen = std::size_t(n);
    if (done > 0) {
      m.msg_control = nullptr;
      m.msg_controllen = 0;
    }
    return m;
  };
  return sock_write(
      fd, e, flags, iov_total(msg->msg_iov, int(msg->msg_iovlen)),
      [&](int extra, std::size_t done) {
        if (done == 0) return real().sendmsg(fd, msg, flags | extra);
        msghdr m = part(done);
        return real().sendmsg(fd, &m, flags | extra);
      },
      [&](std::size_t done) {
        msghdr m = part(done);
        return real().sendmsg(fd, &m, flags);
      });
}

ssize_t recvmsg_impl(int fd, fd_entry* e, msghdr* msg, int flags) {
  if ((flags & MSG_WAITALL) != 0 && (flags & MSG_DONTWAIT) == 0) {
    // Wait for the first bytes here; the kernel's blocking call then
    // gathers the rest (its thread blocks only if they are slow to come).
    return poll_first(fd, e, EPOLLIN | EPOLLRDHUP, POLLIN,
                      [&] { return real().recvmsg(fd, msg, flags); });
  }
  return sock_read(
      fd, e, flags,
      [&](int extra) { return real().recvmsg(fd, msg, flags | extra); },
      [&] { return real().recvmsg(fd, msg, flags); });
}

// The entry of a descriptor an interposed call may wait on, or null
// (passed through).
inline fd_entry* waitable(int fd, fd_kind* k) {
  fd_entry* e = entry(fd);
  if (e == nullptr) return nullptr;
  *k = kind_of(fd, e);
  return *k == fd_kind::other ? nullptr : e;
}

}  // namespace
}  // namespace goro::rt::interpose

using namespace goro::rt::interpose;

extern "C" {

ssize_t read(int fd, void* buf, size_t n) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr)
    return real().read(fd, buf, n);
  if (k == fd_kind::socket)
    return sock_read(
        fd, e, 0, [&](int extra) { return real().recv(fd, buf, n, extra); },
        [&] { return real().read(fd, buf, n); });
  // A zero-length read of a pipe returns at once (a socket's waits).
  if (n == 0) return real().read(fd, buf, n);
  return poll_first(fd, e, EPOLLIN | EPOLLRDHUP, POLLIN,
                    [&] { return real().read(fd, buf, n); });
}

ssize_t write(int fd, const void* buf, size_t n) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr)
    return real().write(fd, buf, n);
  if (k == fd_kind::socket) {
    const auto* p = static_cast<const char*>(buf);
    return sock_write(
        fd, e, 0, n,
        [&](int extra, std::size_t done) {
          return real().send(fd, p + done, n - done, extra);
        },
        [&](std::size_t done) { return real().write(fd, p + done, n - done); });
  }
  if (n == 0) return real().write(fd, buf, n);
  return poll_first(fd, e, EPOLLOUT, POLLOUT,
                    [&] { return real().write(fd, buf, n); });
}

ssize_t readv(int fd, const iovec* iov, int cnt) {
  fd_kind k;
  fd_entry* e;
  if (!active() || cnt < 0 || cnt > IOV_MAX ||
      (e = waitable(fd, &k)) == nullptr)
    return real().readv(fd, iov, cnt);
  if (k == fd_kind::socket) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = std::size_t(cnt);
    return sock_read(
        fd, e, 0, [&](int extra) { return real().recvmsg(fd, &m, extra); },
        [&] { return real().readv(fd, iov, cnt); });
  }
  if (iov_total(iov, cnt) == 0) return real().readv(fd, iov, cnt);
  return poll_first(fd, e, EPOLLIN | EPOLLRDHUP, POLLIN,
                    [&] { return real().readv(fd, iov, cnt); });
}

ssize_t writev(int fd, const iovec* iov, int cnt) {
  fd_kind k;
  fd_entry* e;
  if (!active() || cnt < 0 || cnt > IOV_MAX ||
      (e = waitable(fd, &k)) == nullptr)
    return real().writev(fd, iov, cnt);
  if (k == fd_kind::socket) {
    msghdr m{};
    m.msg_iov = const_cast<iovec*>(iov);
    m.msg_iovlen = std::size_t(cnt);
    return sendmsg_impl(fd, e, &m, 0);
  }
  if (iov_total(iov, cnt) == 0) return real().writev(fd, iov, cnt);
  return poll_first(fd, e, EPOLLOUT, POLLOUT,
                    [&] { return real().writev(fd, iov, cnt); });
}

ssize_t recv(int fd, void* buf, size_t n, int flags) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr || k != fd_kind::socket)
    return real().recv(fd, buf, n, flags);
  return recv_impl(fd, e, buf, n, flags, nullptr, nullptr);
}

ssize_t recvfrom(int fd, void* buf, size_t n, int flags, sockaddr* from,
                 socklen_t* fromlen) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr || k != fd_kind::socket)
    return real().recvfrom(fd, buf, n, flags, from, fromlen);
  return recv_impl(fd, e, buf, n, flags, from, fromlen);
}

ssize_t recvmsg(int fd, msghdr* msg, int flags) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr || k != fd_kind::socket)
    return real().recvmsg(fd, msg, flags);
  return recvmsg_impl(fd, e, msg, flags);
}

ssize_t send(int fd, const void* buf, size_t n, int flags) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr || k != fd_kind::socket)
    return real().send(fd, buf, n, flags);
  return send_impl(fd, e, buf, n, flags, nullptr, 0);
}

ssize_t sendto(int fd, const void* buf, size_t n, int flags, const sockaddr* to,
               socklen_t tolen) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (e = waitable(fd, &k)) == nullptr || k != fd_kind::socket)
    return real().sendto(fd, buf, n, flags, to, tolen);
  return send_impl(fd, e, buf, n, flags, to, tolen);
}

ssize_t sendmsg(int fd, const msghdr* msg, int flags) {
  fd_kind k;
  fd_entry* e;
  if (!active() || msg == nullptr || (e = waitable(fd, &k)) == nullptr ||
      k != fd_kind::socket)
    return real().sendmsg(fd, msg, flags);
  return sendmsg_impl(fd, e, msg, flags);
}

int recvmmsg(int fd, mmsghdr* v, unsigned n, int flags, timespec* timeout) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (flags & MSG_DONTWAIT) != 0 ||
      (e = waitable(fd, &k)) == nullptr)
    return real().recvmmsg(fd, v, n, flags, timeout);
  return int(poll_first(fd, e, EPOLLIN | EPOLLRDHUP, POLLIN, [&] {
    return real().recvmmsg(fd, v, n, flags, timeout);
  }));
}

int sendmmsg(int fd, mmsghdr* v, unsigned n, int flags) {
  fd_kind k;
  fd_entry* e;
  if (!active() || (flags & MSG_DONTWAIT) != 0 ||
      (e = waitable(fd, &k)) == nullptr)
    return real().sendmmsg(fd, v, n, flags);
  return int(poll_first(fd, e, EPOLLOUT, POLLOUT,
                        [&] { return real().sendmmsg(fd, v, n, flags); }));
}

// The fortified variants (-D_FORTIFY_SOURCE) that programs call instead;
// glibc's own ones would reach the kernel through internal aliases.
void __chk_fail(void) __attribute__((noreturn));

ssize_t __read_chk(int fd, void* buf, size_t n, size_t buflen) {
  if (n > buflen) __chk_fail();
  return read(fd, buf, n);
}

ssize_t __recv_chk(int fd, void* buf, size_t n, size_t buflen, int flags) {
  if (n > buflen) __chk_fail();
  return recv(fd, buf, n, flags);
}

ssize_t __recvfrom_chk(int fd, void* buf, size_t n, size_t buflen, int flags,
                       sockaddr* from, socklen_t* fromlen) {
  if (n > buflen) __chk_fail();
  return recvfrom(fd, buf, n, flags, from, fromlen);
}

}  // extern "C"
#endif  // GORO_HAVE_TSAN
