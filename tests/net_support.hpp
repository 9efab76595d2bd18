// Helpers shared by the network tests (tcpsock_test.cpp, net_test.cpp):
// process CPU time, an echo server on a listener, and a wait for a
// goroutine to be parked on a descriptor.
#pragma once

#include <sys/resource.h>

#include <chrono>
#include <cstdint>
#include <goro/goro.hpp>
#include <string>
#include <system_error>

#include "test_support.hpp"

namespace goro_test {

// Process CPU time (user + system).
inline std::chrono::microseconds cpu_time() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return std::chrono::seconds(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         std::chrono::microseconds(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

// Serves echo on ln until it is closed; `done` counts the accept loop.
inline void serve_echo(goro::net::listener& ln, goro::wait_group& done) {
  done.add(1);
  goro::go([&ln, &done] {
    for (;;) {
      goro::net::conn c;
      try {
        c = ln.accept();
      } catch (const goro::closed_error&) {
        break;
      }
      goro::go([c = std::move(c)]() mutable {
        char buf[4096];
        try {
          while (std::size_t n = c.read(buf, sizeof buf)) c.write(buf, n);
        } catch (const std::system_error&) {
        }
      });
    }
    done.done();
  });
}

// From a goroutine: waits (bounded) until goroutine `id` is parked in the
// poller ("[IO wait]" in the goroutine dump), so a test knows its next
// readiness goes through netpoll instead of a read that finds data.
inline bool eventually_in_io_wait(std::uint64_t id) {
  const std::string head = "goroutine " + std::to_string(id) + " [IO wait]";
  return eventually(
      [&] { return goro::debug::stack(true).find(head) != std::string::npos; });
}

}  // namespace goro_test
