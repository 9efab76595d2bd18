// chat_client.cpp: see chat_client.hpp. The same steps as Go's
// chatClientRun: dial, join, wait for every room's "ready", then a sender
// and a receiver goroutine per connection.
#include "chat_client.hpp"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <memory>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

// A buffered line reader over a connection (Go's bufio.Reader.ReadSlice).
class line_reader {
 public:
  explicit line_reader(goro::net::conn* c)
      : c_(c), buf_(new char[kSize]) {}  // not zeroed, as Go's pages
  // The next line with its "\n", or empty at end of stream.
  std::string_view next() {
    for (;;) {
      const void* nl = std::memchr(buf_.get() + r_, '\n', w_ - r_);
      if (nl != nullptr) {
        std::size_t end = static_cast<const char*>(nl) - buf_.get() + 1;
        std::string_view s(buf_.get() + r_, end - r_);
        r_ = end;
        return s;
      }
      if (r_ > 0) {
        std::memmove(buf_.get(), buf_.get() + r_, w_ - r_);
        w_ -= r_;
        r_ = 0;
      }
      if (w_ == kSize) return {};  // a line longer than the buffer
      std::size_t n = c_->read(buf_.get() + w_, kSize - w_);
      if (n == 0) return {};
      w_ += n;
    }
  }

 private:
  goro::net::conn* c_;
  static constexpr std::size_t kSize = 64 << 10;
  std::unique_ptr<char[]> buf_;
  std::size_t r_ = 0, w_ = 0;
};

[[noreturn]] void die(const char* what, int i) {
  std::fprintf(stderr, "goro_net_chat: client conn %d: %s\n", i, what);
  std::fflush(stderr);
  std::_Exit(1);
}

}  // namespace

int chat_client(const std::string& addr, int nconn, int lines, double limit,
                std::size_t room_size) {
  if (nconn <= 0 || lines <= 0 || nconn % int(room_size) != 0) {
    std::fprintf(stderr,
                 "goro_net_chat: %d connections do not fill rooms of %zu\n",
                 nconn, room_size);
    return 1;
  }
  auto deadline =
      std::chrono::steady_clock::now() +
      std::chrono::duration_cast<std::chrono::steady_clock::duration>(
          std::chrono::duration<double>(limit));
  std::vector<goro::net::conn> conns(nconn);
  std::vector<std::unique_ptr<line_reader>> readers(nconn);
  {
    // Several dials at a time (64, as Go's dialAll).
    goro::wait_group dialed;
    auto slots = goro::make_chan<void>(64);
    for (int i = 0; i < nconn; i++) {
      slots.send();
      dialed.go([&, i] {
        try {
          conns[i] = goro::net::dial(addr);
        } catch (const std::system_error& e) {
          die(e.what(), i);
        }
        slots.recv();
      });
    }
    dialed.wait();
  }
  try {
    for (int i = 0; i < nconn; i++) {
      conns[i].set_deadline(deadline);
      readers[i] = std::make_unique<line_reader>(&conns[i]);
      char join[32];
      int n = std::snprintf(join, sizeof join, "join %d\n", i / int(room_size));
      conns[i].write(join, std::size_t(n));
    }
  } catch (const std::system_error& e) {
    std::fprintf(stderr, "goro_net_chat: client: dial/join: %s\n", e.what());
    return 1;
  }
  {
    goro::wait_group ready;
    for (int i = 0; i < nconn; i++) {
      ready.go([&, i] {
        try {
          if (readers[i]->next() != "ready\n") die("no ready line", i);
        } catch (const std::system_error& e) {
          die(e.what(), i);
        }
      });
    }
    ready.wait();
  }

  auto start = std::chrono::steady_clock::now();
  std::atomic<long> delivered{0};
  goro::wait_group wg;
  for (int i = 0; i < nconn; i++) {
    wg.go([&, i] {
      // Fixed-width lines: sender and sequence number, padded.
      char line[32];
      for (int q = 0; q < lines; q++) {
        int n = std::snprintf(line, sizeof line, "%06d %04d", i, q);
        std::memset(line + n, '.', sizeof line - 1 - std::size_t(n));
        line[sizeof line - 1] = '\n';
        try {
          conns[i].write(line, sizeof line);
        } catch (const std::system_error& e) {
          die(e.what(), i);
        }
      }
    });
    wg.go([&, i] {
      int room = i / int(room_size);
      std::vector<int> got(room_size);
      try {
        for (int n = 0; n < int(room_size) * lines; n++) {
          std::string_view l = readers[i]->next();
          if (l.size() < 7) die("too few lines", i);
          int from = 0;
          for (char ch : l.substr(0, 6)) from = from * 10 + (ch - '0');
          if (from / int(room_size) != room) die("a stray line", i);
          got[from % room_size]++;
        }
      } catch (const std::system_error& e) {
        die(e.what(), i);
      }
      for (int g : got)
        if (g != lines) die("a member's line count is wrong", i);
      delivered.fetch_add(long(room_size) * lines, std::memory_order_relaxed);
    });
  }
  wg.wait();
  double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start)
          .count();
  long want = long(nconn) * long(room_size) * lines;
  if (delivered.load() != want) {
    std::fprintf(stderr, "goro_net_chat: %ld deliveries, want %ld\n",
                 delivered.load(), want);
    return 1;
  }
  std::printf("RESULT wall_ms %.1f ms\n", secs * 1e3);
  std::printf("RESULT deliveries %ld count\n", delivered.load());
  std::printf("RESULT rate %.0f deliveries/s\n", double(want) / secs);
  std::fflush(stdout);
  for (auto& c : conns) c.close();
  return 0;
}
