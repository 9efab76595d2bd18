// netpoll.hpp: the network poller (Go's netpoll.go / netpoll_epoll.go).
// It is not a thread: an idle M with nothing to run blocks in epoll_wait
// until the next timer, findrunnable polls without blocking, sysmon polls
// when nobody has for 10 ms, and anyone can break a blocked poll.
//
// Descriptors are registered once, edge-triggered for both directions,
// each with a poll_desc (Go's pollDesc) holding one read and one write
// waiter slot (rg/wg). A slot is one of:
//   0             nothing pending
//   pd_ready (1)  a readiness notification not consumed yet
//   pd_wait (2)   a goroutine is about to park (committed in gopark's
//                 unlockf, so readiness between the check and the park is
//                 never lost)
//   a G*          the parked goroutine (even: Gs are 64-byte aligned)
//   w | 1         a blocked plain thread's thread_waiter w (odd, > 2)
// poll_descs are type-stable (allocated in blocks, never freed) and carry
// a sequence number that tags each epoll registration, so an event that
// arrives for a descriptor after it was closed and its poll_desc reused is
// recognised as stale.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/timers.hpp"

namespace goro::rt {

// Results of the poll_* calls (Go's pollNoError...).
enum poll_err : int {
  poll_ok = 0,
  poll_err_closing = 1,       // the descriptor is being closed
  poll_err_timeout = 2,       // the deadline for this mode passed
  poll_err_not_pollable = 3,  // epoll reported EPOLLERR alone
};

struct poll_desc {
  poll_desc* link = nullptr;  // pollcache free list
  int fd = -1;
  // One word, so the poller can check an event's sequence number and set
  // the error flag in the same step (a CAS): bit 0 is everr (epoll reported
  // EPOLLERR alone), the rest the sequence number, incremented on each
  // reuse, whose low 16 bits tag the epoll registration. Two separate
  // words would let a close and reuse land between the poller's check and
  // its store, giving the new descriptor the old one's error.
  std::atomic<std::uint32_t> info{0};
  std::atomic<std::uintptr_t> rg{0};
  std::atomic<std::uintptr_t> wg{0};
  // Read without lock by poll_check_err (published with release).
  std::atomic<bool> closing{false};
  // Deadlines: 0 none, -1 passed, else an absolute nanotime().
  std::atomic<std::int64_t> rd{0};
  std::atomic<std::int64_t> wd{0};
  // Serialises deadline changes (and the timer re-arming they do); the
  // deadline timer's callback never takes it, so set_deadline may wait
  // for a firing in progress while holding it.
  mutex dlock{lock_rank::poll_deadline};
  timer rt;  // read deadline timer (f = netpoll_read_deadline, arg = this)
  timer wt;  // write deadline timer
};

// Registers fd (already non-blocking) with the poller. Returns nullptr and
// leaves errno set if epoll refuses it (EPERM: a regular file).
poll_desc* poll_open(int fd);
// Unregisters and recycles pd. No goroutine may still wait on it (call
// poll_unblock first; fatal "runtime: blocked pollDesc" otherwise).
void poll_close(poll_desc* pd);
// Before an I/O attempt: the error that stops it, clearing a stale
// readiness for `mode` ('r' or 'w') otherwise (Go's pollReset).
int poll_reset(poll_desc* pd, int mode);
// Parks the goroutine (or blocks the plain thread) until the descriptor is
// ready for `mode` ('r' or 'w'), its deadline passes or it is closed.
int poll_wait(poll_desc* pd, int mode);
// Sets the deadline for mode 'r', 'w' or 'r'+'w' to the absolute
// nanotime() `d` (0: none; in the past: expired now, waiters wake).
void poll_set_deadline(poll_desc* pd, std::int64_t d, int mode);
// Takes the descriptor out of the poller now (goro::fd::release: the
// caller may close or rewrap the number as soon as this returns). After
// poll_unblock; poll_close then only recycles pd.
void poll_detach(poll_desc* pd);
// Starts closing: every current and future wait fails with
// poll_err_closing; deadline timers are stopped.
void poll_unblock(poll_desc* pd);

void netpollinit();
bool netpollinited();
// Waits up to delay ns (< 0: forever, 0: poll) and returns the goroutines
// made ready (still _Gwaiting); plain threads it made ready are woken
// directly. Called with no P or from findrunnable/sysmon.
g_queue netpoll(std::int64_t delay);
// Wakes an M blocked in netpoll (coalesced).
void netpollbreak();
// Some goroutine or thread waits on a descriptor.
bool netpoll_any_waiters();
// If an M sleeps in netpoll past `when`, break it; if none polls, wake an
// M so the new timer gets serviced (Go's wakeNetPoller).
void wake_netpoller(std::int64_t when);

// Used by the platform layer (netpoll_epoll.cpp): readiness for `mode`
// ('r', 'w' or 'r'+'w') goes to the slot(s); parked goroutines are added
// to *ready, blocked threads woken.
void netpollready(g_queue* ready, poll_desc* pd, int mode);
// Goroutines waiting through interposed calls (interpose/fd_poll.cpp) count
// as netpoll waiters too.
void netpoll_waiter_add(int d);
// epoll_ctl on the poller's instance for the interposed calls' one-shot
// registrations: 0 or an errno.
int netpoll_ctl(int op, int fd, std::uint32_t events, std::uint64_t data);
// Platform layer: register / unregister one descriptor.
int netpollopen(int fd, poll_desc* pd);  // 0 or an errno
void netpollclose(int fd);

// poll_desc.info's layout.
constexpr std::uint32_t pd_info_everr = 1;
constexpr int pd_info_seq_shift = 1;
constexpr std::uint32_t pd_info_tag_mask = 0xffff;  // seq bits in the tag
inline std::uint32_t pd_info_tag(std::uint32_t info) {
  return (info >> pd_info_seq_shift) & pd_info_tag_mask;
}

}  // namespace goro::rt
