// Data under load, all client libraries at once: goroutines in libpq
// (PostgreSQL 15), hiredis (redis-server) and libcurl (goro's web server in
// this process) side by side on GOMAXPROCS = 2, every result compared byte
// for byte (goro issue 24: plain blocking socket calls park the goroutine
// on the network poller, the thread goes on running others).
//
// Servers as in the other clientlib tests (tests/clientlib_servers.hpp).
// Needs postgresql-15, libpq-dev, redis-server, libhiredis-dev and
// libcurl4-openssl-dev (scripts/deps.sh clients) and http-parser (base);
// without one of them the test skips, saying which. Run it alone with
//   cmake --build --preset default --target clientlib_mixed_test
//   ./build/default/tests/clientlib_mixed_test
// With the libc interposition off (GORO_DEBUG=interpose=0) the thread
// bound fails. Elapsed times are printed, never asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "clientlib_servers.hpp"

#if defined(GORO_HAVE_LIBPQ) && defined(GORO_HAVE_HIREDIS) && \
    defined(GORO_HAVE_LIBCURL) && defined(GORO_HAVE_HTTP_SERVER)
#include <curl/curl.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include "clientlib_http.hpp"
#include "http_server.hpp"
#define GORO_CLIENTLIB_MIXED 1
#endif

namespace {

using namespace std::chrono_literals;

#ifdef GORO_CLIENTLIB_MIXED

constexpr int kProcs = 2;

std::size_t append_body(char* data, std::size_t size, std::size_t nmemb,
                        void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

// The payload sizes, 0 B to 1 MiB (PostgreSQL's share stops at 100 KB).
constexpr std::size_t kSizes[] = {0,     1,      511,    8192,    65536,
                                  99999, 100000, 262144, 1 << 20, 3000};

// 300 goroutines: a hundred each run PostgreSQL echo queries, Redis SET/GET
// (single and pipelined) and curl fetches, at the same time.
TEST(ClientlibMixed, AllLibrariesAtOnce) {
  const auto& pg = clientlib::postgres();
  if (!pg.ok) GTEST_SKIP() << pg.why;
  const auto& rs = clientlib::redis();
  if (!rs.ok) GTEST_SKIP() << rs.why;
  curl_global_init(CURL_GLOBAL_ALL);
  clientlib::watchdog wd("ClientlibMixed.AllLibrariesAtOnce", 100s);
  constexpr int n = 300, per = 8;
  const std::string info = clientlib::pg_conninfo();
  const std::string sock = rs.socket_path;
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::atomic<long> checked[3] = {0, 0, 0};
  std::atomic<long> bytes{0};
  std::string main_error;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  auto t0 = clientlib::steady::now();
  goro::run(opt, [&] {
    goro::net::listener ln;
    try {
      ln = goro::net::listen("127.0.0.1:0");
    } catch (const std::exception& e) {
      main_error = std::string("listen: ") + e.what();
      return;
    }
    const std::string base = "http://" + ln.addr().str();
    goro::wait_group served, conns;
    served.go([&] {
      clientlib::serve_counted(
          ln,
          [](const http::request& r) {
            // /blob/SEED/SIZE: payload(SEED, SIZE).
            http::response out;
            char* end = nullptr;
            unsigned long seed = std::strtoul(r.url.c_str() + 6, &end, 10);
            unsigned long size = std::strtoul(end + 1, nullptr, 10);
            out.body = clientlib::payload(seed, std::min(size, 1ul << 20));
            return out;
          },
          conns);
    });

    auto pg_worker = [&](int i) {
      PGconn* c = PQconnectdb(info.c_str());
      if (PQstatus(c) != CONNECTION_OK) {
        fail.add(std::string("pg connect: ") + PQerrorMessage(c));
        PQfinish(c);
        return;
      }
      for (int j = 0; j < per; j++) {
        std::size_t size =
            std::min<std::size_t>(kSizes[(i + j) % std::size(kSizes)], 100000);
        std::string p = clientlib::payload(i * 100 + j, size);
        const char* v[] = {p.c_str()};
        PGresult* r = PQexecParams(c, "SELECT $1::text", 1, nullptr, v, nullptr,
                                   nullptr, 0);
        if (PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
            std::size_t(PQgetlength(r, 0, 0)) == size &&
            std::string(PQgetvalue(r, 0, 0), size) == p) {
          checked[0].fetch_add(1);
          bytes.fetch_add(long(size));
        } else {
          fail.add("pg echo of " + std::to_string(size) +
                   " bytes: " + PQresultErrorMessage(r));
        }
        PQclear(r);
      }
      PQfinish(c);
    };

    auto redis_worker = [&](int i) {
      redisContext* c = redisConnectUnix(sock.c_str());
      if (c == nullptr || c->err) {
        fail.add(std::string("redis connect: ") + (c ? c->errstr : "oom"));
        if (c) redisFree(c);
        return;
      }
      // Two SET/GET pairs written before the first reply is read.
      auto get_reply = [&](redisReply** r) {
        void* p = nullptr;
        if (redisGetReply(c, &p) != REDIS_OK) {
          fail.add(std::string("redis reply: ") + c->errstr);
          return false;
        }
        *r = static_cast<redisReply*>(p);
        return true;
      };
      for (int j = 0; j < per; j += 2) {
        std::string vals[2];
        for (int m = 0; m < 2; m++) {
          std::size_t size = kSizes[(i + j + m) % std::size(kSizes)];
          vals[m] = clientlib::payload(i * 100 + j + m, size);
          std::string k =
              "goro:mixed:" + std::to_string(i) + ":" + std::to_string(j + m);
          redisAppendCommand(c, "SET %s %b", k.c_str(), vals[m].data(),
                             vals[m].size());
          redisAppendCommand(c, "GET %s", k.c_str());
        }
        for (int m = 0; m < 2; m++) {
          redisReply* r = nullptr;
          if (!get_reply(&r)) break;
          if (r->type != REDIS_REPLY_STATUS) fail.add("redis SET failed");
          freeReplyObject(r);
          if (!get_reply(&r)) break;
          if (r->type == REDIS_REPLY_STRING && r->len == vals[m].size() &&
              std::string(r->str, r->len) == vals[m]) {
            checked[1].fetch_add(1);
            bytes.fetch_add(long(vals[m].size()));
          } else {
            fail.add("redis GET: wrong value");
          }
          freeReplyObject(r);
        }
      }
      redisFree(c);
    };

    auto curl_worker = [&](int i) {
      CURL* h = curl_easy_init();
      curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
      curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, append_body);
      curl_easy_setopt(h, CURLOPT_TIMEOUT, 80L);
      std::string body;
      curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
      for (int j = 0; j < per; j++) {
        std::size_t size = kSizes[(i + j) % std::size(kSizes)];
        std::uint64_t seed = 7000 + i * 100 + j;
        std::string url =
            base + "/blob/" + std::to_string(seed) + "/" + std::to_string(size);
        body.clear();
        curl_easy_setopt(h, CURLOPT_URL, url.c_str());
        CURLcode rc = curl_easy_perform(h);
        if (rc != CURLE_OK) {
          fail.add(url + ": " + curl_easy_strerror(rc));
        } else if (body != clientlib::payload(seed, size)) {
          fail.add(url + ": " + std::to_string(body.size()) +
                   " bytes, not the ones sent");
        } else {
          checked[2].fetch_add(1);
          bytes.fetch_add(long(size));
        }
      }
      curl_easy_cleanup(h);
    };

    goro::wait_group wg;
    std::atomic<int> left{n};
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        switch (i % 3) {
          case 0:
            pg_worker(i);
            break;
          case 1:
            redis_worker(i);
            break;
          default:
            curl_worker(i);
        }
        left.fetch_sub(1);
        wg.done();
      });
    }
    while (left.load() > 0) {
      peak.sample();
      goro::sleep(10ms);  // sampling the thread count, not synchronising
    }
    wg.wait();
    ln.close();
    served.wait();
    conns.wait();  // every client has closed its connection
  });
  double ms =
      std::chrono::duration<double, std::milli>(clientlib::steady::now() - t0)
          .count();
  std::printf(
      "[ClientlibMixed] %ld pg + %ld redis + %ld curl results (%ld "
      "bytes) checked in %.0f ms; peak %d OS threads\n",
      checked[0].load(), checked[1].load(), checked[2].load(), bytes.load(), ms,
      peak.peak());
  RecordProperty("elapsed_ms", static_cast<int>(ms));
  RecordProperty("peak_threads", peak.peak());
  ASSERT_EQ(main_error, "");
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(checked[0].load(), long(n / 3) * per);
  EXPECT_EQ(checked[1].load(), long(n / 3) * per);
  EXPECT_EQ(checked[2].load(), long(n / 3) * per);
  EXPECT_LE(peak.peak(), clientlib::data_thread_bound);
}

#else

TEST(ClientlibMixed, AllLibrariesAtOnce) {
  GTEST_SKIP() << "needs libpq, hiredis, libcurl (scripts/deps.sh clients) "
                  "and http-parser, not all found at configure time";
}

#endif

}  // namespace
