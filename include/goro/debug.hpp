// debug.hpp: scheduler statistics for demos and diagnostics.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace goro::debug {

struct p_stats {
  int id;
  std::uint64_t goroutines_run;     // dispatches on this P
  std::uint64_t goroutines_stolen;  // goroutines this P stole from others
};

// One entry per P (counts since the runtime started).
std::vector<p_stats> per_p_stats();

// Goroutine memory (the stack part of Go's runtime.MemStats). A goroutine
// gets its stack when it first runs, so goroutines that are queued but
// have not started yet hold a G and no stack.
struct mem_stats {
  std::uint64_t stacks;     // goroutine stacks reserved now (in use or cached)
  std::uint64_t stack_sys;  // bytes of address space they reserve
  std::uint64_t gs;         // G records allocated (never freed, as Go's allgs)
  // Stacks of long-parked goroutines whose memory is released now
  // (GORO_DEBUG=stackrelease; their live bytes are kept on the heap).
  std::uint64_t stacks_released;
};
mem_stats read_mem_stats();

// Asynchronous (signal-based) preemption of goroutines running call-free
// code in the main executable: on by default, as in Go. GORO_DEBUG=
// asyncpreempt=0 starts with it off, GORO_DEBUG=asyncpreemptoff=1 keeps it
// off whatever asks. set_async_preempt turns it on or off at run time
// (starting the runtime if needed) and returns the previous setting;
// turning it on has no effect where it is unsupported (TSan builds,
// asyncpreemptoff=1, goro's code not told apart from the executable's),
// which async_preempt_enabled() then shows.
bool set_async_preempt(bool on);
bool async_preempt_enabled();

// Sets the time slice (goro::options::time_slice) while the runtime runs,
// starting it if needed; returns the previous one. 100us to 10s, else
// std::invalid_argument.
std::chrono::nanoseconds set_time_slice(std::chrono::nanoseconds d);

// More preemptible code. Only the main executable's code is interrupted by
// default (GORO_DEBUG=asyncpreemptmain=0: not even that, only what is
// added here). add_async_preempt_library adds the code of the loaded
// object (a shared library of yours) that contains `addr`, e.g. the
// address of one of its functions, minus its PLT; system libraries (libc,
// libstdc++, libgcc_s, libm, the loader) and goro itself are refused.
// add_async_preempt_range adds [begin, end), e.g. a section of marked
// functions: `__attribute__((section("hot_loops")))` on each, then
// add_async_preempt_range(__start_hot_loops, __stop_hot_loops). Both throw
// std::invalid_argument for bad input (no such object, a system library,
// an empty range, one covering goro's code, more than 64 ranges in all).
// Ranges cannot be removed.
void add_async_preempt_library(const void* addr);
void add_async_preempt_range(const void* begin, const void* end);

struct preempt_stats {
  std::uint64_t signals_sent;      // preemption signals sent by the runtime
  std::uint64_t signals_received;  // handler runs on goro's threads
  std::uint64_t preempted;         // goroutines preempted asynchronously
  std::uint64_t rejected_pc;       // signals that found non-preemptible code
  // Signals that found the goroutine holding an OS lock (a std::mutex...):
  // the preemption waits for the unlock that releases its last one.
  std::uint64_t deferred_oslock;
  std::uint64_t preempted_at_unlock;  // of `preempted`, done at that unlock
  // Signals that found the thread inside goro's runtime holding one of its
  // locks, e.g. in the program's move constructor called by a channel
  // operation under the channel's lock: never preempted there (Go's rule).
  std::uint64_t deferred_runtime_lock;
  // Signals sysmon sent to a thread it found off the CPUs for a goroutine's
  // whole run (GORO_DEBUG=blockedsyscall), and the system calls the handler
  // then found the thread blocked in and handed its P off from.
  std::uint64_t blocked_signalled;
  std::uint64_t blocked_handoffs;
};
preempt_stats read_preempt_stats();

// The number of OS locks (pthread mutexes, rwlocks and spin locks: what
// std::mutex, std::shared_mutex and most C and C++ locks are built on) the
// calling goroutine holds, as libgoro counts them to keep asynchronous
// preemption out of critical sections; 0 outside a goroutine and in TSan
// builds (which do not count).
int os_locks_held();

// Goroutine stack traces as Go prints them (runtime.Stack(buf, all)): the
// calling goroutine's, or with all = true every goroutine's, the caller's
// first. all stops the world while it reads them (running goroutines reach
// a safe point first). Each goroutine is
//   goroutine 7 [chan receive]:
//   consumer(goro::chan<int>)(...)
//   	/path/to/program +0x4d
//   created by main_body() in goroutine 1
//   	/path/to/program +0x1a2
// with function names from the symbol tables of the executable and its
// shared libraries (no -rdynamic needed; no file:line, which needs DWARF).
// Frames of goro's runtime are left out. The same dump is printed on
// SIGQUIT (then the process exits with status 2, as Go) and after
// "fatal error: all goroutines are asleep - deadlock!"; GORO_TRACEBACK=
// none|single|all chooses what fatal errors print (Go's GOTRACEBACK).
std::string stack(bool all = false);

}  // namespace goro::debug
