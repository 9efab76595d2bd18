// Opting more code into asynchronous preemption: a shared library of the
// user's (add_async_preempt_library), a marked region
// (add_async_preempt_range) with GORO_DEBUG=asyncpreemptmain=0 limiting
// preemption to it, bad input refused, and GORO_DEBUG=asyncpreemptmigrate=1.
// Each case runs in a child process (its own runtime and settings).
#include <gtest/gtest.h>
#include <stdio.h>
#include <stdlib.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/time.hpp>
#include <stdexcept>
#include <thread>

#include "test_support.hpp"

extern "C" std::uint64_t userlib_spin(const std::atomic<bool>* stop);

// Marked functions: the linker brackets the section with __start_/__stop_.
extern "C" char __start_goro_test_marked[];
extern "C" char __stop_goro_test_marked[];
extern "C" __attribute__((section("goro_test_marked"), noinline, used))
std::uint64_t
marked_spin(const std::atomic<bool>* stop) {
  std::uint64_t x = 1;
  while (
      !__atomic_load_n(reinterpret_cast<const bool*>(stop), __ATOMIC_RELAXED))
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
  return x;
}

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

__attribute__((noinline)) std::uint64_t exe_spin(
    const std::atomic<bool>* stop) {
  std::uint64_t x = 1;
  while (
      !__atomic_load_n(reinterpret_cast<const bool*>(stop), __ATOMIC_RELAXED))
    x = x * 3 + 1;
  return x;
}

// Milliseconds a 10 ms sleep takes at gomaxprocs 1 next to `spin`, which a
// plain thread stops 2 s after the measurement starts.
double sleep_next_to(std::uint64_t (*spin)(const std::atomic<bool>*)) {
  double ms = 0;
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [&] {
    std::atomic<bool> stop{false};
    goro::chan<void> done = goro::make_chan<void>();
    // The watchdog and t0 come before the spawn: this goroutine may lose
    // the only P right after go() (a preemption request when its thread
    // was descheduled on a loaded machine), and then nothing but the
    // watchdog ends a spin that cannot be preempted (it hung the test
    // once, with the watchdog not yet created), and the time must count
    // from before the spin took the P.
    auto t0 = clk::now();
    std::thread watchdog([&] {
      auto until = clk::now() + 2s;
      while (!stop.load() && clk::now() < until)
        std::this_thread::sleep_for(1ms);
      stop.store(true);
    });
    goro::go([&] {
      spin(&stop);
      done.close();
    });
    // Lose the P to the spinner at once, every time (the order above made
    // this hang when it happened by chance).
    goro::gosched();
    goro::sleep(10ms);
    ms = std::chrono::duration<double, std::milli>(clk::now() - t0).count();
    stop.store(true);
    done.recv();
    watchdog.join();
  });
  return ms;
}

#define SKIP_UNDER_TSAN()                                                     \
  do {                                                                        \
    if (GORO_TEST_TSAN) GTEST_SKIP() << "async preemption is off under TSan"; \
  } while (0)

TEST(PreemptUserlib, LibraryLoopNeedsOptIn) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Not preemptible by default: the sleeper waits for the watchdog.
  EXPECT_EXIT(std::_Exit(sleep_next_to(userlib_spin) >= 1900 ? 0 : 1),
              ::testing::ExitedWithCode(0), "");
  // Added: preempted after about a slice.
  EXPECT_EXIT(
      {
        goro::debug::add_async_preempt_library(
            reinterpret_cast<const void*>(&userlib_spin));
        std::_Exit(sleep_next_to(userlib_spin) < 1000 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(PreemptUserlib, MarkedRegionOnly) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // asyncpreemptmain=0: the executable's loop is not preempted, the marked
  // one is once its section is added.
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "asyncpreemptmain=0", 1);
        bool exe_starved = sleep_next_to(exe_spin) >= 1900;
        goro::debug::add_async_preempt_range(__start_goro_test_marked,
                                             __stop_goro_test_marked);
        bool marked_preempted = sleep_next_to(marked_spin) < 1000;
        std::_Exit(exe_starved && marked_preempted ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

TEST(PreemptUserlib, BadInputIsRefused) {
  SKIP_UNDER_TSAN();
  EXPECT_THROW(goro::debug::add_async_preempt_library(
                   reinterpret_cast<const void*>(&::printf)),
               std::invalid_argument);
  EXPECT_THROW(goro::debug::add_async_preempt_library(nullptr),
               std::invalid_argument);
  int local = 0;
  EXPECT_THROW(goro::debug::add_async_preempt_library(&local),
               std::invalid_argument);
  EXPECT_THROW(goro::debug::add_async_preempt_range(__stop_goro_test_marked,
                                                    __start_goro_test_marked),
               std::invalid_argument);
}

TEST(PreemptUserlib, MigrationAllowed) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "asyncpreemptmigrate=1", 1);
        bool ok = sleep_next_to(exe_spin) < 1000;
        std::_Exit(ok && goro::debug::read_preempt_stats().preempted > 0 ? 0
                                                                         : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
