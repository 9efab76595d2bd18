// lock.hpp: the runtime's internal mutex (Go's lock_futex.go) and futex
// helpers. Spins briefly, yields once, then sleeps on a futex. Used for the
// global scheduler lock and other short critical sections; never held across
// a goroutine switch.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::rt {

// Thin wrappers over the futex system call (private futexes).
void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t val,
                std::int64_t ns);  // ns < 0: no timeout
void futex_wake(std::atomic<std::uint32_t>* addr, int count);

inline void procyield(int n) {
  for (int i = 0; i < n; i++) __builtin_ia32_pause();
}
void osyield();

// Lock ranks (Go's lockrank.go): a thread may acquire a runtime lock only
// if its rank is above the rank of every runtime lock it already holds
// (equal is allowed where a rank says so: channels locked in address order
// by select, two timer heaps moved under GOMAXPROCS). The table with what
// each lock protects is in docs/design.md ("Lock ranks"). Debug builds
// (assertions on: no NDEBUG) check the order, count the locks each thread
// holds in M.locks, and make a goroutine switch with a runtime lock held a
// fatal error; release builds compile all of it away.
enum class lock_rank : std::uint8_t {
  poll_deadline = 5,  // poll_desc.dlock: deadline changes of one descriptor
  interpose_fd = 6,   // fd_entry.lk: waiters of an interposed descriptor
  timer_user = 10,    // timer.mu: serialises stop/reset of one timer
  hchan = 20,         // a channel (several at once: select, address order)
  sema_root = 30,     // a semaphore wait-list root (sema.cpp)
  notify_list = 30,   // a cond's notify list
  semaphore = 30,     // goro::semaphore (weighted)
  sched = 40,         // sched.lock: idle lists, global queue, M accounting
  gfree = 50,         // sched.gfree.lock: the global dead-G cache
  timers = 50,        // a P's timer heap (two at once when Ps are merged)
  gslab = 55,         // the G slab allocator (registers new Gs in allgs)
  allg = 60,          // allglock: the list of all Gs
  stack = 70,         // stack chunk and G slab allocators
  pollcache = 75,     // the poll_desc free list
  pool = 80,          // goro::pool's shared list and per-P directory
  leaf = 255,         // nothing may be acquired after it
};

#ifndef NDEBUG
#define GORO_LOCKRANK 1
#endif

extern "C" {
// The number of runtime locks this thread holds (Go's m.locks, counted in
// lock/unlock): the preemption signal's handler, which runs on the same
// thread, never preempts while it is non-zero. The runtime calls back into
// the program's code with locks held (a channel moves elements with the
// user's move constructor under the channel's lock), and a goroutine
// preempted there would park with the lock held. Initial-exec TLS, also
// from the shared library.
extern __thread int goro_tls_nlocks __attribute__((tls_model("initial-exec")));
}

// Adds d to this thread's goro_tls_nlocks. A volatile asm with a memory
// clobber: the compiler may neither cache the TLS address across a
// goroutine switch (see tls.hpp) nor move the update into or out of the
// critical section it brackets.
inline void nlocks_add(int d) {
  asm volatile(
      "movq goro_tls_nlocks@gottpoff(%%rip), %%rax\n\t"
      "addl %0, %%fs:(%%rax)"
      :
      : "ri"(d)
      : "rax", "memory", "cc");
}

class mutex;
#ifdef GORO_LOCKRANK
void lockrank_acquire(mutex* l);
void lockrank_release(mutex* l);
// Fatal error if this thread holds a runtime lock (before a goroutine
// switch or the scheduler loop).
void lockrank_assert_none(const char* where);
#else
inline void lockrank_assert_none(const char*) {}
#endif

class mutex {
 public:
  constexpr mutex() = default;
  explicit constexpr mutex(lock_rank r) {
#ifdef GORO_LOCKRANK
    rank_ = r;
#else
    (void)r;
#endif
  }
  void lock() {
    std::uint32_t expect = 0;
#ifdef GORO_LOCKRANK
    lockrank_acquire(this);
#endif
    nlocks_add(1);
    // Fast path: uncontended acquire. Acquire ordering pairs with the
    // release in unlock().
    if (key_.compare_exchange_strong(expect, locked, std::memory_order_acquire))
      return;
    lock_slow();
  }
  bool try_lock() {
    std::uint32_t expect = 0;
    bool ok =
        key_.compare_exchange_strong(expect, locked, std::memory_order_acquire);
#ifdef GORO_LOCKRANK
    if (ok) lockrank_acquire(this);
#endif
    if (ok) nlocks_add(1);
    return ok;
  }
  void unlock() {
#ifdef GORO_LOCKRANK
    lockrank_release(this);
#endif
    // Release ordering publishes the critical section to the next owner.
    if (key_.exchange(0, std::memory_order_release) == sleeping)
      futex_wake(&key_, 1);
    nlocks_add(-1);
  }
#ifdef GORO_LOCKRANK
  lock_rank rank() const { return rank_; }
#endif

 private:
  static constexpr std::uint32_t locked = 1, sleeping = 2;
  void lock_slow();
  std::atomic<std::uint32_t> key_{0};
#ifdef GORO_LOCKRANK
  lock_rank rank_ = lock_rank::leaf;
#endif
};

class lock_guard {
 public:
  explicit lock_guard(mutex& m) : m_(m) { m_.lock(); }
  ~lock_guard() { m_.unlock(); }
  lock_guard(const lock_guard&) = delete;
  lock_guard& operator=(const lock_guard&) = delete;

 private:
  mutex& m_;
};

// A one-shot event (Go's note): sleep until wakeup; clear to reuse.
// Exactly one waiter; wakeup may come before sleep.
class note {
 public:
  void wakeup() {
    // Release: whatever the waker wrote before wakeup() is visible to the
    // sleeper after sleep() returns.
    if (key_.exchange(1, std::memory_order_release) != 0) return;
    futex_wake(&key_, 1);
  }
  void sleep() {
    while (key_.load(std::memory_order_acquire) == 0) futex_wait(&key_, 0, -1);
  }
  // Returns true if woken, false on timeout.
  bool tsleep(std::int64_t ns);
  void clear() { key_.store(0, std::memory_order_relaxed); }
  bool woken() const { return key_.load(std::memory_order_acquire) != 0; }

 private:
  std::atomic<std::uint32_t> key_{0};
};

}  // namespace goro::rt
