// fd.cpp: goro::fd, a descriptor in the network poller (Go's
// internal/poll.FD on Unix): non-blocking I/O that parks on EAGAIN, a
// reference count that keeps the descriptor number alive until every
// operation using it has returned, and deadlines.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <goro/fd.hpp>
#include <mutex>
#include <stdexcept>
#include <system_error>

#include "interpose/real.hpp"
#include "net/fd_internal.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/preempt.hpp"

namespace goro {

namespace detail {

namespace {

// The last reference: unregister, then close (unless released).
void destroy(fd_state* s) {
  rt::poll_close(s->pd);
  s->pd = nullptr;
  nonblock_release(s);
  if (!s->released) {
    // Linux closes the descriptor even when close() reports EINTR: never
    // retry (the number may already be someone else's).
    ::close(s->sysfd);
  }
}

}  // namespace

fd_state* state_of(goro::fd& f) { return f.s_; }

void fd_decref(fd_state* s) {
  std::uint32_t v = s->refs.fetch_sub(1, std::memory_order_acq_rel) - 1;
  if ((v & ~fd_state::handle_ref) == 0) {
    destroy(s);
    if (v == 0) delete s;  // the goro::fd is gone too
  }
}

// The goro::fd object is going away: the memory goes with the last
// reference (now, or when the last operation returns).
void fd_drop_handle(fd_state* s) {
  if (s->refs.fetch_sub(fd_state::handle_ref, std::memory_order_acq_rel) ==
      fd_state::handle_ref)
    delete s;
}

fd_ref::fd_ref(fd_state* s) : s_(s) {
  if (s == nullptr) throw closed_error();
  // Never from 0: the descriptor is gone once the count reached it.
  std::uint32_t r = s->refs.load(std::memory_order_relaxed);
  do {
    if ((r & ~fd_state::handle_ref) == 0) throw closed_error();
  } while (!s->refs.compare_exchange_weak(r, r + 1, std::memory_order_acquire));
  if (s->closing.load(std::memory_order_acquire)) {
    fd_decref(s);
    throw closed_error();
  }
}

fd_ref::~fd_ref() { fd_decref(s_); }

// An I/O call is a runtime entry (Go checks for preemption in every
// function prologue): a goroutine whose reads or writes never wait, such
// as a loop of UDP sends, would otherwise never yield, since a signal
// that lands in the kernel or libc finds no safe point. The check comes
// before the lock, so a preempted goroutine holds nothing; on a plain
// thread it counts the thread as using goro (checkdead). Then the
// reference: a null or closed descriptor throws before it waits for the
// lock.
fd_io::fd_io(fd_state* s, int mode)
    : ref_((rt::runtime_entry(), s)), mu_(mode == 'r' ? s->rmu : s->wmu) {
  mu_.lock();
}

fd_io::~fd_io() { mu_.unlock(); }

void throw_poll_error(fd_state* s, int err, const char* what) {
  switch (err) {
    case rt::poll_err_closing:
      throw closed_error();
    case rt::poll_err_timeout:
      throw deadline_exceeded();
    default: {
      // EPOLLERR alone: the socket's pending error says what happened.
      int soerr = 0;
      socklen_t len = sizeof soerr;
      if (getsockopt(s->sysfd, SOL_SOCKET, SO_ERROR, &soerr, &len) != 0 ||
          soerr == 0)
        soerr = EIO;
      throw io_error(std::error_code(soerr, std::system_category()), what);
    }
  }
}

void fd_prepare(fd_state* s, int mode, const char* what) {
  if (int err = rt::poll_reset(s->pd, mode); err != rt::poll_ok)
    throw_poll_error(s, err, what);
}

void fd_wait(fd_state* s, int mode, const char* what) {
  if (int err = rt::poll_wait(s->pd, mode); err != rt::poll_ok)
    throw_poll_error(s, err, what);
}

}  // namespace detail

using detail::fd_io;
using detail::fd_ref;
using detail::fd_state;

fd::fd(int sysfd) {
  if (sysfd < 0) throw std::invalid_argument("goro::fd: negative descriptor");
  int fl = fcntl(sysfd, F_GETFL);
  if (fl < 0)
    throw std::system_error(errno, std::system_category(), "goro::fd: fcntl");
  struct stat st;
  if (fstat(sysfd, &st) != 0)
    throw std::system_error(errno, std::system_category(), "goro::fd: fstat");
  if (S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))
    throw std::system_error(
        EPERM, std::system_category(),
        "goro::fd: cannot poll this descriptor (a regular file or directory)");
  if ((fl & O_NONBLOCK) == 0 && fcntl(sysfd, F_SETFL, fl | O_NONBLOCK) != 0)
    throw std::system_error(errno, std::system_category(), "goro::fd: fcntl");
  rt::poll_desc* pd = rt::poll_open(sysfd);
  if (pd == nullptr) {
    int err = errno;
    if ((fl & O_NONBLOCK) == 0) (void)fcntl(sysfd, F_SETFL, fl);
    throw std::system_error(
        err, std::system_category(),
        "goro::fd: cannot poll this descriptor (epoll_ctl)");
  }
  s_ = new fd_state;
  s_->sysfd = sysfd;
  s_->pd = pd;
  s_->is_socket = S_ISSOCK(st.st_mode);
  detail::nonblock_acquire(s_, fl, &st);
}

fd::fd(fd&& other) noexcept : s_(other.s_) { other.s_ = nullptr; }

fd& fd::operator=(fd&& other) noexcept {
  if (this != &other) {
    close();
    if (s_ != nullptr) detail::fd_drop_handle(s_);
    s_ = other.s_;
    other.s_ = nullptr;
  }
  return *this;
}

fd::~fd() {
  close();
  if (s_ != nullptr) detail::fd_drop_handle(s_);
}

int fd::get() const noexcept {
  if (s_ == nullptr || s_->closing.load(std::memory_order_acquire)) return -1;
  return s_->sysfd;
}

void fd::close() noexcept {
  if (s_ == nullptr) return;
  if (s_->closing.exchange(true, std::memory_order_acq_rel)) return;
  // Wake every waiter (they fail with closed_error and drop their
  // references), then drop the open reference: the descriptor is closed
  // by whoever holds the last one.
  rt::poll_unblock(s_->pd);
  detail::fd_decref(s_);
}

// Unlike close(), release() waits: operations still in progress hold the
// direction locks until they return, so once both are taken nobody uses
// the number, and it leaves the poller (and gets its blocking mode back)
// before the caller, who may close it or wrap it again at once, has it.
int fd::release() {
  if (s_ == nullptr || s_->closing.exchange(true, std::memory_order_acq_rel))
    throw closed_error();
  s_->released = true;
  rt::poll_unblock(s_->pd);
  {
    std::lock_guard<goro::mutex> r(s_->rmu);
    std::lock_guard<goro::mutex> w(s_->wmu);
    rt::poll_detach(s_->pd);
    detail::nonblock_release(s_);
  }
  int sysfd = s_->sysfd;
  detail::fd_decref(s_);
  return sysfd;
}

std::size_t fd::read(void* buf, std::size_t n) {
  fd_io io(s_, 'r');
  if (n == 0) return 0;
  // Always attempt the read, even right after a short one: a short read
  // does not prove the buffer empty (a packet-mode pipe returns one packet,
  // TCP stops at urgent data, a Unix socket at a change of credentials),
  // and wait_readable() may have consumed the edge of data still queued.
  detail::fd_prepare(s_, 'r', "read");
  for (;;) {
    ssize_t r = goro::rt::sys::real().read(s_->sysfd, buf, n);
    if (r >= 0) return std::size_t(r);
    if (errno == EINTR) continue;
    if (errno != EAGAIN)
      throw io_error(std::error_code(errno, std::system_category()), "read");
    detail::fd_wait(s_, 'r', "read");
  }
}

std::size_t fd::read_full(void* buf, std::size_t n) {
  std::size_t got = 0;
  try {
    while (got < n) {
      std::size_t r = read(static_cast<char*>(buf) + got, n - got);
      if (r == 0) break;
      got += r;
    }
  } catch (io_error& e) {
    detail::set_transferred(e, got);  // what earlier reads delivered
    throw;
  }
  return got;
}

std::size_t fd::write(const void* buf, std::size_t n) {
  std::size_t done = 0;
  try {
    fd_io io(s_, 'w');
    detail::fd_prepare(s_, 'w', "write");
    while (done < n) {
      const char* p = static_cast<const char*>(buf) + done;
      // Sockets: MSG_NOSIGNAL, so a closed peer is EPIPE and never SIGPIPE;
      // other descriptors but 1 and 2 get the same through sigpipe.cpp.
      ssize_t r =
          s_->is_socket
              ? goro::rt::sys::real().send(s_->sysfd, p, n - done, MSG_NOSIGNAL)
              : detail::write_nosigpipe(s_->sysfd, p, n - done);
      if (r >= 0) {
        done += std::size_t(r);
        continue;
      }
      if (errno == EINTR) continue;
      if (errno != EAGAIN)
        throw io_error(std::error_code(errno, std::system_category()), "write");
      detail::fd_wait(s_, 'w', "write");
    }
  } catch (io_error& e) {
    // Go returns n with the error: the count of what went out before it.
    detail::set_transferred(e, done);
    throw;
  }
  return done;
}

// No prepare step here: the caller's own syscall (which got EAGAIN, or a
// connect in progress) came before, and clearing the slot now would drop an
// edge that arrived since, and wait for one that never comes. A readiness
// older than that syscall makes the wait return early instead, which the
// caller's retry loop absorbs (Go's waitRead/waitWrite behave the same).
void fd::wait_readable() {
  fd_io io(s_, 'r');
  detail::fd_wait(s_, 'r', "wait_readable");
}

void fd::wait_writable() {
  fd_io io(s_, 'w');
  detail::fd_wait(s_, 'w', "wait_writable");
}

namespace {
// steady_clock is CLOCK_MONOTONIC, nanotime()'s clock; time_point{} is
// "no deadline" (Go's zero Time).
std::int64_t to_nanotime(fd::time_point t) {
  if (t == fd::time_point{}) return 0;
  std::int64_t ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch())
          .count();
  return ns > 0 ? ns : 1;  // before the clock's start: long past
}
}  // namespace

void fd::set_deadline(time_point t) {
  fd_ref ref(s_);
  rt::poll_set_deadline(s_->pd, to_nanotime(t), 'r' + 'w');
}

void fd::set_read_deadline(time_point t) {
  fd_ref ref(s_);
  rt::poll_set_deadline(s_->pd, to_nanotime(t), 'r');
}

void fd::set_write_deadline(time_point t) {
  fd_ref ref(s_);
  rt::poll_set_deadline(s_->pd, to_nanotime(t), 'w');
}

}  // namespace goro
