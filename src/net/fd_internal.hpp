// fd_internal.hpp: what goro::net's sockets share with goro::fd (fd.cpp):
// the descriptor's state, a scoped operation reference, and the prepare /
// wait steps of the non-blocking I/O loop, so accept, connect, recvfrom
// and sendto follow the same protocol as read and write:
//
//   detail::fd_ref ref(state);              // throws closed_error
//   detail::fd_prepare(state, 'r', "what"); // deadline passed, closed...
//   for (;;) {
//     r = syscall(...);
//     if (r >= 0) return r;
//     if (errno == EINTR) continue;
//     if (errno != EAGAIN) throw std::system_error(errno, ...);
//     detail::fd_wait(state, 'r', "what");  // parks until ready
//   }
#pragma once

#include <atomic>
#include <cstdint>
#include <goro/fd.hpp>

namespace goro::rt {
struct poll_desc;
}

namespace goro::detail {

struct fd_state {
  int sysfd = -1;
  rt::poll_desc* pd = nullptr;
  bool is_socket = false;
  // A byte stream (TCP/Unix stream socket, pipe, FIFO): a read that returns
  // fewer bytes than asked for has drained it.
  bool is_stream = false;
  // The last read drained the stream: any data since then has raised a new
  // edge after that read's prepare step, so the next read waits for it
  // first instead of paying a read() that can only say EAGAIN. Relaxed:
  // only a hint (concurrent readers at worst do one syscall more or wait
  // for an edge that is already pending).
  std::atomic<bool> drained{false};
  bool released = false;  // release(): unregister without closing
  std::atomic<bool> closing{false};
  // One for the open descriptor plus one per operation in progress; the
  // last one unregisters and closes it.
  std::atomic<std::uint32_t> refs{1};
};

// Holds a reference for the duration of an operation; throws
// closed_error if the descriptor is closed (or s is null).
class fd_ref {
 public:
  explicit fd_ref(fd_state* s);
  ~fd_ref();
  fd_ref(const fd_ref&) = delete;
  fd_ref& operator=(const fd_ref&) = delete;

 private:
  fd_state* s_;
};

void fd_decref(fd_state* s);
// Throws the error that stops an operation in `mode` ('r' or 'w'), else
// clears a stale readiness before the syscall.
void fd_prepare(fd_state* s, int mode, const char* what);
// Parks until ready for `mode`; throws deadline_exceeded, closed_error or
// the socket's error.
void fd_wait(fd_state* s, int mode, const char* what);
[[noreturn]] void throw_poll_error(fd_state* s, int err, const char* what);

// The state behind a goro::fd (null if it holds none).
fd_state* state_of(goro::fd& f);

}  // namespace goro::detail
