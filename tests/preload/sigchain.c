/* sigchain [TEST...] — what a program sees of its SIGSEGV/SIGBUS handlers.
 *
 * Run without mmfold and with mmfold's signal chaining (MMFOLD_SIGCHAIN=on)
 * the output and exit status must be identical.  Each test runs in a
 * forked child; the parent prints how the child ended ("exit N" or
 * "signal S core C"), so deaths by signal are compared too.  Tests:
 *   ctor       a library constructor's handler (libsigctor.so) is the one
 *              found, and it is called
 *   query      sigaction query/replace, flags and mask round trips, the
 *              return values of signal, sysv_signal, bsd_signal, sigset,
 *              sigignore, siginterrupt, syscall(SYS_rt_sigaction) and its
 *              errors
 *   resethand  SA_RESETHAND: the second fault kills
 *   mask       the blocked mask inside the handler (sa_mask, SA_NODEFER)
 *              and after it
 *   siginfo    si_signo/si_code/si_addr for SEGV_ACCERR and SEGV_MAPERR,
 *              plain (one-argument) handlers
 *   skip       a handler that moves the PC past the faulting instruction
 *              in the ucontext, as JVMs do
 *   altstack   stack overflow caught on an alternate stack
 *   nohandler  a fault with SIG_DFL kills by SIGSEGV
 *   ignfault   a fault with SIG_IGN kills by SIGSEGV (the kernel's rule)
 *   sigbus     a handler sees SIGBUS on a truncated file mapping; without
 *              one, the process dies by SIGBUS
 *   busdfl     the same, no handler
 *   kill       kill() of SIGSEGV: ignored with SIG_IGN, SI_USER to a
 *              handler; raise(SIGBUS) gives SI_TKILL
 *   killdfl    kill() of SIGSEGV with SIG_DFL kills
 *   threads    4 threads faulting while the main thread re-installs
 *              handlers
 *   fork       a forked child keeps the handler
 * "procview" (not in "all") prints whether the kernel catches SIGSEGV
 * after signal(SIGSEGV, SIG_DFL): "no" without mmfold, "yes" with its
 * chaining on — the one way to tell they differ. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <ucontext.h>
#include <unistd.h>

#define PG ((unsigned long)getpagesize()) /* the system's, from the aux vector */
extern __sighandler_t bsd_signal(int, __sighandler_t); /* declared only for XPG4.2 */
#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* siginterrupt */

extern int sigctor_calls, sigctor_saw_handler;
void sigctor_handler(int, siginfo_t *, void *);

static char *page(int prot)
{
	char *p = mmap(NULL, PG, prot, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED) {
		printf("mmap failed\n");
		exit(2);
	}
	return p;
}

static const char *hname(void *h);

static void set(int sig, void *h, int flags, const int *mask)
{
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = (void (*)(int, siginfo_t *, void *))h;
	sa.sa_flags = flags;
	sigemptyset(&sa.sa_mask);
	for (; mask && *mask; mask++)
		sigaddset(&sa.sa_mask, *mask);
	if (sigaction(sig, &sa, NULL) != 0)
		printf("sigaction failed: %s\n", strerror(errno));
}

static unsigned long mword(const sigset_t *s, int w) { return ((const unsigned long *)s)[w]; }

/* sa_restorer as the program sees it.  glibc fills it in on x86_64 only:
 * on aarch64 it neither passes it to the kernel nor writes it back, so the
 * field (and the kernel's copy) holds whatever was there before. */
static const char *restorer(unsigned long r)
{
#if defined(__x86_64__)
	return r ? "set" : "null";
#else
	(void)r;
	return "undefined";
#endif
}

static void show(const char *what, const struct sigaction *sa)
{
	/* only the kernel's 64 signals: glibc leaves the rest undefined */
	printf("%s: handler %s flags %#x mask %#lx restorer %s\n", what,
	       hname((void *)sa->sa_handler), (unsigned)sa->sa_flags, mword(&sa->sa_mask, 0),
	       restorer((unsigned long)sa->sa_restorer));
}

static void query(const char *what, int sig)
{
	struct sigaction sa;
	memset(&sa, 0x5a, sizeof sa);
	if (sigaction(sig, NULL, &sa) != 0)
		printf("%s: query failed: %s\n", what, strerror(errno));
	else
		show(what, &sa);
}

/* ---- handlers ---- */

static volatile char *fault_page;
static atomic_int hits;

static void h_fix(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	atomic_fetch_add(&hits, 1);
	mprotect((void *)((uintptr_t)si->si_addr & ~(PG - 1)), PG, PROT_READ | PROT_WRITE);
}

static void h_plain(int sig)
{
	atomic_fetch_add(&hits, 1);
	printf("plain handler: sig %d\n", sig);
	mprotect((void *)fault_page, PG, PROT_READ | PROT_WRITE);
}

static void h_a(int sig, siginfo_t *si, void *uc) { h_fix(sig, si, uc); }
static void h_b(int sig, siginfo_t *si, void *uc) { h_fix(sig, si, uc); }

static const char *hname(void *h)
{
	static char buf[32];
	if (h == (void *)SIG_DFL) return "SIG_DFL";
	if (h == (void *)SIG_IGN) return "SIG_IGN";
	if (h == (void *)SIG_ERR) return "SIG_ERR";
	if (h == (void *)SIG_HOLD) return "SIG_HOLD";
	if (h == (void *)h_fix) return "h_fix";
	if (h == (void *)h_plain) return "h_plain";
	if (h == (void *)h_a) return "h_a";
	if (h == (void *)h_b) return "h_b";
	if (h == (void *)sigctor_handler) return "sigctor_handler";
	snprintf(buf, sizeof buf, "other");
	return buf;
}

/* ---- tests ---- */

static void t_ctor(void)
{
	printf("kernel caught SIGSEGV before the constructor: %d\n", sigctor_saw_handler);
	query("ctor", SIGSEGV);
	volatile char *p = page(PROT_NONE);
	p[10] = 1;
	printf("sigctor_handler calls %d, value %d\n", sigctor_calls, p[10]);
}

static void t_query(void)
{
	struct sigaction sa, old;
	int m1[] = {SIGUSR1, SIGTERM, SIGKILL, SIGSTOP, 0};
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = h_a;
	sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK | 0x400 /* SA_UNSUPPORTED */;
	sigemptyset(&sa.sa_mask);
	for (int *m = m1; *m; m++)
		sigaddset(&sa.sa_mask, *m);
	sigaddset(&sa.sa_mask, 40); /* a real-time signal */
	memset(&old, 0x5a, sizeof old);
	printf("install h_a: %d\n", sigaction(SIGSEGV, &sa, &old));
	show("previous", &old);
	query("now", SIGSEGV);
	/* the same struct as act and oact */
	struct sigaction both;
	memset(&both, 0, sizeof both);
	both.sa_sigaction = h_b;
	both.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESETHAND;
	sigemptyset(&both.sa_mask);
	struct sigaction *volatile alias = &both;
	printf("install h_b in place: %d\n", sigaction(SIGSEGV, &both, alias));
	show("in place previous", &both);
	query("now", SIGSEGV);
	/* restore what a query returned */
	printf("reinstall previous: %d\n", sigaction(SIGSEGV, &both, NULL));
	query("now", SIGSEGV);

	printf("signal h_plain -> %s\n", hname((void *)signal(SIGSEGV, h_plain)));
	query("after signal", SIGSEGV);
	printf("signal SIG_IGN -> %s\n", hname((void *)signal(SIGSEGV, SIG_IGN)));
	printf("signal SIG_DFL -> %s\n", hname((void *)signal(SIGSEGV, SIG_DFL)));
	query("after SIG_DFL", SIGSEGV);
	errno = 0;
	void *h = (void *)signal(SIGSEGV, SIG_ERR);
	printf("signal SIG_ERR -> %s errno %d\n", hname(h), errno);
	printf("sysv_signal h_plain -> %s\n", hname((void *)sysv_signal(SIGSEGV, h_plain)));
	query("after sysv_signal", SIGSEGV);
	printf("bsd_signal SIG_DFL -> %s\n", hname((void *)bsd_signal(SIGSEGV, SIG_DFL)));
	printf("sigset h_plain -> %s\n", hname((void *)sigset(SIGSEGV, h_plain)));
	query("after sigset", SIGSEGV);
	printf("sigset SIG_HOLD -> %s\n", hname((void *)sigset(SIGSEGV, SIG_HOLD)));
	sigset_t cur;
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("blocked after SIG_HOLD: %d\n", sigismember(&cur, SIGSEGV));
	printf("sigset SIG_DFL -> %s\n", hname((void *)sigset(SIGSEGV, SIG_DFL)));
	sigprocmask(SIG_BLOCK, NULL, &cur);
	printf("blocked after sigset: %d\n", sigismember(&cur, SIGSEGV));
	printf("sigignore: %d\n", sigignore(SIGSEGV));
	query("after sigignore", SIGSEGV);
	signal(SIGSEGV, h_plain);
	printf("siginterrupt 1: %d\n", siginterrupt(SIGSEGV, 1));
	query("after siginterrupt 1", SIGSEGV);
	printf("signal h_plain -> %s\n", hname((void *)signal(SIGSEGV, h_plain)));
	query("signal after siginterrupt", SIGSEGV);
	printf("siginterrupt 0: %d\n", siginterrupt(SIGSEGV, 0));
	query("after siginterrupt 0", SIGSEGV);

	/* SIGBUS too, and a signal mmfold does not claim */
	int m2[] = {SIGINT, 0};
	set(SIGBUS, h_b, SA_SIGINFO, m2);
	query("SIGBUS", SIGBUS);
	printf("signal(SIGBUS, SIG_DFL) -> %s\n", hname((void *)signal(SIGBUS, SIG_DFL)));
	set(SIGUSR1, h_a, SA_SIGINFO, m2);
	query("SIGUSR1", SIGUSR1);
	errno = 0;
	int rc = sigaction(SIGKILL, &sa, NULL);
	printf("sigaction(SIGKILL): %d errno %d\n", rc, errno);

	/* the raw system call through syscall() */
	struct {
		unsigned long handler, flags, restorer, mask;
	} k, k2;
	set(SIGSEGV, h_a, SA_SIGINFO, m1);
	memset(&k, 0, sizeof k);
	long r = syscall(SYS_rt_sigaction, SIGSEGV, NULL, &k, 8);
	printf("rt_sigaction query: %ld handler %s flags %#lx mask %#lx restorer %s\n", r,
	       hname((void *)k.handler), k.flags, k.mask, restorer(k.restorer));
	k2 = k;
	k2.handler = (unsigned long)h_b;
	k2.flags = SA_SIGINFO | SA_RESTORER;
	r = syscall(SYS_rt_sigaction, SIGSEGV, &k2, &k, 8);
	printf("rt_sigaction set: %ld old handler %s\n", r, hname((void *)k.handler));
	query("after rt_sigaction", SIGSEGV);
	errno = 0;
	r = syscall(SYS_rt_sigaction, SIGSEGV, NULL, &k, 4);
	printf("rt_sigaction sigsetsize 4: %ld errno %d\n", r, errno);
	errno = 0;
	r = syscall(SYS_rt_sigaction, SIGSEGV, (void *)16, NULL, 8);
	printf("rt_sigaction bad act: %ld errno %d\n", r, errno);
	errno = 0;
	r = syscall(SYS_rt_sigaction, SIGSEGV, NULL, (void *)16, 8);
	printf("rt_sigaction bad oact: %ld errno %d\n", r, errno);
	query("at end", SIGSEGV);
}

static void t_resethand(void)
{
	set(SIGSEGV, h_fix, SA_SIGINFO | SA_RESETHAND, NULL);
	volatile char *p = page(PROT_NONE);
	p[0] = 1;
	printf("first fault handled: %d\n", atomic_load(&hits));
	query("after first fault", SIGSEGV);
	mprotect((void *)p, PG, PROT_NONE);
	p[0] = 2;
	printf("second fault survived (wrong)\n");
}

static sigset_t inside;
static void h_mask(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	sigprocmask(SIG_BLOCK, NULL, &inside);
	mprotect((void *)((uintptr_t)si->si_addr & ~(PG - 1)), PG, PROT_READ | PROT_WRITE);
}

static void blocked(const char *what, const sigset_t *s)
{
	printf("%s: SEGV %d USR1 %d USR2 %d TERM %d BUS %d\n", what, sigismember(s, SIGSEGV),
	       sigismember(s, SIGUSR1), sigismember(s, SIGUSR2), sigismember(s, SIGTERM),
	       sigismember(s, SIGBUS));
}

static void t_mask(void)
{
	sigset_t t, now;
	sigemptyset(&t);
	sigaddset(&t, SIGTERM);
	sigprocmask(SIG_BLOCK, &t, NULL);
	int m[] = {SIGUSR1, 0};
	for (int nodefer = 0; nodefer < 2; nodefer++) {
		set(SIGSEGV, h_mask, SA_SIGINFO | (nodefer ? SA_NODEFER : 0), m);
		volatile char *p = page(PROT_NONE);
		p[0] = 1;
		blocked(nodefer ? "inside, SA_NODEFER" : "inside", &inside);
		sigprocmask(SIG_BLOCK, NULL, &now);
		blocked("after", &now);
	}
}

/* What rec() saw. */
static siginfo_t seen;
static void *volatile seen_uc;

static void rec(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	seen = *si;
	seen_uc = uc;
	uintptr_t a = (uintptr_t)si->si_addr & ~(PG - 1);
	if (si->si_code == SEGV_MAPERR)
		mmap((void *)a, PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	else
		mprotect((void *)a, PG, PROT_READ | PROT_WRITE);
}

static void t_siginfo(void)
{
	volatile char *p = page(PROT_NONE);
	set(SIGSEGV, rec, SA_SIGINFO, NULL);
	p[123] = 1;
	__asm__ volatile("" ::: "memory");
	printf("ACCERR: signo %d code %d (SEGV_ACCERR %d) addr offset %ld uc %s\n", seen.si_signo,
	       seen.si_code, SEGV_ACCERR, (long)((char *)seen.si_addr - (char *)p),
	       seen_uc ? "set" : "null");
	char *q = page(PROT_READ);
	munmap(q, PG);
	volatile char *vq = q;
	char c = vq[77];
	__asm__ volatile("" ::: "memory");
	printf("MAPERR: signo %d code %d (SEGV_MAPERR %d) addr offset %ld read %d\n", seen.si_signo,
	       seen.si_code, SEGV_MAPERR, (long)((char *)seen.si_addr - q), c);
	fault_page = page(PROT_NONE);
	signal(SIGSEGV, h_plain);
	fault_page[5] = 1;
	printf("plain: hits %d\n", atomic_load(&hits));
}

/* The faulting store and the address after it, from the assembly. */
extern char skip_insn[], skip_after[];
__attribute__((noinline, noclone)) static int do_skip_store(volatile int *p)
{
	int v = 7;
#if defined(__x86_64__)
	__asm__ volatile(".globl skip_insn, skip_after\n"
			 "skip_insn: movl $42, (%1)\n"
			 "movl $43, %0\n"
			 "skip_after:\n"
			 : "+r"(v)
			 : "r"(p)
			 : "memory");
#elif defined(__aarch64__)
	__asm__ volatile(".globl skip_insn, skip_after\n"
			 "mov w9, #42\n"
			 "skip_insn: str w9, [%1]\n"
			 "mov %w0, #43\n"
			 "skip_after:\n"
			 : "+r"(v)
			 : "r"(p)
			 : "memory", "x9");
#endif
	return v;
}

static atomic_int skipped;
static void h_skip(int sig, siginfo_t *si, void *ucv)
{
	(void)sig;
	(void)si;
	ucontext_t *uc = ucv;
#if defined(__x86_64__)
	if (uc->uc_mcontext.gregs[REG_RIP] == (greg_t)skip_insn) {
		uc->uc_mcontext.gregs[REG_RIP] = (greg_t)skip_after;
		atomic_fetch_add(&skipped, 1);
		return;
	}
#elif defined(__aarch64__)
	if (uc->uc_mcontext.pc == (uintptr_t)skip_insn) {
		uc->uc_mcontext.pc = (uintptr_t)skip_after;
		atomic_fetch_add(&skipped, 1);
		return;
	}
#endif
	signal(SIGSEGV, SIG_DFL);
}

static void t_skip(void)
{
	set(SIGSEGV, h_skip, SA_SIGINFO, NULL);
	volatile int *p = (volatile int *)page(PROT_READ);
	int total = 0;
	for (int i = 0; i < 1000; i++)
		total += do_skip_store(p);
	printf("skipped %d stores, result %d, memory %d\n", atomic_load(&skipped), total, p[0]);
}

static char *alt;
static sigjmp_buf overflow_jb;
static void h_overflow(int sig, siginfo_t *si, void *uc)
{
	(void)si;
	(void)uc;
	char here;
	int on_alt = &here >= alt && &here < alt + SIGSTKSZ * 4;
	printf("overflow: sig %d on the alternate stack %d\n", sig, on_alt);
	siglongjmp(overflow_jb, 1);
}

static volatile int depth_limit = 1 << 30;
__attribute__((noinline)) static int recurse(volatile char *p, int n)
{
	volatile char buf[1024];
	buf[0] = (char)n;
	buf[1023] = *p;
	if (n > depth_limit)
		return 0;
	return recurse(buf, n + 1) + buf[5];
}

static void t_altstack(void)
{
	alt = malloc(SIGSTKSZ * 4);
	stack_t ss = {.ss_sp = alt, .ss_size = SIGSTKSZ * 4, .ss_flags = 0};
	sigaltstack(&ss, NULL);
	set(SIGSEGV, h_overflow, SA_SIGINFO | SA_ONSTACK, NULL);
	if (sigsetjmp(overflow_jb, 1) == 0) {
		char c = 0;
		recurse(&c, 0);
	}
	sigset_t now;
	sigprocmask(SIG_BLOCK, NULL, &now);
	blocked("after siglongjmp", &now);
}

static void t_nohandler(void)
{
	signal(SIGSEGV, SIG_DFL);
	volatile char *p = page(PROT_NONE);
	p[0] = 1;
	printf("survived (wrong)\n");
}

static void t_ignfault(void)
{
	signal(SIGSEGV, SIG_IGN);
	volatile char *p = page(PROT_READ);
	p[0] = 1;
	printf("survived (wrong)\n");
}

static char *busmap(void)
{
	char path[] = "/tmp/sigchain-bus-XXXXXX";
	int fd = mkstemp(path);
	unlink(path);
	if (fd < 0 || ftruncate(fd, 2 * PG) != 0) {
		printf("cannot make a file\n");
		exit(2);
	}
	char *m = mmap(NULL, 2 * PG, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ftruncate(fd, 0) != 0)
		printf("ftruncate failed\n");
	return m;
}

static siginfo_t bus_seen;
static void h_bus(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	bus_seen = *si;
	/* map anonymous memory over the page so the access completes */
	mmap((void *)((uintptr_t)si->si_addr & ~(PG - 1)), PG, PROT_READ | PROT_WRITE,
	     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
}

static void t_sigbus(void)
{
	char *m = busmap();
	set(SIGBUS, h_bus, SA_SIGINFO, NULL);
	volatile char *p = m + PG + 9;
	*p = 3;
	/* the handler wrote bus_seen: no load of it may move above the fault */
	atomic_signal_fence(memory_order_seq_cst);
	/* (the offset from the second page: page sizes differ) */
	printf("SIGBUS: signo %d code %d (BUS_ADRERR %d) addr offset PG+%ld value %d\n", bus_seen.si_signo,
	       bus_seen.si_code, BUS_ADRERR, (long)((char *)bus_seen.si_addr - m) - (long)PG, *p);
}

static void t_busdfl(void)
{
	volatile char *p = busmap();
	p[1] = 1;
	printf("survived (wrong)\n");
}

static siginfo_t kill_seen;
static void h_kill(int sig, siginfo_t *si, void *uc)
{
	(void)sig;
	(void)uc;
	kill_seen = *si;
}

static void t_kill(void)
{
	signal(SIGSEGV, SIG_IGN);
	printf("kill with SIG_IGN: %d\n", kill(getpid(), SIGSEGV));
	printf("survived\n");
	set(SIGSEGV, h_kill, SA_SIGINFO, NULL);
	kill(getpid(), SIGSEGV);
	printf("kill with handler: signo %d code %d (SI_USER %d) from self %d\n", kill_seen.si_signo,
	       kill_seen.si_code, SI_USER, kill_seen.si_pid == getpid());
	set(SIGBUS, h_kill, SA_SIGINFO, NULL);
	raise(SIGBUS);
	printf("raise(SIGBUS): signo %d code %d (SI_TKILL %d)\n", kill_seen.si_signo, kill_seen.si_code,
	       SI_TKILL);
	/* blocked, then unblocked: delivered once */
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGSEGV);
	memset(&kill_seen, 0, sizeof kill_seen);
	sigprocmask(SIG_BLOCK, &s, NULL);
	kill(getpid(), SIGSEGV);
	printf("while blocked: signo %d\n", kill_seen.si_signo);
	sigprocmask(SIG_UNBLOCK, &s, NULL);
	printf("after unblock: signo %d\n", kill_seen.si_signo);
}

static void t_killdfl(void)
{
	signal(SIGSEGV, SIG_DFL);
	kill(getpid(), SIGSEGV);
	printf("survived (wrong)\n");
}

#define NT 4
#define ROUNDS 3000
static atomic_int done_threads;
static void *faulter(void *arg)
{
	(void)arg;
	volatile char *p = page(PROT_NONE);
	for (int i = 0; i < ROUNDS; i++) {
		p[i % PG] = 1;
		mprotect((void *)p, PG, PROT_NONE);
	}
	atomic_fetch_add(&done_threads, 1);
	return NULL;
}

static void t_threads(void)
{
	set(SIGSEGV, h_a, SA_SIGINFO, NULL);
	pthread_t t[NT];
	for (int i = 0; i < NT; i++)
		pthread_create(&t[i], NULL, faulter, NULL);
	long n = 0;
	while (atomic_load(&done_threads) < NT) {
		struct sigaction old;
		int m[] = {SIGUSR1, 0};
		set(SIGSEGV, n & 1 ? h_a : h_b, SA_SIGINFO | (n & 2 ? SA_NODEFER : 0), n & 4 ? m : NULL);
		sigaction(SIGSEGV, NULL, &old);
		if (old.sa_sigaction != (n & 1 ? h_a : h_b))
			printf("re-install %ld: read back a different handler\n", n);
		n++;
	}
	for (int i = 0; i < NT; i++)
		pthread_join(t[i], NULL);
	printf("threads: %d faults handled, %d expected, re-installs %s\n", atomic_load(&hits),
	       NT * ROUNDS, n > 0 ? "done" : "none");
}

static void t_fork(void)
{
	set(SIGSEGV, h_fix, SA_SIGINFO, NULL);
	pid_t pid = fork();
	if (pid == 0) {
		volatile char *p = page(PROT_NONE);
		p[0] = 1;
		query("child", SIGSEGV);
		printf("child: hits %d\n", atomic_load(&hits));
		fflush(stdout);
		_exit(0);
	}
	int st;
	waitpid(pid, &st, 0);
	printf("parent: child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
}

static void t_procview(void)
{
	signal(SIGSEGV, SIG_DFL);
	FILE *f = fopen("/proc/self/status", "r");
	char line[256];
	unsigned long long v = 0;
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "SigCgt:", 7))
			v = strtoull(line + 8, NULL, 16);
	printf("kernel catches SIGSEGV: %s\n", (v >> (SIGSEGV - 1)) & 1 ? "yes" : "no");
}

static const struct {
	const char *name;
	void (*fn)(void);
} tests[] = {
	{"ctor", t_ctor},       {"query", t_query},         {"resethand", t_resethand},
	{"mask", t_mask},       {"siginfo", t_siginfo},     {"skip", t_skip},
	{"altstack", t_altstack}, {"nohandler", t_nohandler}, {"ignfault", t_ignfault},
	{"sigbus", t_sigbus},   {"busdfl", t_busdfl},       {"kill", t_kill},
	{"killdfl", t_killdfl}, {"threads", t_threads},     {"fork", t_fork},
	{"procview", t_procview},
};
#define NTESTS (sizeof tests / sizeof tests[0])

static int run(const char *name)
{
	for (size_t i = 0; i < NTESTS; i++) {
		if (strcmp(tests[i].name, name))
			continue;
		printf("== %s\n", name);
		fflush(stdout);
		pid_t pid = fork();
		if (pid == 0) {
			alarm(60);
			tests[i].fn();
			fflush(stdout);
			_exit(0);
		}
		int st;
		waitpid(pid, &st, 0);
		if (WIFEXITED(st))
			printf("%s: exit %d\n", name, WEXITSTATUS(st));
		else
			printf("%s: signal %d core %d\n", name, WTERMSIG(st), WCOREDUMP(st) ? 1 : 0);
		return 0;
	}
	printf("unknown test %s\n", name);
	return 1;
}

int main(int argc, char **argv)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	int bad = 0;
	if (argc < 2 || !strcmp(argv[1], "all")) {
		for (size_t i = 0; i < NTESTS; i++)
			if (strcmp(tests[i].name, "procview"))
				bad |= run(tests[i].name);
	} else {
		for (int i = 1; i < argc; i++)
			bad |= run(argv[i]);
	}
	return bad;
}
