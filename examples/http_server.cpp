// http_server.cpp: serving connections (see http_server.hpp); the request
// parser is http_request.cpp.
#include "http_server.hpp"

#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <system_error>

namespace http {

void serve_conn(goro::net::conn c, const handler& h,
                const server_options& opt) {
  request_parser parser;
  std::vector<request> reqs;
  std::string out;
  char buf[16 * 1024];
  try {
    for (;;) {
      c.set_read_deadline(std::chrono::steady_clock::now() + opt.idle_timeout);
      std::size_t n = c.read(buf, sizeof buf);
      if (n == 0) return;  // the peer closed (a truncated request is dropped)
      reqs.clear();
      bool ok = parser.feed(buf, n, &reqs);
      // Answer every complete request, in order (pipelining), in one write.
      out.clear();
      bool keep = true;
      for (const request& r : reqs) {
        response resp;
        try {
          resp = h(r);
        } catch (const std::exception& e) {
          resp = {500, "text/plain",
                  std::string("internal error: ") + e.what() + "\n"};
        }
        keep = r.keep_alive;
        out += format_response(resp, keep);
        if (!keep) break;
      }
      if (!ok && keep) {
        response err{parser.status(), "text/plain",
                     std::string(reason(parser.status())) + "\n"};
        out += format_response(err, false);
        keep = false;
      }
      if (!out.empty()) c.write(out.data(), out.size());
      if (!keep) return;
    }
  } catch (const std::system_error&) {
    // Reset, idle timeout, closed: this connection only.
  }
}

void serve(goro::net::listener& ln, handler h, server_options opt) {
  auto shared = std::make_shared<handler>(std::move(h));
  for (;;) {
    goro::net::conn c;
    try {
      c = ln.accept();
    } catch (const goro::closed_error&) {
      return;
    }
    goro::go([c = std::move(c), shared, opt]() mutable {
      serve_conn(std::move(c), *shared, opt);
    });
  }
}

long long compute_heavy_task() {
  long long result = 0;
  for (int i = 0; i < 10000000; i++) {
    // Opaque to the optimiser (Go's compiler does not fold this loop either).
    asm volatile("" : "+r"(result));
    result += i;
    if ((i & 0xffff) == 0) goro::preempt_point();
  }
  return result;
}

response seed_handler(const request& r) {
  if (r.url == "/heavy")
    return {200, "text/plain",
            "Heavy task result: " + std::to_string(compute_heavy_task())};
  return {200, "text/plain", "Hello, World!"};
}

}  // namespace http
