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

// Goroutine memory (the stack part of Go's runtime.MemStats). A goroutine
// gets its stack when it first runs, so goroutines that are queued but
// have not started yet hold a G and no stack.
struct mem_stats {
  std::uint64_t stacks;     // goroutine stacks reserved now (in use or cached)
  std::uint64_t stack_sys;  // bytes of address space they reserve
  std::uint64_t gs;         // G records allocated (never freed, as Go's allgs)
};
mem_stats read_mem_stats();

}  // namespace goro::debug
