// runq.cpp: the local run queue.
//
// Memory orderings (as Go's runtime): the owner loads runqhead with acquire
// (so slots freed by consumers are really free before it overwrites them),
// writes a slot relaxed and publishes it with a release store of runqtail.
// Consumers load runqhead with acquire, thieves also load runqtail with
// acquire (pairing with the owner's release), read the slots, and claim them
// with a release CAS of runqhead. Slots are atomics read relaxed because a
// thief may read a slot speculatively while the owner rewrites it; the CAS
// fails in that case and the value is discarded.
#include "runtime/runq.hpp"

#include <unistd.h>

#include "runtime/globrunq.hpp"
#include "runtime/panic.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

constexpr std::memory_order acq = std::memory_order_acquire;
constexpr std::memory_order rel = std::memory_order_release;
constexpr std::memory_order rlx = std::memory_order_relaxed;

// Moves half of a full ring plus gp (129 Gs) to the global queue in one
// batch. Fails if a thief took some Gs meanwhile (the ring is not full).
bool runqputslow(P* pp, G* gp, std::uint32_t h, std::uint32_t t) {
  G* batch[runq_size / 2 + 1];
  std::uint32_t n = (t - h) / 2;
  if (n != runq_size / 2) fatal("runqputslow: queue is not full");
  for (std::uint32_t i = 0; i < n; i++)
    batch[i] = pp->runq[(h + i) % runq_size].load(rlx);
  if (!pp->runqhead.compare_exchange_strong(h, h + n, rel, rlx)) return false;
  batch[n] = gp;
  g_queue q;
  for (std::uint32_t i = 0; i <= n; i++) q.push_back(batch[i]);
  lock_guard lk(sched.lock);
  globrunqputbatch(&q);
  return true;
}

// Grabs half of pp's ring into batch[batchHead...] (Go's runqgrab).
std::uint32_t runqgrab(P* pp, std::atomic<G*>* batch, std::uint32_t batchHead,
                       bool stealRunNextG) {
  for (;;) {
    std::uint32_t h = pp->runqhead.load(acq);
    std::uint32_t t = pp->runqtail.load(acq);
    std::uint32_t n = t - h;
    n = n - n / 2;
    if (n == 0) {
      if (stealRunNextG) {
        G* next = pp->runnext.load(std::memory_order_seq_cst);
        if (next != nullptr) {
          // A running P very likely just readied `next` and is about to
          // block and run it itself; stealing it now would bounce the pair
          // between Ps. Back off ~3 us (a sync channel op is ~50 ns) first.
          if (pp->status.load(rlx) == p_running) usleep(3);
          if (!pp->runnext.compare_exchange_strong(next, nullptr)) continue;
          batch[batchHead % runq_size].store(next, rlx);
          return 1;
        }
      }
      return 0;
    }
    if (n > runq_size / 2) continue;  // inconsistent h and t; retry
    for (std::uint32_t i = 0; i < n; i++) {
      G* g = pp->runq[(h + i) % runq_size].load(rlx);
      batch[(batchHead + i) % runq_size].store(g, rlx);
    }
    if (pp->runqhead.compare_exchange_strong(h, h + n, rel, rlx)) return n;
  }
}

}  // namespace

void runqput(P* pp, G* gp, bool next) {
  if (next) {
    // Only thieves change runnext besides us, and only to null.
    G* old = pp->runnext.load(rlx);
    while (!pp->runnext.compare_exchange_weak(old, gp)) {
    }
    if (old == nullptr) return;
    gp = old;  // kick the old runnext out to the ring
  }
  for (;;) {
    std::uint32_t h = pp->runqhead.load(acq);
    std::uint32_t t = pp->runqtail.load(rlx);  // only we write it
    if (t - h < runq_size) {
      pp->runq[t % runq_size].store(gp, rlx);
      pp->runqtail.store(t + 1, rel);  // publishes the slot
      return;
    }
    if (runqputslow(pp, gp, h, t)) return;
    // the ring is no longer full; retry
  }
}

G* runqget(P* pp, bool* inherit_time) {
  // runnext first; it inherits the current time slice. If the CAS fails a
  // thief took it; no retry is needed.
  G* next = pp->runnext.load(rlx);
  if (next != nullptr && pp->runnext.compare_exchange_strong(next, nullptr)) {
    *inherit_time = true;
    return next;
  }
  for (;;) {
    std::uint32_t h = pp->runqhead.load(acq);
    std::uint32_t t = pp->runqtail.load(rlx);
    if (t == h) {
      *inherit_time = false;
      return nullptr;
    }
    G* gp = pp->runq[h % runq_size].load(rlx);
    if (pp->runqhead.compare_exchange_strong(h, h + 1, rel, rlx)) {
      *inherit_time = false;
      return gp;
    }
  }
}

G* runqsteal(P* pp, P* p2, bool steal_runnext) {
  std::uint32_t t = pp->runqtail.load(rlx);
  std::uint32_t n = runqgrab(p2, pp->runq, t, steal_runnext);
  if (n == 0) return nullptr;
  owner_add(pp->nstolen, n);
  n--;
  G* gp = pp->runq[(t + n) % runq_size].load(rlx);
  if (n == 0) return gp;
  std::uint32_t h = pp->runqhead.load(acq);
  if (t - h + n >= runq_size) fatal("runqsteal: runq overflow");
  pp->runqtail.store(t + n, rel);
  return gp;
}

bool runqempty(P* pp) {
  // runqput may kick runnext into the ring while runqget empties runnext;
  // reading head, tail, runnext and then tail again rules out reporting
  // empty in between.
  for (;;) {
    std::uint32_t head = pp->runqhead.load();
    std::uint32_t tail = pp->runqtail.load();
    G* runnext = pp->runnext.load();
    if (tail == pp->runqtail.load()) return head == tail && runnext == nullptr;
  }
}

std::uint32_t runqlen(P* pp) {
  std::uint32_t t = pp->runqtail.load(acq);
  std::uint32_t h = pp->runqhead.load(acq);
  return t - h;
}

}  // namespace goro::rt
