// newproc.cpp: creating goroutines (Go's newproc/newproc1) and goids.
#include <goro/runtime.hpp>
#include <stdexcept>

#include "runtime/context.hpp"
#include "runtime/gfree.hpp"
#include "runtime/globrunq.hpp"
#include "runtime/mstart.hpp"
#include "runtime/preempt.hpp"
#include "runtime/proc.hpp"
#include "runtime/runq.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {
constexpr std::uint64_t goid_batch = 16;  // Go's _GoidCacheBatch
// The callable may use at most this share of the stack.
constexpr std::size_t max_closure_fraction = 4;
}  // namespace

std::uint64_t newgoid(P* pp) {
  if (pp == nullptr) return sched.goidgen.fetch_add(1) + 1;
  if (pp->goidcache == pp->goidcacheend) {
    // goids are handed out to Ps in batches so that creating a goroutine
    // touches no shared cache line. The first goroutine gets goid 1.
    pp->goidcache = sched.goidgen.fetch_add(goid_batch);
    pp->goidcacheend = pp->goidcache + goid_batch;
    pp->goidcache++;
  }
  return pp->goidcache++;
}

}  // namespace goro::rt

namespace goro::detail {

spawn_slot newproc_prepare(std::size_t stack_size, std::size_t size,
                           std::size_t align) {
  using namespace rt;
  if (!runtime_started.load(std::memory_order_acquire)) ensure_started(nullptr);
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  G* gp = nullptr;
  if (stack_size == 0 || stack_size == default_stack_size()) {
    gp = gfget(pp);
    if (gp == nullptr) gp = malg(0);
  } else {
    gp = malg(stack_size);
  }
  san_reuse_stack(gp);
  gp->stack_scavenged = false;
  std::uintptr_t top = gp->stk.hi;
  std::uintptr_t storage = (top - size) & ~(std::uintptr_t(align) - 1);
  if (size > (gp->stk.hi - gp->stk.lo) / max_closure_fraction) {
    gfput_or_free(pp, gp);
    throw std::length_error(
        "goro::go: the goroutine's callable and arguments are too large for "
        "its stack");
  }
  return spawn_slot{gp, reinterpret_cast<void*>(storage)};
}

void newproc_commit(spawn_slot slot, void (*entry)(void*)) {
  using namespace rt;
  G* gp = static_cast<G*>(slot.g);
  gp->entry = entry;
  gp->arg = slot.storage;
  // The goroutine's frames start below its callable, 16-byte aligned.
  std::uintptr_t top =
      reinterpret_cast<std::uintptr_t>(slot.storage) & ~std::uintptr_t(15);
  prepare_stack(gp, top);
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  G* parent = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr;
  gp->parent_goid = parent ? parent->goid : 0;
  gp->goid = newgoid(pp);
  gp->waitreason = wait_reason::zero;
  casgstatus(gp, g_dead, g_runnable);
  if (pp != nullptr) {
    owner_add(pp->ngoroutines, 1);
    // A new goroutine goes to runnext: it runs next on this P, and what
    // was in runnext is kicked to the tail (Go's newproc).
    runqput(pp, gp, true);
  } else {
    // From a plain thread: the global queue.
    sched.ngoroutines_extra.fetch_add(1, std::memory_order_relaxed);
    lock_guard lk(sched.lock);
    globrunqput(gp);
  }
  wakep();
  // A runtime entry: honour a pending preemption request.
  if (parent != nullptr && parent->preempt.load(std::memory_order_relaxed))
    gopreempt();
}

void newproc_abort(spawn_slot slot) noexcept {
  using namespace rt;
  M* mp = getm();
  gfput_or_free(mp ? mp->p : nullptr, static_cast<G*>(slot.g));
}

}  // namespace goro::detail
