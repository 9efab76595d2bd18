// traceback.hpp: goroutine dumps (Go's traceback.go: goroutineheader,
// traceback, tracebackothers; runtime.Stack; the SIGQUIT dump).
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace goro::rt {

struct G;

// One goroutine, in Go's layout:
//   goroutine 7 [chan receive]:
//   main_loop(int)
//   	/path/to/program +0x1d
//   ...
//   created by worker_pool::start in goroutine 1
//   	/path/to/program +0x5c
// The calling goroutine's frames come from its own stack; a switched-out
// goroutine's from its saved context (it must not run meanwhile: the world
// is stopped, or everything is parked); one running on another thread, or
// in a blocking call, shows no frames unless `interrupt` (below).
std::string goroutine_trace(G* gp);
// The same with frames collected before (pcs, innermost first, return
// addresses already moved back into their calls): a panic's, from where
// it was thrown; a stack overflow's, from the faulting context.
// `truncated`: the stack goes on past pcs ("...additional frames
// elided..."). `note`, if set, is printed right after the header line.
std::string goroutine_trace_at(G* gp, const std::uintptr_t* pcs, int n,
                               bool truncated, const char* note = nullptr);
// The same for a goroutine running (or blocked in a call) on another
// thread, whose frames are asked of that thread with a signal.
std::string running_goroutine_trace(G* gp);

// The goroutine a dump is unwinding on its own stack, or null; execute
// waits while it names the goroutine it is about to resume (scan_wait).
extern std::atomic<G*> scan_g;
void scan_wait(G* gp);
// A full barrier on every thread of the process: the slow side of the
// asymmetric Dekker handshakes with execute (scan_g above, stack release in
// stackshrink.cpp), whose side is a compiler barrier.
void heavy_fence();
// Every goroutine (the caller's first), blank-line separated. interrupt:
// goroutines running on other threads, or in blocking calls, are asked for
// their frames with a signal to their thread (signal_traceback), which
// makes a blocking call that the kernel does not restart after a handler
// (nanosleep, poll, epoll_wait, ...) fail with EINTR: only for the dumps
// after which the process exits (SIGQUIT, fatal errors).
std::string all_goroutines_trace(bool interrupt = false);

// GORO_TRACEBACK=none|single|all|system (Go's GOTRACEBACK): what fatal
// errors print after their message. 0 none, 1 single (the current
// goroutine), 2 all, 3 system (all, with the runtime's own frames).
// Default: all for runtime fatal errors (deadlock), single for panics.
int traceback_level(int fallback);
// For fatal errors: the dump the level asks for, written to stderr.
void print_fatal_traceback(int fallback);

// A fatal error followed by the goroutine dump the level asks for (all by
// default), as Go prints after "fatal error: all goroutines are asleep".
// For fatal errors where every goroutine is switched out (deadlock).
[[noreturn]] void fatal_dump(const char* msg);

// SIGQUIT: print every goroutine and exit 2, from sysmon (the handler only
// flags it). Installed by schedinit.
void sigquit_install();
// Called by sysmon each round: does the dump if SIGQUIT arrived.
void sigquit_check();

}  // namespace goro::rt
