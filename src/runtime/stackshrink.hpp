// stackshrink.hpp: giving back the memory of idle goroutines' stacks.
//
// Go shrinks the stack of a goroutine that uses little of it (copystack at
// GC time). goro cannot move a stack, so it releases the pages instead: once
// a goroutine has been parked longer than GORO_DEBUG=stackrelease ms, its
// live bytes (from its saved stack pointer to the top, usually a few hundred)
// are copied into a small heap buffer and its pages are returned to the OS.
// The same addresses are filled again before anything touches them: the
// owner restores its stack before it runs (execute -> stack_restore), and a
// touch by anyone else (a waker walking a channel's wait queue through the
// sudog in the parked frame, a wait_group on a parent's stack, a read() into
// a buffer on it) faults into userfaultfd, whose handler thread restores it.
// Details and invariants: docs/design.md §8 ("A stack's life").
#pragma once

#include <cstddef>
#include <cstdint>

namespace goro::rt {

struct G;

// G.stk_saved values besides 0 (resident) and a buffer pointer tagged in
// its low bits (buffers are 16-byte aligned).
constexpr std::uintptr_t stack_releasing = 1;
constexpr std::uintptr_t stack_released_tag = 2;
constexpr std::uintptr_t stack_restoring_tag = 3;
constexpr std::uintptr_t stack_tag_mask = 15;

// A new chunk of `n` default-size stacks at `base` (stack.cpp, under its
// chunk lock); `guarded`: its guard pages are madvise guard markers.
void stackshrink_chunk(char* base, std::size_t n, std::size_t stride,
                       bool guarded);
// The chunk stacks are being carved from now (not released while carving).
void stackshrink_carving(char* base);
// sysmon, about once a second: releases the stacks of chunks whose every
// goroutine has been parked longer than the threshold, and unregisters
// chunks that are fully restored. Returns the stacks released.
std::size_t stackshrink_release();
// Restores gp's stack if it is released (or waits while it is being
// released or restored by another thread). Called by execute before gp
// runs, and by the fault handler.
void stack_restore_slow(G* gp);
// Threads the runtime started for this (the fault handler: 0 or 1), which
// checkdead must not take for plain threads that might still act.
int stackshrink_threads();
// Stacks released now, and whether release works on this system.
std::uint64_t stacks_released_now();
bool stack_release_available();

}  // namespace goro::rt
