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

#define MMF_NEXT_SYMBOLS(X)                                                    \
	X(mmap, void *, (void *, size_t, int, int, int, off_t))                \
	X(munmap, int, (void *, size_t))                                       \
	X(mremap, void *, (void *, size_t, size_t, int, ...))                  \
	X(mprotect, int, (void *, size_t, int))                                \
	X(pkey_mprotect, int, (void *, size_t, int, int))                      \
	X(madvise, int, (void *, size_t, int))                                 \
	X(process_madvise, ssize_t, (int, const struct iovec *, size_t, int, unsigned)) \
	X(mlock, int, (const void *, size_t))                                  \
	X(mlock2, int, (const void *, size_t, unsigned))                       \
	X(munlock, int, (const void *, size_t))                                \
	X(mlockall, int, (int))                                                \
	X(munlockall, int, (void))                                             \
	X(mseal, int, (void *, size_t, unsigned long))                         \
	X(brk, int, (void *))                                                  \
	X(sbrk, void *, (intptr_t))                                            \
	X(shmat, void *, (int, const void *, int))                             \
	X(prctl, int, (int, ...))                                              \
	X(personality, int, (unsigned long))                                   \
	X(syscall, long, (long, ...))                                          \
	X(sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(__sigaction, int, (int, const struct sigaction *, struct sigaction *)) \
	X(signal, sighandler_t, (int, sighandler_t))                           \
	X(bsd_signal, sighandler_t, (int, sighandler_t))                       \
	X(ssignal, sighandler_t, (int, sighandler_t))                          \
	X(sysv_signal, sighandler_t, (int, sighandler_t))                      \
	X(__sysv_signal, sighandler_t, (int, sighandler_t))                    \
	X(sigset, sighandler_t, (int, sighandler_t))                           \
	X(sigignore, int, (int))                                               \
	X(siginterrupt, int, (int, int))

struct mmf_next {
#define X(name, ret, args) ret(*name) args;
	MMF_NEXT_SYMBOLS(X)
#undef X
};

extern struct mmf_next mmf_next;

/* 1 once the next symbols are known (after mmfold's constructor started);
 * before that wrappers make raw system calls. */
int mmf_next_ready(void);
/* Looks the next symbols up; called once, from the constructor. */
void mmf_next_resolve(void);
/* The same for the buffer-taking wrappers of io.c and the libc wrappers of
 * stdio.c. */
void mmf_io_resolve(void);
/* The same for _exit (exit.c). */
void mmf_exit_resolve(void);
void mmf_stdio_resolve(void);
void mmf_sigmask_resolve(void);

/* syscall(SYS_rt_sigaction, a[0..3]) for a signal mmfold has claimed
 * (preload/signal.c): sets *done and returns the kernel's convention;
 * *done = 0 when the call must go to the kernel. */
long mmf_rt_sigaction_syscall(const long *a, int *done);
/* After an rt_sigaction that went to the kernel (see sigchain.h). */
void mmf_rt_sigaction_after(long sig, long act, int was_claimed);

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
