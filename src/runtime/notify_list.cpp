// notify_list.cpp: Go's notifyList; see notify_list.hpp.
#include "runtime/notify_list.hpp"

#include "runtime/checkdead.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

// t comes before u, allowing for wrap-around.
inline bool ticket_less(std::uint32_t t, std::uint32_t u) {
  return static_cast<std::int32_t>(t - u) < 0;
}

bool unlock_list(G*, void* l) {
  static_cast<notify_list*>(l)->lock.unlock();
  return true;
}

}  // namespace

std::uint32_t notify_list_add(notify_list* l) { return l->wait.fetch_add(1); }

void notify_list_wait(notify_list* l, std::uint32_t t) {
  preempt_check();
  l->lock.lock();
  if (ticket_less(t, l->notify.load(std::memory_order_relaxed))) {
    l->lock.unlock();  // already notified
    return;
  }
  // The waiter record lives in this frame; notifiers unlink it under the
  // lock and wake it only afterwards, so it is never touched once we run.
  sudog s;
  s.g = getg();
  s.ticket = t;
  s.key = l;
  if (l->tail == nullptr)
    l->head = &s;
  else
    l->tail->next = &s;
  l->tail = &s;
  if (s.g != nullptr) {
    // The lock is released on the scheduler stack after we are parked, so
    // a notifier cannot ready us before we have left this stack.
    gopark(unlock_list, l, wait_reason::sync_cond_wait);
  } else {
    l->lock.unlock();
    thread_park(s.thread_wake);
  }
}

void notify_list_notify_all(notify_list* l) {
  // Nothing to do when every ticket handed out has been notified. A waiter
  // that took its ticket under the caller's lock is seen here when the
  // caller holds that lock (or has synchronised with it).
  if (l->wait.load() == l->notify.load()) return;
  l->lock.lock();
  sudog* s = l->head;
  l->head = l->tail = nullptr;
  // Every ticket taken so far counts as notified, including those of
  // waiters that have not queued yet: they will not sleep.
  l->notify.store(l->wait.load());
  l->lock.unlock();
  while (s != nullptr) {
    sudog* next = s->next;  // read before the waiter can run and go away
    s->next = nullptr;
    sudog_wake(s);
    s = next;
  }
}

void notify_list_notify_one(notify_list* l) {
  if (l->wait.load() == l->notify.load()) return;
  l->lock.lock();
  // Re-check under the lock: another notifier may have got there first.
  const std::uint32_t t = l->notify.load(std::memory_order_relaxed);
  if (t == l->wait.load()) {
    l->lock.unlock();
    return;
  }
  l->notify.store(t + 1);
  // Find the holder of ticket t. It may not have queued yet; then it sees
  // its ticket notified when it does, and does not sleep.
  for (sudog *prev = nullptr, *s = l->head; s != nullptr;
       prev = s, s = s->next) {
    if (s->ticket != t) continue;
    sudog* next = s->next;
    if (prev != nullptr)
      prev->next = next;
    else
      l->head = next;
    if (next == nullptr) l->tail = prev;
    l->lock.unlock();
    s->next = nullptr;
    sudog_wake(s);
    return;
  }
  l->lock.unlock();
}

}  // namespace goro::rt
