// Ports of Go's net/tcpsock_test.go and tcpsock_unix_test.go: address
// resolution, listener names, concurrent accept, stress and big transfers,
// copying a pipe into a connection, a dial to one's own port, and connects
// that must not report success before the handshake; at GOMAXPROCS 1, 2
// and 4, loopback only.
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "go_alloc_counter.hpp"
#include "go_port_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;
using sclock = std::chrono::steady_clock;
using goro_test::go_port;

namespace {

class GoTcpSock : public go_port {};
GO_PORT_SUITE(GoTcpSock);

}  // namespace

// Go: TestResolveTCPAddr (the loopback and literal cases).
TEST_P(GoTcpSock, ResolveTCPAddr) {
  run([] {
    struct {
      const char *network, *in, *host;
      int port;
    } cases[] = {
        {"tcp", "127.0.0.1:0", "127.0.0.1", 0},
        {"tcp4", "127.0.0.1:65535", "127.0.0.1", 65535},
        {"tcp", "[::1]:0", "::1", 0},
        {"tcp6", "[::1]:80", "::1", 80},
        {"tcp", ":12345", "", 12345},
        {"tcp", "localhost:5", "127.0.0.1", 5},
    };
    for (auto& c : cases) {
      goro::net::addr a;
      try {
        a = goro::net::resolve(c.network, c.in);
      } catch (const std::exception& e) {
        ADD_FAILURE() << c.network << " " << c.in << ": " << e.what();
        continue;
      }
      EXPECT_EQ(a.port(), c.port) << c.in;
      if (*c.host) {
        EXPECT_EQ(a.host(), c.host) << c.in;
      }
    }
    EXPECT_THROW(goro::net::resolve("tcp", "127.0.0.1"), std::invalid_argument);
    EXPECT_THROW(goro::net::resolve("tcp", "127.0.0.1:99999"),
                 std::invalid_argument);
  });
}

// Go: TestTCPListenerName. A listener on port 0 reports the real port.
TEST_P(GoTcpSock, TCPListenerName) {
  run([] {
    for (const char* network : {"tcp", "tcp4"}) {
      listener ln = goro::net::listen(network, "127.0.0.1:0");
      EXPECT_NE(ln.addr().port(), 0) << network;
      EXPECT_EQ(ln.addr().family(), AF_INET);
    }
  });
}

// Go: TestTCPConcurrentAccept. Ten goroutines accept on one listener while
// a hundred dials (200 ms timeout) arrive; at most a ninth may fail.
TEST_P(GoTcpSock, TCPConcurrentAccept) {
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    const int N = 10;
    goro::wait_group wg;
    wg.add(N);
    for (int i = 0; i < N; i++)
      goro::go([&] {
        for (;;) {
          try {
            ln.accept().close();
          } catch (const std::system_error&) {
            break;
          }
        }
        wg.done();
      });
    const int attempts = 10 * N;
    int fails = 0;
    for (int i = 0; i < attempts; i++) {
      try {
        goro::net::dial_timeout("tcp", ln.addr().str(), 200ms).close();
      } catch (const std::system_error&) {
        fails++;
      }
    }
    ln.close();
    wg.wait();
    EXPECT_LE(fails, attempts / 9);
  });
}

// Go: TestTCPStress. Two connections exchange 512-byte messages back and
// forth (1e4 each way; fewer under sanitizers).
TEST_P(GoTcpSock, TCPStress) {
  run([] {
    const int conns = 2, msg_len = 512;
    int msgs = goro_test::scaled(10000, 1000);  // not const: captured
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto done = goro::make_chan<bool>();
    std::atomic<int> failed{0};
    goro::go([&] {
      for (;;) {
        conn c;
        try {
          c = ln.accept();
        } catch (const std::system_error&) {
          break;
        }
        goro::go([&failed, msgs, c = std::move(c)]() mutable {
          char buf[msg_len];
          try {
            for (int m = 0; m < msgs; m++) {
              if (c.read_full(buf, msg_len) != msg_len) {
                failed++;
                break;
              }
              c.write(buf, msg_len);
            }
          } catch (const std::system_error&) {
            failed++;
          }
        });
      }
      done.send(true);
    });
    for (int i = 0; i < conns; i++)
      goro::go([&] {
        try {
          conn c = goro::net::dial("tcp", ln.addr().str());
          char buf[msg_len] = {};
          for (int m = 0; m < msgs; m++) {
            c.write(buf, msg_len);
            if (c.read_full(buf, msg_len) != msg_len) {
              failed++;
              break;
            }
          }
        } catch (const std::system_error&) {
          failed++;
        }
        done.send(true);
      });
    for (int i = 0; i < conns; i++) done.recv();
    ln.close();
    done.recv();
    EXPECT_EQ(failed.load(), 0);
  });
}

// Go: TestTCPBig (its -tcpbig flag sends 2 GB; 32 MiB here, 4 under
// sanitizers), written in one write() call and read back by the peer.
TEST_P(GoTcpSock, TCPBig) {
  run([] {
    const std::size_t size = goro_test::scaled<std::size_t>(32 << 20, 4 << 20);
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto got = goro::make_chan<std::size_t>(1);
    goro::go([&] {
      conn c = ln.accept();
      std::vector<char> buf(size);
      got.send(c.read_full(buf.data(), size));
    });
    conn c = goro::net::dial("tcp", ln.addr().str());
    std::vector<char> buf(size, 'b');
    EXPECT_EQ(c.write(buf.data(), size), size);
    EXPECT_EQ(*got.recv(), size);
  });
}

// Go: TestCopyPipeIntoTCP. Two bytes copied from a pipe into a connection
// then closed: the peer's read_full gets 2 of 100 (Go's ErrUnexpectedEOF).
TEST_P(GoTcpSock, CopyPipeIntoTCP) {
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    auto got = goro::make_chan<std::size_t>(1);
    goro::go([&] {
      conn c = ln.accept();
      char buf[100];
      got.send(c.read_full(buf, sizeof buf));
    });
    conn c = goro::net::dial("tcp", ln.addr().str());
    int p[2];
    ASSERT_EQ(::pipe2(p, O_CLOEXEC), 0);
    goro::fd r(p[0]), w(p[1]);
    auto closed = goro::make_chan<bool>(1);
    goro::go([&w, closed] {
      w.write("hi", 2);
      w.close();
      closed.send(true);
    });
    char buf[64];
    while (std::size_t n = r.read(buf, sizeof buf)) c.write(buf, n);
    c.close();
    // The reader sees end of stream while w.close() may still be running:
    // w must outlive that call (TSan caught the destructor racing it).
    closed.recv();
    EXPECT_EQ(*got.recv(), 2u);
  });
}

// Go: TestTCPSelfConnect (dial_test.go's cousin in tcpsock): dialing a
// port nobody listens on must never "connect" to itself (the kernel may
// pick the same port as the local one); every dial is refused.
TEST_P(GoTcpSock, TCPSelfConnect) {
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    const std::string where = ln.addr().str();
    ln.close();
    const int n = goro_test::scaled(1000, 100);
    for (int i = 0; i < n; i++) {
      try {
        conn c = goro::net::dial("tcp", where);
        ASSERT_NE(c.local_addr(), c.remote_addr())
            << "dial " << where << " connected to itself";
        // A real listener grabbed the port meanwhile: acceptable.
      } catch (const std::system_error& e) {
        ASSERT_EQ(e.code().value(), ECONNREFUSED) << e.what();
      }
    }
  });
}

// Go: TestTCPSpuriousConnSetupCompletion. Many dials against a listener
// that accepts with a small delay between them: every dial that returns
// is really connected (it can write and the peer reads what it wrote).
TEST_P(GoTcpSock, TCPSpuriousConnSetupCompletion) {
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
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
          char b;
          try {
            if (c.read_full(&b, 1) == 1) c.write(&b, 1);
          } catch (const std::system_error&) {
          }
        });
      }
      server.done();
    });
    const int n = goro_test::scaled(100, 20);
    std::atomic<int> bad{0};
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go([&, i] {
        try {
          conn c = goro::net::dial_timeout("tcp", ln.addr().str(), 5s);
          char b = char(i), r = 0;
          c.write(&b, 1);
          if (c.read_full(&r, 1) != 1 || r != b) bad++;
        } catch (const std::system_error&) {
          bad++;
        }
        wg.done();
      });
    }
    wg.wait();
    ln.close();
    server.wait();
    EXPECT_EQ(bad.load(), 0);
  });
}

// Go: TestTCPReadWriteAllocs. Reads and writes on an established
// connection allocate nothing.
TEST_P(GoTcpSock, TCPReadWriteAllocs) {
  if (!goro_test::alloc_counting_available)
    GTEST_SKIP() << "sanitizers replace operator new";
  ASSERT_TRUE(goro_test::alloc_counter_works());
  run([] {
    listener ln = goro::net::listen("tcp", "127.0.0.1:0");
    conn client = goro::net::dial("tcp", ln.addr().str());
    conn server = ln.accept();
    char buf[128] = {};
    // Warm up: the first operations may set up per-descriptor state.
    server.write(buf, sizeof buf);
    client.read_full(buf, sizeof buf);
    long allocs = goro_test::allocs_during([&] {
      for (int i = 0; i < 1000; i++) {
        server.write(buf, sizeof buf);
        client.read_full(buf, sizeof buf);
      }
    });
    // As Go's testing.AllocsPerRun: the average per run, truncated. The
    // counter sees every thread's allocations, and the runtime's own (a new
    // M started for an idle P at GOMAXPROCS 4) are not the reads' and
    // writes'; one allocation per pair would be 1000.
    EXPECT_EQ(allocs / 1000, 0)
        << allocs << " allocations in 1000 write + read pairs";
  });
}
