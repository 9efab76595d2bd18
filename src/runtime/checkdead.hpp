// checkdead.hpp: deadlock detection and plain-thread accounting
// (checkdead.cpp).
#pragma once

#include "runtime/lock.hpp"

namespace goro::rt {

void checkdead();  // sched.lock held
// Plain-thread accounting for checkdead: a plain thread blocks in / leaves
// a runtime primitive.
// The waker calls extern_block_end, before waking the thread, so the
// thread never looks blocked after it was released.
void extern_block_begin();
void extern_block_end();
void note_extern_thread();
// A plain thread sleeps on n, counted as blocked in the runtime.
inline void thread_park(note& n) {
  extern_block_begin();
  n.sleep();
}
inline void thread_unpark(note& n) {
  extern_block_end();
  n.wakeup();
}

}  // namespace goro::rt
