// gfree.cpp: dead Gs (with their stacks) are cached per P and globally
// for reuse (Go's gfput/gfget): a local list of up to 64 spills down to 32
// into the global list; an empty local list refills up to 32 from it.
#include "runtime/gfree.hpp"

#include "runtime/panic.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

void gfput(P* pp, G* gp) {
  if (readgstatus(gp) != g_dead) fatal("gfput: bad status (not Gdead)");
  if (!gp->stk.chunked) {
    // A stack of non-default size is not cached (Go frees those too).
    stackfree(gp);
    return;
  }
  pp->gfree.push(gp);
  if (pp->gfree.size >= 64) {
    lock_guard lk(sched.gfree.lock);
    while (pp->gfree.size >= 32) sched.gfree.list.push(pp->gfree.pop());
    sched.gfree.publish();
  }
}

G* gfget(P* pp) {
  if (pp == nullptr) {
    lock_guard lk(sched.gfree.lock);
    G* gp = sched.gfree.pop();
    sched.gfree.publish();
    return gp;
  }
  if (pp->gfree.empty() && sched.gfree.n.load(std::memory_order_relaxed) > 0) {
    lock_guard lk(sched.gfree.lock);
    while (pp->gfree.size < 32) {
      G* gp = sched.gfree.pop();
      if (gp == nullptr) break;
      pp->gfree.push(gp);
    }
    sched.gfree.publish();
  }
  return pp->gfree.pop();
}

}  // namespace goro::rt

namespace goro::rt {

void gfput_or_free(P* pp, G* gp) {
  if (pp != nullptr) {
    gfput(pp, gp);
  } else if (gp->stk.chunked) {
    lock_guard lk(sched.gfree.lock);
    sched.gfree.list.push(gp);
    sched.gfree.publish();
  } else {
    stackfree(gp);
  }
}

G* gfget_nostack(P* pp) {
  if (pp == nullptr) return galloc();
  if (pp->gnostack.empty()) gnostack_refill(&pp->gnostack, 32);
  return pp->gnostack.pop();
}

void gfput_nostack(P* pp, G* gp) {
  if (pp == nullptr) {
    gnostack_put(gp);
    return;
  }
  pp->gnostack.push(gp);
  if (pp->gnostack.size >= 64) gnostack_spill(&pp->gnostack, 32);
}

}  // namespace goro::rt
