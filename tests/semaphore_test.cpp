// goro::semaphore's acquire that can give up: acquire(ctx, n) and
// try_acquire_for(d, n), after x/sync's semaphore_test.go
// (TestWeightedAcquireCtx, TestWeightedPanic, TestLargeAcquireDoesntStarve,
// TestAllocCancelDoesntStarve) plus a hammer of grants racing cancels that
// must leave every unit accounted for. The plain acquire/release tests are
// in sync_test.cpp.
#include <atomic>
#include <chrono>
#include <goro/goro.hpp>
#include <random>
#include <stdexcept>
#include <system_error>

#include "test_support.hpp"

namespace goro::detail {
struct semaphore_test_access {
  static std::size_t waiters(const goro::semaphore& s) { return s.waiters(); }
};
}  // namespace goro::detail

namespace {

using namespace std::chrono_literals;
using goro::detail::semaphore_test_access;
using goro_test::eventually;

std::size_t waiters(const goro::semaphore& s) {
  return semaphore_test_access::waiters(s);
}

TEST(SemaphoreCtx, AcquiresWhenFree) {
  goro::run([] {
    goro::semaphore sem(3);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    EXPECT_FALSE(sem.acquire(ctx, 2));
    EXPECT_FALSE(sem.acquire(goro::background(), 1));
    EXPECT_FALSE(sem.try_acquire(1));  // all 3 held
    sem.release(3);
    cancel();
  });
}

// x/sync: "ctx becoming done has happened before acquiring": a done context
// fails even though the units are free.
TEST(SemaphoreCtx, DoneContextFailsAtOnce) {
  goro::run([] {
    goro::semaphore sem(1);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    cancel();
    EXPECT_EQ(sem.acquire(ctx), goro::context_errc::canceled);
    EXPECT_TRUE(sem.try_acquire(1));  // nothing was taken
  });
}

TEST(SemaphoreCtx, CancelledWhileWaiting) {
  goro::run([] {
    goro::semaphore sem(2);
    sem.acquire(2);
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto result = goro::make_chan<std::error_code>(1);
    goro::go([&sem, c = ctx, result] { result.send(sem.acquire(c, 1)); });
    ASSERT_TRUE(eventually([&] { return waiters(sem) == 1; }));
    EXPECT_FALSE(result.try_recv());  // still waiting
    cancel();
    EXPECT_EQ(result.recv(), std::error_code(goro::context_errc::canceled));
    EXPECT_EQ(waiters(sem), 0u);  // took itself out of the queue
    sem.release(2);
    EXPECT_TRUE(sem.try_acquire(2));  // no unit leaked to the quitter
  });
}

TEST(SemaphoreCtx, DeadlineWhileWaiting) {
  goro::run([] {
    goro::semaphore sem(1);
    sem.acquire();
    // t0 before the deadline is set: the deadline is 20 ms after a moment
    // at or after t0 (taken after it, a loaded machine saw 19.93 ms).
    const auto t0 = std::chrono::steady_clock::now();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 20ms);
    EXPECT_EQ(sem.acquire(ctx), goro::context_errc::deadline_exceeded);
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 20ms);
    cancel();
    sem.release();
  });
}

TEST(SemaphoreCtx, GrantedWhileWaiting) {
  goro::run([] {
    goro::semaphore sem(1);
    sem.acquire();
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto result = goro::make_chan<std::error_code>(1);
    goro::go([&sem, c = ctx, result] { result.send(sem.acquire(c, 1)); });
    ASSERT_TRUE(eventually([&] { return waiters(sem) == 1; }));
    sem.release();
    EXPECT_EQ(result.recv(), std::error_code());
    EXPECT_FALSE(sem.try_acquire());  // the waiter holds it
    cancel();                         // too late: it stays held
    EXPECT_FALSE(sem.try_acquire());
    sem.release();
  });
}

// x/sync's TestAllocCancelDoesntStarve: a large waiter at the front that
// gives up lets the smaller one behind it in.
TEST(SemaphoreCtx, CancelAtFrontLetsNextIn) {
  goro::run([] {
    goro::semaphore sem(10);
    sem.acquire(1);  // 9 free
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto big = goro::make_chan<std::error_code>(1);
    goro::go([&sem, c = ctx, big] { big.send(sem.acquire(c, 10)); });
    ASSERT_TRUE(eventually([&] { return waiters(sem) == 1; }));
    auto small = goro::make_chan<void>(1);
    goro::go([&sem, small] {
      sem.acquire(1);  // fits, but FIFO: waits behind the big one
      small.send();
    });
    ASSERT_TRUE(eventually([&] { return waiters(sem) == 2; }));
    EXPECT_FALSE(small.try_recv());
    cancel();
    EXPECT_EQ(big.recv(), std::error_code(goro::context_errc::canceled));
    small.recv();  // let in by the cancellation, not by a release
    sem.release(2);
    EXPECT_TRUE(sem.try_acquire(10));
  });
}

TEST(SemaphoreCtx, TryAcquireFor) {
  goro::run([] {
    goro::semaphore sem(2);
    EXPECT_TRUE(sem.try_acquire_for(0ms, 2));
    EXPECT_FALSE(sem.try_acquire_for(0ms));  // like try_acquire
    EXPECT_FALSE(sem.try_acquire_for(-1s));
    const auto t0 = std::chrono::steady_clock::now();
    EXPECT_FALSE(sem.try_acquire_for(15ms));
    EXPECT_GE(std::chrono::steady_clock::now() - t0, 15ms);
    EXPECT_EQ(waiters(sem), 0u);
    // Released while it waits: it gets the unit well before its limit.
    goro::go([&sem] {
      ASSERT_TRUE(eventually([&] { return waiters(sem) == 1; }));
      sem.release(1);
    });
    EXPECT_TRUE(sem.try_acquire_for(60s));
    sem.release(2);
  });
}

TEST(SemaphoreCtx, PlainThreadGivesUp) {
  goro::semaphore sem(1);
  EXPECT_TRUE(sem.try_acquire());
  EXPECT_FALSE(sem.try_acquire_for(10ms));
  auto [ctx, cancel] = goro::with_timeout(goro::background(), 10ms);
  EXPECT_EQ(sem.acquire(ctx), goro::context_errc::deadline_exceeded);
  cancel();
  sem.release();
  EXPECT_TRUE(sem.try_acquire_for(10ms));
  sem.release();
}

TEST(SemaphoreCtx, BadInputIsRefused) {
  goro::semaphore sem(2);
  EXPECT_THROW((void)sem.acquire(goro::background(), -1),
               std::invalid_argument);
  EXPECT_THROW((void)sem.acquire(goro::background(), 3),
               std::invalid_argument);  // could never be met
  EXPECT_THROW(sem.try_acquire_for(1ms, -1), std::invalid_argument);
  EXPECT_THROW(sem.try_acquire_for(1ms, 3), std::invalid_argument);
}

// Grants racing cancellations and timeouts: never more than the capacity
// held, and afterwards every unit is free and the queue empty.
TEST(SemaphoreCtx, HammerKeepsEveryUnit) {
  constexpr std::int64_t cap = 4;
  const int workers = goro_test::scaled(16, 8);
  const int rounds = goro_test::scaled(400, 60);
  std::atomic<std::int64_t> held{0}, peak{0};
  std::atomic<int> gave_up{0}, got{0};
  goro::run([&] {
    goro_test::min_procs procs(4);
    goro::semaphore sem(cap);
    goro::wait_group wg;
    for (int w = 0; w < workers; w++) {
      wg.go([&, w] {
        std::minstd_rand rng(unsigned(w) + 1);
        for (int r = 0; r < rounds; r++) {
          const std::int64_t n = 1 + std::int64_t(rng() % 2);
          auto [ctx, cancel] = goro::with_cancel(goro::background());
          if (rng() % 3 == 0) {
            // Cancel from elsewhere, racing the grant.
            goro::go([cancel = cancel] {
              goro::gosched();
              cancel();
            });
          }
          bool ok;
          if (rng() % 4 == 0)
            ok = sem.try_acquire_for(std::chrono::microseconds(rng() % 200), n);
          else
            ok = !sem.acquire(ctx, n);
          cancel();
          if (!ok) {
            gave_up++;
            continue;
          }
          got++;
          std::int64_t now = held += n;
          std::int64_t p = peak.load();
          while (now > p && !peak.compare_exchange_weak(p, now)) {
          }
          goro::gosched();
          held -= n;
          sem.release(n);
        }
      });
    }
    wg.wait();
    EXPECT_EQ(waiters(sem), 0u);
    EXPECT_TRUE(sem.try_acquire(cap)) << "units leaked";
    sem.release(cap);
  });
  EXPECT_LE(peak.load(), cap);
  EXPECT_GT(got.load(), 0);
  EXPECT_EQ(got.load() + gave_up.load(), workers * rounds);
}

}  // namespace
