// globrunq.hpp: the global run queue (sched.runq; globrunq.cpp: globrunqput,
// globrunqputbatch, globrunqget), and its test hooks.
#pragma once

#include <cstddef>
#include <cstdint>

#include "runtime/g.hpp"

namespace goro::rt {

struct P;

// sched.lock held.
void globrunqput(G* gp);
void globrunqputbatch(g_queue* batch);
G* globrunqget(P* pp, std::int32_t max);

std::size_t globrunqsize();
G* globrunqget_for_test();

}  // namespace goro::rt
