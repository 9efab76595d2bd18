// runq.hpp: the per-P local run queue (Go's runqput, runqget, runqsteal,
// runqempty). A single-producer, multi-consumer lock-free ring.
#pragma once

#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

// Owner only. next=true puts gp in runnext and kicks the old runnext to the
// tail. A full ring moves half of itself plus gp to the global queue.
void runqput(P* pp, G* gp, bool next);
// Owner only. *inherit_time is true for the runnext G (same time slice).
G* runqget(P* pp, bool* inherit_time);
// Any thief whose own queue is empty: grabs half of p2's ring (rounded up)
// into pp's ring and returns one G to run. steal_runnext allows taking
// p2's runnext when its ring is empty (after a short back-off if p2 runs).
G* runqsteal(P* pp, P* p2, bool steal_runnext);
// True if pp has nothing queued; never spuriously true under concurrent
// runqput/runqget (Go's runqempty re-reads the tail).
bool runqempty(P* pp);
// Ring entries (runnext not counted), as schedtrace prints.
std::uint32_t runqlen(P* pp);

}  // namespace goro::rt
