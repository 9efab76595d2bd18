// newproc.hpp: creating goroutines (newproc.cpp). The spawn entry points
// themselves are goro::detail::newproc_* in <goro/runtime.hpp>.
#pragma once

#include "runtime/g.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

// Lazy stack binding: gives a goroutine that has never run (sched_sp null)
// a stack, the one this P freed last if any, and lays out its first frame.
// On g0, by execute, just before the goroutine first runs.
void stack_bind(P* pp, G* gp);
// Frees a callable that did not fit in the G (after it was destroyed).
void gfree_callable(G* gp);

}  // namespace goro::rt
