// signal_unix.hpp: the SIGSEGV/SIGBUS handler that turns a goroutine stack
// overflow into Go's report (Go's signal_unix.go), and the per-thread
// alternate signal stack it runs on.
#pragma once

#include <cstdint>

namespace goro::rt {

struct G;

// Per-thread set-up for the overflow handler (the alternate signal stack).
void minit_signals();
// Installs the SIGSEGV/SIGBUS handler that reports goroutine overflow. Other
// faults go to the handler that was installed before, or to the default.
void install_overflow_handler();
// Prints Go's "goroutine stack exceeds N-byte limit" report for gp (sp: the
// stack pointer seen) and exits 2. The first lines are written
// async-signal-safely; then, given the faulting context (uctx, from the
// SIGSEGV handler; null from the canary check), the top frames of the
// overflowing goroutine, symbolized on a stack mapped for it, which is
// not async-signal-safe (it allocates): an alarm ends the process if that
// hangs (the fault hit inside malloc or stdio, holding their lock).
[[noreturn]] void report_stack_overflow(G* gp, std::uintptr_t sp,
                                        void* uctx = nullptr);

}  // namespace goro::rt
