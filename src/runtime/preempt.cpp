// preempt.cpp: cooperative preemption. sysmon asks a goroutine that has
// run for a whole time slice (10 ms) to yield by setting G.preempt; the
// goroutine notices at its next runtime entry (go(), gosched, the sync
// primitives, goro::preempt_point()) and goes to the global run queue, as a
// preempted goroutine does in Go (gopreempt_m). When async preemption is
// on, preemptone also signals the goroutine's thread (asyncpreempt.cpp), so
// a loop that never enters the runtime is interrupted too.
#include "runtime/preempt.hpp"

#include <cstdlib>
#include <cstring>

#include "runtime/asyncpreempt.hpp"
#include "runtime/envparse.hpp"
#include "runtime/panic.hpp"
#include "runtime/park.hpp"
#include "runtime/san.hpp"
#include "runtime/stats.hpp"
#include "runtime/syscall.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

std::atomic<std::int64_t> time_slice_ns{default_time_slice_ns};

const char* time_slice_problem(std::int64_t ns) {
  if (ns < min_time_slice_ns) return "shorter than the minimum, 100us";
  if (ns > max_time_slice_ns) return "longer than the maximum, 10s";
  return nullptr;
}

void timeslice_init(std::int64_t opt_ns) {
  std::int64_t ns = opt_ns;
  const char* e = std::getenv("GORO_TIMESLICE");
  if (ns == 0 && e != nullptr) {
    // A decimal number and a unit: ns, us, ms or s. A number that does not
    // fit in 64 bits, or whose product with the unit does not fit in an
    // int64, is longer than the maximum (never wrapped into range).
    const char* p = e;
    std::uint64_t v = 0;
    num_parse r = parse_digits(&p, &v);
    std::uint64_t unit = 0;
    if (r != num_parse::not_number) {
      if (std::strcmp(p, "ns") == 0) unit = 1;
      if (std::strcmp(p, "us") == 0) unit = 1000;
      if (std::strcmp(p, "ms") == 0) unit = 1000 * 1000;
      if (std::strcmp(p, "s") == 0) unit = 1000 * 1000 * 1000;
    }
    if (unit == 0)
      fatalf(
          "GORO_TIMESLICE=%s: not a duration (want a number and a unit, "
          "ns, us, ms or s, e.g. 1ms)",
          e);
    std::uint64_t product = 0;
    if (r == num_parse::too_large ||
        !mul_within(v, unit, std::uint64_t(INT64_MAX), &product))
      fatalf("GORO_TIMESLICE=%s: %s", e,
             time_slice_problem(max_time_slice_ns + 1));
    ns = std::int64_t(product);
    if (const char* why = time_slice_problem(ns))
      fatalf("GORO_TIMESLICE=%s: %s", e, why);
  }
  time_slice_ns.store(ns != 0 ? ns : default_time_slice_ns);
}

void gopreempt() {
  G* gp = getg();
  if (gp == nullptr) return;
  gp->preempt.store(false, std::memory_order_relaxed);
  stat_inc(stats_counters.preempted_coop);
  trace_go_preempt(gp, false);
  syscall_suspend sys(gp);
  mcall(gosched_m);  // Go's gopreempt_m: the same as a yield
}

bool preemptone(P* pp) {
  M* mp = pp->m.load(std::memory_order_acquire);
  if (mp == nullptr) return false;
  G* gp = mp->curg.load(std::memory_order_acquire);
  if (gp == nullptr) return false;
  gp->preempt.store(true, std::memory_order_relaxed);
  pp->preempt.store(true, std::memory_order_relaxed);
  stat_inc(stats_counters.preempt_requests);
  trace_preempt_req(gp, pp);
  // A call-free loop never sees the flag: interrupt it (asyncpreempt.cpp).
  if (async_preempt_on.load(std::memory_order_relaxed)) preemptM(mp, gp);
  return true;
}

}  // namespace goro::rt
