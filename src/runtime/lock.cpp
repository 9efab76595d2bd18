// lock.cpp: futex wrappers, the slow path of the runtime mutex, timed notes.
#include "runtime/lock.hpp"

#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>

#include "runtime/nanotime.hpp"

namespace goro::rt {

void futex_wait(std::atomic<std::uint32_t>* addr, std::uint32_t val,
                std::int64_t ns) {
  struct timespec ts;
  struct timespec* tsp = nullptr;
  if (ns >= 0) {
    ts.tv_sec = ns / 1000000000;
    ts.tv_nsec = ns % 1000000000;
    tsp = &ts;
  }
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAIT_PRIVATE,
          val, tsp, nullptr, 0);
}

void futex_wake(std::atomic<std::uint32_t>* addr, int count) {
  syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(addr), FUTEX_WAKE_PRIVATE,
          count, nullptr, nullptr, 0);
}

void osyield() { sched_yield(); }

void mutex::lock_slow() {
  // Go's lock2: spin a little (the holder is probably running on another
  // CPU), yield once, then sleep. The state goes to `sleeping` whenever we
  // may have to sleep so that unlock knows to wake someone.
  std::uint32_t wait = key_.exchange(locked, std::memory_order_acquire);
  if (wait == 0) return;
  for (;;) {
    for (int i = 0; i < 4; i++) {
      while (key_.load(std::memory_order_relaxed) == 0) {
        std::uint32_t expect = 0;
        if (key_.compare_exchange_weak(expect, wait, std::memory_order_acquire))
          return;
      }
      procyield(30);
    }
    for (int i = 0; i < 1; i++) {
      while (key_.load(std::memory_order_relaxed) == 0) {
        std::uint32_t expect = 0;
        if (key_.compare_exchange_weak(expect, wait, std::memory_order_acquire))
          return;
      }
      osyield();
    }
    // Sleep. Once we have slept, we must leave the key as `sleeping` when
    // we acquire, since other sleepers may remain.
    wait = sleeping;
    if (key_.exchange(sleeping, std::memory_order_acquire) == 0) return;
    futex_wait(&key_, sleeping, -1);
  }
}

bool note::tsleep(std::int64_t ns) {
  if (ns < 0) {
    sleep();
    return true;
  }
  std::int64_t deadline = nanotime() + ns;
  while (key_.load(std::memory_order_acquire) == 0) {
    std::int64_t left = deadline - nanotime();
    if (left <= 0) return false;
    futex_wait(&key_, 0, left);
  }
  return true;
}

}  // namespace goro::rt
