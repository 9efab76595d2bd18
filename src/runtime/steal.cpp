// steal.cpp: work stealing.
#include "runtime/steal.hpp"

#include <numeric>

#include "runtime/mstart.hpp"
#include "runtime/panic.hpp"
#include "runtime/runq.hpp"
#include "runtime/sched.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

random_order steal_order;

void random_order::reset(std::uint32_t n) {
  if (n == 0 || n > max_steal_procs) fatalf("random_order: bad count %u", n);
  std::uint32_t k = 0;
  for (std::uint32_t i = 1; i <= n; i++)
    if (std::gcd(i, n) == 1) coprimes[k++] = i;
  ncoprimes = k;
  count = n;
}

G* stealwork(P* pp, bool* new_work, bool* ran_timers) {
  M* mp = getm();
  *new_work = false;
  *ran_timers = false;
  std::int32_t n = gomaxprocs_now();
  for (int i = 0; i < steal_tries; i++) {
    // Timers and another P's runnext only on the last pass: stealing
    // runnext breaks the locality of a readier/readied pair.
    bool last_pass = i == steal_tries - 1;
    for (auto e = steal_order.start(mp->cheaprand()); !e.done(); e.next()) {
      if (sched.gcwaiting.load(std::memory_order_relaxed)) {
        *new_work = true;
        return nullptr;
      }
      std::uint32_t id = e.position();
      if (std::int32_t(id) >= n) continue;
      P* p2 = allp[id];
      if (p2 == pp) continue;
      // On the last pass, run p2's expired timers here: that is how timers
      // of a busy or hogged P still fire. The goroutines they ready land in
      // our run queue; take one at once.
      if (last_pass && timerpmask.read(id)) {
        bool ran = false;
        check_timers(p2, 0, &ran);
        if (ran) {
          bool inherit = false;
          if (G* gp = runqget(pp, &inherit)) return gp;
          *ran_timers = true;
        }
      }
      if (!idlepmask.read(id)) {
        if (G* gp = runqsteal(pp, p2, last_pass)) {
          trace_steal(gp, p2);
          return gp;
        }
      }
    }
  }
  return nullptr;
}

P* check_runqs_noP(P** allp_snapshot, std::int32_t n) {
  for (std::int32_t id = 0; id < n; id++) {
    P* p2 = allp_snapshot[id];
    if (!idlepmask.read(id) && !runqempty(p2)) {
      lock_guard lk(sched.lock);
      return pidleget_spinning();
    }
  }
  return nullptr;
}

}  // namespace goro::rt
