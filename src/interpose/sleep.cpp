// sleep.cpp: nanosleep, clock_nanosleep, usleep and sleep, interposed: in
// a goroutine they are a goro sleep (Go's time.Sleep: the goroutine parks
// on its P's timer heap and the thread runs others).
// std::this_thread::sleep_for reaches nanosleep this way.
//
// Results are the kernel's for a sleep that ran to its end: 0, with the
// remaining time untouched (the kernel writes it only after EINTR, which
// a parked goroutine never gets). Arguments the kernel refuses (a
// negative or overlong tv_nsec) get its EINVAL. Relative sleeps are
// measured on the monotonic clock; clock_nanosleep(TIMER_ABSTIME) converts
// the target on the caller's clock into a duration at the call (a wall
// clock change during the sleep does not move it). CPU-time clocks and
// unknown ones go to the kernel. A zero sleep yields the processor.
#undef _FORTIFY_SOURCE
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>

#include "interpose/hook.hpp"
#include "runtime/park.hpp"
#include "runtime/san.hpp"
#include "runtime/timers.hpp"

using goro::rt::sys::real;
using namespace goro::rt::interpose;

namespace goro::rt::interpose {
// Referenced by init(): links this file's definitions (see hook.cpp).
void link_sleep() {}
}  // namespace goro::rt::interpose

// Nothing is interposed under TSan (real.hpp).
#ifndef GORO_HAVE_TSAN

namespace goro::rt::interpose {
namespace {

std::int64_t to_ns(const timespec& ts) {
  if (ts.tv_sec >= INT64_MAX / 1000000000) return INT64_MAX;
  return std::int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

bool valid(const timespec* ts) {
  return ts->tv_sec >= 0 && ts->tv_nsec >= 0 && ts->tv_nsec < 1000000000;
}

void goro_sleep(std::int64_t ns) {
  if (ns <= 0)
    goyield();
  else
    timesleep(ns);
}

}  // namespace
}  // namespace goro::rt::interpose

extern "C" {

int nanosleep(const timespec* req, timespec* rem) {
  if (!active() || req == nullptr || !can_park())
    return real().nanosleep(req, rem);
  if (!valid(req)) {
    *errno_here() = EINVAL;
    return -1;
  }
  goro_sleep(to_ns(*req));
  return 0;
}

int clock_nanosleep(clockid_t clock, int flags, const timespec* req,
                    timespec* rem) {
  bool known = clock == CLOCK_REALTIME || clock == CLOCK_MONOTONIC ||
               clock == CLOCK_BOOTTIME || clock == CLOCK_TAI;
  if (!active() || !known || req == nullptr || !can_park())
    return real().clock_nanosleep(clock, flags, req, rem);
  if (!valid(req)) return EINVAL;  // an error number, not errno
  std::int64_t ns = to_ns(*req);
  if ((flags & TIMER_ABSTIME) != 0) {
    timespec now;
    if (::clock_gettime(clock, &now) != 0) return *errno_here();
    ns = ns == INT64_MAX ? ns : ns - to_ns(now);
    if (ns <= 0) return 0;  // already past: no yield, as the kernel
  }
  goro_sleep(ns);
  return 0;
}

int usleep(useconds_t us) {
  if (!active() || !can_park()) return real().usleep(us);
  goro_sleep(std::int64_t(us) * 1000);
  return 0;
}

unsigned sleep(unsigned s) {
  if (!active() || !can_park()) return real().sleep(s);
  goro_sleep(std::int64_t(s) * 1000000000);
  return 0;
}

}  // extern "C"
#endif  // GORO_HAVE_TSAN
