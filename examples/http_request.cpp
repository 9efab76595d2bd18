// http_request.cpp: the request parser and response formatting of
// http_server.hpp, on Node's http-parser. No goro dependency: the fuzz
// target (fuzz_http.cpp) links this file alone.
#include <http_parser.h>

#include <cstdint>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>

#include "http_server.hpp"

namespace http {

struct request_parser::impl {
  request_parser* owner;
  http_parser parser;
  http_parser_settings settings;
  std::vector<request>* out = nullptr;
  const char* buf_end = nullptr;  // end of the buffer feed() is parsing
  request cur;
  std::size_t header_bytes = 0;
  bool last_was_value = false;
  bool url_done = false;  // the request line's URL has ended
  int fail = 0;           // a status set by a bound check inside a callback

  static impl* self(http_parser* p) { return static_cast<impl*>(p->data); }

  // RFC 9110's tchar: http-parser, built lenient, lets a blank or a
  // separator into a field name ("Bad Name: x"), which RFC 9112 says to
  // answer with 400 (a proxy in front could read the header differently).
  static bool token(const char* at, std::size_t n) {
    for (std::size_t i = 0; i < n; i++) {
      unsigned char c = static_cast<unsigned char>(at[i]);
      bool alnum = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') ||
                   (c >= 'A' && c <= 'Z');
      if (!alnum && (c == 0 || std::strchr("!#$%&'*+-.^_`|~", c) == nullptr))
        return false;
    }
    return true;
  }

  static bool iequal(const std::string& a, const char* b) {
    std::size_t n = std::strlen(b);
    if (a.size() != n) return false;
    for (std::size_t i = 0; i < n; i++) {
      char c = a[i];
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
      if (c != b[i]) return false;
    }
    return true;
  }

  // The first value of header `name` (lower case), or nullptr.
  const std::string* header(const char* name) const {
    for (const auto& h : cur.headers)
      if (iequal(h.first, name)) return &h.second;
    return nullptr;
  }

  // Whether a comma-separated list holds `token` (lower case), ignoring
  // case and blanks around the elements ("100-continue" in Expect).
  static bool has_token(const std::string& list, const char* token) {
    std::size_t i = 0;
    while (i <= list.size()) {
      std::size_t end = list.find(',', i);
      if (end == std::string::npos) end = list.size();
      std::size_t b = i, e = end;
      while (b < e && (list[b] == ' ' || list[b] == '\t')) b++;
      while (e > b && (list[e - 1] == ' ' || list[e - 1] == '\t')) e--;
      if (iequal(list.substr(b, e - b), token)) return true;
      i = end + 1;
    }
    return false;
  }

  bool count(std::size_t n) {
    header_bytes += n;
    if (header_bytes > max_header_bytes) {
      fail = 431;
      return false;
    }
    return true;
  }

  explicit impl(request_parser* o) : owner(o) {
    http_parser_init(&parser, HTTP_REQUEST);
    parser.data = this;
    http_parser_settings_init(&settings);
    settings.on_message_begin = [](http_parser* p) {
      impl* s = self(p);
      s->cur = request{};
      s->header_bytes = 0;
      s->last_was_value = false;
      s->url_done = false;
      s->owner->in_message_ = true;
      s->owner->in_headers_ = true;
      s->owner->continue_due_ = false;
      return 0;
    };
    settings.on_url = [](http_parser* p, const char* at, std::size_t n) {
      impl* s = self(p);
      if (s->cur.url.size() + n > max_url_bytes) {
        s->fail = 414;
        return 1;
      }
      s->cur.url.append(at, n);
      // http-parser hands over a URL cut by the end of a buffer at that
      // end; a URL that ended is followed by a byte of the same buffer.
      if (at + n != s->buf_end) s->url_done = true;
      return s->count(n) ? 0 : 1;
    };
    settings.on_header_field = [](http_parser* p, const char* at,
                                  std::size_t n) {
      impl* s = self(p);
      if (!s->count(n)) return 1;
      if (!token(at, n)) {
        s->fail = 400;
        return 1;
      }
      if (s->last_was_value || s->cur.headers.empty())
        s->cur.headers.emplace_back();
      s->cur.headers.back().first.append(at, n);
      s->last_was_value = false;
      return 0;
    };
    settings.on_header_value = [](http_parser* p, const char* at,
                                  std::size_t n) {
      impl* s = self(p);
      if (!s->count(n)) return 1;
      if (s->cur.headers.empty()) s->cur.headers.emplace_back();
      s->cur.headers.back().second.append(at, n);
      s->last_was_value = true;
      return 0;
    };
    settings.on_headers_complete = [](http_parser* p) {
      impl* s = self(p);
      // Content-Length is known here (ULLONG_MAX when absent).
      if (p->content_length != ~std::uint64_t{0} &&
          p->content_length > max_body_bytes) {
        s->fail = 413;
        return -1;
      }
      // HTTP/1.0 and 1.1 only (http-parser accepts any digit).
      if (p->http_major != 1 || p->http_minor > 1) {
        s->fail = 505;
        return -1;
      }
      // Upgrade (Connection: upgrade + Upgrade: websocket...) and CONNECT
      // switch to another protocol after the headers: not served here.
      if (p->upgrade) {
        s->fail = 400;
        return -1;
      }
      // As Go's server: an HTTP/1.1 request names its Host, once (RFC
      // 9112 section 3.2: 400 otherwise); HTTP/1.0 needs none.
      int hosts = 0;
      for (const auto& h : s->cur.headers) hosts += iequal(h.first, "host");
      if (hosts > 1 || (hosts == 0 && p->http_minor == 1)) {
        s->fail = 400;
        return -1;
      }
      // Expect: 100-continue on HTTP/1.1 with a body to come asks for an
      // interim "100 Continue" before the client sends it (serve_conn
      // writes it); HTTP/1.0 clients cannot read one (ignored, as Go
      // does). Any other expectation cannot be met: 417.
      if (const std::string* expect = s->header("expect")) {
        if (!has_token(*expect, "100-continue")) {
          s->fail = 417;
          return -1;
        }
        bool body =
            (p->flags & F_CHUNKED) != 0 ||
            (p->content_length != ~std::uint64_t{0} && p->content_length > 0);
        s->owner->continue_due_ = p->http_minor == 1 && body;
      }
      s->owner->in_headers_ = false;
      s->cur.method = http_method_str(static_cast<http_method>(p->method));
      return 0;
    };
    settings.on_chunk_header = [](http_parser* p) {
      // A chunk's size is known before its data (p->content_length).
      impl* s = self(p);
      if (p->content_length > max_body_bytes - s->cur.body.size()) {
        s->fail = 413;
        return -1;
      }
      return 0;
    };
    settings.on_body = [](http_parser* p, const char* at, std::size_t n) {
      impl* s = self(p);
      if (s->cur.body.size() + n > max_body_bytes) {  // chunked bodies
        s->fail = 413;
        return 1;
      }
      s->cur.body.append(at, n);
      return 0;
    };
    settings.on_message_complete = [](http_parser* p) {
      impl* s = self(p);
      s->cur.keep_alive = http_should_keep_alive(p) != 0;
      s->out->push_back(std::move(s->cur));
      s->cur = request{};
      s->owner->in_message_ = false;
      s->owner->continue_due_ = false;
      return 0;
    };
  }
};

request_parser::request_parser() {
  // http-parser's bound on the bytes of a request line plus its headers
  // (HPE_HEADER_OVERFLOW) is one process-wide value, 80 KiB by default;
  // Node sets it once the same way. It counts every byte, the line ends and
  // blanks that the callbacks above never see included.
  static std::once_flag once;
  std::call_once(once, [] {
    http_parser_set_max_header_size(
        static_cast<std::uint32_t>(max_header_bytes));
  });
  p_ = std::make_unique<impl>(this);
}
request_parser::~request_parser() = default;

bool request_parser::feed(const char* data, std::size_t n,
                          std::vector<request>* out) {
  if (error_status_ != 0) return false;
  if (n == 0) return true;  // http_parser_execute would take it for EOF
  p_->out = out;
  p_->buf_end = data + n;
  std::size_t done = http_parser_execute(&p_->parser, &p_->settings, data, n);
  http_errno e = HTTP_PARSER_ERRNO(&p_->parser);
  if (e != HPE_OK || done != n) {
    if (p_->fail != 0)
      error_status_ = p_->fail;
    else if (e == HPE_HEADER_OVERFLOW)
      // Over the bound in the request line: the URL is what is long.
      error_status_ = p_->url_done ? 431 : 414;
    else
      error_status_ = 400;
    return false;
  }
  // An upgrade (e.g. CONNECT, Upgrade: websocket) is not served here.
  if (p_->parser.upgrade) {
    error_status_ = 400;
    return false;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 413:
      return "Payload Too Large";
    case 414:
      return "URI Too Long";
    case 417:
      return "Expectation Failed";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return "Unknown";
  }
}

void format_response(const response& r, bool keep_alive, bool head,
                     std::string* out) {
  std::string& s = *out;
  s += "HTTP/1.1 ";
  s += std::to_string(r.status);
  s += ' ';
  s += reason(r.status);
  s += "\r\nContent-Type: ";
  s += r.content_type;
  s += "\r\nContent-Length: ";
  s += std::to_string(r.body.size());
  s += keep_alive ? "\r\nConnection: keep-alive\r\n\r\n"
                  : "\r\nConnection: close\r\n\r\n";
  // HEAD: the headers GET would have (Content-Length included), no body.
  if (!head) s += r.body;
}

std::string format_response(const response& r, bool keep_alive) {
  std::string s;
  s.reserve(128 + r.body.size());
  format_response(r, keep_alive, false, &s);
  return s;
}

}  // namespace http
