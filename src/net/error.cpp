// error.cpp: the errors of goro::fd and goro::net (Go's internal/poll
// errors, os.ErrDeadlineExceeded, net.ErrClosed and net.OpError): the
// bytes-transferred count, and op_error's Go-formatted message.
#include <cctype>
#include <goro/context.hpp>
#include <goro/fd.hpp>
#include <goro/net.hpp>
#include <memory>
#include <string>
#include <system_error>

#include "net/sock.hpp"

namespace goro {

io_error::io_error(std::error_code ec, const char* what,
                   std::size_t transferred)
    : std::system_error(ec, what), n_(transferred) {}

io_error::io_error(std::size_t transferred) noexcept
    : std::system_error(std::error_code()), n_(transferred) {}

deadline_exceeded::deadline_exceeded()
    : std::system_error(std::make_error_code(std::errc::timed_out),
                        "i/o timeout"),
      io_error(std::size_t(0)) {}

closed_error::closed_error()
    : std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                        "use of closed network connection"),
      io_error(std::size_t(0)) {}

namespace detail {
void set_transferred(io_error& e, std::size_t n) noexcept { e.n_ = n; }
}  // namespace detail

namespace net {

namespace {

using info_ptr = std::shared_ptr<const op_error::info>;
using msg_ptr = std::shared_ptr<const std::string>;

// Go's OpError.Error(): "op net [source->]addr: [syscall: ]error".
msg_ptr format(const op_error::info& i, const std::string& err) {
  std::string m = i.op;
  if (!i.net.empty()) m += " " + i.net;
  std::string src = i.source.str(), dst = i.address.str();
  if (!src.empty() && !dst.empty())
    m += " " + src + "->" + dst;
  else if (!dst.empty())
    m += " " + dst;
  else if (!src.empty())
    m += " " + src;
  m += ": ";
  if (!i.syscall.empty()) m += i.syscall + ": ";
  return std::make_shared<const std::string>(m + err);
}

// strerror's text as Go spells it: lower case ("connection refused").
std::string errno_text(std::error_code ec) {
  // Go's dial reports a cancelled context as errCanceled.
  if (ec == goro::context_errc::canceled) return "operation was canceled";
  std::string t = ec.message();
  if (!t.empty() && ec.category() == std::system_category())
    t[0] = char(std::tolower(static_cast<unsigned char>(t[0])));
  return t;
}

// A deadline that passed: both an op_error and a goro::deadline_exceeded.
class op_timeout final : public op_error, public goro::deadline_exceeded {
 public:
  op_timeout(info_ptr i, msg_ptr m, std::size_t n)
      : std::system_error(std::make_error_code(std::errc::timed_out), ""),
        io_error(n),
        op_error(std::move(i), std::move(m)) {}
  const char* what() const noexcept override { return op_error::what(); }
};

// A closed connection: both an op_error and a goro::closed_error.
class op_closed final : public op_error, public goro::closed_error {
 public:
  op_closed(info_ptr i, msg_ptr m, std::size_t n)
      : std::system_error(std::make_error_code(std::errc::bad_file_descriptor),
                          ""),
        io_error(n),
        op_error(std::move(i), std::move(m)) {}
  const char* what() const noexcept override { return op_error::what(); }
};

// An error with a text of its own (Go's ErrWriteToConnected).
class op_plain final : public op_error {
 public:
  op_plain(std::error_code ec, info_ptr i, msg_ptr m)
      : std::system_error(ec, ""),
        io_error(std::size_t(0)),
        op_error(std::move(i), std::move(m)) {}
};

// The syscall an exception of ours names: the what_arg before ": ".
std::string syscall_of(const std::system_error& e) {
  std::string w = e.what();
  std::size_t c = w.find(": ");
  if (c == std::string::npos || c == 0 || w.find(' ') < c) return "";
  return w.substr(0, c);
}

}  // namespace

op_error::op_error(std::error_code ec, info i, std::size_t transferred)
    : std::system_error(ec, ""),
      io_error(transferred),
      i_(std::make_shared<const info>(std::move(i))),
      msg_(format(*i_, errno_text(ec))) {}

op_error::op_error(std::shared_ptr<const info> i,
                   std::shared_ptr<const std::string> m)
    : std::system_error(std::error_code()),
      io_error(std::size_t(0)),
      i_(std::move(i)),
      msg_(std::move(m)) {}

bool op_error::timeout() const noexcept {
  return dynamic_cast<const goro::deadline_exceeded*>(this) != nullptr;
}

namespace detail {

void throw_timeout(op_error::info i, std::size_t n) {
  auto p = std::make_shared<const op_error::info>(std::move(i));
  msg_ptr m = format(*p, "i/o timeout");
  throw op_timeout(std::move(p), std::move(m), n);
}

void throw_closed(op_error::info i, std::size_t n) {
  auto p = std::make_shared<const op_error::info>(std::move(i));
  msg_ptr m = format(*p, "use of closed network connection");
  throw op_closed(std::move(p), std::move(m), n);
}

void throw_op_text(std::error_code ec, op_error::info i, const char* text) {
  auto p = std::make_shared<const op_error::info>(std::move(i));
  msg_ptr m = format(*p, text);
  throw op_plain(ec, std::move(p), std::move(m));
}

void rethrow_as_op(op_error::info i) {
  try {
    throw;
  } catch (const op_error&) {
    throw;  // already named
  } catch (const goro::deadline_exceeded& e) {
    throw_timeout(std::move(i), e.bytes_transferred());
  } catch (const goro::closed_error& e) {
    throw_closed(std::move(i), e.bytes_transferred());
  } catch (const goro::io_error& e) {
    if (i.syscall.empty()) i.syscall = syscall_of(e);
    throw op_error(e.code(), std::move(i), e.bytes_transferred());
  } catch (const std::system_error& e) {
    if (i.syscall.empty()) i.syscall = syscall_of(e);
    throw op_error(e.code(), std::move(i));
  }
  // Anything else (std::invalid_argument, std::bad_alloc) goes as it is.
}

}  // namespace detail

}  // namespace net

}  // namespace goro
