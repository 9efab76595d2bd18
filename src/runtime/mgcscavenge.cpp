// mgcscavenge.cpp: returning idle goroutine stacks' memory to the OS (the
// role of Go's scavenger in mgcscavenge.go, for stacks only). sysmon calls
// scavenge_stacks about once a second and while it keeps finding work.
#include <sys/mman.h>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/sched.hpp"
#include "runtime/stack.hpp"

namespace goro::rt {

std::size_t scavenge_stacks(std::size_t max) {
  // Take up to `max` Gs whose stacks still hold memory off the global free
  // list, release their pages outside the lock (madvise is a syscall), and
  // file them on the clean list. Per-P free lists are left alone: they are
  // small and hot. Bounded per call so sysmon never stalls on it.
  std::size_t released = 0;
  while (released < max) {
    G* batch[64];
    std::size_t n = 0;
    {
      lock_guard lk(sched.gfree.lock);
      while (n < 64 && released + n < max) {
        G* gp = sched.gfree.list.pop();
        if (gp == nullptr) break;
        batch[n++] = gp;
      }
      sched.gfree.publish();
    }
    if (n == 0) break;
    for (std::size_t i = 0; i < n; i++) {
      G* gp = batch[i];
      // Canary stacks keep their canary words in the (unprotected) guard
      // page, below lo: DONTNEED only [lo, hi).
      madvise(reinterpret_cast<void*>(gp->stk.lo), gp->stk.hi - gp->stk.lo,
              MADV_DONTNEED);
      gp->stack_scavenged = true;
    }
    released += n;
    lock_guard lk(sched.gfree.lock);
    for (std::size_t i = 0; i < n; i++) sched.gfree.clean.push(batch[i]);
    sched.gfree.publish();
  }
  return released;
}

}  // namespace goro::rt
