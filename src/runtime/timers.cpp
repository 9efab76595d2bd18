// timers.cpp: per-P 4-ary timer heaps.
#include "runtime/timers.hpp"

#include <goro/detail/timer_rt.hpp>

#include "runtime/nanotime.hpp"
#include "runtime/netpoll.hpp"
#include "runtime/park.hpp"
#include "runtime/sched.hpp"
#include "runtime/testhook.hpp"
#include "runtime/tls.hpp"

namespace goro::rt {

namespace {

constexpr std::size_t heap_n = 4;  // Go's timerHeapN

void set(timers& ts, std::size_t i, timer* t) {
  ts.heap[i] = t;
  t->index = std::int32_t(i);
}

void siftup(timers& ts, std::size_t i) {
  timer* t = ts.heap[i];
  while (i > 0) {
    std::size_t p = (i - 1) / heap_n;
    if (ts.heap[p]->when <= t->when) break;
    set(ts, i, ts.heap[p]);
    i = p;
  }
  set(ts, i, t);
}

void siftdown(timers& ts, std::size_t i) {
  std::size_t n = ts.heap.size();
  timer* t = ts.heap[i];
  for (;;) {
    std::size_t c = i * heap_n + 1;
    if (c >= n) break;
    std::size_t best = c;
    for (std::size_t k = c + 1; k < c + heap_n && k < n; k++)
      if (ts.heap[k]->when < ts.heap[best]->when) best = k;
    if (ts.heap[best]->when >= t->when) break;
    set(ts, i, ts.heap[best]);
    i = best;
  }
  set(ts, i, t);
}

void update_min(timers& ts) {
  ts.min_when.store(ts.heap.empty() ? 0 : ts.heap[0]->when,
                    std::memory_order_release);
}

// Heap operations with ts.lock held.
void heap_push(P* pp, timer* t) {
  timers& ts = pp->tm;
  ts.heap.push_back(t);
  t->pp.store(pp, std::memory_order_relaxed);
  siftup(ts, ts.heap.size() - 1);
  update_min(ts);
}

void heap_remove(timers& ts, timer* t) {
  std::size_t i = std::size_t(t->index);
  std::size_t last = ts.heap.size() - 1;
  if (i != last) {
    timer* moved = ts.heap[last];
    set(ts, i, moved);
    ts.heap.pop_back();
    siftdown(ts, i);
    if (moved->index == std::int32_t(i)) siftup(ts, i);
  } else {
    ts.heap.pop_back();
  }
  t->index = -1;
  // Release: a stopper that reads pp == null without the heap lock (unlink)
  // also sees the firing count check_timers raised before removing it.
  t->pp.store(nullptr, std::memory_order_release);
  update_min(ts);
}

void fire(timer* t, std::int64_t now) {
  if (t->task != nullptr)
    t->task->fire(now);
  else
    t->f(t->arg);
}

P* current_p() {
  M* mp = getm();
  if (mp != nullptr && mp->p != nullptr) return mp->p;
  return allp[0];
}

// Removes t from whatever heap holds it (t->mu held). True if it was in one.
bool unlink(timer* t) {
  for (;;) {
    P* pp = t->pp.load(std::memory_order_acquire);
    if (pp == nullptr) return false;
    lock_guard lk(pp->tm.lock);
    if (t->pp.load(std::memory_order_relaxed) != pp) continue;  // moved
    heap_remove(pp->tm, t);
    return true;
  }
}

}  // namespace

void timer_retain(timer* t) { t->refs.fetch_add(1, std::memory_order_relaxed); }

void timer_release(timer* t) {
  if (t->refs.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  delete t->task;
  delete t;
}

void timer_add(timer* t, std::int64_t when) {
  t->when = when;
  P* pp = current_p();
  if (t->task != nullptr) timer_retain(t);  // the heap's reference
  {
    lock_guard lk(pp->tm.lock);
    heap_push(pp, t);
    // Under the heap lock: pidleput clears the bit under it too (an idle
    // P may get timers from a thread without a P).
    // Read first: the mask word is shared by 32 Ps, and the bit is
    // usually set already (it is cleared only when the P goes idle).
    if (!timerpmask.read(std::uint32_t(pp->id))) timerpmask.set(pp->id);
  }
  wake_netpoller(when);
}

// Waits until a firing of t in progress on another thread has finished.
void wait_not_firing(timer* t) {
  while (t->firing.load(std::memory_order_acquire) != 0) osyield();
}

bool timer_stop(timer* t) {
  lock_guard lk(t->mu);
  bool pending = unlink(t);
  wait_not_firing(t);
  if (pending && t->task != nullptr) timer_release(t);
  return pending;
}

bool timer_reset(timer* t, std::int64_t when, std::int64_t period) {
  lock_guard lk(t->mu);
  bool pending = unlink(t);
  wait_not_firing(t);
  if (pending && t->task != nullptr) timer_release(t);
  t->period = period;
  timer_add(t, when);
  return pending;
}

std::int64_t check_timers(P* pp, std::int64_t now, bool* ran) {
  *ran = false;
  timers& ts = pp->tm;
  std::int64_t next = ts.min_when.load(std::memory_order_acquire);
  if (next == 0) return 0;
  if (now == 0) now = nanotime();
  if (next > now) return next;
  ts.lock.lock();
  while (!ts.heap.empty() && ts.heap[0]->when <= now) {
    timer* t = ts.heap[0];
    bool refcounted = t->task != nullptr;
    // Counted as firing before it leaves the heap: a stop() that finds it
    // gone (pp == null, read without the heap lock) then waits for us.
    t->firing.fetch_add(1, std::memory_order_relaxed);
    if (t->period > 0) {
      // Periodic: re-arm for the next period after now, skipping missed
      // ones (a slow receiver gets ticks dropped, as Go's tickers do).
      std::int64_t delta = now - t->when;
      t->when += t->period * (1 + delta / t->period);
      siftdown(ts, 0);
      update_min(ts);
      if (refcounted) timer_retain(t);  // a reference for this run
    } else {
      heap_remove(ts, t);  // the heap's reference passes to this run
    }
    run_test_hook(testhooks.timer_unlinked, t);
    ts.lock.unlock();
    *ran = true;
    fire(t, now);
    // Release: what the firing did is visible to a stop() that sees 0.
    t->firing.fetch_sub(1, std::memory_order_release);
    if (refcounted) timer_release(t);
    ts.lock.lock();
  }
  next = ts.heap.empty() ? 0 : ts.heap[0]->when;
  ts.lock.unlock();
  return next;
}

std::int64_t timer_sleep_until() {
  std::int64_t next = 0;
  std::int32_t n = gomaxprocs_now();
  for (std::int32_t i = 0; i < n; i++) {
    std::int64_t w = allp[i]->tm.min_when.load(std::memory_order_acquire);
    if (w != 0 && (next == 0 || w < next)) next = w;
  }
  return next;
}

void timers_take(P* dst, P* src) {
  if (src->tm.heap.empty()) return;
  lock_guard a(src->tm.lock);
  lock_guard b(dst->tm.lock);
  for (timer* t : src->tm.heap) {
    t->index = -1;
    heap_push(dst, t);
  }
  src->tm.heap.clear();
  update_min(src->tm);
}

// --- sleep ---

namespace {

void goroutine_ready(void* arg) { goready(static_cast<G*>(arg)); }

bool reset_for_sleep(G* gp, void* when) {
  // Armed only now that gp is parked: a very short timer firing earlier
  // would ready a goroutine that is still running. `when` lives on gp's
  // stack, intact while it is parked.
  timer_reset(gp->sleep_timer, *static_cast<std::int64_t*>(when), 0);
  return true;
}

}  // namespace

void timesleep(std::int64_t ns) {
  if (ns <= 0) return;
  G* gp = getg();
  if (gp->sleep_timer == nullptr) {
    gp->sleep_timer = new timer;
    gp->sleep_timer->f = goroutine_ready;
    gp->sleep_timer->arg = gp;
  }
  std::int64_t now = nanotime();
  std::int64_t when = ns > INT64_MAX - now ? INT64_MAX : now + ns;
  gopark(reset_for_sleep, &when, wait_reason::sleep);
}

}  // namespace goro::rt
