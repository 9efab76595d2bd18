// sema.hpp: the runtime semaphore (Go's sema.go semacquire/semrelease), on
// which wait_group, mutex and the other sync primitives sleep.
#pragma once

#include <cstdint>

#include "runtime/g.hpp"

namespace goro::rt {

// Waits until *addr > 0, then decrements it. Parks a goroutine; blocks a
// plain thread. lifo queues the waiter at the head (Go's mutex re-waiters).
void semacquire(std::uint32_t* addr, wait_reason reason, bool lifo = false);
// Increments *addr and wakes one waiter. handoff passes the count directly
// to the waiter and yields to it (Go's starvation-mode hand-off).
void semrelease(std::uint32_t* addr, bool handoff = false);

}  // namespace goro::rt
