// sudog.hpp: a waiter in a wait queue (Go's sudog). It records either a
// parked goroutine or a blocked plain thread, so every blocking primitive
// works from both. goro never moves stacks, so a waiter record can live in
// the waiter's own frame for as long as it waits.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"

namespace goro::rt {

struct sudog {
  G* g = nullptr;             // the parked goroutine; null for a plain thread
  note thread_wake;           // a plain thread blocks here...
  note* wake_note = nullptr;  // ...or here (a select's shared note)
  const void* key = nullptr;  // what it waits on (semaphore address)
  sudog* next = nullptr;
  sudog* prev = nullptr;
  // Channel waits: the element to send from / receive into, the channel,
  // and for select cases the select's "someone already won" flag and the
  // slot where the winning waker records which case it completed.
  void* elem = nullptr;
  void* c = nullptr;
  std::atomic<std::uint32_t>* select_done = nullptr;
  sudog** winner = nullptr;
  sudog* waitlink = nullptr;  // a select's sudogs, in lock order
  sudog* wakelink = nullptr;  // close's list of waiters to wake
  // Semaphore waits (sema.cpp) reuse the channel fields, as Go does: prev
  // and next are the treap node's left and right children, c its parent,
  // waitlink the next waiter on the same address and wakelink (in the
  // node) the tail of that list; ticket is the node's heap priority while
  // it is queued. (Every channel wait zeroes a sudog: no field of its own,
  // so that stays a few stores rather than a rep stos.)
  std::uint32_t ticket = 0;  // 1: the semaphore was handed to us
  bool success = false;      // woken by a real send/recv, not by close
  bool is_select = false;
};

// Wakes the waiter: goready for a goroutine, the note for a thread.
void sudog_wake(sudog* s);

}  // namespace goro::rt
