// Locks that are not pthread mutexes but still block a second taker in the
// kernel (oslock_hidden.cpp): a function-local static's initialisation
// guard, std::call_once (pthread_once), a stdio stream's lock (flockfile),
// C11's mtx_t and call_once. A goroutine preempted while holding one stays
// pinned to its thread; a second goroutine scheduled on that thread that
// waits for the same lock blocks it for good. So these are counted like
// pthread locks: no asynchronous preemption while one is held, the
// deferred preemption at the release.
//
// Each scenario runs in a child process with a watchdog (alarm), so a hang
// is a failure: the holder computes for 80 ms inside the lock with a 1 ms
// time slice (sysmon asks for a preemption inside), while a second
// goroutine, runnable all along, waits for the same lock. At gomaxprocs 1
// this hung before the hidden locks were counted.
#include <gtest/gtest.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <threads.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/wait_group.hpp>
#include <mutex>

#include "preempt_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

using goro_test::work_us;

constexpr int kHoldUs = 80000;

#define SKIP_UNDER_TSAN()                                                 \
  do {                                                                    \
    if (GORO_TEST_TSAN) GTEST_SKIP() << "TSan builds do not count locks"; \
  } while (0)

// The holder has taken the lock and computes.
std::atomic<bool> holding{false};

// Runs holder() and, once the holder holds the lock, contender() in two
// goroutines at `procs` Ps with a 1 ms time slice; the child exits 0 when
// both are done, and is killed by SIGALRM after 20 s.
template <class H, class W>
void contend(int procs, H holder, W contender) {
  alarm(20);
  goro::options o;
  o.gomaxprocs = procs;
  goro::run(o, [&] {
    goro::debug::set_time_slice(1ms);
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      holder();
      wg.done();
    });
    goro::go([&] {
      // Runnable all along: yields until the holder is inside.
      while (!holding.load(std::memory_order_acquire)) goro::gosched();
      contender();
      wg.done();
    });
    wg.wait();
  });
  std::fprintf(stderr, "done\n");
  std::_Exit(0);
}

// 1. A function-local static whose constructor computes.
struct slow_init {
  std::uint64_t v;
  slow_init() {
    holding.store(true, std::memory_order_release);
    v = work_us(kHoldUs);
  }
};

__attribute__((noinline)) std::uint64_t slow_static() {
  static slow_init s;
  return s.v;
}

void static_init(int procs) {
  contend(
      procs, [] { (void)slow_static(); }, [] { (void)slow_static(); });
}

// 2. std::call_once whose initialiser computes.
std::once_flag once;
std::uint64_t once_v;

void call_once_init(int procs) {
  auto f = [] {
    std::call_once(once, [] {
      holding.store(true, std::memory_order_release);
      once_v = work_us(kHoldUs);
    });
  };
  contend(procs, f, f);
}

// 3. A stdio stream locked across computation while another goroutine
// prints to it.
void stdio_lock(int procs) {
  FILE* f = std::fopen("/dev/null", "w");
  if (f == nullptr) std::_Exit(3);
  contend(
      procs,
      [f] {
        flockfile(f);
        holding.store(true, std::memory_order_release);
        std::fprintf(f, "%llu\n",
                     static_cast<unsigned long long>(work_us(kHoldUs)));
        funlockfile(f);
      },
      [f] { std::fprintf(f, "contender\n"); });
}

// 4. C11 mtx_t (glibc's mtx_lock calls the pthread mutex internally, past
// the pthread wrappers).
mtx_t c11_mu;

void c11_mutex(int procs) {
  if (mtx_init(&c11_mu, mtx_plain) != thrd_success) std::_Exit(3);
  contend(
      procs,
      [] {
        mtx_lock(&c11_mu);
        holding.store(true, std::memory_order_release);
        (void)work_us(kHoldUs);
        mtx_unlock(&c11_mu);
      },
      [] {
        mtx_lock(&c11_mu);
        mtx_unlock(&c11_mu);
      });
}

// 5. C11 call_once.
once_flag c11_once = ONCE_FLAG_INIT;

void c11_once_init() {
  holding.store(true, std::memory_order_release);
  (void)work_us(kHoldUs);
}

void c11_call_once(int procs) {
  auto f = [] { call_once(&c11_once, c11_once_init); };
  contend(procs, f, f);
}

#define HIDDEN_LOCK_TEST(name, fn, procs)                            \
  TEST(HiddenLock, name##Procs##procs) {                             \
    SKIP_UNDER_TSAN();                                               \
    GTEST_FLAG_SET(death_test_style, "threadsafe");                  \
    EXPECT_EXIT(fn(procs), ::testing::ExitedWithCode(0), "done\n$"); \
  }

HIDDEN_LOCK_TEST(StaticInit, static_init, 1)
HIDDEN_LOCK_TEST(StaticInit, static_init, 2)
HIDDEN_LOCK_TEST(CallOnce, call_once_init, 1)
HIDDEN_LOCK_TEST(CallOnce, call_once_init, 2)
HIDDEN_LOCK_TEST(Flockfile, stdio_lock, 1)
HIDDEN_LOCK_TEST(Flockfile, stdio_lock, 2)
HIDDEN_LOCK_TEST(C11Mutex, c11_mutex, 1)
HIDDEN_LOCK_TEST(C11Mutex, c11_mutex, 2)
HIDDEN_LOCK_TEST(C11CallOnce, c11_call_once, 1)
HIDDEN_LOCK_TEST(C11CallOnce, c11_call_once, 2)

// The counts themselves, inside one goroutine.
TEST(HiddenLock, Counts) {
  SKIP_UNDER_TSAN();
  int seen[8] = {};
  goro::run([&] {
    FILE* f = std::fopen("/dev/null", "w");
    ASSERT_NE(f, nullptr);
    seen[0] = goro::debug::os_locks_held();
    flockfile(f);
    seen[1] = goro::debug::os_locks_held();
    EXPECT_EQ(ftrylockfile(f), 0);  // recursive: taken again
    seen[2] = goro::debug::os_locks_held();
    funlockfile(f);
    funlockfile(f);
    seen[3] = goro::debug::os_locks_held();
    static std::once_flag of;
    std::call_once(of, [&] { seen[4] = goro::debug::os_locks_held(); });
    struct probe {
      int n;
      probe() : n(goro::debug::os_locks_held()) {}
    };
    static probe p;
    seen[5] = p.n;
    seen[6] = goro::debug::os_locks_held();
    std::fclose(f);
  });
  EXPECT_EQ(seen[0], 0);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(seen[2], 2);
  EXPECT_EQ(seen[3], 0);
  EXPECT_EQ(seen[4], 1);
  EXPECT_EQ(seen[5], 1);
  EXPECT_EQ(seen[6], 0);
  EXPECT_EQ(goro::debug::os_locks_held(), 0);
}

// A static whose constructor throws: __cxa_guard_abort gives the count
// back, and the next use initialises it.
TEST(HiddenLock, ThrowingStaticInitGivesTheCountBack) {
  SKIP_UNDER_TSAN();
  int after = -1, n = 0;
  goro::run([&] {
    struct thrower {
      thrower(int* n) {
        if ((*n)++ == 0) throw 1;
      }
    };
    auto use = [&] { static thrower t(&n); };
    try {
      use();
    } catch (int) {
    }
    use();
    after = goro::debug::os_locks_held();
  });
  EXPECT_EQ(n, 2);
  EXPECT_EQ(after, 0);
}

}  // namespace
