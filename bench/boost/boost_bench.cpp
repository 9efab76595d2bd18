// boost_bench.cpp: Boost.Fiber twins of some goro workloads, for a third
// column in bench/run.sh's report. Same protocol as goro_bench (bench.hpp):
//
//     boost_bench <workload>     # GOMAXPROCS from the environment = threads
//     boost_bench --list
//
// Scheduler: with GOMAXPROCS >= 2, Boost.Fiber's work_stealing algorithm on
// GOMAXPROCS threads (the main thread and GOMAXPROCS - 1 workers), Boost's
// closest analogue of Go's per-P run queues with stealing, constructed with
// suspend = true: an idle thread sleeps on a condition variable until a
// fiber is made ready for it, instead of polling the other queues (the
// default, suspend = false, keeps every thread at 100% CPU; on this shared
// 2-vCPU machine that made pingpong at 2 threads 25x slower, 12.7 us per
// round trip against 0.54 us). Consequence: a sleeping thread does not
// steal, so fibers spawned by one thread mostly stay there.
// BOOST_FIBER_SUSPEND=0 selects the polling variant. With GOMAXPROCS 1, the
// default round_robin algorithm on the main thread (work_stealing picks a
// victim other than itself and cannot run with one thread).
//
// Stacks: boost::fibers::fixedsize_stack of 8 KiB (malloc'd, no guard
// page), the size of Boost's own skynet example (performance/fiber). Only
// the pages a fiber touches become resident: about 7 KiB per live fiber
// (spawn_single at 1 thread: 7 GB peak for 1M fibers; 16 KiB stacks: 9 GB).
// Channels and the wait group are reached through shared_ptr or leaked,
// because a Boost.Fiber object may still be inside unlock/push on another
// thread when the waiting side returns (goro and Go keep them alive by
// reference counting and GC respectively).
//
// Workloads (same work, metric names and checksums as bench/*.cpp): the
// ones where Boost.Fiber has a direct counterpart: spawn_single,
// spawn_chain, gosched, skynet, chain, pingpong, chan_sync, mutex_8.
#include <algorithm>
#include <atomic>
#include <boost/fiber/all.hpp>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "../bench.hpp"

namespace bf = boost::fibers;

namespace {

using gorobench::clock;
using gorobench::ns_since;

constexpr std::size_t kStackSize = 8 * 1024;  // see the header comment

int g_threads = 1;      // GOMAXPROCS: threads running fibers
bool g_suspend = true;  // work_stealing: idle threads sleep, not poll

// Starts a detached fiber, the equivalent of `go f()`.
template <class F>
void go(F&& f) {
  bf::fiber(std::allocator_arg, bf::fixedsize_stack(kStackSize),
            std::forward<F>(f))
      .detach();
}

// sync.WaitGroup on Boost.Fiber primitives. done() notifies under the
// mutex, so a waiter that saw a non-zero count is always woken.
class wait_group {
 public:
  void add(long d) { n_.fetch_add(d, std::memory_order_relaxed); }
  void done() {
    if (n_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::unique_lock<bf::mutex> lk(mu_);
      cv_.notify_all();
    }
  }
  void wait() {
    std::unique_lock<bf::mutex> lk(mu_);
    cv_.wait(lk, [this] { return n_.load(std::memory_order_acquire) == 0; });
  }

 private:
  std::atomic<long> n_{0};
  bf::mutex mu_;
  bf::condition_variable cv_;
};

// A wait group that outlives every fiber that may still be inside done():
// leaked on purpose (one per process; see the header comment).
wait_group& new_wait_group() { return *new wait_group; }

using ichan = bf::unbuffered_channel<std::int64_t>;

// Go's warmupScheduler: n fibers spin (yielding) until all have started,
// then spin 1 ms more, so every thread has run a fiber.
void warmup_scheduler(int n) {
  wait_group& wg = new_wait_group();
  auto* count = new std::atomic<int>{0};
  wg.add(n);
  for (int i = 0; i < n; ++i)
    go([&wg, count, n] {
      count->fetch_add(1);
      while (count->load() < n) boost::this_fiber::yield();
      gorobench::spin_for(std::chrono::milliseconds(1));
      wg.done();
    });
  wg.wait();
}

void spawn_chain_link(int n, wait_group* wg) {
  if (n == 0) {
    wg->done();
    return;
  }
  go([n, wg] { spawn_chain_link(n - 1, wg); });
}

void skynet_node(std::shared_ptr<ichan> c, std::int64_t num, std::int64_t size,
                 std::int64_t div) {
  if (size == 1) {
    c->push(num);
    return;
  }
  auto rc = std::make_shared<ichan>();
  for (std::int64_t i = 0; i < div; ++i) {
    const std::int64_t sub = num + i * (size / div);
    go([rc, sub, size, div] { skynet_node(rc, sub, size / div, div); });
  }
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < div; ++i) sum += rc->value_pop();
  c->push(sum);
}

std::uint64_t peak_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      std::sscanf(line + 6, "%llu", &kb);
      break;
    }
  std::fclose(f);
  return kb * 1024;
}

}  // namespace

namespace gorobench {

// Busy-waits for `d`, yielding to other fibers in between.
void spin_for(std::chrono::nanoseconds d) {
  auto t0 = clock::now();
  while (clock::now() - t0 < d) boost::this_fiber::yield();
}

}  // namespace gorobench

GOROBENCH_WORKLOAD(spawn_single,
                   "1 spawner, 1M fibers each calling wg.done; ns/goroutine",
                   "") {
  constexpr int n = 1'000'000;
  warmup_scheduler(g_threads);
  wait_group& wg = new_wait_group();
  auto t0 = clock::now();
  wg.add(n);
  for (int i = 0; i < n; ++i) go([&wg] { wg.done(); });
  wg.wait();
  gorobench::result("spawn_single", ns_since(t0) / n, "ns/goroutine");
}

GOROBENCH_WORKLOAD(spawn_chain,
                   "chain of 1M fibers, each spawning the next; ns/goroutine",
                   "") {
  constexpr int n = 1'000'000;
  wait_group& wg = new_wait_group();
  auto t0 = clock::now();
  wg.add(1);
  go([&wg] { spawn_chain_link(n - 1, &wg); });
  wg.wait();
  gorobench::result("spawn_chain", ns_since(t0) / n, "ns/goroutine");
}

GOROBENCH_WORKLOAD(gosched, "2 fibers per thread yielding, 2M yields; ns/yield",
                   "") {
  constexpr std::int64_t total = 2'000'000;
  const int g = 2 * g_threads;
  const std::int64_t per = total / g;
  wait_group& wg = new_wait_group();
  auto t0 = clock::now();
  wg.add(g);
  for (int i = 0; i < g; ++i)
    go([&wg, per] {
      for (std::int64_t j = 0; j < per; ++j) boost::this_fiber::yield();
      wg.done();
    });
  wg.wait();
  gorobench::result("gosched", ns_since(t0) / static_cast<double>(per * g),
                    "ns/yield");
}

GOROBENCH_WORKLOAD(skynet,
                   "skynet: 1M leaves, fan-out 10, unbuffered channel per "
                   "node; wall ms and peak RSS (VmHWM)",
                   "skynet_ms skynet_rss_mb") {
  auto c = std::make_shared<ichan>();
  auto t0 = clock::now();
  go([c] {
    skynet_node(c, std::int64_t{0}, std::int64_t{1'000'000}, std::int64_t{10});
  });
  const std::int64_t sum = c->value_pop();
  const double ms = ns_since(t0) / 1e6;
  gorobench::check("skynet", static_cast<std::uint64_t>(sum));
  gorobench::result("skynet_ms", ms, "ms");
  gorobench::result("skynet_rss_mb",
                    static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0),
                    "MiB");
}

GOROBENCH_WORKLOAD(chain,
                   "100k fibers chained by unbuffered channels; creation and "
                   "drain, ms",
                   "chain_create chain_drain") {
  constexpr int n = 100'000;
  auto leftmost = std::make_shared<ichan>();
  auto left = leftmost;
  auto t0 = clock::now();
  for (int i = 0; i < n; ++i) {
    auto right = std::make_shared<ichan>();
    go([left, right] { right->push(left->value_pop() + 1); });
    left = right;
  }
  const double create_ns = ns_since(t0);
  auto t1 = clock::now();
  leftmost->push(0);
  const std::int64_t v = left->value_pop();
  const double drain_ns = ns_since(t1);
  gorobench::check("chain", static_cast<std::uint64_t>(v));
  gorobench::result("chain_create", create_ns / 1e6, "ms");
  gorobench::result("chain_drain", drain_ns / 1e6, "ms");
}

GOROBENCH_WORKLOAD(pingpong,
                   "unbuffered ping-pong between 2 fibers, 2M round trips; "
                   "ns/roundtrip",
                   "") {
  constexpr std::int64_t n = 2'000'000;
  auto ping = std::make_shared<ichan>();
  auto pong = std::make_shared<ichan>();
  wait_group& wg = new_wait_group();
  wg.add(1);
  go([ping, pong, &wg] {
    std::int64_t v = 0;
    while (ping->pop(v) == bf::channel_op_status::success) pong->push(v);
    wg.done();
  });
  std::uint64_t sum = 0;
  auto t0 = clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    ping->push(i);
    sum += static_cast<std::uint64_t>(pong->value_pop());
  }
  const double ns = ns_since(t0);
  ping->close();
  wg.wait();
  gorobench::check("pingpong", sum);
  gorobench::result("pingpong", ns / n, "ns/roundtrip");
}

// Go's BenchmarkChanSync, as bench/chan_bench.cpp: 2 fibers, batches of
// 1000 receive-then-send or send-then-receive on one unbuffered channel.
GOROBENCH_WORKLOAD(chan_sync,
                   "Go's ChanSync: 2 fibers exchanging on an unbuffered "
                   "channel, 4M messages; ns/op",
                   "") {
  constexpr int calls_per_sched = 1000;
  constexpr int procs = 2;
  constexpr std::int64_t ops = 4'000'000;
  auto* batches = new std::atomic<std::int32_t>{
      static_cast<std::int32_t>(ops / calls_per_sched / procs * procs)};
  auto* received = new std::atomic<std::uint64_t>{0};
  auto myc = std::make_shared<ichan>();
  wait_group& wg = new_wait_group();
  wg.add(procs);
  auto t0 = clock::now();
  for (int p = 0; p < procs; ++p)
    go([batches, received, myc, &wg] {
      std::uint64_t got = 0;
      std::int64_t v = 0;
      for (;;) {
        const std::int32_t i = batches->fetch_sub(1) - 1;
        if (i < 0) break;
        for (int g = 0; g < calls_per_sched; ++g) {
          if (i % 2 == 0) {
            got += myc->pop(v) == bf::channel_op_status::success;
            myc->push(0);
          } else {
            myc->push(0);
            got += myc->pop(v) == bf::channel_op_status::success;
          }
        }
      }
      received->fetch_add(got);
      wg.done();
    });
  wg.wait();
  const double ns = ns_since(t0);
  gorobench::check("chan_sync", received->load());
  gorobench::result("chan_sync", ns / static_cast<double>(ops), "ns/op");
}

GOROBENCH_WORKLOAD(mutex_8,
                   "8 fibers incrementing a shared counter under a "
                   "boost::fibers::mutex, 1M increments; ns/increment",
                   "") {
  constexpr int fibers = 8;
  constexpr std::int64_t total = 1'000'000;
  constexpr std::int64_t per = total / fibers;
  auto* mu = new bf::mutex;
  auto* counter = new std::int64_t{0};
  wait_group& wg = new_wait_group();
  auto t0 = clock::now();
  wg.add(fibers);
  for (int i = 0; i < fibers; ++i)
    go([mu, counter, &wg] {
      for (std::int64_t j = 0; j < per; ++j) {
        mu->lock();
        ++*counter;
        mu->unlock();
      }
      wg.done();
    });
  wg.wait();
  const double ns = ns_since(t0) / static_cast<double>(total);
  gorobench::check("mutex_8", static_cast<std::uint64_t>(*counter));
  gorobench::result("mutex_8", ns, "ns/increment");
}

int main(int argc, char** argv) {
  int exit_code = 0;
  const gorobench::workload* wl =
      gorobench::parse_command_line(argc, argv, &exit_code);
  if (wl == nullptr) return exit_code;
  g_threads = gorobench::env_gomaxprocs();
  if (g_threads == 0)
    g_threads =
        static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const char* algo = g_threads > 1 ? "work_stealing" : "round_robin";
  if (g_threads > 1) {
    // work_stealing's constructor waits until all g_threads threads have
    // installed it; the workers then park their main fiber on a condition
    // variable and run (and steal) fibers until the process exits.
    const char* sus = std::getenv("BOOST_FIBER_SUSPEND");
    g_suspend = sus == nullptr || std::strcmp(sus, "0") != 0;
    auto* park_mu = new bf::mutex;
    auto* park_cv = new bf::condition_variable;
    for (int i = 1; i < g_threads; ++i)
      std::thread([park_mu, park_cv] {
        bf::use_scheduling_algorithm<bf::algo::work_stealing>(g_threads,
                                                              g_suspend);
        std::unique_lock<bf::mutex> lk(*park_mu);
        park_cv->wait(lk, [] { return false; });
      }).detach();
    bf::use_scheduling_algorithm<bf::algo::work_stealing>(g_threads, g_suspend);
  }
  std::printf(
      "# runtime=boost workload=%s gomaxprocs=%d scheduler=%s "
      "suspend=%d stack=%zu boost=%d\n",
      wl->name, g_threads, algo, g_threads > 1 && g_suspend ? 1 : 0, kStackSize,
      BOOST_VERSION);
  std::fflush(stdout);
  wl->fn();
  gorobench::report_memory(wl->name);
  // Leave without tearing down the schedulers: the workers are parked
  // forever and detached fibers may still be finishing; like a Go program,
  // the process simply ends once the workload has reported.
  std::fflush(stdout);
  std::_Exit(0);
}
