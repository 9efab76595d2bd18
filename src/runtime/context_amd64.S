// context_amd64.S: the goroutine context switch for x86-64 System V.
//
// A switched-out goroutine's context is on its own stack: the callee-saved
// registers (rbp, rbx, r12-r15), then MXCSR and the x87 control word (both
// callee-saved in the SysV ABI), with the saved stack pointer in G.sched_sp.
// The scheduler stack (g0) is never resumed: goro_mcall always starts the
// scheduler afresh at the top of g0, so a switch costs one save (goroutine
// to g0) and one restore (g0 to goroutine), as Go's mcall/gogo.
//
// Unwind info: the CFI is exact at every instruction, because a signal (a
// profiler, a goroutine dump, async preemption) may land on any of them and
// unwind from there (tests/switch_cfi_test.cpp single-steps each one):
//  - on a goroutine's stack it describes the goroutine's frames: in
//    goro_mcall the caller being saved, in goro_gogo (once rsp points at the
//    saved context) the goroutine being resumed, whose registers are read
//    from the saved context until they are popped;
//  - the frames that start a stack (g0's side of goro_mcall, goro_gstart)
//    mark the return address undefined, which ends a backtrace cleanly.
//
// No CET: the switch returns to addresses that no call pushed on the
// current shadow stack, and has no endbr64 landing pads, so this object
// deliberately carries no .note.gnu.property claiming SHSTK or IBT; the
// linker then drops those claims from any program that links it.

// The routines are hidden (not exported from libgoro.so): they are not API,
// and references to them from the runtime resolve inside the library (the
// +1 on goro_gstart's address in prepare_stack must not land in a PLT).

	.text

// void goro_mcall(void** save_sp, void* g0_sp, void (*fn)(void*), void* arg)
//   Saves the caller's context, stores its stack pointer in *save_sp,
//   switches to g0_sp and calls fn(arg), which never returns. Resuming the
//   saved context (goro_gogo) returns from goro_mcall.
	.globl	goro_mcall
	.hidden	goro_mcall
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
	// Now on g0: a fresh frame whose return address is undefined (no
	// caller, so the saved registers' rules are dropped too).
	movq	%rsi, %rsp
	.cfi_def_cfa %rsp, 8
	.cfi_undefined %rip
	.cfi_restore %rbp
	.cfi_restore %rbx
	.cfi_restore %r12
	.cfi_restore %r13
	.cfi_restore %r14
	.cfi_restore %r15
	movq	%rcx, %rdi
	callq	*%rdx
	ud2
	.cfi_endproc
	.size	goro_mcall, .-goro_mcall

// [[noreturn]] void goro_gogo(void* sp)
//   Resumes a context saved by goro_mcall (or prepared by
//   goro_prepare_stack): goro_mcall returns in that goroutine.
	.globl	goro_gogo
	.hidden	goro_gogo
	.type	goro_gogo, @function
	.p2align 4
goro_gogo:
	.cfi_startproc
	// Until rsp moves: the caller (execute, on g0), as at any entry.
	movq	%rdi, %rsp
	// From here: the goroutine's goro_mcall frame, [mxcsr|fcw][r15][r14]
	// [r13][r12][rbx][rbp][return address], as if goro_mcall were about
	// to return in it. Each pop moves a register back to its own value.
	.cfi_def_cfa %rsp, 64
	.cfi_offset %rbp, -16
	.cfi_offset %rbx, -24
	.cfi_offset %r12, -32
	.cfi_offset %r13, -40
	.cfi_offset %r14, -48
	.cfi_offset %r15, -56
	ldmxcsr	(%rsp)
	fldcw	4(%rsp)
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	popq	%r15
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r15
	popq	%r14
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r14
	popq	%r13
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r13
	popq	%r12
	.cfi_adjust_cfa_offset -8
	.cfi_restore %r12
	popq	%rbx
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbx
	popq	%rbp
	.cfi_adjust_cfa_offset -8
	.cfi_restore %rbp
	// An indirect jump, not ret: the return stack buffer holds g0's calls,
	// so a ret here would mispredict on every switch; the branch target
	// buffer learns a jump's usual destination (the resume point in
	// mcall_impl). rcx is caller-saved, dead at a call's return.
	popq	%rcx
	.cfi_adjust_cfa_offset -8
	.cfi_register %rip, %rcx
	jmp	*%rcx
	.cfi_endproc
	.size	goro_gogo, .-goro_gogo

// The first frame of every goroutine. goro_gogo "returns" here with the G
// in rbx (prepared by the runtime); it calls goro_gentry(G*), which runs
// the goroutine and never returns. The undefined return address makes this
// the outermost frame of a goroutine backtrace.
//
// A new goroutine's return address is goro_gstart+1, past a nop that never
// runs (as Go's goexit): unwinders look up a return address minus one, and
// goro_gstart-1 would lie outside this FDE (in the padding, or in goro_gogo).
	.globl	goro_gstart
	.hidden	goro_gstart
	.type	goro_gstart, @function
	.p2align 4
goro_gstart:
	.cfi_startproc
	.cfi_undefined %rip
	nop
	xorl	%ebp, %ebp
	movq	%rbx, %rdi
	andq	$-16, %rsp
	callq	goro_gentry
	ud2
	.cfi_endproc
	.size	goro_gstart, .-goro_gstart


// void goro_gcall(void (*fn)(void*), void* arg)
//   Calls fn(arg), the goroutine's function, in a frame whose personality
//   routine is goro_gcall_personality (panic.cpp) rather than C++'s: an
//   exception that no frame below catches reaches it in the unwinder's
//   search phase, while the frames it was thrown from are still on the
//   stack, which is when the panic report's stack is recorded; exceptions
//   caught below never get here (no cost to them). The personality then
//   lands the exception at goro_gcall_land with the _Unwind_Exception* in
//   rax (as it does goexit's forced unwinding): goro_gcall_landed never
//   returns.
	.text
	.globl	goro_gcall
	.hidden	goro_gcall
	.globl	goro_gcall_land
	.hidden	goro_gcall_land
	.type	goro_gcall, @function
	.p2align 4
goro_gcall:
	.cfi_startproc
	.cfi_personality 0x1b, goro_gcall_personality
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	movq	%rdi, %rax
	movq	%rsi, %rdi
	callq	*%rax
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	ret
goro_gcall_land:
	// The unwinder restored rsp to its value at the call above.
	.cfi_adjust_cfa_offset 8
	movq	%rax, %rdi
	callq	goro_gcall_landed
	ud2
	.cfi_endproc
	.size	goro_gcall, .-goro_gcall

// void goro_on_gstack(void* sp, void (*fn)(void*), void* arg)
//   Calls fn(arg) on the stack of a switched-out goroutine, just below its
//   saved context sp (goro_mcall's frame: [mxcsr|fcw][r15][r14][r13][r12]
//   [rbx][rbp][return address]), and returns on the caller's stack. The CFI
//   of the call site describes that saved frame exactly as goro_gogo's does,
//   so an unwinder started inside fn (_Unwind_Backtrace) walks from here
//   into the goroutine's own frames, down to goro_gstart: this is how a
//   parked goroutine's stack is traced (traceback.cpp). The goroutine must
//   not run meanwhile; fn uses its stack below sp (sp is 16-byte aligned).
	.text
	.globl	goro_on_gstack
	.hidden	goro_on_gstack
	.type	goro_on_gstack, @function
	.p2align 4
goro_on_gstack:
	.cfi_startproc
	movq	%rsp, %rax
	movq	%rdi, %rsp
	.cfi_def_cfa %rsp, 64
	.cfi_offset %rbp, -16
	.cfi_offset %rbx, -24
	.cfi_offset %r12, -32
	.cfi_offset %r13, -40
	.cfi_offset %r14, -48
	.cfi_offset %r15, -56
	pushq	%rax
	.cfi_adjust_cfa_offset 8
	subq	$8, %rsp
	.cfi_adjust_cfa_offset 8
	movq	%rdx, %rdi
	callq	*%rsi
	addq	$8, %rsp
	.cfi_adjust_cfa_offset -8
	// Back to the caller's stack: its CFA is our entry rsp + 8, and every
	// callee-saved register still holds the caller's value (fn preserved
	// them), so the caller's frame is described by the default rule.
	popq	%rsp
	.cfi_def_cfa %rsp, 8
	.cfi_restore %rbp
	.cfi_restore %rbx
	.cfi_restore %r12
	.cfi_restore %r13
	.cfi_restore %r14
	.cfi_restore %r15
	ret
	.cfi_endproc
	.size	goro_on_gstack, .-goro_on_gstack

	.section .note.GNU-stack,"",@progbits
