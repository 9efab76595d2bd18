// Ports of Go's net/unixsock_test.go: Unix stream and datagram sockets
// (path and abstract names): unnamed senders, zero-byte payloads and
// buffers, send_to on a connected socket, local and remote names, and the
// listener's unlink-on-close; at GOMAXPROCS 1, 2 and 4.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <goro/goro.hpp>
#include <string>

#include "go_port_support.hpp"

using namespace std::chrono_literals;
using goro::net::conn;
using goro::net::listener;
using goro::net::packet_conn;
using sclock = std::chrono::steady_clock;
using goro_test::go_port;

namespace {

class GoUnixSock : public go_port {};
GO_PORT_SUITE(GoUnixSock);

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

bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

// Removes a socket path at scope end.
struct unlinker {
  std::string path;
  ~unlinker() { ::unlink(path.c_str()); }
};

}  // namespace

// Go: TestReadUnixgramWithUnnamedSocket. A datagram from an unbound
// socket arrives with an empty sender address.
TEST_P(GoUnixSock, ReadUnixgramWithUnnamedSocket) {
  run([] {
    unlinker u{goro_test::unix_path("ug")};
    packet_conn c = goro::net::listen_packet("unixgram", u.path);
    const char data[5] = {1, 2, 3, 4, 5};
    {
      int s = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
      ASSERT_GE(s, 0);
      sockaddr_un sa{};
      sa.sun_family = AF_UNIX;
      std::strncpy(sa.sun_path, u.path.c_str(), sizeof sa.sun_path - 1);
      ASSERT_EQ(::sendto(s, data, sizeof data, 0,
                         reinterpret_cast<sockaddr*>(&sa), sizeof sa),
                ssize_t(sizeof data));
      ::close(s);
    }
    char b[64];
    goro::net::addr from;
    c.set_read_deadline(sclock::now() + 100ms);
    std::size_t n = 0;
    ASSERT_EQ(outcome([&] { n = c.recv_from(b, sizeof b, &from); }), "ok");
    EXPECT_EQ(std::string(b, n), std::string(data, sizeof data));
    EXPECT_EQ(from.str(), "") << "unexpected peer address";
  });
}

// Go: TestUnixgramZeroBytePayload. An empty datagram reads as 0 bytes.
TEST_P(GoUnixSock, UnixgramZeroBytePayload) {
  run([] {
    unlinker u{goro_test::unix_path("uz")};
    packet_conn c1 = goro::net::listen_packet("unixgram", u.path);
    packet_conn c2 = goro::net::dial_packet("unixgram", u.path);
    for (int i = 0; i < 3; i++) {
      EXPECT_EQ(outcome([&] { c2.write("", 0); }), "ok");
      char b[16];
      c1.set_read_deadline(sclock::now() + 5s);
      std::size_t n = 99;
      EXPECT_EQ(outcome([&] { n = c1.recv_from(b, sizeof b); }), "ok");
      EXPECT_EQ(n, 0u);
    }
  });
}

// Go: TestUnixgramZeroByteBuffer. A read into an empty buffer returns 0
// (or times out), never an error.
TEST_P(GoUnixSock, UnixgramZeroByteBuffer) {
  run([] {
    unlinker u{goro_test::unix_path("ub")};
    packet_conn c1 = goro::net::listen_packet("unixgram", u.path);
    packet_conn c2 = goro::net::dial_packet("unixgram", u.path);
    const std::string msg = "UNIXGRAM ZERO BYTE BUFFER TEST";
    for (int i = 0; i < 3; i++) {
      c2.write(msg.data(), msg.size());
      c1.set_read_deadline(sclock::now() + 100ms);
      std::size_t n = 99;
      std::string r = outcome([&] { n = c1.recv_from(nullptr, 0); });
      EXPECT_TRUE(r == "ok" || r == "timeout") << r;
      if (r == "ok") {
        EXPECT_EQ(n, 0u);
      }
      c1.set_read_deadline(sclock::now() - 1s);
      char buf[64];
      try {
        for (;;) c1.recv_from(buf, sizeof buf);
      } catch (const goro::deadline_exceeded&) {
      }
    }
  });
}

// Go: TestUnixgramWrite, connected socket: send_to must fail with
// ErrWriteToConnected, write works.
TEST_P(GoUnixSock, UnixgramWriteConn) {
  run([] {
    unlinker u{goro_test::unix_path("uw")};
    packet_conn srv = goro::net::listen_packet("unixgram", u.path);
    packet_conn c = goro::net::dial_packet("unixgram", u.path);
    const std::string b = "CONNECTED-MODE SOCKET";
    EXPECT_NE(outcome([&] { c.send_to(b.data(), b.size(), srv.local_addr()); }),
              "ok");
    EXPECT_EQ(outcome([&] { c.write(b.data(), b.size()); }), "ok");
  });
}

// Go: TestUnixgramWrite, unconnected socket: send_to works, a plain write
// (no destination) fails.
TEST_P(GoUnixSock, UnixgramWritePacketConn) {
  run([] {
    unlinker u{goro_test::unix_path("uw")};
    packet_conn srv = goro::net::listen_packet("unixgram", u.path);
    unlinker u2{goro_test::unix_path("uw")};
    packet_conn c = goro::net::listen_packet("unixgram", u2.path);
    const std::string b = "CONNECTIONLESS-MODE SOCKET";
    EXPECT_EQ(outcome([&] { c.send_to(b.data(), b.size(), srv.local_addr()); }),
              "ok");
    EXPECT_NE(outcome([&] { c.write(b.data(), b.size()); }), "ok");
    char got[64];
    srv.set_read_deadline(sclock::now() + 5s);
    std::size_t n = srv.recv_from(got, sizeof got);
    EXPECT_EQ(std::string(got, n), b);
  });
}

// Go: TestUnixConnLocalAndRemoteNames. Path and abstract ("@") listeners:
// the accepted connection's local name is the listener's, the dialer's
// remote name is the listener's, and the dialer's own name is empty.
TEST_P(GoUnixSock, UnixConnLocalAndRemoteNames) {
  run([] {
    const std::string path = goro_test::unix_path("names");
    const std::string abstract = "@" + path.substr(5);
    for (const std::string& name : {path, abstract}) {
      listener ln = goro::net::listen("unix", name);
      EXPECT_EQ(ln.addr().str(), name);
      conn c = goro::net::dial("unix", name);
      conn s = ln.accept();
      EXPECT_EQ(c.remote_addr().str(), name);
      EXPECT_EQ(s.local_addr().str(), name);
      EXPECT_EQ(c.local_addr().str(), "");
      EXPECT_EQ(s.remote_addr().str(), "");
      c.write("x");
      char b;
      EXPECT_EQ(s.read_full(&b, 1), 1u);
    }
  });
}

// Go: TestUnixgramConnLocalAndRemoteNames. A bound, connected datagram
// socket knows its own name; the receiver sees it as the sender.
TEST_P(GoUnixSock, UnixgramConnLocalAndRemoteNames) {
  run([] {
    unlinker u{goro_test::unix_path("gn")};
    packet_conn srv = goro::net::listen_packet("unixgram", u.path);
    EXPECT_EQ(srv.local_addr().str(), u.path);
    packet_conn c = goro::net::dial_packet("unixgram", u.path);
    c.write("x", 1);
    char b[4];
    goro::net::addr from;
    srv.set_read_deadline(sclock::now() + 5s);
    srv.recv_from(b, sizeof b, &from);
    EXPECT_EQ(from.str(), c.local_addr().str());
  });
}

// Go: TestUnixUnlink ("Listen" and "SecondClose"): close removes the
// socket file once; a second close leaves a file that replaced it alone.
TEST_P(GoUnixSock, UnixUnlink) {
  run([] {
    const std::string name = goro_test::unix_path("unlink");
    {
      listener l = goro::net::listen("unix", name);
      EXPECT_TRUE(exists(name)) << "after listen";
      l.close();
      EXPECT_FALSE(exists(name)) << "after listener close";
    }
    {
      listener l = goro::net::listen("unix", name);
      l.close();
      EXPECT_FALSE(exists(name));
      std::ofstream(name) << "hello world";
      EXPECT_TRUE(exists(name)) << "after writing a file in its place";
      l.close();
      EXPECT_TRUE(exists(name)) << "a second close removed someone else's file";
      ::unlink(name.c_str());
    }
  });
}

// Go: TestUnixUnlink's FileListener cases: a listener made from the same
// descriptor (a dup wrapped in goro::fd) does not unlink the path; only
// the listener that bound it does.
TEST_P(GoUnixSock, UnixUnlinkFileListener) {
  run([] {
    const std::string name = goro_test::unix_path("unlinkf");
    listener l = goro::net::listen("unix", name);
    {
      listener l1{goro::fd(::dup(l.fd().get()))};
      EXPECT_TRUE(exists(name));
      l1.close();
      EXPECT_TRUE(exists(name)) << "after the second listener's close";
    }
    l.close();
    EXPECT_FALSE(exists(name)) << "after the listener's close";
  });
}

// Go: TestUnixUnlink's SetUnlinkOnClose cases.
TEST_P(GoUnixSock, UnixUnlinkSetUnlinkOnClose) {
  GTEST_SKIP() << "API gap: goro::net::listener has no set_unlink_on_close";
}
