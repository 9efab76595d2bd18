// chan_bench.cpp: channel and select workloads. Twins: bench/go/chan.go.
//
// skynet (atemerev/skynet), an unbuffered ping-pong, and standalone ports of
// the channel benchmarks in Go 1.19's src/runtime/chan_test.go (ChanSync,
// ChanProdCons0/10/100, SelectUncontended, SelectSyncContended,
// SelectProdCons, ChanPopular). testing.B is replaced by a fixed iteration
// count per workload (sized for ~0.5-1 s of Go at 2 Ps), so ns/op here is
// wall time / that count, as b.N ops would give. RunParallel bodies run as
// GOMAXPROCS goroutines sharing the count evenly.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <goro/chan.hpp>
#include <goro/runtime.hpp>
#include <goro/select.hpp>
#include <goro/wait_group.hpp>
#include <optional>
#include <vector>

#include "bench.hpp"

namespace {

using gorobench::clock;
using gorobench::ns_since;

// Peak resident set size (VmHWM in /proc/self/status), in bytes.
std::uint64_t peak_rss_bytes() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return 0;
  char line[256];
  unsigned long long kb = 0;
  while (std::fgets(line, sizeof line, f) != nullptr) {
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      std::sscanf(line + 6, "%llu", &kb);
      break;
    }
  }
  std::fclose(f);
  return kb * 1024;
}

// The local work of Go's benchmarks (`foo *= 2; foo /= 2`, `work` times).
// The barrier keeps the compiler from folding the loop away, as Go's
// compiler never does; one multiply and one signed halving per iteration.
inline std::int64_t local_work(std::int64_t foo, int work) {
  for (int i = 0; i < work; ++i) {
    foo *= 2;
    asm volatile("" : "+r"(foo));
    foo /= 2;
  }
  return foo;
}

// ---------------------------------------------------------------------------
// skynet: 1M leaves, fan-out 10, an unbuffered channel per internal node.

void skynet_node(goro::chan<std::int64_t> c, std::int64_t num,
                 std::int64_t size, std::int64_t div) {
  if (size == 1) {
    c.send(num);
    return;
  }
  auto rc = goro::make_chan<std::int64_t>();
  for (std::int64_t i = 0; i < div; ++i) {
    const std::int64_t sub = num + i * (size / div);
    goro::go(skynet_node, rc, sub, size / div, div);
  }
  std::int64_t sum = 0;
  for (std::int64_t i = 0; i < div; ++i) sum += *rc.recv();
  c.send(sum);
}

}  // namespace

// atemerev/skynet's Go program: the root spawns 10 children, each 10 more,
// down to 1M leaves (1,111,111 goroutines); leaf i sends i to its parent,
// each node sends the sum of its children up. Sum 499999500000.
GOROBENCH_WORKLOAD(skynet,
                   "skynet: 1M leaves, fan-out 10, unbuffered channel per "
                   "node; wall ms and peak RSS (VmHWM)",
                   "skynet_ms skynet_rss_mb") {
  auto c = goro::make_chan<std::int64_t>();
  auto t0 = clock::now();
  goro::go(skynet_node, c, std::int64_t{0}, std::int64_t{1'000'000},
           std::int64_t{10});
  const std::int64_t sum = *c.recv();
  const double ms = ns_since(t0) / 1e6;
  gorobench::check("skynet", static_cast<std::uint64_t>(sum));
  gorobench::result("skynet_ms", ms, "ms");
  gorobench::result("skynet_rss_mb",
                    static_cast<double>(peak_rss_bytes()) / (1024.0 * 1024.0),
                    "MiB");
}

// Two goroutines, two unbuffered channels: main sends i on ping, the echo
// goroutine sends it back on pong. 2M round trips.
GOROBENCH_WORKLOAD(pingpong,
                   "unbuffered ping-pong between 2 goroutines, 2M round "
                   "trips; ns/roundtrip",
                   "") {
  constexpr std::int64_t n = 2'000'000;
  auto ping = goro::make_chan<std::int64_t>();
  auto pong = goro::make_chan<std::int64_t>();
  goro::wait_group wg;
  wg.add(1);
  goro::go([ping, pong, &wg] {
    for (std::int64_t v : ping) pong.send(v);
    wg.done();
  });
  std::uint64_t sum = 0;
  auto t0 = clock::now();
  for (std::int64_t i = 0; i < n; ++i) {
    ping.send(i);
    sum += static_cast<std::uint64_t>(*pong.recv());
  }
  const double ns = ns_since(t0);
  ping.close();
  wg.wait();
  gorobench::check("pingpong", sum);
  gorobench::result("pingpong", ns / n, "ns/roundtrip");
}

// Go's BenchmarkChanSync: 2 goroutines (always 2, whatever GOMAXPROCS) take
// batches of 1000 from a shared counter; in an even batch a goroutine
// receives then sends, in an odd one it sends then receives, on one
// unbuffered channel. ns per message (4M messages).
GOROBENCH_WORKLOAD(chan_sync,
                   "Go's ChanSync: 2 goroutines exchanging on an unbuffered "
                   "channel, 4M messages; ns/op",
                   "") {
  constexpr int calls_per_sched = 1000;
  constexpr int procs = 2;
  constexpr std::int64_t ops = 4'000'000;
  std::atomic<std::int32_t> batches{
      static_cast<std::int32_t>(ops / calls_per_sched / procs * procs)};
  auto c = goro::make_chan<bool>(procs);
  auto myc = goro::make_chan<int>();
  std::atomic<std::uint64_t> received{0};
  auto t0 = clock::now();
  for (int p = 0; p < procs; ++p) {
    goro::go([&batches, &received, c, myc] {
      std::uint64_t got = 0;
      for (;;) {
        const std::int32_t i = batches.fetch_sub(1) - 1;
        if (i < 0) break;
        for (int g = 0; g < calls_per_sched; ++g) {
          if (i % 2 == 0) {
            got += myc.recv().has_value();
            myc.send(0);
          } else {
            myc.send(0);
            got += myc.recv().has_value();
          }
        }
      }
      received.fetch_add(got);
      c.send(true);
    });
  }
  for (int p = 0; p < procs; ++p) c.recv();
  const double ns = ns_since(t0);
  gorobench::check("chan_sync", received.load());
  gorobench::result("chan_sync", ns / static_cast<double>(ops), "ns/op");
}

namespace {

// Go's benchmarkChanProdCons (localWork 0): GOMAXPROCS producers and
// GOMAXPROCS consumers on one channel of capacity chan_size; producers take
// batches of 1000 sends from a shared counter, then send a 0 that stops one
// consumer. Reports ns per message.
void chan_prodcons(const char* name, std::size_t chan_size, std::int64_t ops) {
  constexpr int calls_per_sched = 1000;
  const int procs = goro::gomaxprocs();
  std::atomic<std::int32_t> batches{
      static_cast<std::int32_t>(ops / calls_per_sched)};
  auto c = goro::make_chan<bool>(static_cast<std::size_t>(2 * procs));
  auto myc = goro::make_chan<int>(chan_size);
  std::atomic<std::uint64_t> received{0};
  auto t0 = clock::now();
  for (int p = 0; p < procs; ++p) {
    goro::go([&batches, c, myc] {
      std::int64_t foo = 0;
      while (batches.fetch_sub(1) - 1 >= 0) {
        for (int g = 0; g < calls_per_sched; ++g) {
          foo = local_work(foo, 0);
          myc.send(1);
        }
      }
      myc.send(0);
      c.send(foo == 42);
    });
    goro::go([&received, c, myc] {
      std::int64_t foo = 0;
      std::uint64_t got = 0;
      for (;;) {
        const int v = *myc.recv();
        if (v == 0) break;
        ++got;
        foo = local_work(foo, 0);
      }
      received.fetch_add(got);
      c.send(foo == 42);
    });
  }
  for (int p = 0; p < procs; ++p) {
    c.recv();
    c.recv();
  }
  const double ns = ns_since(t0);
  gorobench::check(name, received.load());
  gorobench::result(name, ns / static_cast<double>(ops), "ns/op");
}

}  // namespace

GOROBENCH_WORKLOAD(chan_prodcons_0,
                   "Go's ChanProdCons0: P producers, P consumers, unbuffered, "
                   "5M messages; ns/op",
                   "") {
  chan_prodcons("chan_prodcons_0", 0, 5'000'000);
}

GOROBENCH_WORKLOAD(chan_prodcons_10,
                   "Go's ChanProdCons10: P producers, P consumers, capacity "
                   "10, 10M messages; ns/op",
                   "") {
  chan_prodcons("chan_prodcons_10", 10, 10'000'000);
}

GOROBENCH_WORKLOAD(chan_prodcons_100,
                   "Go's ChanProdCons100: P producers, P consumers, capacity "
                   "100, 10M messages; ns/op",
                   "") {
  chan_prodcons("chan_prodcons_100", 100, 10'000'000);
}

// Go's BenchmarkSelectUncontended: per worker (GOMAXPROCS workers, as
// RunParallel), two private channels of capacity 1 and a 2-case select that
// moves the one token between them. 20M selects in all; ns/op.
GOROBENCH_WORKLOAD(select_uncontended,
                   "Go's SelectUncontended: 2-case select on private "
                   "buffered channels, P workers, 20M selects; ns/op",
                   "") {
  constexpr std::int64_t ops = 20'000'000;
  const int procs = goro::gomaxprocs();
  const std::int64_t per = ops / procs;
  goro::wait_group wg;
  std::atomic<std::uint64_t> first{0};
  auto t0 = clock::now();
  wg.add(procs);
  for (int p = 0; p < procs; ++p) {
    goro::go([&wg, &first, per] {
      auto myc1 = goro::make_chan<int>(1);
      auto myc2 = goro::make_chan<int>(1);
      myc1.send(0);
      std::uint64_t n1 = 0;
      for (std::int64_t j = 0; j < per; ++j) {
        switch (goro::select(goro::case_recv(myc1), goro::case_recv(myc2))) {
          case 0:
            ++n1;
            myc2.send(0);
            break;
          case 1:
            myc1.send(0);
            break;
        }
      }
      first.fetch_add(n1);
      wg.done();
    });
  }
  wg.wait();
  const double ns = ns_since(t0);
  gorobench::check("select_uncontended", first.load());
  gorobench::result("select_uncontended", ns / static_cast<double>(per * procs),
                    "ns/op");
}

// Go's BenchmarkSelectSyncContended: three shared unbuffered channels; per
// worker (GOMAXPROCS workers) a sender goroutine loops on a 4-case select
// (send on any of the three, or done), and the worker receives with a
// 3-case select. 1M receives in all; ns/op. done is closed at the end.
GOROBENCH_WORKLOAD(select_sync_contended,
                   "Go's SelectSyncContended: 3-case select senders and "
                   "receivers on shared unbuffered channels, 1M receives; "
                   "ns/op",
                   "") {
  constexpr std::int64_t ops = 1'000'000;
  const int procs = goro::gomaxprocs();
  const std::int64_t per = ops / procs;
  auto myc1 = goro::make_chan<int>();
  auto myc2 = goro::make_chan<int>();
  auto myc3 = goro::make_chan<int>();
  auto done = goro::make_chan<int>();
  goro::wait_group workers, senders;
  std::atomic<std::uint64_t> received{0};
  auto t0 = clock::now();
  workers.add(procs);
  senders.add(procs);
  for (int p = 0; p < procs; ++p) {
    goro::go([&, per] {
      goro::go([myc1, myc2, myc3, done, &senders] {
        for (;;) {
          const std::size_t k =
              goro::select(goro::case_send(myc1, 0), goro::case_send(myc2, 0),
                           goro::case_send(myc3, 0), goro::case_recv(done));
          if (k == 3) break;
        }
        senders.done();
      });
      std::uint64_t got = 0;
      for (std::int64_t j = 0; j < per; ++j) {
        goro::select(goro::case_recv(myc1), goro::case_recv(myc2),
                     goro::case_recv(myc3));
        ++got;
      }
      received.fetch_add(got);
      workers.done();
    });
  }
  workers.wait();
  const double ns = ns_since(t0);
  done.close();
  senders.wait();
  gorobench::check("select_sync_contended", received.load());
  gorobench::result("select_sync_contended",
                    ns / static_cast<double>(per * procs), "ns/op");
}

// Go's BenchmarkSelectProdCons: GOMAXPROCS producers and consumers on one
// channel of capacity 128, each side with 100 iterations of local work per
// message and a 3-case select (data, timer, close).
// DEVIATION from Go: Go's third case is `mytimer := time.After(time.Hour)`,
// a timer that never fires during the run; goro has no timers yet, so BOTH
// twins use a per-goroutine channel that no one ever sends on instead (a
// never-ready case that select still has to enqueue on and dequeue from).
// myclose is never closed, as in Go. 4M messages; ns/op.
GOROBENCH_WORKLOAD(select_prodcons,
                   "Go's SelectProdCons (timer case replaced by a never-ready "
                   "channel): P producers, P consumers, 3-case selects, "
                   "100 units of local work, 4M messages; ns/op",
                   "") {
  constexpr int calls_per_sched = 1000;
  constexpr std::int64_t ops = 4'000'000;
  const int procs = goro::gomaxprocs();
  std::atomic<std::int32_t> batches{
      static_cast<std::int32_t>(ops / calls_per_sched)};
  auto c = goro::make_chan<bool>(static_cast<std::size_t>(2 * procs));
  auto myc = goro::make_chan<int>(128);
  auto myclose = goro::make_chan<bool>();
  std::atomic<std::uint64_t> received{0};
  auto t0 = clock::now();
  for (int p = 0; p < procs; ++p) {
    goro::go([&batches, c, myc, myclose] {
      std::int64_t foo = 0;
      auto mytimer = goro::make_chan<bool>();  // stands in for time.After(1h)
      while (batches.fetch_sub(1) - 1 >= 0) {
        for (int g = 0; g < calls_per_sched; ++g) {
          foo = local_work(foo, 100);
          goro::select(goro::case_send(myc, 1), goro::case_recv(mytimer),
                       goro::case_recv(myclose));
        }
      }
      myc.send(0);
      c.send(foo == 42);
    });
    goro::go([&received, c, myc, myclose] {
      std::int64_t foo = 0;
      std::uint64_t got = 0;
      auto mytimer = goro::make_chan<bool>();  // stands in for time.After(1h)
      std::optional<int> v;
      for (;;) {
        if (goro::select(goro::case_recv(myc, v), goro::case_recv(mytimer),
                         goro::case_recv(myclose)) == 0) {
          if (*v == 0) break;
          ++got;
        }
        foo = local_work(foo, 100);
      }
      received.fetch_add(got);
      c.send(foo == 42);
    });
  }
  for (int p = 0; p < procs; ++p) {
    c.recv();
    c.recv();
  }
  const double ns = ns_since(t0);
  gorobench::check("select_prodcons", received.load());
  gorobench::result("select_prodcons", ns / static_cast<double>(ops), "ns/op");
}

// Go's BenchmarkChanPopular: 1000 goroutines, each looping on a 2-case
// select over one shared channel c (never sent on) and its own channel d;
// per op the main goroutine sends once on every d. 2000 ops; us/op.
GOROBENCH_WORKLOAD(chan_popular,
                   "Go's ChanPopular: 1000 goroutines selecting on a shared "
                   "channel and their own, 2000 ops; us/op",
                   "") {
  constexpr int n = 1000;
  constexpr int ops = 2000;
  auto c = goro::make_chan<bool>();
  std::vector<goro::chan<bool>> a;
  a.reserve(n);
  goro::wait_group wg;
  std::atomic<std::uint64_t> received{0};
  auto t0 = clock::now();
  wg.add(n);
  for (int j = 0; j < n; ++j) {
    auto d = goro::make_chan<bool>();
    a.push_back(d);
    goro::go([&wg, &received, c, d] {
      std::uint64_t got = 0;
      for (int i = 0; i < ops; ++i) {
        if (goro::select(goro::case_recv(c), goro::case_recv(d)) == 1) ++got;
      }
      received.fetch_add(got);
      wg.done();
    });
  }
  for (int i = 0; i < ops; ++i)
    for (const auto& d : a) d.send(true);
  wg.wait();
  const double ns = ns_since(t0);
  gorobench::check("chan_popular", received.load());
  gorobench::result("chan_popular", ns / 1e3 / ops, "us/op");
}
