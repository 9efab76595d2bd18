// context_amd64.S: the goroutine context switch for x86-64 System V.
//
// A switched-out goroutine's context is on its own stack: the callee-saved
// registers (rbp, rbx, r12-r15), then MXCSR and the x87 control word (both
// callee-saved in the SysV ABI), with the saved stack pointer in G.sched_sp.
// The scheduler stack (g0) is never resumed: goro_mcall always starts the
// scheduler afresh at the top of g0, so a switch costs one save (goroutine
// to g0) and one restore (g0 to goroutine), as Go's mcall/gogo.
//
// Unwind info: goro_mcall and goro_gogo describe their frames with CFI so
// debuggers and the C++ unwinder can walk a goroutine's frames; the frames
// that start a stack (goro_gstart, and g0's side of goro_mcall) mark the
// return address undefined, which ends a backtrace cleanly.

	.text

// void goro_mcall(void** save_sp, void* g0_sp, void (*fn)(void*), void* arg)
//   Saves the caller's context, stores its stack pointer in *save_sp,
//   switches to g0_sp and calls fn(arg), which never returns. Resuming the
//   saved context (goro_gogo) returns from goro_mcall.
	.globl	goro_mcall
	.type	goro_mcall, @function
	.p2align 4
goro_mcall:
	.cfi_startproc
	pushq	%rbp
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbp, 0
	pushq	%rbx
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %rbx, 0
	pushq	%r12
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r12, 0
	pushq	%r13
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r13, 0
	pushq	%r14
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r14, 0
	pushq	%r15
	.cfi_adjust_cfa_offset 8
	.cfi_rel_offset %r15, 0
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	stmxcsr	(%rsp)
	fnstcw	4(%rsp)
	movq	%rsp, (%rdi)
	// Now on g0: a fresh frame whose return address is undefined.
	movq	%rsi, %rsp
	.cfi_def_cfa %rsp, 8
	.cfi_undefined %rip
	movq	%rcx, %rdi
	callq	*%rdx
	ud2
	.cfi_endproc
	.size	goro_mcall, .-goro_mcall

// [[noreturn]] void goro_gogo(void* sp)
//   Resumes a context saved by goro_mcall (or prepared by
//   goro_prepare_stack): goro_mcall returns in that goroutine.
	.globl	goro_gogo
	.type	goro_gogo, @function
	.p2align 4
goro_gogo:
	.cfi_startproc
	movq	%rdi, %rsp
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	popq	%r15
	popq	%r14
	popq	%r13
	popq	%r12
	popq	%rbx
	popq	%rbp
	ret
	.cfi_endproc
	.size	goro_gogo, .-goro_gogo

// The first frame of every goroutine. goro_gogo "returns" here with the G
// in rbx (prepared by the runtime); it calls goro_gentry(G*), which runs
// the goroutine and never returns. The undefined return address makes this
// the outermost frame of a goroutine backtrace.
	.globl	goro_gstart
	.type	goro_gstart, @function
	.p2align 4
goro_gstart:
	.cfi_startproc
	.cfi_undefined %rip
	xorl	%ebp, %ebp
	movq	%rbx, %rdi
	andq	$-16, %rsp
	callq	goro_gentry
	ud2
	.cfi_endproc
	.size	goro_gstart, .-goro_gstart

	.section .note.GNU-stack,"",@progbits
