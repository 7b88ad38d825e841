/* The lazy-mode pending table (src/lazy.c) against a per-page model. */
#include <check.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "lazy.h"
#include "suites.h"

#define PAGES 512
#define PG 4096ull
#define BASE 0x10000000ull

static int model[PAGES]; /* -1 none, else want */

static void check_against(struct mmf_lazy *z)
{
	/* sorted, non-overlapping, non-empty, and page by page equal */
	for (uint32_t i = 0; i < z->n; i++) {
		ck_assert(z->p[i].s < z->p[i].e);
		if (i)
			ck_assert(z->p[i - 1].e <= z->p[i].s);
	}
	for (int pg = 0; pg < PAGES; pg++) {
		struct mmf_pend f;
		int r = mmf_lazy_find(z, BASE + pg * PG, &f);
		ck_assert_int_eq(r, model[pg] >= 0);
		if (r)
			ck_assert_int_eq(f.want, model[pg]);
		ck_assert_int_eq(mmf_lazy_overlaps(z, BASE + pg * PG, BASE + (pg + 1) * PG),
				 model[pg] >= 0);
	}
	if (z->n) {
		ck_assert(z->lo == z->p[0].s && z->hi == z->p[z->n - 1].e);
	}
}

START_TEST(random_ops)
{
	struct mmf_lazy z;
	ck_assert_int_eq(mmf_lazy_init(&z, 4096), 0);
	srand(7);
	for (int pg = 0; pg < PAGES; pg++)
		model[pg] = -1;
	for (int step = 0; step < 20000; step++) {
		int a = rand() % PAGES, l = 1 + rand() % (rand() % 4 ? 8 : 64);
		if (a + l > PAGES)
			l = PAGES - a;
		int want = rand() % 3 ? rand() % 8 : -1;
		ck_assert_int_eq(mmf_lazy_set(&z, BASE + a * PG, BASE + (a + l) * PG, want), 0);
		for (int pg = a; pg < a + l; pg++)
			model[pg] = want;
		if (step % 97 == 0)
			check_against(&z);
		/* collect returns exactly the clipped overlapping pieces */
		if (step % 13 == 0) {
			struct mmf_pend out[PAGES];
			int s = rand() % PAGES, e = s + 1 + rand() % 40;
			if (e > PAGES)
				e = PAGES;
			uint32_t c = mmf_lazy_collect(&z, BASE + s * PG, BASE + e * PG, out, PAGES);
			int covered = 0;
			for (uint32_t k = 0; k < c; k++) {
				ck_assert(out[k].s >= BASE + s * PG && out[k].e <= BASE + e * PG);
				for (uint64_t p = out[k].s; p < out[k].e; p += PG) {
					ck_assert_int_eq(model[(p - BASE) / PG], out[k].want);
					covered++;
				}
			}
			int want_cov = 0;
			for (int pg = s; pg < e; pg++)
				want_cov += model[pg] >= 0;
			ck_assert_int_eq(covered, want_cov);
		}
	}
	check_against(&z);
}
END_TEST

/* A full table refuses and changes nothing. */
START_TEST(full)
{
	struct mmf_lazy z;
	ck_assert_int_eq(mmf_lazy_init(&z, 4), 0);
	for (int i = 0; i < 4; i++)
		ck_assert_int_eq(mmf_lazy_set(&z, BASE + 2 * i * PG, BASE + (2 * i + 1) * PG, 3), 0);
	ck_assert_int_eq(mmf_lazy_set(&z, BASE + 20 * PG, BASE + 21 * PG, 3), -1);
	/* splitting the first range in three needs two more slots */
	ck_assert_int_eq(mmf_lazy_set(&z, BASE, BASE + PG, -1), 0);
	ck_assert_int_eq(z.n, 3);
	ck_assert_int_eq(mmf_lazy_set(&z, BASE, BASE + 3 * PG, 1), 0); /* replaces one */
	ck_assert_int_eq(z.n, 3);
	ck_assert_uint_eq(z.lo, BASE);
}
END_TEST

/* Readers (the fault handler, on any thread) never see a torn range: while
 * a writer keeps splitting and joining ranges, every answer is one of the
 * states the writer published. */
static struct mmf_lazy shared;
static int stop_readers;
static long reads_seen;
static long reads_live; /* answers so far, read by the writer */

static void *reader(void *arg)
{
	long bad = 0, seen = 0;
	(void)arg;
	while (!__atomic_load_n(&stop_readers, __ATOMIC_RELAXED)) {
		for (int pg = 0; pg < 16; pg++) {
			struct mmf_pend f;
			int r = mmf_lazy_find(&shared, BASE + pg * PG, &f);
			if (r == 1) {
				seen++;
				__atomic_fetch_add(&reads_live, 1, __ATOMIC_RELAXED);
				/* state A: [0,16) want 3; state B: [0,8) want 5 and
				 * [8,16) want 6; between them [0,8) 5 and [8,16) 3 */
				int okA = f.s == BASE && f.e == BASE + 16 * PG && f.want == 3;
				int okB1 = f.s == BASE && f.e == BASE + 8 * PG && f.want == 5 && pg < 8;
				int okB2 = f.s == BASE + 8 * PG && f.e == BASE + 16 * PG && f.want == 6 &&
					   pg >= 8;
				int okM = f.s == BASE + 8 * PG && f.e == BASE + 16 * PG && f.want == 3 &&
					  pg >= 8;
				if (!okA && !okB1 && !okB2 && !okM)
					bad++;
			} else if (r == 0) {
				bad++; /* the range is never absent */
			}
		}
	}
	__atomic_fetch_add(&reads_seen, seen, __ATOMIC_RELAXED);
	return (void *)bad;
}

START_TEST(concurrent_readers)
{
	ck_assert_int_eq(mmf_lazy_init(&shared, 64), 0);
	ck_assert_int_eq(mmf_lazy_set(&shared, BASE, BASE + 16 * PG, 3), 0);
	pthread_t t[2];
	__atomic_store_n(&stop_readers, 0, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, reader, NULL);
	/* 200,000 changes at least, then on until the readers have 1,000
	 * answers (on a loaded machine they may not have run yet); 30 s
	 * bound a machine where they never do (the test fails on the count). */
	struct timespec t0, t1;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (long i = 0;; i++) {
		if (i >= 200000 && i % 1000 == 0) {
			clock_gettime(CLOCK_MONOTONIC, &t1);
			if (__atomic_load_n(&reads_live, __ATOMIC_RELAXED) >= 1000 ||
			    t1.tv_sec - t0.tv_sec > 30)
				break;
		}
		if (i % 1000 == 0)
			sched_yield(); /* let the readers in on a busy machine */
		if (i & 1) {
			mmf_lazy_set(&shared, BASE, BASE + 16 * PG, 3);
		} else {
			mmf_lazy_set(&shared, BASE, BASE + 8 * PG, 5);
			mmf_lazy_set(&shared, BASE + 8 * PG, BASE + 16 * PG, 6);
		}
	}
	__atomic_store_n(&stop_readers, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 2; i++) {
		void *rv;
		pthread_join(t[i], &rv);
		ck_assert_msg((long)rv == 0, "reader saw %ld torn or missing ranges", (long)rv);
	}
	ck_assert_msg(reads_seen > 0, "the readers never got an answer");
}
END_TEST

/* The engine's protocol (lazy_fault, lazy_apply, lazy_run): appliers and
 * deferrers change the table one at a time under a lock (the map's writer
 * lock there), fault handlers look without the lock first and then decide
 * under it.  Several threads of each kind, more than the cores: what a
 * handler finds under the lock is exactly the model the appliers keep, and
 * a lock-free look never returns a range that was never published (a
 * range is [s,e) of whole pages around the page asked, with a want some
 * applier wrote).  Run under TSan too (make tsan). */
static pthread_mutex_t wlock = PTHREAD_MUTEX_INITIALIZER;
static struct mmf_lazy proto;
static int pmodel[64]; /* under wlock: -1 nothing waits, else want */
static int stop_proto;

static void *applier(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	for (int i = 0; i < 20000; i++) {
		unsigned s = (unsigned)rand_r(&seed) % 64, n = 1 + (unsigned)rand_r(&seed) % 8;
		unsigned e = s + n > 64 ? 64 : s + n, op = (unsigned)rand_r(&seed) % 3;
		pthread_mutex_lock(&wlock);
		if (op == 0) { /* defer */
			int want = 1 + (int)((unsigned)rand_r(&seed) % 3);
			if (mmf_lazy_set(&proto, BASE + s * PG, BASE + e * PG, want) == 0)
				for (unsigned p = s; p < e; p++)
					pmodel[p] = want;
		} else { /* apply (collect, then remove) or cancel */
			struct mmf_pend b[8];
			uint32_t c;
			while ((c = mmf_lazy_collect(&proto, BASE + s * PG, BASE + e * PG, b, 8)))
				for (uint32_t k = 0; k < c; k++)
					mmf_lazy_set(&proto, b[k].s, b[k].e, -1);
			for (unsigned p = s; p < e; p++)
				pmodel[p] = -1;
		}
		pthread_mutex_unlock(&wlock);
		if (i % 500 == 0)
			sched_yield();
	}
	return NULL;
}

static void *handler(void *arg)
{
	unsigned seed = (unsigned)(uintptr_t)arg;
	long bad = 0;
	while (!__atomic_load_n(&stop_proto, __ATOMIC_RELAXED)) {
		unsigned pg = (unsigned)rand_r(&seed) % 64;
		uint64_t a = BASE + pg * PG;
		struct mmf_pend f;
		int r = mmf_lazy_find(&proto, a, &f);
		if (r == 1 && (f.s > a || f.e <= a || f.s % PG || f.e % PG || f.s < BASE ||
			       f.e > BASE + 64 * PG || f.want < 1 || f.want > 3))
			bad++;
		pthread_mutex_lock(&wlock);
		struct mmf_pend *q = mmf_lazy_at(&proto, a);
		if ((q ? q->want : -1) != pmodel[pg])
			bad++;
		pthread_mutex_unlock(&wlock);
	}
	return (void *)bad;
}

START_TEST(concurrent_appliers)
{
	ck_assert_int_eq(mmf_lazy_init(&proto, 256), 0);
	for (int p = 0; p < 64; p++)
		pmodel[p] = -1;
	__atomic_store_n(&stop_proto, 0, __ATOMIC_RELAXED);
	pthread_t ap[3], hd[3];
	for (int i = 0; i < 3; i++) {
		pthread_create(&ap[i], NULL, applier, (void *)(uintptr_t)(i + 1));
		pthread_create(&hd[i], NULL, handler, (void *)(uintptr_t)(i + 11));
	}
	for (int i = 0; i < 3; i++)
		pthread_join(ap[i], NULL);
	__atomic_store_n(&stop_proto, 1, __ATOMIC_RELAXED);
	for (int i = 0; i < 3; i++) {
		void *rv;
		pthread_join(hd[i], &rv);
		ck_assert_msg((long)rv == 0, "a handler saw %ld states no applier made", (long)rv);
	}
}
END_TEST

Suite *lazy_suite(void)
{
	Suite *s = suite_create("lazy");
	TCase *tc = tcase_create("table");
	tcase_add_test(tc, random_ops);
	tcase_add_test(tc, full);
	tcase_add_test(tc, concurrent_readers);
	tcase_add_test(tc, concurrent_appliers);
	suite_add_tcase(s, tc);
	return s;
}
