// blockedsyscall.hpp: system calls goro was not told about
// (blockedsyscall.cpp): sysmon's detection of a thread blocked in one.
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "runtime/p.hpp"

namespace goro::rt {

// CPU time consumed so far by thread tid, in ns; -1 if unknown (the thread
// is gone). One system call.
std::int64_t thread_cpu_ns(pid_t tid);

// sysmon, for a P running one goroutine (dispatch nrun) since nrunwhen:
// samples its thread's CPU clock now and then, and signals the thread when
// it has stayed off the CPUs for GORO_DEBUG=blockedsyscall us, so that the
// handler hands the P off if the thread is in a system call.
void sysmon_check_blocked(P* pp, std::uint64_t nrun, std::int64_t nrunwhen,
                          std::int64_t now);

}  // namespace goro::rt
