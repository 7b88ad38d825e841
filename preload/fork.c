/* Processes made without fork(): clone() without CLONE_VM (Chromium's
 * launcher uses it for children with namespace flags), _Fork(), and
 * syscall(SYS_clone / SYS_fork) run no pthread_atfork handler.  Their child
 * is a copy of the calling thread alone, taken at any moment: another
 * thread of the parent may hold the map's writer lock (the child's next
 * mprotect would wait for ever for a thread that does not exist there), the
 * map may be half changed, lazy mode and the batches may hold calls the
 * child must see made, and the write barrier's protected pages would come
 * out writable (userfaultfd registrations are not inherited).  So each of
 * these runs the three steps fork() runs (docs/DESIGN.md, "fork"): prepare
 * in the parent before, then the child's step in the child and the
 * parent's in the parent.
 *
 * With CLONE_VFORK (and no CLONE_VM) the calling thread sleeps until the
 * child execs or exits; the prepare step holds no lock (life.c), so the
 * parent's other threads go on meanwhile (lazy mode defers nothing and
 * the barrier protects plainly until then).
 *
 * Left as they are: calls with CLONE_VM (a thread, or vfork's child, which
 * shares the parent's memory and mmfold's state with it) or CLONE_SETTLS
 * (the child's thread pointer is not the copy mmfold's thread-local state
 * is in); syscall(SYS_clone) with a new stack (the child does not return
 * through this code); clone3, and a clone made with an inline system call
 * (README, "Limits"). */
#include <sched.h>
#include <stdarg.h>

#include "next.h"

#ifndef CLONE_VM
#define CLONE_VM 0x00000100
#endif
#ifndef CLONE_SETTLS
#define CLONE_SETTLS 0x00080000
#endif

/* A clone that makes a new process out of a copy of this one. */
static int copies(unsigned long flags) { return !(flags & (CLONE_VM | CLONE_SETTLS)); }

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);

struct start {
	int (*fn)(void *);
	void *arg;
	unsigned long flags;
};

/* The child's first function, on the stack the caller gave.  The start
 * record lives in the parent's frame, of which the child has a copy. */
static int child_start(void *p)
{
	struct start s = *(struct start *)p;
	mmf_atfork_child_of(s.flags);
	return s.fn(s.arg);
}

MMF_EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	/* read whether passed or not, as libc's clone does (registers and the
	 * caller's frame): handed on unchanged */
	void *ptid = va_arg(ap, void *), *tls = va_arg(ap, void *), *ctid = va_arg(ap, void *);
	va_end(ap);
	clone_fn next = mmf_next.clone;
	if (!next)
		next = (clone_fn)mmf_next_early("clone");
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	if (!fn || !copies((unsigned)flags))
		return next(fn, stack, flags, arg, ptid, tls, ctid);
	struct start s = {fn, arg, (unsigned)flags};
	mmf_atfork_prepare();
	int r = next(child_start, stack, flags, &s, ptid, tls, ctid);
	int e = errno;
	mmf_atfork_parent();
	errno = e;
	return r;
}

/* After a call that returns 0 in the child and the child's pid (or -1) in
 * the parent: the step of the side it runs on; errno kept. */
static long after_copy(long r, unsigned long flags)
{
	int e = errno;
	if (r == 0)
		mmf_atfork_child_of(flags);
	else
		mmf_atfork_parent();
	errno = e;
	return r;
}

MMF_EXPORT pid_t _Fork(void)
{
	pid_t (*next)(void) = mmf_next._Fork;
	if (!next)
		next = (pid_t(*)(void))mmf_next_early("_Fork");
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	mmf_atfork_prepare();
	return (pid_t)after_copy(next(), 0);
}

/* syscall(SYS_clone, flags, 0, ...) and syscall(SYS_fork): the child
 * returns here, on its copy of this stack.  *done = 0: not such a call. */
long mmf_fork_syscall(long nr, const long *a, int *done)
{
	*done = 0;
	int is_fork = 0;
#ifdef SYS_fork
	is_fork = nr == SYS_fork;
#endif
	if (!is_fork && !(nr == SYS_clone && copies((unsigned long)a[0]) && a[1] == 0))
		return 0;
	*done = 1;
	mmf_atfork_prepare();
	long r;
	if (mmf_next.syscall)
		r = mmf_next.syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
	else
		r = mmf_libc_ret(mmf_sys6(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
	return after_copy(r, is_fork ? 0 : (unsigned long)a[0]);
}
