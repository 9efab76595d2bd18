// select.cpp: Go's selectgo.
//
// 1. A random poll order over the non-nil cases (fairness) and a lock order
//    by channel address (deadlock freedom; a channel that appears twice is
//    locked once).
// 2. Pass 1, with every channel locked: take the first case in poll order
//    that can proceed now. This acts on one snapshot, so a select never
//    takes its default while a case is ready.
// 3. Pass 2: queue a waiter on every channel and park.
// 4. Pass 3, after the wake-up: the waker recorded which waiter it
//    completed; dequeue all the others.
#include <algorithm>
#include <memory>
#include <new>

#include "chan/hchan.hpp"
#include "runtime/checkdead.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/tls.hpp"

namespace goro::detail {

namespace {

std::uint32_t select_rand() {
  if (rt::M* mp = rt::getm()) return mp->cheaprand();
  thread_local std::uint64_t state =
      0x9E3779B97F4A7C15ULL ^ reinterpret_cast<std::uintptr_t>(&state);
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return std::uint32_t(state >> 32);
}

struct locked_set {
  scase* cases;
  const std::uint16_t* lockorder;
  int n;

  void lock() const {
    for (int i = 0; i < n; i++) {
      hchan* c = cases[lockorder[i]].c;
      if (i > 0 && c == cases[lockorder[i - 1]].c) continue;
      c->lock.lock();
    }
  }
  void unlock() const {
    for (int i = n - 1; i >= 0; i--) {
      hchan* c = cases[lockorder[i]].c;
      if (i > 0 && c == cases[lockorder[i - 1]].c) continue;
      c->lock.unlock();
    }
  }
};

bool selparkcommit(rt::G*, void* arg) {
  static_cast<const locked_set*>(arg)->unlock();
  return true;
}

}  // namespace

int selectgo(scase* cases, int ncases, bool block, bool* recv_ok) {
  *recv_ok = false;
  rt::runtime_entry();

  constexpr int small = 8;
  std::uint16_t small_order[2 * small];
  std::unique_ptr<std::uint16_t[]> big_order;
  std::uint16_t* pollorder = small_order;
  if (ncases > small) {
    big_order.reset(new std::uint16_t[2 * std::size_t(ncases)]);
    pollorder = big_order.get();
  }
  std::uint16_t* lockorder = pollorder + std::max(ncases, small);

  // Random poll order over the cases with a channel (inside-out shuffle).
  int norder = 0;
  for (int i = 0; i < ncases; i++) {
    if (cases[i].c == nullptr) continue;  // nil channel: never ready
    int j = int(select_rand() % std::uint32_t(norder + 1));
    pollorder[norder] = pollorder[j];
    pollorder[j] = std::uint16_t(i);
    norder++;
  }
  std::copy(pollorder, pollorder + norder, lockorder);
  std::sort(lockorder, lockorder + norder,
            [cases](std::uint16_t a, std::uint16_t b) {
              return std::less<hchan*>()(cases[a].c, cases[b].c);
            });

  locked_set locks{cases, lockorder, norder};
  locks.lock();

  // Pass 1: is some case ready now?
  for (int k = 0; k < norder; k++) {
    int i = pollorder[k];
    scase& cs = cases[i];
    hchan* c = cs.c;
    if (cs.send) {
      if (c->closed.load(std::memory_order_relaxed)) {
        locks.unlock();
        throw channel_error("send on closed channel");
      }
      if (rt::sudog* sg = c->recvq.dequeue()) {
        complete_send(c, sg, cs.elem);
        locks.unlock();
        rt::sudog_wake(sg);
        return i;
      }
      if (c->qcount.load(std::memory_order_relaxed) < c->dataqsiz) {
        buf_send(c, cs.elem);
        locks.unlock();
        return i;
      }
    } else {
      if (rt::sudog* sg = c->sendq.dequeue()) {
        complete_recv(c, sg, cs.elem);
        locks.unlock();
        rt::sudog_wake(sg);
        *recv_ok = true;
        return i;
      }
      if (c->qcount.load(std::memory_order_relaxed) > 0) {
        buf_recv(c, cs.elem);
        locks.unlock();
        *recv_ok = true;
        return i;
      }
      if (c->closed.load(std::memory_order_relaxed)) {
        locks.unlock();
        return i;  // closed and drained: *recv_ok stays false
      }
    }
  }

  if (!block) {
    locks.unlock();
    return -1;
  }

  // Pass 2: wait on every channel. The waiter records live in this frame
  // (goro never moves stacks); a plain thread shares one note among them.
  rt::G* gp = rt::getg();
  std::atomic<std::uint32_t> done{0};
  rt::sudog* winner = nullptr;
  rt::note thread_note;
  alignas(rt::sudog) unsigned char small_sg[small * sizeof(rt::sudog)];
  std::unique_ptr<unsigned char[]> big_sg;
  void* sg_mem = small_sg;
  if (norder > small) {
    big_sg.reset(new unsigned char[std::size_t(norder) * sizeof(rt::sudog) +
                                   alignof(rt::sudog)]);
    std::size_t space =
        std::size_t(norder) * sizeof(rt::sudog) + alignof(rt::sudog);
    sg_mem = big_sg.get();
    std::align(alignof(rt::sudog), std::size_t(norder) * sizeof(rt::sudog),
               sg_mem, space);
  }
  auto* sgs = static_cast<rt::sudog*>(sg_mem);
  for (int k = 0; k < norder; k++) {
    scase& cs = cases[lockorder[k]];
    rt::sudog* sg = ::new (&sgs[k]) rt::sudog;
    sg->g = gp;
    sg->wake_note = gp ? nullptr : &thread_note;
    sg->is_select = true;
    sg->select_done = &done;
    sg->winner = &winner;
    sg->elem = cs.elem;
    sg->c = cs.c;
    if (cs.send)
      cs.c->sendq.enqueue(sg);
    else
      cs.c->recvq.enqueue(sg);
  }
  if (gp != nullptr) {
    rt::gopark(selparkcommit, &locks,
               norder == 0 ? rt::wait_reason::select_no_cases
                           : rt::wait_reason::select);
    if (norder == 0) {
      // Nothing can ever wake a select without channels.
      for (;;) rt::gopark(nullptr, nullptr, rt::wait_reason::select_no_cases);
    }
  } else {
    locks.unlock();
    rt::thread_park(thread_note);
  }

  // Pass 3: the waker recorded its sudog in `winner` (under that
  // channel's lock, which we take again here). Remove all the others.
  locks.lock();
  int casi = -1;
  bool success = false;
  for (int k = 0; k < norder; k++) {
    rt::sudog* sg = &sgs[k];
    scase& cs = cases[lockorder[k]];
    if (sg == winner) {
      casi = lockorder[k];
      success = sg->success;
    } else if (cs.send) {
      cs.c->sendq.remove(sg);
    } else {
      cs.c->recvq.remove(sg);
    }
  }
  locks.unlock();
  for (int k = 0; k < norder; k++) sgs[k].~sudog();
  if (casi < 0) rt::fatal("selectgo: bad wakeup");
  if (cases[casi].send) {
    if (!success) throw channel_error("send on closed channel");
  } else {
    *recv_ok = success;
  }
  return casi;
}

}  // namespace goro::detail
