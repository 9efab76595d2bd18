// sock.cpp: socket creation, listen and connect (Go's net/sock_posix.go,
// sockopt_linux.go, fd_unix.go's connect).
#include "net/sock.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <goro/net.hpp>
#include <stdexcept>
#include <string>

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

addr sockname(goro::fd& f, bool peer) {
  goro::detail::fd_state* st = goro::detail::state_of(f);
  goro::detail::fd_ref ref(st);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  int s = st->sysfd;
  int rc = peer ? getpeername(s, reinterpret_cast<sockaddr*>(&ss), &len)
                : getsockname(s, reinterpret_cast<sockaddr*>(&ss), &len);
  if (rc != 0) throw_errno(errno, peer ? "getpeername" : "getsockname");
  return addr(reinterpret_cast<sockaddr*>(&ss), len);
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

// The handshake is over: connected, or a pending error that SO_ERROR
// reports. Throws that error; false while the connect is still in progress.
bool connect_done(int s) {
  int err = 0;
  socklen_t len = sizeof err;
  if (getsockopt(s, SOL_SOCKET, SO_ERROR, &err, &len) != 0)
    throw_errno(errno, "getsockopt");
  switch (err) {
    case EINPROGRESS:
    case EALREADY:
    case EINTR:
      return false;
    case EISCONN:
      return true;
    case 0: {
      // Writable without an error is not proof of a connection: the wait
      // may return for a readiness older than the connect (registering
      // the still unconnected socket reports EPOLLOUT|EPOLLHUP). Connected
      // only if there is a peer (Go's connect in fd_unix.go does the same).
      sockaddr_storage ss{};
      socklen_t sl = sizeof ss;
      return getpeername(s, reinterpret_cast<sockaddr*>(&ss), &sl) == 0;
    }
    default:
      throw_errno(err, "connect");
  }
}

}  // namespace

void connect_fd(goro::fd& f, const addr& a,
                std::chrono::steady_clock::time_point deadline) {
  const bool timed = deadline != std::chrono::steady_clock::time_point{};
  if (timed) f.set_write_deadline(deadline);
  goro::detail::fd_state* s = goro::detail::state_of(f);
  {
    goro::detail::fd_io io(s, 'w');
    // Fails at once past the deadline; drops a write readiness left from
    // the registration, so the wait below is for the handshake.
    goro::detail::fd_prepare(s, 'w', "connect");
    // One connect(2) (Go's netFD.connect): after EINTR the handshake goes
    // on in the kernel, and calling connect again could start a second
    // one on a socket whose first attempt failed.
    int err = ::connect(s->sysfd, a.data(), a.size()) == 0 ? 0 : errno;
    switch (err) {
      case 0:
      case EISCONN:
        break;
      case EINPROGRESS:
      case EALREADY:
      case EINTR:
        // Writable once the connection is made or has failed.
        do {
          goro::detail::fd_wait(s, 'w', "connect");
        } while (!connect_done(s->sysfd));
        break;
      default:
        throw_errno(err, "connect");
    }
  }
  if (timed) f.set_write_deadline({});
}

}  // namespace detail

listener listen(std::string_view address) { return listen("tcp", address); }

listener listen(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::stream)
    throw std::invalid_argument("goro::net::listen: not a stream network: " +
                                std::string(network));
  goro::fd f = detail::bind_socket(net, address, true);
  // A path (not "@name") is a socket file from here on: remove it if
  // listen fails, and when the listener closes.
  const bool path = net.family == AF_UNIX && address[0] != '@';
  if (::listen(f.get(), SOMAXCONN) != 0) {
    int err = errno;
    if (path) ::unlink(std::string(address).c_str());
    detail::throw_errno(err, "listen");
  }
  listener ln(std::move(f));
  if (path) ln.unlink_path_ = std::string(address);
  return ln;
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
  // An unbound unixgram socket cannot receive replies.
  if (a.family() == AF_UNIX) detail::unix_autobind(f.get());
  detail::connect_fd(f, a, {});
  return packet_conn(std::move(f));
}

}  // namespace goro::net
