// g.hpp: the goroutine (Go's g). Gs are allocated densely from slabs and
// never freed. A new G has no stack: it carries its callable and gets a
// stack when it first runs (lazy stack binding, newproc.cpp). Dead Gs keep
// their stack and are recycled through per-P and global free lists
// (gfree.cpp), which double as the stack cache; the Gs left without a
// stack when a stack moves to a new goroutine wait on the stackless lists.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "runtime/stack.hpp"

namespace goro::rt {

struct M;
struct P;
struct timer;

// Go's _G* status values; they keep Go's numbers so that schedtrace
// (scheddetail) prints what a Go programmer expects.
enum gstatus : std::uint32_t {
  g_idle = 0,
  g_runnable = 1,
  g_running = 2,
  g_syscall = 3,
  g_waiting = 4,
  g_dead = 6,
};

// Why a goroutine is parked (Go's waitReason); every park names one.
enum class wait_reason : std::uint8_t {
  zero,
  chan_receive_nil_chan,
  chan_send_nil_chan,
  select_no_cases,
  select,
  chan_receive,
  chan_send,
  sleep,
  io_wait,
  semacquire,
  sync_mutex_lock,
  sync_rwmutex_rlock,
  sync_rwmutex_lock,
  sync_wait_group_wait,
  sync_cond_wait,
  stopping_the_world,
  sync_once,
  context,
};
const char* wait_reason_string(wait_reason r);
const char* gstatus_string(std::uint32_t s);

// The C++ runtime's per-thread exception globals (libstdc++/libc++abi
// __cxa_eh_globals): the stack of caught exceptions and the uncaught count.
// Saved into the G when it switches out and restored on the thread that
// resumes it, so try/catch spans a park that moves the goroutine.
struct eh_state {
  void* caught = nullptr;
  unsigned int uncaught = 0;
};

struct G {
  // Saved stack pointer of a switched-out goroutine (Go's gobuf.sp). The
  // callee-saved registers, MXCSR and the x87 control word are on the stack.
  void* sched_sp = nullptr;
  // Go's atomicstatus. Transitions go through casgstatus.
  std::atomic<std::uint32_t> atomicstatus{g_dead};
  // Nesting depth of goro::blocking regions (only the outermost one does
  // entersyscall/exitsyscall). Here, beside the status, to fill its padding.
  std::uint32_t syscall_depth = 0;
  std::uint64_t goid = 0;
  // Intrusive link for run queues and free lists (Go's schedlink).
  G* schedlink = nullptr;
  M* m = nullptr;        // the M running it, when running
  M* lockedm = nullptr;  // the thread it is locked to (lock_os_thread)
  stack stk;             // usable stack [lo, hi) and its mapping
  // Why it is parked. Written by the G itself before each park (relaxed:
  // park_m's status CAS publishes it with the status); read by stats,
  // schedtrace and dumps on other threads, which may race with the G's
  // next park and so read it atomically too (relaxed: a stale reason is
  // fine for a snapshot, a torn or racy read is not).
  std::atomic<wait_reason> waitreason{wait_reason::zero};
  // Asked to yield at the next safe point (set by sysmon, read by the G).
  std::atomic<bool> preempt{false};
  // goro::preempt_guard nesting: > 0 forbids async preemption (read by the
  // preemption signal handler on the G's own thread).
  std::atomic<std::int32_t> preempt_off{0};
  // lockedm was set by an async preemption (not lock_os_thread), for one
  // resumption: cleared when the G resumes on that thread.
  bool async_pinned = false;
  bool goexiting = false;      // goexit's forced unwinding is in progress
  bool goexit_caught = false;  // the goroutine entry consumed it
  // The stack's pages were returned to the OS while the G sat in the global
  // free list (sysmon); cleared when a goroutine uses it again.
  bool stack_scavenged = false;
  // OS locks (pthread mutexes, rwlocks, spin locks) this goroutine holds,
  // counted by libgoro's pthread wrappers (oslock.cpp). > 0 forbids async
  // preemption: the handler defers it to the unlock that brings it to 0.
  // Fills the padding after the flags above.
  std::atomic<std::int32_t> oslocks{0};
  // The goroutine's function: entry(arg) runs and destroys the callable,
  // which lives in fn_inline when it fits, else in fn_heap.
  void (*entry)(void*) = nullptr;
  void* arg = nullptr;
  void* fn_heap = nullptr;
  eh_state eh;
  std::uint64_t parent_goid = 0;
  // Where it was spawned: a return address in the function that called
  // goro::go (Go's gopc), for "created by" in goroutine dumps.
  void* gopc = nullptr;
  // The function the program gave goro::go (or goro::run): a lambda's
  // operator() or the function pointer (Go's startpc), null when goro::go
  // cannot name one (generic lambdas, overloaded call operators). Dumps
  // show it when the unwound frames lack it (it left by a tail call).
  const void* startpc = nullptr;
  // goro::sleep's timer, created on first use (Go's gp.timer).
  timer* sleep_timer = nullptr;
  // Every G ever created, for dumps and counting (Go's allgs).
  G* alllink = nullptr;
  // Sanitizer fiber state (only used in sanitizer builds; ASan and TSan
  // never share a build, so they share the word).
  union {
    void* asan_fake_stack = nullptr;
    void* tsan_fiber;
  };
  unsigned tsan_uses = 0;
  // Alignment of a heap-allocated callable (fn_heap); here to share the
  // word with tsan_uses.
  std::uint32_t fn_heap_align = 0;
  // When it last parked, in seconds of the coarse clock (coarseclock.hpp;
  // Go's waitsince): dumps print ", N minutes" after a minute's wait.
  // Written by gopark on the G's own thread, read racily by dumps.
  std::atomic<std::int64_t> waitsince{0};
  // Whether the memory of this parked goroutine's stack is released
  // (stackshrink.cpp): 0 resident; stack_releasing while sysmon takes it
  // away; else the saved live bytes' buffer, tagged stack_released or
  // stack_restoring in its low bits. execute restores it before the
  // goroutine runs (stack_restore).
  std::atomic<std::uintptr_t> stk_saved{0};
  // Inline storage for the callable: a lambda capturing up to five words or
  // go(f, args...) with a few arguments; larger ones go to the heap.
  static constexpr std::size_t fn_inline_size = 48;
  alignas(16) unsigned char fn_inline[fn_inline_size];
};
// Four Gs to a 1 KiB run of cache lines (stack.cpp allocates them rounded
// to 64 bytes): a field that does not fit the padding costs 25% more.
static_assert(sizeof(G) <= 256, "G grew past 256 bytes");

// Intrusive FIFO of Gs (Go's gQueue).
struct g_queue {
  G* head = nullptr;
  G* tail = nullptr;
  std::int32_t size = 0;
  bool empty() const { return head == nullptr; }
  void push_back(G* gp) {
    gp->schedlink = nullptr;
    if (tail)
      tail->schedlink = gp;
    else
      head = gp;
    tail = gp;
    size++;
  }
  void push_front(G* gp) {
    gp->schedlink = head;
    head = gp;
    if (!tail) tail = gp;
    size++;
  }
  G* pop() {
    G* gp = head;
    if (gp) {
      head = gp->schedlink;
      if (!head) tail = nullptr;
      size--;
    }
    return gp;
  }
};

// Intrusive LIFO of Gs (Go's gList).
struct g_list {
  G* head = nullptr;
  std::int32_t size = 0;
  bool empty() const { return head == nullptr; }
  void push(G* gp) {
    gp->schedlink = head;
    head = gp;
    size++;
  }
  G* pop() {
    G* gp = head;
    if (gp) {
      head = gp->schedlink;
      size--;
    }
    return gp;
  }
};

[[noreturn]] void badgstatus(G* gp, std::uint32_t old, std::uint32_t from,
                             std::uint32_t to);

// Status transition; fatal if the current status is not `from`.
//
// Go needs a CAS here because the garbage collector takes the _Gscan bit
// concurrently. goro has no collector, and every transition is made by the
// goroutine's exclusive owner of the moment: the M running it
// (running -> waiting/runnable/dead), the M that dequeued it from a run
// queue (runnable -> running), or the waker that removed it from a wait
// queue under that queue's lock (waiting -> runnable). So a checked load and
// a release store suffice (the release pairs with the acquire in
// readgstatus and with the run-queue hand-off), saving two locked
// instructions per switch.
inline void casgstatus(G* gp, std::uint32_t from, std::uint32_t to) {
  std::uint32_t old = gp->atomicstatus.load(std::memory_order_relaxed);
  if (__builtin_expect(old != from, 0)) badgstatus(gp, old, from, to);
  gp->atomicstatus.store(to, std::memory_order_release);
}
inline std::uint32_t readgstatus(const G* gp) {
  return gp->atomicstatus.load(std::memory_order_acquire);
}

// Registers a newly created G in allgs.
void allgadd(G* gp);
// The newest G: every G ever created until now is reachable from it
// through alllink without a lock (Gs are only ever prepended, never freed).
G* allgs_snapshot();
// Calls fn for every G ever created (under the allgs lock).
void forallg(void (*fn)(G*, void*), void* ctx);

}  // namespace goro::rt
