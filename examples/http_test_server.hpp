// http_test_server.hpp: the web server's tests serve http::serve on a
// loopback port with a handler that shows what it received.
#pragma once

#include <goro/goro.hpp>
#include <string>

#include "http_server.hpp"

namespace http_test {

// POST: "got N bytes"; anything else: "Hello, World!".
inline http::response echo_handler(const http::request& r) {
  if (r.method == "POST")
    return {200, "text/plain",
            "got " + std::to_string(r.body.size()) + " bytes"};
  return {200, "text/plain", "Hello, World!"};
}

// http::serve(echo_handler) on 127.0.0.1, port 0, in a goroutine, from
// construction until destruction (both inside goro::run).
class server {
 public:
  explicit server(http::server_options opt = {})
      : ln_(goro::net::listen("127.0.0.1:0")), where_(ln_.addr().str()) {
    done_.add(1);
    goro::go([this, opt] {
      http::serve(ln_, echo_handler, opt);
      done_.done();
    });
  }
  ~server() {
    ln_.close();
    done_.wait();
  }
  server(const server&) = delete;
  server& operator=(const server&) = delete;
  // "127.0.0.1:PORT"
  const std::string& where() const { return where_; }

 private:
  goro::net::listener ln_;
  std::string where_;
  goro::wait_group done_;
};

}  // namespace http_test
