// sock.cpp: socket creation, listen and connect (Go's net/sock_posix.go,
// sockopt_linux.go, fd_unix.go's connect).
#include "net/sock.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <functional>
#include <goro/net.hpp>
#include <optional>
#include <stdexcept>
#include <string>

#include "interpose/real.hpp"
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

int socktype(kind k) {
  switch (k) {
    case kind::stream:
      return SOCK_STREAM;
    case kind::seqpacket:
      return SOCK_SEQPACKET;
    default:
      return SOCK_DGRAM;
  }
}

void setopt(int s, int level, int opt, int v) {
  if (setsockopt(s, level, opt, &v, sizeof v) != 0)
    throw_errno(errno, "setsockopt");
}

int getopt_int(int s, int opt) {
  int v = -1;
  socklen_t len = sizeof v;
  if (getsockopt(s, SOL_SOCKET, opt, &v, &len) != 0) return -1;
  return v;
}

goro::fd bind_socket(const network& net, const addr& a, bool listening) {
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
    int err = goro::rt::sys::real().connect(s->sysfd, a.data(), a.size()) == 0
                  ? 0
                  : errno;
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

op_error::info sock_info(goro::fd& f, const char* op) {
  op_error::info i;
  i.op = op;
  goro::detail::fd_state* st = goro::detail::state_of(f);
  try {
    goro::detail::fd_ref ref(st);
    int domain = getopt_int(st->sysfd, SO_DOMAIN);
    int type = getopt_int(st->sysfd, SO_TYPE);
    if (domain == AF_UNIX)
      i.net = type == SOCK_STREAM  ? "unix"
              : type == SOCK_DGRAM ? "unixgram"
                                   : "unixpacket";
    else if (domain == AF_INET || domain == AF_INET6)
      i.net = type == SOCK_STREAM ? "tcp" : "udp";
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (getsockname(st->sysfd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      i.source = addr(reinterpret_cast<sockaddr*>(&ss), len);
    len = sizeof ss;
    if (getpeername(st->sysfd, reinterpret_cast<sockaddr*>(&ss), &len) == 0)
      i.address = addr(reinterpret_cast<sockaddr*>(&ss), len);
  } catch (const std::exception&) {
    // Closed: nothing left to read the names from.
  }
  return i;
}

}  // namespace detail

namespace {

using clock = std::chrono::steady_clock;

// now + d, saturated: a huge timeout is "never", not a time in the past
// (Go's TestDialTimeoutMaxDuration).
time_point after(std::chrono::nanoseconds d) {
  const time_point now = clock::now();
  if (d > time_point::max() - now) return time_point::max();
  return now + d;
}

// The earlier of two deadlines, time_point{} being "none".
time_point earliest(time_point a, time_point b) {
  if (a == time_point{}) return b;
  if (b == time_point{}) return a;
  return a < b ? a : b;
}

// Keep-alive on a dialled TCP connection (Go's Dialer.KeepAlive: zero is
// 15 s, negative is off).
void dial_keep_alive(conn& c, std::chrono::nanoseconds ka) {
  if (ka < std::chrono::nanoseconds::zero()) return;
  c.set_keep_alive(true);
  c.set_keep_alive_period(
      ka == std::chrono::nanoseconds::zero() ? std::chrono::seconds(15) : ka);
}

// Aborts a connect in progress when a context is done (Go's
// netFD.connect interrupter): a goroutine run by context_after_func sets
// the write deadline to long ago, which wakes the connect. On every exit
// the guard makes sure that goroutine is not running any more, so it never
// touches a socket that is gone.
class interrupter {
 public:
  interrupter(const goro::context& ctx, goro::fd& f) {
    if (!ctx.done()) return;  // can never be done
    fired_ = goro::make_chan<void>();
    stop_ = goro::context_after_func(ctx, [&f, fired = fired_]() mutable {
      try {
        f.set_write_deadline(time_point(std::chrono::nanoseconds(1)));
      } catch (const std::exception&) {
      }
      fired.close();
    });
  }
  ~interrupter() { (void)finish(); }
  interrupter(const interrupter&) = delete;
  interrupter& operator=(const interrupter&) = delete;
  // Unregisters; true if the context interrupted (or was done), after
  // waiting for the interrupting goroutine to finish.
  bool finish() {
    if (!stop_) return interrupted_;
    if (!stop_()) {
      fired_.recv();
      interrupted_ = true;
    }
    stop_ = nullptr;
    return interrupted_;
  }

 private:
  goro::chan<void> fired_;
  std::function<bool()> stop_;
  bool interrupted_ = false;
};

// The context's error as the dial's: a deadline is a timeout (also a
// goro::deadline_exceeded), a cancellation "operation was canceled".
[[noreturn]] void throw_ctx_error(const goro::context& ctx, op_error::info i) {
  std::error_code e = ctx.err();
  if (e == goro::context_errc::deadline_exceeded)
    detail::throw_timeout(std::move(i));
  i.syscall.clear();
  throw op_error(e, std::move(i));
}

conn dial_stream(const dialer& d, const goro::context* ctx,
                 std::string_view network, std::string_view address) {
  op_error::info i;
  i.op = "dial";
  i.net = std::string(network);
  i.source = d.local_addr;
  detail::network net = detail::parse_network(network);
  if (net.k == detail::kind::datagram)
    throw std::invalid_argument("goro::net::dial: not a stream network: " +
                                std::string(network) + " (use dial_packet)");
  try {
    time_point deadline = d.deadline;
    if (d.timeout < std::chrono::nanoseconds::zero()) detail::throw_timeout(i);
    if (d.timeout > std::chrono::nanoseconds::zero())
      deadline = earliest(deadline, after(d.timeout));
    if (ctx != nullptr) {
      if (ctx->err()) throw_ctx_error(*ctx, i);
      if (auto cd = ctx->deadline()) deadline = earliest(deadline, *cd);
    }
    addr a = detail::resolve_for(net, address, false);
    i.address = a;
    goro::fd f = detail::new_socket(a.family(), detail::socktype(net.k));
    if (d.local_addr.size() != 0 &&
        ::bind(f.get(), d.local_addr.data(), d.local_addr.size()) != 0)
      detail::throw_errno(errno, "bind");
    // The deadline first, then the interrupter: a cancellation that comes
    // in between must not be overwritten by the deadline.
    if (deadline != time_point{}) f.set_write_deadline(deadline);
    {
      std::optional<interrupter> intr;
      if (ctx != nullptr) intr.emplace(*ctx, f);
      try {
        detail::connect_fd(f, a, {});
      } catch (const std::exception&) {
        if (intr && intr->finish()) throw_ctx_error(*ctx, i);
        throw;
      }
      // Connected, but the context was done first: Go fails the dial too.
      if (intr && intr->finish()) throw_ctx_error(*ctx, i);
    }
    if (deadline != time_point{}) f.set_write_deadline({});
    conn c(std::move(f), a, network);
    if (a.family() != AF_UNIX) {
      detail::setopt(c.fd().get(), IPPROTO_TCP, TCP_NODELAY, 1);
      dial_keep_alive(c, d.keep_alive);
    }
    return c;
  } catch (const std::system_error&) {
    detail::rethrow_as_op(std::move(i));
  }
}

}  // namespace

listener listen(std::string_view address) { return listen("tcp", address); }

listener listen(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k == detail::kind::datagram)
    throw std::invalid_argument("goro::net::listen: not a stream network: " +
                                std::string(network));
  op_error::info i;
  i.op = "listen";
  i.net = std::string(network);
  try {
    i.address = detail::resolve_for(net, address, true);
    goro::fd f = detail::bind_socket(net, i.address, true);
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
    ln.net_ = detail::static_net_name(network);
    ln.laddr_ = detail::sockname(ln.fd_, false);  // the real port for port 0
    return ln;
  } catch (const std::system_error&) {
    detail::rethrow_as_op(std::move(i));
  }
}

packet_conn listen_packet(std::string_view network, std::string_view address) {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::datagram)
    throw std::invalid_argument(
        "goro::net::listen_packet: not a datagram network: " +
        std::string(network));
  op_error::info i;
  i.op = "listen";
  i.net = std::string(network);
  try {
    i.address = detail::resolve_for(net, address, true);
    return packet_conn(detail::bind_socket(net, i.address, false));
  } catch (const std::system_error&) {
    detail::rethrow_as_op(std::move(i));
  }
}

conn dialer::dial(std::string_view network, std::string_view address) const {
  return dial_stream(*this, nullptr, network, address);
}

conn dialer::dial_context(const goro::context& ctx, std::string_view network,
                          std::string_view address) const {
  return dial_stream(*this, &ctx, network, address);
}

packet_conn dialer::dial_packet(std::string_view network,
                                std::string_view address) const {
  detail::network net = detail::parse_network(network);
  if (net.k != detail::kind::datagram)
    throw std::invalid_argument(
        "goro::net::dial_packet: not a datagram network: " +
        std::string(network));
  op_error::info i;
  i.op = "dial";
  i.net = std::string(network);
  i.source = local_addr;
  try {
    i.address = detail::resolve_for(net, address, false);
    goro::fd f = detail::new_socket(i.address.family(), SOCK_DGRAM);
    // No bind without local_addr, as in Go: a unixgram socket stays
    // unnamed (it can send, but nothing can reply to it).
    if (local_addr.size() != 0 &&
        ::bind(f.get(), local_addr.data(), local_addr.size()) != 0)
      detail::throw_errno(errno, "bind");
    detail::connect_fd(f, i.address, {});
    packet_conn pc(std::move(f));
    pc.connected_ = true;
    return pc;
  } catch (const std::system_error&) {
    detail::rethrow_as_op(std::move(i));
  }
}

conn dial(std::string_view address) { return dial("tcp", address); }

conn dial(std::string_view network, std::string_view address) {
  return dialer{}.dial(network, address);
}

conn dial_timeout(std::string_view network, std::string_view address,
                  std::chrono::nanoseconds timeout) {
  dialer d;
  d.timeout = timeout;
  return d.dial(network, address);
}

packet_conn dial_packet(std::string_view network, std::string_view address) {
  return dialer{}.dial_packet(network, address);
}

}  // namespace goro::net
