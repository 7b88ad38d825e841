/* flip: runs of mprotect calls that change one page each time, the calls
 * mmfold's forward path makes "flipping" (README, "Flipping records"), each
 * followed by a probe of what the page allows.
 *
 *   flip SEED [ROUNDS (150)] [THREADS (4)]
 *   flip race [CYCLES (20000)]
 *   flip redundant
 *   flip failing
 *   flip pair [CYCLES (20000)] [THREADS (8)] [PAGES (2)] [shift]
 *
 * One mapping: THREADS * 8 pages, thread i owning pages 8i to 8i+7, then
 * 4 pages all threads change, each followed by a PROT_NONE page (so that
 * its record never merges: its word changes in place).  Each round, each
 * thread with its own random stream:
 *   - a run of 1 to 24 calls on one of its pages alternating two
 *     protections (RW and R, RW and none, R and none), one call in six
 *     made twice (the second changes nothing);
 *   - one round in eight, an mprotect of all its 8 pages (a call across
 *     records); one in ten, PROT_READ | PROT_EXEC on the page (the general
 *     course); one in twelve, the page unmapped and mapped again with
 *     MAP_FIXED;
 *   - 0 to 3 runs of 1 to 16 calls toggling one of the shared pages
 *     between RW and R, one in five made twice, one in twelve followed by
 *     PROT_READ | PROT_EXEC (the general course); unchecked (other threads
 *     change them meanwhile).
 * After each call on its own page the thread probes it (fault.h): a page
 * that allows other than the last call asked is probed again, and counted
 * "spurious" when the second probe agrees (a fault the program should not
 * have seen), "wrong" when it does not.  At the end of a round, after a
 * barrier, one thread sets each shared page RW and R, in an order of its
 * stream, and probes it after each: after the other threads' runs on it,
 * a call mmfold skips wrongly shows there.  The output (calls and probes
 * per thread, and what went wrong) is the same with and without mmfold;
 * the exit status is 1 when anything went wrong.
 *
 * "flip race", "flip failing" and "flip pair": see race(), failing() and
 * pair() below; "flip redundant": one thread toggles a page 40 times, then
 * asks 1000 times for the protection it has (run.sh counts the skips). */
#include "common.h"

#include <pthread.h>

#define OWN 8
#define SHARED 4

static char *base;
static int nthreads, nrounds;
static uint64_t seed;
static pthread_barrier_t bar;

struct th {
	int id;
	uint64_t rng;
	long calls, probes, wrong, spurious;
	char want[OWN];
	struct obuf out;
	pthread_t t;
};

static char allows(int prot)
{
	return !(prot & PROT_READ) ? 'n' : (prot & PROT_WRITE) ? 'w' : 'r';
}

static void call(struct th *x, char *p, size_t len, int prot)
{
	x->calls++;
	if (mprotect(p, len, prot) != 0) {
		ob_printf(&x->out, "mprotect %zu pages to %s: %s\n", len / PG, prot_name(prot),
			  ename(errno));
		x->wrong++;
	}
}

static void check(struct th *x, char *p, char want, const char *what)
{
	int b;
	x->probes++;
	char got = fg_probe(p, &b);
	if (got == want)
		return;
	char again = fg_probe(p, &b);
	if (again == want) {
		x->spurious++;
		ob_printf(&x->out, "%s: allowed %c, then %c, after asking %c\n", what, got, again,
			  want);
	} else {
		x->wrong++;
		ob_printf(&x->out, "%s: allows %c after asking %c\n", what, again, want);
	}
}

static void own(struct th *x, int i, int prot, const char *what)
{
	char *p = base + ((size_t)x->id * OWN + (size_t)i) * PG;
	call(x, p, PG, prot);
	x->want[i] = allows(prot);
	check(x, p, x->want[i], what);
}

static void *run(void *arg)
{
	struct th *x = arg;
	static const int pairs[3][2] = {{PROT_READ | PROT_WRITE, PROT_READ},
					 {PROT_READ | PROT_WRITE, PROT_NONE},
					 {PROT_READ, PROT_NONE}};
	char *mine = base + (size_t)x->id * OWN * PG;
	char *shared = base + (size_t)nthreads * OWN * PG;
	for (int round = 0; round < nrounds; round++) {
		int i = (int)rnd(&x->rng, OWN);
		const int *pr = pairs[rnd(&x->rng, 3)];
		int n = 1 + (int)rnd(&x->rng, 24);
		for (int k = 0; k < n; k++) {
			own(x, i, pr[k & 1], "run");
			if (rnd(&x->rng, 6) == 0)
				own(x, i, pr[k & 1], "repeat");
		}
		if (rnd(&x->rng, 8) == 0) {
			int prot = rnd(&x->rng, 2) ? PROT_READ | PROT_WRITE : PROT_READ;
			call(x, mine, OWN * PG, prot);
			for (int j = 0; j < OWN; j++) {
				x->want[j] = allows(prot);
				check(x, mine + (size_t)j * PG, x->want[j], "across");
			}
		}
		if (rnd(&x->rng, 10) == 0)
			own(x, i, PROT_READ | PROT_EXEC, "exec");
		if (rnd(&x->rng, 12) == 0) {
			char *p = mine + (size_t)i * PG;
			x->calls += 2;
			if (munmap(p, PG) != 0 ||
			    mmap(p, PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
				 -1, 0) != p) {
				ob_printf(&x->out, "munmap and mmap: %s\n", ename(errno));
				x->wrong++;
			}
			x->want[i] = 'w';
			check(x, p, 'w', "mapped again");
		}
		for (int runs = (int)rnd(&x->rng, 4); runs > 0; runs--) {
			char *sp = shared + rnd(&x->rng, SHARED) * 2 * PG;
			int first = (int)rnd(&x->rng, 2);
			for (int k = 1 + (int)rnd(&x->rng, 16); k > 0; k--) {
				int prot = (k + first) & 1 ? PROT_READ : PROT_READ | PROT_WRITE;
				call(x, sp, PG, prot);
				if (rnd(&x->rng, 5) == 0)
					call(x, sp, PG, prot);
				if (rnd(&x->rng, 12) == 0)
					call(x, sp, PG, PROT_READ | PROT_EXEC);
			}
		}
		pthread_barrier_wait(&bar);
		/* RW and R, in an order of the stream: the first that a stale
		 * record claims already is skipped wrongly and shows */
		if (round % nthreads == x->id)
			for (int j = 0; j < SHARED; j++) {
				int rw = (int)rnd(&x->rng, 2);
				char *p = shared + (size_t)j * 2 * PG;
				for (int k = 0; k < 2; k++) {
					int prot = (k ^ rw) ? PROT_READ | PROT_WRITE : PROT_READ;
					call(x, p, PG, prot);
					check(x, p, allows(prot), "shared");
				}
			}
		pthread_barrier_wait(&bar);
	}
	return NULL;
}

static int redundant(void)
{
	char *p = mmap(NULL, 3 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	char *q = p + PG; /* its own record: PROT_NONE pages around it */
	int wrong = 0, b;
	for (int k = 0; k < 40; k++) {
		int prot = k & 1 ? PROT_READ : PROT_READ | PROT_WRITE;
		if (mprotect(q, PG, prot) != 0 || fg_probe(q, &b) != allows(prot))
			wrong++;
	}
	for (int k = 0; k < 1000; k++)
		if (mprotect(q, PG, PROT_READ) != 0)
			wrong++;
	if (fg_probe(q, &b) != 'r')
		wrong++;
	printf("redundant: %d wrong\n", wrong);
	return wrong != 0;
}

/* failing: a page of a file mapped read-only and shared, toggled between
 * PROT_READ and PROT_NONE until flipping (then the hot flip, mmfold's
 * shortest course, takes the calls), then asked for PROT_READ |
 * PROT_WRITE, which the kernel refuses (EACCES): the error, the page's
 * protection after it (unchanged), and the same again, the page mapped
 * anew, 20 times.  Each call's result and each probe are printed: the output is
 * the same with and without mmfold. */
static int failing(void)
{
	char path[] = "/tmp/mmfold-flip-XXXXXX";
	int fd = mkstemp(path);
	if (fd < 0 || ftruncate(fd, PG) != 0)
		return 2;
	/* the file opened again, read-only */
	int ro = open(path, O_RDONLY);
	unlink(path);
	close(fd);
	if (ro < 0)
		return 2;
	/* its own VMA, PROT_NONE pages around it */
	char *p = mmap(NULL, 3 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		return 2;
	char *q = p + PG;
	int wrong = 0, b;
	for (int round = 0; round < 20; round++) {
		/* mapped again each round: a failed call leaves its range
		 * unknown to mmfold, which a new mapping makes known */
		if (mmap(q, PG, PROT_READ, MAP_SHARED | MAP_FIXED, ro, 0) == MAP_FAILED)
			return 2;
		int n = 10 + round % 7, last = PROT_READ;
		for (int k = 0; k < n; k++) {
			last = k & 1 ? PROT_READ : PROT_NONE;
			if (mprotect(q, PG, last) != 0 || fg_probe(q, &b) != allows(last))
				wrong++;
		}
		errno = 0;
		int r = mprotect(q, PG, PROT_READ | PROT_WRITE);
		char got = fg_probe(q, &b);
		printf("round %d: %d toggles, RW: %d %s, then %c\n", round, n, r, ename(errno), got);
		if (r != -1 || errno != EACCES || got != allows(last))
			wrong++;
	}
	close(ro);
	printf("failing: %d wrong\n", wrong);
	return wrong != 0;
}

/* race: two threads meet on one page each cycle.  A makes it flipping
 * (10 changes in a row), then both start at once: A changes it once more
 * while B asks twice for one protection (the second call, a repeat, ends
 * the flipping: the protection recorded again, while A's call may be in
 * the kernel).  Then B asks for RW and R, in an order of its stream, and
 * probes after each: a record that says what the kernel no longer does
 * lets the first be skipped wrongly. */
static volatile int race_arrived[2];
static char *race_page;
static long race_cycles, race_wrong;

static void race_meet(int self, int n)
{
	__atomic_store_n(&race_arrived[self], n, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&race_arrived[!self], __ATOMIC_SEQ_CST) < n)
		sched_yield();
}

static void *race_a(void *arg)
{
	(void)arg;
	uint64_t rng = 11;
	for (long c = 0; c < race_cycles; c++) {
		for (int k = 0; k < 10; k++)
			mprotect(race_page, PG, k & 1 ? PROT_READ : PROT_READ | PROT_WRITE);
		race_meet(0, (int)(3 * c + 1));
		/* a wait of 0 to about two calls' length: A's call meets either
		 * of B's */
		for (volatile unsigned w = (unsigned)rnd(&rng, 4000); w; w--)
			;
		mprotect(race_page, PG, PROT_READ | PROT_WRITE);
		race_meet(0, (int)(3 * c + 2));
		race_meet(0, (int)(3 * c + 3)); /* B has checked */
	}
	return NULL;
}

static int race(long cycles)
{
	race_page = mmap(NULL, 3 * PG, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (race_page == MAP_FAILED)
		return 2;
	race_page += PG;
	race_cycles = cycles;
	uint64_t rng = 7;
	pthread_t t;
	pthread_create(&t, NULL, race_a, NULL);
	for (long c = 0; c < cycles; c++) {
		race_meet(1, (int)(3 * c + 1));
		mprotect(race_page, PG, PROT_READ);
		mprotect(race_page, PG, PROT_READ);
		race_meet(1, (int)(3 * c + 2));
		int rw = (int)rnd(&rng, 2), b;
		for (int k = 0; k < 2; k++) {
			int prot = (k ^ rw) ? PROT_READ | PROT_WRITE : PROT_READ;
			if (mprotect(race_page, PG, prot) != 0 || fg_probe(race_page, &b) != allows(prot))
				race_wrong++;
		}
		race_meet(1, (int)(3 * c + 3));
	}
	pthread_join(t, NULL);
	printf("race: %ld cycles, %ld wrong\n", cycles, race_wrong);
	return race_wrong != 0;
}

/* pair: each thread works on PAGES pages of its own in turn (2: A and B;
 * each between PROT_NONE pages: a record of its own), CYCLES calls: two
 * in three change the page (RW <-> R), one in three asks for what it has
 * (a no-op).  mmfold's hint keeps the record found last and the one found
 * before: with two pages each call finds the current one holding the
 * other page and is answered from the one before (skipped, or made
 * current and forwarded); with three, neither holds it, and the record is
 * looked up in the map and learned before it is answered.  With
 * "shift", one more thread splits a page off a mapping placed below the
 * workers' pages and merges it back, again and again, until the workers
 * are done: each time the workers' records move by two slots in the
 * map's block, under the workers' lookups (a lookup that trusted a slot
 * without the map's sequence around its read would answer from another
 * record's word).
 * Meanwhile another thread sends the workers SIGUSR1, whose handler
 * toggles the worker's last page H and asks for the same again: each of
 * its calls learns H's record, from inside the worker's calls and
 * between them (the hint's slots written under the worker's reads).
 * After each call the worker probes A or B and H, SIGUSR1 blocked (the
 * probe's jump buffer is the thread's): a page that allows other than
 * the last call on it asked counts as in flip's runs.  The output (calls,
 * probes, whether handlers ran) is the same with and without mmfold. */
#define PAIR_MAX 4 /* pages a worker works on, at most */
struct pw {
	struct th th;        /* the counts and check()'s output */
	volatile int hprot;  /* what the handler asked last for H */
	volatile long hruns, hwrong;
};
static __thread struct pw *pair_self;
static volatile int pair_done, pair_finished;
static long pair_cycles;
static int pair_np; /* PAGES: each worker's stride is none, P0, ..., none, H */
/* shift: the shifter's mapping, SHIFT_PAGES RW pages and a PROT_NONE
 * one, at the start of base; the workers' pages follow */
#define SHIFT_PAGES 16
static size_t pair_skip;

/* page k of worker x (k == pair_np: H) */
static char *pair_page(const struct pw *x, int k)
{
	return base + pair_skip +
	       ((size_t)x->th.id * (size_t)(2 * pair_np + 2) + (size_t)(1 + 2 * k)) * PG;
}

/* shift's thread: the middle page of its mapping to R and back to RW
 * (split off, merged back) until the workers have made their calls; its
 * count of calls varies from run to run and is not printed */
static void *pair_shift(void *arg)
{
	int n = *(const int *)arg;
	char *p = base + SHIFT_PAGES / 2 * PG;
	while (__atomic_load_n(&pair_finished, __ATOMIC_SEQ_CST) < n)
		if (mprotect(p, PG, PROT_READ) != 0 || mprotect(p, PG, PROT_READ | PROT_WRITE) != 0)
			abort();
	return NULL;
}

static void pair_handler(int sig)
{
	(void)sig;
	struct pw *x = pair_self;
	if (!x)
		return;
	int e = errno;
	int prot = x->hprot == PROT_READ ? PROT_READ | PROT_WRITE : PROT_READ;
	char *h = pair_page(x, pair_np);
	if (mprotect(h, PG, prot) != 0 || mprotect(h, PG, prot) != 0)
		x->hwrong++;
	x->hprot = prot;
	x->hruns++;
	errno = e;
}

static void *pair_run(void *arg)
{
	struct pw *w = arg;
	struct th *x = &w->th;
	pair_self = w;
	sigset_t usr1;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	char want[PAIR_MAX] = {'w', 'w', 'w', 'w'};
	for (long c = 0; c < pair_cycles; c++) {
		int k = (int)(c % pair_np);
		char *p = pair_page(w, k);
		int rw = want[k] == 'w';
		if (rnd(&x->rng, 3) != 0)
			rw = !rw;
		int prot = rw ? PROT_READ | PROT_WRITE : PROT_READ;
		call(x, p, PG, prot);
		want[k] = allows(prot);
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
		check(x, p, want[k], (const char *[]){"A", "B", "C", "D"}[k]);
		check(x, pair_page(w, pair_np), allows(w->hprot), "H");
		pthread_sigmask(SIG_UNBLOCK, &usr1, NULL);
	}
	/* alive until the sender has stopped: it signals no thread that ended */
	__atomic_add_fetch(&pair_finished, 1, __ATOMIC_SEQ_CST);
	while (!__atomic_load_n(&pair_done, __ATOMIC_SEQ_CST))
		sched_yield();
	return NULL;
}

struct pair_send {
	struct pw *w;
	int n;
};

static void *pair_send(void *arg)
{
	struct pair_send *ps = arg;
	while (__atomic_load_n(&pair_finished, __ATOMIC_SEQ_CST) < ps->n)
		for (int i = 0; i < ps->n; i++) {
			pthread_kill(ps->w[i].th.t, SIGUSR1);
			for (volatile int spin = 2000; spin; spin--)
				;
		}
	__atomic_store_n(&pair_done, 1, __ATOMIC_SEQ_CST);
	return NULL;
}

static int pair(long cycles, int n, int np, int shift)
{
	if (cycles < 1 || n < 1 || n > 64 || np < 1 || np > PAIR_MAX)
		return 2;
	pair_cycles = cycles;
	pair_np = np;
	pair_skip = shift ? (SHIFT_PAGES + 1) * PG : 0;
	size_t len = pair_skip + ((size_t)n * (size_t)(2 * np + 2) + 1) * PG;
	base = mmap(NULL, len, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 2;
	if (shift && mprotect(base, SHIFT_PAGES * PG, PROT_READ | PROT_WRITE) != 0)
		return 2;
	struct pw *w = calloc((size_t)n, sizeof *w);
	for (int i = 0; i < n; i++) {
		w[i].th.id = i;
		w[i].th.rng = 77 + (uint64_t)i;
		w[i].hprot = PROT_READ | PROT_WRITE;
		for (int k = 0; k <= np; k++)
			if (mprotect(pair_page(&w[i], k), PG, PROT_READ | PROT_WRITE) != 0)
				return 2;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = pair_handler;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	for (int i = 0; i < n; i++)
		pthread_create(&w[i].th.t, NULL, pair_run, &w[i]);
	/* the sender: every worker in turn, until all have made their calls */
	pthread_t sender, shifter;
	struct pair_send ps = {w, n};
	pthread_create(&sender, NULL, pair_send, &ps);
	if (shift)
		pthread_create(&shifter, NULL, pair_shift, &n);
	long wrong = 0, spurious = 0, hruns = 0;
	pthread_join(sender, NULL);
	if (shift)
		pthread_join(shifter, NULL);
	for (int i = 0; i < n; i++)
		pthread_join(w[i].th.t, NULL);
	for (int i = 0; i < n; i++) {
		struct th *x = &w[i].th;
		printf("thread %d: %ld calls, %ld probes\n", i, x->calls, x->probes);
		fflush(stdout);
		ob_flush(&x->out, 1, "  ");
		wrong += x->wrong + w[i].hwrong;
		spurious += x->spurious;
		hruns += w[i].hruns;
	}
	printf("pair: handlers ran: %s; %ld wrong, %ld spurious\n", hruns ? "yes" : "no", wrong,
	       spurious);
	return wrong || spurious || !hruns;
}

int main(int argc, char **argv)
{
	fg_install();
	if (argc > 1 && strcmp(argv[1], "redundant") == 0)
		return redundant();
	if (argc > 1 && strcmp(argv[1], "failing") == 0)
		return failing();
	if (argc > 1 && strcmp(argv[1], "pair") == 0) {
		watchdog(120);
		return pair(argc > 2 ? atol(argv[2]) : 20000, argc > 3 ? atoi(argv[3]) : 8,
			    argc > 4 ? atoi(argv[4]) : 2, argc > 5 && !strcmp(argv[5], "shift"));
	}
	if (argc > 1 && strcmp(argv[1], "race") == 0) {
		watchdog(120);
		return race(argc > 2 ? atol(argv[2]) : 20000);
	}
	seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	nrounds = argc > 2 ? atoi(argv[2]) : 150;
	nthreads = argc > 3 ? atoi(argv[3]) : 4;
	if (nthreads < 1 || nthreads > 64 || nrounds < 1)
		return 2;
	watchdog(120);
	size_t len = ((size_t)nthreads * OWN + 2 * SHARED) * PG;
	base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (base == MAP_FAILED)
		return 2;
	memset(base, 1, len);
	/* each shared page between PROT_NONE pages: its record never merges,
	 * so the writers change its word in place */
	for (int j = 0; j < SHARED; j++)
		if (mprotect(base + ((size_t)nthreads * OWN + 2 * (size_t)j + 1) * PG, PG, PROT_NONE))
			return 2;
	pthread_barrier_init(&bar, NULL, (unsigned)nthreads);
	struct th *x = calloc((size_t)nthreads, sizeof *x);
	for (int i = 0; i < nthreads; i++) {
		x[i].id = i;
		x[i].rng = seed * 1000003u + (uint64_t)i;
		memset(x[i].want, 'w', OWN);
		pthread_create(&x[i].t, NULL, run, &x[i]);
	}
	long wrong = 0, spurious = 0;
	for (int i = 0; i < nthreads; i++) {
		pthread_join(x[i].t, NULL);
		printf("thread %d: %ld calls, %ld probes\n", i, x[i].calls, x[i].probes);
		fflush(stdout);
		ob_flush(&x[i].out, 1, "  ");
		wrong += x[i].wrong;
		spurious += x[i].spurious;
	}
	printf("seed %llu: %ld wrong, %ld spurious\n", (unsigned long long)seed, wrong, spurious);
	return wrong || spurious;
}
