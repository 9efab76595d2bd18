// signal_unix.cpp: goroutine stack overflow reports (Go's signal_unix.go).
//
// A goroutine that runs off the bottom of its stack faults in the guard page
// below it (stack.cpp). The SIGSEGV/SIGBUS handler runs on the thread's
// alternate signal stack (the goroutine's own stack is exhausted), checks
// whether the fault is an overflow of the current goroutine's stack, and if
// so prints Go's report and exits 2. Any other fault goes to the handler
// installed before goro's, or to the default action.
#include "runtime/signal_unix.hpp"

#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>

#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/stack.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

struct sigaction old_segv, old_bus;

void write_str(const char* s) {
  ssize_t r = write(2, s, std::strlen(s));
  (void)r;
}

void fmt_u(char* buf, unsigned long long v, int base) {
  char tmp[32];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v % base];
    v /= base;
  } while (v);
  int i = 0;
  if (base == 16) {
    buf[i++] = '0';
    buf[i++] = 'x';
  }
  while (n) buf[i++] = tmp[--n];
  buf[i] = 0;
}

void overflow_handler(int sig, siginfo_t* si, void* uctx) {
  M* mp = goro_tls_m;  // same thread: a direct TLS read is fine here
  G* gp = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr;
  if (gp != nullptr) {
    auto* uc = static_cast<ucontext_t*>(uctx);
    std::uintptr_t sp = std::uintptr_t(uc->uc_mcontext.gregs[REG_RSP]);
    std::uintptr_t addr = reinterpret_cast<std::uintptr_t>(si->si_addr);
    std::uintptr_t base = reinterpret_cast<std::uintptr_t>(gp->stk.map_base);
    constexpr std::uintptr_t slack = 64 * 1024 * 1024;
    bool in_guard = addr >= base && addr < gp->stk.lo;
    bool sp_below = sp < gp->stk.lo && sp + slack > gp->stk.lo;
    if (in_guard || sp_below) report_stack_overflow(gp, sp);
  }
  // Not a goroutine stack overflow: hand it to the previous handler, or
  // restore the default action and let the fault happen again.
  struct sigaction* old = sig == SIGBUS ? &old_bus : &old_segv;
  if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction) {
    old->sa_sigaction(sig, si, uctx);
    return;
  }
  if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN &&
      old->sa_handler != nullptr) {
    old->sa_handler(sig);
    return;
  }
  signal(sig, SIG_DFL);
}

}  // namespace

// Async-signal-safe report, then exit 2 as Go's fatal error does.
void report_stack_overflow(G* gp, std::uintptr_t sp) {
  char n1[32], n2[32], n3[32];
  write_str("runtime: goroutine stack exceeds ");
  fmt_u(n1, gp->stk.hi - gp->stk.lo, 10);
  write_str(n1);
  write_str("-byte limit\nruntime: sp=");
  fmt_u(n1, sp, 16);
  fmt_u(n2, gp->stk.lo, 16);
  fmt_u(n3, gp->stk.hi, 16);
  write_str(n1);
  write_str(" stack=[");
  write_str(n2);
  write_str(", ");
  write_str(n3);
  write_str("]\nfatal error: stack overflow\n\ngoroutine ");
  fmt_u(n1, gp->goid, 10);
  write_str(n1);
  write_str(" [running]:\n\t(guard: ");
  write_str(guard_name(gp->stk.guard));
  write_str(
      "; raise the limit with goro::go_options{.stack_size} or "
      "GORO_STACK_SIZE)\n");
  _exit(2);
}

void minit_signals() {
  constexpr std::size_t sigstack_size = 64 * 1024;
  void* p = mmap(nullptr, sigstack_size, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return;
  stack_t ss{};
  ss.ss_sp = p;
  ss.ss_size = sigstack_size;
  sigaltstack(&ss, nullptr);
}

void install_overflow_handler() {
  struct sigaction sa {};
  sa.sa_sigaction = overflow_handler;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGSEGV, &sa, &old_segv);
  sigaction(SIGBUS, &sa, &old_bus);
}

}  // namespace goro::rt
