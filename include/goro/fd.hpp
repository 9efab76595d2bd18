// goro — Go's runtime scheduler as a C++20 library.
//
// fd.hpp: a descriptor in the network poller (Go's internal/poll.FD).
// goro::fd wraps any descriptor that epoll accepts (socket, pipe, eventfd,
// signalfd, timerfd, a terminal...): it is made non-blocking and
// registered once, edge-triggered, with the runtime's poller. A goroutine
// that reads or writes parks until the descriptor is ready, without
// holding an OS thread; a plain thread blocks instead. Regular files are
// not pollable: wrap their reads in goro::blocking (syscall hand-off).
//
// Errors are goro::io_error, a std::system_error carrying the errno and
// the bytes transferred before the failure (bytes_transferred()). Two of
// them have their own types so callers can tell them apart (Go's
// os.ErrDeadlineExceeded and net.ErrClosed): goro::deadline_exceeded and
// goro::closed_error. EINTR never reaches the caller, and end of stream is
// a 0 from read(), not an error. A write to a pipe or socket whose reader
// is gone throws EPIPE instead of raising SIGPIPE, except on descriptors 1
// and 2 (Go's rule: a program writing to a closed stdout dies quietly).
//
// Example (snippet: main):
//   int p[2];
//   if (::pipe(p) != 0) return 1;
//   goro::fd r(p[0]), w(p[1]);
//   goro::go([&] { w.write("hi", 2); });
//   char buf[2];
//   std::size_t n = r.read_full(buf, 2);  // parks until both bytes arrive
//   return n == 2 ? 0 : 1;
#pragma once

#include <chrono>
#include <cstddef>
#include <system_error>

namespace goro {

class io_error;
namespace detail {
void set_transferred(io_error& e, std::size_t n) noexcept;
}

// The base of every error an I/O operation on a goro::fd (or a goro::net
// connection) throws: a std::system_error with the errno or condition in
// code(), plus the bytes the operation had already transferred when it
// failed (Go returns n with the error: a write whose deadline passed after
// part of the buffer went out reports that part; 0 when nothing did).
// std::system_error is a virtual base, so one exception can also be a
// deadline_exceeded or closed_error and a goro::net::op_error at once and
// still be caught unambiguously as any of them.
class io_error : public virtual std::system_error {
 public:
  io_error(std::error_code ec, const char* what, std::size_t transferred = 0);
  std::size_t bytes_transferred() const noexcept { return n_; }

 protected:
  // For derived classes: the most derived one constructs std::system_error
  // (a virtual base), so this constructor's own initialiser of it is unused.
  explicit io_error(std::size_t transferred) noexcept;

 private:
  friend void detail::set_transferred(io_error& e, std::size_t n) noexcept;
  std::size_t n_ = 0;
};

// A read, write, accept, connect or wait whose deadline passed (Go's
// os.ErrDeadlineExceeded, "i/o timeout"). code() is std::errc::timed_out.
class deadline_exceeded : public virtual io_error {
 public:
  deadline_exceeded();
};

// An operation on a descriptor that was closed, or that another goroutine
// closed while it waited (Go's net.ErrClosed, "use of closed network
// connection"). code() is std::errc::bad_file_descriptor.
class closed_error : public virtual io_error {
 public:
  closed_error();
};

class fd;
namespace detail {
struct fd_state;
fd_state* state_of(fd& f);
}  // namespace detail

class fd {
 public:
  using time_point = std::chrono::steady_clock::time_point;

  fd() noexcept = default;  // holds no descriptor
  // Takes ownership of sysfd, sets O_NONBLOCK and registers it with the
  // poller. Throws std::system_error if epoll refuses it (EPERM for a
  // regular file; the descriptor is then left open and not owned), or
  // std::invalid_argument for a negative sysfd.
  explicit fd(int sysfd);
  fd(fd&& other) noexcept;
  fd& operator=(fd&& other) noexcept;
  fd(const fd&) = delete;
  fd& operator=(const fd&) = delete;
  ~fd();  // close(), errors ignored

  // The descriptor, or -1. Valid while this fd is open; do not close it.
  int get() const noexcept;
  explicit operator bool() const noexcept { return get() >= 0; }

  // Closes: goroutines blocked on this descriptor wake with closed_error;
  // the descriptor itself is closed once the last operation using it has
  // returned (no reuse of the number under a concurrent read). Later
  // operations throw closed_error. Closing an fd that holds none is a
  // no-op.
  void close() noexcept;
  // Unregisters and returns the descriptor without closing it (still
  // non-blocking); blocked waiters wake with closed_error.
  int release();

  // Up to n bytes; 0 at end of stream (or for n == 0). Parks while there is
  // nothing to read.
  std::size_t read(void* buf, std::size_t n);
  // Reads until n bytes or end of stream; returns the count (< n only at
  // end of stream, as Go's io.ReadFull returns ErrUnexpectedEOF). An error
  // after part of it arrived carries that count (bytes_transferred()).
  std::size_t read_full(void* buf, std::size_t n);
  // Writes all n bytes (parking while the buffer is full), as Go's
  // Write; throws on error (EPIPE for a closed peer, never SIGPIPE except
  // on descriptors 1 and 2). The exception's bytes_transferred() says how
  // much was written before the error: a deadline that passed after part
  // of the buffer went out is told apart from one that sent nothing.
  std::size_t write(const void* buf, std::size_t n);

  // Parks until the descriptor is readable / writable (for descriptors the
  // caller reads itself: eventfd, signalfd, accept, connect). Call it after
  // your own read/write/connect reported EAGAIN/EINPROGRESS, and retry that
  // call: the wait may also return for readiness that arrived before it
  // (edge-triggered polling never loses one, but may report one twice).
  void wait_readable();
  void wait_writable();

  // Absolute deadlines for reads, writes or both; time_point{} clears it.
  // A deadline in the past makes waits fail at once; changing a deadline
  // affects operations already blocked (as in Go).
  void set_deadline(time_point t);
  void set_read_deadline(time_point t);
  void set_write_deadline(time_point t);

 private:
  friend detail::fd_state* detail::state_of(fd& f);
  detail::fd_state* s_ = nullptr;
};

}  // namespace goro
