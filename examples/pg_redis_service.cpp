// pg_redis_service: a small HTTP service on goro::net whose handlers call
// two blocking C client libraries, hiredis and libpq, from goroutines.
//
//   GET /item/<id>   the item's value: looked up in Redis (key item:<id>);
//                    on a miss read from PostgreSQL (table goro_items) and
//                    cached in Redis for 60 s. 200 with a one-line JSON
//                    body {"id":..,"value":"..","cache":"hit"|"miss"}, 404
//                    for an id the table does not have, 503 when a server
//                    fails
//   GET /stats       hits, misses, errors so far
//
// Each connection is served by its own goroutine (examples/http_server.hpp),
// which takes a PostgreSQL and a Redis connection from small pools: a
// buffered goro::chan holding the idle connections (take: receive, give
// back: send), so a request beyond the pool's size parks on the channel
// instead of opening yet another connection. libpq and hiredis are used
// through their ordinary blocking calls; in a goroutine, libgoro's
// interposed recv/send/poll/connect... (issue 24) park the goroutine on the
// network poller, so a request waiting for PostgreSQL holds no OS thread.
//
//   pg_redis_service [--listen ADDR] [--pg CONNINFO] [--redis-sock PATH |
//                    --redis HOST:PORT] [--pool N] [--demo N]
//
// Connection settings default to $PG_CONNINFO (a libpq string; empty:
// libpq's own defaults, PGHOST...) and $REDIS_SOCK or $REDIS_ADDR
// (host:port, default 127.0.0.1:6379). At start it creates goro_items
// (id 1..1000, value "item-<id>") when missing. --demo N serves on
// 127.0.0.1:0 and sends 2N requests from N client goroutines (each id
// twice: a miss, then a hit) plus one for a missing id, checks every
// answer, prints "demo ok" or FAIL lines and exits (the ctest
// example_pg_redis_service runs it against throw-away servers).
#include <hiredis/hiredis.h>
#include <libpq-fe.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "http_server.hpp"

namespace {

struct settings {
  std::string listen = "127.0.0.1:8080";
  std::string pg;
  std::string redis_sock;
  std::string redis_host = "127.0.0.1";
  int redis_port = 6379;
  int pool = 8;
  int demo = 0;
};

// A fixed set of connections shared by goroutines: idle ones wait in a
// buffered channel of capacity n, so take() parks while all n are in use.
template <class Conn>
class pool {
 public:
  pool() = default;
  explicit pool(std::size_t n) : idle_(goro::make_chan<Conn*>(n)) {}
  void put(Conn* c) { idle_.send(c); }
  Conn* take() { return *idle_.recv(); }

 private:
  goro::chan<Conn*> idle_;
};

// Borrows a connection for one scope.
template <class Conn>
class lease {
 public:
  explicit lease(pool<Conn>& p) : p_(p), c_(p.take()) {}
  ~lease() { p_.put(c_); }
  lease(const lease&) = delete;
  lease& operator=(const lease&) = delete;
  Conn* get() const { return c_; }

 private:
  pool<Conn>& p_;
  Conn* c_;
};

settings g_cfg;
pool<PGconn> g_pg;
pool<redisContext> g_redis;
std::atomic<long> g_hits{0}, g_misses{0}, g_errors{0};

PGconn* pg_connect() {
  PGconn* c = PQconnectdb(g_cfg.pg.c_str());
  if (PQstatus(c) != CONNECTION_OK) {
    std::string why = PQerrorMessage(c);
    PQfinish(c);
    throw std::runtime_error("PostgreSQL: " + why);
  }
  return c;
}

redisContext* redis_connect() {
  redisContext* c =
      g_cfg.redis_sock.empty()
          ? redisConnect(g_cfg.redis_host.c_str(), g_cfg.redis_port)
          : redisConnectUnix(g_cfg.redis_sock.c_str());
  if (c == nullptr || c->err != 0) {
    std::string why = c != nullptr ? c->errstr : "out of memory";
    if (c != nullptr) redisFree(c);
    throw std::runtime_error("Redis: " + why);
  }
  return c;
}

// A PostgreSQL connection that broke (the server restarted...) is reset in
// place before it goes back to the pool.
void pg_repair(PGconn* c) {
  if (PQstatus(c) != CONNECTION_OK) PQreset(c);
}

void setup_schema() {
  PGconn* c = pg_connect();
  PGresult* r = PQexec(c,
                       "CREATE TABLE IF NOT EXISTS goro_items ("
                       "id int PRIMARY KEY, value text NOT NULL);"
                       "INSERT INTO goro_items "
                       "SELECT i, 'item-' || i FROM generate_series(1, 1000) i "
                       "ON CONFLICT (id) DO NOTHING");
  bool ok = PQresultStatus(r) == PGRES_COMMAND_OK;
  std::string why = PQerrorMessage(c);
  PQclear(r);
  PQfinish(c);
  if (!ok) throw std::runtime_error("PostgreSQL schema: " + why);
}

http::response json(int status, const std::string& body) {
  return {status, "application/json", body + "\n"};
}

http::response item(long id) {
  const std::string key = "item:" + std::to_string(id);
  std::string value;
  bool hit = false;
  {
    lease<redisContext> rc(g_redis);
    auto* r =
        static_cast<redisReply*>(redisCommand(rc.get(), "GET %s", key.c_str()));
    if (r == nullptr) {
      // hiredis' context is unusable after an I/O error: reconnect it
      // before it goes back to the pool.
      g_errors++;
      std::fprintf(stderr, "pg_redis_service: redis GET: %s\n",
                   rc.get()->errstr);
      redisReconnect(rc.get());
      return json(503, "{\"error\":\"redis\"}");
    }
    if (r->type == REDIS_REPLY_STRING) {
      value.assign(r->str, r->len);
      hit = true;
    }
    freeReplyObject(r);
  }
  if (!hit) {
    {
      lease<PGconn> pc(g_pg);
      const std::string arg = std::to_string(id);
      const char* params[1] = {arg.c_str()};
      PGresult* r =
          PQexecParams(pc.get(), "SELECT value FROM goro_items WHERE id = $1",
                       1, nullptr, params, nullptr, nullptr, 0);
      if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        std::fprintf(stderr, "pg_redis_service: query: %s",
                     PQerrorMessage(pc.get()));
        PQclear(r);
        pg_repair(pc.get());
        g_errors++;
        return json(503, "{\"error\":\"postgres\"}");
      }
      if (PQntuples(r) == 0) {
        PQclear(r);
        return json(404, "{\"error\":\"no such item\"}");
      }
      value = PQgetvalue(r, 0, 0);
      PQclear(r);
    }
    lease<redisContext> rc(g_redis);
    auto* r = static_cast<redisReply*>(redisCommand(
        rc.get(), "SET %s %b EX 60", key.c_str(), value.data(), value.size()));
    if (r == nullptr) {
      g_errors++;
      std::fprintf(stderr, "pg_redis_service: redis SET: %s\n",
                   rc.get()->errstr);
      redisReconnect(rc.get());
    } else {
      freeReplyObject(r);
    }
    g_misses++;
  } else {
    g_hits++;
  }
  // Values are the table's own ("item-<id>"): nothing to escape.
  return json(200, "{\"id\":" + std::to_string(id) + ",\"value\":\"" + value +
                       "\",\"cache\":\"" + (hit ? "hit" : "miss") + "\"}");
}

http::response handle(const http::request& req) {
  if (req.method != "GET" && req.method != "HEAD")
    return json(405, "{\"error\":\"GET only\"}");
  if (req.url == "/stats")
    return json(200, "{\"hits\":" + std::to_string(g_hits.load()) +
                         ",\"misses\":" + std::to_string(g_misses.load()) +
                         ",\"errors\":" + std::to_string(g_errors.load()) +
                         "}");
  constexpr std::string_view prefix = "/item/";
  if (req.url.compare(0, prefix.size(), prefix) == 0) {
    const char* s = req.url.c_str() + prefix.size();
    char* end = nullptr;
    long id = std::strtol(s, &end, 10);
    if (end != s && *end == '\0' && id > 0) return item(id);
  }
  return json(404, "{\"error\":\"try /item/<id> or /stats\"}");
}

// One request on a fresh connection (Connection: close): status and body.
bool fetch(const std::string& where, const std::string& path, int* status,
           std::string* body) {
  goro::net::conn c = goro::net::dial(where);
  std::string req =
      "GET " + path + " HTTP/1.1\r\nHost: demo\r\nConnection: close\r\n\r\n";
  c.write(req);
  std::string resp;
  char buf[4096];
  while (std::size_t n = c.read(buf, sizeof buf)) resp.append(buf, n);
  auto eol = resp.find("\r\n");
  auto sep = resp.find("\r\n\r\n");
  if (eol == std::string::npos || sep == std::string::npos ||
      resp.compare(0, 9, "HTTP/1.1 ") != 0)
    return false;
  *status = std::atoi(resp.c_str() + 9);
  *body = resp.substr(sep + 4);
  return true;
}

int demo(int clients) {
  auto ln = goro::net::listen("127.0.0.1:0");
  const std::string where = ln.addr().str();
  goro::wait_group server;
  server.add(1);
  goro::go([&] {
    http::serve(ln, handle);
    server.done();
  });
  // Start from a cold cache for the ids the demo asks for.
  {
    lease<redisContext> rc(g_redis);
    for (int i = 1; i <= clients; ++i) {
      auto* r =
          static_cast<redisReply*>(redisCommand(rc.get(), "DEL item:%d", i));
      if (r != nullptr) freeReplyObject(r);
    }
  }
  std::printf("pg_redis_service demo: %s, %d client goroutines, pool %d\n",
              where.c_str(), clients, g_cfg.pool);
  std::atomic<int> wrong{0};
  goro::wait_group wg;
  for (int i = 1; i <= clients; ++i) {
    wg.add(1);
    goro::go([&, i] {
      const std::string v = "\"value\":\"item-" + std::to_string(i) + "\"";
      for (const char* want : {"miss", "hit"}) {
        int status = 0;
        std::string body;
        try {
          if (!fetch(where, "/item/" + std::to_string(i), &status, &body) ||
              status != 200 || body.find(v) == std::string::npos ||
              body.find(std::string("\"cache\":\"") + want + "\"") ==
                  std::string::npos) {
            std::printf("FAIL /item/%d (expected a %s): %d %s\n", i, want,
                        status, body.c_str());
            wrong++;
          }
        } catch (const std::exception& e) {
          std::printf("FAIL /item/%d: %s\n", i, e.what());
          wrong++;
        }
      }
      wg.done();
    });
  }
  wg.wait();
  int status = 0;
  std::string body;
  if (!fetch(where, "/item/999999", &status, &body) || status != 404) {
    std::printf("FAIL /item/999999: expected 404, got %d %s\n", status,
                body.c_str());
    wrong++;
  }
  ln.close();
  server.wait();
  std::printf("hits %ld, misses %ld, errors %ld\n", g_hits.load(),
              g_misses.load(), g_errors.load());
  if (wrong.load() != 0 || g_hits.load() != clients ||
      g_misses.load() != clients || g_errors.load() != 0) {
    std::printf("FAIL: %d wrong answers\n", wrong.load());
    return 1;
  }
  std::printf("demo ok: %d requests, each id a miss then a hit\n",
              2 * clients + 1);
  return 0;
}

[[noreturn]] void usage() {
  std::fprintf(stderr,
               "usage: pg_redis_service [--listen ADDR] [--pg CONNINFO] "
               "[--redis-sock PATH | --redis HOST:PORT] [--pool N] "
               "[--demo N]\n");
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  settings& cfg = g_cfg;
  if (const char* e = std::getenv("PG_CONNINFO")) cfg.pg = e;
  if (const char* e = std::getenv("REDIS_SOCK")) cfg.redis_sock = e;
  std::string redis_addr;
  if (const char* e = std::getenv("REDIS_ADDR")) redis_addr = e;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (i + 1 >= argc) usage();
    std::string v = argv[++i];
    if (a == "--listen")
      cfg.listen = v;
    else if (a == "--pg")
      cfg.pg = v;
    else if (a == "--redis-sock")
      cfg.redis_sock = v;
    else if (a == "--redis") {
      redis_addr = v;
      cfg.redis_sock.clear();
    } else if (a == "--pool")
      cfg.pool = std::atoi(v.c_str());
    else if (a == "--demo")
      cfg.demo = std::atoi(v.c_str());
    else
      usage();
  }
  if (!redis_addr.empty()) {
    auto colon = redis_addr.rfind(':');
    if (colon == std::string::npos) usage();
    cfg.redis_host = redis_addr.substr(0, colon);
    cfg.redis_port = std::atoi(redis_addr.c_str() + colon + 1);
  }
  if (cfg.pool < 1 || cfg.demo < 0) usage();
  return goro::run([&]() -> int {
    std::vector<PGconn*> pgs;
    std::vector<redisContext*> rcs;
    try {
      setup_schema();
      g_pg = pool<PGconn>(static_cast<std::size_t>(cfg.pool));
      g_redis = pool<redisContext>(static_cast<std::size_t>(cfg.pool));
      for (int i = 0; i < cfg.pool; ++i) {
        pgs.push_back(pg_connect());
        g_pg.put(pgs.back());
        rcs.push_back(redis_connect());
        g_redis.put(rcs.back());
      }
    } catch (const std::exception& e) {
      std::fprintf(stderr, "pg_redis_service: %s\n", e.what());
      for (auto* c : pgs) PQfinish(c);
      for (auto* c : rcs) redisFree(c);
      return 1;
    }
    int rc = 0;
    if (cfg.demo > 0) {
      rc = demo(cfg.demo);
    } else {
      goro::net::listener ln;
      try {
        ln = goro::net::listen(cfg.listen);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "pg_redis_service: listen %s: %s\n",
                     cfg.listen.c_str(), e.what());
        return 1;
      }
      std::printf("listening %s\n", ln.addr().str().c_str());
      std::fflush(stdout);
      http::serve(ln, handle);  // until the process is stopped
    }
    for (auto* c : pgs) PQfinish(c);
    for (auto* c : rcs) redisFree(c);
    return rc;
  });
}
