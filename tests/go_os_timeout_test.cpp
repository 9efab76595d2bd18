// Ports of Go's os/timeout_test.go: deadlines on pipes (os.Pipe, here a
// goro::fd over each end of pipe2) and a terminal, at GOMAXPROCS 1, 2 and
// 4, with Go's tolerances (see go_net_timeout_test.cpp).
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "go_port_support.hpp"

using namespace std::chrono_literals;
using sclock = std::chrono::steady_clock;
using goro_test::go_port;

namespace {

class GoOsTimeout : public go_port {};
GO_PORT_SUITE(GoOsTimeout);

template <class F>
std::string outcome(F&& f) {
  try {
    f();
    return "ok";
  } catch (const goro::deadline_exceeded&) {
    return "timeout";
  } catch (const goro::closed_error&) {
    return "closed";
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// os.Pipe: both ends in the poller.
struct os_pipe {
  goro::fd r, w;
  os_pipe() {
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0)
      throw std::system_error(errno, std::system_category());
    r = goro::fd(p[0]);
    w = goro::fd(p[1]);
  }
};

// Writes into w until the pipe is full, so that the next write must wait.
// goro::fd made the descriptor non-blocking: plain writes stop at EAGAIN.
// (A write deadline as the stop could expire before the first write on a
// loaded machine, leaving the pipe empty.)
void fill(goro::fd& w) {
  std::vector<char> b(64 * 1024, 'f');
  for (;;) {
    ssize_t n = ::write(w.get(), b.data(), b.size());
    if (n > 0) continue;
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    throw std::system_error(errno, std::system_category(), "fill");
  }
}

}  // namespace

// Go: TestNonpollableDeadline. A regular file cannot take deadlines (Go's
// ErrNoDeadline); goro::fd refuses to wrap it (EPERM from epoll) and
// leaves the descriptor open and unowned.
TEST_P(GoOsTimeout, NonpollableDeadline) {
  run([] {
    char path[] = "/tmp/goro-ostest-XXXXXX";
    int f = ::mkstemp(path);
    ASSERT_GE(f, 0);
    ::unlink(path);
    try {
      goro::fd g(f);
      ADD_FAILURE() << "a regular file was accepted by the poller";
      g.release();
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code().value(), EPERM) << e.what();
    }
    EXPECT_NE(::fcntl(f, F_GETFD), -1) << "descriptor no longer open";
    ::close(f);
  });
}

// Go: TestReadTimeout (os). A past deadline fails reads with data waiting;
// a future one reads the data then times out.
TEST_P(GoOsTimeout, ReadTimeout) {
  run([] {
    os_pipe p;
    p.w.write("READ TIMEOUT TEST", 17);
    char buf[64];
    p.r.set_read_deadline(sclock::now() - 5s);
    EXPECT_EQ(outcome([&] { p.r.read(buf, sizeof buf); }), "timeout");
    EXPECT_EQ(outcome([&] { p.r.read(buf, sizeof buf); }), "timeout");
    p.r.set_read_deadline(sclock::now() + 50ms);
    std::size_t n = 0;
    EXPECT_EQ(outcome([&] { n = p.r.read(buf, sizeof buf); }), "ok");
    EXPECT_EQ(std::string(buf, n), "READ TIMEOUT TEST");
    EXPECT_EQ(outcome([&] { p.r.read(buf, sizeof buf); }), "timeout");
  });
}

// Go: TestReadTimeoutMustNotReturn (os): a cleared read deadline leaves
// the read blocked until the pipe end is closed.
TEST_P(GoOsTimeout, ReadTimeoutMustNotReturn) {
  run([] {
    os_pipe p;
    auto res = goro::make_chan<std::string>(1);
    goro::go([&p, res] {
      p.r.set_deadline(sclock::now() - 5s);
      p.r.set_write_deadline(sclock::now() - 5s);
      p.r.set_read_deadline({});
      char b[1];
      res.send(outcome([&] { p.r.read(b, 1); }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(100ms)));
    EXPECT_EQ(i, 1) << "read returned early: " << r.value_or("");
    p.r.close();
    if (i == 1) {
      EXPECT_EQ(*res.recv(), "closed");
    }
  });
}

// Go: TestWriteTimeout (os). A past deadline fails writes into an empty
// pipe; a 10 ms one fails once the pipe is full.
TEST_P(GoOsTimeout, WriteTimeout) {
  run([] {
    os_pipe p;
    p.w.set_write_deadline(sclock::now() - 5s);
    EXPECT_EQ(outcome([&] { p.w.write("WRITE TIMEOUT TEST", 18); }), "timeout");
    EXPECT_EQ(outcome([&] { p.w.write("WRITE TIMEOUT TEST", 18); }), "timeout");
    os_pipe q;
    q.w.set_write_deadline(sclock::now() + 10ms);
    std::vector<char> b(4096, 'w');
    std::string r;
    for (int i = 0;
         i < 100000 &&
         (r = outcome([&] { q.w.write(b.data(), b.size()); })) == "ok";
         i++) {
    }
    EXPECT_EQ(r, "timeout");
    EXPECT_EQ(outcome([&] { q.w.write("x", 1); }), "timeout");
  });
}

// Go: TestWriteTimeoutMustNotReturn (os).
TEST_P(GoOsTimeout, WriteTimeoutMustNotReturn) {
  run([] {
    os_pipe p;
    fill(p.w);
    auto res = goro::make_chan<std::string>(1);
    goro::go([&p, res] {
      p.w.set_deadline(sclock::now() - 5s);
      p.w.set_read_deadline(sclock::now() - 5s);
      p.w.set_write_deadline({});
      res.send(outcome([&] { p.w.write("x", 1); }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(100ms)));
    EXPECT_EQ(i, 1) << "write returned early: " << r.value_or("");
    p.w.close();
    if (i == 1) {
      EXPECT_EQ(*res.recv(), "closed");
    }
  });
}

// Go: TestReadTimeoutFluctuation (os).
TEST_P(GoOsTimeout, ReadTimeoutFluctuation) {
  run([] {
    os_pipe p;
    std::chrono::nanoseconds d = 1ms;
    char b[256];
    for (;;) {
      auto t0 = sclock::now();
      auto dl = t0 + d;
      p.r.set_read_deadline(dl);
      ASSERT_EQ(outcome([&] { p.r.read(b, sizeof b); }), "timeout");
      auto t1 = sclock::now();
      ASSERT_GE(t1, dl);
      auto actual = t1 - t0;
      if (actual > goro_test::timeout_upper_bound(d)) {
        ASSERT_TRUE(goro_test::next_timeout(actual, d));
        continue;
      }
      break;
    }
  });
}

// Go: TestWriteTimeoutFluctuation (os): the pipe is never read.
TEST_P(GoOsTimeout, WriteTimeoutFluctuation) {
  run([] {
    os_pipe p;
    std::chrono::nanoseconds d = 1ms;
    std::vector<char> b(4096, 'f');
    for (;;) {
      auto t0 = sclock::now();
      auto dl = t0 + d;
      p.w.set_write_deadline(dl);
      std::string r;
      while ((r = outcome([&] { p.w.write(b.data(), b.size()); })) == "ok") {
      }
      ASSERT_EQ(r, "timeout");
      auto t1 = sclock::now();
      ASSERT_GE(t1, dl);
      auto actual = t1 - t0;
      if (actual > goro_test::timeout_upper_bound(d)) {
        ASSERT_TRUE(goro_test::next_timeout(actual, d));
        continue;
      }
      break;
    }
  });
}

// Go: TestVariousDeadlines (os, and the 1Proc / 4Proc variants): a writer
// copies endless bytes into the pipe while the reader reads under a
// deadline from 1 ns up; the reader must time out, then closes its end,
// which must end the writer (EPIPE).
TEST_P(GoOsTimeout, VariousDeadlines) {
  run([] {
    using ns = std::chrono::nanoseconds;
    for (ns timeout : {ns(1), ns(2), ns(5), ns(50), ns(100), ns(200), ns(500),
                       ns(750), ns(1000), ns(5000), ns(25000), ns(250000),
                       ns(500000), ns(1000000), ns(5000000)}) {
      for (int run = 0; run < 3; run++) {
        auto p = std::make_shared<os_pipe>();
        auto writer = goro::make_chan<std::string>(1);
        goro::go([p, writer] {
          std::vector<char> b(4096, 'a');
          writer.send(outcome([&] {
            for (;;) p->w.write(b.data(), b.size());
          }));
        });
        p->r.set_deadline(sclock::now() + timeout);
        std::string r = outcome([&] {
          char b[4096];
          while (p->r.read(b, sizeof b) != 0) {
          }
        });
        p->r.close();
        ASSERT_EQ(r, "timeout") << timeout.count() << " ns";
        std::optional<std::string> w;
        ASSERT_EQ(goro::select(goro::case_recv(writer, w),
                               goro::case_recv(goro::after(5s))),
                  0)
            << "the writer did not end after the reader closed";
        EXPECT_NE(w->find("error"), std::string::npos) << *w;
      }
    }
  });
}

// Go: TestReadWriteDeadlineRace (os): deadlines reset every 2 us by a
// ticker while a reader and a writer work the pipe; nothing hangs.
TEST_P(GoOsTimeout, ReadWriteDeadlineRace) {
  run([] {
    os_pipe p;
    const int n = goro_test::scaled(1000, 100);
    goro::wait_group wg;
    wg.add(3);
    goro::go([&] {
      goro::ticker tic(2us);
      for (int i = 0; i < n; i++) {
        p.r.set_read_deadline(sclock::now() + 2us);
        p.w.set_write_deadline(sclock::now() + 2us);
        tic.c.recv();
      }
      wg.done();
    });
    goro::go([&] {
      char b[1];
      for (int i = 0; i < n; i++) try {
          p.r.read(b, 1);
        } catch (const std::system_error&) {
        }
      wg.done();
    });
    goro::go([&] {
      char b[1] = {};
      for (int i = 0; i < n; i++) try {
          p.w.write(b, 1);
        } catch (const std::system_error&) {
        }
      wg.done();
    });
    wg.wait();
  });
}

// Go: TestRacyRead. Ten goroutines read one pipe under a 1 ms deadline
// that each of them pushes forward after a timeout, while a writer keeps
// it full. Every error must be a timeout.
TEST_P(GoOsTimeout, RacyRead) {
  run([] {
    os_pipe p;
    std::atomic<bool> stop{false};
    goro::wait_group writer;
    writer.add(1);
    goro::go([&] {
      std::vector<char> b(4096, 'x');
      p.w.set_write_deadline(sclock::now() + 10ms);
      while (!stop) try {
          p.w.write(b.data(), b.size());
        } catch (const goro::deadline_exceeded&) {
          p.w.set_write_deadline(sclock::now() + 10ms);
        }
      writer.done();
    });
    p.r.set_read_deadline(sclock::now() + 1ms);
    std::atomic<int> bad{0};
    goro::wait_group wg;
    for (int i = 0; i < 10; i++) {
      wg.add(1);
      goro::go([&] {
        char b[1024];
        for (int j = 0; j < 100; j++) {
          try {
            p.r.read(b, sizeof b);
          } catch (const goro::deadline_exceeded&) {
            p.r.set_read_deadline(sclock::now() + 1ms);
          } catch (const std::exception&) {
            bad++;
          }
        }
        wg.done();
      });
    }
    wg.wait();
    stop = true;
    writer.wait();  // within 10 ms: its writes have a deadline
    EXPECT_EQ(bad.load(), 0);
  });
}

// Go: TestRacyWrite: ten writers under a 1 ms write deadline, a reader
// draining the pipe.
TEST_P(GoOsTimeout, RacyWrite) {
  run([] {
    os_pipe p;
    std::atomic<bool> stop{false};
    goro::wait_group reader;
    reader.add(1);
    goro::go([&] {
      char b[4096];
      try {
        while (p.r.read(b, sizeof b) != 0) {
        }
      } catch (const std::system_error&) {
      }
      reader.done();
    });
    p.w.set_write_deadline(sclock::now() + 1ms);
    std::atomic<int> bad{0};
    goro::wait_group wg;
    for (int i = 0; i < 10; i++) {
      wg.add(1);
      goro::go([&] {
        char b[1024] = {};
        for (int j = 0; j < 100; j++) {
          try {
            p.w.write(b, sizeof b);
          } catch (const goro::deadline_exceeded&) {
            p.w.set_write_deadline(sclock::now() + 1ms);
          } catch (const std::exception&) {
            bad++;
          }
        }
        wg.done();
      });
    }
    wg.wait();
    stop = true;
    p.w.close();  // the reader sees end of stream
    reader.wait();
    EXPECT_EQ(bad.load(), 0);
  });
}

// Go: TestTTYClose. A goroutine blocked reading a terminal wakes when the
// terminal is closed (a pseudo-terminal here, as no /dev/tty is assumed).
TEST_P(GoOsTimeout, TTYClose) {
  run([] {
    int m = ::posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
    if (m < 0 || ::grantpt(m) != 0 || ::unlockpt(m) != 0) {
      if (m >= 0) ::close(m);
      GTEST_SKIP() << "no pseudo-terminal here";
    }
    int s = ::open(::ptsname(m), O_RDWR | O_NOCTTY | O_CLOEXEC);
    ASSERT_GE(s, 0);
    goro::fd master(m);
    goro::fd slave(s);
    auto res = goro::make_chan<std::string>(1);
    goro::go([&slave, res] {
      char b[1];
      res.send(outcome([&] { slave.read(b, 1); }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(10ms)));
    EXPECT_EQ(i, 1) << "read on an idle terminal returned: " << r.value_or("");
    slave.close();
    std::optional<std::string> got;
    ASSERT_EQ(goro::select(goro::case_recv(res, got),
                           goro::case_recv(goro::after(5s))),
              0)
        << "closing the terminal did not wake its reader";
    if (i == 1) {
      EXPECT_EQ(*got, "closed");
    }
  });
}
