// Asynchronous preemption as a new user meets it: on by default, with no
// call to set_async_preempt. At gomaxprocs 1 a sleeper next to a call-free
// loop wakes on time, Go's TestMutexFairness with a hog that holds the
// mutex across call-free work lets the waiter in, Go's TestPingPongHog
// keeps two ping-pong pairs within a factor of 5, and the control run with
// GORO_DEBUG=asyncpreemptoff=1 starves the sleeper (so the first test can
// fail), and a SIGURG handler of the program's own keeps being called.
// Under TSan async preemption is off by design: the tests skip.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/select.hpp>
#include <goro/stats.hpp>
#include <goro/sync.hpp>
#include <goro/time.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using clk = std::chrono::steady_clock;

constexpr std::uint64_t K = 6364136223846793005ULL;
constexpr std::uint64_t C = 1442695040888963407ULL;

__attribute__((noinline)) std::uint64_t spin(const std::atomic<bool>& stop) {
  std::uint64_t x = 1;
  while (!stop.load(std::memory_order_relaxed)) x = x * K + C;
  return x;
}

// Call-free work for `us` microseconds: the clock is read through the
// vDSO, the loop itself is the executable's.
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

#define SKIP_UNDER_TSAN()                                                     \
  do {                                                                        \
    if (GORO_TEST_TSAN) GTEST_SKIP() << "async preemption is off under TSan"; \
  } while (0)

// Sleeps of 10 ms next to a call-free loop at gomaxprocs 1; the sorted
// wake-up latencies in ms. The loop is stopped by a plain thread after
// `limit` if nothing preempts it.
std::vector<double> sleeps_next_to_loop(int n,
                                        std::chrono::milliseconds limit) {
  std::vector<double> ms;
  goro::run(procs(1), [&] {
    std::atomic<bool> stop{false};
    goro::chan<void> done = goro::make_chan<void>();
    // The watchdog before the loop: main may lose the only P right after
    // go(), and with preemption off only this thread can stop the loop.
    std::atomic<bool> finished{false};
    std::thread watchdog([&] {
      auto until = clk::now() + limit;
      while (!finished.load() && clk::now() < until)
        std::this_thread::sleep_for(1ms);
      stop.store(true);
    });
    goro::go([&] {
      spin(stop);
      done.close();
    });
    for (int i = 0; i < n; i++) {
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
  std::sort(ms.begin(), ms.end());
  return ms;
}

std::string join(const std::vector<double>& v) {
  std::string s;
  for (double x : v) s += std::to_string(int(x)) + " ";
  return s;
}

// The first test: a 10 ms sleep next to a call-free loop wakes
// within 30 ms, repeatedly, by default. sysmon asks after a 10 ms slice
// (it looks at least every 2.5 ms while a goroutine runs long), so a quiet
// machine shows 10-23 ms. The median must be within 30 ms (doubled under
// ASan); the slowest of 20 within a second, which only a preemption can
// give (without one the sleeper waits for the 20 s watchdog).
TEST(PreemptDefault, SleepWakesNextToCallFreeLoop) {
  SKIP_UNDER_TSAN();
  std::vector<double> ms = sleeps_next_to_loop(20, 20s);
  ASSERT_TRUE(goro::debug::async_preempt_enabled());
  EXPECT_LE(ms[ms.size() / 2], goro_test::scaled(30.0, 60.0)) << join(ms);
  EXPECT_LE(ms.back(), 1000.0) << join(ms);
  EXPECT_GT(goro::debug::read_preempt_stats().preempted, 0u);
}

// The control: GORO_DEBUG=asyncpreemptoff=1 in a child; there the sleeper
// only wakes when the watchdog ends the loop (300 ms).
TEST(PreemptDefault, ControlOffStarvesTheSleeper) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "asyncpreemptoff=1", 1);
        std::vector<double> ms = sleeps_next_to_loop(1, 300ms);
        bool off = !goro::debug::async_preempt_enabled();
        std::_Exit(off && ms[0] >= 290.0 ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Go's TestMutexFairness with a call-free hog: the hog re-locks a
// goro::mutex at once after 100 us of computation under it. The woken
// waiter sits in the hog's runnext and the hog never enters the scheduler;
// only a preemption lets the waiter run (and the mutex's starvation mode
// then hands it the lock). The waiter must get it 10 times within a
// second.
TEST(PreemptDefault, MutexFairnessCallFreeHog) {
  SKIP_UNDER_TSAN();
  double took_ms = 0;
  int got = 0;
  goro::run(procs(1), [&] {
    goro::mutex mu;
    std::atomic<bool> stop{false};
    goro::chan<void> done = goro::make_chan<void>();
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        mu.lock();
        work_us(100);
        mu.unlock();
      }
      done.close();
    });
    goro::go([&] {
      auto t0 = clk::now();
      auto limit = t0 + goro_test::scaled(1s, 3s);
      while (got < 10 && clk::now() < limit) {
        auto a = clk::now();
        goro::sleep(100us);
        auto b = clk::now();
        mu.lock();
        auto c = clk::now();
        got++;
        mu.unlock();
        if (getenv("GORO_TEST_VERBOSE"))
          std::printf("sleep %.1f ms, lock %.1f ms\n",
                      std::chrono::duration<double, std::milli>(b - a).count(),
                      std::chrono::duration<double, std::milli>(c - b).count());
      }
      took_ms =
          std::chrono::duration<double, std::milli>(clk::now() - t0).count();
      stop.store(true);
    });
    done.recv();
  });
  auto st = goro::debug::read_preempt_stats();
  if (getenv("GORO_TEST_VERBOSE"))
    std::printf("sent %lu recv %lu preempted %lu rejected %lu deferred %lu\n",
                st.signals_sent, st.signals_received, st.preempted,
                st.rejected_pc, st.deferred_oslock);
  EXPECT_EQ(got, 10) << "in " << took_ms << " ms";
  EXPECT_LE(took_ms, goro_test::scaled(1000.0, 3000.0));
}

// Go's TestPingPongHog at gomaxprocs 1, with call-free hogs: two pairs of
// goroutines ping-pong a token; one pair counts to 1e6 per turn, the other
// to 1e3. Handing the token on inherits the time slice, so after a few
// slices both pairs have had the P about equally: their counts are within
// a factor of 5 (the gap is ~1000x when a hog pair keeps the P).
TEST(PingPongHog, CallFreeHogsShareTheP) {
  SKIP_UNDER_TSAN();
  std::atomic<std::int64_t> hog{0}, light{0};
  goro::run(procs(1), [&] {
    goro::chan<void> done = goro::make_chan<void>();
    auto hogc = goro::make_chan<bool>(), lightc = goro::make_chan<bool>();
    goro::wait_group wg;
    wg.add(4);
    // Channels by value, and main waits for all four: they outlive it
    // otherwise (Go's garbage collector hides that in the original).
    auto run = [&wg, done](int limit, std::atomic<std::int64_t>& counter,
                           goro::chan<bool> wake) {
      for (;;) {
        std::optional<bool> v;
        std::size_t i =
            goro::select(goro::case_recv(done), goro::case_recv(wake, v));
        if (i == 0) {
          wg.done();
          return;
        }
        for (int k = 0; k < limit; k++)
          counter.store(counter.load(std::memory_order_relaxed) + 1,
                        std::memory_order_relaxed);
        wake.send(true);
      }
    };
    for (int i = 0; i < 2; i++) goro::go(run, 1000000, std::ref(hog), hogc);
    for (int i = 0; i < 2; i++) goro::go(run, 1000, std::ref(light), lightc);
    hogc.send(true);
    lightc.send(true);
    // A few time slices (Go's test sleeps 100 ms here too).
    goro::sleep(100ms);
    done.close();
    hogc.recv();
    lightc.recv();
    wg.wait();
  });
  // Counts stand for time shares: each pair keeps the P about a slice at a
  // time (the light pair's slice is shared by its runnext chain and ends at
  // its next switch once sysmon asked). ASan slows the light pair's channel
  // operations far more than the hogs' increments, so the same shares give
  // 8-14x the count there: a factor of 20 under sanitizers (one pair
  // keeping the P gives ~1000x).
  std::int64_t h = hog.load(), l = light.load();
  const std::int64_t f = goro_test::scaled<std::int64_t>(5, 20);
  EXPECT_LE(h, l * f) << h << " / " << l;
  EXPECT_LE(l, h * f) << h << " / " << l;
}

// An element type whose move runs call-free code for a while. The runtime
// moves channel elements while it holds the channel's lock, calling back
// into the program's code (elem_ops, instantiated in the executable), where
// the preemption signal can land. Preempting there parked the goroutine
// with the lock held: at gomaxprocs 1 the receiver then waited on the lock
// in the kernel, holding the only P the preempted sender needed (the bench
// workloads chan_prodcons_10/100 and select_prodcons hung this way). A
// thread holding a runtime lock must not be preempted, as in Go
// (canPreemptM: m.locks == 0).
struct slow_move {
  std::uint64_t v = 0;
  explicit slow_move(std::uint64_t x) : v(x) {}
  slow_move(slow_move&& o) noexcept : v(o.v + work_us(2000) * 0) {}
  slow_move& operator=(slow_move&& o) noexcept {
    v = o.v;
    return *this;
  }
};

TEST(PreemptDefault, NotWhileTheRuntimeHoldsALock) {
  SKIP_UNDER_TSAN();
  auto prev = goro::debug::set_time_slice(1ms);
  std::uint64_t sum = 0;
  goro::run(procs(1), [&] {
    auto ch = goro::make_chan<slow_move>(4);
    goro::go([ch] {
      for (std::uint64_t i = 1; i <= 100; i++) ch.send(slow_move(i));
      ch.close();
    });
    for (auto& m : ch) sum += m.v;
  });
  goro::debug::set_time_slice(prev);
  EXPECT_EQ(sum, 5050u);
  // The signals did land in the moves (2 ms each against a 1 ms slice).
  EXPECT_GT(goro::debug::read_preempt_stats().deferred_runtime_lock, 0u);
}

// The time slice: set at start (options, GORO_TIMESLICE) or at run time;
// bad values are refused with a clear error.
TEST(PreemptDefault, TimeSliceSettings) {
  EXPECT_THROW(goro::debug::set_time_slice(10us), std::invalid_argument);
  EXPECT_THROW(goro::debug::set_time_slice(11s), std::invalid_argument);
  auto prev = goro::debug::set_time_slice(2ms);
  EXPECT_EQ(goro::debug::set_time_slice(prev), 2ms);
  goro::options bad;
  bad.time_slice = 50us;
  EXPECT_THROW(goro::run(bad, [] {}), std::invalid_argument);
}

// GORO_TIMESLICE, read when the runtime starts (in a child each).
TEST(PreemptDefault, TimeSliceEnvironment) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_TIMESLICE", "3 ms", 1);
        goro::run([] {});
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(2), "GORO_TIMESLICE=3 ms: not a duration");
  EXPECT_EXIT(
      {
        setenv("GORO_TIMESLICE", "1ms", 1);
        goro::run([] {});
        std::_Exit(goro::debug::set_time_slice(5ms) == 1ms ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

// Issue 11's report of a goroutine that runs without a safe point past
// GORO_DEBUG=longrunning (100 ms by default): once per run, saying why it
// was not preempted. Here a preempt_guard keeps a loop going for 300 ms.
void guarded_spin(std::chrono::milliseconds d) {
  goro::preempt_guard g;
  auto until = clk::now() + d;
  while (clk::now() < until) {
  }
}

TEST(PreemptDefault, LongRunningGoroutineIsReportedOnce) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // Asked for (off by default: a healthy program prints nothing).
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "longrunning=100", 1);
        goro::run(procs(2), [] {
          goro::chan<void> done = goro::make_chan<void>();
          goro::go([done]() mutable {
            guarded_spin(300ms);
            done.close();
          });
          done.recv();
        });
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0),
      "^goro: goroutine [0-9]+ has run [0-9]+ ms without a safe point[^\n]*"
      "preempt_guard[^\n]*\n$");
}

TEST(PreemptDefault, LongRunningReportOff) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        unsetenv("GORO_DEBUG");  // off by default
        goro::run(procs(2), [] {
          goro::chan<void> d = goro::make_chan<void>();
          goro::go([d]() mutable {
            guarded_spin(200ms);
            d.close();
          });
          d.recv();
        });
        std::fprintf(stderr, "done\n");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "^done\n$");
}

// Goroutines that each spawn the next and exit share one time slice
// (runnext inherits it, as in Go), but each of them runs for a moment and
// reaches safe points: none may be reported as long-running, however long
// the chain goes on. (The report once named whichever link was running
// when the shared slice passed the threshold.)
void chain_link(clk::time_point until, goro::chan<void> done) {
  if (clk::now() >= until) {
    done.close();
    return;
  }
  goro::go(chain_link, until, done);
}

TEST(PreemptDefault, RunnextChainIsNotReportedAsLongRunning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("GORO_DEBUG", "longrunning=100", 1);
        goro::run(procs(1), [] {
          goro::chan<void> done = goro::make_chan<void>();
          goro::go(chain_link, clk::now() + 400ms, done);
          done.recv();
        });
        std::fprintf(stderr, "done\n");
        std::_Exit(0);
      },
      ::testing::ExitedWithCode(0), "^done\n$");
}

// Such a chain outlives its slice, and sysmon asks it to yield: once a
// slice, like any goroutine, not on every sysmon round. (It was asked every
// round, 20 us apart: a 75 ms spawn chain yielded 200 times, took 300-700
// preemption signals and ran 15% slower than at GOMAXPROCS=2.) Counted: the
// requests that took effect; a request is repeated, rightly, while the
// goroutine asked has not switched out yet (its thread may be waiting for a
// CPU).
TEST(PreemptDefault, RunnextChainIsAskedToYieldOncePerSlice) {
  goro::run(procs(1), [] {
    auto prev = goro::debug::set_time_slice(10ms);
    goro::runtime_stats s0 = goro::stats();
    auto t0 = clk::now();
    goro::chan<void> done = goro::make_chan<void>();
    goro::go(chain_link, t0 + 200ms, done);
    done.recv();
    auto ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0)
            .count();
    goro::runtime_stats s = goro::stats();
    std::uint64_t yielded = s.preempted_cooperative + s.preempted_async -
                            (s0.preempted_cooperative + s0.preempted_async);
    goro::debug::set_time_slice(prev);
    EXPECT_GE(s.preempt_requests - s0.preempt_requests, 1u)
        << "the chain ran " << ms << " ms";
    EXPECT_LE(yielded, std::uint64_t(2 * ms / 10 + 4))
        << "the chain ran " << ms << " ms";
  });
}

// Issue 29: two goroutines handing off through unbuffered channels at
// GOMAXPROCS 1 share one time slice (each readies the other into runnext,
// which inherits it), and channel operations are not preemption points. A
// third goroutine yielding in a loop must still run about once a slice, as
// in Go: when the chain's slice is over, the request sysmon made is
// honoured at the chain's next switch. (A rule that restarted the slice at
// every dispatch lost the request at each hand-off: gaps of up to 11
// slices.) Cooperative: it holds with async preemption off too.
TEST(PreemptDefault, HandOffPairLetsTheLocalQueueRunEachSlice) {
  constexpr auto slice = 20ms;
  std::vector<clk::time_point> runs;
  runs.reserve(1 << 16);
  clk::time_point t0, t1;
  goro::run(procs(1), [&] {
    auto prev = goro::debug::set_time_slice(slice);
    std::atomic<bool> stop{false};
    goro::chan<int> ping = goro::make_chan<int>();
    goro::chan<int> pong = goro::make_chan<int>();
    goro::wait_group wg;
    wg.add(3);
    t0 = clk::now();
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        ping.send(1);
        pong.recv();
      }
      ping.close();
      wg.done();
    });
    goro::go([&] {
      while (std::optional<int> v = ping.recv()) pong.send(*v);
      wg.done();
    });
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) {
        if (runs.size() < runs.capacity()) runs.push_back(clk::now());
        goro::gosched();
      }
      wg.done();
    });
    goro::sleep(600ms);
    t1 = clk::now();
    stop.store(true);
    wg.wait();
    goro::debug::set_time_slice(prev);
  });
  ASSERT_FALSE(runs.empty());
  auto worst = runs.front() - t0;
  for (std::size_t i = 1; i < runs.size(); i++)
    worst = std::max(worst, runs[i] - runs[i - 1]);
  auto ms = [](clk::duration d) {
    return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
  };
  EXPECT_LE(worst, 3 * slice) << runs.size() << " runs in " << ms(t1 - t0)
                              << " ms; worst gap " << ms(worst) << " ms";
}

// Issue 23: a goroutine whose time goes to code a request cannot
// interrupt (libc's memset here) is signalled about once a slice, as Go
// asks, not on every sysmon round (it was: ~2,500 signals a second at a
// 10 ms slice, each one slowing the memset). Another goroutine is runnable
// on the P all along, so sysmon keeps asking.
__attribute__((noinline)) void fill(std::vector<char>& buf, int c) {
  std::memset(buf.data(), c, buf.size());
  asm volatile("" : : "r"(buf.data()) : "memory");
}

TEST(PreemptDefault, CodeThatCannotBeInterruptedIsSignalledOnceASlice) {
  SKIP_UNDER_TSAN();
  constexpr auto slice = 10ms;
  std::uint64_t sent = 0;
  long long ms = 0;
  goro::run(procs(1), [&] {
    auto prev = goro::debug::set_time_slice(slice);
    std::vector<char> buf(64 << 20, 1);  // touched: no page faults below
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      while (!stop.load(std::memory_order_relaxed)) goro::gosched();
      wg.done();
    });
    goro::go([&] {
      goro::debug::preempt_stats s0 = goro::debug::read_preempt_stats();
      auto t0 = clk::now();
      for (int i = 0; clk::now() - t0 < 300ms; i++) fill(buf, i);
      ms =
          std::chrono::duration_cast<std::chrono::milliseconds>(clk::now() - t0)
              .count();
      // Less the signals of the blocked-call check (blockedsyscall.cpp),
      // sent when the thread waited for a CPU on a loaded machine.
      goro::debug::preempt_stats s1 = goro::debug::read_preempt_stats();
      sent = (s1.signals_sent - s0.signals_sent) -
             (s1.blocked_signalled - s0.blocked_signalled);
      stop.store(true);
      wg.done();
    });
    wg.wait();
    goro::debug::set_time_slice(prev);
  });
  EXPECT_LE(sent, std::uint64_t(2 * ms / 10 + 5))
      << sent << " signals in " << ms << " ms";
}

// A SIGURG handler the program installed before goro started (e.g. for
// out-of-band socket data) is still called for every SIGURG, while goro
// uses the same signal to preempt.
std::atomic<int> user_sigurg{0};
void on_sigurg(int) { user_sigurg.fetch_add(1); }

TEST(PreemptDefault, UserSigurgHandlerStillCalled) {
  SKIP_UNDER_TSAN();
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        struct sigaction sa {};
        sa.sa_handler = on_sigurg;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGURG, &sa, nullptr);
        std::vector<double> ms = sleeps_next_to_loop(3, 20s);
        int before = user_sigurg.load();
        for (int i = 0; i < 5; i++) raise(SIGURG);
        bool ok = user_sigurg.load() == before + 5 && before > 0 &&
                  ms.back() < 1000 &&
                  goro::debug::read_preempt_stats().preempted > 0;
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
