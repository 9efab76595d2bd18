// steal.hpp: work stealing (Go's stealWork and randomOrder).
#pragma once

#include <cstdint>

#include "runtime/g.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

// Enumerates 0..count-1 in a pseudo-random order: start at r % count and
// step by a number coprime with count, so every P is visited exactly once.
//
// The coprimes are stored inline: steal_order must have no destructor (Ms
// may still enumerate while the process exits) and reset() allocates
// nothing. reset() runs only when no M holds a P (start-up, or a
// stopped world during a GOMAXPROCS change), so no enumeration races it.
constexpr std::uint32_t max_steal_procs = 1024;

struct random_order {
  std::uint32_t count = 0;
  std::uint32_t ncoprimes = 0;
  std::uint32_t coprimes[max_steal_procs] = {};

  struct enumerator {
    std::uint32_t i, count, pos, inc;
    bool done() const { return i == count; }
    void next() {
      i++;
      pos = (pos + inc) % count;
    }
    std::uint32_t position() const { return pos; }
  };

  void reset(std::uint32_t n);
  enumerator start(std::uint32_t r) const {
    return enumerator{0, count, r % count, coprimes[(r / count) % ncoprimes]};
  }
};

extern random_order steal_order;

constexpr int steal_tries = 4;

// Tries to steal a runnable G from other Ps: 4 passes over all Ps in a
// random order; the last pass may also take a running P's runnext. Sets
// *new_work when the caller should restart findrunnable (e.g. a
// stop-the-world is pending).
G* stealwork(P* pp, bool* new_work, bool* ran_timers);

// With no P: is there a non-idle P with queued work? Returns an idle P to
// take (acquired from the idle list) or null (Go's checkRunqsNoP).
P* check_runqs_noP(P** allp_snapshot, std::int32_t n);

}  // namespace goro::rt
