// ipsock.cpp: addresses (Go's net/ipsock.go, lookup.go): goro::net::addr,
// "host:port" parsing, and name resolution with getaddrinfo under the
// syscall hand-off.
#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/un.h>

#include <cerrno>
#include <cstring>
#include <goro/net.hpp>
#include <goro/runtime.hpp>
#include <stdexcept>
#include <string>
#include <system_error>

#include "net/sock.hpp"

namespace goro::net {

addr::addr(const sockaddr* sa, socklen_t len) {
  if (len > sizeof ss_) len = sizeof ss_;
  std::memcpy(&ss_, sa, len);
  len_ = len;
}

std::string addr::host() const {
  char buf[INET6_ADDRSTRLEN] = {};
  switch (ss_.ss_family) {
    case AF_INET:
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(&ss_)->sin_addr,
                buf, sizeof buf);
      return buf;
    case AF_INET6:
      inet_ntop(AF_INET6,
                &reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_addr, buf,
                sizeof buf);
      return buf;
    case AF_UNIX: {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&ss_);
      std::size_t n = len_ > offsetof(sockaddr_un, sun_path)
                          ? len_ - offsetof(sockaddr_un, sun_path)
                          : 0;
      if (n == 0) return "";
      if (un->sun_path[0] == 0)
        return "@" + std::string(un->sun_path + 1, n - 1);
      return std::string(un->sun_path, strnlen(un->sun_path, n));
    }
    default:
      return "";
  }
}

int addr::port() const {
  switch (ss_.ss_family) {
    case AF_INET:
      return ntohs(reinterpret_cast<const sockaddr_in*>(&ss_)->sin_port);
    case AF_INET6:
      return ntohs(reinterpret_cast<const sockaddr_in6*>(&ss_)->sin6_port);
    default:
      return 0;
  }
}

std::string addr::str() const {
  switch (ss_.ss_family) {
    case AF_INET:
      return host() + ":" + std::to_string(port());
    case AF_INET6:
      return "[" + host() + "]:" + std::to_string(port());
    default:
      return host();
  }
}

bool addr::operator==(const addr& o) const {
  return len_ == o.len_ && std::memcmp(&ss_, &o.ss_, len_) == 0;
}

namespace detail {

[[noreturn]] void throw_errno(int err, const char* what) {
  throw std::system_error(err, std::system_category(), what);
}

const char* static_net_name(std::string_view name) noexcept {
  for (const char* n : {"tcp", "tcp4", "tcp6", "udp", "udp4", "udp6", "unix",
                        "unixgram", "unixpacket"})
    if (name == n) return n;
  return nullptr;
}

network parse_network(std::string_view name) {
  if (name == "tcp") return {AF_UNSPEC, kind::stream};
  if (name == "tcp4") return {AF_INET, kind::stream};
  if (name == "tcp6") return {AF_INET6, kind::stream};
  if (name == "udp") return {AF_UNSPEC, kind::datagram};
  if (name == "udp4") return {AF_INET, kind::datagram};
  if (name == "udp6") return {AF_INET6, kind::datagram};
  if (name == "unix") return {AF_UNIX, kind::stream};
  if (name == "unixgram") return {AF_UNIX, kind::datagram};
  if (name == "unixpacket") return {AF_UNIX, kind::seqpacket};
  throw std::invalid_argument("goro::net: unknown network \"" +
                              std::string(name) + "\"");
}

namespace {

// Splits "host:port" / "[host]:port" (Go's SplitHostPort).
void split_host_port(std::string_view address, std::string& host,
                     std::string& port) {
  auto bad = [&](const char* why) {
    throw std::invalid_argument("goro::net: address " + std::string(address) +
                                ": " + why);
  };
  if (!address.empty() && address[0] == '[') {
    std::size_t close = address.find(']');
    if (close == std::string_view::npos) bad("missing ']'");
    if (close + 1 >= address.size() || address[close + 1] != ':')
      bad("missing port");
    host = std::string(address.substr(1, close - 1));
    port = std::string(address.substr(close + 2));
  } else {
    std::size_t colon = address.rfind(':');
    if (colon == std::string_view::npos) bad("missing port");
    host = std::string(address.substr(0, colon));
    if (host.find(':') != std::string::npos)
      bad("too many colons (use [ipv6]:port)");
    port = std::string(address.substr(colon + 1));
  }
  if (port.empty()) bad("missing port");
}

}  // namespace

addr resolve_for(const network& net, std::string_view address, bool passive) {
  if (net.family == AF_UNIX) return unix_addr(address);
  std::string host, port;
  split_host_port(address, host, port);
  addrinfo hints{};
  hints.ai_family = net.family;
  hints.ai_socktype = net.k == kind::stream ? SOCK_STREAM : SOCK_DGRAM;
  hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
  // Numeric ports only (as a sanity check before the resolver).
  for (char c : port)
    if (c < '0' || c > '9')
      throw std::invalid_argument("goro::net: address " + std::string(address) +
                                  ": bad port");
  if (port.size() > 5 || std::stoi(port) > 65535)
    throw std::invalid_argument("goro::net: address " + std::string(address) +
                                ": port out of range");
  // ":port" listens on every interface, IPv6 and IPv4 (Go's wildcard).
  if (host.empty() && passive && net.family == AF_UNSPEC)
    hints.ai_family = AF_INET6;
  addrinfo* res = nullptr;
  int rc = goro::blocking([&] {
    return getaddrinfo(host.empty() ? nullptr : host.c_str(), port.c_str(),
                       &hints, &res);
  });
  if (rc != 0 && host.empty() && hints.ai_family == AF_INET6 &&
      net.family == AF_UNSPEC) {
    hints.ai_family = AF_INET;  // no IPv6 on this machine
    rc = goro::blocking(
        [&] { return getaddrinfo(nullptr, port.c_str(), &hints, &res); });
  }
  if (rc != 0) {
    if (rc == EAI_SYSTEM) throw_errno(errno, "getaddrinfo");
    if (rc == EAI_NONAME || rc == EAI_ADDRFAMILY || rc == EAI_FAMILY)
      throw std::invalid_argument("goro::net: address " + std::string(address) +
                                  ": " + gai_strerror(rc));
    throw std::system_error(std::make_error_code(std::errc::host_unreachable),
                            std::string("getaddrinfo: ") + gai_strerror(rc));
  }
  // Prefer IPv4 for "tcp"/"udp" with a name (Go dials IPv4 first when
  // both exist only with Happy Eyeballs; one address is enough here).
  const addrinfo* pick = res;
  if (net.family == AF_UNSPEC && !host.empty())
    for (const addrinfo* p = res; p; p = p->ai_next)
      if (p->ai_family == AF_INET) {
        pick = p;
        break;
      }
  addr a(pick->ai_addr, pick->ai_addrlen);
  freeaddrinfo(res);
  return a;
}

}  // namespace detail

addr resolve(std::string_view network, std::string_view address) {
  return detail::resolve_for(detail::parse_network(network), address, false);
}

std::vector<std::string> lookup_host(std::string_view host) {
  std::string h(host);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  int rc = goro::blocking(
      [&] { return getaddrinfo(h.c_str(), nullptr, &hints, &res); });
  if (rc != 0) {
    if (rc == EAI_SYSTEM) detail::throw_errno(errno, "getaddrinfo");
    throw std::system_error(std::make_error_code(std::errc::host_unreachable),
                            "lookup " + h + ": " + gai_strerror(rc));
  }
  std::vector<std::string> out;
  for (const addrinfo* p = res; p; p = p->ai_next) {
    std::string s = addr(p->ai_addr, p->ai_addrlen).host();
    bool seen = false;
    for (const auto& o : out) seen = seen || o == s;
    if (!seen) out.push_back(s);
  }
  freeaddrinfo(res);
  return out;
}

}  // namespace goro::net
