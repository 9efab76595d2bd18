// fuzz_http: a libFuzzer target for the web server's request path
// (http_request.cpp: http-parser plus goro's bounds). Every input is fed
// whole and then split at each of a few points, as a connection would
// deliver it; the parser must never crash, must stop at its first error
// with one of the statuses the server answers with, and must never return a
// request that exceeds a bound.
//
// Built with clang++ -fsanitize=fuzzer,address when clang++-14 is present
// (examples/CMakeLists.txt). CI runs it briefly (ctest -R fuzz_http); by hand:
//   build/default/examples/fuzz_http -max_total_time=600 examples/fuzz_corpus/
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "http_server.hpp"

namespace {

void check(const http::request_parser& p, bool ok,
           const std::vector<http::request>& reqs) {
  if (!ok) {
    int s = p.status();
    if (s != 400 && s != 413 && s != 414 && s != 431 && s != 505) std::abort();
  }
  for (const http::request& r : reqs) {
    if (r.url.size() > http::max_url_bytes) std::abort();
    if (r.body.size() > http::max_body_bytes) std::abort();
    std::size_t hb = r.url.size();
    for (const auto& h : r.headers) hb += h.first.size() + h.second.size();
    if (hb > http::max_header_bytes) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data,
                                      std::size_t size) {
  const char* d = reinterpret_cast<const char*>(data);
  {
    http::request_parser p;
    std::vector<http::request> reqs;
    bool ok = p.feed(d, size, &reqs);
    check(p, ok, reqs);
  }
  // The same bytes in pieces: the result must not depend on the split.
  for (std::size_t split : {std::size_t{1}, size / 3, size / 2}) {
    if (split == 0 || split >= size) continue;
    http::request_parser p;
    std::vector<http::request> reqs;
    bool ok = p.feed(d, split, &reqs);
    if (ok) ok = p.feed(d + split, size - split, &reqs);
    check(p, ok, reqs);
  }
  return 0;
}
