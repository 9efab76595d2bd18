// goro_net_echo: the goro echo server of bench/net/run.sh, a goroutine per
// connection copying every byte back through a 4 KiB buffer. Its twin is
// `gonetbench echo-server` (bench/go/net/main.go).
//
//   goro_net_echo [address]   default 127.0.0.1:0; prints "listening ADDR"
#include <cstdio>
#include <exception>
#include <goro/goro.hpp>
#include <system_error>

namespace {

void serve(goro::net::conn c) {
  char buf[4096];
  try {
    while (std::size_t n = c.read(buf, sizeof buf)) c.write(buf, n);
  } catch (const std::system_error&) {
    // Reset by the peer, or its end of stream: the connection is done.
  }
}

}  // namespace

int main(int argc, char** argv) {
  const char* address = argc > 1 ? argv[1] : "127.0.0.1:0";
  return goro::run([address] {
    goro::net::listener ln;
    try {
      ln = goro::net::listen(address);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "goro_net_echo: listen %s: %s\n", address, e.what());
      return 1;
    }
    std::printf("listening %s\n", ln.addr().str().c_str());
    std::fflush(stdout);
    for (;;) {
      try {
        goro::go(serve, ln.accept());
      } catch (const std::system_error& e) {
        std::fprintf(stderr, "goro_net_echo: accept: %s\n", e.what());
        goro::sleep(std::chrono::milliseconds(5));
      }
    }
  });
}
