// preempt.cpp: cooperative preemption. sysmon asks a goroutine that has
// run for a whole time slice (10 ms) to yield by setting G.preempt; the
// goroutine notices at its next runtime entry (go(), gosched, the sync
// primitives, goro::preempt_point()) and goes to the global run queue, as a
// preempted goroutine does in Go (gopreempt_m). When async preemption is
// on, preemptone also signals the goroutine's thread (asyncpreempt.cpp), so
// a loop that never enters the runtime is interrupted too.
#include "runtime/preempt.hpp"

#include "runtime/asyncpreempt.hpp"
#include "runtime/park.hpp"
#include "runtime/san.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

void gopreempt() {
  G* gp = getg();
  if (gp == nullptr) return;
  gp->preempt.store(false, std::memory_order_relaxed);
  syscall_suspend sys(gp);
  mcall(gosched_m);  // Go's gopreempt_m: the same as a yield
}

bool preemptone(P* pp) {
  M* mp = pp->m.load(std::memory_order_acquire);
  if (mp == nullptr) return false;
  G* gp = mp->curg.load(std::memory_order_acquire);
  if (gp == nullptr) return false;
  gp->preempt.store(true, std::memory_order_relaxed);
  pp->preempt.store(true, std::memory_order_relaxed);
  // A call-free loop never sees the flag: interrupt it (asyncpreempt.cpp).
  if (async_preempt_on.load(std::memory_order_relaxed)) preemptM(mp, gp);
  return true;
}

}  // namespace goro::rt
