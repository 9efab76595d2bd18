// asyncpreempt_internal.hpp: what the files of asynchronous preemption
// share (not for the rest of the runtime, which uses asyncpreempt.hpp):
//   asyncpreempt.cpp      the signal handler (Go's doSigPreempt), its
//                         installation, preemptM, and the two C entry
//                         points asyncpreempt_amd64.S calls;
//   asyncsafepoint.cpp    which PCs may be interrupted (Go's
//                         isAsyncSafePoint) and the debug API that adds
//                         code to them;
//   asyncpreempt_pin.cpp  requeueing a preempted goroutine pinned to its
//                         thread, and preemption deferred to an OS unlock;
//   sigtraceback.cpp      a goroutine dump's traceback request, answered
//                         by the same handler.
#pragma once

#include <signal.h>
#include <sys/types.h>
#include <ucontext.h>

#include <cstddef>
#include <cstdint>
#include <mutex>

#include "runtime/asyncpreempt.hpp"
#include "runtime/asyncpreempt_offsets.h"

extern "C" {
// asyncpreempt_amd64.S.
void goro_async_preempt_entry();
void goro_async_resume();
}

namespace goro::rt {

// The saved context, on the goroutine's stack (layout in
// asyncpreempt_amd64.S, which reads it with the offsets of
// asyncpreempt_offsets.h, checked below).
struct alignas(64) async_ctx {
  std::uint64_t rax, rbx, rcx, rdx, rsi, rbp;
  std::uint64_t r8, r9, r10, r11, r12, r13, r14, r15;
  std::uint64_t slots;  // S - 152: rdi, rflags, rip
  G* g;
  M* m;
  std::uint64_t xsave;  // 1: XSAVE image, 0: FXSAVE image
  std::uint64_t pad[6];
};
static_assert(sizeof(async_ctx) == ASYNC_CTX_SIZE);
static_assert(offsetof(async_ctx, rax) == ASYNC_CTX_RAX);
static_assert(offsetof(async_ctx, rbx) == ASYNC_CTX_RBX);
static_assert(offsetof(async_ctx, rcx) == ASYNC_CTX_RCX);
static_assert(offsetof(async_ctx, rdx) == ASYNC_CTX_RDX);
static_assert(offsetof(async_ctx, rsi) == ASYNC_CTX_RSI);
static_assert(offsetof(async_ctx, rbp) == ASYNC_CTX_RBP);
static_assert(offsetof(async_ctx, r8) == ASYNC_CTX_R8);
static_assert(offsetof(async_ctx, r9) == ASYNC_CTX_R9);
static_assert(offsetof(async_ctx, r10) == ASYNC_CTX_R10);
static_assert(offsetof(async_ctx, r11) == ASYNC_CTX_R11);
static_assert(offsetof(async_ctx, r12) == ASYNC_CTX_R12);
static_assert(offsetof(async_ctx, r13) == ASYNC_CTX_R13);
static_assert(offsetof(async_ctx, r14) == ASYNC_CTX_R14);
static_assert(offsetof(async_ctx, r15) == ASYNC_CTX_R15);
static_assert(offsetof(async_ctx, slots) == ASYNC_CTX_SLOTS);
static_assert(offsetof(async_ctx, g) == ASYNC_CTX_G);
static_assert(offsetof(async_ctx, m) == ASYNC_CTX_M);
static_assert(offsetof(async_ctx, xsave) == ASYNC_CTX_XSAVE);
static_assert(ASYNC_CTX_SIZE % 64 == 0,
              "the image after it must be 64-aligned");
static_assert(ASYNC_SLOTS_BELOW_SP == ASYNC_RED_ZONE + 3 * 8);
// The .S encodes these in its CFI as two-byte LEB128s (LEB2).
static_assert(ASYNC_CTX_SLOTS < 8192 && ASYNC_SLOTS_BELOW_SP < 8192 &&
              ASYNC_CTX_R15 < 8192);
static_assert(ASYNC_SLOT_RIP == ASYNC_RED_ZONE + 8);
static_assert(ASYNC_SLOT_RFLAGS == ASYNC_RED_ZONE + 16);
static_assert(ASYNC_SLOT_RDI == ASYNC_RED_ZONE + 24);

// The handler's installation (asyncpreempt.cpp). install_mu guards
// installing the handler and appending preemptible ranges; the others are
// written under it before the handler is installed and read-only after.
extern std::mutex install_mu;
extern bool installed;   // the handler is installed
extern int preempt_sig;  // SIGURG, or GORO_DEBUG=asyncpreemptsig
extern pid_t self_pid;   // for tgkill

// asyncsafepoint.cpp. pc may be interrupted (async-signal-safe).
bool pc_preemptible(std::uintptr_t pc);
// Makes the main executable's code preemptible (minus goro's own code and
// the PLT) unless GORO_DEBUG=asyncpreemptmain=0; false if goro's code
// cannot be told apart from it. Caller holds install_mu.
bool compute_ranges();

// asyncsafepoint.cpp. Records where goro's own code is (caller holds
// install_mu, before the handler is installed); pc_in_goro is
// async-signal-safe.
void compute_goro_code();
bool pc_in_goro(std::uintptr_t pc);

// What the handler's redirection runs on g0 (goro_async_preempted's second
// argument, left in rsi for goro_async_preempt_entry).
enum async_entry : long {
  async_entry_preempt = 0,  // requeue the goroutine (requeue_pinned)
  async_entry_syscall = 1,  // run its blocked system call (blockedsyscall)
};
// asyncpreempt.cpp. In the handler: saves gp's interrupted context on its
// stack and makes sigreturn land on g0 in goro_async_preempted(gp, kind);
// false (nothing changed) if the context cannot be saved there.
bool save_and_redirect(M* mp, G* gp, ucontext_t* uc, async_entry kind);
// The context save_and_redirect saved for gp (through G.sched_sp).
async_ctx* saved_ctx(G* gp);
// Sends the preemption signal to mp's thread unless one is pending (then
// false).
bool signalM(M* mp);

// blockedsyscall.cpp. In the handler: if gp is blocked in (or about to
// make) a system call the runtime was not told about, redirects it so that
// g0 makes the call with the P handed off (then true).
bool try_blocked_syscall(M* mp, G* gp, ucontext_t* uc);
// On g0 after that redirection: the call, between entersyscall and
// exitsyscall, then gp resumes on this thread.
[[noreturn]] void blocked_syscall_m(M* mp, G* gp);

// asyncpreempt_pin.cpp. On g0, gp just switched out: requeue it pinned to
// mp's thread and schedule.
[[noreturn]] void requeue_pinned(M* mp, G* gp);
// On gp's stack, resumed on mp: drops the pin requeue_pinned set.
void unpin(M* mp, G* gp);

// sigtraceback.cpp. In the handler: answers a dump's traceback request if
// one was made of this thread (then true, and the signal does not
// preempt). Async-signal-safe.
bool traceback_request(M* mp, ucontext_t* uc);

}  // namespace goro::rt
