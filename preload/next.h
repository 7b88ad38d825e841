/* The next definitions of the interposed symbols (libc's, or another
 * preloaded library's), found once with dlsym(RTLD_NEXT).  Until they are
 * found, and while dlsym itself runs, wrappers make raw system calls. */
#ifndef MMF_NEXT_H
#define MMF_NEXT_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <signal.h>
#include <stddef.h>
#include <sys/types.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "../src/engine.h"

#define MMF_EXPORT __attribute__((visibility("default")))

/* System call numbers older headers lack (the wrappers and syscall()). */
#ifndef SYS_mseal
#define SYS_mseal 462
#endif

/* The table of next definitions is mmf_kernel.next (src/sys.h), read here
 * as mmf_next.  An entry is stored once every lookup is done (after which
 * no lookup allocates), so a forwarder tests the entry itself: non-NULL is
 * "known". */

/* 1 once the next symbols are known (after mmfold's constructor started);
 * before that wrappers make raw system calls. */
int mmf_next_ready(void);
/* Looks the next symbols up; called once, from the constructor. */
void mmf_next_resolve(void);
/* Before mmf_next_resolve stored the entries: the next definition of a
 * symbol that every glibc defines, looked up on the spot (next.c). */
void *mmf_next_early(const char *name);

/* syscall(SYS_rt_sigaction, a[0..3]) for a signal mmfold has claimed
 * (preload/signal.c): sets *done and returns the kernel's convention;
 * *done = 0 when the call must go to the kernel. */
long mmf_rt_sigaction_syscall(const long *a, int *done);
/* After an rt_sigaction that went to the kernel (see sigchain.h). */
void mmf_rt_sigaction_after(long sig, long act, int was_claimed);

/* syscall(SYS_close / SYS_close_range, a[0..2]) while the write barrier
 * holds descriptors (preload/fds.c): *done = 0 when the call must go on as
 * any other; else the libc-style result (-1 and errno). */
long mmf_fds_syscall(long nr, const long *a, int *done);

/* syscall(SYS_clone / SYS_fork, a[0..5]) that makes a copy of the
 * process (preload/fork.c): runs fork()'s handlers around it; *done = 0
 * for any other call. */
long mmf_fork_syscall(long nr, const long *a, int *done);

/* Loads libunwind for the call-site profile when MMFOLD_PROFILE > 0
 * (unwind.c); from the constructor. */
void mmf_unwind_load(void);

/* Converts a libc-style result (-1 and errno) to the kernel's (-errno). */
#define MMF_KRET(expr)                                                         \
	({                                                                     \
		long r_ = (long)(expr);                                        \
		r_ == -1 ? -(long)errno : r_;                                  \
	})
#define MMF_KRET_PTR(expr)                                                     \
	({                                                                     \
		void *p_ = (expr);                                             \
		p_ == MAP_FAILED ? -(long)errno : (long)p_;                    \
	})

/* Converts the kernel's convention back for the caller. */
static inline long mmf_libc_ret(long r)
{
	if ((unsigned long)r > -4096UL) {
		errno = (int)-r;
		return -1;
	}
	return r;
}

#endif
