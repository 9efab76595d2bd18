// sema.cpp: the runtime semaphore. Waiters hash by address into 251 roots,
// each a lock, a count of waiters (read without the lock on release) and a
// treap of the addresses waited on, each with a FIFO of sudogs.
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

// A root keeps its waiters in a treap keyed by address (Go's semaRoot
// since Go 1.9): one node per distinct address, ordered by address as a
// binary search tree and by a random priority as a min-heap, so finding an
// address costs O(log n) in the number of distinct addresses waiting on the
// root, not O(n) in the waiters (a million goroutines on one mutex must not
// slow down a release of another address that hashes to the same root).
// Further waiters on the node's address form a FIFO. All under the root's
// lock. The sudog fields, as in Go: prev/next are the left/right children,
// c the parent, ticket the priority, waitlink the next waiter on the
// address and wakelink (in the node) the tail of that FIFO.
struct sema_root {
  mutex lock{lock_rank::sema_root};
  std::atomic<std::uint32_t> nwait{0};
  sudog* treap = nullptr;
  std::uint32_t rand = 0x9e3779b9u;  // priorities (xorshift, under lock)

  std::uint32_t next_prio() {
    rand ^= rand << 13;
    rand ^= rand >> 17;
    rand ^= rand << 5;
    return rand | 1;
  }
  static sudog* up(const sudog* s) { return static_cast<sudog*>(s->c); }
  static void set_up(sudog* s, sudog* parent) { s->c = parent; }
  static bool less(const void* a, const void* b) {
    return reinterpret_cast<std::uintptr_t>(a) <
           reinterpret_cast<std::uintptr_t>(b);
  }
  // The link that points at `s` (its parent's child slot, or the root).
  sudog** slot_of(sudog* s) {
    sudog* p = up(s);
    if (p == nullptr) return &treap;
    return p->prev == s ? &p->prev : &p->next;
  }
  // Rotations keep the address order and move `x` one level down.
  void rotate_left(sudog* x) {  // x's right child takes its place
    sudog* y = x->next;
    sudog** link = slot_of(x);
    x->next = y->prev;
    if (y->prev) set_up(y->prev, x);
    y->prev = x;
    set_up(y, up(x));
    set_up(x, y);
    *link = y;
  }
  void rotate_right(sudog* x) {  // x's left child takes its place
    sudog* y = x->prev;
    sudog** link = slot_of(x);
    x->prev = y->next;
    if (y->next) set_up(y->next, x);
    y->next = x;
    set_up(y, up(x));
    set_up(x, y);
    *link = y;
  }
  // Makes `t` take node `s`'s place in the treap.
  void replace(sudog* s, sudog* t) {
    *slot_of(s) = t;
    set_up(t, up(s));
    t->prev = s->prev;
    t->next = s->next;
    t->ticket = s->ticket;
    if (t->prev) set_up(t->prev, t);
    if (t->next) set_up(t->next, t);
    set_up(s, nullptr);
    s->prev = s->next = nullptr;
  }

  void queue(sudog* s, bool lifo) {
    set_up(s, nullptr);
    s->prev = s->next = nullptr;
    s->waitlink = s->wakelink = nullptr;
    sudog* parent = nullptr;
    sudog** link = &treap;
    while (sudog* n = *link) {
      if (n->key == s->key) {
        if (lifo) {
          // s becomes the node; the old node heads its FIFO.
          replace(n, s);
          s->waitlink = n;
          s->wakelink = n->wakelink != nullptr ? n->wakelink : n;
          n->wakelink = nullptr;
        } else {
          if (n->wakelink == nullptr)
            n->waitlink = s;
          else
            n->wakelink->waitlink = s;
          n->wakelink = s;
        }
        return;
      }
      parent = n;
      link = less(s->key, n->key) ? &n->prev : &n->next;
    }
    // A new address: a leaf, then up while its priority is smaller.
    set_up(s, parent);
    s->ticket = next_prio();
    *link = s;
    while (up(s) != nullptr && up(s)->ticket > s->ticket) {
      if (up(s)->prev == s)
        rotate_right(up(s));
      else
        rotate_left(up(s));
    }
  }

  // Removes and returns the first waiter on `key`, with ticket 0 (the
  // releaser sets it to 1 for a hand-off).
  sudog* dequeue(const void* key) {
    sudog* s = treap;
    while (s != nullptr && s->key != key)
      s = less(key, s->key) ? s->prev : s->next;
    if (s == nullptr) return nullptr;
    if (sudog* t = s->waitlink) {
      // The next waiter on this address becomes the node.
      replace(s, t);
      t->wakelink = t->waitlink != nullptr ? s->wakelink : nullptr;
    } else {
      // Rotate s down to a leaf (smaller-priority child up), then unlink.
      while (s->prev != nullptr || s->next != nullptr) {
        if (s->next == nullptr ||
            (s->prev != nullptr && s->prev->ticket < s->next->ticket))
          rotate_right(s);
        else
          rotate_left(s);
      }
      *slot_of(s) = nullptr;
      set_up(s, nullptr);
    }
    s->waitlink = s->wakelink = nullptr;
    s->ticket = 0;
    return s;
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
