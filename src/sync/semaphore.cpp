// semaphore.cpp: goro::semaphore, a weighted FIFO semaphore with the
// semantics of golang.org/x/sync/semaphore.Weighted. Instead of a channel
// per waiter, each waiter is a record in its own frame, queued under a
// runtime lock and parked with the runtime's park/ready (or a note for a
// plain thread). The releaser grants units to waiters in queue order under
// the lock, and wakes them after dropping it; a woken waiter already owns
// its units.
//
// A waiter that can give up (acquire(ctx, n), try_acquire_for) waits with a
// select on its context's done channel and a channel of its own, `ready`,
// that the releaser closes instead of waking a sudog (x/sync's design).
// Whoever removes a waiter from the queue decides its fate, under the lock:
// a releaser grants it (granted = true, units counted as held), or the
// waiter itself, done first, takes itself out. A granted waiter whose
// context is done anyway gives the units back with release(), but only
// after `ready` is closed: until then the releaser may still read its
// record, which lives in the waiter's frame.
#include <goro/context.hpp>
#include <goro/select.hpp>
#include <goro/sync.hpp>
#include <new>
#include <stdexcept>

#include "runtime/checkdead.hpp"
#include "runtime/lock.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/sudog.hpp"
#include "runtime/tls.hpp"

namespace goro {

namespace {

struct waiter {
  rt::sudog s;         // who to wake (a waiter without `ready`)
  std::int64_t n = 0;  // units wanted
  waiter* next = nullptr;
  // A waiter that can give up: closed by the releaser instead of waking s.
  detail::hchan* ready = nullptr;
  bool granted = false;  // set under the lock by the releaser
};

struct sem_state {
  rt::mutex lock{rt::lock_rank::semaphore};
  std::int64_t cur = 0;  // units held
  waiter* head = nullptr;
  waiter* tail = nullptr;
  std::size_t nwait = 0;
};

static_assert(sizeof(sem_state) <= sizeof(detail::runtime_storage<40>));
static_assert(alignof(sem_state) <= alignof(detail::runtime_storage<40>));

inline sem_state* state_of(detail::runtime_storage<40>& s) {
  return std::launder(reinterpret_cast<sem_state*>(s.bytes));
}
inline const sem_state* state_of(const detail::runtime_storage<40>& s) {
  return std::launder(reinterpret_cast<const sem_state*>(s.bytes));
}

bool unlock_state(rt::G*, void* st) {
  static_cast<sem_state*>(st)->lock.unlock();
  return true;
}

// Serves waiters strictly in order, st locked: stop at the first that does
// not fit, even if a later, smaller one would. The granted waiters are
// linked through next, to be woken by wake() after unlocking.
waiter* grant(sem_state* st, std::int64_t size) {
  waiter* granted = nullptr;
  waiter** granted_tail = &granted;
  while (waiter* w = st->head) {
    if (size - st->cur < w->n) break;
    st->cur += w->n;
    st->head = w->next;
    if (st->head == nullptr) st->tail = nullptr;
    st->nwait--;
    w->next = nullptr;
    w->granted = true;
    *granted_tail = w;
    granted_tail = &w->next;
  }
  return granted;
}

void wake(waiter* granted) {
  while (granted != nullptr) {
    // Read before the waiter runs and leaves.
    waiter* next = granted->next;
    if (detail::hchan* c = granted->ready) {
      // The waiter stays until this close; our own reference keeps the
      // channel alive through closechan even if the waiter then drops its.
      detail::chan_retain(c);
      detail::closechan(c);
      detail::chan_release(c);
    } else {
      rt::sudog_wake(&granted->s);
    }
    granted = next;
  }
}

// Takes w out of the queue (st locked); true if it was at the front.
bool unlink(sem_state* st, waiter* w) {
  waiter* prev = nullptr;
  for (waiter* x = st->head; x != nullptr; prev = x, x = x->next) {
    if (x != w) continue;
    if (prev == nullptr)
      st->head = w->next;
    else
      prev->next = w->next;
    if (st->tail == w) st->tail = prev;
    st->nwait--;
    w->next = nullptr;
    return prev == nullptr;
  }
  return false;
}

}  // namespace

semaphore::semaphore(std::int64_t capacity) : size_(capacity) {
  if (capacity < 0) throw std::invalid_argument("semaphore: negative capacity");
  ::new (static_cast<void*>(state_.bytes)) sem_state;
}

semaphore::~semaphore() { state_of(state_)->~sem_state(); }

void semaphore::acquire(std::int64_t n) {
  if (n < 0) throw std::invalid_argument("semaphore: negative acquire");
  if (n > size_)
    throw std::invalid_argument(
        "semaphore: acquire of more than the semaphore's capacity");
  rt::preempt_check();
  sem_state* st = state_of(state_);
  st->lock.lock();
  // Take the units only if nobody is queued: FIFO, no overtaking.
  if (size_ - st->cur >= n && st->head == nullptr) {
    st->cur += n;
    st->lock.unlock();
    return;
  }
  waiter w;
  w.n = n;
  w.s.g = rt::getg();
  w.s.key = this;
  if (st->tail == nullptr)
    st->head = &w;
  else
    st->tail->next = &w;
  st->tail = &w;
  st->nwait++;
  if (w.s.g != nullptr) {
    rt::gopark(unlock_state, st, rt::wait_reason::semacquire);
  } else {
    st->lock.unlock();
    rt::thread_park(w.s.thread_wake);
  }
  // Woken only by release(), which has already counted our units as held.
}

bool semaphore::try_acquire(std::int64_t n) {
  if (n < 0) throw std::invalid_argument("semaphore: negative acquire");
  sem_state* st = state_of(state_);
  rt::lock_guard lk(st->lock);
  if (size_ - st->cur >= n && st->head == nullptr) {
    st->cur += n;
    return true;
  }
  return false;
}

void semaphore::release(std::int64_t n) {
  if (n < 0) throw std::invalid_argument("semaphore: negative release");
  sem_state* st = state_of(state_);
  st->lock.lock();
  if (n > st->cur) {
    st->lock.unlock();
    throw std::logic_error("semaphore: released more than held");
  }
  st->cur -= n;
  waiter* granted = grant(st, size_);
  st->lock.unlock();
  wake(granted);
  rt::preempt_check();
}

std::error_code semaphore::acquire(const context& ctx, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("semaphore: negative acquire");
  if (n > size_)
    throw std::invalid_argument(
        "semaphore: acquire of more than the semaphore's capacity");
  rt::preempt_check();
  // A context already done fails even when the units are free (x/sync: its
  // being done happened before the acquire).
  if (std::error_code e = ctx.err()) return e;
  sem_state* st = state_of(state_);
  {
    rt::lock_guard lk(st->lock);
    if (size_ - st->cur >= n && st->head == nullptr) {
      st->cur += n;
      return {};
    }
  }
  // Slow path: the channel is made outside the lock, then the queue is
  // looked at again.
  chan<void> ready = make_chan<void>();
  chan<void> done = ctx.done();
  waiter w;
  w.n = n;
  w.ready = ready.raw();
  st->lock.lock();
  if (size_ - st->cur >= n && st->head == nullptr) {
    st->cur += n;
    st->lock.unlock();
    return {};
  }
  if (st->tail == nullptr)
    st->head = &w;
  else
    st->tail->next = &w;
  st->tail = &w;
  st->nwait++;
  st->lock.unlock();

  recv_chan<void> ready_r = ready;
  if (goro::select(case_recv(ready_r), case_recv(done)) == 0) {
    // Granted. If ctx is done too, fail anyway (as x/sync): a non-empty
    // result always means the units are not held.
    bool closed = false;
    if (done && !done.try_recv(&closed) && closed) {
      release(n);
      return ctx.err();
    }
    return {};
  }
  st->lock.lock();
  if (w.granted) {
    // A releaser took us out and will close `ready`; our record must
    // outlive that, so wait for it before giving the units back.
    st->lock.unlock();
    (void)ready.recv();
    release(n);
    return ctx.err();
  }
  // Leaving the front may let the next waiters in.
  waiter* granted = nullptr;
  if (unlink(st, &w) && size_ > st->cur) granted = grant(st, size_);
  st->lock.unlock();
  wake(granted);
  return ctx.err();
}

bool semaphore::try_acquire_for(std::chrono::nanoseconds d, std::int64_t n) {
  if (n < 0) throw std::invalid_argument("semaphore: negative acquire");
  if (n > size_)
    throw std::invalid_argument(
        "semaphore: acquire of more than the semaphore's capacity");
  if (try_acquire(n)) return true;
  if (d <= std::chrono::nanoseconds::zero()) return false;
  auto [ctx, cancel] = with_timeout(background(), d);
  std::error_code e = acquire(ctx, n);
  cancel();
  return !e;
}

std::size_t semaphore::waiters() const noexcept {
  const sem_state* st = state_of(state_);
  auto& lock = const_cast<rt::mutex&>(st->lock);
  rt::lock_guard lk(lock);
  return st->nwait;
}

}  // namespace goro
