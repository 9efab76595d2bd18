// stats.hpp: the scheduler's event counters behind goro::stats()
// (stats.cpp). Only for events off the fast paths (hand-offs, preemptions):
// a relaxed fetch_add on a line of their own. Per-P counters (dispatches,
// steals, blocking calls) live in P, written by its owner only.
#pragma once

#include <atomic>
#include <cstdint>

namespace goro::rt {

struct stat_counters {
  alignas(64) std::atomic<std::uint64_t> handoffs{0};  // handoffp calls
  std::atomic<std::uint64_t> preempt_requests{0};      // preemptone
  std::atomic<std::uint64_t> preempted_coop{0};        // gopreempt
};
extern stat_counters stats_counters;

inline void stat_inc(std::atomic<std::uint64_t>& c) {
  c.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace goro::rt
