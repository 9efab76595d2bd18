// time.hpp: Go's time package for goroutines: sleep, after, timer, ticker,
// after_func. Timers live in per-P heaps inside the scheduler; a sleeping
// goroutine is parked (its thread runs other goroutines) and an idle
// thread sleeps in the poller exactly until the next timer is due.
//
// Semantics follow Go 1.19's timers: a timer's channel has a buffer of one;
// stop() reports whether it prevented the firing (it does not drain c);
// reset() should be used on stopped or fired timers with a drained channel.
//
// The channels are receive-only (recv_chan<time_point>, Go's
// <-chan Time): the runtime is their only sender, so user code cannot
// close them or send on them.
//
// Example (snippet: goroutine):
//   auto results = goro::make_chan<int>(1);
//   goro::go([results] { goro::sleep(1ms); results.send(42); });
//   std::optional<int> r;
//   if (goro::select(goro::case_recv(results, r),
//                    goro::case_recv(goro::after(1s))) == 0)
//     std::printf("result %d\n", *r);  // else: timed out
//   goro::ticker tick(2ms);
//   for (int i = 0; i < 3; i++) tick.c.recv();  // three ticks
//   goro::timer t(1h);
//   if (t.stop()) std::puts("stopped before it fired");
#pragma once

#include <chrono>
#include <functional>
#include <goro/chan.hpp>
#include <goro/detail/timer_rt.hpp>
#include <stdexcept>
#include <utility>

namespace goro {

using time_point = std::chrono::steady_clock::time_point;

// Pauses the calling goroutine for at least d (a plain thread sleeps).
void sleep(std::chrono::nanoseconds d);

// A channel that receives the time once, after d.
recv_chan<time_point> after(std::chrono::nanoseconds d);

// Go's time.Timer. Destroying the handle does not stop the timer (as
// dropping a *time.Timer in Go); call stop() for that.
class timer {
 public:
  // Receives the time when it fires (nil for after_func).
  recv_chan<time_point> c;

  explicit timer(std::chrono::nanoseconds d);
  timer(timer&& o) noexcept
      : c(std::move(o.c)), t_(std::exchange(o.t_, nullptr)) {}
  timer& operator=(timer&& o) noexcept;
  timer(const timer&) = delete;
  timer& operator=(const timer&) = delete;
  ~timer();

  // Prevents the timer from firing; false if it already fired or was
  // stopped.
  bool stop();
  // Makes it fire after d (again); true if it had been pending.
  bool reset(std::chrono::nanoseconds d);

 private:
  timer() = default;
  friend timer after_func(std::chrono::nanoseconds, std::function<void()>);
  rt::timer* t_ = nullptr;
};

// Runs fn in its own goroutine after d. The returned timer can stop it.
timer after_func(std::chrono::nanoseconds d, std::function<void()> fn);

// Go's time.Ticker: sends the time on c every period, dropping ticks for a
// slow receiver. Stops when destroyed.
class ticker {
 public:
  recv_chan<time_point> c;  // receives the time of each tick

  // Throws std::invalid_argument for a non-positive period (Go panics).
  explicit ticker(std::chrono::nanoseconds period);
  ticker(ticker&& o) noexcept
      : c(std::move(o.c)), t_(std::exchange(o.t_, nullptr)) {}
  ticker& operator=(ticker&& o) noexcept;
  ticker(const ticker&) = delete;
  ticker& operator=(const ticker&) = delete;
  ~ticker();

  void stop();
  void reset(std::chrono::nanoseconds period);

 private:
  rt::timer* t_ = nullptr;
};

}  // namespace goro
