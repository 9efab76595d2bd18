// netpoll.cpp: the portable half of the network poller (Go's netpoll.go):
// poll_desc allocation, the rg/wg waiter slots, deadlines and the waiter
// count. The epoll half is netpoll_epoll.cpp.
#include "runtime/netpoll.hpp"

#include <atomic>
#include <cstdint>
#include <goro/runtime.hpp>
#include <new>

#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/proc.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

constexpr std::uintptr_t pd_ready = 1;
constexpr std::uintptr_t pd_wait = 2;

// A plain thread blocked on a descriptor: its slot holds (this | 1).
struct alignas(8) thread_waiter {
  note n;
};

bool is_thread(std::uintptr_t v) { return v > pd_wait && (v & 1) != 0; }
thread_waiter* as_thread(std::uintptr_t v) {
  return reinterpret_cast<thread_waiter*>(v & ~std::uintptr_t{1});
}

// Goroutines and threads parked in a slot. Raised before a waiter can be
// seen in a slot, lowered by whoever takes it out, so a poller that finds
// a waiter never sees 0 here (signed: the two sides race).
std::atomic<std::int32_t> netpoll_waiters{0};

// --- pollcache: type-stable poll_descs ---

mutex cache_lock{lock_rank::pollcache};
poll_desc* cache_first = nullptr;

poll_desc* pd_alloc() {
  lock_guard lk(cache_lock);
  if (cache_first == nullptr) {
    // A block at a time, never freed: an epoll event that races with a
    // close still points at a poll_desc (recognised as stale by fdseq).
    constexpr std::size_t per_block = 64;
    auto* block = static_cast<poll_desc*>(
        ::operator new(sizeof(poll_desc) * per_block, std::nothrow));
    if (block == nullptr) fatal("runtime: cannot allocate poll descriptors");
    for (std::size_t i = 0; i < per_block; i++) {
      poll_desc* pd = new (&block[i]) poll_desc;
      pd->link = cache_first;
      cache_first = pd;
    }
  }
  poll_desc* pd = cache_first;
  cache_first = pd->link;
  pd->link = nullptr;
  return pd;
}

void pd_free(poll_desc* pd) {
  lock_guard lk(cache_lock);
  pd->link = cache_first;
  cache_first = pd;
}

// --- waiter slots ---

std::atomic<std::uintptr_t>& slot(poll_desc* pd, int mode) {
  return mode == 'r' ? pd->rg : pd->wg;
}

int check_err(poll_desc* pd, int mode) {
  if (pd->closing.load(std::memory_order_acquire)) return poll_err_closing;
  if ((mode == 'r' && pd->rd.load(std::memory_order_acquire) < 0) ||
      (mode == 'w' && pd->wd.load(std::memory_order_acquire) < 0))
    return poll_err_timeout;
  // Only reads report EPOLLERR: a write learns the error from write().
  if (mode == 'r' &&
      (pd->info.load(std::memory_order_acquire) & pd_info_everr) != 0)
    return poll_err_not_pollable;
  return poll_ok;
}

// gopark's commit: publish the goroutine in the slot unless readiness, a
// deadline or a close arrived since the slot went to pd_wait.
bool block_commit(G* gp, void* arg) {
  auto* s = static_cast<std::atomic<std::uintptr_t>*>(arg);
  netpoll_waiters.fetch_add(1);
  std::uintptr_t expect = pd_wait;
  if (s->compare_exchange_strong(expect, reinterpret_cast<std::uintptr_t>(gp)))
    return true;
  netpoll_waiters.fetch_sub(1);
  return false;
}

// Waits for readiness on one slot. True if readiness was consumed; false
// if woken by a deadline or a close (the caller re-checks the error).
bool netpollblock(poll_desc* pd, int mode, bool waitio) {
  std::atomic<std::uintptr_t>& s = slot(pd, mode);
  G* gp = getg();
  std::uintptr_t mine = pd_wait;
  thread_waiter tw;
  if (gp == nullptr) mine = reinterpret_cast<std::uintptr_t>(&tw) | 1;
  if (gp == nullptr) netpoll_waiters.fetch_add(1);
  for (;;) {
    std::uintptr_t v = pd_ready;
    if (s.compare_exchange_strong(v, 0)) {
      if (gp == nullptr) netpoll_waiters.fetch_sub(1);
      return true;
    }
    v = 0;
    if (s.compare_exchange_strong(v, mine)) break;
    if (v != pd_ready) fatal("runtime: double wait on a descriptor");
  }
  // Re-check after publishing the slot: a close or a deadline set before
  // it saw no waiter to wake (Go's netpollblock does the same).
  bool park = waitio || check_err(pd, mode) == poll_ok;
  if (gp != nullptr) {
    if (park) gopark(block_commit, &s, wait_reason::io_wait);
  } else if (park) {
    // Make sure some M polls for us: if none is blocked in netpoll, an
    // idle P's thread becomes the poller (findrunnable blocks in netpoll
    // while there are waiters); with every P busy, their findrunnable and
    // sysmon poll.
    if (sched.last_poll.load() != 0) wakep();
    tw.n.sleep();
  } else {
    // Take ourselves out of the slot; if a waker already did, it is about
    // to wake tw, which must outlive that.
    std::uintptr_t v = mine;
    if (s.compare_exchange_strong(v, 0))
      netpoll_waiters.fetch_sub(1);
    else
      tw.n.sleep();
  }
  std::uintptr_t old = s.exchange(0);
  if (old > pd_wait && old != mine) fatal("runtime: corrupted polldesc");
  return old == pd_ready;
}

// Moves a slot to ready (I/O) or empty (deadline, close) and returns the
// waiter that was parked there, if any (0 otherwise).
std::uintptr_t netpollunblock(poll_desc* pd, int mode, bool ioready) {
  std::atomic<std::uintptr_t>& s = slot(pd, mode);
  for (;;) {
    std::uintptr_t old = s.load();
    if (old == pd_ready) return 0;
    if (old == 0 && !ioready) return 0;  // only I/O readiness is remembered
    std::uintptr_t next = ioready ? pd_ready : 0;
    if (s.compare_exchange_strong(old, next)) {
      if (old == pd_wait) return 0;  // the parker's commit will see `next`
      if (old != 0) netpoll_waiters.fetch_sub(1);
      return old;
    }
  }
}

// Wakes a waiter taken out of a slot: a thread directly, a goroutine into
// `ready` (or goready'd if ready is null).
void wake(std::uintptr_t w, g_queue* ready) {
  if (w == 0) return;
  if (is_thread(w)) {
    as_thread(w)->n.wakeup();
  } else if (ready != nullptr) {
    ready->push_back(reinterpret_cast<G*>(w));
  } else {
    goready(reinterpret_cast<G*>(w));
  }
}

// A deadline timer fired. Stale firings (the deadline was cleared or moved
// later since the timer was armed) do nothing: the re-armed timer covers
// the new deadline.
void deadline_fired(poll_desc* pd, int mode) {
  std::atomic<std::int64_t>& d = mode == 'r' ? pd->rd : pd->wd;
  std::int64_t when = d.load(std::memory_order_acquire);
  if (when <= 0 || when > nanotime()) return;
  std::int64_t expect = when;
  if (!d.compare_exchange_strong(expect, -1)) return;
  wake(netpollunblock(pd, mode, false), nullptr);
}

void read_deadline(void* arg) {
  deadline_fired(static_cast<poll_desc*>(arg), 'r');
}
void write_deadline(void* arg) {
  deadline_fired(static_cast<poll_desc*>(arg), 'w');
}

void set_one(poll_desc* pd, int mode, std::int64_t d) {
  std::atomic<std::int64_t>& slot_d = mode == 'r' ? pd->rd : pd->wd;
  timer& t = mode == 'r' ? pd->rt : pd->wt;
  if (t.f == nullptr) {
    t.f = mode == 'r' ? read_deadline : write_deadline;
    t.arg = pd;
  }
  std::int64_t now = nanotime();
  if (d != 0 && d <= now) d = -1;  // already passed
  slot_d.store(d, std::memory_order_release);
  if (d > 0) {
    timer_reset(&t, d, 0);
  } else {
    timer_stop(&t);
    // Expired now: wake a waiter, which sees poll_err_timeout.
    if (d < 0) wake(netpollunblock(pd, mode, false), nullptr);
  }
}

}  // namespace

poll_desc* poll_open(int fd) {
  // The poller is part of the runtime: a descriptor wrapped before
  // anything else used goro starts it with the defaults.
  if (!runtime_started.load(std::memory_order_acquire))
    detail::ensure_started(nullptr);
  poll_desc* pd = pd_alloc();
  {
    std::uintptr_t r = pd->rg.load(), w = pd->wg.load();
    if ((r != 0 && r != pd_ready) || (w != 0 && w != pd_ready))
      fatal("runtime: blocked write on free polldesc");
  }
  pd->fd = fd;
  pd->closing.store(false, std::memory_order_relaxed);
  // The sequence number moved on at the last close; only the flag goes.
  pd->info.fetch_and(~pd_info_everr, std::memory_order_relaxed);
  pd->rg.store(0, std::memory_order_relaxed);
  pd->wg.store(0, std::memory_order_relaxed);
  pd->rd.store(0, std::memory_order_relaxed);
  pd->wd.store(0, std::memory_order_relaxed);
  // Release: an epoll event delivered on another thread right after the
  // registration (epoll_ctl is a full barrier in practice) sees the reset
  // slots and the new fdseq.
  std::atomic_thread_fence(std::memory_order_release);
  if (int err = netpollopen(fd, pd); err != 0) {
    pd_free(pd);
    errno = err;
    return nullptr;
  }
  return pd;
}

void poll_close(poll_desc* pd) {
  if (!pd->closing.load()) fatal("runtime: close polldesc w/o unblock");
  std::uintptr_t r = pd->rg.load(), w = pd->wg.load();
  if ((r != 0 && r != pd_ready) || (w != 0 && w != pd_ready))
    fatal("runtime: blocked pollDesc");
  if (pd->fd >= 0) netpollclose(pd->fd);  // else poll_detach did
  // A new sequence number: events still in flight for the old
  // registration carry the old tag and are dropped.
  pd->info.fetch_add(1u << pd_info_seq_shift, std::memory_order_relaxed);
  pd->fd = -1;
  pd_free(pd);
}

void poll_detach(poll_desc* pd) {
  if (!pd->closing.load()) fatal("runtime: detach polldesc w/o unblock");
  netpollclose(pd->fd);
  // Events already queued for the registration are stale from here.
  pd->info.fetch_add(1u << pd_info_seq_shift, std::memory_order_relaxed);
  pd->fd = -1;
}

int poll_reset(poll_desc* pd, int mode) {
  int err = check_err(pd, mode);
  if (err != poll_ok) return err;
  // A pd_ready left from an earlier edge is consumed by the I/O attempt
  // the caller is about to make; clearing it keeps the next wait honest.
  // Readiness is only a hint that the next attempt may succeed; a
  // spurious one costs an EAGAIN, a lost one a hang, so nothing ever skips
  // the attempt on the strength of the slot's state.
  if (mode == 'r')
    pd->rg.store(0, std::memory_order_relaxed);
  else if (mode == 'w')
    pd->wg.store(0, std::memory_order_relaxed);
  return poll_ok;
}

int poll_wait(poll_desc* pd, int mode) {
  int err = check_err(pd, mode);
  if (err != poll_ok) return err;
  while (!netpollblock(pd, mode, false)) {
    err = check_err(pd, mode);
    if (err != poll_ok) return err;
    // Woken by a stale deadline or a spurious unblock: wait again.
  }
  return poll_ok;
}

void poll_set_deadline(poll_desc* pd, std::int64_t d, int mode) {
  lock_guard lk(pd->dlock);
  if (pd->closing.load()) return;
  if (mode == 'r' || mode == 'r' + 'w') set_one(pd, 'r', d);
  if (mode == 'w' || mode == 'r' + 'w') set_one(pd, 'w', d);
}

void poll_unblock(poll_desc* pd) {
  lock_guard lk(pd->dlock);
  if (pd->closing.load()) fatal("runtime: unblock on closing polldesc");
  pd->closing.store(true, std::memory_order_release);
  // Stop the deadline timers (waiting for a firing in progress), so none
  // touches pd after it is recycled.
  if (pd->rt.f != nullptr) timer_stop(&pd->rt);
  if (pd->wt.f != nullptr) timer_stop(&pd->wt);
  pd->rd.store(0);
  pd->wd.store(0);
  wake(netpollunblock(pd, 'r', false), nullptr);
  wake(netpollunblock(pd, 'w', false), nullptr);
}

void netpollready(g_queue* ready, poll_desc* pd, int mode) {
  if (mode == 'r' || mode == 'r' + 'w')
    wake(netpollunblock(pd, 'r', true), ready);
  if (mode == 'w' || mode == 'r' + 'w')
    wake(netpollunblock(pd, 'w', true), ready);
}

bool netpoll_any_waiters() { return netpoll_waiters.load() > 0; }

void netpoll_waiter_add(int d) { netpoll_waiters.fetch_add(d); }

}  // namespace goro::rt
