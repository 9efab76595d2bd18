// sysmon, cooperative preemption, blocking calls (syscall hand-off) and
// GOMAXPROCS resizing. Ports of the intent of Go's runtime/proc_test.go:
// TestPingPongHog, TestYieldProgress (with preemption instead of Gosched),
// TestPreemption, TestPreemptionAfterSyscall, TestStopTheWorldDeadlock,
// TestGCFairness2 (with blocking calls), plus goro's own guarantees about
// blocking_long, the idle-thread cache and procresize.
//
// Tests that need a particular number of Ps set it with goro::gomaxprocs(n)
// at the start and restore the previous value at the end: all the tests of
// one executable share the runtime when it is run directly.
#include <goro/goro.hpp>

#include "test_support.hpp"

// White-box checks: the status of a P, the P a goroutine runs on.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "runtime/p.hpp"
#include "runtime/sched.hpp"
#include "runtime/tls.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::clock;
using goro_test::deadline;
using goro_test::scaled;

template <class D>
long long ms(D d) {
  return static_cast<long long>(
      std::chrono::duration_cast<std::chrono::milliseconds>(d).count());
}

int thread_count() { return int(goro_test::proc_status("Threads:")); }

// Busy-waits for d without entering the runtime.
void spin_for(std::chrono::nanoseconds d) {
  auto until = clock::now() + d;
  while (clock::now() < until) {
  }
}

// Runs the body with gomaxprocs(n), restoring the previous value after.
struct procs_guard {
  int old;
  explicit procs_guard(int n) : old(goro::gomaxprocs(n)) {}
  ~procs_guard() { goro::gomaxprocs(old); }
};

// ---------------------------------------------------------------------------
// Cooperative preemption by sysmon (10 ms time slices)

// Go's TestPingPongHog: a pair of goroutines doing long rounds and a pair
// doing short rounds hand a token back and forth through runnext, each
// pair inheriting its time slice. With one P, only sysmon's preemption at
// the end of a slice lets the other pair run; both must get a fair share
// (within 20x, as Go's test).
TEST(Preempt, PingPongHog) {
  const long hog_limit = scaled(1000000L, 100000L);
  const long light_limit = 1000;
  std::atomic<long> hog_count{0}, light_count{0};
  goro::run([&] {
    procs_guard procs(1);
    auto done = goro::make_chan<void>();
    auto hog = goro::make_chan<bool>();
    auto light = goro::make_chan<bool>();
    goro::wait_group wg;
    auto body = [&](long limit, std::atomic<long>* counter,
                    goro::chan<bool> wake) {
      for (;;) {
        std::optional<bool> v;
        if (goro::select(goro::case_recv(done), goro::case_recv(wake, v)) == 0)
          break;
        for (long i = 0; i < limit; i++) {
          counter->store(counter->load(std::memory_order_relaxed) + 1,
                         std::memory_order_relaxed);
          goro::preempt_point();
        }
        wake.send(true);
      }
      wg.done();
    };
    wg.add(4);
    for (int i = 0; i < 2; i++) goro::go(body, hog_limit, &hog_count, hog);
    for (int i = 0; i < 2; i++)
      goro::go(body, light_limit, &light_count, light);
    hog.send(true);
    light.send(true);
    goro::sleep(100ms);
    done.close();
    hog.recv();
    light.recv();
    wg.wait();
  });
  const long factor = 20;
  long h = hog_count.load(), l = light_count.load();
  EXPECT_FALSE(h / factor > l || l / factor > h)
      << "want hog/light in [1/20, 20]; got " << h << "/" << l;
}

// Go's TestYieldProgress with preemption in place of Gosched: with one P,
// a goroutine that polls a channel and otherwise only calls preempt_point()
// must still let main's sleep end and main's send through.
void spinner_lets_main_send(bool idle_first) {
  std::atomic<bool> gave_up{false};
  auto t0 = clock::now();
  goro::run([&] {
    procs_guard procs(1);
    if (idle_first) {
      // Everything idle for a while (sysmon may go to deep sleep).
      goro::sleep(50ms);
    }
    auto c = goro::make_chan<bool>();
    auto cack = goro::make_chan<bool>();
    goro::go([&] {
      deadline limit(std::chrono::seconds(scaled(3, 10)));
      for (;;) {
        if (goro::select(goro::case_recv(c), goro::case_default()) == 0) break;
        goro::preempt_point();
        if (limit.passed()) {
          gave_up.store(true);
          c.recv();  // let main's send complete
          break;
        }
      }
      cack.send(true);
    });
    goro::sleep(10ms);
    c.send(true);
    cack.recv();
  });
  EXPECT_FALSE(gave_up.load())
      << "the spinner was never preempted: main's 10 ms sleep did not end";
  EXPECT_LT(clock::now() - t0, 2s);
}

TEST(Preempt, SpinnerWithPreemptPointLetsMainSend) {
  spinner_lets_main_send(false);
}

// The same after a period in which every P was idle: sysmon must be
// watching again once goroutines run (Go bounds sysmon's deep sleep by the
// next timer, and wakes it when a thread leaves a syscall or the idle
// poller with a P).
TEST(Preempt, SpinnerAfterIdlePeriodLetsMainSend) {
  spinner_lets_main_send(true);
}

// Go's TestPreemption: two goroutines take turns through an atomic,
// busy-waiting for their turn. With one P every turn needs a preemption.
TEST(Preempt, TwoSpinnersTakeTurns) {
  const int n = 5;
  std::atomic<std::uint32_t> x{0};
  std::atomic<bool> gave_up{false};
  goro::run([&] {
    procs_guard procs(1);
    goro::wait_group wg;
    wg.add(2);
    for (std::uint32_t g = 0; g < 2; g++) {
      goro::go([&, g] {
        deadline limit(std::chrono::seconds(scaled(5, 15)));
        for (int i = 0; i < n && !gave_up.load(); i++) {
          while (x.load() != g) {
            goro::preempt_point();
            if (limit.passed()) {
              gave_up.store(true);
              break;
            }
          }
          x.store(1 - g);
        }
        wg.done();
      });
    }
    wg.wait();
  });
  EXPECT_FALSE(gave_up.load()) << "the spinners were not preempted";
}

// ---------------------------------------------------------------------------
// Blocking calls (entersyscall / exitsyscall / handoffp / sysmon retake)

enum class call_kind { sleep, busy };

struct syscall_param {
  std::chrono::microseconds d;
  call_kind kind;
};

class PreemptionAfterSyscall : public ::testing::TestWithParam<syscall_param> {
};

// Go's TestPreemptionAfterSyscall: with two Ps, eight goroutines loop on
// blocking calls of d; main must still get to run, set the stop flag and
// collect all eight, well within Go's bound of 5 s per iteration.
TEST_P(PreemptionAfterSyscall, MainStillRuns) {
  const auto d = GetParam().d;
  const bool busy = GetParam().kind == call_kind::busy;
  const int iterations = scaled(3, 1);
  const int nroutines = 8;
  const auto max_duration = 5s;
  goro::run([&] {
    procs_guard procs(2);
    for (int it = 0; it < iterations; it++) {
      auto c = goro::make_chan<bool>(nroutines);
      std::atomic<std::uint32_t> stop{0};
      auto start = clock::now();
      for (int g = 0; g < nroutines; g++) {
        goro::go([&, c] {
          c.send(true);
          deadline limit(10s);  // a broken runtime fails, it does not hang
          while (stop.load() == 0 && !limit.passed()) {
            goro::blocking([&] {
              if (busy)
                spin_for(d);
              else
                ::usleep(static_cast<useconds_t>(d.count()));
            });
          }
          c.send(true);
        });
      }
      for (int g = 0; g < nroutines; g++) c.recv();
      stop.store(1);
      for (int g = 0; g < nroutines; g++) c.recv();
      auto duration = clock::now() - start;
      EXPECT_LT(duration, max_duration)
          << "iteration " << it << " took " << ms(duration) << " ms";
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
    Syscall, PreemptionAfterSyscall,
    ::testing::Values(syscall_param{10us, call_kind::busy},
                      syscall_param{100us, call_kind::busy},
                      syscall_param{1000us, call_kind::busy},
                      syscall_param{10us, call_kind::sleep},
                      syscall_param{100us, call_kind::sleep},
                      syscall_param{1000us, call_kind::sleep}),
    [](const ::testing::TestParamInfo<syscall_param>& info) {
      return std::string(info.param.kind == call_kind::busy ? "Busy"
                                                            : "Sleep") +
             std::to_string(info.param.d.count()) + "us";
    });

// blocking_long hands the P off before the call starts: with one P, a
// goroutine blocked inside blocking_long on a condition variable lets the
// goroutine that will signal it run. (Without a hand-off only sysmon's
// retake could rescue it.) The P is not reserved for the caller meanwhile.
TEST(Syscall, BlockingLongHandsOffAtOnce) {
  bool woke = false;
  std::uint32_t status_inside = 0xffff;
  std::uint64_t signaller_id = 0;
  goro::run([&] {
    procs_guard procs(1);
    std::mutex mu;
    std::condition_variable cv;
    bool flag = false;
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      goro::go([&] {
        signaller_id = goro::goroutine_id();
        {
          std::lock_guard<std::mutex> lk(mu);
          flag = true;
        }
        cv.notify_all();
        wg.done();
      });
      goro::blocking_long([&] {
        status_inside = goro::rt::allp[0]->status.load();
        std::unique_lock<std::mutex> lk(mu);
        woke = cv.wait_for(lk, 10s, [&] { return flag; });
      });
      wg.done();
    });
    wg.wait();
  });
  EXPECT_TRUE(woke) << "the signalling goroutine never ran";
  EXPECT_NE(signaller_id, 0u);
  EXPECT_NE(status_inside, std::uint32_t(goro::rt::p_syscall))
      << "blocking_long kept the P in _Psyscall instead of handing it off";
}

// A plain blocking() call also lets others run once it lasts: sysmon
// retakes the P (it has work queued) and hands it to another thread.
TEST(Syscall, LongBlockingCallIsRetaken) {
  bool woke = false;
  goro::run([&] {
    procs_guard procs(1);
    std::mutex mu;
    std::condition_variable cv;
    bool flag = false;
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      goro::go([&] {
        {
          std::lock_guard<std::mutex> lk(mu);
          flag = true;
        }
        cv.notify_all();
        wg.done();
      });
      goro::blocking([&] {
        std::unique_lock<std::mutex> lk(mu);
        woke = cv.wait_for(lk, 10s, [&] { return flag; });
      });
      wg.done();
    });
    wg.wait();
  });
  EXPECT_TRUE(woke) << "sysmon never retook the P of a long blocking call";
}

// A goroutine returning from a blocking call whose P was retaken and is
// busy goes to the global queue (exitsyscall0) and runs once the spinner
// holding the only P is preempted.
TEST(Syscall, ReturnWithoutPWaitsForPreemption) {
  std::atomic<bool> a_done{false}, gave_up{false};
  goro::run([&] {
    procs_guard procs(1);
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      goro::blocking([] { ::usleep(20000); });
      a_done.store(true);
      wg.done();
    });
    goro::go([&] {
      deadline limit(std::chrono::seconds(scaled(5, 15)));
      while (!a_done.load()) {
        goro::preempt_point();
        if (limit.passed()) {
          gave_up.store(true);
          break;
        }
      }
      wg.done();
    });
    wg.wait();
  });
  EXPECT_TRUE(a_done.load());
  EXPECT_FALSE(gave_up.load())
      << "the goroutine leaving its blocking call never ran again";
}

// Threads that served blocking calls are cached and reused: 100 rounds of
// 8 simultaneous blocking_long calls do not create 800 threads.
TEST(Syscall, IdleThreadsAreReused) {
  const int rounds = scaled(100, 50);
  const int per_round = 8;
  int before = 0, after_warmup = 0, after = 0, procs = 0;
  goro::run([&] {
    procs = goro::gomaxprocs();
    before = thread_count();
    for (int r = 0; r < rounds; r++) {
      goro::wait_group wg;
      wg.add(per_round);
      for (int i = 0; i < per_round; i++) {
        goro::go([&] {
          goro::blocking_long([] { ::usleep(200); });
          wg.done();
        });
      }
      wg.wait();
      if (r == 9) after_warmup = thread_count();
    }
    after = thread_count();
  });
  ASSERT_GT(before, 0);
  // At most one thread per call in flight, one per P and a few spare.
  EXPECT_LE(after - before, per_round + 2 * procs + 4)
      << "threads: " << before << " before, " << after_warmup
      << " after 10 rounds, " << after << " after " << rounds;
}

// From a plain thread, blocking() just runs the function.
TEST(Syscall, PlainThreadBlockingIsNoOp) {
  std::thread th([] {
    EXPECT_EQ(goro::blocking([] { return 42; }), 42);
    EXPECT_EQ(goro::blocking_long([] { return 7; }), 7);
    int x = 1;
    int& r = goro::blocking([&]() -> int& { return x; });
    EXPECT_EQ(&r, &x);
    {
      goro::blocking_scope s;
      goro::blocking_scope s2(true);
    }
    EXPECT_THROW(goro::blocking([]() -> int { throw std::runtime_error("x"); }),
                 std::runtime_error);
  });
  th.join();
  // And the runtime is still fine afterwards.
  EXPECT_EQ(goro::run([] { return goro::blocking([] { return 5; }); }), 5);
}

// Return values and exceptions pass through blocking(); the goroutine is
// back to normal after an exception left the call.
TEST(Syscall, BlockingReturnsValuesAndPropagatesExceptions) {
  goro::run([] {
    EXPECT_EQ(goro::blocking([] { return 3; }), 3);
    std::string s = goro::blocking_long([] { return std::string("abc"); });
    EXPECT_EQ(s, "abc");
    for (int i = 0; i < 50; i++) {
      bool caught = false;
      try {
        if (i % 2)
          goro::blocking([] { throw std::runtime_error("in call"); });
        else
          goro::blocking_long([] { throw std::runtime_error("in call"); });
      } catch (const std::runtime_error& e) {
        caught = std::string(e.what()) == "in call";
      }
      EXPECT_TRUE(caught);
      // Still a normal running goroutine: park and resume.
      auto c = goro::make_chan<int>();
      goro::go([c] { c.send(1); });
      EXPECT_EQ(c.recv().value_or(0), 1);
    }
  });
}

// Blocking regions nest: only the outermost one enters and leaves the
// syscall state, so inner regions of either kind are harmless.
TEST(Syscall, NestedBlockingRegions) {
  goro::run([] {
    procs_guard procs(1);
    for (int i = 0; i < 20; i++) {
      int v = goro::blocking([i] {
        int inner = goro::blocking_long([] {
          ::usleep(100);
          return goro::blocking([] { return 2; });
        });
        goro::blocking_scope s(i % 2 == 0);
        return inner + 1;
      });
      EXPECT_EQ(v, 3);
      // Back to a normal goroutine: others still run on the only P.
      auto c = goro::make_chan<int>();
      goro::go([c, i] { c.send(i); });
      EXPECT_EQ(c.recv().value_or(-1), i);
    }
  });
}

// A goroutine may park inside a blocking region (channel waits, sleep,
// gosched, mutex): it leaves the syscall state for the switch and
// re-enters it after resuming, and nothing is lost with one P.
TEST(Syscall, ParkInsideBlockingRegion) {
  goro::run([] {
    procs_guard procs(1);
    auto c = goro::make_chan<int>();
    goro::mutex mu;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      for (int i = 0; i < 20; i++) {
        c.send(i);
        std::lock_guard<goro::mutex> lk(mu);
        goro::gosched();  // holding mu: main may wait for it
      }
      wg.done();
    });
    int sum = 0;
    for (int i = 0; i < 20; i++) {
      goro::blocking_scope s(i % 2 == 1);
      sum += c.recv().value_or(-1000);
      goro::gosched();
      goro::sleep(100us);
      { std::lock_guard<goro::mutex> lk(mu); }
      ::usleep(50);
    }
    wg.wait();
    EXPECT_EQ(sum, 190);
  });
}

// Go's TestGCFairness2 with blocking calls: with one P, goroutines
// hammering short write system calls do not starve main's 10 ms sleeps.
// (The hammers' calls leave the only P idle now and then, so sysmon may
// go to deep sleep; a thread leaving its call must wake it again.)
TEST(Syscall, HammeringSyscallsDoNotStarveSleep) {
  int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  ASSERT_GE(fd, 0);
  std::vector<long long> slept;
  goro::run([&] {
    procs_guard procs(1);
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    wg.add(2);
    for (int i = 0; i < 2; i++) {
      goro::go([&] {
        char b = 0;
        deadline limit(20s);
        while (!stop.load() && !limit.passed())
          goro::blocking([&] { return ::write(fd, &b, 1); });
        wg.done();
      });
    }
    for (int i = 0; i < 5; i++) {
      auto t0 = clock::now();
      goro::sleep(10ms);
      slept.push_back(ms(clock::now() - t0));
    }
    stop.store(true);
    wg.wait();
  });
  ::close(fd);
  for (auto v : slept)
    EXPECT_LT(v, 1000) << "a 10 ms sleep took " << v << " ms";
}

// ---------------------------------------------------------------------------
// GOMAXPROCS

TEST(Gomaxprocs, QueryAndClamp) {
  goro::run([] {
    const int cur = goro::gomaxprocs(0);
    EXPECT_GE(cur, 1);
    EXPECT_EQ(goro::gomaxprocs(), cur);
    EXPECT_EQ(goro::gomaxprocs(cur), cur)
        << "setting the same value is a no-op";
    // n < 1 is a query, as runtime.GOMAXPROCS.
    EXPECT_EQ(goro::gomaxprocs(-1), cur);
    EXPECT_EQ(goro::gomaxprocs(0), cur);
    EXPECT_EQ(goro::gomaxprocs(5000), cur);
    EXPECT_EQ(goro::gomaxprocs(0), 1024) << "values above 1024 clamp";
    // Goroutines still run with 1024 Ps.
    std::atomic<int> n{0};
    goro::wait_group wg;
    wg.add(100);
    for (int i = 0; i < 100; i++)
      goro::go([&] {
        n.fetch_add(1);
        goro::gosched();
        wg.done();
      });
    wg.wait();
    EXPECT_EQ(n.load(), 100);
    EXPECT_EQ(goro::gomaxprocs(cur), 1024);
    EXPECT_EQ(goro::gomaxprocs(0), cur);
  });
}

// Up and down while 1000 goroutines yield and count: nothing is lost
// (run queues of removed Ps move to the global queue).
TEST(Gomaxprocs, ResizeWithGoroutinesRunning) {
  const int n = goro_test::live_scaled(1000, 500);
  const int yields = scaled(20, 10);
  std::atomic<long> count{0};
  int resizes = 0;
  goro::run([&] {
    const int old = goro::gomaxprocs();
    std::atomic<int> finished{0};
    goro::wait_group wg;
    wg.add(n + 1);
    goro::go([&] {
      const int sizes[] = {1, 3, 2, 4, 1, 2, 8, 1};
      for (int i = 0; finished.load() < n; i++) {
        goro::gomaxprocs(sizes[i % 8]);
        resizes++;
        goro::gosched();
      }
      wg.done();
    });
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        for (int k = 0; k < yields; k++) {
          count.fetch_add(1);
          goro::gosched();
        }
        finished.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    goro::gomaxprocs(old);
    EXPECT_EQ(goro::gomaxprocs(0), old);
  });
  EXPECT_EQ(count.load(), long(n) * yields);
  EXPECT_GT(resizes, 0);
}

// Go's TestStopTheWorldDeadlock, lite: two goroutines change GOMAXPROCS
// over and over while a self-respawning goroutine chain runs; all of it
// completes.
void perpetuum_mobile(goro::chan<bool> stop) {
  if (goro::select(goro::case_recv(stop), goro::case_default()) == 1)
    goro::go(perpetuum_mobile, stop);
}

TEST(Gomaxprocs, StopTheWorldDeadlock) {
  const int n = scaled(300, 100, 40);
  goro::run([&] {
    const int old = goro::gomaxprocs(3);
    auto compl_ = goro::make_chan<bool>(2);
    goro::go([&] {
      for (int i = 0; i < n; i++) {
        goro::gomaxprocs(3);
        goro::gomaxprocs(2);
      }
      compl_.send(true);
    });
    goro::go([&] {
      for (int i = 0; i < n; i++) {
        goro::gomaxprocs(4);
        goro::gosched();
      }
      compl_.send(true);
    });
    auto stop = goro::make_chan<bool>();
    goro::go(perpetuum_mobile, stop);
    compl_.recv();
    compl_.recv();
    stop.send(true);
    goro::gomaxprocs(old);
  });
}

// Growing gives real parallelism: after gomaxprocs(1) -> 2, two
// goroutines that each wait (without yielding) for the other to arrive
// both run at once.
TEST(Gomaxprocs, GrowGivesParallelism) {
  std::atomic<bool> gave_up{false};
  goro::run([&] {
    const int old = goro::gomaxprocs(1);
    goro::gomaxprocs(2);
    std::atomic<int> arrived{0};
    goro::wait_group wg;
    wg.add(2);
    for (int i = 0; i < 2; i++) {
      goro::go([&] {
        arrived.fetch_add(1);
        deadline limit(10s);
        while (arrived.load() < 2) {
          if (limit.passed()) {
            gave_up.store(true);
            break;
          }
        }
        wg.done();
      });
    }
    wg.wait();
    goro::gomaxprocs(old);
  });
  EXPECT_FALSE(gave_up.load()) << "two goroutines never ran at once with 2 Ps";
}

// Sleepers whose timers sit on Ps that a shrink removes still wake (the
// timers move to a remaining P).
TEST(Gomaxprocs, TimersSurviveShrink) {
  const int n = 32;
  // Shared with the sleepers, which outlive the test if it fails.
  struct state {
    std::atomic<int> woke{0}, early{0}, on_removed_p{0};
    goro::wait_group started, all;
  };
  auto st = std::make_shared<state>();
  bool finished = false;
  goro::run([&] {
    const int old = goro::gomaxprocs(4);
    st->started.add(n);
    st->all.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([st] {
        spin_for(500us);  // let the other Ps steal some of us
        if (goro::rt::getm()->p->id >= 1) st->on_removed_p.fetch_add(1);
        auto t0 = clock::now();
        st->started.done();
        goro::sleep(150ms);
        if (clock::now() - t0 < 150ms) st->early.fetch_add(1);
        st->woke.fetch_add(1);
        st->all.done();
      });
    }
    st->started.wait();
    goro::gomaxprocs(1);
    auto done = goro::make_chan<void>();
    goro::go([st, done] {
      st->all.wait();
      done.close();
    });
    auto giveup = goro::after(10s);
    finished =
        goro::select(goro::case_recv(done), goro::case_recv(giveup)) == 0;
    goro::gomaxprocs(old);
  });
  ASSERT_TRUE(finished) << "only " << st->woke.load() << " of " << n
                        << " sleepers woke after the shrink";
  EXPECT_EQ(st->woke.load(), n);
  EXPECT_EQ(st->early.load(), 0);
  EXPECT_GT(st->on_removed_p.load(), 0)
      << "no sleeper ran on a removed P (the test did not cover the move)";
}

// Goroutines in blocking calls while their P is stopped and removed come
// back on a remaining P.
TEST(Gomaxprocs, ShrinkWhileInBlockingCalls) {
  const int n = 8, calls = 20;
  std::atomic<int> done_calls{0};
  goro::run([&] {
    const int old = goro::gomaxprocs(4);
    std::atomic<int> finished{0};
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        for (int k = 0; k < calls; k++) {
          if ((i + k) % 2)
            goro::blocking([] { ::usleep(1000); });
          else
            goro::blocking_long([] { ::usleep(1000); });
          done_calls.fetch_add(1);
        }
        finished.fetch_add(1);
        wg.done();
      });
    }
    const int sizes[] = {1, 4, 2, 3};
    deadline limit(20s);
    for (int i = 0; finished.load() < n && !limit.passed(); i++) {
      goro::gomaxprocs(sizes[i % 4]);
      goro::sleep(2ms);
    }
    wg.wait();
    goro::gomaxprocs(old);
  });
  EXPECT_EQ(done_calls.load(), n * calls);
}

}  // namespace
