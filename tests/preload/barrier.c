/* barrier [SEED] — a garbage collector's write barrier built on mprotect.
 *
 * A heap of NPG pages is filled and made read-only.  Four mutator threads
 * write to pseudo-random pages (a set fixed by seed, round and thread); the
 * SIGSEGV handler marks the faulting page dirty and makes it writable with
 * mprotect.  At the end of each round the collector (main thread) checks
 * that the dirty set equals the union of the written sets, that the heap's
 * protection (from /proc/self/maps) is RW exactly on those pages, and that
 * every written value is there; then it re-protects the heap read-only for
 * the next cycle, alternating strategies (one big call, per-run calls, and
 * per-page calls that are partly redundant).  Meanwhile two spinner threads
 * hammer mprotect on a separate region.  Exit 1 on any mismatch. */
#include "common.h"

#include <pthread.h>
#include <stdatomic.h>

#define NPG 4096
#define NMUT 4
#define NSPIN 2
#define ROUNDS 16
#define PER 300 /* writes per mutator per round */
#define SPG 64  /* spinner region pages */

static char *heap, *spin;
static _Atomic uint64_t dirty[NPG / 64];
static atomic_int hfail, stop;
static pthread_barrier_t bar;
static uint64_t seed;

static void on_fault(int sig, siginfo_t *si, void *uc)
{
	(void)uc;
	uintptr_t a = (uintptr_t)si->si_addr;
	if (a < (uintptr_t)heap || a >= (uintptr_t)heap + NPG * PG) {
		signal(sig, SIG_DFL); /* a real crash: let it happen */
		return;
	}
	size_t pg = (a - (uintptr_t)heap) / PG;
	/* The same page faulting over and over means the mprotect below
	 * claimed success without making the page writable. */
	static __thread size_t last_pg = (size_t)-1;
	static __thread unsigned repeats;
	repeats = pg == last_pg ? repeats + 1 : 0;
	last_pg = pg;
	if (repeats > 10000) {
		static const char m[] = "barrier: page stays read-only after mprotect\n";
		wr_all(1, m, sizeof m - 1);
		_exit(1);
	}
	atomic_fetch_or(&dirty[pg / 64], 1ULL << (pg % 64));
	int saved = errno;
	if (mprotect(heap + pg * PG, PG, PROT_READ | PROT_WRITE) != 0) {
		atomic_store(&hfail, 1);
		static const char m[] = "barrier: mprotect in handler failed\n";
		wr_all(2, m, sizeof m - 1);
		_exit(1);
	}
	errno = saved;
}

static uint64_t wval(unsigned r, int t, size_t pg)
{
	return ((uint64_t)r << 40) ^ ((uint64_t)t << 32) ^ pg ^ 0x5555;
}

/* The pages thread t writes in round r. */
static void pages_for(unsigned r, int t, size_t *out)
{
	uint64_t s = seed * 1000003 + r * 17 + (uint64_t)t;
	/* Concentrate half the writes on a hot 1/8 of the heap so threads
	 * collide on pages. */
	for (int i = 0; i < PER; i++)
		out[i] = rnd(&s, 2) ? rnd(&s, NPG / 8) : rnd(&s, NPG);
}

static void *mutator(void *arg)
{
	int t = (int)(intptr_t)arg;
	size_t pg[PER];
	for (unsigned r = 0; r < ROUNDS; r++) {
		pages_for(r, t, pg);
		for (int i = 0; i < PER; i++) {
			volatile uint64_t *slot =
				(volatile uint64_t *)(heap + pg[i] * PG + 64 + 8 * t);
			*slot = wval(r, t, pg[i]);
		}
		pthread_barrier_wait(&bar); /* writes done */
		pthread_barrier_wait(&bar); /* collector done */
	}
	return NULL;
}

/* Redundant and non-redundant protection changes on a region nobody
 * touches otherwise; each spinner owns half of it and ends on a known
 * protection. */
static void *spinner(void *arg)
{
	int s = (int)(intptr_t)arg;
	char *mine = spin + (size_t)s * (SPG / 2) * PG;
	uint64_t rng = seed + 99 + (uint64_t)s;
	long bad = 0;
	while (!atomic_load(&stop)) {
		size_t o = rnd(&rng, SPG / 2), n = 1 + rnd(&rng, SPG / 2 - o);
		int prot = rnd(&rng, 3) ? PROT_READ : PROT_READ | PROT_WRITE;
		int rc;
		switch (rnd(&rng, 3)) {
		case 0: rc = mprotect(mine + o * PG, n * PG, prot); break;
		case 1: rc = (int)syscall(SYS_mprotect, mine + o * PG, n * PG, prot); break;
		default: rc = pkey_mprotect(mine + o * PG, n * PG, prot, -1); break;
		}
		rc |= mprotect(mine + o * PG, n * PG, prot); /* again: redundant */
		bad += rc != 0;
	}
	int fin = s ? PROT_READ : PROT_READ | PROT_WRITE;
	bad += mprotect(mine, (SPG / 2) * PG, fin) != 0;
	return (void *)bad;
}

/* Protection of each heap page from /proc/self/maps: 'w' writable,
 * 'r' read-only, '?' anything else. */
static void heap_prot(char *out)
{
	memset(out, '?', NPG);
	size_t len;
	char *buf = read_file("/proc/self/maps", &len);
	if (!buf)
		return;
	uintptr_t h0 = (uintptr_t)heap, h1 = h0 + NPG * PG;
	for (char *l = buf; l && *l;) {
		unsigned long a, b;
		char pm[8];
		if (sscanf(l, "%lx-%lx %4s", &a, &b, pm) == 3 && a < h1 && b > h0) {
			char c = strncmp(pm, "rw-p", 4) == 0 ? 'w'
				 : strncmp(pm, "r--p", 4) == 0 ? 'r' : '?';
			/* MMFOLD_BARRIER=uffd: a write-protected page of a
			 * read-write VMA is read-only (common.h) */
			for (uintptr_t p = a < h0 ? h0 : a; p < b && p < h1; p += PG)
				out[(p - h0) / PG] = c == 'w' && barrier_uffd() && uffd_wp_bit(p) ? 'r' : c;
		}
		l = strchr(l, '\n');
		if (l)
			l++;
	}
	free(buf);
}

int main(int argc, char **argv)
{
	seed = argc > 1 ? strtoull(argv[1], NULL, 0) : 1;
	watchdog(60);
	heap = mmap(NULL, NPG * PG, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	spin = mmap(NULL, SPG * PG, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (heap == MAP_FAILED || spin == MAP_FAILED) {
		printf("barrier: mmap failed\n");
		return 1;
	}
	for (size_t i = 0; i < NPG; i++)
		memset(heap + i * PG, (int)(i & 0xff), PG);
	if (mprotect(heap, NPG * PG, PROT_READ) != 0) {
		printf("barrier: mprotect failed\n");
		return 1;
	}
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_fault;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGSEGV, &sa, NULL);

	pthread_barrier_init(&bar, NULL, NMUT + 1);
	pthread_t mt[NMUT], st[NSPIN];
	for (int s = 0; s < NSPIN; s++)
		pthread_create(&st[s], NULL, spinner, (void *)(intptr_t)s);
	for (int t = 0; t < NMUT; t++)
		pthread_create(&mt[t], NULL, mutator, (void *)(intptr_t)t);

	static unsigned char want[NPG];
	static char prot[NPG];
	static size_t pg[PER];
	long total = 0, errors = 0;
	for (unsigned r = 0; r < ROUNDS; r++) {
		pthread_barrier_wait(&bar);
		memset(want, 0, sizeof want);
		for (int t = 0; t < NMUT; t++) {
			pages_for(r, t, pg);
			for (int i = 0; i < PER; i++)
				want[pg[i]] = 1;
		}
		heap_prot(prot);
		long n = 0, bad = 0;
		for (size_t i = 0; i < NPG; i++) {
			int d = (atomic_load(&dirty[i / 64]) >> (i % 64)) & 1;
			n += want[i];
			if (d != want[i] || prot[i] != (want[i] ? 'w' : 'r')) {
				if (bad++ < 5)
					printf("round %u page %zu: written %d faulted %d prot %c\n",
					       r, i, want[i], d, prot[i]);
			}
		}
		for (int t = 0; t < NMUT; t++) {
			pages_for(r, t, pg);
			for (int i = 0; i < PER; i++)
				if (*(uint64_t *)(heap + pg[i] * PG + 64 + 8 * t) !=
				    wval(r, t, pg[i]) && bad++ < 5)
					printf("round %u page %zu: lost write of thread %d\n",
					       r, pg[i], t);
		}
		total += n;
		errors += bad;
		printf("round %u: %ld pages written, %s\n", r, n, bad ? "MISMATCH" : "ok");

		/* New collector cycle: make the dirty pages read-only again. */
		int rc = 0;
		if (r % 3 == 0) {
			rc |= mprotect(heap, NPG * PG, PROT_READ);
		} else if (r % 3 == 1) {
			for (size_t i = 0; i < NPG;) {
				size_t j = i;
				while (j < NPG && want[j])
					j++;
				if (j > i)
					rc |= mprotect(heap + i * PG, (j - i) * PG, PROT_READ);
				i = j + 1;
			}
		} else {
			/* page by page, including clean ones (redundant) */
			for (size_t i = 0; i < NPG; i++)
				if (want[i] || i % 7 == 0)
					rc |= mprotect(heap + i * PG, PG, PROT_READ);
		}
		if (rc) {
			printf("round %u: re-protect failed\n", r);
			errors++;
		}
		for (size_t i = 0; i < NPG / 64; i++)
			atomic_store(&dirty[i], 0);
		pthread_barrier_wait(&bar);
	}
	for (int t = 0; t < NMUT; t++)
		pthread_join(mt[t], NULL);
	atomic_store(&stop, 1);
	long sbad = 0;
	for (int s = 0; s < NSPIN; s++) {
		void *rv;
		pthread_join(st[s], &rv);
		sbad += (long)rv;
	}
	struct pstate ps[SPG];
	page_states((uintptr_t)spin, SPG, ps);
	for (int i = 0; i < SPG; i++) {
		const char *exp = i < SPG / 2 ? "rw-p" : "r--p";
		if (strcmp(ps[i].perm, exp) != 0) {
			if (sbad++ < 5)
				printf("spinner page %d: %s, expected %s\n", i, ps[i].perm, exp);
		}
	}
	printf("spinners %s\n", sbad ? "FAILED" : "ok");
	if (errors || sbad || atomic_load(&hfail)) {
		printf("barrier FAILED: %ld mismatches\n", errors + sbad);
		return 1;
	}
	printf("barrier ok: %d rounds, %ld dirty pages\n", ROUNDS, total);
	return 0;
}
