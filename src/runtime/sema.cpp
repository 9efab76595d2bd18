// sema.cpp: the runtime semaphore. Waiters hash by address into 251 roots,
// each a lock, a count of waiters (read without the lock on release) and a
// FIFO of sudogs.
#include "runtime/sema.hpp"

#include <atomic>
#include <goro/runtime.hpp>

#include "runtime/checkdead.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/sudog.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

struct sema_root {
  mutex lock{lock_rank::sema_root};
  std::atomic<std::uint32_t> nwait{0};
  sudog* head = nullptr;
  sudog* tail = nullptr;

  void queue(sudog* s, bool lifo) {
    s->next = s->prev = nullptr;
    if (head == nullptr) {
      head = tail = s;
    } else if (lifo) {
      s->next = head;
      head->prev = s;
      head = s;
    } else {
      s->prev = tail;
      tail->next = s;
      tail = s;
    }
  }
  sudog* dequeue(const void* key) {
    for (sudog* s = head; s; s = s->next) {
      if (s->key != key) continue;
      if (s->prev)
        s->prev->next = s->next;
      else
        head = s->next;
      if (s->next)
        s->next->prev = s->prev;
      else
        tail = s->prev;
      s->next = s->prev = nullptr;
      return s;
    }
    return nullptr;
  }
};

constexpr std::size_t semtab_size = 251;
struct alignas(64) padded_root {
  sema_root r;
};
padded_root semtable[semtab_size];

sema_root& semroot(const void* addr) {
  return semtable[(reinterpret_cast<std::uintptr_t>(addr) >> 3) % semtab_size]
      .r;
}

bool cansemacquire(std::uint32_t* addr) {
  std::atomic_ref<std::uint32_t> v(*addr);
  for (;;) {
    std::uint32_t n = v.load();
    if (n == 0) return false;
    if (v.compare_exchange_weak(n, n - 1)) return true;
  }
}

bool unlock_root(G*, void* root) {
  static_cast<sema_root*>(root)->lock.unlock();
  return true;
}

}  // namespace

void sudog_wake(sudog* s) {
  if (s->g != nullptr)
    goready(s->g);
  else if (s->wake_note != nullptr)
    thread_unpark(*s->wake_note);
  else
    thread_unpark(s->thread_wake);
}

void semacquire(std::uint32_t* addr, wait_reason reason, bool lifo) {
  preempt_check();
  if (cansemacquire(addr)) return;
  sema_root& root = semroot(addr);
  sudog s;
  s.g = getg();
  s.key = addr;
  for (;;) {
    root.lock.lock();
    // Announce ourselves before the final check, so a releaser that
    // increments *addr and then reads nwait either sees us or we see its
    // increment (both seq_cst).
    root.nwait.fetch_add(1);
    if (cansemacquire(addr)) {
      root.nwait.fetch_sub(1);
      root.lock.unlock();
      return;
    }
    root.queue(&s, lifo);
    if (s.g != nullptr) {
      gopark(unlock_root, &root, reason);
    } else {
      root.lock.unlock();
      thread_park(s.thread_wake);
      s.thread_wake.clear();
    }
    if (s.ticket != 0 || cansemacquire(addr)) return;
  }
}

void semrelease(std::uint32_t* addr, bool handoff) {
  runtime_entry();  // one TLS read: plain-thread accounting or preemption
  sema_root& root = semroot(addr);
  std::atomic_ref<std::uint32_t>(*addr).fetch_add(1);
  if (root.nwait.load() == 0) return;  // nobody waits: no lock, no wake-up
  root.lock.lock();
  if (root.nwait.load() == 0) {
    root.lock.unlock();
    return;
  }
  sudog* s = root.dequeue(addr);
  if (s != nullptr) root.nwait.fetch_sub(1);
  root.lock.unlock();
  if (s == nullptr) return;
  if (handoff && cansemacquire(addr)) s->ticket = 1;
  bool was_handoff = s->ticket == 1;
  sudog_wake(s);  // s may be gone from here on
  if (was_handoff && getg() != nullptr) {
    // Direct hand-off: let the waiter run now on this P (Go's goyield).
    goyield();
  }
}

}  // namespace goro::rt
