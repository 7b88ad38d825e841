/* The signal-return trampoline of mmfold's own handler (x86_64 requires
 * SA_RESTORER).  As musl's __restore_rt: the nop before it keeps unwinders
 * that look up the return address minus one out of the previous function,
 * and the exact bytes of "mov $15, %rax; syscall" let libgcc and gdb
 * recognise a signal frame.  aarch64 needs none: the kernel returns
 * through the vDSO's trampoline. */
#if defined(__x86_64__)
	.text
	.p2align 4
	nop
	.globl mmf_sig_restore
	.hidden mmf_sig_restore
	.type mmf_sig_restore, @function
mmf_sig_restore:
	movq $15, %rax
	syscall
	hlt
	.size mmf_sig_restore, .-mmf_sig_restore
#endif
	.section .note.GNU-stack, "", @progbits
