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
// Further waiters on the node's address form a FIFO through kwaitnext; the
// node keeps the tail. All under the root's lock.
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
  static bool less(const void* a, const void* b) {
    return reinterpret_cast<std::uintptr_t>(a) <
           reinterpret_cast<std::uintptr_t>(b);
  }
  // The link that points at `s` (its parent's child slot, or the root).
  sudog** slot_of(sudog* s) {
    if (s->tparent == nullptr) return &treap;
    return s->tparent->tleft == s ? &s->tparent->tleft : &s->tparent->tright;
  }
  // Rotations keep the address order and move `x` one level down.
  void rotate_left(sudog* x) {  // x's right child takes its place
    sudog* y = x->tright;
    sudog** link = slot_of(x);
    x->tright = y->tleft;
    if (y->tleft) y->tleft->tparent = x;
    y->tleft = x;
    y->tparent = x->tparent;
    x->tparent = y;
    *link = y;
  }
  void rotate_right(sudog* x) {  // x's left child takes its place
    sudog* y = x->tleft;
    sudog** link = slot_of(x);
    x->tleft = y->tright;
    if (y->tright) y->tright->tparent = x;
    y->tright = x;
    y->tparent = x->tparent;
    x->tparent = y;
    *link = y;
  }
  // Makes `t` take node `s`'s place in the treap.
  void replace(sudog* s, sudog* t) {
    *slot_of(s) = t;
    t->tparent = s->tparent;
    t->tleft = s->tleft;
    t->tright = s->tright;
    t->prio = s->prio;
    if (t->tleft) t->tleft->tparent = t;
    if (t->tright) t->tright->tparent = t;
    s->tparent = s->tleft = s->tright = nullptr;
  }

  void queue(sudog* s, bool lifo) {
    s->tparent = s->tleft = s->tright = nullptr;
    s->kwaitnext = s->kwaittail = nullptr;
    sudog* parent = nullptr;
    sudog** link = &treap;
    while (sudog* n = *link) {
      if (n->key == s->key) {
        if (lifo) {
          // s becomes the node; the old node heads its FIFO.
          replace(n, s);
          s->kwaitnext = n;
          s->kwaittail = n->kwaittail != nullptr ? n->kwaittail : n;
          n->kwaittail = nullptr;
        } else {
          if (n->kwaittail == nullptr)
            n->kwaitnext = s;
          else
            n->kwaittail->kwaitnext = s;
          n->kwaittail = s;
        }
        return;
      }
      parent = n;
      link = less(s->key, n->key) ? &n->tleft : &n->tright;
    }
    // A new address: a leaf, then up while its priority is smaller.
    s->tparent = parent;
    s->prio = next_prio();
    *link = s;
    while (s->tparent != nullptr && s->tparent->prio > s->prio) {
      if (s->tparent->tleft == s)
        rotate_right(s->tparent);
      else
        rotate_left(s->tparent);
    }
  }

  sudog* dequeue(const void* key) {
    sudog* s = treap;
    while (s != nullptr && s->key != key)
      s = less(key, s->key) ? s->tleft : s->tright;
    if (s == nullptr) return nullptr;
    if (sudog* t = s->kwaitnext) {
      // The next waiter on this address becomes the node.
      replace(s, t);
      t->kwaittail = t->kwaitnext != nullptr ? s->kwaittail : nullptr;
    } else {
      // Rotate s down to a leaf (smaller-priority child up), then unlink.
      while (s->tleft != nullptr || s->tright != nullptr) {
        if (s->tright == nullptr ||
            (s->tleft != nullptr && s->tleft->prio < s->tright->prio))
          rotate_right(s);
        else
          rotate_left(s);
      }
      *slot_of(s) = nullptr;
      s->tparent = nullptr;
    }
    s->kwaitnext = s->kwaittail = nullptr;
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
