// goro::stats(): each counter moves when the thing it counts happens.
#include <atomic>
#include <condition_variable>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/goro.hpp>
#include <goro/net.hpp>
#include <goro/runtime.hpp>
#include <goro/stats.hpp>
#include <goro/sync.hpp>
#include <goro/time.hpp>
#include <goro/wait_group.hpp>
#include <mutex>
#include <string>
#include <thread>

#include "test_support.hpp"

namespace {

using goro_test::eventually;
using namespace std::chrono_literals;

std::int64_t reason(const goro::runtime_stats& s, const std::string& r) {
  for (auto& [name, n] : s.waiting_by_reason)
    if (name == r) return n;
  return 0;
}

TEST(Stats, GoroutinesByStateAndWaitReason) {
  goro::run([] {
    goro::runtime_stats s0 = goro::stats();
    EXPECT_GE(s0.goroutines, 1);
    EXPECT_GE(s0.running, 1);  // this one
    auto c = goro::make_chan<int>();
    goro::mutex mu;
    goro::wait_group wg;
    mu.lock();
    for (int i = 0; i < 4; i++) {
      wg.add(1);
      goro::go([&] {
        (void)c.recv();
        wg.done();
      });
    }
    for (int i = 0; i < 3; i++) {
      wg.add(1);
      goro::go([&] {
        mu.lock();
        mu.unlock();
        wg.done();
      });
    }
    // Sleeps until told to stop, so a slow machine cannot end the sleep
    // before the snapshot below sees it.
    std::atomic<bool> stop_sleeping{false};
    wg.add(1);
    goro::go([&] {
      while (!stop_sleeping.load()) goro::sleep(20ms);
      wg.done();
    });
    goro::runtime_stats s;
    EXPECT_TRUE(eventually([&] {
      s = goro::stats();
      return reason(s, "chan receive") >= 4 &&
             reason(s, "sync.Mutex.Lock") >= 3 && reason(s, "sleep") >= 1;
    }));
    EXPECT_GE(s.waiting, 8);
    EXPECT_GE(s.goroutines, s0.goroutines + 8);
    EXPECT_EQ(s.goroutines, s.runnable + s.running + s.in_syscall + s.waiting);
    EXPECT_GE(s.timers, 1);  // the sleep's
    for (int i = 0; i < 4; i++) c.send(i);
    mu.unlock();
    stop_sleeping.store(true);
    wg.wait();
    s = goro::stats();
    EXPECT_EQ(reason(s, "chan receive"), 0);
    EXPECT_EQ(reason(s, "sync.Mutex.Lock"), 0);
    EXPECT_EQ(reason(s, "sleep"), 0);
    EXPECT_GT(s.goroutines_run, s0.goroutines_run);
    return 0;
  });
}

TEST(Stats, BlockingCallsThreadsAndHandoffs) {
  goro::run([] {
    goro::runtime_stats s0 = goro::stats();
    std::mutex m;
    std::condition_variable cv;
    bool release = false;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      // A call known to block: the P is handed off at once.
      goro::blocking_scope b(/*long_call=*/true);
      std::unique_lock<std::mutex> lk(m);
      cv.wait(lk, [&] { return release; });
      lk.unlock();
      wg.done();
    });
    goro::runtime_stats s;
    EXPECT_TRUE(eventually([&] {
      s = goro::stats();
      return s.in_syscall >= 1;
    }));
    EXPECT_GE(s.threads_in_syscall, 1);
    EXPECT_GE(s.threads, 2);
    EXPECT_GE(s.syscalls, s0.syscalls + 1);
    EXPECT_GE(s.handoffs, s0.handoffs + 1);
    {
      std::lock_guard<std::mutex> lk(m);
      release = true;
    }
    cv.notify_all();
    wg.wait();
    EXPECT_TRUE(eventually([&] { return goro::stats().in_syscall == 0; }));
    return 0;
  });
}

TEST(Stats, QueuesAndProcs) {
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [] {
    goro::gomaxprocs(1);
    goro::runtime_stats s = goro::stats();
    EXPECT_EQ(s.gomaxprocs, 1);
    EXPECT_EQ(s.local_runq.size(), 1u);
    if (s.local_runq.size() != 1) return 1;
    std::atomic<int> ran{0};
    // Ten goroutines on our own P, which we keep: they wait in its queue.
    for (int i = 0; i < 10; i++) goro::go([&] { ran++; });
    // Five from a plain thread: they wait in the global queue.
    std::thread t([&] {
      for (int i = 0; i < 5; i++) goro::go([&] { ran++; });
    });
    t.join();
    s = goro::stats();
    EXPECT_GE(s.local_runq.at(0), 10);
    EXPECT_EQ(s.local_runq_total, s.local_runq[0]);
    EXPECT_GE(s.global_runq, 5);
    EXPECT_GE(s.runnable, 15);
    EXPECT_EQ(s.procs_idle, 0);  // ours runs
    EXPECT_TRUE(eventually([&] { return ran.load() == 15; }));
    s = goro::stats();
    EXPECT_EQ(s.global_runq, 0);
    EXPECT_EQ(s.local_runq_total, 0);

    // More Ps: the extra ones sit idle.
    goro::gomaxprocs(4);
    EXPECT_TRUE(eventually([&] {
      s = goro::stats();
      return s.gomaxprocs == 4 && s.procs_idle == 3 && s.local_runq.size() == 4;
    }));
    EXPECT_GE(s.threads_idle + s.threads_spinning, 0);
    return 0;
  });
}

TEST(Stats, Steals) {
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [] {
    goro::gomaxprocs(2);
    std::uint64_t before = goro::stats().steals;
    // Batches of work spawned onto our P until another P steals some.
    std::atomic<std::uint64_t> sink{0};
    EXPECT_TRUE(eventually(
        [&] {
          goro::wait_group wg;
          for (int i = 0; i < 32; i++) {
            wg.add(1);
            goro::go([&] {
              std::uint64_t x = 1;
              for (int k = 0; k < 20000; k++)
                x = x * 6364136223846793005ULL + 1;
              sink += x;
              wg.done();
            });
          }
          wg.wait();
          return goro::stats().steals > before;
        },
        10000ms));
    return 0;
  });
}

TEST(Stats, CooperativePreemption) {
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [] {
    goro::gomaxprocs(1);
    bool was = goro::debug::set_async_preempt(false);
    goro::runtime_stats s0 = goro::stats();
    // A loop with safe points only: sysmon's request after a time slice
    // makes it yield there.
    goro_test::deadline dl(10000ms);
    while (goro::stats().preempted_cooperative == s0.preempted_cooperative &&
           !dl.passed()) {
      for (int i = 0; i < 1000; i++) goro::preempt_point();
    }
    goro::runtime_stats s = goro::stats();
    EXPECT_GT(s.preempted_cooperative, s0.preempted_cooperative);
    EXPECT_GT(s.preempt_requests, s0.preempt_requests);
    goro::debug::set_async_preempt(was);
    return 0;
  });
}

bool stop_spin = false;  // read with builtins: a call-free loop

TEST(Stats, AsyncPreemption) {
  goro::debug::set_async_preempt(true);
  if (!goro::debug::async_preempt_enabled())
    GTEST_SKIP() << "async preemption unsupported in this build";
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [] {
    goro::gomaxprocs(1);
    goro::runtime_stats s0 = goro::stats();
    __atomic_store_n(&stop_spin, false, __ATOMIC_RELAXED);
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      // Call-free: only a signal can preempt it. Stops when main has run
      // (which needs the spinner preempted, one P).
      while (!__atomic_load_n(&stop_spin, __ATOMIC_RELAXED)) {
      }
      wg.done();
    });
    goro::gosched();  // the spinner runs; we come back only by preemption
    __atomic_store_n(&stop_spin, true, __ATOMIC_RELAXED);
    wg.wait();
    goro::runtime_stats s = goro::stats();
    EXPECT_GT(s.preempted_async, s0.preempted_async);
    EXPECT_GT(s.preempt_signals, s0.preempt_signals);
    EXPECT_GT(s.preempt_requests, s0.preempt_requests);
    return 0;
  });
}

TEST(Stats, NetpollWaiting) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      try {
        (void)ln.accept();
      } catch (const std::exception&) {
      }
      wg.done();
    });
    goro::runtime_stats s;
    EXPECT_TRUE(eventually([&] {
      s = goro::stats();
      return s.netpoll_waiting >= 1;
    }));
    EXPECT_EQ(reason(s, "IO wait"), s.netpoll_waiting);
    ln.close();
    wg.wait();
    EXPECT_EQ(goro::stats().netpoll_waiting, 0);
    return 0;
  });
}

}  // namespace
