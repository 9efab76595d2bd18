// goro::dynamic_select (Go's reflect.Select): fan-in of many channels from
// one goroutine, fairness with bounded statistics (as Select.SelectFairness),
// default and nil cases, send cases and their values, callbacks, type and
// direction errors, and no leaks of the values it holds.
#include <array>
#include <atomic>
#include <cmath>
#include <goro/goro.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chan_support.hpp"
#include "test_support.hpp"

namespace {

using goro_test::await_queued;
using goro_test::side;

// Fan-in of 100 channels by one goroutine, no goroutine per channel: every
// value arrives exactly once, and the loop ends when all are closed.
TEST(DynSelect, FanInOfHundredChannels) {
  constexpr int nchan = 100;
  const int per = goro_test::scaled(200, 20);
  std::vector<long> sums(nchan, 0);
  std::vector<int> counts(nchan, 0);
  int closes = 0;
  goro::run([&] {
    std::vector<goro::chan<int>> in;
    for (int i = 0; i < nchan; i++) in.push_back(goro::make_chan<int>(i % 3));
    for (int i = 0; i < nchan; i++) {
      goro::go([ch = goro::send_chan<int>(in[i])] {
        for (int v = 1; v <= per; v++) ch.send(v);
        ch.close();
      });
    }
    goro::dynamic_select sel;
    for (auto& ch : in)
      EXPECT_EQ(sel.add_recv(goro::recv_chan<int>(ch)),
                std::size_t(&ch - in.data()));
    for (int open = nchan; open > 0;) {
      auto r = sel.select();
      ASSERT_LT(r.index, std::size_t(nchan));
      if (!r.recv_ok) {
        sel.disable(r.index);  // Go: cases[i].Chan = reflect.Value{}
        closes++;
        open--;
        continue;
      }
      std::optional<int> v = sel.take<int>(r.index);
      ASSERT_TRUE(v);
      EXPECT_EQ(sel.take<int>(r.index), std::nullopt);  // taken once
      sums[r.index] += *v;
      counts[r.index]++;
    }
  });
  EXPECT_EQ(closes, nchan);
  for (int i = 0; i < nchan; i++) {
    EXPECT_EQ(counts[i], per) << "chan " << i;
    EXPECT_EQ(sums[i], long(per) * (per + 1) / 2) << "chan " << i;
  }
}

// As Select.SelectFairness: of 4 receive cases, 2 are always ready; each
// must win 50% within 4.891676/(2*sqrt(trials)) (six nines of confidence).
TEST(DynSelect, FairnessAmongReadyCases) {
  constexpr int trials = 10000;
  int cnt[4] = {0, 0, 0, 0};
  goro::run([&] {
    auto c1 = goro::make_chan<std::uint8_t>(trials + 1);
    auto c2 = goro::make_chan<std::uint8_t>(trials + 1);
    for (int i = 0; i < trials + 1; i++) {
      c1.send(1);
      c2.send(2);
    }
    auto c3 = goro::make_chan<std::uint8_t>();
    auto c4 = goro::make_chan<std::uint8_t>();
    goro::dynamic_select sel;
    sel.add_recv(c3);
    sel.add_recv(c1);
    sel.add_recv(c4);
    sel.add_recv(c2);
    for (int i = 0; i < trials; i++) {
      auto r = sel.select();
      ASSERT_TRUE(r.recv_ok);
      cnt[r.index]++;
    }
  });
  EXPECT_EQ(cnt[0] + cnt[2], 0) << "an unready case was chosen";
  const double r = double(cnt[1]) / trials;
  const double bound = 4.891676 / (2 * std::sqrt(double(trials)));
  EXPECT_LE(std::abs(r - 0.5), bound)
      << "unfair select: " << cnt[1] << " vs " << cnt[3];
}

// Fairness over many ready cases (beyond selectgo's 8-case stack arrays):
// with 64 always-ready channels and 64 * 200 selects, each is chosen 200
// times on average; a binomial(12800, 1/64) count below 100 or above 300 has
// a probability under 1e-12 per case.
TEST(DynSelect, FairnessAmongManyReadyCases) {
  constexpr int n = 64, rounds = 200;
  std::array<int, n> cnt{};
  goro::run([&] {
    goro::dynamic_select sel;
    std::vector<goro::chan<int>> chans;
    for (int i = 0; i < n; i++) {
      chans.push_back(goro::make_chan<int>(1));
      chans.back().send(i);
      sel.add_recv(chans.back());
    }
    for (int k = 0; k < n * rounds; k++) {
      auto r = sel.select();
      ASSERT_TRUE(r.recv_ok);
      int v = *sel.take<int>(r.index);
      ASSERT_EQ(v, int(r.index));
      cnt[r.index]++;
      chans[r.index].send(v);  // ready again
    }
  });
  for (int i = 0; i < n; i++) {
    EXPECT_GT(cnt[i], 100) << "case " << i;
    EXPECT_LT(cnt[i], 300) << "case " << i;
  }
}

TEST(DynSelect, DefaultAndNilCases) {
  goro::run([] {
    goro::dynamic_select sel;
    auto a = goro::make_chan<int>(1);
    std::size_t ia = sel.add_recv(a);
    std::size_t inil = sel.add_recv(goro::chan<int>());  // nil: never ready
    std::size_t idef = sel.add_default();
    EXPECT_EQ(sel.size(), 3u);
    EXPECT_THROW(sel.add_default(), std::logic_error);
    auto r = sel.select();
    EXPECT_EQ(r.index, idef);
    EXPECT_FALSE(r.recv_ok);
    a.send(5);
    // Never the default while a case is ready.
    for (int i = 0; i < 100; i++) {
      r = sel.select();
      ASSERT_EQ(r.index, ia);
      EXPECT_EQ(sel.take<int>(ia), std::optional<int>(5));
      a.send(5);
    }
    sel.disable(ia);
    EXPECT_EQ(sel.select().index, idef);  // a disabled case is nil
    sel.set_chan(ia, a);                  // and back
    EXPECT_EQ(sel.select().index, ia);
    EXPECT_NE(inil, ia);
  });
}

// Without a default, select() blocks until a case is ready.
TEST(DynSelect, BlocksUntilReady) {
  goro::run([] {
    auto a = goro::make_chan<std::string>();
    auto b = goro::make_chan<void>();
    goro::dynamic_select sel;
    sel.add_recv(a);
    sel.add_recv(b);
    goro::go([a, b] {
      ASSERT_TRUE(await_queued(a, side::receivers, 1));
      ASSERT_TRUE(await_queued(b, side::receivers, 1));
      a.send("hello");
    });
    auto r = sel.select();
    EXPECT_EQ(r.index, 0u);
    EXPECT_TRUE(r.recv_ok);
    EXPECT_EQ(sel.take<std::string>(0), std::optional<std::string>("hello"));
    // The other case's waiter was dequeued.
    EXPECT_EQ(goro_test::queued(b, side::receivers), 0u);
  });
}

// Send cases own their value, consume it when sent, and must be re-armed.
TEST(DynSelect, SendCases) {
  goro::run([] {
    auto out = goro::make_chan<std::unique_ptr<int>>(1);
    goro::send_chan<std::unique_ptr<int>> view = out;
    goro::dynamic_select sel;
    std::size_t is = sel.add_send(view, std::make_unique<int>(1));
    std::size_t idef = sel.add_default();
    EXPECT_EQ(sel.select().index, is);
    auto got = out.recv();
    ASSERT_TRUE(got && *got);
    EXPECT_EQ(**got, 1);
    EXPECT_THROW(sel.select(), std::logic_error);  // spent
    sel.set_send_value<std::unique_ptr<int>>(is, std::make_unique<int>(2));
    EXPECT_EQ(sel.select().index, is);
    sel.set_send_value<std::unique_ptr<int>>(is, std::make_unique<int>(3));
    EXPECT_EQ(sel.select().index, idef);  // full: the value stays
    EXPECT_EQ(**out.recv(), 2);
    EXPECT_EQ(sel.select().index, is);
    EXPECT_EQ(**out.recv(), 3);
    // chan<void> signals stay armed.
    auto sig = goro::make_chan<void>(2);
    goro::dynamic_select s2;
    s2.add_send(sig);
    s2.select();
    s2.select();
    EXPECT_EQ(sig.len(), 2u);
    // A send on a closed channel throws, as in goro::select.
    out.close();
    sel.set_send_value<std::unique_ptr<int>>(is, std::make_unique<int>(4));
    EXPECT_THROW(sel.select(), goro::channel_error);
  });
}

// Mixed element types with callbacks, run after the select.
TEST(DynSelect, CallbacksAndMixedTypes) {
  goro::run([] {
    auto ints = goro::make_chan<int>(1);
    auto strs = goro::make_chan<std::string>(1);
    auto quit = goro::make_chan<void>();
    int isum = 0;
    std::string all;
    bool quitting = false;
    goro::dynamic_select sel;
    sel.add_recv(ints, [&](std::optional<int> v) { isum += v.value_or(0); });
    sel.add_recv(strs,
                 [&](std::optional<std::string> v) { all += v.value_or("!"); });
    sel.add_recv(quit, [&](bool ok) { quitting = !ok; });
    ints.send(2);
    sel.select();
    strs.send("x");
    sel.select();
    ints.send(3);
    sel.select();
    quit.close();
    sel.select();
    EXPECT_EQ(isum, 5);
    EXPECT_EQ(all, "x");
    EXPECT_TRUE(quitting);
  });
}

TEST(DynSelect, BadUseIsRefused) {
  goro::dynamic_select sel;
  auto c = goro::make_chan<int>(1);
  std::size_t i = sel.add_recv(c);
  EXPECT_THROW(sel.take<long>(i), std::invalid_argument);  // wrong type
  EXPECT_THROW(sel.take<int>(7), std::invalid_argument);   // no such case
  EXPECT_THROW(sel.set_chan(i, goro::send_chan<int>(c)),   // direction
               std::invalid_argument);
  EXPECT_THROW(sel.set_chan(i, goro::make_chan<long>()),  // type
               std::invalid_argument);
  EXPECT_THROW(sel.set_send_value<int>(i, 1), std::invalid_argument);
  EXPECT_THROW(sel.disable(9), std::invalid_argument);
}

// Values held by the cases (send values, received values not taken) are
// destroyed exactly once: on select(), on set_send_value and with the
// object. Counted, and checked for leaks under ASan.
struct counted {
  static inline std::atomic<int> live{0};
  int v;
  explicit counted(int x) : v(x) { live++; }
  counted(counted&& o) noexcept : v(o.v) { live++; }
  ~counted() { live--; }
};

TEST(DynSelect, HeldValuesAreDestroyed) {
  goro::run([] {
    auto c = goro::make_chan<counted>(4);
    {
      goro::dynamic_select sel;
      sel.add_send(c, counted(1));
      sel.add_recv(c);
      sel.add_send(goro::chan<counted>(), counted(2));  // nil: never sent
      EXPECT_EQ(counted::live, 2);
      sel.set_send_value<counted>(0, counted(3));  // replaces 1
      EXPECT_EQ(counted::live, 2);
      EXPECT_EQ(sel.select().index, 0u);  // c was empty: the send ran
      EXPECT_EQ(counted::live, 2);        // 3 in the buffer, 2 held
      sel.disable(0);
      EXPECT_EQ(sel.select().index, 1u);  // receives 3; not taken
      EXPECT_EQ(counted::live, 2);
      c.send(counted(4));
      EXPECT_EQ(sel.select().index, 1u);  // discards 3, holds 4
      EXPECT_EQ(counted::live, 2);
      goro::dynamic_select moved(std::move(sel));
      EXPECT_EQ(sel.size(), 0u);
      EXPECT_EQ(moved.size(), 3u);
      EXPECT_EQ(counted::live, 2);
    }
    EXPECT_EQ(counted::live, 0);
  });
}

// A plain thread (not a goroutine) can block in a dynamic select too.
TEST(DynSelect, PlainThreadBlocks) {
  goro::run([] {});  // runtime started
  auto a = goro::make_chan<int>();
  goro::go([a] {
    ASSERT_TRUE(await_queued(a, side::receivers, 1));
    a.send(9);
  });
  goro::dynamic_select sel;
  sel.add_recv(goro::chan<int>());
  sel.add_recv(a);
  auto r = sel.select();
  EXPECT_EQ(r.index, 1u);
  EXPECT_EQ(sel.take<int>(1), std::optional<int>(9));
}

}  // namespace
