/* sigaction and the signal() family: for SIGSEGV and SIGBUS once mmfold
 * has claimed them (src/sigchain.h), the program's actions are recorded
 * with the semantics glibc and the kernel give them; every other call goes
 * to the next definition.  Before mmfold's constructor looked its symbols
 * up, the next definition is found on the spot (mmf_next_early: these
 * exist in every glibc); no claim can exist then. */
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>

#include "next.h"

#define NEXT(name)                                                             \
	(mmf_next_ready() ? mmf_next.name : (__typeof__(mmf_next.name))mmf_next_early(#name))

/* siginterrupt()'s choice for claimed signals (glibc keeps its own for
 * the others). */
static uint64_t interrupting;
#define BIT(s) (1ULL << ((s) - 1))

/* struct sigaction <-> the kernel's, as glibc's __libc_sigaction converts:
 * on x86_64 it adds SA_RESTORER and its own restorer; only the kernel's 64
 * signals of the mask are copied, either way. */
static void to_kernel(const struct sigaction *a, struct mmf_ksa *k)
{
	k->handler = (unsigned long)a->sa_handler;
	k->flags = (unsigned long)(long)a->sa_flags;
	memcpy(&k->mask, &a->sa_mask, sizeof k->mask);
#if defined(__x86_64__)
	k->flags |= MMF_SA_RESTORER;
	k->restorer = mmf_sigchain_libc_restorer();
#else
	k->restorer = (unsigned long)a->sa_restorer;
#endif
}

static void from_kernel(const struct mmf_ksa *k, struct sigaction *a)
{
	a->sa_handler = (sighandler_t)k->handler;
	sigemptyset(&a->sa_mask);
	memcpy(&a->sa_mask, &k->mask, sizeof k->mask);
	a->sa_flags = (int)k->flags;
#if defined(__x86_64__)
	a->sa_restorer = (void (*)(void))k->restorer;
#endif
	/* (glibc on aarch64 leaves the caller's sa_restorer as it was) */
}

/* sigaction for a claimed signal. */
static int chained(int sig, const struct sigaction *act, struct sigaction *oact)
{
	struct mmf_ksa k, o;
	if (act)
		to_kernel(act, &k);
	long r = mmf_sigchain_act(sig, act ? &k : NULL, &o);
	if (r < 0) {
		errno = (int)-r;
		return -1;
	}
	if (oact)
		from_kernel(&o, oact);
	return 0;
}

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);

static int any_sigaction(sigaction_fn next, int sig, const struct sigaction *act,
			 struct sigaction *oact)
{
	if (mmf_sigchain_owns(sig))
		return chained(sig, act, oact);
	int was = mmf_sigchain_claimed();
	if (!next) {
		errno = ENOSYS;
		return -1;
	}
	int r = next(sig, act, oact);
	if (r == 0 && act && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

/* Only SIGSEGV and SIGBUS can be claimed (sigchain.h): any other signal
 * goes straight on to the next definition (a compare, a load and a jump). */
#define CLAIMABLE(sig) ((sig) == SIGSEGV || (sig) == SIGBUS)

/* The course of the signals mmfold may claim, and of calls made before the
 * constructor, apart: the usual one then needs no frame. */
static __attribute__((noinline, cold)) int sigaction_slow(int dunder, int sig,
							  const struct sigaction *act,
							  struct sigaction *oact)
{
	return any_sigaction(dunder ? NEXT(__sigaction) : NEXT(sigaction), sig, act, oact);
}

MMF_EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	sigaction_fn next = mmf_next.sigaction;
	if (__builtin_expect(!CLAIMABLE(sig) && next, 1))
		return next(sig, act, oact);
	return sigaction_slow(0, sig, act, oact);
}

MMF_EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *oact)
{
	sigaction_fn next = mmf_next.__sigaction;
	if (__builtin_expect(!CLAIMABLE(sig) && next, 1))
		return next(sig, act, oact);
	return sigaction_slow(1, sig, act, oact);
}

/* signal() as glibc's BSD semantics: the signal blocked during its handler,
 * system calls restarted unless siginterrupt() said otherwise. */
static sighandler_t bsd(int sig, sighandler_t h)
{
	if (h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	sigaddset(&sa.sa_mask, sig);
	sa.sa_flags = (__atomic_load_n(&interrupting, __ATOMIC_RELAXED) & BIT(sig)) ? 0 : SA_RESTART;
	if (chained(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

static __attribute__((noinline, cold)) sighandler_t signal_slow(int sig, sighandler_t h)
{
	if (mmf_sigchain_owns(sig))
		return bsd(sig, h);
	int was = mmf_sigchain_claimed();
	sighandler_t r = NEXT(signal)(sig, h);
	if (r != SIG_ERR && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

MMF_EXPORT sighandler_t signal(int sig, sighandler_t h)
{
	sighandler_t (*next)(int, sighandler_t) = mmf_next.signal;
	if (__builtin_expect(!CLAIMABLE(sig) && next, 1))
		return next(sig, h);
	return signal_slow(sig, h);
}

MMF_EXPORT sighandler_t bsd_signal(int sig, sighandler_t h)
{
	if (mmf_sigchain_owns(sig))
		return bsd(sig, h);
	int was = mmf_sigchain_claimed();
	sighandler_t r = NEXT(bsd_signal)(sig, h);
	if (r != SIG_ERR && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

MMF_EXPORT sighandler_t ssignal(int sig, sighandler_t h)
{
	if (mmf_sigchain_owns(sig))
		return bsd(sig, h);
	int was = mmf_sigchain_claimed();
	sighandler_t r = NEXT(ssignal)(sig, h);
	if (r != SIG_ERR && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

/* System V semantics: one-shot, not blocked, not restarted. */
static sighandler_t sysv(int sig, sighandler_t h)
{
	if (h == SIG_ERR) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction sa, old;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	sa.sa_flags = (int)(SA_RESETHAND | SA_NODEFER);
	if (chained(sig, &sa, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

MMF_EXPORT sighandler_t sysv_signal(int sig, sighandler_t h)
{
	if (mmf_sigchain_owns(sig))
		return sysv(sig, h);
	int was = mmf_sigchain_claimed();
	sighandler_t r = NEXT(sysv_signal)(sig, h);
	if (r != SIG_ERR && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

MMF_EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
	if (mmf_sigchain_owns(sig))
		return sysv(sig, h);
	int was = mmf_sigchain_claimed();
	sighandler_t r = NEXT(__sysv_signal)(sig, h);
	if (r != SIG_ERR && !was)
		mmf_sigchain_recheck(sig);
	return r;
}

/* sigset() as glibc's: SIG_HOLD blocks; anything else installs with no
 * flags and unblocks; SIG_HOLD comes back when the signal was blocked. */
MMF_EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
	if (!mmf_sigchain_owns(sig)) {
		int was = mmf_sigchain_claimed();
		sighandler_t r = NEXT(sigset)(sig, h);
		if (r != SIG_ERR && !was)
			mmf_sigchain_recheck(sig);
		return r;
	}
	sigset_t set, oset;
	sigemptyset(&set);
	sigaddset(&set, sig);
	struct sigaction sa, old;
	memset(&old, 0, sizeof old);
	if (h == SIG_HOLD) {
		if (sigprocmask(SIG_BLOCK, &set, &oset) < 0)
			return SIG_ERR;
		if (sigismember(&oset, sig))
			return SIG_HOLD;
		chained(sig, NULL, &old);
		return old.sa_handler;
	}
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = h;
	sigemptyset(&sa.sa_mask);
	if (chained(sig, &sa, &old) < 0)
		return SIG_ERR;
	if (sigprocmask(SIG_UNBLOCK, &set, &oset) < 0)
		return SIG_ERR;
	return sigismember(&oset, sig) ? SIG_HOLD : old.sa_handler;
}

MMF_EXPORT int sigignore(int sig)
{
	if (!mmf_sigchain_owns(sig)) {
		int was = mmf_sigchain_claimed();
		int r = NEXT(sigignore)(sig);
		if (r == 0 && !was)
			mmf_sigchain_recheck(sig);
		return r;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = SIG_IGN;
	sigemptyset(&sa.sa_mask);
	return chained(sig, &sa, NULL);
}

MMF_EXPORT int siginterrupt(int sig, int flag)
{
	if (!mmf_sigchain_owns(sig)) {
		int was = mmf_sigchain_claimed();
		int r = NEXT(siginterrupt)(sig, flag);
		if (r == 0 && !was)
			mmf_sigchain_recheck(sig);
		return r;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	chained(sig, NULL, &sa);
	if (flag) {
		__atomic_fetch_or(&interrupting, BIT(sig), __ATOMIC_RELAXED);
		sa.sa_flags &= ~SA_RESTART;
	} else {
		__atomic_fetch_and(&interrupting, ~BIT(sig), __ATOMIC_RELAXED);
		sa.sa_flags |= SA_RESTART;
	}
	return chained(sig, &sa, NULL);
}

/* The kernel reads act and writes oact and fails with EFAULT where it
 * cannot; the copies go through process_vm_readv/writev on ourselves so a
 * bad pointer gets EFAULT here too (a plain copy when those are refused,
 * e.g. by a seccomp filter). */
static long copy_self(void *dst, const void *src, size_t n, int write)
{
	struct iovec l = {write ? (void *)src : dst, n}, r = {write ? dst : (void *)src, n};
	long rc = mmf_sys6(write ? SYS_process_vm_writev : SYS_process_vm_readv, mmf_sys_getpid(),
			   (long)&l, 1, (long)&r, 1, 0);
	if (rc == (long)n)
		return 0;
	if (rc == -EFAULT || (rc >= 0 && rc < (long)n))
		return -EFAULT;
	memcpy(dst, src, n);
	return 0;
}

long mmf_rt_sigaction_syscall(const long *a, int *done)
{
	int sig = (int)a[0];
	*done = 0;
	if (!mmf_sigchain_owns(sig))
		return 0;
	*done = 1;
	if ((unsigned long)a[3] != sizeof(uint64_t))
		return -EINVAL;
	struct mmf_ksa k, o;
	if (a[1] && copy_self(&k, (const void *)a[1], sizeof k, 0) < 0)
		return -EFAULT;
	long r = mmf_sigchain_act(sig, a[1] ? &k : NULL, &o);
	if (r == 0 && a[2] && copy_self((void *)a[2], &o, sizeof o, 1) < 0)
		return -EFAULT;
	return r;
}

void mmf_rt_sigaction_after(long sig, long act, int was_claimed)
{
	if (act && !was_claimed)
		mmf_sigchain_recheck((int)sig);
}
