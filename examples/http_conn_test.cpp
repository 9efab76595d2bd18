// The web server's connection behaviour as Go's net/http server has it,
// over raw loopback connections: HEAD answers without a body, Expect:
// 100-continue, the Host header HTTP/1.1 requires, and the header-read
// timeout (Go's ReadHeaderTimeout) against slow and silent clients.
// Every read is bounded by a deadline.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <goro/goro.hpp>
#include <string>
#include <system_error>
#include <vector>

#include "http_server.hpp"
#include "http_test_server.hpp"

namespace {

using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

// Reads into *got until it holds `what`; false if the connection ended or
// `limit` passed first.
bool read_until(goro::net::conn& c, std::string* got, const std::string& what,
                clock_type::duration limit = 5s) {
  c.set_read_deadline(clock_type::now() + limit);
  char buf[4096];
  try {
    while (got->find(what) == std::string::npos) {
      std::size_t n = c.read(buf, sizeof buf);
      if (n == 0) return false;
      got->append(buf, n);
    }
  } catch (const std::system_error&) {
    return false;
  }
  return true;
}

// Everything the server sends until it closes (bounded by `limit`).
std::string read_all(goro::net::conn& c, clock_type::duration limit = 5s) {
  c.set_read_deadline(clock_type::now() + limit);
  std::string got;
  char buf[4096];
  try {
    while (std::size_t n = c.read(buf, sizeof buf)) got.append(buf, n);
  } catch (const std::system_error&) {
    // The deadline or a reset: what came so far.
  }
  return got;
}

// Whether the server closed c (end of stream or a reset) within `limit`,
// without sending anything.
bool closed_within(goro::net::conn& c, clock_type::duration limit) {
  c.set_read_deadline(clock_type::now() + limit);
  char buf[256];
  try {
    return c.read(buf, sizeof buf) == 0;
  } catch (const goro::deadline_exceeded&) {
    return false;
  } catch (const std::system_error&) {
    return true;  // ECONNRESET: closed with our bytes unread
  }
}

// Writes s; false if the server had closed the connection (EPIPE, a
// reset) instead of an exception escaping the goroutine.
bool send(goro::net::conn& c, const std::string& s) {
  try {
    c.write(s);
    return true;
  } catch (const std::system_error&) {
    return false;
  }
}

}  // namespace

// HEAD gets GET's headers, Content-Length included, and no body: the next
// answer on the connection starts right after the blank line.
TEST(HttpConn, HeadAnswerHasContentLengthAndNoBody) {
  goro::run([] {
    http_test::server srv;
    goro::net::conn c = goro::net::dial(srv.where());
    c.write(
        std::string("HEAD / HTTP/1.1\r\nHost: x\r\n\r\n"
                    "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    std::string got = read_all(c);
    std::size_t end = got.find("\r\n\r\n");
    ASSERT_NE(end, std::string::npos) << got;
    std::string head = got.substr(0, end + 4);
    EXPECT_EQ(head.substr(0, 15), "HTTP/1.1 200 OK") << got;
    EXPECT_NE(head.find("Content-Length: 13\r\n"), std::string::npos) << got;
    EXPECT_EQ(got.substr(end + 4, 15), "HTTP/1.1 200 OK") << got;
    EXPECT_EQ(got.size() - got.rfind("Hello, World!"), 13u) << got;
    EXPECT_EQ(got.find("Hello, World!"), got.rfind("Hello, World!")) << got;
  });
}

// Expect: 100-continue: "100 Continue" arrives while the body is still
// held back (the read below would time out without it), then the answer.
TEST(HttpConn, ExpectContinueIsAnsweredBeforeTheBody) {
  goro::run([] {
    http_test::server srv;
    goro::net::conn c = goro::net::dial(srv.where());
    c.write(
        std::string("POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                    "Content-Length: 5\r\n\r\n"));
    std::string got;
    ASSERT_TRUE(read_until(c, &got, "\r\n\r\n", 10s))
        << "no interim answer before the body: '" << got << "'";
    EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
    c.write(std::string("hello"));
    got.clear();
    ASSERT_TRUE(read_until(c, &got, "got 5 bytes")) << got;
    EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
    // A second request on the same connection, chunked this time.
    c.write(
        std::string("POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\n"
                    "Transfer-Encoding: chunked\r\n\r\n"));
    got.clear();
    ASSERT_TRUE(read_until(c, &got, "\r\n\r\n", 10s)) << got;
    EXPECT_EQ(got, "HTTP/1.1 100 Continue\r\n\r\n");
    c.write(std::string("3\r\nabc\r\n0\r\n\r\n"));
    got.clear();
    ASSERT_TRUE(read_until(c, &got, "got 3 bytes")) << got;
  });
}

// No "100 Continue" where the body is refused (413: the final answer
// comes first and the connection closes), or where there is no body.
TEST(HttpConn, ExpectContinueNotSentForARefusedOrEmptyBody) {
  goro::run([] {
    http_test::server srv;
    {
      goro::net::conn c = goro::net::dial(srv.where());
      c.write(
          std::string("POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 5000000\r\n\r\n"));
      std::string got = read_all(c);
      EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 413") << got;
      EXPECT_EQ(got.find("100 Continue"), std::string::npos) << got;
    }
    {
      goro::net::conn c = goro::net::dial(srv.where());
      c.write(
          std::string("POST /up HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                      "Content-Length: 0\r\nConnection: close\r\n\r\n"));
      std::string got = read_all(c);
      EXPECT_EQ(got.substr(0, 15), "HTTP/1.1 200 OK") << got;
      EXPECT_NE(got.find("got 0 bytes"), std::string::npos) << got;
    }
    {
      goro::net::conn c = goro::net::dial(srv.where());
      c.write(
          std::string("POST /up HTTP/1.1\r\nHost: x\r\nExpect: teapot\r\n"
                      "Content-Length: 3\r\n\r\nabc"));
      EXPECT_EQ(read_all(c).substr(0, 12), "HTTP/1.1 417");
    }
  });
}

// HTTP/1.1 requires Host (400 without it, as Go's server); 1.0 does not.
TEST(HttpConn, Http11WithoutHostIsBadRequest) {
  goro::run([] {
    http_test::server srv;
    for (const char* req :
         {"GET / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nAccept: */*\r\n\r\n",
          "GET http://x/ HTTP/1.1\r\n\r\n",
          "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"}) {
      goro::net::conn c = goro::net::dial(srv.where());
      c.write(std::string(req));
      std::string got = read_all(c);
      EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 400") << req << " -> " << got;
    }
    goro::net::conn c = goro::net::dial(srv.where());
    c.write(std::string("GET / HTTP/1.0\r\n\r\n"));
    EXPECT_EQ(read_all(c).substr(0, 15), "HTTP/1.1 200 OK");
  });
}

// A request whose headers trickle in is dropped once read_header_timeout
// has passed since its first byte, even though every byte comes well
// within the idle timeout; so is a connection that sends nothing.
TEST(HttpConn, HeaderTimeoutClosesASlowRequest) {
  goro::run([] {
    http::server_options opt;
    opt.idle_timeout = 60s;
    opt.read_header_timeout = 200ms;
    http_test::server srv(opt);
    {
      goro::net::conn silent = goro::net::dial(srv.where());
      EXPECT_TRUE(closed_within(silent, 10s));
    }
    // A keep-alive connection may stay idle past the header timeout
    // between requests (the idle timeout applies there)...
    goro::net::conn c = goro::net::dial(srv.where());
    std::string got;
    c.write(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(read_until(c, &got, "Hello, World!"));
    EXPECT_FALSE(closed_within(c, 500ms));
    // ...but the next request's headers must then come in time.
    ASSERT_TRUE(send(c, "GET / HTTP/1.1\r\n"));
    bool closed = false;
    for (int i = 0; i < 200 && !closed; i++) {
      try {
        c.write(std::string("X: y\r\n"));
      } catch (const std::system_error&) {
        closed = true;  // EPIPE or a reset
        break;
      }
      closed = closed_within(c, 50ms);
    }
    EXPECT_TRUE(closed) << "a 10 s header was not cut at 200 ms";
  });
}

// The header clock of a keep-alive connection's next request starts with
// that request's first byte, not with the previous answer: after 1.5 s of
// idleness, a request whose headers come in two pieces is served under a
// 1 s header timeout.
TEST(HttpConn, HeaderTimeoutStartsWithTheRequestsFirstByte) {
  goro::run([] {
    http::server_options opt;
    opt.idle_timeout = 60s;
    opt.read_header_timeout = 1s;
    http_test::server srv(opt);
    goro::net::conn c = goro::net::dial(srv.where());
    std::string got;
    c.write(std::string("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
    ASSERT_TRUE(read_until(c, &got, "Hello, World!"));
    EXPECT_FALSE(closed_within(c, 1500ms));
    ASSERT_TRUE(send(c, "GET /2 HTTP/1.1\r\n"));
    // The pieces apart (the server reads them separately).
    EXPECT_FALSE(closed_within(c, 100ms));
    ASSERT_TRUE(send(c, "Host: x\r\n\r\n"));
    got.clear();
    EXPECT_TRUE(read_until(c, &got, "Hello, World!")) << got;
  });
}

// 50 slowloris clients, each sending its request one header byte every
// 50 ms: the server closes every one of them (header timeout 200 ms) long
// before the idle timeout (60 s), and keeps serving.
TEST(HttpConn, SlowlorisClientsAreAllClosed) {
  goro::run([] {
    http::server_options opt;
    opt.idle_timeout = 60s;
    opt.read_header_timeout = 200ms;
    http_test::server srv(opt);
    constexpr int kClients = 50;
    std::atomic<int> closed{0};
    goro::wait_group clients;
    const std::string head = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    for (int i = 0; i < kClients; i++) {
      clients.add(1);
      goro::go([&] {
        try {
          goro::net::conn c = goro::net::dial(srv.where());
          // 200 bytes at one every 50 ms: 10 s, the watchdog.
          for (std::size_t b = 0; b < 200; b++) {
            char ch = b < head.size() ? head[b] : 'a';
            try {
              c.write(&ch, 1);
            } catch (const std::system_error&) {
              closed++;  // EPIPE or a reset: the server is gone
              break;
            }
            if (closed_within(c, 50ms)) {
              closed++;
              break;
            }
          }
        } catch (const std::exception& e) {
          ADD_FAILURE() << e.what();
        }
        clients.done();
      });
    }
    clients.wait();
    EXPECT_EQ(closed.load(), kClients);
    goro::net::conn c = goro::net::dial(srv.where());
    c.write(
        std::string("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
    EXPECT_NE(read_all(c).find("Hello, World!"), std::string::npos);
  });
}
