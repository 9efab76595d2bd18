// context additions of Go 1.20-1.21: with_cancel_cause / cause,
// context_after_func (context.AfterFunc) and without_cancel, after Go's
// context_test.go (TestCause, TestAfterFuncCalledAfterCancel,
// TestAfterFuncNotCalledAfterStop, TestAfterFuncCalledAsynchronously,
// TestWithoutCancel).
#include <atomic>
#include <goro/goro.hpp>
#include <memory>
#include <string>
#include <system_error>

#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using goro::context_errc;

const std::error_code reset = std::make_error_code(std::errc::connection_reset);
const std::error_code refused =
    std::make_error_code(std::errc::connection_refused);

TEST(ContextCause, CancelWithCause) {
  auto [ctx, cancel] = goro::with_cancel_cause(goro::background());
  EXPECT_FALSE(goro::cause(ctx));  // not done yet
  cancel(reset);
  EXPECT_EQ(ctx.err(), context_errc::canceled);
  EXPECT_EQ(goro::cause(ctx), reset);
  cancel(refused);  // only the first cancellation counts
  EXPECT_EQ(goro::cause(ctx), reset);
  EXPECT_EQ(goro::to_string(ctx), "context.Background.WithCancel");
}

TEST(ContextCause, EmptyCauseIsCanceled) {
  auto [ctx, cancel] = goro::with_cancel_cause(goro::background());
  cancel();
  EXPECT_EQ(goro::cause(ctx), context_errc::canceled);
  auto [c2, cancel2] = goro::with_cancel(goro::background());
  cancel2();
  EXPECT_EQ(goro::cause(c2), context_errc::canceled);
}

TEST(ContextCause, NeverDoneHasNoCause) {
  EXPECT_FALSE(goro::cause(goro::background()));
  EXPECT_FALSE(goro::cause(goro::todo()));
  auto [ctx, cancel] = goro::with_cancel(goro::background());
  EXPECT_FALSE(goro::cause(ctx));
  cancel();
}

TEST(ContextCause, ChildrenInheritParentsCause) {
  auto [parent, cancel] = goro::with_cancel_cause(goro::background());
  auto [child, cancel_child] = goro::with_cancel(parent);
  constexpr goro::context_key<int> k{"k"};
  goro::context val = goro::with_value(child, k, 1);
  auto [grandchild, cancel_gc] = goro::with_timeout(val, 1h);
  cancel(reset);
  EXPECT_EQ(child.err(), context_errc::canceled);
  EXPECT_EQ(goro::cause(child), reset);
  EXPECT_EQ(goro::cause(val), reset);  // a value context: its ancestor's
  EXPECT_EQ(goro::cause(grandchild), reset);
  // Derived after the parent was cancelled: the same cause at once.
  auto [late, cancel_late] = goro::with_cancel(parent);
  EXPECT_EQ(goro::cause(late), reset);
  cancel_child();
  cancel_gc();
  cancel_late();
}

TEST(ContextCause, ChildCauseDoesNotReachParent) {
  auto [parent, cancel] = goro::with_cancel_cause(goro::background());
  auto [child, cancel_child] = goro::with_cancel_cause(parent);
  cancel_child(refused);
  EXPECT_EQ(goro::cause(child), refused);
  EXPECT_FALSE(parent.err());
  EXPECT_FALSE(goro::cause(parent));
  cancel(reset);
  EXPECT_EQ(goro::cause(child), refused);  // already done: unchanged
}

TEST(ContextCause, DeadlineCause) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 5ms);
    ctx.done().recv();
    EXPECT_EQ(goro::cause(ctx), context_errc::deadline_exceeded);
    cancel();
    auto [past, cancel2] = goro::with_timeout(goro::background(), -1s);
    EXPECT_EQ(goro::cause(past), context_errc::deadline_exceeded);
    cancel2();
  });
}

// Go's TestAfterFuncCalledAfterCancel, and AfterFunc on a done context.
TEST(ContextAfterFunc, RunsOnceDone) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto fired = goro::make_chan<std::uint64_t>(1);
    auto stop = goro::context_after_func(
        ctx, [fired] { fired.send(goro::goroutine_id()); });
    EXPECT_EQ(goro::detail::context_num_children(ctx), 1u);
    EXPECT_FALSE(fired.try_recv());
    cancel();
    auto id = fired.recv();
    ASSERT_TRUE(id);
    EXPECT_NE(*id, goro::goroutine_id());  // in a goroutine of its own
    EXPECT_FALSE(stop());                  // it was started
    // Already done: starts at once.
    auto again = goro::context_after_func(ctx, [fired] { fired.send(0); });
    EXPECT_EQ(fired.recv(), std::optional<std::uint64_t>(0));
    EXPECT_FALSE(again());
  });
}

// Go's TestAfterFuncNotCalledAfterStop: a stopped function is never
// started; that it was dropped (with what it captured) proves it.
TEST(ContextAfterFunc, StopPreventsIt) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto token = std::make_shared<int>(0);
    auto stop = goro::context_after_func(ctx, [token] { ++*token; });
    EXPECT_EQ(token.use_count(), 2);
    EXPECT_TRUE(stop());
    EXPECT_FALSE(stop());             // only once
    EXPECT_EQ(token.use_count(), 1);  // fn is gone: it can never run
    EXPECT_EQ(goro::detail::context_num_children(ctx), 0u);  // unregistered
    cancel();
    EXPECT_EQ(*token, 0);
  });
}

TEST(ContextAfterFunc, ManyFunctionsAndNeverDone) {
  goro::run([] {
    auto [parent, cancel] = goro::with_cancel(goro::background());
    constexpr goro::context_key<int> k{"k"};
    goro::context ctx = goro::with_value(parent, k, 7);
    goro::wait_group wg;
    std::atomic<int> ran{0};
    constexpr int n = 20;
    wg.add(n);
    for (int i = 0; i < n; i++)
      goro::context_after_func(ctx, [&] {
        ran++;
        wg.done();
      });
    cancel();
    wg.wait();
    EXPECT_EQ(ran.load(), n);
    // A context that can never be done never runs fn; stop succeeds.
    auto token = std::make_shared<int>(0);
    auto stop = goro::context_after_func(goro::background(), [token] {});
    EXPECT_TRUE(stop());
    EXPECT_EQ(token.use_count(), 1);
  });
}

// stop racing cancel: exactly one of "stop returned true" and "fn ran".
TEST(ContextAfterFunc, StopRacingCancelDecidesOnce) {
  const int rounds = goro_test::scaled(500, 100);
  goro::run([&] {
    goro_test::min_procs procs(2);
    for (int r = 0; r < rounds; r++) {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      auto ran = goro::make_chan<void>(1);
      auto stop = goro::context_after_func(ctx, [ran] { ran.send(); });
      goro::wait_group wg;
      wg.go([cancel = cancel] { cancel(); });
      bool stopped = stop();
      wg.wait();  // cancel has returned: fn was started or never will be
      if (stopped) {
        EXPECT_FALSE(ran.try_recv());
      } else {
        ran.recv();  // started: it runs
      }
    }
  });
}

// Go's TestWithoutCancel.
TEST(ContextWithoutCancel, KeepsValuesNotCancellation) {
  goro::run([] {
    constexpr goro::context_key<std::string> k{"k"};
    auto [parent, cancel] = goro::with_timeout(
        goro::with_value(goro::background(), k, std::string("v")), 1h);
    goro::context ctx = goro::without_cancel(parent);
    EXPECT_EQ(ctx.value(k), std::optional<std::string>("v"));
    EXPECT_FALSE(ctx.deadline());
    EXPECT_FALSE(ctx.done());  // nil: never done
    auto [child, cancel_child] = goro::with_cancel(ctx);
    EXPECT_EQ(goro::detail::context_num_children(parent), 0u);
    cancel();
    EXPECT_EQ(parent.err(), context_errc::canceled);
    EXPECT_FALSE(ctx.err());
    EXPECT_FALSE(goro::cause(ctx));
    EXPECT_FALSE(child.err());  // not reached through without_cancel
    cancel_child();
    EXPECT_EQ(child.err(), context_errc::canceled);
    EXPECT_EQ(child.value(k), std::optional<std::string>("v"));
    EXPECT_EQ(goro::to_string(goro::without_cancel(goro::background())),
              "context.Background.WithoutCancel");
  });
}

}  // namespace
