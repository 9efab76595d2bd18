// sigpipe.cpp: EPIPE instead of SIGPIPE for goro::fd writes to pipes,
// FIFOs and terminals (sockets use MSG_NOSIGNAL instead), with Go's
// exception: a write to descriptor 1 or 2 whose reader is gone still kills
// the process with SIGPIPE (Go's os.epipecheck), so `prog | head` ends
// quietly as a C program would.
//
// Mechanism, free in the common case: a SIGPIPE raised by write(2) is
// synchronous and directed at the thread that wrote, so a thread-local
// flag set around the write says whether it is ours. A process-wide handler
// (installed once, on the first such write) returns at once when the flag
// is set, and write(2) then fails with EPIPE; any other SIGPIPE gets what
// it would have got without us (the previous handler, or death by the
// default action). A write costs two thread-local stores and no syscall; no
// signal mask changes per write.
//
// The flag is only set inside write_nosigpipe, which never parks: the
// goroutine cannot move to another thread between setting it and the
// write (goro's own code is not asynchronously preemptible either).
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <mutex>

#include "interpose/real.hpp"
#include "net/fd_internal.hpp"

extern "C" {
// Nonzero while this thread is in a write whose SIGPIPE must become EPIPE.
// Initial-exec TLS: readable from the signal handler, also in the shared
// library.
__thread int goro_tls_nosigpipe __attribute__((tls_model("initial-exec")));
}

namespace goro::detail {

namespace {

struct sigaction prev_action;  // written once, before the handler is set
std::atomic<bool> installed{false};
std::mutex install_mu;

void on_sigpipe(int sig, siginfo_t* info, void* uctx) {
  if (goro_tls_nosigpipe != 0) return;  // our write: it returns EPIPE
  // Someone else's SIGPIPE: what it would have done without this handler.
  if ((prev_action.sa_flags & SA_SIGINFO) != 0) {
    if (prev_action.sa_sigaction != nullptr)
      prev_action.sa_sigaction(sig, info, uctx);
    return;
  }
  if (prev_action.sa_handler == SIG_IGN) return;
  if (prev_action.sa_handler != SIG_DFL) {
    prev_action.sa_handler(sig);
    return;
  }
  // The default action is death: restore it and re-raise at this thread;
  // SIGPIPE is blocked while this handler runs, so it arrives on return.
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  sigaction(SIGPIPE, &dfl, nullptr);
  raise(SIGPIPE);
}

void install() {
  std::lock_guard<std::mutex> lk(install_mu);
  if (installed.load(std::memory_order_relaxed)) return;
  struct sigaction cur {};
  sigaction(SIGPIPE, nullptr, &cur);
  // Already ignored: writes get EPIPE as they are, and an ignored signal
  // stays ignored across exec (a handler would not), so leave it.
  if ((cur.sa_flags & SA_SIGINFO) != 0 || cur.sa_handler != SIG_IGN) {
    prev_action = cur;
    struct sigaction sa {};
    sa.sa_sigaction = on_sigpipe;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGPIPE, &sa, nullptr);
  }
  // Release: a thread that sees `installed` also sees prev_action.
  installed.store(true, std::memory_order_release);
}

}  // namespace

// noinline: the thread-local's address must not be computed in a caller
// that parks between two writes and resumes on another thread.
__attribute__((noinline)) ssize_t write_nosigpipe(int sysfd, const void* p,
                                                  std::size_t n) noexcept {
  if (sysfd == 1 || sysfd == 2) return goro::rt::sys::real().write(sysfd, p, n);
  if (!installed.load(std::memory_order_acquire)) install();
  goro_tls_nosigpipe = 1;
  // The compiler must not sink the store below the write or hoist the
  // clear above it: the handler reads the flag in the middle.
  std::atomic_signal_fence(std::memory_order_seq_cst);
  ssize_t r = goro::rt::sys::real().write(sysfd, p, n);
  std::atomic_signal_fence(std::memory_order_seq_cst);
  goro_tls_nosigpipe = 0;
  return r;
}

}  // namespace goro::detail
