/* bypass SEED THREADS ROUNDS — threads racing on the same pages while calls
 * bypass the shadow map.
 *
 * Run with MMFOLD_LOCK_WAIT=0, every call that finds the map's writer lock
 * taken is forwarded without the map (wlock.c), its range made unknown
 * later; the map must then answer no question from what it knew before.
 *
 * The area is one stripe of SW pages per thread: the first page is the
 * thread's own (only it changes that page), the others are shared.  Each
 * round, THREADS threads each make STEPS mprotect calls (NONE, R or RW):
 * over runs of shared pages (about half of them asking for the protection
 * the thread itself last gave the run: calls the library may be tempted
 * to skip), and over their own page together with shared pages on either
 * side, after which the own page is probed and must show what was asked
 * (a call trimmed to the pages the map says change, on a map a bypassing
 * call made stale, would leave it out).  They also send SIGRTMIN to one
 * another, whose handler flips a run of shared pages (a call re-entering
 * the library while its thread may be inside a writer section).  Then
 * every thread waits until every signal sent was handled, and the main
 * thread sets each page to a protection of its choosing (one call per
 * page, the same as one it may have had), probes it, sets it again the
 * same (a call that may be skipped) and probes it again: a call skipped on
 * what a bypassing call made stale leaves a page allowing more, or less,
 * than it was set to.
 *
 * stdout: one line per round (its digest of every check), the same with
 * and without the library; a mismatch is reported on stderr and makes the
 * exit status 1. */
#include "common.h"

#include <pthread.h>

#include "fault.h"

#define SW 4     /* pages per thread's stripe: its own, then shared */
#define STEPS 400
#define MAXTHR 32

static const int prots[3] = {PROT_NONE, PROT_READ, PROT_READ | PROT_WRITE};
static const char want_probe[3] = {'n', 'r', 'w'};

static char *shared;
static int nthr, npg;
static pthread_barrier_t start_b, end_b;
static unsigned long sent, handled, mismatches;
static pthread_t th[MAXTHR];

struct thr {
	int id;
	uint64_t rng;
	unsigned long checks;
	int last[MAXTHR * SW]; /* the index in prots it last gave each page, or -1 */
};
static struct thr T[MAXTHR];

static __thread uint64_t sig_rng;

static void on_usr1(int sig)
{
	(void)sig;
	int e = errno;
	if (!sig_rng)
		sig_rng = (uint64_t)(uintptr_t)&sig_rng | 1;
	size_t a = rnd(&sig_rng, (uint64_t)nthr) * SW + 1 + rnd(&sig_rng, SW - 1);
	size_t n = 1 + rnd(&sig_rng, SW - a % SW);
	mprotect(shared + a * PG, n * PG, prots[rnd(&sig_rng, 3)]);
	__atomic_add_fetch(&handled, 1, __ATOMIC_SEQ_CST);
	errno = e;
}

static void *racer(void *arg)
{
	struct thr *t = arg;
	for (int i = 0; i < npg; i++)
		t->last[i] = -1;
	pthread_barrier_wait(&start_b);
	size_t own = (size_t)t->id * SW;
	for (int step = 0; step < STEPS; step++) {
		/* shared pages of some stripe */
		size_t a = rnd(&t->rng, (uint64_t)nthr) * SW + 1 + rnd(&t->rng, SW - 1);
		size_t n = 1 + rnd(&t->rng, SW - a % SW);
		int p = (int)rnd(&t->rng, 3);
		if (rnd(&t->rng, 2) && t->last[a] >= 0)
			p = t->last[a]; /* what it has, as far as this thread knows */
		if (mprotect(shared + a * PG, n * PG, prots[p]) == 0)
			for (size_t i = a; i < a + n; i++)
				t->last[i] = p;
		/* its own page, with the shared pages around it now and then
		 * (the previous stripe's last ones, this stripe's) */
		size_t lo = own, hi = own + 1;
		if (own && rnd(&t->rng, 2))
			lo -= 1 + rnd(&t->rng, SW - 1);
		if (rnd(&t->rng, 2))
			hi += 1 + rnd(&t->rng, SW - 1);
		int q = (int)rnd(&t->rng, 3);
		if (mprotect(shared + lo * PG, (hi - lo) * PG, prots[q]) != 0) {
			fprintf(stderr, "thread %d: mprotect of its page failed: %s\n", t->id,
				ename(errno));
			__atomic_add_fetch(&mismatches, 1, __ATOMIC_SEQ_CST);
		}
		int byte;
		char got = fg_probe(shared + own * PG, &byte);
		t->checks++;
		if (got != want_probe[q]) {
			fprintf(stderr, "thread %d step %d: its page set %s allows '%c'\n", t->id, step,
				prot_name(prots[q]), got);
			__atomic_add_fetch(&mismatches, 1, __ATOMIC_SEQ_CST);
		}
		if (rnd(&t->rng, 16) == 0 && nthr > 1) {
			int to = (int)rnd(&t->rng, (uint64_t)nthr);
			__atomic_add_fetch(&sent, 1, __ATOMIC_SEQ_CST);
			if (pthread_kill(th[to], SIGRTMIN) != 0)
				__atomic_sub_fetch(&sent, 1, __ATOMIC_SEQ_CST);
		}
	}
	/* every handler ran: nothing changes the shared pages behind the check */
	while (__atomic_load_n(&handled, __ATOMIC_SEQ_CST) != __atomic_load_n(&sent, __ATOMIC_SEQ_CST))
		sched_yield();
	pthread_barrier_wait(&end_b);
	return NULL;
}

int main(int argc, char **argv)
{
	uint64_t seed = argc > 1 ? strtoull(argv[1], NULL, 10) : 1;
	nthr = argc > 2 ? atoi(argv[2]) : 8;
	int rounds = argc > 3 ? atoi(argv[3]) : 20;
	if (nthr < 1 || nthr > MAXTHR || rounds < 1) {
		fprintf(stderr, "usage: bypass SEED THREADS(1-%d) ROUNDS\n", MAXTHR);
		return 2;
	}
	watchdog(120);
	fg_install();
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_handler = on_usr1;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGRTMIN, &sa, NULL); /* queued: two sent are two handled */
	npg = nthr * SW;
	shared = mmap(NULL, (size_t)npg * PG, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
		      -1, 0);
	if (shared == MAP_FAILED)
		return 2;
	memset(shared, 0x5a, (size_t)npg * PG);
	uint64_t rng = seed * 0x9e3779b97f4a7c15ull + 1;
	for (int i = 0; i < nthr; i++)
		T[i].id = i;
	unsigned long checks = 0;
	for (int r = 0; r < rounds; r++) {
		pthread_barrier_init(&start_b, NULL, (unsigned)nthr + 1);
		pthread_barrier_init(&end_b, NULL, (unsigned)nthr + 1);
		for (int i = 0; i < nthr; i++) {
			T[i].rng = rnd64(&rng);
			pthread_create(&th[i], NULL, racer, &T[i]);
		}
		pthread_barrier_wait(&start_b); /* th[] is complete: the racers may signal */
		pthread_barrier_wait(&end_b);
		for (int i = 0; i < nthr; i++)
			pthread_join(th[i], NULL);
		pthread_barrier_destroy(&start_b);
		pthread_barrier_destroy(&end_b);
		/* the main thread sets each page, then probes them all */
		int set[MAXTHR * SW];
		uint64_t digest = 1469598103934665603ull;
		for (int i = 0; i < npg; i++) {
			set[i] = (int)rnd(&rng, 3);
			if (mprotect(shared + i * PG, PG, prots[set[i]]) != 0) {
				fprintf(stderr, "round %d: mprotect of page %d failed: %s\n", r, i,
					ename(errno));
				mismatches++;
			}
		}
		for (int i = 0; i < npg; i++) {
			int byte;
			char got = fg_probe(shared + i * PG, &byte);
			checks++;
			digest = (digest ^ (uint64_t)got) * 1099511628211ull;
			if (got != want_probe[set[i]]) {
				fprintf(stderr, "round %d: page %d set %s allows '%c'\n", r, i,
					prot_name(prots[set[i]]), got);
				mismatches++;
			}
		}
		/* and sets them again, the same: calls that may be skipped */
		for (int i = 0; i < npg; i++)
			mprotect(shared + i * PG, PG, prots[set[i]]);
		for (int i = 0; i < npg; i++) {
			int byte;
			char got = fg_probe(shared + i * PG, &byte);
			checks++;
			if (got != want_probe[set[i]]) {
				fprintf(stderr, "round %d: page %d set %s again allows '%c'\n", r, i,
					prot_name(prots[set[i]]), got);
				mismatches++;
			}
		}
		printf("round %d: %016llx\n", r, (unsigned long long)digest);
	}
	for (int i = 0; i < nthr; i++)
		checks += T[i].checks;
	fprintf(stderr, "bypass: seed %llu, %d threads, %d rounds: %lu checks, %lu mismatches, %lu signals\n",
		(unsigned long long)seed, nthr, rounds, checks, mismatches, sent);
	return mismatches ? 1 : 0;
}
