// fuzz_http: a libFuzzer target for the web server's request path
// (http_request.cpp: http-parser plus the server's bounds). Every input is
// fed whole, then in two pieces split at a few points and byte by byte, as
// a connection could deliver it. The parser must never crash (ASan), must
// stop at its first error with one of the statuses the server answers
// with, must never return a request over a bound, and must come to the
// same result (requests and their every field, success or failure)
// whatever the split; see check_same for the one way the status may vary.
//
// Built with clang++ -fsanitize=fuzzer,address when a clang++ here can
// (examples/CMakeLists.txt); ctest's fuzz_http_short runs it for 100,000
// inputs (`ctest -L fuzz`). Longer runs by hand, keeping new inputs out of
// the sources (the first directory is where libFuzzer writes), 2 jobs:
//   mkdir -p /tmp/fuzz_http && build/default/examples/fuzz_http
//     -max_total_time=600 -max_len=16384 -jobs=2 /tmp/fuzz_http
//     examples/http_corpus examples/fuzz_corpus      (one command line)
// A crash leaves crash-<sha1> in the current directory; replay it with
// `fuzz_http crash-<sha1>`. Fold inputs that add coverage back into the
// corpus with `fuzz_http -merge=1 examples/fuzz_corpus /tmp/fuzz_http`.
// http_server_test replays both corpora through this same function in
// every build, libFuzzer or not.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "http_server.hpp"

namespace {

struct outcome {
  bool ok;
  int status;
  std::vector<http::request> reqs;
};

// Feeds data in pieces of `piece` bytes (0: whole).
outcome run(const char* d, std::size_t size, std::size_t first,
            std::size_t piece) {
  http::request_parser p;
  outcome o{true, 0, {}};
  if (first == 0 || first > size) first = size;
  o.ok = p.feed(d, first, &o.reqs);
  for (std::size_t i = first; o.ok && i < size; i += piece)
    o.ok = p.feed(d + i, std::min(piece, size - i), &o.reqs);
  o.status = p.status();
  return o;
}

void check_bounds(const outcome& o) {
  if (o.ok != (o.status == 0)) std::abort();
  if (!o.ok && o.status != 400 && o.status != 413 && o.status != 414 &&
      o.status != 417 && o.status != 431 && o.status != 505)
    std::abort();
  for (const http::request& r : o.reqs) {
    if (r.method.empty()) std::abort();
    if (r.url.size() > http::max_url_bytes) std::abort();
    if (r.body.size() > http::max_body_bytes) std::abort();
    std::size_t hb = r.url.size();
    for (const auto& h : r.headers) hb += h.first.size() + h.second.size();
    if (hb > http::max_header_bytes) std::abort();
  }
}

bool same(const http::request& a, const http::request& b) {
  return a.method == b.method && a.url == b.url && a.headers == b.headers &&
         a.body == b.body && a.keep_alive == b.keep_alive;
}

// The same result, except for which of two faults in one request is
// reported: http-parser hands over a URL or header when it ends or when the
// buffer does, so a URL over its bound that also holds a bad byte further
// on is 414 when a piece ends inside it past the bound, and 400 when it
// comes whole (the bad byte stops the parser before the URL is handed
// over). A bound status may then stand in for a 400, nothing else.
void check_same(const outcome& a, const outcome& b) {
  if (a.ok != b.ok || a.reqs.size() != b.reqs.size()) std::abort();
  if (a.status != b.status && a.status != 400 && b.status != 400) std::abort();
  for (std::size_t i = 0; i < a.reqs.size(); i++)
    if (!same(a.reqs[i], b.reqs[i])) std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const char* d = reinterpret_cast<const char*>(data);
  outcome whole = run(d, size, size, size);
  check_bounds(whole);
  for (std::size_t split : {std::size_t{1}, size / 3, size / 2, size - 1}) {
    if (split == 0 || split >= size) continue;
    outcome two = run(d, size, split, size);
    check_bounds(two);
    check_same(whole, two);
  }
  if (size <= 2048) {  // byte by byte: 1 call per byte
    outcome bytes = run(d, size, 1, 1);
    check_bounds(bytes);
    check_same(whole, bytes);
  }
  return 0;
}
