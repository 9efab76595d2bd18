// sysmon returns the stack memory of idle goroutine stacks to the OS: after
// a burst of goroutines with deep stacks ends, RSS falls back (bounded wait).
#include <cstring>
#include <fstream>
#include <goro/goro.hpp>
#include <string>

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
        deep(15);  // ~64 KiB of stack each
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
  ASSERT_GT(grown, long(n) * 32) << "the goroutines did not use their stacks";
  EXPECT_LT(after - before, grown / 3)
      << "RSS before " << before << " KiB, peak " << peak << " KiB, after "
      << after << " KiB: idle stacks were not returned";
}

}  // namespace
