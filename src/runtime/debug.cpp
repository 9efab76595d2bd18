// debug.cpp: goro::debug statistics.
#include <goro/debug.hpp>

#include "runtime/sched.hpp"
#include "runtime/stack.hpp"
#include "runtime/stw.hpp"
#include "runtime/tls.hpp"
#include "runtime/traceback.hpp"

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

std::string stack(bool all) {
  rt::G* gp = rt::getg();
  if (!all) return gp != nullptr ? rt::goroutine_trace(gp) : std::string();
  if (!rt::runtime_started.load(std::memory_order_acquire))
    return std::string();
  rt::stop_the_world();
  std::string s = rt::all_goroutines_trace();
  rt::start_the_world(0);
  return s;
}

}  // namespace goro::debug
