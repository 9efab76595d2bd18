// webserver: the seed's "Real-World Example: Web Server" on goro — an
// HTTP/1.1 server with a goroutine per connection (goro::go per accepted
// goro::net::conn), keep-alive and pipelining. Routes: /heavy runs the
// seed's CPU-heavy computeHeavyTask, /mixed is the seed's handler (one
// request in five heavy), anything else answers "Hello, World!". Parsing,
// bounds and the connection loop are in http_server.hpp.
//
//   webserver [--read-header-timeout MS] [--idle-timeout MS] [address]
//       serve (default 127.0.0.1:8080) until killed; a request's line and
//       headers must arrive within MS (default 5000, 0: no bound) of its
//       first byte, a keep-alive connection idle for MS (default 30000) is
//       closed (http::server_options)
//   webserver --demo [seconds] [connections]
//       serve on a loopback port (port 0) and drive it with client
//       goroutines on keep-alive connections, one request in five to
//       /heavy (default 3 s, 50 connections): half the time as fast as the
//       clients go, half paced at half that throughput; prints requests
//       per second and latency percentiles (p50/p90/p99/max) for light
//       and heavy requests, and exits 1 if any answer was wrong
//
// Drive the server with wrk, e.g.
//   wrk -t1 -c50 -d5s http://127.0.0.1:8080/        (light)
//   wrk -t1 -c50 -d5s http://127.0.0.1:8080/mixed   (the seed's 20% mix)
// GOMAXPROCS and the other GORO_* variables apply as in every goro program.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <vector>

#include "http_server.hpp"

namespace {

using clock_type = std::chrono::steady_clock;

// Reads one response from c (headers, then Content-Length bytes of body);
// returns false on a malformed one or a closed connection. `buf` keeps
// bytes read past the response.
bool read_response(goro::net::conn& c, std::string& buf, int* status,
                   std::string* body) {
  std::size_t end;
  char tmp[4096];
  while ((end = buf.find("\r\n\r\n")) == std::string::npos) {
    std::size_t n = c.read(tmp, sizeof tmp);
    if (n == 0) return false;
    buf.append(tmp, n);
  }
  if (buf.compare(0, 9, "HTTP/1.1 ") != 0) return false;
  *status = std::atoi(buf.c_str() + 9);
  std::size_t cl = buf.find("Content-Length: ");
  if (cl == std::string::npos || cl > end) return false;
  std::size_t len = std::strtoul(buf.c_str() + cl + 16, nullptr, 10);
  std::size_t total = end + 4 + len;
  while (buf.size() < total) {
    std::size_t n = c.read(tmp, sizeof tmp);
    if (n == 0) return false;
    buf.append(tmp, n);
  }
  body->assign(buf, end + 4, len);
  buf.erase(0, total);
  return true;
}

struct percentiles {
  double p50, p90, p99, max;
};

percentiles summarize(std::vector<double>& v) {
  if (v.empty()) return {0, 0, 0, 0};
  std::sort(v.begin(), v.end());
  auto at = [&](double q) {
    return v[std::min(v.size() - 1, std::size_t(q * double(v.size())))];
  };
  return {at(0.50), at(0.90), at(0.99), v.back()};
}

// A paced connection's first request is due at a random point of its
// first interval (connections do not all send at once).
clock_type::time_point rnd_start(clock_type::time_point start, double rate,
                                 int connections, std::uint32_t rnd) {
  if (rate <= 0) return start;
  double interval = double(connections) / rate;
  double frac = double(rnd % 1000) / 1000.0;
  return start + std::chrono::duration_cast<clock_type::duration>(
                     std::chrono::duration<double>(interval * frac));
}

struct phase {
  std::vector<double> light, heavy;  // latencies, microseconds
  long wrong = 0;
  double seconds = 0;
  double per_second() const {
    return double(light.size() + heavy.size()) / seconds;
  }
};

// `connections` client goroutines, each on its own keep-alive connection,
// send requests for `seconds`, one in five to /heavy, and check every
// answer. rate == 0: closed loop (a connection sends its next request when
// the last one is answered: as fast as the server goes). rate > 0: paced,
// `rate` requests per second over all connections, each on its own clock;
// the latency counts from the time a request was due, so a slow answer
// also charges the requests it delayed.
phase drive(const std::string& where, const std::string& heavy_body,
            int connections, double seconds, double rate) {
  std::vector<std::vector<double>> light(connections), heavy(connections);
  std::atomic<long> wrong{0};
  const auto start = clock_type::now();
  const auto stop_at = start + std::chrono::duration_cast<clock_type::duration>(
                                   std::chrono::duration<double>(seconds));
  goro::wait_group clients;
  for (int i = 0; i < connections; i++) {
    clients.add(1);
    goro::go([&, i] {
      try {
        goro::net::conn c = goro::net::dial(where);
        std::string buf, body;
        std::uint32_t rnd = 2654435761u * std::uint32_t(i + 1);
        auto next = rnd_start(start, rate, connections, rnd);
        while (clock_type::now() < stop_at) {
          rnd = rnd * 1664525u + 1013904223u;
          bool is_heavy = (rnd >> 8) % 5 == 0;
          const char* req = is_heavy
                                ? "GET /heavy HTTP/1.1\r\nHost: demo\r\n\r\n"
                                : "GET / HTTP/1.1\r\nHost: demo\r\n\r\n";
          auto t0 = clock_type::now();
          if (rate > 0) {
            if (next > t0) goro::sleep(next - t0);
            t0 = next;
            next += std::chrono::duration_cast<clock_type::duration>(
                std::chrono::duration<double>(double(connections) / rate));
            if (t0 >= stop_at) break;
          }
          c.write(req, std::strlen(req));
          int status = 0;
          if (!read_response(c, buf, &status, &body)) {
            wrong++;
            break;
          }
          double us =
              std::chrono::duration<double, std::micro>(clock_type::now() - t0)
                  .count();
          if (status != 200 ||
              body != (is_heavy ? heavy_body : "Hello, World!"))
            wrong++;
          (is_heavy ? heavy : light)[i].push_back(us);
        }
      } catch (const std::exception& e) {
        std::printf("client %d: %s\n", i, e.what());
        wrong++;
      }
      clients.done();
    });
  }
  clients.wait();
  phase r;
  r.seconds = std::chrono::duration<double>(clock_type::now() - start).count();
  for (auto& v : light) r.light.insert(r.light.end(), v.begin(), v.end());
  for (auto& v : heavy) r.heavy.insert(r.heavy.end(), v.begin(), v.end());
  r.wrong = wrong.load();
  return r;
}

void print(phase& r) {
  std::printf("  %.0f requests/s, %zu wrong answers\n", r.per_second(),
              std::size_t(r.wrong));
  for (auto [name, v] :
       {std::pair{"light", &r.light}, std::pair{"heavy", &r.heavy}}) {
    std::size_t n = v->size();
    percentiles p = summarize(*v);
    std::printf(
        "  %-5s %7zu requests  latency p50 %8.0f us  p90 %8.0f us  p99 %8.0f "
        "us  max %8.0f us\n",
        name, n, p.p50, p.p90, p.p99, p.max);
  }
}

int demo(double seconds, int connections) {
  auto ln = goro::net::listen("127.0.0.1:0");
  goro::wait_group server;
  server.add(1);
  goro::go([&] {
    http::serve(ln, http::seed_handler);
    server.done();
  });
  const std::string where = ln.addr().str();
  const std::string heavy_body =
      "Heavy task result: " + std::to_string(http::compute_heavy_task());
  std::printf(
      "webserver demo: %s, GOMAXPROCS=%d, %d keep-alive connections, 1 "
      "request in 5 heavy\n",
      where.c_str(), goro::gomaxprocs(), connections);

  // First as fast as the clients go: the CPU is saturated and every
  // request queues behind the heavy ones, light or not.
  std::printf("closed loop, %.1f s (each connection sends when answered):\n",
              seconds / 2);
  phase full = drive(where, heavy_body, connections, seconds / 2, 0);
  print(full);
  // Then at half that rate: with CPU to spare, a light request does not
  // wait for the heavy ones (another P takes it while they compute).
  double rate = full.per_second() / 2;
  std::printf("paced at %.0f requests/s (half of that), %.1f s:\n", rate,
              seconds / 2);
  phase half = rate > 0
                   ? drive(where, heavy_body, connections, seconds / 2, rate)
                   : phase{};
  if (rate > 0) print(half);
  ln.close();
  server.wait();

  bool ok = full.wrong == 0 && half.wrong == 0 && !full.light.empty() &&
            !full.heavy.empty() && !half.light.empty();
  if (!ok) std::printf("FAILED: wrong answers or no requests served\n");
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  return goro::run([&] {
    if (argc > 1 && std::strcmp(argv[1], "--demo") == 0) {
      double seconds = argc > 2 ? std::atof(argv[2]) : 3.0;
      int connections = argc > 3 ? std::atoi(argv[3]) : 50;
      if (seconds <= 0 || connections <= 0) {
        std::fprintf(
            stderr,
            "usage: webserver --demo [seconds > 0] [connections > 0]\n");
        return 2;
      }
      return demo(seconds, connections);
    }
    http::server_options opt;
    const char* address = "127.0.0.1:8080";
    for (int i = 1; i < argc; i++) {
      bool header = std::strcmp(argv[i], "--read-header-timeout") == 0;
      bool idle = std::strcmp(argv[i], "--idle-timeout") == 0;
      if (header || idle) {
        char* end = nullptr;
        long ms = i + 1 < argc ? std::strtol(argv[i + 1], &end, 10) : -1;
        if (end == nullptr || *end != '\0' || ms < 0 || (idle && ms == 0)) {
          std::fprintf(stderr,
                       "usage: webserver [--read-header-timeout MS >= 0] "
                       "[--idle-timeout MS > 0] [address]\n");
          return 2;
        }
        (header ? opt.read_header_timeout : opt.idle_timeout) =
            std::chrono::milliseconds(ms);
        i++;
      } else {
        address = argv[i];
      }
    }
    goro::net::listener ln;
    try {
      ln = goro::net::listen(address);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "webserver: %s: %s\n", address, e.what());
      return 1;
    }
    std::printf("Server started on %s\n", ln.addr().str().c_str());
    std::fflush(stdout);
    http::serve(ln, http::seed_handler, opt);
    return 0;
  });
}
