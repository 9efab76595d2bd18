// webserver: the seed's "Real-World Example: Web Server" on goro — an
// HTTP/1.1 server with a goroutine per connection, keep-alive and
// pipelining, where one request in five (/heavy) runs a CPU-heavy task and
// the rest answer "Hello, World!".
//
//   webserver [address]             serve (default 127.0.0.1:8080) until killed
//   webserver --demo [seconds] [connections]
//                                   serve on a loopback port and drive it with
//                                   an in-process client (default 3 s, 50
//                                   connections, 20% heavy), then print
//                                   requests per second and latency percentiles
//                                   for light and heavy requests; exit 1 if any
//                                   response was wrong
//
// Drive the server with wrk, e.g. `wrk -t1 -c50 -d5s http://127.0.0.1:8080/`.
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
      "webserver demo: %s, GOMAXPROCS=%d, %d connections, %.1f s, 1 request in "
      "5 heavy\n",
      where.c_str(), goro::gomaxprocs(), connections, seconds);

  std::vector<std::vector<double>> light(connections), heavy(connections);
  std::atomic<long> wrong{0};
  const auto stop_at =
      clock_type::now() + std::chrono::duration<double>(seconds);
  goro::wait_group clients;
  for (int i = 0; i < connections; i++) {
    clients.add(1);
    goro::go([&, i] {
      try {
        goro::net::conn c = goro::net::dial(where);
        std::string buf, body;
        std::uint32_t rnd = 2654435761u * std::uint32_t(i + 1);
        while (clock_type::now() < stop_at) {
          rnd = rnd * 1664525u + 1013904223u;
          bool is_heavy = (rnd >> 8) % 5 == 0;
          const char* req = is_heavy
                                ? "GET /heavy HTTP/1.1\r\nHost: demo\r\n\r\n"
                                : "GET / HTTP/1.1\r\nHost: demo\r\n\r\n";
          auto t0 = clock_type::now();
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
  ln.close();
  server.wait();

  std::vector<double> all_light, all_heavy;
  for (auto& v : light) all_light.insert(all_light.end(), v.begin(), v.end());
  for (auto& v : heavy) all_heavy.insert(all_heavy.end(), v.begin(), v.end());
  const double total = double(all_light.size() + all_heavy.size());
  std::printf("%.0f requests in %.1f s: %.0f requests/s, %ld wrong\n", total,
              seconds, total / seconds, wrong.load());
  for (auto [name, v] :
       {std::pair{"light", &all_light}, std::pair{"heavy", &all_heavy}}) {
    std::size_t n = v->size();
    percentiles p = summarize(*v);
    std::printf(
        "  %-5s %7zu requests  latency p50 %8.0f us  p90 %8.0f us  p99 %8.0f "
        "us  max %8.0f us\n",
        name, n, p.p50, p.p90, p.p99, p.max);
  }
  if (total == 0 || wrong.load() != 0) return 1;
  return 0;
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
    const char* address = argc > 1 ? argv[1] : "127.0.0.1:8080";
    goro::net::listener ln;
    try {
      ln = goro::net::listen(address);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "webserver: %s: %s\n", address, e.what());
      return 1;
    }
    std::printf("Server started on %s\n", ln.addr().str().c_str());
    std::fflush(stdout);
    http::serve(ln, http::seed_handler);
    return 0;
  });
}
