// sudog.hpp: a waiter in a wait queue (Go's sudog). It records either a
// parked goroutine or a blocked plain thread, so every blocking primitive
// works from both. goro never moves stacks, so a waiter record can live in
// the waiter's own frame for as long as it waits.
#pragma once

#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/lock.hpp"

namespace goro::rt {

struct sudog {
  G* g = nullptr;          // the parked goroutine; null for a plain thread
  note thread_wake;        // a plain thread blocks here
  const void* key = nullptr;  // what it waits on (semaphore address)
  sudog* next = nullptr;
  sudog* prev = nullptr;
  void* elem = nullptr;
  std::uint32_t ticket = 0;  // 1: the semaphore was handed to us
  bool success = false;
};

// Wakes the waiter: goready for a goroutine, the note for a thread.
void sudog_wake(sudog* s);

}  // namespace goro::rt
