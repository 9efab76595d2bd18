// goro — Go's runtime scheduler as a C++20 library.
//
// net.hpp: TCP, UDP and Unix-domain sockets on the network poller (Go's
// net package). A goroutine per connection is the intended style: reads,
// writes, accept and dial park the goroutine (no OS thread is held while
// it waits); from a plain thread they block that thread.
//
// Addresses are Go's: "host:port", "[ipv6]:port", ":port" (all
// interfaces), port 0 for any free port (read the bound address back with
// local_addr()); host names are resolved with getaddrinfo under the
// syscall hand-off. Networks: "tcp", "tcp4", "tcp6", "udp", "udp4",
// "udp6", "unix" (stream), "unixgram"; Unix addresses are paths ("@name"
// for the abstract namespace).
//
// Errors are std::system_error with the errno (ECONNREFUSED,
// ECONNRESET...), goro::deadline_exceeded when a deadline passes and
// goro::closed_error on a closed connection (see goro/fd.hpp); a bad
// address is std::invalid_argument. End of stream is read() returning 0.
// Listeners set SO_REUSEADDR; TCP connections set TCP_NODELAY (Go's
// defaults). accept() survives EMFILE/ENFILE by backing off and retrying
// (as Go's http server does) rather than failing or spinning.
//
// Example (snippet: main):
//   auto ln = goro::net::listen("127.0.0.1:0");
//   goro::go([&ln] {
//     goro::net::conn c = ln.accept();
//     char buf[64];
//     while (std::size_t n = c.read(buf, sizeof buf)) c.write(buf, n);
//   });
//   goro::net::conn c = goro::net::dial(ln.addr().str());
//   c.write("ping", 4);
//   char buf[4];
//   return c.read_full(buf, 4) == 4 ? 0 : 1;
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <cstddef>
#include <goro/fd.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace goro::net {

using time_point = std::chrono::steady_clock::time_point;

// A socket address (IPv4, IPv6 or Unix).
class addr {
 public:
  addr() = default;
  addr(const sockaddr* sa, socklen_t len);
  // "127.0.0.1:80", "[::1]:80", or a Unix path; "" for an empty address.
  std::string str() const;
  // The IP part ("127.0.0.1", "::1"), or the path for a Unix address.
  std::string host() const;
  int port() const;                             // 0 for Unix addresses
  int family() const { return ss_.ss_family; }  // AF_INET, AF_INET6, AF_UNIX
  const sockaddr* data() const {
    return reinterpret_cast<const sockaddr*>(&ss_);
  }
  socklen_t size() const { return len_; }
  bool operator==(const addr& o) const;

 private:
  sockaddr_storage ss_{};
  socklen_t len_ = 0;
};

// Resolves "host:port" for a network ("tcp", "udp" and their 4/6 forms)
// to one address (the first getaddrinfo returns, IPv4 first for "tcp").
addr resolve(std::string_view network, std::string_view address);
// All addresses of a host name (Go's net.LookupHost), as strings.
std::vector<std::string> lookup_host(std::string_view host);

// A stream connection: TCP or Unix (Go's net.Conn).
class conn {
 public:
  conn() = default;
  explicit conn(goro::fd f) : fd_(std::move(f)) {}

  // Up to n bytes; 0 at end of stream.
  std::size_t read(void* buf, std::size_t n) { return fd_.read(buf, n); }
  // Exactly n bytes unless the stream ends first (returns the count).
  std::size_t read_full(void* buf, std::size_t n) {
    return fd_.read_full(buf, n);
  }
  // All n bytes (Go's Write), or throws.
  std::size_t write(const void* buf, std::size_t n) {
    return fd_.write(buf, n);
  }
  std::size_t write(std::string_view s) {
    return fd_.write(s.data(), s.size());
  }
  std::size_t write_all(const void* buf, std::size_t n) {
    return fd_.write(buf, n);
  }

  // Half-close: no more reads (the peer's writes are discarded) / no more
  // writes (the peer reads end of stream).
  void close_read();
  void close_write();
  void close() noexcept { fd_.close(); }

  addr local_addr() const;
  addr remote_addr() const;

  void set_deadline(time_point t) { fd_.set_deadline(t); }
  void set_read_deadline(time_point t) { fd_.set_read_deadline(t); }
  void set_write_deadline(time_point t) { fd_.set_write_deadline(t); }
  // TCP only: Nagle off (true, the default) or on.
  void set_no_delay(bool on);

  goro::fd& fd() { return fd_; }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  goro::fd fd_;
};

// A listening socket (Go's net.Listener).
class listener {
 public:
  listener() = default;
  explicit listener(goro::fd f) : fd_(std::move(f)) {}
  listener(listener&& other) noexcept;
  listener& operator=(listener&& other) noexcept;
  ~listener();  // close()
  // Parks until a connection arrives. A listener closed from another
  // goroutine wakes it with closed_error. Out of descriptors (EMFILE,
  // ENFILE) it waits and retries: 5 ms, doubling up to 1 s.
  conn accept();
  // Closes; blocked accepts wake with closed_error. A Unix listener that
  // listen() bound to a path removes that socket file (Go's
  // UnixListener.Close), so the path can be listened on again.
  void close() noexcept;
  goro::net::addr addr() const;  // the bound address (the real port for port 0)
  void set_deadline(time_point t) { fd_.set_read_deadline(t); }
  goro::fd& fd() { return fd_; }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  friend listener listen(std::string_view network, std::string_view address);
  goro::fd fd_;
  std::string unlink_path_;  // removed by close() (Unix path listeners)
};

// A datagram socket: UDP or Unix datagram (Go's net.PacketConn).
class packet_conn {
 public:
  packet_conn() = default;
  explicit packet_conn(goro::fd f) : fd_(std::move(f)) {}
  // One datagram (truncated to n bytes); its sender in *from if given.
  std::size_t recv_from(void* buf, std::size_t n, addr* from = nullptr);
  // One datagram to `to`; returns n.
  std::size_t send_to(const void* buf, std::size_t n, const addr& to);
  // For a connected socket (dial("udp", ...)): one datagram each.
  std::size_t read(void* buf, std::size_t n) {
    return recv_from(buf, n, nullptr);
  }
  std::size_t write(const void* buf, std::size_t n);
  void close() noexcept { fd_.close(); }
  addr local_addr() const;
  void set_deadline(time_point t) { fd_.set_deadline(t); }
  void set_read_deadline(time_point t) { fd_.set_read_deadline(t); }
  void set_write_deadline(time_point t) { fd_.set_write_deadline(t); }
  goro::fd& fd() { return fd_; }

 private:
  goro::fd fd_;
};

// listen("127.0.0.1:8080") is listen("tcp", "127.0.0.1:8080").
listener listen(std::string_view address);
// network: tcp, tcp4, tcp6, unix. backlog: SOMAXCONN.
listener listen(std::string_view network, std::string_view address);
// network: udp, udp4, udp6, unixgram.
packet_conn listen_packet(std::string_view network, std::string_view address);

// dial("127.0.0.1:8080") is dial("tcp", "127.0.0.1:8080"). Stream networks
// only (tcp*, unix); see dial_packet for datagrams.
conn dial(std::string_view address);
conn dial(std::string_view network, std::string_view address);
// Fails with deadline_exceeded if not connected within `timeout` (as Go's
// DialTimeout: zero is no timeout, a negative one has already passed). The
// timeout bounds the connect only; the connection has no deadline.
conn dial_timeout(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout);
// A connected datagram socket (udp*, unixgram).
packet_conn dial_packet(std::string_view network, std::string_view address);

}  // namespace goro::net
