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
// "udp6", "unix" (stream), "unixgram", "unixpacket" (sequenced packets: a
// connection that keeps message boundaries); Unix addresses are paths
// ("@name" for the abstract namespace).
//
// Errors are goro::net::op_error (Go's *net.OpError), a std::system_error
// whose what() names the operation, the network and the addresses as Go
// prints them ("dial tcp 127.0.0.1:9301: connect: connection refused",
// "read tcp 127.0.0.1:5000->127.0.0.1:41234: i/o timeout") and whose
// code() is the errno (ECONNREFUSED, ECONNRESET...). One that is a
// deadline passing is also a goro::deadline_exceeded, one on a closed
// connection also a goro::closed_error (see goro/fd.hpp), so catching
// either still works; bytes_transferred() counts what a failed write (or
// read_full) had moved. A bad address is std::invalid_argument. End of
// stream is read() returning 0. Listeners set SO_REUSEADDR; TCP
// connections set TCP_NODELAY, and dialled ones keep-alive every 15 s
// (Go's defaults). accept() survives EMFILE/ENFILE by backing off and
// retrying (as Go's http server does) rather than failing or spinning.
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
#include <sys/uio.h>

#include <chrono>
#include <cstddef>
#include <goro/context.hpp>
#include <goro/fd.hpp>
#include <memory>
#include <span>
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

// An operation on the network that failed (Go's *net.OpError). what() is
// Go's text: "<op> <net> [<source>->]<address>: [<syscall>: ]<error>",
// e.g. "listen tcp 127.0.0.1:80: bind: permission denied"; code() is the
// underlying error (an errno of std::system_category(), std::errc::timed_out
// for a deadline, std::errc::bad_file_descriptor for a closed connection,
// goro::context_errc::canceled for a cancelled dial,
// std::errc::already_connected for send_to on a connected socket). Timeouts are
// thrown as a type that is both an op_error and a goro::deadline_exceeded,
// closed connections as both an op_error and a goro::closed_error.
class op_error : public virtual goro::io_error {
 public:
  struct info {
    std::string op;   // "dial", "listen", "accept", "read", "write"
    std::string net;  // "tcp", "udp", "unix"... (as dialled, or the socket's)
    addr source;      // the local address, if known (reads, writes)
    addr address;     // the remote address (or the listener's own)
    std::string syscall;  // "connect", "bind"...: empty for timeouts, close
  };
  op_error(std::error_code ec, info i, std::size_t transferred = 0);

  const std::string& op() const noexcept { return i_->op; }
  const std::string& net() const noexcept { return i_->net; }
  const addr& source() const noexcept { return i_->source; }
  const addr& address() const noexcept { return i_->address; }
  // A deadline passed (Go's Timeout()): also a goro::deadline_exceeded.
  bool timeout() const noexcept;
  const char* what() const noexcept override { return msg_->c_str(); }

 protected:
  // For the combined types (a virtual base: the most derived constructs it).
  op_error(std::shared_ptr<const info> i, std::shared_ptr<const std::string> m);

 private:
  // Shared: copying an exception never allocates (or throws).
  std::shared_ptr<const info> i_;
  std::shared_ptr<const std::string> msg_;
};

// Resolves "host:port" for a network ("tcp", "udp" and their 4/6 forms)
// to one address (the first getaddrinfo returns, IPv4 first for "tcp").
addr resolve(std::string_view network, std::string_view address);
// All addresses of a host name (Go's net.LookupHost), as strings.
std::vector<std::string> lookup_host(std::string_view host);

// A stream connection: TCP, Unix or Unix sequenced-packet (Go's net.Conn).
// Errors are op_error (see above).
class conn {
 public:
  conn() = default;
  explicit conn(goro::fd f) : fd_(std::move(f)) {}
  // With the peer's address when it is known (dial and accept know it):
  // remote_addr() and error messages then need no getpeername, and still
  // name the peer after a reset.
  // `network` ("tcp", "unix"...) names it in errors once it is closed.
  conn(goro::fd f, const addr& remote, std::string_view network = {});

  // Up to n bytes; 0 at end of stream.
  std::size_t read(void* buf, std::size_t n);
  // Exactly n bytes unless the stream ends first (returns the count). An
  // error after part of it arrived carries that count (bytes_transferred()).
  std::size_t read_full(void* buf, std::size_t n);
  // All n bytes (Go's Write), or throws; the exception's
  // bytes_transferred() is what went out before the error.
  std::size_t write(const void* buf, std::size_t n);
  std::size_t write(std::string_view s) { return write(s.data(), s.size()); }
  std::size_t write_all(const void* buf, std::size_t n) {
    return write(buf, n);
  }
  // Every byte of every buffer, in order, with as few writev(2) calls as
  // the socket buffer allows (Go's net.Buffers.WriteTo); returns the total,
  // or throws with bytes_transferred() counting what went out.
  std::size_t write_buffers(std::span<const iovec> bufs);

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
  // SO_LINGER (Go's SetLinger): sec < 0, the default, lets close() return
  // at once and the kernel send what is left in the background; sec == 0
  // discards unsent data and resets the connection on close; sec > 0
  // keeps sending for up to sec seconds after close.
  void set_linger(int sec);
  // TCP keep-alive probes on or off (SO_KEEPALIVE), and their period: the
  // idle time before the first probe and the time between probes
  // (TCP_KEEPIDLE and TCP_KEEPINTVL, rounded up to whole seconds).
  void set_keep_alive(bool on);
  void set_keep_alive_period(std::chrono::nanoseconds d);

  goro::fd& fd() { return fd_; }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  // Rethrows the exception being handled as an op_error for `op`.
  [[noreturn]] void fail(const char* op);
  goro::fd fd_;
  addr raddr_;  // the peer, if known; else remote_addr() asks the kernel
  const char* net_ = nullptr;  // a static string, if known
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
  conn accept_loop();
  goro::fd fd_;
  std::string unlink_path_;  // removed by close() (Unix path listeners)
  // Kept by listen() for error messages after close (and for addr()).
  const char* net_ = nullptr;
  net::addr laddr_;
};

// A datagram socket: UDP or Unix datagram (Go's net.PacketConn and the
// connected UDPConn/UnixConn). Errors are op_error.
class packet_conn {
 public:
  packet_conn() = default;
  explicit packet_conn(goro::fd f) : fd_(std::move(f)) {}
  // One datagram (truncated to n bytes); its sender in *from if given (an
  // empty addr for an unnamed Unix sender).
  std::size_t recv_from(void* buf, std::size_t n, addr* from = nullptr);
  // One datagram to `to`; returns n. On a connected socket (dial_packet)
  // it fails, as Go's WriteTo does (ErrWriteToConnected: "use of WriteTo
  // with pre-connected connection", code() std::errc::already_connected),
  // without sending: use write().
  std::size_t send_to(const void* buf, std::size_t n, const addr& to);
  // For a connected socket (dial_packet): one datagram each.
  std::size_t read(void* buf, std::size_t n) {
    return recv_from(buf, n, nullptr);
  }
  std::size_t write(const void* buf, std::size_t n);
  void close() noexcept { fd_.close(); }
  addr local_addr() const;
  // The peer of a connected socket; an empty addr if it is not connected.
  addr remote_addr() const;
  void set_deadline(time_point t) { fd_.set_deadline(t); }
  void set_read_deadline(time_point t) { fd_.set_read_deadline(t); }
  void set_write_deadline(time_point t) { fd_.set_write_deadline(t); }
  goro::fd& fd() { return fd_; }
  explicit operator bool() const { return static_cast<bool>(fd_); }

 private:
  friend struct dialer;
  std::size_t recv_from_loop(void* buf, std::size_t n, addr* from);
  std::size_t send_to_loop(const void* buf, std::size_t n, const addr& to);
  std::size_t write_loop(const void* buf, std::size_t n);
  goro::fd fd_;
  bool connected_ = false;  // made by dial_packet: send_to is refused
};

// listen("127.0.0.1:8080") is listen("tcp", "127.0.0.1:8080").
listener listen(std::string_view address);
// network: tcp, tcp4, tcp6, unix, unixpacket. backlog: SOMAXCONN.
listener listen(std::string_view network, std::string_view address);
// network: udp, udp4, udp6, unixgram.
packet_conn listen_packet(std::string_view network, std::string_view address);

// How to dial (Go's net.Dialer); the zero value dials as dial() does.
// Example (snippet: goroutine):
//   auto ln = goro::net::listen("127.0.0.1:0");
//   goro::net::dialer d;
//   d.timeout = std::chrono::seconds(5);
//   d.local_addr = goro::net::resolve("tcp", "127.0.0.1:0");
//   auto [ctx, cancel] = goro::with_cancel(goro::background());
//   goro::net::conn c = d.dial_context(ctx, "tcp", ln.addr().str());
//   cancel();  // the connection outlives its dial's context
struct dialer {
  // Bounds the whole dial (zero: none; saturates, so nanoseconds::max()
  // is "forever"). With `deadline` and a context's deadline, the earliest
  // one applies. The connection itself gets no deadline.
  std::chrono::nanoseconds timeout{0};
  time_point deadline{};  // time_point{}: none
  // Binds the socket to this address before connecting (empty: the
  // kernel picks). Its family must match the one dialled. A dialled
  // unixgram socket without one stays unnamed, as in Go: the server's
  // replies have nowhere to go.
  addr local_addr{};
  // TCP keep-alive period (Go's Dialer.KeepAlive): zero, the default,
  // probes every 15 s; negative turns keep-alive off.
  std::chrono::nanoseconds keep_alive{0};

  // Stream networks (tcp*, unix, unixpacket).
  conn dial(std::string_view network, std::string_view address) const;
  // As dial, until ctx is done: cancelling ctx aborts a connect in
  // progress (op_error whose code() is goro::context_errc::canceled,
  // "operation was canceled"), and ctx's deadline bounds it (a timeout:
  // deadline_exceeded). Once it has returned, ctx no longer matters.
  conn dial_context(const goro::context& ctx, std::string_view network,
                    std::string_view address) const;
  // Datagram networks (udp*, unixgram): a connected packet_conn.
  packet_conn dial_packet(std::string_view network,
                          std::string_view address) const;
};

// dial("127.0.0.1:8080") is dial("tcp", "127.0.0.1:8080"). Stream networks
// only (tcp*, unix, unixpacket); see dial_packet for datagrams. Same as
// dialer{}.dial(network, address).
conn dial(std::string_view address);
conn dial(std::string_view network, std::string_view address);
// Fails with deadline_exceeded if not connected within `timeout` (as Go's
// DialTimeout: zero is no timeout, a negative one has already passed, a
// huge one saturates). The timeout bounds the connect only; the
// connection has no deadline.
conn dial_timeout(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout);
// A connected datagram socket (udp*, unixgram); a unixgram one is left
// unnamed (see dialer::local_addr).
packet_conn dial_packet(std::string_view network, std::string_view address);

}  // namespace goro::net
