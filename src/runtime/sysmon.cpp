// sysmon.cpp: the system monitor, a thread without a P (Go's sysmon).
// For now it prints schedtrace; retaking Ps from syscalls, preempting long
// time slices and returning idle stack memory come with the sysmon issue.
#include <pthread.h>
#include <unistd.h>

#include "runtime/nanotime.hpp"
#include "runtime/sched.hpp"

namespace goro::rt {

namespace {

void* sysmon(void*) {
  // Go's back-off: 20 us sleeps, doubling after 50 idle rounds, up to 10 ms.
  std::int64_t lasttrace = 0;
  int idle = 0;
  std::int64_t delay = 0;
  for (;;) {
    if (idle == 0)
      delay = 20;
    else if (idle > 50)
      delay *= 2;
    if (delay > 10 * 1000) delay = 10 * 1000;
    usleep(useconds_t(delay));
    idle++;
    std::int64_t now = nanotime();
    if (debug.schedtrace > 0 &&
        lasttrace + std::int64_t(debug.schedtrace) * 1000000 <= now) {
      lasttrace = now;
      schedtrace(debug.scheddetail > 0);
    }
  }
  return nullptr;
}

}  // namespace

void sysmon_start() {
  {
    lock_guard lk(sched.lock);
    mreserve_id();
    sched.nmsys++;
  }
  pthread_t t;
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
  pthread_attr_setstacksize(&attr, 256 * 1024);
  if (pthread_create(&t, &attr, sysmon, nullptr) != 0) fatal("sysmon: pthread_create");
  pthread_attr_destroy(&attr);
}

}  // namespace goro::rt
