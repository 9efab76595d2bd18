// sock.cpp: socket creation, listen and connect (Go's net/sock_posix.go,
// sockopt_linux.go, fd_unix.go's connect).
#include "net/sock.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <goro/net.hpp>

#include "net/fd_internal.hpp"

namespace goro::net {

namespace detail {

goro::fd new_socket(int family, int type) {
  int s = ::socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (s < 0) throw_errno(errno, "socket");
  try {
    return goro::fd(s);
  } catch (...) {
    ::close(s);
    throw;
  }
}

void connect_fd(goro::fd& f, const addr& a,
                std::chrono::steady_clock::time_point deadline) {
  if (deadline != std::chrono::steady_clock::time_point{})
    f.set_write_deadline(deadline);
  for (;;) {
    if (::connect(f.get(), a.data(), a.size()) == 0) break;
    if (errno == EINTR) continue;  // the connect goes on: wait for it below
    if (errno != EINPROGRESS && errno != EALREADY)
      throw_errno(errno, "connect");
    // Writable once the connection is made or has failed; SO_ERROR says
    // which (Go's connect in fd_unix.go).
    f.wait_writable();
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(f.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0)
      throw_errno(errno, "getsockopt");
    if (err == 0) break;
    if (err == EINPROGRESS || err == EALREADY || err == EINTR) continue;
    throw_errno(err, "connect");
  }
  if (deadline != std::chrono::steady_clock::time_point{})
    f.set_write_deadline({});
}

namespace {

int socktype(kind k) { return k == kind::stream ? SOCK_STREAM : SOCK_DGRAM; }

void setopt(int s, int level, int opt, int v) {
  if (setsockopt(s, level, opt, &v, sizeof v) != 0)
    throw_errno(errno, "setsockopt");
}

goro::fd bind_socket(const network& net, std::string_view address,
                     bool listening) {
  addr a = resolve_for(net, address, true);
  goro::fd f = new_socket(a.family(), socktype(net.k));
  int s = f.get();
  if (a.family() != AF_UNIX) {
    if (listening) setopt(s, SOL_SOCKET, SO_REUSEADDR, 1);
    // A wildcard IPv6 socket for "tcp"/"udp" also accepts IPv4 (Go's
    // dual-stack listener); "tcp6" is IPv6 only.
    if (a.family() == AF_INET6)
      setopt(s, IPPROTO_IPV6, IPV6_V6ONLY, net.family == AF_INET6);
    if (!listening && net.k == kind::datagram)
      setopt(s, SOL_SOCKET, SO_BROADCAST, 1);
  }
  if (::bind(s, a.data(), a.size()) != 0) throw_errno(errno, "bind");
  return f;
}

}  // namespace

}  // namespace detail

listener listen(std::string_view address) { return listen("tcp", address); }

listener listen(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::stream)
    throw std::invalid_argument("goro::net::listen: not a stream network: " +
                                std::string(network));
  goro::fd f = detail::bind_socket(net, address, true);
  if (::listen(f.get(), SOMAXCONN) != 0) detail::throw_errno(errno, "listen");
  return listener(std::move(f));
}

packet_conn listen_packet(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::datagram)
    throw std::invalid_argument(
        "goro::net::listen_packet: not a datagram network: " +
        std::string(network));
  return packet_conn(detail::bind_socket(net, address, false));
}

conn dial(std::string_view address) { return dial("tcp", address); }

conn dial(std::string_view network, std::string_view address) {
  return dial_timeout(network, address, std::chrono::nanoseconds::zero());
}

conn dial_timeout(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::stream)
    throw std::invalid_argument("goro::net::dial: not a stream network: " +
                                std::string(network) + " (use dial_packet)");
  std::chrono::steady_clock::time_point deadline{};
  if (timeout != std::chrono::nanoseconds::zero()) {
    if (timeout < std::chrono::nanoseconds::zero())
      throw goro::deadline_exceeded();
    deadline = std::chrono::steady_clock::now() + timeout;
  }
  addr a = detail::resolve_for(net, address, false);
  goro::fd f = detail::new_socket(a.family(), SOCK_STREAM);
  detail::connect_fd(f, a, deadline);
  if (a.family() != AF_UNIX)
    detail::setopt(f.get(), IPPROTO_TCP, TCP_NODELAY, 1);
  return conn(std::move(f));
}

packet_conn dial_packet(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::datagram)
    throw std::invalid_argument(
        "goro::net::dial_packet: not a datagram network: " +
        std::string(network));
  addr a = detail::resolve_for(net, address, false);
  goro::fd f = detail::new_socket(a.family(), SOCK_DGRAM);
  if (a.family() == AF_UNIX) {
    // An unbound unixgram socket cannot receive replies: autobind it to
    // an abstract address (Linux).
    sockaddr_un un{};
    un.sun_family = AF_UNIX;
    if (::bind(f.get(), reinterpret_cast<sockaddr*>(&un),
               sizeof(sa_family_t)) != 0)
      detail::throw_errno(errno, "bind");
  }
  detail::connect_fd(f, a, {});
  return packet_conn(std::move(f));
}

}  // namespace goro::net
