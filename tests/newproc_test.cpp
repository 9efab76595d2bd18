// newproc_test.cpp: goroutine creation and lazy stack binding. A new
// goroutine is a G holding its callable; it gets a stack when it first
// runs, the one its P freed last (newproc.cpp).
#include <array>
#include <atomic>
#include <cstdint>
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <goro/wait_group.hpp>
#include <stdexcept>

#include "test_support.hpp"

namespace {

goro::options procs(int n) {
  goro::options o;
  o.gomaxprocs = n;
  return o;
}

// Goroutines queued but not started hold no stack, and at one P a
// spawn-run-exit cycle reuses the stack that was freed last: 5000
// goroutines cost a handful of stacks, not 5000.
TEST(LazyStack, QueuedGoroutinesHoldNoStack) {
  constexpr int n = 5000;
  std::uint64_t queued_delta = 0, after_delta = 0;
  int ran = 0;
  goro::run(procs(1), [&] {
    goro::debug::mem_stats s0 = goro::debug::read_mem_stats();
    std::atomic<int> count{0};
    goro::wait_group wg;
    wg.add(n);
    // The spawner does not yield between spawns (no runtime entry that
    // parks), so at one P all n are queued before the first one runs,
    // unless sysmon asks the spawner to yield, which lets a few run.
    for (int i = 0; i < n; i++)
      goro::go([&] {
        count.fetch_add(1, std::memory_order_relaxed);
        wg.done();
      });
    goro::debug::mem_stats s1 = goro::debug::read_mem_stats();
    wg.wait();
    goro::debug::mem_stats s2 = goro::debug::read_mem_stats();
    queued_delta = s1.stacks - s0.stacks;
    after_delta = s2.stacks - s0.stacks;
    ran = count.load();
  });
  EXPECT_EQ(ran, n);
  EXPECT_LE(queued_delta, 8u) << "queued goroutines reserved stacks";
  EXPECT_LE(after_delta, 8u) << "goroutines run one after another at one P "
                                "should share the stack freed last";
}

TEST(LazyStack, MemStatsCountStackBytes) {
  goro::run([] {
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] { wg.done(); });
    wg.wait();
    goro::debug::mem_stats s = goro::debug::read_mem_stats();
    EXPECT_GE(s.stacks, 1u);
    EXPECT_GE(s.gs, s.stacks);
    EXPECT_EQ(s.stack_sys % s.stacks, 0u) << "all stacks of default size";
    EXPECT_GE(s.stack_sys / s.stacks, 16u * 1024);
  });
}

struct counted {
  static inline std::atomic<int> live{0};
  counted() { live.fetch_add(1); }
  counted(const counted&) { live.fetch_add(1); }
  counted(counted&&) noexcept { live.fetch_add(1); }
  ~counted() { live.fetch_sub(1); }
};

// Callables too big or too aligned for the G's inline storage live on the
// heap; they are constructed, run and destroyed exactly once, also when the
// goroutine ends by goexit (ASan's leak check sees the storage freed).
TEST(LazyStack, LargeAndOverAlignedCallables) {
  struct alignas(64) wide {
    std::uint64_t v[8];
  };
  counted::live.store(0);
  bool ok_big = false, ok_aligned = false;
  goro::run([&] {
    goro::wait_group wg;
    std::array<std::uint64_t, 40> big{};
    for (std::size_t i = 0; i < big.size(); i++) big[i] = i * 7;
    wide w{};
    w.v[7] = 99;
    wg.add(3);
    goro::go([&ok_big, &wg, big, c = counted{}] {
      std::uint64_t sum = 0;
      for (auto x : big) sum += x;
      ok_big = sum == 7u * 39 * 40 / 2;
      wg.done();
    });
    goro::go([&ok_aligned, &wg, w] {
      ok_aligned =
          reinterpret_cast<std::uintptr_t>(&w) % 64 == 0 && w.v[7] == 99;
      wg.done();
    });
    goro::go([&wg, big, c = counted{}] {
      (void)big;
      wg.done();
      goro::goexit();
    });
    wg.wait();
    // The goexit'ed goroutine may still be unwinding after its done().
    goro_test::eventually([] { return counted::live.load() == 0; });
  });
  EXPECT_TRUE(ok_big);
  EXPECT_TRUE(ok_aligned);
  EXPECT_EQ(counted::live.load(), 0) << "a callable was not destroyed";
}

struct throws_on_copy {
  std::array<char, 128> pad{};
  throws_on_copy() = default;
  throws_on_copy(const throws_on_copy&) { throw std::runtime_error("copy"); }
};

// A callable that throws while it is being constructed on the heap leaves
// no goroutine behind and the runtime usable.
TEST(LazyStack, ThrowingLargeCallableLeavesNoGoroutine) {
  bool threw = false;
  int after = 0;
  goro::run([&] {
    int before = goro::num_goroutine();
    throws_on_copy t;
    try {
      goro::go([](const throws_on_copy&) {}, t);
    } catch (const std::runtime_error&) {
      threw = true;
    }
    after = goro::num_goroutine() - before;
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] { wg.done(); });
    wg.wait();
  });
  EXPECT_TRUE(threw);
  EXPECT_EQ(after, 0);
}

// A goroutine with a stack size of its own is bound at spawn and can use
// that stack (deeper than the default would allow is tested in
// sched_test's PerGoroutineStackSize); mixing both kinds keeps working.
TEST(LazyStack, OwnSizeAndDefaultMixed) {
  int sum = 0;
  goro::run(procs(2), [&] {
    goro::wait_group wg;
    std::atomic<int> s{0};
    wg.add(200);
    for (int i = 0; i < 200; i++) {
      if (i % 2)
        goro::go(goro::go_options{.stack_size = 64 * 1024}, [&, i] {
          volatile char buf[32 * 1024];
          buf[0] = char(i);
          s.fetch_add(buf[0] == char(i));
          wg.done();
        });
      else
        goro::go([&] {
          s.fetch_add(1);
          wg.done();
        });
    }
    wg.wait();
    sum = s.load();
  });
  EXPECT_EQ(sum, 200);
}

}  // namespace

// Go's `go f()` with a nil f panics in the caller ("go of nil func
// value"): goro::go throws there, before a goroutine exists.
TEST(Newproc, NilCallableThrowsInTheCaller) {
  goro::run([] {
    void (*null_fn)() = nullptr;
    EXPECT_THROW(goro::go(null_fn), std::invalid_argument);
    EXPECT_THROW(goro::go(std::function<void()>{}), std::invalid_argument);
    bool ran = false;
    goro::wait_group wg;
    wg.add(1);
    goro::go(std::function<void()>([&] {
      ran = true;
      wg.done();
    }));
    wg.wait();
    EXPECT_TRUE(ran);
  });
}
