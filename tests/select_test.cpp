// Select tests (ports of the intent of Go's runtime/chan_test.go select
// tests: TestNonblockSelectRace{,2}, TestSelfSelect, TestSelectStress,
// TestSelectFairness, TestPseudoRandomSend, TestSelectDuplicateChannel, plus
// goro's own: callbacks, nil cases, more than 8 cases (the heap-allocated
// path of selectgo), move-only payloads, close while blocked, plain threads
// blocked in select).
//
// Every test calls goro::run(fn) with default options, so the number of Ps
// comes from GOMAXPROCS (or the CPU count); all tests pass with 1 or more.
//
// "This select blocks" is checked without sleeping: the test waits until the
// select's waiter records are queued on the channels (read under the channel
// lock through the private header chan/hchan.hpp), and then checks that the
// select has not returned; each such check is followed by a positive check
// that it returns once a case becomes ready.
#include <array>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <goro/goro.hpp>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "chan_support.hpp"
#include "test_support.hpp"

namespace {

using namespace std::chrono_literals;
using goro_test::deadline;
using goro_test::scaled;

// ---------------------------------------------------------------------------
// helpers

using goro_test::await_queued;
using goro_test::queued;
using goro_test::side;

// select over N receive cases, one per channel in chs, built at compile time.
template <class T, std::size_t N>
std::size_t select_recv_all(const std::array<goro::chan<T>, N>& chs,
                            std::array<std::optional<T>, N>& outs) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    return goro::select(goro::case_recv(chs[I], outs[I])...);
  }
  (std::make_index_sequence<N>{});
}

template <class T, std::size_t N>
std::size_t select_send_all(const std::array<goro::chan<T>, N>& chs,
                            const std::array<T, N>& vals, bool with_default) {
  return [&]<std::size_t... I>(std::index_sequence<I...>) {
    if (with_default)
      return goro::select(goro::case_send(chs[I], vals[I])...,
                          goro::case_default());
    return goro::select(goro::case_send(chs[I], vals[I])...);
  }
  (std::make_index_sequence<N>{});
}

// ---------------------------------------------------------------------------
// TestNonblockSelectRace{,2}: from the moment the goroutine starts, c1 or c2
// is always ready to receive, so its non-blocking select must never take the
// default: select acts on one snapshot, not a smeared time window.

TEST(Select, NonblockSelectRace) {
  int n = scaled(100000, 5000);
  int defaults = 0;
  goro::run([&] {
    auto done = goro::make_chan<bool>(1);
    for (int i = 0; i < n; i++) {
      auto c1 = goro::make_chan<int>(1);
      auto c2 = goro::make_chan<int>(1);
      c1.send(1);
      goro::go([c1, c2, done] {
        std::size_t k = goro::select(goro::case_recv(c1), goro::case_recv(c2),
                                     goro::case_default());
        done.send(k != 2);
      });
      c2.send(1);
      goro::select(goro::case_recv(c1), goro::case_default());
      if (!done.recv().value_or(false)) {
        defaults++;
        break;
      }
    }
  });
  EXPECT_EQ(defaults, 0) << "select took its default while a case was ready";
}

TEST(Select, NonblockSelectRace2) {
  int n = scaled(100000, 5000);
  int defaults = 0;
  goro::run([&] {
    auto done = goro::make_chan<bool>(1);
    for (int i = 0; i < n; i++) {
      auto c1 = goro::make_chan<int>(1);
      auto c2 = goro::make_chan<int>();
      c1.send(1);
      goro::go([c1, c2, done] {
        std::size_t k = goro::select(goro::case_recv(c1), goro::case_recv(c2),
                                     goro::case_default());
        done.send(k != 2);
      });
      c2.close();
      goro::select(goro::case_recv(c1), goro::case_default());
      if (!done.recv().value_or(false)) {
        defaults++;
        break;
      }
    }
  });
  EXPECT_EQ(defaults, 0) << "select took its default while a case was ready";
}

// The same race with the two sides running in parallel on different Ps (a
// goroutine spawned per round mostly starts only after main has finished
// its part, so the windows above rarely overlap). A persistent worker spins
// on a round counter; main publishes a round and immediately makes c2 ready
// and c1 not ready, while the worker's non-blocking select runs. The test
// raises gomaxprocs to 2 if the environment gives 1 (and puts it back), so
// the two sides always can run in parallel.
void nonblock_select_race_parallel(bool close_c2) {
  int n = scaled(100000, 5000);
  goro_test::min_procs two(2);
  struct shared {
    std::atomic<int> round{0};
    std::atomic<int> finished{0};
    goro::chan<int> c1, c2;
  } sh;
  std::atomic<int> defaults{0};
  std::atomic<bool> timed_out{false};
  std::atomic<bool> stop{false};
  // Spins until pred() holds; yields now and then.
  auto spin_until = [&](auto pred) {
    deadline d(20s);
    for (unsigned i = 1; !pred(); i++) {
      if (i % 128 == 0)
        goro::gosched();
#if defined(__x86_64__) || defined(__i386__)
      else
        __builtin_ia32_pause();
#endif
      if (i % 4096 == 0 && d.passed()) {
        timed_out = true;
        return false;
      }
    }
    return true;
  };
  goro::wait_group wg;
  wg.add(1);
  goro::go([&] {
    for (int r = 1; r <= n; r++) {
      if (!spin_until(
              [&] { return sh.round.load(std::memory_order_acquire) >= r; }))
        break;
      if (stop.load(std::memory_order_acquire)) break;
      goro::chan<int> c1 = sh.c1, c2 = sh.c2;
      if (goro::select(goro::case_recv(c1), goro::case_recv(c2),
                       goro::case_default()) == 2)
        defaults++;
      sh.finished.store(r, std::memory_order_release);
    }
    wg.done();
  });
  // Bounded in time as well: on a loaded machine the OS may deschedule one
  // of the spinning sides for a whole time slice at a time.
  deadline budget(std::chrono::milliseconds(scaled(1500, 3000)));
  int rounds = 0;
  for (int r = 1; r <= n && !timed_out && !budget.passed(); r++) {
    rounds = r;
    auto c1 = goro::make_chan<int>(1);
    auto c2 = goro::make_chan<int>(close_c2 ? 0 : 1);
    c1.send(1);
    sh.c1 = c1;
    sh.c2 = c2;
    sh.round.store(r, std::memory_order_release);
    if (close_c2)
      c2.close();
    else
      c2.send(1);
    goro::select(goro::case_recv(c1), goro::case_default());
    if (!spin_until(
            [&] { return sh.finished.load(std::memory_order_acquire) >= r; }))
      break;
    if (defaults.load() != 0) break;
  }
  // Stop the worker: it sees the round counter jump past n (it checks
  // sh.round before touching sh.c1/c2, and re-reads nothing after the
  // last round main waited for).
  stop.store(true, std::memory_order_release);
  sh.round.store(n + 1, std::memory_order_release);
  wg.wait();
  EXPECT_FALSE(timed_out.load()) << "the two sides stopped making progress";
  EXPECT_GT(rounds, 0);
  EXPECT_EQ(defaults.load(), 0)
      << "select took its default while a case was ready (in " << rounds
      << " rounds)";
}

TEST(Select, NonblockSelectRaceParallel) {
  goro::run([] { nonblock_select_race_parallel(false); });
}

TEST(Select, NonblockSelectRace2Parallel) {
  goro::run([] { nonblock_select_race_parallel(true); });
}

// ---------------------------------------------------------------------------
// TestSelfSelect: two goroutines each select on sending to and receiving
// from the same channel. No deadlock, no crash, and on an unbuffered channel
// a select never pairs with itself (receives its own value).

TEST(Select, SelfSelect) {
  int iters = scaled(1000, 300);
  int rounds = scaled(20, 3);
  for (int round = 0; round < rounds; round++)
    for (std::size_t cap : {0u, 1u, 10u}) {
      std::atomic<int> self_receives{0};
      goro::run([&] {
        auto c = goro::make_chan<int>(cap);
        goro::wait_group wg;
        wg.add(2);
        for (int p = 0; p < 2; p++) {
          goro::go([&, p] {
            for (int i = 0; i < iters; i++) {
              std::optional<int> v;
              std::size_t k;
              bool received;
              if (p == 0 || i % 2 == 0) {
                k = goro::select(goro::case_send(c, p), goro::case_recv(c, v));
                received = k == 1;
              } else {
                k = goro::select(goro::case_recv(c, v), goro::case_send(c, p));
                received = k == 0;
              }
              if (received && cap == 0 && v == p) self_receives++;
            }
            wg.done();
          });
        }
        wg.wait();
      });
      EXPECT_EQ(self_receives.load(), 0) << "self receive on cap " << cap;
    }
}

// ---------------------------------------------------------------------------
// TestSelectStress: 4 channels (2 unbuffered, 2 buffered); per channel one
// plain sender and one plain receiver of N values, plus one goroutine that
// sends N values on each through a single 4-case select and one that
// receives N from each likewise. A select case whose channel is done is
// replaced by a nil channel. Nothing deadlocks and every value is accounted.

TEST(Select, SelectStress) {
  int N = scaled(100000, 5000);
  std::array<long long, 4> recv_sum{};
  std::array<int, 4> sel_sent{}, sel_recv{};
  goro::run([&] {
    std::array<goro::chan<int>, 4> c = {
        goro::make_chan<int>(), goro::make_chan<int>(), goro::make_chan<int>(2),
        goro::make_chan<int>(3)};
    std::array<std::atomic<long long>, 4> rsum{};
    goro::wait_group wg;
    wg.add(10);
    for (int k = 0; k < 4; k++) {
      goro::go([&, k] {
        for (int i = 0; i < N; i++) c[std::size_t(k)].send(i);
        wg.done();
      });
      goro::go([&, k] {
        long long s = 0;
        for (int i = 0; i < N; i++) s += c[std::size_t(k)].recv().value_or(-1);
        rsum[std::size_t(k)] += s;
        wg.done();
      });
    }
    goro::go([&] {
      std::array<int, 4> n{};
      auto c1 = c;
      for (int i = 0; i < 4 * N; i++) {
        auto hit = [&](std::size_t k) {
          if (++n[k] == N) c1[k] = goro::chan<int>();  // nil: never ready
        };
        // Values N.. distinguish the select sender from the plain ones.
        switch (goro::select(goro::case_send(c1[3], N + n[3]),
                             goro::case_send(c1[2], N + n[2]),
                             goro::case_send(c1[0], N + n[0]),
                             goro::case_send(c1[1], N + n[1]))) {
          case 0:
            hit(3);
            break;
          case 1:
            hit(2);
            break;
          case 2:
            hit(0);
            break;
          case 3:
            hit(1);
            break;
        }
      }
      sel_sent = n;
      wg.done();
    });
    goro::go([&] {
      std::array<int, 4> n{};
      std::array<long long, 4> s{};
      auto c1 = c;
      for (int i = 0; i < 4 * N; i++) {
        std::array<std::optional<int>, 4> v;
        std::size_t k = goro::select(
            goro::case_recv(c1[0], v[0]), goro::case_recv(c1[1], v[1]),
            goro::case_recv(c1[2], v[2]), goro::case_recv(c1[3], v[3]));
        s[k] += v[k].value_or(-1000000000);
        if (++n[k] == N) c1[k] = goro::chan<int>();
      }
      for (std::size_t k = 0; k < 4; k++) rsum[k] += s[k];
      sel_recv = n;
      wg.done();
    });
    wg.wait();
    for (std::size_t k = 0; k < 4; k++) {
      recv_sum[k] = rsum[k].load();
      EXPECT_EQ(c[k].len(), 0u);
    }
  });
  // Sent on each channel: 0..N-1 by the plain sender, N..2N-1 by select.
  const long long want = (2LL * N) * (2LL * N - 1) / 2;
  for (std::size_t k = 0; k < 4; k++) {
    EXPECT_EQ(sel_sent[k], N) << "chan " << k;
    EXPECT_EQ(sel_recv[k], N) << "chan " << k;
    EXPECT_EQ(recv_sum[k], want) << "chan " << k;
  }
}

// ---------------------------------------------------------------------------
// TestSelectFairness: of 4 receive cases, 2 (buffered, always full) are
// always ready; each must win 50% within 4.891676/(2*sqrt(trials)) (six
// nines of confidence).

TEST(Select, SelectFairness) {
  constexpr int trials = 10000;
  int cnt1 = 0, cnt2 = 0, other = 0;
  goro::run([&] {
    auto c1 = goro::make_chan<std::uint8_t>(trials + 1);
    auto c2 = goro::make_chan<std::uint8_t>(trials + 1);
    for (int i = 0; i < trials + 1; i++) {
      c1.send(1);
      c2.send(2);
    }
    auto c3 = goro::make_chan<std::uint8_t>();
    auto c4 = goro::make_chan<std::uint8_t>();
    auto out = goro::make_chan<std::uint8_t>();
    auto done = goro::make_chan<void>();
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      for (;;) {
        std::optional<std::uint8_t> b;
        goro::select(goro::case_recv(c3, b), goro::case_recv(c4, b),
                     goro::case_recv(c1, b), goro::case_recv(c2, b));
        if (goro::select(goro::case_send(out, b.value_or(0)),
                         goro::case_recv(done)) == 1)
          break;
      }
      wg.done();
    });
    for (int i = 0; i < trials; i++) {
      switch (out.recv().value_or(0)) {
        case 1:
          cnt1++;
          break;
        case 2:
          cnt2++;
          break;
        default:
          other++;
          break;
      }
    }
    done.close();
    wg.wait();
  });
  EXPECT_EQ(other, 0) << "unexpected values";
  const double r = double(cnt1) / trials;
  const double e = std::abs(r - 0.5);
  const double bound = 4.891676 / (2 * std::sqrt(double(trials)));
  EXPECT_LE(e, bound) << "unfair select: in " << trials
                      << " trials, results were " << cnt1 << ", " << cnt2;
}

// ---------------------------------------------------------------------------
// TestPseudoRandomSend: a select with two sends to the same channel picks
// each case well over n/10 times (for an unbuffered channel both waiters sit
// on one queue, in an order that must be random too).

TEST(Select, PseudoRandomSend) {
  constexpr int n = 100;
  for (std::size_t cap : {std::size_t(0), std::size_t(n)}) {
    std::vector<int> l(n, -1);
    goro::run([&] {
      auto c = goro::make_chan<int>(cap);
      auto done = goro::make_chan<void>();
      goro::go([&, c, done] {
        for (int i = 0; i < n; i++) {
          goro::gosched();
          l[std::size_t(i)] = c.recv().value_or(-1);
        }
        done.close();
      });
      for (int i = 0; i < n; i++)
        goro::select(goro::case_send(c, 1), goro::case_send(c, 0));
      done.recv();
    });
    int n0 = 0, n1 = 0, bad = 0;
    for (int v : l) {
      if (v == 0)
        n0++;
      else if (v == 1)
        n1++;
      else
        bad++;
    }
    EXPECT_EQ(bad, 0);
    EXPECT_GT(n0, n / 10) << "want pseudorandom, got " << n0 << " zeros and "
                          << n1 << " ones (chan cap " << cap << ")";
    EXPECT_GT(n1, n / 10) << "want pseudorandom, got " << n0 << " zeros and "
                          << n1 << " ones (chan cap " << cap << ")";
  }
}

// ---------------------------------------------------------------------------
// TestSelectDuplicateChannel: a goroutine queued twice on one channel (two
// cases on c) is woken through another channel and dequeues itself from c;
// c's receive queue must stay intact for the next receiver.

TEST(Select, SelectDuplicateChannel) {
  for (int round = 0; round < 20; round++) {
    std::size_t a_chose = 99;
    std::optional<int> b_got;
    goro::run([&] {
      auto c = goro::make_chan<int>();
      auto d = goro::make_chan<int>();
      auto e = goro::make_chan<int>();
      auto b_done = goro::make_chan<void>();
      // goroutine A
      goro::go([&, c, d, e] {
        a_chose = goro::select(goro::case_recv(c), goro::case_recv(c),
                               goro::case_recv(d));
        e.send(9);
      });
      // A is queued (twice) on c before B.
      EXPECT_TRUE(await_queued(c, side::receivers, 2));
      EXPECT_TRUE(await_queued(d, side::receivers, 1));
      // goroutine B
      goro::go([&, c, b_done] {
        b_got = c.recv();
        b_done.close();
      });
      EXPECT_TRUE(await_queued(c, side::receivers, 3));
      d.send(7);  // wakes A, which dequeues itself from c
      EXPECT_EQ(e.recv(), std::optional<int>(9));  // A is done
      EXPECT_EQ(queued(c, side::receivers), 1u) << "only B is left on c";
      c.send(8);  // must wake B, not the finished A
      b_done.recv();
      EXPECT_EQ(queued(c, side::receivers), 0u);
    });
    EXPECT_EQ(a_chose, 2u);
    EXPECT_EQ(b_got, std::optional<int>(8));
    if (::testing::Test::HasFailure()) break;
  }
}

// ---------------------------------------------------------------------------
// Basic semantics

TEST(Select, DefaultOnlyWhenNothingReady) {
  goro::run([] {
    auto a = goro::make_chan<int>(1);
    auto b = goro::make_chan<int>();
    // The default case's own position is returned.
    EXPECT_EQ(goro::select(goro::case_recv(a), goro::case_default(),
                           goro::case_recv(b)),
              1u);
    a.send(5);
    std::optional<int> v;
    EXPECT_EQ(goro::select(goro::case_recv(b), goro::case_default(),
                           goro::case_recv(a, v)),
              2u);
    EXPECT_EQ(v, std::optional<int>(5));
    // Send side: room in the buffer is ready, a full buffer is not.
    EXPECT_EQ(goro::select(goro::case_send(a, 6), goro::case_default()), 0u);
    EXPECT_EQ(goro::select(goro::case_send(a, 7), goro::case_default()), 1u);
    EXPECT_EQ(a.recv(), std::optional<int>(6));
    // A closed channel is always ready to receive from.
    b.close();
    v = 3;
    EXPECT_EQ(goro::select(goro::case_default(), goro::case_recv(b, v)), 1u);
    EXPECT_EQ(v, std::nullopt);
  });
}

TEST(Select, BlocksUntilACaseIsReady) {
  goro::run([] {
    for (int round = 0; round < 50; round++) {
      auto a = goro::make_chan<int>();
      auto b = goro::make_chan<int>(2);
      auto res = goro::make_chan<std::pair<std::size_t, int>>(1);
      goro::go([a, b, res] {
        std::optional<int> va, vb;
        std::size_t k =
            goro::select(goro::case_recv(a, va), goro::case_recv(b, vb));
        res.send({k, (k == 0 ? va : vb).value_or(-1)});
      });
      EXPECT_TRUE(await_queued(a, side::receivers, 1));
      EXPECT_TRUE(await_queued(b, side::receivers, 1));
      EXPECT_EQ(res.len(), 0u) << "select returned with nothing ready";
      if (round % 2 == 0)
        a.send(round);
      else
        b.send(round);
      auto r = res.recv();
      ASSERT_TRUE(r.has_value());
      EXPECT_EQ(r->first, std::size_t(round % 2));
      EXPECT_EQ(r->second, round);
      // The losing case was dequeued.
      EXPECT_EQ(queued(a, side::receivers), 0u);
      EXPECT_EQ(queued(b, side::receivers), 0u);
      EXPECT_EQ(b.len(), 0u) << "the value went to the select, not the buffer";
    }
  });
}

TEST(Select, NilCasesAreNeverReady) {
  goro::run([] {
    goro::chan<int> nil;
    goro::chan<void> vnil;
    // Only nil cases plus default: default.
    EXPECT_EQ(goro::select(goro::case_recv(nil), goro::case_send(nil, 1),
                           goro::case_recv(vnil), goro::case_send(vnil),
                           goro::case_default()),
              4u);
    // A nil case next to a ready one: the ready one, every time.
    auto ready = goro::make_chan<int>(1);
    for (int i = 0; i < 100; i++) {
      ready.send(i);
      std::optional<int> v;
      EXPECT_EQ(goro::select(goro::case_send(nil, 0), goro::case_recv(nil),
                             goro::case_recv(ready, v)),
                2u);
      EXPECT_EQ(v, std::optional<int>(i));
    }
    // Blocking with nil cases: woken by the real channel only.
    auto real = goro::make_chan<int>();
    auto res = goro::make_chan<std::size_t>(1);
    goro::go([nil, real, res] {
      res.send(goro::select(goro::case_recv(nil), goro::case_recv(real),
                            goro::case_send(nil, 3)));
    });
    EXPECT_TRUE(await_queued(real, side::receivers, 1));
    EXPECT_EQ(res.len(), 0u);
    real.send(1);
    EXPECT_EQ(res.recv(), std::optional<std::size_t>(1));
  });
}

TEST(Select, SendOnClosedThrows) {
  goro::run([] {
    auto c = goro::make_chan<int>(1);
    c.close();
    EXPECT_THROW(goro::select(goro::case_send(c, 1), goro::case_default()),
                 goro::channel_error);
    auto other = goro::make_chan<int>();
    EXPECT_THROW(goro::select(goro::case_recv(other), goro::case_send(c, 1)),
                 goro::channel_error);
    // Close while blocked in select: a send case throws...
    for (int round = 0; round < 20; round++) {
      auto s = goro::make_chan<int>();
      auto idle = goro::make_chan<int>();
      auto res = goro::make_chan<int>(1);
      goro::go([s, idle, res] {
        try {
          goro::select(goro::case_recv(idle), goro::case_send(s, 1));
          res.send(0);
        } catch (const goro::channel_error&) {
          res.send(1);
        }
      });
      EXPECT_TRUE(await_queued(s, side::senders, 1));
      s.close();
      EXPECT_EQ(res.recv(), std::optional<int>(1))
          << "a select send woken by close must throw";
      EXPECT_EQ(queued(idle, side::receivers), 0u);
    }
    // ...and a receive case returns nullopt.
    auto r = goro::make_chan<int>();
    auto idle = goro::make_chan<int>();
    auto res = goro::make_chan<std::pair<std::size_t, bool>>(1);
    goro::go([r, idle, res] {
      std::optional<int> v = 5;
      std::size_t k =
          goro::select(goro::case_send(idle, 1), goro::case_recv(r, v));
      res.send({k, v.has_value()});
    });
    EXPECT_TRUE(await_queued(r, side::receivers, 1));
    r.close();
    auto got = res.recv();
    ASSERT_TRUE(got.has_value());
    EXPECT_EQ(got->first, 1u);
    EXPECT_FALSE(got->second);
    EXPECT_EQ(queued(idle, side::senders), 0u);
  });
}

TEST(Select, Callbacks) {
  goro::run([] {
    auto a = goro::make_chan<int>(1);
    auto b = goro::make_chan<int>(1);
    auto sig = goro::make_chan<void>(1);
    int ran_a = 0, ran_sig = 0, ran_send = 0;
    std::optional<int> got_a;
    bool got_sig = false;
    auto run_select = [&] {
      return goro::select(goro::case_recv(a,
                                          [&](std::optional<int> v) {
                                            ran_a++;
                                            got_a = v;
                                          }),
                          goro::case_send(b, 42, [&] { ran_send++; }),
                          goro::case_recv(sig,
                                          [&](bool ok) {
                                            ran_sig++;
                                            got_sig = ok;
                                          }),
                          goro::case_default());
    };
    // Only the send case is ready.
    EXPECT_EQ(run_select(), 1u);
    EXPECT_EQ(ran_send, 1);
    EXPECT_EQ(ran_a + ran_sig, 0);
    EXPECT_EQ(b.recv(), std::optional<int>(42));
    b.send(0);  // now the send case is blocked (full)
    // Only a is ready.
    a.send(7);
    EXPECT_EQ(run_select(), 0u);
    EXPECT_EQ(ran_a, 1);
    EXPECT_EQ(got_a, std::optional<int>(7));
    // Only sig is ready.
    EXPECT_TRUE(sig.try_send());
    EXPECT_EQ(run_select(), 2u);
    EXPECT_EQ(ran_sig, 1);
    EXPECT_TRUE(got_sig);
    // Nothing ready: default, no callback.
    EXPECT_EQ(run_select(), 3u);
    EXPECT_EQ(ran_a + ran_sig + ran_send, 3);
    // Closed: the receive callbacks see nullopt / false.
    a.close();
    EXPECT_EQ(run_select(), 0u);
    EXPECT_EQ(got_a, std::nullopt);
    // Two ready cases at once (room in b, sig closed; a is nil now): one of
    // them runs, with its own callback only.
    b.recv();
    sig.close();
    a = goro::chan<int>();
    int sends_before = ran_send;
    std::size_t k = run_select();
    EXPECT_TRUE(k == 1 || k == 2) << k;
    if (k == 2) {
      EXPECT_FALSE(got_sig);
      EXPECT_EQ(ran_send, sends_before);
    }
    if (k == 1) {
      EXPECT_EQ(ran_send, sends_before + 1);
    }
    // Send callback on chan<void>, receive into bool&.
    auto v = goro::make_chan<void>(1);
    int sent_void = 0;
    EXPECT_EQ(goro::select(goro::case_send(v, [&] { sent_void++; })), 0u);
    EXPECT_EQ(sent_void, 1);
    bool ok = false;
    EXPECT_EQ(goro::select(goro::case_recv(v, ok)), 0u);
    EXPECT_TRUE(ok);
    // Callbacks in a blocking select run on the select's goroutine after the
    // wake-up.
    auto late = goro::make_chan<int>();
    auto res = goro::make_chan<int>(1);
    goro::go([late, res] {
      std::uint64_t me = goro::goroutine_id();
      goro::select(goro::case_recv(late, [&](std::optional<int> x) {
        res.send(goro::goroutine_id() == me ? x.value_or(-1) : -2);
      }));
    });
    EXPECT_TRUE(await_queued(late, side::receivers, 1));
    late.send(11);
    EXPECT_EQ(res.recv(), std::optional<int>(11));
  });
}

// A case callback that cannot return. g++ 12 -O2 once reported a false
// -Warray-bounds inside select.hpp for this (it read the chosen case's
// index from a table after running the callback), which broke users'
// -Werror builds; this file is built with -O2 -Werror, so it guards that.
struct select_escape {
  int value;
};
[[noreturn]] void escape_with(std::optional<int> v) {
  throw select_escape{v.value_or(-1)};
}

TEST(Select, NoreturnCallback) {
  goro::run([] {
    auto a = goro::make_chan<int>(1);
    a.send(5);
    try {
      goro::select(
          goro::case_recv(a, [](std::optional<int> v) { escape_with(v); }));
      ADD_FAILURE() << "the callback did not run";
    } catch (const select_escape& e) {
      EXPECT_EQ(e.value, 5);
    }
    // Among other cases and a default.
    auto idle = goro::make_chan<int>();
    a.send(6);
    try {
      goro::select(
          goro::case_recv(idle),
          goro::case_recv(a, [](std::optional<int> v) { escape_with(v); }),
          goro::case_default());
      ADD_FAILURE() << "the callback did not run";
    } catch (const select_escape& e) {
      EXPECT_EQ(e.value, 6);
    }
    // goexit ([[noreturn]]) from a callback ends the goroutine, running its
    // destructors.
    auto quit = goro::make_chan<void>();
    auto finished = goro::make_chan<int>(2);
    goro::go([quit, finished] {
      struct on_exit {
        goro::chan<int> f;
        ~on_exit() { f.try_send(1); }
      } guard{finished};
      goro::select(goro::case_recv(quit, [](bool) { goro::goexit(); }));
      finished.send(2);  // not reached
    });
    quit.close();
    EXPECT_EQ(finished.recv(), std::optional<int>(1));
    EXPECT_EQ(finished.len(), 0u) << "the code after the select ran";
  });
}

// case_recv takes receive-only channels (recv_chan<T>, such as
// goro::after(d) or a timer's c) in every form chan<T> has.
TEST(Select, RecvChanCases) {
  goro::run([] {
    auto ch = goro::make_chan<int>(1);
    auto sig = goro::make_chan<void>(1);
    goro::recv_chan<int> r = ch;
    goro::recv_chan<void> rs = sig;
    goro::recv_chan<int> nil;

    std::optional<int> v;
    ch.send(1);
    EXPECT_EQ(goro::select(goro::case_recv(nil, v), goro::case_recv(r, v)), 1u);
    EXPECT_EQ(v, std::optional<int>(1));

    ch.send(2);
    EXPECT_EQ(goro::select(goro::case_default(), goro::case_recv(r)), 1u);
    EXPECT_EQ(ch.len(), 0u) << "the discarding case did not receive";
    EXPECT_EQ(goro::select(goro::case_recv(r), goro::case_default()), 1u)
        << "nothing is ready";

    ch.send(3);
    int seen = 0;
    EXPECT_EQ(goro::select(goro::case_recv(
                  r, [&](std::optional<int> x) { seen = x.value_or(-1); })),
              0u);
    EXPECT_EQ(seen, 3);

    sig.send();
    bool ok = false;
    EXPECT_EQ(goro::select(goro::case_recv(rs, ok)), 0u);
    EXPECT_TRUE(ok);
    sig.send();
    int calls = 0;
    EXPECT_EQ(goro::select(goro::case_recv(rs,
                                           [&](bool got) {
                                             calls++;
                                             ok = got;
                                           })),
              0u);
    EXPECT_EQ(calls, 1);
    EXPECT_TRUE(ok);

    // Blocking: the select waits on the view and is woken through the
    // channel; a close reaches it too.
    auto res = goro::make_chan<std::pair<std::size_t, int>>(1);
    goro::go([r, rs, res] {
      std::optional<int> x;
      std::size_t k = goro::select(goro::case_recv(rs), goro::case_recv(r, x));
      res.send({k, x.value_or(-1)});
    });
    EXPECT_TRUE(await_queued(r, side::receivers, 1));
    EXPECT_EQ(res.len(), 0u) << "select returned with nothing ready";
    ch.send(4);
    EXPECT_EQ(res.recv(), (std::optional<std::pair<std::size_t, int>>(
                              std::pair<std::size_t, int>{1u, 4})));
    sig.close();
    ok = true;
    EXPECT_EQ(goro::select(goro::case_recv(rs, ok)), 0u);
    EXPECT_FALSE(ok) << "closed";
  });
}

// ---------------------------------------------------------------------------
// More than 8 cases: selectgo's heap-allocated orders and waiter records.

TEST(Select, ManyCases) {
  static constexpr std::size_t N = 12;
  goro::run([] {
    std::array<goro::chan<int>, N> chs;
    for (auto& c : chs) c = goro::make_chan<int>();
    // Blocking receive over 12 unbuffered channels, woken by each in turn.
    auto res = goro::make_chan<std::pair<std::size_t, int>>(1);
    int rounds = scaled(240, 48);
    goro::go([chs, res, rounds] {
      for (int r = 0; r < rounds; r++) {
        std::array<std::optional<int>, N> outs;
        std::size_t k = select_recv_all(chs, outs);
        res.send({k, outs[k].value_or(-1)});
      }
    });
    for (int r = 0; r < rounds; r++) {
      std::size_t target = std::size_t(r * 7) % N;
      if (r % 4 == 0) {
        // Make sure the select is parked on all 12 first (pass 2 and 3).
        for (auto& c : chs) EXPECT_TRUE(await_queued(c, side::receivers, 1));
      }
      chs[target].send(r);
      auto got = res.recv();
      ASSERT_TRUE(got.has_value());
      EXPECT_EQ(got->first, target);
      EXPECT_EQ(got->second, r);
    }
    for (auto& c : chs) EXPECT_EQ(queued(c, side::receivers), 0u);

    // Non-blocking send over 12 buffered channels of which one has room.
    std::array<goro::chan<int>, N> bufs;
    std::array<int, N> vals;
    for (std::size_t i = 0; i < N; i++) {
      bufs[i] = goro::make_chan<int>(1);
      bufs[i].send(-1);
      vals[i] = int(i) * 10;
    }
    for (std::size_t room = 0; room < N; room++) {
      EXPECT_EQ(select_send_all(bufs, vals, true), N) << "all full: default";
      bufs[room].recv();
      EXPECT_EQ(select_send_all(bufs, vals, true), room);
      EXPECT_EQ(bufs[room].len(), 1u);
    }
    // Every buffer now holds its own index's value.
    for (std::size_t i = 0; i < N; i++)
      EXPECT_EQ(bufs[i].recv(), std::optional<int>(int(i) * 10));

    // Fairness over 16 ready cases: each is chosen sometimes.
    static constexpr std::size_t M = 16;
    std::array<goro::chan<int>, M> ready;
    for (auto& c : ready) c = goro::make_chan<int>(1);
    std::array<int, M> wins{};
    for (int t = 0; t < 2000; t++) {
      for (auto& c : ready)
        if (c.len() == 0) c.send(1);
      std::array<std::optional<int>, M> outs;
      std::size_t k = select_recv_all(ready, outs);
      ASSERT_LT(k, M);
      EXPECT_EQ(outs[k], std::optional<int>(1));
      wins[k]++;
    }
    for (std::size_t i = 0; i < M; i++)
      EXPECT_GT(wins[i], 2000 / int(M) / 4) << "case " << i << " starved";
  });
}

// Many selects over the same large set of channels, racing with senders and
// a close: no lost or duplicated values.
TEST(Select, ManyCasesConcurrent) {
  constexpr std::size_t N = 10;
  int per = scaled(2000, 300);
  long long total = 0;
  int closed_seen = 0;
  goro::run([&] {
    std::array<goro::chan<int>, N> chs;
    for (std::size_t i = 0; i < N; i++) chs[i] = goro::make_chan<int>(i % 2);
    auto sums = goro::make_chan<std::pair<long long, int>>(4);
    for (std::size_t i = 0; i < N; i++)
      goro::go([c = chs[i], per] {
        for (int j = 1; j <= per; j++) c.send(j);
      });
    std::atomic<int> received{0};
    const int want = int(N) * per;
    auto stop = goro::make_chan<int>();
    for (int r = 0; r < 4; r++)
      goro::go([&, chs, stop, sums] {
        long long s = 0;
        int closed = 0;
        for (;;) {
          std::array<goro::chan<int>, N + 1> all;
          for (std::size_t i = 0; i < N; i++) all[i] = chs[i];
          all[N] = stop;
          std::array<std::optional<int>, N + 1> outs;
          std::size_t k = select_recv_all(all, outs);
          if (k == N) {
            closed++;
            break;
          }
          s += outs[k].value_or(-1000000);
          if (++received == want) stop.close();
        }
        sums.send({s, closed});
      });
    for (int r = 0; r < 4; r++) {
      auto p = sums.recv();
      total += p->first;
      closed_seen += p->second;
    }
  });
  EXPECT_EQ(total, (long long)N * per * (per + 1) / 2);
  EXPECT_EQ(closed_seen, 4);
}

// ---------------------------------------------------------------------------
// Move-only payloads through select

TEST(Select, MoveOnlyPayload) {
  goro::run([] {
    auto c = goro::make_chan<std::unique_ptr<int>>(1);
    EXPECT_EQ(goro::select(goro::case_send(c, std::make_unique<int>(5)),
                           goro::case_default()),
              0u);
    std::optional<std::unique_ptr<int>> out;
    EXPECT_EQ(goro::select(goro::case_recv(c, out), goro::case_default()), 0u);
    ASSERT_TRUE(out.has_value());
    ASSERT_NE(*out, nullptr);
    EXPECT_EQ(**out, 5);
    // Unbuffered, through blocking selects on both sides.
    auto u = goro::make_chan<std::unique_ptr<int>>();
    goro::go([u] {
      auto idle = goro::make_chan<std::unique_ptr<int>>();
      for (int i = 0; i < 100; i++)
        goro::select(goro::case_recv(idle),
                     goro::case_send(u, std::make_unique<int>(i)));
      u.close();
    });
    int n = 0;
    for (;;) {
      std::optional<std::unique_ptr<int>> v;
      auto idle = goro::make_chan<int>();
      goro::select(goro::case_recv(u, v), goro::case_recv(idle));
      if (!v) break;
      ASSERT_NE(*v, nullptr);
      EXPECT_EQ(**v, n++);
    }
    EXPECT_EQ(n, 100);
    // The callback form receives the payload by value.
    auto d = goro::make_chan<std::unique_ptr<std::string>>(1);
    d.send(std::make_unique<std::string>("hello"));
    std::string seen;
    goro::select(
        goro::case_recv(d, [&](std::optional<std::unique_ptr<std::string>> p) {
          if (p && *p) seen = **p;
        }));
    EXPECT_EQ(seen, "hello");
  });
}

// ---------------------------------------------------------------------------
// Plain threads blocked in select, woken by goroutines

TEST(SelectThread, ThreadBlockedInSelect) {
  int rounds = scaled(200, 50);
  auto a = goro::make_chan<int>();
  auto b = goro::make_chan<int>();
  auto back = goro::make_chan<int>();
  std::vector<std::size_t> chosen;
  std::vector<int> values;
  std::thread t([&] {
    goro::chan<int> nil;
    for (int r = 0; r < rounds; r++) {
      std::optional<int> va, vb;
      std::size_t k = goro::select(goro::case_recv(a, va), goro::case_recv(nil),
                                   goro::case_recv(b, vb));
      chosen.push_back(k);
      values.push_back((k == 0 ? va : vb).value_or(-1));
      // And a send case the goroutine receives from.
      goro::select(goro::case_send(back, r), goro::case_recv(nil));
    }
    // Finally woken by close.
    std::optional<int> v = 1;
    chosen.push_back(goro::select(goro::case_recv(b, v), goro::case_recv(nil)));
    values.push_back(v.has_value() ? 1 : 0);
  });
  goro::run([&] {
    for (int r = 0; r < rounds; r++) {
      EXPECT_TRUE(await_queued(b, side::receivers, 1));
      EXPECT_TRUE(await_queued(a, side::receivers, 1));
      (r % 2 ? b : a).send(r);
      EXPECT_EQ(back.recv(), std::optional<int>(r));
    }
    EXPECT_TRUE(await_queued(b, side::receivers, 1));
    b.close();
  });
  t.join();
  ASSERT_EQ(chosen.size(), std::size_t(rounds) + 1);
  for (int r = 0; r < rounds; r++) {
    EXPECT_EQ(chosen[std::size_t(r)], r % 2 ? 2u : 0u) << r;
    EXPECT_EQ(values[std::size_t(r)], r) << r;
  }
  EXPECT_EQ(chosen.back(), 0u);
  EXPECT_EQ(values.back(), 0) << "a closed channel yields nullopt";
}

// A plain thread in a select of more than 8 cases.
TEST(SelectThread, ThreadManyCases) {
  constexpr std::size_t N = 11;
  int rounds = scaled(100, 30);
  std::array<goro::chan<int>, N> chs;
  for (auto& c : chs) c = goro::make_chan<int>();
  std::vector<std::pair<std::size_t, int>> got;
  std::thread t([&] {
    for (int r = 0; r < rounds; r++) {
      std::array<std::optional<int>, N> outs;
      std::size_t k = select_recv_all(chs, outs);
      got.emplace_back(k, outs[k].value_or(-1));
    }
  });
  goro::run([&] {
    for (int r = 0; r < rounds; r++) chs[std::size_t(r * 5) % N].send(r);
  });
  t.join();
  ASSERT_EQ(got.size(), std::size_t(rounds));
  for (int r = 0; r < rounds; r++) {
    EXPECT_EQ(got[std::size_t(r)].first, std::size_t(r * 5) % N);
    EXPECT_EQ(got[std::size_t(r)].second, r);
  }
}

}  // namespace
