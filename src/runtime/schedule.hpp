// schedule.hpp: one round of scheduling and the search for work (schedule.cpp:
// schedule, execute, resetspinning; findrunnable.cpp: findrunnable,
// becomeSpinning, injectglist).
#pragma once

#include "runtime/g.hpp"
#include "runtime/m.hpp"

namespace goro::rt {

[[noreturn]] void schedule();
[[noreturn]] void execute(G* gp, bool inherit_time);
// Blocks until it finds a goroutine to run (Go's findRunnable).
G* findrunnable(bool* inherit_time);
void become_spinning(M* mp);
void resetspinning();
// Makes a list of ready goroutines runnable (Go's injectglist).
void injectglist(g_queue* list);

}  // namespace goro::rt
