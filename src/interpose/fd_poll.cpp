// fd_poll.cpp: the descriptor table of the interposed calls and their
// waits on the poller (fd_poll.hpp).
#include "interpose/fd_poll.hpp"

#include <sys/epoll.h>
#include <sys/stat.h>

#include <cerrno>
#include <new>

#include "interpose/real.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/park.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::rt::interpose {

namespace {

// The table: fd >> chunk_bits picks a chunk of 1 << chunk_bits entries,
// allocated on first use and never freed (entries are type-stable, so the
// poller may look one up without a lock).
constexpr int chunk_bits = 10;
constexpr int chunk_size = 1 << chunk_bits;
constexpr int max_chunks = 1024;  // descriptors below 1 << 20 are served
std::atomic<fd_entry*> chunks[max_chunks];

std::uint64_t event_data(int fd, std::uint32_t gen) {
  return hook_data_tag | (std::uint64_t(gen & 0xffff) << 48) |
         std::uint64_t(std::uint32_t(fd));
}

// Wakes w (once) for `why`: into *ready from the poller, goready otherwise.
void fire(fd_wait* w, int why, g_queue* ready) {
  int expect_why = 0;
  w->why.compare_exchange_strong(expect_why, why);
  for (;;) {
    int s = w->state.load();
    if (s == 0) {
      // Before the park: the parker's commit sees 1 and does not park.
      if (w->state.compare_exchange_strong(s, 1)) return;
    } else if (s == 2) {
      if (w->state.compare_exchange_strong(s, 3)) {
        if (ready != nullptr)
          ready->push_back(w->g);
        else
          goready(w->g);
        return;
      }
    } else {
      return;  // already fired
    }
  }
}

// gopark's commit, on g0 after the switch: park unless a waker came first.
bool park_commit(G*, void* arg) {
  auto* w = static_cast<fd_wait*>(arg);
  int expect = 0;
  return w->state.compare_exchange_strong(expect, 2);
}

void timeout_fired(void* arg) {
  fire(static_cast<fd_wait*>(arg), wait_timeout, nullptr);
}

// The events the unfired waiters of e want. Under e->lk.
std::uint32_t wanted(fd_entry* e) {
  std::uint32_t ev = 0;
  for (fd_waiter* x = e->head; x != nullptr; x = x->next)
    if (x->w->state.load(std::memory_order_relaxed) != 1 &&
        x->w->state.load(std::memory_order_relaxed) != 3)
      ev |= x->events;
  return ev;
}

void update_busy(fd_entry* e) {
  e->busy.store(e->registered || e->head != nullptr, std::memory_order_relaxed);
}

// Arms the one-shot registration of fd for `events`. Under e->lk. Returns
// 0, or the wait_result that stops the wait.
int arm(fd_entry* e, int fd, std::uint32_t events) {
  std::uint64_t data = event_data(fd, e->gen.load(std::memory_order_relaxed));
  std::uint32_t ev = events | EPOLLONESHOT;
  if (e->registered) {
    int err = netpoll_ctl(EPOLL_CTL_MOD, fd, ev, data);
    if (err == 0) {
      e->armed = events;
      return 0;
    }
    // ENOENT: the file was closed behind goro's back and the number now
    // names another one; register that one.
    e->registered = false;
    update_busy(e);
    if (err != ENOENT) return err == EBADF ? wait_closed : wait_not_pollable;
  }
  int err = netpoll_ctl(EPOLL_CTL_ADD, fd, ev, data);
  if (err == 0) {
    e->registered = true;
    e->busy.store(true, std::memory_order_relaxed);
    e->armed = events;
    return 0;
  }
  // EPERM: a file epoll cannot watch. EEXIST: goro::fd registered it (its
  // own poll_desc serves it); the caller blocks its thread instead.
  return err == EBADF ? wait_closed : wait_not_pollable;
}

void unlink(fd_waiter* x) {
  fd_entry* e = x->e;
  if (x->prev != nullptr)
    x->prev->next = x->next;
  else
    e->head = x->next;
  if (x->next != nullptr) x->next->prev = x->prev;
  x->next = x->prev = nullptr;
  update_busy(e);
}

}  // namespace

fd_entry* entry_if_exists(int fd) {
  if (fd < 0 || fd >= max_chunks * chunk_size) return nullptr;
  fd_entry* c = chunks[fd >> chunk_bits].load(std::memory_order_acquire);
  return c == nullptr ? nullptr : &c[fd & (chunk_size - 1)];
}

fd_entry* entry(int fd) {
  if (fd < 0 || fd >= max_chunks * chunk_size) return nullptr;
  std::atomic<fd_entry*>& slot = chunks[fd >> chunk_bits];
  fd_entry* c = slot.load(std::memory_order_acquire);
  if (c == nullptr) {
    fd_entry* fresh = new (std::nothrow) fd_entry[chunk_size];
    if (fresh == nullptr) return nullptr;
    // Release: the entries' construction happens before their use through
    // the pointer (acquire loads above and in entry_if_exists).
    if (slot.compare_exchange_strong(c, fresh, std::memory_order_acq_rel))
      c = fresh;
    else
      delete[] fresh;  // another thread installed its chunk first
  }
  return &c[fd & (chunk_size - 1)];
}

fd_kind kind_of(int fd, fd_entry* e) {
  fd_kind k = e->kind.load(std::memory_order_relaxed);
  if (k != fd_kind::unknown) return k;
  struct stat st;
  if (::fstat(fd, &st) != 0) return fd_kind::other;  // EBADF: the call says so
  switch (st.st_mode & S_IFMT) {
    case S_IFSOCK:
      k = fd_kind::socket;
      break;
    case S_IFIFO:
    case S_IFCHR:
    case 0:  // anonymous inodes: eventfd, timerfd, signalfd, inotify
      k = fd_kind::pollable;
      break;
    default:
      k = fd_kind::other;
  }
  e->kind.store(k, std::memory_order_relaxed);
  return k;
}

int wait_fds(fd_waiter* ws, int n, std::int64_t deadline) {
  fd_wait w;
  w.g = getg();
  // Raised before any waiter can be seen, so that a poller that finds one
  // never sees none counted (netpoll.cpp's invariant).
  netpoll_waiter_add(1);
  int armed = 0;
  int result = 0;
  for (; armed < n; armed++) {
    fd_waiter* x = &ws[armed];
    fd_entry* e = x->e;
    x->w = &w;
    lock_guard lk(e->lk);
    if (e->evseq.load(std::memory_order_relaxed) != x->seq) {
      result = wait_io;  // an event or a close since the attempt: retry
      break;
    }
    x->next = e->head;
    x->prev = nullptr;
    if (e->head != nullptr) e->head->prev = x;
    e->head = x;
    e->busy.store(true, std::memory_order_relaxed);
    std::uint32_t want = wanted(e);
    if ((want & ~e->armed) != 0 || !e->registered) {
      if (int r = arm(e, x->fd, want); r != 0) {
        unlink(x);
        result = r;
        break;
      }
    }
  }
  timer t;
  bool timed = false;
  if (result == 0) {
    if (deadline != 0) {
      t.f = timeout_fired;
      t.arg = &w;
      timer_add(&t, deadline);
      timed = true;
    }
    gopark(park_commit, &w, wait_reason::io_wait);
    if (timed) timer_stop(&t);  // waits for a firing in progress
    result = w.why.load();
  }
  for (int i = 0; i < armed; i++) {
    lock_guard lk(ws[i].e->lk);
    unlink(&ws[i]);
  }
  netpoll_waiter_add(-1);
  return result;
}

void fd_closing(int fd) {
  fd_entry* e = entry_if_exists(fd);
  if (e == nullptr) return;
  e->kind.store(fd_kind::unknown, std::memory_order_relaxed);
  // Nothing registered and nobody waiting: no lock. A wait racing with the
  // close of its descriptor is the program's race; its arm then fails with
  // EBADF or registers the next file, whose events the new generation
  // tags.
  if (!e->busy.load(std::memory_order_relaxed)) {
    e->gen.fetch_add(1, std::memory_order_relaxed);
    e->evseq.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  lock_guard lk(e->lk);
  e->gen.fetch_add(1, std::memory_order_relaxed);
  e->evseq.fetch_add(1, std::memory_order_relaxed);
  if (e->registered) {
    // While the number still names the file: a dup of it elsewhere would
    // keep the registration alive.
    (void)netpoll_ctl(EPOLL_CTL_DEL, fd, 0, 0);
    e->registered = false;
  }
  e->armed = 0;
  update_busy(e);
  for (fd_waiter* x = e->head; x != nullptr; x = x->next)
    fire(x->w, wait_closed, nullptr);
}

void fd_new(int fd) {
  if (fd_entry* e = entry_if_exists(fd); e != nullptr)
    e->kind.store(fd_kind::unknown, std::memory_order_relaxed);
}

bool forget_registration(int fd) {
  fd_entry* e = entry_if_exists(fd);
  if (e == nullptr) return false;
  lock_guard lk(e->lk);
  if (!e->registered) return false;
  (void)netpoll_ctl(EPOLL_CTL_DEL, fd, 0, 0);
  e->registered = false;
  e->armed = 0;
  update_busy(e);
  e->evseq.fetch_add(1, std::memory_order_relaxed);
  for (fd_waiter* x = e->head; x != nullptr; x = x->next)
    fire(x->w, wait_io, nullptr);  // they retry, and then block their thread
  return true;
}

void netpoll_event(std::uint64_t data, std::uint32_t events, g_queue* ready) {
  int fd = int(data & 0x7fffffff);
  fd_entry* e = entry_if_exists(fd);
  if (e == nullptr) return;
  lock_guard lk(e->lk);
  if ((e->gen.load(std::memory_order_relaxed) & 0xffff) != (data >> 48))
    return;      // for a file closed since
  e->armed = 0;  // one-shot: disarmed by this event
  e->evseq.fetch_add(1, std::memory_order_relaxed);
  bool all = (events & (EPOLLERR | EPOLLHUP)) != 0;
  for (fd_waiter* x = e->head; x != nullptr; x = x->next)
    if (all || (x->events & events) != 0) fire(x->w, wait_io, ready);
  // Waiters this event did not concern (a writer beside a reader) keep
  // the registration armed for what they want.
  if (std::uint32_t want = wanted(e); want != 0) (void)arm(e, fd, want);
}

}  // namespace goro::rt::interpose
