// goro::errgroup (golang.org/x/sync/errgroup) and wait_group::go (Go 1.25),
// after x/sync's errgroup_test.go: the zero group, the first error wins,
// WithContext cancels on failure and on Wait, SetLimit / TryGo, plus goro's
// own: std::error_code results, goexit, the destructor's wait.
#include <algorithm>
#include <atomic>
#include <goro/errgroup.hpp>
#include <goro/goro.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

#include "test_support.hpp"

namespace {

TEST(ErrGroup, WaitsForAllAndSucceeds) {
  std::atomic<int> n{0};
  goro::run([&] {
    goro::errgroup g;
    for (int i = 0; i < 100; i++) g.go([&n] { n++; });
    EXPECT_NO_THROW(g.wait());
    EXPECT_EQ(n.load(), 100);
    EXPECT_EQ(g.ctx(), goro::background());  // no context of its own
    // Reusable after wait.
    g.go([&n] { n++; });
    g.wait();
  });
  EXPECT_EQ(n.load(), 101);
}

// The first failure is the one wait() rethrows; the second goroutine throws
// only after it saw the context cancelled by the first.
TEST(ErrGroup, FirstExceptionWinsAndCancelsContext) {
  goro::run([] {
    auto g = goro::errgroup::with_context(goro::background());
    goro::context ctx = g.ctx();
    EXPECT_FALSE(ctx.err());
    g.go([ctx] {
      ctx.done().recv();  // until the first one failed
      throw std::runtime_error("second");
    });
    g.go([] { throw std::runtime_error("first"); });
    try {
      g.wait();
      ADD_FAILURE() << "wait() did not rethrow";
    } catch (const std::runtime_error& e) {
      EXPECT_STREQ(e.what(), "first");
    }
    EXPECT_EQ(ctx.err(), goro::context_errc::canceled);
    // The first error stays.
    EXPECT_THROW(g.wait(), std::runtime_error);
  });
}

TEST(ErrGroup, ContextCancelledWhenWaitReturns) {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    goro::errgroup g(parent);
    goro::context ctx = g.ctx();
    g.go([] {});
    g.go([] {});
    g.wait();
    EXPECT_EQ(ctx.err(), goro::context_errc::canceled);
    EXPECT_FALSE(parent.err());  // only the group's child
    cancel_parent();
  });
}

TEST(ErrGroup, ParentCancellationReachesGroupContext) {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    auto g = goro::errgroup::with_context(parent);
    g.go([c = g.ctx()] { c.done().recv(); });
    cancel_parent();
    EXPECT_NO_THROW(g.wait());  // cancellation is not a failure by itself
  });
}

// Go's func() error: a non-empty std::error_code fails the group.
TEST(ErrGroup, ErrorCodeResults) {
  goro::run([] {
    goro::errgroup g;
    g.go([]() -> std::error_code { return {}; });
    g.go([]() -> std::error_code {
      return std::make_error_code(std::errc::timed_out);
    });
    try {
      g.wait();
      ADD_FAILURE() << "wait() did not throw";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(), std::errc::timed_out);
    }
  });
}

// SetLimit: never more than n at once; TryGo fails while n run.
TEST(ErrGroup, LimitCapsConcurrency) {
  constexpr int limit = 3, tasks = 40;
  std::atomic<int> running{0}, peak{0}, ran{0};
  goro::run([&] {
    goro_test::min_procs procs(4);
    goro::errgroup g;
    g.set_limit(limit);
    for (int i = 0; i < tasks; i++) {
      g.go([&] {
        int now = ++running;
        int p = peak.load();
        while (now > p && !peak.compare_exchange_weak(p, now)) {
        }
        for (int k = 0; k < 20; k++) goro::gosched();
        running--;
        ran++;
      });
    }
    g.wait();
  });
  EXPECT_EQ(ran.load(), tasks);
  EXPECT_LE(peak.load(), limit);
  EXPECT_GE(peak.load(), 1);
}

TEST(ErrGroup, TryGoAndLimitChanges) {
  goro::run([] {
    goro::errgroup g;
    g.set_limit(1);
    auto release = goro::make_chan<void>();
    EXPECT_TRUE(g.try_go([release] { release.recv(); }));
    EXPECT_FALSE(g.try_go([] { ADD_FAILURE() << "ran past the limit"; }));
    EXPECT_THROW(g.set_limit(2), std::logic_error);  // one is active
    release.close();
    g.wait();
    EXPECT_TRUE(g.try_go([] {}));  // the slot is free again
    g.wait();
    g.set_limit(0);  // admits none, as in Go
    EXPECT_FALSE(g.try_go([] {}));
    g.set_limit(-1);  // no limit
    for (int i = 0; i < 10; i++) EXPECT_TRUE(g.try_go([] {}));
    g.wait();
  });
}

// A goroutine blocked in go() (limit reached) starts when a slot frees.
TEST(ErrGroup, GoBlocksAtTheLimit) {
  goro::run([] {
    goro::errgroup g;
    g.set_limit(1);
    auto release = goro::make_chan<void>();
    std::atomic<bool> second_ran{false};
    g.go([release] { release.recv(); });
    auto started = goro::make_chan<void>(1);
    goro::go([&] {
      g.go([&] { second_ran = true; });  // blocks until the first ends
      started.send();
    });
    // The spawner cannot get past go() while the first goroutine runs.
    for (int i = 0; i < 100; i++) {
      goro::gosched();
      ASSERT_FALSE(started.try_recv()) << "go() did not wait for a slot";
    }
    release.close();
    started.recv();
    g.wait();
    EXPECT_TRUE(second_ran.load());
  });
}

TEST(ErrGroup, GoexitIsNotAFailure) {
  goro::run([] {
    goro::errgroup g;
    std::atomic<bool> after{false};
    g.go([&] {
      goro::goexit();
      after = true;
    });
    EXPECT_NO_THROW(g.wait());
    EXPECT_FALSE(after.load());
  });
}

TEST(ErrGroup, DestructorWaits) {
  std::atomic<bool> finished{false};
  goro::run([&] {
    auto gate = goro::make_chan<int>();
    {
      goro::errgroup g;
      g.go([&, gate] {
        gate.recv();
        finished = true;
      });
      goro::go([gate] { gate.send(1); });
    }  // waits here
    EXPECT_TRUE(finished.load());
  });
}

TEST(WaitGroupGo, RunsAndCountsDone) {
  std::atomic<int> n{0};
  goro::run([&] {
    goro::wait_group wg;
    for (int i = 0; i < 50; i++) wg.go([&n] { n++; });
    wg.go([] { goro::goexit(); });  // done() still runs
    wg.wait();
  });
  EXPECT_EQ(n.load(), 50);
}

}  // namespace
