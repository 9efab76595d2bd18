// time.cpp: goro::sleep, after, timer, ticker and after_func over the
// runtime timers.
#include <goro/runtime.hpp>
#include <goro/time.hpp>
#include <thread>

#include "runtime/nanotime.hpp"
#include "runtime/preempt.hpp"
#include "runtime/sched.hpp"
#include "runtime/timers.hpp"
#include "runtime/tls.hpp"

namespace goro::detail {

rt::timer* timer_new(timer_task* task) {
  if (!rt::runtime_started.load(std::memory_order_acquire))
    ensure_started(nullptr);
  auto* t = new rt::timer;
  t->task = task;
  return t;
}

bool timer_start(rt::timer* t, std::int64_t d_ns, std::int64_t period_ns) {
  rt::plain_thread_entry();
  std::int64_t now = rt::nanotime();
  std::int64_t when =
      d_ns > INT64_MAX - now ? INT64_MAX : now + (d_ns < 0 ? 0 : d_ns);
  return rt::timer_reset(t, when, period_ns);
}

bool timer_cancel(rt::timer* t) { return rt::timer_stop(t); }
void timer_drop(rt::timer* t) {
  if (t) rt::timer_release(t);
}
std::int64_t monotonic_now_ns() { return rt::nanotime(); }

}  // namespace goro::detail

namespace goro {

namespace {

time_point to_time_point(std::int64_t ns) {
  return time_point(std::chrono::duration_cast<time_point::duration>(
      std::chrono::nanoseconds(ns)));
}

// Sends the firing time without blocking (the buffer holds one value; a
// reader that is behind misses ticks, as in Go).
struct chan_task final : detail::timer_task {
  chan<time_point> c;
  explicit chan_task(chan<time_point> ch) : c(std::move(ch)) {}
  void fire(std::int64_t now) override { c.try_send(to_time_point(now)); }
};

struct func_task final : detail::timer_task {
  std::function<void()> fn;
  explicit func_task(std::function<void()> f) : fn(std::move(f)) {}
  void fire(std::int64_t) override { goro::go(fn); }
};

}  // namespace

void sleep(std::chrono::nanoseconds d) {
  if (d.count() <= 0) return;
  if (rt::getg() == nullptr) {
    std::this_thread::sleep_for(d);
    return;
  }
  rt::timesleep(d.count());
}

recv_chan<time_point> after(std::chrono::nanoseconds d) {
  auto c = make_chan<time_point>(1);
  rt::timer* t = detail::timer_new(new chan_task(c));
  detail::timer_start(t, d.count(), 0);
  detail::timer_drop(t);  // the heap keeps it alive until it fires
  return c;
}

timer::timer(std::chrono::nanoseconds d) {
  auto ch = make_chan<time_point>(1);
  c = ch;
  t_ = detail::timer_new(new chan_task(std::move(ch)));
  detail::timer_start(t_, d.count(), 0);
}

timer& timer::operator=(timer&& o) noexcept {
  if (this != &o) {
    detail::timer_drop(t_);
    c = std::move(o.c);
    t_ = std::exchange(o.t_, nullptr);
  }
  return *this;
}

timer::~timer() { detail::timer_drop(t_); }

bool timer::stop() {
  if (t_ == nullptr)
    throw std::logic_error("goro::timer: stop on a moved-from timer");
  return detail::timer_cancel(t_);
}

bool timer::reset(std::chrono::nanoseconds d) {
  if (t_ == nullptr)
    throw std::logic_error("goro::timer: reset on a moved-from timer");
  return detail::timer_start(t_, d.count(), 0);
}

timer after_func(std::chrono::nanoseconds d, std::function<void()> fn) {
  if (!fn) throw std::invalid_argument("goro::after_func: empty function");
  timer tm;
  tm.t_ = detail::timer_new(new func_task(std::move(fn)));
  detail::timer_start(tm.t_, d.count(), 0);
  return tm;
}

ticker::ticker(std::chrono::nanoseconds period) {
  if (period.count() <= 0)
    throw std::invalid_argument("non-positive interval for goro::ticker");
  auto ch = make_chan<time_point>(1);
  c = ch;
  t_ = detail::timer_new(new chan_task(std::move(ch)));
  detail::timer_start(t_, period.count(), period.count());
}

ticker& ticker::operator=(ticker&& o) noexcept {
  if (this != &o) {
    if (t_) {
      detail::timer_cancel(t_);
      detail::timer_drop(t_);
    }
    c = std::move(o.c);
    t_ = std::exchange(o.t_, nullptr);
  }
  return *this;
}

ticker::~ticker() {
  if (t_) {
    detail::timer_cancel(t_);
    detail::timer_drop(t_);
  }
}

void ticker::stop() {
  if (t_) detail::timer_cancel(t_);
}

void ticker::reset(std::chrono::nanoseconds period) {
  if (period.count() <= 0)
    throw std::invalid_argument(
        "non-positive interval for goro::ticker::reset");
  if (t_) detail::timer_start(t_, period.count(), period.count());
}

}  // namespace goro
