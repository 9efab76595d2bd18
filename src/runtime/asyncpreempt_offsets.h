/* asyncpreempt_offsets.h: the layout asyncpreempt_amd64.S and the signal
 * handler (asyncpreempt.cpp) share. Plain #defines, so that the assembly
 * (preprocessed: capital .S) can use them; asyncpreempt_internal.hpp checks
 * every ASYNC_CTX_* against struct async_ctx at compile time, so the two
 * sides cannot drift apart. */
#ifndef GORO_RUNTIME_ASYNCPREEMPT_OFFSETS_H
#define GORO_RUNTIME_ASYNCPREEMPT_OFFSETS_H

/* struct async_ctx (64-aligned, on the goroutine's stack). */
#define ASYNC_CTX_RAX 0
#define ASYNC_CTX_RBX 8
#define ASYNC_CTX_RCX 16
#define ASYNC_CTX_RDX 24
#define ASYNC_CTX_RSI 32
#define ASYNC_CTX_RBP 40
#define ASYNC_CTX_R8 48
#define ASYNC_CTX_R9 56
#define ASYNC_CTX_R10 64
#define ASYNC_CTX_R11 72
#define ASYNC_CTX_R12 80
#define ASYNC_CTX_R13 88
#define ASYNC_CTX_R14 96
#define ASYNC_CTX_R15 104
#define ASYNC_CTX_SLOTS 112 /* address of the three slots below the SP */
#define ASYNC_CTX_G 120
#define ASYNC_CTX_M 128
#define ASYNC_CTX_XSAVE 136 /* 1: XSAVE image, 0: FXSAVE image */
/* sizeof(async_ctx): the FXSAVE/XSAVE image starts here (64-aligned, as
 * XRSTOR requires). */
#define ASYNC_CTX_SIZE 192

/* Below the interrupted stack pointer S: the red zone (the System V ABI's
 * 128 bytes, never touched), then three slots that goro_async_resume pops
 * last: RIP at S-136, RFLAGS at S-144, RDI at S-152. */
#define ASYNC_RED_ZONE 128
#define ASYNC_SLOT_RIP 136       /* S - 136 */
#define ASYNC_SLOT_RFLAGS 144    /* S - 144 */
#define ASYNC_SLOT_RDI 152       /* S - 152 */
#define ASYNC_SLOTS_BELOW_SP 152 /* red zone + 3 slots: rsp = S - 152 */

#endif
