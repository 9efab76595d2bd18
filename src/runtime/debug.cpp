// debug.cpp: goro::debug statistics and preemption settings (the async
// preemption calls that add preemptible code are asyncsafepoint.cpp's).
#include <goro/debug.hpp>
#include <goro/runtime.hpp>
#include <stdexcept>
#include <string>

#include "runtime/asyncpreempt.hpp"
#include "runtime/preempt.hpp"
#include "runtime/sched.hpp"
#include "runtime/stack.hpp"
#include "runtime/stackshrink.hpp"
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
  return {c.stacks, c.stack_bytes, c.gs, rt::stacks_released_now()};
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

bool set_async_preempt(bool on) {
  // After start-up, so that GORO_DEBUG (asyncpreemptoff, the signal) has
  // been applied.
  goro::detail::ensure_started(nullptr);
  return rt::asyncpreempt_set(on);
}

std::chrono::nanoseconds set_time_slice(std::chrono::nanoseconds d) {
  if (const char* why = rt::time_slice_problem(d.count()))
    throw std::invalid_argument("goro::debug::set_time_slice(" +
                                std::to_string(d.count()) + "ns): " + why);
  goro::detail::ensure_started(nullptr);
  return std::chrono::nanoseconds(rt::time_slice_ns.exchange(d.count()));
}

bool async_preempt_enabled() {
  return rt::async_preempt_on.load(std::memory_order_relaxed);
}

preempt_stats read_preempt_stats() {
  auto& s = rt::async_preempt_stats;
  return preempt_stats{s.sent.load(),
                       s.received.load(),
                       s.preempted.load(),
                       s.rejected_pc.load(),
                       s.deferred_oslock.load(),
                       s.at_unlock.load(),
                       s.deferred_runtime_lock.load(),
                       s.blocked_signalled.load(),
                       s.blocked_handoffs.load()};
}

int os_locks_held() {
  rt::G* gp = rt::getg();
  return gp != nullptr ? gp->oslocks.load(std::memory_order_relaxed) : 0;
}

}  // namespace goro::debug
