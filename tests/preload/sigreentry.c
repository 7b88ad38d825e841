/* sigreentry — memory-management calls from signal handlers that interrupt
 * the same calls.
 *
 * The main thread loops over mprotect/pkey_mprotect/mmap/munmap/madvise on
 * region B while a signal handler changes region A (mprotect, a redundant
 * mprotect, mmap MAP_FIXED) and also re-applies the protection that region
 * B's chunk 3 always has.  Three phases: SIGALRM from a fast ITIMER_REAL,
 * SIGUSR1 sent by another thread, SIGPROF from ITIMER_PROF.  At the end the
 * protection of every chunk must be what the last successful call asked
 * for, and writable chunks must hold what was last written.  Region T is
 * toggled between read-only and writable by the main loop (two calls in a
 * row, the second answered from the thread's hint) and by the handler,
 * which then probes it: its own call must have taken effect even when it
 * interrupted the main loop's call on T between the kernel's answer and
 * mmfold's record of it (a signal that arrives while the thread is in the
 * kernel is delivered exactly there, so this is hit often), where the
 * record still says the protection from before.  A hang (e.g.
 * a lock taken again from the handler) is caught by the watchdog thread:
 * neither the main loop nor the handler got on for 60 s.  (A bound on the
 * whole run failed in an emulated arm64 VM, where a run takes 40 s or more
 * on a loaded machine instead of 1 s.)  SIGALRM itself is the signal under
 * test, so alarm() is not used.
 *
 * Each phase also ends after PHASE_S seconds once its handler has run: in
 * the emulated VM a handler's three calls can take longer than the 50 us
 * timer period, and the main loop then starves (one run in observe mode
 * was still in its phases when the 300 s run bound killed it).  Past that
 * point the handler returns at once, so the main loop gets to its end. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/time.h>
#include <time.h>

#define CH 4       /* chunks per region */
#define CHPG 4     /* pages per chunk */
static long iters = 25000; /* main-loop iterations per phase (argv[1]) */
#define ITER_MAX (200L * iters) /* at most, while no handler has run */
#define PHASE_S 20    /* seconds a phase may take once its handler has run */
#define PHASE_MAX_S 120 /* seconds a phase may take in any case */

static uintptr_t A, B, T;
static volatile sig_atomic_t tbad, tprobes; /* T's probes that failed, made */
static volatile int lastA[CH], lastB[CH];
static volatile sig_atomic_t nsig, hbad, armed;
static volatile unsigned long progress; /* main-loop iterations and signals */
static volatile uint64_t wroteA[CH];
static atomic_int sender_stop;
static volatile sig_atomic_t phase_over; /* PHASE_S passed */
static struct timespec phase_start;

/* Seconds since the phase began (clock_gettime is async-signal-safe). */
static long phase_secs(void)
{
	struct timespec now;
	clock_gettime(CLOCK_MONOTONIC, &now);
	return (long)(now.tv_sec - phase_start.tv_sec);
}

static uintptr_t chunk(uintptr_t r, int c)
{
	return r + (uintptr_t)c * CHPG * PG;
}

static void handler(int sig)
{
	(void)sig;
	if (!armed)
		return;
	int saved = errno;
	progress++;
	if (phase_over || (nsig > 0 && phase_secs() >= PHASE_S)) {
		phase_over = 1;
		errno = saved;
		return;
	}
	unsigned n = (unsigned)nsig++;
	/* T: the handler's call takes effect, whatever the main loop's call on
	 * T that it may have interrupted did (probed: written, or refused);
	 * first, while the thread's hint is the one the main loop left */
	int tw = (n & 2) ? PROT_READ | PROT_WRITE : PROT_READ;
	hbad |= mprotect((void *)T, CHPG * PG, tw) != 0;
	static const char one = 1;
	int code = fg_write((volatile char *)T + (n % CHPG) * PG, &one, 1);
	tbad += (tw & PROT_WRITE) ? code != 0 : code != 'a';
	tprobes++;
	int c = (int)(n % CH);
	uintptr_t a = chunk(A, c);
	switch ((n / CH) % 4) {
	case 0:
		hbad |= mprotect((void *)a, CHPG * PG, PROT_READ) != 0;
		lastA[c] = PROT_READ;
		break;
	case 1: /* again, redundant unless case 0 was skipped by a race */
		hbad |= syscall(SYS_mprotect, a, CHPG * PG, lastA[c]) != 0;
		break;
	case 2:
		hbad |= pkey_mprotect((void *)a, CHPG * PG, PROT_READ | PROT_WRITE, -1) != 0;
		lastA[c] = PROT_READ | PROT_WRITE;
		break;
	case 3:
		hbad |= mmap((void *)a, CHPG * PG, PROT_READ | PROT_WRITE,
			     MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != (void *)a;
		hbad |= mprotect((void *)a, CHPG * PG, PROT_READ | PROT_WRITE) != 0;
		lastA[c] = PROT_READ | PROT_WRITE;
		wroteA[c] = 0;
		break;
	}
	if (lastA[c] & PROT_WRITE) { /* must not fault */
		*(volatile uint64_t *)a = n + 1;
		wroteA[c] = n + 1;
	}
	/* Chunk 3 of B is always RW; the main loop says so too. */
	hbad |= mprotect((void *)chunk(B, 3), CHPG * PG, PROT_READ | PROT_WRITE) != 0;
	errno = saved;
}

static long main_loop(uint64_t seed)
{
	long bad = 0;
	uint64_t s = seed;
	/* iters iterations, and on until the handler has run at least once
	 * (on a loaded machine, or under emulation, the sender thread or the
	 * timer may not have fired yet: "handler ran NO" then said nothing
	 * about mmfold); ITER_MAX bounds a signal that never comes. */
	for (long i = 0; i < iters || (nsig == 0 && i < ITER_MAX); i++) {
		if ((i & 255) == 0 && !phase_over && nsig > 0 && phase_secs() >= PHASE_S)
			phase_over = 1;
		if (phase_over || ((i & 255) == 0 && phase_secs() >= PHASE_MAX_S))
			break;
		int c = (int)rnd(&s, 3); /* chunks 0-2; 3 is the shared one */
		uintptr_t a = chunk(B, c);
		int prot = rnd(&s, 2) ? PROT_READ : PROT_READ | PROT_WRITE;
		switch (rnd(&s, 6)) {
		case 0:
			bad += mprotect((void *)a, CHPG * PG, prot) != 0;
			lastB[c] = prot;
			break;
		case 1:
			bad += syscall(SYS_mprotect, a, CHPG * PG, lastB[c]) != 0;
			break;
		case 2:
			bad += mmap((void *)a, CHPG * PG, prot,
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != (void *)a;
			lastB[c] = prot;
			break;
		case 3:
			bad += munmap((void *)a, PG) != 0;
			bad += mmap((void *)a, PG, lastB[c],
				    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0) != (void *)a;
			break;
		case 4:
			bad += madvise((void *)a, CHPG * PG, rnd(&s, 2) ? MADV_DONTDUMP : MADV_DODUMP) != 0;
			break;
		case 5:
			bad += mprotect((void *)chunk(B, 3), CHPG * PG, PROT_READ | PROT_WRITE) != 0;
			break;
		}
		if (lastB[c] & PROT_WRITE)
			*(volatile int *)(a + PG) = (int)i; /* must not fault */
		/* T, twice: the first call may take the general path, the
		 * second is answered from the hint the first left */
		bad += mprotect((void *)T, CHPG * PG, (i & 1) ? PROT_READ : PROT_READ | PROT_WRITE) != 0;
		bad += mprotect((void *)T, CHPG * PG, (i & 1) ? PROT_READ | PROT_WRITE : PROT_READ) != 0;
		progress++;
	}
	return bad;
}

static void *sender(void *arg)
{
	pthread_t target = *(pthread_t *)arg;
	struct timespec ts = { 0, 20000 };
	while (!atomic_load(&sender_stop)) {
		pthread_kill(target, SIGUSR1);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

static void *watchdog_thread(void *arg)
{
	(void)arg;
	unsigned long seen;
	do {
		seen = progress;
		sleep(60);
	} while (progress != seen);
	static const char m[] = "watchdog: timeout\n";
	wr_all(1, m, sizeof m - 1);
	_exit(99);
}

/* Compare the protection of each chunk with what was asked last. */
static int check(const char *phase)
{
	struct pstate st[2 * CH * CHPG];
	int bad = 0;
	page_states(A, CH * CHPG, st);
	page_states(B, CH * CHPG, st + CH * CHPG);
	for (int r = 0; r < 2; r++)
		for (int c = 0; c < CH; c++) {
			int want = r == 0 ? lastA[c] : c == 3 ? PROT_READ | PROT_WRITE : lastB[c];
			const char *exp = want & PROT_WRITE ? "rw-p" : "r--p";
			for (int p = 0; p < CHPG; p++) {
				const char *got = st[(r * CH + c) * CHPG + p].perm;
				if (strcmp(got, exp) != 0 && bad++ < 5)
					printf("%s: region %c chunk %d page %d is %s, expected %s\n",
					       phase, "AB"[r], c, p, got, exp);
			}
			if (r == 0 && (lastA[c] & PROT_WRITE) &&
			    *(volatile uint64_t *)chunk(A, c) != wroteA[c] && bad++ < 5)
				printf("%s: region A chunk %d lost its content\n", phase, c);
		}
	return bad;
}

static void reset(void)
{
	for (int c = 0; c < CH; c++) {
		mprotect((void *)chunk(A, c), CHPG * PG, PROT_READ);
		mprotect((void *)chunk(B, c), CHPG * PG, c == 3 ? PROT_READ | PROT_WRITE : PROT_READ);
		lastA[c] = lastB[c] = PROT_READ;
		wroteA[c] = 0;
	}
	mprotect((void *)T, CHPG * PG, PROT_READ);
	nsig = 0;
	hbad = 0;
	tbad = 0;
	tprobes = 0;
	phase_over = 0;
	clock_gettime(CLOCK_MONOTONIC, &phase_start);
}

int main(int argc, char **argv)
{
	if (argc > 1 && atol(argv[1]) > 0)
		iters = atol(argv[1]);
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	pthread_t wd;
	pthread_create(&wd, NULL, watchdog_thread, NULL); /* inherits the block */
	pthread_sigmask(SIG_SETMASK, &old, NULL);

	uintptr_t base = reserve_arena(2 * CH * CHPG + CHPG + 2);
	if (!base) {
		printf("cannot reserve arena\n");
		return 1;
	}
	A = base;
	B = base + (CH * CHPG + 1) * PG;
	T = B + (CH * CHPG + 1) * PG;
	mmap((void *)A, CH * CHPG * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	mmap((void *)B, CH * CHPG * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	mmap((void *)T, CHPG * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
	fg_install();

	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = handler;
	sa.sa_flags = SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGALRM, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	sigaction(SIGPROF, &sa, NULL);

	static const struct { const char *name; int sig; } phases[] = {
		{ "SIGALRM/ITIMER_REAL", SIGALRM },
		{ "SIGUSR1/pthread_kill", SIGUSR1 },
		{ "SIGPROF/ITIMER_PROF", SIGPROF },
	};
	int failed = 0;
	for (unsigned ph = 0; ph < 3; ph++) {
		reset();
		sigset_t one;
		sigemptyset(&one);
		sigaddset(&one, phases[ph].sig);
		struct itimerval it = { { 0, 50 }, { 0, 50 } };
		pthread_t snd, self = pthread_self();
		armed = 1;
		if (phases[ph].sig == SIGALRM)
			setitimer(ITIMER_REAL, &it, NULL);
		else if (phases[ph].sig == SIGPROF)
			setitimer(ITIMER_PROF, &it, NULL);
		else {
			atomic_store(&sender_stop, 0);
			pthread_create(&snd, NULL, sender, &self);
		}
		long bad = main_loop(1000 + ph);
		struct itimerval off = { { 0, 0 }, { 0, 0 } };
		if (phases[ph].sig == SIGUSR1) {
			atomic_store(&sender_stop, 1);
			pthread_join(snd, NULL);
		} else {
			setitimer(phases[ph].sig == SIGALRM ? ITIMER_REAL : ITIMER_PROF, &off, NULL);
		}
		/* No handler may run while we look. */
		pthread_sigmask(SIG_BLOCK, &one, NULL);
		armed = 0;
		int cb = check(phases[ph].name);
		printf("%s: handler ran %s, main-loop errors %ld, handler errors %d, state %s, "
		       "T probes %s\n",
		       phases[ph].name, nsig > 0 ? "yes" : "NO", bad, (int)hbad,
		       cb ? "WRONG" : "ok", tbad ? "WRONG" : "ok");
		if (tbad)
			fprintf(stderr, "%s: %d of %d probes of T after the handler's own call were wrong\n",
				phases[ph].name, (int)tbad, (int)tprobes);
		failed |= nsig == 0 || bad || hbad || cb || tbad;
		pthread_sigmask(SIG_UNBLOCK, &one, NULL);
	}
	printf("sigreentry %s\n", failed ? "FAILED" : "ok");
	return failed;
}
