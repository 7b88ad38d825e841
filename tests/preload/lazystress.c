/* lazystress SEED THREADS STEPS [nopoke] — what reaches a program whose threads
 * race mmfold's deferred promotions.
 *
 * Each thread owns one region of RP pages (regions are kept apart by
 * MAP_SHARED guard pages, so their VMAs never merge) and walks it with a
 * random stream of its own: mprotect and syscall(SYS_mprotect) to NONE, R
 * or RW, mmap(MAP_FIXED), munmap, MADV_DONTNEED, mlock, munlock, a
 * collector-style write barrier (PROT_READ, then a write whose SIGSEGV
 * handler makes the page RW), now and then a fork() whose child exits at
 * once, and SIGUSR1 sent to another thread, whose handler reads a page of
 * that thread's region.  One more thread calls mremap on a page of its own
 * in a loop: the library makes everything that waits before each of them.  After every step two pages of the region are
 * probed for read and write.
 *
 * Only the owner changes a region, so each thread keeps an exact model of
 * its pages (protection, mapped) and the outcome of every probe is known:
 * a probe that faults on a page the model says is accessible is a
 * spurious signal (it is probed again at once, and whether that second
 * probe succeeds is reported too); a probe that succeeds on a page the
 * model says is not is a missed fault.  Both are counted; either makes the
 * exit status 1.  What mlock, fork and the other threads do can only reach
 * a region through the library under test (a lazy apply of everything
 * pending, made by another thread), which is what this looks for.
 *
 * stdout (per-thread digests of every call's result and every probe) is
 * the same whatever the interleaving, and the same with and without the
 * library. */
#include "common.h"

#include <pthread.h>
#include <sys/wait.h>

#define RP 48      /* pages per region */
#define MAXTHR 64

enum { P_UNMAPPED = -2, P_UNKNOWN = -1 };

struct thr {
	int id;
	pthread_t th;
	uint64_t rng;
	uintptr_t base;          /* first page of the region */
	signed char prot[RP];    /* model: PROT_*, P_UNMAPPED or P_UNKNOWN */
	uint64_t digest;
	unsigned long calls, faults, spurious, spurious_again, missed, pokes;
	volatile int busy_lo, busy_hi; /* pages a call in progress may change */
};

static struct thr T[MAXTHR];
static int nthr;
static unsigned long steps;
static uintptr_t arena;
static int started; /* atomic */
static int pokes_on = 1; /* 0: no SIGUSR1 (argument "nopoke") */
static int stop_flusher; /* atomic */
static pthread_barrier_t done; /* no thread exits while others may signal it */

static __thread struct thr *self;
static __thread sigjmp_buf *volatile jb;         /* where a probe's fault returns */
static __thread volatile int probing;
static __thread volatile uintptr_t barrier_lo, barrier_hi;
static __thread unsigned long pokeseq;

static uint64_t next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static void mix(struct thr *t, uint64_t v)
{
	t->digest = (t->digest ^ v) * 0x100000001b3ull;
}

static void on_segv(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	uintptr_t a = (uintptr_t)si->si_addr;
	if (probing)
		siglongjmp(*jb, si->si_code == SEGV_MAPERR ? 2 : 1);
	if (sig == SIGSEGV && a >= barrier_lo && a < barrier_hi) {
		/* the write barrier: the collector marks the page dirty */
		uintptr_t p = a & ~(PG - 1);
		if (mprotect((void *)p, PG, PROT_READ | PROT_WRITE) == 0) {
			int i = (int)((p - self->base) / PG);
			self->prot[i] = PROT_READ | PROT_WRITE;
			return;
		}
	}
	char m[160];
	int n = snprintf(m, sizeof m, "lazystress: unexpected signal %d code %d at page %ld of thread %d\n",
			 sig, si->si_code, self ? (long)((a - self->base) / PG) : -1L,
			 self ? self->id : -1);
	wr_all(2, m, (size_t)n);
	_exit(3);
}

/* 0 when the access went through, 1 on SEGV_ACCERR, 2 on SEGV_MAPERR. */
static __attribute__((noinline)) int probe(volatile unsigned char *p, int write, unsigned char *val)
{
	sigjmp_buf here, *saved = jb;
	int was = probing; /* a SIGUSR1 handler's probe nests inside ours */
	int r = sigsetjmp(here, 1);
	if (r == 0) {
		jb = &here;
		probing = 1;
		unsigned char v = *p;
		if (write)
			*p = (unsigned char)(v + 1);
		*val = v;
	}
	probing = was;
	jb = saved;
	return r;
}

static int allowed(int prot, int write)
{
	if (prot == P_UNKNOWN)
		return -1;
	if (prot == P_UNMAPPED)
		return 0;
	return write ? (prot & PROT_WRITE) != 0 : (prot & (PROT_READ | PROT_WRITE)) != 0;
}

/* Probes page i of t's region (t is this thread); returns the outcome. */
static int check_page(struct thr *t, int i, int write, int in_handler)
{
	volatile unsigned char *p = (unsigned char *)(t->base + (uintptr_t)i * PG + 17);
	unsigned char v = 0;
	int r = probe(p, write, &v);
	int want = allowed(t->prot[i], write);
	if (r)
		t->faults++;
	if (r && want == 1) {
		unsigned char v2;
		int again = probe(p, 0, &v2);
		t->spurious++;
		if (again == 0)
			t->spurious_again++;
		char m[200];
		int n = snprintf(m, sizeof m,
				 "lazystress: SPURIOUS fault (code %d) thread %d page %d %s%s model prot %d; "
				 "second probe %s\n",
				 r, t->id, i, write ? "write" : "read", in_handler ? " in SIGUSR1 handler" : "",
				 t->prot[i], again ? "faulted too" : "succeeded");
		wr_all(2, m, (size_t)n);
	} else if (!r && want == 0) {
		t->missed++;
		char m[160];
		int n = snprintf(m, sizeof m, "lazystress: MISSED fault thread %d page %d %s model prot %d\n",
				 t->id, i, write ? "write" : "read", t->prot[i]);
		wr_all(2, m, (size_t)n);
	}
	if (!in_handler) {
		mix(t, (uint64_t)(i * 8 + write * 4 + r));
		if (!r)
			mix(t, v);
	}
	return r;
}

static void on_usr1(int sig)
{
	(void)sig;
	struct thr *t = self;
	if (!t)
		return;
	int saved = errno;
	/* a page the interrupted call cannot be changing */
	int i = (int)((++pokeseq * 7 + (unsigned long)t->id) % RP);
	if (i < t->busy_lo || i >= t->busy_hi)
		check_page(t, i, 0, 1);
	t->pokes++;
	errno = saved;
}

static void set_model(struct thr *t, int lo, int hi, int v)
{
	for (int i = lo; i < hi; i++)
		t->prot[i] = (signed char)v;
}

static void result(struct thr *t, int op, long r)
{
	t->calls++;
	mix(t, (uint64_t)op << 32 | (uint32_t)(r < 0 ? errno : 0));
}

static void step(struct thr *t)
{
	int lo = (int)(next(&t->rng) % RP);
	int len = 1 + (int)(next(&t->rng) % (next(&t->rng) % 4 == 0 ? RP - lo : (RP - lo < 6 ? RP - lo : 6)));
	int hi = lo + len;
	void *a = (void *)(t->base + (uintptr_t)lo * PG);
	size_t n = (size_t)len * PG;
	static const int prots[] = {PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE, PROT_READ | PROT_WRITE,
				    PROT_WRITE};
	int prot = prots[next(&t->rng) % 5];
	unsigned op = (unsigned)(next(&t->rng) % 100);
	long r;
	t->busy_lo = lo;
	t->busy_hi = hi;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	if (op < 32) {
		r = mprotect(a, n, prot);
		result(t, 1, r);
		set_model(t, lo, hi, r == 0 ? prot : P_UNKNOWN);
	} else if (op < 40) {
		r = syscall(SYS_mprotect, a, n, prot);
		result(t, 2, r);
		set_model(t, lo, hi, r == 0 ? prot : P_UNKNOWN);
	} else if (op < 52) {
		void *m = mmap(a, n, prot, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
		r = m == MAP_FAILED ? -1 : 0;
		result(t, 3, r);
		set_model(t, lo, hi, r == 0 ? prot : P_UNKNOWN);
	} else if (op < 55) {
		r = munmap(a, n);
		result(t, 4, r);
		set_model(t, lo, hi, r == 0 ? P_UNMAPPED : P_UNKNOWN);
	} else if (op < 62) {
		r = madvise(a, n, MADV_DONTNEED);
		result(t, 5, r);
	} else if (op < 70) {
		r = mlock(a, n);
		result(t, 6, r);
	} else if (op < 78) {
		r = munlock(a, n);
		result(t, 7, r);
	} else if (op < 84) {
		/* write barrier: protect, then write every page through the handler */
		r = mprotect(a, n, PROT_READ);
		result(t, 8, r);
		set_model(t, lo, hi, r == 0 ? PROT_READ : P_UNKNOWN);
		if (r == 0) {
			barrier_lo = (uintptr_t)a;
			barrier_hi = (uintptr_t)a + n;
			for (int i = lo; i < hi; i++)
				((volatile unsigned char *)(t->base + (uintptr_t)i * PG))[5]++;
			barrier_lo = barrier_hi = 0;
		}
	} else if (op < 85 && t->id == 0) {
		pid_t pid = fork();
		if (pid == 0)
			_exit(0);
		int st = 0;
		if (pid > 0)
			waitpid(pid, &st, 0);
		result(t, 9, pid > 0 && WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1);
	} else if (op < 95) {
		int other = (int)(next(&t->rng) % (uint64_t)nthr);
		if (pokes_on && __atomic_load_n(&started, __ATOMIC_ACQUIRE))
			pthread_kill(T[other].th, SIGUSR1);
	}
	t->busy_lo = t->busy_hi = 0;
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	for (int k = 0; k < 2; k++) {
		int i = (int)(next(&t->rng) % RP);
		if (check_page(t, i, 0, 0) == 0)
			check_page(t, i, 1, 0);
	}
}

/* Makes everything that waits, over and over: mremap reaches every range,
 * so the library makes all deferred promotions before it, from this
 * thread, while the workers fault on them. */
static void *flusher(void *arg)
{
	(void)arg;
	size_t n = 2 * PG;
	void *m = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (m == MAP_FAILED)
		return NULL;
	for (unsigned long i = 0; !__atomic_load_n(&stop_flusher, __ATOMIC_RELAXED); i++) {
		size_t to = i & 1 ? 2 * PG : PG;
		void *r = mremap(m, n, to, 0);
		if (r != MAP_FAILED)
			n = to;
		if (i % 4 == 0)
			sched_yield();
	}
	munmap(m, n);
	return NULL;
}

static void *worker(void *arg)
{
	struct thr *t = arg;
	void *m = mmap((void *)t->base, RP * PG, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	if (m == MAP_FAILED)
		_exit(4);
	set_model(t, 0, RP, PROT_READ | PROT_WRITE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
	self = t; /* from now on SIGUSR1 probes this region */
	for (unsigned long s = 0; s < steps; s++)
		step(t);
	pthread_barrier_wait(&done);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 4) {
		fprintf(stderr, "usage: lazystress SEED THREADS STEPS [nopoke]\n");
		return 2;
	}
	uint64_t seed = strtoull(argv[1], NULL, 0);
	nthr = atoi(argv[2]);
	steps = strtoul(argv[3], NULL, 0);
	if (nthr < 1 || nthr > MAXTHR)
		return 2;
	if (argc > 4 && !strcmp(argv[4], "nopoke"))
		pokes_on = 0;
	if (sysconf(_SC_PAGESIZE) != (long)PG) {
		printf("lazystress: page size is not %lu\n", PG);
		return 77;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_segv;
	sa.sa_flags = SA_SIGINFO | SA_NODEFER;
	sigaction(SIGSEGV, &sa, NULL);
	sigaction(SIGBUS, &sa, NULL);
	struct sigaction su;
	memset(&su, 0, sizeof su);
	su.sa_handler = on_usr1;
	su.sa_flags = SA_RESTART;
	sigaction(SIGUSR1, &su, NULL);

	size_t span = (size_t)nthr * (RP + 1) * PG + PG;
	void *ar = mmap(NULL, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (ar == MAP_FAILED)
		return 4;
	arena = (uintptr_t)ar;
	for (int i = 0; i <= nthr; i++)
		if (mmap((void *)(arena + (uintptr_t)i * (RP + 1) * PG), PG, PROT_NONE,
			 MAP_SHARED | MAP_ANONYMOUS | MAP_FIXED, -1, 0) == MAP_FAILED)
			return 4;
	for (int i = 0; i < nthr; i++) {
		T[i].id = i;
		T[i].rng = seed * 1000003u + (uint64_t)i;
		T[i].base = arena + ((uintptr_t)i * (RP + 1) + 1) * PG;
		T[i].digest = 0xcbf29ce484222325ull;
	}
	pthread_barrier_init(&done, NULL, (unsigned)nthr);
	for (int i = 0; i < nthr; i++)
		if (pthread_create(&T[i].th, NULL, worker, &T[i]))
			return 5;
	pthread_t fl;
	if (pthread_create(&fl, NULL, flusher, NULL))
		return 5;
	__atomic_store_n(&started, 1, __ATOMIC_RELEASE);
	unsigned long sp = 0, again = 0, missed = 0, faults = 0, pokes = 0;
	for (int i = 0; i < nthr; i++) {
		pthread_join(T[i].th, NULL);
		sp += T[i].spurious;
		again += T[i].spurious_again;
		missed += T[i].missed;
		faults += T[i].faults;
		pokes += T[i].pokes;
	}
	__atomic_store_n(&stop_flusher, 1, __ATOMIC_RELAXED);
	pthread_join(fl, NULL);
	for (int i = 0; i < nthr; i++)
		printf("thread %d: calls %lu digest %016llx\n", i, T[i].calls,
		       (unsigned long long)T[i].digest);
	printf("spurious %lu missed %lu\n", sp, missed);
	fprintf(stderr, "lazystress: seed %llu threads %d: %lu faults probed, %lu pokes, %lu spurious "
			"(%lu gone on the second probe), %lu missed\n",
		(unsigned long long)seed, nthr, faults, pokes, sp, again, missed);
	return sp || missed ? 1 : 0;
}
