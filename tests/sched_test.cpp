// Scheduler tests through the public API (ports of the intent of Go's
// runtime/proc_test.go: TestGoroutineParallelism, TestYieldProgress,
// TestNumGoroutine, ... plus goro's own guarantees: goroutines from plain
// threads, exceptions across parks and thread migration, goexit, per-
// goroutine stacks, wait_group).
//
// The runtime is a process-wide singleton started by the first run()/go();
// every test calls goro::run(fn) with default options, so the number of Ps
// comes from the GOMAXPROCS environment variable (or the CPU count) for the
// whole executable. Tests work for any gomaxprocs; the ones that need
// parallelism raise it to what they need for their duration (min_procs) and
// put it back afterwards, so they never skip and the next test sees the
// configured value again.
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <goro/goro.hpp>
#include <memory>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
#include <vector>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::deadline;
using goro_test::min_procs;
using goro_test::scaled;

// The kernel thread id. Not std::this_thread::get_id(): glibc declares
// pthread_self() __attribute__((const)), so the compiler may reuse a value
// read before a goroutine switch after it — exactly the caching that goro's
// thread-migration makes wrong. A syscall cannot be cached.
__attribute__((noinline)) long os_tid() { return syscall(SYS_gettid); }

int procs() {
  int n = 0;
  goro::run([&] { n = goro::gomaxprocs(); });
  return n;
}

// CPUs in this process's affinity mask.
int affinity_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof set, &set) != 0) return -1;
  return CPU_COUNT(&set);
}

// What the runtime must start with under default options, computed
// independently of it: GOMAXPROCS when it is a positive decimal int32 (as
// Go's atoi32; capped at 1024), else the usable CPUs (num_cpu: affinity
// mask lowered to the cgroup CPU limit), raised to 2 when a cgroup limit is
// what took it below 2 (Go 1.25).
int expected_default_procs() {
  if (const char* e = std::getenv("GOMAXPROCS"); e != nullptr && *e != 0) {
    long long v = 0;
    bool ok = true;
    for (const char* c = e; ok && *c != 0; c++) {
      ok = *c >= '0' && *c <= '9';
      v = v * 10 + (*c - '0');
      ok = ok && v <= 0x7fffffff;
    }
    if (ok && v > 0) return v > 1024 ? 1024 : int(v);
  }
  return std::max(goro::num_cpu(), std::min(2, affinity_cpus()));
}

// ---------------------------------------------------------------------------
// run()

TEST(Run, ReturnsMainResult) {
  EXPECT_EQ(goro::run([] { return 42; }), 42);
  EXPECT_EQ(goro::run([] {}), 0);
  // Repeated run() calls reuse the running runtime.
  for (int i = 0; i < 20; i++) EXPECT_EQ(goro::run([i] { return i; }), i);
}

// main runs as a goroutine (nonzero id) while the calling thread stays a
// plain thread (id 0), on as many Ps as the environment asks for.
TEST(Run, MainRunsAsGoroutine) {
  std::uint64_t id = 0;
  int procs_inside = 0;
  goro::run([&] {
    id = goro::goroutine_id();
    procs_inside = goro::gomaxprocs();
  });
  EXPECT_NE(id, 0u);
  EXPECT_EQ(goro::goroutine_id(), 0u) << "a plain thread has goroutine id 0";
  const char* env = std::getenv("GOMAXPROCS");
  EXPECT_EQ(procs_inside, expected_default_procs())
      << "GOMAXPROCS=" << (env ? env : "(unset)")
      << ", num_cpu() = " << goro::num_cpu()
      << ", affinity CPUs = " << affinity_cpus();
  EXPECT_EQ(goro::gomaxprocs(), procs_inside)
      << "a plain thread's query disagrees with main's";
  // num_cpu: the affinity mask, possibly lowered by a cgroup CPU limit.
  EXPECT_GE(goro::num_cpu(), 1);
  EXPECT_LE(goro::num_cpu(), affinity_cpus());
}

// Two plain threads running main functions at the same time.
TEST(Run, ConcurrentRunsFromTwoThreads) {
  std::atomic<int> sum{0};
  auto body = [&](int k) {
    int r = goro::run([&, k] {
      goro::wait_group wg;
      for (int i = 0; i < 100; i++) {
        wg.add(1);
        goro::go([&] {
          sum.fetch_add(1);
          wg.done();
        });
      }
      wg.wait();
      return k;
    });
    EXPECT_EQ(r, k);
  };
  std::thread a(body, 1), b(body, 2);
  a.join();
  b.join();
  EXPECT_EQ(sum.load(), 200);
}

// ---------------------------------------------------------------------------
// Parallelism (TestGoroutineParallelism)

// P goroutines pass a token round-robin through a spinning atomic: goroutine
// p may only advance x from P*i+p. None of them yields, so this completes
// only if all P run at the same time; a broken scheduler (Ps not woken,
// nothing stolen) makes the spinners give up at the deadline and the test
// fail instead of hanging. At least 2 Ps (raised for the test if the
// environment gives 1), so there is always parallelism to check.
TEST(Parallelism, AllProcsRunAtOnce) {
  int P = 0, tries = 0;
  deadline limit(10s);
  std::atomic<bool> gave_up{false};
  int completed = 0;
  goro::run([&] {
    min_procs guard(2);
    P = goro::gomaxprocs();
    // More Ps than CPUs: every hand-off waits for the OS to schedule the
    // next thread, so fewer rounds keep the test short.
    tries = P > goro::num_cpu() ? 2 : scaled(10, 3);
    for (int t = 0; t < tries && !gave_up.load(); t++) {
      std::atomic<std::uint32_t> x{0};
      goro::wait_group done;
      done.add(P);
      for (int p = 0; p < P; p++) {
        goro::go([&, p] {
          for (int i = 0; i < 3 && !gave_up.load(std::memory_order_relaxed);
               i++) {
            const std::uint32_t expected =
                static_cast<std::uint32_t>(P * i + p);
            std::uint32_t spins = 0;
            while (x.load(std::memory_order_acquire) != expected) {
              if ((++spins & 0xFFF) == 0 &&
                  (gave_up.load(std::memory_order_relaxed) || limit.passed())) {
                gave_up.store(true);
                break;
              }
            }
            if (gave_up.load()) break;
            x.store(expected + 1, std::memory_order_release);
          }
          done.done();
        });
      }
      done.wait();
      if (!gave_up.load()) completed++;
    }
  });
  EXPECT_FALSE(gave_up.load())
      << "the " << P << " spinning goroutines were not all running at once "
      << "(completed " << completed << " of " << tries << " tries in 10 s)";
  EXPECT_GE(P, 2);
  EXPECT_EQ(completed, tries);
}

// The same with nested spawning (TestGoroutineParallelism2's shape): each
// goroutine starts the next one, so wakep and the spinning-M chain must
// bring every P into play. At least 2 Ps, as above.
TEST(Parallelism, NestedSpawnReachesAllProcs) {
  int P = 0, completed = 0;
  deadline limit(10s);
  std::atomic<bool> gave_up{false};
  goro::run([&] {
    min_procs guard(2);
    P = goro::gomaxprocs();
    // More Ps than CPUs: every hand-off waits for the OS to schedule the
    // next thread, so fewer rounds keep the test short.
    const int tries = P > goro::num_cpu() ? 2 : scaled(10, 3);
    for (int t = 0; t < tries && !gave_up.load(); t++) {
      std::atomic<std::uint32_t> x{0};
      goro::wait_group done;
      done.add(P);
      std::function<void(int)> body = [&](int p) {
        if (p + 1 < P) goro::go(body, p + 1);
        for (int i = 0; i < 3; i++) {
          const std::uint32_t expected = static_cast<std::uint32_t>(P * i + p);
          std::uint32_t spins = 0;
          while (x.load(std::memory_order_acquire) != expected) {
            if ((++spins & 0xFFF) == 0 &&
                (gave_up.load(std::memory_order_relaxed) || limit.passed())) {
              gave_up.store(true);
              break;
            }
          }
          if (gave_up.load()) break;
          x.store(expected + 1, std::memory_order_release);
        }
        done.done();
      };
      goro::go(body, 0);
      done.wait();
      if (!gave_up.load()) completed++;
    }
  });
  EXPECT_FALSE(gave_up.load())
      << "nested goroutines did not reach parallelism " << P << " (completed "
      << completed << " tries in 10 s)";
  EXPECT_GE(P, 2);
}

// ---------------------------------------------------------------------------
// Many goroutines

TEST(Spawn, OneMillionGoroutines) {
  const std::int64_t n = scaled<std::int64_t>(1000000, 100000, 30000);
  std::atomic<std::int64_t> count{0};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (std::int64_t i = 0; i < n; i++) {
      goro::go([&] {
        count.fetch_add(1, std::memory_order_relaxed);
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(count.load(), n);
}

// A binary tree of goroutines, each joining its two children through its own
// wait_group (many short parks and wake-ups across Ps).
void tree(int depth, std::atomic<std::int64_t>& leaves) {
  if (depth == 0) {
    leaves.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  goro::wait_group wg;
  wg.add(2);
  for (int k = 0; k < 2; k++) {
    goro::go([&] {
      tree(depth - 1, leaves);
      wg.done();
    });
  }
  wg.wait();
}

TEST(Spawn, GoroutineTree) {
  const int depth = scaled(16, 13, 11);
  std::atomic<std::int64_t> leaves{0};
  goro::run([&] { tree(depth, leaves); });
  EXPECT_EQ(leaves.load(), std::int64_t{1} << depth);
}

// go() from plain threads (no run() needed: the first go() starts the
// runtime); a plain thread waiting on a wait_group blocks the thread.
TEST(Spawn, FromFourPlainThreads) {
  const int per_thread = scaled(25000, 2500, 1000);
  const int nthreads = 4;
  std::atomic<int> count{0};
  std::atomic<int> zero_ids{0};
  goro::wait_group wg;
  wg.add(per_thread * nthreads);
  std::vector<std::thread> spawners;
  for (int t = 0; t < nthreads; t++) {
    spawners.emplace_back([&] {
      EXPECT_EQ(goro::goroutine_id(), 0u);
      for (int i = 0; i < per_thread; i++) {
        goro::go([&] {
          if (goro::goroutine_id() == 0) zero_ids.fetch_add(1);
          count.fetch_add(1, std::memory_order_relaxed);
          wg.done();
        });
      }
    });
  }
  wg.wait();  // the test's own plain thread blocks here
  EXPECT_EQ(count.load(), per_thread * nthreads);
  for (auto& t : spawners) t.join();
  EXPECT_EQ(count.load(), per_thread * nthreads);
  EXPECT_EQ(zero_ids.load(), 0);
}

// 200,000 goroutines parked at the same time, each with a default-sized
// stack: with vm.max_map_count = 65530 one mapping (or mprotect split) per
// stack would fail long before this.
TEST(Spawn, TwoHundredThousandParkedAtOnce) {
  const int n = goro_test::live_scaled(200000, 50000);
  std::atomic<int> finished{0};
  std::int64_t live_while_parked = 0;
  goro::run([&] {
    goro::wait_group started, gate, all;
    started.add(n);
    gate.add(1);
    all.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        started.done();
        gate.wait();
        finished.fetch_add(1, std::memory_order_relaxed);
        all.done();
      });
    }
    started.wait();
    live_while_parked = goro::num_goroutine();
    gate.done();
    all.wait();
  });
  EXPECT_GE(live_while_parked, n + 1);
  EXPECT_EQ(finished.load(), n);
}

// ---------------------------------------------------------------------------
// goroutine_id / num_goroutine

TEST(Introspection, GoroutineIdsAreUniqueAndNonzero) {
  const int n = 1000;
  std::vector<std::uint64_t> ids(n, 0);
  std::uint64_t main_id = 0;
  std::atomic<int> changed_across_yield{0};
  goro::run([&] {
    main_id = goro::goroutine_id();
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        ids[i] = goro::goroutine_id();
        goro::gosched();
        if (goro::goroutine_id() != ids[i]) changed_across_yield.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(goro::goroutine_id(), 0u);
  EXPECT_NE(main_id, 0u);
  std::set<std::uint64_t> uniq(ids.begin(), ids.end());
  EXPECT_EQ(uniq.size(), static_cast<std::size_t>(n))
      << "duplicate goroutine ids";
  EXPECT_EQ(uniq.count(0), 0u) << "a goroutine had id 0";
  EXPECT_EQ(uniq.count(main_id), 0u) << "a goroutine reused the live main's id";
  EXPECT_EQ(changed_across_yield.load(), 0);
}

TEST(Introspection, NumGoroutineCountsLiveGoroutines) {
  const int n = 100;
  std::int64_t baseline = 0, while_blocked = 0, after = 0;
  bool drained = false;
  goro::run([&] {
    baseline = goro::num_goroutine();
    goro::wait_group started, release, finished;
    started.add(n);
    release.add(1);
    finished.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        started.done();
        release.wait();
        finished.done();
      });
    }
    started.wait();
    while_blocked = goro::num_goroutine();
    release.done();
    finished.wait();
    // The goroutines are gone shortly after their last statement; poll (with
    // a bound) until the count is back down.
    deadline limit(10s);
    while (!(drained = goro::num_goroutine() <= baseline) && !limit.passed())
      goro::gosched();
    after = goro::num_goroutine();
  });
  EXPECT_GE(baseline, 1);
  // (Not baseline + n: the baseline may still count a goroutine of an
  // earlier test that was just finishing.)
  EXPECT_GE(while_blocked, n + 1) << "baseline " << baseline;
  EXPECT_TRUE(drained) << "num_goroutine stayed at " << after << " (baseline "
                       << baseline << ")";
}

// ---------------------------------------------------------------------------
// gosched (TestYieldProgress)

// Every P is taken by a goroutine looping on gosched() until a flag is set.
// The last of them to start spawns the flag setter only then, into its own
// P's runnext, while every P is busy yielding: the setter can only run if
// gosched really lets another goroutine run. (If gosched did nothing, or the
// yielders never all ran at once, the loops give up at the deadline.)
TEST(Gosched, YieldLetsOthersRun) {
  const int P = procs();
  deadline limit(10s);
  std::atomic<bool> flag{false};
  std::atomic<int> started{0};
  std::atomic<bool> timed_out{false};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(P + 1);
    for (int i = 0; i < P; i++) {
      goro::go([&] {
        if (started.fetch_add(1) + 1 == P) {
          goro::go([&] {
            flag.store(true);
            wg.done();
          });
        }
        while (!flag.load()) {
          goro::gosched();
          if (limit.passed()) {
            timed_out.store(true);
            break;
          }
        }
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_FALSE(timed_out.load())
      << "the flag setter never ran (" << started.load() << " of " << P
      << " yielders started)";
}

// The main goroutine itself yielding in a loop lets a goroutine it spawned
// run, whatever gomaxprocs is.
TEST(Gosched, MainYieldsToSpawned) {
  bool ok = false;
  goro::run([&] {
    std::atomic<bool> flag{false};
    goro::go([&] { flag.store(true); });
    deadline limit(10s);
    while (!flag.load() && !limit.passed()) goro::gosched();
    ok = flag.load();
  });
  EXPECT_TRUE(ok);
}

// On a plain thread gosched only yields the OS thread: it returns, over and
// over, the thread stays a plain thread (goroutine id 0), and it neither
// holds up nor waits for the goroutines: a goroutine sees the plain
// thread's gosched calls return while it runs, and the plain thread sees
// the goroutine finish while it keeps calling gosched. Bounded: each side
// gives up at a deadline, and the test thread waits for the plain one with
// a timeout (a plain thread stuck in gosched fails the test, it does not
// hang it; the state is shared so that thread may outlive the test).
TEST(Gosched, PlainThreadReturns) {
  constexpr int want_yields = 100;
  struct state {
    std::atomic<int> yields{0};
    std::atomic<bool> goroutine_done{false};
    std::atomic<int> yields_seen_by_goroutine{0};
    std::atomic<std::uint64_t> id_before{1}, id_after{1};
    std::mutex mu;
    std::condition_variable cv;
    bool finished = false;
  };
  auto st = std::make_shared<state>();
  std::thread th([st] {
    deadline limit(10s);
    st->id_before.store(goro::goroutine_id());
    goro::go([st] {
      deadline glimit(10s);
      while (st->yields.load() < want_yields && !glimit.passed())
        goro::gosched();
      st->yields_seen_by_goroutine.store(st->yields.load());
      st->goroutine_done.store(true);
    });
    while (!st->goroutine_done.load() && !limit.passed()) {
      goro::gosched();
      st->yields.fetch_add(1);
    }
    st->id_after.store(goro::goroutine_id());
    std::lock_guard<std::mutex> lk(st->mu);
    st->finished = true;
    st->cv.notify_all();
  });
  bool finished;
  {
    std::unique_lock<std::mutex> lk(st->mu);
    finished = st->cv.wait_for(lk, 20s, [&] { return st->finished; });
  }
  if (finished)
    th.join();
  else
    th.detach();
  ASSERT_TRUE(finished) << "a plain thread's gosched() did not return ("
                        << st->yields.load() << " calls returned)";
  EXPECT_EQ(st->id_before.load(), 0u);
  EXPECT_EQ(st->id_after.load(), 0u)
      << "gosched() turned the plain thread into a goroutine";
  EXPECT_TRUE(st->goroutine_done.load())
      << "the goroutine never finished while the plain thread yielded";
  EXPECT_GE(st->yields_seen_by_goroutine.load(), want_yields)
      << "the plain thread's gosched() calls stopped returning while the "
         "goroutine ran";
}

// ---------------------------------------------------------------------------
// Exceptions across parks and thread migration

// Parks the calling goroutine once and gets it woken by a goroutine that is
// running on another OS thread when there are >= 2 Ps, so the caller
// usually resumes on that other thread: the waker is spawned while the
// caller keeps its P busy (so another M must take the waker), and the
// waker exits right after the wake-up, so its P runs the woken caller next.
// The short busy waits only make migration likely; `moves` counts the parks
// after which the caller did resume on another thread, and the tests that
// claim a migration check it (they raise gomaxprocs to 2 for that).
struct migrator {
  bool single_p = goro::gomaxprocs() < 2;
  int moves = 0;
  void park_once() {
    const long tid = os_tid();
    park();
    if (os_tid() != tid) moves++;
  }
  // Parks until the caller has resumed on another OS thread (bounded: 200
  // parks or 10 s); returns whether it did.
  bool park_until_moved() {
    const int before = moves;
    deadline limit(10s);
    for (int i = 0; i < 200 && moves == before && !limit.passed(); i++)
      park_once();
    return moves != before;
  }

 private:
  void park() {
    goro::wait_group reply;
    reply.add(1);
    std::atomic<int> state{0};  // 1: waker running, 2: caller about to park
    goro::go([&] {
      int fresh = 0;  // with one P the caller is already parked (state 2)
      state.compare_exchange_strong(fresh, 1);
      deadline d(100ms);
      while (state.load() != 2 && !d.passed()) {
      }
      const auto until = std::chrono::steady_clock::now() + 50us;
      while (std::chrono::steady_clock::now() < until) {
      }
      reply.done();
    });
    if (!single_p) {
      deadline d(100ms);
      while (state.load() != 1 && !d.passed()) {
      }
    }
    state.store(2);
    reply.wait();
  }
};

// Inside a catch block the goroutine parks and moves to another thread (2
// Ps at least); afterwards the handled exception is still the current one,
// `throw;` rethrows the same object, and uncaught_exceptions is 0
// throughout.
TEST(Exceptions, CatchBlockSurvivesParkAndMigration) {
  bool moved = false;
  bool same_current = false, same_object = false, what_ok = false;
  int uncaught_in_catch = -1, uncaught_after = -1;
  bool current_cleared = false;
  goro::run([&] {
    min_procs guard(2);
    migrator m;
    try {
      throw std::runtime_error("boom");
    } catch (const std::runtime_error& e) {
      std::exception_ptr before = std::current_exception();
      moved = m.park_until_moved();
      uncaught_in_catch = std::uncaught_exceptions();
      same_current = std::current_exception() == before;
      what_ok = std::string(e.what()) == "boom";
      try {
        throw;
      } catch (const std::runtime_error& e2) {
        same_object = &e2 == &e;
      }
    }
    current_cleared = std::current_exception() == nullptr;
    uncaught_after = std::uncaught_exceptions();
  });
  EXPECT_TRUE(moved) << "the goroutine never resumed on another OS thread "
                        "in 200 parks inside its catch block";
  EXPECT_TRUE(same_current) << "std::current_exception() changed across a park";
  EXPECT_TRUE(same_object) << "throw; rethrew a different exception object";
  EXPECT_TRUE(what_ok);
  EXPECT_EQ(uncaught_in_catch, 0);
  EXPECT_EQ(uncaught_after, 0);
  EXPECT_TRUE(current_cleared)
      << "the handled exception outlived its catch block";
}

// The same with a scalar exception: the catch clause's copy and `throw;`
// both still see 17 after the goroutine moved to another OS thread.
TEST(Exceptions, CatchBlockMigratesThreads) {
  bool moved = false, ok = false;
  goro::run([&] {
    min_procs guard(2);
    migrator m;
    try {
      throw 17;
    } catch (int v) {
      moved = m.park_until_moved();
      try {
        throw;
      } catch (int w) {
        ok = v == 17 && w == 17;
      }
    }
  });
  EXPECT_TRUE(moved) << "no migration observed in 200 parks with 2 Ps";
  EXPECT_TRUE(ok);
}

// An exception thrown before a park and caught after it: a destructor run
// during unwinding parks and migrates (2 Ps at least); the exception is
// still in flight afterwards (uncaught_exceptions() == 1 inside the
// destructor, before and after the parks) and the catch clause receives it.
struct parks_in_destructor {
  migrator* m;
  int* uncaught_before;
  int* uncaught_after;
  ~parks_in_destructor() {
    *uncaught_before = std::uncaught_exceptions();
    m->park_until_moved();
    for (int i = 0; i < 5; i++) m->park_once();
    *uncaught_after = std::uncaught_exceptions();
  }
};

__attribute__((noinline)) void throw_through_parking_destructor(migrator& m,
                                                                int& b,
                                                                int& a) {
  parks_in_destructor guard{&m, &b, &a};
  throw std::out_of_range("in flight");
}

TEST(Exceptions, ThrownBeforeParkCaughtAfter) {
  int uncaught_before = -1, uncaught_after = -1, moves = 0;
  std::string caught;
  goro::run([&] {
    min_procs guard(2);
    migrator m;
    try {
      throw_through_parking_destructor(m, uncaught_before, uncaught_after);
    } catch (const std::out_of_range& e) {
      caught = e.what();
    }
    moves = m.moves;
  });
  EXPECT_GT(moves, 0) << "the unwinding goroutine never changed OS thread";
  EXPECT_EQ(caught, "in flight");
  EXPECT_EQ(uncaught_before, 1);
  EXPECT_EQ(uncaught_after, 1);
}

// An exception_ptr captured on one thread and rethrown on another after
// parking (2 Ps at least).
TEST(Exceptions, ExceptionPtrRethrownAfterPark) {
  std::string caught;
  bool moved = false;
  goro::run([&] {
    min_procs guard(2);
    migrator m;
    std::exception_ptr ep;
    try {
      throw std::logic_error("saved");
    } catch (...) {
      ep = std::current_exception();
    }
    moved = m.park_until_moved();
    try {
      std::rethrow_exception(ep);
    } catch (const std::logic_error& e) {
      caught = e.what();
    }
  });
  EXPECT_TRUE(moved) << "no migration observed in 200 parks with 2 Ps";
  EXPECT_EQ(caught, "saved");
}

// Per-goroutine exception state: while goroutine A is parked inside its
// catch block, goroutine B (likely on A's thread: it sits in A's runnext)
// sees no current exception; B then parks inside its own catch block while
// A resumes, and each `throw;` rethrows its own goroutine's exception.
TEST(Exceptions, StateIsPerGoroutine) {
  bool b_saw_clean = false, b_rethrew_own = false, a_rethrew_own = false;
  bool a_current_kept = false;
  goro::run([&] {
    goro::wait_group b_in_catch, a_finished, b_finished;
    b_in_catch.add(1);
    a_finished.add(1);
    b_finished.add(1);
    try {
      throw std::runtime_error("A");
    } catch (const std::runtime_error&) {
      std::exception_ptr mine = std::current_exception();
      goro::go([&] {
        b_saw_clean = std::current_exception() == nullptr &&
                      std::uncaught_exceptions() == 0;
        try {
          throw std::invalid_argument("B");
        } catch (const std::invalid_argument&) {
          b_in_catch.done();
          a_finished.wait();  // park inside the catch while A resumes
          try {
            throw;
          } catch (const std::invalid_argument& e) {
            b_rethrew_own = std::string(e.what()) == "B";
          } catch (...) {
          }
        }
        b_finished.done();
      });
      b_in_catch.wait();  // park inside the catch
      a_current_kept = std::current_exception() == mine;
      try {
        throw;
      } catch (const std::runtime_error& e) {
        a_rethrew_own = std::string(e.what()) == "A";
      } catch (...) {
      }
    }
    a_finished.done();
    b_finished.wait();
  });
  EXPECT_TRUE(b_saw_clean)
      << "a new goroutine inherited another's exception state";
  EXPECT_TRUE(a_current_kept);
  EXPECT_TRUE(a_rethrew_own)
      << "A's throw; rethrew another goroutine's exception";
  EXPECT_TRUE(b_rethrew_own)
      << "B's throw; rethrew another goroutine's exception";
}

// An exception thrown and caught entirely inside a goroutine, many times on
// many goroutines at once while they yield between throw and catch.
TEST(Exceptions, ManyGoroutinesThrowAndCatch) {
  const int n = scaled(2000, 300);
  std::atomic<int> ok{0};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        try {
          try {
            throw i;
          } catch (int v) {
            goro::gosched();
            if (v != i) throw -1;
            throw;
          }
        } catch (int v) {
          if (v == i) ok.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_EQ(ok.load(), n);
}

// ---------------------------------------------------------------------------
// goexit

struct sets_on_destroy {
  std::atomic<int>* counter;
  ~sets_on_destroy() { counter->fetch_add(1); }
};
struct done_on_destroy {
  goro::wait_group* wg;
  std::atomic<bool>* flag = nullptr;
  ~done_on_destroy() {
    if (flag) flag->store(true);
    wg->done();
  }
};

__attribute__((noinline)) void exits_from_nested_frame(
    std::atomic<int>& destroyed, std::atomic<bool>& after) {
  sets_on_destroy inner{&destroyed};
  goro::goexit();
  after.store(true);  // must never run
}

// Waits (bounded) for a flag set by a destructor, then joins the wait_group
// that destructor completed. If goexit skipped the destructors, the test
// fails after the deadline instead of hanging in wait().
bool join_by_destructor(std::atomic<bool>& flag, goro::wait_group& wg) {
  deadline limit(10s);
  while (!flag.load() && !limit.passed()) goro::gosched();
  if (!flag.load()) return false;
  wg.wait();
  return true;
}

TEST(Goexit, RunsDestructorsAndEndsGoroutine) {
  std::atomic<int> destroyed{0};
  std::atomic<bool> after_goexit{false};
  std::atomic<bool> after_call{false};
  bool joined = false;
  goro::run([&] {
    goro::wait_group wg;
    std::atomic<bool> flag{false};
    wg.add(1);
    goro::go([&] {
      done_on_destroy d{&wg, &flag};  // lets the test join the goroutine
      sets_on_destroy outer{&destroyed};
      exits_from_nested_frame(destroyed, after_goexit);
      after_call.store(true);  // must never run
    });
    joined = join_by_destructor(flag, wg);
  });
  EXPECT_TRUE(joined) << "the goroutine's outermost destructor never ran";
  EXPECT_EQ(destroyed.load(), 2) << "goexit did not run every destructor";
  EXPECT_FALSE(after_goexit.load()) << "code after goexit() ran";
  EXPECT_FALSE(after_call.load()) << "the caller continued after goexit()";
}

// A catch(...) that rethrows lets goexit finish.
TEST(Goexit, CatchAllThatRethrowsIsFine) {
  std::atomic<bool> saw_catch{false}, after{false};
  bool joined = false;
  goro::run([&] {
    goro::wait_group wg;
    wg.add(1);
    std::atomic<bool> flag{false};
    goro::go([&] {
      done_on_destroy d{&wg, &flag};
      try {
        goro::goexit();
      } catch (...) {
        saw_catch.store(true);
        throw;
      }
      after.store(true);
    });
    joined = join_by_destructor(flag, wg);
  });
  EXPECT_TRUE(joined);
  EXPECT_FALSE(after.load());
  // Whether catch(...) sees goexit's unwinding is the implementation's
  // choice (forced unwinding does); both are fine as long as it ends.
  (void)saw_catch;
}

// The goroutine's callable and its bound arguments are destroyed when the
// goroutine ends by goexit (the closure lives on the goroutine's stack).
TEST(Goexit, DestroysTheCallable) {
  struct on_destroy {
    goro::wait_group* wg;
    std::atomic<bool>* flag;
    on_destroy(goro::wait_group* w, std::atomic<bool>* f) : wg(w), flag(f) {}
    on_destroy(on_destroy&& o) noexcept : wg(o.wg), flag(o.flag) {
      o.wg = nullptr;
    }
    on_destroy(const on_destroy&) = delete;
    ~on_destroy() {
      if (!wg) return;
      flag->store(true);
      wg->done();
    }
  };
  auto shared = std::make_shared<int>(5);
  long use_after = -1;
  bool joined = false;
  goro::run([&] {
    goro::wait_group wg;
    std::atomic<bool> flag{false};
    wg.add(1);
    goro::go([s = shared](on_destroy) { goro::goexit(); },
             on_destroy(&wg, &flag));
    joined = join_by_destructor(flag, wg);
    // wg.done() ran in the argument's destructor; the lambda (holding a
    // copy of `shared`) is destroyed in the same closure teardown.
    deadline limit(10s);
    while (shared.use_count() != 1 && !limit.passed()) goro::gosched();
    use_after = shared.use_count();
  });
  EXPECT_TRUE(joined) << "the argument's destructor never ran";
  EXPECT_EQ(use_after, 1) << "the goroutine's callable was not destroyed";
}

// goexit many times, concurrently.
TEST(Goexit, ManyGoroutines) {
  const int n = scaled(10000, 1000);
  std::atomic<int> destroyed{0};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        done_on_destroy d{&wg, nullptr};
        sets_on_destroy s{&destroyed};
        goro::gosched();
        goro::goexit();
      });
    }
    // Bounded: if goexit skipped destructors, wg would never reach zero.
    deadline limit(10s);
    while (destroyed.load() != n && !limit.passed()) goro::gosched();
    if (destroyed.load() == n) wg.wait();
  });
  EXPECT_EQ(destroyed.load(), n);
}

// ---------------------------------------------------------------------------
// wait_group

TEST(WaitGroup, ZeroDoesNotBlock) {
  goro::wait_group wg;
  wg.wait();  // plain thread
  bool ok = false;
  goro::run([&] {
    goro::wait_group w2;
    w2.wait();
    ok = true;
  });
  EXPECT_TRUE(ok);
}

TEST(WaitGroup, NegativeCounterThrows) {
  goro::wait_group wg;
  EXPECT_THROW(wg.add(-1), std::logic_error);
  goro::wait_group wg2;
  wg2.add(1);
  wg2.done();
  EXPECT_THROW(wg2.done(), std::logic_error);
  bool threw = false;
  goro::run([&] {
    goro::wait_group w;
    w.add(2);
    try {
      w.add(-3);
    } catch (const std::logic_error&) {
      threw = true;
    }
  });
  EXPECT_TRUE(threw);
}

// Reuse after reaching zero, many rounds.
TEST(WaitGroup, Reuse) {
  const int rounds = scaled(1000, 100);
  std::atomic<int> count{0};
  bool ok = true;
  goro::run([&] {
    goro::wait_group wg;
    for (int r = 0; r < rounds; r++) {
      wg.add(10);
      for (int i = 0; i < 10; i++) {
        goro::go([&] {
          count.fetch_add(1);
          wg.done();
        });
      }
      wg.wait();
      if (count.load() != (r + 1) * 10) ok = false;
    }
  });
  EXPECT_TRUE(ok) << "wait() returned before all done() calls of a round";
  EXPECT_EQ(count.load(), rounds * 10);
}

// A plain thread's wait() blocks until the goroutines are done: the work
// they did before done() is visible afterwards.
TEST(WaitGroup, PlainThreadWaitBlocks) {
  const int n = 200;
  std::atomic<int> finished{0};
  goro::wait_group wg;
  wg.add(n);
  for (int i = 0; i < n; i++) {
    goro::go([&] {
      for (int k = 0; k < 20; k++) goro::gosched();
      finished.fetch_add(1);
      wg.done();
    });
  }
  wg.wait();
  EXPECT_EQ(finished.load(), n);
}

// White-box: how many callers of wg.wait() have registered as waiters (the
// low 32 bits of the state word, as in Go's WaitGroup; a waiter registers
// before it blocks and cannot return until the counter reaches zero).
std::uint32_t registered_waiters(goro::wait_group& wg) {
  static_assert(std::is_standard_layout_v<goro::wait_group>);
  auto* state = reinterpret_cast<std::atomic<std::uint64_t>*>(&wg);
  return static_cast<std::uint32_t>(state->load());
}

// Many waiters (goroutines and plain threads) on one wait_group are all
// released by the last done(), and none before it. done() comes only once
// every one of them is seen registered in wait().
TEST(WaitGroup, ManyWaiters) {
  const int waiters = 200;
  const int thread_waiters = 3;
  std::atomic<bool> released{false};
  std::atomic<int> woke{0}, early{0};
  goro::wait_group wg;
  wg.add(1);
  std::vector<std::thread> threads;
  for (int t = 0; t < thread_waiters; t++) {
    threads.emplace_back([&] {
      wg.wait();
      if (!released.load()) early.fetch_add(1);
      woke.fetch_add(1);
    });
  }
  goro::run([&] {
    goro::wait_group all;
    all.add(waiters);
    goro::wait_group started;
    started.add(waiters);
    for (int i = 0; i < waiters; i++) {
      goro::go([&] {
        started.done();
        wg.wait();
        if (!released.load()) early.fetch_add(1);
        woke.fetch_add(1);
        all.done();
      });
    }
    started.wait();
    EXPECT_TRUE(goro_test::eventually([&] {
      return registered_waiters(wg) ==
             static_cast<std::uint32_t>(waiters + thread_waiters);
    })) << registered_waiters(wg)
        << " of " << waiters + thread_waiters << " waiters reached wait()";
    released.store(true);
    wg.done();
    all.wait();
  });
  for (auto& t : threads) t.join();
  EXPECT_EQ(woke.load(), waiters + thread_waiters);
  EXPECT_EQ(early.load(), 0) << "wait() returned while the counter was nonzero";
}

// ---------------------------------------------------------------------------
// go(): arguments, member functions, per-goroutine stacks

TEST(Go, ArgumentsAreCopiedOrMoved) {
  std::string copied_seen;
  int moved_value = 0;
  int sum = 0;
  int by_ref = 0;
  goro::run([&] {
    goro::wait_group wg;
    wg.add(4);
    std::string s = "before";
    goro::go(
        [&](std::string v) {
          copied_seen = v;
          wg.done();
        },
        s);
    s = "after";  // the goroutine has its own copy
    auto up = std::make_unique<int>(7);
    goro::go(
        [&](std::unique_ptr<int> p) {
          moved_value = *p;
          wg.done();
        },
        std::move(up));
    EXPECT_TRUE(up == nullptr);
    goro::go(
        [&](int a, long b, double c) {
          sum = a + static_cast<int>(b) + static_cast<int>(c);
          wg.done();
        },
        1, 2L, 3.0);
    goro::go(
        [&](int& r) {
          r = 99;
          wg.done();
        },
        std::ref(by_ref));
    wg.wait();
  });
  EXPECT_EQ(copied_seen, "before");
  EXPECT_EQ(moved_value, 7);
  EXPECT_EQ(sum, 6);
  EXPECT_EQ(by_ref, 99);
}

struct accumulator {
  std::atomic<int> total{0};
  goro::wait_group* wg = nullptr;
  void add(int d) {
    total.fetch_add(d);
    wg->done();
  }
};

void free_function(std::atomic<int>* out, int v, goro::wait_group* wg) {
  out->store(v);
  wg->done();
}

TEST(Go, MemberAndFreeFunctions) {
  accumulator acc;
  std::atomic<int> out{0};
  goro::run([&] {
    goro::wait_group wg;
    acc.wg = &wg;
    wg.add(4);
    goro::go(&accumulator::add, &acc, 5);
    goro::go(&accumulator::add, &acc, 6);
    goro::go(&accumulator::add, std::ref(acc), 7);
    goro::go(free_function, &out, 41, &wg);
    wg.wait();
  });
  EXPECT_EQ(acc.total.load(), 18);
  EXPECT_EQ(out.load(), 41);
}

// Uses about `bytes` of stack in one frame, touching it from the top down as
// a growing stack does (so a too-small stack faults on its guard page
// rather than scribbling over whatever lies below it).
__attribute__((noinline)) int use_stack(std::size_t bytes) {
  volatile char* buf = static_cast<volatile char*>(__builtin_alloca(bytes));
  for (std::size_t i = bytes; i >= 512; i -= 512)
    buf[i - 1] = static_cast<char>(i);
  int s = 0;
  for (std::size_t i = 0; i < bytes; i += 4096) s += buf[i];
  return s;
}

TEST(Go, PerGoroutineStackSize) {
  std::atomic<int> ran{0};
  goro::run([&] {
    goro::wait_group wg;
    wg.add(2);
    // A small stack still holds a modest frame.
    goro::go(goro::go_options{.stack_size = 64 * 1024}, [&] {
      use_stack(32 * 1024);
      ran.fetch_add(1);
      wg.done();
    });
    // A large stack holds frames the default (64 KiB) could not.
    goro::go(goro::go_options{.stack_size = 8 * 1024 * 1024}, [&] {
      use_stack(4 * 1024 * 1024);
      ran.fetch_add(1);
      wg.done();
    });
    wg.wait();
  });
  EXPECT_EQ(ran.load(), 2);
}

// Many goroutines with small stacks, parked at once.
TEST(Go, ManySmallStacks) {
  // Non-default stacks each carry their own TSan fiber: stay far below
  // TSan's 8128-thread limit.
  const int n = scaled(20000, 5000, 1000);
  std::atomic<int> ran{0};
  goro::run([&] {
    goro::wait_group started, gate, all;
    started.add(n);
    gate.add(1);
    all.add(n);
    for (int i = 0; i < n; i++) {
      goro::go(goro::go_options{.stack_size = 64 * 1024}, [&] {
        use_stack(16 * 1024);
        started.done();
        gate.wait();
        ran.fetch_add(1);
        all.done();
      });
    }
    started.wait();
    gate.done();
    all.wait();
  });
  EXPECT_EQ(ran.load(), n);
}

// A callable whose construction throws: go() propagates the exception and
// the runtime stays usable (newproc_abort returns the G).
TEST(Go, ThrowingArgumentCopy) {
  struct bomb {
    bomb() = default;
    bomb(const bomb&) { throw std::runtime_error("copy"); }
  };
  bool threw = false;
  std::atomic<int> later{0};
  goro::run([&] {
    bomb b;
    try {
      goro::go([](const bomb&) {}, b);
    } catch (const std::runtime_error&) {
      threw = true;
    }
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      later.store(1);
      wg.done();
    });
    wg.wait();
  });
  EXPECT_TRUE(threw);
  EXPECT_EQ(later.load(), 1);
}

}  // namespace
