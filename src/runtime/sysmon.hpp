// sysmon.hpp: the system monitor thread (sysmon.cpp: sysmon, retake).
#pragma once

#include <atomic>

namespace goro::rt {

void sysmon_start();
// Wakes sysmon from its all-idle deep sleep (called when work starts).
void sysmon_wake_if_waiting();
extern std::atomic<bool> sysmonwait;

}  // namespace goro::rt
