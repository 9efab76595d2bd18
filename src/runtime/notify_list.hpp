// notify_list.hpp: Go's notifyList (runtime/sema.go), the ticket-based wait
// list under goro::cond.
//
// A waiter first takes a ticket (notify_list_add) while it still holds the
// condition's lock, then releases that lock and waits for its ticket
// (notify_list_wait). `notify` is the next ticket to be woken: notify_one
// wakes exactly the holder of that ticket and advances it, notify_all
// advances it to `wait`. A ticket below `notify` has been notified already,
// so a waiter whose notification overtook it (it was notified between
// taking the ticket and queueing) does not sleep at all. Tickets wrap
// around; they are compared by signed difference.
#pragma once

#include <atomic>
#include <cstdint>

#include "runtime/lock.hpp"
#include "runtime/sudog.hpp"

namespace goro::rt {

struct notify_list {
  // The next ticket to hand out. Taken with an atomic add, without the lock.
  std::atomic<std::uint32_t> wait{0};
  // The next ticket to notify. Written under `lock`; read without it by the
  // notifiers' fast check.
  std::atomic<std::uint32_t> notify{0};
  mutex lock{lock_rank::notify_list};
  // Queued waiters (linked through sudog::next), mostly in ticket order.
  sudog* head = nullptr;
  sudog* tail = nullptr;
};

// Takes a ticket (Go's notifyListAdd).
std::uint32_t notify_list_add(notify_list* l);
// Parks the goroutine (or blocks the plain thread) until ticket t has been
// notified; returns at once if it has been already (notifyListWait).
void notify_list_wait(notify_list* l, std::uint32_t t);
// Wakes the waiter holding the oldest unnotified ticket (notifyListNotifyOne).
void notify_list_notify_one(notify_list* l);
// Wakes every waiter holding a ticket (notifyListNotifyAll).
void notify_list_notify_all(notify_list* l);

}  // namespace goro::rt
