// net_echo: the goro side of bench/net_run.sh's echo workload: an echo
// server on goro::net, a goroutine per connection (the twin of
// `goronet echo-server` in bench/gonet). Prints "listening ADDR" once ready.
#include <cstdio>
#include <goro/goro.hpp>
#include <system_error>

int main(int argc, char** argv) {
  return goro::run([&] {
    auto ln = goro::net::listen(argc > 1 ? argv[1] : "127.0.0.1:0");
    std::printf("listening %s\n", ln.addr().str().c_str());
    std::fflush(stdout);
    for (;;) {
      goro::net::conn c = ln.accept();
      goro::go([c = std::move(c)]() mutable {
        char buf[4096];
        try {
          while (std::size_t n = c.read(buf, sizeof buf)) c.write(buf, n);
        } catch (const std::system_error&) {
        }
      });
    }
    return 0;
  });
}
