// Tests for <goro/context.hpp>, porting the intent of Go 1.19's
// context_test.go (Background/TODO, WithCancel, ParentFinishesChild,
// ChildFinishesFirst, Deadline, Timeout, CanceledTimeout, Values,
// SimultaneousCancels, InterlockedCancels, Layers*, CancelRemoves,
// WithCancelCanceledParent) plus the C++-specific guarantees: the error
// category, plain threads, the typical select-on-done worker pool, release
// of every cancellation state (no leaks) and deep trees that must not
// recurse on a goroutine stack.
//
// Nothing is synchronised by sleeping. Waits that must end are bounded
// (select against goro::after), so a broken context fails the test instead
// of hanging it. "This blocks" is checked by waiting until the blocked party
// is queued on the done channel. Only the timeout tests depend on time, and
// they check that firing happens no earlier than the deadline and within a
// generous bound.
#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include "chan_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::scaled;
using clk = std::chrono::steady_clock;

// Keys are compared by identity: k_int and k_int2 have the same type and
// never collide.
constexpr goro::context_key<int> k_int{"k_int"};
constexpr goro::context_key<int> k_int2{"k_int2"};
constexpr goro::context_key<std::string> k_str{"k_str"};
constexpr goro::context_key<std::unique_ptr<int>> k_uptr{"k_uptr"};

// Done right now (select with a default case never blocks).
bool is_done(const goro::context& c) {
  return goro::select(goro::case_recv(c.done()), goro::case_default()) == 0;
}

// Waits until c is done, at most `limit`; false if it did not happen.
bool wait_done(const goro::context& c,
               std::chrono::milliseconds limit = 5000ms) {
  return goro::select(goro::case_recv(c.done()),
                      goro::case_recv(goro::after(limit))) == 0;
}

using goro_test::eventually;

// Receivers queued on a channel right now (they are blocked in recv).
std::size_t receivers_queued(const goro::chan<void>& ch) {
  return goro_test::queued(ch, goro_test::side::receivers);
}

const std::error_code kNone{};
const std::error_code kCanceled = goro::context_errc::canceled;
const std::error_code kDeadline = goro::context_errc::deadline_exceeded;

// Every test must leave no cancellation state behind: each one it made is
// freed once it is cancelled (or its timer has fired) and its handles are
// gone. A fired timer's goroutine may still be finishing when the test's
// main goroutine returns, hence the bounded wait.
class Context : public ::testing::Test {
 protected:
  void TearDown() override {
    EXPECT_TRUE(eventually([] {
      return goro::detail::context_live_states() == 0;
    })) << goro::detail::context_live_states()
        << " context states still alive after the test";
  }
};

// ---------------------------------------------------------------------------

// Go's TestBackground/TestTODO: never done, no deadline, no values.
TEST_F(Context, BackgroundNeverDone) {
  goro::run([] {
    for (const goro::context& c :
         {goro::background(), goro::todo(), goro::context()}) {
      EXPECT_FALSE(c.done()) << "background/todo must have a nil done channel";
      EXPECT_FALSE(is_done(c));
      EXPECT_EQ(c.err(), kNone);
      EXPECT_FALSE(c.deadline().has_value());
      EXPECT_FALSE(c.value(k_int).has_value());
      EXPECT_EQ(c.value_ptr(k_str), nullptr);
      EXPECT_EQ(goro::detail::context_num_children(c), 0u);
    }
    // A nil channel is never ready, even against a timer.
    EXPECT_FALSE(wait_done(goro::background(), 20ms));
    EXPECT_EQ(goro::to_string(goro::background()), "context.Background");
    EXPECT_EQ(goro::to_string(goro::todo()), "context.TODO");
    EXPECT_EQ(goro::background(), goro::context());
    EXPECT_EQ(goro::todo(), goro::todo());
    EXPECT_FALSE(goro::background() == goro::todo());
    // Value contexts over background are never done either.
    auto v = goro::with_value(goro::todo(), k_int, 1);
    EXPECT_FALSE(v.done());
    EXPECT_EQ(goro::to_string(v), "context.TODO.WithValue(k_int)");
  });
}

// Go's TestWithCancel (single level): cancel closes done (the same channel
// every call) and sets err to canceled, once and for good.
TEST_F(Context, CancelClosesDoneAndSetsCanceled) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    ASSERT_TRUE(cancel);
    goro::chan<void> d = ctx.done();
    ASSERT_TRUE(d) << "a cancellable context has a non-nil done channel";
    EXPECT_EQ(ctx.done(), d) << "done() must return the same channel";
    EXPECT_FALSE(is_done(ctx));
    EXPECT_EQ(ctx.err(), kNone);
    EXPECT_FALSE(ctx.deadline().has_value());
    EXPECT_EQ(goro::to_string(ctx), "context.Background.WithCancel");

    // A goroutine blocked on done is woken by cancel.
    auto woke = goro::make_chan<std::error_code>(1);
    goro::go([c = ctx, woke] {
      bool got = c.done().recv();  // false: closed, not a value
      woke.send(got ? std::error_code(1, std::generic_category()) : c.err());
    });
    ASSERT_TRUE(eventually([&] { return receivers_queued(d) == 1; }));
    cancel();
    std::optional<std::error_code> e;
    ASSERT_EQ(goro::select(goro::case_recv(woke, e),
                           goro::case_recv(goro::after(5s))),
              0u)
        << "cancel did not wake the goroutine";
    ASSERT_TRUE(e.has_value());
    EXPECT_EQ(*e, kCanceled) << "err must be set when done is seen closed";

    ASSERT_TRUE(is_done(ctx));
    EXPECT_FALSE(d.recv()) << "done must be closed, not carry a value";
    EXPECT_EQ(ctx.done(), d);
    EXPECT_EQ(ctx.err(), kCanceled);
    EXPECT_EQ(ctx.err().message(), "context canceled");
    cancel();  // idempotent
    EXPECT_EQ(ctx.err(), kCanceled);
  });
}

// Cancelled before anyone asked for the channel: done() is still closed (and
// stable), as with Go's shared closedchan.
TEST_F(Context, DoneRequestedAfterCancelIsClosed) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    cancel();
    goro::chan<void> d = ctx.done();
    ASSERT_TRUE(d);
    EXPECT_TRUE(wait_done(ctx, 2000ms));
    EXPECT_EQ(ctx.done(), d);
    EXPECT_EQ(ctx.err(), kCanceled);
  });
}

// Many goroutines asking for the lazily made channel at once all get the
// same one.
TEST_F(Context, ConcurrentDoneCallsAgree) {
  goro::run([] {
    const int n = 32;
    for (int round = 0; round < scaled(200, 20); round++) {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      std::vector<goro::chan<void>> got(n);
      goro::wait_group wg;
      auto gate = goro::make_chan<void>();
      for (int i = 0; i < n; i++) {
        wg.add();
        goro::go([&, i, c = ctx] {
          gate.recv();
          got[i] = c.done();
          wg.done();
        });
      }
      gate.close();
      wg.wait();
      for (int i = 1; i < n; i++) ASSERT_EQ(got[i], got[0]);
      cancel();
      EXPECT_FALSE(got[0].recv());
    }
  });
}

// Go's TestParentFinishesChild: cancelling the parent cancels every
// descendant, through with_cancel, with_timeout and with_value layers, and
// they unregister from it.
TEST_F(Context, CancelPropagatesToGrandchildren) {
  goro::run([] {
    auto [root, cancel_root] = goro::with_cancel(goro::background());
    auto v1 = goro::with_value(root, k_int, 1);
    auto [c1, cancel_c1] = goro::with_cancel(v1);
    auto [t1, cancel_t1] = goro::with_timeout(c1, 1h);
    auto v2 = goro::with_value(t1, k_str, "x");
    auto [c2, cancel_c2] = goro::with_cancel(v2);
    auto [t2, cancel_t2] = goro::with_deadline(root, clk::now() + 1h);
    const std::vector<goro::context> all{root, v1, c1, t1, v2, c2, t2};

    // Registrations: root has c1 (through v1) and t2; c1 has t1; t1 has c2.
    EXPECT_EQ(goro::detail::context_num_children(root), 2u);
    EXPECT_EQ(goro::detail::context_num_children(v1), 2u);  // root's state
    EXPECT_EQ(goro::detail::context_num_children(c1), 1u);
    EXPECT_EQ(goro::detail::context_num_children(t1), 1u);
    EXPECT_EQ(goro::detail::context_num_children(c2), 0u);
    for (const auto& c : all) EXPECT_FALSE(is_done(c));
    // Value layers share the done channel of their cancellable ancestor.
    EXPECT_EQ(v1.done(), root.done());
    EXPECT_EQ(v2.done(), t1.done());

    // A goroutine waiting on each context's done.
    goro::wait_group wg;
    std::atomic<int> woken{0};
    for (const auto& c : all) {
      wg.add();
      goro::go([&, c] {
        if (wait_done(c) && c.err() == kCanceled) woken.fetch_add(1);
        wg.done();
      });
    }
    cancel_root();
    wg.wait();
    EXPECT_EQ(woken.load(), static_cast<int>(all.size()));
    for (const auto& c : all) {
      EXPECT_TRUE(is_done(c));
      // Even the timer contexts report canceled: the parent's error.
      EXPECT_EQ(c.err(), kCanceled);
    }
    EXPECT_EQ(goro::detail::context_num_children(root), 0u);
    EXPECT_EQ(goro::detail::context_num_children(c1), 0u);
    EXPECT_EQ(goro::detail::context_num_children(t1), 0u);
    // Values are still there after cancellation.
    EXPECT_EQ(c2.value(k_int), 1);
    EXPECT_EQ(c2.value(k_str), "x");
    cancel_c1();
    cancel_t1();
    cancel_c2();
    cancel_t2();
  });
}

// Go's TestChildFinishesFirst: cancelling a child leaves the parent alone
// and removes the child from it.
TEST_F(Context, ChildCancelDoesNotAffectParent) {
  goro::run([] {
    for (bool timed : {false, true}) {
      auto [parent, cancel_parent] = goro::with_cancel(goro::background());
      auto [child, cancel_child] =
          timed ? goro::with_timeout(parent, 1h) : goro::with_cancel(parent);
      EXPECT_EQ(goro::detail::context_num_children(parent), 1u);
      cancel_child();
      EXPECT_EQ(goro::detail::context_num_children(parent), 0u);
      EXPECT_TRUE(is_done(child));
      EXPECT_EQ(child.err(), kCanceled);
      EXPECT_FALSE(is_done(parent));
      EXPECT_EQ(parent.err(), kNone);
      cancel_parent();
      EXPECT_EQ(child.err(), kCanceled);
    }
  });
}

// Go's TestWithCancelCanceledParent: a context derived from one that is
// already done is done at once, with the parent's error, and is not
// registered anywhere.
TEST_F(Context, ChildOfCancelledParentIsDoneAtOnce) {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    cancel_parent();
    auto [c1, cancel1] = goro::with_cancel(parent);
    auto [c2, cancel2] = goro::with_timeout(parent, 1h);
    auto [c3, cancel3] = goro::with_deadline(parent, clk::now() + 1h);
    auto v = goro::with_value(parent, k_int, 3);
    auto [c4, cancel4] = goro::with_cancel(v);
    for (const auto& c : {c1, c2, c3, v, c4}) {
      EXPECT_TRUE(is_done(c)) << goro::to_string(c);
      EXPECT_EQ(c.err(), kCanceled) << goro::to_string(c);
    }
    EXPECT_EQ(goro::detail::context_num_children(parent), 0u);

    // Same with a parent that timed out: children get deadline_exceeded.
    auto [tp, cancel_tp] = goro::with_timeout(goro::background(), -1s);
    EXPECT_TRUE(is_done(tp));
    EXPECT_EQ(tp.err(), kDeadline);
    auto [tc, cancel_tc] = goro::with_cancel(tp);
    EXPECT_TRUE(is_done(tc));
    EXPECT_EQ(tc.err(), kDeadline);
    EXPECT_EQ(tc.deadline(), tp.deadline());
    for (auto& f : {cancel1, cancel2, cancel3, cancel4, cancel_tp, cancel_tc})
      f();
  });
}

// Go's TestTimeout/TestDeadline: the context is done with deadline_exceeded
// no earlier than its deadline (and within a generous bound).
TEST_F(Context, TimeoutFiresDeadlineExceeded) {
  goro::run([] {
    const auto start = clk::now();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
    ASSERT_TRUE(ctx.deadline().has_value());
    const goro::time_point dl = *ctx.deadline();
    EXPECT_GE(dl, start + 50ms);
    EXPECT_LE(dl, clk::now() + 50ms);
    EXPECT_EQ(ctx.err(), kNone);
    ASSERT_TRUE(wait_done(ctx, 2000ms)) << "timeout did not fire within 2 s";
    const auto fired = clk::now();
    EXPECT_GE(fired, dl) << "fired before the deadline";
    EXPECT_LT(fired - start, 2s);
    EXPECT_EQ(ctx.err(), kDeadline);
    EXPECT_EQ(ctx.err().message(), "context deadline exceeded");
    EXPECT_TRUE(ctx.err() == std::errc::timed_out);
    cancel();

    // with_deadline directly, waited on with a blocking recv.
    auto [c2, cancel2] =
        goro::with_deadline(goro::background(), clk::now() + 30ms);
    EXPECT_FALSE(c2.done().recv());
    EXPECT_GE(clk::now(), *c2.deadline());
    EXPECT_EQ(c2.err(), kDeadline);
    cancel2();

    // A deadline in the past: done at once, no timer involved.
    auto [c3, cancel3] =
        goro::with_deadline(goro::background(), clk::now() - 1ms);
    EXPECT_TRUE(is_done(c3));
    EXPECT_EQ(c3.err(), kDeadline);
    cancel3();
    EXPECT_EQ(c3.err(), kDeadline);
  });
}

// Durations and deadlines at the ends of the clock's range saturate
// instead of overflowing; a far deadline never fires, a far past one has.
TEST_F(Context, ExtremeDeadlines) {
  goro::run([] {
    auto [far, cancel_far] =
        goro::with_timeout(goro::background(), std::chrono::nanoseconds::max());
    EXPECT_EQ(far.deadline(), goro::time_point::max());
    EXPECT_FALSE(is_done(far));
    EXPECT_EQ(goro::to_string(far).rfind("context.Background.WithDeadline(", 0),
              0u);
    auto [far2, cancel_far2] =
        goro::with_deadline(goro::background(), goro::time_point::max());
    EXPECT_FALSE(is_done(far2));
    auto [inherit, cancel_inherit] =
        goro::with_timeout(far, std::chrono::nanoseconds::max());
    EXPECT_EQ(inherit.deadline(), goro::time_point::max());

    auto [past, cancel_past] =
        goro::with_timeout(goro::background(), std::chrono::nanoseconds::min());
    EXPECT_TRUE(is_done(past));
    EXPECT_EQ(past.err(), kDeadline);
    auto [past2, cancel_past2] =
        goro::with_deadline(goro::background(), goro::time_point::min());
    EXPECT_TRUE(is_done(past2));
    EXPECT_EQ(past2.err(), kDeadline);
    (void)goro::to_string(past2);
    auto [zero, cancel_zero] = goro::with_timeout(goro::background(), 0ns);
    EXPECT_TRUE(is_done(zero));
    EXPECT_EQ(zero.err(), kDeadline);

    for (auto& f : {cancel_far, cancel_far2, cancel_inherit, cancel_past,
                    cancel_past2, cancel_zero})
      f();
    EXPECT_EQ(far.err(), kCanceled);
  });
}

// The timeout reaches descendants: with_cancel and with_value children of a
// timed-out context report deadline_exceeded.
TEST_F(Context, TimeoutPropagatesToDescendants) {
  goro::run([] {
    auto [t, cancel_t] = goro::with_timeout(goro::background(), 20ms);
    auto [c, cancel_c] = goro::with_cancel(t);
    auto v = goro::with_value(c, k_int, 1);
    ASSERT_TRUE(wait_done(v, 2000ms));
    EXPECT_EQ(v.err(), kDeadline);
    EXPECT_EQ(c.err(), kDeadline);
    EXPECT_EQ(t.err(), kDeadline);
    EXPECT_EQ(v.deadline(), t.deadline());
    cancel_c();
    cancel_t();
  });
}

// Go's WithDeadline rule: a child deadline later than the parent's is not
// used (the child is a plain cancel context reporting the parent's
// deadline); an earlier one gets its own timer.
TEST_F(Context, DeadlineInheritance) {
  goro::run([] {
    const auto start = clk::now();
    auto [parent, cancel_parent] =
        goro::with_timeout(goro::background(), 300ms);
    const goro::time_point pdl = *parent.deadline();

    auto [later, cancel_later] = goro::with_deadline(parent, clk::now() + 1h);
    EXPECT_EQ(later.deadline(), pdl) << "a later deadline must be ignored";
    auto [later2, cancel_later2] = goro::with_timeout(parent, 10min);
    EXPECT_EQ(later2.deadline(), pdl);
    const std::string name = goro::to_string(later2);
    EXPECT_EQ(name.rfind("context.Background.WithDeadline(", 0), 0u) << name;
    EXPECT_TRUE(name.ends_with(")).WithCancel") ||
                name.ends_with("]).WithCancel"))
        << name;
    auto [plain, cancel_plain] = goro::with_cancel(parent);
    EXPECT_EQ(plain.deadline(), pdl);

    // An earlier deadline is the child's own; it fires alone.
    auto [sooner, cancel_sooner] = goro::with_timeout(parent, 10ms);
    ASSERT_TRUE(sooner.deadline().has_value());
    EXPECT_LT(*sooner.deadline(), pdl);
    ASSERT_TRUE(wait_done(sooner, 2000ms));
    EXPECT_EQ(sooner.err(), kDeadline);
    EXPECT_GE(clk::now(), *sooner.deadline());
    // The parent stays; the fired child unregisters itself (from the timer's
    // goroutine, just after closing done).
    EXPECT_TRUE(eventually(
        [p = parent] { return goro::detail::context_num_children(p) == 3u; }));

    // Then the parent's deadline cancels the inheriting children.
    ASSERT_TRUE(wait_done(later, 2000ms));
    EXPECT_GE(clk::now(), pdl);
    EXPECT_LT(clk::now() - start, 2s);
    for (const auto& c : {parent, later, later2, plain}) {
      EXPECT_TRUE(is_done(c));
      EXPECT_EQ(c.err(), kDeadline);
    }
    for (auto& f : {cancel_parent, cancel_later, cancel_later2, cancel_plain,
                    cancel_sooner})
      f();
  });
}

// Go's TestCanceledTimeout and its converse: the first reason sticks.
TEST_F(Context, FirstErrorSticks) {
  goro::run([] {
    // Cancel after the timeout fired: still deadline_exceeded.
    auto [t, cancel_t] = goro::with_timeout(goro::background(), 5ms);
    ASSERT_TRUE(wait_done(t, 2000ms));
    cancel_t();
    EXPECT_EQ(t.err(), kDeadline);

    // Cancel before the timeout: canceled, and the timer is released at once
    // (otherwise its pending function would keep the state alive for 1 h).
    const std::int64_t base = goro::detail::context_live_states();
    {
      auto [c, cancel_c] = goro::with_timeout(goro::background(), 1h);
      EXPECT_EQ(goro::detail::context_live_states(), base + 1);
      cancel_c();
      EXPECT_EQ(c.err(), kCanceled);
      EXPECT_TRUE(is_done(c));
    }
    EXPECT_LE(goro::detail::context_live_states(), base)
        << "cancel must stop the timer and drop its reference";

    // A short timeout cancelled early never turns into deadline_exceeded.
    auto [s, cancel_s] = goro::with_timeout(goro::background(), 20ms);
    cancel_s();
    EXPECT_EQ(s.err(), kCanceled);
    auto [later, cancel_later] = goro::with_timeout(goro::background(), 60ms);
    ASSERT_TRUE(wait_done(later, 2000ms));  // well past s's deadline
    EXPECT_EQ(s.err(), kCanceled);
    cancel_later();
  });
}

// cancel is copyable, idempotent and safe to call from many goroutines and
// plain threads at once (Go's TestSimultaneousCancels), also racing with
// the children's own cancels and with the parent's timer.
TEST_F(Context, CancelIsIdempotentAndConcurrent) {
  goro::run([] {
    const int rounds = scaled(50, 10);
    const int callers = 32;
    for (int r = 0; r < rounds; r++) {
      auto [root, cancel_root] = goro::with_timeout(goro::background(), 1ms);
      std::vector<goro::context> kids;
      std::vector<goro::cancel_func> kid_cancels;
      for (int i = 0; i < 16; i++) {
        auto [k, ck] =
            i % 2 ? goro::with_cancel(root) : goro::with_timeout(root, 1h);
        auto [g, cg] = goro::with_cancel(goro::with_value(k, k_int, i));
        kids.push_back(k);
        kids.push_back(g);
        kid_cancels.push_back(ck);
        kid_cancels.push_back(cg);
      }
      auto gate = goro::make_chan<void>();
      goro::wait_group wg;
      for (int i = 0; i < callers; i++) {
        wg.add();
        goro::go([&, i, cancel = cancel_root] {
          gate.recv();
          cancel();
          kid_cancels[i % kid_cancels.size()]();
          cancel();
          wg.done();
        });
      }
      std::vector<std::thread> threads;
      for (int i = 0; i < 2; i++) {
        threads.emplace_back([&, cancel = cancel_root] {
          gate.recv();
          cancel();
          for (const auto& f : kid_cancels) f();
        });
      }
      gate.close();
      wg.wait();
      // join blocks this goroutine's thread: tell the scheduler, so the P
      // goes to other goroutines (with GOMAXPROCS=1 it is the only one).
      goro::blocking_long([&] {
        for (auto& t : threads) t.join();
      });
      EXPECT_TRUE(is_done(root));
      // The 1 ms timer may have won: either reason is fine, but it is one.
      EXPECT_TRUE(root.err() == kCanceled || root.err() == kDeadline);
      for (const auto& k : kids) EXPECT_TRUE(is_done(k));
      EXPECT_EQ(goro::detail::context_num_children(root), 0u);
    }
  });
}

// Children made while the parent is being cancelled are either registered
// and then cancelled, or made already done: none is left behind.
TEST_F(Context, DeriveRacingWithCancel) {
  goro::run([] {
    const int rounds = scaled(100, 20);
    for (int r = 0; r < rounds; r++) {
      auto [root, cancel_root] = goro::with_cancel(goro::background());
      const int makers = 8;
      std::vector<std::vector<goro::context>> made(makers);
      std::vector<std::vector<goro::cancel_func>> cancels(makers);
      goro::wait_group wg;
      for (int m = 0; m < makers; m++) {
        wg.add();
        goro::go([&, m, root = root] {
          for (int i = 0; i < 50; i++) {
            auto [c, cf] = (i % 3 == 0) ? goro::with_timeout(root, 1h)
                                        : goro::with_cancel(root);
            made[m].push_back(c);
            cancels[m].push_back(cf);
            if (i % 10 == 0) goro::gosched();
          }
          wg.done();
        });
      }
      goro::gosched();
      cancel_root();
      wg.wait();
      for (int m = 0; m < makers; m++) {
        for (const auto& c : made[m]) {
          ASSERT_TRUE(is_done(c)) << "round " << r;
          ASSERT_EQ(c.err(), kCanceled);
        }
        for (const auto& f : cancels[m]) f();
      }
      EXPECT_EQ(goro::detail::context_num_children(root), 0u);
    }
  });
}

// Ordering: err() is non-empty exactly when done() is closed, and whoever
// is woken by a context's done (goroutine or plain thread) sees all of its
// descendants done already, also when a timer does the cancelling. The
// subtree is wide so that a canceller walking it leaves observers on other
// threads a real window to catch a wrong order.
TEST_F(Context, ErrAgreesWithDoneAndDescendantsFirst) {
  goro::run([] {
    const int rounds = scaled(200, 40);
    for (int r = 0; r < rounds; r++) {
      const bool timed = r % 2;
      auto [root, cancel_root] =
          timed ? goro::with_timeout(goro::background(), 1ms)
                : goro::with_cancel(goro::background());
      std::vector<goro::context> desc;
      std::vector<goro::cancel_func> fs;
      goro::context cur = root;
      for (int i = 0; i < 6; i++) {
        auto [c, f] = goro::with_cancel(goro::with_value(cur, k_int, i));
        desc.push_back(c);
        fs.push_back(f);
        for (int j = 0; j < 30; j++) {
          auto [side, fside] = goro::with_timeout(c, 1h);
          desc.push_back(side);
          fs.push_back(fside);
        }
        cur = c;
      }
      std::atomic<int> bad_order{0}, bad_subtree{0};
      // Polls c: err() then done(), or done() then err(); stops once done.
      auto poll = [&bad_order](const goro::context& c, bool err_first) {
        for (int i = 0;; i++) {
          if (err_first) {
            const bool e = bool(c.err());
            if (e && !is_done(c)) bad_order++;
            if (e) return;
          } else {
            const bool d = is_done(c);
            if (d && !c.err()) bad_order++;
            if (d) return;
          }
          if (i % 16 == 15) goro::gosched();
        }
      };
      auto check_subtree = [&] {
        for (const auto& d : desc)
          if (!d.err() || !is_done(d)) bad_subtree++;
      };
      goro::wait_group wg;
      for (int o = 0; o < 2; o++) {
        wg.add();
        goro::go([&, o, root = root] {
          poll(root, o == 0);
          wg.done();
        });
      }
      wg.add();
      goro::go([&, root = root] {
        if (wait_done(root)) check_subtree();
        wg.done();
      });
      std::thread poller([&, root = root] { poll(root, r % 4 < 2); });
      std::thread waiter([&, root = root] {
        root.done().recv();
        check_subtree();
      });
      if (!timed) {
        // Cancel once both waiters are blocked on the channel.
        EXPECT_TRUE(
            eventually([d = root.done()] { return receivers_queued(d) >= 2; }));
        cancel_root();
      }
      wg.wait();
      goro::blocking_long([&] {
        poller.join();
        waiter.join();
      });
      ASSERT_EQ(bad_order.load(), 0)
          << "round " << r << ": err() and done() disagreed";
      ASSERT_EQ(bad_subtree.load(), 0)
          << "round " << r << ": a context was seen done before a descendant";
      cancel_root();
      for (const auto& f : fs) f();
    }
  });
}

// Go's TestInterlockedCancels: cancelling a child from a goroutine woken by
// the parent's cancellation.
TEST_F(Context, InterlockedCancels) {
  goro::run([] {
    auto [parent, cancel_parent] = goro::with_cancel(goro::background());
    auto [child, cancel_child] = goro::with_cancel(parent);
    goro::go([p = parent, cancel_child = cancel_child] {
      p.done().recv();
      cancel_child();
    });
    cancel_parent();
    ASSERT_TRUE(wait_done(child, 2000ms));
    EXPECT_EQ(child.err(), kCanceled);
  });
}

// Go's TestValues: lookup through chains of every kind of context,
// shadowing, keys of the same type that differ, values outliving handles.
TEST_F(Context, ValuesLookupAndShadowing) {
  goro::run([] {
    goro::context c0 = goro::background();
    goro::context c1 = goro::with_value(c0, k_int, 1);
    auto [c2, cancel2] = goro::with_cancel(c1);
    goro::context c3 = goro::with_value(c2, k_str, "three");
    auto [c4, cancel4] = goro::with_timeout(c3, 1h);
    goro::context c5 = goro::with_value(c4, k_int, 5);  // shadows c1's
    goro::context c6 = goro::with_value(c5, k_int2, 6);

    EXPECT_EQ(c0.value(k_int), std::nullopt);
    EXPECT_EQ(c1.value(k_int), 1);
    EXPECT_EQ(c2.value(k_int), 1);
    EXPECT_EQ(c3.value(k_int), 1);
    EXPECT_EQ(c4.value(k_int), 1);
    EXPECT_EQ(c5.value(k_int), 5);
    EXPECT_EQ(c6.value(k_int), 5);
    EXPECT_EQ(c6.value(k_int2), 6);
    EXPECT_EQ(c5.value(k_int2), std::nullopt) << "keys of one type collided";
    EXPECT_EQ(c2.value(k_str), std::nullopt) << "a parent saw a child's value";
    EXPECT_EQ(c3.value(k_str), "three");
    EXPECT_EQ(c6.value(k_str), "three");

    // value_ptr points into the tree: the same object from every
    // descendant, alive as long as they are.
    const std::string* p = c6.value_ptr(k_str);
    ASSERT_NE(p, nullptr);
    EXPECT_EQ(p, c3.value_ptr(k_str));
    goro::context keep = c6;
    c3 = c5 = c6 = goro::background();
    EXPECT_EQ(keep.value_ptr(k_str), p);
    EXPECT_EQ(*p, "three");

    // Move-only values are reachable through value_ptr.
    auto u = goro::with_value(c4, k_uptr, std::make_unique<int>(42));
    ASSERT_NE(u.value_ptr(k_uptr), nullptr);
    EXPECT_EQ(**u.value_ptr(k_uptr), 42);
    EXPECT_EQ(u.value_ptr(k_int), c4.value_ptr(k_int));

    const std::string name = goro::to_string(keep);
    EXPECT_EQ(name.rfind("context.Background.WithValue(k_int).WithCancel."
                         "WithValue(k_str).WithDeadline(",
                         0),
              0u)
        << name;
    EXPECT_TRUE(name.ends_with(".WithValue(k_int).WithValue(k_int2)")) << name;
    EXPECT_EQ(goro::to_string(c2),
              "context.Background.WithValue(k_int).WithCancel");

    // Values survive cancellation.
    cancel2();
    EXPECT_EQ(keep.value(k_int), 5);
    EXPECT_EQ(keep.err(), kCanceled);
    cancel4();

    // Readable from many goroutines at once.
    goro::wait_group wg;
    std::atomic<int> ok{0};
    for (int i = 0; i < 16; i++) {
      wg.add();
      goro::go([&, keep = keep] {
        if (keep.value(k_int) == 5 && keep.value(k_str) == "three") ok++;
        wg.done();
      });
    }
    wg.wait();
    EXPECT_EQ(ok.load(), 16);
  });
}

// Go's TestLayersCancel/TestLayersTimeout: random stacks of value, cancel
// and timeout layers; cancelling (or timing out) one layer makes exactly
// that layer and the ones below it done.
TEST_F(Context, RandomLayers) {
  goro::run([] {
    std::mt19937 rng(12345);
    const int trials = scaled(200, 40);
    for (int trial = 0; trial < trials; trial++) {
      const int depth = 2 + static_cast<int>(rng() % 12);
      std::vector<goro::context> layer;
      std::vector<goro::cancel_func> cancels;  // per layer; empty for values
      std::vector<bool> has_value;             // k_int set at or above
      goro::context cur = goro::background();
      const bool timed = trial % 4 == 3;
      int fire_at = -1;  // the layer given a short timeout, in timed trials
      for (int i = 0; i < depth; i++) {
        switch (rng() % 3) {
          case 0:
            cur = goro::with_value(cur, k_int, i);
            cancels.emplace_back();
            has_value.push_back(true);
            break;
          case 1: {
            auto [c, f] = goro::with_cancel(cur);
            cur = c;
            cancels.push_back(f);
            break;
          }
          default: {
            const bool short_one = timed && fire_at < 0;
            auto [c, f] = goro::with_timeout(cur, short_one ? 5ms : 1h);
            if (short_one) fire_at = i;
            cur = c;
            cancels.push_back(f);
            break;
          }
        }
        if (has_value.size() < layer.size() + 1)
          has_value.push_back(!has_value.empty() && has_value.back());
        layer.push_back(cur);
      }
      // The layer whose cancellation we trigger.
      int at = -1;
      if (timed) {
        at = fire_at;
      } else {
        std::vector<int> cancellable;
        for (int i = 0; i < depth; i++)
          if (cancels[i]) cancellable.push_back(i);
        if (!cancellable.empty()) at = cancellable[rng() % cancellable.size()];
      }
      // (In timed trials the short timer may already have fired below it.)
      for (int i = 0; i < (timed && at >= 0 ? at : depth); i++)
        ASSERT_FALSE(is_done(layer[i]));
      if (at >= 0) {
        if (timed)
          ASSERT_TRUE(wait_done(layer[at], 2000ms));
        else
          cancels[at]();
      }
      const std::error_code want = timed ? kDeadline : kCanceled;
      for (int i = 0; i < depth; i++) {
        const bool done_expected = at >= 0 && i >= at;
        ASSERT_EQ(is_done(layer[i]), done_expected)
            << "trial " << trial << " layer " << i << " of "
            << goro::to_string(layer.back()) << ", triggered " << at;
        ASSERT_EQ(layer[i].err(), done_expected ? want : kNone);
        ASSERT_EQ(layer[i].value(k_int).has_value(), bool(has_value[i]));
      }
      for (const auto& f : cancels)
        if (f) f();
    }
  });
}

// The typical Go pattern: workers select on ctx.done() and a work channel;
// the producer selects on ctx.done() and its send. Cancel stops them all.
TEST_F(Context, WorkerPoolStopsOnCancel) {
  goro::run([] {
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    auto jobs = goro::make_chan<int>();
    const int workers = 8;
    const int njobs = scaled(5000, 1000);
    std::atomic<std::int64_t> processed{0}, sum{0};
    goro::wait_group wg;
    for (int w = 0; w < workers; w++) {
      wg.add();
      goro::go([&, ctx = ctx] {
        for (;;) {
          std::optional<int> j;
          if (goro::select(goro::case_recv(ctx.done()),
                           goro::case_recv(jobs, j)) == 0)
            break;
          EXPECT_TRUE(j.has_value()) << "jobs is never closed";
          if (!j) break;
          processed++;
          sum += *j;
        }
        wg.done();
      });
    }
    for (int i = 1; i <= njobs; i++) jobs.send(i);  // each taken by a worker
    cancel();
    wg.wait();
    EXPECT_EQ(processed.load(), njobs);
    EXPECT_EQ(sum.load(), std::int64_t(njobs) * (njobs + 1) / 2);
    // With the pool gone, a producer respecting ctx stops instead of
    // blocking forever.
    EXPECT_EQ(
        goro::select(goro::case_recv(ctx.done()), goro::case_send(jobs, 1)),
        0u);
    EXPECT_EQ(ctx.err(), kCanceled);
  });
}

// The same pool driven by a deadline: a producer that sends as fast as the
// workers take work stops when the timeout fires, and so do the workers.
TEST_F(Context, WorkerPoolStopsOnTimeout) {
  goro::run([] {
    const auto start = clk::now();
    auto [ctx, cancel] = goro::with_timeout(goro::background(), 50ms);
    auto jobs = goro::make_chan<int>(4);
    std::atomic<std::int64_t> processed{0};
    goro::wait_group wg;
    for (int w = 0; w < 4; w++) {
      wg.add();
      goro::go([&, ctx = ctx] {
        std::optional<int> j;
        while (goro::select(goro::case_recv(ctx.done()),
                            goro::case_recv(jobs, j)) == 1)
          processed++;
        wg.done();
      });
    }
    std::int64_t sent = 0;
    while (goro::select(goro::case_recv(ctx.done()),
                        goro::case_send(jobs, 1)) == 1) {
      sent++;
      if (clk::now() - start > 5s) {
        ADD_FAILURE() << "the timeout never stopped the producer";
        cancel();
      }
    }
    wg.wait();
    EXPECT_GE(clk::now(), *ctx.deadline());
    EXPECT_EQ(ctx.err(), kDeadline);
    EXPECT_GT(sent, 0);
    EXPECT_LE(processed.load(), sent);
    cancel();
  });
}

// A plain std::thread blocked in ctx.done().recv() is woken by a cancel from
// a goroutine; a plain thread can also make, wait on and cancel contexts.
TEST_F(Context, PlainThreadWaitsOnDone) {
  goro::run([] {
    for (int round = 0; round < scaled(20, 5); round++) {
      auto [ctx, cancel] = goro::with_cancel(goro::background());
      goro::chan<void> d = ctx.done();
      std::atomic<int> result{-1};
      std::thread t([&, ctx = ctx] {
        bool got = ctx.done().recv();
        result = (!got && ctx.err() == kCanceled) ? 1 : 0;
      });
      // Cancel only once the thread is really blocked on the channel.
      ASSERT_TRUE(eventually([&] { return receivers_queued(d) == 1; }));
      EXPECT_EQ(result.load(), -1);
      goro::go([cancel = cancel] { cancel(); });
      goro::blocking_long([&] { t.join(); });  // frees the P for the canceller
      EXPECT_EQ(result.load(), 1);
    }

    // Thread-made timeout, waited for by the thread; a goroutine blocked on
    // a thread-made context is released by the thread's cancel.
    std::atomic<bool> timed_out{false};
    std::thread t2([&] {
      auto [c, f] = goro::with_timeout(goro::background(), 20ms);
      c.done().recv();
      timed_out = c.err() == kDeadline && clk::now() >= *c.deadline();
      f();
    });
    goro::blocking_long([&] { t2.join(); });  // the P must run the timer
    EXPECT_TRUE(timed_out.load());

    using made = std::pair<goro::context, goro::cancel_func>;
    auto to_main = goro::make_chan<made>(1);
    auto to_thread = goro::make_chan<made>(1);
    std::thread t3([&] {
      to_main.send(goro::with_cancel(goro::background()));
      auto got = to_thread.recv();  // sent back once a goroutine is blocked
      got->second();
    });
    auto p = to_main.recv();
    ASSERT_TRUE(p.has_value());
    goro::context c = p->first;
    auto waiter_done = goro::make_chan<std::error_code>(1);
    goro::go([c, waiter_done] {
      c.done().recv();
      waiter_done.send(c.err());
    });
    ASSERT_TRUE(eventually([&] { return receivers_queued(c.done()) == 1; }));
    to_thread.send(*p);
    EXPECT_EQ(waiter_done.recv(), kCanceled);
    goro::blocking_long([&] { t3.join(); });
  });
}

// No leaks: cancelling a child unregisters it, and once the handles are gone
// every cancellation state (and its timer) is freed. 100k contexts.
TEST_F(Context, CancelRemovesChildrenNoLeaks) {
  goro::run([] {
    const std::int64_t base = goro::detail::context_live_states();
    {
      auto [parent, cancel_parent] = goro::with_cancel(goro::background());
      auto mid = goro::with_value(parent, k_int, 1);
      const int n = scaled(100000, 20000);
      for (int i = 0; i < n; i++) {
        auto [c, f] =
            (i % 2) ? goro::with_cancel(mid) : goro::with_timeout(mid, 1h);
        if (i % 1000 == 0) {
          ASSERT_EQ(goro::detail::context_num_children(parent), 1u);
          ASSERT_EQ(goro::detail::context_live_states(), base + 2);
        }
        f();
      }
      EXPECT_EQ(goro::detail::context_num_children(parent), 0u);
      EXPECT_EQ(goro::detail::context_live_states(), base + 1);

      // Go's TestCancelRemoves: children not yet cancelled stay registered
      // (even with their handles dropped) until the parent is cancelled.
      std::vector<goro::cancel_func> kept;
      for (int i = 0; i < 10; i++) {
        auto [c, f] = goro::with_timeout(parent, 1h);
        if (i < 5) kept.push_back(f);  // the rest: handles dropped here
      }
      EXPECT_EQ(goro::detail::context_num_children(parent), 10u);
      EXPECT_EQ(goro::detail::context_live_states(), base + 11);
      kept[0]();
      EXPECT_EQ(goro::detail::context_num_children(parent), 9u);
      cancel_parent();
      EXPECT_EQ(goro::detail::context_num_children(parent), 0u);
      kept.clear();
      EXPECT_EQ(goro::detail::context_live_states(), base + 1);
    }
    EXPECT_EQ(goro::detail::context_live_states(), base);

    // A never-cancelled subtree dies with its last handle (no cycles).
    {
      auto [root, cancel_root] = goro::with_cancel(goro::background());
      for (int i = 0; i < 100; i++) {
        auto [c, f] = goro::with_cancel(root);
        auto [g, fg] = goro::with_cancel(c);
        (void)g;
      }
      EXPECT_EQ(goro::detail::context_live_states(), base + 201);
    }
    EXPECT_EQ(goro::detail::context_live_states(), base);

    // Timers that fired release their contexts once their goroutines end.
    {
      std::vector<goro::context> ctxs;
      for (int i = 0; i < 100; i++)
        ctxs.push_back(goro::with_timeout(goro::background(), 1ms).first);
      for (const auto& c : ctxs) ASSERT_TRUE(wait_done(c, 2000ms));
    }
    EXPECT_TRUE(eventually([&] {
      return goro::detail::context_live_states() <= base;
    })) << goro::detail::context_live_states() - base
        << " states left";
  });
}

// Deep trees: a 100k-long chain of values and a 20k-deep chain of cancel
// contexts are looked up, cancelled and freed without recursing once per
// level (a goroutine's stack is fixed-size).
TEST_F(Context, DeepChainsDoNotRecurse) {
  goro::run([] {
    const std::int64_t base = goro::detail::context_live_states();
    ASSERT_EQ(base, 0);
    {
      goro::context c = goro::with_value(goro::background(), k_str, "root");
      for (int i = 0; i < 100000; i++) c = goro::with_value(c, k_int, i);
      EXPECT_EQ(c.value(k_int), 99999);
      EXPECT_EQ(c.value(k_str), "root");
    }
    const int depth = 20000;
    {
      auto [root, cancel_root] = goro::with_cancel(goro::background());
      goro::context c = root;
      std::vector<goro::cancel_func> fs;
      for (int i = 0; i < depth; i++) {
        auto [n, f] = goro::with_cancel(c);
        c = n;
        fs.push_back(f);
      }
      EXPECT_FALSE(is_done(c));
      cancel_root();
      EXPECT_TRUE(is_done(c));
      EXPECT_EQ(c.err(), kCanceled);
    }
    EXPECT_EQ(goro::detail::context_live_states(), base);
    {
      // Never cancelled: freed when the last handle goes.
      goro::context c = goro::with_cancel(goro::background()).first;
      for (int i = 0; i < depth; i++) c = goro::with_cancel(c).first;
    }
    EXPECT_EQ(goro::detail::context_live_states(), base);
  });
}

// The error category: Go's messages, portable conditions, bool tests.
TEST_F(Context, ErrorCategory) {
  const std::error_code none;
  EXPECT_FALSE(none);
  EXPECT_TRUE(kCanceled);
  EXPECT_STREQ(goro::context_category().name(), "context");
  EXPECT_EQ(kCanceled.message(), "context canceled");
  EXPECT_EQ(kDeadline.message(), "context deadline exceeded");
  EXPECT_EQ(&kCanceled.category(), &goro::context_category());
  EXPECT_TRUE(kCanceled == goro::context_errc::canceled);
  EXPECT_FALSE(kCanceled == goro::context_errc::deadline_exceeded);
  EXPECT_TRUE(kCanceled == std::errc::operation_canceled);
  EXPECT_TRUE(kDeadline == std::errc::timed_out);
  EXPECT_FALSE(kDeadline == std::errc::operation_canceled);
  std::system_error ex(kDeadline);
  EXPECT_NE(std::string(ex.what()).find("context deadline exceeded"),
            std::string::npos);
}

}  // namespace
