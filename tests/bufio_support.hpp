// In-memory byte sources and sinks for the bufio tests (Go's iotest
// readers: one byte at a time, half of what is asked, an error mid-stream).
#pragma once

#include <algorithm>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

namespace goro_test {

// Reads `data` at most `chunk` bytes per call (0: all that is asked), or
// half of what is asked (half = true). fail_at: the read call (1-based)
// that throws `timeout` instead of reading, once; 0 for none. Records the
// sizes asked for.
struct mem_source {
  explicit mem_source(std::string d, std::size_t chunk_ = 0, bool half_ = false)
      : data(std::move(d)), chunk(chunk_), half(half_) {}

  std::string data;
  std::size_t chunk = 0;
  bool half = false;
  int fail_at = 0;
  std::size_t pos = 0;
  int calls = 0;
  std::vector<std::size_t> asked;

  struct timeout : std::runtime_error {
    timeout() : std::runtime_error("test: i/o timeout") {}
  };

  std::size_t read(void* buf, std::size_t n) {
    calls++;
    asked.push_back(n);
    if (calls == fail_at) throw timeout();
    std::size_t k = std::min(n, data.size() - pos);
    if (chunk > 0) k = std::min(k, chunk);
    if (half && k > 1) k = (k + 1) / 2;
    std::memcpy(buf, data.data() + pos, k);
    pos += k;
    return k;
  }
};

// Collects what is written, at most `chunk` bytes per call (0: all); after
// `limit` bytes in total every write throws EPIPE (a closed peer). With
// zero = true, writes return 0 (a broken writer). Records each call's size.
struct mem_sink {
  std::string out;
  std::size_t chunk = 0;
  std::size_t limit = static_cast<std::size_t>(-1);
  bool zero = false;
  std::vector<std::size_t> sizes;

  std::size_t write(const void* buf, std::size_t n) {
    sizes.push_back(n);
    if (zero) return 0;
    if (out.size() >= limit)
      throw std::system_error(EPIPE, std::generic_category(), "write");
    std::size_t k = chunk > 0 ? std::min(n, chunk) : n;
    k = std::min(k, limit - out.size());
    out.append(static_cast<const char*>(buf), k);
    return k;
  }
};

}  // namespace goro_test
