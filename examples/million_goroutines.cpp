// million_goroutines.cpp: "goroutines are cheap" and "blocking is OK" (the
// seed's createManyGoroutines and blockingIsOk).
//
//   million_goroutines [n] [sleepers] [sleep_ms]
//
// Part 1 starts n goroutines (default a million) that each sleep 1 ms, as
// the seed does, and waits for them: how long it takes, how many were
// alive at once, how many stacks the runtime reserved and how many OS
// threads the process has. A goroutine holds no stack until it first
// runs, and a finished goroutine's stack is reused by the next one, so the
// stacks follow the goroutines alive at once, not the total.
//
// Part 2 parks `sleepers` goroutines (default 1000) in a sleep of
// `sleep_ms` (default 1000) at the same time: every one of them is
// waiting, yet the process keeps a handful of OS threads, because a
// parked goroutine is a record in a timer heap, not a blocked thread.
//
// Exits 1 if a goroutine did not run, or if part 2 needed a thread per
// sleeper.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0)
      .count();
}

// The "Threads:" line of /proc/self/status.
int os_threads() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "Threads:", 8) == 0) n = std::atoi(line + 8);
  std::fclose(f);
  return n;
}

void peak_max(std::atomic<std::int64_t>& peak, std::int64_t v) {
  for (std::int64_t cur = peak.load(std::memory_order_relaxed); v > cur;)
    if (peak.compare_exchange_weak(cur, v, std::memory_order_relaxed)) break;
}

}  // namespace

int main(int argc, char** argv) {
  const long n = argc > 1 ? std::atol(argv[1]) : 1'000'000;
  const long sleepers = argc > 2 ? std::atol(argv[2]) : 1000;
  const long sleep_ms = argc > 3 ? std::atol(argv[3]) : 1000;
  if (n < 1 || sleepers < 1 || sleep_ms < 1) {
    std::fprintf(stderr,
                 "usage: million_goroutines [n >= 1] [sleepers >= 1] "
                 "[sleep_ms >= 1]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    int rc = 0;
    std::printf(
        "gomaxprocs %d, stack reservation per running goroutine: "
        "see GORO_STACK_SIZE (64 KiB by default)\n",
        goro::gomaxprocs());

    std::printf("\n=== Part 1: %ld goroutines, each sleeps 1 ms ===\n", n);
    {
      std::atomic<long> ran{0};
      std::atomic<std::int64_t> peak{0};
      goro::wait_group wg;
      const auto t0 = clock_type::now();
      wg.add(n);
      for (long i = 0; i < n; i++) {
        goro::go([&] {
          // Even with a million goroutines, the scheduler can handle it.
          goro::sleep(std::chrono::milliseconds(1));
          if ((ran.fetch_add(1, std::memory_order_relaxed) & 1023) == 0)
            peak_max(peak, goro::num_goroutine());
          wg.done();
        });
      }
      const double spawn_ms = ms_since(t0);
      const auto mem = goro::debug::read_mem_stats();
      const int threads = os_threads();
      wg.wait();
      std::printf(
          "started %ld goroutines in %.1f ms (%.0f ns each), all done in "
          "%.1f ms\n",
          n, spawn_ms, spawn_ms * 1e6 / double(n), ms_since(t0));
      std::printf(
          "up to ~%lld goroutines alive at once; when the last was started: "
          "%llu stacks reserved (%.1f MiB of address space), %llu G records, "
          "%d OS threads\n",
          (long long)peak.load(), (unsigned long long)mem.stacks,
          double(mem.stack_sys) / (1 << 20), (unsigned long long)mem.gs,
          threads);
      if (ran.load() != n) {
        std::printf("FAIL: %ld of %ld goroutines ran\n", ran.load(), n);
        rc = 1;
      }
    }

    std::printf("\n=== Part 2: %ld goroutines asleep for %ld ms at once ===\n",
                sleepers, sleep_ms);
    {
      goro::wait_group asleep, wg;
      const auto t0 = clock_type::now();
      asleep.add(sleepers);
      wg.add(sleepers);
      for (long i = 0; i < sleepers; i++) {
        goro::go([&] {
          asleep.done();
          // Blocking on a timer (or a channel, or I/O) parks the goroutine:
          // its thread runs other goroutines meanwhile.
          goro::sleep(std::chrono::milliseconds(sleep_ms));
          wg.done();
        });
      }
      asleep.wait();
      const std::int64_t alive = goro::num_goroutine();
      const int threads = os_threads();
      wg.wait();
      std::printf(
          "%lld goroutines alive while they slept, on %d OS threads; all "
          "woke after %.1f ms\n",
          (long long)alive, threads, ms_since(t0));
      if (threads < 0 || threads >= sleepers) {
        std::printf("FAIL: %d OS threads for %ld sleepers\n", threads,
                    sleepers);
        rc = 1;
      }
    }
    if (rc == 0) std::printf("million_goroutines: ok\n");
    return rc;
  });
}
