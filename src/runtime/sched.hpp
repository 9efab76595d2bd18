// sched.hpp: the global scheduler state (Go's schedt and proc.go globals:
// allp, the P masks, allm). The scheduler's entry points live in a header
// per mechanism: schedule.hpp (schedule, findrunnable), mstart.hpp (Ms and
// idle Ps), park.hpp (gopark, goready), syscall.hpp, stw.hpp,
// lockosthread.hpp, checkdead.hpp, globrunq.hpp, gfree.hpp, sysmon.hpp,
// proc.hpp (start-up and configuration) and panic.hpp (fatal errors).
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/m.hpp"
#include "runtime/p.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

// Fields are grouped by who writes them, a cache line per group, so that
// the lock-free readers on hot paths (wakep reads nmspinning/npidle on
// every goready; findrunnable reads runqsize and gcwaiting) do not miss
// whenever someone takes sched.lock or hands out goids.
struct schedt {
  // goid batches (Go's goidgen): an RMW per 16 goroutines per P.
  alignas(64) std::atomic<std::uint64_t> goidgen{0};
  // The global scheduler lock and what only it protects: idle lists and M
  // accounting.
  alignas(64) mutex lock{lock_rank::sched};

  M* midle = nullptr;  // idle Ms
  std::int32_t nmidle = 0;
  std::int32_t nmidlelocked = 0;
  std::int64_t mnext = 0;  // Ms created so far (and the next M id)
  std::int32_t maxmcount = 10000;
  std::int32_t nmsys = 0;  // system Ms (sysmon), not counted for deadlock
  std::int64_t nmfreed = 0;

  P* pidle = nullptr;         // idle Ps
  std::int32_t stopwait = 0;  // Ps still to stop (stop-the-world)

  // The spinning protocol's counters: read on every wakep, written when Ps
  // go idle or Ms start and stop spinning.
  alignas(64) std::atomic<std::int32_t> npidle{0};
  std::atomic<std::int32_t> nmspinning{0};
  std::atomic<std::uint32_t> needspinning{0};

  // The global run queue (sched.lock); runqsize is also read without it.
  alignas(64) g_queue runq;
  std::atomic<std::int32_t> runqsize{0};

  // Global cache of dead Gs with stacks, under its own lock.
  alignas(64) struct {
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

  // Read-mostly state.
  alignas(64) std::atomic<bool> gcwaiting{false};  // stop-the-world requested
  note stopnote;                                   // the stopper sleeps here
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
  alignas(64) std::atomic<std::int64_t> last_poll{1};
  std::atomic<std::int64_t> poll_until{0};
  // Goroutines created from plain threads minus those accounted on Ps.
  std::atomic<std::int64_t> ngoroutines_extra{0};
  // The coarse clock (coarseclock.hpp): read by every gopark, written at
  // most once a second.
  alignas(64) std::atomic<std::int64_t> coarse_s{0};
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

// Acquire (a plain load on x86): procresize fills allp[old..new) before
// its store of the new count, and threads that do not stop with the world
// (sysmon's retake and trace tick, stats, schedtrace) read allp[i] for i
// below the count they load.
inline std::int32_t gomaxprocs_now() {
  return gomaxprocs_value.load(std::memory_order_acquire);
}

}  // namespace goro::rt
