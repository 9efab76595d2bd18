// Channel tests (ports of the intent of Go's runtime/chan_test.go: TestChan,
// TestNonblockRecvRace, TestMultiConsumer, plus goro's own guarantees:
// move-only and non-trivial payloads, chan<void>, nil channels, misuse
// errors, plain threads talking to goroutines, range-for, and exact element
// lifetime accounting). Select is covered in select_test.cpp.
//
// Every test calls goro::run(fn) with default options, so the number of Ps
// comes from GOMAXPROCS (or the CPU count); all tests pass with 1 or more.
//
// "This operation blocks" is checked without sleeping: the test waits until
// the blocked party's waiter record is queued on the channel (read under the
// channel lock through the private header chan/hchan.hpp), and only then
// checks that the operation has not completed; every such check is followed
// by a positive check that the operation completes once unblocked.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <limits>
#include <memory>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <type_traits>
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

// An element type that counts its lives and catches use of a destroyed or
// moved-into-twice object. No copy constructor: a channel must only move.
struct tracked {
  static inline std::atomic<long> live{0};
  static inline std::atomic<long> constructed{0};
  static inline std::atomic<long> destroyed{0};
  static inline std::atomic<long> bad{0};  // use of a dead object
  static constexpr std::uint32_t alive_magic = 0x600dc0de;
  static constexpr std::uint32_t dead_magic = 0xdeadbeef;

  std::uint32_t magic;
  int value;
  std::string payload;  // heap-allocated: a leak or double free shows

  explicit tracked(int v)
      : magic(alive_magic),
        value(v),
        payload("payload-that-does-not-fit-in-sso-" + std::to_string(v)) {
    live++;
    constructed++;
  }
  tracked(tracked&& o) noexcept
      : magic(alive_magic), value(o.value), payload(std::move(o.payload)) {
    if (o.magic != alive_magic) bad++;
    o.value = -1;
    live++;
    constructed++;
  }
  tracked(const tracked&) = delete;
  tracked& operator=(const tracked&) = delete;
  // Not assignable: receiving (also through select's case_recv(ch, opt&))
  // needs only move construction.
  tracked& operator=(tracked&&) = delete;
  ~tracked() {
    if (magic != alive_magic) bad++;
    magic = dead_magic;
    live--;
    destroyed++;
  }
  bool intact(int v) const {
    return magic == alive_magic && value == v &&
           payload == "payload-that-does-not-fit-in-sso-" + std::to_string(v);
  }
  static void reset() {
    live = 0;
    constructed = 0;
    destroyed = 0;
    bad = 0;
  }
};

// ---------------------------------------------------------------------------
// TestChan: for every capacity 0..199 (fewer under sanitizers).

void chan_blocking_recv(std::size_t cap) {
  // A receive from an empty channel blocks (both receive forms).
  auto c = goro::make_chan<int>(cap);
  std::atomic<bool> recv1{false}, recv2{false};
  goro::wait_group wg;
  wg.add(2);
  goro::go([&] {
    auto v = c.recv();
    EXPECT_EQ(v, std::optional<int>(0));
    recv1 = true;
    wg.done();
  });
  goro::go([&] {
    std::optional<int> v;
    EXPECT_EQ(goro::select(goro::case_recv(c, v)), 0u);
    EXPECT_EQ(v, std::optional<int>(0));
    recv2 = true;
    wg.done();
  });
  EXPECT_TRUE(await_queued(c, side::receivers, 2)) << "cap " << cap;
  EXPECT_FALSE(recv1.load()) << "chan[" << cap << "]: receive from empty chan";
  EXPECT_FALSE(recv2.load()) << "chan[" << cap << "]: receive from empty chan";
  // Non-blocking receives do not block (and do not report "closed").
  bool closed = true;
  EXPECT_EQ(c.try_recv(&closed), std::nullopt) << "cap " << cap;
  EXPECT_FALSE(closed);
  EXPECT_EQ(goro::select(goro::case_recv(c), goro::case_default()), 1u)
      << "chan[" << cap << "]: non-blocking receive from empty chan";
  c.send(0);
  c.send(0);
  wg.wait();
  EXPECT_TRUE(recv1.load());
  EXPECT_TRUE(recv2.load());
  EXPECT_EQ(c.len(), 0u);
}

void chan_blocking_send(std::size_t cap) {
  // A send to a full channel blocks; a non-blocking send does not.
  auto c = goro::make_chan<int>(cap);
  for (std::size_t i = 0; i < cap; i++) c.send(int(i));
  EXPECT_EQ(c.len(), cap);
  std::atomic<bool> sent{false};
  goro::wait_group wg;
  wg.add(1);
  goro::go([&] {
    c.send(int(cap));
    sent = true;
    wg.done();
  });
  EXPECT_TRUE(await_queued(c, side::senders, 1)) << "cap " << cap;
  EXPECT_FALSE(sent.load()) << "chan[" << cap << "]: send to full chan";
  EXPECT_FALSE(c.try_send(-1)) << "chan[" << cap << "]: send to full chan";
  EXPECT_EQ(goro::select(goro::case_send(c, -2), goro::case_default()), 1u)
      << "chan[" << cap << "]: non-blocking send to full chan";
  // Taking one element lets the blocked sender in; the queue stays FIFO
  // (the sender's value goes to the tail of a full buffer).
  EXPECT_EQ(c.recv(), std::optional<int>(0));
  wg.wait();
  EXPECT_TRUE(sent.load());
  EXPECT_EQ(c.len(), cap);
  for (std::size_t i = 1; i <= cap; i++)
    EXPECT_EQ(c.try_recv(), std::optional<int>(int(i))) << "cap " << cap;
  EXPECT_EQ(c.len(), 0u);
}

void chan_recv_closed(std::size_t cap) {
  // A closed channel drains its buffer in order, then yields nullopt.
  auto c = goro::make_chan<int>(cap);
  for (std::size_t i = 0; i < cap; i++) c.send(int(i));
  c.close();
  EXPECT_EQ(c.len(), cap);
  // Both receive forms drain the leftovers first (half each).
  for (std::size_t i = 0; i < cap; i++) {
    if (i % 2 == 0) {
      EXPECT_EQ(c.recv(), std::optional<int>(int(i))) << "cap " << cap;
    } else {
      bool closed = true;
      EXPECT_EQ(c.try_recv(&closed), std::optional<int>(int(i)))
          << "cap " << cap;
      EXPECT_FALSE(closed);
    }
  }
  EXPECT_EQ(c.recv(), std::nullopt);
  bool closed = false;
  EXPECT_EQ(c.try_recv(&closed), std::nullopt);
  EXPECT_TRUE(closed) << "try_recv on a closed, drained channel";
  std::optional<int> v = 42;
  EXPECT_EQ(goro::select(goro::case_recv(c, v)), 0u);
  EXPECT_EQ(v, std::nullopt);
  EXPECT_EQ(c.len(), 0u);
  EXPECT_EQ(c.cap(), cap);
}

void chan_close_unblocks(std::size_t cap) {
  auto c = goro::make_chan<int>(cap);
  auto done = goro::make_chan<bool>();
  goro::go([&c, done] {
    auto v = c.recv();
    done.send(!v.has_value());
  });
  EXPECT_TRUE(await_queued(c, side::receivers, 1)) << "cap " << cap;
  EXPECT_FALSE(done.try_recv().has_value()) << "receiver woke before close";
  c.close();
  EXPECT_EQ(done.recv(), std::optional<bool>(true))
      << "chan[" << cap << "]: received a value from a closed chan";
}

void chan_fifo(std::size_t cap) {
  // 100 values arrive uncorrupted and in order: recv(), then select.
  auto c = goro::make_chan<int>(cap);
  goro::go([c] {
    for (int i = 0; i < 100; i++) c.send(i);
  });
  for (int i = 0; i < 100; i++) {
    auto v = c.recv();
    ASSERT_EQ(v, std::optional<int>(i)) << "chan[" << cap << "]";
  }
  goro::go([c] {
    for (int i = 0; i < 100; i++) c.send(i);
  });
  for (int i = 0; i < 100; i++) {
    std::optional<int> v;
    ASSERT_EQ(goro::select(goro::case_recv(c, v)), 0u);
    ASSERT_EQ(v, std::optional<int>(i)) << "chan[" << cap << "]";
  }
}

void chan_many_senders(std::size_t cap, int L) {
  // 4 senders x L values, 4 receivers x L values: every value arrives
  // exactly once per sender.
  constexpr int P = 4;
  auto c = goro::make_chan<int>(cap);
  auto done = goro::make_chan<std::vector<int>>();
  for (int p = 0; p < P; p++) {
    goro::go([c, L] {
      for (int i = 0; i < L; i++) c.send(i);
    });
  }
  for (int p = 0; p < P; p++) {
    goro::go([c, done, L] {
      std::vector<int> got(std::size_t(L), 0);
      for (int i = 0; i < L; i++) {
        auto v = c.recv();
        if (v && *v >= 0 && *v < L) got[std::size_t(*v)]++;
      }
      done.send(std::move(got));
    });
  }
  std::vector<int> total(std::size_t(L), 0);
  for (int p = 0; p < P; p++) {
    auto got = done.recv();
    ASSERT_TRUE(got.has_value());
    ASSERT_EQ(got->size(), std::size_t(L));
    for (int i = 0; i < L; i++) total[std::size_t(i)] += (*got)[std::size_t(i)];
  }
  for (int i = 0; i < L; i++)
    ASSERT_EQ(total[std::size_t(i)], P) << "chan[" << cap << "]: value " << i
                                        << " received wrong number of times";
  EXPECT_EQ(c.len(), 0u);
}

void chan_len_cap(std::size_t cap) {
  auto c = goro::make_chan<int>(cap);
  EXPECT_EQ(c.len(), 0u);
  EXPECT_EQ(c.cap(), cap);
  for (std::size_t i = 0; i < cap; i++) {
    c.send(int(i));
    ASSERT_EQ(c.len(), i + 1);
  }
  EXPECT_EQ(c.len(), cap);
  EXPECT_EQ(c.cap(), cap);
  if (cap > 0) {
    c.recv();
    EXPECT_EQ(c.len(), cap - 1);
  }
}

TEST(Chan, AllCapacities) {
  const std::size_t ncaps = 200;
  int L = scaled(1000, 100);
  goro::run([&] {
    for (std::size_t cap = 0; cap < ncaps; cap++) {
      chan_blocking_recv(cap);
      chan_blocking_send(cap);
      chan_recv_closed(cap);
      chan_close_unblocks(cap);
      chan_fifo(cap);
      chan_many_senders(cap, L);
      chan_len_cap(cap);
      if (::testing::Test::HasFailure()) {
        ADD_FAILURE() << "stopping at capacity " << cap;
        break;
      }
    }
  });
}

// ---------------------------------------------------------------------------
// TestNonblockRecvRace: a non-blocking receive on a channel that is, at every
// moment, either buffered-and-full or closed always succeeds.

TEST(Chan, NonblockRecvRace) {
  int n = scaled(10000, 1000);
  std::atomic<int> not_ready{0};
  goro::run([&] {
    goro::wait_group wg;
    for (int i = 0; i < n && not_ready == 0; i++) {
      auto c = goro::make_chan<int>(1);
      c.send(1);
      wg.add(1);
      if (i % 2 == 0) {
        goro::go([c, &wg, &not_ready] {
          bool closed = false;
          auto v = c.try_recv(&closed);
          if (!v && !closed) not_ready++;
          if (v && *v != 1) not_ready++;
          wg.done();
        });
      } else {
        goro::go([c, &wg, &not_ready] {
          if (goro::select(goro::case_recv(c), goro::case_default()) != 0)
            not_ready++;
          wg.done();
        });
      }
      c.close();
      c.recv();
      // Bound the number of goroutines alive at once (with one P they all
      // run only when main blocks).
      if (i % 128 == 127) wg.wait();
    }
    wg.wait();
  });
  EXPECT_EQ(not_ready.load(), 0) << "a ready channel was reported not ready";
}

// ---------------------------------------------------------------------------
// TestMultiConsumer: workers ranging over a channel; sum and count match.

TEST(Chan, MultiConsumer) {
  constexpr int nwork = 23;
  int niter = scaled(271828, 27183);
  static constexpr int pn[] = {2, 3, 7, 11, 13, 17, 19, 23, 27, 31};
  constexpr int npn = int(sizeof(pn) / sizeof(pn[0]));
  long long expect = 0, sum = 0;
  int count = 0;
  goro::run([&] {
    auto q = goro::make_chan<int>(nwork * 3);
    auto r = goro::make_chan<int>(nwork * 3);
    auto wg = std::make_shared<goro::wait_group>();
    for (int w = 0; w < nwork; w++) {
      wg->add(1);
      goro::go([q, r, wg, w] {
        for (int v : q) {
          // Disturb the FIFO-ish order of range.
          if (pn[w % npn] == v) goro::gosched();
          r.send(v);
        }
        wg->done();
      });
    }
    goro::go([q, r, wg, &expect, niter] {
      for (int i = 0; i < niter; i++) {
        int v = pn[i % npn];
        expect += v;
        q.send(v);
      }
      q.close();   // no more work
      wg->wait();  // workers done
      r.close();   // so no more results
    });
    for (int v : r) {
      count++;
      sum += v;
    }
  });
  EXPECT_EQ(count, niter);
  EXPECT_EQ(sum, expect);
}

// ---------------------------------------------------------------------------
// Range-for

TEST(Chan, RangeStopsAtClose) {
  goro::run([] {
    for (std::size_t cap : {0u, 1u, 7u, 100u}) {
      auto c = goro::make_chan<int>(cap);
      goro::go([c] {
        for (int i = 0; i < 100; i++) c.send(i);
        c.close();
      });
      std::vector<int> got;
      for (int v : c) got.push_back(v);
      std::vector<int> want(100);
      std::iota(want.begin(), want.end(), 0);
      EXPECT_EQ(got, want) << "cap " << cap;
      // After the loop the channel is closed and drained.
      bool closed = false;
      EXPECT_EQ(c.try_recv(&closed), std::nullopt);
      EXPECT_TRUE(closed);
    }
    // A closed buffered channel still yields its leftovers, then stops.
    auto c = goro::make_chan<int>(5);
    for (int i = 0; i < 3; i++) c.send(i);
    c.close();
    int n = 0;
    for (int v : c) EXPECT_EQ(v, n++);
    EXPECT_EQ(n, 3);
    // Ranging over an already closed, empty channel runs no iteration.
    for (int v : c) ADD_FAILURE() << "got " << v;
  });
}

// ---------------------------------------------------------------------------
// Move-only payloads

TEST(Chan, MoveOnlyPayload) {
  goro::run([] {
    // Buffered: values wait in the buffer, then come out intact.
    auto b = goro::make_chan<std::unique_ptr<int>>(4);
    for (int i = 0; i < 4; i++) b.send(std::make_unique<int>(i));
    EXPECT_FALSE(b.try_send(std::make_unique<int>(99)));
    for (int i = 0; i < 4; i++) {
      auto p = b.recv();
      ASSERT_TRUE(p.has_value());
      ASSERT_NE(*p, nullptr);
      EXPECT_EQ(**p, i);
    }
    // Unbuffered: direct hand-off from a goroutine's frame, range-for by
    // reference.
    auto u = goro::make_chan<std::unique_ptr<int>>();
    goro::go([u] {
      for (int i = 0; i < 50; i++) u.send(std::make_unique<int>(i));
      u.close();
    });
    int n = 0;
    for (auto& p : u) {
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(*p, n++);
    }
    EXPECT_EQ(n, 50);
    // Leftovers in a buffer are freed with the channel (LeakSanitizer
    // checks this under ASan).
    auto left = goro::make_chan<std::unique_ptr<int>>(3);
    left.send(std::make_unique<int>(1));
    left.send(std::make_unique<int>(2));
  });
}

// ---------------------------------------------------------------------------
// chan<void>: a payload-free signal channel

TEST(Chan, VoidSignal) {
  goro::run([] {
    auto s = goro::make_chan<void>(2);
    EXPECT_TRUE(s.try_send());
    EXPECT_TRUE(s.try_send());
    EXPECT_FALSE(s.try_send()) << "buffer of 2 is full";
    EXPECT_EQ(s.len(), 2u);
    EXPECT_EQ(s.cap(), 2u);
    EXPECT_TRUE(s.recv());
    EXPECT_TRUE(s.recv());
    EXPECT_EQ(s.len(), 0u);

    // Unbuffered hand-off.
    auto u = goro::make_chan<void>();
    EXPECT_FALSE(u.try_send()) << "no receiver is waiting";
    goro::go([u] {
      for (int i = 0; i < 10; i++) u.send();
    });
    for (int i = 0; i < 10; i++) EXPECT_TRUE(u.recv());

    // close broadcasts to every blocked receiver.
    const int k = 8;
    auto stop = goro::make_chan<void>();
    auto results = goro::make_chan<bool>(k);
    for (int i = 0; i < k; i++)
      goro::go([stop, results] { results.send(stop.recv()); });
    EXPECT_TRUE(await_queued(stop, side::receivers, std::size_t(k)));
    EXPECT_EQ(results.len(), 0u) << "a receiver woke before close";
    stop.close();
    for (int i = 0; i < k; i++)
      EXPECT_EQ(results.recv(), std::optional<bool>(false))
          << "a receiver of a closed chan<void> reported a signal";
    // Later receivers return at once.
    EXPECT_FALSE(stop.recv());
    EXPECT_THROW(stop.send(), goro::channel_error);
    EXPECT_THROW(stop.close(), goro::channel_error);
  });
}

// chan<void>::try_recv: the non-blocking receive chan<T> has, with the
// same report of a closed, drained channel.
TEST(Chan, VoidTryRecv) {
  goro::run([] {
    bool closed = true;
    goro::chan<void> nil;
    EXPECT_FALSE(nil.try_recv(&closed));
    EXPECT_FALSE(closed) << "a nil channel is not closed";

    auto s = goro::make_chan<void>(2);
    closed = true;
    EXPECT_FALSE(s.try_recv(&closed)) << "nothing was sent";
    EXPECT_FALSE(closed);
    EXPECT_TRUE(s.try_send());
    EXPECT_TRUE(s.try_send());
    EXPECT_TRUE(s.try_recv(&closed));
    EXPECT_FALSE(closed);
    EXPECT_EQ(s.len(), 1u);
    s.close();
    // A closed channel still yields what it holds, then reports closed.
    EXPECT_TRUE(s.try_recv(&closed));
    EXPECT_FALSE(closed);
    EXPECT_EQ(s.len(), 0u);
    EXPECT_FALSE(s.try_recv(&closed));
    EXPECT_TRUE(closed);
    EXPECT_FALSE(s.try_recv()) << "the closed flag is optional";

    // Unbuffered: takes the signal of a blocked sender and releases it.
    auto u = goro::make_chan<void>();
    auto sent = goro::make_chan<void>(1);
    goro::go([u, sent] {
      u.send();
      sent.send();
    });
    EXPECT_TRUE(await_queued(u, side::senders, 1));
    EXPECT_TRUE(u.try_recv(&closed)) << "a sender was waiting";
    EXPECT_FALSE(closed);
    EXPECT_TRUE(sent.recv()) << "the sender was not released";
    EXPECT_FALSE(u.try_recv(&closed)) << "only one signal was sent";
    EXPECT_FALSE(closed);
  });
}

// range-for over chan<void> (Go's `for range ch`): one iteration per
// signal, ending when the channel is closed and drained.
TEST(Chan, VoidRangeFor) {
  static constexpr int k = 50;
  goro::run([] {
    for (std::size_t cap : {0u, 1u, 5u}) {
      auto s = goro::make_chan<void>(cap);
      goro::go([s] {
        for (int i = 0; i < k; i++) s.send();
        s.close();
      });
      // Count in another goroutine, so a loop that never ends fails the
      // test after a bound instead of hanging it.
      auto counted = goro::make_chan<int>(1);
      goro::go([s, counted] {
        int n = 0;
        for (auto _ : s) n++;
        counted.send(n);
      });
      std::optional<int> n;
      auto giveup = goro::after(20s);
      ASSERT_EQ(
          goro::select(goro::case_recv(counted, n), goro::case_recv(giveup)),
          0u)
          << "range-for over a closed chan<void> did not end (cap " << cap
          << ")";
      EXPECT_EQ(n, std::optional<int>(k)) << "cap " << cap;
      bool closed = false;
      EXPECT_FALSE(s.try_recv(&closed));
      EXPECT_TRUE(closed) << "the loop ended before the channel was drained";
    }
    // A closed buffered channel yields its leftover signals, then stops.
    auto b = goro::make_chan<void>(4);
    for (int i = 0; i < 3; i++) b.send();
    b.close();
    int n = 0;
    for (auto _ : b) n++;
    EXPECT_EQ(n, 3);
    for (auto _ : b) ADD_FAILURE() << "closed and drained: no iteration";
  });
}

// ---------------------------------------------------------------------------
// make_chan rejects an impossible capacity for every element type alike
// (Go: "makechan: size out of range").

void expect_size_out_of_range(void (*make)(), const char* what) {
  try {
    make();
    ADD_FAILURE() << what << " did not throw";
  } catch (const std::length_error& e) {
    EXPECT_STREQ(e.what(), "makechan: size out of range") << what;
  }
}

TEST(Chan, ImpossibleCapacityThrows) {
  goro::run([] {
    constexpr std::size_t max = goro::detail::max_chan_bytes;
    constexpr std::size_t all = std::numeric_limits<std::size_t>::max();
    using big = std::array<char, std::size_t(1) << 20>;
    expect_size_out_of_range([] { goro::make_chan<void>(all); },
                             "make_chan<void>(SIZE_MAX)");
    expect_size_out_of_range([] { goro::make_chan<void>(max + 1); },
                             "make_chan<void>(max_chan_bytes + 1)");
    expect_size_out_of_range([] { goro::make_chan<char>(all); },
                             "make_chan<char>(SIZE_MAX)");
    expect_size_out_of_range([] { goro::make_chan<char>(max + 1); },
                             "make_chan<char>(max_chan_bytes + 1)");
    expect_size_out_of_range([] { goro::make_chan<int>(all); },
                             "make_chan<int>(SIZE_MAX)");
    expect_size_out_of_range(
        [] { goro::make_chan<int>(max / sizeof(int) + 1); },
        "make_chan<int>(max_chan_bytes / 4 + 1)");
    expect_size_out_of_range([] { goro::make_chan<std::string>(all); },
                             "make_chan<std::string>(SIZE_MAX)");
    expect_size_out_of_range(
        [] { goro::make_chan<big>(max / sizeof(big) + 1); },
        "make_chan<1 MiB element>(max_chan_bytes / 1 MiB + 1)");
    // The bound itself is a valid chan<void> (it has no buffer to allocate).
    auto edge = goro::make_chan<void>(max);
    EXPECT_EQ(edge.cap(), max);
    EXPECT_TRUE(edge.try_send());
    EXPECT_EQ(edge.len(), 1u);
    EXPECT_TRUE(edge.recv());
  });
}

// ---------------------------------------------------------------------------
// recv_chan<T>: a receive-only view (Go's <-chan T)

template <class C, class... A>
concept sendable = requires(const C& c, A... a) {
  c.send(a...);
};
template <class C, class... A>
concept try_sendable = requires(const C& c, A... a) {
  c.try_send(a...);
};
template <class C>
concept closable = requires(const C& c) {
  c.close();
};

// The controls: the same checks pass for the bidirectional channel.
static_assert(sendable<goro::chan<int>, int> && closable<goro::chan<int>> &&
              try_sendable<goro::chan<int>, int>);
static_assert(sendable<goro::chan<void>> && closable<goro::chan<void>>);
static_assert(!sendable<goro::recv_chan<int>, int>);
static_assert(!try_sendable<goro::recv_chan<int>, int>);
static_assert(!closable<goro::recv_chan<int>>);
static_assert(!sendable<goro::recv_chan<void>>);
static_assert(!try_sendable<goro::recv_chan<void>>);
static_assert(!closable<goro::recv_chan<void>>);
// chan<T> converts to recv_chan<T> implicitly, never back.
static_assert(std::is_convertible_v<goro::chan<int>, goro::recv_chan<int>>);
static_assert(std::is_convertible_v<goro::chan<void>, goro::recv_chan<void>>);
static_assert(!std::is_constructible_v<goro::chan<int>, goro::recv_chan<int>>);
static_assert(
    !std::is_constructible_v<goro::chan<void>, goro::recv_chan<void>>);
static_assert(!std::is_assignable_v<goro::chan<int>&, goro::recv_chan<int>>);

TEST(RecvChan, SharesTheChannel) {
  goro::run([] {
    auto ch = goro::make_chan<int>(3);
    goro::recv_chan<int> r = ch;
    EXPECT_TRUE(r);
    EXPECT_TRUE(r == ch);
    EXPECT_FALSE(r == goro::make_chan<int>(3));
    EXPECT_EQ(r.cap(), 3u);
    ch.send(1);
    ch.send(2);
    EXPECT_EQ(r.len(), 2u);
    EXPECT_EQ(r.recv(), std::optional<int>(1));
    bool closed = true;
    EXPECT_EQ(r.try_recv(&closed), std::optional<int>(2));
    EXPECT_FALSE(closed);
    EXPECT_EQ(r.try_recv(&closed), std::nullopt);
    EXPECT_FALSE(closed);

    // A receive blocked on the view is completed by a send on the channel.
    auto got = goro::make_chan<int>(1);
    goro::go([r, got] { got.send(r.recv().value_or(-1)); });
    EXPECT_TRUE(await_queued(r, side::receivers, 1));
    EXPECT_EQ(got.len(), 0u) << "the receive did not block";
    ch.send(7);
    EXPECT_EQ(got.recv(), std::optional<int>(7));

    // range-for receives until the channel is closed and drained.
    goro::go([ch] {
      for (int i = 10; i < 15; i++) ch.send(i);
      ch.close();
    });
    std::vector<int> seen;
    for (int v : r) seen.push_back(v);
    EXPECT_EQ(seen, (std::vector<int>{10, 11, 12, 13, 14}));
    EXPECT_EQ(r.try_recv(&closed), std::nullopt);
    EXPECT_TRUE(closed);
    EXPECT_EQ(r.recv(), std::nullopt);

    // Nil, copies and moves, as chan<T>.
    goro::recv_chan<int> nil;
    EXPECT_FALSE(nil);
    EXPECT_EQ(nil.cap(), 0u);
    EXPECT_EQ(nil.try_recv(&closed), std::nullopt);
    EXPECT_FALSE(closed) << "a nil channel is not closed";
    goro::recv_chan<int> copy = r;
    EXPECT_TRUE(copy == r);
    goro::recv_chan<int> moved = std::move(copy);
    EXPECT_TRUE(moved == ch);
    EXPECT_FALSE(copy)
        << "a moved-from recv_chan is nil";  // NOLINT(bugprone-use-after-move)

    // recv_chan<void>: recv, try_recv and range-for.
    auto sig = goro::make_chan<void>(3);
    goro::recv_chan<void> rs = sig;
    sig.send();
    sig.send();
    sig.send();
    sig.close();
    EXPECT_TRUE(rs.recv());
    EXPECT_TRUE(rs.try_recv(&closed));
    EXPECT_FALSE(closed);
    int n = 0;
    for (auto _ : rs) n++;
    EXPECT_EQ(n, 1);
    EXPECT_FALSE(rs.recv());
    EXPECT_FALSE(rs.try_recv(&closed));
    EXPECT_TRUE(closed);
  });
}

// ---------------------------------------------------------------------------
// gomaxprocs(n) with n < 1 only queries (Go's runtime.GOMAXPROCS).

TEST(Gomaxprocs, NonPositiveArgumentQueries) {
  // Under ctest each test is its own process, so this also covers the call
  // that starts the runtime.
  const int n = goro::gomaxprocs(-1);
  ASSERT_GE(n, 1);
  goro::run([n] {
    EXPECT_EQ(goro::gomaxprocs(-1), n);
    EXPECT_EQ(goro::gomaxprocs(std::numeric_limits<int>::min()), n);
    EXPECT_EQ(goro::gomaxprocs(0), n);
    EXPECT_EQ(goro::gomaxprocs(), n);
    const int other = n == 1 ? 2 : 1;
    EXPECT_EQ(goro::gomaxprocs(other), n);
    EXPECT_EQ(goro::gomaxprocs(-7), other) << "a query changed the count";
    EXPECT_EQ(goro::gomaxprocs(), other);
    EXPECT_EQ(goro::gomaxprocs(n), other);
    EXPECT_EQ(goro::gomaxprocs(-1), n);
  });
}

// ---------------------------------------------------------------------------
// nil channels and misuse errors

TEST(Chan, NilChannel) {
  goro::run([] {
    goro::chan<int> nil;
    EXPECT_FALSE(nil);
    EXPECT_EQ(nil.len(), 0u);
    EXPECT_EQ(nil.cap(), 0u);
    EXPECT_FALSE(nil.try_send(1));
    bool closed = true;
    EXPECT_EQ(nil.try_recv(&closed), std::nullopt);
    EXPECT_FALSE(closed) << "a nil channel is not closed";
    EXPECT_THROW(nil.close(), goro::channel_error);
    goro::chan<void> vnil;
    EXPECT_FALSE(vnil);
    EXPECT_FALSE(vnil.try_send());
    EXPECT_THROW(vnil.close(), goro::channel_error);

    auto real = goro::make_chan<int>();
    EXPECT_TRUE(real);
    EXPECT_FALSE(real == nil);
    goro::chan<int> copy = real;
    EXPECT_TRUE(copy == real) << "copies share one channel";
    goro::chan<int> moved = std::move(copy);
    EXPECT_TRUE(moved == real);
    EXPECT_FALSE(copy)
        << "a moved-from chan is nil";  // NOLINT(bugprone-use-after-move)
    moved = nil;
    EXPECT_FALSE(moved);
  });
}

TEST(Chan, CloseErrors) {
  goro::run([] {
    auto c = goro::make_chan<int>(1);
    c.close();
    EXPECT_THROW(c.close(), goro::channel_error) << "close of closed channel";
    EXPECT_THROW(c.send(1), goro::channel_error) << "send on closed channel";
    EXPECT_THROW(c.try_send(1), goro::channel_error)
        << "non-blocking send on closed channel";
    try {
      c.close();
      ADD_FAILURE() << "no exception";
    } catch (const goro::channel_error& e) {
      EXPECT_NE(std::string(e.what()).find("close of closed channel"),
                std::string::npos)
          << e.what();
    }
    try {
      c.send(1);
      ADD_FAILURE() << "no exception";
    } catch (const goro::channel_error& e) {
      EXPECT_NE(std::string(e.what()).find("send on closed channel"),
                std::string::npos)
          << e.what();
    }
    try {
      goro::chan<int>().close();
      ADD_FAILURE() << "no exception";
    } catch (const goro::channel_error& e) {
      EXPECT_NE(std::string(e.what()).find("close of nil channel"),
                std::string::npos)
          << e.what();
    }
    // channel_error is a std::logic_error.
    EXPECT_THROW(c.close(), std::logic_error);
  });
}

TEST(Chan, BlockedSenderThrowsOnClose) {
  goro::run([] {
    for (std::size_t cap : {0u, 1u, 3u}) {
      auto c = goro::make_chan<int>(cap);
      for (std::size_t i = 0; i < cap; i++) c.send(int(i));
      const int k = 3;
      auto outcome = goro::make_chan<int>(k);  // 1: threw, 0: returned
      for (int i = 0; i < k; i++) {
        goro::go([c, outcome] {
          try {
            c.send(100);
            outcome.send(0);
          } catch (const goro::channel_error&) {
            outcome.send(1);
          }
        });
      }
      EXPECT_TRUE(await_queued(c, side::senders, std::size_t(k)));
      EXPECT_EQ(outcome.len(), 0u);
      c.close();
      for (int i = 0; i < k; i++)
        EXPECT_EQ(outcome.recv(), std::optional<int>(1))
            << "a sender blocked on a channel that got closed must throw (cap "
            << cap << ")";
      // The buffered values survive the close; the blocked senders' do not
      // get in.
      for (std::size_t i = 0; i < cap; i++)
        EXPECT_EQ(c.recv(), std::optional<int>(int(i)));
      EXPECT_EQ(c.recv(), std::nullopt);
    }
  });
}

// ---------------------------------------------------------------------------
// Plain threads and goroutines on the same channels

TEST(ChanThread, ThreadSendsToGoroutine) {
  int n = scaled(10000, 2000);
  for (std::size_t cap : {0u, 1u, 64u}) {
    auto c = goro::make_chan<int>(cap);
    std::thread t([c, n] {
      for (int i = 0; i < n; i++) c.send(i);
      c.close();
    });
    int count = 0;
    bool in_order = true;
    goro::run([&] {
      for (int v : c) {
        if (v != count) in_order = false;
        count++;
      }
    });
    t.join();
    EXPECT_EQ(count, n) << "cap " << cap;
    EXPECT_TRUE(in_order) << "cap " << cap;
  }
}

TEST(ChanThread, GoroutineSendsToThread) {
  int n = scaled(10000, 2000);
  for (std::size_t cap : {0u, 1u, 64u}) {
    auto c = goro::make_chan<int>(cap);
    int count = 0;
    bool in_order = true;
    std::thread t([&, c] {
      for (int v : c) {
        if (v != count) in_order = false;
        count++;
      }
    });
    goro::run([&] {
      for (int i = 0; i < n; i++) c.send(i);
      c.close();
    });
    t.join();
    EXPECT_EQ(count, n) << "cap " << cap;
    EXPECT_TRUE(in_order) << "cap " << cap;
  }
}

// Two threads and two goroutines send, two threads and two goroutines
// receive, on one channel; every value arrives exactly once.
TEST(ChanThread, MixedSendersAndReceivers) {
  int per = scaled(5000, 500);
  for (std::size_t cap : {0u, 8u}) {
    auto c = goro::make_chan<int>(cap);
    auto sums = goro::make_chan<long long>(4);
    std::vector<std::thread> threads;
    for (int s = 0; s < 2; s++)
      threads.emplace_back([c, s, per] {
        for (int i = 0; i < per; i++) c.send(s * per + i);
      });
    for (int r = 0; r < 2; r++)
      threads.emplace_back([c, sums, per] {
        long long s = 0;
        for (int i = 0; i < per; i++) s += c.recv().value_or(-1000000);
        sums.send(s);
      });
    long long total = 0;
    goro::run([&] {
      for (int s = 2; s < 4; s++)
        goro::go([c, s, per] {
          for (int i = 0; i < per; i++) c.send(s * per + i);
        });
      for (int r = 0; r < 2; r++)
        goro::go([c, sums, per] {
          long long s = 0;
          for (int i = 0; i < per; i++) s += c.recv().value_or(-1000000);
          sums.send(s);
        });
      for (int r = 0; r < 4; r++) total += sums.recv().value_or(0);
    });
    for (auto& t : threads) t.join();
    const long long n = 4LL * per;
    EXPECT_EQ(total, n * (n - 1) / 2) << "cap " << cap;
    EXPECT_EQ(c.len(), 0u);
  }
}

TEST(ChanThread, ThreadSenderThrowsOnClose) {
  auto c = goro::make_chan<int>();
  std::atomic<int> outcome{-1};
  std::thread t([c, &outcome] {
    try {
      c.send(1);
      outcome = 0;
    } catch (const goro::channel_error&) {
      outcome = 1;
    }
  });
  goro::run([&] {
    EXPECT_TRUE(await_queued(c, side::senders, 1));
    EXPECT_EQ(outcome.load(), -1);
    c.close();
  });
  t.join();
  EXPECT_EQ(outcome.load(), 1) << "a blocked plain-thread sender must throw";
}

// ---------------------------------------------------------------------------
// Element lifetime: every element constructed is destroyed exactly once,
// whether it was received, left in a buffer, refused, or never delivered.

TEST(Chan, ElementDestructorAccounting) {
  tracked::reset();
  goro::run([] {
    {
      // Buffered: partial drain, leftovers destroyed with the channel.
      auto c = goro::make_chan<tracked>(8);
      for (int i = 0; i < 5; i++) c.send(tracked(i));
      EXPECT_EQ(tracked::live.load(), 5);
      for (int i = 0; i < 2; i++) {
        auto v = c.recv();
        ASSERT_TRUE(v.has_value());
        EXPECT_TRUE(v->intact(i));
      }
      EXPECT_EQ(tracked::live.load(), 3);
    }
    EXPECT_EQ(tracked::live.load(), 0) << "leftovers of a dropped channel";
    {
      // The ring wrapped around (recvx != 0) when the channel is dropped.
      auto c = goro::make_chan<tracked>(4);
      for (int i = 0; i < 4; i++) c.send(tracked(i));
      for (int i = 0; i < 3; i++) EXPECT_TRUE(c.recv()->intact(i));
      for (int i = 4; i < 7; i++) c.send(tracked(i));
      EXPECT_EQ(c.len(), 4u);
      EXPECT_EQ(tracked::live.load(), 4);
      goro::chan<tracked> other = c;  // the last reference destroys
      c = goro::chan<tracked>();
      EXPECT_EQ(tracked::live.load(), 4) << "one reference is still alive";
    }
    EXPECT_EQ(tracked::live.load(), 0);
    {
      // Closed with leftovers, partially drained.
      auto c = goro::make_chan<tracked>(4);
      for (int i = 0; i < 4; i++) c.send(tracked(i));
      c.close();
      EXPECT_TRUE(c.recv()->intact(0));
      EXPECT_THROW(c.send(tracked(9)), goro::channel_error);
      EXPECT_EQ(tracked::live.load(), 3);
    }
    EXPECT_EQ(tracked::live.load(), 0);
    {
      // Refused sends destroy their argument; a full buffer plus a blocked
      // sender rotates FIFO.
      auto c = goro::make_chan<tracked>(2);
      c.send(tracked(0));
      c.send(tracked(1));
      EXPECT_FALSE(c.try_send(tracked(100)));
      EXPECT_EQ(tracked::live.load(), 2);
      auto sent = goro::make_chan<void>();
      goro::go([c, sent] {
        c.send(tracked(2));  // the moved-from temporary dies here...
        sent.close();        // ...before this
      });
      EXPECT_TRUE(await_queued(c, side::senders, 1));
      for (int i = 0; i < 3; i++) {
        auto v = c.recv();
        ASSERT_TRUE(v.has_value());
        EXPECT_TRUE(v->intact(i)) << i;
      }
      sent.recv();
      EXPECT_EQ(tracked::live.load(), 0);
    }
    {
      // Unbuffered hand-offs from several goroutines.
      auto c = goro::make_chan<tracked>();
      auto wg = std::make_shared<goro::wait_group>();
      for (int g = 0; g < 4; g++) {
        wg->add(1);
        goro::go([c, wg, g] {
          for (int i = 0; i < 100; i++) c.send(tracked(g * 1000 + i));
          wg->done();
        });
      }
      long long sum = 0;
      for (int i = 0; i < 400; i++) {
        auto v = c.recv();
        ASSERT_TRUE(v.has_value());
        EXPECT_TRUE(v->intact(v->value));
        sum += v->value;
      }
      wg->wait();
      EXPECT_EQ(sum, 4 * 4950LL + 100 * 6000LL);
      EXPECT_EQ(tracked::live.load(), 0);
    }
    {
      // A blocked sender woken by close: its element is not delivered and
      // is destroyed once; blocked receivers get nothing constructed.
      auto c = goro::make_chan<tracked>();
      auto res = goro::make_chan<int>(4);
      goro::go([c, res] {
        try {
          c.send(tracked(7));
          res.send(0);
        } catch (const goro::channel_error&) {
          res.send(1);
        }
      });
      EXPECT_TRUE(await_queued(c, side::senders, 1));
      c.close();
      EXPECT_EQ(res.recv(), std::optional<int>(1));
      EXPECT_EQ(c.recv(), std::nullopt);
      auto d = goro::make_chan<tracked>(3);
      goro::go([d, res] { res.send(d.recv().has_value() ? 1 : 0); });
      goro::go([d, res] { res.send(d.recv().has_value() ? 1 : 0); });
      EXPECT_TRUE(await_queued(d, side::receivers, 2));
      d.close();
      EXPECT_EQ(res.recv(), std::optional<int>(0));
      EXPECT_EQ(res.recv(), std::optional<int>(0));
      EXPECT_EQ(tracked::live.load(), 0);
    }
    {
      // Through select: a send case not chosen destroys its element; a
      // receive case constructs exactly one.
      auto full = goro::make_chan<tracked>(1);
      full.send(tracked(1));
      EXPECT_EQ(
          goro::select(goro::case_send(full, tracked(2)), goro::case_default()),
          1u);
      EXPECT_EQ(tracked::live.load(), 1);
      std::optional<tracked> out;
      EXPECT_EQ(
          goro::select(goro::case_recv(full, out),
                       goro::case_send(goro::chan<tracked>(), tracked(3))),
          0u);
      ASSERT_TRUE(out.has_value());
      EXPECT_TRUE(out->intact(1));
      out.reset();
      EXPECT_EQ(
          goro::select(goro::case_send(full, tracked(4)), goro::case_default()),
          0u);
      EXPECT_EQ(full.recv()->value, 4);
      EXPECT_EQ(tracked::live.load(), 0);
    }
  });
  EXPECT_EQ(tracked::live.load(), 0);
  EXPECT_EQ(tracked::constructed.load(), tracked::destroyed.load());
  EXPECT_EQ(tracked::bad.load(), 0) << "an element was used after destruction";
}

}  // namespace
