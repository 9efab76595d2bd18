// goro::net's dialling and error reporting as Go users expect them (Go's
// net/dial_test.go, net_test.go, udpsock_test.go, unixsock_test.go,
// rewritten): timeouts that saturate instead of overflowing, the dialer
// (local address, keep-alive, cancellation through a context), errors that
// name the operation and the addresses (op_error), counts of the bytes
// transferred before an error, send_to on a connected socket, EPIPE
// instead of SIGPIPE, and the "unixpacket" network.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <thread>
#include <vector>

#include "net_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;

namespace {

[[maybe_unused]] int getopt_int(int s, int level, int opt) {
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt(s, level, opt, &v, &len) != 0) return -1;
  return v;
}

}  // namespace

// ---- saturating timeouts (Go's TestDialTimeoutMaxDuration) ----

TEST(DialTimeout, MaxDurationConnects) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    for (auto t :
         {std::chrono::nanoseconds::max(),
          std::chrono::nanoseconds(std::chrono::hours(24 * 365 * 200))}) {
      conn c;
      EXPECT_NO_THROW(c = goro::net::dial_timeout("tcp", ln.addr().str(), t));
      EXPECT_TRUE(static_cast<bool>(c));
      conn s = ln.accept();
    }
  });
}

// Every public wait that adds a duration to now saturates: a huge one is
// "never", not a sum that wrapped into the past. Timers fire in deadline
// order, so one that wrapped would fire before a 1 ms one does.
TEST(Saturate, HugeTimersSleepsAndContextsNeverFireEarly) {
  goro::run([] {
    const auto max = std::chrono::nanoseconds::max();
    std::atomic<bool> woke{false};
    goro::go([&] {
      goro::sleep(max);  // never returns; the test ends with it asleep
      woke = true;
    });
    auto never = goro::after(max);
    goro::timer t(max);
    auto [ctx, cancel] = goro::with_timeout(goro::background(), max);
    goro::ticker tk(max);
    goro::after(1ms).recv();
    goro::gosched();
    EXPECT_FALSE(woke.load());
    EXPECT_FALSE(never.try_recv().has_value());
    EXPECT_FALSE(t.c.try_recv().has_value());
    EXPECT_FALSE(tk.c.try_recv().has_value());
    EXPECT_FALSE(ctx.err());
    ASSERT_TRUE(ctx.deadline().has_value());
    EXPECT_GT(*ctx.deadline(), goro_test::clock::now() + 24h * 365 * 100);
    EXPECT_TRUE(t.stop());  // still pending
    cancel();
    EXPECT_EQ(ctx.err(), goro::context_errc::canceled);

    // A wait bounded by "forever" still ends when its event comes.
    goro::semaphore sem(1);
    ASSERT_TRUE(sem.try_acquire());
    goro::go([&] { sem.release(); });
    EXPECT_TRUE(sem.try_acquire_for(max));
  });
}

TEST(Saturate, DialerDeadlineAndTimeoutAtTheirMaxima) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::net::dialer d;
    d.timeout = std::chrono::nanoseconds::max();
    d.deadline = goro::net::time_point::max();
    auto [ctx, cancel] =
        goro::with_timeout(goro::background(), std::chrono::nanoseconds::max());
    conn c = d.dial_context(ctx, "tcp", ln.addr().str());
    cancel();  // the connection outlives its dial's context
    conn s = ln.accept();
    c.write("x", 1);
    char b;
    EXPECT_EQ(s.read(&b, 1), 1u);
  });
}

namespace {

// A loopback TCP listener (plain sockets) whose accept queue is full: the
// kernel drops further SYNs, so a dial to it stays in SYN_SENT until it is
// aborted. ok is false if the queue could not be filled.
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
        getsockname(lfd, reinterpret_cast<sockaddr*>(&sa), &len) != 0)
      return;
    where = "127.0.0.1:" + std::to_string(ntohs(sa.sin_port));
    for (int i = 0; i < 16; i++) {
      int c = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
      if (c < 0) return;
      int rc = ::connect(c, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
      pollfd p{c, POLLOUT, 0};
      if (rc == 0 || (errno == EINPROGRESS && ::poll(&p, 1, 200) == 1 &&
                      getopt_int(c, SOL_SOCKET, SO_ERROR) == 0)) {
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

// A port nobody listens on (bound, then closed).
std::string closed_port() {
  auto ln = goro::net::listen("127.0.0.1:0");
  std::string where = ln.addr().str();
  ln.close();
  return where;
}

}  // namespace

// ---- the dialer (Go's TestDialerLocalAddr, TestDialerKeepAlive,
// TestDialCancel) ----

TEST(Dialer, LocalAddr) {
  goro::run([] {
    auto ln = goro::net::listen("tcp4", "127.0.0.1:0");
    goro::net::dialer d;
    d.local_addr = goro::net::resolve("tcp", "127.0.0.1:0");
    conn c = d.dial("tcp", ln.addr().str());
    conn s = ln.accept();
    EXPECT_EQ(c.local_addr().host(), "127.0.0.1");
    EXPECT_NE(c.local_addr().port(), 0);
    EXPECT_TRUE(c.local_addr() == s.remote_addr());

    // A fixed local port: the one a listener just gave back.
    std::string port_addr = closed_port();
    d.local_addr = goro::net::resolve("tcp", port_addr);
    conn c2 = d.dial("tcp", ln.addr().str());
    conn s2 = ln.accept();
    EXPECT_EQ(s2.remote_addr().str(), port_addr);

    // A local address of another family cannot be bound: Go fails the
    // dial, naming it.
    d.local_addr = goro::net::resolve("tcp6", "[::1]:0");
    try {
      conn bad = d.dial("tcp4", ln.addr().str());
      ADD_FAILURE() << "dialled from an IPv6 local address to IPv4";
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(e.op(), "dial");
      EXPECT_EQ(e.net(), "tcp4");
      EXPECT_EQ(e.source().str(), "[::1]:0");
      EXPECT_EQ(e.address().str(), ln.addr().str());
      EXPECT_NE(std::string(e.what()).find(" bind: "), std::string::npos)
          << e.what();
    }
  });
}

TEST(Dialer, KeepAliveDefaultPeriodAndOff) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    auto ka = [](conn& c) {
      int s = c.fd().get();
      return std::to_string(getopt_int(s, SOL_SOCKET, SO_KEEPALIVE)) + "/" +
             std::to_string(getopt_int(s, IPPROTO_TCP, TCP_KEEPIDLE)) + "/" +
             std::to_string(getopt_int(s, IPPROTO_TCP, TCP_KEEPINTVL));
    };
    conn c = goro::net::dial(ln.addr().str());  // Go's default: 15 s
    EXPECT_EQ(ka(c), "1/15/15");
    goro::net::dialer d;
    d.keep_alive = 2500ms;  // rounded up to whole seconds
    conn c2 = d.dial("tcp", ln.addr().str());
    EXPECT_EQ(ka(c2), "1/3/3");
    d.keep_alive = -1ns;
    conn c3 = d.dial("tcp", ln.addr().str());
    EXPECT_EQ(getopt_int(c3.fd().get(), SOL_SOCKET, SO_KEEPALIVE), 0);
    c3.set_keep_alive(true);
    c3.set_keep_alive_period(1min);
    EXPECT_EQ(ka(c3), "1/60/60");
  });
}

TEST(Dialer, ContextCancelAbortsAConnectInProgress) {
  goro::run([] {
    goro_test::min_procs procs(2);
    full_backlog fb;
    if (!fb.ok) GTEST_SKIP() << "could not fill a loopback accept queue";
    auto [ctx, cancel] = goro::with_cancel(goro::background());
    std::atomic<std::uint64_t> id{0};
    auto result = goro::make_chan<std::string>(1);
    goro::go([&, ctx = ctx] {
      id = goro::goroutine_id();
      try {
        conn c = goro::net::dialer{}.dial_context(ctx, "tcp", fb.where);
        result.send("connected");
      } catch (const goro::net::op_error& e) {
        result.send(
            std::string(e.what()) + "|" +
            (e.code() == goro::context_errc::canceled ? "canceled" : "other"));
      }
    });
    ASSERT_TRUE(goro_test::eventually([&] { return id.load() != 0; }));
    ASSERT_TRUE(goro_test::eventually_in_io_wait(id.load()));
    // The SYN is dropped for as long as the queue stays full: only the
    // cancellation can end this dial (else the watchdog fails the test).
    cancel();
    std::string r = result.recv().value();
    EXPECT_EQ(r, "dial tcp " + fb.where + ": operation was canceled|canceled");

    // Done before the dial: it fails at once, without connecting.
    EXPECT_THROW(goro::net::dialer{}.dial_context(ctx, "tcp", fb.where),
                 goro::net::op_error);
    // A context deadline bounds the dial: a timeout, as Go's.
    auto [tctx, tcancel] = goro::with_timeout(goro::background(), 30ms);
    try {
      conn c = goro::net::dialer{}.dial_context(tctx, "tcp", fb.where);
      ADD_FAILURE() << "connected to a full accept queue";
    } catch (const goro::deadline_exceeded& e) {
      auto* op = dynamic_cast<const goro::net::op_error*>(&e);
      ASSERT_NE(op, nullptr);
      EXPECT_TRUE(op->timeout());
      EXPECT_EQ(std::string(e.what()),
                "dial tcp " + fb.where + ": i/o timeout");
    }
    tcancel();
  });
}

// ---- op_error: Go's messages, the old catch sites still work ----

TEST(OpError, NamesTheOperationNetworkAndAddresses) {
  goro::run([] {
    std::string nobody = closed_port();
    try {
      goro::net::dial("tcp", nobody);
      ADD_FAILURE() << "connected to a closed port";
    } catch (const std::system_error& e) {
      EXPECT_EQ(e.code(),
                std::error_code(ECONNREFUSED, std::system_category()));
      EXPECT_EQ(std::string(e.what()),
                "dial tcp " + nobody + ": connect: connection refused");
    }

    auto ln = goro::net::listen("127.0.0.1:0");
    try {
      goro::net::listen("tcp", ln.addr().str());
      ADD_FAILURE() << "listened twice on one port";
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(e.code(), std::error_code(EADDRINUSE, std::system_category()));
      EXPECT_EQ(std::string(e.what()), "listen tcp " + ln.addr().str() +
                                           ": bind: address already in use");
    }

    ln.set_deadline(goro_test::clock::now() - 1s);
    try {
      ln.accept();
      ADD_FAILURE() << "accepted past the deadline";
    } catch (const goro::deadline_exceeded& e) {
      EXPECT_EQ(std::string(e.what()),
                "accept tcp " + ln.addr().str() + ": i/o timeout");
    }
    ln.set_deadline({});

    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    const std::string pair =
        c.local_addr().str() + "->" + c.remote_addr().str();
    c.set_read_deadline(goro_test::clock::now() - 1s);
    char b[4];
    try {
      c.read(b, sizeof b);
      ADD_FAILURE() << "read past the deadline";
    } catch (const goro::net::op_error& e) {
      EXPECT_TRUE(e.timeout());
      EXPECT_EQ(e.code(), std::errc::timed_out);
      EXPECT_EQ(std::string(e.what()), "read tcp " + pair + ": i/o timeout");
      EXPECT_NE(dynamic_cast<const goro::deadline_exceeded*>(&e), nullptr);
    }
    // A reset: the errno, named (linger 0 makes close send RST).
    s.set_linger(0);
    s.close();
    c.set_read_deadline({});
    try {
      while (c.read(b, sizeof b) > 0) {
      }
      ADD_FAILURE() << "end of stream instead of a reset";
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(e.code(), std::error_code(ECONNRESET, std::system_category()));
      EXPECT_FALSE(e.timeout());
      EXPECT_EQ(std::string(e.what()),
                "read tcp " + pair + ": read: connection reset by peer");
    }
    c.close();
    EXPECT_THROW(c.write("x", 1), goro::closed_error);
    try {
      c.write("x", 1);
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(e.op(), "write");
      EXPECT_EQ(e.code(), std::errc::bad_file_descriptor);
      // Closed: the local address is gone, the peer's was kept.
      EXPECT_EQ(std::string(e.what()),
                "write tcp " + c.remote_addr().str() +
                    ": use of closed network connection");
    }
    const std::string where = ln.addr().str();
    ln.close();
    EXPECT_THROW(ln.accept(), goro::closed_error);
    try {
      ln.accept();
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(std::string(e.what()),
                "accept tcp " + where + ": use of closed network connection");
    }
  });
}

// ---- partial transfers (Go returns n with the error) ----

namespace {

// Reads everything until end of stream; returns the count.
std::size_t drain(conn& c) {
  std::vector<char> buf(1 << 16);
  std::size_t total = 0;
  while (std::size_t n = c.read(buf.data(), buf.size())) total += n;
  return total;
}

}  // namespace

TEST(Partial, WriteTimeoutReportsWhatWentOut) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    // Far more than the socket buffers hold, with nobody reading.
    std::vector<char> big(64 << 20, 'x');
    c.set_write_deadline(goro_test::clock::now() + 100ms);
    std::size_t sent = 0;
    try {
      c.write(big.data(), big.size());
      FAIL() << "64 MiB fitted in the socket buffers";
    } catch (const goro::deadline_exceeded& e) {
      sent = e.bytes_transferred();
      auto* op = dynamic_cast<const goro::net::op_error*>(&e);
      ASSERT_NE(op, nullptr);
      EXPECT_EQ(op->bytes_transferred(), sent);
      EXPECT_EQ(op->op(), "write");
    }
    EXPECT_GT(sent, 0u);
    EXPECT_LT(sent, big.size());
    // The peer gets exactly the reported bytes.
    c.close();
    EXPECT_EQ(drain(s), sent);

    // A deadline that passed before anything went out: zero.
    conn c2 = goro::net::dial(ln.addr().str());
    conn s2 = ln.accept();
    c2.set_write_deadline(goro_test::clock::now() - 1s);
    try {
      c2.write("abc", 3);
      FAIL() << "wrote past the deadline";
    } catch (const goro::io_error& e) {
      EXPECT_EQ(e.bytes_transferred(), 0u);
    }
  });
}

TEST(Partial, PipeWriteTimeoutAndReadFullCountWhatMoved) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    goro::fd r(p[0]), w(p[1]);
    std::vector<char> big(4 << 20, 'y');
    w.set_write_deadline(goro_test::clock::now() + 50ms);
    std::size_t sent = 0;
    try {
      w.write(big.data(), big.size());
      FAIL() << "4 MiB fitted in a pipe";
    } catch (const goro::deadline_exceeded& e) {
      sent = e.bytes_transferred();
    }
    EXPECT_GT(sent, 0u);
    w.close();
    std::vector<char> buf(big.size());
    EXPECT_EQ(r.read_full(buf.data(), buf.size()), sent);

    // read_full: 3 bytes arrive, then the deadline passes.
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    s.write("abc", 3);
    c.set_read_deadline(goro_test::clock::now() + 200ms);
    char b[10];
    try {
      c.read_full(b, sizeof b);
      FAIL() << "read_full returned without 10 bytes or end of stream";
    } catch (const goro::deadline_exceeded& e) {
      EXPECT_EQ(e.bytes_transferred(), 3u);
      EXPECT_EQ(std::string(b, 3), "abc");
    }
  });
}

TEST(WriteBuffers, EveryByteInOrderAcrossManyBatches) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    // 300 buffers (several sendmsg batches), some empty, some large.
    std::vector<std::string> parts;
    std::string expect;
    for (int i = 0; i < 300; i++) {
      std::size_t len = i % 7 == 0 ? 0 : (i % 5 == 0 ? 100000 : i);
      std::string part(len, char('a' + i % 26));
      expect += part;
      parts.push_back(std::move(part));
    }
    std::vector<iovec> iov;
    for (auto& p : parts) iov.push_back({p.data(), p.size()});
    auto got = goro::make_chan<std::string>(1);
    goro::go([&] {
      std::string all;
      std::vector<char> buf(1 << 16);
      while (std::size_t n = s.read(buf.data(), buf.size()))
        all.append(buf.data(), n);
      got.send(all);
    });
    EXPECT_EQ(c.write_buffers(iov), expect.size());
    c.close_write();
    std::string all = got.recv().value();
    EXPECT_EQ(all.size(), expect.size());
    EXPECT_TRUE(all == expect);
  });
}

TEST(WriteBuffers, TimeoutReportsWhatWentOut) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    conn c = goro::net::dial(ln.addr().str());
    conn s = ln.accept();
    std::vector<char> a(16 << 20, 'a'), b(16 << 20, 'b');
    iovec iov[2] = {{a.data(), a.size()}, {b.data(), b.size()}};
    c.set_write_deadline(goro_test::clock::now() + 100ms);
    std::size_t sent = 0;
    try {
      c.write_buffers(iov);
      FAIL() << "32 MiB fitted in the socket buffers";
    } catch (const goro::deadline_exceeded& e) {
      sent = e.bytes_transferred();
    }
    EXPECT_GT(sent, 0u);
    c.close();
    EXPECT_EQ(drain(s), sent);
  });
}

// ---- datagrams (Go's TestWriteToUDP, unixgram tests) ----

TEST(Packet, SendToOnAConnectedSocketIsAnError) {
  goro::run([] {
    auto srv = goro::net::listen_packet("udp", "127.0.0.1:0");
    auto cl = goro::net::dial_packet("udp", srv.local_addr().str());
    EXPECT_TRUE(cl.remote_addr() == srv.local_addr());
    EXPECT_EQ(srv.remote_addr().str(), "");  // Go: nil
    try {
      cl.send_to("x", 1, srv.local_addr());
      ADD_FAILURE() << "send_to on a connected socket";
    } catch (const goro::net::op_error& e) {
      EXPECT_EQ(e.code(), std::errc::already_connected);
      EXPECT_EQ(std::string(e.what()),
                "write udp " + cl.local_addr().str() + "->" +
                    srv.local_addr().str() +
                    ": use of WriteTo with pre-connected connection");
    }
    EXPECT_EQ(cl.write("ok", 2), 2u);  // write still works
    char b[8];
    goro::net::addr from;
    EXPECT_EQ(srv.recv_from(b, sizeof b, &from), 2u);  // only "ok" came
    EXPECT_EQ(std::string(b, 2), "ok");
    EXPECT_EQ(srv.send_to("re", 2, from), 2u);  // unconnected: fine
    EXPECT_EQ(cl.read(b, sizeof b), 2u);

    std::string name = "@goro-dial-test-" + std::to_string(::getpid());
    auto usrv = goro::net::listen_packet("unixgram", name);
    auto ucl = goro::net::dial_packet("unixgram", name);
    EXPECT_EQ(ucl.remote_addr().str(), name);
    EXPECT_THROW(ucl.send_to("x", 1, usrv.local_addr()), goro::net::op_error);
  });
}

// Go leaves a dialled unixgram socket unnamed (TestReadUnixgramWithUnnamed
// Socket: the receiver sees no sender address); a local address names it
// (TestUnixgramConnLocalAndRemoteNames).
TEST(Packet, DialledUnixgramIsUnnamedUnlessGivenALocalAddress) {
  goro::run([] {
    std::string name = "@goro-dial-unnamed-" + std::to_string(::getpid());
    auto srv = goro::net::listen_packet("unixgram", name);
    auto cl = goro::net::dial_packet("unixgram", name);
    EXPECT_EQ(cl.local_addr().str(), "");
    cl.write("hi", 2);
    char b[8];
    goro::net::addr from;
    EXPECT_EQ(srv.recv_from(b, sizeof b, &from), 2u);
    EXPECT_EQ(from.str(), "");

    goro::net::dialer d;
    d.local_addr = goro::net::resolve("unixgram", name + "-me");
    auto named = d.dial_packet("unixgram", name);
    EXPECT_EQ(named.local_addr().str(), name + "-me");
    named.write("hi", 2);
    EXPECT_EQ(srv.recv_from(b, sizeof b, &from), 2u);
    EXPECT_EQ(from.str(), name + "-me");
    srv.send_to("yo", 2, from);
    EXPECT_EQ(named.read(b, sizeof b), 2u);
  });
}

// ---- unixpacket: a connection that keeps message boundaries ----

TEST(UnixPacket, ListenDialKeepsMessageBoundaries) {
  goro::run([] {
    std::string name = "@goro-unixpacket-" + std::to_string(::getpid());
    auto ln = goro::net::listen("unixpacket", name);
    conn c = goro::net::dial("unixpacket", name);
    conn s = ln.accept();
    EXPECT_EQ(getopt_int(s.fd().get(), SOL_SOCKET, SO_TYPE), SOCK_SEQPACKET);
    c.write("one", 3);
    c.write("three", 5);
    char b[64];
    EXPECT_EQ(s.read(b, sizeof b), 3u);
    EXPECT_EQ(s.read(b, sizeof b), 5u);
    EXPECT_EQ(std::string(b, 5), "three");
    c.close();
    EXPECT_EQ(s.read(b, sizeof b), 0u);
    EXPECT_THROW(goro::net::listen_packet("unixpacket", name + "x"),
                 std::invalid_argument);
  });
}

// ---- EPIPE instead of SIGPIPE (Go's rule: except on fds 1 and 2) ----

TEST(Epipe, PipeWithoutReaderThrowsEpipe) {
  goro::run([] {
    int p[2];
    ASSERT_EQ(::pipe(p), 0);
    ::close(p[0]);
    goro::fd w(p[1]);
    try {
      w.write("x", 1);
      ADD_FAILURE() << "wrote to a pipe without a reader";
    } catch (const goro::io_error& e) {
      EXPECT_EQ(e.code(), std::error_code(EPIPE, std::system_category()));
      EXPECT_EQ(e.bytes_transferred(), 0u);
    }
  });
  // From a plain thread too.
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  ::close(p[0]);
  goro::fd w(p[1]);
  EXPECT_THROW(w.write("x", 1), std::system_error);
}

TEST(EpipeDeathTest, OtherSigpipesKeepTheirDefaultAction) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  // After a goro::fd write installed the handler, a SIGPIPE that is not
  // from such a write still kills (the default action), ...
  EXPECT_EXIT(
      {
        int p[2];
        if (::pipe(p) != 0) std::_Exit(3);
        ::close(p[0]);
        goro::fd w(p[1]);
        try {
          w.write("x", 1);
        } catch (const std::system_error&) {
        }
        ::raise(SIGPIPE);
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGPIPE), "");
  // ... and so does a goro::fd write to descriptor 1 (Go's rule).
  EXPECT_EXIT(
      {
        int p[2];
        if (::pipe(p) != 0) std::_Exit(3);
        ::close(p[0]);
        ::dup2(p[1], 1);
        ::close(p[1]);
        goro::fd out(1);
        try {
          out.write("x", 1);
        } catch (const std::system_error&) {
        }
        std::_Exit(0);
      },
      ::testing::KilledBySignal(SIGPIPE), "");
}
