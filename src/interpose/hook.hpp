// hook.hpp: what every interposed call shares (interpose/*.cpp): whether
// the caller is a goroutine that may park, and the two ways a call waits.
//
// A call is interposed only in a goroutine, with GORO_DEBUG=interpose not
// 0. Plain threads, goro's scheduler stacks and calls made before the
// runtime starts reach the C library at the cost of one TLS read.
//
// Sockets: the call is made with MSG_DONTWAIT (or as recv/send with it),
// which leaves the descriptor's flags alone; EAGAIN for a caller that did
// not make the descriptor non-blocking parks the goroutine until the
// poller reports it ready, then the call is made again. Pollable
// descriptors that take no MSG_DONTWAIT (pipes, FIFOs, terminals,
// eventfds; accept on a listening socket): poll(2) with a zero timeout
// first, park while it reports nothing, then the real call (which could
// still block its thread if another reader took the data in between: the
// blocked-thread hand-off covers that). Everything else is passed through.
//
// Only the slow path (a call that would wait) checks that the goroutine
// may park here: on its own stack, outside a signal handler, holding no
// runtime lock and no OS lock. Where it may not, the real blocking call is
// made, as without interposition.
#pragma once

#include <sys/epoll.h>

#include <atomic>
#include <cerrno>
#include <cstdint>

#include "interpose/fd_poll.hpp"
#include "interpose/real.hpp"
#include "runtime/san.hpp"
#include "runtime/tls.hpp"

namespace goro::rt::interpose {

// GORO_DEBUG=interpose (default 1), set at start-up.
extern std::atomic<bool> enabled;
// Start-up (schedinit): on or off, and the real functions resolved.
void init(bool on);

// The caller is a goroutine and interposition is on (fast: TLS + flag).
inline bool active() {
#ifdef GORO_HAVE_TSAN
  return false;
#else
  return getg() != nullptr && enabled.load(std::memory_order_relaxed);
#endif
}

// errno of the thread running the caller now. A goroutine that parked
// resumes on any thread, and glibc declares __errno_location const, so a
// compiler may reuse the address it computed before the park; this
// recomputes it on every call.
int* errno_here();

// The goroutine may park here (slow path only: one rt_sigprocmask).
bool can_park();
// The caller made fd non-blocking: its calls return EAGAIN, not wait.
bool nonblocking(int fd);
// SO_RCVTIMEO / SO_SNDTIMEO of fd as an absolute nanotime(); 0: none.
std::int64_t sock_deadline(int fd, int optname);
// wait_fds for one descriptor.
int wait_one(int fd, fd_entry* e, std::uint32_t events, std::uint32_t seq,
             std::int64_t deadline);

// What to do after a socket call failed with EAGAIN.
enum class next { retry, fail, block };

// The wait of one socket call; deadline read once, on the first EAGAIN.
struct sock_wait {
  int fd;
  fd_entry* e;
  std::uint32_t events;
  int timeo_opt;  // SO_RCVTIMEO or SO_SNDTIMEO
  std::int64_t deadline = -1;

  // After EAGAIN from an attempt begun when e->evseq was seq: retry,
  // fail with *err, or make the real blocking call.
  next after_eagain(std::uint32_t seq, int* err) {
    if (nonblocking(fd)) {
      *err = EAGAIN;
      return next::fail;
    }
    if (!can_park()) return next::block;
    if (deadline < 0) deadline = sock_deadline(fd, timeo_opt);
    switch (wait_one(fd, e, events, seq, deadline)) {
      case wait_io:
        return next::retry;
      case wait_timeout:
        *err = EAGAIN;  // as the kernel's SO_RCVTIMEO/SO_SNDTIMEO expiry
        return next::fail;
      case wait_closed:
        *err = EBADF;
        return next::fail;
      default:
        return next::block;
    }
  }
};

// A socket read in a goroutine. attempt(extra_flags) makes the call with
// extra_flags (MSG_DONTWAIT) added; block() makes the real blocking call.
template <class Attempt, class Block>
long sock_read(int fd, fd_entry* e, int flags, Attempt attempt, Block block) {
  if ((flags & MSG_DONTWAIT) != 0) return attempt(0);
  sock_wait sw{fd, e, EPOLLIN | EPOLLRDHUP, SO_RCVTIMEO};
  for (;;) {
    // Acquire: pairs with the poller's increment, which follows what it
    // saw of the descriptor.
    std::uint32_t seq = e->evseq.load(std::memory_order_acquire);
    long r = attempt(MSG_DONTWAIT);
    if (r >= 0) return r;
    int err = *errno_here();
    if (err == ENOTSOCK) {  // the number names another file now
      forget_kind(e);
      return block();
    }
    if (err != EAGAIN && err != EWOULDBLOCK) return r;
    switch (sw.after_eagain(seq, &err)) {
      case next::retry:
        continue;
      case next::fail:
        *errno_here() = err;
        return -1;
      case next::block:
        return block();
    }
  }
}

// A socket write of `total` bytes in a goroutine: as a blocking socket
// does, it returns once all are sent, or with the count sent before an
// error or timeout. attempt(extra_flags, done) sends from byte `done`;
// block(done) sends the rest with the real blocking call.
template <class Attempt, class Block>
long sock_write(int fd, fd_entry* e, int flags, std::size_t total,
                Attempt attempt, Block block) {
  if ((flags & MSG_DONTWAIT) != 0) return attempt(0, 0);
  sock_wait sw{fd, e, EPOLLOUT, SO_SNDTIMEO};
  std::size_t done = 0;
  for (;;) {
    std::uint32_t seq = e->evseq.load(std::memory_order_acquire);
    long r = attempt(MSG_DONTWAIT, done);
    if (r >= 0) {
      done += std::size_t(r);
      if (done >= total || r == 0) return long(done);
      continue;  // a stream socket's buffer filled up: wait for room
    }
    int err = *errno_here();
    if (err == ENOTSOCK && done == 0) {
      forget_kind(e);
      return block(0);
    }
    if (err != EAGAIN && err != EWOULDBLOCK) {
      if (done > 0) return long(done);
      return -1;
    }
    switch (sw.after_eagain(seq, &err)) {
      case next::retry:
        continue;
      case next::fail:
        if (done > 0) return long(done);
        *errno_here() = err;
        return -1;
      case next::block: {
        long b = block(done);
        if (b < 0) return done > 0 ? long(done) : -1;
        return long(done) + b;
      }
    }
  }
}

// A call on a pollable descriptor that takes no MSG_DONTWAIT: waits in
// the poller until poll(2) reports `pev` (or an error), then calls.
template <class Call>
long poll_first(int fd, fd_entry* e, std::uint32_t epev, short pev, Call call) {
  for (;;) {
    std::uint32_t seq = e->evseq.load(std::memory_order_acquire);
    pollfd p{fd, pev, 0};
    // Ready, an error or hang-up, or poll failed (EBADF): the call says.
    if (sys::real().poll(&p, 1, 0) != 0) return call();
    if (nonblocking(fd) || !can_park()) return call();
    switch (wait_one(fd, e, epev, seq, 0)) {
      case wait_io:
        continue;
      case wait_closed:
        *errno_here() = EBADF;
        return -1;
      default:
        return call();
    }
  }
}

}  // namespace goro::rt::interpose
