// goro::fd: pipes and eventfds in the network poller — readiness parks and
// wakes goroutines (not threads), deadlines fail exactly the waiter they
// belong to, a close from another goroutine wakes a blocked reader, and
// plain threads block instead of parking.
#include <fcntl.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <goro/chan.hpp>
#include <goro/goro.hpp>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "test_support.hpp"

using namespace std::chrono_literals;

namespace {

struct pipe_pair {
  goro::fd r, w;
  pipe_pair() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) throw std::runtime_error("pipe");
    r = goro::fd(p[0]);
    w = goro::fd(p[1]);
  }
};

}  // namespace

TEST(Fd, ReaderParksUntilWriterWrites) {
  goro::run([] {
    pipe_pair p;
    std::atomic<int> stage{0};
    goro::wait_group wg;
    wg.add(1);
    std::string got;
    goro::go([&] {
      char buf[16];
      stage = 1;
      std::size_t n = p.r.read_full(buf, 5);
      got.assign(buf, n);
      wg.done();
    });
    // The reader runs (and parks) before we write: yield until it did.
    while (stage.load() == 0) goro::gosched();
    goro::gosched();
    p.w.write("hello", 5);
    wg.wait();
    EXPECT_EQ(got, "hello");
  });
}

TEST(Fd, ManyGoroutinesOnManyPipesAtOneP) {
  goro::options o;
  o.gomaxprocs = 1;
  goro::run(o, [] {
    constexpr int n = 200;
    std::vector<pipe_pair> pipes(n);
    goro::wait_group wg;
    std::atomic<int> sum{0};
    wg.add(n);
    for (int i = 0; i < n; i++) {
      goro::go([&, i] {
        int v = 0;
        EXPECT_EQ(pipes[i].r.read_full(&v, sizeof v), sizeof v);
        sum += v;
        wg.done();
      });
    }
    for (int i = 0; i < n; i++) pipes[i].w.write(&i, sizeof i);
    wg.wait();
    EXPECT_EQ(sum.load(), n * (n - 1) / 2);
  });
}

TEST(Fd, EndOfStreamIsZero) {
  goro::run([] {
    pipe_pair p;
    p.w.close();
    char c;
    EXPECT_EQ(p.r.read(&c, 1), 0u);
  });
}

TEST(Fd, ReadDeadlineFailsTheReaderOnly) {
  goro::run([] {
    pipe_pair a, b;
    a.r.set_read_deadline(std::chrono::steady_clock::now() + 20ms);
    goro::wait_group wg;
    wg.add(1);
    bool b_ok = false;
    goro::go([&] {
      char c;
      b_ok = b.r.read(&c, 1) == 1 && c == 'x';
      wg.done();
    });
    char c;
    EXPECT_THROW(a.r.read(&c, 1), goro::deadline_exceeded);
    b.w.write("x", 1);
    wg.wait();
    EXPECT_TRUE(b_ok);
    // A deadline in the past fails at once; clearing it allows reads again.
    a.r.set_read_deadline(std::chrono::steady_clock::now() - 1s);
    EXPECT_THROW(a.r.read(&c, 1), goro::deadline_exceeded);
    a.r.set_read_deadline({});
    a.w.write("y", 1);
    EXPECT_EQ(a.r.read(&c, 1), 1u);
  });
}

TEST(Fd, DeadlineExceededIsASystemErrorWithTimedOut) {
  goro::deadline_exceeded e;
  EXPECT_EQ(e.code(), std::errc::timed_out);
  goro::closed_error c;
  EXPECT_EQ(c.code(), std::errc::bad_file_descriptor);
}

TEST(Fd, CloseFromAnotherGoroutineWakesBlockedReader) {
  goro::run([] {
    pipe_pair p;
    goro::wait_group wg;
    wg.add(1);
    std::atomic<int> result{0};
    std::atomic<bool> started{false};
    goro::go([&] {
      char c;
      started = true;
      try {
        p.r.read(&c, 1);
        result = 1;
      } catch (const goro::closed_error&) {
        result = 2;
      }
      wg.done();
    });
    while (!started.load()) goro::gosched();
    goro::gosched();
    p.r.close();
    wg.wait();
    EXPECT_EQ(result.load(), 2);
    char c;
    EXPECT_THROW(p.r.read(&c, 1), goro::closed_error);
    EXPECT_EQ(p.r.get(), -1);
  });
}

TEST(Fd, EventfdWaitReadable) {
  goro::run([] {
    goro::fd ev(::eventfd(0, EFD_CLOEXEC));
    goro::wait_group wg;
    wg.add(1);
    std::uint64_t got = 0;
    goro::go([&] {
      ev.wait_readable();
      EXPECT_EQ(::read(ev.get(), &got, sizeof got), 8);
      wg.done();
    });
    goro::gosched();
    std::uint64_t one = 7;
    EXPECT_EQ(::write(ev.get(), &one, sizeof one), 8);
    wg.wait();
    EXPECT_EQ(got, 7u);
  });
}

TEST(Fd, RegularFileIsRefused) {
  char path[] = "/tmp/goro_fd_test_XXXXXX";
  int f = ::mkstemp(path);
  ASSERT_GE(f, 0);
  ::unlink(path);
  EXPECT_THROW(goro::fd{f}, std::system_error);
  ::close(f);
  EXPECT_THROW(goro::fd{-1}, std::invalid_argument);
}

TEST(Fd, PlainThreadBlocksUntilGoroutineWrites) {
  pipe_pair p;
  std::thread writer([&] {
    // A goroutine writes after the plain thread below blocked (or not:
    // either way the byte must arrive).
    goro::go([&] { p.w.write("z", 1); });
  });
  char c = 0;
  EXPECT_EQ(p.r.read(&c, 1), 1u);
  EXPECT_EQ(c, 'z');
  writer.join();
}

// The owner destroys its goro::fd as soon as the data arrived, while the
// writing goroutine may still be returning from write() (releasing its
// lock on the descriptor's state): the state must outlive that (a
// use-after-free under TSan/ASan before the state's memory was counted).
TEST(Fd, DestroyedWhileAnOperationIsReturning) {
  goro::run([] {
    for (int i = 0; i < 300; i++) {
      auto p = std::make_unique<pipe_pair>();
      goro::chan<void> done = goro::make_chan<void>(1);
      goro::fd* w = &p->w;
      goro::go([w, done]() mutable {
        w->write("z", 1);
        done.send();
      });
      char c = 0;
      EXPECT_EQ(p->r.read(&c, 1), 1u);
      p.reset();  // the writer may still be inside write() (not using *w)
      done.recv();
    }
  });
}

TEST(Fd, PlainThreadReadDeadline) {
  pipe_pair p;
  p.r.set_read_deadline(std::chrono::steady_clock::now() + 20ms);
  char c;
  EXPECT_THROW(p.r.read(&c, 1), goro::deadline_exceeded);
}

TEST(Fd, LargeWriteThatOnlyPartlyFitsParksUntilDrained) {
  goro::run([] {
    pipe_pair p;
    const std::size_t size = 4 << 20;  // far beyond the 64 KiB pipe buffer
    std::vector<char> out(size), in(size);
    for (std::size_t i = 0; i < size; i++) out[i] = char(i * 7 + 1);
    goro::wait_group wg;
    wg.add(1);
    goro::go([&] {
      EXPECT_EQ(p.w.write(out.data(), size), size);
      wg.done();
    });
    EXPECT_EQ(p.r.read_full(in.data(), size), size);
    wg.wait();
    EXPECT_EQ(std::memcmp(in.data(), out.data(), size), 0);
  });
}

// A goroutine waiting on a descriptor is not a deadlock: the thread
// blocked in the poller counts as running (as in Go), even when every
// goroutine waits and sysmon runs its idle-time deadlock check.
TEST(Fd, WaitingOnlyOnIoIsNotADeadlock) {
  int p[2];
  ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
  goro::fd r(p[0]);
  std::thread writer([w = p[1]] {
    // Long enough for several of sysmon's 100 ms idle checks.
    std::this_thread::sleep_for(350ms);
    EXPECT_EQ(::write(w, "k", 1), 1);
    ::close(w);
  });
  goro::run([&] {
    char c = 0;
    EXPECT_EQ(r.read(&c, 1), 1u);
    EXPECT_EQ(c, 'k');
  });
  writer.join();
}
