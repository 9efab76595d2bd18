// sched.hpp: the global scheduler state (Go's schedt and proc.go globals)
// and the scheduler's internal entry points.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/m.hpp"
#include "runtime/p.hpp"
#include "runtime/tls.hpp"

namespace goro {
struct options;
}

namespace goro::rt {

void schedinit(const goro::options* opt);

struct schedt {
  std::atomic<std::uint64_t> goidgen{0};
  // The global scheduler lock: idle lists, global run queue, M accounting.
  mutex lock{lock_rank::sched};

  M* midle = nullptr;  // idle Ms
  std::int32_t nmidle = 0;
  std::int32_t nmidlelocked = 0;
  std::int64_t mnext = 0;  // Ms created so far (and the next M id)
  std::int32_t maxmcount = 10000;
  std::int32_t nmsys = 0;  // system Ms (sysmon), not counted for deadlock
  std::int64_t nmfreed = 0;

  P* pidle = nullptr;  // idle Ps
  std::atomic<std::int32_t> npidle{0};
  std::atomic<std::int32_t> nmspinning{0};
  std::atomic<std::uint32_t> needspinning{0};

  // The global run queue; runqsize is also read without the lock.
  g_queue runq;
  std::atomic<std::int32_t> runqsize{0};

  // Global cache of dead Gs with stacks.
  struct {
    mutex lock{lock_rank::gfree};
    g_list list;   // stacks still holding memory (reused first: warm)
    g_list clean;  // stacks whose memory sysmon returned to the OS
    // list.size + clean.size, readable without the lock (gfget's peek).
    std::atomic<std::int32_t> n{0};
    void publish() {
      n.store(list.size + clean.size, std::memory_order_relaxed);
    }
    G* pop() {
      G* gp = list.pop();
      return gp ? gp : clean.pop();
    }
  } gfree;

  std::atomic<bool> gcwaiting{false};  // stop-the-world requested
  std::int32_t stopwait = 0;           // Ps still to stop (sched.lock)
  note stopnote;                       // the stopper sleeps here
  // run() calls in progress (a main goroutine exists); deadlock detection
  // is armed only then. main_goexited: a main goroutine called goexit.
  std::atomic<std::int32_t> main_active{0};
  std::atomic<bool> main_goexited{false};
  // Plain threads that used the runtime, and how many of them are blocked
  // in it now (a blocked plain thread counts like an idle M).
  std::atomic<std::int32_t> nextern{0};
  std::atomic<std::int32_t> nextern_blocked{0};
  // Time of the last netpoll; 0 while some M is blocked in netpoll (that
  // M is "the poller"). poll_until: when the poller will wake by itself.
  std::atomic<std::int64_t> last_poll{1};
  std::atomic<std::int64_t> poll_until{0};
  // Goroutines created from plain threads minus those accounted on Ps.
  std::atomic<std::int64_t> ngoroutines_extra{0};
};

extern schedt sched;

// A bit per P (Go's pMask).
struct pmask {
  std::atomic<std::uint32_t>* words = nullptr;
  bool read(std::uint32_t id) const {
    return (words[id / 32].load(std::memory_order_relaxed) >> (id % 32)) & 1;
  }
  void set(std::int32_t id) {
    words[id / 32].fetch_or(1u << (id % 32), std::memory_order_relaxed);
  }
  void clear(std::int32_t id) {
    words[id / 32].fetch_and(~(1u << (id % 32)), std::memory_order_relaxed);
  }
};

// allp[0..gomaxprocs) and friends. allp only grows; Ps are never freed.
extern P** allp;
extern std::atomic<std::int32_t> gomaxprocs_value;  // Go's gomaxprocs
extern pmask idlepmask;
extern pmask timerpmask;  // P may have timers
extern std::atomic<bool> runtime_started;
extern M* allm;

inline std::int32_t gomaxprocs_now() {
  return gomaxprocs_value.load(std::memory_order_relaxed);
}

// --- scheduler (schedule.cpp, findrunnable.cpp, mstart.cpp) ---
[[noreturn]] void schedule();
[[noreturn]] void execute(G* gp, bool inherit_time);
G* findrunnable(bool* inherit_time);
void wakep();
void startm(P* pp, bool spinning);
void stopm();
void acquirep(P* pp);
P* releasep();
void pidleput(P* pp);    // sched.lock held
P* pidleget();           // sched.lock held
P* pidleget_spinning();  // sched.lock held
void mput(M* mp);        // sched.lock held
M* mget();               // sched.lock held
void become_spinning(M* mp);
// Makes a list of ready goroutines runnable (Go's injectglist).
void injectglist(g_queue* list);
void resetspinning();
void newm(P* pp, bool spinning, std::int64_t id);
std::int64_t mreserve_id();  // sched.lock held
std::int32_t mcount();       // sched.lock held

// --- syscalls (syscall.cpp), stop-the-world (stw.cpp), locked threads
// (lockosthread.cpp), deadlock detection (checkdead.cpp) ---
void entersyscall();
void entersyscallblock();
void exitsyscall();
// exitsyscall's fast path: take oldp back if it is still in _Psyscall, else
// any idle P. False (and no P) when there is none or a stop-the-world is
// pending.
bool exitsyscall_takep(P* oldp);
void handoffp(P* pp);
// A goroutine that parks or yields inside a goro::blocking region leaves
// the syscall state for the switch and re-enters it after resuming.
struct syscall_suspend {
  bool active;
  explicit syscall_suspend(G* gp)
      : active(gp != nullptr && readgstatus(gp) == g_syscall) {
    if (active) exitsyscall();
  }
  ~syscall_suspend() {
    if (active) entersyscall();
  }
  syscall_suspend(const syscall_suspend&) = delete;
  syscall_suspend& operator=(const syscall_suspend&) = delete;
};
// A P reached _Pgcstop for a pending stop-the-world (sched.lock held).
void stw_p_stopped();
void gcstopm();
void stop_the_world();
void start_the_world(std::int32_t newprocs);
void stoplockedm();
void startlockedm(G* gp);
void incidlelocked(std::int32_t v);  // sched.lock held
void checkdead();                    // sched.lock held
// Plain-thread accounting for checkdead: a plain thread blocks in / leaves
// a runtime primitive.
// The waker calls extern_block_end, before waking the thread, so the
// thread never looks blocked after it was released.
void extern_block_begin();
void extern_block_end();
void note_extern_thread();
// A plain thread sleeps on n, counted as blocked in the runtime.
inline void thread_park(note& n) {
  extern_block_begin();
  n.sleep();
}
inline void thread_unpark(note& n) {
  extern_block_end();
  n.wakeup();
}

// --- goroutine switch (park.cpp) ---
// Switches from the running goroutine to the scheduler stack and calls
// fn(gp) there (Go's mcall). Returns when gp is resumed.
void mcall(void (*fn)(void*));
// mcall for a goroutine that will never resume (its stack is recycled).
void mcall_dying(void (*fn)(void*));
// Parks the running goroutine (Go's gopark). After the switch, on g0,
// unlockf(gp, lock) runs; if it returns false the goroutine resumes at once.
void gopark(bool (*unlockf)(G*, void*), void* lock, wait_reason reason);
// gopark that releases a runtime mutex after parking (goparkunlock).
void goparkunlock(mutex* lock, wait_reason reason);
// Detaches the running goroutine from its M (Go's dropg).
inline void dropg(M* mp, G* gp) {
  mp->curg.store(nullptr, std::memory_order_relaxed);
  gp->m = nullptr;
}
// On g0: requeue gp on the global queue and schedule (Go's goschedImpl,
// shared by gosched and preemption).
[[noreturn]] void gosched_m(void* gp);
// Makes a parked goroutine runnable in the waker's runnext (Go's goready).
void goready(G* gp);
// Yields to the tail of the local run queue (Go's goyield).
void goyield();
// Go's sync_runtime_canSpin / sync_runtime_doSpin for mutex spinning.
bool sync_runtime_canspin(int i);
void sync_runtime_dospin();
int usable_cpus_cached();
// Puts Gs readied without a P (plain threads) on the global queue.
void ready_noP(G* gp);

// --- global run queue (globrunq.cpp); sched.lock held ---
void globrunqput(G* gp);
void globrunqputbatch(g_queue* batch);
G* globrunqget(P* pp, std::int32_t max);

// --- G free lists (gfree.cpp) ---
G* gfget(P* pp);
void gfput(P* pp, G* gp);
// gfput, or the global list / unmap when there is no P (plain threads).
void gfput_or_free(P* pp, G* gp);

// --- start-up (proc.cpp) ---
// GORO_DEBUG settings (Go's GODEBUG for the scheduler).
struct debug_vars {
  int schedtrace = 0;  // ms between schedtrace lines; 0: off
  int scheddetail = 0;
};
extern debug_vars debug;
extern std::int64_t runtime_init_time;
void sysmon_start();
// Wakes sysmon from its all-idle deep sleep (called when work starts).
void sysmon_wake_if_waiting();
extern std::atomic<bool> sysmonwait;
void schedtrace(bool detailed);
int default_gomaxprocs();
int usable_cpus();
std::uint64_t newgoid(P* pp);

// Fatal error: prints "fatal error: msg" (Go's throw) and exits with 2.
[[noreturn]] void fatal(const char* msg);
[[noreturn]] void fatalf(const char* fmt, ...)
    __attribute__((format(printf, 1, 2)));

}  // namespace goro::rt
