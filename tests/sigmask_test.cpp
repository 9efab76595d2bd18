// Signal masks and preemption (issue 23 item 7): a goroutine that blocks
// signals with pthread_sigmask or sigprocmask must not switch preemption
// off for good on the thread it ran on. At gomaxprocs 1 a goroutine blocks
// SIGUSR1 (or every signal, as before spawning a std::thread) and then
// runs a call-free loop; a sleeper next to it must still wake on time,
// which only a preemption of the loop allows (a plain watchdog thread ends
// the loop after a few seconds, so a failure fails instead of hanging).
// Also: the mask the caller asked for is in force (apart from the
// preemption signal), and a mask change made inside a user's signal
// handler is not taken as the thread's usual mask. Under TSan async
// preemption is off by design: the tests skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/time.hpp>
#include <string>
#include <thread>
#include <vector>

#include "preempt_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

using goro_test::procs;
using goro_test::spin;

#define SKIP_UNDER_TSAN()                                                     \
  do {                                                                        \
    if (GORO_TEST_TSAN) GTEST_SKIP() << "async preemption is off under TSan"; \
  } while (0)

enum class how { none, block_usr1, block_all, sigprocmask_usr1 };

void change_mask(how h) {
  if (h == how::none) return;
  sigset_t set;
  if (h == how::block_all) {
    sigfillset(&set);
  } else {
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
  }
  if (h == how::sigprocmask_usr1)
    sigprocmask(SIG_BLOCK, &set, nullptr);
  else
    pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

struct result {
  std::vector<double> ms;     // sorted sleep latencies
  bool usr1_blocked = false;  // as the looping goroutine saw its mask
};

// Sleeps of 10 ms next to a goroutine that changed its thread's mask and
// then loops without calls, at gomaxprocs 1.
result sleeps_next_to_masked_loop(how h, int n,
                                  std::chrono::milliseconds limit) {
  result r;
  goro::run(procs(1), [&] {
    std::atomic<bool> stop{false};
    goro::chan<void> done = goro::make_chan<void>();
    std::atomic<bool> finished{false};
    std::thread watchdog([&] {
      auto until = clk::now() + limit;
      while (!finished.load() && clk::now() < until)
        std::this_thread::sleep_for(1ms);
      stop.store(true);
    });
    goro::go([&] {
      change_mask(h);
      sigset_t cur;
      pthread_sigmask(SIG_SETMASK, nullptr, &cur);
      r.usr1_blocked = sigismember(&cur, SIGUSR1) == 1;
      spin(stop);
      // Leave the thread as it was for the goroutines after this test.
      sigset_t none;
      sigemptyset(&none);
      pthread_sigmask(SIG_SETMASK, &none, nullptr);
      done.close();
    });
    for (int i = 0; i < n; i++) {
      auto t0 = clk::now();
      goro::sleep(10ms);
      r.ms.push_back(
          std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
    finished.store(true);
    stop.store(true);
    done.recv();
    watchdog.join();
  });
  std::sort(r.ms.begin(), r.ms.end());
  return r;
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += std::to_string(int(x)) + " ";
  return s;
}

void expect_preempted(how h) {
  goro::debug::preempt_stats before = goro::debug::read_preempt_stats();
  result r = sleeps_next_to_masked_loop(h, 10, 5s);
  ASSERT_TRUE(goro::debug::async_preempt_enabled());
  EXPECT_TRUE(r.usr1_blocked) << "the mask asked for is not in force";
  EXPECT_LE(r.ms[r.ms.size() / 2], goro_test::scaled(30.0, 60.0)) << join(r.ms);
  EXPECT_LE(r.ms.back(), 1000.0) << join(r.ms);
  EXPECT_GT(goro::debug::read_preempt_stats().preempted, before.preempted);
}

TEST(Sigmask, PthreadSigmaskBlockUsr1KeepsPreemption) {
  SKIP_UNDER_TSAN();
  expect_preempted(how::block_usr1);
}

TEST(Sigmask, PthreadSigmaskBlockAllKeepsPreemption) {
  SKIP_UNDER_TSAN();
  expect_preempted(how::block_all);
}

TEST(Sigmask, SigprocmaskBlockUsr1KeepsPreemption) {
  SKIP_UNDER_TSAN();
  expect_preempted(how::sigprocmask_usr1);
}

// A goroutine that blocks signals and restores its mask leaves the thread
// as it found it: later goroutines on that thread are preempted as before.
TEST(Sigmask, BlockAndRestoreThenLaterGoroutinesArePreempted) {
  SKIP_UNDER_TSAN();
  goro::run(procs(1), [&] {
    goro::chan<void> done = goro::make_chan<void>();
    goro::go([&] {
      sigset_t all, old;
      sigfillset(&all);
      pthread_sigmask(SIG_BLOCK, &all, &old);
      pthread_sigmask(SIG_SETMASK, &old, nullptr);
      done.close();
    });
    done.recv();
  });
  result r = sleeps_next_to_masked_loop(how::none, 5, 5s);
  EXPECT_LE(r.ms.back(), 1000.0) << join(r.ms);
}

// Inside a signal handler of the program's own on a goroutine, a mask
// change must not become the thread's usual mask: after the handler the
// goroutine (with the usual mask back) is preempted as before.
std::atomic<int> handled{0};
void usr2_handler(int) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  handled.fetch_add(1);
}

TEST(Sigmask, ChangeInsideSignalHandlerIsNotTheUsualMask) {
  SKIP_UNDER_TSAN();
  struct sigaction sa {
  }, old{};
  sa.sa_handler = usr2_handler;
  sigfillset(&sa.sa_mask);  // the handler runs with everything blocked
  sigaction(SIGUSR2, &sa, &old);
  std::vector<double> ms;
  goro::run(procs(1), [&] {
    std::atomic<bool> stop{false};
    std::atomic<bool> finished{false};
    goro::chan<void> done = goro::make_chan<void>();
    std::thread watchdog([&] {
      auto until = clk::now() + 5s;
      while (!finished.load() && clk::now() < until)
        std::this_thread::sleep_for(1ms);
      stop.store(true);
    });
    goro::go([&] {
      raise(SIGUSR2);  // synchronous: handled on this thread, now
      spin(stop);
      done.close();
    });
    for (int i = 0; i < 5; i++) {
      auto t0 = clk::now();
      goro::sleep(10ms);
      ms.push_back(
          std::chrono::duration<double, std::milli>(clk::now() - t0).count());
    }
    finished.store(true);
    stop.store(true);
    done.recv();
    watchdog.join();
  });
  sigaction(SIGUSR2, &old, nullptr);
  std::sort(ms.begin(), ms.end());
  EXPECT_EQ(handled.load(), 1);
  EXPECT_LE(ms.back(), 1000.0) << join(ms);
}

}  // namespace
