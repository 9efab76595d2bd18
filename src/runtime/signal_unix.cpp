// signal_unix.cpp: goroutine stack overflow reports (Go's signal_unix.go).
//
// A goroutine that runs off the bottom of its stack faults in the guard page
// below it (stack.cpp). The SIGSEGV/SIGBUS handler runs on the thread's
// alternate signal stack (the goroutine's own stack is exhausted), checks
// whether the fault is an overflow of the current goroutine's stack, and if
// so prints Go's report and exits 2. Any other fault goes to the handler
// installed before goro's, or to the default action.
#include "runtime/signal_unix.hpp"

#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <cstring>
#include <string>

#include "interpose/real.hpp"
#include "runtime/g.hpp"
#include "runtime/m.hpp"
#include "runtime/panic.hpp"
#include "runtime/san.hpp"
#include "runtime/stack.hpp"
#include "runtime/tls.hpp"
#include "runtime/traceback.hpp"

extern "C" void goro_on_gstack(void* sp, void (*fn)(void*), void* arg);

namespace goro::rt {

namespace {

struct sigaction old_segv, old_bus;

void write_str(const char* s) {
  ssize_t r = goro::rt::sys::real().write(2, s, std::strlen(s));
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
    if (in_guard || sp_below) report_stack_overflow(gp, sp, uctx);
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

// The overflowing goroutine's top frames, from the faulting context: the
// unwinder starts in this handler, on the alternate signal stack, and
// crosses the kernel's signal frame; frames before the faulting pc are
// the handler's own.
constexpr int overflow_frames = 32;
struct overflow_walk {
  std::uintptr_t from;
  bool started;
  std::uintptr_t pcs[overflow_frames];
  int n;
};

_Unwind_Reason_Code overflow_one(struct _Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<overflow_walk*>(arg);
  int before = 0;
  std::uintptr_t pc = _Unwind_GetIPInfo(ctx, &before);
  if (pc == 0) return _URC_END_OF_STACK;
  if (!w->started) {
    if (pc != w->from) return _URC_NO_REASON;
    w->started = true;
  } else if (!before) {
    pc--;  // a return address: look up the call
  }
  w->pcs[w->n++] = pc;
  return w->n >= overflow_frames ? _URC_END_OF_STACK : _URC_NO_REASON;
}

struct overflow_report {
  G* gp;
  overflow_walk* w;
  const char* note;
};

// On the stack mapped for it: symbolizing needs more than the 64 KiB
// alternate signal stack (the demangler, the ELF and DWARF readers).
void overflow_print(void* arg) {
  auto* r = static_cast<overflow_report*>(arg);
  flush_program_output();
  std::string s = goroutine_trace_at(r->gp, r->w->pcs, r->w->n,
                                     r->w->n >= overflow_frames, r->note);
  ssize_t k = goro::rt::sys::real().write(2, s.data(), s.size());
  (void)k;
  _exit(2);
}

void overflow_report_timeout(int) {
  write_str("\n\t(the traceback did not finish)\n");
  _exit(2);
}

}  // namespace

// Go's report, then exit 2 as Go's fatal error does.
void report_stack_overflow(G* gp, std::uintptr_t sp, void* uctx) {
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
  write_str("]\nfatal error: stack overflow\n\n");
  static char note[160];
  note[0] = 0;
  std::strcat(note, "\t(guard: ");
  std::strcat(note, guard_name(gp->stk.guard));
  std::strcat(note,
              "; raise the limit with goro::go_options{.stack_size} or "
              "GORO_STACK_SIZE)\n");
  static overflow_walk w;
  w = overflow_walk{};
#ifdef GORO_HAVE_TSAN
  // TSan flags the allocations below as signal-unsafe calls (rightly) and
  // its report takes tens of seconds: the header and the note only.
  uctx = nullptr;
  bool symbolize = false;
#else
  bool symbolize = true;
#endif
  if (uctx != nullptr) {
    auto* uc = static_cast<ucontext_t*>(uctx);
    w.from = std::uintptr_t(uc->uc_mcontext.gregs[REG_RIP]);
    _Unwind_Backtrace(overflow_one, &w);
  }
  // Symbolizing may hang where the fault interrupted malloc or stdio with
  // their lock held: SIGALRM ends it.
  struct sigaction sa {};
  sa.sa_handler = overflow_report_timeout;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGALRM, &sa, nullptr);
  sigset_t alrm;
  sigemptyset(&alrm);
  sigaddset(&alrm, SIGALRM);
  pthread_sigmask(SIG_UNBLOCK, &alrm, nullptr);
  alarm(5);
  constexpr std::size_t report_stack = 1 << 20;
  void* p = mmap(nullptr, report_stack, PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  overflow_report r{gp, &w, note};
  if (symbolize && p != MAP_FAILED) {
    // goro_on_gstack reads the 64 bytes at sp as a saved context: zeros.
    goro_on_gstack(static_cast<char*>(p) + report_stack - 64, overflow_print,
                   &r);
  }
  // No stack for it: the header and the note, as before.
  write_str("goroutine ");
  fmt_u(n1, gp->goid, 10);
  write_str(n1);
  write_str(" [running]:\n");
  write_str(note);
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
