// http_server.hpp: a small HTTP/1.1 server on goro::net, one goroutine per
// connection (the web server example, the demo and the fuzzer share it).
//
// Requests are parsed by Node's http-parser (Debian's libhttp-parser-dev),
// with bounds: a request line plus headers over 8 KiB get 431 (every byte
// counts; http-parser's process-wide limit is set to 8 KiB), a URL over
// 4 KiB (or a request line over 8 KiB) 414, a body over 1 MiB 413, a
// version other than 1.0/1.1 505, an HTTP/1.1 request without a Host header
// (or one with two) 400, an Expect other than 100-continue 417, anything
// malformed 400. After an error
// response the connection is closed, and the server keeps serving the
// others (the server stops writing, then drops what the peer still sends
// for up to 500 ms before closing, so that the response is not lost to a
// reset). Keep-alive and pipelining: every complete request in the buffer
// is answered, in order, before the next read. An idle keep-alive
// connection is closed after `idle_timeout` (give or take an eighth: the
// deadline is pushed forward at most that often); a request whose line and
// headers are not all in within `read_header_timeout` of its first byte
// (of the accept, for a connection's first request) is dropped with its
// connection, as Go's ReadHeaderTimeout does. HEAD is answered with GET's
// headers and no body; `Expect: 100-continue` with an interim
// "100 Continue" as soon as the headers are accepted.
#pragma once

#include <chrono>
#include <cstddef>
#include <functional>
#include <goro/net.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace http {

inline constexpr std::size_t max_header_bytes = 8 * 1024;
inline constexpr std::size_t max_url_bytes = 4 * 1024;
inline constexpr std::size_t max_body_bytes = 1024 * 1024;

struct request {
  std::string method;
  std::string url;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;
  bool keep_alive = true;
};

struct response {
  int status = 200;
  std::string content_type = "text/plain";
  std::string body;
};

// Incremental request parser: feed bytes as they arrive; complete requests
// come out in order. After an error, status() is the HTTP status to answer
// with (400, 413, 414, 417, 431, 505) and the parser accepts nothing more.
class request_parser {
 public:
  request_parser();
  ~request_parser();
  request_parser(const request_parser&) = delete;
  request_parser& operator=(const request_parser&) = delete;

  // Parses data; appends the requests it completes to *out. Returns false
  // on an error (see status()).
  bool feed(const char* data, std::size_t n, std::vector<request>* out);
  int status() const { return error_status_; }
  // A request has started but is not complete (a truncated request at EOF).
  bool in_progress() const { return in_message_; }
  // The request in progress has not completed its headers yet.
  bool in_headers() const { return in_message_ && in_headers_; }
  // True once per HTTP/1.1 request with `Expect: 100-continue` and a body,
  // when its headers have been accepted and the body is not all in yet:
  // the client waits for "100 Continue" before sending it, and the caller
  // is to send that now.
  bool take_continue() {
    bool due = continue_due_;
    continue_due_ = false;
    return due;
  }

 private:
  struct impl;
  friend struct impl;
  std::unique_ptr<impl> p_;
  int error_status_ = 0;
  bool in_message_ = false;
  bool in_headers_ = false;
  bool continue_due_ = false;
};

// Reason phrase for a status code ("OK", "Bad Request"...).
const char* reason(int status);
// Serialises a response (Content-Length, Connection: keep-alive or close).
std::string format_response(const response& r, bool keep_alive);
// The same, appended to *out; head: the headers only (a HEAD request's
// answer: Content-Length is the body's all the same).
void format_response(const response& r, bool keep_alive, bool head,
                     std::string* out);

using handler = std::function<response(const request&)>;

struct server_options {
  // A keep-alive connection waiting for its next request is closed after
  // this long.
  std::chrono::milliseconds idle_timeout{30000};
  // Go's ReadHeaderTimeout: a request's line and headers must all arrive
  // within this long of its first byte (a connection's first request: of
  // the accept), or the connection is closed without an answer (slowloris
  // clients hold a goroutine and a descriptor each until then). Zero: no
  // bound but the idle timeout between reads. Go's default is zero; 5 s is
  // what Go servers commonly set.
  std::chrono::milliseconds read_header_timeout{5000};
};

// Serves one connection until the peer closes it, an error response, or the
// idle timeout; never throws.
void serve_conn(goro::net::conn c, const handler& h,
                const server_options& opt = {});

// Accepts on ln until it is closed, a goroutine per connection.
void serve(goro::net::listener& ln, handler h, server_options opt = {});

// The seed's routes: "/heavy" runs compute_heavy_task(), "/mixed" is the
// seed's handler (one request in five runs it), anything else answers
// "Hello, World!".
response seed_handler(const request& r);
// The seed's computeHeavyTask: 10,000,000 additions (about 3 ms), with a
// cooperative preemption point every 65,536 iterations: a call-free loop
// holds its P for as long as it runs unless asynchronous preemption is on
// (off by default: GORO_DEBUG=asyncpreempt=1, see goro/debug.hpp).
long long compute_heavy_task();

}  // namespace http
