// m.hpp: the machine, one per OS thread that runs goroutines (Go's m).
#pragma once

#include <pthread.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"

namespace goro::rt {

// Why the preemption signal's handler (asyncpreempt.cpp try_preempt) left
// the goroutine running, stored in M::sig_why. sysmon's long-running
// report indexes a table of explanations by it: keep the values dense.
enum class sig_reject : int {
  none = 0,                // preempted, or preemption not asked
  not_preemptible_pc = 1,  // code that is not preemptible (goro's, a library's)
  os_lock = 2,             // an OS lock held (deferred to its unlock)
  guard = 3,               // a goro::preempt_guard, an M lock, or no P
  runtime_lock = 4,        // a runtime lock held (goro_tls_nlocks)
};
constexpr int sig_reject_count = 5;

struct P;

struct M {
  std::int64_t id = 0;
  // The goroutine running now (null on g0). Atomic (relaxed) because sysmon
  // reads it from its own thread to request preemption.
  std::atomic<G*> curg{nullptr};
  P* p = nullptr;         // the attached P
  P* nextp = nullptr;     // the P handed over when this M is woken
  P* oldp = nullptr;      // the P held before a syscall
  bool spinning = false;  // out of work and looking for some
  bool blocked = false;   // parked on `park`
  int locks = 0;          // > 0 disables preemption
  // LockOSThread: the goroutine this thread is dedicated to, and the
  // user's nesting count.
  G* lockedg = nullptr;
  std::uint32_t locked_ext = 0;
  // Copy of p.syscalltick at syscall entry.
  std::uint32_t syscalltick = 0;
  bool dead = false;       // the thread exited (a locked goroutine ended)
  note park;               // idle Ms sleep here (stopm)
  M* schedlink = nullptr;  // idle M list
  M* alllink = nullptr;    // allm
  pthread_t thread{};
  pid_t procid = 0;  // kernel thread id
  // Per-M random state (Go's cheaprand), for the steal order.
  std::uint64_t rand_state = 0;
  // Top of the scheduler stack (g0): mcall starts the scheduler afresh
  // here every time; g0's frames are never resumed.
  void* g0_sp = nullptr;
  void* g0_lo = nullptr;  // lowest address of the scheduler stack
  std::size_t g0_size = 0;
  // gopark's arguments carried into park_m on g0.
  bool (*waitunlockf)(G*, void*) = nullptr;
  void* waitlock = nullptr;
  // Sanitizer state of the scheduler stack.
  void* asan_g0_fake = nullptr;
  void* tsan_g0_fiber = nullptr;
  void* tsan_g0_cur = nullptr;
  unsigned tsan_g0_uses = 0;
  // Alternate signal stack for the overflow handler.
  void* sigstack = nullptr;
  // A preemption signal was sent and its handler has not run yet (Go's
  // signalPending): coalesces sysmon's requests.
  std::atomic<bool> signal_pending{false};
  // The thread's signal mask at start (first 64 signals): a context with
  // another mask (inside a user's signal handler) is never preempted.
  std::uint64_t sigmask0 = 0;
  // Where the last preemption signal found this M's goroutine and why it
  // could not preempt it there; read by sysmon's long-running report.
  std::atomic<std::uintptr_t> sig_pc{0};
  std::atomic<sig_reject> sig_why{sig_reject::none};
  // Why the handler's last look did not hand this thread's P off from a
  // system call (blockedsyscall.cpp, blocked_reject); for sysmon's report.
  std::atomic<int> blocked_why{0};
  bool spinning_at_start = false;  // started by startm(pp, spinning=true)
  // This thread's C++ exception globals (__cxa_get_globals()), fetched once
  // at thread start so a switch saves and restores them without a call.
  void* eh_globals = nullptr;
  // A dump's request for the frames this thread is running
  // (signal_traceback, sigtraceback.cpp): tb_state 0 idle, 1 asked (tb_g
  // is the goroutine the dumper saw here), 2 the preemption signal's
  // handler is collecting, 3 done (tb_n pcs in tb_pcs, published with a
  // release store). Only the handler writes tb_pcs/tb_n; no allocation.
  std::atomic<std::uint32_t> tb_state{0};
  G* tb_g = nullptr;
  int tb_n = 0;
  static constexpr int tb_max = 64;
  std::uintptr_t tb_pcs[tb_max];

  std::uint32_t cheaprand() {
    // wyrand: cheap, good enough for choosing steal orders.
    rand_state += 0xa0761d6478bd642fULL;
    __uint128_t t =
        __uint128_t(rand_state) * (rand_state ^ 0xe7037ed1a0b428dbULL);
    return std::uint32_t(std::uint64_t(t >> 64) ^ std::uint64_t(t));
  }
};

}  // namespace goro::rt
