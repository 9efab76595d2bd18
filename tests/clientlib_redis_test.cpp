// hiredis's blocking API in goroutines against a real redis-server (goro
// issue 24: plain blocking socket calls park the goroutine on the network
// poller, the thread goes on running others).
//
// The server is started once per test process on a Unix socket in a
// temporary directory (tests/clientlib_servers.hpp) and always stopped.
// Needs redis-server and libhiredis-dev (scripts/deps.sh clients); without
// them the tests skip, saying why. Run them alone with
//   cmake --build --preset default --target clientlib_redis_test
//   ./build/default/tests/clientlib_redis_test
// The concurrency test holds 1000 BLPOPs in flight at once on
// GOMAXPROCS = 2 and checks that the process has at most 2*GOMAXPROCS+8 OS
// threads meanwhile: with the libc interposition off
// (GORO_DEBUG=interpose=0) each blocked BLPOP holds a thread and it fails
// (hangs until the watchdog). Elapsed times are printed, never asserted.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "clientlib_servers.hpp"

#ifdef GORO_HAVE_HIREDIS
#include <hiredis/hiredis.h>
#endif

namespace {

using namespace std::chrono_literals;

#ifdef GORO_HAVE_HIREDIS

constexpr int kProcs = 2;

// A connection that is freed at scope exit.
struct redis_conn {
  redisContext* c;
  explicit redis_conn(const std::string& sock)
      : c(redisConnectUnix(sock.c_str())) {}
  ~redis_conn() {
    if (c != nullptr) redisFree(c);
  }
  redis_conn(const redis_conn&) = delete;
  redis_conn& operator=(const redis_conn&) = delete;
  bool ok() const { return c != nullptr && c->err == 0; }
  std::string error() const {
    return c == nullptr ? "out of memory" : std::string(c->errstr);
  }
};

// A reply that is freed at scope exit.
struct reply {
  redisReply* r;
  explicit reply(void* p) : r(static_cast<redisReply*>(p)) {}
  ~reply() {
    if (r != nullptr) freeReplyObject(r);
  }
  reply(const reply&) = delete;
  reply& operator=(const reply&) = delete;
  bool is(int type) const { return r != nullptr && r->type == type; }
  std::string str() const { return r ? std::string(r->str, r->len) : ""; }
};

// The value of `field:` in an INFO reply, or -1.
long info_field(const std::string& info, const std::string& field) {
  std::size_t at = info.find(field + ":");
  if (at == std::string::npos) return -1;
  return std::atol(info.c_str() + at + field.size() + 1);
}

#define SKIP_WITHOUT_REDIS()             \
  do {                                   \
    const auto& r_ = clientlib::redis(); \
    if (!r_.ok) GTEST_SKIP() << r_.why;  \
  } while (0)

// 1000 goroutines, a connection each, all in BLPOP on their own list at
// once (the server counts them as blocked clients); then a producer pushes
// a distinct value to every list and each goroutine must get exactly its
// own.
TEST(ClientlibRedis, ThousandBlpopsAtOnce) {
  SKIP_WITHOUT_REDIS();
  clientlib::watchdog wd("ClientlibRedis.ThousandBlpopsAtOnce", 90s);
  constexpr int n = 1000;
  const std::string sock = clientlib::redis().socket_path;
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::vector<std::string> got(n);
  std::atomic<int> gone{0};  // goroutines that could not BLPOP
  long blocked_seen = 0;
  int threads_at_peak = 0;
  std::string main_error;
  double wait_ms = 0, deliver_ms = 0;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  goro::run(opt, [&] {
    redis_conn m(sock);
    if (!m.ok()) {
      main_error = "main connection: " + m.error();
      return;
    }
    goro::wait_group wg;
    auto t0 = clientlib::steady::now();
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        redis_conn c(sock);
        if (!c.ok()) {
          fail.add("connect " + std::to_string(i) + ": " + c.error());
          gone.fetch_add(1);
          wg.done();
          return;
        }
        std::string key = "goro:blpop:" + std::to_string(i);
        reply r(redisCommand(c.c, "BLPOP %s 0", key.c_str()));
        if (!r.is(REDIS_REPLY_ARRAY) || r.r->elements != 2) {
          fail.add("BLPOP " + key + ": " +
                   (r.r ? "unexpected reply " + r.str() : c.error()));
        } else if (std::string(r.r->element[0]->str, r.r->element[0]->len) !=
                   key) {
          fail.add("BLPOP " + key + ": popped from another list");
        } else {
          got[i].assign(r.r->element[1]->str, r.r->element[1]->len);
        }
        wg.done();
      });
    }
    auto deadline = clientlib::steady::now() + 60s;
    for (;;) {
      peak.sample();
      reply r(redisCommand(m.c, "INFO clients"));
      if (!r.is(REDIS_REPLY_STRING)) {
        main_error = "INFO clients: " + (r.r ? r.str() : m.error());
        break;
      }
      blocked_seen = info_field(r.str(), "blocked_clients");
      if (blocked_seen + gone.load() >= n) break;
      if (clientlib::steady::now() > deadline) break;
      goro::sleep(20ms);  // polling the server's view: nothing to wait on
    }
    auto t1 = clientlib::steady::now();
    threads_at_peak = peak.sample();
    std::printf(
        "[ClientlibRedis] %ld of %d BLPOPs blocked at once, %d OS "
        "threads\n",
        blocked_seen, n, threads_at_peak);
    // The producer: one pipelined LPUSH per list, on main's connection.
    for (int i = 0; i < n; i++) {
      std::string key = "goro:blpop:" + std::to_string(i);
      std::string value = "value-" + std::to_string(i) + "-" +
                          clientlib::payload(i, 16 + i % 50);
      redisAppendCommand(m.c, "LPUSH %s %b", key.c_str(), value.data(),
                         value.size());
    }
    for (int i = 0; i < n; i++) {
      void* p = nullptr;
      if (redisGetReply(m.c, &p) != REDIS_OK) {
        main_error = "LPUSH reply: " + m.error();
        break;
      }
      reply r(p);
      if (!r.is(REDIS_REPLY_INTEGER)) fail.add("LPUSH: " + r.str());
    }
    wg.wait();
    deliver_ms =
        std::chrono::duration<double, std::milli>(clientlib::steady::now() - t1)
            .count();
    wait_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    peak.sample();
  });

  std::printf(
      "[ClientlibRedis] all blocked after %.0f ms, all delivered %.0f "
      "ms later; peak %d OS threads\n",
      wait_ms, deliver_ms, peak.peak());
  RecordProperty("blocked", static_cast<int>(blocked_seen));
  RecordProperty("threads", threads_at_peak);
  RecordProperty("peak_threads", peak.peak());
  RecordProperty("connect_and_block_ms", static_cast<int>(wait_ms));
  ASSERT_EQ(main_error, "");
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(blocked_seen, n) << "BLPOPs blocked at once";
  EXPECT_LE(threads_at_peak, clientlib::thread_bound(kProcs))
      << "OS threads with " << blocked_seen << " BLPOPs in flight";
  EXPECT_LE(peak.peak(), clientlib::thread_bound(kProcs));
  int wrong = 0;
  for (int i = 0; i < n; i++) {
    wrong += got[i] != "value-" + std::to_string(i) + "-" +
                           clientlib::payload(i, 16 + i % 50);
  }
  EXPECT_EQ(wrong, 0) << "goroutines without exactly their value";
}

// Data under load: 200 goroutines, a connection each, SET then GET of
// payloads of 0 B to 1 MiB, one by one and pipelined (20 SETs and 20 GETs
// written before the first reply is read); every reply compared byte for
// byte.
TEST(ClientlibRedis, PayloadsUnderLoad) {
  SKIP_WITHOUT_REDIS();
  clientlib::watchdog wd("ClientlibRedis.PayloadsUnderLoad", 90s);
  constexpr int n = 200, rounds = 6, batch = 20;
  const std::size_t sizes[] = {0,     1,     100,    4095,    4096,
                               16385, 65536, 300000, 1 << 20, 777};
  const std::string sock = clientlib::redis().socket_path;
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::atomic<long> checked{0}, bytes{0};

  goro::options opt;
  opt.gomaxprocs = kProcs;
  auto t0 = clientlib::steady::now();
  goro::run(opt, [&] {
    goro::wait_group wg;
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        redis_conn c(sock);
        if (!c.ok()) {
          fail.add("connect: " + c.error());
          wg.done();
          return;
        }
        auto key = [i](int j) {
          return "goro:data:" + std::to_string(i) + ":" + std::to_string(j);
        };
        // Big payloads are rarer: a 1 MiB one in every goroutine's first
        // rounds only.
        auto size_of = [&](int j) {
          std::size_t s = sizes[(i + j) % std::size(sizes)];
          return j >= 2 && s > 65536 ? s / 16 : s;
        };
        auto check = [&](redisReply* r, int j, const std::string& want) {
          if (r == nullptr || r->type != REDIS_REPLY_STRING ||
              r->len != want.size() || std::string(r->str, r->len) != want) {
            fail.add("GET " + key(j) + ": wrong value (" +
                     std::to_string(want.size()) + " bytes expected)");
            return;
          }
          checked.fetch_add(1);
          bytes.fetch_add(long(want.size()));
        };
        for (int j = 0; j < rounds; j++) {  // one command at a time
          std::string v = clientlib::payload(i * 100 + j, size_of(j));
          reply s(redisCommand(c.c, "SET %s %b", key(j).c_str(), v.data(),
                               v.size()));
          if (!s.is(REDIS_REPLY_STATUS) || s.str() != "OK") {
            fail.add("SET " + key(j) + ": " + (s.r ? s.str() : c.error()));
            continue;
          }
          reply g(redisCommand(c.c, "GET %s", key(j).c_str()));
          check(g.r, j, v);
          peak.sample();
        }
        // Pipelined: all the SETs and GETs out before any reply is read.
        std::vector<std::string> vals;
        for (int j = 0; j < batch; j++) {
          vals.push_back(
              clientlib::payload(i * 100 + 50 + j, size_of(j + 2) / 4 + j));
          std::string k = key(50 + j);
          redisAppendCommand(c.c, "SET %s %b", k.c_str(), vals[j].data(),
                             vals[j].size());
        }
        for (int j = 0; j < batch; j++)
          redisAppendCommand(c.c, "GET %s", key(50 + j).c_str());
        for (int j = 0; j < 2 * batch; j++) {
          void* p = nullptr;
          if (redisGetReply(c.c, &p) != REDIS_OK) {
            fail.add("pipelined reply: " + c.error());
            break;
          }
          reply r(p);
          if (j < batch) {
            if (!r.is(REDIS_REPLY_STATUS)) fail.add("pipelined SET failed");
          } else {
            check(r.r, 50 + j - batch, vals[j - batch]);
          }
        }
        wg.done();
      });
    }
    wg.wait();
  });
  double ms =
      std::chrono::duration<double, std::milli>(clientlib::steady::now() - t0)
          .count();
  std::printf(
      "[ClientlibRedis] %ld replies (%ld bytes) checked in %.0f ms; "
      "peak %d OS threads\n",
      checked.load(), bytes.load(), ms, peak.peak());
  RecordProperty("elapsed_ms", static_cast<int>(ms));
  RecordProperty("peak_threads", peak.peak());
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(checked.load(), long(n) * (rounds + batch));
  EXPECT_LE(peak.peak(), clientlib::data_thread_bound);
}

#else  // !GORO_HAVE_HIREDIS

TEST(ClientlibRedis, ThousandBlpopsAtOnce) {
  GTEST_SKIP() << "hiredis (libhiredis-dev) was not found at configure time";
}
TEST(ClientlibRedis, PayloadsUnderLoad) {
  GTEST_SKIP() << "hiredis (libhiredis-dev) was not found at configure time";
}

#endif

}  // namespace
