// time_bench.cpp: wake-ups, timers and blocking syscalls.
// Twins: bench/go/time.go.
//
// wakeup_spinning_<d>us and wakeup_syscall_<d>us are standalone ports of
// BenchmarkWakeupParallelSpinning and BenchmarkWakeupParallelSyscall in Go
// 1.19's src/runtime/proc_test.go: two goroutines alternate as sender and
// receiver on unbuffered channels; before each receive a goroutine spends
// `d`, before each send `d` + 5 us, either busy-spinning or in a blocking
// nanosleep (goro::blocking here, a raw syscall in Go). A fixed round count
// replaces b.N; ns/op is wall time per round (two hand-offs). On one core
// the four delays of a round add up (~4d per op); run in parallel they
// overlap (~2d), so the slope against d shows whether the woken goroutine
// ran on the other P.
//
// sleepers_lateness: 100,000 goroutines each sleep a pseudo-random 1-10 ms
// (the same splitmix64 sequence in both twins) and record how late they
// woke; p50 and p99 of the lateness.
//
// timer_create_stop: create a 1 h timer and stop it, 1M times.
//
// syscall_compute: GOMAXPROCS compute goroutines count chunks of opaque CPU
// work, alone and then next to GOMAXPROCS x 4 goroutines looping in
// blocking 1 ms sleeps (usleep in goro::blocking; a raw nanosleep syscall in
// Go). Reports the kept fraction: compute rate with blockers / without.
// Higher is better; its target is a ratio_min.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <goro/chan.hpp>
#include <goro/runtime.hpp>
#include <goro/time.hpp>
#include <goro/wait_group.hpp>
#include <memory>
#include <vector>

#include "bench.hpp"

namespace {

using gorobench::clock;
using gorobench::ns_since;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

// ---------------------------------------------------------------------------
// WakeupParallel

constexpr nanoseconds kWakeDelay = microseconds(5);

// Go's sysNanosleep from runtime_linux_test.go: a blocking nanosleep,
// restarted with the remainder after a signal.
void sys_nanosleep(nanoseconds d) {
  timespec ts{static_cast<time_t>(d.count() / 1'000'000'000),
              static_cast<long>(d.count() % 1'000'000'000)};
  goro::blocking([&] {
    while (::nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
  });
}

template <class Delay>
void wakeup_parallel(const char* name, nanoseconds delay, int rounds,
                     Delay spend) {
  auto ping = goro::make_chan<void>();
  auto pong = goro::make_chan<void>();
  auto start = goro::make_chan<void>();
  auto done = goro::make_chan<void>();
  std::atomic<std::uint64_t> ops{0};
  goro::go([=, &ops] {
    start.recv();
    for (int i = 0; i < rounds; ++i) {
      spend(delay + kWakeDelay);  // sender
      ping.send();
      spend(delay);  // receiver
      pong.recv();
      ops.fetch_add(1, std::memory_order_relaxed);
    }
    done.send();
  });
  goro::go([=, &ops] {
    for (int i = 0; i < rounds; ++i) {
      spend(delay);  // receiver
      ping.recv();
      spend(delay + kWakeDelay);  // sender
      pong.send();
      ops.fetch_add(1, std::memory_order_relaxed);
    }
    done.send();
  });
  auto t0 = clock::now();
  start.send();
  done.recv();
  done.recv();
  const double ns = ns_since(t0) / rounds;
  gorobench::check(name, ops.load());
  gorobench::result(name, ns, "ns/op");
}

void spinning_wakeup(const char* name, int delay_us, int rounds) {
  wakeup_parallel(name, microseconds(delay_us), rounds,
                  [](nanoseconds d) { gorobench::spin_for(d); });
}

void syscall_wakeup(const char* name, int delay_us, int rounds) {
  wakeup_parallel(name, microseconds(delay_us), rounds, sys_nanosleep);
}

}  // namespace

// Rounds: ~0.3-0.7 s of Go at 2 Ps (13.5 us/op at 0 us ... 440 us/op at
// 100 us spinning; nanosleep's ~50 us timer slack dominates the syscalls).
GOROBENCH_WORKLOAD(wakeup_spinning_0us,
                   "Go's WakeupParallelSpinning/0s: 2 goroutines alternate "
                   "send/recv on unbuffered channels, 40k rounds; ns/op",
                   "") {
  spinning_wakeup("wakeup_spinning_0us", 0, 40'000);
}
GOROBENCH_WORKLOAD(wakeup_spinning_1us,
                   "Go's WakeupParallelSpinning/1us: spin 1 us (+5 us before "
                   "each send), 30k rounds; ns/op",
                   "") {
  spinning_wakeup("wakeup_spinning_1us", 1, 30'000);
}
GOROBENCH_WORKLOAD(wakeup_spinning_5us,
                   "Go's WakeupParallelSpinning/5us: spin 5 us (+5 us before "
                   "each send), 20k rounds; ns/op",
                   "") {
  spinning_wakeup("wakeup_spinning_5us", 5, 20'000);
}
GOROBENCH_WORKLOAD(wakeup_spinning_20us,
                   "Go's WakeupParallelSpinning/20us: spin 20 us (+5 us before "
                   "each send), 8k rounds; ns/op",
                   "") {
  spinning_wakeup("wakeup_spinning_20us", 20, 8'000);
}
GOROBENCH_WORKLOAD(wakeup_spinning_100us,
                   "Go's WakeupParallelSpinning/100us: spin 100 us (+5 us "
                   "before each send), 1500 rounds; ns/op",
                   "") {
  spinning_wakeup("wakeup_spinning_100us", 100, 1'500);
}
GOROBENCH_WORKLOAD(wakeup_syscall_0us,
                   "Go's WakeupParallelSyscall/0s: as wakeup_spinning with "
                   "blocking nanosleeps, 2000 rounds; ns/op",
                   "") {
  syscall_wakeup("wakeup_syscall_0us", 0, 2'000);
}
GOROBENCH_WORKLOAD(wakeup_syscall_1us,
                   "Go's WakeupParallelSyscall/1us: nanosleep 1 us (+5 us "
                   "before each send), 2000 rounds; ns/op",
                   "") {
  syscall_wakeup("wakeup_syscall_1us", 1, 2'000);
}
GOROBENCH_WORKLOAD(wakeup_syscall_5us,
                   "Go's WakeupParallelSyscall/5us: nanosleep 5 us (+5 us "
                   "before each send), 2000 rounds; ns/op",
                   "") {
  syscall_wakeup("wakeup_syscall_5us", 5, 2'000);
}
GOROBENCH_WORKLOAD(wakeup_syscall_20us,
                   "Go's WakeupParallelSyscall/20us: nanosleep 20 us (+5 us "
                   "before each send), 2000 rounds; ns/op",
                   "") {
  syscall_wakeup("wakeup_syscall_20us", 20, 2'000);
}
GOROBENCH_WORKLOAD(wakeup_syscall_100us,
                   "Go's WakeupParallelSyscall/100us: nanosleep 100 us (+5 us "
                   "before each send), 1500 rounds; ns/op",
                   "") {
  syscall_wakeup("wakeup_syscall_100us", 100, 1'500);
}

// ---------------------------------------------------------------------------
// sleepers_lateness

namespace {

// splitmix64, as splitmix64 in bench/go/time.go.
std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

}  // namespace

// 100,000 goroutines, spawned by main one after another; each reads the
// clock, sleeps its own pseudo-random duration (uniform 1000..10000 us,
// whole microseconds) and records actual - requested. The lateness includes
// waiting for a P after the timer fired, as a woken Go goroutine does.
GOROBENCH_WORKLOAD(sleepers_lateness,
                   "100k goroutines each sleeping a random 1-10 ms; p50 and "
                   "p99 wake-up lateness in us",
                   "sleep_late_p50_us sleep_late_p99_us") {
  constexpr int n = 100'000;
  std::vector<std::int64_t> delay_ns(n), late_ns(n);
  std::uint64_t seed = 42;
  for (auto& d : delay_ns)
    d = static_cast<std::int64_t>(1000 + splitmix64(seed) % 9001) * 1000;
  goro::wait_group wg;
  wg.add(n);
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    goro::go([&, i] {
      const nanoseconds d(delay_ns[static_cast<std::size_t>(i)]);
      auto s = clock::now();
      goro::sleep(d);
      late_ns[static_cast<std::size_t>(i)] = (clock::now() - s - d).count();
      wg.done();
    });
  }
  wg.wait();
  const double total_ms = ns_since(t0) / 1e6;
  std::uint64_t on_time = 0;  // none woke early
  for (auto l : late_ns) on_time += l >= 0;
  std::sort(late_ns.begin(), late_ns.end());
  auto pct = [&](int p) {
    return static_cast<double>(late_ns[static_cast<std::size_t>(n) * p / 100]) /
           1e3;
  };
  char buf[160];
  std::snprintf(buf, sizeof buf,
                "%d sleepers in %.1f ms; lateness max %.0f us, p90 %.0f us", n,
                total_ms, static_cast<double>(late_ns.back()) / 1e3, pct(90));
  gorobench::note(buf);
  gorobench::check("sleepers_lateness", on_time);
  gorobench::result("sleep_late_p50_us", pct(50), "us");
  gorobench::result("sleep_late_p99_us", pct(99), "us");
}

// ---------------------------------------------------------------------------
// timer_create_stop

// Go's `t := time.NewTimer(time.Hour); t.Stop()`, 1M times on one goroutine.
GOROBENCH_WORKLOAD(timer_create_stop,
                   "create a 1 h timer and stop it, 1M times; ns/op", "") {
  constexpr int n = 1'000'000;
  std::uint64_t stopped = 0;
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    goro::timer t(std::chrono::hours(1));
    stopped += t.stop();
  }
  const double ns = ns_since(t0) / n;
  gorobench::check("timer_create_stop", stopped);
  gorobench::result("timer_create_stop", ns, "ns/op");
}

// ---------------------------------------------------------------------------
// syscall_compute

namespace {

constexpr std::uint64_t kComputeChunk = 20'000;  // leaf_work iterations

struct alignas(64) counter {
  std::atomic<std::uint64_t> n{0};
};

struct phase_result {
  double chunks_per_s;
  std::uint64_t blocking_calls;
};

// Runs `procs` compute goroutines (and procs * 4 blockers if asked) for d.
phase_result compute_phase(int procs, bool blockers, nanoseconds d) {
  std::atomic<bool> stop{false};
  const int nblock = blockers ? procs * 4 : 0;
  auto counts = std::make_unique<counter[]>(static_cast<std::size_t>(procs));
  std::atomic<std::uint64_t> calls{0};
  std::atomic<std::uint64_t> sink{0};
  goro::wait_group wg;
  wg.add(procs + nblock);
  for (int b = 0; b < nblock; ++b) {
    goro::go([&] {
      std::uint64_t c = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        goro::blocking([] { ::usleep(1000); });
        ++c;
      }
      calls.fetch_add(c);
      wg.done();
    });
  }
  auto t0 = clock::now();
  for (int p = 0; p < procs; ++p) {
    goro::go([&, p] {
      std::uint64_t x = static_cast<std::uint64_t>(p), k = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        x = gorobench::leaf_work(kComputeChunk, x);
        counts[static_cast<std::size_t>(p)].n.store(++k,
                                                    std::memory_order_relaxed);
        goro::preempt_point();
      }
      sink.fetch_add(x);
      wg.done();
    });
  }
  goro::sleep(d);
  std::uint64_t total = 0;
  for (int p = 0; p < procs; ++p)
    total += counts[static_cast<std::size_t>(p)].n.load();
  const double secs = ns_since(t0) / 1e9;
  stop.store(true);
  wg.wait();
  return {static_cast<double>(total) / secs, calls.load()};
}

}  // namespace

GOROBENCH_WORKLOAD(syscall_compute,
                   "P compute goroutines next to 4P goroutines in blocking "
                   "1 ms sleeps; compute rate kept vs without blockers "
                   "(fraction, higher is better)",
                   "syscall_kept") {
  const int procs = goro::gomaxprocs();
  // Alone, with blockers, alone again: the baseline is the mean of the two
  // runs around the measured one, so a drift of the machine cancels.
  const auto a = compute_phase(procs, false, std::chrono::milliseconds(400));
  const auto b = compute_phase(procs, true, std::chrono::milliseconds(800));
  const auto c = compute_phase(procs, false, std::chrono::milliseconds(400));
  const double base = (a.chunks_per_s + c.chunks_per_s) / 2;
  char buf[200];
  std::snprintf(buf, sizeof buf,
                "compute chunks/s: %.0f alone, %.0f with %d blockers, %.0f "
                "alone; %llu blocking calls in 0.8 s (ideal %d)",
                a.chunks_per_s, b.chunks_per_s, procs * 4, c.chunks_per_s,
                static_cast<unsigned long long>(b.blocking_calls),
                procs * 4 * 800);
  gorobench::note(buf);
  gorobench::result("syscall_kept", b.chunks_per_s / base, "fraction");
}
