// goro_clientlib_bench: blocking C client libraries (libpq, hiredis) driven
// from many goroutines, each with its own connection, against one OS thread
// per connection. The libraries make plain blocking socket calls (recv,
// send, poll, connect...); in a goroutine libgoro's interposed versions park
// the goroutine on the network poller instead of blocking its thread
// (issue 24), so N connections need GOMAXPROCS threads, not N.
//
//   goro_clientlib_bench pg|redis [options]
//     --mode goro|threads   goroutines (GOMAXPROCS from the environment, as
//                           usual) or one std::thread per connection
//     --conns N             connections, one goroutine or thread each (100)
//     --duration S          measured seconds (decimal; 3)
//     --pg CONNINFO         libpq connection string ($PG_CONNINFO)
//     --redis-sock PATH     redis-server's Unix socket ($REDIS_SOCK)
//
// Every connection is opened first (all of them, concurrently) and makes
// one warm-up operation; then the clock starts and every worker runs operations
// back to back until the shared deadline. pg: one `SELECT $1::int`
// (PQexecParams, one round trip: Parse/Bind/Describe/Execute/Sync) with the
// answer checked; redis: SET and GET of the connection's own key alternately
// (one round trip each), answers checked. Prints the protocol of bench/ (RESULT
// name value unit): rate (operations completed by the deadline per second),
// p50_us/p99_us (every operation's latency),
// hwm_kib (peak RSS, ru_maxrss), threads_max (the most entries /proc/self/task
// had, sampled every 2 ms, the sampler's own thread not counted), cpu_us_per_op
// (the process's user + system CPU time of the measured phase per
// operation: what the client itself costs), minflt and
// majflt (page faults of the whole run), drain_ms (from the deadline to the
// last operation's end), connect_ms, max_us (the slowest operation),
// conn_ops_min and conn_ops_mean (operations per connection in the window:
// the fewest, the mean), starved (connections
// that completed no operation in the measured time: a runtime that lets a
// blocked call hold its thread serves a few connections only), errors. Its Go
// twin is bench/go/clientlib (database/sql + lib/pq, redigo) with the same
// output.
#include <dirent.h>
#include <hiredis/hiredis.h>
#include <libpq-fe.h>
#include <sys/resource.h>

#include <atomic>
#include <bit>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;

// Latency histogram shared by every worker: 16 buckets per power of two of
// nanoseconds (about 6% wide), counters bumped with relaxed atomic adds
// (only the totals matter, read after every worker has joined). The Go twin
// has the same layout, so that both sides pay the same per operation.
struct histogram {
  static constexpr int sub_bits = 4;
  static constexpr int buckets = (64 - sub_bits + 1) << sub_bits;
  std::atomic<std::uint64_t> count[buckets] = {};

  static int index(std::uint64_t ns) {
    if (ns < (1u << sub_bits)) return static_cast<int>(ns);
    int msb = 63 - std::countl_zero(ns);
    int shift = msb - sub_bits;
    return ((shift + 1) << sub_bits) +
           static_cast<int>((ns >> shift) & ((1u << sub_bits) - 1));
  }
  // The middle of bucket i, in nanoseconds.
  static double value(int i) {
    if (i < (1 << sub_bits)) return i;
    int shift = (i >> sub_bits) - 1;
    double lo = static_cast<double>((std::uint64_t{1} << sub_bits) |
                                    (i & ((1 << sub_bits) - 1))) *
                static_cast<double>(std::uint64_t{1} << shift);
    return lo + static_cast<double>(std::uint64_t{1} << shift) / 2;
  }
  void add(std::uint64_t ns) {
    count[index(ns)].fetch_add(1, std::memory_order_relaxed);
  }
  double quantile_us(double q) const {
    std::uint64_t total = 0;
    for (const auto& c : count) total += c.load(std::memory_order_relaxed);
    if (total == 0) return 0;
    auto rank = static_cast<std::uint64_t>(q * static_cast<double>(total));
    if (rank >= total) rank = total - 1;
    std::uint64_t seen = 0;
    for (int i = 0; i < buckets; ++i) {
      seen += count[i].load(std::memory_order_relaxed);
      if (seen > rank) return value(i) / 1000;
    }
    return 0;
  }
};

histogram g_hist;
std::atomic<std::uint64_t> g_ops{0};      // completed by the deadline
std::atomic<std::uint64_t> g_ops_all{0};  // the late ones too
std::atomic<std::uint64_t> g_errors{0};
std::atomic<std::uint64_t> g_starved{0};  // connections that did no operation
// The fewest operations one connection completed in the window (fairness:
// against the mean, rate * duration / N).
std::atomic<std::uint64_t> g_conn_min{UINT64_MAX};
clock_type::time_point g_deadline;  // written before the start signal

void result(const char* metric, double value, const char* unit) {
  std::printf("RESULT %s %.6g %s\n", metric, value, unit);
}

// Entries of /proc/self/task: the process's threads.
int thread_count() {
  DIR* d = opendir("/proc/self/task");
  if (d == nullptr) return 0;
  int n = 0;
  while (dirent* e = readdir(d))
    if (e->d_name[0] != '.') ++n;
  closedir(d);
  return n;
}

// Samples the thread count every 2 ms until stopped; max_seen excludes the
// sampler's own thread.
class thread_sampler {
 public:
  thread_sampler() : t_([this] { loop(); }) {}
  ~thread_sampler() { stop(); }
  int stop() {
    if (t_.joinable()) {
      {
        std::lock_guard<std::mutex> l(mu_);
        done_ = true;
      }
      cv_.notify_one();
      t_.join();
    }
    return max_seen_ - 1;
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> l(mu_);
    while (!done_) {
      int n = thread_count();
      if (n > max_seen_) max_seen_ = n;
      cv_.wait_for(l, std::chrono::milliseconds(2));
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  int max_seen_ = 0;
  std::thread t_;
};

struct config {
  std::string kind;
  std::string mode = "goro";
  int conns = 100;
  double duration_s = 3;
  std::string pg;
  std::string redis_sock;
};

// The measured loop: op() until the deadline, every latency recorded; the
// rate counts the operations completed by the deadline (the one in flight
// then finishes, and its latency counts, but not its operation).
template <class Op>
void measure(Op&& op) {
  std::uint64_t n = 0, all = 0;
  auto t0 = clock_type::now();
  while (t0 < g_deadline) {
    if (!op()) {
      g_errors.fetch_add(1, std::memory_order_relaxed);
      break;
    }
    auto t1 = clock_type::now();
    g_hist.add(static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count()));
    if (t1 <= g_deadline) ++n;  // completed within the measured window
    ++all;
    t0 = t1;
  }
  g_ops.fetch_add(n, std::memory_order_relaxed);
  g_ops_all.fetch_add(all, std::memory_order_relaxed);
  if (n == 0) g_starved.fetch_add(1, std::memory_order_relaxed);
  std::uint64_t m = g_conn_min.load(std::memory_order_relaxed);
  while (n < m &&
         !g_conn_min.compare_exchange_weak(m, n, std::memory_order_relaxed)) {
  }
}

// One pg worker: connect, one warm-up query (a fresh backend loads its
// catalog caches on its first query: not what is measured), wait_start(),
// then queries until the deadline.
template <class Start>
void pg_worker(const config& cfg, int id, Start&& wait_start) {
  PGconn* c = PQconnectdb(cfg.pg.c_str());
  bool ok = PQstatus(c) == CONNECTION_OK;
  if (!ok) {
    std::fprintf(stderr, "pg connect %d: %s", id, PQerrorMessage(c));
    g_errors.fetch_add(1, std::memory_order_relaxed);
  }
  std::uint32_t i = static_cast<std::uint32_t>(id) * 1000003u;
  auto op = [&] {
    char arg[16];
    int v = static_cast<int>(++i & 0x3fffffff);
    std::snprintf(arg, sizeof arg, "%d", v);
    const char* params[1] = {arg};
    PGresult* r = PQexecParams(c, "SELECT $1::int", 1, nullptr, params, nullptr,
                               nullptr, 0);
    bool good = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 &&
                std::atoi(PQgetvalue(r, 0, 0)) == v;
    if (!good) std::fprintf(stderr, "pg query %d: %s", id, PQerrorMessage(c));
    PQclear(r);
    return good;
  };
  if (ok && !op()) {
    ok = false;
    g_errors.fetch_add(1, std::memory_order_relaxed);
  }
  wait_start();
  if (ok) measure(op);
  PQfinish(c);
}

template <class Start>
void redis_worker(const config& cfg, int id, Start&& wait_start) {
  redisContext* c = redisConnectUnix(cfg.redis_sock.c_str());
  bool ok = c != nullptr && c->err == 0;
  if (!ok) {
    std::fprintf(stderr, "redis connect %d: %s\n", id,
                 c != nullptr ? c->errstr : "out of memory");
    g_errors.fetch_add(1, std::memory_order_relaxed);
  }
  char key[32];
  std::snprintf(key, sizeof key, "bench:%d", id);
  std::uint64_t i = 0;
  char val[32] = "0";
  auto op = [&] {
    bool set = (i++ & 1) == 0;
    redisReply* r;
    if (set) {
      std::snprintf(val, sizeof val, "%llu",
                    static_cast<unsigned long long>(i));
      r = static_cast<redisReply*>(redisCommand(c, "SET %s %s", key, val));
    } else {
      r = static_cast<redisReply*>(redisCommand(c, "GET %s", key));
    }
    bool good = r != nullptr && (set ? r->type == REDIS_REPLY_STATUS
                                     : r->type == REDIS_REPLY_STRING &&
                                           std::strcmp(r->str, val) == 0);
    if (!good)
      std::fprintf(stderr, "redis %s %d: %s\n", set ? "SET" : "GET", id,
                   r == nullptr ? c->errstr : "unexpected reply");
    if (r != nullptr) freeReplyObject(r);
    return good;
  };
  // One warm-up round trip (a SET), as on the pg side.
  if (ok && !op()) {
    ok = false;
    g_errors.fetch_add(1, std::memory_order_relaxed);
  }
  wait_start();
  if (ok) measure(op);
  if (c != nullptr) redisFree(c);
}

template <class Start>
void worker(const config& cfg, int id, Start&& wait_start) {
  if (cfg.kind == "pg")
    pg_worker(cfg, id, wait_start);
  else
    redis_worker(cfg, id, wait_start);
}

// Times of the phases, set by the runner.
// The process's user + system CPU time in seconds.
double cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

struct phases {
  clock_type::time_point begin, connected, end;
  double cpu_connected = 0, cpu_end = 0;  // cpu_seconds() then
};

phases run_goro(const config& cfg) {
  phases ph;
  goro::run([&] {
    goro::wait_group connected, finished;
    auto start = goro::make_chan<void>();
    ph.begin = clock_type::now();
    for (int i = 0; i < cfg.conns; ++i) {
      connected.add(1);
      finished.add(1);
      goro::go([&, i, start]() mutable {
        worker(cfg, i, [&] {
          connected.done();
          start.recv();  // closed by main: every worker starts
        });
        finished.done();
      });
    }
    connected.wait();
    ph.connected = clock_type::now();
    ph.cpu_connected = cpu_seconds();
    g_deadline =
        ph.connected + std::chrono::duration_cast<clock_type::duration>(
                           std::chrono::duration<double>(cfg.duration_s));
    start.close();  // publishes g_deadline (a channel close is a release)
    finished.wait();
    ph.end = clock_type::now();
    ph.cpu_end = cpu_seconds();
  });
  return ph;
}

phases run_threads(const config& cfg) {
  phases ph;
  std::mutex mu;
  std::condition_variable cv;
  int waiting = 0;
  bool go = false;
  std::vector<std::thread> ts;
  ts.reserve(static_cast<std::size_t>(cfg.conns));
  ph.begin = clock_type::now();
  for (int i = 0; i < cfg.conns; ++i) {
    ts.emplace_back([&, i] {
      worker(cfg, i, [&] {
        std::unique_lock<std::mutex> l(mu);
        if (++waiting == cfg.conns) cv.notify_all();
        cv.wait(l, [&] { return go; });
      });
    });
  }
  {
    std::unique_lock<std::mutex> l(mu);
    cv.wait(l, [&] { return waiting == cfg.conns; });
    ph.connected = clock_type::now();
    ph.cpu_connected = cpu_seconds();
    g_deadline =
        ph.connected + std::chrono::duration_cast<clock_type::duration>(
                           std::chrono::duration<double>(cfg.duration_s));
    go = true;  // g_deadline is published by the mutex
  }
  cv.notify_all();
  for (auto& t : ts) t.join();
  ph.end = clock_type::now();
  ph.cpu_end = cpu_seconds();
  return ph;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: goro_clientlib_bench pg|redis [--mode goro|threads] "
               "[--conns N] [--duration S] [--pg CONNINFO] "
               "[--redis-sock PATH]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) usage();
  config cfg;
  cfg.kind = argv[1];
  if (cfg.kind != "pg" && cfg.kind != "redis") usage();
  if (const char* e = std::getenv("PG_CONNINFO")) cfg.pg = e;
  if (const char* e = std::getenv("REDIS_SOCK")) cfg.redis_sock = e;
  for (int i = 2; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--mode")
      cfg.mode = v;
    else if (a == "--conns")
      cfg.conns = std::atoi(v.c_str());
    else if (a == "--duration")
      cfg.duration_s = std::atof(v.c_str());
    else if (a == "--pg")
      cfg.pg = v;
    else if (a == "--redis-sock")
      cfg.redis_sock = v;
    else
      usage();
  }
  if ((cfg.mode != "goro" && cfg.mode != "threads") || cfg.conns < 1 ||
      cfg.duration_s <= 0)
    usage();
  if (cfg.kind == "redis" && cfg.redis_sock.empty()) {
    std::fprintf(stderr, "no Redis socket: --redis-sock or REDIS_SOCK\n");
    return 2;
  }
  thread_sampler sampler;
  phases ph = cfg.mode == "goro" ? run_goro(cfg) : run_threads(cfg);
  int threads_max = sampler.stop();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  using secs = std::chrono::duration<double>;
  double measured = cfg.duration_s;
  std::uint64_t ops = g_ops.load();
  std::uint64_t ops_all = g_ops_all.load();
  std::printf("# %s %s: %d connections, %llu operations in %.3f s\n",
              cfg.kind.c_str(), cfg.mode.c_str(), cfg.conns,
              static_cast<unsigned long long>(ops), measured);
  result("rate", static_cast<double>(ops) / measured, "ops/s");
  result("p50_us", g_hist.quantile_us(0.50), "us");
  result("p99_us", g_hist.quantile_us(0.99), "us");
  result("hwm_kib", static_cast<double>(ru.ru_maxrss), "KiB");
  result("threads_max", threads_max, "count");
  result("cpu_us_per_op",
         ops_all > 0 ? 1e6 * (ph.cpu_end - ph.cpu_connected) /
                           static_cast<double>(ops_all)
                     : 0,
         "us");
  result("minflt", static_cast<double>(ru.ru_minflt), "count");
  result("majflt", static_cast<double>(ru.ru_majflt), "count");
  result("drain_ms", 1000 * secs(ph.end - g_deadline).count(), "ms");
  result("connect_ms", 1000 * secs(ph.connected - ph.begin).count(), "ms");
  result("max_us", g_hist.quantile_us(1.0), "us");
  result("conn_ops_min",
         g_conn_min.load() == UINT64_MAX
             ? 0
             : static_cast<double>(g_conn_min.load()),
         "count");
  result("conn_ops_mean",
         static_cast<double>(ops) / static_cast<double>(cfg.conns), "count");
  result("starved", static_cast<double>(g_starved.load()), "count");
  result("errors", static_cast<double>(g_errors.load()), "count");
  std::fflush(stdout);
  return g_errors.load() == 0 ? 0 : 1;
}
