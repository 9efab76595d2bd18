// hchan.hpp: the channel object (Go's hchan) shared by chan.cpp and
// select.cpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <goro/detail/chan_rt.hpp>

#include "runtime/lock.hpp"
#include "runtime/sudog.hpp"

namespace goro::detail {

// A FIFO of waiting sudogs (Go's waitq). Modified under the channel lock;
// `first` is atomic only because the non-blocking fast paths peek at it
// without the lock (relaxed, as Go's racy read).
struct waitq {
  std::atomic<rt::sudog*> first{nullptr};
  rt::sudog* last = nullptr;

  rt::sudog* head() const { return first.load(std::memory_order_relaxed); }
  void set_head(rt::sudog* s) { first.store(s, std::memory_order_relaxed); }

  void enqueue(rt::sudog* s) {
    s->next = nullptr;
    s->prev = last;
    if (last)
      last->next = s;
    else
      set_head(s);
    last = s;
  }
  // Removes a specific sudog if it is still queued here (a select
  // cleaning up the cases that did not fire).
  void remove(rt::sudog* s) {
    if (s->prev)
      s->prev->next = s->next;
    else if (head() == s)
      set_head(s->next);
    else
      return;
    if (s->next)
      s->next->prev = s->prev;
    else
      last = s->prev;
    s->next = s->prev = nullptr;
  }
  // Takes the first waiter that can still be woken. A select waiter that
  // another case already won is skipped (its select_done CAS fails): it is
  // about to take the channel locks and remove itself.
  rt::sudog* dequeue() {
    for (;;) {
      rt::sudog* s = head();
      if (s == nullptr) return nullptr;
      set_head(s->next);
      if (s->next)
        s->next->prev = nullptr;
      else
        last = nullptr;
      s->next = s->prev = nullptr;
      if (s->is_select) {
        std::uint32_t zero = 0;
        if (!s->select_done->compare_exchange_strong(zero, 1)) continue;
      }
      return s;
    }
  }
};

struct hchan {
  std::atomic<std::int64_t> refs{1};
  rt::mutex lock{rt::lock_rank::hchan};
  // qcount and closed are read without the lock by the non-blocking fast
  // paths (relaxed: a stale value only sends them to the locked path or
  // reports "not ready" for an instant, as in Go).
  std::atomic<std::size_t> qcount{0};
  std::atomic<bool> closed{false};
  std::size_t dataqsiz = 0;  // capacity
  std::size_t stride = 0;    // bytes per slot
  char* buf = nullptr;
  const elem_ops* ops = nullptr;
  std::size_t sendx = 0;
  std::size_t recvx = 0;
  waitq recvq;
  waitq sendq;

  void* slot(std::size_t i) { return buf + i * stride; }
  bool full() const {
    // Unbuffered: full unless a receiver waits. Buffered: no free slot.
    if (dataqsiz == 0) return recvq.head() == nullptr;
    return qcount.load(std::memory_order_relaxed) == dataqsiz;
  }
  bool empty() const {
    if (dataqsiz == 0) return sendq.head() == nullptr;
    return qcount.load(std::memory_order_relaxed) == 0;
  }
};

// Complete a send to a waiting receiver / a receive from a waiting
// sender, with c locked. The caller then unlocks and wakes sg.
void complete_send(hchan* c, rt::sudog* sg, void* elem);
void complete_recv(hchan* c, rt::sudog* sg, void* elem);
// Buffered fast operations with c locked (the caller checked room/items).
void buf_send(hchan* c, void* elem);
void buf_recv(hchan* c, void* elem);

}  // namespace goro::detail
