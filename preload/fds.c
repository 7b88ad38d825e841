/* close, close_range and closefrom (and syscall() with their numbers,
 * through mmf_fds_syscall), for MMFOLD_BARRIER=uffd: the write
 * barrier's descriptors (its userfaultfd, its /proc/self/maps) are
 * mmfold's.  Closed, the kernel would drop every write-protection at once
 * and silently: a collector would miss writes.  The program never opened
 * them, so for it they are not open: close() of one fails with EBADF as it
 * would without mmfold, and a range closed around them is closed in the
 * pieces between them.  Without the barrier (mmf_barrier_fds both -1) each
 * wrapper is a compare or two before the next definition. */
#include <unistd.h>

#include "next.h"

#ifndef CLOSE_RANGE_UNSHARE
#define CLOSE_RANGE_UNSHARE (1U << 1)
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif

static int ours(long fd)
{
	return fd >= 0 && (fd == __atomic_load_n(&mmf_barrier_fds[0], __ATOMIC_RELAXED) ||
			   fd == __atomic_load_n(&mmf_barrier_fds[1], __ATOMIC_RELAXED));
}

/* With the barrier, or before the constructor: apart and cold, so that
 * the usual course of close() saves no registers. */
static __attribute__((noinline, cold)) int close_slow(int fd)
{
	if (ours(fd)) {
		errno = EBADF;
		return -1;
	}
	if (mmf_next.close)
		return mmf_next.close(fd);
	return (int)mmf_libc_ret(mmf_sys6(SYS_close, fd, 0, 0, 0, 0, 0));
}

MMF_EXPORT int close(int fd)
{
	/* both descriptors -1 (the barrier off) and only then: AND < 0 */
	int both = __atomic_load_n(&mmf_barrier_fds[0], __ATOMIC_RELAXED) &
		   __atomic_load_n(&mmf_barrier_fds[1], __ATOMIC_RELAXED);
	int (*next)(int) = mmf_next.close;
	if (__builtin_expect(both >= 0 || !next, 0))
		return close_slow(fd);
	return next(fd);
}

static int range_next(unsigned lo, unsigned hi, int flags)
{
	if (mmf_next.close_range)
		return mmf_next.close_range(lo, hi, flags);
	return (int)mmf_libc_ret(mmf_sys6(SYS_close_range, lo, hi, flags, 0, 0, 0));
}

/* [first, last] without mmfold's descriptors: the pieces between them, the
 * first piece with the caller's flags, the others without
 * CLOSE_RANGE_UNSHARE (the table is the thread's own by then).  The first
 * error is the answer. */
static int range_around(unsigned first, unsigned last, int flags)
{
	unsigned cut[2];
	int n = 0;
	for (int i = 0; i < 2; i++) {
		int fd = __atomic_load_n(&mmf_barrier_fds[i], __ATOMIC_RELAXED);
		if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last)
			cut[n++] = (unsigned)fd;
	}
	if (n == 0)
		return range_next(first, last, flags);
	if (n == 2 && cut[0] > cut[1]) {
		unsigned t = cut[0];
		cut[0] = cut[1];
		cut[1] = t;
	}
	int r = 0, err = 0, made = 0;
	unsigned lo = first;
	for (int i = 0; i <= n; i++) {
		unsigned hi = i < n ? cut[i] : last;
		int piece = i < n ? lo < hi : lo <= hi; /* [lo, hi) before a cut, [lo, last] at the end */
		if (piece) {
			int rr = range_next(lo, i < n ? hi - 1 : hi, made ? flags & ~(int)CLOSE_RANGE_UNSHARE : flags);
			if (rr != 0 && !err) {
				r = -1;
				err = errno;
			}
			made = 1;
		}
		if (i < n) {
			if (cut[i] == ~0U)
				break;
			lo = cut[i] + 1;
		}
	}
	/* nothing but mmfold's descriptors in the range: the kernel still
	 * judges the flags (EINVAL) and unshares the table when asked, on a
	 * descriptor no process has open */
	if (!made && range_next(~0U, ~0U, flags) != 0) {
		r = -1;
		err = errno;
	}
	if (r)
		errno = err;
	return r;
}

MMF_EXPORT int close_range(unsigned first, unsigned last, int flags)
{
	if (__builtin_expect(mmf_barrier_fds[0] < 0 && mmf_barrier_fds[1] < 0, 1) || first > last)
		return range_next(first, last, flags);
	return range_around(first, last, flags);
}

MMF_EXPORT void closefrom(int lowfd)
{
	if (__builtin_expect(mmf_barrier_fds[0] < 0 && mmf_barrier_fds[1] < 0, 1) || lowfd < 0) {
		if (mmf_next.closefrom) {
			mmf_next.closefrom(lowfd);
			return;
		}
	} else if (range_around((unsigned)lowfd, ~0U, 0) == 0) {
		return;
	}
	/* no close_range in this kernel (before 5.9): glibc's own way, which
	 * closes mmfold's descriptors too (README.md, "Write barriers") */
	if (mmf_next.closefrom)
		mmf_next.closefrom(lowfd);
	else
		mmf_sys6(SYS_close_range, lowfd, ~0U, 0, 0, 0, 0);
}

/* syscall(SYS_close, fd) and syscall(SYS_close_range, ...) from
 * preload/syscall.c: the wrappers' answers while the barrier holds
 * descriptors (the raw system call, from code that does not go through
 * libc, is beyond reach: README.md, "Write barriers"). */
long mmf_fds_syscall(long nr, const long *a, int *done)
{
	*done = 0;
	if (__atomic_load_n(&mmf_barrier_fds[0], __ATOMIC_RELAXED) < 0 &&
	    __atomic_load_n(&mmf_barrier_fds[1], __ATOMIC_RELAXED) < 0)
		return 0;
	/* only calls that reach mmfold's descriptors are answered here; the
	 * others go on to the next syscall() as they were (libc's close()
	 * would add a cancellation point that syscall() does not have) */
	if (nr == SYS_close && ours(a[0])) {
		*done = 1;
		errno = EBADF;
		return -1;
	}
	unsigned first = (unsigned)a[0], last = (unsigned)a[1];
	if (nr == SYS_close_range && first <= last) {
		for (int i = 0; i < 2; i++) {
			int fd = __atomic_load_n(&mmf_barrier_fds[i], __ATOMIC_RELAXED);
			if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last) {
				*done = 1;
				return range_around(first, last, (int)a[2]);
			}
		}
	}
	return 0;
}
