// global_queue_61.cpp: why 61, and why the time slice is inherited (the
// GopherCon talk "Queues, Fairness and the Go Scheduler").
//
//   global_queue_61 [rounds]
//
// On a single P, a plain thread starts goroutines one at a time; from a
// plain thread goro::go puts them in the global run queue. The P is kept
// busy by one of two workloads, and the program measures how long each
// injected goroutine waits before it runs:
//
// 1. Fan-out rounds: a leader sends to 4 workers on their channels and
//    collects 4 replies. Each wake-up puts the woken worker in runnext and
//    pushes the previous one to the local queue, so the P keeps running
//    goroutines from its local queue; each such dispatch is one schedule,
//    and every 61st schedule looks at the global queue first. The injected
//    goroutine waits microseconds.
// 2. A ping-pong pair: each hop puts the woken goroutine in runnext, and a
//    goroutine taken from runnext inherits the current time slice and does
//    not count as a schedule (else the pair, alternating forever, would
//    still be "fair" to each other and starve everyone else until the
//    61st hop). Here the global queue is looked at when the pair's shared
//    time slice (10 ms) ends and sysmon preempts it: the injected goroutine
//    waits up to a slice.
//
// 61 is prime, so the check does not fall into step with periodic patterns
// in the workload; it is rare enough that the global queue's lock stays
// cold, frequent enough that nothing waits long.
//
// Exits 1 if an injected goroutine never runs.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <goro/goro.hpp>
#include <optional>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

// Starts `rounds` goroutines from a plain thread, one at a time; returns
// how long each waited before it ran, in microseconds, sorted.
std::vector<double> inject(int rounds) {
  std::vector<double> waits_us;
  std::thread injector([&] {
    for (int i = 0; i < rounds; i++) {
      auto ran = goro::make_chan<double>(1);
      const auto t0 = clock_type::now();
      goro::go([ran, t0] {
        ran.send(
            std::chrono::duration<double, std::micro>(clock_type::now() - t0)
                .count());
      });
      waits_us.push_back(*ran.recv());  // blocks this plain thread
    }
  });
  // join() blocks this goroutine's thread: inside blocking_long, so that
  // the only P goes to another thread and the workload keeps running.
  goro::blocking_long([&] { injector.join(); });
  std::sort(waits_us.begin(), waits_us.end());
  return waits_us;
}

void report(const char* what, const std::vector<double>& w) {
  std::printf("%-34s waited p50 %8.1f us, max %8.1f us\n", what,
              w[w.size() / 2], w.back());
}

}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 50;
  if (rounds < 1) {
    std::fprintf(stderr, "usage: global_queue_61 [rounds >= 1]\n");
    return 2;
  }
  goro::options opt;
  opt.gomaxprocs = 1;
  return goro::run(opt, [rounds]() -> int {
    int rc = 0;
    std::printf(
        "%d goroutines started from a plain thread (global queue), "
        "one at a time, on a single P busy with:\n",
        rounds);
    {  // 1. fan-out rounds: local-queue churn
      std::atomic<bool> stop{false};
      std::vector<goro::chan<int>> to;
      auto replies = goro::make_chan<int>(4);
      goro::wait_group wg;
      for (int w = 0; w < 4; w++) {
        auto c = goro::make_chan<int>();
        to.push_back(c);
        wg.add(1);
        goro::go([c, replies, &wg] {
          for (std::optional<int> v; (v = c.recv());) replies.send(*v);
          wg.done();
        });
      }
      wg.add(1);
      goro::go([&] {
        while (!stop.load(std::memory_order_relaxed)) {
          for (auto& c : to) c.send(1);
          for (int i = 0; i < 4; i++) replies.recv();
        }
        for (auto& c : to) c.close();
        wg.done();
      });
      const auto w = inject(rounds);
      stop = true;
      wg.wait();
      report("fan-out rounds (local queue):", w);
      if (int(w.size()) != rounds) rc = 1;
    }
    {  // 2. a ping-pong pair: runnext, inherited time slice
      std::atomic<bool> stop{false};
      auto ping = goro::make_chan<int>(), pong = goro::make_chan<int>();
      goro::wait_group wg;
      wg.add(2);
      goro::go([&, ping, pong] {
        for (int v = 0; !stop.load(std::memory_order_relaxed);) {
          ping.send(v);
          v = *pong.recv();
        }
        ping.close();
        wg.done();
      });
      goro::go([&, ping, pong] {
        for (std::optional<int> v; (v = ping.recv());) pong.send(*v + 1);
        wg.done();
      });
      const auto w = inject(rounds);
      stop = true;
      wg.wait();
      report("a ping-pong pair (runnext):", w);
      if (int(w.size()) != rounds) rc = 1;
    }
    std::printf(rc == 0 ? "global_queue_61: ok\n" : "FAIL: see above\n");
    return rc;
  });
}
