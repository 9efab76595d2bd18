// Timer tests through the public API (goro/time.hpp): sleep, after, timer,
// ticker and after_func, plus ports of Go's TestTimerFairness and
// TestTimerFairness2 (runtime/proc_test.go) and timers used from plain
// threads.
//
// Sleeping is the feature under test here, so these tests do sleep; every
// bound on how late something may happen is generous (a loaded CI machine
// or a sanitizer may delay a wake-up by a lot), while "not before d" is
// exact.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <optional>
#include <stdexcept>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::clock;
using goro_test::deadline;
using goro_test::scaled;

// A wake-up may be late by this much before a test calls it broken.
constexpr auto slack = 1s;

template <class D>
long long ms(D d) {
  return static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

// Receives from c, giving up after `limit` (so a timer that never fires
// fails the test instead of hanging it).
std::optional<goro::time_point> recv_within(
    const goro::recv_chan<goro::time_point>& c,
    std::chrono::nanoseconds limit) {
  std::optional<goro::time_point> v;
  auto giveup = goro::after(limit);
  if (goro::select(goro::case_recv(c, v), goro::case_recv(giveup)) == 0)
    return v;
  return std::nullopt;
}

// True if c holds nothing right now (select with a default case).
bool nothing_ready(const goro::recv_chan<goro::time_point>& c) {
  return goro::select(goro::case_recv(c), goro::case_default()) == 1;
}

// ---------------------------------------------------------------------------
// The timer channels are receive-only (Go's <-chan Time). A bidirectional
// timer channel let user code close it, and the runtime's next firing
// then threw "send on closed channel" on the scheduler stack, where it
// ends in std::terminate.

template <class Timer>
concept channel_closable = requires(Timer& t) {
  t.c.close();
};
template <class Timer>
concept channel_sendable = requires(Timer& t) {
  t.c.send(goro::time_point{});
};
template <class Timer>
concept channel_try_sendable = requires(Timer& t) {
  t.c.try_send(goro::time_point{});
};

// Control: the same requirements hold for a bidirectional member.
struct bidirectional {
  goro::chan<goro::time_point> c;
};
static_assert(channel_closable<bidirectional> &&
              channel_sendable<bidirectional> &&
              channel_try_sendable<bidirectional>);
static_assert(!channel_closable<goro::timer>);
static_assert(!channel_sendable<goro::timer>);
static_assert(!channel_try_sendable<goro::timer>);
static_assert(!channel_closable<goro::ticker>);
static_assert(!channel_sendable<goro::ticker>);
static_assert(!channel_try_sendable<goro::ticker>);
static_assert(std::is_same_v<decltype(goro::after(1s)),
                             goro::recv_chan<goro::time_point>>);

// The receive-only channels work everywhere a receiver needs them: recv,
// try_recv, len/cap, select (all case_recv forms), range-for, copies.
TEST(TimerChannel, ReceiveOnlyChannelsWork) {
  goro::run([] {
    goro::timer t(5ms);
    EXPECT_EQ(t.c.cap(), 1u);
    std::optional<goro::time_point> v;
    auto giveup = goro::after(10s);
    ASSERT_EQ(goro::select(goro::case_recv(t.c, v), goro::case_recv(giveup)),
              0u)
        << "the timer never fired";
    ASSERT_TRUE(v.has_value());

    t.reset(1ms);
    bool called = false;
    ASSERT_EQ(
        goro::select(goro::case_recv(t.c,
                                     [&](std::optional<goro::time_point> x) {
                                       called = x.has_value();
                                     }),
                     goro::case_recv(giveup)),
        0u);
    EXPECT_TRUE(called);

    // A copy of the channel receives the timer's next firing.
    goro::recv_chan<goro::time_point> copy = t.c;
    EXPECT_TRUE(copy == t.c);
    t.reset(1ms);
    EXPECT_TRUE(recv_within(copy, 10s).has_value());
    bool closed = true;
    EXPECT_FALSE(t.c.try_recv(&closed).has_value()) << "one firing, one value";
    EXPECT_FALSE(closed);

    // range-for over a ticker's channel (break out: it is never closed).
    goro::ticker tk(1ms);
    int ticks = 0;
    for (goro::time_point tp : tk.c) {
      EXPECT_LE(tp, clock::now());
      if (++ticks == 3) break;
    }
    EXPECT_EQ(ticks, 3);
    tk.stop();

    // after(d) as a plain receive and as a discarding case.
    EXPECT_TRUE(goro::after(1ms).recv().has_value());
    EXPECT_EQ(goro::select(goro::case_recv(goro::after(1ms)),
                           goro::case_recv(goro::after(10s))),
              0u);
  });
}

// ---------------------------------------------------------------------------
// sleep

TEST(Sleep, SleepsAtLeastTheDuration) {
  goro::run([] {
    for (auto d : {1ms, 5ms, 20ms, 50ms}) {
      auto t0 = clock::now();
      goro::sleep(d);
      auto el = clock::now() - t0;
      EXPECT_GE(el, d) << "sleep(" << ms(d) << " ms) returned early";
      EXPECT_LT(el, d + slack)
          << "sleep(" << ms(d) << " ms) took " << ms(el) << " ms";
    }
  });
}

TEST(Sleep, ZeroAndNegativeReturnAtOnce) {
  goro::run([] {
    auto t0 = clock::now();
    for (int i = 0; i < 1000; i++) {
      goro::sleep(0ns);
      goro::sleep(-5ms);
    }
    EXPECT_LT(clock::now() - t0, slack);
  });
}

// A sleeping goroutine is parked: its thread runs others meanwhile. With
// one P, a goroutine that counts while main sleeps must make progress.
TEST(Sleep, ParksTheGoroutineNotTheThread) {
  goro::run([] {
    int old = goro::gomaxprocs(1);
    std::atomic<bool> stop{false};
    std::atomic<long> count{0};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      deadline limit(10s);
      while (!stop.load() && !limit.passed()) {
        count.fetch_add(1);
        goro::gosched();
      }
      wg.done();
    });
    goro::sleep(30ms);
    long seen = count.load();
    stop.store(true);
    wg.wait();
    goro::gomaxprocs(old);
    EXPECT_GT(seen, 0) << "nothing ran on the only P while main slept";
  });
}

TEST(Sleep, ManyConcurrentSleepersAllWake) {
  const int n = goro_test::live_scaled(100000, 10000);
  std::atomic<int> early{0};
  std::atomic<int> woke{0};
  auto t0 = clock::now();
  goro::run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        auto d = std::chrono::milliseconds(1 + i % 20);
        auto s = clock::now();
        goro::sleep(d);
        if (clock::now() - s < d) early.fetch_add(1);
        woke.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
  });
  auto el = clock::now() - t0;
  EXPECT_EQ(woke.load(), n);
  EXPECT_EQ(early.load(), 0) << "sleepers woke before their duration";
  EXPECT_LT(el, std::chrono::seconds(scaled(5, 30)))
      << n << " sleepers of <= 20 ms took " << ms(el) << " ms";
}

// ---------------------------------------------------------------------------
// after

TEST(After, FiresOnceAfterTheDuration) {
  goro::run([] {
    auto t0 = clock::now();
    auto c = goro::after(10ms);
    EXPECT_EQ(c.cap(), 1u);
    auto v = recv_within(c, 10s);
    auto el = clock::now() - t0;
    ASSERT_TRUE(v.has_value()) << "after(10ms) never fired";
    EXPECT_GE(el, 10ms);
    EXPECT_LT(el, 10ms + slack);
    EXPECT_GE(*v, t0 + 10ms) << "the value is the firing time";
    EXPECT_LE(*v, clock::now());
    // Once: a later timer fires, and c has received nothing more (nor
    // was it closed).
    goro::after(30ms).recv();
    bool closed = true;
    EXPECT_FALSE(c.try_recv(&closed).has_value());
    EXPECT_FALSE(closed);
  });
}

TEST(After, ZeroOrNegativeFiresPromptly) {
  goro::run([] {
    EXPECT_TRUE(recv_within(goro::after(0ns), 10s).has_value());
    EXPECT_TRUE(recv_within(goro::after(-1s), 10s).has_value());
  });
}

// Timers set in reverse order fire in deadline order.
TEST(After, FireInDeadlineOrder) {
  // Each timer sends the time it fired at; those times follow the
  // deadlines whatever order the receivers get to run in (under a
  // sanitizer, spawning receivers can take longer than the 10 ms gaps).
  goro::run([] {
    const int n = 5;
    auto start = std::chrono::steady_clock::now();
    std::vector<goro::recv_chan<goro::time_point>> cs;
    for (int i = n; i >= 1; i--)
      cs.push_back(goro::after(std::chrono::milliseconds(10 * i)));
    std::vector<goro::time_point> fired(n);
    for (int i = 0; i < n; i++) {
      auto v = cs[i].recv();
      ASSERT_TRUE(v.has_value());
      fired[i] = *v;
      // cs[i] was due after 10 * (n - i) ms.
      EXPECT_GE(fired[i] - start, std::chrono::milliseconds(10 * (n - i)));
    }
    // cs[n-1] had the shortest duration: fire times ascend from there.
    for (int k = n - 1; k > 0; k--)
      EXPECT_LE(fired[k], fired[k - 1])
          << "timer " << k << " fired after " << k - 1 << ", due 10 ms later";
  });
}

// ---------------------------------------------------------------------------
// timer

TEST(Timer, StopBeforeFiringPreventsIt) {
  goro::run([] {
    goro::timer t(100ms);
    EXPECT_TRUE(t.stop()) << "stop of a pending timer reports true";
    EXPECT_FALSE(t.stop()) << "a second stop has nothing to stop";
    // Wait past the original deadline on another timer: nothing arrives.
    goro::after(200ms).recv();
    EXPECT_TRUE(nothing_ready(t.c)) << "a stopped timer fired";
  });
}

TEST(Timer, StopAfterFiringReturnsFalse) {
  goro::run([] {
    goro::timer t(5ms);
    auto v = recv_within(t.c, 10s);
    ASSERT_TRUE(v.has_value());
    EXPECT_FALSE(t.stop());
    EXPECT_TRUE(nothing_ready(t.c));
  });
}

// Fired but not drained: stop reports false, and it does not drain c
// (Go 1.19 semantics).
TEST(Timer, StopAfterUndrainedFireLeavesValue) {
  goro::run([] {
    goro::timer t(1ms);
    // Fired: its value is in the channel (observed, not slept for).
    ASSERT_TRUE(goro_test::eventually([&] { return t.c.len() == 1; }, 10s))
        << "the timer never fired";
    EXPECT_FALSE(t.stop());
    EXPECT_FALSE(nothing_ready(t.c)) << "the fired value was lost";
  });
}

TEST(Timer, ResetPendingTimer) {
  goro::run([] {
    goro::timer t(1h);
    auto t0 = clock::now();
    EXPECT_TRUE(t.reset(10ms)) << "reset of a pending timer reports true";
    auto v = recv_within(t.c, 10s);
    auto el = clock::now() - t0;
    ASSERT_TRUE(v.has_value()) << "reset timer never fired";
    EXPECT_GE(el, 10ms);
    EXPECT_LT(el, 10ms + slack);
  });
}

TEST(Timer, ResetFiredAndStoppedTimers) {
  goro::run([] {
    goro::timer t(2ms);
    ASSERT_TRUE(recv_within(t.c, 10s).has_value());
    // Fired and drained: reset re-arms it, reporting false.
    auto t0 = clock::now();
    EXPECT_FALSE(t.reset(10ms));
    ASSERT_TRUE(recv_within(t.c, 10s).has_value())
        << "re-armed timer did not fire";
    EXPECT_GE(clock::now() - t0, 10ms);
    // Stopped: reset re-arms it too.
    EXPECT_FALSE(t.reset(1h)) << "it had fired: not pending";
    EXPECT_TRUE(t.stop());
    EXPECT_FALSE(t.reset(5ms));
    ASSERT_TRUE(recv_within(t.c, 10s).has_value())
        << "reset after stop did not fire";
    EXPECT_FALSE(t.stop());
  });
}

// Reset to a later deadline postpones the firing.
TEST(Timer, ResetPostpones) {
  goro::run([] {
    auto t0 = clock::now();
    goro::timer t(20ms);
    EXPECT_TRUE(t.reset(150ms));
    goro::after(60ms).recv();
    EXPECT_TRUE(nothing_ready(t.c)) << "fired at the old deadline";
    ASSERT_TRUE(recv_within(t.c, 10s).has_value());
    EXPECT_GE(clock::now() - t0, 150ms);
  });
}

// Destroying the handle does not stop the timer (as with a dropped
// *time.Timer in Go).
TEST(Timer, DroppedHandleStillFires) {
  goro::run([] {
    goro::recv_chan<goro::time_point> c;
    {
      goro::timer t(5ms);
      c = t.c;
    }
    EXPECT_TRUE(recv_within(c, 10s).has_value());
  });
}

TEST(Timer, MovedTimerKeepsWorking) {
  goro::run([] {
    goro::timer a(1h);
    goro::timer b(std::move(a));
    EXPECT_THROW(a.stop(), std::logic_error);
    EXPECT_TRUE(b.reset(5ms));
    EXPECT_TRUE(recv_within(b.c, 10s).has_value());
  });
}

// Many timers stopped and reset concurrently from several goroutines: each
// one that was not stopped fires exactly once.
TEST(Timer, ConcurrentStopAndReset) {
  const int n = scaled(2000, 300);
  std::atomic<int> fired{0}, stopped{0};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        goro::timer t(std::chrono::milliseconds(1 + i % 7));
        if (i % 3 == 0) {
          t.reset(std::chrono::milliseconds(2 + i % 5));
        }
        if (i % 2 == 0 && t.stop()) {
          stopped.fetch_add(1);
        } else {
          if (recv_within(t.c, 10s).has_value()) fired.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(fired.load() + stopped.load(), n);
}

// ---------------------------------------------------------------------------
// ticker

TEST(Ticker, TicksRepeatedlyThenStops) {
  goro::run([] {
    auto t0 = clock::now();
    goro::ticker tk(5ms);
    goro::time_point last{};
    for (int i = 0; i < 5; i++) {
      auto v = recv_within(tk.c, 10s);
      ASSERT_TRUE(v.has_value()) << "tick " << i << " never came";
      EXPECT_GT(*v, last) << "tick times increase";
      last = *v;
    }
    // Five distinct firings, 5 ms apart, the first 5 ms after the start.
    EXPECT_GE(clock::now() - t0, 25ms);
    tk.stop();
    tk.c.try_recv();  // a tick may have been buffered before stop
    goro::after(40ms).recv();
    EXPECT_TRUE(nothing_ready(tk.c)) << "a stopped ticker ticked";
  });
}

// Nobody receives for about 25 periods: exactly one tick waits in the
// channel (the ticker did fire: its timer is due long before the sleep's
// on the same P; the others were dropped, not queued), and ticking goes on
// once the receiver drains it.
TEST(Ticker, SlowReceiverDropsTicks) {
  goro::run([] {
    goro::ticker tk(2ms);
    goro::sleep(50ms);
    EXPECT_EQ(tk.c.len(), 1u) << "want the one undelivered tick, no more";
    auto first = recv_within(tk.c, 10s);
    ASSERT_TRUE(first.has_value());
    auto next = recv_within(tk.c, 10s);
    ASSERT_TRUE(next.has_value()) << "ticking stopped after a drop";
    EXPECT_GT(*next, *first);
    tk.stop();
  });
}

TEST(Ticker, ResetChangesThePeriod) {
  goro::run([] {
    goro::ticker tk(1h);
    auto t0 = clock::now();
    tk.reset(5ms);
    for (int i = 0; i < 3; i++)
      ASSERT_TRUE(recv_within(tk.c, 10s).has_value())
          << "tick " << i << " after reset";
    EXPECT_GE(clock::now() - t0, 15ms);
    // And a stopped ticker restarts on reset.
    tk.stop();
    tk.c.try_recv();
    tk.reset(3ms);
    EXPECT_TRUE(recv_within(tk.c, 10s).has_value());
  });
}

TEST(Ticker, NonPositivePeriodThrows) {
  goro::run([] {
    EXPECT_THROW(goro::ticker(0ns), std::invalid_argument);
    EXPECT_THROW(goro::ticker(-1ms), std::invalid_argument);
    goro::ticker tk(1h);
    EXPECT_THROW(tk.reset(0ns), std::invalid_argument);
  });
}

// Destroying a ticker stops it.
TEST(Ticker, DestroyedTickerStops) {
  goro::run([] {
    goro::recv_chan<goro::time_point> c;
    {
      goro::ticker tk(2ms);
      c = tk.c;
      ASSERT_TRUE(recv_within(c, 10s).has_value());
    }
    c.try_recv();
    goro::after(30ms).recv();
    EXPECT_TRUE(nothing_ready(c));
  });
}

// ---------------------------------------------------------------------------
// after_func

TEST(AfterFunc, RunsInItsOwnGoroutine) {
  goro::run([] {
    auto ids = goro::make_chan<std::uint64_t>(1);
    auto t0 = clock::now();
    goro::timer t =
        goro::after_func(10ms, [ids] { ids.send(goro::goroutine_id()); });
    EXPECT_FALSE(static_cast<bool>(t.c))
        << "after_func's timer has a nil channel";
    std::optional<std::uint64_t> id;
    auto giveup = goro::after(10s);
    ASSERT_EQ(goro::select(goro::case_recv(ids, id), goro::case_recv(giveup)),
              0u)
        << "after_func never ran";
    EXPECT_GE(clock::now() - t0, 10ms);
    ASSERT_TRUE(id.has_value());
    EXPECT_NE(*id, 0u) << "fn ran outside a goroutine";
    EXPECT_NE(*id, goro::goroutine_id()) << "fn ran in the caller's goroutine";
    EXPECT_FALSE(t.stop()) << "stop after the function started";
  });
}

// The function runs in a goroutine of its own, so it may block without
// holding up other timers.
TEST(AfterFunc, FunctionMayBlock) {
  goro::run([] {
    auto gate = goro::make_chan<int>();
    auto done = goro::make_chan<int>(1);
    goro::timer t1 = goro::after_func(1ms, [gate, done] {
      gate.recv();
      done.send(1);
    });
    // A later timer fires while the first function is blocked.
    EXPECT_TRUE(recv_within(goro::after(20ms), 10s).has_value());
    gate.send(0);
    EXPECT_EQ(done.recv().value_or(0), 1);
  });
}

TEST(AfterFunc, StopPreventsTheCall) {
  goro::run([] {
    std::atomic<bool> ran{false};
    goro::timer t = goro::after_func(50ms, [&ran] { ran.store(true); });
    EXPECT_TRUE(t.stop());
    goro::after(150ms).recv();
    EXPECT_FALSE(ran.load()) << "a stopped after_func ran";
    // reset makes it run after all.
    auto ids = goro::make_chan<int>(1);
    goro::timer t2 = goro::after_func(1h, [ids] { ids.send(7); });
    EXPECT_TRUE(t2.stop());
    EXPECT_FALSE(t2.reset(5ms));
    std::optional<int> v;
    auto giveup = goro::after(10s);
    EXPECT_EQ(goro::select(goro::case_recv(ids, v), goro::case_recv(giveup)),
              0u);
  });
}

TEST(AfterFunc, EmptyFunctionThrows) {
  goro::run([] {
    EXPECT_THROW(goro::after_func(1ms, std::function<void()>{}),
                 std::invalid_argument);
  });
}

// ---------------------------------------------------------------------------
// Go's TestTimerFairness: two goroutines ping-pong on c through select
// while main selects on c and a 20 ms timer. Readying each other through
// runnext must not starve the timer.

TEST(TimerFairness, ChannelPingPongDoesNotStarveTimer) {
  bool fired = false;
  auto t0 = clock::now();
  goro::run([&] {
    auto done = goro::make_chan<void>();
    auto c = goro::make_chan<bool>();
    goro::wait_group wg;
    wg.add(2);
    for (int i = 0; i < 2; i++) {
      goro::go([&] {
        for (;;) {
          if (goro::select(goro::case_send(c, true), goro::case_recv(done)) ==
              1)
            break;
        }
        wg.done();
      });
    }
    auto timer = goro::after(20ms);
    deadline limit(10s);
    for (;;) {
      if (goro::select(goro::case_recv(c), goro::case_recv(timer)) == 1) {
        fired = true;
        break;
      }
      if (limit.passed()) break;
    }
    done.close();
    wg.wait();
  });
  EXPECT_TRUE(fired) << "the 20 ms timer never fired";
  EXPECT_LT(clock::now() - t0, 20ms + slack);
}

// Go's TestTimerFairness2: the same with blocking calls in the loop; each
// goroutine's own 20 ms timer must fire.
TEST(TimerFairness, WithBlockingCalls) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  std::atomic<int> gave_up{0};
  auto t0 = clock::now();
  goro::run([&] {
    auto done = goro::make_chan<bool>();
    auto c = goro::make_chan<bool>();
    for (int i = 0; i < 2; i++) {
      goro::go([&] {
        auto timer = goro::after(20ms);
        deadline limit(10s);
        char buf[1];
        for (;;) {
          // A zero-byte read returns at once: a real, short system call.
          goro::blocking([&] { return ::read(fds[0], buf, 0); });
          std::optional<bool> v;
          std::size_t k =
              goro::select(goro::case_send(c, true), goro::case_recv(c, v),
                           goro::case_recv(timer));
          if (k == 2) break;
          if (limit.passed()) {
            gave_up.fetch_add(1);
            break;
          }
        }
        done.send(true);
      });
    }
    done.recv();
    done.recv();
  });
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_EQ(gave_up.load(), 0) << "a goroutine's 20 ms timer never fired";
  EXPECT_LT(clock::now() - t0, 20ms + slack);
}

// ---------------------------------------------------------------------------
// Timers from plain threads (no goro::run in progress on this thread).

TEST(PlainThread, AfterTimerTickerAndSleep) {
  std::thread th([] {
    EXPECT_EQ(goro::goroutine_id(), 0u);
    auto t0 = clock::now();
    auto v = goro::after(10ms).recv();
    ASSERT_TRUE(v.has_value());
    EXPECT_GE(clock::now() - t0, 10ms);
    EXPECT_LT(clock::now() - t0, 10ms + slack);

    goro::timer t(5ms);
    EXPECT_TRUE(t.c.recv().has_value());
    EXPECT_FALSE(t.stop());

    goro::timer never(1h);
    EXPECT_TRUE(never.stop());

    t0 = clock::now();
    goro::sleep(5ms);
    EXPECT_GE(clock::now() - t0, 5ms);

    goro::ticker tk(2ms);
    for (int i = 0; i < 3; i++) EXPECT_TRUE(tk.c.recv().has_value());
    tk.stop();

    // after_func from a plain thread still runs fn in a goroutine.
    auto ids = goro::make_chan<std::uint64_t>(1);
    goro::timer f =
        goro::after_func(2ms, [ids] { ids.send(goro::goroutine_id()); });
    auto id = ids.recv();
    ASSERT_TRUE(id.has_value());
    EXPECT_NE(*id, 0u);
  });
  th.join();
}

// A goroutine waits on a timer a plain thread created, and the thread
// waits on one a goroutine created.
TEST(PlainThread, TimersCrossBetweenThreadsAndGoroutines) {
  auto from_thread = goro::make_chan<goro::recv_chan<goro::time_point>>(1);
  auto from_goroutine = goro::make_chan<goro::recv_chan<goro::time_point>>(1);
  std::atomic<bool> goroutine_got{false}, thread_got{false};
  std::thread th([&] {
    from_thread.send(goro::after(10ms));
    auto c = from_goroutine.recv();
    ASSERT_TRUE(c.has_value());
    thread_got.store(c->recv().has_value());
  });
  goro::run([&] {
    from_goroutine.send(goro::after(10ms));
    auto c = from_thread.recv();
    ASSERT_TRUE(c.has_value());
    goroutine_got.store(recv_within(*c, 10s).has_value());
  });
  th.join();
  EXPECT_TRUE(goroutine_got.load());
  EXPECT_TRUE(thread_got.load());
}

}  // namespace
