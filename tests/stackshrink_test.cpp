// Releasing the stack memory of long-parked goroutines (stackshrink.cpp,
// issue 28 item 2). Other goroutines hold pointers into parked stacks: a
// wait_group and a result slot in a parent's frame, a channel element and
// the sudog in a receiver's frame, a buffer a read() fills. Each of them is
// touched while the stack's memory is released, and must see exactly what
// was there (or land where the owner will find it), at GOMAXPROCS 1 and 4.
// Each test runs in a child process with GORO_DEBUG=stackrelease=1 and the
// runtime's coarse clock moved forward, so that parked goroutines count as
// idle at sysmon's next scan (about a second).
#include "runtime/stackshrink.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <goro/chan.hpp>
#include <goro/debug.hpp>
#include <goro/net.hpp>
#include <goro/runtime.hpp>
#include <goro/time.hpp>
#include <goro/wait_group.hpp>
#include <memory>
#include <string>
#include <vector>

#include "runtime/testhook.hpp"
#include "test_support.hpp"

namespace {

using testing::ExitedWithCode;

[[noreturn]] void child_exit(bool ok, const std::string& why = "") {
  if (!ok) std::fprintf(stderr, "child failed: %s\n", why.c_str());
  std::fflush(stderr);
  std::_Exit(ok ? 0 : 1);
}

long rss_kib() { return goro_test::proc_status("VmRSS:"); }

// Parks the caller until sysmon has released at least `want` stacks (true)
// or 20 s have passed (false). Moves the runtime's coarse clock forward so
// that everything parked now counts as idle for long.
bool wait_released(std::uint64_t want) {
  goro::rt::testhooks.clock_offset_s.fetch_add(1000);
  goro_test::deadline limit(std::chrono::seconds(20));
  while (!limit.passed()) {
    if (goro::debug::read_mem_stats().stacks_released >= want) return true;
    goro::sleep(std::chrono::milliseconds(20));
  }
  return false;
}

bool release_unavailable(std::string* why) {
  if (GORO_TEST_TSAN) {
    *why = "stack release is off under TSan";
    return true;
  }
  int fd = int(syscall(SYS_userfaultfd, O_CLOEXEC));
  if (fd < 0) {
    *why = std::string("userfaultfd: ") + std::strerror(errno) +
           " (needs CAP_SYS_PTRACE or vm.unprivileged_userfaultfd=1)";
    return true;
  }
  close(fd);
  return false;
}

// n parents, each with a wait_group, a result slot and a 64-byte buffer in
// its own frame, each handing pointers to them to a child that waits on a
// gate; n receivers parked on their own channels. Once their stacks are
// released: the gate opens (children write the parents' slots, read() into
// their buffers and call done on their wait_groups) and main sends each
// receiver a value, and 16 servers parked in read() on idle TCP connections
// get a line. Every parent, receiver and server checks what it got.
[[noreturn]] void touch_released_stacks(int procs) {
  goro_test::arm_child_watchdog(std::chrono::seconds(60));
  setenv("GORO_DEBUG", "stackrelease=1", 1);
  goro::options opt;
  opt.gomaxprocs = procs;
  const int n = goro_test::scaled(300, 120);
  std::atomic<int> parents_ok{0}, receivers_ok{0}, reads_ok{0}, tcp_ok{0};
  std::uint64_t released = 0;
  long rss_parked = 0, rss_released = 0;
  int pfd[2];
  if (pipe(pfd) != 0) child_exit(false, "pipe");
  goro::run(opt, [&] {
    auto gate = goro::make_chan<void>();
    goro::wait_group all;
    std::vector<goro::chan<std::uint64_t>> inbox;
    for (int i = 0; i < n; i++)
      inbox.push_back(goro::make_chan<std::uint64_t>());
    all.add(2 * n);
    goro::wait_group parking;  // counted down just before each park
    parking.add(3 * n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        goro::wait_group wg;  // on this parked parent's stack
        std::uint64_t slot = 0;
        char buf[64];
        std::memset(buf, 'x', sizeof buf);
        wg.add(1);
        goro::go(
            [&wg, &slot, &buf, &reads_ok, &parking, gate, i, rfd = pfd[0]] {
              parking.done();
              gate.recv();
              slot = 0x1234'5678'0000'0000ULL + std::uint64_t(i);
              // A kernel-mode write into the parent's stack.
              if (read(rfd, buf, 8) == 8) reads_ok.fetch_add(1);
              wg.done();
            });
        parking.done();
        wg.wait();
        bool ok = slot == 0x1234'5678'0000'0000ULL + std::uint64_t(i) &&
                  std::memcmp(buf, "stackbuf", 8) == 0 && buf[8] == 'x' &&
                  buf[63] == 'x';
        if (ok) parents_ok.fetch_add(1);
        all.done();
      });
      goro::go([&, i] {
        parking.done();
        std::uint64_t got = *inbox[std::size_t(i)].recv();  // into this frame
        if (got == std::uint64_t(i) * 7 + 1) receivers_ok.fetch_add(1);
        all.done();
      });
    }
    // Servers parked in read() on idle loopback TCP connections, reading
    // into a buffer in their own frame (netpoll readies them: no other
    // goroutine touches their stacks before they run).
    const int ntcp = 16;
    auto ln = goro::net::listen("127.0.0.1:0");
    std::vector<goro::net::conn> clients;
    all.add(ntcp);
    for (int i = 0; i < ntcp; i++) {
      clients.push_back(goro::net::dial(ln.addr().str()));
      goro::go([&, c = std::make_shared<goro::net::conn>(ln.accept())] {
        char line[32] = {};
        std::size_t got = 0;
        while (got < 6) {
          std::size_t k = c->read(line + got, 6 - got);
          if (k == 0) break;
          got += k;
        }
        if (got == 6 && std::memcmp(line, "hello!", 6) == 0)
          tcp_ok.fetch_add(1);
        all.done();
      });
    }
    // Every parent, child and receiver is at its park (the servers park
    // in read() right after accept, before any data is sent).
    parking.wait();
    rss_parked = rss_kib();
    if (!wait_released(std::uint64_t(n))) return;
    released = goro::debug::read_mem_stats().stacks_released;
    rss_released = rss_kib();
    for (int i = 0; i < n; i++)
      if (write(pfd[1], "stackbuf", 8) != 8) return;
    gate.close();
    for (auto& c : clients) c.write("hello!", 6);
    for (int i = 0; i < n; i++)
      inbox[std::size_t(i)].send(std::uint64_t(i) * 7 + 1);
    all.wait();
  });
  if (released < std::uint64_t(n))
    child_exit(false, "only " + std::to_string(released) +
                          " stacks released within 20 s");
  if (parents_ok.load() != n || receivers_ok.load() != n ||
      reads_ok.load() != n || tcp_ok.load() != 16)
    child_exit(false, "parents ok " + std::to_string(parents_ok.load()) +
                          ", receivers ok " +
                          std::to_string(receivers_ok.load()) + ", reads ok " +
                          std::to_string(reads_ok.load()) + " of " +
                          std::to_string(n));
  // Each released stack gave back its top page, less the heap buffer of
  // its live bytes (a few hundred bytes; over 1 KiB with -O0 frames).
  if (!GORO_TEST_SANITIZED && rss_parked - rss_released < long(released) * 2)
    child_exit(false, "RSS only went from " + std::to_string(rss_parked) +
                          " to " + std::to_string(rss_released) + " KiB with " +
                          std::to_string(released) + " stacks released");
  if (goro::debug::read_mem_stats().stacks_released != 0)
    child_exit(false, "stacks still released after every goroutine ran");
  child_exit(true);
}

TEST(StackRelease, TouchedWhileReleasedAtOneP) {
  std::string why;
  if (release_unavailable(&why)) GTEST_SKIP() << why;
  EXPECT_EXIT(touch_released_stacks(1), ExitedWithCode(0), "");
}

TEST(StackRelease, TouchedWhileReleasedAtFourPs) {
  std::string why;
  if (release_unavailable(&why)) GTEST_SKIP() << why;
  EXPECT_EXIT(touch_released_stacks(4), ExitedWithCode(0), "");
}

// Deadlock detection still works once the fault handler thread exists,
// and its goroutine dump walks the released stacks (restoring them).
TEST(StackRelease, DeadlockIsReportedWithStacksReleased) {
  std::string why;
  if (release_unavailable(&why)) GTEST_SKIP() << why;
  EXPECT_EXIT(
      {
        goro_test::arm_child_watchdog(std::chrono::seconds(60));
        setenv("GORO_DEBUG", "stackrelease=1", 1);
        goro::run([&] {
          auto never = goro::make_chan<int>();
          for (int i = 0; i < 200; i++) goro::go([never] { never.recv(); });
          goro::sleep(std::chrono::milliseconds(20));
          if (!wait_released(100)) child_exit(false, "nothing released");
          never.recv();  // everyone asleep: a deadlock
        });
        child_exit(false, "goro::run returned");
      },
      ExitedWithCode(2), "all goroutines are asleep - deadlock!");
}

// With GORO_DEBUG=stackrelease=0 nothing is released, however long the
// goroutines stay parked.
TEST(StackRelease, OffWhenTheThresholdIsZero) {
  // TSan refuses to start threads in a child forked from a multi-threaded
  // parent, and releasing is off under TSan anyway.
  if (GORO_TEST_TSAN) GTEST_SKIP() << "stack release is off under TSan";
  EXPECT_EXIT(
      {
        goro_test::arm_child_watchdog(std::chrono::seconds(60));
        setenv("GORO_DEBUG", "stackrelease=0", 1);
        std::uint64_t released = 1;
        goro::run([&] {
          auto gate = goro::make_chan<void>();
          goro::wait_group wg;
          wg.add(100);
          for (int i = 0; i < 100; i++)
            goro::go([&, gate] {
              gate.recv();
              wg.done();
            });
          goro::sleep(std::chrono::milliseconds(20));
          goro::rt::testhooks.clock_offset_s.fetch_add(1000);
          goro::sleep(std::chrono::milliseconds(2500));  // two scans
          released = goro::debug::read_mem_stats().stacks_released;
          gate.close();
          wg.wait();
        });
        child_exit(released == 0,
                   std::to_string(released) + " stacks released");
      },
      ExitedWithCode(0), "");
}

}  // namespace
