// Directional channel views (Go's <-chan T and chan<- T): goro::recv_chan
// and goro::send_chan convert implicitly from chan<T>, share its channel,
// and allow only their direction's operations (checked at compile time with
// concepts below), in plain operations, range-for and select cases.
#include <goro/goro.hpp>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "chan_support.hpp"
#include "test_support.hpp"

namespace {

using goro::chan;
using goro::recv_chan;
using goro::send_chan;

// --- what compiles: each direction only its own operations ----------------

template <class C>
concept can_send = requires(const C& c) {
  c.send(1);
};
template <class C>
concept can_try_send = requires(const C& c) {
  c.try_send(1);
};
template <class C>
concept can_recv = requires(const C& c) {
  c.recv();
};
template <class C>
concept can_try_recv = requires(const C& c) {
  c.try_recv();
};
template <class C>
concept can_close = requires(const C& c) {
  c.close();
};
template <class C>
concept can_range = requires(const C& c) {
  c.begin();
};
template <class C>
concept in_case_recv = requires(const C& c) {
  goro::case_recv(c);
};
template <class C>
concept in_case_send = requires(const C& c) {
  goro::case_send(c, 1);
};
template <class C>
concept in_dyn_recv = requires(goro::dynamic_select& s, const C& c) {
  s.add_recv(c);
};
template <class C>
concept in_dyn_send = requires(goro::dynamic_select& s, const C& c) {
  s.add_send(c, 1);
};

static_assert(can_send<chan<int>> && can_recv<chan<int>>);
static_assert(can_send<send_chan<int>> && can_try_send<send_chan<int>> &&
              can_close<send_chan<int>>);
static_assert(!can_recv<send_chan<int>> && !can_try_recv<send_chan<int>> &&
              !can_range<send_chan<int>>);
static_assert(can_recv<recv_chan<int>> && can_try_recv<recv_chan<int>> &&
              can_range<recv_chan<int>>);
static_assert(!can_send<recv_chan<int>> && !can_try_send<recv_chan<int>> &&
              !can_close<recv_chan<int>>);
static_assert(in_case_recv<recv_chan<int>> && !in_case_recv<send_chan<int>>);
static_assert(in_case_send<send_chan<int>> && !in_case_send<recv_chan<int>>);
static_assert(in_dyn_recv<recv_chan<int>> && !in_dyn_recv<send_chan<int>>);
static_assert(in_dyn_send<send_chan<int>> && !in_dyn_send<recv_chan<int>>);
// Implicit from chan<T>; never back, never across, never between types.
static_assert(std::is_convertible_v<chan<int>, recv_chan<int>>);
static_assert(std::is_convertible_v<chan<int>, send_chan<int>>);
static_assert(!std::is_convertible_v<recv_chan<int>, chan<int>>);
static_assert(!std::is_convertible_v<send_chan<int>, chan<int>>);
static_assert(!std::is_convertible_v<send_chan<int>, recv_chan<int>>);
static_assert(!std::is_convertible_v<recv_chan<int>, send_chan<int>>);
static_assert(!std::is_convertible_v<chan<long>, send_chan<int>>);
// chan<void> views.
static_assert(requires(const send_chan<void>& c) { c.send(); });
static_assert(!can_send<send_chan<void>>);  // no payload to send

// --- behaviour --------------------------------------------------------------

// A producer that hands out only the receive end (the idiom the views are
// for): the consumer ranges over it until the producer closes its send end.
recv_chan<int> count_to(int n) {
  auto ch = goro::make_chan<int>();
  goro::go([out = send_chan<int>(ch), n] {
    for (int i = 1; i <= n; i++) out.send(i);
    out.close();
  });
  return ch;
}

TEST(ChanView, ProducerHandsOutReceiveOnlyEnd) {
  int sum = 0, count = 0;
  goro::run([&] {
    for (int v : count_to(100)) {
      sum += v;
      count++;
    }
  });
  EXPECT_EQ(count, 100);
  EXPECT_EQ(sum, 5050);
}

TEST(ChanView, ViewsShareTheChannel) {
  goro::run([] {
    auto ch = goro::make_chan<std::string>(3);
    send_chan<std::string> s = ch;
    recv_chan<std::string> r = ch;
    EXPECT_TRUE(s == send_chan<std::string>(ch));
    EXPECT_TRUE(r == recv_chan<std::string>(ch));
    EXPECT_EQ(s.raw(), ch.raw());
    EXPECT_EQ(r.raw(), ch.raw());
    s.send("a");
    EXPECT_TRUE(s.try_send("b"));
    EXPECT_EQ(ch.len(), 2u);
    EXPECT_EQ(s.len(), 2u);
    EXPECT_EQ(r.len(), 2u);
    EXPECT_EQ(s.cap(), 3u);
    EXPECT_EQ(r.cap(), 3u);
    EXPECT_EQ(r.recv(), std::optional<std::string>("a"));
    EXPECT_EQ(r.try_recv(), std::optional<std::string>("b"));
    bool closed = true;
    EXPECT_EQ(r.try_recv(&closed), std::nullopt);
    EXPECT_FALSE(closed);
    s.close();  // Go allows close on a chan<- T
    EXPECT_EQ(r.try_recv(&closed), std::nullopt);
    EXPECT_TRUE(closed);
    EXPECT_EQ(ch.recv(), std::nullopt);
    EXPECT_THROW(s.send("c"), goro::channel_error);
    EXPECT_THROW(s.close(), goro::channel_error);
  });
}

TEST(ChanView, NilViews) {
  send_chan<int> s;
  recv_chan<int> r;
  EXPECT_FALSE(s);
  EXPECT_FALSE(r);
  EXPECT_EQ(s.len(), 0u);
  EXPECT_EQ(r.cap(), 0u);
  EXPECT_THROW(s.close(), goro::channel_error);
  goro::run([&] {
    EXPECT_FALSE(s.try_send(1));  // a nil channel is never ready
    EXPECT_EQ(r.try_recv(), std::nullopt);
    // In a select a nil view is never chosen.
    EXPECT_EQ(goro::select(goro::case_send(s, 1), goro::case_recv(r),
                           goro::case_default()),
              2u);
  });
  EXPECT_TRUE(send_chan<int>(goro::make_chan<int>()));
}

TEST(ChanView, VoidViews) {
  goro::run([] {
    auto ch = goro::make_chan<void>(2);
    send_chan<void> s = ch;
    recv_chan<void> r = ch;
    s.send();
    EXPECT_TRUE(s.try_send());
    EXPECT_FALSE(s.try_send());  // full
    EXPECT_TRUE(r.recv());
    bool ok = false;
    EXPECT_EQ(goro::select(goro::case_recv(r, ok)), 0u);
    EXPECT_TRUE(ok);
    EXPECT_EQ(goro::select(goro::case_send(s), goro::case_default()), 0u);
    s.close();
    int n = 0;
    for (auto _ : r) n++;
    EXPECT_EQ(n, 1);
  });
}

// Views in select cases, on both sides of an unbuffered channel: the send
// case of one goroutine meets the receive case of another.
TEST(ChanView, SelectCasesOnViews) {
  constexpr int n = 1000;
  long sum = 0;
  goro::run([&] {
    auto ch = goro::make_chan<int>();
    auto quit = goro::make_chan<void>();
    send_chan<int> out = ch;
    recv_chan<int> in = ch;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&, out, quit_r = recv_chan<void>(quit)] {
      for (int i = 1;;) {
        std::size_t k = goro::select(goro::case_send(out, i, [&] { i++; }),
                                     goro::case_recv(quit_r));
        if (k == 1) break;
      }
      wg.done();
    });
    for (int i = 0; i < n; i++) {
      std::optional<int> v;
      ASSERT_EQ(goro::select(goro::case_recv(in, v)), 0u);
      ASSERT_TRUE(v);
      sum += *v;
    }
    quit.close();
    wg.wait();
  });
  EXPECT_EQ(sum, long(n) * (n + 1) / 2);
}

// A goroutine blocked sending through a view is woken by a receive through
// another view of the same channel.
TEST(ChanView, BlockedSendThroughViewCompletes) {
  goro::run([] {
    auto ch = goro::make_chan<std::unique_ptr<int>>();
    send_chan<std::unique_ptr<int>> s = ch;
    recv_chan<std::unique_ptr<int>> r = ch;
    goro::go([s] { s.send(std::make_unique<int>(7)); });
    ASSERT_TRUE(goro_test::await_queued(ch, goro_test::side::senders, 1));
    auto v = r.recv();
    ASSERT_TRUE(v && *v);
    EXPECT_EQ(**v, 7);
  });
}

}  // namespace
