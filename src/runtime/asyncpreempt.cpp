// asyncpreempt.cpp: asynchronous (signal-based) preemption of goroutines
// running call-free code (Go's preemptM, doSigPreempt, isAsyncSafePoint,
// asyncPreempt; ../shared/reference/preemption.md §4).
//
// sysmon's preemptone sets G.preempt and, when async preemption is on,
// sends the goroutine's thread a signal (SIGURG by default), coalesced by
// M.signal_pending. The handler runs on the thread's alternate signal
// stack and only looks and copies (async-signal-safe: no lock, no
// allocation). If the interrupted goroutine may be preempted there (its
// preemption was asked for; it is running, outside any goro::preempt_guard
// and any runtime lock; the PC is in the main executable's code but not in
// goro's own code (section goro_text) or the PLT; the signal mask is the
// thread's usual one; its stack has room), the handler copies the general
// registers, RFLAGS and the XSAVE image onto the goroutine's stack below
// the red zone (layout in asyncpreempt_amd64.S) and rewrites the ucontext
// so that sigreturn lands on the M's scheduler stack (g0), in ordinary
// context, in goro_async_preempt_entry -> goro_async_preempted. That
// function does what an mcall(gosched_m) does for a yield, plus a pin: the
// goroutine is locked to this thread (as lock_os_thread does) until it
// resumes here, because the interrupted code may hold thread_local
// addresses in registers. Resuming is goro_gogo into goro_async_resume,
// which restores every register exactly.
#include "runtime/asyncpreempt.hpp"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <signal.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <cstring>
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/globrunq.hpp"
#include "runtime/lockosthread.hpp"
#include "runtime/mstart.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/oslock.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/tls.hpp"

// goro's own code when the static library is linked into the executable:
// the build renames every code section of libgoro.a to goro_text
// (cmake/goro_text.cmake) and the linker defines these. Null in the
// shared library, whose code is outside the executable anyway.
extern "C" {
extern char __start_goro_text[] __attribute__((weak, visibility("hidden")));
extern char __stop_goro_text[] __attribute__((weak, visibility("hidden")));
void goro_async_preempt_entry();
void goro_async_resume();
}

namespace goro::rt {

std::atomic<bool> async_preempt_on{false};
async_preempt_counters async_preempt_stats;

namespace {

// The saved context, on the goroutine's stack (asyncpreempt_amd64.S).
struct alignas(64) async_ctx {
  std::uint64_t rax, rbx, rcx, rdx, rsi, rbp;
  std::uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
  std::uint64_t slots;  // S - 152: rdi, rflags, rip
  G* g;
  M* m;
  std::uint64_t xsave;  // 1: XSAVE image, 0: FXSAVE image
  std::uint64_t pad[6];
};
static_assert(sizeof(async_ctx) == 192);
static_assert(offsetof(async_ctx, slots) == 112);
static_assert(offsetof(async_ctx, g) == 120);
static_assert(offsetof(async_ctx, xsave) == 136);

// Stack a preempted goroutine must have left below its saved context, for
// goro_async_resumed (and the sanitizer calls in it).
#ifdef GORO_HAVE_ASAN
constexpr std::uintptr_t resume_headroom = 32 * 1024;
#else
constexpr std::uintptr_t resume_headroom = 16 * 1024;
#endif

struct pc_range {
  std::uintptr_t lo, hi;
};
constexpr int max_ranges = 64;
// Preemptible code. Entries are only appended (under install_mu), each
// written before nranges is raised (release), so the handler, which reads
// nranges with acquire, never sees a half-written one.
pc_range ranges[max_ranges];
std::atomic<int> nranges{0};

int preempt_sig = SIGURG;
pid_t self_pid = 0;
struct sigaction old_action;
bool installed = false;
bool supported = true;
std::mutex install_mu;

bool pc_preemptible(std::uintptr_t pc) {
  int n = nranges.load(std::memory_order_acquire);
  for (int i = 0; i < n; i++)
    if (pc >= ranges[i].lo && pc < ranges[i].hi) return true;
  return false;
}

// Removes [lo, hi) from the preemptible ranges.
void exclude(std::vector<pc_range>& v, std::uintptr_t lo, std::uintptr_t hi) {
  if (lo >= hi) return;
  std::vector<pc_range> out;
  for (pc_range r : v) {
    if (hi <= r.lo || lo >= r.hi) {
      out.push_back(r);
      continue;
    }
    if (r.lo < lo) out.push_back({r.lo, lo});
    if (hi < r.hi) out.push_back({hi, r.hi});
  }
  v.swap(out);
}

// A loaded object's executable segments: the main program (want == 0, the
// first object dl_iterate_phdr reports) or the one containing address
// `want`.
struct exe_info {
  std::uintptr_t want = 0;
  std::uintptr_t bias = 0;
  std::vector<pc_range> text;
  std::string name;
  bool found = false;
};

int phdr_cb(dl_phdr_info* info, std::size_t, void* data) {
  auto* e = static_cast<exe_info*>(data);
  std::vector<pc_range> text;
  bool contains = false;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_LOAD) continue;
    std::uintptr_t lo = info->dlpi_addr + ph.p_vaddr;
    std::uintptr_t hi = lo + ph.p_memsz;
    if (e->want >= lo && e->want < hi) contains = true;
    if (ph.p_flags & PF_X) text.push_back({lo, hi});
  }
  if (e->want != 0 && !contains) return 0;
  e->bias = info->dlpi_addr;
  e->text = std::move(text);
  e->name = info->dlpi_name != nullptr ? info->dlpi_name : "";
  e->found = true;
  return 1;
}

// An object's PLT sections (.plt, .plt.sec, .plt.got), from its section
// headers.
void exclude_plt(std::vector<pc_range>& v, std::uintptr_t bias,
                 const char* path) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return;
  ElfW(Ehdr) eh;
  std::vector<ElfW(Shdr)> sh;
  std::vector<char> names;
  if (pread(fd, &eh, sizeof eh, 0) != ssize_t(sizeof eh) ||
      std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 ||
      eh.e_shentsize != sizeof(ElfW(Shdr)) || eh.e_shstrndx >= eh.e_shnum)
    goto out;
  sh.resize(eh.e_shnum);
  if (pread(fd, sh.data(), sh.size() * sizeof(ElfW(Shdr)), off_t(eh.e_shoff)) !=
      ssize_t(sh.size() * sizeof(ElfW(Shdr))))
    goto out;
  names.resize(sh[eh.e_shstrndx].sh_size + 1);
  if (pread(fd, names.data(), names.size() - 1,
            off_t(sh[eh.e_shstrndx].sh_offset)) != ssize_t(names.size() - 1))
    goto out;
  for (const ElfW(Shdr) & s : sh) {
    if (s.sh_name >= names.size() - 1) continue;
    const char* n = names.data() + s.sh_name;
    if (std::strcmp(n, ".plt") == 0 || std::strcmp(n, ".plt.sec") == 0 ||
        std::strcmp(n, ".plt.got") == 0 || std::strcmp(n, ".iplt") == 0)
      exclude(v, bias + s.sh_addr, bias + s.sh_addr + s.sh_size);
  }
out:
  close(fd);
}

bool in_goro(std::uintptr_t lo, std::uintptr_t hi) {
  auto inside = [&](const void* p) {
    auto a = reinterpret_cast<std::uintptr_t>(p);
    return a >= lo && a < hi;
  };
  return inside(reinterpret_cast<const void*>(&goro_async_resume)) ||
         inside(reinterpret_cast<const void*>(&asyncpreempt_set));
}

// Appends v (minus goro's own code) to the preemptible ranges; false if
// they do not fit or would cover goro's code. Caller holds install_mu.
bool add_ranges_locked(std::vector<pc_range> v) {
  if (__start_goro_text != nullptr && __stop_goro_text != nullptr)
    exclude(v, reinterpret_cast<std::uintptr_t>(__start_goro_text),
            reinterpret_cast<std::uintptr_t>(__stop_goro_text));
  int n = nranges.load(std::memory_order_relaxed);
  if (n + int(v.size()) > max_ranges) return false;
  for (pc_range r : v)
    if (in_goro(r.lo, r.hi)) return false;
  for (std::size_t i = 0; i < v.size(); i++) ranges[n + int(i)] = v[i];
  nranges.store(n + int(v.size()), std::memory_order_release);
  return true;
}

// The main executable's code, unless GORO_DEBUG=asyncpreemptmain=0 limits
// preemption to code added explicitly; false if goro's own code cannot be
// told apart from the executable's (then async preemption stays off).
bool compute_ranges() {
  if (debug.asyncpreemptmain == 0) return true;
  exe_info e;
  dl_iterate_phdr(phdr_cb, &e);
  if (!e.found) return false;
  std::vector<pc_range> v = e.text;
  exclude_plt(v, e.bias, "/proc/self/exe");
  // goro's code must be outside (the shared library, or the static one
  // with its goro_text section); otherwise refuse.
  return add_ranges_locked(std::move(v));
}

// Copies n bytes without sanitizer checks (the destination is goroutine
// stack below its stack pointer, which ASan may still mark as redzones of
// returned frames).
inline void raw_copy(void* dst, const void* src, std::size_t n) {
  asm volatile("rep movsb" : "+D"(dst), "+S"(src), "+c"(n) : : "memory");
}

// The handler's decision and copy. Async-signal-safe.
__attribute__((no_sanitize_address)) void try_preempt(M* mp, ucontext_t* uc) {
  if (!async_preempt_on.load(std::memory_order_relaxed)) return;
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp == nullptr || !gp->preempt.load(std::memory_order_relaxed)) return;
  if (gp->atomicstatus.load(std::memory_order_relaxed) != g_running) return;
  greg_t* r = uc->uc_mcontext.gregs;
  std::uintptr_t pc = std::uintptr_t(r[REG_RIP]);
  mp->sig_pc.store(pc, std::memory_order_relaxed);
  // goro_tls_nlocks: a direct TLS read is right here, on the same thread.
  if (goro_tls_nlocks != 0) {
    mp->sig_why.store(4, std::memory_order_relaxed);
    async_preempt_stats.deferred_runtime_lock.fetch_add(
        1, std::memory_order_relaxed);
    return;
  }
  if (mp->locks != 0 || mp->p == nullptr ||
      gp->preempt_off.load(std::memory_order_relaxed) != 0) {
    mp->sig_why.store(3, std::memory_order_relaxed);
    return;
  }
  if (gp->oslocks.load(std::memory_order_relaxed) != 0) {
    mp->sig_why.store(2, std::memory_order_relaxed);
    // Inside an OS lock's critical section: G.preempt stays set and the
    // unlock that releases the last lock preempts (oslock_preempt_point).
    async_preempt_stats.deferred_oslock.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  if (!pc_preemptible(pc)) {
    mp->sig_why.store(1, std::memory_order_relaxed);
    async_preempt_stats.rejected_pc.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  std::uint64_t mask;
  std::memcpy(&mask, &uc->uc_sigmask, sizeof mask);
  if (mask != mp->sigmask0) return;  // inside a user's signal handler?
  auto* fx = reinterpret_cast<unsigned char*>(uc->uc_mcontext.fpregs);
  if (fx == nullptr) return;
  std::uint32_t magic1, xstate_size;
  std::memcpy(&magic1, fx + 464, 4);  // _fpx_sw_bytes.magic1
  std::memcpy(&xstate_size, fx + 480, 4);
  bool xs = magic1 == 0x46505853u;  // FP_XSTATE_MAGIC1
  std::size_t fpsize = xs ? xstate_size : 512;
  if (fpsize < 512 || fpsize > 64 * 1024) return;
  std::uintptr_t sp = std::uintptr_t(r[REG_RSP]);
  if (sp > gp->stk.hi || sp <= gp->stk.lo) return;
  std::uintptr_t slots = sp - 152;
  std::uintptr_t ctxa =
      (slots - sizeof(async_ctx) - fpsize) & ~std::uintptr_t(63);
  std::uintptr_t frame = ctxa - 64;
  if (ctxa < gp->stk.lo + resume_headroom + 64) return;

  auto* s = reinterpret_cast<std::uint64_t*>(slots);
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
  f[0] = (std::uint64_t(0x037F) << 32) | 0x1F80;
  f[1] = f[2] = f[3] = f[4] = 0;
  f[5] = ctxa;
  f[6] = 0;
  f[7] = reinterpret_cast<std::uint64_t>(&goro_async_resume) + 1;
  gp->sched_sp = reinterpret_cast<void*>(frame);

  // Leave the handler onto g0: goro_async_preempt_entry(gp), with clean
  // flags (DF, TF clear) and the default floating-point state (MXCSR,
  // x87 control word; every XSAVE component in its initial state).
  r[REG_RIP] =
      greg_t(reinterpret_cast<std::uintptr_t>(&goro_async_preempt_entry));
  r[REG_RSP] = greg_t(reinterpret_cast<std::uintptr_t>(mp->g0_sp));
  r[REG_RDI] = greg_t(reinterpret_cast<std::uintptr_t>(gp));
  r[REG_RBP] = 0;
  r[REG_EFL] = 0x202;
  std::uint32_t mxcsr = 0x1F80;
  std::uint16_t fcw = 0x037F;
  std::memcpy(fx + 24, &mxcsr, 4);
  std::memcpy(fx, &fcw, 2);
  if (xs) {
    std::uint64_t bv = 0;
    std::memcpy(fx + 512, &bv, 8);  // XSTATE_BV: all components initial
  }
  mp->sig_why.store(0, std::memory_order_relaxed);
  async_preempt_stats.preempted.fetch_add(1, std::memory_order_relaxed);
}

// A dump's traceback request (signal_traceback): the frames from the
// interrupted context outwards. The unwinder starts in this handler and
// crosses the kernel's signal frame (glibc's __restore_rt has CFI for it);
// frames before the interrupted pc are the handler's own and are skipped.
struct tb_walk {
  std::uintptr_t from;  // the interrupted pc
  M* mp;
  bool started;
};

_Unwind_Reason_Code tb_one(struct _Unwind_Context* ctx, void* arg) {
  auto* w = static_cast<tb_walk*>(arg);
  int before = 0;
  std::uintptr_t pc = _Unwind_GetIPInfo(ctx, &before);
  if (pc == 0) return _URC_END_OF_STACK;
  if (!w->started) {
    if (pc != w->from) return _URC_NO_REASON;
    w->started = true;
  }
  if (!before) pc--;  // a return address: look up the call
  w->mp->tb_pcs[w->mp->tb_n++] = pc;
  return w->mp->tb_n >= M::tb_max ? _URC_END_OF_STACK : _URC_NO_REASON;
}

// True if a traceback was asked of this thread (then answered here, and
// the signal does not preempt). One relaxed load when none was.
bool traceback_request(M* mp, ucontext_t* uc) {
  if (mp->tb_state.load(std::memory_order_relaxed) != 1) return false;
  std::uint32_t asked = 1;
  if (!mp->tb_state.compare_exchange_strong(asked, 2,
                                            std::memory_order_acquire))
    return false;
  mp->tb_n = 0;
  G* gp = mp->curg.load(std::memory_order_relaxed);
  if (gp != nullptr && gp == mp->tb_g) {
    tb_walk w{std::uintptr_t(uc->uc_mcontext.gregs[REG_RIP]), mp, false};
    _Unwind_Backtrace(tb_one, &w);
  }
  mp->tb_state.store(3, std::memory_order_release);
  futex_wake(&mp->tb_state, 1);
  return true;
}

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

bool install_locked() {
  if (installed) return true;
#ifdef GORO_HAVE_TSAN
  // TSan defers asynchronous signals to its next interceptor and hands the
  // handler a copy of the context, so the handler cannot redirect the
  // thread: async preemption is off under TSan.
  supported = false;
#endif
  if (!supported) return false;
  if (!compute_ranges()) {
    supported = false;
    return false;
  }
  self_pid = getpid();
  struct sigaction sa {};
  sa.sa_sigaction = sigpreempt;
  sa.sa_flags = SA_SIGINFO | SA_ONSTACK | SA_RESTART;
  sigfillset(&sa.sa_mask);
  if (sigaction(preempt_sig, &sa, &old_action) != 0) {
    supported = false;
    return false;
  }
  installed = true;
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
  if (debug.asyncpreemptoff > 0) supported = false;
  // On by default (GORO_DEBUG=asyncpreempt=0 starts with it off; the API
  // can still turn it on; asyncpreemptoff=1 keeps it off).
  if (debug.asyncpreempt > 0) asyncpreempt_set(true);
}

bool asyncpreempt_set(bool on) {
  std::lock_guard<std::mutex> lk(install_mu);
  bool prev = async_preempt_on.load();
  if (on && !install_locked()) return prev;
  async_preempt_on.store(on);
  return prev;
}

void preemptM(M* mp, G* gp) {
  if (gp->atomicstatus.load(std::memory_order_relaxed) != g_running) return;
  if (mp->procid == 0) return;
  if (mp->signal_pending.exchange(true)) return;
  async_preempt_stats.sent.fetch_add(1, std::memory_order_relaxed);
  syscall(SYS_tgkill, self_pid, mp->procid, preempt_sig);
}

int signal_traceback(M* mp, G* gp, std::uintptr_t* pcs, int max,
                     std::int64_t timeout_ns) {
  // One dumper at a time (tb_g is the dumper's to write while tb_state is
  // 0 or 3).
  static std::mutex tb_mu;
  std::lock_guard<std::mutex> lk(tb_mu);
  {
    std::lock_guard<std::mutex> ik(install_mu);
    if (!installed) return -1;
  }
  pid_t tid = mp->procid;
  if (tid == 0) return -1;
  std::uint32_t st = mp->tb_state.load(std::memory_order_acquire);
  // 1 or 2: an earlier request that timed out is still unanswered.
  if (st == 1 || st == 2) return -1;
  mp->tb_g = gp;
  mp->tb_state.store(1, std::memory_order_release);
  syscall(SYS_tgkill, self_pid, tid, preempt_sig);
  std::int64_t deadline = nanotime() + timeout_ns;
  for (;;) {
    st = mp->tb_state.load(std::memory_order_acquire);
    if (st == 3) break;
    std::int64_t left = deadline - nanotime();
    if (left <= 0) {
      // Withdraw the request if the handler has not taken it; if it is
      // collecting, it finishes into M's buffer and the next dumper finds
      // state 3.
      std::uint32_t asked = 1;
      mp->tb_state.compare_exchange_strong(asked, 0, std::memory_order_relaxed);
      return -1;
    }
    futex_wait(&mp->tb_state, st, left);
  }
  int n = mp->tb_n < max ? mp->tb_n : max;
  for (int i = 0; i < n; i++) pcs[i] = mp->tb_pcs[i];
  mp->tb_state.store(0, std::memory_order_relaxed);
  return n > 0 ? n : -1;
}

namespace {

// On g0, with gp just switched out (still _Grunning): requeue it pinned to
// this thread, as a yield (Go's gopreempt_m) plus the pin. Registers may
// hold addresses of this thread's thread_locals (or malloc's per-thread
// caches), so gp resumes here; a goroutine already locked by
// lock_os_thread stays locked as it was.
[[noreturn]] void requeue_pinned(M* mp, G* gp) {
  casgstatus(gp, g_running, g_runnable);
  trace_go_preempt(gp, true);
  dropg(mp, gp);
  if (gp->lockedm == nullptr && debug.asyncpreemptmigrate == 0) {
    gp->lockedm = mp;
    mp->lockedg = gp;
    gp->async_pinned = true;
  }
  if (sched.runqsize.load(std::memory_order_relaxed) == 0) {
    runqput(mp->p, gp, false);
  } else {
    lock_guard lk(sched.lock);
    globrunqput(gp);
  }
  // schedule() sees the locked goroutine: it hands the P (with gp queued)
  // to another thread and waits until someone finds gp and hands a P back.
  schedule();
  __builtin_unreachable();
}

// On gp's stack, resumed: the pin was for this one resumption.
void unpin(M* mp, G* gp) {
  if (gp->async_pinned) {
    gp->async_pinned = false;
    if (mp->locked_ext == 0) {
      mp->lockedg = nullptr;
      gp->lockedm = nullptr;
    }
  }
}

// mcall target of a preemption deferred to an unlock.
void deferred_preempt_m(void* arg) {
  M* mp = getm();
  san_enter_g0(mp);
  requeue_pinned(mp, static_cast<G*>(arg));
}

}  // namespace

void oslock_preempt_point(G* gp, void* ra) {
  // The same conditions as the handler's, checked in ordinary context: the
  // unlock was called from preemptible code (the user's, not goro's, libc's
  // or libstdc++'s), by a running goroutine outside any preempt_guard and
  // runtime lock, with a P.
  if (!async_preempt_on.load(std::memory_order_relaxed)) return;
  M* mp = getm();
  if (mp == nullptr || mp->curg.load(std::memory_order_relaxed) != gp ||
      mp->locks != 0 || goro_tls_nlocks != 0 || mp->p == nullptr ||
      gp->atomicstatus.load(std::memory_order_relaxed) != g_running ||
      gp->preempt_off.load(std::memory_order_relaxed) != 0 ||
      !pc_preemptible(reinterpret_cast<std::uintptr_t>(ra)))
    return;
  gp->preempt.store(false, std::memory_order_relaxed);
  async_preempt_stats.at_unlock.fetch_add(1, std::memory_order_relaxed);
  async_preempt_stats.preempted.fetch_add(1, std::memory_order_relaxed);
  // An ordinary call: the caller-saved registers are dead, mcall saves the
  // rest. Resumes on this thread (the pin).
  mcall(deferred_preempt_m);
  M* now = getm();
  if (now != mp && debug.asyncpreemptmigrate == 0)
    fatal("async preemption: goroutine resumed on another thread");
  unpin(now, gp);
}

}  // namespace goro::rt

using namespace goro::rt;

// On g0, in ordinary context, right after the handler's sigreturn: gp was
// interrupted and its context saved on its stack. As mcall(gosched_m),
// plus the pin to this thread.
extern "C" [[noreturn]] void goro_async_preempted(G* gp) {
  M* mp = getm();
  eh_save(mp, gp);
  san_leave_g(mp, gp, false);
  san_enter_g0(mp);
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

namespace goro::debug {

bool set_async_preempt(bool on) {
  // After start-up, so that GORO_DEBUG (asyncpreemptoff, the signal) has
  // been applied.
  goro::detail::ensure_started(nullptr);
  return rt::asyncpreempt_set(on);
}

std::chrono::nanoseconds set_time_slice(std::chrono::nanoseconds d) {
  if (const char* why = rt::time_slice_problem(d.count()))
    throw std::invalid_argument("goro::debug::set_time_slice(" +
                                std::to_string(d.count()) + "ns): " + why);
  goro::detail::ensure_started(nullptr);
  return std::chrono::nanoseconds(rt::time_slice_ns.exchange(d.count()));
}

bool async_preempt_enabled() {
  return rt::async_preempt_on.load(std::memory_order_relaxed);
}

preempt_stats read_preempt_stats() {
  auto& s = rt::async_preempt_stats;
  return preempt_stats{s.sent.load(),
                       s.received.load(),
                       s.preempted.load(),
                       s.rejected_pc.load(),
                       s.deferred_oslock.load(),
                       s.at_unlock.load(),
                       s.deferred_runtime_lock.load()};
}

namespace {
// Objects whose code is never made preemptible: their state is shared by
// every goroutine on a thread (malloc arenas, stdio, the loader, the
// unwinder, a sanitizer's runtime), so a goroutine interrupted inside them
// could block or corrupt the next one.
bool system_object(const std::string& path) {
  std::string base = path.substr(path.find_last_of('/') + 1);
  for (const char* n :
       {"libc.so", "libc-", "ld-linux", "libstdc++", "libgcc_s", "libm.so",
        "libpthread", "libdl.so", "librt.so", "linux-vdso", "libgoro",
        "libasan", "libtsan", "libubsan", "liblsan", "libhwasan"})
    if (base.rfind(n, 0) == 0) return true;
  return false;
}
}  // namespace

void add_async_preempt_library(const void* addr) {
  goro::detail::ensure_started(nullptr);
  rt::exe_info e;
  e.want = reinterpret_cast<std::uintptr_t>(addr);
  if (e.want == 0)
    throw std::invalid_argument("goro::debug::add_async_preempt_library: null");
  dl_iterate_phdr(rt::phdr_cb, &e);
  if (!e.found)
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: the address is in no "
        "loaded object");
  std::string path = e.name.empty() ? "/proc/self/exe" : e.name;
  if (!e.name.empty() && system_object(e.name))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: " + e.name +
        " is a system library (or goro) whose code must not be interrupted");
  std::vector<rt::pc_range> v = e.text;
  rt::exclude_plt(v, e.bias, path.c_str());
  std::lock_guard<std::mutex> lk(rt::install_mu);
  if (!rt::add_ranges_locked(std::move(v)))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_library: " + path +
        ": too many code ranges, or goro's own code");
}

void add_async_preempt_range(const void* begin, const void* end) {
  goro::detail::ensure_started(nullptr);
  auto lo = reinterpret_cast<std::uintptr_t>(begin);
  auto hi = reinterpret_cast<std::uintptr_t>(end);
  if (lo == 0 || hi <= lo)
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_range: empty or null range");
  std::lock_guard<std::mutex> lk(rt::install_mu);
  if (!rt::add_ranges_locked({rt::pc_range{lo, hi}}))
    throw std::invalid_argument(
        "goro::debug::add_async_preempt_range: too many ranges, or the "
        "range covers goro's own code");
}

int os_locks_held() {
  rt::G* gp = rt::getg();
  return gp != nullptr ? gp->oslocks.load(std::memory_order_relaxed) : 0;
}

}  // namespace goro::debug
