// sync.hpp: Go's sync package for goroutines: mutex, rwmutex, once, cond,
// plus a weighted semaphore (golang.org/x/sync/semaphore.Weighted) and
// wait_group (wait_group.hpp).
//
// Every blocking operation parks the calling goroutine and lets its thread
// run other goroutines; called from a plain thread (one that is not running
// a goroutine) it blocks that thread instead. Goroutines and plain threads
// may contend for the same object.
//
// mutex and rwmutex meet the standard Lockable / SharedLockable
// requirements, so std::lock_guard, std::unique_lock, std::scoped_lock and
// std::shared_lock work with them. None of these types allocates memory.
#pragma once

#include <atomic>
#include <chrono>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <goro/wait_group.hpp>
#include <mutex>
#include <system_error>
#include <utility>

namespace goro {

class mutex;
class rwmutex;
class once;
class cond;
class semaphore;
class context;

namespace detail {

// What a goroutine blocked in mutex::lock is waiting for, for goroutine
// dumps (a plain mutex, the writer side of an rwmutex, or a once).
enum class lock_kind : std::uint8_t { mutex, rwmutex, once };

// Test-only access to internal state; tests define these.
struct mutex_test_access;
struct semaphore_test_access;

// Room for state that only the runtime interprets (the notify list of a
// cond, the waiter queue of a semaphore). The runtime checks at compile time
// that its types fit (as Go's notifyListCheck does for sync.Cond).
template <std::size_t Size>
struct alignas(8) runtime_storage {
  unsigned char bytes[Size];
};

}  // namespace detail

// Go's sync.Mutex: a mutual-exclusion lock for goroutines.
//
// Normal mode: waiters queue FIFO, but a woken waiter competes with
// goroutines that are just arriving (and are already on a CPU), so the lock
// usually goes to a newcomer; this keeps throughput high. A waiter that has
// waited more than 1 ms switches the mutex to starvation mode: unlock then
// hands the lock directly to the waiter at the head of the queue, and
// newcomers queue at the tail without trying to take it. The mutex returns
// to normal mode when the waiter that receives it is the last one or waited
// less than 1 ms.
//
// The uncontended lock is one compare-and-swap and the uncontended unlock
// one atomic add, both inline. Unlocking a mutex that is not locked is a
// fatal error ("sync: unlock of unlocked mutex"), as in Go. As in Go, a mutex
// is not tied to the goroutine that locked it: another goroutine or thread
// may unlock it.
class mutex {
 public:
  constexpr mutex() noexcept = default;
  mutex(const mutex&) = delete;
  mutex& operator=(const mutex&) = delete;
  ~mutex() = default;

  void lock() {
    std::int32_t expected = 0;
    if (state_.compare_exchange_strong(expected, locked_bit,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[likely]]
      return;
    lock_slow(detail::lock_kind::mutex);
  }

  // One attempt, no spinning and no queueing (Go's TryLock). Fails while
  // the mutex is locked or being handed to a starving waiter.
  bool try_lock() noexcept {
    std::int32_t old = state_.load(std::memory_order_relaxed);
    if ((old & (locked_bit | starving_bit)) != 0) return false;
    return state_.compare_exchange_strong(old, old | locked_bit,
                                          std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }

  void unlock() {
    // Release publishes the critical section to the next owner. Any bit left
    // over (waiters, woken, starving) needs the slow path.
    const std::int32_t now =
        state_.fetch_sub(locked_bit, std::memory_order_release) - locked_bit;
    if (now != 0) [[unlikely]]
      unlock_slow(now);
  }

 private:
  friend class rwmutex;
  friend class once;
  friend struct detail::mutex_test_access;

  // state_ as Go's Mutex.state: bit 0 locked, bit 1 a waiter has been woken
  // (or a spinner is about to take the lock), bit 2 starvation mode, and the
  // number of queued waiters from bit 3 up.
  static constexpr std::int32_t locked_bit = 1;
  static constexpr std::int32_t woken_bit = 2;
  static constexpr std::int32_t starving_bit = 4;
  static constexpr int waiter_shift = 3;

  void lock_as(detail::lock_kind kind) {
    std::int32_t expected = 0;
    if (state_.compare_exchange_strong(expected, locked_bit,
                                       std::memory_order_acquire,
                                       std::memory_order_relaxed)) [[likely]]
      return;
    lock_slow(kind);
  }
  void lock_slow(detail::lock_kind kind);
  void unlock_slow(std::int32_t now);

  std::atomic<std::int32_t> state_{0};
  // The runtime semaphore that queued waiters sleep on.
  std::uint32_t sema_{0};
};

// Go's sync.RWMutex: any number of readers or one writer. Writer-preferring:
// once a writer is waiting, new readers block until it has had its turn, so
// a stream of readers cannot starve writers (and a goroutine must not
// lock_shared recursively). Fatal errors on misuse, as in Go:
// "sync: Unlock of unlocked RWMutex", "sync: RUnlock of unlocked RWMutex".
class rwmutex {
 public:
  constexpr rwmutex() noexcept = default;
  rwmutex(const rwmutex&) = delete;
  rwmutex& operator=(const rwmutex&) = delete;
  ~rwmutex() = default;

  // Exclusive (writer) side.
  void lock();
  bool try_lock() noexcept;
  void unlock();

  // Shared (reader) side; the uncontended paths are one atomic add, inline.
  void lock_shared() {
    if (reader_count_.fetch_add(1, std::memory_order_acquire) < 0) [[unlikely]]
      lock_shared_slow();  // a writer holds or awaits the lock
  }
  bool try_lock_shared() noexcept {
    std::int32_t c = reader_count_.load(std::memory_order_relaxed);
    while (c >= 0) {
      if (reader_count_.compare_exchange_weak(
              c, c + 1, std::memory_order_acquire, std::memory_order_relaxed))
        return true;
    }
    return false;
  }
  void unlock_shared() {
    const std::int32_t r =
        reader_count_.fetch_sub(1, std::memory_order_release) - 1;
    if (r < 0) [[unlikely]]
      unlock_shared_slow(r);
  }

 private:
  // A writer subtracts this from reader_count_ to announce itself, so
  // reader_count_ < 0 means "a writer holds or waits for the lock".
  static constexpr std::int32_t max_readers = 1 << 30;

  void lock_shared_slow();
  void unlock_shared_slow(std::int32_t r);

  mutex w_;                      // held by the writer (one writer at a time)
  std::uint32_t writer_sem_{0};  // the writer waits here for readers to leave
  std::uint32_t reader_sem_{0};  // readers wait here for the writer to finish
  // Readers holding the lock, minus max_readers while a writer is there.
  std::atomic<std::int32_t> reader_count_{0};
  // Readers the waiting writer still waits for.
  std::atomic<std::int32_t> reader_wait_{0};
};

// Go's sync.Once: call(f, args...) runs f exactly once per once object.
// Every caller returns only after that one run has finished. As in Go, a
// run that ends by an exception (Go: a panic) still counts: the exception
// propagates to that caller, and later calls do nothing. Calling call on the
// same object from inside f deadlocks, as in Go.
class once {
 public:
  constexpr once() noexcept = default;
  once(const once&) = delete;
  once& operator=(const once&) = delete;
  ~once() = default;

  template <class F, class... Args>
    requires std::invocable<F, Args...>
  void call(F&& f, Args&&... args) {
    // Fast path: an acquire load that pairs with the release store after
    // f has run, so f's effects are visible to every caller that sees done.
    if (done_.load(std::memory_order_acquire) != 0) [[likely]]
      return;
    call_slow(std::forward<F>(f), std::forward<Args>(args)...);
  }

 private:
  template <class F, class... Args>
  void call_slow(F&& f, Args&&... args) {
    // Callers that lose the race wait on the mutex until the winner's f has
    // returned. Destruction order mirrors Go's defers: done is stored
    // first, then the mutex is released, whether f returned or threw.
    struct unlock_on_exit {
      mutex& m;
      ~unlock_on_exit() { m.unlock(); }
    };
    struct mark_done_on_exit {
      std::atomic<std::uint32_t>& done;
      ~mark_done_on_exit() { done.store(1, std::memory_order_release); }
    };
    m_.lock_as(detail::lock_kind::once);
    unlock_on_exit unlocker{m_};
    if (done_.load(std::memory_order_relaxed) != 0) return;
    mark_done_on_exit marker{done_};
    std::invoke(std::forward<F>(f), std::forward<Args>(args)...);
  }

  std::atomic<std::uint32_t> done_{0};
  mutex m_;
};

// Go's sync.Cond: a rendezvous for goroutines waiting for or announcing a
// condition, over Go's ticket-based notify list. Works with any lock:
// wait(lk) atomically (with respect to signal and broadcast) unlocks lk and
// sleeps, and relocks lk before returning. As with every condition variable,
// re-check the condition in a loop (or use the predicate overloads).
//
// Like Go's Cond, a waiter that called wait before a signal is woken by it,
// in FIFO order; a signal with no waiter is lost. signal and broadcast may
// be called with or without the lock held.
class cond {
 public:
  cond() noexcept;
  cond(const cond&) = delete;
  cond& operator=(const cond&) = delete;
  ~cond();

  void wait(std::unique_lock<mutex>& lk) {
    if (!lk.owns_lock())
      throw std::system_error(
          std::make_error_code(std::errc::operation_not_permitted),
          "goro::cond::wait: lock not held");
    const std::uint32_t t = ticket();
    lk.unlock();
    wait_ticket(t);
    lk.lock();
  }
  // Any BasicLockable: goro::mutex, std::unique_lock<goro::rwmutex>,
  // std::shared_lock<goro::rwmutex> (readers waiting), a std::mutex held by
  // a plain thread, ...
  template <class Lock>
  void wait(Lock& lk) {
    const std::uint32_t t = ticket();
    lk.unlock();
    wait_ticket(t);
    lk.lock();
  }
  template <class Lock, class Predicate>
  void wait(Lock& lk, Predicate pred) {
    while (!pred()) wait(lk);
  }

  // Wakes the longest-waiting waiter, if there is one (Go's Signal).
  void signal() noexcept;
  // Wakes every waiter (Go's Broadcast).
  void broadcast() noexcept;

 private:
  std::uint32_t ticket() noexcept;    // Go's notifyListAdd
  void wait_ticket(std::uint32_t t);  // Go's notifyListWait

  detail::runtime_storage<32> list_;  // the runtime's notify_list
};

// A weighted semaphore, as golang.org/x/sync/semaphore.Weighted: a capacity
// of `capacity` units that acquire(n) takes and release(n) gives back.
// Strictly FIFO: a waiter is served before anyone who asked after it, even
// one asking for fewer units that would fit now, so large requests are not
// starved by small ones. The default n = 1 makes it a counting semaphore.
class semaphore {
 public:
  explicit semaphore(std::int64_t capacity);
  semaphore(const semaphore&) = delete;
  semaphore& operator=(const semaphore&) = delete;
  ~semaphore();

  // Blocks until n units are available and every earlier waiter has been
  // served, then takes them. Throws std::invalid_argument if n < 0 or
  // n > capacity() (such a request could never be met).
  void acquire(std::int64_t n = 1);
  // As acquire(n), but gives up when ctx is done first (x/sync's
  // Acquire(ctx, n)): returns ctx.err() without taking any units, or the
  // empty error_code once it holds them. A context that is already done
  // fails at once, even if the units are free. If ctx becomes done just as
  // the units are granted, they are given back and ctx.err() is returned,
  // so a non-empty result always means "not acquired" (snippet: goroutine):
  //   goro::semaphore cpu(goro::gomaxprocs());
  //   auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
  //   if (std::error_code e = cpu.acquire(ctx)) {
  //     std::printf("gave up: %s\n", e.message().c_str());
  //   } else {
  //     work();
  //     cpu.release();
  //   }
  //   cancel();
  [[nodiscard]] std::error_code acquire(const context& ctx, std::int64_t n = 1);
  // Takes n units if they are available now and nobody waits; never blocks.
  // Throws std::invalid_argument if n < 0.
  bool try_acquire(std::int64_t n = 1);
  // As acquire(n), but waits at most d: true if it took the units, false
  // (holding none) if d passed first. d <= 0 is try_acquire(n).
  bool try_acquire_for(std::chrono::nanoseconds d, std::int64_t n = 1);
  // Gives back n units and wakes the waiters that can now be served, in
  // order. Throws std::invalid_argument if n < 0 and std::logic_error if
  // more units are released than are held (Go panics; here the semaphore
  // is left as it was).
  void release(std::int64_t n = 1);

  std::int64_t capacity() const noexcept { return size_; }

 private:
  friend struct detail::semaphore_test_access;
  std::size_t waiters() const noexcept;  // queued acquirers (for tests)

  const std::int64_t size_;
  // The runtime lock, units in use and the FIFO of waiters.
  detail::runtime_storage<40> state_;
};

}  // namespace goro
