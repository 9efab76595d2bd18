// pingpong.cpp: two goroutines bouncing a value over unbuffered channels
// (the GopherCon talk's one-element LIFO buffer, runnext, and time-slice
// inheritance).
//
//   pingpong [round_trips]
//
// When a goroutine wakes another (a send to a parked receiver), the woken
// one goes to the waker's P in runnext, ahead of the local queue, and runs
// as soon as the waker parks: the pair stays on one P, warm in its cache,
// at the cost of one goroutine switch per hop. With idle Ps around, each
// wake-up also wakes a spinning thread (wakep), which may steal the
// runnext goroutine after its ~3 us back-off: then the pair crosses Ps and
// every hop pays for a thread wake-up. The woken goroutine inherits the
// current time slice, so the pair together is preempted after one slice
// (10 ms) and cannot starve the other goroutines of its P.
//
// 1. Round trips timed on one P and at the starting gomaxprocs, with the
//    runtime's per-P dispatch counts.
// 2. On a single P, the pair next to a third goroutine that counts: the
//    third one runs once the pair's shared time slice is over (it would be
//    starved if each hop started a fresh time slice).
//
// Exits 1 if a value is lost or the third goroutine starves.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

// Runs `n` round trips; returns the sum of the values received back.
std::int64_t play(std::int64_t n) {
  auto ping = goro::make_chan<std::int64_t>();
  auto pong = goro::make_chan<std::int64_t>();
  goro::go([ping, pong, n] {
    for (std::int64_t i = 0; i < n; i++) pong.send(*ping.recv() + 1);
  });
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < n; i++) {
    ping.send(i);
    sum += *pong.recv();
  }
  return sum;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  if (n < 1) {
    std::fprintf(stderr, "usage: pingpong [round_trips >= 1]\n");
    return 2;
  }
  return goro::run([n]() -> int {
    int rc = 0;
    const std::int64_t want = std::int64_t(n) * (n + 1) / 2;

    const int start_procs = goro::gomaxprocs();
    for (int procs : {1, start_procs}) {
      if (procs == 1 && start_procs == 1) continue;
      goro::gomaxprocs(procs);
      std::printf("=== 1. %ld round trips, gomaxprocs %d ===\n", n, procs);
      const auto before = goro::debug::per_p_stats();
      const auto t0 = clock_type::now();
      const std::int64_t sum = play(n);
      const double ns =
          std::chrono::duration<double, std::nano>(clock_type::now() - t0)
              .count();
      const auto after = goro::debug::per_p_stats();
      std::printf(
          "%.0f ns per round trip (two sends, two receives, two "
          "goroutine switches)\n",
          ns / double(n));
      std::printf("dispatches per P:");
      for (const auto& a : after) {
        std::uint64_t run0 = 0;
        for (const auto& b : before)
          if (b.id == a.id) run0 = b.goroutines_run;
        std::printf(" P%d=%llu", a.id,
                    (unsigned long long)(a.goroutines_run - run0));
      }
      std::printf("\n");
      if (sum != want) {
        std::printf("FAIL: sum %lld, want %lld\n", (long long)sum,
                    (long long)want);
        rc = 1;
      }
    }

    std::printf("\n=== 2. The pair and a counting goroutine on one P ===\n");
    {
      const int procs = goro::gomaxprocs(1);
      std::atomic<bool> stop{false};
      std::atomic<std::int64_t> counted{0};
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          counted.fetch_add(1, std::memory_order_relaxed);
          goro::gosched();
        }
        wg.done();
      });
      // Batches of round trips until the third goroutine has run (bounded:
      // 10 s), so the check holds on a fast machine too.
      const auto t0 = clock_type::now();
      std::int64_t trips = 0;
      while (counted.load() == 0 &&
             clock_type::now() - t0 < std::chrono::seconds(10)) {
        if (play(1000) != 1000 * 1001 / 2) rc = 1;
        trips += 1000;
      }
      const double ms =
          std::chrono::duration<double, std::milli>(clock_type::now() - t0)
              .count();
      const std::int64_t seen = counted.load();
      stop = true;
      wg.wait();
      goro::gomaxprocs(procs);
      std::printf(
          "the third goroutine first ran after %lld round trips (%.1f ms: "
          "the pair shares one 10 ms time slice, then sysmon preempts it)\n",
          (long long)trips, ms);
      if (seen == 0) {
        std::printf("FAIL: the third goroutine never ran\n");
        rc = 1;
      }
    }
    if (rc == 0) std::printf("pingpong: ok\n");
    return rc;
  });
}
