// fd_internal.hpp: what goro::net's sockets share with goro::fd (fd.cpp):
// the descriptor's state, a scoped operation reference, and the prepare /
// wait steps of the non-blocking I/O loop, so accept, connect, recvfrom
// and sendto follow the same protocol as read and write:
//
//   detail::fd_io io(state, 'r');           // throws closed_error
//   detail::fd_prepare(state, 'r', "what"); // deadline passed, closed...
//   for (;;) {
//     r = syscall(...);
//     if (r >= 0) return r;
//     if (errno == EINTR) continue;
//     if (errno != EAGAIN) throw std::system_error(errno, ...);
//     detail::fd_wait(state, 'r', "what");  // parks until ready
//   }
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <goro/fd.hpp>
#include <goro/sync.hpp>

struct stat;

namespace goro::rt {
struct poll_desc;
}

namespace goro::detail {

struct fd_state {
  int sysfd = -1;
  rt::poll_desc* pd = nullptr;
  bool is_socket = false;
  // Counted in fd_nonblock.cpp's table of descriptions (its key): the
  // last goro::fd on the description puts back the blocking mode goro
  // took away.
  bool nb_tracked = false;
  unsigned long nb_key_dev = 0;
  unsigned long nb_key_ino = 0;
  bool released = false;  // release(): unregister without closing
  std::atomic<bool> closing{false};
  // One for the open descriptor plus one per operation in progress (the
  // low bits; the last one unregisters and closes the descriptor), plus
  // handle_ref while the goro::fd object exists: the state's memory goes
  // when the whole word reaches zero, so an operation that is still
  // returning (unlocking rmu/wmu) when the owner destroys its goro::fd
  // does not touch freed memory.
  static constexpr std::uint32_t handle_ref = 1u << 31;
  std::atomic<std::uint32_t> refs{handle_ref + 1};
  // One reader and one writer at a time (Go's fdMutex read and write
  // locks): a poll slot holds one waiter, and a second operation's prepare
  // step would overwrite the first one parked there. goro::mutex parks
  // goroutines and blocks plain threads; a close wakes the holder, and each
  // waiter then fails with closed_error in turn.
  goro::mutex rmu;
  goro::mutex wmu;
};

// fd_nonblock.cpp: count s on its open file description (fl: its flags
// before goro::fd set O_NONBLOCK, st: its fstat), and the reverse, which
// clears O_NONBLOCK again if goro set it and s was the last user.
void nonblock_acquire(fd_state* s, int fl, const struct stat* st);
void nonblock_release(fd_state* s);

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

// An I/O operation in one direction ('r': read, accept, recvfrom, wait for
// readability; 'w': write, send, connect, wait for writability): a
// reference plus that direction's lock, for its duration.
class fd_io {
 public:
  fd_io(fd_state* s, int mode);
  ~fd_io();
  fd_io(const fd_io&) = delete;
  fd_io& operator=(const fd_io&) = delete;

 private:
  fd_ref ref_;
  goro::mutex& mu_;
};

void fd_decref(fd_state* s);
void fd_drop_handle(fd_state* s);
// Throws the error that stops an operation in `mode` ('r' or 'w'), else
// clears a stale readiness before the syscall.
void fd_prepare(fd_state* s, int mode, const char* what);
// Parks until ready for `mode`; throws deadline_exceeded, closed_error or
// the socket's error.
void fd_wait(fd_state* s, int mode, const char* what);
[[noreturn]] void throw_poll_error(fd_state* s, int err, const char* what);

// write(2) to a descriptor that is not a socket, with SIGPIPE turned into
// EPIPE unless sysfd is 1 or 2 (sigpipe.cpp). Never parks.
ssize_t write_nosigpipe(int sysfd, const void* p, std::size_t n) noexcept;

// The state behind a goro::fd (null if it holds none).
fd_state* state_of(goro::fd& f);

}  // namespace goro::detail
