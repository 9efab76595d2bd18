// context.hpp: the assembly context switch (context_amd64.S) and the
// sanitizer fiber annotations around it.
#pragma once

#include <cstdint>

#include "runtime/g.hpp"

extern "C" {
void goro_mcall(void** save_sp, void* g0_sp, void (*fn)(void*), void* arg);
[[noreturn]] void goro_gogo(void* sp);
void goro_gstart();
[[noreturn]] void goro_gentry(goro::rt::G* gp);
}

namespace goro::rt {

// Prepares a new goroutine's stack so that goro_gogo(gp->sched_sp) enters
// goro_gstart (after its leading nop) with gp in rbx. `top` is the highest
// usable address (16-byte aligned) below the goroutine's closure.
inline void prepare_stack(G* gp, std::uintptr_t top) {
  // Frame as goro_mcall leaves it: [mxcsr|fcw][r15][r14][r13][r12][rbx][rbp]
  // [return address]. The return address slot is at top-16 so that after
  // `ret` the stack pointer is top-8, like a normal function entry.
  auto* sp = reinterpret_cast<std::uint64_t*>(top - 16 - 7 * 8);
  sp[0] = (std::uint64_t(0x037F) << 32) | 0x1F80;
  sp[1] = 0;                                    // r15
  sp[2] = 0;                                    // r14
  sp[3] = 0;                                    // r13
  sp[4] = 0;                                    // r12
  sp[5] = reinterpret_cast<std::uint64_t>(gp);  // rbx
  sp[6] = 0;                                    // rbp
  // Return address: goro_gstart+1, past its nop, so that an unwinder's
  // lookup of (return address - 1) stays inside goro_gstart.
  sp[7] = reinterpret_cast<std::uint64_t>(&goro_gstart) + 1;
  gp->sched_sp = sp;
}

}  // namespace goro::rt
