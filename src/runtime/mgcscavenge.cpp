// mgcscavenge.cpp: returning idle goroutine stacks' memory to the OS (the
// role of Go's scavenger in mgcscavenge.go, for stacks only). sysmon calls
// scavenge_stacks about once a second and while it keeps finding work.
#include <sys/mman.h>

#include <algorithm>

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
    // Neighbours in a chunk are released with one madvise: sorted by
    // address, a run of stacks whose mappings touch is one range. The guard
    // pages inside the range survive: MADV_DONTNEED keeps madvise guard
    // markers and cannot touch PROT_NONE pages. Canary stacks keep their
    // canary words in the (unprotected) guard page, below lo: they are
    // released alone, [lo, hi) only.
    std::sort(batch, batch + n,
              [](const G* a, const G* b) { return a->stk.lo < b->stk.lo; });
    for (std::size_t i = 0; i < n;) {
      std::uintptr_t lo = batch[i]->stk.lo, hi = batch[i]->stk.hi;
      std::size_t j = i + 1;
      if (batch[i]->stk.guard != guard_kind::canary) {
        while (j < n && batch[j]->stk.guard != guard_kind::canary &&
               reinterpret_cast<std::uintptr_t>(batch[j]->stk.map_base) == hi) {
          hi = batch[j]->stk.hi;
          j++;
        }
      }
      madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_DONTNEED);
      for (; i < j; i++) batch[i]->stack_scavenged = true;
    }
    released += n;
    lock_guard lk(sched.gfree.lock);
    for (std::size_t i = 0; i < n; i++) sched.gfree.clean.push(batch[i]);
    sched.gfree.publish();
  }
  return released;
}

}  // namespace goro::rt
