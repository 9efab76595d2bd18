// Tests for <goro/sync.hpp>: mutex, rwmutex, once, cond, semaphore. They
// port the intent of Go's sync tests (mutex_test.go, rwmutex_test.go,
// once_test.go, cond_test.go) and of golang.org/x/sync/semaphore's tests.
//
// No sleeps synchronise anything: waits are polls (gosched) on conditions
// with a deadline, so a broken primitive fails the test instead of hanging.
// Holding a lock "for a while" is a busy loop that yields (the workload, not
// synchronisation).
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace goro::detail {
// White-box access to the mutex state word (see sync.hpp).
struct mutex_test_access {
  static std::int32_t state(const goro::mutex& m) {
    return m.state_.load(std::memory_order_relaxed);
  }
  static constexpr std::int32_t starving_bit = goro::mutex::starving_bit;
  // Callers blocked (or about to block) in lock(): they register in the
  // state word just before they sleep, as in Go's sync.Mutex.
  static std::int32_t waiters(const goro::mutex& m) {
    return state(m) >> goro::mutex::waiter_shift;
  }
};
struct semaphore_test_access {
  static std::size_t waiters(const goro::semaphore& s) { return s.waiters(); }
};
}  // namespace goro::detail

namespace {

using namespace std::chrono_literals;
using goro::detail::mutex_test_access;
using goro::detail::semaphore_test_access;
using goro_test::scaled;

using goro_test::eventually;

// Busy for d, yielding (stands in for Go's time.Sleep inside a critical
// section: the holder is off the CPU part of the time).
void busy_for(std::chrono::microseconds d) {
  const auto end = std::chrono::steady_clock::now() + d;
  while (std::chrono::steady_clock::now() < end) goro::gosched();
}

// ---------------------------------------------------------------------------
// mutex

// Go's TestMutex: try_lock semantics, then goroutines hammering one mutex
// with lock/unlock and try_lock; a plain counter and an "inside" flag check
// mutual exclusion.
TEST(Mutex, HammerAndTryLock) {
  goro::run([] {
    goro::mutex m;
    m.lock();
    EXPECT_FALSE(m.try_lock()) << "try_lock succeeded with the mutex locked";
    m.unlock();
    ASSERT_TRUE(m.try_lock()) << "try_lock failed with the mutex unlocked";
    m.unlock();

    const int goroutines = 10;
    const int loops = scaled(20000, 2000);
    std::int64_t counter = 0;  // protected by m, deliberately not atomic
    std::atomic<bool> inside{false};
    std::atomic<int> violations{0};
    std::atomic<int> tried{0};
    goro::wait_group wg;
    wg.add(goroutines);
    for (int g = 0; g < goroutines; g++) {
      goro::go([&] {
        for (int i = 0; i < loops; i++) {
          if (i % 3 == 0) {
            if (!m.try_lock()) continue;
            tried.fetch_add(1, std::memory_order_relaxed);
          } else {
            m.lock();
          }
          if (inside.exchange(true)) violations.fetch_add(1);
          counter++;
          if (i % 64 == 0) goro::gosched();  // be preempted holding it
          inside.store(false);
          m.unlock();
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(violations.load(), 0);
    const std::int64_t locked =
        std::int64_t(goroutines) * (loops - (loops + 2) / 3);
    EXPECT_EQ(counter, locked + tried.load());
    EXPECT_EQ(mutex_test_access::state(m), 0) << "mutex not left idle";
  });
}

struct fairness_result {
  bool finished = false;
  int max_hog_rounds = 0;     // hog lock rounds during one contender wait
  bool saw_starving = false;  // the hog saw starvation mode while holding
  std::int32_t final_state = -1;
};

// Go's TestMutexFairness: one goroutine re-locks the mutex in a loop and
// holds it ~100 us each time; another wants it 10 times. Without starvation
// mode the hog would win every race (it is running when it unlocks and
// relocks at once), so the other could wait forever.
// until_starving: the contender keeps trying (up to 200 times) until the
// hog has seen starvation mode, so the test does not depend on one of ten
// waits happening to exceed 1 ms on a loaded machine.
fairness_result run_fairness(bool until_starving = false) {
  fairness_result res;
  goro::run([&] {
    goro::mutex mu;
    std::atomic<bool> stop{false};
    std::atomic<bool> done{false};
    std::atomic<int> hog_rounds{0};
    std::atomic<bool> saw_starving{false};
    std::atomic<int> max_rounds{0};
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      while (!stop.load()) {
        mu.lock();
        busy_for(100us);
        if (mutex_test_access::state(mu) & mutex_test_access::starving_bit)
          saw_starving.store(true);
        hog_rounds.fetch_add(1);
        mu.unlock();
      }
      wg.done();
    });
    goro::go([&] {
      for (int i = 0;
           i < 10 || (until_starving && !saw_starving.load() && i < 200); i++) {
        busy_for(100us);
        const int before = hog_rounds.load();
        mu.lock();
        const int rounds = hog_rounds.load() - before;
        mu.unlock();
        if (rounds > max_rounds.load()) max_rounds.store(rounds);
      }
      done.store(true);
      wg.done();
    });
    res.finished = eventually([&] { return done.load(); }, 5000ms);
    stop.store(true);
    if (res.finished) {
      wg.wait();
      res.final_state = mutex_test_access::state(mu);
    } else {
      // The contender is stuck behind the hog; stopping the hog lets it
      // through, so wait for both before the mutex goes out of scope.
      wg.wait();
    }
    res.max_hog_rounds = max_rounds.load();
    res.saw_starving = saw_starving.load();
  });
  return res;
}

TEST(Mutex, Fairness) {
  const fairness_result r = run_fairness();
  ASSERT_TRUE(r.finished) << "can't acquire the mutex 10 times in 5 s";
  // Starvation mode kicks in after 1 ms of waiting, i.e. about 10 hog
  // rounds of 100 us; allow a wide margin for slow (sanitized) machines.
  EXPECT_LT(r.max_hog_rounds, 500)
      << "the contender waited through too many rounds of the hog";
}

TEST(Mutex, StarvationModeEnteredAndLeft) {
  const fairness_result r = run_fairness(true);
  ASSERT_TRUE(r.finished);
  EXPECT_TRUE(r.saw_starving)
      << "a waiter starved > 1 ms but the mutex never entered starvation mode";
  EXPECT_EQ(r.final_state, 0)
      << "mutex still starving / locked / with waiters after everyone left";
}

// Waiters park their goroutine, not the thread: with one P, the holder and
// many blocked waiters coexist, and everyone gets through.
TEST(Mutex, WaitersParkNotBlockThread) {
  goro::run([] {
    goro::mutex m;
    const int n = 50;
    std::atomic<int> queued{0}, got{0};
    goro::wait_group wg;
    m.lock();
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        queued.fetch_add(1);
        m.lock();
        got.fetch_add(1);
        m.unlock();
        wg.done();
      });
    }
    // If lock() blocked the thread, at GOMAXPROCS=1 we would never get back
    // here to see them all queued.
    ASSERT_TRUE(eventually([&] { return queued.load() == n; }));
    goro::gosched();
    EXPECT_EQ(got.load(), 0);
    m.unlock();
    wg.wait();
    EXPECT_EQ(got.load(), n);
    EXPECT_EQ(mutex_test_access::state(m), 0);
  });
}

// ---------------------------------------------------------------------------
// rwmutex

// Go's TestRWMutex (hammerRWMutex): readers add 1 to `activity`, writers
// 10000; a reader must never see a writer, a writer never anyone else.
TEST(RWMutex, WritersExclusive) {
  goro::run([] {
    const int iterations = scaled(2000, 300);
    for (int readers : {1, 3, 10}) {
      goro::rwmutex rw;
      std::atomic<std::int32_t> activity{0};
      std::atomic<int> bad{0};
      goro::wait_group wg;
      auto reader = [&](bool use_try) {
        for (int i = 0; i < iterations; i++) {
          if (use_try && i % 2 == 0) {
            if (!rw.try_lock_shared()) continue;
          } else {
            rw.lock_shared();
          }
          const std::int32_t n = activity.fetch_add(1) + 1;
          if (n < 1 || n >= 10000) bad.fetch_add(1);
          for (int k = 0; k < 100; k++) goro::preempt_point();
          if (i % 16 == 0) goro::gosched();
          activity.fetch_sub(1);
          rw.unlock_shared();
        }
        wg.done();
      };
      auto writer = [&](bool use_try) {
        for (int i = 0; i < iterations; i++) {
          if (use_try && i % 2 == 0) {
            if (!rw.try_lock()) continue;
          } else {
            rw.lock();
          }
          const std::int32_t n = activity.fetch_add(10000) + 10000;
          if (n != 10000) bad.fetch_add(1);
          for (int k = 0; k < 100; k++) goro::preempt_point();
          if (i % 16 == 0) goro::gosched();
          activity.fetch_sub(10000);
          rw.unlock();
        }
        wg.done();
      };
      wg.add(2 + readers);
      goro::go(writer, false);
      int i = 0;
      for (; i < readers / 2; i++) goro::go(reader, i % 2 == 1);
      goro::go(writer, true);
      for (; i < readers; i++) goro::go(reader, i % 2 == 1);
      wg.wait();
      EXPECT_EQ(bad.load(), 0) << readers << " readers";
      EXPECT_EQ(activity.load(), 0);
      // Idle again: both sides can be taken.
      EXPECT_TRUE(rw.try_lock());
      rw.unlock();
      EXPECT_TRUE(rw.try_lock_shared());
      rw.unlock_shared();
    }
  });
}

// Go's TestParallelReaders: N readers hold the read lock at the same time,
// provably: each waits inside for all the others to arrive.
TEST(RWMutex, ReadersOverlap) {
  goro::run([] {
    for (int n : {1, 4, 16}) {
      goro::rwmutex rw;
      std::atomic<int> arrived{0}, timed_out{0};
      goro::wait_group wg;
      wg.add(n);
      for (int i = 0; i < n; i++) {
        goro::go([&] {
          rw.lock_shared();
          arrived.fetch_add(1);
          if (!eventually([&] { return arrived.load() == n; }))
            timed_out.fetch_add(1);
          rw.unlock_shared();
          wg.done();
        });
      }
      wg.wait();
      EXPECT_EQ(timed_out.load(), 0)
          << n << " readers could not all hold the read lock together";
    }
  });
}

// Writer preference: once a writer waits, new readers queue behind it.
TEST(RWMutex, WaitingWriterBlocksNewReaders) {
  goro::run([] {
    goro::rwmutex rw;
    std::atomic<int> seq{0};
    std::atomic<int> writer_at{-1}, reader2_at{-1};
    goro::wait_group wg;
    rw.lock_shared();  // reader 1: main
    wg.add(2);
    goro::go([&] {
      rw.lock();
      writer_at.store(seq.fetch_add(1));
      busy_for(200us);
      rw.unlock();
      wg.done();
    });
    // The writer has announced itself once shared locking fails.
    ASSERT_TRUE(eventually([&] {
      if (rw.try_lock_shared()) {
        rw.unlock_shared();
        return false;
      }
      return true;
    })) << "the waiting writer never turned readers away";
    goro::go([&] {
      rw.lock_shared();  // must wait for the writer
      reader2_at.store(seq.fetch_add(1));
      rw.unlock_shared();
      wg.done();
    });
    for (int i = 0; i < 20; i++) goro::gosched();
    EXPECT_EQ(writer_at.load(), -1) << "writer got in while a reader held it";
    EXPECT_EQ(reader2_at.load(), -1) << "a new reader overtook the writer";
    rw.unlock_shared();
    wg.wait();
    EXPECT_EQ(writer_at.load(), 0);
    EXPECT_EQ(reader2_at.load(), 1);
  });
}

// The C++ lifetime rule for mutexes ([thread.mutex.requirements]): once a
// thread has acquired the lock after another's unlock, it may destroy the
// object even while that unlock has not returned yet. Here the last reader
// to leave, woken by the writer's unlock, deletes the rwmutex at once; the
// writer's unlock must not touch it after waking that reader. The window is
// narrow (the woken readers usually run after the writer's unlock returns);
// when a broken order hits it, ASan reports the use after free.
TEST(RWMutex, DestroyedByLastReaderAfterUnlock) {
  goro::run([] {
    const int iters = scaled(2000, 300);
    const int readers = 4;
    for (int it = 0; it < iters; it++) {
      struct shared_state {
        goro::rwmutex rw;
        std::atomic<int> left{readers};
      };
      auto* st = new shared_state;
      std::atomic<int> entered{0};
      goro::wait_group wg;
      st->rw.lock();
      wg.add(readers);
      for (int r = 0; r < readers; r++) {
        goro::go([st, &entered, &wg] {
          entered.fetch_add(1);
          st->rw.lock_shared();  // queues behind the writer
          st->rw.unlock_shared();
          if (st->left.fetch_sub(1) == 1) delete st;
          wg.done();
        });
      }
      ASSERT_TRUE(eventually([&] { return entered.load() == readers; }));
      goro::gosched();
      st->rw.unlock();
      wg.wait();
    }
  });
}

// The same for mutex: the waiter that gets the lock next deletes it.
TEST(Mutex, DestroyedByNextOwnerAfterUnlock) {
  goro::run([] {
    const int iters = scaled(5000, 500);
    for (int it = 0; it < iters; it++) {
      struct shared_state {
        goro::mutex m;
        bool done = false;  // under m
      };
      auto* st = new shared_state;
      std::atomic<bool> trying{false};
      goro::wait_group wg;
      st->m.lock();
      wg.add(1);
      goro::go([st, &trying, &wg] {
        trying.store(true);
        st->m.lock();
        const bool done = st->done;
        st->m.unlock();
        if (done) delete st;
        wg.done();
      });
      ASSERT_TRUE(eventually([&] { return trying.load(); }));
      if (it % 2 == 0) goro::gosched();
      st->done = true;
      st->m.unlock();
      wg.wait();
    }
  });
}

TEST(RWMutex, TryLockStates) {
  goro::run([] {
    goro::rwmutex rw;
    ASSERT_TRUE(rw.try_lock());
    EXPECT_FALSE(rw.try_lock());
    EXPECT_FALSE(rw.try_lock_shared());
    rw.unlock();
    ASSERT_TRUE(rw.try_lock_shared());
    EXPECT_TRUE(rw.try_lock_shared());
    EXPECT_FALSE(rw.try_lock());
    rw.unlock_shared();
    rw.unlock_shared();
    EXPECT_TRUE(rw.try_lock());
    rw.unlock();
  });
}

// ---------------------------------------------------------------------------
// once

// Go's TestOnce under contention: 100 goroutines call; f runs once, and
// nobody returns before it has finished.
TEST(Once, RunsExactlyOnceUnderContention) {
  goro::run([] {
    goro::once o;
    std::atomic<int> runs{0};
    std::atomic<bool> finished{false};
    std::atomic<int> early{0};
    const int n = 100;
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        o.call([&] {
          runs.fetch_add(1);
          busy_for(2000us);  // others pile up behind us
          finished.store(true);
        });
        if (!finished.load()) early.fetch_add(1);
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(early.load(), 0) << "a caller returned before f finished";
    // Arguments are forwarded; a done once ignores later functions.
    int x = 0;
    o.call([](int& v) { v = 1; }, std::ref(x));
    EXPECT_EQ(x, 0);
    goro::once o2;
    o2.call([](int& v, int add) { v += add; }, std::ref(x), 5);
    EXPECT_EQ(x, 5);
  });
}

// Go's TestOncePanic: a run that panics (throws) counts as done.
TEST(Once, ThrowingFunctionCountsAsDone) {
  goro::run([] {
    goro::once o;
    EXPECT_THROW(o.call([] { throw std::runtime_error("failed"); }),
                 std::runtime_error);
    bool ran = false;
    o.call([&] { ran = true; });
    EXPECT_FALSE(ran) << "once ran again after the first call threw";

    // Callers waiting while the first run throws return normally.
    goro::once o2;
    std::atomic<int> threw{0}, returned{0}, runs{0};
    goro::wait_group wg;
    const int n = 20;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        try {
          o2.call([&] {
            runs.fetch_add(1);
            busy_for(1000us);
            throw std::runtime_error("boom");
          });
          returned.fetch_add(1);
        } catch (const std::runtime_error&) {
          threw.fetch_add(1);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(runs.load(), 1);
    EXPECT_EQ(threw.load(), 1);
    EXPECT_EQ(returned.load(), n - 1);
  });
}

// ---------------------------------------------------------------------------
// cond

// Go's TestCondBroadcast: N waiters, one broadcast wakes them all.
TEST(Cond, BroadcastWakesAll) {
  goro::run([] {
    goro::mutex m;
    goro::cond c;
    const int n = 200;
    int waiting = 0;  // under m
    int generation = 0;
    std::atomic<int> awake{0};
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        std::unique_lock<goro::mutex> lk(m);
        waiting++;
        const int gen = generation;
        // No predicate loop around a lost wake-up: if broadcast missed us
        // we would never reach `awake`.
        c.wait(lk);
        if (generation == gen + 1) awake.fetch_add(1);
        lk.unlock();  // before done: main destroys m after wg.wait()
        wg.done();
      });
    }
    // Once we hold m and see all n counted, all of them are in wait():
    // they took their tickets before releasing m.
    ASSERT_TRUE(eventually([&] {
      std::lock_guard<goro::mutex> lk(m);
      return waiting == n;
    }));
    {
      std::lock_guard<goro::mutex> lk(m);
      generation++;
      c.broadcast();
    }
    ASSERT_TRUE(eventually([&] { return awake.load() == n; }))
        << awake.load() << " of " << n << " woke";
    wg.wait();
  });
}

// Go's TestCondSignal + TestCondSignalGenerations: each signal wakes exactly
// one waiter, the one that has waited longest.
TEST(Cond, SignalWakesOneInFifoOrder) {
  goro::run([] {
    goro::mutex m;
    goro::cond c;
    const int n = 20;
    int waiting = 0;
    std::vector<int> order;  // under m
    std::atomic<int> awake{0};
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        std::unique_lock<goro::mutex> lk(m);
        waiting++;
        c.wait(lk);
        order.push_back(i);
        awake.fetch_add(1);
        lk.unlock();
        wg.done();
      });
      // Queue them in a known order: the next starts after this one waits.
      ASSERT_TRUE(eventually([&] {
        std::lock_guard<goro::mutex> lk(m);
        return waiting == i + 1;
      }));
    }
    for (int k = 1; k <= n; k++) {
      c.signal();
      ASSERT_TRUE(eventually([&] { return awake.load() >= k; }))
          << "signal " << k << " woke nobody";
      for (int y = 0; y < 50; y++) goro::gosched();
      ASSERT_EQ(awake.load(), k) << "one signal woke several waiters";
    }
    wg.wait();
    std::vector<int> want(n);
    for (int i = 0; i < n; i++) want[i] = i;
    EXPECT_EQ(order, want);
    c.signal();  // no waiters: a no-op
    c.broadcast();
  });
}

// Go's TestCondSignalStealing: a broadcast racing with a new waiter must
// still wake the waiter that was there first.
TEST(Cond, SignalStealing) {
  goro::run([] {
    const int iters = scaled(1000, 200);
    for (int it = 0; it < iters; it++) {
      goro::mutex m;
      goro::cond c;
      std::atomic<int> state{0};
      bool done = false;  // under m
      goro::wait_group wg;
      wg.add(3);
      goro::go([&] {
        std::unique_lock<goro::mutex> lk(m);
        state.store(1);
        c.wait(lk);
        state.store(2);
        lk.unlock();
        wg.done();
      });
      ASSERT_TRUE(eventually([&] { return state.load() >= 1; }));
      // The first waiter is inside wait() once we get m after it set 1.
      m.lock();
      m.unlock();
      goro::go([&] {
        c.broadcast();
        wg.done();
      });
      goro::go([&] {
        std::unique_lock<goro::mutex> lk(m);
        while (!done) c.wait(lk);
        lk.unlock();
        wg.done();
      });
      ASSERT_TRUE(eventually([&] { return state.load() == 2; }, 2000ms))
          << "the first waiter missed the broadcast (iteration " << it << ")";
      {
        std::lock_guard<goro::mutex> lk(m);
        done = true;
      }
      c.broadcast();
      wg.wait();
    }
  });
}

// Any BasicLockable, and plain threads as waiters or signallers.
TEST(Cond, AnyLockAndPlainThreads) {
  goro::run([] {
    // A goroutine waits holding the shared side of an rwmutex.
    {
      goro::rwmutex rw;
      goro::cond c;
      bool ready = false;
      std::atomic<bool> got{false};
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        std::shared_lock<goro::rwmutex> lk(rw);
        c.wait(lk, [&] { return ready; });
        got.store(true);
        lk.unlock();
        wg.done();
      });
      {
        std::lock_guard<goro::rwmutex> lk(rw);
        ready = true;
      }
      c.broadcast();
      wg.wait();
      EXPECT_TRUE(got.load());
    }
    // A plain thread waits on a goro::mutex; a goroutine signals.
    {
      goro::mutex m;
      goro::cond c;
      std::unique_lock<goro::mutex> not_held(m, std::defer_lock);
      EXPECT_THROW(c.wait(not_held), std::system_error);
      int value = 0;
      std::thread t([&] {
        std::unique_lock<goro::mutex> lk(m);
        c.wait(lk, [&] { return value == 1; });
        value = 2;
        c.broadcast();
      });
      // (broadcast: main waits on the same cond for a different condition,
      // and a signal could pick it instead of the thread.)
      goro::go([&] {
        std::lock_guard<goro::mutex> lk(m);
        value = 1;
        c.broadcast();
      });
      {
        std::unique_lock<goro::mutex> lk(m);
        c.wait(lk, [&] { return value == 2; });
      }
      t.join();
      EXPECT_EQ(value, 2);
    }
    // Plain threads only, with a std::mutex (the template wait).
    {
      std::mutex sm;
      goro::cond c;
      int stage = 0;
      std::thread a([&] {
        std::unique_lock<std::mutex> lk(sm);
        c.wait(lk, [&] { return stage == 1; });
        stage = 2;
        c.broadcast();
      });
      std::thread b([&] {
        std::unique_lock<std::mutex> lk(sm);
        stage = 1;
        c.broadcast();
        c.wait(lk, [&] { return stage == 2; });
      });
      a.join();
      b.join();
      EXPECT_EQ(stage, 2);
    }
  });
}

// ---------------------------------------------------------------------------
// semaphore (golang.org/x/sync/semaphore.Weighted)

// x/sync's TestWeighted: goroutines acquire and release random weights; the
// units held never exceed the capacity.
TEST(Semaphore, WeightedHammer) {
  goro::run([] {
    const std::int64_t cap = 8;
    goro::semaphore sem(cap);
    std::atomic<std::int64_t> held{0};
    std::atomic<int> over{0};
    const int n = 16;
    const int loops = scaled(3000, 400);
    goro::wait_group wg;
    wg.add(n);
    for (int g = 0; g < n; g++) {
      goro::go([&, g] {
        for (int i = 0; i < loops; i++) {
          const std::int64_t w = 1 + (g + i) % cap;
          if (i % 5 == 0) {
            if (!sem.try_acquire(w)) continue;
          } else {
            sem.acquire(w);
          }
          if (held.fetch_add(w) + w > cap) over.fetch_add(1);
          if (i % 8 == 0) goro::gosched();
          held.fetch_sub(w);
          sem.release(w);
        }
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(over.load(), 0);
    EXPECT_TRUE(sem.try_acquire(cap)) << "units lost";
    sem.release(cap);
  });
}

// x/sync's TestWeightedTryAcquire.
TEST(Semaphore, TryAcquire) {
  goro::semaphore sem(2);
  sem.acquire(1);
  EXPECT_TRUE(sem.try_acquire(1));
  EXPECT_FALSE(sem.try_acquire(1));
  sem.release(2);
  EXPECT_TRUE(sem.try_acquire(1));
  sem.acquire(1);
  EXPECT_FALSE(sem.try_acquire(1));
  EXPECT_FALSE(sem.try_acquire(3));
  sem.release(2);
  EXPECT_EQ(sem.capacity(), 2);
}

TEST(Semaphore, MisuseThrows) {
  goro::semaphore sem(3);
  EXPECT_THROW(sem.acquire(4), std::invalid_argument);
  EXPECT_THROW(sem.acquire(-1), std::invalid_argument);
  EXPECT_THROW(sem.try_acquire(-1), std::invalid_argument);
  EXPECT_THROW(sem.release(-1), std::invalid_argument);
  EXPECT_THROW(sem.release(1), std::logic_error);  // released more than held
  sem.acquire(2);
  EXPECT_THROW(sem.release(3), std::logic_error);
  sem.release(2);
  EXPECT_TRUE(sem.try_acquire(3)) << "a failed release changed the count";
  sem.release(3);
  EXPECT_THROW(goro::semaphore(-1), std::invalid_argument);
}

// Strict FIFO: a queued large request is not overtaken by a later small one
// that would fit, and releases serve the queue in order.
TEST(Semaphore, FifoOrder) {
  goro::run([] {
    goro::semaphore sem(10);
    auto waiters = [&] { return semaphore_test_access::waiters(sem); };
    std::atomic<bool> a_got{false}, b_got{false}, c_got{false};
    goro::wait_group wg;
    sem.acquire(8);  // 2 left
    wg.add(3);
    goro::go([&] {
      sem.acquire(5);
      a_got = true;
      wg.done();
    });
    ASSERT_TRUE(eventually([&] { return waiters() == 1; }));
    goro::go([&] {
      sem.acquire(1);
      b_got = true;
      wg.done();
    });
    ASSERT_TRUE(eventually([&] { return waiters() == 2; }));
    EXPECT_FALSE(b_got.load()) << "1 unit overtook a queued request for 5";
    EXPECT_FALSE(sem.try_acquire(1)) << "try_acquire overtook the queue";
    goro::go([&] {
      sem.acquire(4);
      c_got = true;
      wg.done();
    });
    ASSERT_TRUE(eventually([&] { return waiters() == 3; }));

    sem.release(3);  // 5 free: A (5) fits, then B (1) does not
    ASSERT_TRUE(eventually([&] { return a_got.load(); }));
    EXPECT_EQ(waiters(), 2u);
    EXPECT_FALSE(b_got.load());
    sem.release(1);  // B fits, C (4) does not
    ASSERT_TRUE(eventually([&] { return b_got.load(); }));
    EXPECT_EQ(waiters(), 1u);
    EXPECT_FALSE(c_got.load());
    sem.release(4);  // 5 held by A + 1 by B: C fits
    ASSERT_TRUE(eventually([&] { return c_got.load(); }));
    EXPECT_EQ(waiters(), 0u);
    wg.wait();
    sem.release(5 + 1 + 4);
    EXPECT_TRUE(sem.try_acquire(10));
    sem.release(10);
  });
}

// x/sync's TestLargeAcquireDoesntStarve: goroutines cycling one unit each
// cannot keep out a request for all units.
TEST(Semaphore, LargeAcquireDoesntStarve) {
  goro::run([] {
    const std::int64_t n = std::max(2, goro::gomaxprocs());
    goro::semaphore sem(n);
    std::atomic<bool> running{true};
    goro::wait_group wg;
    wg.add(static_cast<std::int64_t>(n));
    for (std::int64_t i = 0; i < n; i++) {
      sem.acquire(1);
      goro::go([&] {
        while (running.load()) {
          busy_for(100us);
          sem.release(1);
          sem.acquire(1);
        }
        sem.release(1);
        wg.done();
      });
    }
    sem.acquire(n);  // must get through
    running.store(false);
    sem.release(n);
    wg.wait();
  });
}

// A plain thread blocks on the semaphore while goroutines hold it.
TEST(Semaphore, PlainThreadWaits) {
  goro::run([] {
    goro::semaphore sem(1);
    sem.acquire();
    std::atomic<bool> got{false};
    std::thread t([&] {
      sem.acquire();
      got = true;
      sem.release();
    });
    ASSERT_TRUE(
        eventually([&] { return semaphore_test_access::waiters(sem) == 1; }));
    EXPECT_FALSE(got.load());
    sem.release();
    t.join();
    EXPECT_TRUE(got.load());
  });
}

// ---------------------------------------------------------------------------
// The standard lock adaptors.

TEST(SyncStdLocks, AdaptorsWork) {
  goro::run([] {
    goro::mutex m1, m2;
    goro::rwmutex rw;
    std::int64_t a = 0, b = 0, shared_value = 0;
    const int n = 8;
    const int loops = scaled(3000, 500);
    goro::wait_group wg;
    wg.add(n);
    for (int g = 0; g < n; g++) {
      goro::go([&, g] {
        for (int i = 0; i < loops; i++) {
          switch (i % 5) {
            case 0: {
              std::lock_guard<goro::mutex> lk(m1);
              a++;
              break;
            }
            case 1: {
              std::unique_lock<goro::mutex> lk(m2, std::defer_lock);
              if (!lk.try_lock()) lk.lock();
              b++;
              break;
            }
            case 2: {
              // std::lock's deadlock avoidance: opposite orders are fine.
              if (g % 2 == 0) {
                std::scoped_lock lk(m1, m2, rw);
                a++, b++, shared_value++;
              } else {
                std::scoped_lock lk(rw, m2, m1);
                a++, b++, shared_value++;
              }
              if (i % 10 == 2) goro::gosched();
              break;
            }
            case 3: {
              std::shared_lock<goro::rwmutex> lk(rw);
              [[maybe_unused]] volatile std::int64_t v = shared_value;
              break;
            }
            case 4: {
              std::unique_lock<goro::rwmutex> lk(rw);
              shared_value++;
              break;
            }
          }
        }
        wg.done();
      });
    }
    wg.wait();
    const std::int64_t per = loops / 5;  // loops is a multiple of 5
    EXPECT_EQ(a, n * (per + per));
    EXPECT_EQ(b, n * (per + per));
    EXPECT_EQ(shared_value, n * (per + per));
    std::shared_lock<goro::rwmutex> s1(rw), s2(rw);  // shared twice
    EXPECT_TRUE(s1.owns_lock() && s2.owns_lock());
  });
}

// ---------------------------------------------------------------------------
// Plain threads and goroutines contending for one mutex.

TEST(SyncPlainThread, ThreadHoldsGoroutinesWait) {
  goro::run([] {
    goro::mutex m;
    std::atomic<bool> held{false}, release{false};
    std::thread t([&] {
      m.lock();
      held = true;
      while (!release.load()) std::this_thread::yield();
      m.unlock();
    });
    ASSERT_TRUE(eventually([&] { return held.load(); }));
    const int n = 10;
    std::atomic<int> trying{0}, got{0};
    goro::wait_group wg;
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&] {
        trying.fetch_add(1);
        m.lock();
        got.fetch_add(1);
        m.unlock();
        wg.done();
      });
    }
    // The blocked goroutines leave the Ps free: we keep running, and see
    // all n of them blocked in lock() while the thread holds the mutex.
    EXPECT_TRUE(eventually([&] { return mutex_test_access::waiters(m) == n; }))
        << mutex_test_access::waiters(m) << " of " << n
        << " goroutines blocked in lock() (" << trying.load() << " tried)";
    EXPECT_EQ(got.load(), 0) << "a goroutine got a mutex a thread holds";
    release = true;
    wg.wait();
    t.join();
    EXPECT_EQ(got.load(), n);
  });
}

TEST(SyncPlainThread, GoroutineHoldsThreadWaits) {
  goro::run([] {
    goro::mutex m;
    std::atomic<bool> trying{false}, got{false};
    m.lock();
    std::thread t([&] {
      trying = true;
      m.lock();  // blocks this thread until the goroutine unlocks
      got = true;
      m.unlock();
    });
    // Observed, not waited for: the thread registers as a waiter just
    // before it sleeps in lock().
    EXPECT_TRUE(eventually([&] { return mutex_test_access::waiters(m) == 1; }))
        << "the thread never blocked in lock() (trying: " << trying.load()
        << ")";
    EXPECT_FALSE(got.load()) << "the thread got a locked mutex";
    m.unlock();
    t.join();
    EXPECT_TRUE(got.load());
    EXPECT_EQ(mutex_test_access::state(m), 0);
  });
}

TEST(SyncPlainThread, MixedHammer) {
  goro::run([] {
    goro::mutex m;
    std::int64_t counter = 0;
    const int loops = scaled(20000, 2000);
    const int threads = 2, goroutines = 4;
    goro::wait_group wg;
    wg.add(goroutines);
    for (int g = 0; g < goroutines; g++) {
      goro::go([&] {
        for (int i = 0; i < loops; i++) {
          std::lock_guard<goro::mutex> lk(m);
          counter++;
        }
        wg.done();
      });
    }
    std::vector<std::thread> ts;
    for (int i = 0; i < threads; i++) {
      ts.emplace_back([&] {
        for (int j = 0; j < loops; j++) {
          std::lock_guard<goro::mutex> lk(m);
          counter++;
        }
      });
    }
    wg.wait();
    for (auto& t : ts) t.join();
    EXPECT_EQ(counter, std::int64_t(threads + goroutines) * loops);
    EXPECT_EQ(mutex_test_access::state(m), 0);
  });
}

// Before the runtime is needed at all: a plain thread using the primitives.
TEST(SyncPlainThread, WithoutGoroutines) {
  goro::mutex m;
  goro::rwmutex rw;
  goro::once o;
  int counter = 0;
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; i++) {
    ts.emplace_back([&] {
      for (int j = 0; j < 1000; j++) {
        {
          std::lock_guard<goro::mutex> lk(m);
          counter++;
        }
        { std::shared_lock<goro::rwmutex> lk(rw); }
        o.call([&] {
          std::lock_guard<goro::mutex> lk(m);
          counter += 1000000;
        });
      }
    });
  }
  for (auto& t : ts) t.join();
  EXPECT_EQ(counter, 1000000 + 4000);
}

// ---------------------------------------------------------------------------
// Misuse: Go's fatal errors (TestMutexMisuse).

class SyncDeathTest : public ::testing::Test {
 protected:
  void SetUp() override { GTEST_FLAG_SET(death_test_style, "threadsafe"); }
};

TEST_F(SyncDeathTest, MutexUnlockOfUnlocked) {
  EXPECT_EXIT(goro::run([] {
                goro::mutex m;
                m.unlock();
              }),
              ::testing::ExitedWithCode(2),
              "fatal error: sync: unlock of unlocked mutex");
}

TEST_F(SyncDeathTest, MutexUnlockTwice) {
  EXPECT_EXIT(goro::run([] {
                goro::mutex m;
                m.lock();
                m.unlock();
                m.unlock();
              }),
              ::testing::ExitedWithCode(2),
              "fatal error: sync: unlock of unlocked mutex");
}

TEST_F(SyncDeathTest, RWMutexUnlockOfUnlocked) {
  EXPECT_EXIT(goro::run([] {
                goro::rwmutex rw;
                rw.unlock();
              }),
              ::testing::ExitedWithCode(2),
              "fatal error: sync: Unlock of unlocked RWMutex");
}

TEST_F(SyncDeathTest, RWMutexRUnlockOfUnlocked) {
  EXPECT_EXIT(goro::run([] {
                goro::rwmutex rw;
                rw.unlock_shared();
              }),
              ::testing::ExitedWithCode(2),
              "fatal error: sync: RUnlock of unlocked RWMutex");
}

TEST_F(SyncDeathTest, RWMutexRUnlockWhileWriteLocked) {
  EXPECT_EXIT(goro::run([] {
                goro::rwmutex rw;
                rw.lock();
                rw.unlock_shared();
              }),
              ::testing::ExitedWithCode(2),
              "fatal error: sync: RUnlock of unlocked RWMutex");
}

}  // namespace
