// sysmon returns the stack memory of idle goroutine stacks to the OS: after
// a burst of goroutines with deep stacks ends, RSS falls back (bounded wait).
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "runtime/sched.hpp"
#include "runtime/stack.hpp"
#include "test_support.hpp"

namespace {

long rss_kib() { return goro_test::proc_status("VmRSS:"); }

__attribute__((noinline)) void deep(int n) {
  volatile char buf[4096];
  // Volatile stores (a memset through a cast may be optimised away).
  for (std::size_t i = 0; i < sizeof buf; i += 64) buf[i] = char(i);
  if (n > 0) deep(n - 1);
  buf[0] = 2;
}

TEST(Scavenge, IdleStacksReturnToTheOS) {
  if (GORO_TEST_SANITIZED)
    GTEST_SKIP() << "sanitizers keep shadow/fake-stack memory for stack "
                    "frames, so RSS does not follow the runtime's releases";
  const int n = goro_test::live_scaled(4000, 1000);
  long before = 0, peak = 0, after = 0;
  goro::run([&] {
    before = rss_kib();
    goro::wait_group running, gate, done;
    gate.add(1);
    for (int i = 0; i < n; i++) {
      running.add(1);
      done.add(1);
      goro::go([&] {
        deep(10);  // ~44 KiB of the 64 KiB default stack each
        running.done();
        gate.wait();
        done.done();
      });
    }
    running.wait();
    peak = rss_kib();
    gate.done();
    done.wait();
    // sysmon scavenges once a second; allow a few periods.
    goro_test::deadline limit(std::chrono::seconds(8));
    while (!limit.passed()) {
      after = rss_kib();
      if (after - before < (peak - before) / 3) break;
      goro::sleep(std::chrono::milliseconds(50));
    }
  });
  const long grown = peak - before;
  ASSERT_GT(grown, long(n) * 24) << "the goroutines did not use their stacks";
  EXPECT_LT(after - before, grown / 3)
      << "RSS before " << before << " KiB, peak " << peak << " KiB, after "
      << after << " KiB: idle stacks were not returned";
}

// One byte of this process's memory at `addr` through process_vm_readv,
// which fails with EFAULT on an inaccessible page instead of faulting.
bool readable(std::uintptr_t addr) {
  char b = 0;
  iovec local{&b, 1};
  iovec remote{reinterpret_cast<void*>(addr), 1};
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == 1;
}

// The scavenger releases neighbouring stacks of a chunk with one madvise
// over their guard pages too; the guards must survive it (madvise guard
// markers and PROT_NONE pages are kept by MADV_DONTNEED), and the usable
// stacks stay mapped (zero pages on next touch).
TEST(Scavenge, GuardPagesSurviveCoalescedRelease) {
  if (const char* g = std::getenv("GORO_STACK_GUARD");
      g != nullptr && std::strcmp(g, "canary") == 0)
    GTEST_SKIP() << "GORO_STACK_GUARD=canary: stacks have no guard page";
  std::size_t checked = 0, adjacent = 0, bad_guard = 0, bad_stack = 0;
  goro::options opt;
  opt.gomaxprocs = 1;
  goro::run(opt, [&] {
    goro::wait_group started, gate, done;
    gate.add(1);
    constexpr int n = 300;
    started.add(n);
    done.add(n);
    for (int i = 0; i < n; i++)
      goro::go([&] {
        started.done();
        gate.wait();  // all n parked at once: n stacks in use
        done.done();
      });
    started.wait();
    gate.done();
    done.wait();
    // The P's free list spilled all but a few dozen dead Gs (with their
    // stacks) to the global list, which the scavenger works on.
    goro::rt::scavenge_stacks(100000);
    // (sysmon may have released some of them already, before its sleep.)
    std::vector<goro::rt::stack> stacks;
    {
      goro::rt::lock_guard lk(goro::rt::sched.gfree.lock);
      for (goro::rt::G* gp = goro::rt::sched.gfree.clean.head; gp != nullptr;
           gp = gp->schedlink)
        if (gp->stk.guard != goro::rt::guard_kind::canary)
          stacks.push_back(gp->stk);
    }
    std::sort(stacks.begin(), stacks.end(),
              [](const auto& a, const auto& b) { return a.lo < b.lo; });
    for (std::size_t i = 0; i < stacks.size(); i++) {
      const goro::rt::stack& st = stacks[i];
      checked++;
      if (readable(reinterpret_cast<std::uintptr_t>(st.map_base))) bad_guard++;
      if (!readable(st.lo) || !readable(st.hi - 1)) bad_stack++;
      if (i > 0 &&
          reinterpret_cast<std::uintptr_t>(st.map_base) == stacks[i - 1].hi)
        adjacent++;
    }
  });
  EXPECT_GE(checked, 100u) << "no scavenged stacks with a guard page";
  EXPECT_GE(adjacent, 1u) << "no neighbouring stacks: nothing was coalesced";
  EXPECT_EQ(bad_guard, 0u) << "guard pages readable after scavenging";
  EXPECT_EQ(bad_stack, 0u) << "usable stack unmapped by scavenging";
}

}  // namespace
