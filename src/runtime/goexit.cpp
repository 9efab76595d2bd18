// goexit.cpp: how a goroutine starts and ends: goro_gentry (the first C++
// frame), normal return, goro::goexit (forced unwinding, Go's Goexit) and
// an exception escaping the goroutine (Go's panic: print and exit 2).
#include <pthread.h>
#include <unistd.h>
#include <unwind.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <stdexcept>
#include <string>

#include "runtime/checkdead.hpp"
#include "runtime/context.hpp"
#include "runtime/gfree.hpp"
#include "runtime/mstart.hpp"
#include "runtime/newproc.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/san.hpp"
#include "runtime/sched.hpp"
#include "runtime/schedule.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

// "GOROEXIT": the exception class of goexit's forced unwinding.
constexpr _Unwind_Exception_Class goexit_class = 0x474f524f45584954ULL;

[[noreturn]] void mexit(M* mp);

// On g0: the goroutine is finished (Go's goexit0 / gdestroy).
void goexit0(void* arg) {
  G* gp = static_cast<G*>(arg);
  M* mp = getm();
  san_enter_g0(mp);
  P* pp = mp->p;
  casgstatus(gp, g_running, g_dead);
  trace_go_end(pp, gp);
  owner_add(pp->ngoroutines, -1);
  dropg(mp, gp);
  gp->entry = nullptr;
  gp->arg = nullptr;
  gfree_callable(gp);
  gp->preempt.store(false, std::memory_order_relaxed);
  gp->goexiting = false;
  gp->goexit_caught = false;
  // Locks it never released (a bug in the program) are not the next
  // goroutine's.
  gp->oslocks.store(0, std::memory_order_relaxed);
  gp->waitreason.store(wait_reason::zero, std::memory_order_relaxed);
  gp->eh = eh_state{};
  // A goroutine that exits while locked to its thread takes the thread
  // with it: it may have left the thread in a state others must not see.
  bool locked = gp->lockedm != nullptr;
  gp->lockedm = nullptr;
  mp->lockedg = nullptr;
  mp->locked_ext = 0;
  gfput(pp, gp);
  if (locked) mexit(mp);
  schedule();
}

// The thread ends: its P goes to someone else, the M is retired.
[[noreturn]] void mexit(M* mp) {
  handoffp(releasep());
  {
    lock_guard lk(sched.lock);
    sched.nmfreed++;
    mp->dead = true;
    checkdead();
  }
#ifdef GORO_HAVE_TSAN
  // Leave g0's replacement fiber for the thread's own before it exits.
  __tsan_switch_to_fiber(mp->tsan_g0_fiber, 0);
#endif
  pthread_exit(nullptr);
}

[[noreturn]] void goexit1() {
  mcall_dying(goexit0);
  __builtin_unreachable();
}

_Unwind_Reason_Code goexit_stop(int, _Unwind_Action actions,
                                _Unwind_Exception_Class, _Unwind_Exception*,
                                struct _Unwind_Context*, void*) {
  if (actions & _UA_END_OF_STACK)
    fatal("goexit: unwinding passed the goroutine's first frame");
  return _URC_NO_REASON;
}

void goexit_cleanup(_Unwind_Reason_Code, _Unwind_Exception* exc) {
  G* gp = getg();
  bool consumed = gp != nullptr && gp->goexit_caught;
  delete exc;
  if (!consumed)
    fatal(
        "goro::goexit: a catch(...) block swallowed the goroutine's "
        "unwinding; it must rethrow (throw;)");
}

}  // namespace

bool goexit_landed(G* gp, _Unwind_Exception* exc) {
  if (!gp->goexiting || exc->exception_class != goexit_class) return false;
  // goexit's forced unwinding reached the goroutine's first frame: it
  // consumed it (goexit_cleanup, run by the delete, checks that).
  gp->goexit_caught = true;
  _Unwind_DeleteException(exc);
  goexit1();
}

}  // namespace goro::rt

extern "C" void goro_gcall(void (*fn)(void*), void* arg);

extern "C" [[noreturn]] void goro_gentry(goro::rt::G* gp) {
  using namespace goro::rt;
  san_enter_g(gp, true);
  // An exception, or goexit's unwinding, never comes out of goro_gcall: it
  // lands in goro_gcall_landed (panic.cpp).
  goro_gcall(gp->entry, gp->arg);
  goexit1();
}

namespace goro {

void goexit() {
  using namespace rt;
  G* gp = getg();
  if (gp == nullptr)
    throw std::logic_error("goro::goexit called outside a goroutine");
  gp->goexiting = true;
  // Forced unwinding, as thread cancellation does: destructors run, a
  // catch(...) sees it and must rethrow, and goro_gcall_landed ends it.
  auto* exc = new _Unwind_Exception;
  std::memset(exc, 0, sizeof *exc);
  exc->exception_class = goexit_class;
  exc->exception_cleanup = goexit_cleanup;
  _Unwind_ForcedUnwind(exc, goexit_stop, nullptr);
  fatal("goexit: forced unwinding failed");
}

}  // namespace goro
