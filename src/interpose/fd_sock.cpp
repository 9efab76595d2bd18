// fd_sock.cpp: connect and accept, interposed (Go's internal/poll
// FD.Accept and netFD.connect for descriptors goro did not open), and the
// calls that create, duplicate and close descriptors, which keep the
// interposed calls' table (fd_poll.cpp) true: a new number is looked at
// afresh, and a close wakes the goroutines waiting on the descriptor
// (they fail with EBADF, as Go's reads fail on a closed file).
//
// connect on a blocking socket in a goroutine: the socket is made
// non-blocking for the connect(2) call only, its flags restored at once;
// the goroutine parks until the socket is writable, then reads SO_ERROR,
// as a blocking connect returns. SO_SNDTIMEO bounds the wait (EINPROGRESS
// when it expires, as the kernel's). accept waits in the poller until the
// listening socket is readable (SO_RCVTIMEO bounds it: EAGAIN), then
// accepts.
#undef _FORTIFY_SOURCE
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "interpose/hook.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/san.hpp"

using goro::rt::sys::real;
using namespace goro::rt::interpose;

namespace goro::rt::interpose {
// Referenced by init(): links this file's definitions (see hook.cpp).
void link_fd_sock() {}
}  // namespace goro::rt::interpose

// Nothing is interposed under TSan (real.hpp).
#ifndef GORO_HAVE_TSAN

namespace goro::rt::interpose {
namespace {

// The socket's SO_ERROR after a non-blocking connect completed: 0, or -1
// with errno set.
int connect_result(int fd) {
  int soerr = 0;
  socklen_t len = sizeof soerr;
  if (::getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0) return -1;
  if (soerr == 0) return 0;
  *errno_here() = soerr;
  return -1;
}

int connect_impl(int fd, fd_entry* e, const sockaddr* addr, socklen_t len) {
  int fl = ::fcntl(fd, F_GETFL);
  if (fl < 0 || (fl & O_NONBLOCK) != 0 || !can_park())
    return real().connect(fd, addr, len);
  std::int64_t deadline = -1;
  for (;;) {
    std::uint32_t seq = e->evseq.load(std::memory_order_acquire);
    (void)::fcntl(fd, F_SETFL, fl | O_NONBLOCK);
    int r = real().connect(fd, addr, len);
    int err = *errno_here();
    (void)::fcntl(fd, F_SETFL, fl);
    if (r == 0) return 0;
    // EAGAIN: a Unix socket whose listener's backlog is full (a blocking
    // connect waits for room, then tries again).
    if (err != EINPROGRESS && err != EAGAIN) {
      *errno_here() = err;
      return -1;
    }
    if (deadline < 0) deadline = sock_deadline(fd, SO_SNDTIMEO);
    for (;;) {
      int why = wait_one(fd, e, EPOLLOUT, seq, deadline);
      if (why == wait_timeout) {
        *errno_here() = EINPROGRESS;
        return -1;
      }
      if (why == wait_closed) {
        *errno_here() = EBADF;
        return -1;
      }
      if (why == wait_not_pollable) {
        *errno_here() = err;
        return -1;
      }
      seq = e->evseq.load(std::memory_order_acquire);
      pollfd p{fd, POLLOUT, 0};
      if (real().poll(&p, 1, 0) > 0) break;  // else a spurious wake-up
    }
    if (err == EINPROGRESS) return connect_result(fd);
    // EAGAIN: room in the backlog now; connect again.
  }
}

int accept_impl(int fd, fd_entry* e, sockaddr* addr, socklen_t* len,
                int flags) {
  std::int64_t deadline = -1;
  for (;;) {
    std::uint32_t seq = e->evseq.load(std::memory_order_acquire);
    pollfd p{fd, POLLIN, 0};
    if (real().poll(&p, 1, 0) != 0 || nonblocking(fd) || !can_park())
      return real().accept4(fd, addr, len, flags);
    if (deadline < 0) deadline = sock_deadline(fd, SO_RCVTIMEO);
    switch (wait_one(fd, e, EPOLLIN, seq, deadline)) {
      case wait_io:
        continue;
      case wait_timeout:
        *errno_here() = EAGAIN;
        return -1;
      case wait_closed:
        *errno_here() = EBADF;
        return -1;
      default:
        return real().accept4(fd, addr, len, flags);
    }
  }
}

inline fd_entry* socket_entry(int fd) {
  fd_entry* e = entry(fd);
  return e != nullptr && kind_of(fd, e) == fd_kind::socket ? e : nullptr;
}

// A call that returned new descriptor numbers: forget what the table knew
// of them (files closed behind goro's back).
inline int fresh(int fd) {
  if (fd >= 0) fd_new(fd);
  return fd;
}

}  // namespace
}  // namespace goro::rt::interpose

extern "C" {

int connect(int fd, const sockaddr* addr, socklen_t len) {
  fd_entry* e;
  if (!active() || (e = socket_entry(fd)) == nullptr)
    return real().connect(fd, addr, len);
  return connect_impl(fd, e, addr, len);
}

int accept(int fd, sockaddr* addr, socklen_t* len) {
  fd_entry* e;
  if (!active() || (e = socket_entry(fd)) == nullptr)
    return fresh(real().accept(fd, addr, len));
  return fresh(accept_impl(fd, e, addr, len, 0));
}

int accept4(int fd, sockaddr* addr, socklen_t* len, int flags) {
  fd_entry* e;
  if (!active() || (e = socket_entry(fd)) == nullptr)
    return fresh(real().accept4(fd, addr, len, flags));
  return fresh(accept_impl(fd, e, addr, len, flags));
}

int socket(int domain, int type, int protocol) noexcept {
  return fresh(real().socket(domain, type, protocol));
}

int socketpair(int domain, int type, int protocol, int sv[2]) noexcept {
  int r = real().socketpair(domain, type, protocol, sv);
  if (r == 0) {
    fd_new(sv[0]);
    fd_new(sv[1]);
  }
  return r;
}

int pipe(int fds[2]) noexcept {
  int r = real().pipe(fds);
  if (r == 0) {
    fd_new(fds[0]);
    fd_new(fds[1]);
  }
  return r;
}

int pipe2(int fds[2], int flags) noexcept {
  int r = real().pipe2(fds, flags);
  if (r == 0) {
    fd_new(fds[0]);
    fd_new(fds[1]);
  }
  return r;
}

int close(int fd) {
  fd_closing(fd);
  return real().close(fd);
}

int dup2(int oldfd, int newfd) noexcept {
  // newfd is closed first (unless it is oldfd).
  if (oldfd != newfd) fd_closing(newfd);
  return real().dup2(oldfd, newfd);
}

int dup3(int oldfd, int newfd, int flags) noexcept {
  if (oldfd != newfd) fd_closing(newfd);
  return real().dup3(oldfd, newfd, flags);
}

}  // extern "C"
#endif  // GORO_HAVE_TSAN
