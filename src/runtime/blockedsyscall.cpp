// blockedsyscall.cpp: a system call goro was not told about (a plain
// read(2) on a pipe, a blocking recv inside a C client library, sem_wait,
// the futex of a lock in inline header code) loses its P when it blocks,
// as Go's syscalls and cgo calls do, instead of holding it for as long as
// it lasts.
//
// Detection (sysmon): a P whose goroutine has been running one dispatch
// (nrun unchanged) for GORO_DEBUG=blockedsyscall us (default 1000) gets its
// thread's CPU clock sampled about that often; a clock that did not move
// between two samples of the same run means the thread was off the CPUs
// all along: blocked in the kernel, or waiting for a CPU (an overloaded
// machine), which its state in /proc/self/task/TID/stat tells apart ('R').
// sysmon then sends the preemption signal to a blocked one. Cost: one
// clock_gettime per such P and period, only while a run lasts that long,
// and a read of /proc for a thread found off the CPUs.
//
// Decision (the handler, on the thread itself, so nothing races with the
// thread's own use of its P): the signal interrupted a restartable system
// call when the kernel has backed the PC up onto the `syscall` instruction
// (SA_RESTART: RAX is the call's number again, or restart_syscall's; the
// arguments are still in their registers). The handler then saves the
// goroutine's context as for a preemption (asyncpreempt.cpp) and
// redirects the thread to g0, where blocked_syscall_m makes that same call
// between entersyscall and exitsyscall: the P is _Psyscall for the call's
// duration, and sysmon retakes it and hands it off as it does for
// goro::blocking. The goroutine is pinned to the thread meanwhile (as a
// preempted one is), so it resumes on the thread that made its call, with
// the result in RAX and the PC past the instruction: to the interrupted
// code, the call returned. A thread merely waiting for a CPU is not in a
// system call; the handler leaves it alone (a preemption request, if one
// is pending, is handled as usual).
//
// Not handed off: calls the kernel does not restart after a handler
// (epoll_wait, select, poll and ppoll with a signal mask, sigsuspend...)
// return EINTR to their caller, as they already did for the preemption
// signal; calls made inside goro's own code, under a runtime lock, inside
// a goro::preempt_guard, in a user's signal handler, or on a stack that is
// not the goroutine's; and the calls whose effect depends on the stack or
// the thread's register state (clone, fork, vfork, execve, exit,
// rt_sigreturn, sigaltstack, rt_sigsuspend). TSan builds: off (the handler
// cannot redirect the thread there).
#include "runtime/blockedsyscall.hpp"

#include <fcntl.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <string>

#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"
#include "runtime/trace.hpp"
#include "runtime/traceback.hpp"

namespace goro::rt {

std::int64_t thread_cpu_ns(pid_t tid) {
  if (tid <= 0) return -1;
  // The kernel's per-thread CPU clock of tid (glibc's pthread_getcpuclockid
  // builds the same id; by tid, a thread that has exited gives an error
  // instead of a dangling pthread_t).
  clockid_t id = clockid_t((~clockid_t(tid) << 3) | 6);
  timespec ts{};
  if (clock_gettime(id, &ts) != 0) return -1;
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

namespace {

// Why try_blocked_syscall left a thread's P alone (M::blocked_why).
enum blocked_reject : int {
  blocked_handed_off = 0,
  blocked_not_restartable,  // not at a restartable system call
  blocked_runtime_lock,     // goro's runtime holds a lock there
  blocked_guard,            // inside a goro::preempt_guard
  blocked_goro_code,        // a call of goro's own code
  blocked_no_room,          // a user's signal handler, or a foreign stack
};

const char* blocked_reason(int why) {
  switch (why) {
    case blocked_not_restartable:
      return "not in a system call the kernel restarts after a signal "
             "handler (epoll_wait, poll, select...), or waiting for a CPU";
    case blocked_runtime_lock:
      return "goro's runtime holds a lock there";
    case blocked_guard:
      return "inside a goro::preempt_guard";
    case blocked_goro_code:
      return "in a call of goro's own code";
    case blocked_no_room:
      return "in a signal handler, or on a stack that is not the "
             "goroutine's";
    default:
      return "not handed off yet";
  }
}

// A thread that ran for less than 1/idle_cpu_fraction of a period counts
// as off the CPUs.
constexpr std::int64_t idle_cpu_fraction = 32;

// The longest wait between two samples of a thread that keeps computing,
// in periods.
constexpr std::int64_t max_sample_gap = 8;

// The longest wait between two signals to a thread that stays blocked, in
// blockedsyscall periods.
constexpr std::int64_t max_blocked_backoff = 64;

// Goroutines waiting for pp (its queue) or for any P (the global queue).
std::uint32_t waiting_for(P* pp) {
  return runqlen(pp) + std::uint32_t(sched.runqsize.load());
}

// sysmon: goroutines have waited `ms` for pp, whose thread stays blocked
// where the handler cannot hand it off. Once per run; fatal on request.
void report_blocked(P* pp, M* mp, std::int64_t ms) {
  G* gp = mp->curg.load(std::memory_order_acquire);
  if (gp == nullptr) return;
  char head[512];
  std::snprintf(
      head, sizeof head,
      "goro: goroutine %llu has kept its processor for %lld ms while its "
      "thread (tid %d) is blocked in the kernel, and %u goroutine(s) wait "
      "for a processor; it cannot be handed off: %s. Wrap the call in "
      "goro::blocking, or leave the guard first (GORO_DEBUG=blockedreport=N "
      "sets the threshold in ms, 0 off; blockedfatal=1 makes this fatal)\n",
      static_cast<unsigned long long>(
          __atomic_load_n(&gp->goid, __ATOMIC_RELAXED)),
      static_cast<long long>(ms), int(mp->procid), waiting_for(pp),
      blocked_reason(mp->blocked_why.load(std::memory_order_relaxed)));
  std::string trace = running_goroutine_trace(gp);
  std::fputs(head, stderr);
  std::fputs(trace.c_str(), stderr);
  std::fputs("\n", stderr);
  std::fflush(stderr);
  if (debug.blockedfatal > 0)
    fatal(
        "a processor is held by a thread blocked in the kernel "
        "(GORO_DEBUG=blockedfatal=1)");
}

// The scheduler state of thread tid ('R' running or runnable, 'S' or 'D'
// asleep in the kernel...), from /proc; 0 if unknown. Three system calls:
// only for a thread its CPU clock already shows off the CPUs.
char thread_state(pid_t tid) {
  char path[64];
  std::snprintf(path, sizeof path, "/proc/self/task/%d/stat", int(tid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[256];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  // "tid (comm) S ...": comm may hold spaces and parentheses; the state
  // follows the last ')'.
  const char* rp = std::strrchr(buf, ')');
  return rp != nullptr && rp[1] == ' ' ? rp[2] : 0;
}

}  // namespace

void sysmon_check_blocked(P* pp, std::uint64_t nrun, std::int64_t nrunwhen,
                          std::int64_t now) {
  std::int64_t period = std::int64_t(debug.blockedsyscall) * 1000;
  // Half a period into the run for the first sample, then one a period:
  // the thread is signalled between one and two periods after it blocked.
  // While the samples show the thread computing (on a CPU at least half
  // the time), they space out, doubling up to max_sample_gap periods; the
  // first sample that finds it mostly off the CPUs brings them back to one
  // a period.
  if (now - nrunwhen < period / 2) return;
  bool same_run = pp->sysmon_blkcpu >= 0 && pp->sysmon_blknrun == nrun;
  if (!same_run) pp->sysmon_blkgap = period;
  if (same_run && now - pp->sysmon_blkwhen < pp->sysmon_blkgap) return;
  M* mp = pp->m.load(std::memory_order_acquire);
  if (mp == nullptr) return;
  pid_t tid = __atomic_load_n(&mp->procid, __ATOMIC_RELAXED);
  std::int64_t cpu = thread_cpu_ns(tid);
  // Off the CPUs: under 1/32 of the time on one. Not exactly none: the
  // signals that interrupt a blocked call (sysmon's, a slice's end) run
  // the handler on the thread for a few microseconds each.
  bool idle =
      same_run && cpu >= 0 && pp->sysmon_blktid == tid &&
      (cpu - pp->sysmon_blkcpu) * idle_cpu_fraction < now - pp->sysmon_blkwhen;
  // Off the CPUs, but runnable: waiting for a CPU on a loaded machine, not
  // blocked (a signal would only cost it time).
  if (idle && thread_state(tid) == 'R') idle = false;
  std::int64_t window = now - pp->sysmon_blkwhen;
  if (same_run && cpu >= 0 && (cpu - pp->sysmon_blkcpu) * 2 >= window)
    pp->sysmon_blkgap =
        std::min(2 * pp->sysmon_blkgap, max_sample_gap * period);
  else
    pp->sysmon_blkgap = period;
  if (!idle) {
    pp->sysmon_blksince = 0;
    pp->sysmon_blkbackoff = 0;
  } else if (pp->sysmon_blksince == 0) {
    pp->sysmon_blksince = pp->sysmon_blkwhen;
  }
  pp->sysmon_blknrun = nrun;
  pp->sysmon_blktid = tid;
  pp->sysmon_blkwhen = now;
  pp->sysmon_blkcpu = cpu;
  if (!idle) return;
  // Still blocked a report's time after the first signal: the handler
  // could not hand it off (M::blocked_why says why).
  std::int64_t blocked_ns = now - pp->sysmon_blksince;
  if (debug.blockedreport > 0 && pp->sysmon_blkreported != nrun &&
      blocked_ns >= std::int64_t(debug.blockedreport) * 1000000 &&
      waiting_for(pp) > 0) {
    pp->sysmon_blkreported = nrun;
    report_blocked(pp, mp, blocked_ns / 1000000);
  }
  // A signal that did not hand the P off (the handler said why) is sent
  // again after twice the wait, up to max_blocked_backoff periods: a call
  // the kernel does not restart fails with EINTR at each one.
  if (blocked_ns < pp->sysmon_blkbackoff) return;
  pp->sysmon_blkbackoff =
      std::min(2 * blocked_ns, max_blocked_backoff * period);
  if (signalM(mp))
    async_preempt_stats.blocked_signalled.fetch_add(1,
                                                    std::memory_order_relaxed);
}

namespace {

// x86-64's `syscall` instruction.
constexpr unsigned char syscall_insn[2] = {0x0f, 0x05};
// Numbers above the last x86-64 system call (and x32's) are not restarted.
constexpr long max_syscall_nr = 512;

// Calls whose effect depends on the stack, the registers or the signal
// frame they run with: not remade from g0.
bool remade_elsewhere_differs(long nr) {
  switch (nr) {
    case SYS_clone:
    case SYS_clone3:
    case SYS_fork:
    case SYS_vfork:
    case SYS_execve:
    case SYS_execveat:
    case SYS_exit:
    case SYS_exit_group:
    case SYS_rt_sigreturn:
    case SYS_rt_sigsuspend:
    case SYS_sigaltstack:
      return true;
    default:
      return false;
  }
}

// The call, with the registers the interrupted code set up for it.
long raw_syscall6(long nr, long a1, long a2, long a3, long a4, long a5,
                  long a6) {
  long ret;
  register long r10 asm("r10") = a4;
  register long r8 asm("r8") = a5;
  register long r9 asm("r9") = a6;
  asm volatile("syscall"
               : "=a"(ret)
               : "a"(nr), "D"(a1), "S"(a2), "d"(a3), "r"(r10), "r"(r8), "r"(r9)
               : "rcx", "r11", "memory");
  return ret;
}

}  // namespace

__attribute__((no_sanitize_address)) bool try_blocked_syscall(M* mp, G* gp,
                                                              ucontext_t* uc) {
  if (gp->atomicstatus.load(std::memory_order_relaxed) != g_running)
    return false;
  auto reject = [mp](blocked_reject why) {
    mp->blocked_why.store(why, std::memory_order_relaxed);
    return false;
  };
  // goro_tls_nlocks: a direct TLS read is right here, on the same thread.
  if (goro_tls_nlocks != 0 || mp->locks != 0)
    return reject(blocked_runtime_lock);
  if (gp->preempt_off.load(std::memory_order_relaxed) != 0)
    return reject(blocked_guard);
  if (mp->p == nullptr ||
      mp->p->status.load(std::memory_order_relaxed) != p_running)
    return false;
  greg_t* r = uc->uc_mcontext.gregs;
  std::uintptr_t pc = std::uintptr_t(r[REG_RIP]);
  if (std::memcmp(reinterpret_cast<const void*>(pc), syscall_insn,
                  sizeof syscall_insn) != 0)
    return reject(blocked_not_restartable);
  long nr = long(r[REG_RAX]);
  if (nr < 0 || nr >= max_syscall_nr || remade_elsewhere_differs(nr))
    return reject(blocked_not_restartable);
  if (pc_in_goro(pc)) return reject(blocked_goro_code);
  if (!save_and_redirect(mp, gp, uc, async_entry_syscall))
    return reject(blocked_no_room);
  mp->blocked_why.store(blocked_handed_off, std::memory_order_relaxed);
  async_preempt_stats.blocked_handoffs.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void blocked_syscall_m(M* mp, G* gp) {
  async_ctx* c = saved_ctx(gp);
  auto* slot = reinterpret_cast<std::uint64_t*>(c->slots);
  constexpr int slot_rdi = 0, slot_rflags = 1, slot_rip = 2;
  // Pinned for the call: if no P is free when it returns, the goroutine
  // waits for one on this thread (the interrupted code may hold this
  // thread's thread_local addresses, as for a preemption).
  if (gp->lockedm == nullptr && debug.asyncpreemptmigrate == 0) {
    gp->lockedm = mp;
    mp->lockedg = gp;
    gp->async_pinned = true;
  }
  entersyscall();  // on g0, for mp->curg (gp)
  long ret = raw_syscall6(long(c->rax), long(slot[slot_rdi]), long(c->rsi),
                          long(c->rdx), long(c->r10), long(c->r8), long(c->r9));
  // What the instruction leaves: the result in RAX, the return address in
  // RCX and RFLAGS in R11, the PC past it.
  c->rax = std::uint64_t(ret);
  slot[slot_rip] += sizeof syscall_insn;
  c->rcx = slot[slot_rip];
  c->r11 = slot[slot_rflags];
  // exitsyscall, on g0: our P back, or an idle one, or queue gp (it comes
  // back to this thread: the pin) and wait for a P.
  P* oldp = mp->oldp;
  mp->oldp = nullptr;
  if (!exitsyscall_takep(oldp)) exitsyscall_nop(mp, gp);
  casgstatus(gp, g_syscall, g_runnable);
  trace_sys_exit(gp, true);
  dropg(mp, gp);
  execute(gp, true);
}

}  // namespace goro::rt
