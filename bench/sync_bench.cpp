// sync_bench.cpp: sync workloads (goro::mutex under contention).
// Twins: bench/go/sync.go.
#include <cstdint>
#include <goro/runtime.hpp>
#include <goro/sync.hpp>
#include <goro/wait_group.hpp>

#include "bench.hpp"

namespace {
using gorobench::clock;
using gorobench::ns_since;
}  // namespace

// 8 goroutines increment one counter under one mutex, 1M increments in all
// (Go's BenchmarkMutex without RunParallel: every P contends for the lock
// while there are Ps to run the goroutines on).
GOROBENCH_WORKLOAD(mutex_8,
                   "8 goroutines incrementing a shared counter under a mutex, "
                   "1M increments; ns/increment",
                   "") {
  constexpr int goroutines = 8;
  constexpr std::int64_t total = 1'000'000;
  constexpr std::int64_t per = total / goroutines;
  goro::mutex mu;
  std::int64_t counter = 0;
  goro::wait_group wg;
  auto t0 = clock::now();
  wg.add(goroutines);
  for (int i = 0; i < goroutines; ++i) {
    goro::go([&] {
      for (std::int64_t j = 0; j < per; ++j) {
        mu.lock();
        ++counter;
        mu.unlock();
      }
      wg.done();
    });
  }
  wg.wait();
  const double ns = ns_since(t0) / static_cast<double>(total);
  gorobench::check("mutex_8", static_cast<std::uint64_t>(counter));
  gorobench::result("mutex_8", ns, "ns/increment");
}
