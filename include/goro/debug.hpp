// debug.hpp: scheduler statistics for demos and diagnostics.
#pragma once

#include <cstdint>
#include <vector>

namespace goro::debug {

struct p_stats {
  int id;
  std::uint64_t goroutines_run;     // dispatches on this P
  std::uint64_t goroutines_stolen;  // goroutines this P stole from others
};

// One entry per P (counts since the runtime started).
std::vector<p_stats> per_p_stats();

}  // namespace goro::debug
