// asyncpreempt.cpp: the preemption signal's handler (Go's doSigPreempt,
// preemptM, asyncPreempt; ../shared/reference/preemption.md §4).
//
// sysmon's preemptone sets G.preempt and, when async preemption is on,
// sends the goroutine's thread a signal (SIGURG by default), coalesced by
// M.signal_pending. The handler runs on the thread's alternate signal
// stack and only looks and copies (async-signal-safe: no lock, no
// allocation). If the interrupted goroutine may be preempted there (its
// preemption was asked for; it is running, outside any goro::preempt_guard
// and any runtime lock; the PC is preemptible (asyncsafepoint.cpp); the
// signal mask is the thread's usual one; its stack has room), the handler
// copies the general registers, RFLAGS and the XSAVE image onto the
// goroutine's stack below the red zone (layout in asyncpreempt_amd64.S and
// asyncpreempt_offsets.h) and rewrites the ucontext so that sigreturn
// lands on the M's scheduler stack (g0), in ordinary context, in
// goro_async_preempt_entry -> goro_async_preempted. That function does
// what an mcall(gosched_m) does for a yield, plus a pin to this thread
// (asyncpreempt_pin.cpp). Resuming is goro_gogo into goro_async_resume,
// which restores every register exactly. Otherwise the handler records
// why not in M.sig_why (sig_reject) for sysmon's long-running report.
//
// The same signal carries a goroutine dump's traceback requests
// (sigtraceback.cpp), answered first. This file holds only the handler,
// its installation and the two C entry points the assembly calls.
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/oslock.hpp"
#include "runtime/panic.hpp"
#include "runtime/preempt.hpp"
#include "runtime/proc.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

std::atomic<bool> async_preempt_on{false};
std::atomic<bool> blocked_handoff_on{false};
async_preempt_counters async_preempt_stats;

int preempt_sig = SIGURG;
pid_t self_pid = 0;
bool installed = false;
std::mutex install_mu;

namespace {

struct sigaction old_action;
bool supported = true;
bool ranges_computed = false;  // compute_ranges succeeded (install_mu)

// Stack a preempted goroutine must have left below its saved context, for
// goro_async_resumed (and the sanitizer calls in it).
#ifdef GORO_HAVE_ASAN
constexpr std::uintptr_t resume_headroom = 32 * 1024;
#else
constexpr std::uintptr_t resume_headroom = 16 * 1024;
#endif

// The FXSAVE/XSAVE image the kernel leaves at uc_mcontext.fpregs (Intel
// SDM vol. 1 §10.5.1 and §13.4; Linux's struct _fpstate_64 and
// _fpx_sw_bytes, which it stores in the image's software-available bytes).
constexpr std::size_t fx_fcw = 0;               // x87 control word (16 bits)
constexpr std::size_t fx_mxcsr = 24;            // MXCSR (32 bits)
constexpr std::size_t fx_sw_magic1 = 464;       // _fpx_sw_bytes.magic1
constexpr std::size_t fx_sw_xstate_size = 480;  // _fpx_sw_bytes.xstate_size
constexpr std::uint32_t fp_xstate_magic1 = 0x46505853u;  // FP_XSTATE_MAGIC1
// The legacy FXSAVE area: the whole image without XSAVE, and where the
// XSAVE header (its first field XSTATE_BV) starts with it.
constexpr std::size_t fxsave_size = 512;
constexpr std::size_t xsave_xstate_bv = 512;
// The largest XSAVE image the handler accepts (a sanity bound).
constexpr std::size_t max_xstate_size = 64 * 1024;
// The state the handler leaves g0 with: RFLAGS with IF and the reserved bit
// 1 only (DF, TF clear); the default MXCSR (all exceptions masked, round to
// nearest) and x87 control word (as after FNINIT).
constexpr std::uint64_t rflags_default = 0x202;
constexpr std::uint32_t mxcsr_default = 0x1F80;
constexpr std::uint16_t fcw_default = 0x037F;

// The goro_mcall frame (context_amd64.S) the handler builds below the
// saved context for goro_gogo, in 8-byte words from its lowest address:
// MXCSR (low half) and x87 control word (high half), r15, r14, r13, r12,
// rbx, rbp, return address.
constexpr std::size_t mcall_frame_size = 64;
constexpr int mcall_frame_fpcsr = 0;
constexpr int mcall_frame_rbx = 5;
constexpr int mcall_frame_rbp = 6;
constexpr int mcall_frame_ret = 7;

// Copies n bytes without sanitizer checks (the destination is goroutine
// stack below its stack pointer, which ASan may still mark as redzones of
// returned frames).
inline void raw_copy(void* dst, const void* src, std::size_t n) {
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

// The handler's decision. Async-signal-safe.
__attribute__((no_sanitize_address)) void try_preempt(M* mp, ucontext_t* uc) {
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp == nullptr) return;
  // A thread blocked in a system call goro was not told about loses its P
  // (blockedsyscall.cpp), with preemption on or off.
  if (blocked_handoff_on.load(std::memory_order_relaxed) &&
      try_blocked_syscall(mp, gp, uc)) {
    mp->sig_why.store(sig_reject::none, std::memory_order_relaxed);
    return;
  }
  if (!async_preempt_on.load(std::memory_order_relaxed)) return;
  if (!gp->preempt.load(std::memory_order_relaxed)) return;
  if (gp->atomicstatus.load(std::memory_order_relaxed) != g_running) return;
  greg_t* r = uc->uc_mcontext.gregs;
  std::uintptr_t pc = std::uintptr_t(r[REG_RIP]);
  mp->sig_pc.store(pc, std::memory_order_relaxed);
  // goro_tls_nlocks: a direct TLS read is right here, on the same thread.
  if (goro_tls_nlocks != 0) {
    mp->sig_why.store(sig_reject::runtime_lock, std::memory_order_relaxed);
    async_preempt_stats.deferred_runtime_lock.fetch_add(
        1, std::memory_order_relaxed);
    return;
  }
  if (mp->locks != 0 || mp->p == nullptr ||
      gp->preempt_off.load(std::memory_order_relaxed) != 0) {
    mp->sig_why.store(sig_reject::guard, std::memory_order_relaxed);
    return;
  }
  if (gp->oslocks.load(std::memory_order_relaxed) != 0) {
    mp->sig_why.store(sig_reject::os_lock, std::memory_order_relaxed);
    // Inside an OS lock's critical section: G.preempt stays set and the
    // unlock that releases the last lock preempts (oslock_preempt_point).
    async_preempt_stats.deferred_oslock.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!pc_preemptible(pc)) {
    mp->sig_why.store(sig_reject::not_preemptible_pc,
                      std::memory_order_relaxed);
    async_preempt_stats.rejected_pc.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!save_and_redirect(mp, gp, uc, async_entry_preempt)) return;
  mp->sig_why.store(sig_reject::none, std::memory_order_relaxed);
  async_preempt_stats.preempted.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

// The handler's copy: gp's context onto its stack, then the redirection to
// g0. Async-signal-safe.
__attribute__((no_sanitize_address)) bool save_and_redirect(M* mp, G* gp,
                                                            ucontext_t* uc,
                                                            async_entry kind) {
  greg_t* r = uc->uc_mcontext.gregs;
  std::uint64_t mask;
  std::memcpy(&mask, &uc->uc_sigmask, sizeof mask);
  if (mask != mp->sigmask0) return false;  // in a user's signal handler?
  auto* fx = reinterpret_cast<unsigned char*>(uc->uc_mcontext.fpregs);
  if (fx == nullptr) return false;
  std::uint32_t magic1, xstate_size;
  std::memcpy(&magic1, fx + fx_sw_magic1, sizeof magic1);
  std::memcpy(&xstate_size, fx + fx_sw_xstate_size, sizeof xstate_size);
  bool xs = magic1 == fp_xstate_magic1;
  std::size_t fpsize = xs ? xstate_size : fxsave_size;
  if (fpsize < fxsave_size || fpsize > max_xstate_size) return false;
  std::uintptr_t sp = std::uintptr_t(r[REG_RSP]);
  if (sp > gp->stk.hi || sp <= gp->stk.lo) return false;
  std::uintptr_t slots = sp - ASYNC_SLOTS_BELOW_SP;
  std::uintptr_t ctxa = (slots - sizeof(async_ctx) - fpsize) &
                        ~std::uintptr_t(alignof(async_ctx) - 1);
  std::uintptr_t frame = ctxa - mcall_frame_size;
  if (ctxa < gp->stk.lo + resume_headroom + mcall_frame_size) return false;

  // The three slots goro_async_resume pops: rdi, RFLAGS, RIP.
  auto* s = reinterpret_cast<std::uint64_t*>(slots);
  static_assert(ASYNC_SLOTS_BELOW_SP - ASYNC_SLOT_RDI == 0 &&
                ASYNC_SLOTS_BELOW_SP - ASYNC_SLOT_RFLAGS == 8 &&
                ASYNC_SLOTS_BELOW_SP - ASYNC_SLOT_RIP == 16);
  s[0] = std::uint64_t(r[REG_RDI]);
  s[1] = std::uint64_t(r[REG_EFL]);
  s[2] = std::uint64_t(r[REG_RIP]);
  auto* c = reinterpret_cast<async_ctx*>(ctxa);
  c->rax = std::uint64_t(r[REG_RAX]);
  c->rbx = std::uint64_t(r[REG_RBX]);
  c->rcx = std::uint64_t(r[REG_RCX]);
  c->rdx = std::uint64_t(r[REG_RDX]);
  c->rsi = std::uint64_t(r[REG_RSI]);
  c->rbp = std::uint64_t(r[REG_RBP]);
  c->r8 = std::uint64_t(r[REG_R8]);
  c->r9 = std::uint64_t(r[REG_R9]);
  c->r10 = std::uint64_t(r[REG_R10]);
  c->r11 = std::uint64_t(r[REG_R11]);
  c->r12 = std::uint64_t(r[REG_R12]);
  c->r13 = std::uint64_t(r[REG_R13]);
  c->r14 = std::uint64_t(r[REG_R14]);
  c->r15 = std::uint64_t(r[REG_R15]);
  c->slots = slots;
  c->g = gp;
  c->m = mp;
  c->xsave = xs ? 1 : 0;
  raw_copy(reinterpret_cast<unsigned char*>(ctxa) + sizeof(async_ctx), fx,
           fpsize);
  // A goro_mcall frame for goro_gogo: default MXCSR and x87 control word
  // for goro_async_resumed (XRSTOR then loads the goroutine's), rbx = ctx,
  // return address goro_async_resume+1 (past its nop).
  auto* f = reinterpret_cast<std::uint64_t*>(frame);
  f[mcall_frame_fpcsr] = (std::uint64_t(fcw_default) << 32) | mxcsr_default;
  f[1] = f[2] = f[3] = f[4] = 0;  // r15, r14, r13, r12
  f[mcall_frame_rbx] = ctxa;
  f[mcall_frame_rbp] = 0;
  f[mcall_frame_ret] = reinterpret_cast<std::uint64_t>(&goro_async_resume) + 1;
  gp->sched_sp = reinterpret_cast<void*>(frame);

  // Leave the handler onto g0: goro_async_preempt_entry(gp, kind), with clean
  // flags (DF, TF clear) and the default floating-point state (MXCSR,
  // x87 control word; every XSAVE component in its initial state).
  r[REG_RIP] =
      greg_t(reinterpret_cast<std::uintptr_t>(&goro_async_preempt_entry));
  r[REG_RSP] = greg_t(reinterpret_cast<std::uintptr_t>(mp->g0_sp));
  r[REG_RDI] = greg_t(reinterpret_cast<std::uintptr_t>(gp));
  r[REG_RSI] = greg_t(kind);
  r[REG_RBP] = 0;
  r[REG_EFL] = greg_t(rflags_default);
  std::uint32_t mxcsr = mxcsr_default;
  std::uint16_t fcw = fcw_default;
  std::memcpy(fx + fx_mxcsr, &mxcsr, sizeof mxcsr);
  std::memcpy(fx + fx_fcw, &fcw, sizeof fcw);
  if (xs) {
    std::uint64_t bv = 0;  // XSTATE_BV: all components initial
    std::memcpy(fx + xsave_xstate_bv, &bv, sizeof bv);
  }
  return true;
}

async_ctx* saved_ctx(G* gp) {
  auto* f = static_cast<std::uint64_t*>(gp->sched_sp);
  return reinterpret_cast<async_ctx*>(f[mcall_frame_rbx]);
}

namespace {

void sigpreempt(int sig, siginfo_t* si, void* uctx) {
  int saved_errno = errno;
  // A real signal of this number may have been coalesced with ours: the
  // handler installed before goro's sees every one (as Go forwards them).
  if ((old_action.sa_flags & SA_SIGINFO) && old_action.sa_sigaction != nullptr)
    old_action.sa_sigaction(sig, si, uctx);
  else if (old_action.sa_handler != SIG_DFL &&
           old_action.sa_handler != SIG_IGN && old_action.sa_handler != nullptr)
    old_action.sa_handler(sig);
  M* mp = goro_tls_m;  // same thread: a direct TLS read is fine here
  if (mp != nullptr && traceback_request(mp, static_cast<ucontext_t*>(uctx))) {
    // A dump's request, not a preemption. A preemption signal of sysmon's
    // may have been merged with it: clear the pending flag so that sysmon
    // sends the next one.
    mp->signal_pending.store(false, std::memory_order_relaxed);
  } else if (mp != nullptr) {
    async_preempt_stats.received.fetch_add(1, std::memory_order_relaxed);
    mp->signal_pending.store(false, std::memory_order_relaxed);
    try_preempt(mp, static_cast<ucontext_t*>(uctx));
  }
  errno = saved_errno;
}

// Installs the handler (for preemption, a dump's tracebacks and the
// blocked-call hand-off); false where it cannot work (TSan). Caller holds
// install_mu.
bool install_handler_locked() {
  if (installed) return true;
#ifdef GORO_HAVE_TSAN
  // TSan defers asynchronous signals to its next interceptor and hands the
  // handler a copy of the context, so the handler cannot redirect the
  // thread: async preemption and the blocked-call hand-off are off under
  // TSan.
  return false;
#endif
  compute_goro_code();
  self_pid = getpid();
  struct sigaction sa {};
  sa.sa_sigaction = sigpreempt;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&sa.sa_mask);
  if (sigaction(preempt_sig, &sa, &old_action) != 0) return false;
  installed = true;
  return true;
}

// The handler plus the preemptible ranges.
bool install_locked() {
  if (!supported) return false;
  if (!ranges_computed) {
    if (!compute_ranges()) {
      supported = false;
      return false;
    }
    ranges_computed = true;
  }
  if (!install_handler_locked()) {
    supported = false;
    return false;
  }
  return true;
}

}  // namespace

void minit_asyncpreempt(M* mp) {
  // The preemption signal must reach every M (a creator that blocked it
  // passed its mask on).
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, preempt_sig);
  pthread_sigmask(SIG_UNBLOCK, &set, nullptr);
  sigset_t cur;
  pthread_sigmask(SIG_SETMASK, nullptr, &cur);
  std::memcpy(&mp->sigmask0, &cur, sizeof mp->sigmask0);
}

void asyncpreempt_init() {
  // (A set_async_preempt before the runtime started installed the handler
  // for the default signal already; that one stays.)
  if (!installed && debug.asyncpreemptsig > 0 && debug.asyncpreemptsig < NSIG &&
      debug.asyncpreemptsig != SIGSEGV && debug.asyncpreemptsig != SIGBUS)
    preempt_sig = debug.asyncpreemptsig;
  oslock_init();
  sigmask_init();
  if (debug.asyncpreemptoff > 0) supported = false;
  // On by default (GORO_DEBUG=asyncpreempt=0 starts with it off; the API
  // can still turn it on; asyncpreemptoff=1 keeps it off).
  if (debug.asyncpreempt > 0) asyncpreempt_set(true);
  // The blocked-call hand-off needs the handler, not the ranges: it works
  // with preemption off too (GORO_DEBUG=blockedsyscall=0 turns it off).
  if (debug.blockedsyscall > 0) {
    std::lock_guard<std::mutex> lk(install_mu);
    if (install_handler_locked()) blocked_handoff_on.store(true);
  }
}

bool asyncpreempt_set(bool on) {
  std::lock_guard<std::mutex> lk(install_mu);
  bool prev = async_preempt_on.load();
  if (on && !install_locked()) return prev;
  async_preempt_on.store(on);
  return prev;
}

bool signalM(M* mp) {
  if (mp->procid == 0) return false;
  if (mp->signal_pending.exchange(true)) return false;
  async_preempt_stats.sent.fetch_add(1, std::memory_order_relaxed);
  syscall(SYS_tgkill, self_pid, mp->procid, preempt_sig);
  return true;
}

void preemptM(M* mp, G* gp) {
  if (gp->atomicstatus.load(std::memory_order_relaxed) != g_running) return;
  signalM(mp);
}

}  // namespace goro::rt

using namespace goro::rt;

// On g0, in ordinary context, right after the handler's sigreturn: gp was
// interrupted and its context saved on its stack. As mcall(gosched_m),
// plus the pin to this thread.
extern "C" [[noreturn]] void goro_async_preempted(G* gp, long kind) {
  M* mp = getm();
  eh_save(mp, gp);
  san_leave_g(mp, gp, false);
  san_enter_g0(mp);
  if (kind == async_entry_syscall) blocked_syscall_m(mp, gp);
  requeue_pinned(mp, gp);
}

// On gp's stack, on the thread that resumes it (goro_async_resume), just
// before its context is restored.
extern "C" void goro_async_resumed(void* ctxp) {
  auto* c = static_cast<async_ctx*>(ctxp);
  G* gp = c->g;
  M* mp = getm();
  san_enter_g(gp, false);
  if (mp != c->m && debug.asyncpreemptmigrate == 0)
    fatal("async preemption: goroutine resumed on another thread");
  unpin(mp, gp);
}
