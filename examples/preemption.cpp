// preemption.cpp: a CPU-bound loop with no function calls next to a
// goroutine that wants to run, on a single P (the seeds' "CPU-bound loops
// before Go 1.14" pitfall and cooperative vs asynchronous preemption).
//
//   preemption [loop_ms]
//
// 1. Asynchronous preemption (on by default, as in Go 1.14+): sysmon sees
//    the loop run past its time slice (10 ms, GORO_TIMESLICE) and sends
//    its thread a signal; the loop is suspended where it is and the ticker
//    goroutine runs. The ticker's largest gap stays near a time slice.
// 2. The pre-1.14 fix, for code that cannot be preempted by signal (a loop
//    inside a shared library, a TSan build, GORO_DEBUG=asyncpreemptoff=1):
//    call goro::preempt_point() (a cheap check, Go's stack-growth check)
//    or goro::gosched() every so often.
//
// Exits 1 if the ticker starves while preemption is available.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>

namespace {

using clock_type = std::chrono::steady_clock;
using namespace std::chrono_literals;

double ms(clock_type::duration d) {
  return std::chrono::duration<double, std::milli>(d).count();
}

// No calls, no yields: only a signal can take the P from this loop.
// Stops after `iters` iterations, or earlier when `stop` is set.
__attribute__((noinline)) std::uint64_t cpu_intensive(
    std::uint64_t iters, const std::atomic<bool>& stop) {
  std::uint64_t result = 0;
  for (std::uint64_t i = 0; i < iters; i++) {
    result += i * i % 1000;
    if ((i & 0xffff) == 0 && stop.load(std::memory_order_relaxed)) break;
  }
  return result;
}

// The same loop with a preemption check every 65,536 iterations.
__attribute__((noinline)) std::uint64_t cpu_intensive_cooperative(
    std::uint64_t iters, const std::atomic<bool>& stop) {
  std::uint64_t result = 0;
  for (std::uint64_t i = 0; i < iters; i++) {
    result += i * i % 1000;
    if ((i & 0xffff) == 0) {
      if (stop.load(std::memory_order_relaxed)) break;
      goro::preempt_point();  // yields if the time slice is over
    }
  }
  return result;
}

struct outcome {
  int ticks = 0;
  double max_gap_ms = 0;
  double loop_ms = 0;
};

// Runs `loop` in a goroutine next to a 1 ms ticker goroutine, on one P.
template <class Loop>
outcome race(Loop loop, std::uint64_t iters) {
  std::atomic<bool> stop{false};
  outcome o;
  goro::wait_group wg;
  wg.add(2);
  const auto t0 = clock_type::now();
  goro::go([&] {
    std::uint64_t r = loop(iters, stop);
    o.loop_ms = ms(clock_type::now() - t0);
    stop = true;
    if (r == 42) std::printf(" ");  // use the result
    wg.done();
  });
  goro::go([&] {
    goro::ticker tick(1ms);
    auto last = clock_type::now();
    while (!stop.load()) {
      tick.c.recv();
      const auto now = clock_type::now();
      if (ms(now - last) > o.max_gap_ms) o.max_gap_ms = ms(now - last);
      last = now;
      o.ticks++;
    }
    wg.done();
  });
  wg.wait();
  return o;
}

}  // namespace

int main(int argc, char** argv) {
  const int loop_ms = argc > 1 ? std::atoi(argv[1]) : 300;
  if (loop_ms < 20) {
    std::fprintf(stderr, "usage: preemption [loop_ms >= 20]\n");
    return 2;
  }
  return goro::run([loop_ms]() -> int {
    int rc = 0;
    const int procs = goro::gomaxprocs(1);  // one P: the loop and the ticker
                                            // must take turns
    // Calibrate the loop to about loop_ms.
    std::atomic<bool> never{false};
    auto t0 = clock_type::now();
    cpu_intensive(1u << 24, never);
    const double ns_per_iter = ms(clock_type::now() - t0) * 1e6 / (1u << 24);
    const auto iters =
        static_cast<std::uint64_t>(loop_ms * 1e6 / std::max(ns_per_iter, 0.01));

    std::printf("=== 1. A call-free loop of ~%d ms and a 1 ms ticker ===\n",
                loop_ms);
    if (goro::debug::async_preempt_enabled()) {
      const auto p0 = goro::debug::read_preempt_stats();
      const outcome o = race(cpu_intensive, iters);
      const auto p1 = goro::debug::read_preempt_stats();
      std::printf(
          "loop ran %.0f ms; the ticker ran %d times, largest gap %.1f ms; "
          "%llu asynchronous preemptions\n",
          o.loop_ms, o.ticks, o.max_gap_ms,
          (unsigned long long)(p1.preempted - p0.preempted));
      if (o.ticks < 2) {
        std::printf("FAIL: the ticker starved next to the loop\n");
        rc = 1;
      }
    } else {
      std::printf(
          "(asynchronous preemption is not available in this build or was "
          "turned off: the loop would hold the P until it ends)\n");
    }

    std::printf("\n=== 2. The same loop with goro::preempt_point() ===\n");
    {
      const bool was = goro::debug::set_async_preempt(false);
      const outcome o = race(cpu_intensive_cooperative, iters);
      goro::debug::set_async_preempt(was);
      std::printf(
          "loop ran %.0f ms; the ticker ran %d times, largest gap %.1f ms "
          "(asynchronous preemption off)\n",
          o.loop_ms, o.ticks, o.max_gap_ms);
      if (o.ticks < 2) {
        std::printf("FAIL: the ticker starved next to the cooperative loop\n");
        rc = 1;
      }
    }
    goro::gomaxprocs(procs);
    if (rc == 0) std::printf("preemption: ok\n");
    return rc;
  });
}
