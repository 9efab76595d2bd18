// syscalls.cpp: what happens to the thread when a goroutine makes a system
// call (the seeds' "asynchronous system calls", "synchronous system calls"
// and "CGO blocks M" sections).
//
//   syscalls [conns] [call_ms]
//
// 1. Network poller: `conns` goroutines each wait to read from their own
//    TCP connection. They are parked in the scheduler's netpoll (epoll),
//    not blocked in read(): the whole process keeps a handful of threads.
//    One write per connection wakes them all.
// 2. Synchronous system call on one P (gomaxprocs(1)): a goroutine calls a
//    blocking function (usleep `call_ms`, standing in for a file read or a
//    C library call) inside goro::blocking_long. The P is handed to another
//    thread at once, so a second goroutine keeps counting meanwhile. (Left
//    out of goro::blocking, the call would hold the only P for its whole
//    length: see docs/porting.md.)
// 3. The "CGO" pitfall: 16 goroutines want a slow C call; a semaphore
//    sized to gomaxprocs caps how many threads sit in it at once.
//
// Exits 1 if a check fails.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <goro/goro.hpp>
#include <mutex>
#include <vector>

namespace {

int os_threads() {
  std::FILE* f = std::fopen("/proc/self/status", "r");
  if (f == nullptr) return -1;
  char line[256];
  int n = -1;
  while (std::fgets(line, sizeof line, f) != nullptr)
    if (std::strncmp(line, "Threads:", 8) == 0) n = std::atoi(line + 8);
  std::fclose(f);
  return n;
}

// A C function that blocks its thread (cgo's slowCFunction).
void slow_c_function(int ms) { ::usleep(static_cast<useconds_t>(ms) * 1000); }

}  // namespace

int main(int argc, char** argv) {
  const int conns = argc > 1 ? std::atoi(argv[1]) : 200;
  const int call_ms = argc > 2 ? std::atoi(argv[2]) : 100;
  if (conns < 1 || call_ms < 1) {
    std::fprintf(stderr, "usage: syscalls [conns >= 1] [call_ms >= 1]\n");
    return 2;
  }
  return goro::run([&]() -> int {
    int rc = 0;
    std::printf("=== 1. %d goroutines waiting on sockets (netpoll) ===\n",
                conns);
    {
      goro::net::listener ln = goro::net::listen("tcp", "127.0.0.1:0");
      const std::string address = ln.addr().str();
      std::vector<goro::net::conn> servers;
      goro::wait_group reading, done;
      std::atomic<int> got{0};
      for (int i = 0; i < conns; i++) {
        reading.add(1);
        done.add(1);
        goro::go([&] {
          goro::net::conn c = goro::net::dial("tcp", address);
          reading.done();
          char buf[8];
          if (c.read(buf, sizeof buf) > 0) got++;  // parks in netpoll
          done.done();
        });
        servers.push_back(ln.accept());
      }
      reading.wait();
      std::printf("%d goroutines blocked in read(): %d OS threads\n", conns,
                  os_threads());
      if (os_threads() >= conns) rc = 1;
      for (auto& s : servers) s.write("x");
      done.wait();
      std::printf("one write each: %d readers woke\n", got.load());
      if (got.load() != conns) rc = 1;
    }

    std::printf("\n=== 2. A blocking call on the only P ===\n");
    {
      const int procs = goro::gomaxprocs(1);
      std::atomic<bool> in_call{false}, call_done{false};
      std::atomic<long> counted_during{0};
      goro::wait_group wg;
      wg.add(2);
      goro::go([&] {
        goro::blocking_long([&] {
          in_call = true;
          slow_c_function(call_ms);  // the thread blocks; the P moves on
        });
        call_done = true;
        wg.done();
      });
      goro::go([&] {
        while (!call_done) {
          if (in_call) counted_during++;
          goro::gosched();
        }
        wg.done();
      });
      wg.wait();
      std::printf(
          "while one goroutine spent %d ms in a blocking call, the other "
          "counted %ld times on the same single P\n",
          call_ms, counted_during.load());
      if (counted_during.load() == 0) rc = 1;
      goro::gomaxprocs(procs);
    }

    std::printf("\n=== 3. Slow C calls capped by a semaphore ===\n");
    {
      const int limit = goro::gomaxprocs();
      goro::semaphore c_calls(limit);  // cgoSemaphore
      std::atomic<int> now{0}, peak{0};
      int threads_peak = 0;
      std::mutex m;
      goro::wait_group wg;
      const auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < 16; i++) {
        wg.add(1);
        goro::go([&] {
          c_calls.acquire();  // limit concurrent C calls
          const int n = ++now;
          for (int p = peak.load(); n > p;)
            if (peak.compare_exchange_weak(p, n)) break;
          goro::blocking_long([&] { slow_c_function(call_ms / 5 + 1); });
          {
            std::lock_guard<std::mutex> lock(m);
            threads_peak = std::max(threads_peak, os_threads());
          }
          --now;
          c_calls.release();
          wg.done();
        });
      }
      wg.wait();
      std::printf(
          "16 calls of %d ms, at most %d at once (limit %d), in %.0f ms; up to "
          "%d OS threads\n",
          call_ms / 5 + 1, peak.load(), limit,
          std::chrono::duration<double, std::milli>(
              std::chrono::steady_clock::now() - t0)
              .count(),
          threads_peak);
      if (peak.load() > limit) rc = 1;
    }
    std::printf(rc == 0 ? "syscalls: ok\n" : "FAIL: see above\n");
    return rc;
  });
}
