// sched_bench.cpp: scheduler workloads (spawn, yield, parked goroutines,
// uneven CPU work balanced by stealing). Twins: bench/go/sched.go.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <goro/time.hpp>
#include <goro/wait_group.hpp>
#include <string>

#include "bench.hpp"

namespace {

using gorobench::clock;
using gorobench::ns_since;

// Gets every P running, as Go's warmupScheduler in proc_test.go: n goroutines
// spin until all of them have started, then spin 1 ms more.
void warmup_scheduler(int n) {
  goro::wait_group wg;
  std::atomic<int> count{0};
  wg.add(n);
  for (int i = 0; i < n; ++i) {
    goro::go([&] {
      count.fetch_add(1);
      while (count.load() < n) goro::preempt_point();
      gorobench::spin_for(std::chrono::milliseconds(1));
      wg.done();
    });
  }
  wg.wait();
}

void spawn_chain_link(int n, goro::wait_group* wg) {
  if (n == 0) {
    wg->done();
    return;
  }
  goro::go(spawn_chain_link, n - 1, wg);
}

}  // namespace

// Go's BenchmarkCreateGoroutinesSingle: all Ps warmed, then one goroutine
// spawns 1M goroutines that each call done; the other Ps must steal.
GOROBENCH_WORKLOAD(
    spawn_single, "1 spawner, 1M goroutines each calling wg.done; ns/goroutine",
    "") {
  constexpr int n = 1'000'000;
  warmup_scheduler(goro::gomaxprocs());
  goro::wait_group wg;
  auto t0 = clock::now();
  wg.add(n);
  for (int i = 0; i < n; ++i) goro::go([&wg] { wg.done(); });
  wg.wait();
  gorobench::result("spawn_single", ns_since(t0) / n, "ns/goroutine");
}

// Go's BenchmarkCreateGoroutines: a chain of 1M goroutines, each spawning the
// next; the last one calls done.
GOROBENCH_WORKLOAD(
    spawn_chain, "chain of 1M goroutines, each spawning the next; ns/goroutine",
    "") {
  constexpr int n = 1'000'000;
  goro::wait_group wg;
  auto t0 = clock::now();
  wg.add(1);
  goro::go(spawn_chain_link, n - 1, &wg);
  wg.wait();
  gorobench::result("spawn_chain", ns_since(t0) / n, "ns/goroutine");
}

// 2 goroutines per P, each yielding in a loop, 2M yields in total.
GOROBENCH_WORKLOAD(gosched, "2 goroutines per P yielding, 2M yields; ns/yield",
                   "") {
  constexpr std::int64_t total = 2'000'000;
  const int g = 2 * goro::gomaxprocs();
  const std::int64_t per = total / g;
  goro::wait_group wg;
  auto t0 = clock::now();
  wg.add(g);
  for (int i = 0; i < g; ++i) {
    goro::go([&wg, per] {
      for (std::int64_t j = 0; j < per; ++j) goro::gosched();
      wg.done();
    });
  }
  wg.wait();
  gorobench::result("gosched", ns_since(t0) / static_cast<double>(per * g),
                    "ns/yield");
}

// 1M goroutines parked at once. Each one counts itself in `arrived`, then
// blocks on `release`, which main opens after all of them have arrived.
// parked_create: wall time until all have started; parked_rss: RSS growth
// per goroutine while all are parked (/proc/self/statm).
GOROBENCH_WORKLOAD(parked,
                   "1M goroutines parked on a wait_group; RSS/goroutine and "
                   "creation time",
                   "parked_rss parked_create") {
  constexpr int n = 1'000'000;
  goro::wait_group release, arrived, finished;
  release.add(1);
  arrived.add(n);
  finished.add(n);
  const std::uint64_t rss0 = gorobench::rss_bytes();
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    goro::go([&] {
      arrived.done();
      release.wait();
      finished.done();
    });
  }
  arrived.wait();
  const double create_ns = ns_since(t0);
  const std::uint64_t rss1 = gorobench::rss_bytes();
  const std::int64_t live = goro::num_goroutine();
  release.done();
  finished.wait();
  gorobench::note("num_goroutine while parked: " + std::to_string(live) +
                  ", rss before " + std::to_string(rss0 >> 20) +
                  " MiB, parked " + std::to_string(rss1 >> 20) + " MiB");
  gorobench::result("parked_rss",
                    (static_cast<double>(rss1) - static_cast<double>(rss0)) / n,
                    "bytes/goroutine");
  gorobench::result("parked_create", create_ns / 1e6, "ms");
}

// The seed's work-stealing demo with a fixed amount of work, so that times
// at different GOMAXPROCS are comparable: 2 batches of 100 and 150 CPU-bound
// goroutines (100 + b*50), each batch spawned by its own goroutine, each
// goroutine running the opaque leaf for `iters` iterations (~1.5 ms).
GOROBENCH_WORKLOAD(uneven_work,
                   "2 uneven batches (100, 150) of CPU-bound goroutines; ms",
                   "") {
  constexpr int batches = 2;
  constexpr std::uint64_t iters = 1u << 20;
  int total = 0;
  for (int b = 0; b < batches; ++b) total += 100 + b * 50;
  goro::wait_group wg;
  std::atomic<std::uint64_t> sum{0};
  auto t0 = clock::now();
  wg.add(total);
  for (int b = 0; b < batches; ++b) {
    goro::go([&wg, &sum, b] {
      const int count = 100 + b * 50;
      for (int j = 0; j < count; ++j) {
        const std::uint64_t seed = static_cast<std::uint64_t>(b * 1000 + j);
        goro::go([&wg, &sum, seed] {
          sum.fetch_add(gorobench::leaf_work(iters, seed),
                        std::memory_order_relaxed);
          wg.done();
        });
      }
    });
  }
  wg.wait();
  const double ms = ns_since(t0) / 1e6;
  gorobench::check("uneven_work", sum.load());
  gorobench::result("uneven_work", ms, "ms");
}

// Go's test/chan/goroutines.go: 100k goroutines in a chain, each receiving
// from its left channel and sending the value plus one to its right one
// (unbuffered). chain_create: spawning all of them (each parks on its
// receive); chain_drain: one value passed down all of them.
GOROBENCH_WORKLOAD(chain,
                   "100k goroutines chained by unbuffered channels; creation "
                   "and drain, ms",
                   "chain_create chain_drain") {
  constexpr int n = 100'000;
  auto leftmost = goro::make_chan<int>();
  auto left = leftmost;
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    auto right = goro::make_chan<int>();
    goro::go([left, right] { right.send(*left.recv() + 1); });
    left = right;
  }
  const double create_ns = ns_since(t0);
  auto t1 = clock::now();
  leftmost.send(0);
  const int v = *left.recv();
  const double drain_ns = ns_since(t1);
  gorobench::check("chain", static_cast<std::uint64_t>(v));
  gorobench::result("chain_create", create_ns / 1e6, "ms");
  gorobench::result("chain_drain", drain_ns / 1e6, "ms");
}

// Go's test/chan/goroutines.go as written: 100k goroutines in a chain, each
// receiving from its right channel and sending the value to its left one
// (unbuffered); the value enters at the last-created end and leaves at the
// first, so the drain wakes the goroutines in the reverse of their creation
// order (`chain` above passes it the other way). goroutines_create: the
// spawn loop; goroutines_drain: from the send of 1 into the rightmost
// channel until main receives it from the leftmost.
GOROBENCH_WORKLOAD(goroutines,
                   "Go's test/chan/goroutines.go as written (100k, value "
                   "enters at the last-created end); creation and drain, ms",
                   "goroutines_create goroutines_drain") {
  constexpr int n = 100'000;
  auto leftmost = goro::make_chan<int>();
  auto left = leftmost;
  auto right = leftmost;
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    right = goro::make_chan<int>();
    goro::go([left, right] { left.send(*right.recv()); });
    left = right;
  }
  const double create_ns = ns_since(t0);
  auto t1 = clock::now();
  goro::go([right] { right.send(1); });
  const int v = *leftmost.recv();
  const double drain_ns = ns_since(t1);
  gorobench::check("goroutines", static_cast<std::uint64_t>(v));
  gorobench::result("goroutines_create", create_ns / 1e6, "ms");
  gorobench::result("goroutines_drain", drain_ns / 1e6, "ms");
}

namespace {

// n goroutines that count themselves in `arrived`, park on `gate` until it
// is closed, then count themselves in `released` and `finished`; the
// constructor returns once all of them have arrived (mass_release,
// idle_release).
struct parked_crowd {
  goro::chan<void> gate = goro::make_chan<void>();
  goro::wait_group arrived, finished;
  std::atomic<std::uint64_t> released{0};
  explicit parked_crowd(int n) {
    arrived.add(n);
    finished.add(n);
    for (int i = 0; i < n; ++i) {
      goro::go([this] {
        arrived.done();
        gate.recv();
        released.fetch_add(1, std::memory_order_relaxed);
        finished.done();
      });
    }
    arrived.wait();
  }
  // Closes the gate and waits until every goroutine has finished: ns.
  double release() {
    auto t = clock::now();
    gate.close();
    finished.wait();
    return ns_since(t);
  }
};

// RSS (statm) and page tables (VmPTE) at one moment.
struct memory_mark {
  std::uint64_t rss = gorobench::rss_bytes();
  std::uint64_t pte = gorobench::page_table_bytes();
  // RSS + page tables grown since `before`, per goroutine; a note splits
  // the two.
  double per_goroutine_since(const memory_mark& before, int n,
                             const char* metric) const {
    const double rss_per_g =
        (static_cast<double>(rss) - static_cast<double>(before.rss)) / n;
    const double pte_per_g =
        (static_cast<double>(pte) - static_cast<double>(before.pte)) / n;
    char buf[200];
    std::snprintf(buf, sizeof buf,
                  "%s: rss %.0f + page tables %.0f bytes/goroutine; rss "
                  "before %llu MiB, then %llu MiB; page tables then %llu MiB",
                  metric, rss_per_g, pte_per_g,
                  static_cast<unsigned long long>(before.rss >> 20),
                  static_cast<unsigned long long>(rss >> 20),
                  static_cast<unsigned long long>(pte >> 20));
    gorobench::note(buf);
    return rss_per_g + pte_per_g;
  }
};

}  // namespace

// 1M goroutines parked at once on one channel, released by close.
// mass_create: until all of them have started (each counts itself just
// before its receive); mass_release: from close until all have finished.
// mass_rss_per_g: growth of RSS (statm) plus page tables (VmPTE) from before
// the first spawn to when all are parked, per goroutine: the issue's "RSS +
// page tables per goroutine" (a note splits the two). CHECK: goroutines whose
// receive returned (each counts itself after it).
GOROBENCH_WORKLOAD(mass_release,
                   "1M goroutines parked on one channel, released by close; "
                   "ms, bytes/goroutine",
                   "mass_create mass_rss_per_g") {
  constexpr int n = 1'000'000;
  const memory_mark before;
  auto t0 = clock::now();
  parked_crowd crowd(n);
  const double create_ns = ns_since(t0);
  const memory_mark parked;
  const double release_ns = crowd.release();
  const double per_g = parked.per_goroutine_since(before, n, "mass_rss_per_g");
  gorobench::check("mass_release", crowd.released.load());
  gorobench::result("mass_create", create_ns / 1e6, "ms");
  gorobench::result("mass_release", release_ns / 1e6, "ms");
  gorobench::result("mass_rss_per_g", per_g, "bytes/goroutine");
}

// 1M goroutines parked on one channel for longer than the idle threshold
// (issue 28): goro releases their stacks' memory (GORO_DEBUG=stackrelease,
// set to 1000 ms for this workload in workloads.txt), Go is given a GC and
// FreeOSMemory, which shrink its parked stacks. idle_rss_per_g: RSS + page
// tables per goroutine, grown from before the first spawn to when the
// memory has settled; idle_wake: from close until all have finished (goro
// restores every stack on the way). CHECK: goroutines released.
GOROBENCH_WORKLOAD(idle_release,
                   "1M goroutines parked past the idle threshold on one "
                   "channel; bytes/goroutine, then released by close, ms",
                   "idle_rss_per_g idle_wake") {
  constexpr int n = 1'000'000;
  const memory_mark before;
  parked_crowd crowd(n);
  // Wait (bounded) until releasing has stopped: two scans in a row that
  // release nothing more after the first release.
  auto t_idle = clock::now();
  std::uint64_t last = 0;
  int still = 0;
  while (ns_since(t_idle) < 60e9) {
    goro::sleep(std::chrono::milliseconds(1100));
    std::uint64_t now = goro::debug::read_mem_stats().stacks_released;
    if (now != 0 && now == last && ++still >= 2) break;
    if (now != last) still = 0;
    last = now;
  }
  gorobench::note("idle_release: " + std::to_string(last) +
                  " stacks released; waited " +
                  std::to_string(ns_since(t_idle) / 1e9) + " s");
  const memory_mark settled;
  const double wake_ns = crowd.release();
  const double per_g = settled.per_goroutine_since(before, n, "idle_rss_per_g");
  gorobench::check("idle_release", crowd.released.load());
  gorobench::result("idle_rss_per_g", per_g, "bytes/goroutine");
  gorobench::result("idle_wake", wake_ns / 1e6, "ms");
}
