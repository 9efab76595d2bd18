// proc.hpp: start-up and configuration (proc.cpp: schedinit, GORO_DEBUG,
// goids; cpu.cpp: the CPUs this process may use).
#pragma once

#include <cstdint>

#include "runtime/p.hpp"

namespace goro {
struct options;
}

namespace goro::rt {

void schedinit(const goro::options* opt);

// GORO_DEBUG settings (Go's GODEBUG for the scheduler).
struct debug_vars {
  int schedtrace = 0;  // ms between schedtrace lines; 0: off
  int scheddetail = 0;
  int asyncpreempt = 1;         // 0: async (signal) preemption off at start
  int asyncpreemptoff = 0;      // 1: async preemption off, even if asked for
  int asyncpreemptsig = 0;      // the preemption signal; 0: SIGURG
  int asyncpreemptmain = 1;     // 0: the main executable is not preemptible
  int asyncpreemptmigrate = 0;  // 1: no pin after a signal preemption
  // A goroutine parking while it holds an OS lock: 0 silent, 1 reported
  // once per stack, 2 fatal.
  int oslockpark = 1;
  // ms a goroutine may run without a safe point before sysmon reports
  // it (once per run); 0: never.
  int longrunning = 0;  // off by default: Go has no such report
  // us a goroutine's thread may stay off the CPUs (blocked in a system
  // call goro was not told about) before its P is handed off; 0: never.
  int blockedsyscall = 1000;
  // ms goroutines may wait for a P whose thread stays blocked in the kernel
  // where it cannot be handed off, before sysmon reports it (once per run,
  // with the goroutine's stack); 0: never. blockedfatal=1: the report is a
  // fatal error.
  int blockedreport = 1000;
  int blockedfatal = 0;
  // ms a goroutine must stay parked before the memory of its stack may be
  // released (stackshrink.cpp; whole chunks of stacks at a time); 0: never.
  int stackrelease = 60000;
  // 0: blocking socket, pipe, poll and sleep calls made in goroutines go
  // to the kernel as they are, instead of parking on the poller
  // (interpose/).
  int interpose = 1;
};
extern debug_vars debug;
extern std::int64_t runtime_init_time;
std::uint64_t newgoid(P* pp);

int default_gomaxprocs();
int usable_cpus();
int usable_cpus_cached();

}  // namespace goro::rt
