// http_server.cpp: serving connections (see http_server.hpp); the request
// parser is http_request.cpp.
#include "http_server.hpp"

#include <atomic>
#include <cstring>
#include <goro/goro.hpp>
#include <string>
#include <system_error>

namespace http {

namespace {

// After an error response: no more writes (the peer reads the response and
// then end of stream), and whatever the peer still sends (the rest of an
// oversized body, say) is read and dropped for up to half a second.
// Closing a socket with unread bytes in it sends a reset, which can destroy
// the response before the peer has read it; Go's server does the same
// (closeWriteAndWait).
void linger(goro::net::conn& c, char* buf, std::size_t size) {
  try {
    c.close_write();
    c.set_read_deadline(std::chrono::steady_clock::now() +
                        std::chrono::milliseconds(500));
    std::size_t total = 0;
    while (total < 4 * max_body_bytes) {
      std::size_t n = c.read(buf, size);
      if (n == 0) break;
      total += n;
    }
  } catch (const std::system_error&) {
    // The deadline, or a reset: close now.
  }
}

}  // namespace

void serve_conn(goro::net::conn c, const handler& h,
                const server_options& opt) {
  using clock = std::chrono::steady_clock;
  request_parser parser;
  std::vector<request> reqs;
  std::string out;
  // 4 KiB, as Go's bufio.Reader under net/http: every idle connection
  // keeps this frame on its goroutine stack, and a 16 KiB one cost about
  // 12 KiB more of resident memory per connection (the compiler's stack
  // probes, -fstack-clash-protection, touch every page of a large frame).
  char buf[4 * 1024];
  // Two kinds of read deadline. While a request's line and headers are
  // incomplete: read_header_timeout after its first byte (after the accept
  // for the first request), set once and never pushed (every byte coming
  // just in time must not keep a slowloris client alive). Otherwise
  // (waiting for a request, reading a body): the idle timeout, pushed
  // forward at most every idle_timeout / 8 (re-arming a timer per request
  // would cost more than the request). The common keep-alive request,
  // whole in one read, never leaves the second kind.
  const bool header_bound = opt.read_header_timeout.count() > 0;
  const auto slack = opt.idle_timeout / 8;
  clock::time_point armed{};  // last push of the idle deadline; {}: not set
  bool header_armed = false;  // the deadline is the header one
  try {
    if (header_bound) {
      c.set_read_deadline(clock::now() + opt.read_header_timeout);
      header_armed = true;
    }
    for (;;) {
      if (!header_armed) {
        auto now = clock::now();
        if (now - armed >= slack) {
          c.set_read_deadline(now + opt.idle_timeout);
          armed = now;
        }
      }
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
        format_response(resp, keep, r.method == "HEAD", &out);
        if (!keep) break;
      }
      bool error = !ok && keep;
      if (error) {
        response err{parser.status(), "text/plain",
                     std::string(reason(parser.status())) + "\n"};
        format_response(err, false, false, &out);
        keep = false;
      }
      // The request in progress accepted with Expect: 100-continue: its
      // client holds the body back until told to send it (after the final
      // answers to the requests before it).
      if (keep && parser.take_continue())
        out += "HTTP/1.1 100 Continue\r\n\r\n";
      if (!out.empty()) c.write(out.data(), out.size());
      if (error) linger(c, buf, sizeof buf);
      if (!keep) return;
      if (header_bound) {
        bool in_headers = parser.in_headers();
        if (in_headers && (!header_armed || !reqs.empty())) {
          // A request began in this read (the one after those answered,
          // if any): its own header deadline.
          c.set_read_deadline(clock::now() + opt.read_header_timeout);
          header_armed = true;
        } else if (!in_headers && header_armed) {
          header_armed = false;  // headers in: back to the idle deadline
          armed = {};
        }
      }
    }
  } catch (const std::system_error&) {
    // Reset, idle or header timeout, closed: this connection only (no
    // answer on a timeout, as Go's server).
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
  bool heavy = r.url == "/heavy";
  if (r.url == "/mixed") {
    // The seed's handler: 20% of the requests do the heavy computation
    // (a shared counter instead of rand.Intn: exactly 1 in 5).
    static std::atomic<unsigned> n{0};
    heavy = n.fetch_add(1, std::memory_order_relaxed) % 5 == 0;
  }
  if (heavy)
    return {200, "text/plain",
            "Heavy task result: " + std::to_string(compute_heavy_task())};
  return {200, "text/plain", "Hello, World!"};
}

}  // namespace http
