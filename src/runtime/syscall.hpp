// syscall.hpp: blocking calls (syscall.cpp: entersyscall, exitsyscall,
// entersyscallblock, handoffp).
#pragma once

#include "runtime/g.hpp"
#include "runtime/p.hpp"

namespace goro::rt {

void entersyscall();
void entersyscallblock();
void exitsyscall();
// exitsyscall's fast path: take oldp back if it is still in _Psyscall, else
// any idle P. False (and no P) when there is none or a stop-the-world is
// pending.
bool exitsyscall_takep(P* oldp);
// On g0, gp (mp's curg) back from a system call and no P taken: run it on
// an idle P, or queue it and park the thread (waiting for gp itself if the
// thread is locked to it). Go's exitsyscall0.
[[noreturn]] void exitsyscall_nop(M* mp, G* gp);
void handoffp(P* pp);
// A goroutine that yields inside a goro::blocking region leaves the syscall
// state for the switch and re-enters it after resuming. (Parking inside a
// region is handled by park_m, after the waiter's lock is released.)
struct syscall_suspend {
  bool active;
  explicit syscall_suspend(G* gp)
      : active(gp != nullptr && readgstatus(gp) == g_syscall) {
    if (active) exitsyscall();
  }
  ~syscall_suspend() {
    if (active) entersyscall();
  }
  syscall_suspend(const syscall_suspend&) = delete;
  syscall_suspend& operator=(const syscall_suspend&) = delete;
};

}  // namespace goro::rt
