// oslock.hpp: counting the OS locks (pthread mutexes, rwlocks, spin locks)
// a goroutine holds, so that asynchronous preemption never stops it inside
// a critical section (Go's m.locks for the runtime's own locks, extended to
// the user's: ../shared/reference/preemption.md §3.2).
#pragma once

#include <cstdint>

namespace goro::rt {

struct G;

// Resolves the real pthread functions (libgoro defines pthread_mutex_lock
// and friends, which count and forward to them). Called at runtime start;
// the wrappers also resolve lazily if called before.
void oslock_init();

// The same for oslock_hidden.cpp's wrappers (static-initialisation guards,
// pthread_once, stdio and C11 locks); called by oslock_init, which also
// makes a program linked with the static libgoro link them in.
void oslock_hidden_init();

// True when the wrappers are compiled in (not under TSan, whose own
// interceptors must see every lock; async preemption is off there anyway).
bool oslock_counting();

// Called by an unlock wrapper when gp's count of held OS locks returned to
// zero while a preemption was asked for: the deferred asynchronous
// preemption happens here (asyncpreempt_pin.cpp). `ra` is the unlock's return
// address, which must be in preemptible code.
void oslock_preempt_point(G* gp, void* ra);

// gopark's check: gp is about to park holding OS locks. Its unlock may then
// run on another thread (an error for error-checking and robust mutexes,
// undefined for std::mutex), and a goroutine scheduled on this thread that
// takes the same lock blocks the thread for good. Reported with the
// goroutine's stack, once per distinct stack (GORO_DEBUG=oslockpark=1, the
// default), or fatal (oslockpark=2).
void oslock_park_report(G* gp, int reason);

}  // namespace goro::rt
