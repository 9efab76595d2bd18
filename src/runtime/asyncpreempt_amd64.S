// asyncpreempt_amd64.S: the two ends of an asynchronous preemption
// (asyncpreempt.cpp).
//
// The preemption signal's handler copies the interrupted context (general
// registers, RFLAGS and the XSAVE image) onto the goroutine's own stack,
// below the red zone, and rewrites the ucontext so that the thread, once
// the handler returns, runs goro_async_preempt_entry on its scheduler
// stack (g0) in ordinary, non-handler context. Layout, from the
// interrupted stack pointer S down:
//
//   [S-128, S)      the red zone, untouched
//   S-136           RIP     \  the three slots the last instructions of
//   S-144           RFLAGS   > goro_async_resume pop (rsp = S-152)
//   S-152           RDI     /
//   ctx (64-aligned): rax rbx rcx rdx rsi rbp r8-r15 (0..104), the slots'
//                   address (112), G (120), M (128), 1 for an XSAVE
//                   image / 0 for FXSAVE (136); the image at ctx+192
//   ctx-64          a goro_mcall frame whose return address is
//                   goro_async_resume+1 and whose rbx is ctx: G.sched_sp
//
// So the scheduler resumes a preempted goroutine with the ordinary
// goro_gogo, which "returns" into goro_async_resume.
//
// The offsets are asyncpreempt_offsets.h's, which the C++ side checks
// against struct async_ctx at compile time.

#include "runtime/asyncpreempt_offsets.h"

// DWARF call-frame opcodes and x86-64 register numbers for .cfi_escape.
#define DW_CFA_def_cfa_expression 0x0f
#define DW_CFA_expression 0x10
#define DW_OP_breg3 0x73 /* rbx + SLEB128 offset */
#define DW_OP_deref 0x06
#define DW_OP_plus_uconst 0x23
#define DWARF_RBX 3
#define DWARF_RBP 6
#define DWARF_R12 12
#define DWARF_R13 13
#define DWARF_R14 14
#define DWARF_R15 15
// A non-negative x < 8192 as a two-byte (S/U)LEB128: fixed-length
// expressions whatever the offsets (asyncpreempt_internal.hpp checks the
// range).
#define LEB2(x) (((x) & 0x7f) | 0x80), (((x) >> 7) & 0x3f)

	.text

// [[noreturn]] goro_async_preempt_entry(G* gp, long kind), rsp = the M's g0_sp.
// Entered by the handler's sigreturn; the outermost frame of g0.
	.globl	goro_async_preempt_entry
	.hidden	goro_async_preempt_entry
	.type	goro_async_preempt_entry, @function
	.p2align 4
goro_async_preempt_entry:
	.cfi_startproc
	.cfi_undefined %rip
	andq	$-16, %rsp
	callq	goro_async_preempted
	ud2
	.cfi_endproc
	.size	goro_async_preempt_entry, .-goro_async_preempt_entry

// Resumes an asynchronously preempted goroutine on its own stack: rbx =
// ctx (from the goro_mcall frame goro_gogo popped). Calls
// goro_async_resumed(ctx) (sanitizer fiber, thread pin), then restores the
// whole context: XRSTOR (all components XCR0 enables; the image's
// XSTATE_BV decides which are loaded), the general registers, then from
// the three slots rdi, RFLAGS and RIP, and `ret $128` steps back over the
// red zone to the interrupted stack pointer.
//
// Where a dump starts unwinding a preempted goroutine (its saved context:
// the return address goro_async_resume+1) and through goro_async_resumed,
// the CFI finds the interrupted code through rbx = ctx: CFA = ctx->slots +
// 152 = S, RIP at S-136, rdi at S-152, rbx, rbp and r12-r15 in ctx (DWARF
// expressions; .cfi_signal_frame tells unwinders that RIP is exact, not a
// return address). From the restore of the registers until the stack
// pointer moves to the slots it is an outermost frame (rip undefined);
// from then on the CFI describes the interrupted code as the caller: CFA =
// S, RIP at S-136, rdi at S-152, every other register in itself. Nothing is read below the stack pointer after it moves,
// so a signal delivered on this stack during the last instructions cannot
// clobber what remains to be restored.
	.globl	goro_async_resume
	.hidden	goro_async_resume
	.type	goro_async_resume, @function
	.p2align 4
goro_async_resume:
	.cfi_startproc
	.cfi_signal_frame
	// CFA = *(rbx + ASYNC_CTX_SLOTS) + ASYNC_SLOTS_BELOW_SP
	// (DW_CFA_def_cfa_expression: DW_OP_breg3, DW_OP_deref,
	// DW_OP_plus_uconst), then each callee-saved register at rbx + its
	// offset (DW_CFA_expression: DW_OP_breg3).
	.cfi_escape DW_CFA_def_cfa_expression, 7, DW_OP_breg3, LEB2(ASYNC_CTX_SLOTS), DW_OP_deref, DW_OP_plus_uconst, LEB2(ASYNC_SLOTS_BELOW_SP)
	.cfi_offset %rip, -ASYNC_SLOT_RIP
	.cfi_offset %rdi, -ASYNC_SLOT_RDI
	.cfi_escape DW_CFA_expression, DWARF_RBX, 3, DW_OP_breg3, LEB2(ASYNC_CTX_RBX)
	.cfi_escape DW_CFA_expression, DWARF_RBP, 3, DW_OP_breg3, LEB2(ASYNC_CTX_RBP)
	.cfi_escape DW_CFA_expression, DWARF_R12, 3, DW_OP_breg3, LEB2(ASYNC_CTX_R12)
	.cfi_escape DW_CFA_expression, DWARF_R13, 3, DW_OP_breg3, LEB2(ASYNC_CTX_R13)
	.cfi_escape DW_CFA_expression, DWARF_R14, 3, DW_OP_breg3, LEB2(ASYNC_CTX_R14)
	.cfi_escape DW_CFA_expression, DWARF_R15, 3, DW_OP_breg3, LEB2(ASYNC_CTX_R15)
	nop			// the return address is goro_async_resume+1
	movq	%rbx, %rdi
	callq	goro_async_resumed
	// rbx is about to be overwritten: outermost until rsp moves.
	.cfi_undefined %rip
	.cfi_same_value %rbx
	.cfi_same_value %rbp
	.cfi_same_value %r12
	.cfi_same_value %r13
	.cfi_same_value %r14
	.cfi_same_value %r15
	.cfi_same_value %rdi
	movq	%rbx, %rdi
	movl	$-1, %eax
	movl	$-1, %edx
	cmpq	$0, ASYNC_CTX_XSAVE(%rdi)
	je	1f
	xrstor64 ASYNC_CTX_SIZE(%rdi)
	jmp	2f
1:	fxrstor64 ASYNC_CTX_SIZE(%rdi)
2:	movq	ASYNC_CTX_RAX(%rdi), %rax
	movq	ASYNC_CTX_RBX(%rdi), %rbx
	movq	ASYNC_CTX_RCX(%rdi), %rcx
	movq	ASYNC_CTX_RDX(%rdi), %rdx
	movq	ASYNC_CTX_RSI(%rdi), %rsi
	movq	ASYNC_CTX_RBP(%rdi), %rbp
	movq	ASYNC_CTX_R8(%rdi), %r8
	movq	ASYNC_CTX_R9(%rdi), %r9
	movq	ASYNC_CTX_R10(%rdi), %r10
	movq	ASYNC_CTX_R11(%rdi), %r11
	movq	ASYNC_CTX_R12(%rdi), %r12
	movq	ASYNC_CTX_R13(%rdi), %r13
	movq	ASYNC_CTX_R14(%rdi), %r14
	movq	ASYNC_CTX_R15(%rdi), %r15
	movq	ASYNC_CTX_SLOTS(%rdi), %rsp
	.cfi_def_cfa %rsp, ASYNC_SLOTS_BELOW_SP
	.cfi_offset %rip, -ASYNC_SLOT_RIP
	.cfi_offset %rdi, -ASYNC_SLOT_RDI
	popq	%rdi
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rdi
	popfq
	.cfi_adjust_cfa_offset -8
	ret	$ASYNC_RED_ZONE
	.cfi_endproc
	.size	goro_async_resume, .-goro_async_resume

	.section .note.GNU-stack,"",@progbits
