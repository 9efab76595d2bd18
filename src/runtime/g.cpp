// g.cpp: goroutine status transitions, allgs and names for diagnostics.
#include "runtime/g.hpp"

#include <cstdio>

#include "runtime/lock.hpp"
#include "runtime/panic.hpp"

namespace goro::rt {

namespace {
mutex allglock{lock_rank::allg};
}  // namespace

// Head of allgs, newest first through G.alllink. Defined in debuginfo.cpp,
// beside the table debuggers read it through, so that any program that
// creates goroutines links that table too (even from libgoro.a).
extern G* allgs;

void badgstatus(G* gp, std::uint32_t old, std::uint32_t from,
                std::uint32_t to) {
  fatalf("casgstatus: goroutine %llu: bad status %s (%u), expected %s -> %s",
         static_cast<unsigned long long>(gp->goid), gstatus_string(old), old,
         gstatus_string(from), gstatus_string(to));
}

void allgadd(G* gp) {
  lock_guard lk(allglock);
  gp->alllink = allgs;
  allgs = gp;
}

G* allgs_snapshot() {
  lock_guard lk(allglock);
  return allgs;
}

void forallg(void (*fn)(G*, void*), void* ctx) {
  lock_guard lk(allglock);
  for (G* gp = allgs; gp; gp = gp->alllink) fn(gp, ctx);
}

const char* gstatus_string(std::uint32_t s) {
  switch (s) {
    case g_idle:
      return "idle";
    case g_runnable:
      return "runnable";
    case g_running:
      return "running";
    case g_syscall:
      return "syscall";
    case g_waiting:
      return "waiting";
    case g_dead:
      return "dead";
    default:
      return "???";
  }
}

const char* wait_reason_string(wait_reason r) {
  switch (r) {
    case wait_reason::zero:
      return "";
    case wait_reason::chan_receive_nil_chan:
      return "chan receive (nil chan)";
    case wait_reason::chan_send_nil_chan:
      return "chan send (nil chan)";
    case wait_reason::select_no_cases:
      return "select (no cases)";
    case wait_reason::select:
      return "select";
    case wait_reason::chan_receive:
      return "chan receive";
    case wait_reason::chan_send:
      return "chan send";
    case wait_reason::sleep:
      return "sleep";
    case wait_reason::io_wait:
      return "IO wait";
    case wait_reason::semacquire:
      return "semacquire";
    case wait_reason::sync_mutex_lock:
      return "sync.Mutex.Lock";
    case wait_reason::sync_rwmutex_rlock:
      return "sync.RWMutex.RLock";
    case wait_reason::sync_rwmutex_lock:
      return "sync.RWMutex.Lock";
    case wait_reason::sync_wait_group_wait:
      return "sync.WaitGroup.Wait";
    case wait_reason::sync_cond_wait:
      return "sync.Cond.Wait";
    case wait_reason::stopping_the_world:
      return "stopping the world";
    case wait_reason::sync_once:
      return "sync.Once.Do";
    case wait_reason::context:
      return "context";
  }
  return "???";
}

}  // namespace goro::rt
