// goro_net_http: the goro HTTP server of bench/net/run.sh. A minimal
// HTTP/1.1 server written directly on goro::net, a goroutine per
// connection: it parses just enough of a request head (request line,
// Connection, Content-Length and Transfer-Encoding) to answer keep-alive
// GET and HEAD requests, pipelined ones included (every complete request in
// a read is answered, in order, with one write). Bodies are not read: a
// request announcing one gets 501 and the connection is closed.
//
//   GET /heavy   heavy_work(n) in decimal (bench/net/heavy.hpp, ~1 ms of
//                CPU; n counts requests on the connection)
//   GET <other>  "Hello, World!" (as Go's ServeMux pattern "/")
//
// The response bytes are net/http's for the same handler (Date,
// Content-Length, Content-Type: text/plain; charset=utf-8), so wrk reads
// the same from this server, its twins `gonetbench http-server` (net/http)
// and `gonetbench raw-server` (the same minimal parser on Go's net).
//
//   goro_net_http [address]     default 127.0.0.1:0; prints "listening ADDR"
//   goro_net_http --heavy-time  prints "heavy_us X" (median of one call)
#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <exception>
#include <goro/goro.hpp>
#include <string_view>
#include <system_error>
#include <vector>

#include "heavy.hpp"

namespace {

constexpr std::size_t kMaxHead = 8192;  // longest request head (431 beyond)
constexpr std::size_t kOutSize = 4096;  // responses batched per write

// "Date: Mon, 02 Jan 2006 15:04:05 GMT\r\n", rebuilt when the second
// changes (per connection, so no sharing between threads).
class date_line {
 public:
  std::string_view get() {
    std::time_t now = std::time(nullptr);
    if (now != sec_) {
      sec_ = now;
      std::tm t;
      gmtime_r(&now, &t);
      len_ = std::strftime(text_, sizeof text_,
                           "Date: %a, %d %b %Y %H:%M:%S GMT\r\n", &t);
    }
    return {text_, len_};
  }

 private:
  std::time_t sec_ = -1;
  char text_[64] = {};
  std::size_t len_ = 0;
};

// Responses waiting for the next write.
class out_buffer {
 public:
  void append(std::string_view s) {
    std::memcpy(buf_ + len_, s.data(), s.size());
    len_ += s.size();
  }
  std::size_t room() const { return kOutSize - len_; }
  bool empty() const { return len_ == 0; }
  void flush(goro::net::conn& c) {
    if (len_ > 0) c.write(buf_, len_);
    len_ = 0;
  }

 private:
  char buf_[kOutSize];
  std::size_t len_ = 0;
};

struct request {
  std::string_view method, target;
  bool bad = false;        // malformed request line or header
  bool keep_alive = true;  // HTTP/1.1 without "Connection: close"
  bool has_body = false;   // Content-Length > 0 or Transfer-Encoding
  bool http10 = false;
};

char ascii_lower(char c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

bool iequal(std::string_view a, std::string_view b) {
  return a.size() == b.size() &&
         std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_lower(x) == ascii_lower(y);
         });
}

// Whether a comma-separated header value holds `token` (case-insensitive).
bool has_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    std::size_t comma = value.find(',');
    std::string_view item = value.substr(0, comma);
    while (!item.empty() && (item.front() == ' ' || item.front() == '\t'))
      item.remove_prefix(1);
    while (!item.empty() && (item.back() == ' ' || item.back() == '\t'))
      item.remove_suffix(1);
    if (iequal(item, token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// head: the request line and header lines, each ending in CRLF, without
// the empty line.
request parse(std::string_view head) {
  request r;
  std::size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  std::size_t sp1 = line.find(' ');
  std::size_t sp2 = line.rfind(' ');
  if (sp1 == std::string_view::npos || sp1 == sp2 || sp1 == 0) {
    r.bad = true;
    return r;
  }
  r.method = line.substr(0, sp1);
  r.target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (version == "HTTP/1.0") {
    r.http10 = true;
    r.keep_alive = false;
  } else if (version != "HTTP/1.1" || r.target.empty()) {
    r.bad = true;
    return r;
  }
  head.remove_prefix(eol + 2);
  while (!head.empty()) {
    eol = head.find("\r\n");
    line = head.substr(0, eol);
    head.remove_prefix(eol + 2);
    std::size_t colon = line.find(':');
    if (colon == std::string_view::npos || colon == 0) {
      r.bad = true;
      return r;
    }
    std::string_view name = line.substr(0, colon);
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    if (iequal(name, "connection")) {
      if (has_token(value, "close")) r.keep_alive = false;
      if (r.http10 && has_token(value, "keep-alive")) r.keep_alive = true;
    } else if (iequal(name, "content-length")) {
      if (value.find_first_not_of("0 \t") != std::string_view::npos)
        r.has_body = true;
    } else if (iequal(name, "transfer-encoding")) {
      r.has_body = true;
    }
  }
  return r;
}

void respond(out_buffer& out, date_line& date, std::string_view status,
             std::string_view body, bool keep_alive, bool http10,
             bool head_only) {
  char len[24];
  auto [end, ec] = std::to_chars(len, len + sizeof len, body.size());
  (void)ec;
  out.append("HTTP/1.1 ");
  out.append(status);
  out.append("\r\n");
  out.append(date.get());
  out.append("Content-Length: ");
  out.append({len, static_cast<std::size_t>(end - len)});
  out.append("\r\nContent-Type: text/plain; charset=utf-8\r\n");
  if (!keep_alive) {
    out.append("Connection: close\r\n");
  } else if (http10) {
    out.append("Connection: keep-alive\r\n");
  }
  out.append("\r\n");
  if (!head_only) out.append(body);
}

// The largest response: status, headers and a 20-digit body.
constexpr std::size_t kMaxResponse = 256;

void serve(goro::net::conn c) {
  char in[kMaxHead];
  std::size_t have = 0;     // bytes in `in`
  std::size_t scanned = 0;  // bytes already searched for the empty line
  out_buffer out;
  date_line date;
  std::uint64_t served = 0;
  try {
    for (;;) {
      std::size_t n = c.read(in + have, kMaxHead - have);
      if (n == 0) return;
      have += n;
      std::size_t start = 0;
      bool close = false;
      while (!close) {
        std::size_t from = std::max(start, scanned >= 3 ? scanned - 3 : 0);
        const void* p = ::memmem(in + from, have - from, "\r\n\r\n", 4);
        if (p == nullptr) {
          scanned = have;
          break;
        }
        std::size_t end = static_cast<const char*>(p) - in + 4;
        request r = parse({in + start, end - start - 2});
        start = scanned = end;
        if (out.room() < kMaxResponse) out.flush(c);
        if (r.bad) {
          respond(out, date, "400 Bad Request", "", false, false, false);
          close = true;
          break;
        }
        if (r.has_body) {
          respond(out, date, "501 Not Implemented", "", false, false, false);
          close = true;
          break;
        }
        const bool head_only = r.method == "HEAD";
        if (!head_only && r.method != "GET") {
          respond(out, date, "405 Method Not Allowed", "", r.keep_alive,
                  r.http10, false);
        } else if (r.target.substr(0, r.target.find('?')) == "/heavy") {
          // Answer what is already done before the long computation.
          out.flush(c);
          char digits[24];
          auto [e, ec] = std::to_chars(digits, digits + sizeof digits,
                                       netbench::heavy_work(served));
          (void)ec;
          respond(out, date, "200 OK",
                  {digits, static_cast<std::size_t>(e - digits)}, r.keep_alive,
                  r.http10, head_only);
        } else {
          respond(out, date, "200 OK", "Hello, World!", r.keep_alive, r.http10,
                  head_only);
        }
        served++;
        close = !r.keep_alive;
      }
      if (!close && start == 0 && have == kMaxHead) {
        respond(out, date, "431 Request Header Fields Too Large", "", false,
                false, false);
        close = true;
      }
      out.flush(c);
      if (close) return;
      if (start > 0) {
        std::memmove(in, in + start, have - start);
        have -= start;
        scanned -= start;
      }
    }
  } catch (const std::system_error&) {
    // Reset by the peer, or a write to a closed connection: done.
  }
}

int heavy_time() {
  std::vector<double> us;
  std::uint64_t sink = 0;
  for (int i = 0; i < 101; i++) {
    auto t0 = std::chrono::steady_clock::now();
    sink += netbench::heavy_work(static_cast<std::uint64_t>(i));
    auto t1 = std::chrono::steady_clock::now();
    us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
  }
  std::sort(us.begin(), us.end());
  std::printf("heavy_us %.1f (checksum %llu)\n", us[us.size() / 2],
              static_cast<unsigned long long>(sink % 1000));
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 1 && std::string_view(argv[1]) == "--heavy-time")
    return heavy_time();
  const char* address = argc > 1 ? argv[1] : "127.0.0.1:0";
  return goro::run([address] {
    goro::net::listener ln;
    try {
      ln = goro::net::listen(address);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "goro_net_http: listen %s: %s\n", address, e.what());
      return 1;
    }
    std::printf("listening %s\n", ln.addr().str().c_str());
    std::fflush(stdout);
    for (;;) {
      try {
        goro::go(serve, ln.accept());
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "goro_net_http: accept: %s\n", e.what());
        goro::sleep(std::chrono::milliseconds(5));
      }
    }
  });
}
