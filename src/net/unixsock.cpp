// unixsock.cpp: what is particular to Unix-domain sockets (Go's
// net/unixsock.go, unixsock_posix.go): path and abstract addresses, and
// the listener that removes its socket file on close.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstddef>
#include <cstring>
#include <goro/net.hpp>
#include <stdexcept>
#include <string>
#include <utility>

#include "net/sock.hpp"

namespace goro::net {

namespace detail {

addr unix_addr(std::string_view path) {
  sockaddr_un un{};
  un.sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof un.sun_path)
    throw std::invalid_argument("goro::net: bad unix socket path \"" +
                                std::string(path) + "\"");
  std::memcpy(un.sun_path, path.data(), path.size());
  // "@name" is the abstract namespace: a leading NUL, no terminator, and
  // the length says where the name ends.
  if (path[0] == '@') un.sun_path[0] = 0;
  socklen_t len = socklen_t(offsetof(sockaddr_un, sun_path) + path.size() +
                            (path[0] == '@' ? 0 : 1));
  return addr(reinterpret_cast<const sockaddr*>(&un), len);
}

}  // namespace detail

listener::listener(listener&& other) noexcept
    : fd_(std::move(other.fd_)),
      unlink_path_(std::exchange(other.unlink_path_, std::string())),
      net_(other.net_),
      laddr_(other.laddr_) {}

listener& listener::operator=(listener&& other) noexcept {
  if (this != &other) {
    close();
    fd_ = std::move(other.fd_);
    unlink_path_ = std::exchange(other.unlink_path_, std::string());
    net_ = other.net_;
    laddr_ = other.laddr_;
  }
  return *this;
}

listener::~listener() { close(); }

void listener::close() noexcept {
  fd_.close();
  // Once, by the listener that bound the path (a moved-from one has none).
  // Go unlinks on Close too: the file would make the next listen on the
  // path fail with EADDRINUSE.
  if (!unlink_path_.empty()) {
    ::unlink(unlink_path_.c_str());
    unlink_path_.clear();
  }
}

}  // namespace goro::net
