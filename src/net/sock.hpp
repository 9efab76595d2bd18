// sock.hpp: what the goro::net files share (Go's net/sock_posix.go,
// ipsock.go): parsed networks and addresses, and socket creation.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <goro/fd.hpp>
#include <goro/net.hpp>
#include <string_view>

namespace goro::net::detail {

enum class kind { stream, datagram, seqpacket };

struct network {
  int family = AF_UNSPEC;  // AF_INET, AF_INET6, AF_UNSPEC (either), AF_UNIX
  kind k = kind::stream;
};

// The network's name as a static string (for conn and listener to keep);
// null for an unknown one.
const char* static_net_name(std::string_view name) noexcept;

// "tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix", "unixgram",
// "unixpacket";
// anything else is std::invalid_argument.
network parse_network(std::string_view name);

// Resolves an address for a network. `passive`: for listening (an empty
// host is the wildcard). Unix paths become sockaddr_un ("@x": abstract).
addr resolve_for(const network& net, std::string_view address, bool passive);

// unixsock.cpp: a Unix socket address for a path ("@name": the abstract
// namespace); std::invalid_argument if empty or too long.
addr unix_addr(std::string_view path);

// socket(2), non-blocking and close-on-exec, wrapped in a goro::fd.
goro::fd new_socket(int family, int type);

// Connects f to a (non-blocking connect, parking until done). Throws the
// connect error, or deadline_exceeded past `deadline` (time_point{}: none).
// The caller names the error (op_error).
void connect_fd(goro::fd& f, const addr& a,
                std::chrono::steady_clock::time_point deadline);

// getsockname / getpeername (closed_error once f is closed).
addr sockname(goro::fd& f, bool peer);

[[noreturn]] void throw_errno(int err, const char* what);

// error.cpp: op_error with Go's message. rethrow_as_op, called in a catch
// block, rethrows the exception being handled as an op_error for `i`
// (keeping its code, its bytes_transferred and its deadline_exceeded /
// closed_error type); other exceptions go through as they are.
[[noreturn]] void rethrow_as_op(op_error::info i);
[[noreturn]] void throw_timeout(op_error::info i, std::size_t n = 0);
[[noreturn]] void throw_closed(op_error::info i, std::size_t n = 0);
[[noreturn]] void throw_op_text(std::error_code ec, op_error::info i,
                                const char* text);

// The op_error fields of an operation on a socket: its network ("tcp",
// "udp", "unix", "unixgram", "unixpacket", from the socket itself) and its
// local and peer addresses, as far as they can still be read (a closed
// descriptor has none). Error paths only: up to four syscalls.
op_error::info sock_info(goro::fd& f, const char* op);

}  // namespace goro::net::detail
