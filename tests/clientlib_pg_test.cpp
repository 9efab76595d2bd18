// libpq's blocking API in goroutines against a real PostgreSQL 15 (goro
// issue 24: plain blocking socket calls park the goroutine on the network
// poller, the thread goes on running others).
//
// The server is a throw-away cluster (tests/clientlib_servers.hpp: initdb
// in a temporary directory, a Unix socket, max_connections 1100), started
// once per test process and always stopped. Needs postgresql-15 and
// libpq-dev (scripts/deps.sh clients); without them the tests skip, saying
// why. Run them alone with
//   cmake --build --preset default --target clientlib_pg_test
//   ./build/default/tests/clientlib_pg_test
// (as root, PostgreSQL runs as the `postgres` user). The concurrency tests
// hold 1000 queries in flight at once on GOMAXPROCS = 2 and check that the
// process has at most 2*GOMAXPROCS+8 OS threads meanwhile: with the libc
// interposition off (GORO_DEBUG=interpose=0) each blocked query holds a
// thread and they fail. Elapsed times are printed (and recorded as test
// properties), never asserted: speed targets live in bench/.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "clientlib_servers.hpp"

#ifdef GORO_HAVE_LIBPQ
#include <libpq-fe.h>
#endif

namespace {

using namespace std::chrono_literals;

#ifdef GORO_HAVE_LIBPQ

constexpr int kProcs = 2;

// PQconnectdb, at most clientlib::pg_connects_at_once at a time when given
// `slots` (a channel with that capacity).
PGconn* connect_limited(const std::string& info, goro::chan<void> slots) {
  slots.send();
  PGconn* c = PQconnectdb(info.c_str());
  slots.recv();
  return c;
}

goro::chan<void> connect_slots() {
  return goro::make_chan<void>(clientlib::pg_connects_at_once);
}

// A connection that is closed at scope exit.
struct pg_conn {
  PGconn* c;
  explicit pg_conn(const std::string& info) : c(PQconnectdb(info.c_str())) {}
  pg_conn(const std::string& info, goro::chan<void> slots)
      : c(connect_limited(info, slots)) {}
  ~pg_conn() { PQfinish(c); }
  pg_conn(const pg_conn&) = delete;
  pg_conn& operator=(const pg_conn&) = delete;
  bool ok() const { return c != nullptr && PQstatus(c) == CONNECTION_OK; }
  std::string error() const {
    return c == nullptr ? "out of memory" : PQerrorMessage(c);
  }
};

// Runs sql (no parameters) and returns the first column of the first row,
// or "ERROR: ..." when it failed.
std::string query1(PGconn* c, const char* sql) {
  PGresult* r = PQexec(c, sql);
  std::string out;
  if (PQresultStatus(r) != PGRES_TUPLES_OK)
    out = std::string("ERROR: ") + PQresultErrorMessage(r);
  else if (PQntuples(r) < 1)
    out = "ERROR: no row";
  else
    out = PQgetvalue(r, 0, 0);
  PQclear(r);
  return out;
}

// Runs sql with text parameters; the result (owned by the caller) or
// nullptr after recording the error.
PGresult* query(PGconn* c, const char* sql, std::vector<std::string> params,
                clientlib::failures& fail, const char* what) {
  std::vector<const char*> values;
  for (const auto& p : params) values.push_back(p.c_str());
  PGresult* r = PQexecParams(c, sql, static_cast<int>(values.size()), nullptr,
                             values.data(), nullptr, nullptr, 0);
  if (PQresultStatus(r) != PGRES_TUPLES_OK) {
    fail.add(std::string(what) + ": " + PQresultErrorMessage(r));
    PQclear(r);
    return nullptr;
  }
  return r;
}

// Polls pg_locks on m (bounded: 60 s) until `want` sessions wait for the
// advisory lock `key`, or want minus the goroutines that ended early
// (*gone); the last count seen, or -1 after an error (*err set).
int wait_for_lock_waiters(PGconn* m, int key, int want,
                          const std::atomic<int>& gone,
                          clientlib::thread_peak& peak, std::string* err) {
  const std::string sql =
      "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND "
      "objid = " +
      std::to_string(key) + " AND NOT granted";
  auto deadline = clientlib::steady::now() + 60s;
  for (;;) {
    peak.sample();
    std::string w = query1(m, sql.c_str());
    if (w.rfind("ERROR", 0) == 0) {
      *err = "pg_locks: " + w;
      return -1;
    }
    int seen = std::atoi(w.c_str());
    if (seen + gone.load() >= want || clientlib::steady::now() > deadline)
      return seen;
    goro::sleep(20ms);  // polling the server's view: nothing to wait on
  }
}

#define SKIP_WITHOUT_POSTGRES()              \
  do {                                       \
    const auto& pg_ = clientlib::postgres(); \
    if (!pg_.ok) GTEST_SKIP() << pg_.why;    \
  } while (0)

// 1000 goroutines, a connection each, all waiting at once on an advisory
// lock that the main goroutine holds: 1000 blocking PQexecParams in flight
// together, on 2 Ps and a bounded number of threads; then released, and
// every goroutine's answer checked.
TEST(ClientlibPg, ThousandQueriesWaitOnOneLock) {
  SKIP_WITHOUT_POSTGRES();
  clientlib::watchdog wd("ClientlibPg.ThousandQueriesWaitOnOneLock", 100s);
  constexpr int n = 1000;
  const std::string info = clientlib::pg_conninfo();
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::vector<int> answer(n, -1);
  std::atomic<int> gone{0};  // goroutines that ended before their query
  int waiters_seen = 0;
  int threads_at_peak = 0;
  std::string main_error;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  goro::run(opt, [&] {
    pg_conn m(info);
    if (!m.ok()) {
      main_error = "main connection: " + m.error();
      return;
    }
    if (std::string r = query1(m.c, "SELECT pg_advisory_lock(1)::text");
        r.rfind("ERROR", 0) == 0) {
      main_error = "pg_advisory_lock: " + r;
      return;
    }
    goro::wait_group wg;
    auto slots = connect_slots();
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        pg_conn c(info, slots);
        if (!c.ok()) {
          fail.add("connect " + std::to_string(i) + ": " + c.error());
          gone.fetch_add(1);
          wg.done();
          return;
        }
        // A transaction-level shared lock: waits for main's exclusive one,
        // released when the statement's transaction ends.
        PGresult* r =
            query(c.c, "SELECT pg_advisory_xact_lock_shared(1)::text, $1::int",
                  {std::to_string(i)}, fail, "query");
        if (r == nullptr) {
          gone.fetch_add(1);
        } else {
          if (PQntuples(r) == 1 && PQnfields(r) == 2)
            answer[i] = std::atoi(PQgetvalue(r, 0, 1));
          PQclear(r);
        }
        wg.done();
      });
    }
    // Until all n wait on the lock (or the ones that did not are known).
    waiters_seen = wait_for_lock_waiters(m.c, 1, n, gone, peak, &main_error);
    threads_at_peak = peak.sample();
    std::printf(
        "[ClientlibPg] %d of %d queries waiting at once, %d OS threads\n",
        waiters_seen, n, threads_at_peak);
    query1(m.c, "SELECT pg_advisory_unlock(1)::text");
    wg.wait();
    peak.sample();
  });

  RecordProperty("waiters", waiters_seen);
  RecordProperty("threads", threads_at_peak);
  RecordProperty("peak_threads", peak.peak());
  ASSERT_EQ(main_error, "");
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(waiters_seen, n) << "queries waiting on the lock at once";
  EXPECT_LE(threads_at_peak, clientlib::thread_bound(kProcs))
      << "OS threads with " << waiters_seen << " queries in flight";
  EXPECT_LE(peak.peak(), clientlib::thread_bound(kProcs));
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += answer[i] != i;
  EXPECT_EQ(wrong, 0) << "goroutines without their own answer";
}

// The workload: 1000 goroutines, a connection each, all running
// SELECT pg_sleep(0.2) at once; every row comes back, the thread count
// stays bounded. The elapsed time of the query phase is printed.
TEST(ClientlibPg, ThousandSleepQueriesAtOnce) {
  SKIP_WITHOUT_POSTGRES();
  clientlib::watchdog wd("ClientlibPg.ThousandSleepQueriesAtOnce", 100s);
  constexpr int n = 1000;
  const std::string info = clientlib::pg_conninfo();
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::vector<int> answer(n, -1);
  double connect_ms = 0, query_ms = 0;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  goro::run(opt, [&] {
    goro::wait_group connected, finished;
    std::atomic<int> left{n};
    auto start = goro::make_chan<void>();
    auto slots = connect_slots();
    auto t0 = clientlib::steady::now();
    for (int i = 0; i < n; i++) {
      connected.add(1);
      finished.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i, start] {
        pg_conn c(info, slots);
        bool ok = c.ok();
        if (!ok) fail.add("connect " + std::to_string(i) + ": " + c.error());
        // A fresh backend's first query loads its catalog caches (1000 of
        // them at once cost seconds of the server's CPU): done before the
        // clock starts, as the benchmarks do.
        if (ok) ok = query1(c.c, "SELECT 1") == "1";
        connected.done();
        start.recv();  // closed by main once all have connected
        if (ok) {
          PGresult* r = query(c.c, "SELECT pg_sleep(0.2)::text, $1::int",
                              {std::to_string(i)}, fail, "pg_sleep");
          if (r != nullptr) {
            if (PQntuples(r) == 1) answer[i] = std::atoi(PQgetvalue(r, 0, 1));
            PQclear(r);
          }
        }
        left.fetch_sub(1);
        finished.done();
      });
    }
    connected.wait();
    auto t1 = clientlib::steady::now();
    peak.sample();
    start.close();
    // Sample the threads while the queries are out.
    while (left.load() > 0) {
      peak.sample();
      goro::sleep(5ms);
    }
    finished.wait();
    auto t2 = clientlib::steady::now();
    peak.sample();
    connect_ms = std::chrono::duration<double, std::milli>(t1 - t0).count();
    query_ms = std::chrono::duration<double, std::milli>(t2 - t1).count();
  });

  std::printf(
      "[ClientlibPg] %d connections in %.0f ms; %d x pg_sleep(0.2) in %.0f ms; "
      "peak %d OS threads\n",
      n, connect_ms, n, query_ms, peak.peak());
  RecordProperty("connect_ms", static_cast<int>(connect_ms));
  RecordProperty("query_ms", static_cast<int>(query_ms));
  RecordProperty("peak_threads", peak.peak());
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_LE(peak.peak(), clientlib::thread_bound(kProcs));
  int wrong = 0;
  for (int i = 0; i < n; i++) wrong += answer[i] != i;
  EXPECT_EQ(wrong, 0) << "queries without their row";
}

// Data under load: 200 goroutines, a connection each, 15 queries each
// echoing parameters of 0 B to 100 KB through the server; every byte of
// every result is compared. The first query of every goroutine waits on an
// advisory lock that main holds until all 200 are in: 200 queries, their
// parameters sent, in flight at once.
TEST(ClientlibPg, EchoedParametersUnderLoad) {
  SKIP_WITHOUT_POSTGRES();
  clientlib::watchdog wd("ClientlibPg.EchoedParametersUnderLoad", 100s);
  constexpr int n = 200, per = 15;
  const std::size_t sizes[] = {0, 1, 17, 1000, 8191, 8192, 65536, 100000};
  const std::string info = clientlib::pg_conninfo();
  clientlib::failures fail;
  clientlib::thread_peak peak;
  std::atomic<long> checked{0}, bytes{0};
  std::atomic<int> gone{0};  // goroutines without a connection
  int waiters_seen = 0;
  std::string main_error;

  goro::options opt;
  opt.gomaxprocs = kProcs;
  auto t0 = clientlib::steady::now();
  goro::run(opt, [&] {
    pg_conn m(info);
    if (!m.ok()) {
      main_error = "main connection: " + m.error();
      return;
    }
    if (std::string r = query1(m.c, "SELECT pg_advisory_lock(2)::text");
        r.rfind("ERROR", 0) == 0) {
      main_error = "pg_advisory_lock: " + r;
      return;
    }
    goro::wait_group wg;
    auto slots = connect_slots();
    for (int i = 0; i < n; i++) {
      wg.add(1);
      goro::go(goro::go_options{clientlib::client_stack_size}, [&, i] {
        pg_conn c(info, slots);
        if (!c.ok()) {
          fail.add("connect: " + c.error());
          gone.fetch_add(1);
          wg.done();
          return;
        }
        for (int j = 0; j < per; j++) {
          std::size_t size = sizes[(i + j) % std::size(sizes)];
          std::string p = clientlib::payload(i * 1000 + j, size);
          PGresult* r =
              query(c.c,
                    j == 0 ? "SELECT $1::text, length($1::text), $2::int, "
                             "pg_advisory_xact_lock_shared(2)::text"
                           : "SELECT $1::text, length($1::text), $2::int",
                    {p, std::to_string(j)}, fail, "echo");
          if (r == nullptr) continue;
          bool ok = PQntuples(r) == 1 &&
                    static_cast<std::size_t>(PQgetlength(r, 0, 0)) == size &&
                    std::string(PQgetvalue(r, 0, 0), size) == p &&
                    std::atol(PQgetvalue(r, 0, 1)) == long(size) &&
                    std::atoi(PQgetvalue(r, 0, 2)) == j;
          PQclear(r);
          if (!ok) {
            fail.add("goroutine " + std::to_string(i) + " query " +
                     std::to_string(j) + ": wrong result for " +
                     std::to_string(size) + " bytes");
          } else {
            checked.fetch_add(1);
            bytes.fetch_add(long(size));
          }
          if (j % 5 == 0) peak.sample();
        }
        wg.done();
      });
    }
    waiters_seen = wait_for_lock_waiters(m.c, 2, n, gone, peak, &main_error);
    query1(m.c, "SELECT pg_advisory_unlock(2)::text");
    wg.wait();
  });
  double ms =
      std::chrono::duration<double, std::milli>(clientlib::steady::now() - t0)
          .count();
  std::printf(
      "[ClientlibPg] %d echo queries in flight at once; %ld results (%ld "
      "bytes) checked in %.0f ms; peak %d OS threads\n",
      waiters_seen, checked.load(), bytes.load(), ms, peak.peak());
  RecordProperty("elapsed_ms", static_cast<int>(ms));
  RecordProperty("peak_threads", peak.peak());
  ASSERT_EQ(main_error, "");
  EXPECT_EQ(fail.count(), 0) << fail.first();
  EXPECT_EQ(waiters_seen, n) << "echo queries in flight at once";
  EXPECT_EQ(checked.load(), long(n) * per);
  EXPECT_LE(peak.peak(), clientlib::data_thread_bound);
}

#else  // !GORO_HAVE_LIBPQ

TEST(ClientlibPg, ThousandQueriesWaitOnOneLock) {
  GTEST_SKIP() << "libpq (libpq-dev) was not found at configure time";
}
TEST(ClientlibPg, ThousandSleepQueriesAtOnce) {
  GTEST_SKIP() << "libpq (libpq-dev) was not found at configure time";
}
TEST(ClientlibPg, EchoedParametersUnderLoad) {
  GTEST_SKIP() << "libpq (libpq-dev) was not found at configure time";
}

#endif

}  // namespace
