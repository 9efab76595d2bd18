// The web server example's request path: a corpus of good, pipelined,
// malformed, oversized and truncated requests through the parser (the same
// function the fuzzer drives), then the same over real loopback
// connections: each bad request gets its status and a closed connection
// while the server keeps serving the others.
#include "http_server.hpp"

#include <gtest/gtest.h>

#include <goro/goro.hpp>
#include <string>
#include <vector>

namespace {

struct parsed {
  bool ok;
  int status;
  std::vector<http::request> reqs;
};

parsed parse(const std::string& s, std::size_t chunk = 0) {
  http::request_parser p;
  parsed r{true, 0, {}};
  if (chunk == 0) chunk = s.size();
  for (std::size_t i = 0; i < s.size() && r.ok; i += chunk)
    r.ok = p.feed(s.data() + i, std::min(chunk, s.size() - i), &r.reqs);
  r.status = p.status();
  return r;
}

}  // namespace

TEST(HttpParser, SimpleAndKeepAlive) {
  auto r = parse("GET /a HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r.ok);
  ASSERT_EQ(r.reqs.size(), 1u);
  EXPECT_EQ(r.reqs[0].method, "GET");
  EXPECT_EQ(r.reqs[0].url, "/a");
  EXPECT_TRUE(r.reqs[0].keep_alive);
  auto c = parse("GET / HTTP/1.1\r\nConnection: close\r\n\r\n");
  ASSERT_EQ(c.reqs.size(), 1u);
  EXPECT_FALSE(c.reqs[0].keep_alive);
  auto old = parse("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(old.reqs.size(), 1u);
  EXPECT_FALSE(old.reqs[0].keep_alive);
}

TEST(HttpParser, PipelinedRequestsInOrderWhateverTheSplit) {
  std::string three =
      "GET /1 HTTP/1.1\r\nHost: x\r\n\r\n"
      "POST /2 HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
      "GET /3 HTTP/1.1\r\nHost: x\r\n\r\n";
  for (std::size_t chunk :
       {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{64}}) {
    auto r = parse(three, chunk);
    ASSERT_TRUE(r.ok) << "chunk " << chunk;
    ASSERT_EQ(r.reqs.size(), 3u) << "chunk " << chunk;
    EXPECT_EQ(r.reqs[0].url, "/1");
    EXPECT_EQ(r.reqs[1].body, "hello");
    EXPECT_EQ(r.reqs[2].url, "/3");
  }
}

TEST(HttpParser, MalformedIs400) {
  EXPECT_EQ(parse("GET / HTTP/9.9\r\n\r\n").status, 505);
  for (const char* bad :
       {"GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nBad Header\r\n\r\n",
        "\x01\x02\x03\r\n\r\n",
        "GET / HTTP/1.1\r\nContent-Length: x\r\n\r\n"}) {
    auto r = parse(bad);
    EXPECT_FALSE(r.ok) << bad;
    EXPECT_EQ(r.status, 400) << bad;
  }
}

TEST(HttpParser, OversizedHeadersUrlAndBody) {
  std::string big_header =
      "GET / HTTP/1.1\r\nX-Big: " + std::string(9000, 'a') + "\r\n\r\n";
  EXPECT_EQ(parse(big_header).status, 431);
  EXPECT_EQ(parse(big_header, 100).status, 431);
  std::string many = "GET / HTTP/1.1\r\n";
  for (int i = 0; i < 2000; i++) many += "X-H" + std::to_string(i) + ": v\r\n";
  EXPECT_EQ(parse(many + "\r\n").status, 431);
  std::string long_url = "GET /" + std::string(5000, 'u') + " HTTP/1.1\r\n\r\n";
  EXPECT_EQ(parse(long_url).status, 414);
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nContent-Length: 2000000\r\n\r\n").status,
            413);
  std::string chunked = "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; i++)
    chunked += "10000\r\n" + std::string(0x10000, 'c') + "\r\n";
  EXPECT_EQ(parse(chunked).status, 413);
}

TEST(HttpParser, TruncatedRequestIsInProgressNotAnError) {
  http::request_parser p;
  std::vector<http::request> reqs;
  std::string part = "GET / HTTP/1.1\r\nHost: x\r\n";
  EXPECT_TRUE(p.feed(part.data(), part.size(), &reqs));
  EXPECT_TRUE(reqs.empty());
  EXPECT_TRUE(p.in_progress());
}

namespace {

// Sends raw bytes on a new connection, returns everything the server sends
// back until it closes the connection or `limit` bytes arrived.
std::string send_raw(const std::string& where, const std::string& raw,
                     bool half_close = true) {
  goro::net::conn c = goro::net::dial(where);
  c.write(raw.data(), raw.size());
  if (half_close) c.close_write();
  c.set_read_deadline(std::chrono::steady_clock::now() +
                      std::chrono::seconds(10));
  std::string got;
  char buf[4096];
  while (std::size_t n = c.read(buf, sizeof buf)) got.append(buf, n);
  return got;
}

int count(const std::string& s, const std::string& what) {
  int n = 0;
  for (std::size_t i = s.find(what); i != std::string::npos;
       i = s.find(what, i + 1))
    n++;
  return n;
}

}  // namespace

TEST(HttpServer, BadRequestsGetTheirStatusAndTheServerKeepsServing) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group server;
    server.add(1);
    goro::go([&] {
      http::serve(ln, http::seed_handler);
      server.done();
    });
    const std::string where = ln.addr().str();
    // Pipelining: three answers in order on one connection.
    std::string three =
        send_raw(where,
                 "GET / HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET /heavy HTTP/1.1\r\nHost: x\r\n\r\n"
                 "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    EXPECT_EQ(count(three, "HTTP/1.1 200 OK"), 3) << three;
    std::size_t first = three.find("Hello, World!"),
                heavy = three.find("Heavy task result: ");
    EXPECT_LT(first, heavy);
    EXPECT_NE(three.rfind("Hello, World!"), first);
    // Errors: status, then the connection is closed.
    EXPECT_EQ(send_raw(where, "NONSENSE\r\n\r\n", false).substr(0, 12),
              "HTTP/1.1 400");
    EXPECT_EQ(
        send_raw(where,
                 "GET / HTTP/1.1\r\nX: " + std::string(10000, 'x') + "\r\n\r\n",
                 false)
            .substr(0, 12),
        "HTTP/1.1 431");
    EXPECT_EQ(
        send_raw(where, "POST / HTTP/1.1\r\nContent-Length: 9999999\r\n\r\n",
                 false)
            .substr(0, 12),
        "HTTP/1.1 413");
    // A truncated request, then end of stream: closed without an answer.
    EXPECT_EQ(send_raw(where, "GET / HTTP/1.1\r\nHost:"), "");
    // Still serving.
    EXPECT_EQ(
        count(send_raw(where, "GET / HTTP/1.1\r\nConnection: close\r\n\r\n"),
              "200 OK"),
        1);
    ln.close();
    server.wait();
  });
}
