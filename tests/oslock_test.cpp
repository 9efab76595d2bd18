// The OS-lock count behind async preemption's deferral (oslock.cpp): libgoro
// interposes pthread's lock functions, so std::mutex, std::shared_mutex and
// pthread spin locks taken in a goroutine are counted, and a preemption
// that arrives inside a critical section waits for the unlock. Built twice:
// oslock_test (static libgoro) and oslock_shared_test (shared libgoro), as
// the interposition works differently in each.
#include <gtest/gtest.h>
#include <pthread.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/time.hpp>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <thread>

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define OSLOCK_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define OSLOCK_TSAN 1
#endif
#ifndef OSLOCK_TSAN
#define OSLOCK_TSAN 0
#endif

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

constexpr std::uint64_t K = 6364136223846793005ULL;
constexpr std::uint64_t C = 1442695040888963407ULL;

__attribute__((noinline)) std::uint64_t work_us(int us) {
  auto until = clk::now() + std::chrono::microseconds(us);
  std::uint64_t x = 1;
  // Mostly the loop (code outside the executable, such as the clock read
  // in the vDSO, is not preemptible); the empty asm keeps the compiler
  // from folding the 4096 steps into one.
  while (clk::now() < until)
    for (int i = 0; i < 4096; i++) {
      x = x * K + C;
      asm volatile("" : "+r"(x));
    }
  return x;
}

goro::options procs(int n) {
  goro::options o;
  o.gomaxprocs = n;
  return o;
}

#define SKIP_UNDER_TSAN()                                                 \
  do {                                                                    \
    if (OSLOCK_TSAN) GTEST_SKIP() << "TSan builds do not count OS locks"; \
  } while (0)

TEST(OsLock, CountsEveryLockKind) {
  SKIP_UNDER_TSAN();
  int seen[8] = {};
  goro::run([&] {
    std::mutex m;
    std::recursive_mutex rm;
    std::shared_mutex sm;
    std::timed_mutex tm;
    pthread_spinlock_t spin;
    pthread_spin_init(&spin, PTHREAD_PROCESS_PRIVATE);
    seen[0] = goro::debug::os_locks_held();
    m.lock();
    seen[1] = goro::debug::os_locks_held();
    rm.lock();
    rm.lock();
    seen[2] = goro::debug::os_locks_held();
    sm.lock_shared();
    seen[3] = goro::debug::os_locks_held();
    pthread_spin_lock(&spin);
    (void)tm.try_lock_for(1ms);
    seen[4] = goro::debug::os_locks_held();
    EXPECT_FALSE(m.try_lock());  // a failed try does not count
    seen[5] = goro::debug::os_locks_held();
    tm.unlock();
    pthread_spin_unlock(&spin);
    sm.unlock_shared();
    rm.unlock();
    rm.unlock();
    seen[6] = goro::debug::os_locks_held();
    m.unlock();
    m.unlock();  // unbalanced: the count stays at 0
    seen[7] = goro::debug::os_locks_held();
    pthread_spin_destroy(&spin);
  });
  EXPECT_EQ(seen[0], 0);
  EXPECT_EQ(seen[1], 1);
  EXPECT_EQ(seen[2], 3);
  EXPECT_EQ(seen[3], 4);
  EXPECT_EQ(seen[4], 6);
  EXPECT_EQ(seen[5], 6);
  EXPECT_EQ(seen[6], 1);
  EXPECT_EQ(seen[7], 0);
  // Outside a goroutine nothing is counted.
  std::mutex m;
  std::lock_guard<std::mutex> lk(m);
  EXPECT_EQ(goro::debug::os_locks_held(), 0);
}

// The std::mutex test: at gomaxprocs 1 a goroutine re-locks a
// std::mutex at once around 100 us of call-free work, with no guard; a
// second goroutine that takes the same std::mutex gets it (10 times)
// within a second. The preemption must land between critical sections:
// inside one, the second goroutine would block the only thread on a lock
// whose holder is pinned to that thread (a deadlock the watchdog below
// would end after 20 s, failing the time bound).
TEST(OsLock, StdMutexHogIsPreemptedOutsideItsCriticalSection) {
  SKIP_UNDER_TSAN();
  int got = 0;
  double took_ms = 0;
  goro::debug::preempt_stats before{};
  goro::run(procs(1), [&] {
    before = goro::debug::read_preempt_stats();
    std::mutex m;
    std::atomic<bool> stop{false};
    std::atomic<int> inside{0};
    goro::chan<void> done = goro::make_chan<void>();
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        std::lock_guard<std::mutex> lk(m);
        inside.store(1, std::memory_order_relaxed);
        work_us(100);
        inside.store(0, std::memory_order_relaxed);
      }
      done.close();
    });
    std::thread watchdog([&] {
      auto until = clk::now() + 20s;
      while (!stop.load() && clk::now() < until)
        std::this_thread::sleep_for(1ms);
      stop.store(true);
    });
    auto t0 = clk::now();
    for (int i = 0; i < 10; i++) {
      goro::sleep(1ms);
      // Running here means the hog was preempted: never inside.
      EXPECT_EQ(inside.load(), 0);
      std::lock_guard<std::mutex> lk(m);
      got++;
    }
    took_ms =
        std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    stop.store(true);
    done.recv();
    watchdog.join();
  });
  EXPECT_EQ(got, 10);
  EXPECT_LE(took_ms, 1000.0);
  auto after = goro::debug::read_preempt_stats();
  EXPECT_GT(after.preempted, before.preempted);
}

// A critical section longer than the time slice: the signal finds the lock
// held and defers; the unlock preempts at once, before the next statement.
TEST(OsLock, LongCriticalSectionIsPreemptedAtItsUnlock) {
  SKIP_UNDER_TSAN();
  std::atomic<int> phase{0};
  int seen_by_sleeper = -1;
  goro::debug::preempt_stats before{}, after{};
  goro::run(procs(1), [&] {
    before = goro::debug::read_preempt_stats();
    std::mutex m;
    goro::chan<void> done = goro::make_chan<void>();
    goro::go([&] {
      {
        std::lock_guard<std::mutex> lk(m);
        phase.store(1, std::memory_order_relaxed);
        work_us(60000);  // six time slices with the lock held
        phase.store(2, std::memory_order_relaxed);
      }
      // The unlock above yielded to the sleeper: it saw phase 2.
      phase.store(3, std::memory_order_relaxed);
      work_us(60000);
      done.close();
    });
    goro::sleep(1ms);  // the hog takes the P (and the lock)
    seen_by_sleeper = phase.load();
    done.recv();
    after = goro::debug::read_preempt_stats();
  });
  EXPECT_EQ(seen_by_sleeper, 2);
  EXPECT_GT(after.deferred_oslock, before.deferred_oslock);
  EXPECT_GT(after.preempted_at_unlock, before.preempted_at_unlock);
}

// Issue 11's report: a goroutine that parks (here: sleeps) while it holds
// a std::mutex is reported with its stack, once per stack.
__attribute__((noinline)) void sleeps_holding_a_std_mutex(std::mutex& m) {
  std::lock_guard<std::mutex> lk(m);
  goro::sleep(1ms);
}

TEST(OsLockPark, ReportedOncePerStack) {
  SKIP_UNDER_TSAN();
  std::string err;
  testing::internal::CaptureStderr();
  goro::run([] {
    std::mutex m;
    volatile int n = 3;  // one call site: no unrolled copies
    for (int i = 0; i < n; i++) sleeps_holding_a_std_mutex(m);
  });
  err = testing::internal::GetCapturedStderr();
  std::size_t first = err.find("while holding 1 OS lock");
  ASSERT_NE(first, std::string::npos) << err;
  EXPECT_EQ(err.find("while holding 1 OS lock", first + 1), std::string::npos)
      << "reported more than once:\n"
      << err;
  EXPECT_NE(err.find("[sleep]"), std::string::npos) << err;
  EXPECT_NE(err.find("sleeps_holding_a_std_mutex"), std::string::npos) << err;
}

TEST(OsLockPark, FatalUnderOslockpark2AndSilentUnder0) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "oslockpark=2", 1);
        goro::run([] {
          std::mutex m;
          sleeps_holding_a_std_mutex(m);
        });
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(2),
      "fatal error: goroutine parked while holding an OS lock");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "oslockpark=0", 1);
        goro::run([] {
          std::mutex m;
          sleeps_holding_a_std_mutex(m);
        });
        std::fprintf(stderr, "done\n");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "^done\n$");
}

}  // namespace
