/* sigprocmask and pthread_sigmask, for lazy mode: a thread that blocks
 * SIGSEGV or SIGBUS cannot have a fault on a waiting promotion served (the
 * kernel kills the process instead), so mmfold is told (mmf_lazy_mask) and
 * makes what waits, and nothing waits until the last such thread unblocks
 * them.  Outside lazy mode each wrapper is a load and a branch before the
 * next definition. */
#include <signal.h>

#include "next.h"

/* The call, then the thread's mask as the kernel has it now. */
static __attribute__((noinline)) int masked(int (*next)(int, const sigset_t *, sigset_t *),
					     int how, const sigset_t *set, sigset_t *old)
{
	int r = next(how, set, old);
	if (set && r == 0) {
		sigset_t cur;
		if (next(SIG_BLOCK, NULL, &cur) == 0)
			mmf_lazy_mask(sigismember(&cur, SIGSEGV) == 1 || sigismember(&cur, SIGBUS) == 1);
	}
	return r;
}

/* Before the constructor looked the next definitions up. */
static __attribute__((noinline)) int early(const char *name, int how, const sigset_t *set,
					    sigset_t *old)
{
	int (*next)(int, const sigset_t *, sigset_t *) =
		(int (*)(int, const sigset_t *, sigset_t *))mmf_next_early(name);
	return next(how, set, old);
}

MMF_EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	if (__builtin_expect(mmf_lazy_active(), 0) && mmf_next.sigprocmask)
		return masked(mmf_next.sigprocmask, how, set, old);
	if (__builtin_expect(!mmf_next.sigprocmask, 0))
		return early("sigprocmask", how, set, old);
	return mmf_next.sigprocmask(how, set, old);
}

MMF_EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
	if (__builtin_expect(mmf_lazy_active(), 0) && mmf_next.pthread_sigmask)
		return masked(mmf_next.pthread_sigmask, how, set, old);
	if (__builtin_expect(!mmf_next.pthread_sigmask, 0))
		return early("pthread_sigmask", how, set, old);
	return mmf_next.pthread_sigmask(how, set, old);
}
