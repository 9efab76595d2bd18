// demo.cpp: a short tour of goro's scheduler at work (`make demo`).
//
//   1. the scheduler configuration (Go's
//   runtime.GOMAXPROCS/NumCPU/NumGoroutine)
//   2. a million goroutines spawned and joined with a wait_group
//   3. the work-stealing demo: uneven batches of CPU-bound goroutines, one
//      batch per P, balanced across the Ps by stealing
//   4. producers and consumers on a buffered channel: goroutines blocked on
//      a channel are parked (no thread blocks) and resumed by the other side
//   5. Go's concurrent prime sieve: a pipeline of a goroutine per prime,
//      shut down by closing a quit channel that every select watches
//   6. timers and syscalls: 10,000 sleeping goroutines woken by the per-P
//      timer heaps, and compute goroutines that keep their Ps while other
//      goroutines sit in blocking calls
//   7. the configuration again
//
// GOMAXPROCS=n in the environment sets the number of Ps, as in Go.
//
// While it runs, the runtime prints Go's SCHED line every 500 ms on stderr
// (the demo sets GORO_DEBUG=schedtrace=500 unless GORO_DEBUG is already set;
// `GORO_DEBUG= demo` turns the lines off). When the machine cannot show a
// parallel speed-up (one usable CPU, one P, or other processes using the
// CPUs), the work-stealing demo says so and why, from num_cpu(), the CPU
// time the process actually got and the load average.
//
// `demo --trace FILE` records the work-stealing demo with the execution
// tracer (goro::trace::start/stop) into FILE, Chrome Trace Event JSON for
// ui.perfetto.dev; `make demo` passes build/default/work_stealing.trace.json
// and renders it as an SVG timeline with goro_tracesvg when that tool is
// built.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <goro/trace.hpp>
#include <map>
#include <optional>
#include <thread>
#include <vector>

#if __has_include(<goro/debug.hpp>)
#include <goro/debug.hpp>
#define GORO_DEMO_HAVE_DEBUG 1
#else
// Built before the runtime's introspection header existed: no per-P counts.
#define GORO_DEMO_HAVE_DEBUG 0
namespace goro::debug {
struct p_stats {
  int id;
  std::uint64_t goroutines_run;
  std::uint64_t goroutines_stolen;
};
inline std::vector<p_stats> per_p_stats() { return {}; }
}  // namespace goro::debug
#endif

namespace {

using clock_type = std::chrono::steady_clock;

double ms_since(clock_type::time_point t0) {
  return std::chrono::duration<double, std::milli>(clock_type::now() - t0)
      .count();
}

// CPU-bound work the compiler cannot fold: one LCG step per iteration behind
// an empty asm barrier (the same leaf as the benchmarks in bench/).
__attribute__((noinline)) std::uint64_t cpu_work(std::uint64_t iters,
                                                 std::uint64_t seed) {
  std::uint64_t x = seed;
  for (std::uint64_t i = 0; i < iters; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    asm volatile("" : "+r"(x));
  }
  return x;
}

void print_configuration(const char* title) {
  std::printf("\n=== %s ===\n", title);
  std::printf("gomaxprocs:    %d\n", goro::gomaxprocs());
  std::printf("num_cpu:       %d\n", goro::num_cpu());
  std::printf("num_goroutine: %lld\n",
              static_cast<long long>(goro::num_goroutine()));
}

// The model the rest of the tour shows at work, and how to read the SCHED
// lines that the runtime prints meanwhile.
void print_model() {
  std::printf(R"(
=== G, M and P ===
  G  a goroutine: a function, its stack and its state (goro::go creates one)
  M  an OS thread that runs goroutines
  P  a processor: what an M must hold to run goroutines; there are
     gomaxprocs of them, each with a local run queue (256 slots + runnext)

        global run queue  [G G G ...]     netpoll (epoll)     sysmon
               |                                |          (preempts, retakes
     +---------+---------+                      |           Ps from syscalls)
     P0 [runnext|G G G]  P1 [runnext|G G]   <-- ready Gs
     |                   |
     M0 running G        M1 running G         M2 in a blocking call (no P)

  An idle P's M steals half of another P's queue; a blocked M gives its P
  to another M; a parked G (channel, timer, lock, socket) holds no thread.
)");
  const char* dbg = std::getenv("GORO_DEBUG");
  if (dbg != nullptr && std::strstr(dbg, "schedtrace") != nullptr) {
    std::printf(R"(
SCHED lines (GORO_DEBUG=%s) appear on stderr while the tour runs:
  SCHED 1503ms: gomaxprocs=2 idleprocs=0 threads=5 spinningthreads=1
    needspinning=0 idlethreads=2 runqueue=12 [3 0]
  idleprocs: Ps with nothing to run; threads: Ms; spinningthreads: Ms
  looking for work to steal; idlethreads: parked Ms; runqueue: Gs in the
  global queue; [3 0]: Gs in each P's local queue.
)",
                dbg);
  }
}

// CPU time (user + system) this process has used, in milliseconds.
double process_cpu_ms() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto ms = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) * 1e3 +
           static_cast<double>(tv.tv_usec) / 1e3;
  };
  return ms(ru.ru_utime) + ms(ru.ru_stime);
}

// The 1-minute load average (runnable threads, all processes), or -1.
double load_average() {
  double l = -1;
  if (std::FILE* f = std::fopen("/proc/loadavg", "r")) {
    if (std::fscanf(f, "%lf", &l) != 1) l = -1;
    std::fclose(f);
  }
  return l;
}

// Says why a speed-up is below what the Ps could give, if it is.
void explain_speedup(double speedup, int procs, double cpu_ms, double wall_ms) {
  const int cpus = goro::num_cpu();
  const int ideal = std::min(procs, cpus);
  const double got = wall_ms > 0 ? cpu_ms / wall_ms : 0;  // CPUs' worth
  if (ideal <= 1) {
    std::printf(
        "(No speed-up to expect: %s, so one goroutine runs at a time; the "
        "per-P counts below still show the sharing. Try a machine, or "
        "GOMAXPROCS, with more CPUs.)\n",
        procs == 1 ? "there is one P (GOMAXPROCS=1)"
                   : "this process may use one CPU (affinity mask or cgroup "
                     "limit)");
    return;
  }
  if (speedup >= 0.8 * ideal) return;
  std::printf("Why not %dx:", ideal);
  std::printf(
      " the process got %.2f CPUs' worth of time while it ran (%.0f ms of CPU "
      "in %.0f ms)",
      got, cpu_ms, wall_ms);
  const double load = load_average();
  if (got < 0.8 * ideal) {
    std::printf(
        ", not %d: other processes were using the CPUs (load average %.2f on "
        "%d CPUs), so the Ps' threads waited for the OS scheduler. The "
        "runtime cannot run more goroutines at once than it gets CPUs.\n",
        ideal, load, cpus);
  } else {
    std::printf(
        ": the threads had the CPUs but did less per second than the "
        "single-thread estimate (shared cores, SMT siblings, frequency "
        "changes, or an estimate taken while the machine was quieter; load "
        "average %.2f).\n",
        load);
  }
}

void million_goroutines() {
  std::printf("\n=== A million goroutines ===\n");
  std::printf(
      "(G: each goro::go is a G; a queued G holds no stack. More: "
      "examples/million_goroutines.cpp)\n");
  constexpr int n = 1'000'000;
  goro::wait_group wg;
  auto t0 = clock_type::now();
  wg.add(n);
  for (int i = 0; i < n; ++i) goro::go([&wg] { wg.done(); });
  wg.wait();
  const double ms = ms_since(t0);
  std::printf(
      "spawned and joined %d goroutines in %.1f ms (%.0f ns per "
      "goroutine)\n",
      n, ms, ms * 1e6 / n);
}

// The seed's demonstrateWorkStealing: P batches of 100 + p*50 CPU-bound
// goroutines. Each batch is spawned by its own goroutine, so it starts in
// one P's run queue; idle Ps steal from the busy ones.
void work_stealing(const char* trace_path) {
  std::printf("\n=== Work stealing demo ===\n");
  std::printf(
      "(P: each batch starts in one P's local queue; idle Ps steal half. "
      "More: examples/work_stealing.cpp)\n");
  const int procs = goro::gomaxprocs();

  // Size the leaf to ~150 us so every goroutine takes visible time.
  constexpr std::uint64_t calib_iters = 1u << 16;
  double ns_per_iter = 1e9;  // the fastest of a few timings
  for (std::uint64_t i = 0; i < 8; ++i) {
    auto tc = clock_type::now();
    const std::uint64_t r = cpu_work(calib_iters, i);
    const double ns = ms_since(tc) * 1e6 / calib_iters;
    if (r != 0) ns_per_iter = std::min(ns_per_iter, ns);
  }
  const std::uint64_t iters = std::clamp<std::uint64_t>(
      static_cast<std::uint64_t>(150'000.0 / std::max(ns_per_iter, 0.05)),
      1u << 12, 1u << 22);

  struct batch {
    int count = 0;
    std::thread::id spawner_thread;
    std::vector<std::thread::id> ran_on;  // one slot per goroutine
  };
  std::vector<batch> batches(static_cast<std::size_t>(procs));
  int total = 0;
  for (int p = 0; p < procs; ++p) {
    auto& b = batches[static_cast<std::size_t>(p)];
    b.count = 100 + p * 50;  // uneven work per "P"
    b.ran_on.resize(static_cast<std::size_t>(b.count));
    total += b.count;
  }
  std::printf(
      "%d batches (%d goroutines in all, %d..%d per batch), ~%.0f us "
      "of CPU work each\n",
      procs, total, batches.front().count, batches.back().count,
      static_cast<double>(iters) * ns_per_iter / 1e3);

  const auto before = goro::debug::per_p_stats();
  std::atomic<std::uint64_t> checksum{0};
  goro::wait_group wg;
  auto t0 = clock_type::now();
  // Record this part only: a trace of the million goroutines would be
  // mostly spawn events.
  const bool tracing = trace_path != nullptr && !goro::trace::active();
  if (tracing) goro::trace::start(trace_path);
  const double cpu0 = process_cpu_ms();
  wg.add(total);
  for (int p = 0; p < procs; ++p) {
    goro::go([&, p] {
      auto& b = batches[static_cast<std::size_t>(p)];
      b.spawner_thread = std::this_thread::get_id();
      for (int j = 0; j < b.count; ++j) {
        goro::go([&, j] {
          checksum.fetch_add(cpu_work(iters, static_cast<std::uint64_t>(j)),
                             std::memory_order_relaxed);
          b.ran_on[static_cast<std::size_t>(j)] = std::this_thread::get_id();
          wg.done();
        });
      }
    });
  }
  wg.wait();
  const double elapsed = ms_since(t0);
  const double cpu_used = process_cpu_ms() - cpu0;
  const auto after = goro::debug::per_p_stats();
  if (tracing) {
    goro::trace::stop();
    const auto st = goro::trace::last_stats();
    std::printf(
        "execution trace of this part: %s (%llu events%s); open it in "
        "ui.perfetto.dev or render it: goro_tracesvg %s out.svg\n",
        trace_path, (unsigned long long)st.events,
        st.dropped ? ", some dropped" : "", trace_path);
  }

  const double sequential =
      total * static_cast<double>(iters) * ns_per_iter / 1e6;
  std::printf(
      "Completed uneven workload in %.1f ms on %d P%s (the same work "
      "in one thread: ~%.1f ms, speed-up %.2fx)\n",
      elapsed, procs, procs == 1 ? "" : "s", sequential, sequential / elapsed);
  std::printf("(Work stealing balances load across Ps)\n");
  explain_speedup(sequential / elapsed, procs, cpu_used, elapsed);

  // Where the goroutines ran, by OS thread (an M can change Ps, so this is
  // only a hint; the per-P counts below are the runtime's own).
  std::map<std::thread::id, int> per_thread;
  int moved = 0;
  for (const auto& b : batches)
    for (const auto& t : b.ran_on) {
      ++per_thread[t];
      if (t != b.spawner_thread) ++moved;
    }
  std::printf("ran on %zu OS thread(s):", per_thread.size());
  for (const auto& [t, count] : per_thread) std::printf(" %d", count);
  std::printf(
      " goroutines; %d of %d ran on another thread than their "
      "spawner\n",
      moved, total);

  if (!GORO_DEMO_HAVE_DEBUG || after.empty()) {
    std::printf("(per-P counts need <goro/debug.hpp>; not in this build)\n");
    return;
  }
  std::printf("%-4s %15s %18s\n", "P", "goroutines run", "goroutines stolen");
  for (const auto& a : after) {
    std::uint64_t run0 = 0, stolen0 = 0;
    for (const auto& b : before)
      if (b.id == a.id) {
        run0 = b.goroutines_run;
        stolen0 = b.goroutines_stolen;
      }
    std::printf("%-4d %15llu %18llu\n", a.id,
                static_cast<unsigned long long>(a.goroutines_run - run0),
                static_cast<unsigned long long>(a.goroutines_stolen - stolen0));
  }
  (void)checksum.load();
}

// Producers and consumers on a small buffered channel. The consumers start
// first and park on the empty channel: they stay goroutines (counted by
// num_goroutine) but hold no thread. The producer then outruns them, parks
// whenever the buffer is full, and each receive that makes room resumes it.
void producer_consumer() {
  std::printf("\n=== Producer/consumer over a buffered channel ===\n");
  std::printf(
      "(a G parked on a channel leaves its M free. More: "
      "examples/producer_consumer.cpp, fan_in_out.cpp, worker_pool.cpp)\n");
  constexpr int consumers = 4;
  constexpr int items = 200;
  constexpr std::size_t capacity = 4;
  const std::int64_t before = goro::num_goroutine();
  auto jobs = goro::make_chan<int>(capacity);

  struct tally {
    int items = 0;
    int waits = 0;  // times the channel was empty: the consumer parked
    std::int64_t sum = 0;
  };
  std::vector<tally> tallies(consumers);
  goro::wait_group started, finished;
  started.add(consumers);
  finished.add(consumers);
  for (int c = 0; c < consumers; ++c) {
    goro::go([&, c, jobs] {
      tally& t = tallies[static_cast<std::size_t>(c)];
      started.done();
      for (;;) {
        bool closed = false;
        std::optional<int> v = jobs.try_recv(&closed);
        if (!v && !closed) {
          ++t.waits;
          v = jobs.recv();  // parks until a producer sends (or close)
        }
        if (!v) break;  // closed and drained
        ++t.items;
        t.sum += *v;
        cpu_work(20'000, static_cast<std::uint64_t>(*v));  // some work per item
      }
      finished.done();
    });
  }
  started.wait();
  // Let the consumers reach their receive and park there.
  for (int i = 0; i < 10; ++i) goro::gosched();
  std::printf(
      "%d consumers waiting on an empty channel (len %zu, cap %zu): "
      "num_goroutine = %lld (%lld before)\n",
      consumers, jobs.len(), jobs.cap(),
      static_cast<long long>(goro::num_goroutine()),
      static_cast<long long>(before));

  int producer_waits = 0;
  goro::wait_group produced;
  produced.add(1);
  goro::go([&, jobs] {
    for (int i = 1; i <= items; ++i) {
      if (!jobs.try_send(i)) {  // buffer full: park until a receive
        ++producer_waits;
        jobs.send(i);
      }
    }
    jobs.close();  // the consumers' loops end once the buffer drains
    produced.done();
  });
  produced.wait();
  finished.wait();

  std::int64_t sum = 0;
  int total = 0;
  for (int c = 0; c < consumers; ++c) {
    const tally& t = tallies[static_cast<std::size_t>(c)];
    std::printf(
        "  consumer %d: %3d items, parked on the empty channel %3d times\n", c,
        t.items, t.waits);
    sum += t.sum;
    total += t.items;
  }
  std::printf(
      "producer sent %d items, parked on the full buffer %d times; "
      "received %d items, sum %lld (expected %d)\n",
      items, producer_waits, total, static_cast<long long>(sum),
      items * (items + 1) / 2);
  std::printf("num_goroutine after the channel closed and drained: %lld\n",
              static_cast<long long>(goro::num_goroutine()));
}

// Go's concurrent prime sieve: a generator sends 2, 3, 4, ... down a chain of
// unbuffered channels; every prime found adds a filter goroutine that drops
// its multiples. Every send and receive also selects on `quit`, so closing
// quit shuts the whole pipeline down.
void sieve_generate(goro::chan<int> out, goro::chan<void> quit,
                    goro::wait_group* wg) {
  for (int i = 2;; ++i) {
    if (goro::select(goro::case_send(out, i), goro::case_recv(quit)) == 1)
      break;
  }
  wg->done();
}

void sieve_filter(goro::chan<int> in, goro::chan<int> out, int prime,
                  goro::chan<void> quit, goro::wait_group* wg) {
  for (;;) {
    std::optional<int> v;
    if (goro::select(goro::case_recv(in, v), goro::case_recv(quit)) == 1) break;
    if (*v % prime == 0) continue;
    if (goro::select(goro::case_send(out, *v), goro::case_recv(quit)) == 1)
      break;
  }
  wg->done();
}

void prime_sieve() {
  std::printf("\n=== Prime sieve pipeline (a goroutine per prime) ===\n");
  constexpr int primes = 100;
  const std::int64_t before = goro::num_goroutine();
  auto quit = goro::make_chan<void>();
  goro::wait_group wg;
  auto t0 = clock_type::now();
  auto ch = goro::make_chan<int>();
  wg.add(1);
  goro::go(sieve_generate, ch, quit, &wg);
  for (int i = 0; i < primes; ++i) {
    const int prime = *ch.recv();
    std::printf("%5d%s", prime, i % 10 == 9 ? "\n" : "");
    auto next = goro::make_chan<int>();
    wg.add(1);
    goro::go(sieve_filter, ch, next, prime, quit, &wg);
    ch = next;
  }
  const double ms = ms_since(t0);
  std::printf(
      "first %d primes in %.1f ms through a pipeline of %d filter "
      "goroutines; num_goroutine = %lld (%lld before)\n",
      primes, ms, primes, static_cast<long long>(goro::num_goroutine()),
      static_cast<long long>(before));
  quit.close();  // every stage's select sees it and returns
  wg.wait();
  std::printf("after close(quit): num_goroutine = %lld\n",
              static_cast<long long>(goro::num_goroutine()));
}

// --- Timers and syscalls ----------------------------------------------------

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// The "Threads:" line of /proc/self/status: OS threads in the process.
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

// 10,000 goroutines each sleep a random 1-10 ms. A sleeping goroutine is
// parked on a timer in its P's heap (no thread sleeps for it); the
// scheduler runs due timers between goroutines and an idle thread waits in
// the poller exactly until the next one.
void sleepers() {
  constexpr int n = 10'000;
  std::vector<std::int64_t> delay_us(n), late_us(n);
  std::uint64_t seed = 7;
  for (auto& d : delay_us)
    d = 1000 + static_cast<std::int64_t>(splitmix64(seed) % 9001);
  std::atomic<std::int64_t> peak{0};
  goro::wait_group wg;
  auto t0 = clock_type::now();
  wg.add(n);
  for (int i = 0; i < n; ++i) {
    goro::go([&, i] {
      const auto d = std::chrono::microseconds(delay_us[std::size_t(i)]);
      auto s = clock_type::now();
      goro::sleep(d);
      late_us[std::size_t(i)] =
          std::chrono::duration_cast<std::chrono::microseconds>(
              clock_type::now() - s - d)
              .count();
      if (i == n / 2) peak = goro::num_goroutine();
      wg.done();
    });
  }
  wg.wait();
  const double ms = ms_since(t0);
  const bool none_early = std::all_of(late_us.begin(), late_us.end(),
                                      [](auto l) { return l >= 0; });
  std::sort(late_us.begin(), late_us.end());
  std::printf(
      "%d goroutines slept a random 1-10 ms each: all woke within %.1f ms "
      "(num_goroutine ~%lld meanwhile)\n",
      n, ms, static_cast<long long>(peak.load()));
  std::printf("wake-up lateness: p50 %lld us, p99 %lld us, max %lld us%s\n",
              static_cast<long long>(late_us[n / 2]),
              static_cast<long long>(late_us[n * 99 / 100]),
              static_cast<long long>(late_us.back()),
              none_early ? " (none woke early)" : " (SOME WOKE EARLY)");
}

enum class blockers { none, blocking, blocking_long };

struct compute_run {
  double chunks_per_s = 0;
  std::uint64_t calls = 0;
  int threads = 0;
};

// gomaxprocs compute goroutines count chunks of CPU work for `d` (each by
// its own clock), next to gomaxprocs * 4 goroutines that loop in 1 ms
// usleep calls wrapped as blocking calls (or none).
compute_run compute_next_to(blockers kind, std::chrono::milliseconds d) {
  const int procs = goro::gomaxprocs();
  const int nblock = kind == blockers::none ? 0 : procs * 4;
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> chunks{0}, calls{0};
  std::atomic<int> threads{0};
  goro::wait_group compute, blocked;
  blocked.add(nblock);
  for (int b = 0; b < nblock; ++b) {
    goro::go([&] {
      std::uint64_t c = 0;
      while (!stop.load(std::memory_order_relaxed)) {
        if (kind == blockers::blocking)
          goro::blocking([] { ::usleep(1000); });
        else
          goro::blocking_long([] { ::usleep(1000); });
        ++c;
      }
      calls += c;
      blocked.done();
    });
  }
  auto t0 = clock_type::now();
  compute.add(procs);
  for (int p = 0; p < procs; ++p) {
    goro::go([&, p] {
      std::uint64_t x = std::uint64_t(p), k = 0;
      bool counted = false;
      for (auto end = t0 + d; clock_type::now() < end; ++k) {
        x = cpu_work(20'000, x);
        goro::preempt_point();
        if (!counted && clock_type::now() > t0 + d / 2) {
          // Half-way: the blockers are in their calls.
          const int t = os_threads();
          for (int cur = threads.load(); t > cur;)
            if (threads.compare_exchange_weak(cur, t)) break;
          counted = true;
        }
      }
      chunks += k + (x == 42);  // (use x)
      compute.done();
    });
  }
  compute.wait();
  const double secs = ms_since(t0) / 1e3;
  stop = true;
  blocked.wait();
  return {double(chunks.load()) / secs, calls.load(), threads.load()};
}

void timers_and_syscalls() {
  std::printf("\n=== Timers and syscalls ===\n");
  std::printf(
      "(M: a G in a blocking call keeps its M, and its P goes to another M. "
      "More: examples/syscalls.cpp)\n");
  sleepers();

  const int procs = goro::gomaxprocs();
  constexpr auto d = std::chrono::milliseconds(300);
  std::printf(
      "%d compute goroutine%s (one per P) for %lld ms, alone and next to %d "
      "goroutines looping in 1 ms usleep() calls:\n",
      procs, procs == 1 ? "" : "s", static_cast<long long>(d.count()),
      procs * 4);
  const compute_run alone = compute_next_to(blockers::none, d);
  const compute_run with = compute_next_to(blockers::blocking, d);
  const compute_run with_long = compute_next_to(blockers::blocking_long, d);
  auto row = [&](const char* what, const compute_run& r) {
    std::printf("  %-24s %8.0f chunks/s (%3.0f%% kept)", what, r.chunks_per_s,
                100.0 * r.chunks_per_s / alone.chunks_per_s);
    if (&r != &alone)
      std::printf(", %5llu blocking calls done",
                  static_cast<unsigned long long>(r.calls));
    std::printf(", %d OS threads", r.threads);
    std::printf("\n");
  };
  row("alone", alone);
  row("next to blocking()", with);
  row("next to blocking_long()", with_long);
  std::printf(
      "(a goroutine in blocking() keeps its P until sysmon sees the call "
      "last >= 20 us and hands the P to another thread; blocking_long() "
      "hands it off at once)\n");
  const double load = load_average();
  if (load > goro::num_cpu())
    std::printf(
        "(the machine is busy: load average %.2f on %d CPUs. The rates above "
        "share the CPUs with other processes and vary from run to run; "
        "compare them on a quiet machine.)\n",
        load, goro::num_cpu());
}

}  // namespace

int main(int argc, char** argv) {
  const char* trace_path = nullptr;
  if (argc == 3 && std::strcmp(argv[1], "--trace") == 0) {
    trace_path = argv[2];
  } else if (argc != 1) {
    std::fprintf(stderr, "usage: demo [--trace FILE]\n");
    return 2;
  }
  // stdout line by line, so that the tour's lines and the runtime's SCHED
  // lines (stderr) come out in order even through a pipe.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  // Read when the runtime starts: set before goro::run. An existing
  // GORO_DEBUG (even empty) is left alone.
  setenv("GORO_DEBUG", "schedtrace=500", 0);
  return goro::run([trace_path] {
    print_configuration("goro scheduler configuration");
    print_model();
    million_goroutines();
    work_stealing(trace_path);
    producer_consumer();
    prime_sieve();
    timers_and_syscalls();
    print_configuration("goro scheduler configuration at the end");
    std::printf(
        "\n=== Demo complete ===\nThe full programs: examples/README.md "
        "(`make examples` builds and runs them all).\n");
    return 0;
  });
}
