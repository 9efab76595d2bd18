// sock.hpp: what the goro::net files share (Go's net/sock_posix.go,
// ipsock.go): parsed networks and addresses, and socket creation.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <goro/fd.hpp>
#include <goro/net.hpp>
#include <string_view>

namespace goro::net::detail {

enum class kind { stream, datagram };

struct network {
  int family = AF_UNSPEC;  // AF_INET, AF_INET6, AF_UNSPEC (either), AF_UNIX
  kind k = kind::stream;
};

// "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix", "unixgram";
// anything else is std::invalid_argument.
network parse_network(std::string_view name);

// Resolves an address for a network. `passive`: for listening (an empty
// host is the wildcard). Unix paths become sockaddr_un ("@x": abstract).
addr resolve_for(const network& net, std::string_view address, bool passive);

// unixsock.cpp: a Unix socket address for a path ("@name": the abstract
// namespace); std::invalid_argument if empty or too long.
addr unix_addr(std::string_view path);
// Binds an unbound Unix datagram socket to an autobound abstract address,
// so that a dialled socket can receive replies.
void unix_autobind(int s);

// socket(2), non-blocking and close-on-exec, wrapped in a goro::fd.
goro::fd new_socket(int family, int type);

// Connects f to a (non-blocking connect, parking until done). Throws the
// connect error, or deadline_exceeded past `deadline` (time_point{}: none).
void connect_fd(goro::fd& f, const addr& a,
                std::chrono::steady_clock::time_point deadline);

// getsockname / getpeername (closed_error once f is closed).
addr sockname(goro::fd& f, bool peer);

[[noreturn]] void throw_errno(int err, const char* what);

}  // namespace goro::net::detail
