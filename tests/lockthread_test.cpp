// lock_os_thread / unlock_os_thread (Go's LockOSThread): ports of the
// intent of Go's TestLockOSThreadNesting, TestLockOSThreadExit,
// TestBlockLocked, TestYieldLocked and TestYieldLockedProgress, plus goro's
// own guarantees: a locked goroutine stays on its thread across every kind
// of wait, its thread runs nothing else, and a goroutine that exits locked
// takes its thread with it.
#include <goro/goro.hpp>

#include "test_support.hpp"

// White-box: the lock state of the current goroutine and thread.
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "runtime/g.hpp"
#include "runtime/tls.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::clock;
using goro_test::deadline;
using goro_test::scaled;

// The kernel thread id (a syscall: the compiler cannot cache it across a
// goroutine switch, unlike pthread_self()).
__attribute__((noinline)) long os_tid() { return ::syscall(SYS_gettid); }

bool thread_exists(long tid) {
  struct stat st;
  std::string path = "/proc/self/task/" + std::to_string(tid);
  return ::stat(path.c_str(), &st) == 0;
}

int thread_count() { return int(goro_test::proc_status("Threads:")); }

// Whether the running goroutine is wired to its thread (runtime state).
bool locked() {
  goro::rt::G* gp = goro::rt::getg();
  goro::rt::M* mp = goro::rt::getm();
  return gp != nullptr && gp->lockedm == mp && mp->lockedg == gp;
}
std::uint32_t lock_count() { return goro::rt::getm()->locked_ext; }

struct procs_guard {
  int old;
  explicit procs_guard(int n) : old(goro::gomaxprocs(n)) {}
  ~procs_guard() { goro::gomaxprocs(old); }
};

// ---------------------------------------------------------------------------

// Go's TestLockOSThreadNesting: N locks need N unlocks.
TEST(LockOSThread, Nesting) {
  goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      EXPECT_FALSE(locked());
      goro::lock_os_thread();
      goro::lock_os_thread();
      EXPECT_TRUE(locked());
      EXPECT_EQ(lock_count(), 2u);
      goro::unlock_os_thread();
      EXPECT_TRUE(locked()) << "one unlock of two locks unwired the goroutine";
      EXPECT_EQ(lock_count(), 1u);
      // Still wired: the thread does not change across a yield.
      long tid = os_tid();
      goro::gosched();
      EXPECT_EQ(os_tid(), tid);
      goro::unlock_os_thread();
      EXPECT_FALSE(locked());
      EXPECT_EQ(lock_count(), 0u);
      wg.done();
    });
    wg.wait();
  });
}

// Unlock without lock is a no-op (also below zero), and so is locking on a
// plain thread.
TEST(LockOSThread, UnlockWithoutLockIsNoOp) {
  goro::run([] {
    goro::unlock_os_thread();
    goro::unlock_os_thread();
    EXPECT_FALSE(locked());
    EXPECT_EQ(lock_count(), 0u);
    goro::lock_os_thread();
    EXPECT_TRUE(locked());
    EXPECT_EQ(lock_count(), 1u)
        << "earlier extra unlocks must not be remembered";
    goro::unlock_os_thread();
    EXPECT_FALSE(locked());
    goro::unlock_os_thread();
    EXPECT_FALSE(locked());
  });
  std::thread th([] {
    goro::lock_os_thread();
    goro::unlock_os_thread();
    goro::unlock_os_thread();
  });
  th.join();
}

// A locked goroutine runs only on its thread, across gosched, sleep,
// channel waits, mutex waits, blocking calls and preemption points.
TEST(LockOSThread, StaysOnItsThreadAcrossWaits) {
  const int rounds = scaled(20, 5);
  std::atomic<int> moved{0};
  goro::run([&] {
    auto ping = goro::make_chan<int>();
    auto pong = goro::make_chan<int>();
    goro::mutex mu;
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      goro::lock_os_thread();
      const long tid = os_tid();
      auto check = [&] {
        if (os_tid() != tid) moved.fetch_add(1);
      };
      for (int i = 0; i < rounds; i++) {
        goro::gosched();
        check();
        goro::sleep(1ms);
        check();
        ping.send(i);
        check();
        {
          // Usually contended: the other goroutine holds mu for 100 us.
          std::lock_guard<goro::mutex> lk(mu);
          check();
        }
        check();
        pong.recv();
        check();
        goro::blocking([] { ::usleep(100); });
        check();
        goro::blocking_long([] { ::usleep(100); });
        check();
        goro::preempt_point();
        check();
      }
      goro::unlock_os_thread();
      wg.done();
    });
    goro::go([&] {
      for (int i = 0; i < rounds; i++) {
        ping.recv();
        {
          std::lock_guard<goro::mutex> lk(mu);
          goro::sleep(100us);
        }
        pong.send(i);
      }
      wg.done();
    });
    wg.wait();
  });
  EXPECT_EQ(moved.load(), 0) << "the locked goroutine ran on another thread";
}

// While a goroutine is locked (and often parked), its thread runs no other
// goroutine.
TEST(LockOSThread, ThreadRunsNothingElse) {
  const int workers = 50;
  const int yields = scaled(200, 50);
  std::atomic<long> locked_tid{0};
  std::atomic<int> intruders{0};
  goro::run([&] {
    auto stop = goro::make_chan<void>();
    goro::wait_group locked_ready, wg, lg;
    locked_ready.add(1);
    lg.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      locked_tid.store(os_tid());
      locked_ready.done();
      // Park and wake over and over until told to stop.
      for (;;) {
        auto t = goro::after(200us);
        if (goro::select(goro::case_recv(stop), goro::case_recv(t)) == 0) break;
      }
      goro::unlock_os_thread();
      lg.done();
    });
    locked_ready.wait();
    wg.add(workers);
    for (int w = 0; w < workers; w++) {
      goro::go([&] {
        for (int i = 0; i < yields; i++) {
          if (os_tid() == locked_tid.load()) intruders.fetch_add(1);
          if (i % 8 == 0)
            goro::sleep(50us);
          else
            goro::gosched();
        }
        wg.done();
      });
    }
    wg.wait();
    stop.close();
    lg.wait();
  });
  EXPECT_EQ(intruders.load(), 0)
      << "goroutines ran on a locked goroutine's thread";
}

// Go's TestBlockLocked: a locked goroutine sends 10 times on an unbuffered
// channel (each send hands the P between threads).
TEST(LockOSThread, BlockLocked) {
  goro::run([] {
    const int n = 10;
    auto c = goro::make_chan<bool>();
    goro::go([c] {
      goro::lock_os_thread();
      for (int i = 0; i < n; i++) c.send(true);
      goro::unlock_os_thread();
    });
    for (int i = 0; i < n; i++) EXPECT_TRUE(c.recv().value_or(false));
  });
}

// The same with one P and many more round trips.
TEST(LockOSThread, BlockLockedOneP) {
  goro::run([] {
    procs_guard procs(1);
    const int n = scaled(2000, 300);
    auto c = goro::make_chan<int>();
    auto done = goro::make_chan<void>(1);
    goro::go([=] {
      goro::lock_os_thread();
      const long tid = os_tid();
      int moved = 0;
      for (int i = 0; i < n; i++) {
        c.send(i);
        if (os_tid() != tid) moved++;
      }
      EXPECT_EQ(moved, 0);
      goro::unlock_os_thread();
      done.send();
    });
    for (int i = 0; i < n; i++) ASSERT_EQ(c.recv().value_or(-1), i);
    done.recv();
  });
}

// Go's TestYieldLocked: a locked goroutine yields and sleeps 1 ms, 10
// times; it exits still locked (no unlock), taking its thread with it.
TEST(LockOSThread, YieldLocked) {
  goro::run([] {
    const int n = 10;
    auto c = goro::make_chan<bool>();
    goro::go([c] {
      goro::lock_os_thread();
      for (int i = 0; i < n; i++) {
        goro::gosched();
        goro::sleep(1ms);
      }
      c.send(true);
      // unlock_os_thread() deliberately omitted
    });
    EXPECT_TRUE(c.recv().value_or(false));
  });
}

// Go's TestYieldLockedProgress: a locked goroutine looping on gosched with
// a non-blocking receive still lets main's send through. procs > 0 runs it
// with that many Ps.
void yield_locked_progress(int procs) {
  std::atomic<bool> gave_up{false};
  std::atomic<int> polls{0};
  goro::run([&] {
    procs_guard guard(procs > 0 ? procs : goro::gomaxprocs());
    auto c = goro::make_chan<bool>();
    auto cack = goro::make_chan<bool>();
    auto looping = goro::make_chan<void>();
    goro::go([&] {
      goro::lock_os_thread();
      deadline limit(10s);
      for (;;) {
        if (goro::select(goro::case_recv(c), goro::case_default()) == 0) break;
        if (polls.fetch_add(1) == 0) looping.close();
        goro::gosched();
        if (limit.passed()) {
          gave_up.store(true);
          c.recv();
          break;
        }
      }
      goro::unlock_os_thread();
      cack.send(true);
    });
    // Go's test sleeps 10 ms here so that the locked goroutine is looping
    // when main sends; waiting for its first empty poll makes sure of it.
    looping.recv();
    c.send(true);
    cack.recv();
  });
  EXPECT_GT(polls.load(), 0) << "the locked goroutine never polled";
  EXPECT_FALSE(gave_up.load())
      << "main's send never got through to the yielding locked goroutine";
}

TEST(LockOSThread, YieldLockedProgress) { yield_locked_progress(0); }

// The same with one P.
TEST(LockOSThread, YieldLockedProgressOneP) { yield_locked_progress(1); }

// Go's TestLockOSThreadExit (LockOSThreadAlt): a goroutine that exits while
// locked ends its thread; the thread id disappears from /proc/self/task.
TEST(LockOSThread, ExitWhileLockedEndsThread) {
  long tid = 0;
  bool gone = false;
  goro::run([&] {
    auto c = goro::make_chan<long>();
    goro::go([c] {
      goro::lock_os_thread();
      c.send(os_tid());
    });
    tid = c.recv().value_or(0);
    ASSERT_NE(tid, 0);
    deadline limit(10s);
    while (!(gone = !thread_exists(tid)) && !limit.passed()) goro::sleep(1ms);
  });
  EXPECT_TRUE(gone) << "thread " << tid
                    << " of a goroutine that exited locked still exists";
}

// Nested locks: the thread ends even if the goroutine locked twice.
TEST(LockOSThread, ExitWhileNestedLockedEndsThread) {
  long tid = 0;
  bool gone = false;
  goro::run([&] {
    auto c = goro::make_chan<long>();
    goro::go([c] {
      goro::lock_os_thread();
      goro::lock_os_thread();
      goro::unlock_os_thread();
      c.send(os_tid());
    });
    tid = c.recv().value_or(0);
    deadline limit(10s);
    while (!(gone = !thread_exists(tid)) && !limit.passed()) goro::sleep(1ms);
  });
  EXPECT_TRUE(gone);
}

// A goroutine that unlocked before exiting leaves its thread to the
// runtime: the thread is reused, not ended. Observed, not waited for: just
// before it returns, the goroutine spawns a child into its P's runnext, so
// the thread that ran the exit normally runs the child next. A child that
// reports the parent's thread id therefore ran on that thread after the
// parent had exited (the parent never parks between the spawn and its
// return, so the child cannot have run there earlier). With several Ps
// another thread may steal the child first; that attempt is retried, up to
// 200 times or 10 s. A runtime that ended the thread at the exit never
// lets a child report it.
TEST(LockOSThread, ExitAfterUnlockKeepsThread) {
  struct report {
    long parent = 0, child = 0;
  };
  int attempts = 0;
  report last;
  bool reused = false;
  goro::run([&] {
    auto c = goro::make_chan<report>();
    deadline limit(10s);
    while (!reused && attempts < 200 && !limit.passed()) {
      attempts++;
      goro::go([c] {
        goro::lock_os_thread();
        const long t = os_tid();
        goro::unlock_os_thread();
        goro::go([c, t] { c.send(report{t, os_tid()}); });
      });
      last = c.recv().value_or(report{});
      reused = last.parent != 0 && last.child == last.parent;
    }
  });
  EXPECT_TRUE(reused) << "no goroutine ran on the thread of a goroutine that "
                         "exited after unlock_os_thread ("
                      << attempts << " attempts; last: parent thread "
                      << last.parent << ", child thread " << last.child << ")";
}

// Many goroutines exit locked one after another; each takes its thread, so
// the number of threads stays bounded.
TEST(LockOSThread, ManyLockedExitsDoNotLeakThreads) {
  const int n = scaled(100, 30);
  int before = 0, after = 0;
  goro::run([&] {
    before = thread_count();
    std::set<long> tids;
    for (int i = 0; i < n; i++) {
      auto c = goro::make_chan<long>();
      goro::go([c] {
        goro::lock_os_thread();
        goro::sleep(100us);
        c.send(os_tid());
      });
      tids.insert(c.recv().value_or(0));
    }
    // Let the last threads finish exiting.
    deadline limit(10s);
    while ((after = thread_count()) > before + 2 && !limit.passed())
      goro::sleep(1ms);
  });
  EXPECT_LE(after, before + 2) << before << " threads before, " << after
                               << " after " << n << " locked exits";
}

// Goroutines started from a locked goroutine run elsewhere; the locked one
// keeps its thread while it waits for them.
TEST(LockOSThread, ChildrenOfLockedGoroutineRunElsewhere) {
  std::atomic<int> on_locked_thread{0};
  std::atomic<int> moved{0};
  goro::run([&] {
    goro::wait_group done;
    done.add(1);
    goro::go([&] {
      goro::lock_os_thread();
      const long tid = os_tid();
      goro::wait_group wg;
      wg.add(100);
      for (int i = 0; i < 100; i++) {
        goro::go([&] {
          if (os_tid() == tid) on_locked_thread.fetch_add(1);
          goro::gosched();
          if (os_tid() == tid) on_locked_thread.fetch_add(1);
          wg.done();
        });
      }
      wg.wait();
      if (os_tid() != tid) moved.fetch_add(1);
      goro::unlock_os_thread();
      done.done();
    });
    done.wait();
  });
  EXPECT_EQ(on_locked_thread.load(), 0);
  EXPECT_EQ(moved.load(), 0);
}

// The main goroutine may lock itself too; everything else keeps working.
TEST(LockOSThread, LockedMainGoroutine) {
  goro::run([] {
    goro::lock_os_thread();
    const long tid = os_tid();
    auto c = goro::make_chan<int>();
    std::atomic<int> sum{0};
    for (int i = 0; i < 20; i++) goro::go([c, i] { c.send(i); });
    for (int i = 0; i < 20; i++) {
      sum.fetch_add(c.recv().value_or(0));
      EXPECT_EQ(os_tid(), tid);
    }
    goro::sleep(1ms);
    EXPECT_EQ(os_tid(), tid);
    EXPECT_EQ(sum.load(), 190);
    goro::unlock_os_thread();
  });
}

// Several locked goroutines at once with one P: each hand-off goes
// through startlockedm/stoplockedm, and all of them finish.
TEST(LockOSThread, SeveralLockedGoroutinesShareOneP) {
  const int n = 8, rounds = scaled(50, 10);
  std::atomic<int> moved{0};
  goro::run([&] {
    procs_guard procs(1);
    auto c = goro::make_chan<int>();
    goro::wait_group wg;
    wg.add(n);
    for (int g = 0; g < n; g++) {
      goro::go([&] {
        goro::lock_os_thread();
        const long tid = os_tid();
        for (int i = 0; i < rounds; i++) {
          c.send(i);
          goro::gosched();
          if (os_tid() != tid) moved.fetch_add(1);
        }
        goro::unlock_os_thread();
        wg.done();
      });
    }
    for (int i = 0; i < n * rounds; i++) c.recv();
    wg.wait();
  });
  EXPECT_EQ(moved.load(), 0);
}

}  // namespace
