// goro::defer: runs at scope exit, in reverse order, on exceptions, through
// a goroutine's goexit unwinding, and not at all once dismissed.
#include <goro/defer.hpp>
#include <goro/goro.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "test_support.hpp"

namespace {

static_assert(!std::is_copy_constructible_v<goro::defer<void (*)()>>);
static_assert(!std::is_move_constructible_v<goro::defer<void (*)()>>);
static_assert(!std::is_copy_assignable_v<goro::defer<void (*)()>>);
static_assert(std::is_nothrow_destructible_v<goro::defer<void (*)()>>);

int plain_function_calls = 0;
void plain_function() { plain_function_calls++; }

TEST(Defer, RunsAtScopeExitInReverseOrder) {
  std::string log;
  {
    goro::defer a([&] { log += "a"; });
    goro::defer b([&] { log += "b"; });
    log += "body,";
    EXPECT_EQ(log, "body,");
  }
  EXPECT_EQ(log, "body,ba");
}

TEST(Defer, RunsOnException) {
  int ran = 0;
  try {
    goro::defer d([&] { ran++; });
    throw std::runtime_error("boom");
  } catch (const std::runtime_error&) {
    EXPECT_EQ(ran, 1);
  }
  EXPECT_EQ(ran, 1);
}

TEST(Defer, RunsOnExceptionInsideGoroutine) {
  int ran = 0;
  goro::run([&] {
    try {
      goro::defer d([&] { ran++; });
      goro::gosched();  // may resume on another thread
      throw std::runtime_error("boom");
    } catch (const std::runtime_error&) {
    }
  });
  EXPECT_EQ(ran, 1);
}

TEST(Defer, RunsWhenGoroutineExits) {
  bool deferred_ran = false;
  goro::run([&] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      goro::defer done([&] { wg.done(); });  // runs last
      goro::defer d([&] { deferred_ran = true; });
      goro::goexit();
    });
    wg.wait();
  });
  EXPECT_TRUE(deferred_ran);
}

TEST(Defer, CopiedStateIsTheValueWhenMade) {
  int x = 1, seen_copy = 0, seen_ref = 0;
  {
    goro::defer d([x, &seen_copy] { seen_copy = x; });  // Go's evaluated args
    goro::defer e([&] { seen_ref = x; });
    x = 2;
  }
  EXPECT_EQ(seen_copy, 1);
  EXPECT_EQ(seen_ref, 2);
}

TEST(Defer, DismissCancels) {
  int ran = 0;
  {
    goro::defer d([&] { ran++; });
    EXPECT_TRUE(d.active());
    d.dismiss();
    d.dismiss();  // idempotent
    EXPECT_FALSE(d.active());
  }
  EXPECT_EQ(ran, 0);
  // Rollback unless committed: the exception path keeps it armed.
  auto attempt = [&](bool fail) {
    goro::defer rollback([&] { ran++; });
    if (fail) throw std::runtime_error("failed before commit");
    rollback.dismiss();  // commit
  };
  attempt(false);
  EXPECT_EQ(ran, 0);
  EXPECT_THROW(attempt(true), std::runtime_error);
  EXPECT_EQ(ran, 1);
}

TEST(Defer, FunctionPointerAndMoveOnlyCallable) {
  {
    goro::defer d(plain_function);  // decays to a function pointer
  }
  EXPECT_EQ(plain_function_calls, 1);
  int seen = 0;
  {
    auto p = std::make_unique<int>(42);
    goro::defer d([p = std::move(p), &seen] { seen = *p; });
  }
  EXPECT_EQ(seen, 42);
}

// A throwing deferred call ends the program (the destructor is noexcept).
TEST(DeferDeathTest, ThrowingCallableTerminates) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      { goro::defer d([] { throw std::runtime_error("from defer"); }); }, "");
}

}  // namespace
