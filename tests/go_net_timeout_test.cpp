// Ports of Go's net/timeout_test.go: deadlines on dial, accept, read,
// write, recv_from and send_to, at GOMAXPROCS 1, 2 and 4, loopback only.
// Go's tolerances: a deadline fires no earlier than it is set for and
// within timeoutUpperBound (d * 11 / 10), retrying with a longer one on a
// slow machine (Go's nextTimeout), never more than 4 s.
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "go_port_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;
using goro::net::packet_conn;
using sclock = std::chrono::steady_clock;
using goro_test::go_port;

namespace {

class GoNetTimeout : public go_port {};
GO_PORT_SUITE(GoNetTimeout);

// What an operation ended with: "ok", "timeout", "closed" or the error.
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

// A connected TCP pair on loopback (the handshake completes in the
// listener's backlog, so dial then accept needs no second goroutine).
struct tcp_pair {
  listener ln = goro::net::listen("tcp", "127.0.0.1:0");
  conn client = goro::net::dial("tcp", ln.addr().str());
  conn server = ln.accept();
};

// A listener (plain sockets) whose accept queue is full, so a dial to it
// stays in SYN_SENT: Go's TestDialTimeout blocks the dial with a test hook.
struct full_backlog {
  int lfd = -1;
  std::string where;
  std::vector<int> fillers;
  bool ok = false;
  full_backlog() {
    lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof sa;
    if (lfd < 0 || ::bind(lfd, reinterpret_cast<sockaddr*>(&sa), len) != 0 ||
        ::listen(lfd, 0) != 0 ||
        ::getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      return;
    where = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    for (int i = 0; i < 16; i++) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c < 0) return;
      int rc = ::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      pollfd p{c, POLLOUT, 0};
      sockaddr_storage peer{};
      socklen_t plen = sizeof peer;
      if (rc == 0 ||
          (errno == EINPROGRESS && ::poll(&p, 1, 200) == 1 &&
           ::getpeername(c, reinterpret_cast<sockaddr*>(&peer), &plen) == 0)) {
        fillers.push_back(c);
        continue;
      }
      ::close(c);
      ok = true;
      return;
    }
  }
  ~full_backlog() {
    for (int c : fillers) ::close(c);
    if (lfd >= 0) ::close(lfd);
  }
};

}  // namespace

// Go: TestDialTimeout. A timeout that has already passed (negative, or
// math.MinInt64) fails at once; a dial that cannot complete fails with a
// timeout after about the timeout; zero is no timeout.
TEST_P(GoNetTimeout, DialTimeout) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    const std::string where = ln.addr().str();
    for (auto d : {-5s, std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::nanoseconds::min())}) {
      auto t0 = sclock::now();
      EXPECT_EQ(outcome([&] { goro::net::dial_timeout("tcp", where, d); }),
                "timeout");
      EXPECT_LT(sclock::now() - t0, 1s);
    }
    EXPECT_EQ(outcome([&] { goro::net::dial_timeout("tcp", where, 0s); }),
              "ok");
    EXPECT_EQ(outcome([&] { goro::net::dial_timeout("tcp", where, 50ms); }),
              "ok");
    full_backlog fb;
    if (!fb.ok) return;  // could not fill the queue here: nothing to time
    auto t0 = sclock::now();
    EXPECT_EQ(outcome([&] { goro::net::dial_timeout("tcp", fb.where, 50ms); }),
              "timeout");
    auto took = sclock::now() - t0;
    EXPECT_GE(took, 50ms);
    EXPECT_LT(took, goro_test::scaled(1s, 5s));
  });
}

// Go: TestDialTimeoutMaxDuration. The largest timeout is no timeout at all
// for practical purposes: the dial to a live listener succeeds.
TEST_P(GoNetTimeout, DialTimeoutMaxDuration) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    EXPECT_EQ(outcome([&] {
                goro::net::dial_timeout("tcp", ln.addr().str(),
                                        std::chrono::nanoseconds::max());
              }),
              "ok");
  });
}

// Go: TestAcceptTimeout. A deadline in the past fails every accept, even
// with a connection pending; a future one lets pending connections through
// and then fails.
TEST_P(GoNetTimeout, AcceptTimeout) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    {
      conn pending = goro::net::dial("tcp", ln.addr().str());
      ln.set_deadline(sclock::now() - 5s);
      EXPECT_EQ(outcome([&] { ln.accept(); }), "timeout");
      EXPECT_EQ(outcome([&] { ln.accept(); }), "timeout");
    }
    // The past-deadline connection is still queued; drain it first.
    ln.set_deadline(sclock::now() + 50ms);
    conn c = goro::net::dial("tcp", ln.addr().str());
    EXPECT_EQ(outcome([&] { ln.accept(); }), "ok");
    std::string second;
    for (int i = 0; i < 3 && (second = outcome([&] { ln.accept(); })) == "ok";
         i++) {
    }
    EXPECT_EQ(second, "timeout");
  });
}

// Go: TestAcceptTimeoutMustReturn. Clearing the deadline then setting one
// 10 ms ahead must end a blocked accept with a timeout (within 1 s).
TEST_P(GoNetTimeout, AcceptTimeoutMustReturn) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto res = goro::make_chan<std::string>(1);
    goro::go([&ln, res] {
      ln.set_deadline({});
      ln.set_deadline(sclock::now() + 10ms);
      res.send(outcome([&] { ln.accept(); }));
    });
    std::optional<std::string> r;
    int i =
        goro::select(goro::case_recv(res, r),
                     goro::case_recv(goro::after(goro_test::scaled(1s, 5s))));
    ASSERT_EQ(i, 0) << "accept did not return within the bound";
    EXPECT_EQ(*r, "timeout");
  });
}

// Go: TestAcceptTimeoutMustNotReturn. A past deadline that is then cleared
// leaves accept blocked; closing the listener wakes it.
TEST_P(GoNetTimeout, AcceptTimeoutMustNotReturn) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto res = goro::make_chan<std::string>(1);
    goro::go([&ln, res] {
      ln.set_deadline(sclock::now() - 5s);
      ln.set_deadline({});
      res.send(outcome([&] { ln.accept(); }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(100ms)));
    EXPECT_EQ(i, 1) << "accept returned early: " << r.value_or("");
    ln.close();
    if (i == 1) {
      EXPECT_EQ(*res.recv(), "closed");
    }
  });
}

// Go: TestReadTimeout. With a past deadline reads fail even though data is
// waiting; with a future one the waiting data is read, then the next read
// times out.
TEST_P(GoNetTimeout, ReadTimeout) {
  run([] {
    tcp_pair p;
    p.server.write("READ TIMEOUT TEST");
    char buf[64];
    p.client.set_read_deadline(sclock::now() - 5s);
    EXPECT_EQ(outcome([&] { p.client.read(buf, sizeof buf); }), "timeout");
    EXPECT_EQ(outcome([&] { p.client.read(buf, sizeof buf); }), "timeout");
    p.client.set_read_deadline(sclock::now() + 50ms);
    std::size_t n = 0;
    EXPECT_EQ(outcome([&] { n = p.client.read(buf, sizeof buf); }), "ok");
    EXPECT_EQ(std::string(buf, n), "READ TIMEOUT TEST");
    EXPECT_EQ(outcome([&] { p.client.read(buf, sizeof buf); }), "timeout");
  });
}

// Go: TestReadTimeoutMustNotReturn. Past deadlines on both sides, then the
// read deadline cleared: the read blocks until the connection is closed.
TEST_P(GoNetTimeout, ReadTimeoutMustNotReturn) {
  run([] {
    tcp_pair p;
    auto res = goro::make_chan<std::string>(1);
    goro::go([&p, res] {
      p.client.set_deadline(sclock::now() - 5s);
      p.client.set_write_deadline(sclock::now() - 5s);
      p.client.set_read_deadline({});
      char b[1];
      res.send(outcome([&] { p.client.read(b, 1); }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(100ms)));
    EXPECT_EQ(i, 1) << "read returned early: " << r.value_or("");
    p.client.close();
    if (i == 1) {
      EXPECT_EQ(*res.recv(), "closed");
    }
  });
}

// Go: TestReadFromTimeout (UDP): as ReadTimeout for recv_from.
TEST_P(GoNetTimeout, ReadFromTimeout) {
  run([] {
    auto c1 = goro::net::listen_packet("udp", "127.0.0.1:0");
    auto c2 = goro::net::listen_packet("udp", "127.0.0.1:0");
    const std::string msg = "READFROM TIMEOUT TEST";
    c2.send_to(msg.data(), msg.size(), c1.local_addr());
    char buf[64];
    goro::net::addr from;
    c1.set_read_deadline(sclock::now() - 5s);
    EXPECT_EQ(outcome([&] { c1.recv_from(buf, sizeof buf, &from); }),
              "timeout");
    EXPECT_EQ(outcome([&] { c1.recv_from(buf, sizeof buf, &from); }),
              "timeout");
    c1.set_read_deadline(sclock::now() + 50ms);
    std::size_t n = 0;
    EXPECT_EQ(outcome([&] { n = c1.recv_from(buf, sizeof buf, &from); }), "ok");
    EXPECT_EQ(std::string(buf, n), msg);
    EXPECT_EQ(from, c2.local_addr());
    EXPECT_EQ(outcome([&] { c1.recv_from(buf, sizeof buf, &from); }),
              "timeout");
  });
}

// Go: TestWriteTimeout. A past write deadline fails writes at once even on
// an empty buffer; a 10 ms one fails once the peer stops reading and the
// buffers fill.
TEST_P(GoNetTimeout, WriteTimeout) {
  run([] {
    tcp_pair p;
    p.client.set_write_deadline(sclock::now() - 5s);
    EXPECT_EQ(outcome([&] { p.client.write("WRITE TIMEOUT TEST"); }),
              "timeout");
    EXPECT_EQ(outcome([&] { p.client.write("WRITE TIMEOUT TEST"); }),
              "timeout");
    tcp_pair q;
    q.client.set_write_deadline(sclock::now() + 10ms);
    std::vector<char> chunk(64 * 1024, 'w');
    std::string r;
    for (int i = 0; i < 100000 && (r = outcome([&] {
                                     q.client.write(chunk.data(), chunk.size());
                                   })) == "ok";
         i++) {
    }
    EXPECT_EQ(r, "timeout");
    EXPECT_EQ(outcome([&] { q.client.write("x"); }), "timeout");
  });
}

// Go: TestWriteTimeoutMustNotReturn. Past deadlines, then the write
// deadline cleared: a write into a full buffer blocks until close.
TEST_P(GoNetTimeout, WriteTimeoutMustNotReturn) {
  run([] {
    tcp_pair p;
    auto res = goro::make_chan<std::string>(1);
    goro::go([&p, res] {
      p.client.set_deadline(sclock::now() - 5s);
      p.client.set_read_deadline(sclock::now() - 5s);
      p.client.set_write_deadline({});
      std::vector<char> chunk(64 * 1024, 'w');
      res.send(outcome([&] {
        for (;;) p.client.write(chunk.data(), chunk.size());
      }));
    });
    std::optional<std::string> r;
    int i = goro::select(goro::case_recv(res, r),
                         goro::case_recv(goro::after(100ms)));
    EXPECT_EQ(i, 1) << "write returned early: " << r.value_or("");
    p.client.close();
    if (i == 1) {
      EXPECT_EQ(*res.recv(), "closed");
    }
  });
}

// Go: TestWriteToTimeout (UDP). A past deadline fails send_to at once; a
// 10 ms one may let some datagrams out, then fails them all.
TEST_P(GoNetTimeout, WriteToTimeout) {
  run([] {
    auto c1 = goro::net::listen_packet("udp", "127.0.0.1:0");
    const std::string msg = "WRITETO TIMEOUT TEST";
    for (auto timeout : {-5000ms, 10ms}) {
      auto c2 = goro::net::listen_packet("udp", "127.0.0.1:0");
      c2.set_write_deadline(sclock::now() + timeout);
      int exceeded = 0;
      for (int j = 0; exceeded < 2 && j < 10000; j++) {
        std::string r = outcome(
            [&] { c2.send_to(msg.data(), msg.size(), c1.local_addr()); });
        if (r == "ok" && timeout >= 0ms && exceeded == 0) {
          goro::sleep(timeout / 3);  // Go's pacing until the deadline passes
          continue;
        }
        EXPECT_EQ(r, "timeout") << "timeout " << timeout.count() << " ms";
        if (r != "timeout") break;
        exceeded++;
      }
      EXPECT_EQ(exceeded, 2);
    }
  });
}

// Go: TestReadTimeoutFluctuation. A read deadline fires no earlier than
// set and within timeoutUpperBound, retrying with longer ones when slow.
TEST_P(GoNetTimeout, ReadTimeoutFluctuation) {
  run([] {
    tcp_pair p;
    std::chrono::nanoseconds d = 1ms;
    char b[256];
    for (;;) {
      auto t0 = sclock::now();
      auto dl = t0 + d;
      p.client.set_read_deadline(dl);
      ASSERT_EQ(outcome([&] { p.client.read(b, sizeof b); }), "timeout");
      auto t1 = sclock::now();
      ASSERT_GE(t1, dl) << "read returned before its deadline";
      auto actual = t1 - t0;
      if (actual > goro_test::timeout_upper_bound(d)) {
        ASSERT_TRUE(goro_test::next_timeout(actual, d))
            << "read took " << actual.count() << " ns";
        continue;
      }
      break;
    }
  });
}

// Go: TestReadFromTimeoutFluctuation (UDP).
TEST_P(GoNetTimeout, ReadFromTimeoutFluctuation) {
  run([] {
    auto c1 = goro::net::listen_packet("udp", "127.0.0.1:0");
    std::chrono::nanoseconds d = 1ms;
    char b[256];
    for (;;) {
      auto t0 = sclock::now();
      auto dl = t0 + d;
      c1.set_read_deadline(dl);
      ASSERT_EQ(outcome([&] { c1.recv_from(b, sizeof b); }), "timeout");
      auto t1 = sclock::now();
      ASSERT_GE(t1, dl) << "recv_from returned before its deadline";
      auto actual = t1 - t0;
      if (actual > goro_test::timeout_upper_bound(d)) {
        ASSERT_TRUE(goro_test::next_timeout(actual, d));
        continue;
      }
      break;
    }
  });
}

// Go: TestWriteTimeoutFluctuation. The peer never reads; the write
// deadline fires no earlier than set (once the buffers are full) and the
// whole thing ends within the bound.
TEST_P(GoNetTimeout, WriteTimeoutFluctuation) {
  run([] {
    tcp_pair p;
    std::chrono::nanoseconds d = 1ms;
    std::vector<char> chunk(64 * 1024, 'f');
    for (;;) {
      auto t0 = sclock::now();
      auto dl = t0 + d;
      p.client.set_write_deadline(dl);
      std::string r;
      while ((r = outcome([&] {
                p.client.write(chunk.data(), chunk.size());
              })) == "ok") {
      }
      ASSERT_EQ(r, "timeout");
      auto t1 = sclock::now();
      ASSERT_GE(t1, dl) << "write failed before its deadline";
      auto actual = t1 - t0;
      if (actual > goro_test::timeout_upper_bound(d)) {
        ASSERT_TRUE(goro_test::next_timeout(actual, d));
        continue;
      }
      break;
    }
  });
}

// Go: TestVariousDeadlines (and its 1Proc / 4Proc variants, which the
// GOMAXPROCS parameter covers): deadlines from 1 ns up, on a connection
// whose server only waits for the client to close; each read must end with
// a timeout.
TEST_P(GoNetTimeout, VariousDeadlines) {
  run([] {
    auto ln = goro::net::listen("tcp", "127.0.0.1:0");
    goro::wait_group server;
    server.add(1);
    goro::go([&] {
      for (;;) {
        conn c;
        try {
          c = ln.accept();
        } catch (const std::system_error&) {
          break;
        }
        goro::go([c = std::move(c)]() mutable {
          char b[1];
          try {
            c.read(b, 1);  // until the client closes
          } catch (const std::system_error&) {
          }
        });
      }
      server.done();
    });
    using ns = std::chrono::nanoseconds;
    for (ns timeout : {ns(1), ns(2), ns(5), ns(50), ns(100), ns(200), ns(500),
                       ns(750), ns(1000), ns(5000), ns(25000), ns(250000),
                       ns(500000), ns(1000000), ns(5000000), ns(100000000)}) {
      for (int run = 0; run < 3; run++) {
        conn c = goro::net::dial("tcp", ln.addr().str());
        c.set_deadline(sclock::now() + timeout);
        std::string r = outcome([&] {
          char b[4096];
          while (c.read(b, sizeof b) != 0) {
          }
        });
        ASSERT_EQ(r, "timeout") << timeout.count() << " ns run " << run;
      }
    }
    ln.close();
    server.wait();
  });
}

// Go: TestReadWriteProlongedTimeout. Deadlines pushed forward again and
// again by two goroutines while the peer closes: reads and writes end with
// end of stream or an error, never hang.
TEST_P(GoNetTimeout, ReadWriteProlongedTimeout) {
  // At GOMAXPROCS 1 the client runs only once the server's writer parks on
  // a full socket buffer (I/O loops are not preempted: see
  // go_runtime_proc_test's PreemptionDuringIO); under TSan, a million
  // 1-byte writes take ~25 s.
  if (GORO_TEST_TSAN && GetParam() == 1)
    GTEST_SKIP() << "25 s under TSan at GOMAXPROCS 1 (FINDING: I/O loops "
                    "are not preempted)";
  run([] {
    tcp_pair p;
    goro::wait_group wg;
    wg.add(2);
    goro::go([&] {
      char b[1];
      try {
        for (;;) {
          p.server.set_read_deadline(sclock::now() + 1h);
          if (p.server.read(b, 1) == 0) break;
        }
      } catch (const std::system_error&) {
      }
      wg.done();
    });
    goro::go([&] {
      try {
        for (;;) {
          p.server.set_write_deadline(sclock::now() + 1h);
          p.server.write("x");
        }
      } catch (const std::system_error&) {
      }
      wg.done();
    });
    char b[1] = {};
    for (int i = 0; i < 1000; i++) {
      p.client.write(b, 1);
      p.client.read(b, 1);
    }
    p.client.close();
    wg.wait();
  });
}

// Go: TestReadWriteDeadlineRace. Deadlines 2 us ahead, reset by a ticker
// every 2 us, while a reader and a writer run: nothing may crash or hang;
// every operation ends (timeouts expected).
TEST_P(GoNetTimeout, ReadWriteDeadlineRace) {
  run([] {
    tcp_pair p;
    const int n = goro_test::scaled(1000, 100);
    goro::wait_group wg;
    wg.add(3);
    goro::go([&] {
      goro::ticker tic(2us);
      for (int i = 0; i < n; i++) {
        p.client.set_read_deadline(sclock::now() + 2us);
        p.client.set_write_deadline(sclock::now() + 2us);
        tic.c.recv();
      }
      wg.done();
    });
    goro::go([&] {
      char b[1];
      for (int i = 0; i < n; i++) try {
          p.client.read(b, 1);
        } catch (const std::system_error&) {
        }
      wg.done();
    });
    goro::go([&] {
      char b[1] = {};
      for (int i = 0; i < n; i++) try {
          p.client.write(b, 1);
        } catch (const std::system_error&) {
        }
      wg.done();
    });
    wg.wait();
  });
}

// Go: TestConcurrentSetDeadline. Many goroutines setting far deadlines on
// the same connections at once (a race check for the deadline state).
TEST_P(GoNetTimeout, ConcurrentSetDeadline) {
  run([] {
    tcp_pair a, b;
    conn* cs[2] = {&a.client, &b.client};
    const int workers = 8, rounds = goro_test::scaled(1000, 100);
    goro::wait_group wg;
    for (int i = 0; i < workers; i++) {
      wg.add(1);
      goro::go([&, i] {
        auto now = sclock::now();
        for (int j = 0; j < rounds; j++)
          for (int k = 0; k < 2; k++) {
            cs[k]->set_read_deadline(now + 2h +
                                     std::chrono::seconds(i * j * k));
            cs[k]->set_write_deadline(now + 1h +
                                      std::chrono::seconds(i * j * k));
          }
        wg.done();
      });
    }
    wg.wait();
    // The deadlines are far: a read does not time out now.
    a.server.write("ok");
    char buf[2];
    EXPECT_EQ(a.client.read_full(buf, 2), 2u);
  });
}
