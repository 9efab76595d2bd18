// The web server example's request path: a corpus of good, pipelined,
// malformed, oversized and truncated requests through the parser (the same
// function the fuzzer drives), then the same over real loopback
// connections: each bad request gets its status and a closed connection
// while the server keeps serving the others.
#include "http_server.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <goro/goro.hpp>
#include <iterator>
#include <string>
#include <vector>

// fuzz_http.cpp's entry point, linked into this test: every corpus file
// goes through the fuzzer's checks in gcc builds too.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size);

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
  auto c = parse("GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
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
       {"GARBAGE\r\n\r\n", "GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
        "\x01\x02\x03\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: x\r\n\r\n"}) {
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
  std::string chunked =
      "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 0; i < 20; i++)
    chunked += "10000\r\n" + std::string(0x10000, 'c') + "\r\n";
  EXPECT_EQ(parse(chunked).status, 413);
}

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

std::vector<std::filesystem::path> files_in(const char* dir) {
  std::vector<std::filesystem::path> v;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.is_regular_file()) v.push_back(e.path());
  std::sort(v.begin(), v.end());
  return v;
}

}  // namespace

// examples/http_corpus: each file's name says what the parser must make of
// it, "STATUS-REQUESTS-what.http": STATUS is "ok" (no error) or the error
// status, REQUESTS the number of complete requests before it. Each file is
// fed whole, byte by byte, and in 7- and 1000-byte pieces.
TEST(HttpCorpus, EveryFileGetsTheStatusInItsName) {
  auto files = files_in(HTTP_CORPUS_DIR);
  ASSERT_GE(files.size(), 30u);
  for (const auto& f : files) {
    std::string name = f.filename().string();
    std::size_t d1 = name.find('-'), d2 = name.find('-', d1 + 1);
    ASSERT_NE(d2, std::string::npos) << name;
    std::string want_status = name.substr(0, d1);
    std::size_t want_reqs = std::stoul(name.substr(d1 + 1, d2 - d1 - 1));
    std::string data = slurp(f);
    for (std::size_t chunk :
         {std::size_t{0}, std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
      auto r = parse(data, chunk);
      EXPECT_EQ(r.ok ? "ok" : std::to_string(r.status), want_status)
          << name << ", pieces of " << chunk;
      EXPECT_EQ(r.reqs.size(), want_reqs) << name << ", pieces of " << chunk;
    }
  }
}

// The fuzzer's checks (bounds, statuses, the same result whatever the
// split) on both corpora, without libFuzzer.
TEST(HttpCorpus, FuzzTargetAcceptsBothCorpora) {
  std::size_t n = 0;
  for (const char* dir : {HTTP_CORPUS_DIR, FUZZ_CORPUS_DIR})
    for (const auto& f : files_in(dir)) {
      std::string data = slurp(f);
      SCOPED_TRACE(f.string());
      EXPECT_EQ(
          LLVMFuzzerTestOneInput(
              reinterpret_cast<const std::uint8_t*>(data.data()), data.size()),
          0);
      n++;
    }
  EXPECT_GE(n, 40u);
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
        count(
            send_raw(where,
                     "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"),
            "200 OK"),
        1);
    ln.close();
    server.wait();
  });
}

// A 413 while the client is still sending its 2 MB body: the response
// arrives, then end of stream (the server stops writing and drops the rest
// of the body for a while instead of resetting the connection under the
// response).
TEST(HttpServer, ErrorResponseSurvivesTheRestOfAnOversizedBody) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group server;
    server.add(1);
    goro::go([&] {
      http::serve(ln, http::seed_handler);
      server.done();
    });
    for (int round = 0; round < 20; round++) {
      goro::net::conn c = goro::net::dial(ln.addr().str());
      std::string req =
          "POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 2000000\r\n\r\n";
      req += std::string(2000000, 'b');
      goro::wait_group writer;
      writer.add(1);
      goro::go([&] {
        try {
          c.write(req.data(), req.size());
        } catch (const std::system_error&) {
          // The server may stop reading before the body's end.
        }
        writer.done();
      });
      c.set_read_deadline(std::chrono::steady_clock::now() +
                          std::chrono::seconds(10));
      std::string got;
      char buf[4096];
      try {
        while (std::size_t n = c.read(buf, sizeof buf)) got.append(buf, n);
      } catch (const std::system_error& e) {
        ADD_FAILURE() << "round " << round << ": " << e.what()
                      << " after reading '" << got << "'";
      }
      EXPECT_EQ(got.substr(0, 12), "HTTP/1.1 413") << "round " << round;
      writer.wait();
    }
    ln.close();
    server.wait();
  });
}

// An idle keep-alive connection is closed after the idle timeout (here
// 200 ms), and a busy one is not.
TEST(HttpServer, IdleKeepAliveConnectionIsClosed) {
  goro::run([] {
    auto ln = goro::net::listen("127.0.0.1:0");
    goro::wait_group server;
    server.add(1);
    http::server_options opt;
    opt.idle_timeout = std::chrono::milliseconds(200);
    goro::go([&] {
      http::serve(ln, http::seed_handler, opt);
      server.done();
    });
    goro::net::conn c = goro::net::dial(ln.addr().str());
    c.set_read_deadline(std::chrono::steady_clock::now() +
                        std::chrono::seconds(10));
    const std::string req = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
    char buf[4096];
    // Busy for 600 ms (three idle timeouts), a request every 20 ms.
    auto busy_until =
        std::chrono::steady_clock::now() + std::chrono::milliseconds(600);
    int answered = 0;
    while (std::chrono::steady_clock::now() < busy_until) {
      c.write(req);
      std::string got;
      while (got.find("Hello, World!") == std::string::npos) {
        std::size_t n = c.read(buf, sizeof buf);
        ASSERT_NE(n, 0u) << "closed while busy, after " << answered;
        got.append(buf, n);
      }
      answered++;
      goro::sleep(std::chrono::milliseconds(20));
    }
    // Then idle: end of stream within a few idle timeouts.
    auto t0 = std::chrono::steady_clock::now();
    EXPECT_EQ(c.read(buf, sizeof buf), 0u);
    auto waited = std::chrono::steady_clock::now() - t0;
    EXPECT_GE(waited, std::chrono::milliseconds(100));
    EXPECT_LT(waited, std::chrono::seconds(5));
    ln.close();
    server.wait();
  });
}

// "/mixed" is the seed's handler: one request in five is heavy.
TEST(HttpServer, MixedRouteIsOneHeavyInFive) {
  int heavy = 0, light = 0;
  goro::run([&] {
    for (int i = 0; i < 50; i++) {
      http::request r;
      r.url = "/mixed";
      http::response resp = http::seed_handler(r);
      EXPECT_EQ(resp.status, 200);
      if (resp.body.rfind("Heavy task result: ", 0) == 0)
        heavy++;
      else if (resp.body == "Hello, World!")
        light++;
    }
  });
  EXPECT_EQ(heavy, 10);
  EXPECT_EQ(light, 40);
}
