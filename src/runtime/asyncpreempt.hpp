// asyncpreempt.hpp: signal-based (asynchronous) preemption of goroutines
// running call-free code (Go's preemptM, doSigPreempt, asyncPreempt).
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::rt {

struct G;
struct M;

// Async preemption is on (GORO_DEBUG=asyncpreempt=1, or
// goro::debug::set_async_preempt). Read by preemptone and the handler.
extern std::atomic<bool> async_preempt_on;

// Counters for goro::debug::read_preempt_stats.
struct async_preempt_counters {
  std::atomic<std::uint64_t> sent{0};             // signals sent by preemptM
  std::atomic<std::uint64_t> received{0};         // handler runs
  std::atomic<std::uint64_t> preempted{0};        // goroutines preempted
  std::atomic<std::uint64_t> rejected_pc{0};      // PC outside preemptible code
  std::atomic<std::uint64_t> deferred_oslock{0};  // OS lock held: deferred
  std::atomic<std::uint64_t> at_unlock{0};  // deferred ones done at unlock
  // Signals that found the thread holding a runtime lock (goro_tls_nlocks).
  std::atomic<std::uint64_t> deferred_runtime_lock{0};
  // sysmon's signals to threads that it found off the CPUs in a goroutine's
  // run (blockedsyscall.cpp), and the calls the handler then handed off.
  std::atomic<std::uint64_t> blocked_signalled{0};
  std::atomic<std::uint64_t> blocked_handoffs{0};
};
extern async_preempt_counters async_preempt_stats;
// The handler hands the P of a thread blocked in a system call goro was
// not told about to another thread (blockedsyscall.cpp); set at start-up.
extern std::atomic<bool> blocked_handoff_on;

// sigmask.cpp: resolves the real pthread_sigmask/sigprocmask behind
// libgoro's wrappers (and links them in from the static library).
void sigmask_init();
// Start-up: applies GORO_DEBUG's asyncpreempt/asyncpreemptoff/
// asyncpreemptsig settings (debug_vars) and installs the handler if on.
void asyncpreempt_init();
// Turns async preemption on or off at run time (installing the handler on
// first use); returns the previous setting. Off (and false) where it is not
// supported (TSan builds).
bool asyncpreempt_set(bool on);
// Per-thread set-up of a new M (its signal mask).
void minit_asyncpreempt(M* mp);
// Asks mp, running gp, to preempt it with a signal (Go's preemptM), if gp
// is running user code (not in a blocking call) and no signal is pending.
void preemptM(M* mp, G* gp);

// The frames gp is running on mp's thread now (gp _Grunning or _Gsyscall
// there), for goroutine dumps: sends the thread the preemption signal with
// a traceback request, whose handler unwinds from the interrupted context
// into mp->tb_pcs and wakes us. Waits at most timeout_ns. Returns the
// number of pcs copied to pcs (innermost first), or -1 if they cannot be
// had: the handler is not installed (async preemption off, or TSan, which
// defers signals and hands handlers a copy of the context), gp moved, or
// no answer in time. Serialized among dumpers; not for signal handlers.
int signal_traceback(M* mp, G* gp, std::uintptr_t* pcs, int max,
                     std::int64_t timeout_ns);

}  // namespace goro::rt
