// clientlib_http.hpp: the web server example's connection loop
// (examples/http_server.hpp) for the curl tests, with every connection's
// goroutine counted, so that a test returns only when the server has
// finished with every connection (its clients have closed them): nothing
// of the server is left running, or reported as leaked by LeakSanitizer,
// when the process ends.
#pragma once

#include <goro/goro.hpp>
#include <memory>
#include <utility>

#include "http_server.hpp"

namespace clientlib {

// Accepts on ln until it is closed; a goroutine per connection, counted in
// conns (wait on it after closing ln and the clients).
inline void serve_counted(goro::net::listener& ln, http::handler h,
                          goro::wait_group& conns) {
  // Shared: connections may outlive this loop.
  auto shared = std::make_shared<http::handler>(std::move(h));
  for (;;) {
    goro::net::conn c;
    try {
      c = ln.accept();
    } catch (const goro::closed_error&) {
      return;
    }
    conns.add(1);
    goro::go([c = std::move(c), shared, &conns]() mutable {
      http::serve_conn(std::move(c), *shared);
      conns.done();
    });
  }
}

}  // namespace clientlib
