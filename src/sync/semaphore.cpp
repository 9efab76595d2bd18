// semaphore.cpp: goro::semaphore, a weighted FIFO semaphore with the
// semantics of golang.org/x/sync/semaphore.Weighted. Instead of a channel
// per waiter, each waiter is a record in its own frame, queued under a
// runtime lock and parked with the runtime's park/ready (or a note for a
// plain thread). The releaser grants units to waiters in queue order under
// the lock, and wakes them after dropping it; a woken waiter already owns
// its units.
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
  rt::sudog s;         // who to wake
  std::int64_t n = 0;  // units wanted
  waiter* next = nullptr;
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
  waiter* granted = nullptr;  // woken after the lock is dropped
  waiter** granted_tail = &granted;
  st->lock.lock();
  if (n > st->cur) {
    st->lock.unlock();
    throw std::logic_error("semaphore: released more than held");
  }
  st->cur -= n;
  // Serve waiters strictly in order: stop at the first that does not fit,
  // even if a later, smaller one would.
  while (waiter* w = st->head) {
    if (size_ - st->cur < w->n) break;
    st->cur += w->n;
    st->head = w->next;
    if (st->head == nullptr) st->tail = nullptr;
    st->nwait--;
    w->next = nullptr;
    *granted_tail = w;
    granted_tail = &w->next;
  }
  st->lock.unlock();
  while (granted != nullptr) {
    waiter* next = granted->next;  // read before the waiter runs and leaves
    rt::sudog_wake(&granted->s);
    granted = next;
  }
  rt::preempt_check();
}

std::size_t semaphore::waiters() const noexcept {
  const sem_state* st = state_of(state_);
  auto& lock = const_cast<rt::mutex&>(st->lock);
  rt::lock_guard lk(lock);
  return st->nwait;
}

}  // namespace goro
