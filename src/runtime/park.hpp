// park.hpp: leaving a goroutine for the scheduler and making it runnable
// again (park.cpp: mcall, gopark, park_m, goready, goyield, Gosched).
#pragma once

#include "runtime/g.hpp"
#include "runtime/lock.hpp"
#include "runtime/m.hpp"

namespace goro::rt {

// Switches from the running goroutine to the scheduler stack and calls
// fn(gp) there (Go's mcall). Returns when gp is resumed.
void mcall(void (*fn)(void*));
// mcall for a goroutine that will never resume (its stack is recycled).
void mcall_dying(void (*fn)(void*));
// Parks the running goroutine (Go's gopark). After the switch, on g0,
// unlockf(gp, lock) runs; if it returns false the goroutine resumes at once.
void gopark(bool (*unlockf)(G*, void*), void* lock, wait_reason reason);
// gopark that releases a runtime mutex after parking (goparkunlock).
void goparkunlock(mutex* lock, wait_reason reason);
// Detaches the running goroutine from its M (Go's dropg).
inline void dropg(M* mp, G* gp) {
  mp->curg.store(nullptr, std::memory_order_relaxed);
  gp->m = nullptr;
}
// On g0: requeue gp on the global queue and schedule (Go's goschedImpl,
// shared by gosched and preemption).
[[noreturn]] void gosched_m(void* gp);
// Queues a goroutine that yields or is preempted as Go's goschedImpl does:
// the global queue's tail, or, while the global queue is empty, the local
// queue's tail of pp (the same order on this P without sched.lock).
void put_yielded(P* pp, G* gp);
// Makes a parked goroutine runnable in the waker's runnext (Go's goready).
void goready(G* gp);
// Puts Gs readied without a P (plain threads) on the global queue.
void ready_noP(G* gp);
// Yields to the tail of the local run queue (Go's goyield).
void goyield();
// Go's sync_runtime_canSpin / sync_runtime_doSpin for mutex spinning.
bool sync_runtime_canspin(int i);
void sync_runtime_dospin();

}  // namespace goro::rt
