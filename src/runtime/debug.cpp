// debug.cpp: goro::debug statistics.
#include <goro/debug.hpp>

#include "runtime/sched.hpp"
#include "runtime/stack.hpp"

namespace goro::debug {

std::vector<p_stats> per_p_stats() {
  std::vector<p_stats> out;
  if (!rt::runtime_started.load(std::memory_order_acquire)) return out;
  for (std::int32_t i = 0; i < rt::gomaxprocs_now(); i++) {
    rt::P* pp = rt::allp[i];
    out.push_back({i, pp->nrun.load(std::memory_order_relaxed),
                   pp->nstolen.load(std::memory_order_relaxed)});
  }
  return out;
}

mem_stats read_mem_stats() {
  rt::stack_counts c = rt::read_stack_counts();
  return {c.stacks, c.stack_bytes, c.gs};
}

}  // namespace goro::debug
