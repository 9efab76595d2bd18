// findrunnable.cpp: find a goroutine to run, in Go's order (proc.go
// findRunnable): fairness poll of the global queue, local queue, global
// queue, (netpoll), stealing, then give up the P, re-check, and sleep.
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/steal.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

void become_spinning(M* mp) {
  mp->spinning = true;
  sched.nmspinning.fetch_add(1);
  sched.needspinning.store(0);
}

G* findrunnable(bool* inherit_time) {
  M* mp = getm();
top:
  P* pp = mp->p;
  *inherit_time = false;
  // (stop-the-world: gcstopm here, once goro has STW)
  // (timers: run this P's expired timers here, once goro has timers)

  // Fairness: every 61st time slice look at the global queue first, so
  // two goroutines that keep readying each other through runnext cannot
  // starve it.
  if (pp->schedtick.load(std::memory_order_relaxed) % 61 == 0 &&
      sched.runqsize.load(std::memory_order_relaxed) > 0) {
    lock_guard lk(sched.lock);
    if (G* gp = globrunqget(pp, 1)) return gp;
  }

  // Local run queue (the only source that can inherit the time slice).
  if (G* gp = runqget(pp, inherit_time)) return gp;

  // Global run queue.
  if (sched.runqsize.load(std::memory_order_relaxed) != 0) {
    lock_guard lk(sched.lock);
    if (G* gp = globrunqget(pp, 0)) return gp;
  }

  // (non-blocking netpoll here, once goro has the network poller)

  // Steal, but limit the number of spinning Ms to half the busy Ps:
  // with low parallelism, more spinners only burn CPU.
  if (mp->spinning ||
      2 * sched.nmspinning.load() < nprocs() - sched.npidle.load()) {
    if (!mp->spinning) become_spinning(mp);
    bool new_work = false;
    if (G* gp = stealwork(pp, &new_work)) return gp;
    if (new_work) goto top;
  }

  // Nothing found: prepare to give up the P. Snapshot allp first; it can
  // change once we no longer hold a P.
  {
    std::int32_t n = nprocs();
    P** allp_snapshot = allp;
    sched.lock.lock();
    if (sched.gcwaiting.load(std::memory_order_relaxed)) {
      sched.lock.unlock();
      goto top;
    }
    if (sched.runq.size != 0) {
      G* gp = globrunqget(pp, 0);
      sched.lock.unlock();
      return gp;
    }
    if (!mp->spinning && sched.needspinning.load() == 1) {
      // A spinner found work but no idle P for it (see below); become a
      // spinner ourselves instead of going idle.
      become_spinning(mp);
      sched.lock.unlock();
      goto top;
    }
    if (releasep() != pp) fatal("findrunnable: wrong p");
    pidleput(pp);
    sched.lock.unlock();

    // Spinning -> non-spinning. Decrement nmspinning, then (after the
    // seq_cst RMW, our #StoreLoad) re-check every source of work: a
    // submitter publishes work, then reads nmspinning (wakep); either it
    // sees no spinner and wakes someone, or we see its work here. (As in
    // Go, a local-runq submitter has no fence of its own: at worst its
    // work waits for its own P, it is never lost.)
    bool was_spinning = mp->spinning;
    if (was_spinning) {
      mp->spinning = false;
      if (sched.nmspinning.fetch_sub(1) - 1 < 0)
        fatal("findrunnable: negative nmspinning");

      // Global queue.
      sched.lock.lock();
      if (sched.runq.size != 0) {
        if (P* p2 = pidleget_spinning()) {
          G* gp = globrunqget(p2, 0);
          sched.lock.unlock();
          if (gp == nullptr) fatal("findrunnable: global runq empty with non-zero runqsize");
          acquirep(p2);
          become_spinning(mp);
          return gp;
        }
      }
      sched.lock.unlock();

      // Other Ps' local queues.
      if (P* p2 = check_runqs_noP(allp_snapshot, n)) {
        acquirep(p2);
        become_spinning(mp);
        goto top;
      }
      // (timers of all Ps here, once goro has timers)
    }
    // (blocking netpoll until the next timer here, once goro has netpoll)
    stopm();
    goto top;
  }
}

}  // namespace goro::rt
