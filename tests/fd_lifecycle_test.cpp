// goro::fd's lifecycle and readiness, the bugs of issue 25's outside
// review: a read never trusts a short read or a consumed edge to mean
// "empty"; release() leaves the poller before it returns; the blocking
// mode goro took away is given back; an error event for a closed
// descriptor never lands on the one that reused its poll_desc.
#include <fcntl.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <system_error>
#include <thread>

#include "runtime/g.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/testhook.hpp"
#include "runtime/tls.hpp"
#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

// A read that should find data at once; a deadline turns a lost wake-up
// into a failure instead of a hang.
std::string read_soon(goro::fd& f, std::size_t n) {
  f.set_read_deadline(std::chrono::steady_clock::now() + 5s);
  std::string buf(n, '\0');
  std::size_t got = f.read(buf.data(), n);
  buf.resize(got);
  return buf;
}

int flags_of(int sysfd) { return fcntl(sysfd, F_GETFL); }

}  // namespace

// Bug 1: "wait, then read". The first read is short; the second chunk's
// edge is consumed by wait_readable(); the read after it must still find
// the bytes queued.
TEST(FdReadiness, WaitReadableThenReadAfterAShortRead) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    goro::fd r(p[0]), w(p[1]);
    w.write("abc", 3);
    EXPECT_EQ(read_soon(r, 100), "abc");  // short: 3 of 100
    w.write("def", 3);
    r.wait_readable();
    std::string got;
    try {
      got = read_soon(r, 100);
    } catch (const goro::deadline_exceeded&) {
      got = "<read parked with data buffered>";
    }
    EXPECT_EQ(got, "def");
  });
}

// Bug 1: a packet-mode pipe returns one packet per read, so a short read
// leaves the next packet queued with no new edge.
TEST(FdReadiness, PacketModePipeReadsEveryPacket) {
  goro::run([] {
    int p[2];
    if (::pipe2(p, O_CLOEXEC | O_DIRECT) != 0)
      GTEST_SKIP() << "pipe2(O_DIRECT) unsupported: " << std::strerror(errno);
    goro::fd r(p[0]), w(p[1]);
    w.write("one", 3);
    w.write("two", 3);
    w.write("three", 5);
    std::string got;
    try {
      for (int i = 0; i < 3; i++) got += read_soon(r, 100) + "|";
    } catch (const goro::deadline_exceeded&) {
      got += "<parked with a packet queued>";
    }
    EXPECT_EQ(got, "one|two|three|");
  });
}

// Bug 1: TCP stops a read at the urgent mark; the bytes after it are
// queued with no new edge.
TEST(FdReadiness, TcpReadStopsAtUrgentDataAndTheRestIsRead) {
  goro::run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto c = goro::net::dial("tcp", ln.addr().str());
    auto s = ln.accept();
    // "ab", then urgent "X" (not inline: the read skips it and stops at
    // the mark), then "cd".
    int cfd = c.fd().get();
    ASSERT_EQ(::send(cfd, "ab", 2, 0), 2);
    ASSERT_EQ(::send(cfd, "X", 1, MSG_OOB), 1);
    ASSERT_EQ(::send(cfd, "cd", 2, 0), 2);
    std::string got;
    try {
      while (got.size() < 4) got += read_soon(s.fd(), 100);
    } catch (const goro::deadline_exceeded&) {
      got += "<parked with data after the urgent mark>";
    }
    EXPECT_EQ(got, "abcd");
  });
}

// Bug 2: release() hands back a number that is out of the poller: it can
// be wrapped again at once.
TEST(FdRelease, ReleasedNumberCanBeWrappedAgain) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    goro::fd w(p[1]);
    goro::fd r(p[0]);
    // A reader parked on it when it is released: the woken reader drops
    // the last reference after release() returned.
    goro::wait_group wg;
    wg.add(1);
    std::atomic<bool> closed_seen{false};
    goro::go([&] {
      char c;
      try {
        r.read(&c, 1);
      } catch (const goro::closed_error&) {
        closed_seen = true;
      }
      wg.done();
    });
    goro::gosched();
    int n = r.release();
    EXPECT_EQ(n, p[0]);
    std::string err;
    try {
      goro::fd again(n);
      w.write("z", 1);
      EXPECT_EQ(read_soon(again, 1), "z");
    } catch (const std::exception& e) {
      err = e.what();
    }
    EXPECT_EQ(err, "");
    wg.wait();
    EXPECT_TRUE(closed_seen.load());
  });
}

// Bug 2: the late removal went by number, so after the caller closed the
// released descriptor and the number was reused, it took the new
// descriptor out of epoll and its reader hung.
TEST(FdRelease, ReusedNumberKeepsItsRegistration) {
  // One P: the woken reader runs (and drops the last reference) only when
  // main parks, after the number was reused.
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    goro::fd w(p[1]);
    auto r = std::make_unique<goro::fd>(p[0]);
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      char c;
      try {
        r->read(&c, 1);
      } catch (const goro::closed_error&) {
      }
      wg.done();
    });
    goro::gosched();
    int n = r->release();
    ::close(n);
    int q[2];
    ASSERT_EQ(::pipe2(q, O_CLOEXEC), 0);
    goro::fd r2(q[0]), w2(q[1]);
    wg.wait();  // the old reader is gone: any late removal has happened
    r.reset();
    std::string got;
    goro::go([&] { w2.write("y", 1); });  // runs once the reader parks
    try {
      got = read_soon(r2, 1);
    } catch (const goro::deadline_exceeded&) {
      got = "<registration lost>";
    }
    EXPECT_EQ(got, "y");
  });
}

// Bug 3: the blocking mode goro took away comes back when the last
// goro::fd on the description is gone; a dup that plain code writes to
// blocks again instead of failing with EAGAIN.
TEST(FdBlockingMode, RestoredWhenTheLastWrapperCloses) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  ASSERT_EQ(flags_of(p[1]) & O_NONBLOCK, 0);
  goro::run([&] {
    goro::fd a(::dup(p[1]));
    EXPECT_NE(flags_of(p[1]) & O_NONBLOCK, 0);  // shared description
    {
      goro::fd b(::dup(p[1]));  // joins: the flag stays while a lives
    }
    EXPECT_NE(flags_of(p[1]) & O_NONBLOCK, 0);
  });
  EXPECT_EQ(flags_of(p[1]) & O_NONBLOCK, 0);
  ::close(p[0]);
  ::close(p[1]);
}

TEST(FdBlockingMode, RestoredOnRelease) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  goro::run([&] {
    goro::fd a(p[0]);
    EXPECT_NE(flags_of(p[0]) & O_NONBLOCK, 0);
    EXPECT_EQ(a.release(), p[0]);
    EXPECT_EQ(flags_of(p[0]) & O_NONBLOCK, 0);
  });
  ::close(p[0]);
  ::close(p[1]);
}

// A descriptor that was non-blocking already stays so.
TEST(FdBlockingMode, CallersNonBlockingModeIsKept) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
  goro::run([&] { goro::fd a(::dup(p[0])); });
  EXPECT_NE(flags_of(p[0]) & O_NONBLOCK, 0);
  ::close(p[0]);
  ::close(p[1]);
}

// Bug 4: an EPOLLERR-alone event for a descriptor is in the poller's hands
// when the descriptor is closed and its poll_desc reused by a new one (the
// test hook does both in that window). The new descriptor must not inherit
// the error: its reads work.
TEST(FdPollSequence, ErrorEventForAClosedDescriptorIsStale) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    // Fill the write end, so that closing the read end leaves it with
    // EPOLLERR alone (no room: no EPOLLOUT).
    char junk[4096] = {};
    while (::write(p[1], junk, sizeof junk) > 0) {
    }
    // The hook runs on whichever thread polls (sysmon or an M): what it
    // shares with this goroutine is atomic, and stage publishes `reused`.
    static std::atomic<goro::rt::poll_desc*> victim;
    static std::atomic<int> newfd_r;
    static std::atomic<goro::rt::poll_desc*> reused;
    static std::atomic<int> stage;
    stage = 0;
    victim = goro::rt::poll_open(p[1]);
    ASSERT_NE(victim.load(), nullptr);
    int newfd[2];
    ASSERT_EQ(::pipe2(newfd, O_CLOEXEC | O_NONBLOCK), 0);
    newfd_r = newfd[0];
    goro::rt::testhooks.netpoll_event.store(+[](goro::rt::poll_desc* pd) {
      if (pd != victim.load() || stage.load() != 0) return;
      // In the window: close the descriptor and reuse its poll_desc.
      goro::rt::poll_unblock(pd);
      goro::rt::poll_close(pd);
      reused = goro::rt::poll_open(newfd_r.load());
      stage = 1;
    });
    ::close(p[0]);  // queues EPOLLERR for the write end
    auto until = std::chrono::steady_clock::now() + 10s;
    while (stage.load() == 0 && std::chrono::steady_clock::now() < until)
      goro::sleep(1ms);  // idle: an M polls (and runs the hook)
    goro::rt::testhooks.netpoll_event.store(nullptr);
    ASSERT_EQ(stage.load(), 1) << "the poller never saw the error event";
    ::close(p[1]);
    goro::rt::poll_desc* const pd = reused.load();
    if (pd != victim.load())
      GTEST_SKIP() << "the poll_desc was not reused (allocator order)";
    // The reused descriptor has nothing to report: its read deadline and
    // close checks pass, and no error is pending on it.
    EXPECT_EQ(goro::rt::poll_reset(pd, 'r'), goro::rt::poll_ok);
    goro::rt::poll_unblock(pd);
    goro::rt::poll_close(pd);
    ::close(newfd[0]);
    ::close(newfd[1]);
  });
}

// Bug 7: I/O that completes without waiting is a runtime entry that honours
// a pending preemption (Go checks in every function prologue). At one P, a
// goroutine asked to yield (as sysmon asks one that ran 10 ms) makes a UDP
// write that cannot wait: the request is consumed (the scheduler clears it
// when it runs the goroutine again), and the goroutine queued behind it
// runs. A preempted goroutine goes to the global queue, which the scheduler
// reads first one tick in 61 (as Go's does), so the same goroutine may come
// straight back: the test tries a few times and needs the other to run once.
TEST(FdPreemption, WriteThatNeverWaitsHonoursAPreemptionRequest) {
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    auto sink = goro::net::listen_packet("udp", "127.0.0.1:0");
    auto out = goro::net::dial_packet("udp", sink.local_addr().str());
    char msg[32] = {};
    out.write(msg, sizeof msg);  // warm: the first write may differ
    bool other_ran = false;
    for (int attempt = 0; attempt < 4 && !other_ran; attempt++) {
      bool ran = false;
      goro::go([&ran] { ran = true; });
      goro::rt::getg()->preempt.store(true, std::memory_order_relaxed);
      out.write(msg, sizeof msg);
      EXPECT_FALSE(goro::rt::getg()->preempt.load(std::memory_order_relaxed))
          << "the write returned without yielding";
      goro::rt::getg()->preempt.store(false, std::memory_order_relaxed);
      other_ran = ran;
      while (!ran) goro::gosched();  // `ran` lives on this frame
    }
    EXPECT_TRUE(other_ran) << "the queued goroutine never ran first";
  });
}

// The same as a user sees it: main's 10 ms sleeps beside a goroutine
// looping such writes return (bench/: sleep_beside_udp_writer measures how
// late).
TEST(FdPreemption, SleepBesideWritesThatNeverWaitReturns) {
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    auto sink = goro::net::listen_packet("udp", "127.0.0.1:0");
    auto out = goro::net::dial_packet("udp", sink.local_addr().str());
    std::atomic<bool> stop{false};
    std::atomic<long> writes{0};
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      char msg[32] = {};
      while (!stop.load(std::memory_order_relaxed)) {
        out.write(msg, sizeof msg);
        writes.fetch_add(1, std::memory_order_relaxed);
      }
      wg.done();
    });
    for (int i = 0; i < 3; i++) goro::sleep(10ms);
    stop = true;
    wg.wait();
    EXPECT_GT(writes.load(), 0);  // the writer did run between the sleeps
  });
}
