/* syscall(): the memory-management numbers take the same path as their
 * libc wrappers, and so do close and close_range while the write barrier
 * holds descriptors (fds.c) and the clones that copy the process
 * (fork.c); everything else goes straight to the next
 * syscall(). */
#include <stdarg.h>
#include <sys/syscall.h>

#include "next.h"

static long fwd_syscall(const struct mmf_op *o)
{
	if (mmf_next.syscall)
		return MMF_KRET(mmf_next.syscall(o->nr, o->a[0], o->a[1], o->a[2], o->a[3],
						 o->a[4], o->a[5]));
	return mmf_sys6(o->nr, o->a[0], o->a[1], o->a[2], o->a[3], o->a[4], o->a[5]);
}

static int kind_of(long nr, int *flags)
{
	*flags = 0;
	switch (nr) {
	case SYS_mmap: return MMF_K_MMAP;
	case SYS_munmap: return MMF_K_MUNMAP;
	case SYS_mremap: return MMF_K_MREMAP;
	case SYS_mprotect: return MMF_K_MPROTECT;
	case SYS_pkey_mprotect: *flags = MMF_OPF_PKEY; return MMF_K_MPROTECT;
	case SYS_madvise: return MMF_K_MADVISE;
	case SYS_process_madvise: return MMF_K_PROCESS_MADVISE;
	case SYS_mlock: return MMF_K_MLOCK;
	case SYS_mlock2: *flags = MMF_OPF_MLOCK2; return MMF_K_MLOCK;
	case SYS_munlock: return MMF_K_MUNLOCK;
	case SYS_mlockall: return MMF_K_MLOCKALL;
	case SYS_munlockall: return MMF_K_MUNLOCKALL;
	case SYS_mseal: return MMF_K_MSEAL;
	case SYS_brk: return MMF_K_BRK;
	case SYS_shmat: return MMF_K_SHMAT;
	default: return -1;
	}
}

MMF_EXPORT long syscall(long nr, ...)
{
	va_list ap;
	long a[6];
	va_start(ap, nr);
	for (int i = 0; i < 6; i++)
		a[i] = va_arg(ap, long);
	va_end(ap);
	int was = 0;
	if (nr == SYS_rt_sigaction) {
		int done;
		was = mmf_sigchain_claimed();
		long r = mmf_rt_sigaction_syscall(a, &done);
		if (done)
			return mmf_libc_ret(r);
	}
	int flags, k = kind_of(nr, &flags);
	if (k < 0) {
		long r;
		if (nr == SYS_close || nr == SYS_close_range) {
			int done;
			r = mmf_fds_syscall(nr, a, &done);
			if (done)
				return r;
		} else {
			int done;
			r = mmf_fork_syscall(nr, a, &done);
			if (done)
				return r;
		}
		if (nr == SYS_prctl || nr == SYS_personality || nr == SYS_seccomp)
			mmf_note_before(nr, a[0]);
		if (mmf_next.syscall)
			r = mmf_next.syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
		else
			r = mmf_libc_ret(mmf_sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
		if (nr == SYS_prctl)
			mmf_note_prctl(a[0], a[1], r);
		else if (nr == SYS_personality)
			mmf_note_personality((unsigned long)a[0], r);
		else if (nr == SYS_seccomp)
			mmf_note_seccomp(a[0], r);
		else if (nr == SYS_rt_sigaction && r == 0)
			mmf_rt_sigaction_after(a[0], a[1], was);
		return r;
	}
	struct mmf_op op = {.kind = k, .flags = flags, .nr = nr,
			    .a = {a[0], a[1], a[2], a[3], a[4], a[5]}, .fwd = fwd_syscall};
	if (k == MMF_K_BRK)
		return mmf_run(&op); /* the raw break, never -1 */
	return mmf_libc_ret(mmf_run(&op));
}
