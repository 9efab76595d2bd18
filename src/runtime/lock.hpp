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

class mutex {
 public:
  void lock() {
    std::uint32_t expect = 0;
    // Fast path: uncontended acquire. Acquire ordering pairs with the
    // release in unlock().
    if (key_.compare_exchange_strong(expect, locked, std::memory_order_acquire))
      return;
    lock_slow();
  }
  bool try_lock() {
    std::uint32_t expect = 0;
    return key_.compare_exchange_strong(expect, locked,
                                        std::memory_order_acquire);
  }
  void unlock() {
    // Release ordering publishes the critical section to the next owner.
    if (key_.exchange(0, std::memory_order_release) == sleeping)
      futex_wake(&key_, 1);
  }

 private:
  static constexpr std::uint32_t locked = 1, sleeping = 2;
  void lock_slow();
  std::atomic<std::uint32_t> key_{0};
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
