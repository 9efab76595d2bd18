// Tests for <goro/pool.hpp>: goro::pool<T>, Go's sync.Pool as a per-P
// cache (the intent of Go's pool_test.go: the factory on a miss, a put
// object coming back, no object lost or freed twice under concurrency).
//
// Objects count their constructions and destructions, so every test ends
// by checking that each object was destroyed exactly once (ASan adds
// double-free and leak checks on top).
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <goro/goro.hpp>
#include <goro/pool.hpp>
#include <memory>
#include <set>
#include <thread>
#include <vector>

#include "test_support.hpp"

namespace {

using goro_test::scaled;

std::atomic<std::int64_t> constructed{0};
std::atomic<std::int64_t> destroyed{0};

struct counted {
  std::uint64_t value = 0;
  // Goroutines that hold the object at once: must never exceed 1.
  std::atomic<int> holders{0};
  counted() { constructed.fetch_add(1, std::memory_order_relaxed); }
  ~counted() { destroyed.fetch_add(1, std::memory_order_relaxed); }
};

void reset_counts() {
  constructed.store(0);
  destroyed.store(0);
}

goro::pool<counted>::factory make_counted(std::atomic<int>* calls = nullptr) {
  return [calls] {
    if (calls != nullptr) calls->fetch_add(1, std::memory_order_relaxed);
    return std::make_unique<counted>();
  };
}

TEST(Pool, EmptyPoolCallsFactory) {
  reset_counts();
  goro::run([] {
    std::atomic<int> calls{0};
    goro::pool<counted> p(make_counted(&calls));
    auto a = p.get();
    ASSERT_NE(a, nullptr);
    EXPECT_EQ(calls.load(), 1);
    auto b = p.get();
    EXPECT_EQ(calls.load(), 2);
    EXPECT_NE(a.get(), b.get());
  });
  EXPECT_EQ(constructed.load(), 2);
  EXPECT_EQ(destroyed.load(), 2);
}

TEST(Pool, NoFactoryReturnsNull) {
  goro::run([] {
    goro::pool<int> p;
    EXPECT_EQ(p.get(), nullptr);
    p.put(std::make_unique<int>(7));
    auto v = p.get();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, 7);
    EXPECT_EQ(p.get(), nullptr);
    p.put(nullptr);  // ignored
    EXPECT_EQ(p.size_approx(), 0u);
  });
}

TEST(Pool, PutThenGetSameGoroutineReturnsSameObject) {
  reset_counts();
  goro::run([] {
    std::atomic<int> calls{0};
    goro::pool<counted> p(make_counted(&calls));
    for (int i = 0; i < 100; i++) {
      auto a = p.get();
      counted* raw = a.get();
      p.put(std::move(a));
      auto b = p.get();
      EXPECT_EQ(b.get(), raw);
      p.put(std::move(b));
    }
    EXPECT_EQ(calls.load(), 1);
    // Last in, first out across the local stack and beyond it (spills to
    // the shared list and refills).
    std::vector<std::unique_ptr<counted>> held;
    for (int i = 0; i < 40; i++) held.push_back(p.get());
    std::vector<counted*> order;
    for (auto& h : held) order.push_back(h.get());
    for (auto& h : held) p.put(std::move(h));
    std::set<counted*> back;
    for (int i = 0; i < 40; i++) {
      auto g = p.get();
      back.insert(g.get());
      held[std::size_t(i)] = std::move(g);
    }
    EXPECT_EQ(back.size(), 40u);
    EXPECT_EQ(held[0].get(), order.back());
    EXPECT_EQ(calls.load(), 40);  // every one came back from the pool
  });
  EXPECT_EQ(constructed.load(), destroyed.load());
}

TEST(Pool, DestructorFreesEverything) {
  reset_counts();
  goro::run([] {
    goro::pool<counted> p(make_counted(), 100000);
    std::vector<std::unique_ptr<counted>> held;
    for (int i = 0; i < 1000; i++) held.push_back(p.get());
    for (auto& h : held) p.put(std::move(h));
    EXPECT_EQ(p.size_approx(), 1000u);
    EXPECT_EQ(destroyed.load(), 0);
  });
  EXPECT_EQ(constructed.load(), 1000);
  EXPECT_EQ(destroyed.load(), 1000);
}

TEST(Pool, ClearAndSharedCap) {
  reset_counts();
  goro::options opt;
  opt.gomaxprocs = 1;  // one P: clear() empties it at once
  goro::run(opt, [] {
    goro::pool<counted> p(make_counted(), 10);
    std::vector<std::unique_ptr<counted>> held;
    for (int i = 0; i < 100; i++) held.push_back(p.get());
    for (auto& h : held) p.put(std::move(h));
    // At most 10 shared plus one P's local stack; the rest were destroyed.
    std::size_t cached = p.size_approx();
    EXPECT_LE(cached, 10u + goro::pool<counted>::local_capacity);
    EXPECT_EQ(std::int64_t(cached), constructed.load() - destroyed.load());
    p.clear();
    EXPECT_EQ(p.size_approx(), 0u);
    EXPECT_EQ(constructed.load(), destroyed.load());
    auto again = p.get();  // usable after clear
    EXPECT_NE(again, nullptr);
  });
  EXPECT_EQ(constructed.load(), destroyed.load());
}

// Many goroutines at GOMAXPROCS 2 take and give back objects; no object is
// ever held by two goroutines at once, none is lost, each is destroyed
// once.
TEST(Pool, HammerAccountsForEveryObject) {
  reset_counts();
  std::int64_t live_at_end = -1;
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [&] {
    goro::pool<counted> p(make_counted());
    const int workers = 16;
    const int iters = scaled(20000, 2000, 500);
    std::atomic<int> violations{0};
    std::atomic<std::uint64_t> sum{0};
    goro::wait_group wg;
    for (int w = 0; w < workers; w++) {
      wg.add(1);
      goro::go([&, w] {
        std::vector<std::unique_ptr<counted>> mine;
        for (int i = 0; i < iters; i++) {
          // A varying number held at once, so locals overflow and refill.
          int k = 1 + (i + w) % 24;
          for (int j = 0; j < k; j++) {
            auto o = p.get();
            if (o->holders.fetch_add(1) != 0) violations.fetch_add(1);
            o->value++;
            mine.push_back(std::move(o));
          }
          if (i % 7 == 0) goro::gosched();
          for (auto& o : mine) {
            o->holders.fetch_sub(1);
            p.put(std::move(o));
          }
          mine.clear();
          sum.fetch_add(std::uint64_t(k), std::memory_order_relaxed);
        }
        wg.done();
      });
    }
    // A plain thread uses the pool too (shared list only).
    std::thread t([&] {
      for (int i = 0; i < iters; i++) {
        auto o = p.get();
        if (o->holders.fetch_add(1) != 0) violations.fetch_add(1);
        o->value++;
        o->holders.fetch_sub(1);
        p.put(std::move(o));
      }
    });
    wg.wait();
    goro::blocking([&] { t.join(); });
    EXPECT_EQ(violations.load(), 0);
    // Every object made is either cached or was destroyed by a full pool.
    live_at_end = constructed.load() - destroyed.load();
    EXPECT_EQ(std::int64_t(p.size_approx()), live_at_end);
    EXPECT_GT(sum.load(), 0u);
  });
  EXPECT_GE(live_at_end, 0);
  EXPECT_EQ(constructed.load(), destroyed.load());
}

// Call-free loops, preempted by signal with a 100 us time slice, hold
// objects between get and put while other goroutines on the same P use the
// pool: the P's stack is only touched inside libgoro, which is never
// preempted, so no object is handed out twice.
TEST(Pool, SurvivesAsyncPreemption) {
  reset_counts();
  goro::options opt;
  opt.gomaxprocs = 2;
  opt.time_slice = std::chrono::microseconds(100);
  std::uint64_t preempted = 0;
  goro::run(opt, [&] {
    auto before = goro::debug::read_preempt_stats().preempted;
    goro::pool<counted> p(make_counted());
    std::atomic<int> violations{0};
    goro::wait_group wg;
    const auto end = std::chrono::steady_clock::now() +
                     std::chrono::milliseconds(scaled(200, 400));
    for (int w = 0; w < 6; w++) {
      wg.add(1);
      goro::go([&] {
        while (std::chrono::steady_clock::now() < end) {
          for (int i = 0; i < 100; i++) {
            auto o = p.get();
            if (o->holders.fetch_add(1) != 0) violations.fetch_add(1);
            for (int k = 0; k < 200; k++) {
              o->value = o->value * 3 + 1;  // call-free: preemptible here
              asm volatile("" : : "r"(o->value) : "memory");
            }
            o->holders.fetch_sub(1);
            p.put(std::move(o));
          }
        }
        wg.done();
      });
    }
    wg.wait();
    preempted = goro::debug::read_preempt_stats().preempted - before;
    EXPECT_EQ(violations.load(), 0);
    EXPECT_EQ(std::int64_t(p.size_approx()),
              constructed.load() - destroyed.load());
  });
  EXPECT_EQ(constructed.load(), destroyed.load());
  std::printf("asynchronous preemptions during the test: %llu\n",
              static_cast<unsigned long long>(preempted));
  if (goro::debug::async_preempt_enabled()) {
    EXPECT_GT(preempted, 0u);
  }
}

// clear() while goroutines use the pool: objects cached before it never
// come out of a get() that starts after it; nothing is lost or freed twice.
TEST(Pool, ConcurrentClear) {
  reset_counts();
  goro::options opt;
  opt.gomaxprocs = 2;
  goro::run(opt, [] {
    goro::pool<counted> p(make_counted());
    std::atomic<int> violations{0};
    std::atomic<bool> stop{false};
    goro::wait_group wg;
    for (int w = 0; w < 4; w++) {
      wg.add(1);
      goro::go([&, w] {
        std::vector<std::unique_ptr<counted>> mine;
        for (int i = 0; !stop.load(); i++) {
          int k = 1 + (i + w) % 20;
          for (int j = 0; j < k; j++) {
            auto o = p.get();
            if (o->holders.fetch_add(1) != 0) violations.fetch_add(1);
            o->value = 0;  // a tagged object taken before the clear
            mine.push_back(std::move(o));
          }
          if (i % 3 == 0) goro::gosched();
          for (auto& o : mine) {
            o->holders.fetch_sub(1);
            p.put(std::move(o));
          }
          mine.clear();
        }
        wg.done();
      });
    }
    // Tag a generation: objects put before a clear carry an older value,
    // and a get after the clear must not return one of them.
    const int clears = scaled(200, 50);
    for (int c = 0; c < clears; c++) {
      {
        auto o = p.get();
        o->value = 1;  // marks "cached before the clear below"
        p.put(std::move(o));
      }
      p.clear();
      auto after = p.get();
      if (after->value == 1) violations.fetch_add(1);
      after->value = 0;
      p.put(std::move(after));
      goro::gosched();
    }
    stop.store(true);
    wg.wait();
    EXPECT_EQ(violations.load(), 0);
    EXPECT_EQ(std::int64_t(p.size_approx()),
              constructed.load() - destroyed.load());
  });
  EXPECT_EQ(constructed.load(), destroyed.load());
}

// A plain thread (not a goroutine, no P) uses the shared list only.
TEST(Pool, PlainThread) {
  reset_counts();
  {
    std::atomic<int> calls{0};
    goro::pool<counted> p(make_counted(&calls));
    auto a = p.get();
    EXPECT_EQ(calls.load(), 1);
    counted* raw = a.get();
    p.put(std::move(a));
    auto b = p.get();
    EXPECT_EQ(b.get(), raw);
    EXPECT_EQ(calls.load(), 1);
    p.put(std::move(b));
    // The same pool from goroutines afterwards, then back.
    goro::run([&] {
      auto c = p.get();  // refills this P's local from the shared list
      EXPECT_EQ(c.get(), raw);
      p.put(std::move(c));
    });
    EXPECT_EQ(p.size_approx(), 1u);
  }
  EXPECT_EQ(constructed.load(), 1);
  EXPECT_EQ(destroyed.load(), 1);
}

// Inside a blocking region the goroutine has no P: the shared list.
TEST(Pool, InsideBlockingRegion) {
  goro::run([] {
    goro::pool<int> p;
    goro::blocking([&] { p.put(std::make_unique<int>(3)); });
    auto v = p.get();
    ASSERT_NE(v, nullptr);
    EXPECT_EQ(*v, 3);
  });
}

// GOMAXPROCS grows while a pool is in use: Ps with new ids get locals.
TEST(Pool, GomaxprocsGrows) {
  reset_counts();
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [] {
    goro::pool<counted> p(make_counted());
    p.put(p.get());
    goro::gomaxprocs(4);
    goro::wait_group wg;
    for (int w = 0; w < 8; w++) {
      wg.add(1);
      goro::go([&] {
        for (int i = 0; i < scaled(2000, 300); i++) {
          auto o = p.get();
          if (i % 5 == 0) goro::gosched();
          p.put(std::move(o));
        }
        wg.done();
      });
    }
    wg.wait();
    goro::gomaxprocs(1);
    p.put(p.get());
  });
  EXPECT_EQ(constructed.load(), destroyed.load());
}

}  // namespace
