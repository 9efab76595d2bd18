// chan.cpp: channel send, receive and close (Go's chan.go).
//
// One lock per channel; a ring buffer of `cap` slots; queues of waiting
// senders and receivers. A sender that finds a waiting receiver moves its
// element straight into the receiver's storage and readies it into the
// sender's runnext (and the reverse), so an unbuffered hand-off never
// touches the buffer. Waiter records (sudogs) live in the waiter's own
// frame: goro never moves stacks, so no per-P sudog cache is needed.
#include <new>

#include "chan/hchan.hpp"
#include "runtime/checkdead.hpp"
#include "runtime/park.hpp"
#include "runtime/preempt.hpp"
#include "runtime/tls.hpp"

namespace goro::detail {

namespace {

bool unlock_chan(rt::G*, void* c) {
  static_cast<hchan*>(c)->lock.unlock();
  return true;
}

// Queues the caller (goroutine or plain thread) on q of c, locked, and
// parks until a peer or close completes it; returns with c unlocked.
// True if a peer completed the operation, false if close woke it.
bool wait_on(hchan* c, waitq& q, void* elem, rt::wait_reason reason) {
  rt::sudog s;
  s.g = rt::getg();
  s.elem = elem;
  s.c = c;
  q.enqueue(&s);
  if (s.g != nullptr) {
    rt::gopark(unlock_chan, c, reason);
  } else {
    c->lock.unlock();
    rt::thread_park(s.thread_wake);
  }
  return s.success;
}

[[noreturn]] void block_forever(rt::wait_reason reason) {
  if (rt::getg() != nullptr) {
    for (;;) rt::gopark(nullptr, nullptr, reason);
  }
  rt::note never;
  rt::thread_park(never);
  for (;;) never.sleep();
}

}  // namespace

hchan* makechan(const elem_ops* ops, std::size_t cap) {
  rt::plain_thread_entry();
  std::size_t stride =
      ops->size == 0 ? 0
                     : (ops->size + ops->align - 1) / ops->align * ops->align;
  // One bound for every element type (Go panics the same way): an element
  // of chan<void> counts one byte, so cap itself is bounded too.
  if (cap > max_chan_bytes / (stride == 0 ? 1 : stride))
    throw std::length_error("makechan: size out of range");
  auto* c = new hchan;
  c->ops = ops;
  c->dataqsiz = cap;
  c->stride = stride;
  if (cap > 0 && stride > 0)
    c->buf = static_cast<char*>(
        ::operator new(cap* stride, std::align_val_t(ops->align)));
  return c;
}

void chan_retain(hchan* c) noexcept {
  if (c) c->refs.fetch_add(1, std::memory_order_relaxed);
}

void chan_release(hchan* c) noexcept {
  if (c == nullptr) return;
  // acq_rel: the last owner sees every other owner's writes before it
  // destroys the buffered elements.
  if (c->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  std::size_t n = c->qcount.load(std::memory_order_relaxed);
  for (std::size_t i = 0; i < n; i++)
    c->ops->destroy(c->slot((c->recvx + i) % c->dataqsiz));
  if (c->buf) ::operator delete(c->buf, std::align_val_t(c->ops->align));
  delete c;
}

void buf_send(hchan* c, void* elem) {
  c->ops->move(c->slot(c->sendx), elem);
  if (++c->sendx == c->dataqsiz) c->sendx = 0;
  c->qcount.store(c->qcount.load(std::memory_order_relaxed) + 1,
                  std::memory_order_relaxed);
}

void buf_recv(hchan* c, void* elem) {
  void* s = c->slot(c->recvx);
  c->ops->move(elem, s);
  c->ops->destroy(s);
  if (++c->recvx == c->dataqsiz) c->recvx = 0;
  c->qcount.store(c->qcount.load(std::memory_order_relaxed) - 1,
                  std::memory_order_relaxed);
}

void complete_send(hchan* c, rt::sudog* sg, void* elem) {
  // The receiver's storage is in its (parked) frame; construct into it.
  if (sg->elem != nullptr) c->ops->move(sg->elem, elem);
  sg->success = true;
  if (sg->winner) *sg->winner = sg;
}

void complete_recv(hchan* c, rt::sudog* sg, void* elem) {
  if (c->dataqsiz == 0) {
    // Unbuffered: take the value straight from the sender's frame.
    if (elem != nullptr) c->ops->move(elem, sg->elem);
  } else {
    // Full buffer: take the head item, and put the sender's value in the
    // slot it frees (the queue stays FIFO).
    void* s = c->slot(c->recvx);
    if (elem != nullptr) c->ops->move(elem, s);
    c->ops->destroy(s);
    c->ops->move(s, sg->elem);
    if (++c->recvx == c->dataqsiz) c->recvx = 0;
    c->sendx = c->recvx;
  }
  sg->success = true;
  if (sg->winner) *sg->winner = sg;
}

bool chansend(hchan* c, void* elem, bool block) {
  rt::runtime_entry();
  if (c == nullptr) {
    if (!block) return false;
    block_forever(rt::wait_reason::chan_send_nil_chan);
  }
  // Fast path for a failed non-blocking send, without the lock: not
  // closed and full. (Both reads may be stale; that only means the send
  // "happened" a moment earlier or later, as in Go.)
  if (!block && !c->closed.load(std::memory_order_relaxed) && c->full())
    return false;
  c->lock.lock();
  if (c->closed.load(std::memory_order_relaxed)) {
    c->lock.unlock();
    throw channel_error("send on closed channel");
  }
  if (rt::sudog* sg = c->recvq.dequeue()) {
    complete_send(c, sg, elem);
    c->lock.unlock();
    rt::sudog_wake(sg);
    return true;
  }
  if (c->qcount.load(std::memory_order_relaxed) < c->dataqsiz) {
    buf_send(c, elem);
    c->lock.unlock();
    return true;
  }
  if (!block) {
    c->lock.unlock();
    return false;
  }
  if (!wait_on(c, c->sendq, elem, rt::wait_reason::chan_send))
    throw channel_error("send on closed channel");
  return true;
}

bool chanrecv(hchan* c, void* elem, bool block, bool* received) {
  rt::runtime_entry();
  *received = false;
  if (c == nullptr) {
    if (!block) return false;
    block_forever(rt::wait_reason::chan_receive_nil_chan);
  }
  if (!block && c->empty()) {
    // Non-blocking and nothing there: if it is not closed we are done. If
    // it is closed, re-check emptiness (an element may have arrived before
    // the close) and report the closed, drained channel.
    if (!c->closed.load(std::memory_order_acquire)) return false;
    if (c->empty()) return true;
  }
  c->lock.lock();
  if (c->closed.load(std::memory_order_relaxed) &&
      c->qcount.load(std::memory_order_relaxed) == 0) {
    c->lock.unlock();
    return true;
  }
  if (rt::sudog* sg = c->sendq.dequeue()) {
    complete_recv(c, sg, elem);
    c->lock.unlock();
    rt::sudog_wake(sg);
    *received = true;
    return true;
  }
  if (c->qcount.load(std::memory_order_relaxed) > 0) {
    buf_recv(c, elem);
    c->lock.unlock();
    *received = true;
    return true;
  }
  if (!block) {
    c->lock.unlock();
    return false;
  }
  *received = wait_on(c, c->recvq, elem, rt::wait_reason::chan_receive);
  return true;
}

void closechan(hchan* c) {
  rt::runtime_entry();
  if (c == nullptr) throw channel_error("close of nil channel");
  c->lock.lock();
  if (c->closed.load(std::memory_order_relaxed)) {
    c->lock.unlock();
    throw channel_error("close of closed channel");
  }
  c->closed.store(true, std::memory_order_release);
  // Release every waiter: receivers get "closed" (nothing constructed),
  // senders will throw. Collect first, wake after unlocking.
  rt::sudog* wake = nullptr;
  for (waitq* q : {&c->recvq, &c->sendq}) {
    while (rt::sudog* sg = q->dequeue()) {
      sg->success = false;
      if (sg->winner) *sg->winner = sg;
      sg->wakelink = wake;
      wake = sg;
    }
  }
  c->lock.unlock();
  while (wake != nullptr) {
    rt::sudog* next = wake->wakelink;
    rt::sudog_wake(wake);  // wake may be gone after this
    wake = next;
  }
}

std::size_t chanlen(const hchan* c) noexcept {
  rt::plain_thread_entry();
  return c ? c->qcount.load(std::memory_order_relaxed) : 0;
}

std::size_t chancap(const hchan* c) noexcept {
  rt::plain_thread_entry();
  return c ? c->dataqsiz : 0;
}

}  // namespace goro::detail
