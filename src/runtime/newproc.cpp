// newproc.cpp: creating goroutines (Go's newproc/newproc1), goids, and
// lazy stack binding.
//
// A new goroutine is a G and its callable, nothing more: the callable is
// constructed in the G (inline when it fits, else on the heap) and the G
// is queued without a stack (sched_sp null). execute gives it a stack
// just before it first runs (stack_bind): the dead G this P freed last,
// whose stack is still warm in cache and TLB, hands its stack over and
// becomes a stackless G itself. So a million queued goroutines cost a
// million Gs and no stack pages, and a spawn-run-exit cycle reuses one hot
// stack without taking a lock. Invariants:
//  - sched_sp == nullptr exactly while a runnable G has never run; such a
//    G has no stack (stk.lo == 0), unless it was spawned with its own
//    stack size (go_options::stack_size), which is bound at spawn.
//  - a dead G on a gfree list always has a stack; a G on a gnostack list
//    never has one.
#include "runtime/newproc.hpp"

#include <goro/runtime.hpp>
#include <new>
#include <utility>

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
    gp = gfget_nostack(pp);  // the stack comes when it first runs
  } else {
    gp = malg(stack_size);  // a size of its own: bound now
  }
  void* storage = gp->fn_inline;
  if (size > G::fn_inline_size || align > 16) {
    try {
      storage = ::operator new(size, std::align_val_t(align));
    } catch (...) {
      newproc_abort(spawn_slot{gp, nullptr});
      throw;
    }
    gp->fn_heap = storage;
    gp->fn_heap_align = static_cast<std::uint32_t>(align);
  }
  return spawn_slot{gp, storage};
}

void newproc_commit(spawn_slot slot, void (*entry)(void*),
                    const void* startpc) {
  using namespace rt;
  plain_thread_entry();
  G* gp = static_cast<G*>(slot.g);
  gp->entry = entry;
  gp->startpc = startpc;
  gp->arg = slot.storage;
  if (gp->stk.lo != 0) {
    san_reuse_stack(gp);
    prepare_stack(gp, gp->stk.hi);
  } else {
    gp->sched_sp = nullptr;  // stack_bind gives it one when it first runs
  }
  M* mp = getm();
  P* pp = mp ? mp->p : nullptr;
  G* parent = mp ? mp->curg.load(std::memory_order_relaxed) : nullptr;
  gp->parent_goid = parent ? parent->goid : 0;
  // The caller: goro::go, usually inlined into the user's function.
  gp->gopc = __builtin_return_address(0);
  // Atomic (a plain mov on x86): sysmon's long-running report reads the
  // goid of a G another thread may be reusing right now.
  __atomic_store_n(&gp->goid, newgoid(pp), __ATOMIC_RELAXED);
  gp->waitreason.store(wait_reason::zero, std::memory_order_relaxed);
  casgstatus(gp, g_dead, g_runnable);
  trace_go_create(pp, gp, parent);
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
  P* pp = mp ? mp->p : nullptr;
  G* gp = static_cast<G*>(slot.g);
  gfree_callable(gp);
  if (gp->stk.lo != 0)
    gfput_or_free(pp, gp);
  else
    gfput_nostack(pp, gp);
}

}  // namespace goro::detail

namespace goro::rt {

void gfree_callable(G* gp) {
  if (gp->fn_heap != nullptr) {
    ::operator delete(gp->fn_heap, std::align_val_t(gp->fn_heap_align));
    gp->fn_heap = nullptr;
  }
}

void stack_bind(P* pp, G* gp) {
  if (G* donor = gfget(pp)) {
    // Take over the stack of the goroutine that died last on this P.
    gp->stk = donor->stk;
    gp->stack_scavenged = false;
    donor->stk = stack{};
    // The sanitizer fiber travels with the stack, so fibers stay as many as
    // stacks (TSan counts each one as a thread, up to 8128).
#ifdef GORO_HAVE_TSAN
    std::swap(gp->tsan_fiber, donor->tsan_fiber);
    std::swap(gp->tsan_uses, donor->tsan_uses);
#endif
    gfput_nostack(pp, donor);
  } else {
    gp->stk = stackalloc();
  }
  san_reuse_stack(gp);
  prepare_stack(gp, gp->stk.hi);
}

}  // namespace goro::rt
