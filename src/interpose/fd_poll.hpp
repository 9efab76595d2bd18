// fd_poll.hpp: what goro knows of a descriptor that an interposed call
// (interpose/*.cpp) may park on: Go's pollDesc for descriptors goro did not
// open. One entry per descriptor number, in a table that only grows.
//
// An entry caches the descriptor's kind (socket, pollable, other) and holds
// the goroutines waiting on it. Goro keeps no copy of the descriptor's
// flags: whether the caller made it non-blocking is read from the kernel
// when a call would wait, so the caller's view is always the kernel's.
//
// Waiting: the descriptor is registered with the poller one-shot for the
// union of what its waiters want (EPOLLONESHOT, level-triggered). Arming
// reports a descriptor that is ready already, so no wake-up is lost between
// a failed attempt and the park; an event wakes the waiters it concerns and
// re-arms for the others. Arming per wait (one epoll_ctl) instead of once
// per descriptor keeps goro right when the program closes or replaces a
// descriptor behind its back (fclose, a library's internal close): the
// kernel drops a closed file's registration, and MOD then fails with
// ENOENT and goro registers the new file afresh.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"

namespace goro::rt::interpose {

enum class fd_kind : std::uint8_t {
  unknown = 0,
  socket,    // MSG_DONTWAIT attempts, park on EAGAIN
  pollable,  // pipes, FIFOs, terminals, eventfds: poll first, then the call
  other,     // regular files, directories, block devices: passed through
};

struct fd_waiter;

struct fd_entry {
  mutex lk{lock_rank::interpose_fd};
  std::atomic<fd_kind> kind{fd_kind::unknown};
  // Bumped by the close hook: events for an earlier file are stale.
  std::atomic<std::uint32_t> gen{0};
  // Bumped by every event and close: a waiter that saw it change since its
  // failed attempt retries instead of parking.
  std::atomic<std::uint32_t> evseq{0};
  // registered || head != nullptr, kept under lk: close() of a
  // descriptor no wait ever touched takes no lock (close is called
  // everywhere, signal handlers included).
  std::atomic<bool> busy{false};
  // Under lk.
  bool registered = false;    // our epoll registration exists for gen
  std::uint32_t armed = 0;    // epoll events armed (one-shot)
  fd_waiter* head = nullptr;  // waiting goroutines
};

// What ended a wait.
enum wait_result : int {
  wait_io = 1,            // an event (maybe spurious): try again
  wait_timeout = 2,       // the deadline passed
  wait_closed = 3,        // the descriptor was closed by the close hook
  wait_not_pollable = 4,  // epoll refuses it (or goro::fd owns it)
};

// One goroutine's wait on one or more descriptors.
struct fd_wait {
  G* g = nullptr;
  // 0 arming, 1 fired before the park, 2 parked, 3 readied (as
  // netpollblock's pd_wait protocol: exactly one of the parker's commit and
  // a waker moves it on).
  std::atomic<int> state{0};
  std::atomic<int> why{0};  // the first wait_result to fire
};

// One descriptor of a wait (on the waiting goroutine's stack).
struct fd_waiter {
  fd_waiter* next = nullptr;
  fd_waiter* prev = nullptr;
  fd_wait* w = nullptr;
  fd_entry* e = nullptr;
  int fd = -1;
  std::uint32_t events = 0;  // EPOLLIN, EPOLLOUT, EPOLLPRI, EPOLLRDHUP
  std::uint32_t seq = 0;     // e->evseq before the failed attempt
};

// The entry of fd, allocating its part of the table if needed; null for a
// negative or huge descriptor number.
fd_entry* entry(int fd);
// The entry if its part of the table exists (no allocation).
fd_entry* entry_if_exists(int fd);
// fd's kind (fstat on first sight, cached until the close hook).
fd_kind kind_of(int fd, fd_entry* e);
// A cached kind turned out wrong (ENOTSOCK): look again next time.
inline void forget_kind(fd_entry* e) {
  e->kind.store(fd_kind::unknown, std::memory_order_relaxed);
}

// Parks the goroutine until one of ws[0..n) may be ready, the absolute
// nanotime() deadline passes (0: none) or one is closed. Each waiter has
// fd, e, events and seq set. Returns a wait_result.
int wait_fds(fd_waiter* ws, int n, std::int64_t deadline);

// The close hook: wakes the waiters (wait_closed), drops goro's
// registration and forgets the kind. Before the real close.
void fd_closing(int fd);
// A descriptor number that now names another file (socket(), accept(),
// pipe(), dup2's target after its close...): forget the kind.
void fd_new(int fd);

// netpoll_epoll.cpp: an event whose user data carries hook_data_tag.
void netpoll_event(std::uint64_t data, std::uint32_t events, g_queue* ready);
// goro::fd wraps fd: drop goro's own hook registration so its own one can
// be added (netpollopen after EEXIST).
bool forget_registration(int fd);

// The epoll user data of a hook registration: bit 47 (never set in a
// user-space poll_desc pointer), the generation's low 16 bits in 48..63,
// the descriptor number below.
constexpr std::uint64_t hook_data_tag = std::uint64_t{1} << 47;

}  // namespace goro::rt::interpose
