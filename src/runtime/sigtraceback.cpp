// sigtraceback.cpp: a goroutine dump's traceback of a goroutine running on
// another thread (signal_traceback). The dumper sends the thread the
// preemption signal with a request in M.tb_state; the preemption handler
// (asyncpreempt.cpp sigpreempt) answers it first (traceback_request),
// unwinding from the interrupted context into M.tb_pcs, and wakes the
// dumper.
//
// M.tb_state: 0 idle, 1 asked (the dumper wrote tb_g), 2 the handler is
// collecting, 3 answered (tb_pcs/tb_n ready). Only the dumper moves it to
// 1 (from 0, or from 3 left by an answer that came after its dumper gave
// up), 1->0 (withdrawn on timeout) and 3->0; only the handler 1->2->3.
// Dumpers are serialized by a mutex; the handler side is
// async-signal-safe.
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <unwind.h>

#include <mutex>

#include "runtime/asyncpreempt_internal.hpp"
#include "runtime/lock.hpp"
#include "runtime/nanotime.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

// A dump's traceback request: the frames from the
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

}  // namespace

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

}  // namespace goro::rt
