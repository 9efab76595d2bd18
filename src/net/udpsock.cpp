// udpsock.cpp: datagram sockets, UDP and Unix (Go's net/udpsock.go,
// udpsock_posix.go, unixsock.go's datagram half).
#include <sys/socket.h>

#include <cerrno>
#include <goro/net.hpp>
#include <system_error>

#include "interpose/real.hpp"
#include "net/fd_internal.hpp"
#include "net/sock.hpp"

namespace goro::net {

namespace {

// Go names a datagram socket's failures "read"/"write" too.
[[noreturn]] void rethrow_packet(goro::fd& f, const char* op) {
  detail::rethrow_as_op(detail::sock_info(f, op));
}

}  // namespace

std::size_t packet_conn::recv_from(void* buf, std::size_t n, addr* from) {
  try {
    return recv_from_loop(buf, n, from);
  } catch (const std::system_error&) {
    rethrow_packet(fd_, "read");
  }
}

std::size_t packet_conn::recv_from_loop(void* buf, std::size_t n, addr* from) {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_io io(s, 'r');
  goro::detail::fd_prepare(s, 'r', "recvfrom");
  for (;;) {
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    ssize_t r = goro::rt::sys::real().recvfrom(
        s->sysfd, buf, n, 0, reinterpret_cast<sockaddr*>(&ss), &len);
    if (r >= 0) {
      if (from != nullptr) *from = addr(reinterpret_cast<sockaddr*>(&ss), len);
      return std::size_t(r);
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN) detail::throw_errno(errno, "recvfrom");
    goro::detail::fd_wait(s, 'r', "recvfrom");
  }
}

std::size_t packet_conn::send_to(const void* buf, std::size_t n,
                                 const addr& to) {
  if (connected_) {
    // Go's ErrWriteToConnected: refused before any syscall.
    op_error::info i = detail::sock_info(fd_, "write");
    detail::throw_op_text(std::make_error_code(std::errc::already_connected),
                          std::move(i),
                          "use of WriteTo with pre-connected connection");
  }
  try {
    return send_to_loop(buf, n, to);
  } catch (const std::system_error&) {
    op_error::info i = detail::sock_info(fd_, "write");
    i.address = to;
    detail::rethrow_as_op(std::move(i));
  }
}

std::size_t packet_conn::send_to_loop(const void* buf, std::size_t n,
                                      const addr& to) {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_io io(s, 'w');
  goro::detail::fd_prepare(s, 'w', "sendto");
  for (;;) {
    ssize_t r = goro::rt::sys::real().sendto(s->sysfd, buf, n, MSG_NOSIGNAL,
                                             to.data(), to.size());
    if (r >= 0) return std::size_t(r);
    if (errno == EINTR) continue;
    if (errno != EAGAIN) detail::throw_errno(errno, "sendto");
    goro::detail::fd_wait(s, 'w', "sendto");
  }
}

std::size_t packet_conn::write(const void* buf, std::size_t n) {
  try {
    return write_loop(buf, n);
  } catch (const std::system_error&) {
    rethrow_packet(fd_, "write");
  }
}

std::size_t packet_conn::write_loop(const void* buf, std::size_t n) {
  goro::detail::fd_state* s = goro::detail::state_of(fd_);
  goro::detail::fd_io io(s, 'w');
  goro::detail::fd_prepare(s, 'w', "send");
  for (;;) {
    ssize_t r = goro::rt::sys::real().send(s->sysfd, buf, n, MSG_NOSIGNAL);
    if (r >= 0) return std::size_t(r);
    if (errno == EINTR) continue;
    if (errno != EAGAIN) detail::throw_errno(errno, "send");
    goro::detail::fd_wait(s, 'w', "send");
  }
}

addr packet_conn::local_addr() const {
  return detail::sockname(const_cast<goro::fd&>(fd_), false);
}

addr packet_conn::remote_addr() const {
  goro::detail::fd_state* st =
      goro::detail::state_of(const_cast<goro::fd&>(fd_));
  goro::detail::fd_ref ref(st);
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  if (getpeername(st->sysfd, reinterpret_cast<sockaddr*>(&ss), &len) != 0) {
    if (errno == ENOTCONN) return {};  // Go: nil
    detail::throw_errno(errno, "getpeername");
  }
  return addr(reinterpret_cast<sockaddr*>(&ss), len);
}

}  // namespace goro::net
